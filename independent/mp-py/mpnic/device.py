"""The MP device: memory, queues and the MP RC transport of SPEC §7.

Single-threaded core: the caller holds `Device.lock` around every call.
Time is passed in as integer nanoseconds (time.monotonic_ns()).
"""
import bisect
import collections
import random
import secrets
import struct
import threading

from . import wire as W
from . import base_req
from .wire import M24, pdiff, later

# completion status values (§6.13)
SUCCESS, LOC_LEN_ERR, LOC_QP_OP_ERR, LOC_PROT_ERR, WR_FLUSH_ERR = 0, 1, 2, 4, 5
BAD_RESP_ERR, REM_INV_REQ_ERR, REM_ACCESS_ERR, REM_OP_ERR = 7, 9, 10, 11
RETRY_EXC_ERR, RNR_RETRY_EXC_ERR = 12, 13
STATUS_NAMES = {0: "SUCCESS", 1: "LOC_LEN_ERR", 2: "LOC_QP_OP_ERR", 4: "LOC_PROT_ERR",
                5: "WR_FLUSH_ERR", 7: "BAD_RESP_ERR", 9: "REM_INV_REQ_ERR",
                10: "REM_ACCESS_ERR", 11: "REM_OP_ERR", 12: "RETRY_EXC_ERR",
                13: "RNR_RETRY_EXC_ERR", 19: "FATAL_ERR", 21: "GENERAL_ERR"}

RNR_MS = [655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32, 0.48, 0.64,
          0.96, 1.28, 1.92, 2.56, 3.84, 5.12, 7.68, 10.24, 15.36, 20.48, 30.72, 40.96,
          61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52]

COUNTERS = ["icrc_errors", "malformed_drops", "unknown_qp_drops", "pkey_violations",
            "qkey_violations", "seq_naks_sent", "rnr_naks_sent", "duplicate_requests",
            "local_ack_timeouts", "retransmitted_packets", "cnp_sent", "cnp_received",
            "ecn_ce_received", "mp_out_of_window", "mp_trimmed_received", "mp_retx_reorder",
            "mp_retx_timeout", "mp_retx_trim", "mp_probes_sent", "mp_entropy_retired"]

US = 1000
MS = 1000_000


class Cfg:
    """Local MP constants (§10.3 defaults). `serve --timers FILE` / `--timer KEY=V`
    set the nine SPEC §2 ones, checked (timers.py); MPNIC_<NAME>_US env overrides
    the time constants unchecked. `hello` declares whatever runs (timers.declared)."""
    K = 32   # mp_reorder_threshold default (SPEC v1.2 §10.3; was 3); per QP via the agent
    coalesce_count = 16
    coalesce_time = 8 * US
    ack_prompt_max = 4 * US   # a bound only: prompt ACKs leave at the next flush
    rto_init = 1000 * US
    rto_min = 100 * US
    rto_max = 16000 * US
    base_rtt = 10 * US
    base_rtt_window = 100 * MS   # mp_base_rtt_window (SPEC v1.2 §10.3)
    target_qdelay = 10 * US
    cwnd_init = 524288
    cwnd_max = 786432
    md = 0.3
    ai_bytes = 16384
    retire_hold = 500 * US
    retire_hold_max = 64000 * US
    staged_max = 4 * 1024 * 1024


import os as _os
for _k in ("rto_init", "rto_min", "rto_max", "retire_hold", "retire_hold_max", "coalesce_time"):
    _v = _os.environ.get("MPNIC_%s_US" % _k.upper())
    if _v:
        setattr(Cfg, _k, int(_v) * US)


class MR:
    def __init__(self, pd, length, access, addr, lkey, rkey, canary, cfill, fill):
        self.pd, self.length, self.access = pd, length, set(access)
        self.addr, self.lkey, self.rkey = addr, lkey, rkey
        self.canary, self.cfill = canary, cfill
        self.buf = bytearray([cfill]) * canary + bytearray([fill]) * length + \
            bytearray([cfill]) * canary
        self.valid = True  # False after invalidation (SEND with Invalidate)

    def contains(self, va, n):
        return self.addr <= va and va + n <= self.addr + self.length

    def write(self, va, data):
        o = self.canary + va - self.addr
        self.buf[o:o + len(data)] = data

    def read(self, va, n):
        o = self.canary + va - self.addr
        return bytes(self.buf[o:o + n])


class CQ:
    def __init__(self):
        self.q = collections.deque()


class SWR:
    """A send work request as the requester tracks it."""

    def __init__(self, d):
        self.__dict__.update(d)
        self.started = False
        self.done = False
        self.status = None
        self.msn = None
        self.first_psn = None
        self.npkts = 0
        self.acked = set()   # packet indexes acknowledged
        self.units = []      # TxUnit list
        self.rd_got = set()  # READ: response indexes received
        self.orig = None     # atomic original value
        self.rnr_until = 0


class TxUnit:
    """One request packet (or a READ request with its reserved PSNs)."""
    __slots__ = ("wr", "idx", "psn", "npsn", "plen", "tx_ns", "tx_seq", "ev", "acked",
                 "lost", "lost_why", "inflight", "txcount", "sacked", "hold", "exempt_ok")

    def __init__(self, wr, idx, psn, npsn, plen):
        self.wr, self.idx, self.psn, self.npsn, self.plen = wr, idx, psn, npsn, plen
        self.tx_ns = 0
        self.tx_seq = -1
        self.ev = None
        self.acked = False
        self.lost = False
        self.lost_why = None
        self.inflight = 0
        self.txcount = 0
        self.sacked = False
        self.hold = False
        self.exempt_ok = False


