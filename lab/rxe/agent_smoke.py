#!/usr/bin/env python3
"""agent_smoke.py HOST:PORT -- bad and edge-case requests against a live
metaroce-agent-verbs (AGENT.md §2 rule 1: never crash, a rejected request
changes nothing; §5 error codes). Run by certify.sh before the suite, on the
real device. Exit 0 when every reply has the expected code and the agent
still answers; prints one line per case."""
import json, socket, sys

host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
f = s.makefile("rwb")
n = 0

def call(obj_or_line):
    global n
    n += 1
    line = obj_or_line if isinstance(obj_or_line, bytes) else json.dumps(obj_or_line).encode()
    f.write(line + b"\n"); f.flush()
    return json.loads(f.readline())

bad = 0
def expect(req, code, why):
    global bad
    r = call(req)
    got = "ok" if r.get("ok") else r.get("error", {}).get("code")
    mark = "ok  " if got == code else "BAD "
    if got != code:
        bad += 1
    print(f"{mark} {why}: expected {code}, got {got}" + ("" if got == code else f" {r}"))
    return r

expect({"id": 1, "op": "reset"}, "ok", "reset")
pd = expect({"id": 2, "op": "alloc_pd"}, "ok", "alloc_pd")["pd"]
cq = expect({"id": 3, "op": "create_cq"}, "ok", "create_cq")["cq"]
mr = expect({"id": 4, "op": "reg_mr", "pd": pd, "length": 64, "access": ["local_write", "remote_read"], "canary_len": 16}, "ok", "reg_mr with canaries")
qp = expect({"id": 5, "op": "create_qp", "pd": pd, "qp_type": "rc", "send_cq": cq, "recv_cq": cq}, "ok", "create_qp")["qpn"]
expect(b"{not json", "bad_json", "malformed JSON")
expect(b'{"id":6,"op":"reset","op":"reset"}', "bad_json", "duplicate key")
expect({"id": 7, "op": "launch"}, "unknown_op", "unknown op")
expect({"id": 8, "op": "alloc_pd", "x": 1}, "unknown_field", "unknown field")
expect({"id": 9, "op": "reg_mr", "pd": 999, "length": 8}, "unknown_handle", "reg_mr on a PD that does not exist")
expect({"id": 10, "op": "reg_mr", "pd": pd, "length": 1 << 40}, "out_of_range", "huge MR")
expect({"id": 11, "op": "reg_mr", "pd": pd, "length": 8, "access": ["remote_write"]}, "bad_value", "remote_write without local_write (verbs refuses)")
expect({"id": 12, "op": "read_mr", "mr": mr["mr"], "offset": 60, "length": 8}, "out_of_bounds", "read past the MR")
expect({"id": 13, "op": "post_send", "qpn": qp, "wr_id": 1, "opcode": "send"}, "wrong_state", "post_send in RESET")
expect({"id": 14, "op": "modify_qp", "qpn": qp, "state": "rts"}, "invalid_transition", "RESET -> RTS")
expect({"id": 15, "op": "modify_qp", "qpn": qp, "state": "init"}, "missing_attribute", "RESET -> INIT without access")
expect({"id": 16, "op": "modify_qp", "qpn": qp, "state": "init", "attrs": {"access": [], "mp": True}}, "unsupported", "MP on an mp:false agent (MR-MPN-6)")
expect({"id": 17, "op": "modify_qp", "qpn": qp, "state": "init", "attrs": {"access": ["remote_read"], "p_key": 0x1234}}, "unsupported", "P_Key outside rxe's table")
expect({"id": 18, "op": "modify_qp", "qpn": qp, "state": "init", "attrs": {"access": ["remote_read"]}}, "ok", "RESET -> INIT")
expect({"id": 19, "op": "modify_qp", "qpn": qp, "state": "rtr", "attrs": {"dest_qpn": 17, "rq_psn": 0, "pmtu": 8192, "max_dest_rd_atomic": 1, "min_rnr_timer": 1, "path": {"dest_mac": "02:00:00:00:00:99", "dest_ip": "10.77.0.99"}}}, "out_of_range", "pmtu 8192")
expect({"id": 20, "op": "post_send", "qpn": qp, "wr_id": 1, "opcode": "rdma_read", "remote_addr": 0}, "missing_field", "rdma_read without rkey")
expect({"id": 21, "op": "post_recv", "qpn": qp, "wr_id": 1, "sg_list": [{"addr": mr["addr"], "length": 8, "lkey": mr["lkey"]}] * 17}, "out_of_range", "17 SGEs")
expect({"id": 22, "op": "poll_cq", "cq": cq, "wait_ms": 20}, "ok", "poll_cq waits and returns empty")
r = expect({"id": 23, "op": "query_qp", "qpn": qp}, "ok", "query_qp")
if r.get("state") != "init":
    bad += 1; print(f"BAD  the rejected requests changed the QP: state {r.get('state')}")
r = expect({"id": 24, "op": "read_canary", "mr": mr["mr"]}, "ok", "read_canary")
if r.get("before") != "a5" * 16:
    bad += 1; print(f"BAD  canary {r.get('before')}")
expect({"id": 25, "op": "counters"}, "unsupported", "counters (profile counters: false)")
expect({"id": 26, "op": "hello"}, "ok", "hello after all of the above")
expect({"id": 27, "op": "reset"}, "ok", "reset")
print(f"{n} requests, {bad} unexpected replies")
sys.exit(1 if bad else 0)
