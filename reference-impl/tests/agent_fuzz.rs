//! Seeded, bounded fuzzing of the agent's request handling: thousands of
//! random and mutated JSON lines against a live agent. No line may panic;
//! every reply is one well-formed JSON object; every line that is not a
//! valid request gets an error with a known code, and a message that starts
//! with the field it names.

mod agent;
use agent::*;
use metaroce_ref::agent::protocol::MAX_LINE;
use metaroce_ref::agent::{Action, Agent};
use serde_json::{Value, json};

const CODES: [&str; 20] = [
    "bad_json",
    "line_too_long",
    "bad_request",
    "unsupported_version",
    "unknown_op",
    "missing_field",
    "unknown_field",
    "bad_type",
    "bad_value",
    "out_of_range",
    "unknown_handle",
    "invalid_transition",
    "missing_attribute",
    "unexpected_attribute",
    "wrong_state",
    "unsupported",
    "bad_destination",
    "out_of_bounds",
    "resource_exhausted",
    "internal",
];

/// xorshift64*: deterministic, seeded.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// Valid requests over the live handles of `setup`.
fn corpus(h: &Value) -> Vec<Value> {
    let sge = json!([{"addr": h["addr"], "length": 8, "lkey": h["lkey"]}]);
    vec![
        json!({"id": 1, "op": "hello", "v": 1, "client": "fuzz"}),
        json!({"id": 2, "op": "alloc_pd"}),
        json!({"id": 3, "op": "reg_mr", "pd": 0, "length": 64, "access": ["local_write", "remote_read"], "fill": 1, "hex": "0102"}),
        json!({"id": 4, "op": "read_mr", "mr": h["mr"], "offset": 8, "length": 16, "encoding": "base64"}),
        json!({"id": 5, "op": "write_mr", "mr": h["mr"], "offset": 4, "hex": "deadbeef"}),
        json!({"id": 6, "op": "write_mr", "mr": h["mr"], "offset": 4, "base64": "3q2+7w=="}),
        json!({"id": 7, "op": "create_cq"}),
        json!({"id": 8, "op": "create_qp", "pd": 0, "qp_type": "rc", "send_cq": 0, "recv_cq": 0, "sq_sig_all": true,
               "caps": {"max_send_wr": 4, "max_recv_wr": 4, "max_send_sge": 2, "max_recv_sge": 2}}),
        json!({"id": 9, "op": "modify_qp", "qpn": h["rc"], "state": "rts", "attrs": {"timeout": 3, "retry_cnt": 1}}),
        json!({"id": 10, "op": "modify_qp", "qpn": h["fresh"], "state": "init", "attrs": {"access": ["remote_write"], "p_key": 65535}}),
        json!({"id": 11, "op": "modify_qp", "qpn": h["fresh"], "state": "rtr", "attrs": {
            "dest_qpn": 5, "rq_psn": 1, "pmtu": 4096, "max_dest_rd_atomic": 4, "min_rnr_timer": 3,
            "path": {"dest_mac": "02:00:00:00:00:0b", "dest_ip": "10.0.0.2", "traffic_class": 8, "hop_limit": 3}}}),
        json!({"id": 12, "op": "query_qp", "qpn": h["rc"]}),
        json!({"id": 13, "op": "post_send", "qpn": h["rc"], "wr_id": 1, "opcode": "rdma_write", "remote_addr": 4096,
               "rkey": 9, "sg_list": sge, "signaled": false, "fence": true, "solicited": true}),
        json!({"id": 14, "op": "post_send", "qpn": h["rc"], "wr_id": 2, "opcode": "atomic_cmp_and_swp", "remote_addr": 8,
               "rkey": 9, "compare": 1, "swap": 2, "sg_list": sge}),
        json!({"id": 15, "op": "post_send", "qpn": h["ud"], "wr_id": 3, "opcode": "send", "sg_list": sge,
               "ud": {"ip": "10.0.0.2", "mac": "02:00:00:00:00:0b", "qpn": 77, "qkey": 5}}),
        json!({"id": 16, "op": "post_send", "qpn": h["rc"], "wr_id": 4, "opcode": "send_with_imm", "imm": 3}),
        json!({"id": 17, "op": "post_recv", "qpn": h["rc"], "wr_id": 5, "sg_list": sge}),
        json!({"id": 18, "op": "poll_cq", "cq": 0, "max": 4}),
        json!({"id": 19, "op": "poll_cq", "cq": 0, "max": 4, "wait_ms": 5}),
        json!({"id": 20, "op": "counters"}),
        json!({"id": 21, "op": "dereg_mr", "mr": h["mr2"]}),
        json!({"id": 22, "op": "bye"}),
        json!({"id": 23, "op": "modify_qp", "qpn": h["fresh"], "state": "rtr", "attrs": {
            "dest_qpn": 5, "rq_psn": 1, "pmtu": 1024, "max_dest_rd_atomic": 4, "min_rnr_timer": 3,
            "path": {"dest_mac": "02:00:00:00:00:0b", "dest_ip": "10.0.0.2"},
            "mp": true, "mp_entropy_set": [49152, 65535, 50000], "mp_entropy_set_size": 3,
            "mp_window": 64, "mp_trim_dscp": 46, "mp_flow_label_entropy": false}}),
    ]
}

