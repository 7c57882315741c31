//! The whole suite over a real link: `metaroce run --iut raw:VETH --agent
//! HOST:PORT` in one network namespace against `metaroce-ref serve --iface`
//! in another, joined by a veth pair (the data plane: no IP address, frames
//! only) and a second veth pair carrying the agent's TCP (192.168.231.0/30).
//! Every vector must PASS (or be UNSUPPORTED by the reference's profile),
//! exactly as against the built-in IUT — the path a NIC under test takes.
//!
//! Network rule: traffic only on the two veth pairs between the namespaces
//! this test creates (`mr-suite-<pid>-{h,i}`) and their loopbacks; a guard
//! kills the agent and deletes the namespaces on every path.
//!
//! Needs root, `ip netns` and the `metaroce-ref` binary (built by `cargo
//! test --workspace`); otherwise prints `SKIP: ...` and passes, unless
//! `CI=true`, where it fails.
#![cfg(target_os = "linux")]

#[path = "common/twohosts.rs"]
mod twohosts;

use std::time::Duration;
use twohosts::TwoHosts;

const WHAT: &str = "suite over veth";

/// One case at a time: the interface names are the same in every case.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn every_vector_passes_over_veth_against_the_reference_agent() {
    suite_over_veth("raw", "raw");
}

/// The same through libpcap injection and capture (`--iut pcap:IFACE`).
#[cfg(feature = "libpcap")]
#[test]
fn every_vector_passes_over_veth_through_libpcap() {
    suite_over_veth("pcap", "pcap");
}

fn suite_over_veth(case: &str, adapter: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let id = format!("mr-suite-{}-{case}", std::process::id());
    let Some(mut bed) = TwoHosts::new(
        WHAT,
        &id,
        ["h", "i"],
        "192.168.231",
        ["02:31:00:00:00:01", "02:31:00:00:00:02"],
    ) else {
        return;
    };
    bed.start_agent(2, "10.31.0.2");
    let report = bed.dir.join("report");
    let vectors = concat!(env!("CARGO_MANIFEST_DIR"), "/../vectors");
    let iut = format!("{adapter}:data0");
    let agent = bed.agent_addr(2);
    // Bounded: a hung run fails the test instead of holding CI.
    let out = bed.metaroce(
        &[
            "run",
            "--vectors",
            vectors,
            "--iut",
            &iut,
            "--agent",
            &agent,
            "--ip",
            "10.31.0.1",
            "--retries",
            "2",
            "--report-dir",
            report.to_str().unwrap(),
        ],
        "run",
        Duration::from_secs(600),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    let agent_log = bed.agent_logs();
    let json: serde_json::Value = match std::fs::read_to_string(report.join("report.json")) {
        Ok(text) => serde_json::from_str(&text).unwrap(),
        Err(e) => panic!(
            "no report ({e}): {}\n{stdout}\n{}\nagent log:\n{agent_log}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
    };
    // Every test PASSes or is UNSUPPORTED by the reference's profile, except
    // those that race µs timers (`max_margin_us`), which a live test bed
    // with a millisecond margin reports INCONC — never FAIL or ERROR.
    let mut bad = Vec::new();
    let mut inconc = 0;
    for t in json["tests"].as_array().unwrap() {
        let verdict = t["verdict"].as_str().unwrap();
        let reason = t["reason"].as_str().unwrap_or("");
        match verdict {
            "PASS" | "UNSUPPORTED" => {}
            "INCONC"
                if reason.contains("cannot answer in time")
                    || reason.contains("cannot be judged on this test bed") =>
            {
                inconc += 1
            }
            _ => bad.push(format!("{verdict} {}: {reason}", t["id"])),
        }
    }
    assert!(
        bad.is_empty(),
        "over veth:\n{}\nagent log:\n{agent_log}",
        bad.join("\n")
    );
    let passes = json["counts"]["PASS"].as_u64().unwrap();
    assert!(passes > 400, "only {passes} PASS");
    println!("{passes} PASS, {inconc} INCONC (timing), over {adapter}");
    assert!(
        json["window_margin"].as_str().unwrap().contains("measured"),
        "the margin is calibrated on a live IUT: {}",
        json["window_margin"]
    );
}
