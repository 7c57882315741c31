//! Shared helpers of the agent tests: agents, JSON calls, frame shuttling.
#![allow(dead_code)]

use core::net::Ipv4Addr;
use metaroce_ref::DeviceConfig;
use metaroce_ref::agent::{Action, Agent, AgentConfig};
use serde_json::{Value, json};

pub const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0xA];
pub const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0xB];
pub const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

pub fn agent(mac: [u8; 6], ip: Ipv4Addr, seed: u8) -> Agent {
    Agent::new(AgentConfig::reference(
        DeviceConfig::new(mac, ip),
        [seed; 32],
    ))
}

/// Sends one line; returns the reply as JSON (panics on `Wait`).
pub fn call(a: &mut Agent, line: &str) -> Value {
    match a.handle_line(line.as_bytes()) {
        Action::Reply(r) | Action::Close(r) => serde_json::from_str(&r.to_json()).unwrap(),
        Action::Wait(p) => panic!("unexpected wait {p:?} for {line}"),
    }
}

/// Sends `req` (a JSON object without id); asserts success.
pub fn ok(a: &mut Agent, req: Value) -> Value {
    let mut req = req;
    req["id"] = json!(7);
    let line = req.to_string();
    let v = call(a, &line);
    assert_eq!(v["ok"], true, "{line} -> {v}");
    assert_eq!(v["id"], 7);
    v
}

/// Sends `req`; asserts an error with this code and field.
pub fn err(a: &mut Agent, req: Value, code: &str, field: Option<&str>) -> Value {
    let mut req = req;
    req["id"] = json!(9);
    let line = req.to_string();
    let v = call(a, &line);
    assert_eq!(v["ok"], false, "{line} -> {v}");
    assert_eq!(v["id"], 9, "{line} -> {v}");
    assert_eq!(v["error"]["code"], code, "{line} -> {v}");
    let msg = v["error"]["message"].as_str().unwrap();
    match field {
        Some(f) => {
            assert_eq!(v["error"]["field"], f, "{line} -> {v}");
            assert!(msg.starts_with(f), "message {msg:?} should name {f}");
        }
        None => assert!(v["error"].get("field").is_none(), "{line} -> {v}"),
    }
    v
}

/// Moves frames between two agents' devices until both are quiet,
/// advancing virtual time by 1 µs per round.
pub fn shuttle(a: &mut Agent, b: &mut Agent) {
    let mut now = a.device().now().max(b.device().now());
    for _ in 0..10_000 {
        now += 1_000;
        let mut moved = false;
        while let Some(f) = a.device_mut().poll_transmit() {
            b.device_mut().handle_frame(now, &f);
            moved = true;
        }
        while let Some(f) = b.device_mut().poll_transmit() {
            a.device_mut().handle_frame(now, &f);
            moved = true;
        }
        if !moved {
            return;
        }
    }
    panic!("frames still moving after 10000 rounds");
}

pub fn mac_str(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// PD, CQ and an RC QP; returns (pd, cq, qpn).
pub fn rc_qp(a: &mut Agent) -> (u64, u64, u64) {
    let pd = ok(a, json!({"op": "alloc_pd"}))["pd"].as_u64().unwrap();
    let cq = ok(a, json!({"op": "create_cq"}))["cq"].as_u64().unwrap();
    let qpn = ok(
        a,
        json!({"op": "create_qp", "pd": pd, "qp_type": "rc", "send_cq": cq, "recv_cq": cq}),
    )["qpn"]
        .as_u64()
        .unwrap();
    (pd, cq, qpn)
}

/// The three modify_qp calls that take an RC QP to RTS.
pub fn connect_requests(
    qpn: u64,
    peer_qpn: u64,
    peer_mac: [u8; 6],
    peer_ip: Ipv4Addr,
) -> [Value; 3] {
    [
        json!({"op": "modify_qp", "qpn": qpn, "state": "init",
               "attrs": {"access": ["local_write", "remote_read", "remote_write", "remote_atomic"]}}),
        json!({"op": "modify_qp", "qpn": qpn, "state": "rtr", "attrs": {
            "dest_qpn": peer_qpn, "rq_psn": 100, "pmtu": 1024, "max_dest_rd_atomic": 16,
            "min_rnr_timer": 1,
            "path": {"dest_mac": mac_str(peer_mac), "dest_ip": peer_ip.to_string()}}}),
        json!({"op": "modify_qp", "qpn": qpn, "state": "rts", "attrs": {
            "sq_psn": 100, "timeout": 14, "retry_cnt": 7, "rnr_retry": 7, "max_rd_atomic": 16}}),
    ]
}
