//! The agent dispatcher without sockets: every operation's happy path and
//! each error class (AGENT.md §5), and data transfers between two agents
//! whose devices exchange frames by hand.

mod agent;
use agent::*;
use metaroce_ref::agent::Action;
use metaroce_ref::agent::protocol::{MAX_LINE, OPS};
use serde_json::{Value, json};

fn a() -> metaroce_ref::agent::Agent {
    agent(MAC_A, IP_A, 1)
}

#[test]
fn hello_reports_version_profile_addresses_limits() {
    let mut a = a();
    let v = ok(&mut a, json!({"op": "hello", "v": 1, "client": "test"}));
    assert_eq!(v["v"], 1);
    assert_eq!(v["implementation"]["name"], "metaroce-ref");
    assert_eq!(v["addresses"]["mac"], "02:00:00:00:00:0a");
    assert_eq!(v["addresses"]["ipv4"], "10.0.0.1");
    assert_eq!(v["addresses"]["ipv6"], Value::Null);
    let profile = v["profile"].as_object().unwrap();
    // Every key of SPEC §2, nothing else (MR-PICS-1): the reference also
    // declares the MP local constants it uses (SPEC §2, §10.3 units).
    let keys = metaroce_agent::profile::PROFILE_KEYS;
    assert_eq!(profile.len(), keys.len());
    for &k in keys {
        assert!(profile.contains_key(k), "{k}");
    }
    assert_eq!(v["profile"]["max_pmtu"], 4096);
    assert_eq!(v["profile"]["cnp_pacing_scope"], "qp");
    assert_eq!(v["profile"]["mp_rto_init"], 1000);
    assert_eq!(v["profile"]["mp_retire_hold"], 500);
    assert_eq!(v["limits"]["max_line"], MAX_LINE);
    assert_eq!(v["ops"].as_array().unwrap().len(), OPS.len());
}

