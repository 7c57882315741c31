"""AGENT.md v1: JSON lines over TCP in front of mpnic.Device."""
import base64
import binascii
import ipaddress
import json
import re
import secrets
import socket
import threading
import time

from . import timers
from .device import Device, QP, SWR, STATUS_NAMES, COUNTERS, LOC_PROT_ERR, Cfg
from . import wire as W

MAXLINE = 1048576
LIMITS = {"max_line": MAXLINE, "max_data": 262144, "max_sge": 16, "max_poll": 1024,
          "max_wait_ms": 10000, "max_mr_len": 67108864, "max_total_mr_bytes": 268435456,
          "max_objects": 4096, "max_queue_depth": 65536}
OPS = ["hello", "alloc_pd", "reg_mr", "dereg_mr", "read_mr", "write_mr", "read_canary",
       "create_cq", "create_qp", "modify_qp", "query_qp", "destroy_qp", "post_send",
       "post_recv", "poll_cq", "counters", "reset", "bye"]
PROFILE = {
    "rc": True, "uc": False, "ud": False, "atomics": True, "flush": False,
    "atomic_write": False, "send_with_invalidate": True, "immediate": True, "ipv4": True,
    "ipv6": False, "vlan": False, "sqd": False, "max_pmtu": 4096, "max_msg_size": 1 << 31,
    "max_rd_atomic": 16, "max_dest_rd_atomic": 16, "credits": False,
    "cnp_generation": False, "cnp_pacing_scope": "qp", "dcqcn_reaction": False,
    "udp_checksum_tx": "zero", "counters": True, "implementation_chosen_psn": False,
    "mp": True, "mp_entropy_set_max": 256, "mp_window_max": 16384, "mp_trimming": False,
    "mp_flow_label_entropy": False, "mp_max_staged_bytes": Cfg.staged_max,
}
ACCESS = {"local_write", "remote_read", "remote_write", "remote_atomic", "flush_global",
          "flush_persistent"}
STATES = {"reset", "init", "rtr", "rts", "sqd", "sqe", "err"}
TRANS = {  # (from, to) -> (required, accepted)
    ("reset", "init"): (set(), {"access", "p_key"}),
    ("init", "init"): (set(), {"access", "p_key"}),
    ("init", "rtr"): ({"dest_qpn", "rq_psn", "pmtu", "path", "max_dest_rd_atomic", "min_rnr_timer"},
                      {"access", "p_key", "mp", "mp_entropy_set", "mp_entropy_set_size",
                       "mp_window", "mp_trim_dscp", "mp_flow_label_entropy", "mp_reorder_threshold",
                       "mp_max_staged_bytes", "mp_peer_resource_nak", "mp_peer_ordered",
                       "mp_ack_dscp"}),
    ("rtr", "rts"): ({"sq_psn", "timeout", "retry_cnt", "rnr_retry", "max_rd_atomic"},
                     {"access", "min_rnr_timer"}),
    ("rts", "rts"): (set(), {"timeout", "retry_cnt", "rnr_retry", "min_rnr_timer", "access"}),
}
MP_KEYS = {"mp", "mp_entropy_set", "mp_entropy_set_size", "mp_window", "mp_trim_dscp",
           "mp_flow_label_entropy", "mp_reorder_threshold", "mp_max_staged_bytes",
           "mp_peer_resource_nak", "mp_peer_ordered", "mp_ack_dscp"}
WR_OPS = {
    "send": (set(), "send", W.SEND, "send"),
    "send_with_imm": ({"imm"}, "send", W.SEND_IMM, "send"),
    "send_with_inv": ({"invalidate_rkey"}, "send", W.SEND_INV, "send"),
    "rdma_write": ({"remote_addr", "rkey"}, "write", W.WRITE, "rdma_write"),
    "rdma_write_with_imm": ({"remote_addr", "rkey", "imm"}, "write", W.WRITE_IMM, "rdma_write"),
    "rdma_read": ({"remote_addr", "rkey"}, "read", W.READ_REQ, "rdma_read"),
    "atomic_cmp_and_swp": ({"remote_addr", "rkey", "compare", "swap"}, "atomic", W.CMP_SWAP, "comp_swap"),
    "atomic_fetch_and_add": ({"remote_addr", "rkey", "add"}, "atomic", W.FETCH_ADD, "fetch_add"),
}


class AErr(Exception):
    def __init__(self, code, msg, field=None):
        super().__init__(msg)
        self.code, self.msg, self.field = code, msg, field


