//! `metaroce check --live IFACE` (feature `libpcap`) on the loopback of a
//! network namespace the test creates and deletes: a RoCE packet with a
//! wrong ICRC sent there is reported (MR-ICRC-1) while the run goes on, and
//! the run stops by itself after `--duration`. Needs root (CI runs as
//! root): without it the test prints SKIP, unless CI=true.
//!
//! The sender is this test binary run again inside the namespace
//! (`live_sender_helper`, which does nothing unless `MR_LIVE_SEND` is set).
#![cfg(feature = "libpcap")]

use metaroce_codec::{Frame, Opcode, PacketBuilder, ParseOptions};
use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .is_some_and(|l| l.split_whitespace().nth(1) == Some("0"))
    })
}

/// Deletes the namespace on every path.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {args:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The UDP payload (BTH to ICRC) of an RC SEND Only with PSN 0x0badc0 and a
/// wrong ICRC.
fn faulty_roce() -> Vec<u8> {
    let built = PacketBuilder::new(Opcode::RC_SEND_ONLY)
        .psn(0x0b_adc0)
        .ack_req(true)
        .payload(*b"live")
        .corrupt_icrc()
        .build();
    let frame = Frame::parse(&built, &ParseOptions::default()).expect("decodes");
    let roce = frame.roce.expect("RoCE");
    let mut bytes = vec![0; roce.buffer_len()];
    roce.emit(&mut bytes).expect("emits");
    bytes
}

/// Run inside the namespace by the test below: sends the faulty packet to
/// 127.0.0.1:4791 every 200 ms, 20 times.
#[test]
fn live_sender_helper() {
    if std::env::var_os("MR_LIVE_SEND").is_none() {
        return;
    }
    let socket = UdpSocket::bind("127.0.0.1:0").expect("binds");
    let bytes = faulty_roce();
    for _ in 0..20 {
        let _ = socket.send_to(&bytes, "127.0.0.1:4791");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_faulty_packet_on_a_live_link_is_reported() {
    if !is_root() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "live capture needs root, and CI runs as root"
        );
        eprintln!("SKIP: live check: not root");
        return;
    }
    let ns = Netns(format!("mrchk{}", std::process::id()));
    ip(&["netns", "add", &ns.0]).expect("creates the namespace");
    ip(&["-n", &ns.0, "link", "set", "lo", "up"]).expect("brings lo up");
    let started = Instant::now();
    let checker = Command::new("ip")
        .args(["netns", "exec", &ns.0, env!("CARGO_BIN_EXE_metaroce")])
        .args([
            "check",
            "--live",
            "lo",
            "--duration",
            "5",
            "--format",
            "jsonl",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts metaroce check --live");
    let exe = std::env::current_exe().expect("test binary");
    let sender = Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .arg(exe)
        .args(["--exact", "live_sender_helper", "--nocapture"])
        .env("MR_LIVE_SEND", "1")
        .stdout(Stdio::null())
        .status()
        .expect("runs the sender");
    assert!(sender.success());
    let out = checker.wait_with_output().expect("waits for the checker");
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let icrc: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains(r#""id":"MR-ICRC-1""#))
        .collect();
    assert!(!icrc.is_empty(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(icrc[0].starts_with(r#"{"frame":"#), "{}", icrc[0]);
    assert!(
        elapsed < Duration::from_secs(30),
        "--duration 5 stops the run ({elapsed:?})"
    );
}