/// A PD, CQ, two MRs, a connected RC QP, a fresh RC QP and a UD QP in RTS.
fn setup(a: &mut Agent) -> Value {
    let (pd, _, rc) = rc_qp(a);
    for r in connect_requests(rc, 0x42, MAC_B, IP_B) {
        ok(a, r);
    }
    let fresh = ok(
        a,
        json!({"op": "create_qp", "pd": pd, "qp_type": "rc", "send_cq": 0, "recv_cq": 0}),
    )["qpn"]
        .clone();
    let ud = ok(
        a,
        json!({"op": "create_qp", "pd": pd, "qp_type": "ud", "send_cq": 0, "recv_cq": 0}),
    )["qpn"]
        .clone();
    ok(
        a,
        json!({"op": "modify_qp", "qpn": ud, "state": "init", "attrs": {"q_key": 5}}),
    );
    ok(a, json!({"op": "modify_qp", "qpn": ud, "state": "rtr"}));
    ok(
        a,
        json!({"op": "modify_qp", "qpn": ud, "state": "rts", "attrs": {"sq_psn": 0}}),
    );
    let mr = ok(
        a,
        json!({"op": "reg_mr", "pd": pd, "length": 4096, "access": ["local_write"]}),
    );
    let mr2 = ok(a, json!({"op": "reg_mr", "pd": pd, "length": 16}));
    json!({"rc": rc, "fresh": fresh, "ud": ud, "mr": mr["mr"], "addr": mr["addr"], "lkey": mr["lkey"], "mr2": mr2["mr"]})
}

