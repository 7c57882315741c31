//! End-to-end: two `metaroce-ref peer` processes, one per network
//! namespace, joined by a veth pair, exchange Base RC traffic (SEND, WRITE,
//! WRITE with immediate, READ; mixed sizes up to 64 KiB) over AF_PACKET
//! sockets and verify every byte at both ends.
//!
//! Network rule: the only traffic is on the veth pair between the two
//! namespaces this test creates (`mr-e2e-<pid>-<case>-{a,b}`, addresses
//! 10.99.0.1 and 10.99.0.2 that exist only in the devices' configuration);
//! every run is bounded by a message count and a time limit; a guard deletes
//! the namespaces (and with them the veth pair) and kills the peers on every
//! path, test failure included.
//!
//! Needs root and `ip netns`; without them the test prints `SKIP: veth e2e:
//! <why>` and passes, unless `CI=true`, where it fails.
#![cfg(feature = "raw")]

use metaroce_test_support::netns::{Lab, can_run, skip};
use serde_json::Value;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One case at a time: two peers already share the machine's two cores.
static SERIAL: Mutex<()> = Mutex::new(());

const BIN: &str = env!("CARGO_BIN_EXE_metaroce-ref");
const MAC_A: &str = "02:99:00:00:00:01";
const MAC_B: &str = "02:99:00:00:00:02";
const IP_A: &str = "10.99.0.1";
const IP_B: &str = "10.99.0.2";

/// A peer process; killed and reaped on drop.
struct Peer {
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn spawn(lab: &Lab, server: bool, extra: &[&str]) -> Result<Peer, String> {
    let (ns, iface, mac, ip, peer_mac, peer_ip, role) = if server {
        (&lab.b, "veth1", MAC_B, IP_B, MAC_A, IP_A, "server")
    } else {
        (&lab.a, "veth0", MAC_A, IP_A, MAC_B, IP_B, "client")
    };
    let info = |r: &str| lab.dir.join(format!("{r}.json"));
    let other = if server { "client" } else { "server" };
    let out = lab.dir.join(format!("{role}.out"));
    let err = lab.dir.join(format!("{role}.err"));
    let file = |p: &Path| File::create(p).map_err(|e| format!("{}: {e}", p.display()));
    let child = Command::new("ip")
        .args(["netns", "exec", ns, BIN, "peer", "--iface", iface])
        .args(["--mac", mac, "--ip", ip, "--peer-mac", peer_mac])
        .args(["--peer-ip", peer_ip, "--role", role, "--info-out"])
        .arg(info(role))
        .arg("--info-in")
        .arg(info(other))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(file(&out)?)
        .stderr(file(&err)?)
        .spawn()
        .map_err(|e| format!("spawning {role}: {e}"))?;
    Ok(Peer { child, out, err })
}

/// Waits for both peers (at most `limit`), returns their JSON summaries.
fn wait_pair(mut peers: [Peer; 2], limit: Duration) -> Result<[Value; 2], String> {
    let deadline = Instant::now() + limit;
    let mut status = [None, None];
    while status.iter().any(Option::is_none) {
        for (p, s) in peers.iter_mut().zip(status.iter_mut()) {
            if s.is_none() {
                *s = p.child.try_wait().map_err(|e| e.to_string())?;
            }
        }
        if Instant::now() >= deadline {
            return Err(format!("peers still running after {limit:?} (killed)"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut summaries = [Value::Null, Value::Null];
    let mut problems = Vec::new();
    for ((p, s), summary) in peers.iter().zip(status).zip(summaries.iter_mut()) {
        let out = std::fs::read_to_string(&p.out).unwrap_or_default();
        let err = std::fs::read_to_string(&p.err).unwrap_or_default();
        println!("{}", out.trim());
        *summary = out
            .lines()
            .last()
            .and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or(Value::Null);
        if !s.is_some_and(|s| s.success()) {
            problems.push(format!("exit {s:?}, stdout {out:?}, stderr {err:?}"));
        }
    }
    if problems.is_empty() {
        Ok(summaries)
    } else {
        Err(problems.join("\n"))
    }
}

/// Runs one exchange; returns `[server, client]` summaries.
fn exchange(lab: &Lab, args: &[&str], limit: Duration) -> Result<[Value; 2], String> {
    let server = spawn(lab, true, args)?;
    let client = spawn(lab, false, args)?;
    wait_pair([server, client], limit)
}

fn counter(v: &Value, group: &str, name: &str) -> u64 {
    v[group][name].as_u64().unwrap_or(0)
}

const ARGS: &[&str] = &[
    "--messages",
    "200",
    "--size",
    "65536",
    "--pmtu",
    "1024",
    "--profile",
    "base",
    "--timeout-secs",
    "60",
];

#[test]
fn veth_base_rc_send_write_read_verified() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("veth e2e") {
        return;
    }
    let started = Instant::now();
    let lab = Lab::new("mr-e2e", "clean", [MAC_A, MAC_B])
        .unwrap_or_else(|e| panic!("setting up namespaces: {e}"));
    let [server, client] =
        exchange(&lab, ARGS, Duration::from_secs(75)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(server["ok"], true);
    assert_eq!(client["ok"], true);
    assert!(counter(&client, "driver", "frames_out") > 200);
    assert_eq!(counter(&client, "driver", "tx_errors"), 0);
    assert_eq!(counter(&server, "driver", "tx_errors"), 0);
    assert_eq!(counter(&server, "device", "icrc_errors"), 0);
    assert_eq!(counter(&client, "device", "icrc_errors"), 0);
    println!("veth e2e (no loss): {:?}", started.elapsed());
}

#[test]
fn veth_base_rc_go_back_n_over_lossy_link() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("veth e2e") {
        return;
    }
    let started = Instant::now();
    let lab = Lab::new("mr-e2e", "loss", [MAC_A, MAC_B])
        .unwrap_or_else(|e| panic!("setting up namespaces: {e}"));
    let how = match lab.lossy() {
        Ok(how) => how,
        Err(e) => {
            skip(
                "veth e2e",
                &format!("no way to drop 1% of frames on the veth: {e}"),
            );
            return;
        }
    };
    println!("loss on veth0 egress: {how}");
    let result = exchange(&lab, ARGS, Duration::from_secs(75));
    println!("{}", lab.loss_stats());
    let [server, client] = result.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(server["ok"], true);
    assert_eq!(client["ok"], true);
    // Requests were lost: the server NAKed sequence errors or the client
    // timed out, and the client went back and resent.
    assert_eq!(counter(&client, "driver", "tx_errors"), 0);
    assert!(
        counter(&client, "device", "retransmitted_packets") > 0,
        "no retransmission over a lossy link: {client}"
    );
    println!("veth e2e (1% loss): {:?}", started.elapsed());
}