#[test]
fn envelope_errors() {
    let mut a = a();
    let check = |a: &mut metaroce_ref::agent::Agent,
                 line: &str,
                 code: &str,
                 id: Value,
                 field: Option<&str>| {
        let v = call(a, line);
        assert_eq!(v["ok"], false, "{line}");
        assert_eq!(v["id"], id, "{line} -> {v}");
        assert_eq!(v["error"]["code"], code, "{line} -> {v}");
        assert_eq!(
            v["error"].get("field").and_then(Value::as_str),
            field,
            "{line} -> {v}"
        );
    };
    check(&mut a, "{", "bad_json", Value::Null, None);
    check(&mut a, "", "bad_json", Value::Null, None);
    check(&mut a, "\u{1}", "bad_json", Value::Null, None);
    check(&mut a, "[1,2]", "bad_request", Value::Null, None);
    check(&mut a, "42", "bad_request", Value::Null, None);
    check(
        &mut a,
        r#"{"op":"hello"}"#,
        "missing_field",
        Value::Null,
        Some("id"),
    );
    check(
        &mut a,
        r#"{"id":"x","op":"hello"}"#,
        "bad_type",
        Value::Null,
        Some("id"),
    );
    check(
        &mut a,
        r#"{"id":-1,"op":"hello"}"#,
        "bad_type",
        Value::Null,
        Some("id"),
    );
    check(
        &mut a,
        r#"{"id":1.5,"op":"hello"}"#,
        "bad_type",
        Value::Null,
        Some("id"),
    );
    check(&mut a, r#"{"id":3}"#, "missing_field", json!(3), Some("op"));
    check(
        &mut a,
        r#"{"id":3,"op":7}"#,
        "bad_type",
        json!(3),
        Some("op"),
    );
    check(
        &mut a,
        r#"{"id":3,"op":"fly"}"#,
        "unknown_op",
        json!(3),
        Some("op"),
    );
    check(
        &mut a,
        r#"{"id":3,"op":"hello","v":2}"#,
        "unsupported_version",
        json!(3),
        Some("v"),
    );
    check(
        &mut a,
        r#"{"id":3,"op":"hello","v":"1"}"#,
        "unsupported_version",
        json!(3),
        Some("v"),
    );
    check(
        &mut a,
        r#"{"id":3,"op":"hello","x":1}"#,
        "unknown_field",
        json!(3),
        Some("x"),
    );
    check(
        &mut a,
        r#"{"id":3,"op":"alloc_pd","pd":1}"#,
        "unknown_field",
        json!(3),
        Some("pd"),
    );
    check(
        &mut a,
        r#"{"id":3,"op":"reg_mr","pd":0}"#,
        "missing_field",
        json!(3),
        Some("length"),
    );
    check(
        &mut a,
        r#"{"id":3,"op":"reg_mr","pd":"0","length":1}"#,
        "bad_type",
        json!(3),
        Some("pd"),
    );
    check(
        &mut a,
        r#"{"id":3,"op":"reg_mr","pd":-1,"length":1}"#,
        "out_of_range",
        json!(3),
        Some("pd"),
    );
    check(
        &mut a,
        r#"{"id":3,"op":"reg_mr","pd":0,"length":1,"access":["fly"]}"#,
        "bad_value",
        json!(3),
        Some("access[0]"),
    );
    check(
        &mut a,
        r#"{"id":3,"op":"post_send","qpn":1,"wr_id":1,"opcode":"send","sg_list":[{"addr":0,"length":1,"lkey":"k"}]}"#,
        "bad_type",
        json!(3),
        Some("sg_list[0].lkey"),
    );
    check(
        &mut a,
        r#"{"id":3,"op":"post_send","qpn":1,"wr_id":1,"opcode":"send","sg_list":[{"addr":0,"length":1}]}"#,
        "missing_field",
        json!(3),
        Some("sg_list[0].lkey"),
    );
    check(
        &mut a,
        r#"{"id":3,"op":"modify_qp","qpn":1,"state":"rts","attrs":{"timeout":300}}"#,
        "out_of_range",
        json!(3),
        Some("attrs.timeout"),
    );
    check(
        &mut a,
        r#"{"id":3,"op":"modify_qp","qpn":1,"state":"rts","attrs":{"path":{"dest_mac":"x","dest_ip":"y","ttl":1}}}"#,
        "unknown_field",
        json!(3),
        Some("attrs.path.ttl"),
    );
    check(
        &mut a,
        r#"{"id":3,"op":"modify_qp","qpn":1,"state":"flying"}"#,
        "bad_value",
        json!(3),
        Some("state"),
    );
    let long = format!(
        "{{\"id\":1,\"op\":\"hello\",\"client\":\"{}\"}}",
        "x".repeat(MAX_LINE)
    );
    check(&mut a, &long, "line_too_long", Value::Null, None);
    // Duplicate keys are malformed JSON objects for serde: rejected, never guessed.
    let v = call(&mut a, r#"{"id":3,"op":"alloc_pd","op":"alloc_pd"}"#);
    assert_eq!(v["ok"], false);
    // The agent still works.
    ok(&mut a, json!({"op": "hello"}));
}

#[test]
fn memory_regions() {
    let mut a = a();
    let pd = ok(&mut a, json!({"op": "alloc_pd"}))["pd"]
        .as_u64()
        .unwrap();
    let r = ok(
        &mut a,
        json!({"op": "reg_mr", "pd": pd, "length": 64, "access": ["local_write", "remote_read"],
               "fill": 0xa5, "hex": "0102"}),
    );
    let mr = r["mr"].as_u64().unwrap();
    assert!(r["addr"].as_u64().unwrap() > 0);
    assert_ne!(r["lkey"], r["rkey"]);
    assert_eq!(r["length"], 64);
    let v = ok(
        &mut a,
        json!({"op": "read_mr", "mr": mr, "offset": 0, "length": 4}),
    );
    assert_eq!(v["hex"], "0102a5a5");
    ok(
        &mut a,
        json!({"op": "write_mr", "mr": mr, "offset": 60, "base64": "3q2+7w=="}),
    );
    let v = ok(
        &mut a,
        json!({"op": "read_mr", "mr": mr, "offset": 58, "length": 6, "encoding": "base64"}),
    );
    assert_eq!(v["base64"], "paXerb7v");
    ok(
        &mut a,
        json!({"op": "write_mr", "mr": mr, "offset": 64, "hex": ""}),
    );
    let v = ok(
        &mut a,
        json!({"op": "reg_mr", "pd": pd, "length": 3, "base64": "AAEC"}),
    );
    let mr2 = v["mr"].as_u64().unwrap();
    assert_eq!(
        ok(&mut a, json!({"op": "read_mr", "mr": mr2, "length": 3}))["hex"],
        "000102"
    );
    // Errors.
    err(
        &mut a,
        json!({"op": "reg_mr", "pd": 99, "length": 8}),
        "unknown_handle",
        Some("pd"),
    );
    err(
        &mut a,
        json!({"op": "reg_mr", "pd": pd, "length": 1u64 << 40}),
        "out_of_range",
        Some("length"),
    );
    err(
        &mut a,
        json!({"op": "reg_mr", "pd": pd, "length": 8, "access": ["flush_global"]}),
        "unsupported",
        Some("access[0]"),
    );
    err(
        &mut a,
        json!({"op": "reg_mr", "pd": pd, "length": 1, "hex": "0102"}),
        "out_of_bounds",
        Some("hex"),
    );
    err(
        &mut a,
        json!({"op": "reg_mr", "pd": pd, "length": 8, "hex": "01", "base64": "AQ=="}),
        "bad_value",
        Some("base64"),
    );
    err(
        &mut a,
        json!({"op": "reg_mr", "pd": pd, "length": 8, "fill": 256}),
        "out_of_range",
        Some("fill"),
    );
    err(
        &mut a,
        json!({"op": "read_mr", "mr": mr, "offset": 60, "length": 5}),
        "out_of_bounds",
        Some("length"),
    );
    err(
        &mut a,
        json!({"op": "read_mr", "mr": mr, "offset": u64::MAX, "length": 5}),
        "out_of_bounds",
        Some("length"),
    );
    err(
        &mut a,
        json!({"op": "read_mr", "mr": mr, "length": 1 << 20}),
        "out_of_range",
        Some("length"),
    );
    err(
        &mut a,
        json!({"op": "read_mr", "mr": mr, "length": 1, "encoding": "utf8"}),
        "bad_value",
        Some("encoding"),
    );
    err(
        &mut a,
        json!({"op": "read_mr", "mr": 1234, "length": 1}),
        "unknown_handle",
        Some("mr"),
    );
    err(
        &mut a,
        json!({"op": "write_mr", "mr": mr, "offset": 63, "hex": "0102"}),
        "out_of_bounds",
        Some("hex"),
    );
    err(
        &mut a,
        json!({"op": "write_mr", "mr": mr, "hex": "0g"}),
        "bad_value",
        Some("hex"),
    );
    err(
        &mut a,
        json!({"op": "write_mr", "mr": mr, "base64": "A"}),
        "bad_value",
        Some("base64"),
    );
    err(
        &mut a,
        json!({"op": "write_mr", "mr": mr}),
        "missing_field",
        Some("hex"),
    );
    err(
        &mut a,
        json!({"op": "write_mr", "mr": mr, "hex": "00".repeat(300_000)}),
        "out_of_range",
        Some("hex"),
    );
    // A rejected write changed nothing.
    assert_eq!(
        ok(
            &mut a,
            json!({"op": "read_mr", "mr": mr, "offset": 60, "length": 4})
        )["hex"],
        "deadbeef"
    );
    ok(&mut a, json!({"op": "dereg_mr", "mr": mr}));
    err(
        &mut a,
        json!({"op": "dereg_mr", "mr": mr}),
        "unknown_handle",
        Some("mr"),
    );
    err(
        &mut a,
        json!({"op": "read_mr", "mr": mr, "length": 1}),
        "unknown_handle",
        Some("mr"),
    );
}

#[test]
fn qp_lifecycle_and_modify_errors() {
    let mut a = a();
    let (pd, cq, qpn) = rc_qp(&mut a);
    err(
        &mut a,
        json!({"op": "create_qp", "pd": 5, "qp_type": "rc", "send_cq": cq, "recv_cq": cq}),
        "unknown_handle",
        Some("pd"),
    );
    err(
        &mut a,
        json!({"op": "create_qp", "pd": pd, "qp_type": "rc", "send_cq": 9, "recv_cq": cq}),
        "unknown_handle",
        Some("send_cq"),
    );
    err(
        &mut a,
        json!({"op": "create_qp", "pd": pd, "qp_type": "rc", "send_cq": cq, "recv_cq": 9}),
        "unknown_handle",
        Some("recv_cq"),
    );
    err(
        &mut a,
        json!({"op": "create_qp", "pd": pd, "qp_type": "uc", "send_cq": cq, "recv_cq": cq}),
        "unsupported",
        Some("qp_type"),
    );
    err(
        &mut a,
        json!({"op": "create_qp", "pd": pd, "qp_type": "xrc", "send_cq": cq, "recv_cq": cq}),
        "bad_value",
        Some("qp_type"),
    );
    err(
        &mut a,
        json!({"op": "create_qp", "pd": pd, "qp_type": "rc", "send_cq": cq, "recv_cq": cq,
        "caps": {"max_send_sge": 17}}),
        "out_of_range",
        Some("caps.max_send_sge"),
    );
    err(
        &mut a,
        json!({"op": "create_qp", "pd": pd, "qp_type": "rc", "send_cq": cq, "recv_cq": cq,
        "caps": {"max_recv_wr": 0}}),
        "out_of_range",
        Some("caps.max_recv_wr"),
    );

    let q = ok(&mut a, json!({"op": "query_qp", "qpn": qpn}));
    assert_eq!(q["state"], "reset");
    assert_eq!(q["qp_type"], "rc");
    assert_eq!(q["attrs"]["pmtu"], 1024);
    assert_eq!(q["caps"]["max_send_wr"], 1024);

    // MR-QP-2: transitions outside the table, missing and extra attributes.
    err(
        &mut a,
        json!({"op": "modify_qp", "qpn": qpn, "state": "rts"}),
        "invalid_transition",
        Some("state"),
    );
    err(
        &mut a,
        json!({"op": "modify_qp", "qpn": qpn, "state": "init"}),
        "missing_attribute",
        Some("attrs.access"),
    );
    err(
        &mut a,
        json!({"op": "modify_qp", "qpn": qpn, "state": "init", "attrs": {"access": [], "sq_psn": 1}}),
        "unexpected_attribute",
        Some("attrs.sq_psn"),
    );
    err(
        &mut a,
        json!({"op": "modify_qp", "qpn": qpn, "state": "sqd"}),
        "unsupported",
        Some("state"),
    );
    err(
        &mut a,
        json!({"op": "modify_qp", "qpn": 77, "state": "init", "attrs": {"access": []}}),
        "unknown_handle",
        Some("qpn"),
    );
    assert_eq!(
        ok(&mut a, json!({"op": "query_qp", "qpn": qpn}))["state"],
        "reset"
    );

    let [init, mut rtr, rts] = connect_requests(qpn, 0x123, MAC_B, IP_B);
    ok(&mut a, init);
    let good_rtr = rtr.clone();
    rtr["attrs"]["pmtu"] = json!(300);
    err(&mut a, rtr.clone(), "out_of_range", Some("attrs.pmtu"));
    rtr["attrs"]["pmtu"] = json!(1024);
    rtr["attrs"]["path"]["hop_limit"] = json!(0);
    err(
        &mut a,
        rtr.clone(),
        "out_of_range",
        Some("attrs.path.hop_limit"),
    );
    rtr["attrs"]["path"]["hop_limit"] = json!(64);
    rtr["attrs"]["dest_qpn"] = json!(1 << 24);
    err(&mut a, rtr.clone(), "out_of_range", Some("attrs.dest_qpn"));
    rtr["attrs"]["dest_qpn"] = json!(0x123);
    rtr["attrs"]["path"]["dest_mac"] = json!("02:00:00:00:00");
    err(
        &mut a,
        rtr.clone(),
        "bad_value",
        Some("attrs.path.dest_mac"),
    );
    rtr["attrs"]["path"]["dest_mac"] = json!("02:00:00:00:00:0b");
    rtr["attrs"]["path"]["dest_ip"] = json!("fe80::1");
    err(
        &mut a,
        rtr.clone(),
        "unsupported",
        Some("attrs.path.dest_ip"),
    );
    rtr["attrs"]["path"]["dest_ip"] = json!("10.0.0.300");
    err(&mut a, rtr.clone(), "bad_value", Some("attrs.path.dest_ip"));
    rtr["attrs"]["max_dest_rd_atomic"] = json!(200);
    rtr["attrs"]["path"]["dest_ip"] = json!("10.0.0.2");
    err(
        &mut a,
        rtr,
        "out_of_range",
        Some("attrs.max_dest_rd_atomic"),
    );
    assert_eq!(
        ok(&mut a, json!({"op": "query_qp", "qpn": qpn}))["state"],
        "init"
    );
    ok(&mut a, good_rtr);
    let v = ok(&mut a, rts);
    assert_eq!(v["state"], "rts");

    // MR-PICS-5: the effective attributes.
    let q = ok(&mut a, json!({"op": "query_qp", "qpn": qpn}));
    assert_eq!(q["state"], "rts");
    let at = &q["attrs"];
    assert_eq!(at["dest_qpn"], 0x123);
    assert_eq!(at["rq_psn"], 100);
    assert_eq!(at["sq_psn"], 100);
    assert_eq!(at["timeout"], 14);
    assert_eq!(at["min_rnr_timer"], 1);
    assert_eq!(at["path"]["dest_mac"], "02:00:00:00:00:0b");
    assert_eq!(at["path"]["dest_ip"], "10.0.0.2");
    assert_eq!(at["path"]["hop_limit"], 64);
    assert_eq!(
        at["access"],
        json!([
            "local_write",
            "remote_read",
            "remote_write",
            "remote_atomic"
        ])
    );
    assert!(q["udp_src_port"].as_u64().unwrap() >= 0xC000);

    ok(
        &mut a,
        json!({"op": "modify_qp", "qpn": qpn, "state": "rts", "attrs": {"timeout": 20}}),
    );
    assert_eq!(
        ok(&mut a, json!({"op": "query_qp", "qpn": qpn}))["attrs"]["timeout"],
        20
    );
    ok(
        &mut a,
        json!({"op": "modify_qp", "qpn": qpn, "state": "err"}),
    );
    ok(
        &mut a,
        json!({"op": "modify_qp", "qpn": qpn, "state": "reset"}),
    );
    ok(&mut a, json!({"op": "destroy_qp", "qpn": qpn}));
    err(
        &mut a,
        json!({"op": "destroy_qp", "qpn": qpn}),
        "unknown_handle",
        Some("qpn"),
    );
    err(
        &mut a,
        json!({"op": "query_qp", "qpn": qpn}),
        "unknown_handle",
        Some("qpn"),
    );
}

#[test]
fn post_and_poll_errors() {
    let mut a = a();
    let (pd, cq, qpn) = rc_qp(&mut a);
    let mr = ok(
        &mut a,
        json!({"op": "reg_mr", "pd": pd, "length": 64, "access": ["local_write"]}),
    );
    let sge = json!([{"addr": mr["addr"], "length": 8, "lkey": mr["lkey"]}]);
    // RESET accepts neither (SPEC §6.2 behaviour table).
    err(
        &mut a,
        json!({"op": "post_send", "qpn": qpn, "wr_id": 1, "opcode": "send", "sg_list": sge}),
        "wrong_state",
        Some("qpn"),
    );
    err(
        &mut a,
        json!({"op": "post_recv", "qpn": qpn, "wr_id": 1, "sg_list": sge}),
        "wrong_state",
        Some("qpn"),
    );
    err(
        &mut a,
        json!({"op": "post_recv", "qpn": 5, "wr_id": 1}),
        "unknown_handle",
        Some("qpn"),
    );
    // Fields per opcode.
    err(
        &mut a,
        json!({"op": "post_send", "qpn": qpn, "wr_id": 1, "opcode": "rdma_write"}),
        "missing_field",
        Some("remote_addr"),
    );
    err(
        &mut a,
        json!({"op": "post_send", "qpn": qpn, "wr_id": 1, "opcode": "rdma_read", "remote_addr": 0}),
        "missing_field",
        Some("rkey"),
    );
    err(
        &mut a,
        json!({"op": "post_send", "qpn": qpn, "wr_id": 1, "opcode": "send_with_imm"}),
        "missing_field",
        Some("imm"),
    );
    err(
        &mut a,
        json!({"op": "post_send", "qpn": qpn, "wr_id": 1, "opcode": "send", "imm": 1}),
        "unknown_field",
        Some("imm"),
    );
    err(
        &mut a,
        json!({"op": "post_send", "qpn": qpn, "wr_id": 1, "opcode": "atomic_fetch_and_add",
        "remote_addr": 0, "rkey": 1}),
        "missing_field",
        Some("add"),
    );
    err(
        &mut a,
        json!({"op": "post_send", "qpn": qpn, "wr_id": 1, "opcode": "atomic_cmp_and_swp",
        "remote_addr": 0, "rkey": 1, "compare": 1, "swap": 2, "add": 3}),
        "unknown_field",
        Some("add"),
    );
    err(
        &mut a,
        json!({"op": "post_send", "qpn": qpn, "wr_id": 1, "opcode": "rdma_write", "remote_addr": 0, "rkey": 1,
        "sg_list": vec![json!({"addr": 0, "length": 1, "lkey": 1}); 17]}),
        "out_of_range",
        Some("sg_list"),
    );
    err(
        &mut a,
        json!({"op": "post_send", "qpn": qpn, "wr_id": 1, "opcode": "bogus"}),
        "bad_value",
        Some("opcode"),
    );
    err(
        &mut a,
        json!({"op": "post_send", "qpn": qpn, "wr_id": 1, "opcode": "send",
        "ud": {"ip": "10.0.0.2", "mac": "02:00:00:00:00:0b", "qpn": 1 << 24, "qkey": 1}}),
        "out_of_range",
        Some("ud.qpn"),
    );
    // An RC send with a UD destination.
    for r in connect_requests(qpn, 0x42, MAC_B, IP_B) {
        ok(&mut a, r);
    }
    err(
        &mut a,
        json!({"op": "post_send", "qpn": qpn, "wr_id": 1, "opcode": "send",
        "ud": {"ip": "10.0.0.2", "mac": "02:00:00:00:00:0b", "qpn": 5, "qkey": 1}}),
        "bad_destination",
        Some("ud"),
    );
    // Queue depth: caps.max_recv_wr = 2.
    let qp2 = ok(
        &mut a,
        json!({"op": "create_qp", "pd": pd, "qp_type": "rc", "send_cq": cq, "recv_cq": cq,
        "caps": {"max_recv_wr": 2, "max_recv_sge": 1}}),
    )["qpn"]
        .clone();
    ok(
        &mut a,
        json!({"op": "modify_qp", "qpn": qp2, "state": "init", "attrs": {"access": []}}),
    );
    err(
        &mut a,
        json!({"op": "post_recv", "qpn": qp2, "wr_id": 1, "sg_list": [sge[0], sge[0]]}),
        "out_of_range",
        Some("sg_list"),
    );
    ok(
        &mut a,
        json!({"op": "post_recv", "qpn": qp2, "wr_id": 1, "sg_list": sge}),
    );
    ok(
        &mut a,
        json!({"op": "post_recv", "qpn": qp2, "wr_id": 2, "sg_list": sge}),
    );
    err(
        &mut a,
        json!({"op": "post_recv", "qpn": qp2, "wr_id": 3, "sg_list": sge}),
        "resource_exhausted",
        Some("qpn"),
    );
    assert_eq!(
        ok(&mut a, json!({"op": "query_qp", "qpn": qp2}))["outstanding"]["recv"],
        2
    );
    // Flushed in ERR (MR-QP-6), polled in order, status number and name.
    ok(
        &mut a,
        json!({"op": "modify_qp", "qpn": qp2, "state": "err"}),
    );
    let v = ok(&mut a, json!({"op": "poll_cq", "cq": cq, "max": 1}));
    let c = &v["completions"];
    assert_eq!(c.as_array().unwrap().len(), 1);
    assert_eq!(c[0]["wr_id"], 1);
    assert_eq!(c[0]["status"], 5);
    assert_eq!(c[0]["status_name"], "WR_FLUSH_ERR");
    assert_eq!(c[0]["opcode"], "recv");
    assert_eq!(c[0]["qpn"], qp2);
    assert_eq!(
        ok(&mut a, json!({"op": "poll_cq", "cq": cq}))["completions"][0]["wr_id"],
        2
    );
    assert_eq!(
        ok(&mut a, json!({"op": "poll_cq", "cq": cq}))["completions"],
        json!([])
    );
    // poll_cq bounds, and a wait.
    err(
        &mut a,
        json!({"op": "poll_cq", "cq": 77}),
        "unknown_handle",
        Some("cq"),
    );
    err(
        &mut a,
        json!({"op": "poll_cq", "cq": cq, "max": 0}),
        "out_of_range",
        Some("max"),
    );
    err(
        &mut a,
        json!({"op": "poll_cq", "cq": cq, "max": 5000}),
        "out_of_range",
        Some("max"),
    );
    err(
        &mut a,
        json!({"op": "poll_cq", "cq": cq, "wait_ms": 10_001}),
        "out_of_range",
        Some("wait_ms"),
    );
    match a.handle_line(br#"{"id":5,"op":"poll_cq","cq":0,"wait_ms":100}"#) {
        Action::Wait(p) => {
            assert_eq!((p.id, p.cq, p.max, p.wait_ms), (5, 0, 16, 100));
            assert_eq!(a.try_poll(&p), None);
            let r = a.finish_poll(&p);
            let v: Value = serde_json::from_str(&r.to_json()).unwrap();
            assert_eq!(v, json!({"id": 5, "ok": true, "completions": []}));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn counters_reset_bye() {
    let mut a = a();
    let v = ok(&mut a, json!({"op": "counters"}));
    let names = [
        "icrc_errors",
        "malformed_drops",
        "unknown_qp_drops",
        "pkey_violations",
        "qkey_violations",
        "seq_naks_sent",
        "rnr_naks_sent",
        "duplicate_requests",
        "local_ack_timeouts",
        "retransmitted_packets",
        "cnp_sent",
        "cnp_received",
        "ecn_ce_received",
        "mp_out_of_window",
        "mp_trimmed_received",
        "mp_retx_reorder",
        "mp_retx_timeout",
        "mp_retx_trim",
        "mp_probes_sent",
        "mp_entropy_retired",
    ];
    assert_eq!(v["counters"].as_object().unwrap().len(), names.len());
    for n in names {
        assert_eq!(v["counters"][n], 0, "{n}");
    }
    a.device_mut().handle_frame(1, &[0u8; 3]);
    assert_eq!(
        ok(&mut a, json!({"op": "counters"}))["extra"]["frames_received"],
        1
    );

    let (_, cq, qpn) = rc_qp(&mut a);
    let before = ok(&mut a, json!({"op": "reg_mr", "pd": 0, "length": 8}))["rkey"].clone();
    ok(&mut a, json!({"op": "reset"}));
    err(
        &mut a,
        json!({"op": "query_qp", "qpn": qpn}),
        "unknown_handle",
        Some("qpn"),
    );
    err(
        &mut a,
        json!({"op": "poll_cq", "cq": cq}),
        "unknown_handle",
        Some("cq"),
    );
    err(
        &mut a,
        json!({"op": "reg_mr", "pd": 0, "length": 8}),
        "unknown_handle",
        Some("pd"),
    );
    assert_eq!(
        ok(&mut a, json!({"op": "counters"}))["extra"]["frames_received"],
        0
    );
    // A fresh seed: keys differ from the first life of the device.
    ok(&mut a, json!({"op": "alloc_pd"}));
    let after = ok(&mut a, json!({"op": "reg_mr", "pd": 0, "length": 8}))["rkey"].clone();
    assert_ne!(before, after);

    match a.handle_line(br#"{"id":1,"op":"bye"}"#) {
        Action::Close(r) => assert_eq!(r.to_json(), r#"{"id":1,"ok":true}"#),
        other => panic!("{other:?}"),
    }
    err(
        &mut a,
        json!({"op": "bye", "now": true}),
        "unknown_field",
        Some("now"),
    );
}

/// Two agents, frames moved by hand: SEND with immediate, WRITE, WRITE with
/// immediate, READ, both atomics, SEND with Invalidate, all by JSON.
#[test]
fn transfers_between_two_agents() {
    let mut a = agent(MAC_A, IP_A, 1);
    let mut b = agent(MAC_B, IP_B, 2);
    let (pda, cqa, qa) = rc_qp(&mut a);
    let (pdb, cqb, qb) = rc_qp(&mut b);
    for r in connect_requests(qa, qb, MAC_B, IP_B) {
        ok(&mut a, r);
    }
    for r in connect_requests(qb, qa, MAC_A, IP_A) {
        ok(&mut b, r);
    }
    let all = json!([
        "local_write",
        "remote_read",
        "remote_write",
        "remote_atomic"
    ]);
    let src = ok(
        &mut a,
        json!({"op": "reg_mr", "pd": pda, "length": 4096, "access": all}),
    );
    let dst = ok(
        &mut b,
        json!({"op": "reg_mr", "pd": pdb, "length": 4096, "access": all, "fill": 0x11}),
    );
    let data: String = (0..3000u32)
        .map(|i| format!("{:02x}", (i * 7 + 3) as u8))
        .collect();
    ok(
        &mut a,
        json!({"op": "write_mr", "mr": src["mr"], "hex": data}),
    );
    let sge = |m: &Value, off: u64, len: u64| json!([{"addr": m["addr"].as_u64().unwrap() + off, "length": len, "lkey": m["lkey"]}]);

    ok(
        &mut b,
        json!({"op": "post_recv", "qpn": qb, "wr_id": 10, "sg_list": sge(&dst, 0, 4096)}),
    );
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 1, "opcode": "send_with_imm", "imm": 0xdeadbeefu32,
        "sg_list": sge(&src, 0, 3000)}),
    );
    shuttle(&mut a, &mut b);
    let ca = ok(&mut a, json!({"op": "poll_cq", "cq": cqa}))["completions"].clone();
    assert_eq!(ca[0]["wr_id"], 1);
    assert_eq!(ca[0]["status_name"], "SUCCESS");
    assert_eq!(ca[0]["opcode"], "send");
    let cb = ok(&mut b, json!({"op": "poll_cq", "cq": cqb}))["completions"].clone();
    assert_eq!(cb[0]["wr_id"], 10);
    assert_eq!(cb[0]["opcode"], "recv");
    assert_eq!(cb[0]["byte_len"], 3000);
    assert_eq!(cb[0]["imm"], 0xdeadbeefu32);
    assert_eq!(cb[0]["src_qp"], Value::Null);
    let got = ok(
        &mut b,
        json!({"op": "read_mr", "mr": dst["mr"], "length": 3001}),
    )["hex"]
        .clone();
    assert_eq!(got.as_str().unwrap(), format!("{data}11"));

    // WRITE to offset 1000, READ it back into A at offset 3000.
    let remote = |m: &Value, off: u64| (m["addr"].as_u64().unwrap() + off, m["rkey"].clone());
    let (va, rkey) = remote(&dst, 1000);
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 2, "opcode": "rdma_write", "remote_addr": va, "rkey": rkey,
        "sg_list": sge(&src, 0, 8)}),
    );
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 3, "opcode": "rdma_read", "remote_addr": va, "rkey": rkey,
        "sg_list": sge(&src, 3000, 16)}),
    );
    let (va8, _) = remote(&dst, 2048);
    ok(
        &mut b,
        json!({"op": "write_mr", "mr": dst["mr"], "offset": 2048, "hex": "0500000000000000"}),
    );
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 4, "opcode": "atomic_fetch_and_add", "remote_addr": va8,
        "rkey": rkey, "add": 10, "sg_list": sge(&src, 3100, 8)}),
    );
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 5, "opcode": "atomic_cmp_and_swp", "remote_addr": va8,
        "rkey": rkey, "compare": 15, "swap": u64::MAX, "sg_list": sge(&src, 3108, 8)}),
    );
    ok(
        &mut b,
        json!({"op": "post_recv", "qpn": qb, "wr_id": 11, "sg_list": []}),
    );
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 6, "opcode": "rdma_write_with_imm", "remote_addr": va,
        "rkey": rkey, "imm": 7, "sg_list": []}),
    );
    shuttle(&mut a, &mut b);
    let ca = ok(&mut a, json!({"op": "poll_cq", "cq": cqa, "max": 10}))["completions"].clone();
    let ids: Vec<u64> = ca
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["wr_id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [2, 3, 4, 5, 6]);
    assert!(
        ca.as_array().unwrap().iter().all(|c| c["status"] == 0),
        "{ca}"
    );
    assert_eq!(ca[1]["opcode"], "rdma_read");
    assert_eq!(ca[1]["byte_len"], 16);
    assert_eq!(ca[2]["opcode"], "fetch_add");
    assert_eq!(ca[3]["opcode"], "comp_swap");
    let back = ok(
        &mut a,
        json!({"op": "read_mr", "mr": src["mr"], "offset": 3000, "length": 16}),
    )["hex"]
        .clone();
    // dst[1000..1008] came from the WRITE, dst[1008..1016] from the SEND.
    assert_eq!(
        back.as_str().unwrap(),
        format!("{}{}", &data[..16], &data[2016..2032])
    );
    let olds = ok(
        &mut a,
        json!({"op": "read_mr", "mr": src["mr"], "offset": 3100, "length": 16}),
    )["hex"]
        .clone();
    assert_eq!(olds, "05000000000000000f00000000000000");
    assert_eq!(
        ok(
            &mut b,
            json!({"op": "read_mr", "mr": dst["mr"], "offset": 2048, "length": 8})
        )["hex"],
        "ffffffffffffffff"
    );
    let cb = ok(&mut b, json!({"op": "poll_cq", "cq": cqb}))["completions"].clone();
    assert_eq!(cb[0]["wr_id"], 11);
    assert_eq!(cb[0]["opcode"], "recv_rdma_with_imm");
    assert_eq!(cb[0]["imm"], 7);

    // SEND with Invalidate of B's region, then a WRITE to it fails remotely.
    ok(
        &mut b,
        json!({"op": "post_recv", "qpn": qb, "wr_id": 12, "sg_list": []}),
    );
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 7, "opcode": "send_with_inv", "invalidate_rkey": rkey}),
    );
    shuttle(&mut a, &mut b);
    let cb = ok(&mut b, json!({"op": "poll_cq", "cq": cqb}))["completions"].clone();
    assert_eq!(cb[0]["invalidated_rkey"], rkey);
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 8, "opcode": "rdma_write", "remote_addr": va, "rkey": rkey,
        "sg_list": sge(&src, 0, 8)}),
    );
    shuttle(&mut a, &mut b);
    let ca = ok(&mut a, json!({"op": "poll_cq", "cq": cqa, "max": 10}))["completions"].clone();
    assert_eq!(ca[0]["wr_id"], 7);
    assert_eq!(ca[1]["wr_id"], 8);
    assert_eq!(ca[1]["status"], 10);
    assert_eq!(ca[1]["status_name"], "REM_ACCESS_ERR");
    assert_eq!(
        ok(&mut a, json!({"op": "query_qp", "qpn": qa}))["state"],
        "err"
    );
}

