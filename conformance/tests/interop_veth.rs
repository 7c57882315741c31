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

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WHAT: &str = "interop over veth";

fn skip(why: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{WHAT} cannot run under CI=true: {why}");
    }
    println!("SKIP: {WHAT}: {why}");
}

fn sh(cmd: &[&str]) -> Result<(), String> {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The namespaces and the agents; removed on drop.
struct Bed {
    namespaces: [String; 2],
    agents: Vec<Child>,
    dir: PathBuf,
}

impl Drop for Bed {
    fn drop(&mut self) {
        for a in &mut self.agents {
            let _ = a.kill();
            let _ = a.wait();
        }
        for ns in &self.namespaces {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn agent_binary() -> Option<PathBuf> {
    let me = Path::new(env!("CARGO_BIN_EXE_metaroce"));
    let bin = me.with_file_name("metaroce-ref");
    bin.exists().then_some(bin)
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
            .unwrap_or(false)
    })
}

/// Runs `metaroce interop` in namespace `ns` with `extra` arguments; returns
/// its exit code and JSON report. Bounded at 300 s.
fn interop(bed: &Bed, ns: &str, extra: &[&str], tag: &str) -> (i32, serde_json::Value, String) {
    let json = bed.dir.join(format!("{tag}.json"));
    let out = bed.dir.join(format!("{tag}.out"));
    let mut child = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            env!("CARGO_BIN_EXE_metaroce"),
            "interop",
        ])
        .args(["--a", "192.168.232.1:7471", "--b", "192.168.232.2:7471"])
        .args(extra)
        .arg("--json")
        .arg(&json)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run metaroce interop");
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if started.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "metaroce interop ({tag}) did not finish within 300 s:\n{}",
                std::fs::read_to_string(&out).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (status.code().unwrap_or(-1), report, text)
}

#[test]
fn two_reference_agents_pass_every_cell_over_veth() {
    let Some(agent_bin) = agent_binary() else {
        return skip("metaroce-ref is not built (run `cargo test --workspace`)");
    };
    if sh(&["ip", "netns", "list"]).is_err() || !is_root() {
        return skip("needs root and iproute2");
    }
    let id = format!("mr-iop-{}", std::process::id());
    let (na, nb) = (format!("{id}-a"), format!("{id}-b"));
    let mut bed = Bed {
        namespaces: [na.clone(), nb.clone()],
        agents: Vec::new(),
        dir: std::env::temp_dir().join(&id),
    };
    std::fs::create_dir_all(&bed.dir).unwrap();
    let setup = || -> Result<(), String> {
        sh(&["ip", "netns", "add", &na])?;
        sh(&["ip", "netns", "add", &nb])?;
        sh(&[
            "ip", "link", "add", "data0", "netns", &na, "type", "veth", "peer", "name", "data1",
            "netns", &nb,
        ])?;
        sh(&[
            "ip", "link", "add", "ctl0", "netns", &na, "type", "veth", "peer", "name", "ctl1",
            "netns", &nb,
        ])?;
        for (ns, data, ctl, addr, mac) in [
            (
                &na,
                "data0",
                "ctl0",
                "192.168.232.1/30",
                "02:32:00:00:00:01",
            ),
            (
                &nb,
                "data1",
                "ctl1",
                "192.168.232.2/30",
                "02:32:00:00:00:02",
            ),
        ] {
            for key in ["all", "default"] {
                let _ = sh(&[
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{key}.disable_ipv6=1"),
                ]);
            }
            sh(&["ip", "-n", ns, "link", "set", data, "address", mac])?;
            sh(&["ip", "-n", ns, "link", "set", data, "mtu", "9000"])?;
            for dev in [data, ctl, "lo"] {
                sh(&["ip", "-n", ns, "link", "set", dev, "up"])?;
            }
            sh(&["ip", "-n", ns, "addr", "add", addr, "dev", ctl])?;
        }
        Ok(())
    };
    if let Err(e) = setup() {
        return skip(&format!("cannot build the namespaces: {e}"));
    }
    for (ns, data, ip, listen) in [
        (&na, "data0", "10.32.0.1", "192.168.232.1:7471"),
        (&nb, "data1", "10.32.0.2", "192.168.232.2:7471"),
    ] {
        let log = std::fs::File::create(bed.dir.join(format!("{data}.log"))).unwrap();
        bed.agents.push(
            Command::new("ip")
                .args(["netns", "exec", ns])
                .arg(&agent_bin)
                .args(["serve", "--iface", data, "--ip", ip, "--listen", listen])
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("start metaroce-ref serve"),
        );
    }
    // Both agents listen (bounded).
    let started = Instant::now();
    for target in ["192.168.232.1/7471", "192.168.232.2/7471"] {
        loop {
            let probe = Command::new("ip")
                .args(["netns", "exec", &na, "bash", "-c"])
                .arg(format!("exec 3<>/dev/tcp/{target}"))
                .stderr(Stdio::null())
                .status();
            if probe.is_ok_and(|s| s.success()) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "agent {target} did not listen within 10 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    for (tag, extra) in [("base", &[][..]), ("mp", &["--mp", "--pmtu", "4096"][..])] {
        let (code, report, text) = interop(&bed, &na, extra, tag);
        println!("{tag}:\n{text}");
        let logs: String = ["data0", "data1"]
            .iter()
            .map(|d| std::fs::read_to_string(bed.dir.join(format!("{d}.log"))).unwrap_or_default())
            .collect();
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
