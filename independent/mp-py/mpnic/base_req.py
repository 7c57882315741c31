"""A minimal in-order Base RC requester (SPEC §6.5, §6.8, §6.11, §6.13–§6.16).

Go-back-N: one send pointer; a retry (local ACK timeout, NAK 0x60, RNR NAK after
its wait, or a READ/atomic implied lost by a later ACK, MR-REQ-4) moves the
pointer back and the pump resends in order from there, skipping what an ACK
already covered (MR-REQ-6) and re-requesting a partly answered READ from its
first missing response (MR-REQ-5).

PSNs are tracked as unbounded integers ("linear"); only the wire sees 24 bits.
Called with the device lock held, like the rest of the core.
"""
import struct

from . import wire as W
from .wire import M24, HALF

SUCCESS, BAD_RESP_ERR, REM_INV_REQ_ERR, REM_ACCESS_ERR, REM_OP_ERR = 0, 7, 9, 10, 11
LOC_PROT_ERR, LOC_LEN_ERR, RETRY_EXC_ERR, RNR_RETRY_EXC_ERR = 4, 1, 12, 13

# Base opcodes (§4.3) by (kind, position, variant)
SEND_OP = {("F", None): 0x00, ("M", None): 0x01, ("L", None): 0x02, ("L", "imm"): 0x03,
           ("O", None): 0x04, ("O", "imm"): 0x05, ("L", "inv"): 0x16, ("O", "inv"): 0x17}
WRITE_OP = {("F", None): 0x06, ("M", None): 0x07, ("L", None): 0x08, ("L", "imm"): 0x09,
            ("O", None): 0x0A, ("O", "imm"): 0x0B}
READ_REQ, CMP_SWAP, FETCH_ADD = 0x0C, 0x13, 0x14
RD_FIRST, RD_MID, RD_LAST, RD_ONLY, ACK, ATOMIC_ACK = 0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12
RESP_OPS = {RD_FIRST, RD_MID, RD_LAST, RD_ONLY, ACK, ATOMIC_ACK}

RNR_MS = [655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32, 0.48, 0.64,
          0.96, 1.28, 1.92, 2.56, 3.84, 5.12, 7.68, 10.24, 15.36, 20.48, 30.72, 40.96,
          61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52]


def req_init(qp, sq_psn):
    """RTR -> RTS: the requester starts at sq_psn (linear = sq_psn)."""
    qp.bq_next = sq_psn          # next PSN to assign
    qp.bq_snd = sq_psn           # next PSN the pump sends
    qp.bq_acked = sq_psn - 1     # newest PSN acknowledged (ACK or implied)
    qp.bq_max_sent = sq_psn - 1  # newest PSN ever sent
    qp.bq_tmr = None             # local ACK timer start (ns), None when stopped
    qp.bq_rnr_until = 0
    qp.bq_retry_psn = None       # PSN of the NAK 0x60 whose retry is in progress (MR-TMR-9)
    qp.bq_retry_left = qp.attrs.get("retry_cnt", 7)
    qp.bq_rnr_left = qp.attrs.get("rnr_retry", 7)


def lin(qp, p):
    """24-bit PSN -> linear, by the half-space rule around the newest acknowledged PSN."""
    ref = qp.bq_acked
    d = (p - ref) & M24
    return ref + d if d < HALF else ref - ((ref - p) & M24)


def _timeout_ns(qp):
    t = qp.attrs.get("timeout", 14)
    return None if t == 0 else int(4096 * (1 << t))


def _variant(w):
    if w.mp_op in (W.SEND_IMM, W.WRITE_IMM):
        return "imm"
    if w.mp_op == W.SEND_INV:
        return "inv"
    return None


def post(dev, now, qp, w):
    qp.sq.append(w)
    pump(dev, now, qp)


