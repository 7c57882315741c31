//! End to end through the agent on a real link: two `metaroce-ref serve
//! --iface` processes, one per network namespace, joined by a veth pair.
//! The test drives both agents over their JSON-lines protocol (AGENT.md) —
//! hello, reset, PD, CQ, MR, QP, modify to RTS with each other's QPN, PSN,
//! MAC and IP, SEND, WRITE, WRITE with immediate, READ, pipelined bursts,
//! polls, memory reads — and verifies every byte that moved. This is the
//! conformance harness's path to an implementation under test.
//!
//! Reaching the agents: each listens on `127.0.0.1:7471` of its own
//! namespace (each namespace has its own loopback). The test connects from
//! a short-lived thread that joins the namespace (`setns(2)` on
//! `/run/netns/NAME`, through rustix); the socket stays in that namespace
//! after the thread ends, and the test reads and writes it from the main
//! thread. No address is configured on the veth pair, no route leaves the
//! namespaces.
//!
//! Network rule: the only traffic is on the veth pair between the two
//! namespaces this test creates (`mr-agent-<pid>-<case>-{a,b}`; device
//! addresses 10.99.1.1 and 10.99.1.2 that exist only in the devices'
//! configuration) and on those namespaces' loopbacks. Every step is bounded
//! in time (socket timeouts, poll deadlines); guards kill the agents and
//! delete the namespaces (and with them the veth pair) on every path, a
//! failing assertion included, and print the agents' logs on failure.
//!
//! Needs root and `ip netns`; without them the test prints `SKIP: agent
//! veth e2e: <why>` and passes, unless `CI=true`, where it fails.
#![cfg(all(feature = "raw", target_os = "linux"))]

use metaroce_test_support::netns::{Lab, can_run, skip};
use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};
use serde_json::{Value, json};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One case at a time: two agents already share the machine's two cores.
static SERIAL: Mutex<()> = Mutex::new(());

const WHAT: &str = "agent veth e2e";
const BIN: &str = env!("CARGO_BIN_EXE_metaroce-ref");
const MAC_A: &str = "02:99:01:00:00:01";
const MAC_B: &str = "02:99:01:00:00:02";
const IP_A: &str = "10.99.1.1";
const IP_B: &str = "10.99.1.2";
const LISTEN: &str = "127.0.0.1:7471";
/// Longest wait for one reply (a `poll_cq` waits at most 500 ms here).
const REPLY_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest wait for an agent to listen.
const START_TIMEOUT: Duration = Duration::from_secs(10);

const ALL_ACCESS: [&str; 4] = [
    "local_write",
    "remote_read",
    "remote_write",
    "remote_atomic",
];

/// An agent process; killed and reaped on drop, its log printed if the
/// test is failing.
struct AgentProc {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl AgentProc {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for AgentProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() || std::env::var_os("MR_AGENT_LOGS").is_some() {
            eprintln!("--- agent {} log ---\n{}", self.name, self.log());
        }
    }
}

/// Starts `metaroce-ref serve` in `ns` on `iface`, MAC from the interface.
fn spawn_agent(
    lab: &Lab,
    name: &'static str,
    ns: &str,
    iface: &str,
    ip: &str,
    seed: u8,
) -> Result<AgentProc, String> {
    let log = lab.dir.join(format!("agent-{name}.log"));
    let file = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let file2 = file.try_clone().map_err(|e| e.to_string())?;
    let child = Command::new("ip")
        .args(["netns", "exec", ns, BIN, "serve", "--iface", iface])
        .args(["--listen", LISTEN, "--ip", ip, "--seed"])
        .arg(format!("{seed:02x}").repeat(32))
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(file2)
        .spawn()
        .map_err(|e| format!("spawning agent {name}: {e}"))?;
    Ok(AgentProc { name, child, log })
}

