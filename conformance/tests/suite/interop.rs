//! `metaroce interop` between two reference agents in this process, their
//! devices joined by an in-memory cable (`ChannelLink`): every cell must
//! PASS, Base and MP; a bug-zoo mutant on one side must FAIL exactly the
//! cells it breaks, in its direction; unreachable and broken agents are
//! errors with a message. (`interop_veth.rs` runs the real binaries over a
//! veth pair between network namespaces.)

use core::net::Ipv4Addr;
use metaroce_conformance::interop::cases::Op;
use metaroce_conformance::interop::matrix::{Direction, Matrix, Verdict};
use metaroce_conformance::interop::{Config, StartError, run};
use metaroce_ref::DeviceConfig;
use metaroce_ref::agent::{Agent, AgentConfig, ChannelLink, Server, ServerConfig, ServerHandle};
use metaroce_ref::zoo::Mutant;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

fn server(n: u8, link: ChannelLink, mutant: Option<Mutant>) -> ServerHandle {
    let device = DeviceConfig {
        mutant,
        ..DeviceConfig::new([2, 0, 0, 0, 0, n], Ipv4Addr::new(10, 0, 0, n))
    };
    Server::bind(
        "127.0.0.1:0",
        Agent::new(AgentConfig::reference(device, [n; 32])),
        Box::new(link),
        ServerConfig::default(),
    )
    .unwrap()
    .spawn()
    .unwrap()
}

fn config(a: &ServerHandle, b: &ServerHandle) -> Config {
    Config {
        a: a.local_addr().to_string(),
        b: b.local_addr().to_string(),
        a_mac: None,
        a_ip: None,
        b_mac: None,
        b_ip: None,
        sizes: None,
        pmtu: None,
        mp: false,
        seed: 7,
        wait_ms: 10_000,
        ops: Vec::new(),
        budget: Default::default(),
    }
}

fn pair(mutant_b: Option<Mutant>) -> (ServerHandle, ServerHandle) {
    let (la, lb) = ChannelLink::pair();
    (server(1, la, None), server(2, lb, mutant_b))
}

fn all_pass(m: &Matrix) {
    assert_eq!(m.cells.len(), 16, "{}", m.text());
    for c in &m.cells {
        assert_eq!(c.verdict, Verdict::Pass, "{}", m.text());
    }
    assert_eq!(m.exit_code(), 0);
    assert!(m.canaries, "the reference offers canaries");
}

#[test]
fn every_operation_both_directions_base() {
    let (a, b) = pair(None);
    let m = run(&config(&a, &b), &mut |_| {}).unwrap();
    all_pass(&m);
    assert_eq!(m.pmtu, 1024);
    assert_eq!(m.sizes, vec![0, 1, 1023, 1025, 65536]);
    // Five sizes per data operation, one case per atomic.
    let cases: u32 = m.cells.iter().map(|c| c.cases).sum();
    assert_eq!(cases, 2 * (5 * 5 + 3));
    println!("{}", m.text());
}

#[test]
fn every_operation_both_directions_mp_pmtu_4096() {
    let (a, b) = pair(None);
    let cfg = Config {
        mp: true,
        pmtu: Some(4096),
        ..config(&a, &b)
    };
    let m = run(&cfg, &mut |_| {}).unwrap();
    all_pass(&m);
    assert!(m.mp);
    assert_eq!(m.sizes, vec![0, 1, 4095, 4097, 65536]);
}

#[test]
fn a_mutant_fails_its_direction_only() {
    // padcnt-zero (requester side): B's packets carry PadCnt 0 with their
    // pad, so a 1-byte SEND from B arrives as 4 bytes; A's SENDs are fine.
    let (a, b) = pair(Some(Mutant::PadcntZero));
    let cfg = Config {
        ops: vec![Op::Send, Op::Write],
        sizes: Some(vec![1]),
        ..config(&a, &b)
    };
    let m = run(&cfg, &mut |_| {}).unwrap();
    let cell = |op, d| {
        m.cells
            .iter()
            .find(|c| c.op == op && c.direction == d)
            .unwrap()
    };
    assert_eq!(
        cell(Op::Send, Direction::AtoB).verdict,
        Verdict::Pass,
        "{}",
        m.text()
    );
    let bad = cell(Op::Send, Direction::BtoA);
    assert_eq!(bad.verdict, Verdict::Fail, "{}", m.text());
    let reason = bad.reason.as_deref().unwrap();
    assert!(reason.contains("byte_len 4 (expected 1)"), "{reason}");
    assert_eq!(
        cell(Op::Write, Direction::BtoA).verdict,
        Verdict::Fail,
        "{}",
        m.text()
    );
    assert_eq!(m.exit_code(), 1);
    // The matrix renders the failure with its reason.
    assert!(
        m.markdown().contains("| SEND | PASS | FAIL |"),
        "{}",
        m.markdown()
    );
    assert_eq!(m.json()["cells"][1]["verdict"], "FAIL");
}