def _start(dev, qp, w):
    """Local checks, then PSNs. False: the WR ended in error (QP to ERR)."""
    P = qp.pmtu
    w.length = sum(s["length"] for s in w.sg_list) if w.kind != "atomic" else 8
    ok = dev.sg_check(qp, w.sg_list, w.kind in ("read", "atomic"))
    if w.kind == "atomic" and (len(w.sg_list) != 1 or w.sg_list[0]["length"] != 8):
        ok = False
    if not ok:
        _fail(dev, qp, w, LOC_PROT_ERR)
        return False
    if w.length > (1 << 31):
        _fail(dev, qp, w, LOC_LEN_ERR)
        return False
    if w.kind in ("send", "write"):
        w.data = dev.sg_gather(qp, w.sg_list)
    w.npkts = 1 if w.kind == "atomic" else max(1, -(-w.length // P))
    w.started = True
    w.first_psn = qp.bq_next
    w.last_psn = qp.bq_next + w.npkts - 1
    w.rd_next = 0   # READ: responses received in order
    qp.bq_next += w.npkts
    return True


def _fail(dev, qp, w, status):
    """Complete w in error: earlier WRs complete as acknowledged, QP to ERR."""
    while qp.sq and qp.sq[0] is not w:
        x = qp.sq.popleft()
        x.done = True
        if x.signaled or qp.sq_sig_all:
            dev.complete(qp.send_cq, wr_id=x.wr_id, opcode=x.wc_opcode, qpn=qp.qpn,
                         byte_len=x.length)
    if qp.sq and qp.sq[0] is w:
        qp.sq.popleft()
    w.done = True
    dev.complete(qp.send_cq, wr_id=w.wr_id, status=status, opcode=w.wc_opcode, qpn=qp.qpn)
    dev.qp_to_err(qp)


def _send(dev, now, qp, opcode, psn, ext, payload=b"", ackreq=0, se=0, upto=None):
    """upto: the last PSN the packet reserves (a READ request's block)."""
    dev.send_pkt(qp, opcode, psn & M24, ext, payload, ackreq=ackreq, se=se)
    if psn <= qp.bq_max_sent:
        dev.counters["retransmitted_packets"] += 1
    qp.bq_max_sent = max(qp.bq_max_sent, psn if upto is None else upto)
    if qp.bq_tmr is None:
        qp.bq_tmr = now


def pump(dev, now, qp):
    """Send, in order, what lies at or after the send pointer."""
    if qp.state != "rts" or now < qp.bq_rnr_until:
        return
    P = qp.pmtu
    for w in list(qp.sq):
        if qp.state != "rts":
            return
        if w.done:
            continue
        if not w.started:
            if w.fence and any(x.kind in ("read", "atomic") and not x.done
                               for x in qp.sq if x is not w and x.started):
                return
            if w.kind in ("read", "atomic"):
                outst = sum(1 for x in qp.sq if x.started and not x.done and x.kind in ("read", "atomic"))
                if outst >= max(1, qp.attrs.get("max_rd_atomic", 16)):
                    return
            if qp.bq_next - (qp.bq_acked + 1) >= HALF - 1:   # MR-PSN-4
                return
            if not _start(dev, qp, w):
                return
        if w.last_psn < qp.bq_snd:
            continue
        if w.kind in ("send", "write"):
            var = _variant(w)
            for i in range(w.npkts):
                psn = w.first_psn + i
                if psn < qp.bq_snd or psn <= qp.bq_acked:
                    continue
                off = i * P
                plen = min(P, w.length - off) if w.length else 0
                pos = "O" if w.npkts == 1 else ("F" if i == 0 else ("L" if i == w.npkts - 1 else "M"))
                last = pos in ("O", "L")
                tbl = SEND_OP if w.kind == "send" else WRITE_OP
                op = tbl[(pos, var if last else None)]
                ext = b""
                if w.kind == "write" and pos in ("F", "O"):
                    ext += W.reth(w.remote_addr, w.rkey, w.length)
                if last and var == "imm":
                    ext += struct.pack("!I", w.imm)
                if last and var == "inv":
                    ext += struct.pack("!I", w.invalidate_rkey)
                se = 1 if (last and w.solicited and (w.kind == "send" or var == "imm")) else 0
                ackreq = 1 if (last or i % 32 == 31) else 0   # MR-PKT-6, MR-PKT-7
                _send(dev, now, qp, op, psn, ext, w.data[off:off + plen], ackreq=ackreq, se=se)
            qp.bq_snd = w.last_psn + 1
        elif w.kind == "read":
            got = w.rd_next * P
            psn = w.first_psn + w.rd_next
            rest = w.length - got if w.length else 0
            _send(dev, now, qp, READ_REQ, psn, W.reth(w.remote_addr + got, w.rkey, rest), ackreq=1,
                  upto=w.last_psn)
            qp.bq_snd = w.last_psn + 1
        else:
            if w.mp_op == W.CMP_SWAP:
                ext = struct.pack("!QIQQ", w.remote_addr, w.rkey, w.swap, w.compare)
                op = CMP_SWAP
            else:
                ext = struct.pack("!QIQQ", w.remote_addr, w.rkey, w.add, 0)
                op = FETCH_ADD
            _send(dev, now, qp, op, w.first_psn, ext, ackreq=1)
            qp.bq_snd = w.last_psn + 1


def _retry_point(qp, w):
    if w.kind == "read":
        return w.first_psn + w.rd_next
    if w.kind == "atomic":
        return w.first_psn
    return max(w.first_psn, qp.bq_acked + 1)


def _oldest(qp):
    for w in qp.sq:
        if w.started and not w.done:
            return w
    return None


def _retry(dev, now, qp, psn, count=True):
    """Go back to psn. False when retry_cnt is exhausted (the QP is then in ERR)."""
    if count:
        if qp.bq_retry_left <= 0:
            w = _oldest(qp)
            if w is not None:
                _fail(dev, qp, w, RETRY_EXC_ERR)
            return False
        qp.bq_retry_left -= 1
    if psn < qp.bq_snd:
        qp.bq_snd = psn
    qp.bq_tmr = now
    return True


def _lost_reads(qp, upto):
    """The oldest READ/atomic ending at or before upto whose responses have not all arrived."""
    for w in qp.sq:
        if w.started and not w.done and w.kind in ("read", "atomic") and w.last_psn <= upto:
            return w
    return None


def _complete_in_order(dev, qp):
    while qp.sq:
        w = qp.sq[0]
        if not w.started:
            return
        if w.kind in ("send", "write"):
            ok = w.last_psn <= qp.bq_acked
        elif w.kind == "read":
            ok = w.rd_next >= w.npkts
        else:
            ok = w.orig is not None
        if not ok:
            return
        qp.sq.popleft()
        w.done = True
        if w.kind == "atomic":
            s = w.sg_list[0]
            dev.mr_by_lkey(s["lkey"], qp.pd).write(s["addr"], struct.pack("<Q", w.orig))
        if w.signaled or qp.sq_sig_all:
            dev.complete(qp.send_cq, wr_id=w.wr_id, opcode=w.wc_opcode, qpn=qp.qpn,
                         byte_len=w.length)


def _ack_upto(dev, now, qp, p):
    """PSNs up to p are acknowledged. True when that acknowledged new PSNs."""
    if p <= qp.bq_acked:
        return False
    qp.bq_acked = p
    if qp.bq_snd <= p:
        qp.bq_snd = p + 1
    qp.bq_retry_left = qp.attrs.get("retry_cnt", 7)    # MR-TMR-7
    qp.bq_rnr_left = qp.attrs.get("rnr_retry", 7)
    qp.bq_tmr = now
    return True


def _wr_at(qp, p):
    for w in qp.sq:
        if w.started and not w.done and w.first_psn <= p <= w.last_psn:
            return w
    return None


def on_response(dev, now, qp, ipb, opcode, b1, w3):
    c = dev.counters
    if qp.state != "rts" or opcode not in RESP_OPS:
        c["malformed_drops"] += 1
        return
    has_aeth = opcode in (RD_FIRST, RD_LAST, RD_ONLY, ACK, ATOMIC_ACK)
    hb = 40 + (4 if has_aeth else 0) + (8 if opcode == ATOMIC_ACK else 0)
    if len(ipb) < hb + 4:
        c["malformed_drops"] += 1
        return
    padcnt = (b1 >> 4) & 3
    body = len(ipb) - hb - 4
    if (opcode in (ACK, ATOMIC_ACK) and (padcnt or body)) or padcnt > body:
        c["malformed_drops"] += 1
        return
    if W.icrc(ipb[:-4]) != ipb[-4:]:
        c["icrc_errors"] += 1
        return
    p = lin(qp, w3 & M24)
    # MR-REQ-9: later than the last PSN sent, or earlier than the oldest unacknowledged - 1
    ow = _oldest(qp)
    una = _retry_point(qp, ow) if ow is not None else qp.bq_acked + 1
    if p > qp.bq_max_sent or p < min(una, qp.bq_acked + 1) - 1:
        return
    syn = msn = None
    if has_aeth:
        a = struct.unpack_from("!I", ipb, 40)[0]
        syn, msn = a >> 24, a & M24
        if 0x40 <= syn <= 0x5F or syn >= 0x80:   # MR-REQ-11
            return
    if opcode == ACK:
        return _on_ack(dev, now, qp, p, syn)
    w = _wr_at(qp, p)
    if w is None:
        return   # a duplicate response for something already complete
    if opcode == ATOMIC_ACK:
        if w.kind != "atomic":
            return _fail(dev, qp, w, BAD_RESP_ERR)
        if syn >> 5 != 0:
            return _fail(dev, qp, w, BAD_RESP_ERR)
        if w.orig is None:
            w.orig = struct.unpack_from("!Q", ipb, 44)[0]
            _ack_upto(dev, now, qp, w.first_psn - 1)
            qp.bq_tmr = now
            qp.bq_retry_left = qp.attrs.get("retry_cnt", 7)
            qp.bq_rnr_left = qp.attrs.get("rnr_retry", 7)
        _complete_in_order(dev, qp)
        pump(dev, now, qp)
        return
    # READ response
    if w.kind != "read":
        return _fail(dev, qp, w, BAD_RESP_ERR)
    exp = w.first_psn + w.rd_next
    if p != exp:
        if p > exp:   # MR-READ-7 drop; MR-READ-8 re-request, from an older unanswered READ (MR-REQ-4)
            lw = _lost_reads(qp, p - 1)
            rp = _retry_point(qp, lw) if lw is not None and lw is not w else exp
            if qp.bq_retry_psn != rp:
                qp.bq_retry_psn = rp
                if _retry(dev, now, qp, rp):
                    pump(dev, now, qp)
        return
    if has_aeth and syn >> 5 != 0:
        return _fail(dev, qp, w, BAD_RESP_ERR)
    P = qp.pmtu
    rest = w.length - w.rd_next * P
    pay = bytes(ipb[hb:len(ipb) - 4 - padcnt])
    if opcode in (RD_FIRST, RD_MID):
        good = len(pay) == P and rest > P
    else:
        good = len(pay) == rest
    if not good:
        return _fail(dev, qp, w, BAD_RESP_ERR)
    if pay and not dev.sg_scatter(qp, w.sg_list, w.rd_next * P, pay):
        return _fail(dev, qp, w, LOC_PROT_ERR)
    w.rd_next += 1
    if opcode in (RD_LAST, RD_ONLY) and w.rd_next < w.npkts:
        return _fail(dev, qp, w, BAD_RESP_ERR)
    _ack_upto(dev, now, qp, w.first_psn - 1)   # a READ response implies the earlier PSNs
    qp.bq_tmr = now
    qp.bq_retry_left = qp.attrs.get("retry_cnt", 7)
    qp.bq_rnr_left = qp.attrs.get("rnr_retry", 7)
    if qp.bq_retry_psn is not None and p >= qp.bq_retry_psn:
        qp.bq_retry_psn = None
    if w.rd_next >= w.npkts and qp.bq_snd <= w.last_psn:
        qp.bq_snd = w.last_psn + 1
    _complete_in_order(dev, qp)
    pump(dev, now, qp)


def _on_ack(dev, now, qp, p, syn):
    kind = syn >> 5
    if kind == 0:     # ACK
        _ack_upto(dev, now, qp, p)
        if qp.bq_retry_psn is not None and p >= qp.bq_retry_psn:
            qp.bq_retry_psn = None
        _complete_in_order(dev, qp)
        lw = _lost_reads(qp, p)   # MR-REQ-4
        if lw is not None:
            rp = _retry_point(qp, lw)
            if qp.bq_retry_psn != rp:
                qp.bq_retry_psn = rp
                if not _retry(dev, now, qp, rp):
                    return
        if _oldest(qp) is None:
            qp.bq_tmr = None
        pump(dev, now, qp)
        return
    if kind == 1:     # RNR NAK
        _ack_upto(dev, now, qp, p - 1)
        _complete_in_order(dev, qp)
        lw = _lost_reads(qp, p - 1)
        if lw is not None:   # MR-RNR-4 exception: retry now, against retry_cnt
            if _retry(dev, now, qp, _retry_point(qp, lw)):
                pump(dev, now, qp)
            return
        w = _wr_at(qp, p)
        if qp.bq_rnr_left == 0:
            if w is not None:
                _fail(dev, qp, w, RNR_RETRY_EXC_ERR)
            return
        if qp.bq_rnr_left != 7:
            qp.bq_rnr_left -= 1
        qp.bq_rnr_until = now + int(RNR_MS[syn & 0x1F] * 1_000_000)
        if p < qp.bq_snd:
            qp.bq_snd = p
        qp.bq_tmr = None
        return
    if kind == 3:     # NAK
        code = syn & 0x1F
        if code == 0:     # PSN sequence error: go-back-N (MR-NAK-5)
            _ack_upto(dev, now, qp, p - 1)
            _complete_in_order(dev, qp)
            lw = _lost_reads(qp, p - 1)
            rp = _retry_point(qp, lw) if lw is not None else p
            if qp.bq_retry_psn == rp:   # MR-TMR-9
                return
            qp.bq_retry_psn = rp
            if _retry(dev, now, qp, rp):
                pump(dev, now, qp)
            return
        w = _wr_at(qp, p)
        if w is None:
            return
        _ack_upto(dev, now, qp, w.first_psn - 1)
        _complete_in_order(dev, qp)
        _fail(dev, qp, w, {1: REM_INV_REQ_ERR, 2: REM_ACCESS_ERR}.get(code, REM_OP_ERR))
        return
    # kind 2 (0x40-0x5F) and 4-7 were dropped as reserved


def tick(dev, now, qp):
    if qp.state != "rts" or not hasattr(qp, "bq_next"):
        return
    if qp.bq_rnr_until and now >= qp.bq_rnr_until:
        qp.bq_rnr_until = 0
        qp.bq_tmr = now
        pump(dev, now, qp)
        return
    if qp.bq_rnr_until:
        return
    T = _timeout_ns(qp)
    w = _oldest(qp)
    if w is None:
        qp.bq_tmr = None
        pump(dev, now, qp)
        return
    if T is not None and qp.bq_tmr is not None and now - qp.bq_tmr >= T:
        dev.counters["local_ack_timeouts"] += 1
        qp.bq_retry_psn = None
        if _retry(dev, now, qp, _retry_point(qp, w)):
            pump(dev, now, qp)
        return
    pump(dev, now, qp)


def deadline(qp, d):
    """The earliest time tick() has something to do (bounded by d)."""
    if qp.state != "rts" or not hasattr(qp, "bq_next"):
        return d
    if qp.bq_rnr_until:
        return min(d, qp.bq_rnr_until)
    T = _timeout_ns(qp)
    if T is not None and qp.bq_tmr is not None:
        d = min(d, qp.bq_tmr + T)
    return d