#[test]
fn ud_through_the_agent() {
    let mut a = agent(MAC_A, IP_A, 3);
    let mut b = agent(MAC_B, IP_B, 4);
    let ud = |x: &mut metaroce_ref::agent::Agent| {
        let pd = ok(x, json!({"op": "alloc_pd"}))["pd"].clone();
        let cq = ok(x, json!({"op": "create_cq"}))["cq"].clone();
        let qpn = ok(
            x,
            json!({"op": "create_qp", "pd": pd, "qp_type": "ud", "send_cq": cq, "recv_cq": cq}),
        )["qpn"]
            .clone();
        ok(
            x,
            json!({"op": "modify_qp", "qpn": qpn, "state": "init", "attrs": {"q_key": 0x1111}}),
        );
        ok(x, json!({"op": "modify_qp", "qpn": qpn, "state": "rtr"}));
        ok(
            x,
            json!({"op": "modify_qp", "qpn": qpn, "state": "rts", "attrs": {"sq_psn": 5}}),
        );
        let mr = ok(
            x,
            json!({"op": "reg_mr", "pd": pd, "length": 256, "access": ["local_write"], "fill": 0x77}),
        );
        (cq, qpn, mr)
    };
    let (cqa, qa, mra) = ud(&mut a);
    let (cqb, qb, mrb) = ud(&mut b);
    ok(
        &mut b,
        json!({"op": "post_recv", "qpn": qb, "wr_id": 1, "sg_list": [{"addr": mrb["addr"], "length": 256, "lkey": mrb["lkey"]}]}),
    );
    let dest = json!({"ip": "10.0.0.2", "mac": "02:00:00:00:00:0b", "qpn": qb, "qkey": 0x1111});
    err(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 1, "opcode": "send"}),
        "bad_destination",
        Some("ud"),
    );
    err(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 1, "opcode": "rdma_write", "remote_addr": 0, "rkey": 0,
        "ud": dest}),
        "unsupported",
        Some("opcode"),
    );
    ok(
        &mut a,
        json!({"op": "post_send", "qpn": qa, "wr_id": 2, "opcode": "send", "ud": dest,
        "sg_list": [{"addr": mra["addr"], "length": 100, "lkey": mra["lkey"]}]}),
    );
    shuttle(&mut a, &mut b);
    assert_eq!(
        ok(&mut a, json!({"op": "poll_cq", "cq": cqa}))["completions"][0]["status"],
        0
    );
    let c = ok(&mut b, json!({"op": "poll_cq", "cq": cqb}))["completions"][0].clone();
    assert_eq!(c["byte_len"], 140); // 40 bytes of network-header space (MR-UD-6)
    assert_eq!(c["src_qp"], qa);
    let got = ok(
        &mut b,
        json!({"op": "read_mr", "mr": mrb["mr"], "offset": 40, "length": 100}),
    )["hex"]
        .clone();
    assert_eq!(got.as_str().unwrap(), "77".repeat(100));
}
