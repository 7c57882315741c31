//! MP negotiation through the agent protocol (AGENT.md §6.9, §6.10; SPEC
//! §7.1): the capability profile, every acceptance and rejection rule of
//! the MP attributes of `modify_qp`, the effective values `query_qp`
//! reports, and two agents whose MP QPs, set up by JSON requests only,
//! exchange SEND, WRITE, READ and atomics with MP opcodes beside a Base QP
//! pair that keeps RC opcodes. Frames move on virtual time, with timers
//! fired, so losses can be injected and the MP counters read back through
//! `counters`.

mod agent;
use agent::*;
use core::net::Ipv4Addr;
use metaroce_codec::{Frame, Opcode, ParseOptions};
use metaroce_ref::DeviceConfig;
use metaroce_ref::agent::{Agent, AgentConfig};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// The entropy set A's MP QP is given (8 values, 0xC000–0xFFFF).
const SET_A: [u16; 8] = [
    0xC101, 0xC2A0, 0xD003, 0xE5E5, 0xF00D, 0xFFFF, 0xC000, 0xDEAD,
];

/// An RC QP in INIT; returns (pd, cq, qpn).
fn qp_in_init(a: &mut Agent) -> (u64, u64, u64) {
    let (pd, cq, qpn) = rc_qp(a);
    let [init, _, _] = connect_requests(qpn, 0x123, MAC_B, IP_B);
    ok(a, init);
    (pd, cq, qpn)
}

/// The INIT → RTR request of `connect_requests` with `extra` added to its
/// attributes.
fn rtr(qpn: u64, peer: u64, mac: [u8; 6], ip: Ipv4Addr, extra: Value) -> Value {
    let [_, mut req, _] = connect_requests(qpn, peer, mac, ip);
    for (k, v) in extra.as_object().unwrap() {
        req["attrs"][k] = v.clone();
    }
    req
}

fn query(a: &mut Agent, qpn: u64) -> Value {
    ok(a, json!({"op": "query_qp", "qpn": qpn}))
}

/// An INIT → RTR request `extra` is rejected with `code` on `field`, and
/// the QP is left in INIT as a Base QP (MR-QP-2, all-or-nothing).
fn rejected(a: &mut Agent, qpn: u64, extra: Value, code: &str, field: &str) {
    err(a, rtr(qpn, 0x123, MAC_B, IP_B, extra), code, Some(field));
    let q = query(a, qpn);
    assert_eq!(
        q["state"], "init",
        "MR-QP-2: a rejected modify changes nothing"
    );
    assert_eq!(q["attrs"]["mp"], false, "MR-QP-2: still a Base QP");
}

fn values(v: &Value) -> Vec<u16> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| u16::try_from(x.as_u64().unwrap()).unwrap())
        .collect()
}

#[test]
fn profile_declares_mp_and_its_maxima() {
    let mut a = agent(MAC_A, IP_A, 1);
    let p = ok(&mut a, json!({"op": "hello"}))["profile"].clone();
    assert_eq!(p["mp"], true, "MR-PICS-1: the reference declares MP");
    assert_eq!(p["mp_entropy_set_max"], 256, "MR-MPS-2: N up to 256");
    assert_eq!(p["mp_window_max"], 16384, "MR-MPW-4: W up to 16384");
    assert_eq!(p["mp_trimming"], false, "no trimmed-packet recognition");
    assert_eq!(p["mp_flow_label_entropy"], false, "no IPv6");
    assert_eq!(p["mp_max_staged_bytes"], 16384 * 4096);
    assert_eq!(p["mp_resource_nak"], true, "SPEC §7.16: NAK 0x66 both ways");
    assert_eq!(
        p["mp_ordered_write"], true,
        "MR-MPP-20, MR-MPP-11: ordered messages honoured and sent"
    );
}