#[test]
fn unreachable_and_bad_input_are_reported() {
    let (a, b) = pair(None);
    let mut cfg = config(&a, &b);
    cfg.b = "127.0.0.1:1".into();
    match run(&cfg, &mut |_| {}) {
        Err(StartError::BadInput(e)) => assert!(e.contains("agent B"), "{e}"),
        other => panic!("{other:?}"),
    }
    let mut cfg = config(&a, &b);
    cfg.pmtu = Some(1000);
    assert!(matches!(run(&cfg, &mut |_| {}), Err(StartError::BadInput(e)) if e.contains("--pmtu")));
    let mut cfg = config(&a, &b);
    cfg.sizes = Some(vec![1 << 21]);
    assert!(
        matches!(run(&cfg, &mut |_| {}), Err(StartError::BadInput(e)) if e.contains("--sizes"))
    );
}

/// A fake agent answering every request with `reply(id)`.
fn fake(reply: fn(u64) -> String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        if let Ok((s, _)) = listener.accept() {
            let mut w = s.try_clone().unwrap();
            for line in BufReader::new(s).lines().take(100) {
                let Ok(line) = line else { break };
                let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                let id = v["id"].as_u64().unwrap();
                if w.write_all(format!("{}\n", reply(id)).as_bytes()).is_err() {
                    break;
                }
            }
        }
    });
    addr
}

#[test]
fn broken_agents_are_errors_not_panics() {
    let (a, _b) = pair(None);
    for (reply, expect) in [
        (
            (|_| "not json".to_string()) as fn(u64) -> String,
            "not JSON",
        ),
        (
            |id| format!("{{\"id\":{id},\"ok\":true}}"),
            "`implementation` is not an object",
        ),
        (
            |id| format!("{{\"id\":{},\"ok\":true}}", id + 1),
            "carries id",
        ),
        (
            |id| format!("{{\"id\":{id},\"ok\":\"yes\"}}"),
            "no boolean `ok`",
        ),
        (
            |id| {
                format!(
                    "{{\"id\":{id},\"ok\":false,\"error\":{{\"code\":\"internal\",\"message\":\"x\"}}}}"
                )
            },
            "refused: internal",
        ),
        (
            |id| {
                format!(
                    "{{\"id\":{id},\"ok\":true,\"implementation\":{{\"name\":\"fake\"}},\"profile\":{{\"max_pmtu\":0}},\"limits\":{{}},\"addresses\":{{\"mac\":\"02:00:00:00:00:09\",\"ipv4\":\"10.0.0.9\"}}}}"
                )
            },
            "leaves no path MTU",
        ),
    ] {
        let mut cfg = config(&a, &a);
        cfg.b = fake(reply);
        match run(&cfg, &mut |_| {}) {
            Err(StartError::BadInput(e)) => assert!(e.contains(expect), "{e} (expected {expect})"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn the_command_exits_0_on_pass_and_4_when_unreachable() {
    let bin = env!("CARGO_BIN_EXE_metaroce");
    let out = std::process::Command::new(bin)
        .args(["interop", "--a", "127.0.0.1:1", "--b", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("agent A"));
    let (a, b) = pair(None);
    let dir = std::env::temp_dir().join(format!("mr-interop-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, md) = (dir.join("m.json"), dir.join("m.md"));
    let out = std::process::Command::new(bin)
        .args(["interop", "--a", &a.local_addr().to_string()])
        .args(["--b", &b.local_addr().to_string(), "--sizes", "0,7,3000"])
        .arg("--json")
        .arg(&json)
        .arg("--markdown")
        .arg(&md)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("16/16 cells PASS"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["sizes"], serde_json::json!([0, 7, 3000]));
    assert_eq!(report["exit"], 0);
    assert!(
        std::fs::read_to_string(&md)
            .unwrap()
            .contains("| RDMA READ | PASS | PASS |")
    );
    let _ = std::fs::remove_dir_all(&dir);
}
