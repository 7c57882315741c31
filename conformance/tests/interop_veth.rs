//! `metaroce interop` over a real link: two `metaroce-ref serve --iface`
//! agents, each in its own network namespace, their data planes joined by
//! a veth pair (frames only, no IP address), their agents reached over a
//! second veth pair (192.168.232.0/30). Every cell must PASS, Base and MP.
//!
//! Network rule: traffic only on the two veth pairs between the namespaces
//! this test creates (`mr-iop-<pid>-{a,b}`) and their loopbacks; a guard
//! kills the agents and deletes the namespaces on every path.
//!
//! Needs root, `ip netns` and the `metaroce-ref` binary (built by `cargo
//! test --workspace`); otherwise prints `SKIP: ...` and passes, unless
//! `CI=true`, where it fails.
#![cfg(target_os = "linux")]

#[path = "common/twohosts.rs"]
mod twohosts;

use std::time::Duration;
use twohosts::TwoHosts;

const WHAT: &str = "interop over veth";

/// Runs `metaroce interop` between the two agents with `extra` arguments;
/// returns its exit code, JSON report and output. Bounded at 300 s.
fn interop(bed: &TwoHosts, extra: &[&str], tag: &str) -> (i32, serde_json::Value, String) {
    let json = bed.dir.join(format!("{tag}.json"));
    let (a, b) = (bed.agent_addr(1), bed.agent_addr(2));
    let mut args = vec!["interop", "--a", &a, "--b", &b];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--json", json.to_str().unwrap()]);
    let out = bed.metaroce(&args, tag, Duration::from_secs(300));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap_or(-1), report, text)
}

#[test]
fn two_reference_agents_pass_every_cell_over_veth() {
    let id = format!("mr-iop-{}", std::process::id());
    let Some(mut bed) = TwoHosts::new(
        WHAT,
        &id,
        ["a", "b"],
        "192.168.232",
        ["02:32:00:00:00:01", "02:32:00:00:00:02"],
    ) else {
        return;
    };
    bed.start_agent(1, "10.32.0.1");
    bed.start_agent(2, "10.32.0.2");
    for (tag, extra) in [("base", &[][..]), ("mp", &["--mp", "--pmtu", "4096"][..])] {
        let (code, report, text) = interop(&bed, extra, tag);
        println!("{tag}:\n{text}");
        let logs = bed.agent_logs();
        assert_eq!(code, 0, "{tag}: exit {code}\n{text}\nagent logs:\n{logs}");
        let cells = report["cells"].as_array().expect("cells");
        assert_eq!(cells.len(), 16, "{tag}: {report}");
        for c in cells {
            assert_eq!(c["verdict"], "PASS", "{tag}: {c}");
        }
        assert_eq!(report["a"]["ip"], "10.32.0.1");
        assert_eq!(report["b"]["mac"], "02:32:00:00:00:02");
        assert_eq!(report["mp"], tag == "mp");
    }
}