#[test]
fn mp_attribute_rules_on_init_to_rtr() {
    let mut a = agent(MAC_A, IP_A, 1);
    let (_, _, q) = qp_in_init(&mut a);

    let mp = |extra: Value| {
        let mut v = json!({"mp": true});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    let too_many: Vec<u32> = (0xC000..0xC000 + 257).collect();
    let mut same_dscp = mp(json!({"mp_trim_dscp": 10}));
    same_dscp["path"] =
        json!({"dest_mac": mac_str(MAC_B), "dest_ip": "10.0.0.2", "traffic_class": 10 << 2});
    // (extra RTR attributes, error code, field under attrs): each rejected
    // alone.
    #[rustfmt::skip]
    let rules = [
        // MP parameters without mp: true (AGENT.md §6.9: unexpected_attribute).
        (json!({"mp_window": 1024}), "unexpected_attribute", "mp_window"),
        (json!({"mp": false, "mp_entropy_set": [0xC000]}), "unexpected_attribute", "mp_entropy_set"),
        (json!({"mp": "yes"}), "bad_type", "mp"),
        // The entropy set (MR-MPS-2): 1..=256 distinct values in 0xC000–0xFFFF.
        (mp(json!({"mp_entropy_set": []})), "out_of_range", "mp_entropy_set"),
        (mp(json!({"mp_entropy_set": too_many})), "out_of_range", "mp_entropy_set"),
        (mp(json!({"mp_entropy_set": [0xC000, 0xBFFF]})), "out_of_range", "mp_entropy_set[1]"),
        (mp(json!({"mp_entropy_set": [0x10000]})), "out_of_range", "mp_entropy_set[0]"),
        (mp(json!({"mp_entropy_set": [0xC000, 0xC001, 0xC000]})), "bad_value", "mp_entropy_set[2]"),
        (mp(json!({"mp_entropy_set": "c000"})), "bad_type", "mp_entropy_set"),
        // mp_entropy_set_size: 1..=256, and equal to the set's length if both.
        (mp(json!({"mp_entropy_set_size": 0})), "out_of_range", "mp_entropy_set_size"),
        (mp(json!({"mp_entropy_set_size": 257})), "out_of_range", "mp_entropy_set_size"),
        (mp(json!({"mp_entropy_set": [0xC000, 0xC001], "mp_entropy_set_size": 3})), "bad_value", "mp_entropy_set_size"),
        // mp_window: 64..=16384 (MR-MPW-4), never clamped (MR-PICS-4).
        (mp(json!({"mp_window": 0})), "out_of_range", "mp_window"),
        (mp(json!({"mp_window": 63})), "out_of_range", "mp_window"),
        (mp(json!({"mp_window": 16385})), "out_of_range", "mp_window"),
        // mp_trim_dscp: a DSCP, and not the path's own (MR-MPT-9).
        (mp(json!({"mp_trim_dscp": 64})), "out_of_range", "mp_trim_dscp"),
        (mp(json!({"mp_trim_dscp": 300})), "out_of_range", "mp_trim_dscp"),
        (same_dscp, "bad_value", "mp_trim_dscp"),
        // mp_ack_dscp: a DSCP, never the trimming one (MR-MPA-12, MR-MPT-9).
        (mp(json!({"mp_ack_dscp": 64})), "out_of_range", "mp_ack_dscp"),
        (mp(json!({"mp_ack_dscp": 46, "mp_trim_dscp": 46})), "bad_value", "mp_ack_dscp"),
        // Flow-label entropy needs IPv6, which the reference lacks.
        (mp(json!({"mp_flow_label_entropy": true})), "unsupported", "mp_flow_label_entropy"),
        // mp_reorder_threshold: K in 1..=64 (SPEC §10.3); an MP parameter.
        (mp(json!({"mp_reorder_threshold": 0})), "out_of_range", "mp_reorder_threshold"),
        (mp(json!({"mp_reorder_threshold": 65})), "out_of_range", "mp_reorder_threshold"),
        (json!({"mp_reorder_threshold": 3}), "unexpected_attribute", "mp_reorder_threshold"),
        // mp_max_staged_bytes: at most the declared value (a local limit).
        (mp(json!({"mp_max_staged_bytes": 16384u64 * 4096 + 1})), "out_of_range", "mp_max_staged_bytes"),
        (json!({"mp_peer_resource_nak": true}), "unexpected_attribute", "mp_peer_resource_nak"),
        // mp_peer_ordered (SPEC §7.1, §7.5): a bool; an MP parameter.
        (mp(json!({"mp_peer_ordered": 1})), "bad_type", "mp_peer_ordered"),
        (json!({"mp_peer_ordered": true}), "unexpected_attribute", "mp_peer_ordered"),
    ];
    for (extra, code, field) in rules {
        rejected(&mut a, q, extra, code, &format!("attrs.{field}"));
    }
    // A valid MP request with a bad Base attribute changes nothing either.
    let mut bad_pmtu = rtr(q, 0x123, MAC_B, IP_B, mp(json!({"mp_window": 64})));
    bad_pmtu["attrs"]["pmtu"] = json!(300);
    err(&mut a, bad_pmtu, "out_of_range", Some("attrs.pmtu"));
    let mut no_path = rtr(q, 0x123, MAC_B, IP_B, mp(json!({})));
    no_path["attrs"].as_object_mut().unwrap().remove("path");
    err(&mut a, no_path, "missing_attribute", Some("attrs.path"));
    assert_eq!(query(&mut a, q)["attrs"]["mp"], false, "MR-QP-2");

    // Accepted (MR-MPN-1), honoured exactly (MR-PICS-4), reported
    // (MR-PICS-5): the lowest window, a trimming DSCP, an explicit set.
    ok(
        &mut a,
        rtr(
            q,
            0x123,
            MAC_B,
            IP_B,
            mp(
                json!({"mp_entropy_set": SET_A, "mp_window": 64, "mp_trim_dscp": 46,
                      "mp_ack_dscp": 34,
                      "mp_flow_label_entropy": false, "mp_peer_resource_nak": true,
                      "mp_max_staged_bytes": 0}),
            ),
        ),
    );
    let v = query(&mut a, q);
    assert_eq!(v["state"], "rtr");
    let at = &v["attrs"];
    assert_eq!(at["mp"], true, "MR-MPN-1");
    assert_eq!(
        values(&at["mp_entropy_set"]),
        SET_A,
        "MR-PICS-4: the set given"
    );
    assert_eq!(at["mp_entropy_set_size"], 8);
    assert_eq!(at["mp_window"], 64, "MR-MPW-4: 64 is accepted as given");
    assert_eq!(at["mp_trim_dscp"], 46);
    assert_eq!(at["mp_ack_dscp"], 34, "MR-PICS-5");
    assert_eq!(at["mp_flow_label_entropy"], false);
    assert_eq!(at["mp_peer_resource_nak"], true, "MR-PICS-5");
    assert_eq!(at["mp_max_staged_bytes"], 0, "MR-PICS-5: the limit given");
    assert_eq!(at["pmtu"], 1024);
    assert!(
        v.get("udp_src_port").is_none(),
        "an MP QP has no constant source port (AGENT.md §6.10)"
    );

    // MR-MPN-1: no later change of mp, mp_window or mp_trim_dscp, on any
    // transition; the QP keeps its state and parameters.
    let [_, _, rts] = connect_requests(q, 0x123, MAC_B, IP_B);
    for (state, extra, field) in [
        ("rts", json!({"mp_window": 128}), "attrs.mp_window"),
        ("rts", json!({"mp": false}), "attrs.mp"),
        ("rts", json!({"mp_trim_dscp": 12}), "attrs.mp_trim_dscp"),
        ("err", json!({"mp": true}), "attrs.mp"),
    ] {
        let mut req = rts.clone();
        req["state"] = json!(state);
        if state == "err" {
            req["attrs"] = json!({});
        }
        for (k, x) in extra.as_object().unwrap() {
            req["attrs"][k] = x.clone();
        }
        err(&mut a, req, "unexpected_attribute", Some(field));
        assert_eq!(query(&mut a, q)["state"], "rtr", "MR-QP-2");
    }
    ok(&mut a, rts.clone());
    for extra in [
        json!({"mp": true}),
        json!({"mp_window": 64}),
        json!({"mp_trim_dscp": 46}),
        json!({"mp_entropy_set": [0xC000]}),
    ] {
        let name = extra.as_object().unwrap().keys().next().unwrap().clone();
        let mut attrs = json!({"timeout": 3});
        attrs[&name] = extra[&name].clone();
        err(
            &mut a,
            json!({"op": "modify_qp", "qpn": q, "state": "rts", "attrs": attrs}),
            "unexpected_attribute",
            Some(&format!("attrs.{name}")),
        );
    }
    let at = query(&mut a, q)["attrs"].clone();
    assert_eq!(
        (
            at["mp"].clone(),
            at["mp_window"].clone(),
            at["mp_trim_dscp"].clone(),
            at["timeout"].clone()
        ),
        (json!(true), json!(64), json!(46), json!(14)),
        "MR-MPN-1: unchanged after the rejected attempts"
    );

    // RESET makes it a Base QP again; MP can be negotiated anew.
    ok(
        &mut a,
        json!({"op": "modify_qp", "qpn": q, "state": "reset"}),
    );
    let v = query(&mut a, q);
    assert_eq!(v["attrs"]["mp"], false);
    assert!(v["attrs"].get("mp_window").is_none());
    assert!(v["udp_src_port"].as_u64().unwrap() >= 0xC000);
    let [init, _, _] = connect_requests(q, 0x123, MAC_B, IP_B);
    ok(&mut a, init);
    ok(
        &mut a,
        rtr(
            q,
            0x123,
            MAC_B,
            IP_B,
            json!({"mp": true, "mp_window": 16384}),
        ),
    );
    assert_eq!(
        query(&mut a, q)["attrs"]["mp_window"],
        16384,
        "MR-MPW-4: mp_window_max is accepted"
    );
}

#[test]
fn implementation_chosen_sets_and_defaults() {
    let mut a = agent(MAC_A, IP_A, 1);
    let check_set = |at: &Value, n: usize| {
        let set = values(&at["mp_entropy_set"]);
        assert_eq!(set.len(), n, "{at}");
        assert_eq!(at["mp_entropy_set_size"], n);
        let distinct: BTreeSet<u16> = set.iter().copied().collect();
        assert_eq!(distinct.len(), n, "MR-MPS-2: distinct values");
        assert!(set.iter().all(|&v| v >= 0xC000), "MR-MPS-2: 0xC000–0xFFFF");
        set
    };
    // Only mp: true: the SPEC §7.1 defaults, N = 128 values chosen here.
    let (_, _, q1) = qp_in_init(&mut a);
    ok(&mut a, rtr(q1, 0x123, MAC_B, IP_B, json!({"mp": true})));
    let at = query(&mut a, q1)["attrs"].clone();
    let s1 = check_set(&at, 128);
    assert_eq!(at["mp_window"], 1024, "SPEC §7.1 default W");
    assert_eq!(
        at["mp_trim_dscp"],
        Value::Null,
        "trimming off, reported as null"
    );
    assert_eq!(at["mp_flow_label_entropy"], false);
    assert_eq!(at["mp_peer_ordered"], false, "SPEC §7.1 default");
    assert_eq!(
        at["mp_max_staged_bytes"],
        16384 * 4096,
        "AGENT.md §6.10: absent, the declared limit"
    );
    // A size alone; null trimming DSCP means off; the peer honours O.
    let (_, _, q2) = qp_in_init(&mut a);
    ok(
        &mut a,
        rtr(
            q2,
            0x123,
            MAC_B,
            IP_B,
            json!({"mp": true, "mp_entropy_set_size": 256, "mp_trim_dscp": null,
                   "mp_peer_ordered": true}),
        ),
    );
    let at = query(&mut a, q2)["attrs"].clone();
    assert_eq!(at["mp_peer_ordered"], true, "MR-PICS-5: the value in force");
    let s2 = check_set(&at, 256);
    assert_ne!(s1[..], s2[..128], "each QP gets its own set");
    assert_eq!(at["mp_trim_dscp"], Value::Null);
    assert_eq!(
        at["mp_ack_dscp"],
        Value::Null,
        "not set: the traffic class's"
    );
    // All 256 values given explicitly (the declared maximum).
    let (_, _, q3) = qp_in_init(&mut a);
    let all: Vec<u32> = (0..256).map(|i| 0xFFFF - i * 3).collect();
    ok(
        &mut a,
        rtr(
            q3,
            0x123,
            MAC_B,
            IP_B,
            json!({"mp": true, "mp_entropy_set": all, "mp_entropy_set_size": 256}),
        ),
    );
    let got: Vec<u32> = values(&query(&mut a, q3)["attrs"]["mp_entropy_set"])
        .into_iter()
        .map(u32::from)
        .collect();
    assert_eq!(got, all, "MR-PICS-4: the values given, in order");
    // mp: false is an explicit Base QP (MR-MPN-2).
    let (_, _, q4) = qp_in_init(&mut a);
    ok(&mut a, rtr(q4, 0x123, MAC_B, IP_B, json!({"mp": false})));
    let v = query(&mut a, q4);
    assert_eq!(v["attrs"]["mp"], false);
    assert!(v["udp_src_port"].is_u64());
}

#[test]
fn mp_only_on_init_to_rtr_of_rc_qps() {
    let mut a = agent(MAC_A, IP_A, 1);
    let (pd, cq, q) = rc_qp(&mut a);
    // RESET → RTR is no transition at all.
    err(
        &mut a,
        rtr(q, 0x123, MAC_B, IP_B, json!({"mp": true})),
        "invalid_transition",
        Some("state"),
    );
    // RESET → INIT and INIT → INIT do not take MP attributes.
    let [init, _, _] = connect_requests(q, 0x123, MAC_B, IP_B);
    let mut mp_init = init.clone();
    mp_init["attrs"]["mp"] = json!(true);
    err(
        &mut a,
        mp_init.clone(),
        "unexpected_attribute",
        Some("attrs.mp"),
    );
    ok(&mut a, init);
    err(&mut a, mp_init, "unexpected_attribute", Some("attrs.mp"));
    assert_eq!(query(&mut a, q)["state"], "init");
    // UD QPs are never MP (SPEC §1.4: MP is a mode of RC QPs).
    let ud = ok(
        &mut a,
        json!({"op": "create_qp", "pd": pd, "qp_type": "ud", "send_cq": cq, "recv_cq": cq}),
    )["qpn"]
        .as_u64()
        .unwrap();
    ok(
        &mut a,
        json!({"op": "modify_qp", "qpn": ud, "state": "init", "attrs": {"q_key": 5}}),
    );
    err(
        &mut a,
        json!({"op": "modify_qp", "qpn": ud, "state": "rtr", "attrs": {"mp": true}}),
        "unexpected_attribute",
        Some("attrs.mp"),
    );
    assert_eq!(query(&mut a, ud)["attrs"]["mp"], false);
}

/// An agent whose profile is the reference's with `edit` applied.
fn agent_with(edit: impl FnOnce(&mut AgentConfig)) -> Agent {
    let mut cfg = AgentConfig::reference(DeviceConfig::new(MAC_A, IP_A), [5; 32]);
    edit(&mut cfg);
    Agent::new(cfg)
}

#[test]
fn an_agent_without_mp_rejects_it() {
    // A plain RoCEv2 agent declares mp: false (AGENT.md §9).
    let mut a = agent_with(|c| c.profile.mp = false);
    assert_eq!(ok(&mut a, json!({"op": "hello"}))["profile"]["mp"], false);
    let (_, _, q) = qp_in_init(&mut a);
    rejected(&mut a, q, json!({"mp": true}), "unsupported", "attrs.mp");
    rejected(
        &mut a,
        q,
        json!({"mp": true, "mp_window": 1024}),
        "unsupported",
        "attrs.mp",
    );
    rejected(
        &mut a,
        q,
        json!({"mp_window": 1024}),
        "unsupported",
        "attrs.mp_window",
    );
    // mp: false states what every QP of it is: accepted.
    ok(&mut a, rtr(q, 0x123, MAC_B, IP_B, json!({"mp": false})));
    let v = query(&mut a, q);
    assert_eq!(
        (v["state"].clone(), v["attrs"]["mp"].clone()),
        (json!("rtr"), json!(false)),
        "MR-MPN-6"
    );
}

#[test]
fn the_declared_maxima_bound_the_parameters() {
    let mut a = agent_with(|c| {
        c.profile.mp_entropy_set_max = 8;
        c.profile.mp_window_max = 256;
    });
    let (_, _, q) = qp_in_init(&mut a);
    let nine: Vec<u32> = (0xC000..0xC009).collect();
    rejected(
        &mut a,
        q,
        json!({"mp": true, "mp_entropy_set": nine}),
        "out_of_range",
        "attrs.mp_entropy_set",
    );
    rejected(
        &mut a,
        q,
        json!({"mp": true, "mp_entropy_set_size": 9}),
        "out_of_range",
        "attrs.mp_entropy_set_size",
    );
    rejected(
        &mut a,
        q,
        json!({"mp": true, "mp_window": 257}),
        "out_of_range",
        "attrs.mp_window",
    );
    // The defaults (N = 128, W = 1024) exceed these maxima: the defaults
    // become the maxima, since nothing was asked for.
    ok(&mut a, rtr(q, 0x123, MAC_B, IP_B, json!({"mp": true})));
    let at = query(&mut a, q)["attrs"].clone();
    assert_eq!(at["mp_entropy_set_size"], 8);
    assert_eq!(at["mp_window"], 256);
}

// ------------------------------------------------------------ end to end

/// The hex `read_mr` answers for `length` bytes at `offset` of the region
/// `mr` (a `reg_mr` answer) registered.
fn read_hex(a: &mut Agent, mr: &Value, offset: u64, length: u64) -> String {
    let got = ok(
        a,
        json!({"op": "read_mr", "mr": mr["mr"], "offset": offset, "length": length}),
    );
    got["hex"].as_str().unwrap().to_owned()
}

/// One frame on the cable.
#[derive(Clone, Debug)]
struct Seen {
    from_a: bool,
    dest_qp: u32,
    opcode: u8,
    src_port: u16,
    psn: u32,
    /// The MPETH R flag (retransmission), if the packet has an MPETH.
    retx: bool,
    dropped: bool,
}

fn seen(from_a: bool, frame: &[u8]) -> Seen {
    let f = Frame::parse(frame, &ParseOptions::default()).expect("the agents send valid frames");
    let roce = f.roce.expect("a RoCEv2 frame");
    Seen {
        from_a,
        dest_qp: roce.bth.dest_qp,
        opcode: roce.bth.opcode.0,
        src_port: f.udp.expect("UDP").src_port,
        psn: roce.bth.psn.value(),
        retx: roce.ext.mpeth.is_some_and(|m| m.retransmission),
        dropped: false,
    }
}

/// Moves frames between the two agents' devices on virtual time in 1 µs
/// steps, firing due timers, until nothing has moved for `quiet_us`.
/// `drop` may lose a frame on the cable. Returns every frame, in order.
fn run(
    a: &mut Agent,
    b: &mut Agent,
    quiet_us: u64,
    drop: &mut dyn FnMut(&Seen) -> bool,
) -> Vec<Seen> {
    let mut now = a.device().now().max(b.device().now());
    let mut out = Vec::new();
    let mut idle = 0;
    for _ in 0..2_000_000 {
        now += 1_000;
        a.device_mut().handle_timeout(now);
        b.device_mut().handle_timeout(now);
        let mut moved = false;
        for from_a in [true, false] {
            let (src, dst) = if from_a {
                (&mut *a, &mut *b)
            } else {
                (&mut *b, &mut *a)
            };
            while let Some(frame) = src.device_mut().poll_transmit() {
                let mut s = seen(from_a, &frame);
                moved = true;
                s.dropped = drop(&s);
                if !s.dropped {
                    dst.device_mut().handle_frame(now, &frame);
                }
                out.push(s);
            }
        }
        idle = if moved { 0 } else { idle + 1 };
        if idle >= quiet_us {
            return out;
        }
    }
    panic!("frames still moving after 2 s of virtual time");
}

fn no_drop() -> impl FnMut(&Seen) -> bool {
    |_| false
}

struct Side {
    pd: u64,
    cq: u64,
    mr: Value,
}

fn side(a: &mut Agent) -> Side {
    let pd = ok(a, json!({"op": "alloc_pd"}))["pd"].as_u64().unwrap();
    let cq = ok(a, json!({"op": "create_cq"}))["cq"].as_u64().unwrap();
    let mr = ok(
        a,
        json!({"op": "reg_mr", "pd": pd, "length": 65536,
               "access": ["local_write", "remote_read", "remote_write", "remote_atomic"]}),
    );
    Side { pd, cq, mr }
}

fn create_qp(a: &mut Agent, s: &Side) -> u64 {
    ok(
        a,
        json!({"op": "create_qp", "pd": s.pd, "qp_type": "rc", "send_cq": s.cq, "recv_cq": s.cq}),
    )["qpn"]
        .as_u64()
        .unwrap()
}

/// Connects `q` to `peer` with the MP attributes `mp` (none: Base), all
/// through JSON requests.
fn connect(a: &mut Agent, q: u64, peer: u64, mac: [u8; 6], ip: Ipv4Addr, mp: Option<Value>) {
    let [init, _, rts] = connect_requests(q, peer, mac, ip);
    ok(a, init);
    ok(a, rtr(q, peer, mac, ip, mp.unwrap_or_else(|| json!({}))));
    ok(a, rts);
}

fn sge(mr: &Value, off: u64, len: u64) -> Value {
    json!([{"addr": mr["addr"].as_u64().unwrap() + off, "length": len, "lkey": mr["lkey"]}])
}

fn remote(mr: &Value, off: u64) -> (u64, Value) {
    (mr["addr"].as_u64().unwrap() + off, mr["rkey"].clone())
}

/// Polls the CQ; asserts successes with these wr_ids, in this order.
fn completed(a: &mut Agent, cq: u64, wr_ids: &[u64]) -> Vec<Value> {
    let v = ok(a, json!({"op": "poll_cq", "cq": cq, "max": 64}))["completions"].clone();
    let got: Vec<Value> = v.as_array().unwrap().clone();
    let ids: Vec<u64> = got.iter().map(|c| c["wr_id"].as_u64().unwrap()).collect();
    assert_eq!(ids, wr_ids, "{v}");
    assert!(got.iter().all(|c| c["status"] == 0), "{v}");
    got
}

/// As [`completed`] for work requests of several QPs sharing the CQ, whose
/// relative order is not defined; sorted by wr_id.
fn completed_any_order(a: &mut Agent, cq: u64, wr_ids: &[u64]) -> Vec<Value> {
    let v = ok(a, json!({"op": "poll_cq", "cq": cq, "max": 64}))["completions"].clone();
    let mut got: Vec<Value> = v.as_array().unwrap().clone();
    got.sort_by_key(|c| c["wr_id"].as_u64());
    let ids: Vec<u64> = got.iter().map(|c| c["wr_id"].as_u64().unwrap()).collect();
    assert_eq!(ids, wr_ids, "{v}");
    assert!(got.iter().all(|c| c["status"] == 0), "{v}");
    got
}

fn pattern(len: usize, k: u32) -> String {
    (0..len as u32)
        .map(|i| format!("{:02x}", (i.wrapping_mul(k) >> 3) as u8))
        .collect()
}

fn counters(a: &mut Agent) -> Value {
    ok(a, json!({"op": "counters"}))["counters"].clone()
}

#[test]
fn two_agents_exchange_mp_traffic_beside_a_base_pair() {
    let mut a = agent(MAC_A, IP_A, 1);
    let mut b = agent(MAC_B, IP_B, 2);
    let (sa, sb) = (side(&mut a), side(&mut b));
    let (qa, qb) = (create_qp(&mut a, &sa), create_qp(&mut b, &sb));
    let (ba, bb) = (create_qp(&mut a, &sa), create_qp(&mut b, &sb));
    // A gives its set; B lets the agent choose 8 values. Same W both ends.
    let mp_a = json!({"mp": true, "mp_entropy_set": SET_A, "mp_window": 256});
    let mp_b = json!({"mp": true, "mp_entropy_set_size": 8, "mp_window": 256});
    connect(&mut a, qa, qb, MAC_B, IP_B, Some(mp_a));
    connect(&mut b, qb, qa, MAC_A, IP_A, Some(mp_b));
    connect(&mut a, ba, bb, MAC_B, IP_B, None);
    connect(&mut b, bb, ba, MAC_A, IP_A, None);
    let set_b = values(&query(&mut b, qb)["attrs"]["mp_entropy_set"]);
    assert_eq!(set_b.len(), 8);
    let port_a = query(&mut a, ba)["udp_src_port"].as_u64().unwrap() as u16;
    let port_b = query(&mut b, bb)["udp_src_port"].as_u64().unwrap() as u16;

    // Phase 1, A requests only: SEND 5000 B (5 packets at PMTU 1024),
    // WRITE 4000 B to B at 10000, READ them back into A at 20000.
    let data = pattern(6000, 37);
    ok(
        &mut a,
        json!({"op": "write_mr", "mr": sa.mr["mr"], "hex": data}),
    );
    ok(
        &mut b,
        json!({"op": "post_recv", "qpn": qb, "wr_id": 50, "sg_list": sge(&sb.mr, 0, 8192)}),
    );
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 1, "opcode": "send", "sg_list": sge(&sa.mr, 0, 5000)}),
    );
    let (va, rkey) = remote(&sb.mr, 10_000);
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 2, "opcode": "rdma_write", "remote_addr": va,
               "rkey": rkey, "sg_list": sge(&sa.mr, 1000, 4000)}),
    );
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 3, "opcode": "rdma_read", "remote_addr": va,
               "rkey": rkey, "sg_list": sge(&sa.mr, 20_000, 4000)}),
    );
    let phase1 = run(&mut a, &mut b, 200, &mut no_drop());
    let ca = completed(&mut a, sa.cq, &[1, 2, 3]);
    assert_eq!(
        (ca[2]["opcode"].clone(), ca[2]["byte_len"].clone()),
        (json!("rdma_read"), json!(4000))
    );
    let cb = completed(&mut b, sb.cq, &[50]);
    assert_eq!(cb[0]["byte_len"], 5000);
    let got = ok(
        &mut b,
        json!({"op": "read_mr", "mr": sb.mr["mr"], "length": 5000}),
    );
    assert_eq!(got["hex"].as_str().unwrap(), &data[..10_000]);
    let written = read_hex(&mut b, &sb.mr, 10_000, 4000);
    assert_eq!(written, &data[2000..10_000]);
    let read_back = read_hex(&mut a, &sa.mr, 20_000, 4000);
    assert_eq!(
        read_back, written,
        "MR-MPP-7: the READ sees the earlier WRITE"
    );

    // A's first 8 request packets: a whole round over exactly SET_A.
    let first: Vec<u16> = phase1
        .iter()
        .filter(|s| s.from_a)
        .take(8)
        .map(|s| s.src_port)
        .collect();
    assert_eq!(
        first.iter().copied().collect::<BTreeSet<_>>(),
        SET_A.iter().copied().collect::<BTreeSet<_>>(),
        "MR-MPS-3: the first round uses every value of the set given once"
    );

    // Phase 2, both directions at once, MP and Base: B WRITEs with
    // immediate into A at 30000, A SENDs on the Base pair.
    ok(
        &mut a,
        json!({"op": "post_recv", "qpn": qa, "wr_id": 60, "sg_list": []}),
    );
    let (va_a, rkey_a) = remote(&sa.mr, 30_000);
    ok(
        &mut b,
        json!({"op": "post_send", "qpn": qb, "wr_id": 4, "opcode": "rdma_write_with_imm", "remote_addr": va_a,
               "rkey": rkey_a, "imm": 99, "sg_list": sge(&sb.mr, 0, 3000)}),
    );
    ok(
        &mut b,
        json!({"op": "post_recv", "qpn": bb, "wr_id": 70, "sg_list": sge(&sb.mr, 40_000, 4096)}),
    );
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": ba, "wr_id": 5, "opcode": "send", "sg_list": sge(&sa.mr, 0, 3000)}),
    );
    // MP atomics on B's word at 50000 (7 + 5, then 12 → 40).
    ok(
        &mut b,
        json!({"op": "write_mr", "mr": sb.mr["mr"], "offset": 50_000, "hex": "0700000000000000"}),
    );
    let (word, rkey) = remote(&sb.mr, 50_000);
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 6, "opcode": "atomic_fetch_and_add", "remote_addr": word,
               "rkey": rkey, "add": 5, "sg_list": sge(&sa.mr, 50_000, 8)}),
    );
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 7, "opcode": "atomic_cmp_and_swp", "remote_addr": word,
               "rkey": rkey, "compare": 12, "swap": 40, "sg_list": sge(&sa.mr, 50_008, 8)}),
    );
    let phase2 = run(&mut a, &mut b, 200, &mut no_drop());
    completed_any_order(&mut b, sb.cq, &[4, 70]);
    let ca = completed_any_order(&mut a, sa.cq, &[5, 6, 7, 60]);
    assert_eq!(
        (ca[3]["opcode"].clone(), ca[3]["imm"].clone()),
        (json!("recv_rdma_with_imm"), json!(99))
    );
    let olds = read_hex(&mut a, &sa.mr, 50_000, 16);
    assert_eq!(olds, "07000000000000000c00000000000000");
    let word = read_hex(&mut b, &sb.mr, 50_000, 8);
    assert_eq!(word, "2800000000000000");
    let moved = read_hex(&mut a, &sa.mr, 30_000, 3000);
    assert_eq!(moved, &data[..6000]);
    let base = read_hex(&mut b, &sb.mr, 40_000, 3000);
    assert_eq!(base, &data[..6000]);

    // Every frame of the MP pair has an MP opcode and a source port of its
    // sender's set; every frame of the Base pair an RC opcode and the QP's
    // constant port.
    let frames: Vec<&Seen> = phase1.iter().chain(&phase2).collect();
    let mut mp_ops = BTreeSet::new();
    let mut base_ops = BTreeSet::new();
    for s in &frames {
        let (to_mp, to_base) = if s.from_a {
            (s.dest_qp as u64 == qb, s.dest_qp as u64 == bb)
        } else {
            (s.dest_qp as u64 == qa, s.dest_qp as u64 == ba)
        };
        if to_mp {
            mp_ops.insert(s.opcode);
            assert!(
                Opcode(s.opcode).is_mp(),
                "MR-MPN-3: no RC-class opcode or CNP from an MP QP: {s:?}"
            );
            let set: &[u16] = if s.from_a { &SET_A } else { &set_b };
            assert!(
                set.contains(&s.src_port),
                "MR-MPS-1: the source port is a value of the sender's set: {s:?}"
            );
        } else if to_base {
            base_ops.insert(s.opcode);
            assert!(
                s.opcode <= 0x1F,
                "MR-MPN-2: a Base QP of an MP implementation sends RC opcodes: {s:?}"
            );
            let port = if s.from_a { port_a } else { port_b };
            assert_eq!(
                s.src_port, port,
                "MR-MPN-2, MR-ENC-12: the Base QP's constant port"
            );
        } else {
            panic!("a frame to no QP of this test: {s:?}");
        }
    }
    // MP SEND, WRITE, WRITE with immediate, READ request and response,
    // Compare-Swap, Fetch-Add, Atomic Acknowledge, ACK.
    for op in [0xC0, 0xC2, 0xC3, 0xC4, 0xC5, 0xC6, 0xC7, 0xC8, 0xC9] {
        assert!(
            mp_ops.contains(&op),
            "MP opcode {op:#04x} seen: {mp_ops:x?}"
        );
    }
    // RC SEND First/Middle/Last and ACK on the Base pair.
    for op in [0x00, 0x01, 0x02, 0x11] {
        assert!(
            base_ops.contains(&op),
            "RC opcode {op:#04x} seen: {base_ops:x?}"
        );
    }
    for x in [&mut a, &mut b] {
        let c = counters(x);
        assert_eq!(c["malformed_drops"], 0, "no frame refused: {c}");
        assert_eq!(c["mp_out_of_window"], 0);
        assert_eq!(c["retransmitted_packets"], 0, "a lossless cable: {c}");
    }
}

