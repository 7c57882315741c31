//! The MP local constants an agent is given (`metaroce-ref serve
//! --mp-timers`, `AgentConfig::reference_with`): `hello` declares them
//! (SPEC §2) and the MP QPs use them, from one value. Virtual time only.

mod agent;
use agent::*;
use metaroce_ref::DeviceConfig;
use metaroce_ref::agent::{Agent, AgentConfig, MpLocal};
use serde_json::{Map, Value, json};

/// About ten times the §10.3 defaults, each within its §10.3 range.
fn slow() -> MpLocal {
    let map: Map<String, Value> = serde_json::from_value(json!({
        "mp_rto_init": 10_000,
        "mp_rto_min": 1_000,
        "mp_rto_max": 160_000,
        "mp_retire_hold": 5_000,
        "mp_retire_hold_max": 640_000,
        "mp_ack_coalesce_time": 64,
        "mp_ack_prompt_max": 40,
    }))
    .unwrap();
    MpLocal::from_profile(&map).unwrap()
}

fn agent_with(mp: MpLocal) -> Agent {
    Agent::new(AgentConfig::reference_with(
        DeviceConfig::new(MAC_A, IP_A),
        [5; 32],
        mp,
    ))
}

#[test]
fn hello_declares_the_given_constants() {
    let p = ok(&mut agent_with(slow()), json!({"op": "hello"}))["profile"].clone();
    let want = [
        ("mp_rto_init", 10_000),
        ("mp_rto_min", 1_000),
        ("mp_rto_max", 160_000),
        ("mp_retire_hold", 5_000),
        ("mp_retire_hold_max", 640_000),
        ("mp_ack_coalesce_time", 64),
        ("mp_ack_prompt_max", 40),
        // Not given: the §10.3 defaults.
        ("mp_reorder_threshold", 32),
        ("mp_cwnd_max", 786_432),
    ];
    for (k, v) in want {
        assert_eq!(p[k], v, "{k} in {p}");
    }
    // Without them, the §10.3 defaults.
    let p = ok(&mut agent_with(MpLocal::default()), json!({"op": "hello"}))["profile"].clone();
    assert_eq!(
        (p["mp_rto_init"].clone(), p["mp_ack_prompt_max"].clone()),
        (json!(1_000), json!(4))
    );
}

/// The virtual time (ns after the first) at which an MP QP whose peer never
/// answers sends its second frame: the retransmission at `mp_rto_init`.
fn first_retransmission_after(mp: MpLocal) -> u64 {
    let mut a = agent_with(mp);
    let (pd, cq, q) = rc_qp(&mut a);
    let mr = ok(
        &mut a,
        json!({"op": "reg_mr", "pd": pd, "length": 4096, "access": ["local_write"]}),
    );
    let [init, mut rtr, rts] = connect_requests(q, 0x123, MAC_B, IP_B);
    rtr["attrs"]["mp"] = json!(true);
    for r in [init, rtr, rts] {
        ok(&mut a, r);
    }
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": q, "wr_id": 1, "opcode": "send", "signaled": true,
               "sg_list": [{"addr": mr["addr"], "length": 64, "lkey": mr["lkey"]}]}),
    );
    let _ = cq;
    let mut now = a.device().now();
    let mut first = None;
    // 100 µs steps over at most 100 ms of virtual time.
    for _ in 0..1_000 {
        now += 100_000;
        a.device_mut().handle_timeout(now);
        while a.device_mut().poll_transmit().is_some() {
            match first {
                None => first = Some(now),
                Some(t) => return now - t,
            }
        }
    }
    panic!("no retransmission within 100 ms of virtual time (first frame at {first:?})");
}

#[test]
fn mp_qps_retransmit_at_the_declared_rto_init() {
    let default = first_retransmission_after(MpLocal::default());
    let slow = first_retransmission_after(slow());
    // §10.3 default 1 ms; declared 10 ms (100 µs steps).
    assert!((1_000_000..=1_200_000).contains(&default), "{default} ns");
    assert!((10_000_000..=10_200_000).contains(&slow), "{slow} ns");
}

#[test]
fn bad_constants_are_named() {
    let bad = |v: Value| {
        let map: Map<String, Value> = serde_json::from_value(v).unwrap();
        MpLocal::from_profile(&map).unwrap_err()
    };
    let e = bad(json!({"mp_rto_init": 5}));
    assert!(
        e.contains("mp_rto_init") && e.contains("10..=1000000"),
        "{e}"
    );
    let e = bad(json!({"mp_ack_coalesce_time": 80}));
    assert!(e.contains("mp_ack_coalesce_time"), "{e}");
    let e = bad(json!({"mp_rto_min": 5_000, "mp_rto_max": 2_000}));
    assert!(
        e.contains("mp_rto_min (5000) is above mp_rto_max (2000)"),
        "{e}"
    );
    let e = bad(json!({"mp_rto_initial": 1_000}));
    assert!(
        e.contains("`mp_rto_initial` is not an MP local constant"),
        "{e}"
    );
    let e = bad(json!({"mp": true}));
    assert!(e.contains("`mp`"), "{e}");
}
