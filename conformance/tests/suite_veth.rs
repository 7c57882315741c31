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

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WHAT: &str = "suite over veth";

/// One case at a time: the interface names are the same in every case.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

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

/// The namespaces and the agent; removed on drop.
struct Bed {
    namespaces: [String; 2],
    agent: Option<Child>,
    dir: PathBuf,
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Some(mut a) = self.agent.take() {
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
    let Some(agent_bin) = agent_binary() else {
        return skip("metaroce-ref is not built (run `cargo test --workspace`)");
    };
    if sh(&["ip", "netns", "list"]).is_err() || !is_root() {
        return skip("needs root and iproute2");
    }
    let id = format!("mr-suite-{}-{case}", std::process::id());
    let (h, i) = (format!("{id}-h"), format!("{id}-i"));
    let mut bed = Bed {
        namespaces: [h.clone(), i.clone()],
        agent: None,
        dir: std::env::temp_dir().join(&id),
    };
    std::fs::create_dir_all(&bed.dir).unwrap();
    let setup = || -> Result<(), String> {
        sh(&["ip", "netns", "add", &h])?;
        sh(&["ip", "netns", "add", &i])?;
        sh(&[
            "ip", "link", "add", "data0", "netns", &h, "type", "veth", "peer", "name", "data1",
            "netns", &i,
        ])?;
        sh(&[
            "ip", "link", "add", "ctl0", "netns", &h, "type", "veth", "peer", "name", "ctl1",
            "netns", &i,
        ])?;
        for (ns, data, ctl, addr, mac) in [
            (&h, "data0", "ctl0", "192.168.231.1/30", "02:31:00:00:00:01"),
            (&i, "data1", "ctl1", "192.168.231.2/30", "02:31:00:00:00:02"),
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
            // PMTU 4096 needs jumbo frames: 4096 bytes of payload plus headers.
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
    let log = std::fs::File::create(bed.dir.join("agent.log")).unwrap();
    bed.agent = Some(
        Command::new("ip")
            .args(["netns", "exec", &i])
            .arg(&agent_bin)
            .args([
                "serve",
                "--iface",
                "data1",
                "--ip",
                "10.31.0.2",
                "--listen",
                "192.168.231.2:7471",
            ])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start metaroce-ref serve"),
    );
    // Wait for the agent to listen (bounded).
    let started = Instant::now();
    loop {
        let probe = Command::new("ip")
            .args([
                "netns",
                "exec",
                &h,
                "bash",
                "-c",
                "exec 3<>/dev/tcp/192.168.231.2/7471",
            ])
            .stderr(Stdio::null())
            .status();
        if probe.is_ok_and(|s| s.success()) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the agent did not listen within 10 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let report = bed.dir.join("report");
    let run_out = bed.dir.join("run.out");
    let mut child = Command::new("ip")
        .args(["netns", "exec", &h, env!("CARGO_BIN_EXE_metaroce"), "run"])
        .args([
            "--vectors",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../vectors"),
        ])
        .args([
            "--iut",
            &format!("{adapter}:data0"),
            "--agent",
            "192.168.231.2:7471",
            "--ip",
            "10.31.0.1",
        ])
        .args(["--retries", "2"])
        .arg("--report-dir")
        .arg(&report)
        .stdout(std::fs::File::create(&run_out).unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run metaroce");
    // Bounded: a hung run fails the test instead of holding CI.
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for metaroce") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(600) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "metaroce run over {adapter} did not finish within 600 s:\n{}",
                std::fs::read_to_string(&run_out).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = std::process::Output {
        status,
        stdout: std::fs::read(&run_out).unwrap_or_default(),
        stderr: Vec::new(),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    let agent_log = std::fs::read_to_string(bed.dir.join("agent.log")).unwrap_or_default();
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

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
            .unwrap_or(false)
    })
}