/// Connects to `addr` inside namespace `ns`, retrying until the agent
/// listens, it exits, or `START_TIMEOUT`.
fn connect_in(ns: &str, addr: SocketAddr, agent: &mut AgentProc) -> Result<TcpStream, String> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let path = format!("/run/netns/{ns}");
        // setns applies to the calling thread only: a throwaway thread joins
        // the namespace; the socket it opens stays there.
        let attempt = std::thread::spawn(move || -> Result<TcpStream, String> {
            let f = File::open(&path).map_err(|e| format!("{path}: {e}"))?;
            move_into_link_name_space(f.as_fd(), Some(LinkNameSpaceType::Network))
                .map_err(|e| format!("setns {path}: {e}"))?;
            TcpStream::connect_timeout(&addr, Duration::from_secs(1))
                .map_err(|e| format!("connect {addr}: {e}"))
        })
        .join()
        .map_err(|_| "connect thread panicked".to_string())?;
        match attempt {
            Ok(s) => return Ok(s),
            Err(e) if e.starts_with("setns") || e.starts_with('/') => return Err(e),
            Err(e) => {
                if let Ok(Some(status)) = agent.child.try_wait() {
                    return Err(format!("agent {} exited ({status}): {e}", agent.name));
                }
                if Instant::now() >= deadline {
                    return Err(format!("agent {} not listening: {e}", agent.name));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// A JSON-lines client of one agent.
struct Client {
    name: &'static str,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    next_id: u64,
}

impl Client {
    fn new(name: &'static str, s: TcpStream) -> Client {
        s.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
        s.set_write_timeout(Some(REPLY_TIMEOUT)).unwrap();
        s.set_nodelay(true).unwrap();
        Client {
            name,
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
            next_id: 0,
        }
    }

    /// Writes one request; returns its id.
    fn send(&mut self, mut req: Value) -> u64 {
        self.next_id += 1;
        req["id"] = json!(self.next_id);
        let mut line = req.to_string();
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .unwrap_or_else(|e| panic!("{}: writing {req}: {e}", self.name));
        self.next_id
    }

    /// Reads the reply to request `id`; asserts success.
    fn reply(&mut self, id: u64) -> Value {
        let mut line = String::new();
        let n = self
            .reader
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("{}: reading reply {id}: {e}", self.name));
        assert!(
            n > 0 && line.ends_with('\n'),
            "{}: reply {line:?}",
            self.name
        );
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["id"], id, "{}: {v}", self.name);
        assert_eq!(v["ok"], true, "{}: request {id} -> {v}", self.name);
        v
    }

    fn ok(&mut self, req: Value) -> Value {
        let id = self.send(req);
        self.reply(id)
    }

    /// Polls (waiting) until `n` completions arrived, at most `limit`.
    fn completions(&mut self, cq: &Value, n: usize, limit: Duration) -> Vec<Value> {
        let mut out = Vec::new();
        let start = Instant::now();
        while out.len() < n {
            assert!(
                start.elapsed() < limit,
                "{}: {} of {n} completions after {limit:?}: {out:?}",
                self.name,
                out.len()
            );
            let v = self.ok(json!({"op": "poll_cq", "cq": cq, "max": 64, "wait_ms": 500}));
            out.extend(v["completions"].as_array().unwrap().iter().cloned());
        }
        assert_eq!(
            out.len(),
            n,
            "{}: more completions than expected",
            self.name
        );
        out
    }

    fn write_mem(&mut self, mr: &Mr, off: u64, data: &[u8]) {
        for (k, chunk) in data.chunks(128 * 1024).enumerate() {
            let at = off + (k * 128 * 1024) as u64;
            self.ok(json!({"op": "write_mr", "mr": mr.handle, "offset": at, "hex": hex(chunk)}));
        }
    }

    fn read_mem(&mut self, mr: &Mr, off: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let n = (len - out.len()).min(128 * 1024);
            let at = off + out.len() as u64;
            let v = self.ok(json!({"op": "read_mr", "mr": mr.handle, "offset": at, "length": n}));
            out.extend(unhex(v["hex"].as_str().unwrap()));
        }
        out
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn mix(x: u64) -> u64 {
    metaroce_agent::rng::SplitMix64::mix(x)
}

/// `len` bytes that depend on `tag` and position.
fn pattern(tag: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| (mix(tag ^ (j as u64 / 8) << 20) >> ((j % 8) * 8)) as u8)
        .collect()
}

/// A registered MR as the agent reported it.
struct Mr {
    handle: Value,
    addr: u64,
    lkey: Value,
    rkey: Value,
}

impl Mr {
    fn sge(&self, off: u64, len: usize) -> Value {
        json!([{"addr": self.addr + off, "length": len, "lkey": self.lkey}])
    }
}

/// One side: its client, hello, CQ, QP, MR and first send PSN.
struct Side {
    c: Client,
    hello: Value,
    cq: Value,
    qpn: Value,
    mr: Mr,
    sq_psn: u32,
}

const MR_LEN: usize = 6 << 20;

fn side(mut c: Client, mac: &str, ip: &str, sq_psn: u32) -> Side {
    let hello = c.ok(json!({"op": "hello", "v": 1, "client": "agent_veth_e2e"}));
    // The device's MAC defaults to the interface's.
    assert_eq!(hello["addresses"]["mac"], mac, "{hello}");
    assert_eq!(hello["addresses"]["ipv4"], ip, "{hello}");
    c.ok(json!({"op": "reset"}));
    let pd = c.ok(json!({"op": "alloc_pd"}))["pd"].clone();
    let cq = c.ok(json!({"op": "create_cq"}))["cq"].clone();
    let qpn = c.ok(
        json!({"op": "create_qp", "pd": pd, "qp_type": "rc", "send_cq": cq,
        "recv_cq": cq, "caps": {"max_send_wr": 256, "max_recv_wr": 256}}),
    )["qpn"]
        .clone();
    let m = c.ok(json!({"op": "reg_mr", "pd": pd, "length": MR_LEN, "access": ALL_ACCESS}));
    let mr = Mr {
        handle: m["mr"].clone(),
        addr: m["addr"].as_u64().unwrap(),
        lkey: m["lkey"].clone(),
        rkey: m["rkey"].clone(),
    };
    c.ok(json!({"op": "modify_qp", "qpn": qpn, "state": "init", "attrs": {"access": ALL_ACCESS}}));
    Side {
        c,
        hello,
        cq,
        qpn,
        mr,
        sq_psn,
    }
}

/// RTR then RTS towards `peer`: its QPN, first PSN, MAC and IP.
fn connect(s: &mut Side, peer_qpn: &Value, peer_psn: u32, peer_hello: &Value) {
    let path = json!({"dest_mac": peer_hello["addresses"]["mac"],
        "dest_ip": peer_hello["addresses"]["ipv4"]});
    s.c.ok(
        json!({"op": "modify_qp", "qpn": s.qpn, "state": "rtr", "attrs": {
        "dest_qpn": peer_qpn, "rq_psn": peer_psn, "pmtu": 1024, "max_dest_rd_atomic": 16,
        "min_rnr_timer": 1, "path": path}}),
    );
    s.c.ok(
        json!({"op": "modify_qp", "qpn": s.qpn, "state": "rts", "attrs": {
        "sq_psn": s.sq_psn, "timeout": 12, "retry_cnt": 7, "rnr_retry": 7, "max_rd_atomic": 16}}),
    );
    assert_eq!(
        s.c.ok(json!({"op": "query_qp", "qpn": s.qpn}))["state"],
        "rts"
    );
}

fn assert_success(who: &str, cs: &[Value]) {
    for c in cs {
        assert_eq!(c["status_name"], "SUCCESS", "{who}: {c}");
    }
}

fn assert_same(who: &str, got: &[u8], want: &[u8]) {
    assert_eq!(got.len(), want.len(), "{who}: length");
    if let Some(i) = got.iter().zip(want).position(|(g, w)| g != w) {
        panic!("{who}: first difference at byte {i} of {}", want.len());
    }
}

/// Every phase of the exchange; returns the two agents' counters.
fn exchange(a: &mut Side, b: &mut Side, bulk: usize) -> (Value, Value) {
    let limit = Duration::from_secs(30);
    let (qa, qb) = (a.qpn.clone(), b.qpn.clone());
    let (ha, hb) = (a.hello.clone(), b.hello.clone());
    connect(a, &qb, b.sq_psn, &hb);
    connect(b, &qa, a.sq_psn, &ha);

    // 1. SEND A → B, 5000 bytes (5 packets, across A's PSN wrap).
    let data = pattern(1, 5000);
    a.c.write_mem(&a.mr, 0, &data);
    b.c.ok(json!({"op": "post_recv", "qpn": qb, "wr_id": 500, "sg_list": b.mr.sge(0, 8192)}));
    a.c.ok(
        json!({"op": "post_send", "qpn": qa, "wr_id": 1, "opcode": "send",
        "sg_list": a.mr.sge(0, 5000)}),
    );
    let ca = a.c.completions(&a.cq, 1, limit);
    assert_success("A send", &ca);
    assert_eq!(
        (ca[0]["wr_id"].clone(), ca[0]["opcode"].clone()),
        (json!(1), json!("send"))
    );
    let cb = b.c.completions(&b.cq, 1, limit);
    assert_success("B recv", &cb);
    assert_eq!(
        (
            cb[0]["wr_id"].clone(),
            cb[0]["opcode"].clone(),
            cb[0]["byte_len"].clone()
        ),
        (json!(500), json!("recv"), json!(5000))
    );
    assert_same("SEND at B", &b.c.read_mem(&b.mr, 0, 5000), &data);

    // 2. RDMA WRITE A → B (64 KiB), then READ it back into A.
    let data = pattern(2, 65536);
    a.c.write_mem(&a.mr, 65536, &data);
    let dst = b.mr.addr + 131_072;
    a.c.ok(
        json!({"op": "post_send", "qpn": qa, "wr_id": 2, "opcode": "rdma_write",
        "remote_addr": dst, "rkey": b.mr.rkey, "sg_list": a.mr.sge(65536, 65536)}),
    );
    a.c.ok(
        json!({"op": "post_send", "qpn": qa, "wr_id": 3, "opcode": "rdma_read",
        "remote_addr": dst, "rkey": b.mr.rkey, "sg_list": a.mr.sge(262_144, 65536)}),
    );
    let ca = a.c.completions(&a.cq, 2, limit);
    assert_success("A write/read", &ca);
    assert_eq!(ca[0]["wr_id"], 2);
    assert_eq!(ca[1]["wr_id"], 3);
    assert_eq!(ca[1]["opcode"], "rdma_read");
    assert_eq!(ca[1]["byte_len"], 65536);
    assert_same("WRITE at B", &b.c.read_mem(&b.mr, 131_072, 65536), &data);
    assert_same("READ at A", &a.c.read_mem(&a.mr, 262_144, 65536), &data);
    assert_eq!(
        b.c.read_mem(&b.mr, 131_071, 1),
        [0],
        "byte before the WRITE"
    );

    // 3. RDMA WRITE with immediate B → A (the other direction).
    let data = pattern(3, 3000);
    b.c.write_mem(&b.mr, 524_288, &data);
    a.c.ok(json!({"op": "post_recv", "qpn": qa, "wr_id": 600, "sg_list": []}));
    b.c.ok(
        json!({"op": "post_send", "qpn": qb, "wr_id": 4, "opcode": "rdma_write_with_imm",
        "remote_addr": a.mr.addr + 600_000, "rkey": a.mr.rkey, "imm": 0xC0FFEE,
        "sg_list": b.mr.sge(524_288, 3000)}),
    );
    let cb = b.c.completions(&b.cq, 1, limit);
    assert_success("B write imm", &cb);
    let ca = a.c.completions(&a.cq, 1, limit);
    assert_success("A recv imm", &ca);
    assert_eq!(
        (
            ca[0]["wr_id"].clone(),
            ca[0]["opcode"].clone(),
            ca[0]["imm"].clone()
        ),
        (json!(600), json!("recv_rdma_with_imm"), json!(0xC0FFEE))
    );
    assert_same("WRITE_IMM at A", &a.c.read_mem(&a.mr, 600_000, 3000), &data);

    // 4. A pipelined burst A → B: `bulk` SENDs and WRITEs of up to 64 KiB,
    //    posted without waiting for replies, completions polled while the
    //    data plane runs, then every byte checked at B.
    const SLOT: usize = 65536;
    let src = 1 << 20; // A: source slots
    let (recv_base, write_base) = (1 << 20, (1 << 20) + bulk.div_ceil(2) * SLOT); // B
    let sizes: Vec<usize> = (0..bulk)
        .map(|i| match i % 5 {
            0 => SLOT,
            1 => 1,
            _ => 1 + (mix(i as u64) % SLOT as u64) as usize,
        })
        .collect();
    for (i, &len) in sizes.iter().enumerate() {
        a.c.write_mem(
            &a.mr,
            (src + i * SLOT) as u64,
            &pattern(100 + i as u64, len),
        );
    }
    let recv_ids: Vec<u64> = (0..bulk)
        .step_by(2)
        .map(|i| {
            b.c.send(json!({"op": "post_recv", "qpn": qb, "wr_id": 1000 + i,
                "sg_list": b.mr.sge((recv_base + i / 2 * SLOT) as u64, SLOT)}))
        })
        .collect();
    for id in recv_ids {
        b.c.reply(id);
    }
    let post_ids: Vec<u64> = sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let mut req = json!({"op": "post_send", "qpn": qa, "wr_id": 2000 + i,
                "opcode": "send", "sg_list": a.mr.sge((src + i * SLOT) as u64, len)});
            if i % 2 == 1 {
                req["opcode"] = json!("rdma_write");
                req["remote_addr"] = json!(b.mr.addr + (write_base + i / 2 * SLOT) as u64);
                req["rkey"] = b.mr.rkey.clone();
            }
            a.c.send(req)
        })
        .collect();
    for id in post_ids {
        a.c.reply(id);
    }
    let ca = a.c.completions(&a.cq, bulk, limit);
    assert_success("A burst", &ca);
    let ids: Vec<u64> = ca.iter().map(|c| c["wr_id"].as_u64().unwrap()).collect();
    assert_eq!(
        ids,
        (2000..2000 + bulk as u64).collect::<Vec<_>>(),
        "A: completion order"
    );
    let cb = b.c.completions(&b.cq, bulk.div_ceil(2), limit);
    assert_success("B burst", &cb);
    for (k, c) in cb.iter().enumerate() {
        let i = 2 * k;
        assert_eq!(c["wr_id"], 1000 + i as u64, "B: completion order");
        assert_eq!(c["byte_len"], sizes[i], "B: length of SEND {i}");
    }
    for (i, &len) in sizes.iter().enumerate() {
        let at = if i % 2 == 0 {
            recv_base + i / 2 * SLOT
        } else {
            write_base + i / 2 * SLOT
        };
        let got = b.c.read_mem(&b.mr, at as u64, len);
        assert_same(
            &format!("burst message {i} at B"),
            &got,
            &pattern(100 + i as u64, len),
        );
    }

    // Both agents still answer, nothing is outstanding.
    for s in [&mut *a, &mut *b] {
        let q = s.c.ok(json!({"op": "query_qp", "qpn": s.qpn}));
        assert_eq!(q["state"], "rts");
        assert_eq!(q["outstanding"], json!({"send": 0, "recv": 0}), "{q}");
    }
    (
        a.c.ok(json!({"op": "counters"})),
        b.c.ok(json!({"op": "counters"})),
    )
}

