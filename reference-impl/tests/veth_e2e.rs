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

/// `Ok(false)` (after printing SKIP) when the environment cannot run the
/// test; panics instead under CI=true.
fn can_run() -> bool {
    let why = if !is_root() {
        Some("not root (AF_PACKET and `ip netns` need it)".to_string())
    } else {
        match Command::new("ip").args(["netns", "list"]).output() {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(format!(
                "`ip netns list` failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Some(format!("cannot run `ip` (iproute2): {e}")),
        }
    };
    match why {
        None => true,
        Some(why) => skip(&why),
    }
}

fn skip(why: &str) -> bool {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("veth e2e cannot run under CI=true: {why}");
    }
    println!("SKIP: veth e2e: {why}");
    false
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1).map(|euid| euid == "0"))
            .unwrap_or(false)
    })
}

fn run(cmd: &[&str]) -> Result<(), String> {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The two namespaces and a scratch directory; deleted on drop.
struct Lab {
    a: String,
    b: String,
    dir: PathBuf,
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Lab {
    /// Namespaces `a` (veth0, MAC_A) and `b` (veth1, MAC_B), link up, IPv6
    /// off (no router solicitations on the link), no kernel IPv4 address
    /// (the kernel must not answer RoCE frames with ICMP).
    fn new(case: &str) -> Result<Lab, String> {
        let id = format!("mr-e2e-{}-{case}", std::process::id());
        let lab = Lab {
            a: format!("{id}-a"),
            b: format!("{id}-b"),
            dir: std::env::temp_dir().join(&id),
        };
        std::fs::create_dir_all(&lab.dir).map_err(|e| e.to_string())?;
        let (a, b) = (lab.a.as_str(), lab.b.as_str());
        run(&["ip", "netns", "add", a])?;
        run(&["ip", "netns", "add", b])?;
        run(&[
            "ip", "link", "add", "veth0", "netns", a, "type", "veth", "peer", "name", "veth1",
            "netns", b,
        ])?;
        for (ns, dev, mac) in [(a, "veth0", MAC_A), (b, "veth1", MAC_B)] {
            for key in ["all", "default"] {
                let _ = run(&[
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{key}.disable_ipv6=1"),
                ]);
            }
            run(&["ip", "-n", ns, "link", "set", dev, "address", mac])?;
            run(&["ip", "-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(lab)
    }

    /// About 1% loss on veth0's egress (the client's requests), silent to
    /// the sender: netem when the kernel has it; else a classic-BPF filter
    /// on a random number whose matches are redirected to a veth pair
    /// `sink0`/`sink1` inside namespace `a`, where they die unseen (foreign
    /// MAC, no address). Returns which one was installed.
    fn lossy(&self) -> Result<&'static str, String> {
        let a = self.a.as_str();
        let netem = run(&[
            "tc", "-n", a, "qdisc", "add", "dev", "veth0", "root", "netem", "loss", "1%",
        ]);
        if netem.is_ok() {
            return Ok("netem loss 1%");
        }
        let tc = |args: &[&str]| {
            let mut cmd = vec!["tc", "-n", a];
            cmd.extend_from_slice(args);
            run(&cmd)
        };
        run(&[
            "ip", "-n", a, "link", "add", "sink0", "type", "veth", "peer", "name", "sink1",
        ])
        .and_then(|()| run(&["ip", "-n", a, "link", "set", "sink0", "up"]))
        .and_then(|()| run(&["ip", "-n", a, "link", "set", "sink1", "up"]))
        .and_then(|()| tc(&["qdisc", "add", "dev", "veth0", "clsact"]))
        .and_then(|()| {
            tc(&[
                "filter",
                "add",
                "dev",
                "veth0",
                "egress",
                "bpf",
                "bytecode",
                // A = random u32; A >= 2^32/100 ? no match (pass) : match.
                "4,32 0 0 4294963256,53 1 0 42949673,6 0 0 4294967295,6 0 0 0",
                "action",
                "mirred",
                "egress",
                "redirect",
                "dev",
                "sink0",
            ])
        })
        .map(|()| "tc clsact + cBPF random 1% redirected to a sink veth (kernel has no netem)")
        .map_err(|e| format!("netem: {netem:?}; fallback: {e}"))
    }

    /// Frames dropped by the loss rule so far (tc statistics), for the log.
    fn loss_stats(&self) -> String {
        let out = Command::new("tc")
            .args(["-n", &self.a, "-s", "qdisc", "show", "dev", "veth0"])
            .output();
        let filt = Command::new("tc")
            .args([
                "-n", &self.a, "-s", "filter", "show", "dev", "veth0", "egress",
            ])
            .output();
        [out, filt]
            .into_iter()
            .filter_map(Result::ok)
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .collect::<Vec<_>>()
            .join("")
    }
}

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
    if !can_run() {
        return;
    }
    let started = Instant::now();
    let lab = Lab::new("clean").unwrap_or_else(|e| panic!("setting up namespaces: {e}"));
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
    if !can_run() {
        return;
    }
    let started = Instant::now();
    let lab = Lab::new("loss").unwrap_or_else(|e| panic!("setting up namespaces: {e}"));
    let how = match lab.lossy() {
        Ok(how) => how,
        Err(e) => {
            skip(&format!("no way to drop 1% of frames on the veth: {e}"));
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