class RMsg:
    """Responder view of one MP message (by MSN)."""

    def __init__(self, p, first_psn, pmtu):
        self.opcode = p.opcode
        self.msg_len = p.msg_len
        self.reth = (p.va, p.rkey, p.dma_len) if p.opcode in (W.WRITE, W.WRITE_IMM, W.READ_REQ) else None
        self.first_psn = first_psn
        self.npkts = max(1, -(-p.msg_len // pmtu)) if p.opcode in W.DATA_OPS else 1
        self.placed = set()
        self.staged = {}  # idx -> payload
        self.imm = p.imm
        self.ieth = p.ieth
        self.atom = (p.va, p.rkey, p.swap_add, p.compare) if p.opcode in (W.CMP_SWAP, W.FETCH_ADD) else None
        self.executed = False
        self.req_psn = p.psn
        self.req_ts = p.ts
        self.req_sport = p.sport
        self.orig = None
        self.rwr = None


class QP:
    def __init__(self, dev, qpn, pd, qp_type, send_cq, recv_cq, sq_sig_all, caps):
        self.dev = dev
        self.qpn, self.pd, self.qp_type = qpn, pd, qp_type
        self.send_cq, self.recv_cq, self.sq_sig_all, self.caps = send_cq, recv_cq, sq_sig_all, caps
        self.state = "reset"
        self.attrs = {}
        self.reset_state()

    # ------------------------------------------------------------------
    def reset_state(self):
        self.rq = collections.deque()       # posted receive WRs not consumed
        self.sq = collections.deque()       # send WRs not completed
        self.mp = False
        self.evs = []
        self.dev_window = 1024
        self.last_sent_none = True
        # responder
        self.c = 0
        self.rx = set()
        self.h = 0
        self.msgs = {}
        self.next_msn_r = 0
        self.last_cmpl = M24
        self.resources = collections.deque()
        self.staged_bytes = 0
        self.uncovered = 0
        self.uncovered_since = None
        self.last_trigger = None
        self.rnr_last = {}   # msn -> time of last RNR NAK
        self.ack_ev_i = 0
        # requester
        self.next_psn = 0
        self.next_msn = 0
        self.units = {}      # psn -> TxUnit (each reserved PSN of a READ maps to its unit)
        self.unit_list = []  # outstanding TxUnits in PSN order
        self.cum = 0         # newest cumulative ACK PSN received
        self.last_sent = 0
        self.tx_seq = 0
        self.acked_seqs = []
        self.cwnd = Cfg.cwnd_init
        self.srtt = None
        self.rttvar = None
        self.base_rtt = None
        self.brtt_cur = None      # smallest sample of the current base_rtt window
        self.brtt_prev = None     # ... of the previous one
        self.brtt_start = -1 << 62
        self.backoff = 1
        self.rto_expiries = 0
        self.last_md = -1 << 62
        self.ai_win_start = 0
        self.ai_win_sum = 0
        self.last_cong_sig = -1 << 62   # last marked or late signal
        self.last_signal = -1 << 62
        self.retx_q = []     # units to retransmit
        self.round = []
        self.retired = {}    # ev -> dict(since, wait, probe_ts, probe_sent)
        self.skipped = {}    # ev -> until ns
        self.retry_left = 7
        self.rnr_left = 7
        self.rnr_hold_until = 0
        self.read_missing = {}  # id(wr) -> state
        self.rd_arrivals = []   # (arrival_seq, psn)
        self.rd_seq = 0

    # helpers -----------------------------------------------------------
    @property
    def pmtu(self):
        return self.attrs.get("pmtu", 1024)

    def staged_limit(self):
        """MR-MPP-5: the QP's mp_max_staged_bytes (AGENT.md, at most the declared
        value), else the declared value."""
        return self.attrs.get("mp_max_staged_bytes", Cfg.staged_max)

    def reorder_k(self):
        """K of §7.8 rule (a): the QP's mp_reorder_threshold, else the default."""
        return self.attrs.get("mp_reorder_threshold", Cfg.K)

    def rto_undoubled(self):
        """§7.8: min(rto_max, max(rto_min, srtt + 4 rttvar)), rto_init before a sample."""
        if self.srtt is None:
            return Cfg.rto_init
        return min(Cfg.rto_max, max(Cfg.rto_min, self.srtt + 4 * self.rttvar))

    def rto(self):
        """The RTO of §7.7, doubled after expiries."""
        return min(Cfg.rto_max, self.rto_undoubled() * self.backoff)


class Device:
    def __init__(self, mac: bytes, ip: bytes, profile_overrides=None):
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.mac, self.ip = mac, ip
        self.txq = []
        self.txq_units = []   # per queued frame: the TxUnit it carries (RTO clock), or None
        self.wake = None   # callable: wake the data plane (set by the driver)
        self.drain = None  # callable: process frames already received (set by the driver)
        self.profile_trimming = False
        self.reset()

    def reset(self):
        self.pds = set()
        self.next_pd = 0
        self.mrs = {}
        self.next_mr = 1
        self.cqs = {}
        self.next_cq = 0
        self.qps = {}
        self.counters = {k: 0 for k in COUNTERS}
        self.next_va = 0x7F0000000000
        self.rng = random.Random(secrets.randbits(64))

    # ------------------------------------------------------------------ memory
    def new_key(self, used):
        while True:
            k = secrets.randbits(32)
            if k and k not in used:
                return k

    def reg_mr(self, pd, length, access, fill, content, canary, cfill):
        used = {m.rkey for m in self.mrs.values()} | {m.lkey for m in self.mrs.values()}
        rkey = self.new_key(used)
        lkey = self.new_key(used | {rkey})
        addr = self.next_va + 4096
        self.next_va = (addr + length + 8192 + 4095) & ~4095
        mr = MR(pd, length, access, addr, lkey, rkey, canary, cfill, fill)
        if content:
            mr.write(addr, content)
        h = self.next_mr
        self.next_mr += 1
        self.mrs[h] = mr
        return h, mr

    def mr_by_rkey(self, rkey, pd):
        for m in self.mrs.values():
            if m.rkey == rkey and m.valid:
                return m if m.pd == pd else None
        return None

    def mr_by_lkey(self, lkey, pd):
        for m in self.mrs.values():
            if m.lkey == lkey:
                return m if m.pd == pd else None
        return None

    def sg_check(self, qp, sgl, need_write):
        for s in sgl:
            if s["length"] == 0:
                continue
            m = self.mr_by_lkey(s["lkey"], qp.pd)
            if m is None or not m.contains(s["addr"], s["length"]):
                return False
            if need_write and "local_write" not in m.access:
                return False
        return True

    def sg_gather(self, qp, sgl):
        out = bytearray()
        for s in sgl:
            if s["length"]:
                m = self.mr_by_lkey(s["lkey"], qp.pd)
                out += m.read(s["addr"], s["length"])
        return bytes(out)

    def sg_scatter(self, qp, sgl, offset, data):
        """write data at byte offset of the SGE list"""
        pos = 0
        for s in sgl:
            ln = s["length"]
            if offset < pos + ln and data:
                o = offset - pos
                n = min(ln - o, len(data))
                m = self.mr_by_lkey(s["lkey"], qp.pd)
                m.write(s["addr"] + o, data[:n])
                data = data[n:]
                offset += n
            pos += ln
        return not data

    # ------------------------------------------------------------------ completions
    def complete(self, cq, **kw):
        c = {"wr_id": kw["wr_id"], "status": kw.get("status", 0),
             "status_name": STATUS_NAMES[kw.get("status", 0)], "opcode": kw["opcode"],
             "qpn": kw["qpn"], "byte_len": kw.get("byte_len", 0), "imm": kw.get("imm"),
             "invalidated_rkey": kw.get("inv"), "src_qp": None}
        self.cqs[cq].q.append(c)
        self.cond.notify_all()

    def qp_to_err(self, qp):
        if qp.state == "err":
            return
        qp.state = "err"
        self.flush(qp)

    def flush(self, qp):
        for w in list(qp.sq):
            if not w.done:
                self.complete(qp.send_cq, wr_id=w.wr_id, status=WR_FLUSH_ERR,
                              opcode=w.wc_opcode, qpn=qp.qpn)
        qp.sq.clear()
        for r in list(qp.rq):
            self.complete(qp.recv_cq, wr_id=r["wr_id"], status=WR_FLUSH_ERR, opcode="recv",
                          qpn=qp.qpn)
        qp.rq.clear()
        qp.units.clear()
        qp.unit_list.clear()
        qp.retx_q.clear()

    # ------------------------------------------------------------------ transmit
    def send_pkt(self, qp, opcode, psn, ext, payload=b"", ackreq=0, se=0, sport=None):
        a = qp.attrs
        path = a["path"]
        if sport is None:
            sport = qp.evs[0]
        tos = path.get("traffic_class", 0) & 0xFC
        if qp.mp and opcode in (W.ACK, W.ATOMIC_ACK, W.PROBE):
            # MR-MPA-12: MP ACKs, Atomic Acknowledges and Probes carry
            # mp_ack_dscp when set, else the traffic class's DSCP
            ad = a.get("mp_ack_dscp")
            if ad is not None:
                tos = ad << 2
        fr = W.build_frame(path["dest_mac_b"], self.mac, self.ip, path["dest_ip_b"], tos,
                           path.get("hop_limit", 64), sport, opcode, se,
                           a.get("p_key", 0xFFFF), a["dest_qpn"], ackreq, psn, ext, payload,
                           ip_id=self.rng.getrandbits(16))
        if not self.txq and self.wake is not None:
            self.wake()
        self.txq.append(fr)
        self.txq_units.append(None)

    def pick_ev(self, qp, now, avoid=None):
        """Entropy by rounds (§7.4)."""
        nonret = [v for v in qp.evs if v not in qp.retired]
        if not nonret:  # MR-MPF-8: keep sending over the retired values
            nonret = list(qp.evs)
            skipped = set()
        else:
            skipped = {v for v in nonret if qp.skipped.get(v, 0) > now}
            if 2 * len(skipped) > len(nonret):  # MR-MPS-6
                skipped = set()
        retired_all = not [v for v in qp.evs if v not in qp.retired]

        def elig(v):
            return (retired_all or v not in qp.retired) and v not in skipped
        cand = [v for v in qp.round if elig(v)]
        if not cand:
            qp.round = list(nonret)
            qp.rng_round = True
            cand = [v for v in qp.round if elig(v)]
            if not cand:
                cand = list(qp.round)
        if avoid is not None and len(cand) > 1 and avoid in cand:
            cand = [v for v in cand if v != avoid]
        v = cand[self.rng.randrange(len(cand))]
        qp.round.remove(v)
        return v

    def ack_ev(self, qp):
        qp.ack_ev_i = (qp.ack_ev_i + 1) % len(qp.evs)
        return qp.evs[qp.ack_ev_i]

    # ================================================================== receive
    def handle_frame(self, now, fr: bytes):
        c = self.counters
        if len(fr) < 14:
            return
        et = struct.unpack_from("!H", fr, 12)[0]
        if et != 0x0800:
            return  # IPv6 / VLAN declared absent; not ours
        if fr[0:6] != self.mac:
            return
        ipb = fr[14:]
        if len(ipb) < 20:
            return
        if ipb[0] >> 4 != 4:
            return
        if len(ipb) >= 24 and ipb[9] == 17:
            if ipb[0] & 0xF != 5:
                if (ipb[0] & 0xF) * 4 + 4 <= len(ipb) and struct.unpack_from("!H", ipb, (ipb[0] & 0xF) * 4 + 2)[0] == 4791:
                    c["malformed_drops"] += 1
                return
        if ipb[9] != 17:
            return
        tot = struct.unpack_from("!H", ipb, 2)[0]
        flags = struct.unpack_from("!H", ipb, 6)[0]
        if len(ipb) < 28:
            if len(ipb) >= 24 and struct.unpack_from("!H", ipb, 22)[0] == 4791:
                c["malformed_drops"] += 1
            return
        dport = struct.unpack_from("!H", ipb, 22)[0]
        if (flags & 0x2000) or (flags & 0x1FFF):
            if dport == 4791 or (flags & 0x1FFF):
                c["malformed_drops"] += 1
            return
        if ipb[16:20] != self.ip:
            return
        if dport != 4791:
            return
        if tot > len(ipb) or tot < 28:
            c["malformed_drops"] += 1
            return
        if W.ip_csum(ipb[:20]) != 0:
            c["malformed_drops"] += 1
            return
        ipb = ipb[:tot]
        udp_len = struct.unpack_from("!H", ipb, 24)[0]
        sport = struct.unpack_from("!H", ipb, 20)[0]
        tos = ipb[1]
        # possible trimmed packet is decided below (needs QP); first basic lengths
        trunc_ok = False
        if udp_len != tot - 20:
            trunc_ok = True  # maybe trimmed; decided after QP lookup
        if len(ipb) < 20 + 8 + 12:
            c["malformed_drops"] += 1
            return
        b0, b1, pkey, w2, w3 = struct.unpack_from("!BBHII", ipb, 28)
        opcode = b0
        if (b1 & 0x0F) != 0:
            c["malformed_drops"] += 1
            return
        if not trunc_ok and (udp_len % 4 or udp_len < 24):
            c["malformed_drops"] += 1
            return
        hb = W.HDR_BYTES.get(opcode)
        if hb is not None and not trunc_ok and udp_len < 8 + 12 + hb + 4:
            c["malformed_drops"] += 1
            return
        dqpn = w2 & M24
        qp = self.qps.get(dqpn)
        if dqpn in (0, 1, M24) or qp is None:
            c["unknown_qp_drops"] += 1
            return
        if opcode >= 0xE0 or 0x40 <= opcode < 0x60 or 0xA0 <= opcode < 0xC0 or \
                (0x80 <= opcode < 0xA0 and opcode != 0x81) or (0x60 <= opcode < 0x80 and opcode not in (0x64, 0x65)):
            c["malformed_drops"] += 1
            return
        if opcode == 0x81:
            if qp.mp:
                if udp_len == tot - 20 and W.icrc(ipb[:-4]) == ipb[-4:]:
                    c["cnp_received"] += 1
                else:
                    c["icrc_errors"] += 1
            return  # MR-MPN-5: no effect
        if not qp.mp:
            if opcode < 0x20 and (pkey & 0x7FFF) != (qp.attrs.get("p_key", 0xFFFF) & 0x7FFF):
                c["pkey_violations"] += 1
                return
            if opcode in base_req.RESP_OPS and not trunc_ok:
                base_req.on_response(self, now, qp, ipb, opcode, b1, w3)
            elif opcode < 0x20 and not trunc_ok:
                from .base import base_request
                base_request(self, now, qp, ipb, opcode, b1, w3)
            else:
                c["malformed_drops"] += 1
            return
        if not (0xC0 <= opcode <= 0xDF):
            c["malformed_drops"] += 1
            return
        if opcode >= 0xCC:
            c["malformed_drops"] += 1  # MR-MPH-8
            return
        is_resp = opcode in W.RESP_OPS
        if qp.state in ("reset", "init", "err") or (qp.state == "rtr" and is_resp):
            c["malformed_drops"] += 1
            return
        if ipb[12:16] != qp.attrs["path"]["dest_ip_b"]:
            c["malformed_drops"] += 1
            return
        if (pkey & 0x7FFF) != (qp.attrs.get("p_key", 0xFFFF) & 0x7FFF):
            c["pkey_violations"] += 1
            return
        padcnt = (b1 >> 4) & 3
        hdr_end = 20 + 8 + 12 + W.HDR_BYTES[opcode]
        trimmed = False
        if trunc_ok:
            # §7.10: trimmed only when trimming is configured and declared
            trim = qp.attrs.get("mp_trim_dscp")
            if trim is None or not self.profile_trimming or (tos >> 2) != trim or opcode not in W.DATA_OPS:
                c["malformed_drops"] += 1
                return
            if len(ipb) < hdr_end:
                c["malformed_drops"] += 1
                return
            trimmed = True
        else:
            if len(ipb) < hdr_end + 4:
                c["malformed_drops"] += 1
                return
            body = len(ipb) - hdr_end - 4
            if opcode not in W.DATA_OPS and (padcnt or body):
                c["malformed_drops"] += 1
                return
            if padcnt > body:
                c["malformed_drops"] += 1
                return
        p = W.Pkt()
        p.opcode, p.sport, p.tos = opcode, sport, tos
        p.ce = (tos & 3) == 3
        p.se = b1 >> 7
        p.ackreq = w3 >> 31
        p.psn = w3 & M24
        o = 40
        p.imm = p.ieth = None
        p.va = p.rkey = p.dma_len = 0
        p.swap_add = p.compare = 0
        for h in W.HDRS[opcode]:
            if h == "MPETH":
                a, p.offset, p.msg_len, p.ts = struct.unpack_from("!IIII", ipb, o)
                p.f, p.l, p.r = (a >> 31) & 1, (a >> 30) & 1, (a >> 29) & 1
                p.msn = a & M24
            elif h == "SACK":
                a, b, p.bitmap, p.echo_ev, _, p.echo_ts = struct.unpack_from("!IIQHHI", ipb, o)
                p.syndrome, p.msn = a >> 24, a & M24
                p.ecn_ce, p.sack_r, p.trimmed = (b >> 31) & 1, (b >> 30) & 1, (b >> 29) & 1
                p.sack_base = b & M24
            elif h == "RETH":
                p.va, p.rkey, p.dma_len = struct.unpack_from("!QII", ipb, o)
            elif h == "IMM":
                p.imm = struct.unpack_from("!I", ipb, o)[0]
            elif h == "IETH":
                p.ieth = struct.unpack_from("!I", ipb, o)[0]
            elif h == "ATOM":
                p.va, p.rkey, p.swap_add, p.compare = struct.unpack_from("!QIQQ", ipb, o)
            elif h == "AACK":
                p.orig = struct.unpack_from("!Q", ipb, o)[0]
            o += W.HLEN[h]
        if trimmed:
            need = min(qp.pmtu, max(0, p.msg_len - p.offset))
            need += (-need) & 3
            if len(ipb) - hdr_end >= need + 4:
                # complete length: an ordinary packet after all (needs valid lengths)
                c["malformed_drops"] += 1
                return
            p.payload = b""
            c["mp_trimmed_received"] += 1
            if p.ce:
                c["ecn_ce_received"] += 1
            self.mp_trimmed(now, qp, p)
            return
        if W.icrc(ipb[:-4]) != ipb[-4:]:
            c["icrc_errors"] += 1
            return
        p.payload = bytes(ipb[hdr_end:len(ipb) - 4 - padcnt])
        if p.ce:
            c["ecn_ce_received"] += 1
        if is_resp:
            self.req_on_response(now, qp, p)
        else:
            self.rsp_on_request(now, qp, p)

    # ================================================================== responder
    def sack_ack(self, qp, syn, trig, base=None, opcode=W.ACK, aack=None, trimmed=0):
        """Send an MP ACK (or Atomic Ack) triggered by packet `trig`."""
        if base is None:
            t = trig.psn if trig is not None else qp.c
            if trig is not None and later(t, (qp.c + 64) & M24):
                base = (t - 63) & M24
            else:
                base = (qp.c + 1) & M24
        bm = 0
        for i in range(64):
            ps = (base + i) & M24
            if ps in qp.rx or not later(ps, qp.c):
                bm |= 1 << (63 - i)
        ev = trig.sport if trig is not None else 0
        ts = trig.ts if trig is not None and trig.opcode not in W.RESP_OPS else 0
        e = 1 if trig is not None and trig.ce else 0
        r = trig.r if trig is not None else 0
        ext = W.sacketh(syn, qp.last_cmpl, e, r, trimmed, base, bm, ev, ts)
        if aack is not None:
            ext += struct.pack("!Q", aack)
        self.send_pkt(qp, opcode, qp.c, ext, sport=self.ack_ev(qp))
        qp.uncovered = 0
        qp.uncovered_since = None

    def rsp_error(self, qp, p, syn):
        """Fatal NAK in an MP ACK (§7.15), then ERR."""
        self.sack_ack(qp, syn, p, base=p.psn)
        self.qp_to_err(qp)

    def mark_rx(self, qp, psn):
        if not later(psn, qp.c) or psn in qp.rx:
            return
        qp.rx.add(psn)
        if later(psn, qp.h):
            qp.h = psn
        while ((qp.c + 1) & M24) in qp.rx:
            qp.c = (qp.c + 1) & M24
            qp.rx.discard(qp.c)
        if not later(qp.h, qp.c):
            qp.h = qp.c

    def mp_trimmed(self, now, qp, p):
        if p.opcode in W.RESP_OPS:
            self.req_on_trimmed_resp(now, qp, p)
            return
        if not later(p.psn, qp.c) or p.psn in qp.rx:
            self.counters["duplicate_requests"] += 1
            self.sack_ack(qp, 0x1F, p)
            return
        p.r = p.r
        self.sack_ack(qp, 0x65, p, base=p.psn, trimmed=1)

    def rsp_on_request(self, now, qp, p):
        c = self.counters
        d = pdiff(p.psn, qp.c)
        if p.opcode == W.PROBE:
            # MR-MPF-5/6: answer, change nothing
            self.sack_ack(qp, 0x1F, p)
            return
        if qp.dev_window < d < W.HALF:  # MR-MPW-1
            c["mp_out_of_window"] += 1
            return
        P = qp.pmtu
        dup = d == 0 or d >= W.HALF or p.psn in qp.rx
        # READ re-request (R set, PSNs already received) — MR-MPR-9
        if p.opcode == W.READ_REQ and dup:
            c["duplicate_requests"] += 1
            self.rsp_read_rerequest(now, qp, p)
            return
        if dup:
            c["duplicate_requests"] += 1
            m = self.kept_atomic(qp, p)
            if m is not None and m.executed:
                self.sack_ack(qp, 0x1F, p, base=m.req_psn, opcode=W.ATOMIC_ACK, aack=m.orig)
            self.sack_ack(qp, 0x1F, p)   # MR-MPA-1: a duplicate is answered by an MP ACK
            return
        # ---- MR-MPP-3 consistency checks (NAK 0x61)
        plen = len(p.payload)
        bad = False
        if p.opcode in W.DATA_OPS:
            if p.offset % P or p.offset + plen > p.msg_len or plen > P:
                bad = True
            elif not p.l and plen != P:
                bad = True
            elif p.f != (p.offset == 0) or p.l != (p.offset + plen == p.msg_len):
                bad = True
            elif p.opcode in (W.WRITE, W.WRITE_IMM) and p.dma_len != p.msg_len:
                bad = True
        elif p.opcode == W.READ_REQ:
            if p.offset != 0:
                # MR-MPR-12 (v1.2): a part or re-request (nonzero offset) whose MSN names
                # no READ accepted here is dropped without an acknowledgement
                return
            # v1.2 §7.9 / MR-MPR-11: a first request may ask for a first part (DMA length
            # below the read length, a multiple of PMTU); F set, L iff it asks for the end
            # (MR-MPH-2)
            if not p.f or p.dma_len > p.msg_len or p.l != (p.dma_len == p.msg_len) or \
                    (p.dma_len < p.msg_len and (p.dma_len == 0 or p.dma_len % P)):
                bad = True
        elif p.opcode in (W.CMP_SWAP, W.FETCH_ADD):
            if p.offset != 0 or p.msg_len != 8 or not p.f or not p.l:
                bad = True
        if p.msg_len > (1 << 31):
            bad = True
        first_psn = (p.psn - p.offset // P) & M24 if p.opcode in W.DATA_OPS else p.psn
        m = qp.msgs.get(p.msn)
        if m is not None and not bad:
            if m.opcode != p.opcode or m.msg_len != p.msg_len or \
                    (m.reth is not None and m.reth != (p.va, p.rkey, p.dma_len)) or \
                    m.first_psn != first_psn or (m.imm != p.imm) or (m.ieth != p.ieth):
                bad = True
        # MSN of an already completed message: duplicate by definition (MR-MPP-8)
        if not bad and pdiff(p.msn, qp.next_msn_r) >= W.HALF:
            c["duplicate_requests"] += 1
            self.sack_ack(qp, 0x1F, p)
            return
        if bad:
            self.rsp_error(qp, p, 0x61)
            return
        new_m = m is None
        if new_m:
            m = RMsg(p, first_psn, P)
            qp.msgs[p.msn] = m
        # ---- access checks
        if p.opcode in (W.WRITE, W.WRITE_IMM):
            if "remote_write" not in qp.attrs.get("access", ()):
                self.rsp_error(qp, p, 0x61)
                return
            if p.dma_len:
                mr = self.mr_by_rkey(p.rkey, qp.pd)
                if mr is None or "remote_write" not in mr.access or not mr.contains(p.va, p.dma_len):
                    self.rsp_error(qp, p, 0x62)
                    return
        elif p.opcode == W.READ_REQ:
            if "remote_read" not in qp.attrs.get("access", ()):
                self.rsp_error(qp, p, 0x61)
                return
            if qp.attrs.get("max_dest_rd_atomic", 16) == 0:
                self.rsp_error(qp, p, 0x61)
                return
            if p.dma_len:
                mr = self.mr_by_rkey(p.rkey, qp.pd)
                if mr is None or "remote_read" not in mr.access or not mr.contains(p.va, p.msg_len):
                    self.rsp_error(qp, p, 0x62)
                    return
        elif p.opcode in (W.CMP_SWAP, W.FETCH_ADD):
            if "remote_atomic" not in qp.attrs.get("access", ()) or qp.attrs.get("max_dest_rd_atomic", 16) == 0:
                self.rsp_error(qp, p, 0x61)
                return
            if p.va % 8:
                self.rsp_error(qp, p, 0x61)
                return
            mr = self.mr_by_rkey(p.rkey, qp.pd)
            if mr is None or "remote_atomic" not in mr.access or not mr.contains(p.va, 8):
                self.rsp_error(qp, p, 0x62)
                return
        # ---- receive-consuming: the receive WR (§7.5)
        idx = (p.offset // P) if p.opcode in W.DATA_OPS else 0
        if p.opcode in W.RECV_CONSUMING:
            k = self.rwr_index(qp, p.msn)
            if k is not None and k >= len(qp.rq):
                # MR-MPP-17: refuse, RNR NAK at most once per RNR period
                last = qp.rnr_last.get(p.msn)
                code = qp.attrs.get("min_rnr_timer", 12)
                if last is None or now - last >= RNR_MS[code] * MS:
                    qp.rnr_last[p.msn] = now
                    c["rnr_naks_sent"] += 1
                    self.sack_ack(qp, 0x20 | code, p, base=p.psn)
                return
            if p.opcode in W.SEND_OPS:
                if k is None:
                    # stage (§7.5 staging) or drop unacknowledged (MR-MPP-5, MR-MPP-23):
                    # the limit is the QP's mp_max_staged_bytes (AGENT.md), else the
                    # declared one; mpnic does not declare mp_resource_nak, so a refused
                    # packet is dropped whatever mp_peer_resource_nak says (§7.16)
                    if idx not in m.staged and idx not in m.placed:
                        if qp.staged_bytes + plen > qp.staged_limit():
                            if new_m:
                                # the refused packet leaves no trace (MR-MPP-23)
                                qp.msgs.pop(p.msn, None)
                            return
                        m.staged[idx] = p.payload
                        qp.staged_bytes += plen
                else:
                    m.rwr = qp.rq[k]
                    if not self.place_send(qp, m, p, idx, p.payload):
                        return
        if p.opcode in (W.WRITE, W.WRITE_IMM):
            if plen:
                mr = self.mr_by_rkey(p.rkey, qp.pd)
                mr.write(p.va + p.offset, p.payload)
            m.placed.add(idx)
        elif p.opcode in (W.READ_REQ, W.CMP_SWAP, W.FETCH_ADD):
            m.placed.add(0)
        # ---- mark received and acknowledge
        opens = later(p.psn, (qp.h + 1) & M24)
        if p.opcode == W.READ_REQ:
            n = max(1, -(-p.msg_len // P))
            fills = False
            for i in range(n):
                self.mark_rx(qp, (p.psn + i) & M24)
        else:
            fills = later(qp.h, p.psn)
            self.mark_rx(qp, p.psn)
        qp.last_trigger = p
        qp.uncovered += 1
        if qp.uncovered_since is None:
            qp.uncovered_since = now
        sent_aack = self.advance(now, qp, p)
        if qp.state == "err":
            return
        if p.ackreq or opens or fills or p.ce or qp.uncovered >= Cfg.coalesce_count:
            # MR-MPP-13 (SPEC v1.1): an Atomic Acknowledge sent at once does not replace
            # the MP ACK owed for the request's arrival (AMBIGUITIES #5, now settled)
            self.sack_ack(qp, 0x1F, p)

    def rwr_index(self, qp, msn):
        k = 0
        for i in range(pdiff(msn, qp.next_msn_r)):
            mm = qp.msgs.get((qp.next_msn_r + i) & M24)
            if mm is None:
                return None
            if mm.opcode in W.RECV_CONSUMING:
                k += 1
        return k

    def place_send(self, qp, m, p, idx, data):
        r = m.rwr
        cap = sum(s["length"] for s in r["sg_list"])
        if m.msg_len > cap:
            # MR-RSP-8 analog: NAK 0x61, receive WR completes REM_INV_REQ_ERR
            qp.rq.remove(r)
            self.complete(qp.recv_cq, wr_id=r["wr_id"], status=REM_INV_REQ_ERR, opcode="recv",
                          qpn=qp.qpn)
            self.rsp_error(qp, p, 0x61)
            return False
        if not self.sg_check(qp, r["sg_list"], True):
            qp.rq.remove(r)
            self.complete(qp.recv_cq, wr_id=r["wr_id"], status=LOC_PROT_ERR, opcode="recv",
                          qpn=qp.qpn)
            self.rsp_error(qp, p, 0x63)
            return False
        self.sg_scatter(qp, r["sg_list"], idx * qp.pmtu, data)
        m.placed.add(idx)
        return True

    def kept_atomic(self, qp, p):
        if p.opcode not in (W.CMP_SWAP, W.FETCH_ADD):
            return None
        m = qp.msgs.get(p.msn)
        if m is not None and m.atom is not None:
            return m
        for mm in qp.resources:
            if mm.msn_ == p.msn and mm.atom is not None and mm.req_psn == p.psn:
                return mm
        return None

    def advance(self, now, qp, trig):
        """Place staged SENDs whose receive WR became known, execute READ/atomics
        at the head, complete messages in MSN order.  Returns True when an
        Atomic Ack for `trig` was sent."""
        sent = False
        # staged SENDs
        k = 0
        msn = qp.next_msn_r
        while True:
            m = qp.msgs.get(msn)
            if m is None:
                break
            if m.opcode in W.RECV_CONSUMING:
                if m.staged and m.opcode in W.SEND_OPS and k < len(qp.rq):
                    m.rwr = qp.rq[k]
                    for idx, data in sorted(m.staged.items()):
                        qp.staged_bytes -= len(data)
                        if not self.place_send(qp, m, trig, idx, data):
                            return True
                    m.staged.clear()
                k += 1
            msn = (msn + 1) & M24
        while qp.state != "err":
            m = qp.msgs.get(qp.next_msn_r)
            if m is None:
                break
            if m.opcode in (W.READ_REQ, W.CMP_SWAP, W.FETCH_ADD):
                if not m.executed:
                    if m.opcode == W.READ_REQ:
                        # the first request's range only (a first part, v1.2 §7.9)
                        self.exec_read(now, qp, m, 0, m.reth[2] if m.msg_len else 0, 0)
                    else:
                        self.exec_atomic(qp, m)
                        self.sack_ack(qp, 0x1F, trig if trig is not None and trig.psn == m.req_psn else None,
                                      base=m.req_psn, opcode=W.ATOMIC_ACK, aack=m.orig)
                        if trig is not None and trig.psn == m.req_psn:
                            sent = True
                    m.executed = True
                    m.msn_ = qp.next_msn_r
                    qp.resources.append(m)
                    while len(qp.resources) > max(1, qp.attrs.get("max_dest_rd_atomic", 16)):
                        qp.resources.popleft()
            elif len(m.placed) < m.npkts:
                break
            else:
                # complete
                if m.opcode in W.RECV_CONSUMING:
                    if not qp.rq:
                        break
                    r = qp.rq.popleft()
                    inv = None
                    if m.opcode == W.SEND_INV:
                        mr = self.mr_by_rkey(m.ieth, qp.pd)
                        if mr is None:
                            self.complete(qp.recv_cq, wr_id=r["wr_id"], status=REM_INV_REQ_ERR,
                                          opcode="recv", qpn=qp.qpn)
                            fake = W.Pkt(); fake.psn = (m.first_psn + m.npkts - 1) & M24
                            fake.sport = trig.sport if trig else 0; fake.ts = 0; fake.ce = 0; fake.r = 0
                            fake.opcode = m.opcode
                            self.rsp_error(qp, fake, 0x61)
                            return True
                        mr.valid = False
                        inv = m.ieth
                    self.complete(qp.recv_cq, wr_id=r["wr_id"],
                                  opcode="recv_rdma_with_imm" if m.opcode == W.WRITE_IMM else "recv",
                                  qpn=qp.qpn, byte_len=m.msg_len if m.opcode != W.WRITE_IMM else m.msg_len,
                                  imm=m.imm, inv=inv)
            qp.last_cmpl = qp.next_msn_r
            del qp.msgs[qp.next_msn_r]
            qp.rnr_last.pop(qp.next_msn_r, None)
            qp.next_msn_r = (qp.next_msn_r + 1) & M24
        return sent

    def exec_atomic(self, qp, m):
        va, rkey, sa, cmpv = m.atom
        mr = self.mr_by_rkey(rkey, qp.pd)
        old = struct.unpack("<Q", mr.read(va, 8))[0]
        if m.opcode == W.CMP_SWAP:
            new = sa if old == cmpv else old
        else:
            new = (old + sa) & 0xFFFFFFFFFFFFFFFF
        mr.write(va, struct.pack("<Q", new))
        m.orig = old

    def exec_read(self, now, qp, m, off, length, r):
        va, rkey, _ = m.reth
        P = qp.pmtu
        if m.msg_len == 0:
            ext = W.mpeth(1, 1, r, qp.next_msn_r if not hasattr(m, "msn_") else m.msn_, 0, 0, m.req_ts)
            self.send_pkt(qp, W.READ_RESP, m.req_psn, ext, b"", sport=self.pick_ev(qp, now))
            return
        mr = self.mr_by_rkey(rkey, qp.pd)
        msn = m.msn_ if hasattr(m, "msn_") else qp.next_msn_r
        o = off
        while o < off + length:
            n = min(P, m.msg_len - o, off + length - o)
            data = mr.read(va + o, n)
            ext = W.mpeth(1 if o == 0 else 0, 1 if o + n == m.msg_len else 0, r, msn, o,
                          m.msg_len, m.req_ts)
            self.send_pkt(qp, W.READ_RESP, (m.req_psn + o // P) & M24, ext, data,
                          sport=self.pick_ev(qp, now))
            o += n

    def rsp_read_rerequest(self, now, qp, p):
        P = qp.pmtu
        # v1.2 §7.9, MR-MPR-9/12: a follow-up (part or re-request) asks for a range that
        # starts at a multiple of PMTU and is a multiple of PMTU long unless it ends the
        # read; one that breaks this matches no kept READ and is dropped unacknowledged.
        # The multiple is nonzero (2026-12-02, AMBIGUITIES 50): only the first request
        # of a READ of length 0 asks for nothing, so a follow-up of DMA length 0 inside
        # a nonempty read is dropped too, neither answered nor acknowledged
        if p.offset % P or (p.dma_len % P and p.offset + p.dma_len != p.msg_len) or \
                p.offset + p.dma_len > p.msg_len or (p.dma_len == 0 and p.msg_len > 0):
            return
        for m in qp.resources:
            if m.opcode == W.READ_REQ and m.msn_ == p.msn and m.reth[0] == p.va and \
                    m.reth[1] == p.rkey and m.msg_len == p.msg_len and p.offset % P == 0 and \
                    p.offset + p.dma_len <= m.msg_len and \
                    (m.req_psn + p.offset // P) & M24 == p.psn:
                mr = self.mr_by_rkey(p.rkey, qp.pd)
                if m.msg_len and (mr is None or "remote_read" not in mr.access or
                                  not mr.contains(m.reth[0], m.msg_len)):
                    self.rsp_error(qp, p, 0x62)
                    return
                self.sack_ack(qp, 0x1F, p)
                m2 = m
                saved = m2.req_ts
                m2.req_ts = p.ts
                # responses carry the request's R: set for a re-request, clear for a
                # further part (v1.2 MR-MPR-11/12)
                self.exec_read(now, qp, m2, p.offset, p.dma_len if m.msg_len else 0, p.r)
                m2.req_ts = saved
                return
        # a retransmitted READ not yet executed (still pending) is a duplicate
        mm = qp.msgs.get(p.msn)
        if mm is not None and mm.opcode == W.READ_REQ:
            self.sack_ack(qp, 0x1F, p)
        # otherwise: matches no kept READ -> drop (MR-MPR-9)

    def rsp_tick(self, now, qp):
        if qp.uncovered and qp.uncovered_since is not None and \
                now - qp.uncovered_since >= 0 and qp.last_trigger is not None:
            self.sack_ack(qp, 0x1F, qp.last_trigger)

    # ================================================================== requester
    def post_send(self, now, qp, wr):
        w = SWR(wr)
        qp.sq.append(w)
        self.req_pump(now, qp)

    def inflight(self, qp):
        s = 0
        for u in qp.unit_list:
            s += u.inflight
        return s

    def req_pump(self, now, qp):
        """Transmit what cwnd, window and ordering allow."""
        if qp.state != "rts" or not qp.mp:
            return
        if now < qp.rnr_hold_until:
            pass
        P = qp.pmtu
        Wn = qp.dev_window
        # 1) retransmissions first, oldest PSN first
        if qp.retx_q:
            qp.retx_q.sort(key=lambda u: pdiff(u.psn, qp.cum))
            rest = []
            for u in qp.retx_q:
                if u.acked or qp.state != "rts":
                    continue
                if u.hold and now < u.wr.rnr_until:
                    rest.append(u)
                    continue
                cost = u.plen if u.wr.kind != "read" else 0
                exempt = u.exempt_ok and (u is self.oldest_unacked(qp))
                infl = self.inflight(qp)
                if infl and infl + cost > qp.cwnd and not exempt:
                    rest.append(u)
                    continue
                self.transmit(now, qp, u, retx=True)
            qp.retx_q = rest
        # 2) READ re-requests, then further parts of READs requested in parts
        self.read_rerequests(now, qp)
        self.read_parts(now, qp)
        # 3) new packets
        if now < qp.rnr_hold_until:
            return
        for w in list(qp.sq):
            if qp.state != "rts":
                return
            if w.done:
                continue
            if not w.started:
                if w.fence and any(not x.done for x in qp.sq if x is not w and qp.sq.index(x) < qp.sq.index(w)):
                    return
                if w.kind in ("read", "atomic"):
                    outst = sum(1 for x in qp.sq if x.started and not x.done and x.kind in ("read", "atomic"))
                    if outst >= qp.attrs.get("max_rd_atomic", 16):
                        return
                if not self.start_wr(now, qp, w):
                    return
            for u in w.units:
                if u.txcount:
                    continue
                if pdiff(u.psn + u.npsn - 1, qp.cum) > Wn:   # MR-MPW-2
                    return
                cost = u.plen if w.kind != "read" else min(w.length, self.read_part_limit(qp))
                infl = self.inflight(qp)
                if infl and infl + cost > qp.cwnd:
                    return
                self.transmit(now, qp, u, retx=False)

    def oldest_unacked(self, qp):
        for u in qp.unit_list:
            if not u.acked and not u.sacked:
                return u
        return None

    def start_wr(self, now, qp, w):
        """Assign MSN/PSNs; local checks before sending anything."""
        P = qp.pmtu
        if w.kind in ("send", "write"):
            w.length = sum(s["length"] for s in w.sg_list)
            if not self.sg_check(qp, w.sg_list, False):
                w.done = True
                qp.sq.remove(w)
                self.complete(qp.send_cq, wr_id=w.wr_id, status=LOC_PROT_ERR, opcode=w.wc_opcode, qpn=qp.qpn)
                self.qp_to_err(qp)
                return False
            w.data = self.sg_gather(qp, w.sg_list)
            n = max(1, -(-w.length // P))
        elif w.kind == "read":
            w.length = sum(s["length"] for s in w.sg_list)
            if not self.sg_check(qp, w.sg_list, True):
                w.done = True
                qp.sq.remove(w)
                self.complete(qp.send_cq, wr_id=w.wr_id, status=LOC_PROT_ERR, opcode=w.wc_opcode, qpn=qp.qpn)
                self.qp_to_err(qp)
                return False
            n = max(1, -(-w.length // P))
        else:
            w.length = 8
            if len(w.sg_list) != 1 or w.sg_list[0]["length"] != 8 or not self.sg_check(qp, w.sg_list, True):
                w.done = True
                qp.sq.remove(w)
                self.complete(qp.send_cq, wr_id=w.wr_id, status=LOC_PROT_ERR, opcode=w.wc_opcode, qpn=qp.qpn)
                self.qp_to_err(qp)
                return False
            n = 1
        if w.length > (1 << 31):
            w.done = True
            qp.sq.remove(w)
            self.complete(qp.send_cq, wr_id=w.wr_id, status=LOC_LEN_ERR, opcode=w.wc_opcode, qpn=qp.qpn)
            return False
        w.started = True
        w.msn = qp.next_msn
        qp.next_msn = (qp.next_msn + 1) & M24
        w.first_psn = qp.next_psn
        w.npkts = n
        if w.kind == "read":
            u = TxUnit(w, 0, w.first_psn, n, 0)
            w.units = [u]
            for i in range(n):
                qp.units[(w.first_psn + i) & M24] = u
            qp.unit_list.append(u)
        elif w.kind == "atomic":
            u = TxUnit(w, 0, w.first_psn, 1, 0)
            w.units = [u]
            qp.units[w.first_psn] = u
            qp.unit_list.append(u)
        else:
            for i in range(n):
                plen = min(P, w.length - i * P) if w.length else 0
                u = TxUnit(w, i, (w.first_psn + i) & M24, 1, plen)
                w.units.append(u)
                qp.units[u.psn] = u
                qp.unit_list.append(u)
        qp.next_psn = (qp.next_psn + n) & M24
        return True

    def transmit(self, now, qp, u, retx):
        w = u.wr
        P = qp.pmtu
        ts = now & 0xFFFFFFFF
        r = 1 if retx else 0
        ev = self.pick_ev(qp, now, avoid=u.ev if retx else None)
        if w.kind in ("send", "write"):
            off = u.idx * P
            last = 1 if (off + u.plen == w.length) else 0
            ext = W.mpeth(1 if off == 0 else 0, last, r, w.msn, off, w.length, ts)
            op = w.mp_op
            if op in (W.WRITE, W.WRITE_IMM):
                ext += W.reth(w.remote_addr, w.rkey, w.length)
            if op in (W.SEND_IMM, W.WRITE_IMM):
                ext += struct.pack("!I", w.imm)
            if op == W.SEND_INV:
                ext += struct.pack("!I", w.invalidate_rkey)
            se = 1 if (last and w.solicited and op in (W.SEND, W.SEND_IMM, W.SEND_INV, W.WRITE_IMM)) else 0
            self.send_pkt(qp, op, u.psn, ext, w.data[off:off + u.plen], ackreq=1 if (last or retx) else 0,
                          se=se, sport=ev)
            u.inflight = u.plen
        elif w.kind == "read":
            # MR-MPR-11 / MR-MPH-12 (v1.2): the first request asks for at most
            # max(PMTU, cwnd rounded down to a multiple of PMTU); a copy of it asks the same
            if getattr(w, "rd_first_len", None) is None:
                w.rd_first_len = min(w.length, self.read_part_limit(qp))
                w.rd_req_len = w.rd_first_len
            dl = w.rd_first_len
            ext = W.mpeth(1, 1 if dl == w.length else 0, r, w.msn, 0, w.length, ts) + \
                W.reth(w.remote_addr, w.rkey, dl)
            self.send_pkt(qp, W.READ_REQ, u.psn, ext, ackreq=1, sport=ev)
            w.rd_req_ns = now
            w.rd_req_seq = qp.rd_seq
            u.inflight = 0
            w.rd_inflight = w.length - self.read_got_bytes(qp, w)
        else:
            ext = W.mpeth(1, 1, r, w.msn, 0, 8, ts)
            if w.mp_op == W.CMP_SWAP:
                ext += struct.pack("!QIQQ", w.remote_addr, w.rkey, w.swap, w.compare)
            else:
                ext += struct.pack("!QIQQ", w.remote_addr, w.rkey, w.add, 0)
            self.send_pkt(qp, w.mp_op, u.psn, ext, ackreq=1, sport=ev)
            u.inflight = 0
        if retx:
            self.counters["retransmitted_packets"] += 1
            why = u.lost_why
            if why == "reorder":
                self.counters["mp_retx_reorder"] += 1
            elif why == "timeout":
                self.counters["mp_retx_timeout"] += 1
            elif why == "trim":
                self.counters["mp_retx_trim"] += 1
        if self.txq_units:
            self.txq_units[-1] = u
        u.lost = False
        u.lost_why = None
        u.hold = False
        u.exempt_ok = False
        u.ev = ev
        u.tx_ns = now
        u.tx_seq = qp.tx_seq
        qp.tx_seq += 1
        u.txcount += 1
        if not later(qp.last_sent, (u.psn + u.npsn - 1) & M24) and not retx or qp.last_sent_none:
            qp.last_sent = (u.psn + u.npsn - 1) & M24
            qp.last_sent_none = False
        elif later((u.psn + u.npsn - 1) & M24, qp.last_sent):
            qp.last_sent = (u.psn + u.npsn - 1) & M24

    def read_got_bytes(self, qp, w):
        P = qp.pmtu
        return sum(min(P, w.length - i * P) for i in w.rd_got) if w.length else 0

    # ------------------------------------------------------------------ responses
    def rtt_sample(self, now, qp, echo_ts):
        r = (now - echo_ts) & 0xFFFFFFFF
        if r > 2_000_000_000:
            return None
        if qp.srtt is None:
            qp.srtt, qp.rttvar = r, r / 2
        else:
            qp.rttvar = 0.75 * qp.rttvar + 0.25 * abs(qp.srtt - r)
            qp.srtt = 0.875 * qp.srtt + 0.125 * r
        # MR-MPC-9 (v1.2): base_rtt is the smallest sample of the current and the previous
        # mp_base_rtt_window, so it covers at least the last window and nothing older than two
        if now - qp.brtt_start >= 2 * Cfg.base_rtt_window:
            qp.brtt_prev, qp.brtt_cur, qp.brtt_start = None, None, now
        elif now - qp.brtt_start >= Cfg.base_rtt_window:
            qp.brtt_prev, qp.brtt_cur, qp.brtt_start = qp.brtt_cur, None, now
        if qp.brtt_cur is None or r < qp.brtt_cur:
            qp.brtt_cur = r
        qp.base_rtt = min(x for x in (qp.brtt_cur, qp.brtt_prev) if x is not None)
        return r

    def signal(self, now, qp, r, marked, newly):
        """cwnd update for one signal (§7.12 table)."""
        if newly <= 0:
            return
        qp.last_signal = now
        base = qp.base_rtt if qp.base_rtt is not None else Cfg.base_rtt
        q = (r - base) if r is not None else 0
        late = q >= Cfg.target_qdelay
        if marked or late:
            qp.last_cong_sig = now
        if not marked and not late:
            srtt = qp.srtt or Cfg.base_rtt
            if now - qp.ai_win_start > srtt:
                qp.ai_win_start, qp.ai_win_sum = now, 0
            inc = Cfg.ai_bytes * newly / qp.cwnd
            inc = min(inc, Cfg.ai_bytes + qp.pmtu - qp.ai_win_sum)
            if inc > 0:
                qp.cwnd = min(Cfg.cwnd_max, qp.cwnd + inc)
                qp.ai_win_sum += inc
        elif marked and late:
            self.md(now, qp)

    def md(self, now, qp):
        srtt = qp.srtt or Cfg.base_rtt
        if now - qp.last_md < srtt:
            return
        qp.last_md = now
        qp.cwnd = max(qp.pmtu, qp.cwnd * (1 - Cfg.md))

    def loss_event(self, now, qp, kind, timer_start=None):
        srtt = qp.srtt or Cfg.base_rtt
        ev = False
        if now - qp.last_cong_sig <= srtt:
            ev = True
        if kind == "trim":
            ev = True
        if kind == "timeout" and (timer_start is None or qp.last_signal < timer_start):
            ev = True
        if ev:
            self.md(now, qp)

    def retire(self, now, qp, v):
        if v is None or v in qp.retired:
            return
        qp.retired[v] = {"since": now, "wait": Cfg.retire_hold, "next": now + Cfg.retire_hold,
                         "probe_ts": None}
        self.counters["mp_entropy_retired"] += 1

    def ack_unit(self, qp, u):
        if u.acked:
            return False
        u.acked = True
        u.inflight = 0
        bisect.insort(qp.acked_seqs, u.tx_seq)
        if u in qp.retx_q:
            qp.retx_q.remove(u)
        w = u.wr
        if w.kind in ("send", "write"):
            w.acked.add(u.idx)
        return True

    def req_on_response(self, now, qp, p):
        if qp.state != "rts":
            self.counters["malformed_drops"] += 1
            return
        if p.opcode == W.READ_RESP:
            self.req_on_read_resp(now, qp, p)
            return
        syn = p.syndrome
        if (0x40 <= syn <= 0x5F) or syn >= 0x80 or syn == 0x60:
            return  # MR-MPP-19 / MR-MPL-9: drop
        # MR-MPA-10: cumulative ACK later than the last PSN sent -> ignore
        if qp.last_sent_none:
            if pdiff(p.psn, (qp.attrs["sq_psn"] - 1) & M24) != 0:
                return
        elif later(p.psn, qp.last_sent):
            return
        # MR-MPA-10 (v1.2): ... or whose bitmap reports a PSN later than the last PSN sent
        # (a READ's reserved PSNs count as sent: last_sent covers them)
        if (syn <= 0x1F or p.opcode == W.ATOMIC_ACK) and p.bitmap:
            hi = (p.sack_base + 63 - ((p.bitmap & -p.bitmap).bit_length() - 1)) & M24
            if qp.last_sent_none or later(hi, qp.last_sent):
                return
        # MR-MPT-10 (v1.2): no RTT sample from a NAK 0x65 whose echoed timestamp is 0
        r = None if (syn == 0x65 and p.echo_ts == 0) else self.rtt_sample(now, qp, p.echo_ts)
        # probe answer
        rv = qp.retired.get(p.echo_ev)
        if rv is not None and rv["probe_ts"] is not None and rv["probe_ts"] == p.echo_ts:
            del qp.retired[p.echo_ev]
        if p.ecn_ce:
            qp.skipped[p.echo_ev] = now + int(qp.srtt or Cfg.base_rtt)
        newly = 0
        newp = False
        # cumulative
        if later(p.psn, qp.cum) or pdiff(p.psn, qp.cum) == 0:
            for u in list(qp.unit_list):
                if not later((u.psn + u.npsn - 1) & M24, p.psn):
                    if u.wr.kind == "atomic":
                        u.sacked = True
                        u.inflight = 0
                        continue
                    if u.txcount and self.ack_unit(qp, u):
                        newly += u.plen
                        newp = True
            if later(p.psn, qp.cum):
                qp.cum = p.psn
        if syn <= 0x1F or p.opcode == W.ATOMIC_ACK:
            for i in range(64):
                if (p.bitmap >> (63 - i)) & 1:
                    u = qp.units.get((p.sack_base + i) & M24)
                    if u is None or not u.txcount:
                        continue
                    if u.wr.kind == "atomic":
                        u.sacked = True
                        u.inflight = 0
                        continue
                    if self.ack_unit(qp, u):
                        newly += u.plen
                        newp = True
        if p.opcode == W.ATOMIC_ACK:
            u = qp.units.get(p.sack_base)
            if u is not None and u.wr.kind == "atomic" and not u.acked:
                u.wr.orig = p.orig
                self.ack_unit(qp, u)
                newp = True
                newly += 8
        if newp:
            qp.backoff = 1
            qp.rto_expiries = 0
            qp.retry_left = qp.attrs.get("retry_cnt", 7)
            qp.rnr_left = qp.attrs.get("rnr_retry", 7)
        self.signal(now, qp, r, bool(p.ecn_ce), newly if newp else 0)
        if 0x20 <= syn <= 0x3F:
            self.on_rnr(now, qp, p)
        elif syn == 0x65:
            u = qp.units.get(p.sack_base)
            if u is not None and not u.acked:
                u.lost = True
                u.lost_why = "trim"
                u.inflight = 0
                if u not in qp.retx_q:
                    qp.retx_q.append(u)
                self.loss_event(now, qp, "trim")
        elif 0x61 <= syn <= 0x7F:
            st = {0x61: REM_INV_REQ_ERR, 0x62: REM_ACCESS_ERR}.get(syn, REM_OP_ERR)
            u = qp.units.get(p.sack_base)
            if u is not None:
                self.complete_in_order(now, qp, err_wr=u.wr, err_status=st)
                return
        self.detect_losses(now, qp)
        self.complete_in_order(now, qp)
        self.req_pump(now, qp)

    def on_rnr(self, now, qp, p):
        u = qp.units.get(p.sack_base)
        if u is None:
            return
        w = u.wr
        if qp.rnr_left == 0:
            self.complete_in_order(now, qp, err_wr=w, err_status=RNR_RETRY_EXC_ERR)
            return
        if qp.attrs.get("rnr_retry", 7) != 7:
            qp.rnr_left -= 1
        wait = RNR_MS[p.syndrome & 0x1F] * MS
        w.rnr_until = now + int(wait)
        qp.rnr_hold_until = max(qp.rnr_hold_until, w.rnr_until)
        for x in w.units:
            if not x.acked and x.txcount:
                x.hold = True
                x.inflight = 0
                x.lost_why = None
                if x not in qp.retx_q:
                    qp.retx_q.append(x)

    def detect_losses(self, now, qp):
        K = qp.reorder_k()
        seqs = qp.acked_seqs
        for u in qp.unit_list:
            if u.acked or u.lost or u.sacked or u.hold or not u.txcount or u.wr.kind == "atomic" and u.sacked:
                continue
            n_after = len(seqs) - bisect.bisect_right(seqs, u.tx_seq)
            if n_after >= K:
                self.deem_lost(now, qp, u, "reorder")

    def deem_lost(self, now, qp, u, why):
        u.lost = True
        u.lost_why = why
        if u.wr.kind == "read":
            u.wr.rd_inflight = 0
        u.inflight = 0
        u.exempt_ok = True
        if u not in qp.retx_q:
            qp.retx_q.append(u)
        if u.wr.kind == "atomic" and u.sacked:
            # MR-MPF-11 (2026-12-02): an atomic resent under MR-MPP-14 after an MP ACK
            # reported it received was not lost: no retirement, no decrease (its expiry
            # still counts toward retry_cnt, MR-MPL-8)
            return
        self.retire(now, qp, u.ev)
        self.loss_event(now, qp, why, timer_start=u.tx_ns)

    def req_on_read_resp(self, now, qp, p):
        w = None
        for x in qp.sq:
            if x.kind == "read" and x.started and not x.done and x.msn == p.msn:
                w = x
                break
        P = qp.pmtu
        if w is None or p.msg_len != w.length or p.offset % P or \
                (w.length and p.offset >= w.length) or len(p.payload) != (min(P, w.length - p.offset) if w.length else 0) or \
                (p.psn != (w.first_psn + p.offset // P) & M24):
            return
        idx = p.offset // P
        r = self.rtt_sample(now, qp, p.ts)
        u = w.units[0]
        newly = 0
        if idx not in w.rd_got:
            w.rd_got.add(idx)
            if len(p.payload):
                self.sg_scatter(qp, w.sg_list, p.offset, p.payload)
            newly = len(p.payload) or 1
            w.rd_last_arrival = now
        # MR-MPR-6: the K later responses are counted over the QP, whatever READ they
        # answer (and a repeated one is an arrival too; distinct PSNs are counted)
        qp.rd_seq += 1
        qp.rd_arrivals.append((qp.rd_seq, p.psn))
        # MR-MPA-11: a response acknowledges the READ's PSN block and earlier
        last = (w.first_psn + w.npkts - 1) & M24
        for x in list(qp.unit_list):
            if not later((x.psn + x.npsn - 1) & M24, last) and x.txcount and x.wr.kind != "atomic":
                if self.ack_unit(qp, x):
                    newly += x.plen
        if later(last, qp.cum):
            qp.cum = last
        if newly:
            qp.backoff = 1
            qp.rto_expiries = 0
            qp.retry_left = qp.attrs.get("retry_cnt", 7)
        self.signal(now, qp, r, bool(p.ce), newly)
        w.rd_inflight = max(0, w.length - self.read_got_bytes(qp, w)) if not getattr(w, "rd_missing", None) else w.rd_inflight
        self.detect_losses(now, qp)
        self.complete_in_order(now, qp)
        self.req_pump(now, qp)

    def req_on_trimmed_resp(self, now, qp, p):
        if p.opcode != W.READ_RESP:
            return
        for w in qp.sq:
            if w.kind == "read" and w.started and not w.done and w.msn == p.msn:
                idx = p.offset // qp.pmtu
                if idx not in w.rd_got:
                    self.send_rerequest(now, qp, w, idx, idx + 1, "trim")
                    self.loss_event(now, qp, "trim")
                return

    def read_rerequests(self, now, qp):
        """MR-MPR-6/7: responses deemed missing -> re-request contiguous ranges."""
        K = qp.reorder_k()
        arr = qp.rd_arrivals
        oldest = None   # the earliest request a missing response is counted from
        for w in qp.sq:
            if w.kind != "read" or not w.started or w.done or not w.units[0].txcount:
                continue
            u = w.units[0]
            if not w.length:
                n = 1
            else:
                n = w.npkts
            if len(w.rd_got) >= n:
                continue
            if w.length:
                # only what was requested can be missing (parts, MR-MPR-11)
                n = min(n, -(-getattr(w, "rd_req_len", w.length) // qp.pmtu))
            req_seq = getattr(w, "rd_req_seq_idx", {})
            # the first request (or its latest copy) asked for the first range
            first_n = -(-getattr(w, "rd_first_len", w.length) // qp.pmtu) if w.length else 1
            missing = []
            rto_base = max(getattr(w, "rd_req_ns", 0), getattr(w, "rd_last_arrival", 0))
            by_time = now - rto_base >= qp.rto()
            for i in range(n):
                if i in w.rd_got:
                    continue
                since = max(req_seq.get(i, 0), getattr(w, "rd_req_seq", 0) if i < first_n else 0)
                oldest = since if oldest is None else min(oldest, since)
                # MR-MPR-6: responses with K distinct PSNs later than q arrived "on the QP"
                # since the latest request that asked for q -- those of later READs too
                q = (w.first_psn + i) & M24
                cnt = len({ps for (s, ps) in arr if s > since and later(ps, q)})
                if cnt >= K:
                    missing.append((i, "reorder"))
                elif by_time and (u.acked or u.sacked or w.rd_got):
                    missing.append((i, "timeout"))
            if not missing:
                continue
            # contiguous ranges
            i0 = None
            prev = None
            why0 = missing[0][1]
            for i, why in missing + [(None, None)]:
                if i0 is None:
                    i0, prev = i, i
                elif i is not None and i == prev + 1:
                    prev = i
                else:
                    self.send_rerequest(now, qp, w, i0, prev + 1, why0)
                    i0, prev = i, i
            self.loss_event(now, qp, missing[0][1], timer_start=rto_base)
            if missing[0][1] == "timeout":
                qp.backoff = min(qp.backoff * 2, 1 << 20)
                qp.rto_expiries += 1
                if qp.rto_expiries > qp.attrs.get("retry_cnt", 7):
                    self.complete_in_order(now, qp, err_wr=self.oldest_incomplete(qp), err_status=RETRY_EXC_ERR)
                    return
        # arrivals no missing response is counted from any more (a READ requested later
        # counts from its own request): keeps the list bounded
        qp.rd_arrivals = [a for a in arr if a[0] > oldest] if oldest is not None else []

    def read_part_limit(self, qp):
        """MR-MPR-11: the longest range one READ request (first or part) may ask for."""
        P = qp.pmtu
        return max(P, (int(qp.cwnd) // P) * P)

    def read_parts(self, now, qp):
        """MR-MPR-11 (v1.2): the rest of a READ longer than the window, in further parts
        (R clear), each once a response to the first request has arrived and as cwnd allows."""
        P = qp.pmtu
        for w in qp.sq:
            if w.kind != "read" or not w.started or w.done or not w.rd_got:
                continue
            off = getattr(w, "rd_req_len", w.length)
            if off >= w.length:
                continue
            ln = min(w.length - off, self.read_part_limit(qp))
            infl = self.inflight(qp)
            if infl and infl + ln > qp.cwnd:
                return
            ts = now & 0xFFFFFFFF
            ext = W.mpeth(0, 1 if off + ln == w.length else 0, 0, w.msn, off, w.length, ts) + \
                W.reth(w.remote_addr, w.rkey, ln)
            self.send_pkt(qp, W.READ_REQ, (w.first_psn + off // P) & M24, ext, ackreq=1,
                          sport=self.pick_ev(qp, now))
            w.rd_req_len = off + ln
            w.rd_req_ns = now
            d = getattr(w, "rd_req_seq_idx", {})
            for i in range(off // P, -(-(off + ln) // P)):
                d[i] = qp.rd_seq
            w.rd_req_seq_idx = d

    def send_rerequest(self, now, qp, w, i0, i1, why):
        P = qp.pmtu
        off = i0 * P
        ln = min(w.length, i1 * P) - off if w.length else 0
        ts = now & 0xFFFFFFFF
        ext = W.mpeth(1 if off == 0 else 0, 1 if off + ln == w.length else 0, 1, w.msn, off, w.length, ts) \
            + W.reth(w.remote_addr, w.rkey, ln)
        # F/L on a re-request: MR-MPH-2 reading -- F when offset 0, L when it asks for the last byte
        self.send_pkt(qp, W.READ_REQ, (w.first_psn + i0) & M24, ext, ackreq=1, sport=self.pick_ev(qp, now))
        w.rd_req_ns = now
        qp.rd_seq += 1
        d = getattr(w, "rd_req_seq_idx", {})
        for i in range(i0, i1):
            d[i] = qp.rd_seq
        w.rd_req_seq_idx = d
        self.counters["retransmitted_packets"] += 1
        k = {"reorder": "mp_retx_reorder", "timeout": "mp_retx_timeout", "trim": "mp_retx_trim"}.get(why)
        if k:
            self.counters[k] += 1

    def oldest_incomplete(self, qp):
        for w in qp.sq:
            if not w.done:
                return w
        return None

    def complete_in_order(self, now, qp, err_wr=None, err_status=None):
        while qp.sq:
            w = qp.sq[0]
            if err_wr is w:
                qp.sq.popleft()
                w.done = True
                self.complete(qp.send_cq, wr_id=w.wr_id, status=err_status, opcode=w.wc_opcode, qpn=qp.qpn)
                self.qp_to_err(qp)
                return
            ok = False
            if w.started:
                if w.kind in ("send", "write"):
                    ok = len(w.acked) >= w.npkts
                elif w.kind == "read":
                    ok = len(w.rd_got) >= (w.npkts if w.length else 1)
                else:
                    ok = w.orig is not None
            if not ok:
                if err_wr is not None:
                    # MR-MPP-16: earlier not fully acknowledged -> WR_FLUSH_ERR
                    qp.sq.popleft()
                    w.done = True
                    self.complete(qp.send_cq, wr_id=w.wr_id, status=WR_FLUSH_ERR, opcode=w.wc_opcode, qpn=qp.qpn)
                    continue
                return
            qp.sq.popleft()
            w.done = True
            if w.kind == "atomic":
                s = w.sg_list[0]
                self.mr_by_lkey(s["lkey"], qp.pd).write(s["addr"], struct.pack("<Q", w.orig))
            for u in w.units:
                if u in qp.unit_list:
                    qp.unit_list.remove(u)
                for i in range(u.npsn):
                    if qp.units.get((u.psn + i) & M24) is u:
                        del qp.units[(u.psn + i) & M24]
                if u in qp.retx_q:
                    qp.retx_q.remove(u)
            if w.signaled or qp.sq_sig_all:
                self.complete(qp.send_cq, wr_id=w.wr_id, opcode=w.wc_opcode, qpn=qp.qpn,
                              byte_len=w.length)

    def req_tick(self, now, qp):
        if qp.state != "rts" or not qp.mp:
            return
        # RTO (§7.8 rule (b), v1.2): the RTO expires when the doubled RTO has elapsed since
        # the latest transmission of some PSN in flight; each expiry deems lost every PSN
        # in flight whose latest transmission is at least the undoubled RTO old.
        rto = qp.rto()
        rto0 = qp.rto_undoubled()
        flight = [u for u in qp.unit_list if u.txcount and not u.acked and not u.lost and not u.hold
                  and (not u.sacked or u.wr.kind == "atomic")
                  and not (u.wr.kind == "read" and (u.sacked or u.wr.rd_got))]
        expired = []
        if any(now - u.tx_ns >= rto for u in flight):
            expired = [u for u in flight if now - u.tx_ns >= rto0]
        if expired:
            qp.rto_expiries += 1
            if qp.rto_expiries > qp.attrs.get("retry_cnt", 7):
                self.complete_in_order(now, qp, err_wr=self.oldest_incomplete(qp), err_status=RETRY_EXC_ERR)
                return
            for u in expired:
                self.deem_lost(now, qp, u, "timeout")
            qp.backoff = min(qp.backoff * 2, 1 << 20)
        # probes for retired values (§7.13)
        for v, st in list(qp.retired.items()):
            if now >= st["next"]:
                # MR-MPF-3: the wait after this probe is twice the one before it (at most
                # mp_retire_hold_max): hold, then 2 hold, 4 hold, ... The doubling used to
                # come one probe late (hold, hold, 2 hold), which mp.path.probe_backoff
                # judged once the declared timers let a bed judge it (2026-12-02)
                st["wait"] = min(st["wait"] * 2, Cfg.retire_hold_max)
                ts = now & 0xFFFFFFFF
                ext = W.mpeth(0, 0, 0, 0, 0, 0, ts)
                last = qp.last_sent if not qp.last_sent_none else (qp.attrs["sq_psn"] - 1) & M24
                self.send_pkt(qp, W.PROBE, last, ext, ackreq=1, sport=v)
                self.counters["mp_probes_sent"] += 1
                st["probe_ts"] = ts
                # its timeout (§7.13): the wait that follows it, or one RTO if longer
                st["next"] = now + max(st["wait"], qp.rto())
        self.req_pump(now, qp)

    def next_deadline(self, now, idle=2 * MS):
        """The earliest time a timer of some QP may fire (at most now + idle), so that
        the data plane sleeps exactly until then instead of polling on a fixed period."""
        d = now + idle
        for qp in self.qps.values():
            if qp.state not in ("rtr", "rts"):
                continue
            if not qp.mp:
                d = min(d, base_req.deadline(qp, d))
                continue
            if qp.uncovered and qp.uncovered_since is not None:
                d = min(d, qp.uncovered_since)
            if qp.state != "rts":
                continue
            if qp.rnr_hold_until > now:
                d = min(d, qp.rnr_hold_until)
            if qp.unit_list:
                rto = qp.rto()
                for u in qp.unit_list:
                    if u.txcount and not u.acked and not u.lost and not u.hold and \
                            (not u.sacked or u.wr.kind == "atomic"):
                        d = min(d, u.tx_ns + rto)
                    if u.hold:
                        d = min(d, u.wr.rnr_until)
                    if u.wr.kind == "read" and u.txcount:
                        d = min(d, max(getattr(u.wr, "rd_req_ns", 0),
                                       getattr(u.wr, "rd_last_arrival", 0)) + rto)
            for st in qp.retired.values():
                d = min(d, st["next"])
            for t in qp.skipped.values():
                if t > now:
                    d = min(d, t)
        return max(d, now + 30 * US)   # a timer already due that tick() keeps: no busy loop

    def tick(self, now):
        for qp in list(self.qps.values()):
            if not qp.mp:
                base_req.tick(self, now, qp)
                continue
            if qp.state in ("rtr", "rts"):
                self.rsp_tick(now, qp)
                # receive WRs posted later may unblock staged SENDs / completions
            if qp.state == "rts":
                self.req_tick(now, qp)