fn random_value(rng: &mut Rng, depth: u32) -> Value {
    match rng.below(if depth > 2 { 10 } else { 13 }) {
        0 => Value::Null,
        1 => json!(rng.below(2) == 0),
        2 => json!(rng.next()),
        3 => json!(-(rng.below(1 << 20) as i64) - 1),
        4 => json!(rng.below(300)),
        5 => json!(rng.below(1 << 25)),
        6 => json!((rng.next() as f64) / 7.0),
        7 => json!(*rng.pick(&[
            "",
            "rc",
            "rts",
            "send",
            "hex",
            "zz",
            "02:00:00:00:00:0b",
            "10.0.0.2",
            "fe80::1",
            "\u{0}",
            "é"
        ])),
        8 => json!(0),
        9 => json!(u32::MAX),
        10 => Value::Array(
            (0..rng.below(4))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        11 => {
            let mut m = serde_json::Map::new();
            for _ in 0..rng.below(4) {
                m.insert(
                    rng.pick(&["addr", "length", "lkey", "x", "dest_mac"])
                        .to_string(),
                    random_value(rng, depth + 1),
                );
            }
            Value::Object(m)
        }
        _ => json!([[1, 2], {"a": null}]),
    }
}

/// Every path to a value in `v` (object keys and array indices).
fn paths(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                prefix.push(k.clone());
                out.push(prefix.clone());
                paths(x, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(xs) => {
            for (i, x) in xs.iter().enumerate() {
                prefix.push(i.to_string());
                out.push(prefix.clone());
                paths(x, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn at<'a>(v: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut cur = v;
    for p in path {
        cur = match cur {
            Value::Object(m) => m.get_mut(p)?,
            Value::Array(xs) => xs.get_mut(p.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn structural(rng: &mut Rng, mut v: Value) -> Vec<u8> {
    let mut all = Vec::new();
    paths(&v, &mut Vec::new(), &mut all);
    for _ in 0..1 + rng.below(3) {
        let path = rng.pick(&all).clone();
        match rng.below(4) {
            0 | 1 => {
                let new = random_value(rng, 0);
                if let Some(slot) = at(&mut v, &path) {
                    *slot = new;
                }
            }
            2 => {
                let (last, parent) = path.split_last().unwrap();
                if let Some(Value::Object(m)) = at(&mut v, parent) {
                    m.remove(last);
                }
            }
            _ => {
                let key = rng
                    .pick(&["extra", "id", "op", "v", "attrs", "sg_list", "qpn", "wr_id"])
                    .to_string();
                let new = random_value(rng, 0);
                if let Some(Value::Object(m)) = at(&mut v, &path[..path.len() - 1]) {
                    m.insert(key, new);
                }
            }
        }
    }
    v.to_string().into_bytes()
}

fn textual(rng: &mut Rng, v: &Value) -> Vec<u8> {
    let mut b = v.to_string().into_bytes();
    for _ in 0..1 + rng.below(4) {
        let pos = rng.below(b.len() + 1);
        match rng.below(5) {
            0 if !b.is_empty() => {
                let p = pos.min(b.len() - 1);
                b[p] ^= 1 << rng.below(8);
            }
            1 => b.truncate(pos),
            2 => {
                let tok = rng.pick(&[
                    "\"",
                    "{",
                    "}",
                    "[",
                    "]",
                    ",",
                    ":",
                    "null",
                    "-1",
                    "1e999",
                    "18446744073709551616",
                    "\\u0000",
                    "\\",
                    "\u{fffd}",
                    "\"op\":\"reset\"",
                ]);
                b.splice(pos..pos, tok.bytes());
            }
            3 => b.insert(pos, rng.next() as u8),
            _ => {
                if pos < b.len() {
                    b.remove(pos);
                }
            }
        }
    }
    b
}

fn junk(rng: &mut Rng) -> Vec<u8> {
    match rng.below(4) {
        0 => (0..rng.below(200)).map(|_| rng.next() as u8).collect(),
        1 => {
            let depth = 1 + rng.below(5000);
            format!(
                "{{\"id\":1,\"op\":{}{}}}",
                "[".repeat(depth),
                "]".repeat(depth)
            )
            .into_bytes()
        }
        2 => format!(
            "{{\"id\":1,\"op\":\"write_mr\",\"mr\":1,\"hex\":\"{}\"}}",
            "ab".repeat(rng.below(400_000))
        )
        .into_bytes(),
        _ => b"{\"id\":1,\"op\":\"hello\",\"v\":1}".repeat(1 + rng.below(3)),
    }
}

fn reply_of(a: &mut Agent, line: &[u8]) -> Value {
    let reply = match a.handle_line(line) {
        Action::Reply(r) | Action::Close(r) => r,
        Action::Wait(p) => a.try_poll(&p).unwrap_or_else(|| a.finish_poll(&p)),
    };
    let text = reply.to_json();
    assert!(!text.contains('\n'));
    serde_json::from_str(&text).expect("reply is JSON")
}

#[test]
fn random_and_mutated_lines_never_panic_and_get_errors() {
    let mut rng = Rng(0x005E_ED0F_A6E7);
    let mut a = agent(MAC_A, IP_A, 9);
    let mut handles = setup(&mut a);
    let mut seeds = corpus(&handles);
    let (mut errors, mut oks) = (0u32, 0u32);
    for i in 0..20_000u32 {
        if i % 250 == 249 {
            // Bound memory (regions pile up) and exercise reset.
            assert_eq!(reply_of(&mut a, br#"{"id":0,"op":"reset"}"#)["ok"], true);
            handles = setup(&mut a);
            seeds = corpus(&handles);
        }
        let seed = rng.pick(&seeds).clone();
        let line = match rng.below(10) {
            0..=4 => structural(&mut rng, seed),
            5..=7 => textual(&mut rng, &seed),
            8 => junk(&mut rng),
            _ => seed.to_string().into_bytes(),
        };
        let v = reply_of(&mut a, &line);
        let parsed = serde_json::from_slice::<Value>(&line).ok();
        match v["ok"].as_bool() {
            Some(true) => {
                oks += 1;
                let p = parsed.as_ref().expect("an accepted line is JSON");
                assert_eq!(v["id"], p["id"], "{}", String::from_utf8_lossy(&line));
            }
            Some(false) => {
                errors += 1;
                let e = &v["error"];
                let code = e["code"].as_str().unwrap();
                assert!(CODES.contains(&code), "{code}");
                assert_ne!(code, "internal", "{}", String::from_utf8_lossy(&line));
                let msg = e["message"].as_str().unwrap();
                assert!(!msg.is_empty());
                if let Some(f) = e.get("field") {
                    assert!(msg.starts_with(f.as_str().unwrap()), "{msg} / {f}");
                }
                if line.len() > MAX_LINE {
                    assert_eq!(code, "line_too_long");
                } else if parsed.is_none() {
                    assert_eq!(code, "bad_json", "{}", String::from_utf8_lossy(&line));
                }
                if !v["id"].is_null() {
                    assert_eq!(v["id"], parsed.unwrap()["id"]);
                }
            }
            None => panic!("reply without ok: {v}"),
        }
        if i % 500 == 0 {
            assert_eq!(reply_of(&mut a, br#"{"id":1,"op":"hello"}"#)["ok"], true);
        }
    }
    // Both outcomes are exercised in bulk.
    assert!(errors > 8_000, "{errors} errors");
    assert!(oks > 1_000, "{oks} successes");
}