def _nodup(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError("duplicate key " + k)
        d[k] = v
    return d


def _int(v, field, lo, hi):
    if isinstance(v, bool) or not isinstance(v, int):
        raise AErr("bad_type", f"{field}: expected integer", field)
    if v < lo or v > hi:
        raise AErr("out_of_range", f"{field}: {v} not in {lo}..{hi}", field)
    return v


def _bool(v, field):
    if not isinstance(v, bool):
        raise AErr("bad_type", f"{field}: expected bool", field)
    return v


def _str(v, field):
    if not isinstance(v, str):
        raise AErr("bad_type", f"{field}: expected string", field)
    return v


def _obj(v, field):
    if not isinstance(v, dict):
        raise AErr("bad_type", f"{field}: expected object", field)
    return v


def _fields(req, allowed, required=(), prefix=""):
    for k in req:
        if k not in allowed:
            raise AErr("unknown_field", f"{prefix}{k}: unknown field", prefix + k)
    for k in required:
        if k not in req:
            raise AErr("missing_field", f"{prefix}{k}: missing", prefix + k)


def _mac(v, field):
    _str(v, field)
    if not re.fullmatch(r"[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}", v):
        raise AErr("bad_value", f"{field}: bad MAC", field)
    return bytes(int(x, 16) for x in re.split("[:-]", v))


def _ip(v, field):
    _str(v, field)
    try:
        a = ipaddress.ip_address(v)
    except ValueError:
        raise AErr("bad_value", f"{field}: bad IP", field)
    if a.version == 6:
        raise AErr("unsupported", f"{field}: IPv6 not supported", field)
    return a.packed


def _access(v, field):
    if not isinstance(v, list):
        raise AErr("bad_type", f"{field}: expected array", field)
    out = []
    for i, a in enumerate(v):
        _str(a, f"{field}[{i}]")
        if a not in ACCESS:
            raise AErr("bad_value", f"{field}[{i}]: unknown flag", f"{field}[{i}]")
        if a.startswith("flush"):
            raise AErr("unsupported", f"{field}[{i}]: flush not supported", f"{field}[{i}]")
        out.append(a)
    return out


def _bytes(req, required):
    h, b = req.get("hex"), req.get("base64")
    if h is not None and b is not None:
        raise AErr("bad_value", "hex and base64 both given", "hex")
    if h is not None:
        _str(h, "hex")
        try:
            if len(h) % 2:
                raise ValueError
            return bytes.fromhex(h)
        except ValueError:
            raise AErr("bad_value", "hex: malformed", "hex")
    if b is not None:
        _str(b, "base64")
        try:
            return base64.b64decode(b, validate=True)
        except (binascii.Error, ValueError):
            raise AErr("bad_value", "base64: malformed", "base64")
    if required:
        raise AErr("missing_field", "hex: missing", "hex")
    return None


class Agent:
    def __init__(self, dev: Device, name="mpnic"):
        self.dev = dev
        self.name = name

    # ------------------------------------------------------------------
    def handle_line(self, line: bytes):
        """returns (reply dict, close?)"""
        try:
            txt = line.decode("utf-8")
            req = json.loads(txt, object_pairs_hook=_nodup)
        except (UnicodeDecodeError, ValueError, RecursionError):
            return {"id": None, "ok": False, "error": {"code": "bad_json", "message": "bad JSON"}}, False
        if not isinstance(req, dict):
            return {"id": None, "ok": False, "error": {"code": "bad_request", "message": "not an object"}}, False
        rid = req.get("id")
        if isinstance(rid, bool) or not isinstance(rid, int) or rid < 0 or rid > 2**64 - 1:
            return {"id": None, "ok": False, "error": {"code": "bad_request", "message": "id"}}, False
        try:
            if "v" in req and (isinstance(req["v"], bool) or req["v"] != 1):
                raise AErr("unsupported_version", "v must be 1", "v")
            op = req.get("op")
            if op is None:
                raise AErr("missing_field", "op: missing", "op")
            if not isinstance(op, str):
                raise AErr("bad_type", "op: expected string", "op")
            if op not in OPS:
                raise AErr("unknown_op", f"op: unknown {op}", "op")
            args = {k: v for k, v in req.items() if k not in ("id", "op", "v")}
            if op == "poll_cq":
                res = self.op_poll_cq(args)
            else:
                with self.dev.lock:
                    if op in ("read_mr", "read_canary", "query_qp", "counters", "post_send") and self.dev.drain:
                        try:
                            self.dev.drain()
                        except Exception:
                            import traceback
                            traceback.print_exc()
                    res = getattr(self, "op_" + op)(args)
            out = {"id": rid, "ok": True}
            out.update(res or {})
            return out, op == "bye"
        except AErr as e:
            err = {"code": e.code, "message": e.msg}
            if e.field:
                err["field"] = e.field
            return {"id": rid, "ok": False, "error": err}, False
        except Exception as e:  # never crash
            import traceback
            traceback.print_exc()
            return {"id": rid, "ok": False, "error": {"code": "internal", "message": repr(e)}}, False

    # ------------------------------------------------------------------ ops
    def op_hello(self, a):
        _fields(a, {"client"})
        return {"v": 1, "implementation": {"name": self.name, "version": "0.1"},
                "profile": {**PROFILE, **timers.declared()},
                "addresses": {"mac": ":".join(f"{x:02x}" for x in self.dev.mac),
                              "ipv4": str(ipaddress.ip_address(self.dev.ip)), "ipv6": None},
                "limits": LIMITS, "ops": OPS}

    def op_bye(self, a):
        _fields(a, set())
        return {}

    def op_reset(self, a):
        _fields(a, set())
        self.dev.reset()
        return {}

    def op_counters(self, a):
        _fields(a, set())
        return {"counters": dict(self.dev.counters)}

    def op_alloc_pd(self, a):
        _fields(a, set())
        d = self.dev
        if len(d.pds) >= LIMITS["max_objects"]:
            raise AErr("resource_exhausted", "pds")
        h = d.next_pd
        d.next_pd += 1
        d.pds.add(h)
        return {"pd": h}

    def _pd(self, v, field="pd"):
        _int(v, field, 0, 2**32 - 1)
        if v not in self.dev.pds:
            raise AErr("unknown_handle", f"{field}: no such handle {v}", field)
        return v

    def _mr(self, v, field="mr"):
        _int(v, field, 0, 2**32 - 1)
        m = self.dev.mrs.get(v)
        if m is None:
            raise AErr("unknown_handle", f"{field}: no such handle {v}", field)
        return m

    def _cq(self, v, field):
        _int(v, field, 0, 2**32 - 1)
        if v not in self.dev.cqs:
            raise AErr("unknown_handle", f"{field}: no such handle {v}", field)
        return v

    def _qp(self, v, field="qpn"):
        _int(v, field, 0, 2**32 - 1)
        q = self.dev.qps.get(v)
        if q is None:
            raise AErr("unknown_handle", f"{field}: no such QP {v}", field)
        return q

    def op_reg_mr(self, a):
        _fields(a, {"pd", "length", "access", "fill", "hex", "base64", "canary_len", "canary_fill"},
                ["pd", "length"])
        pd = self._pd(a["pd"])
        ln = _int(a["length"], "length", 0, 2**64 - 1)
        if ln > LIMITS["max_mr_len"]:
            raise AErr("out_of_range", "length: above max_mr_len", "length")
        acc = _access(a.get("access", []), "access")
        fill = _int(a.get("fill", 0), "fill", 0, 255)
        can = _int(a.get("canary_len", 0), "canary_len", 0, 2**64 - 1)
        if can > 4096:
            raise AErr("out_of_range", "canary_len: above 4096", "canary_len")
        cfill = _int(a.get("canary_fill", 0xA5), "canary_fill", 0, 255)
        data = _bytes(a, False)
        if data is not None and len(data) > LIMITS["max_data"]:
            raise AErr("out_of_range", "hex: too long", "hex")
        if data is not None and len(data) > ln:
            raise AErr("out_of_bounds", "hex: longer than the MR", "hex")
        tot = sum(m.length for m in self.dev.mrs.values())
        if tot + ln > LIMITS["max_total_mr_bytes"] or len(self.dev.mrs) >= LIMITS["max_objects"]:
            raise AErr("resource_exhausted", "memory")
        h, mr = self.dev.reg_mr(pd, ln, acc, fill, data, can, cfill)
        return {"mr": h, "addr": mr.addr, "length": ln, "lkey": mr.lkey, "rkey": mr.rkey}

    def op_dereg_mr(self, a):
        _fields(a, {"mr"}, ["mr"])
        self._mr(a["mr"])
        del self.dev.mrs[a["mr"]]
        return {}

    def op_read_mr(self, a):
        _fields(a, {"mr", "offset", "length", "encoding"}, ["mr", "length"])
        m = self._mr(a["mr"])
        off = _int(a.get("offset", 0), "offset", 0, 2**64 - 1)
        ln = _int(a["length"], "length", 0, 2**64 - 1)
        if ln > LIMITS["max_data"]:
            raise AErr("out_of_range", "length: above max_data", "length")
        enc = _str(a.get("encoding", "hex"), "encoding")
        if enc not in ("hex", "base64"):
            raise AErr("bad_value", "encoding", "encoding")
        if off + ln > m.length:
            raise AErr("out_of_bounds", "offset+length beyond the MR", "length")
        data = m.read(m.addr + off, ln)
        out = {"mr": a["mr"], "offset": off, "length": ln}
        out[enc] = data.hex() if enc == "hex" else base64.b64encode(data).decode()
        return out

    def op_write_mr(self, a):
        _fields(a, {"mr", "offset", "hex", "base64"}, ["mr"])
        m = self._mr(a["mr"])
        off = _int(a.get("offset", 0), "offset", 0, 2**64 - 1)
        data = _bytes(a, True)
        if len(data) > LIMITS["max_data"]:
            raise AErr("out_of_range", "data too long", "hex")
        if off + len(data) > m.length:
            raise AErr("out_of_bounds", "beyond the MR", "offset")
        m.write(m.addr + off, data)
        return {"mr": a["mr"], "offset": off, "length": len(data)}

    def op_read_canary(self, a):
        _fields(a, {"mr"}, ["mr"])
        m = self._mr(a["mr"])
        c = m.canary
        return {"mr": a["mr"], "before": bytes(m.buf[:c]).hex(),
                "after": bytes(m.buf[c + m.length:]).hex()}

    def op_create_cq(self, a):
        _fields(a, set())
        from .device import CQ
        d = self.dev
        if len(d.cqs) >= LIMITS["max_objects"]:
            raise AErr("resource_exhausted", "cqs")
        h = d.next_cq
        d.next_cq += 1
        d.cqs[h] = CQ()
        return {"cq": h}

    def op_create_qp(self, a):
        _fields(a, {"pd", "qp_type", "send_cq", "recv_cq", "sq_sig_all", "caps"},
                ["pd", "qp_type", "send_cq", "recv_cq"])
        pd = self._pd(a["pd"])
        t = _str(a["qp_type"], "qp_type")
        if t not in ("rc", "uc", "ud"):
            raise AErr("bad_value", "qp_type", "qp_type")
        if t != "rc":
            raise AErr("unsupported", f"qp_type: {t} not supported", "qp_type")
        scq = self._cq(a["send_cq"], "send_cq")
        rcq = self._cq(a["recv_cq"], "recv_cq")
        sig = _bool(a.get("sq_sig_all", False), "sq_sig_all")
        caps = {"max_send_wr": 1024, "max_recv_wr": 1024, "max_send_sge": 16, "max_recv_sge": 16}
        if "caps" in a:
            c = _obj(a["caps"], "caps")
            _fields(c, set(caps), prefix="caps.")
            for k, v in c.items():
                hi = LIMITS["max_queue_depth"] if k.endswith("_wr") else LIMITS["max_sge"]
                caps[k] = _int(v, "caps." + k, 1, hi)
        if len(self.dev.qps) >= LIMITS["max_objects"]:
            raise AErr("resource_exhausted", "qps")
        while True:
            qpn = secrets.randbelow(0xFFFFFE - 2) + 2
            if qpn not in self.dev.qps:
                break
        self.dev.qps[qpn] = QP(self.dev, qpn, pd, t, scq, rcq, sig, caps)
        return {"qpn": qpn, "qp_type": t, "state": "reset", "caps": caps}

    def op_modify_qp(self, a):
        _fields(a, {"qpn", "state", "attrs"}, ["qpn", "state"])
        qp = self._qp(a["qpn"])
        st = _str(a["state"], "state")
        if st not in STATES:
            raise AErr("bad_value", "state: unknown", "state")
        attrs = _obj(a.get("attrs", {}), "attrs")
        known = {"access", "p_key", "q_key", "dest_qpn", "rq_psn", "sq_psn", "pmtu", "timeout",
                 "retry_cnt", "rnr_retry", "min_rnr_timer", "max_rd_atomic", "max_dest_rd_atomic",
                 "path"} | MP_KEYS
        _fields(attrs, known, prefix="attrs.")
        v = {}
        # type/range checks of every given attribute
        for k, x in attrs.items():
            f = "attrs." + k
            if k == "access":
                v[k] = _access(x, f)
            elif k == "p_key":
                _int(x, f, 0, 0xFFFF)
                if x & 0x7FFF == 0:
                    raise AErr("out_of_range", f"{f}: low 15 bits 0", f)
                v[k] = x
            elif k == "q_key":
                v[k] = _int(x, f, 0, 2**32 - 1)
            elif k in ("dest_qpn", "rq_psn", "sq_psn"):
                v[k] = _int(x, f, 0, 0xFFFFFF)
            elif k == "pmtu":
                _int(x, f, 0, 2**32 - 1)
                if x not in (256, 512, 1024, 2048, 4096) or x > PROFILE["max_pmtu"]:
                    raise AErr("out_of_range", f"{f}: bad pmtu", f)
                v[k] = x
            elif k in ("timeout", "min_rnr_timer"):
                v[k] = _int(x, f, 0, 31)
            elif k in ("retry_cnt", "rnr_retry"):
                v[k] = _int(x, f, 0, 7)
            elif k == "max_rd_atomic":
                v[k] = _int(x, f, 1, PROFILE["max_rd_atomic"])
            elif k == "max_dest_rd_atomic":
                v[k] = _int(x, f, 0, PROFILE["max_dest_rd_atomic"])
            elif k == "path":
                p = _obj(x, f)
                _fields(p, {"dest_mac", "dest_ip", "traffic_class", "hop_limit"},
                        ["dest_mac", "dest_ip"], prefix=f + ".")
                v[k] = {"dest_mac": p["dest_mac"], "dest_ip": p["dest_ip"],
                        "dest_mac_b": _mac(p["dest_mac"], f + ".dest_mac"),
                        "dest_ip_b": _ip(p["dest_ip"], f + ".dest_ip"),
                        "traffic_class": _int(p.get("traffic_class", 0), f + ".traffic_class", 0, 255),
                        "hop_limit": _int(p.get("hop_limit", 64), f + ".hop_limit", 1, 255)}
                v[k]["dest_mac"] = ":".join(f"{b:02x}" for b in v[k]["dest_mac_b"])
            elif k == "mp":
                v[k] = _bool(x, f)
            elif k == "mp_entropy_set":
                if not isinstance(x, list):
                    raise AErr("bad_type", f"{f}: expected array", f)
                if len(x) == 0 or len(x) > min(256, PROFILE["mp_entropy_set_max"]):
                    raise AErr("out_of_range", f"{f}: size", f)
                seen = set()
                for i, e in enumerate(x):
                    _int(e, f"{f}[{i}]", 0, 0xFFFF)
                    if e < 0xC000:
                        raise AErr("out_of_range", f"{f}[{i}]: below 0xC000", f"{f}[{i}]")
                    if e in seen:
                        raise AErr("bad_value", f"{f}[{i}]: repeated", f"{f}[{i}]")
                    seen.add(e)
                v[k] = list(x)
            elif k == "mp_entropy_set_size":
                v[k] = _int(x, f, 1, min(256, PROFILE["mp_entropy_set_max"]))
            elif k == "mp_window":
                _int(x, f, 0, 2**32 - 1)
                if x < 64 or x > PROFILE["mp_window_max"]:
                    raise AErr("out_of_range", f"{f}: 64..{PROFILE['mp_window_max']}", f)
                v[k] = x
            elif k in ("mp_trim_dscp", "mp_ack_dscp"):
                # AGENT.md §6.9: 0-63 or null; above 63 out_of_range
                v[k] = None if x is None else _int(x, f, 0, 63)
            elif k == "mp_flow_label_entropy":
                v[k] = _bool(x, f)
            elif k == "mp_reorder_threshold":
                # AGENT.md: 1-64 (SPEC §10.3); outside is out_of_range, never clamped
                v[k] = _int(x, f, 1, 64)
            elif k == "mp_max_staged_bytes":
                # AGENT.md: 0..the declared mp_max_staged_bytes; above is out_of_range
                v[k] = _int(x, f, 0, PROFILE["mp_max_staged_bytes"])
            elif k in ("mp_peer_resource_nak", "mp_peer_ordered"):
                # AGENT.md: accepted whatever mp_resource_nak / mp_ordered_write say;
                # mpnic declares neither: it drops what it refuses and never sets O
                v[k] = _bool(x, f)
        cur = qp.state
        if st in ("reset", "err"):
            if attrs:
                k0 = sorted(attrs)[0]
                raise AErr("unexpected_attribute", f"attrs.{k0}: not for this transition", "attrs." + k0)
            if st == "reset":
                qp.state = "reset"
                qp.attrs = {}
                qp.reset_state()
            else:
                self.dev.qp_to_err(qp)
            return {"qpn": qp.qpn, "state": qp.state}
        tr = TRANS.get((cur, st))
        if tr is None:
            raise AErr("invalid_transition", f"state: {cur} -> {st}", "state")
        req, acc = tr
        for k in attrs:
            if k in MP_KEYS and (cur, st) != ("init", "rtr"):
                raise AErr("unexpected_attribute", f"attrs.{k}: MP attributes only on INIT->RTR", "attrs." + k)
            if k not in req and k not in acc:
                raise AErr("unexpected_attribute", f"attrs.{k}: not for this transition", "attrs." + k)
        mp = v.get("mp", False)
        if not mp:
            for k in attrs:
                if k in MP_KEYS and k != "mp":
                    raise AErr("unexpected_attribute", f"attrs.{k}: without mp: true", "attrs." + k)
        for k in sorted(req):
            if k not in attrs:
                raise AErr("missing_attribute", f"attrs.{k}: required", "attrs." + k)
        if mp:
            es = v.get("mp_entropy_set")
            n = v.get("mp_entropy_set_size")
            if es is not None and n is not None and n != len(es):
                raise AErr("bad_value", "attrs.mp_entropy_set_size: disagrees with the set",
                           "attrs.mp_entropy_set_size")
            td = v.get("mp_trim_dscp")
            if td is not None and td == (v["path"]["traffic_class"] >> 2):
                raise AErr("bad_value", "attrs.mp_trim_dscp: equals the path DSCP", "attrs.mp_trim_dscp")
            ad = v.get("mp_ack_dscp")
            if ad is not None and ad == td:
                # AGENT.md §6.9 rule 5: ACKs never use the trimming DSCP (MR-MPT-9)
                raise AErr("bad_value", "attrs.mp_ack_dscp: equals mp_trim_dscp", "attrs.mp_ack_dscp")
            if v.get("mp_flow_label_entropy"):
                raise AErr("unsupported", "attrs.mp_flow_label_entropy: no IPv6",
                           "attrs.mp_flow_label_entropy")
        # ---- apply
        qp.attrs.update({k: x for k, x in v.items()})
        d = self.dev
        if (cur, st) == ("init", "rtr"):
            qp.mp = mp
            if mp:
                es = v.get("mp_entropy_set")
                if es is None:
                    n = v.get("mp_entropy_set_size", min(128, PROFILE["mp_entropy_set_max"]))
                    es = d.rng.sample(range(0xC000, 0x10000), n)
                qp.evs = es
                qp.attrs["mp_entropy_set"] = es
                qp.attrs["mp_entropy_set_size"] = len(es)
                qp.attrs["mp_window"] = v.get("mp_window", min(1024, PROFILE["mp_window_max"]))
                qp.attrs["mp_trim_dscp"] = v.get("mp_trim_dscp")
                qp.attrs["mp_ack_dscp"] = v.get("mp_ack_dscp")
                qp.attrs["mp_flow_label_entropy"] = v.get("mp_flow_label_entropy", False)
                qp.attrs["mp_reorder_threshold"] = v.get("mp_reorder_threshold", Cfg.K)
                qp.attrs["mp_max_staged_bytes"] = v.get("mp_max_staged_bytes",
                                                        PROFILE["mp_max_staged_bytes"])
                qp.attrs["mp_peer_resource_nak"] = v.get("mp_peer_resource_nak", False)
                qp.attrs["mp_peer_ordered"] = v.get("mp_peer_ordered", False)
                qp.dev_window = qp.attrs["mp_window"]
            else:
                qp.evs = [0xC000 | (qp.qpn & 0x3FFF)]
            from .base import base_init
            base_init(qp)
            qp.c = (v["rq_psn"] - 1) & W.M24
            qp.h = qp.c
            qp.last_cmpl = W.M24
            qp.next_msn_r = 0
        if (cur, st) == ("rtr", "rts"):
            qp.next_psn = v["sq_psn"]
            qp.cum = (v["sq_psn"] - 1) & W.M24
            qp.last_sent = qp.cum
            qp.last_sent_none = True
            qp.retry_left = v["retry_cnt"]
            qp.rnr_left = v["rnr_retry"]
            if not qp.mp:
                from .base_req import req_init
                req_init(qp, v["sq_psn"])
        qp.state = st
        return {"qpn": qp.qpn, "state": qp.state}

    def op_query_qp(self, a):
        _fields(a, {"qpn"}, ["qpn"])
        qp = self._qp(a["qpn"])
        at = {"access": qp.attrs.get("access", []), "p_key": qp.attrs.get("p_key", 0xFFFF),
              "q_key": qp.attrs.get("q_key", 0), "dest_qpn": qp.attrs.get("dest_qpn", 0),
              "rq_psn": qp.attrs.get("rq_psn", 0), "sq_psn": qp.attrs.get("sq_psn", 0),
              "pmtu": qp.attrs.get("pmtu", 1024), "timeout": qp.attrs.get("timeout", 14),
              "retry_cnt": qp.attrs.get("retry_cnt", 7), "rnr_retry": qp.attrs.get("rnr_retry", 7),
              "min_rnr_timer": qp.attrs.get("min_rnr_timer", 12),
              "max_rd_atomic": qp.attrs.get("max_rd_atomic", 16),
              "max_dest_rd_atomic": qp.attrs.get("max_dest_rd_atomic", 16), "mp": qp.mp}
        if "path" in qp.attrs:
            p = qp.attrs["path"]
            at["path"] = {k: p[k] for k in ("dest_mac", "dest_ip", "traffic_class", "hop_limit")}
        out = {"qpn": qp.qpn, "qp_type": qp.qp_type, "state": qp.state, "pd": qp.pd,
               "send_cq": qp.send_cq, "recv_cq": qp.recv_cq, "sq_sig_all": qp.sq_sig_all,
               "caps": qp.caps,
               "outstanding": {"send": len([w for w in qp.sq if not w.done]), "recv": len(qp.rq)}}
        if qp.mp:
            for k in ("mp_entropy_set", "mp_entropy_set_size", "mp_window", "mp_trim_dscp",
                      "mp_ack_dscp", "mp_flow_label_entropy", "mp_reorder_threshold", "mp_max_staged_bytes",
                      "mp_peer_resource_nak", "mp_peer_ordered"):
                at[k] = qp.attrs.get(k)
        elif qp.evs:
            out["udp_src_port"] = qp.evs[0]
        out["attrs"] = at
        return out

    def op_destroy_qp(self, a):
        _fields(a, {"qpn"}, ["qpn"])
        self._qp(a["qpn"])
        del self.dev.qps[a["qpn"]]
        return {}

    def _sgl(self, x, field, maxsge):
        if not isinstance(x, list):
            raise AErr("bad_type", f"{field}: expected array", field)
        if len(x) > maxsge:
            raise AErr("out_of_range", f"{field}: too many SGEs", field)
        out = []
        for i, s in enumerate(x):
            f = f"{field}[{i}]"
            _obj(s, f)
            _fields(s, {"addr", "length", "lkey"}, ["addr", "length", "lkey"], prefix=f + ".")
            out.append({"addr": _int(s["addr"], f + ".addr", 0, 2**64 - 1),
                        "length": _int(s["length"], f + ".length", 0, 2**32 - 1),
                        "lkey": _int(s["lkey"], f + ".lkey", 0, 2**32 - 1)})
        return out

    def op_post_send(self, a):
        allf = {"qpn", "wr_id", "opcode", "sg_list", "signaled", "solicited", "fence",
                "remote_addr", "rkey", "imm", "invalidate_rkey", "compare", "swap", "add", "ud"}
        _fields(a, allf, ["qpn", "wr_id", "opcode"])
        qp = self._qp(a["qpn"])
        wr_id = _int(a["wr_id"], "wr_id", 0, 2**64 - 1)
        opn = _str(a["opcode"], "opcode")
        if opn not in WR_OPS:
            raise AErr("bad_value", "opcode: unknown", "opcode")
        need, kind, mpop, wc = WR_OPS[opn]
        a2 = {k: x for k, x in a.items() if not (k in ("imm",) and x is None)}
        opt = {"remote_addr", "rkey", "imm", "invalidate_rkey", "compare", "swap", "add", "ud"}
        for k in a2:
            if k in opt and k not in need:
                if k == "ud":
                    raise AErr("bad_destination", "ud: RC QP", "ud")
                raise AErr("unknown_field", f"{k}: not for {opn}", k)
        for k in sorted(need):
            if k not in a2:
                raise AErr("missing_field", f"{k}: required for {opn}", k)
        sgl = self._sgl(a.get("sg_list", []), "sg_list", qp.caps["max_send_sge"])
        d = {"wr_id": wr_id, "kind": kind, "mp_op": mpop, "wc_opcode": wc, "sg_list": sgl,
             "signaled": _bool(a.get("signaled", True), "signaled"),
             "solicited": _bool(a.get("solicited", False), "solicited"),
             "fence": _bool(a.get("fence", False), "fence"),
             "remote_addr": _int(a2.get("remote_addr", 0), "remote_addr", 0, 2**64 - 1),
             "rkey": _int(a2.get("rkey", 0), "rkey", 0, 2**32 - 1),
             "imm": _int(a2.get("imm", 0), "imm", 0, 2**32 - 1),
             "invalidate_rkey": _int(a2.get("invalidate_rkey", 0), "invalidate_rkey", 0, 2**32 - 1),
             "compare": _int(a2.get("compare", 0), "compare", 0, 2**64 - 1),
             "swap": _int(a2.get("swap", 0), "swap", 0, 2**64 - 1),
             "add": _int(a2.get("add", 0), "add", 0, 2**64 - 1)}
        if qp.state in ("reset", "init", "rtr"):
            raise AErr("wrong_state", f"qpn: QP in {qp.state}", "qpn")
        if len(qp.sq) >= qp.caps["max_send_wr"]:
            raise AErr("resource_exhausted", "send queue full")
        now = time.monotonic_ns()
        if qp.state == "err":
            self.dev.complete(qp.send_cq, wr_id=wr_id, status=5, opcode=wc, qpn=qp.qpn)
            return {}
        if not qp.mp:
            from .base_req import post
            post(self.dev, now, qp, SWR(d))
            return {}
        self.dev.post_send(now, qp, d)
        return {}

    def op_post_recv(self, a):
        _fields(a, {"qpn", "wr_id", "sg_list"}, ["qpn", "wr_id"])
        qp = self._qp(a["qpn"])
        wr_id = _int(a["wr_id"], "wr_id", 0, 2**64 - 1)
        sgl = self._sgl(a.get("sg_list", []), "sg_list", qp.caps["max_recv_sge"])
        if qp.state == "reset":
            raise AErr("wrong_state", "qpn: QP in reset", "qpn")
        if len(qp.rq) >= qp.caps["max_recv_wr"]:
            raise AErr("resource_exhausted", "receive queue full")
        if qp.state == "err":
            self.dev.complete(qp.recv_cq, wr_id=wr_id, status=5, opcode="recv", qpn=qp.qpn)
            return {}
        qp.rq.append({"wr_id": wr_id, "sg_list": sgl})
        if qp.mp and qp.state in ("rtr", "rts"):
            self.dev.advance(time.monotonic_ns(), qp, qp.last_trigger)
        return {}

    def op_poll_cq(self, a):
        _fields(a, {"cq", "max", "wait_ms"}, ["cq"])
        with self.dev.lock:
            cqh = self._cq(a["cq"], "cq")
            if self.dev.drain:
                self.dev.drain()
        mx = _int(a.get("max", 16), "max", 1, LIMITS["max_poll"])
        wait = _int(a.get("wait_ms", 0), "wait_ms", 0, LIMITS["max_wait_ms"])
        deadline = time.monotonic() + wait / 1000
        with self.dev.cond:
            while True:
                cq = self.dev.cqs.get(cqh)
                if cq is None:
                    raise AErr("unknown_handle", "cq: destroyed", "cq")
                if cq.q or time.monotonic() >= deadline:
                    break
                self.dev.cond.wait(min(0.005, max(0, deadline - time.monotonic())))
            out = []
            while cq.q and len(out) < mx:
                out.append(cq.q.popleft())
        return {"completions": out}


# ---------------------------------------------------------------------- server
def serve_conn(agent: Agent, conn: socket.socket):
    buf = b""
    f = conn
    try:
        while True:
            chunk = f.recv(65536)
            if not chunk:
                return
            buf += chunk
            while True:
                i = buf.find(b"\n")
                if i < 0:
                    if len(buf) > MAXLINE + 1:
                        # discard until newline
                        while True:
                            chunk = f.recv(65536)
                            if not chunk:
                                return
                            j = chunk.find(b"\n")
                            if j >= 0:
                                buf = chunk[j + 1:]
                                break
                        conn.sendall(json.dumps({"id": None, "ok": False, "error": {
                            "code": "line_too_long", "message": "line too long"}}).encode() + b"\n")
                        continue
                    break
                line, buf = buf[:i], buf[i + 1:]
                if line.endswith(b"\r"):
                    line = line[:-1]
                if len(line) > MAXLINE:
                    rep, close = {"id": None, "ok": False, "error": {"code": "line_too_long",
                                                                    "message": "line too long"}}, False
                else:
                    rep, close = agent.handle_line(line)
                conn.sendall(json.dumps(rep, separators=(",", ":")).encode() + b"\n")
                if close:
                    return
    except OSError:
        return
    finally:
        try:
            conn.close()
        except OSError:
            pass


def serve(agent: Agent, host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(64)
    while True:
        c, _ = s.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=serve_conn, args=(agent, c), daemon=True).start()
