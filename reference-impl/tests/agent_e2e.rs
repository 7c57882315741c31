//! End to end over TCP on 127.0.0.1 (ephemeral ports): two agent servers
//! whose devices are joined by an in-memory cable ([`ChannelLink`]); a
//! client sets up both sides and moves data with SEND, RDMA WRITE and RDMA
//! READ, all in JSON lines, while the servers keep the data plane moving.

mod agent;
use agent::*;
use metaroce_ref::agent::protocol::MAX_LINE;
use metaroce_ref::agent::{ChannelLink, Server, ServerConfig, ServerHandle};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    next_id: u64,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Client {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
            next_id: 100,
        }
    }

    fn send_raw(&mut self, line: &[u8]) {
        self.writer.write_all(line).unwrap();
        self.writer.write_all(b"\n").unwrap();
    }

    fn read_reply(&mut self) -> Value {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        assert!(line.ends_with('\n'), "reply line {line:?}");
        serde_json::from_str(&line).unwrap()
    }

    fn call(&mut self, mut req: Value) -> Value {
        self.next_id += 1;
        req["id"] = json!(self.next_id);
        self.send_raw(req.to_string().as_bytes());
        let v = self.read_reply();
        assert_eq!(v["id"], self.next_id);
        v
    }

    fn ok(&mut self, req: Value) -> Value {
        let shown = req.to_string();
        let v = self.call(req);
        assert_eq!(v["ok"], true, "{shown} -> {v}");
        v
    }

    /// Polls with waits until `n` completions have arrived.
    fn completions(&mut self, cq: &Value, n: usize) -> Vec<Value> {
        let mut out = Vec::new();
        let start = Instant::now();
        while out.len() < n {
            assert!(start.elapsed() < Duration::from_secs(10), "got {out:?}");
            let v = self.ok(json!({"op": "poll_cq", "cq": cq, "max": 16, "wait_ms": 500}));
            out.extend(v["completions"].as_array().unwrap().iter().cloned());
        }
        out
    }
}

fn server(mac: [u8; 6], ip: core::net::Ipv4Addr, seed: u8, link: ChannelLink) -> ServerHandle {
    Server::bind(
        "127.0.0.1:0",
        agent(mac, ip, seed),
        Box::new(link),
        ServerConfig::default(),
    )
    .unwrap()
    .spawn()
    .unwrap()
}

fn setup(c: &mut Client) -> (Value, Value, Value, Value) {
    let pd = c.ok(json!({"op": "alloc_pd"}))["pd"].clone();
    let cq = c.ok(json!({"op": "create_cq"}))["cq"].clone();
    let qpn = c.ok(json!({"op": "create_qp", "pd": pd, "qp_type": "rc", "send_cq": cq, "recv_cq": cq}))["qpn"].clone();
    let mr = c.ok(json!({"op": "reg_mr", "pd": pd, "length": 65536,
        "access": ["local_write", "remote_read", "remote_write", "remote_atomic"]}));
    (pd, cq, qpn, mr)
}

fn connect(c: &mut Client, qpn: &Value, peer_qpn: &Value, peer_hello: &Value) {
    let path = json!({"dest_mac": peer_hello["addresses"]["mac"], "dest_ip": peer_hello["addresses"]["ipv4"]});
    c.ok(json!({"op": "modify_qp", "qpn": qpn, "state": "init",
        "attrs": {"access": ["local_write", "remote_read", "remote_write", "remote_atomic"]}}));
    c.ok(json!({"op": "modify_qp", "qpn": qpn, "state": "rtr", "attrs": {"dest_qpn": peer_qpn, "rq_psn": 0xFFFFF0,
        "pmtu": 1024, "max_dest_rd_atomic": 16, "min_rnr_timer": 1, "path": path}}));
    c.ok(json!({"op": "modify_qp", "qpn": qpn, "state": "rts", "attrs": {"sq_psn": 0xFFFFF0, "timeout": 10,
        "retry_cnt": 7, "rnr_retry": 7, "max_rd_atomic": 16}}));
}

fn sge(mr: &Value, off: u64, len: u64) -> Value {
    json!([{"addr": mr["addr"].as_u64().unwrap() + off, "length": len, "lkey": mr["lkey"]}])
}