/// The lab, both agents and their clients; `lossy` drops about 1% of
/// A's frames.
fn run_case(case: &str, lossy: bool, bulk: usize) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run(WHAT) {
        return;
    }
    let started = Instant::now();
    let lab = Lab::new("mr-agent", case, [MAC_A, MAC_B])
        .unwrap_or_else(|e| panic!("setting up namespaces: {e}"));
    if lossy {
        match lab.lossy() {
            Ok(how) => println!("loss on veth0 egress: {how}"),
            Err(e) => {
                skip(
                    WHAT,
                    &format!("no way to drop 1% of frames on the veth: {e}"),
                );
                return;
            }
        }
    }
    let mut agent_a = spawn_agent(&lab, "a", &lab.a, "veth0", IP_A, 0xA1).unwrap();
    let mut agent_b = spawn_agent(&lab, "b", &lab.b, "veth1", IP_B, 0xB2).unwrap();
    let addr: SocketAddr = LISTEN.parse().unwrap();
    let sa = connect_in(&lab.a, addr, &mut agent_a).unwrap_or_else(|e| panic!("{e}"));
    let sb = connect_in(&lab.b, addr, &mut agent_b).unwrap_or_else(|e| panic!("{e}"));
    let mut a = side(Client::new("A", sa), MAC_A, IP_A, 0xFF_FFF0);
    let mut b = side(Client::new("B", sb), MAC_B, IP_B, 0x12_3456);

    let (ctr_a, ctr_b) = exchange(&mut a, &mut b, bulk);
    println!("A counters: {ctr_a}");
    println!("B counters: {ctr_b}");
    if lossy {
        println!("{}", lab.loss_stats());
    }
    for (who, c) in [("A", &ctr_a), ("B", &ctr_b)] {
        assert_eq!(c["counters"]["icrc_errors"], 0, "{who}: {c}");
        assert_eq!(c["counters"]["malformed_drops"], 0, "{who}: {c}");
        assert_eq!(c["counters"]["unknown_qp_drops"], 0, "{who}: {c}");
    }
    let extra = |c: &Value, k: &str| c["extra"][k].as_u64().unwrap();
    if !lossy {
        // No frame lost anywhere on a clean link (sockets, queues): what A
        // sent B received; B may still have ACKs in flight when A counted.
        assert_eq!(
            extra(&ctr_a, "frames_sent"),
            extra(&ctr_b, "frames_received")
        );
        assert!(extra(&ctr_a, "frames_received") <= extra(&ctr_b, "frames_sent"));
    }
    if lossy {
        assert!(
            ctr_a["counters"]["retransmitted_packets"].as_u64().unwrap() > 0,
            "no retransmission over a lossy link: {ctr_a}"
        );
    }
    // A clean goodbye; the agents are killed by their guards.
    a.c.ok(json!({"op": "bye"}));
    b.c.ok(json!({"op": "bye"}));
    assert!(
        agent_a.child.try_wait().unwrap().is_none(),
        "{}",
        agent_a.log()
    );
    assert!(
        agent_b.child.try_wait().unwrap().is_none(),
        "{}",
        agent_b.log()
    );
    println!("{WHAT} ({case}): {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(120));
}

#[test]
fn agents_on_veth_send_write_read_verified() {
    run_case("clean", false, 40);
}

#[test]
fn agents_on_veth_go_back_n_over_lossy_link() {
    run_case("loss", true, 60);
}