#[test]
fn losses_on_mp_qps_show_in_the_agents_counters() {
    let mut a = agent(MAC_A, IP_A, 3);
    let mut b = agent(MAC_B, IP_B, 4);
    let (sa, sb) = (side(&mut a), side(&mut b));
    let (qa, qb) = (create_qp(&mut a, &sa), create_qp(&mut b, &sb));
    // K = 3 through the agent attribute (the §10.3 default is 32).
    let mp = json!({"mp": true, "mp_entropy_set_size": 16, "mp_reorder_threshold": 3});
    connect(&mut a, qa, qb, MAC_B, IP_B, Some(mp.clone()));
    connect(&mut b, qb, qa, MAC_A, IP_A, Some(mp));
    let data = pattern(6000, 11);
    ok(
        &mut a,
        json!({"op": "write_mr", "mr": sa.mr["mr"], "hex": data}),
    );
    let (va, rkey) = remote(&sb.mr, 0);

    // A 6-packet WRITE whose 2nd packet is lost once: 4 later packets are
    // acknowledged, K = 3, so rule (a) of §7.8 resends it.
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 1, "opcode": "rdma_write", "remote_addr": va,
               "rkey": rkey, "sg_list": sge(&sa.mr, 0, 6000)}),
    );
    let mut n = 0;
    let frames = run(&mut a, &mut b, 3000, &mut |s: &Seen| {
        if s.from_a && s.opcode == 0xC2 && !s.retx {
            n += 1;
            n == 2
        } else {
            false
        }
    });
    completed(&mut a, sa.cq, &[1]);
    let lost = frames.iter().find(|s| s.dropped).unwrap();
    let again: Vec<&Seen> = frames
        .iter()
        .filter(|s| s.from_a && s.opcode == 0xC2 && s.retx)
        .collect();
    assert_eq!(
        again.len(),
        1,
        "MR-MPL-3, MR-MPL-6: only the missing PSN is resent"
    );
    assert_eq!(again[0].psn, lost.psn);
    assert_ne!(
        again[0].src_port, lost.src_port,
        "MR-MPS-7: another value than the lost copy's"
    );
    let c = counters(&mut a);
    assert_eq!(c["retransmitted_packets"], 1, "{c}");
    assert_eq!(c["mp_retx_reorder"], 1, "§9.3: rule (a): {c}");
    assert_eq!(c["mp_retx_timeout"], 0, "{c}");
    assert_eq!(
        c["mp_entropy_retired"], 1,
        "MR-MPF-1: its value retired: {c}"
    );
    assert!(
        c["mp_probes_sent"].as_u64().unwrap() >= 1,
        "MR-MPF-3: the retired value is probed: {c}"
    );

    // A 4-packet WRITE whose last packet is lost once: nothing later is
    // acknowledged, so the RTO (rule (b)) resends it.
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 2, "opcode": "rdma_write", "remote_addr": va + 8192,
               "rkey": rkey, "sg_list": sge(&sa.mr, 0, 4000)}),
    );
    let mut n = 0;
    run(&mut a, &mut b, 3000, &mut |s: &Seen| {
        if s.from_a && s.opcode == 0xC2 && !s.retx {
            n += 1;
            n == 4
        } else {
            false
        }
    });
    completed(&mut a, sa.cq, &[2]);
    let c = counters(&mut a);
    assert_eq!(c["retransmitted_packets"], 2, "{c}");
    assert_eq!(c["mp_retx_reorder"], 1, "{c}");
    assert_eq!(c["mp_retx_timeout"], 1, "§9.3: rule (b): {c}");
    assert_eq!(c["mp_retx_trim"], 0, "{c}");
    let at_b = ok(
        &mut b,
        json!({"op": "read_mr", "mr": sb.mr["mr"], "length": 6000}),
    );
    assert_eq!(at_b["hex"].as_str().unwrap(), &data[..12_000]);
    let at_b = read_hex(&mut b, &sb.mr, 8192, 4000);
    assert_eq!(at_b, &data[..8000]);
}