#[test]
fn send_write_read_between_two_agents_over_tcp() {
    let started = Instant::now();
    let (la, lb) = ChannelLink::pair();
    let sa = server(MAC_A, IP_A, 1, la);
    let sb = server(MAC_B, IP_B, 2, lb);
    let mut a = Client::connect(sa.local_addr());
    let mut b = Client::connect(sb.local_addr());
    let ha = a.ok(json!({"op": "hello", "v": 1}));
    let hb = b.ok(json!({"op": "hello", "v": 1}));
    assert_eq!(hb["addresses"]["mac"], "02:00:00:00:00:0b");
    let (_, cqa, qa, mra) = setup(&mut a);
    let (_, cqb, qb, mrb) = setup(&mut b);
    connect(&mut a, &qa, &qb, &hb);
    connect(&mut b, &qb, &qa, &ha);

    // SEND of 5000 bytes (5 packets, across the PSN wrap).
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 13 + 1) as u8).collect();
    let hex: String = data.iter().map(|x| format!("{x:02x}")).collect();
    a.ok(json!({"op": "write_mr", "mr": mra["mr"], "hex": hex}));
    b.ok(json!({"op": "post_recv", "qpn": qb, "wr_id": 500, "sg_list": sge(&mrb, 0, 8192)}));
    a.ok(json!({"op": "post_send", "qpn": qa, "wr_id": 1, "opcode": "send", "sg_list": sge(&mra, 0, 5000)}));
    let ca = a.completions(&cqa, 1);
    assert_eq!(ca[0]["wr_id"], 1);
    assert_eq!(ca[0]["status_name"], "SUCCESS", "{ca:?}");
    let cb = b.completions(&cqb, 1);
    assert_eq!(
        (cb[0]["wr_id"].clone(), cb[0]["byte_len"].clone()),
        (json!(500), json!(5000))
    );
    let got = b.ok(json!({"op": "read_mr", "mr": mrb["mr"], "length": 5000}));
    assert_eq!(got["hex"], hex);

    // RDMA WRITE of 3000 bytes from A offset 0 to B offset 20000.
    let (dst, rkey) = (mrb["addr"].as_u64().unwrap() + 20_000, mrb["rkey"].clone());
    a.ok(json!({"op": "post_send", "qpn": qa, "wr_id": 2, "opcode": "rdma_write", "remote_addr": dst, "rkey": rkey,
        "sg_list": sge(&mra, 0, 3000)}));
    // RDMA READ of those bytes back into A at offset 40000 (after the WRITE:
    // a READ is not fenced, but one QP's requests execute in order).
    a.ok(json!({"op": "post_send", "qpn": qa, "wr_id": 3, "opcode": "rdma_read", "remote_addr": dst, "rkey": rkey,
        "sg_list": sge(&mra, 40_000, 3000)}));
    let ca = a.completions(&cqa, 2);
    assert_eq!(ca[0]["wr_id"], 2);
    assert_eq!(ca[0]["opcode"], "rdma_write");
    assert_eq!(ca[1]["wr_id"], 3);
    assert_eq!(ca[1]["opcode"], "rdma_read");
    assert_eq!(ca[1]["byte_len"], 3000);
    assert!(ca.iter().all(|c| c["status"] == 0), "{ca:?}");
    let written = b.ok(json!({"op": "read_mr", "mr": mrb["mr"], "offset": 20_000, "length": 3000, "encoding": "base64"}));
    let read_back = a.ok(json!({"op": "read_mr", "mr": mra["mr"], "offset": 40_000, "length": 3000, "encoding": "base64"}));
    assert_eq!(written["base64"], read_back["base64"]);
    let hex_back =
        a.ok(json!({"op": "read_mr", "mr": mra["mr"], "offset": 40_000, "length": 3000}));
    assert_eq!(hex_back["hex"].as_str().unwrap(), &hex[..6000]);
    // Bytes around the written range are untouched.
    let edge = b.ok(json!({"op": "read_mr", "mr": mrb["mr"], "offset": 19_999, "length": 1}));
    assert_eq!(edge["hex"], "00");

    // Counters moved; nothing was dropped.
    let ctr = b.ok(json!({"op": "counters"}));
    assert_eq!(ctr["counters"]["malformed_drops"], 0);
    assert!(ctr["extra"]["frames_received"].as_u64().unwrap() >= 9);

    // A waiting poll on an idle CQ returns empty after its wait.
    let t = Instant::now();
    let v = a.ok(json!({"op": "poll_cq", "cq": cqa, "wait_ms": 50}));
    assert_eq!(v["completions"], json!([]));
    assert!(t.elapsed() >= Duration::from_millis(50));

    // Bad lines on the socket: error replies, the connection survives.
    a.send_raw(b"{not json");
    let v = a.read_reply();
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (Value::Null, json!("bad_json"))
    );
    let mut long = vec![b'x'; MAX_LINE + 10];
    long[0] = b'{';
    a.send_raw(&long);
    assert_eq!(a.read_reply()["error"]["code"], "line_too_long");
    a.send_raw(b"\xff\xfe");
    assert_eq!(a.read_reply()["error"]["code"], "bad_json");
    // Pipelined requests are answered in order.
    a.send_raw(
        b"{\"id\":1,\"op\":\"hello\"}\n{\"id\":2,\"op\":\"fly\"}\r\n{\"id\":3,\"op\":\"counters\"}",
    );
    assert_eq!(a.read_reply()["id"], 1);
    let v = a.read_reply();
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!(2), json!("unknown_op"))
    );
    assert_eq!(a.read_reply()["id"], 3);

    // A second connection shares the device; bye closes only it.
    let mut a2 = Client::connect(sa.local_addr());
    assert_eq!(a2.ok(json!({"op": "query_qp", "qpn": qa}))["state"], "rts");
    a2.ok(json!({"op": "bye"}));
    let mut rest = Vec::new();
    assert_eq!(a2.reader.read_to_end(&mut rest).unwrap(), 0);
    a.ok(json!({"op": "reset"}));
    assert_eq!(
        a.call(json!({"op": "query_qp", "qpn": qa}))["error"]["code"],
        "unknown_handle"
    );

    sa.stop().unwrap();
    sb.stop().unwrap();
    // The server closed the connection it still had.
    let mut rest = Vec::new();
    let _ = a.reader.read_to_end(&mut rest);
    assert!(started.elapsed() < Duration::from_secs(30));
}
