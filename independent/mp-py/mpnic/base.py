"""A minimal Base RC responder (SPEC §6) so the harness can calibrate and the
Base QP of an MP device answers in-order WRITE/SEND/READ/atomics.  Not the
object of this exercise: its requester is base_req.py."""
import collections
import struct
from . import wire as W
from .wire import M24, pdiff

# opcode -> (headers, has_payload, pos)
BH = {0x00: ((), 1, "F"), 0x01: ((), 1, "M"), 0x02: ((), 1, "L"), 0x03: (("IMM",), 1, "L"),
      0x04: ((), 1, "O"), 0x05: (("IMM",), 1, "O"), 0x06: (("RETH",), 1, "F"),
      0x07: ((), 1, "M"), 0x08: ((), 1, "L"), 0x09: (("IMM",), 1, "L"),
      0x0A: (("RETH",), 1, "O"), 0x0B: (("RETH", "IMM"), 1, "O"), 0x0C: (("RETH",), 0, "O"),
      0x13: (("ATOM",), 0, "O"), 0x14: (("ATOM",), 0, "O"),
      0x16: (("IETH",), 1, "L"), 0x17: (("IETH",), 1, "O")}
BLEN = {k: 12 + sum(W.HLEN[h] for h in v[0]) for k, v in BH.items()}


def base_init(qp):
    qp.b_epsn = qp.attrs.get("rq_psn", 0)
    qp.b_msn = 0
    qp.b_nak = False
    qp.b_cur = None   # ("send"|"write", state)
    qp.b_res = collections.deque(maxlen=max(16, qp.attrs.get("max_dest_rd_atomic", 16)))  # §6.9


def base_ack(dev, qp, syn=0x1F, psn=None):
    if psn is None:
        psn = (qp.b_epsn - 1) & M24
    dev.send_pkt(qp, 0x11, psn, struct.pack("!I", (syn << 24) | qp.b_msn))


def base_error(dev, qp, psn, syn):
    dev.send_pkt(qp, 0x11, psn, struct.pack("!I", (syn << 24) | qp.b_msn))
    dev.qp_to_err(qp)


def read_responses(dev, qp, mr, va, L, psn, msn):
    """MR-READ-2: responses for [va, va+L) numbered from psn."""
    P = qp.pmtu
    n = max(1, -(-L // P))
    aeth = struct.pack("!I", (0x1F << 24) | msn)
    for i in range(n):
        data = mr.read(va + i * P, min(P, L - i * P)) if L else b""
        if n == 1:
            op, ext = 0x10, aeth
        elif i == 0:
            op, ext = 0x0D, aeth
        elif i == n - 1:
            op, ext = 0x0F, aeth
        else:
            op, ext = 0x0E, b""
        dev.send_pkt(qp, op, (psn + i) & M24, ext, data)


def base_duplicate_rdma(dev, qp, ipb, opcode, psn):
    """A duplicate READ or atomic: replay from the kept slot (MR-DUP-4, MR-DUP-5), else drop
    (MR-DUP-6)."""
    P = qp.pmtu
    if opcode == 0x0C:
        va, rkey, dlen = struct.unpack_from("!QII", ipb, 40)
        for r in reversed(qp.b_res):
            if r[0] != "read":
                continue
            _, f, v, rk, L = r
            k = pdiff(psn, f)
            n = max(1, -(-L // P))
            if k >= n:
                continue
            # a re-request: same key, VA advanced by k PMTUs, the rest of the length
            if rk != rkey or va != v + k * P or dlen != L - k * P:
                return   # a duplicate that is not a re-request: drop (allowed, MR-DUP-6)
            mr = dev.mr_by_rkey(rkey, qp.pd) if dlen else None
            if dlen and (mr is None or "remote_read" not in mr.access or not mr.contains(va, dlen)):
                return   # the key no longer grants the range: drop (MR-DUP-4, hfi1's choice)
            read_responses(dev, qp, mr, va, dlen, psn, qp.b_msn)
            return
        return
    for r in reversed(qp.b_res):
        if r[0] == "atomic" and r[1] == psn and r[2] == opcode:
            dev.send_pkt(qp, 0x12, psn, struct.pack("!IQ", (0x1F << 24) | qp.b_msn, r[3]))
            return


def base_request(dev, now, qp, ipb, opcode, b1, w3):
    c = dev.counters
    if opcode not in BH:
        c["malformed_drops"] += 1
        return
    if qp.state not in ("rtr", "rts"):
        c["malformed_drops"] += 1
        return
    if ipb[12:16] != qp.attrs["path"]["dest_ip_b"]:
        c["malformed_drops"] += 1
        return
    hb = 20 + 8 + BLEN[opcode]
    if len(ipb) < hb + 4:
        c["malformed_drops"] += 1
        return
    padcnt = (b1 >> 4) & 3
    body = len(ipb) - hb - 4
    if (not BH[opcode][1] and (padcnt or body)) or padcnt > body:
        c["malformed_drops"] += 1
        return
    if W.icrc(ipb[:-4]) != ipb[-4:]:
        c["icrc_errors"] += 1
        return
    if not hasattr(qp, "b_epsn"):
        base_init(qp)
    psn = w3 & M24
    ackreq = w3 >> 31
    d = pdiff(psn, qp.b_epsn)
    if d != 0:
        if d < W.HALF:
            if not qp.b_nak:
                qp.b_nak = True
                c["seq_naks_sent"] += 1
                base_ack(dev, qp, 0x60, qp.b_epsn)
        else:
            c["duplicate_requests"] += 1
            if opcode in (0x0C, 0x13, 0x14):
                base_duplicate_rdma(dev, qp, ipb, opcode, psn)
            elif ackreq:
                base_ack(dev, qp)
        return
    qp.b_nak = False
    o = 40
    f = {}
    for h in BH[opcode][0]:
        if h == "RETH":
            f["va"], f["rkey"], f["dlen"] = struct.unpack_from("!QII", ipb, o)
        elif h == "IMM":
            f["imm"] = struct.unpack_from("!I", ipb, o)[0]
        elif h == "IETH":
            f["ieth"] = struct.unpack_from("!I", ipb, o)[0]
        elif h == "ATOM":
            f["va"], f["rkey"], f["sa"], f["cmp"] = struct.unpack_from("!QIQQ", ipb, o)
        o += W.HLEN[h]
    pay = bytes(ipb[hb:len(ipb) - 4 - padcnt])
    P = qp.pmtu
    pos = BH[opcode][2]
    acc = qp.attrs.get("access", [])
    # payload-length rule
    if len(pay) > P or (pos in "FM" and len(pay) != P) or (pos == "L" and not pay):
        return base_error(dev, qp, psn, 0x61)
    is_send = opcode in (0, 1, 2, 3, 4, 5, 0x16, 0x17)
    is_write = opcode in (6, 7, 8, 9, 0x0A, 0x0B)
    cur = qp.b_cur
    if cur is not None and ((cur[0] == "send" and not (is_send and pos in "ML")) or
                            (cur[0] == "write" and not (is_write and pos in "ML"))):
        return base_error(dev, qp, psn, 0x61)
    if cur is None and pos in "ML":
        return base_error(dev, qp, psn, 0x61)
    if is_write:
        if pos in "FO":
            if "remote_write" not in acc:
                return base_error(dev, qp, psn, 0x61)
            if f["dlen"] > (1 << 31):
                return base_error(dev, qp, psn, 0x61)
            if f["dlen"]:
                mr = dev.mr_by_rkey(f["rkey"], qp.pd)
                if mr is None or "remote_write" not in mr.access or not mr.contains(f["va"], f["dlen"]):
                    return base_error(dev, qp, psn, 0x62)
            cur = ["write", f["va"], f["rkey"], f["dlen"], 0]
        if len(pay) > cur[3] - cur[4] or (pos in "LO" and cur[4] + len(pay) != cur[3]):
            return base_error(dev, qp, psn, 0x61)
        need_rwr = opcode in (0x09, 0x0B)
        if need_rwr and not qp.rq:
            c["rnr_naks_sent"] += 1
            return base_ack(dev, qp, 0x20 | qp.attrs.get("min_rnr_timer", 12), psn)
        if pay:
            dev.mr_by_rkey(cur[2], qp.pd).write(cur[1] + cur[4], pay)
        cur[4] += len(pay)
        qp.b_cur = None if pos in "LO" else cur
        if pos in "LO":
            qp.b_msn = (qp.b_msn + 1) & M24
            if need_rwr:
                r = qp.rq.popleft()
                dev.complete(qp.recv_cq, wr_id=r["wr_id"], opcode="recv_rdma_with_imm", qpn=qp.qpn,
                             byte_len=cur[3], imm=f["imm"])
    elif is_send:
        if pos in "FO":
            if not qp.rq:
                c["rnr_naks_sent"] += 1
                return base_ack(dev, qp, 0x20 | qp.attrs.get("min_rnr_timer", 12), psn)
            cur = ["send", qp.rq[0], 0]
        r = cur[1]
        cap = sum(s["length"] for s in r["sg_list"])
        if cur[2] + len(pay) > cap:
            qp.rq.popleft()
            dev.complete(qp.recv_cq, wr_id=r["wr_id"], status=9, opcode="recv", qpn=qp.qpn)
            return base_error(dev, qp, psn, 0x61)
        if not dev.sg_check(qp, r["sg_list"], True):
            qp.rq.popleft()
            dev.complete(qp.recv_cq, wr_id=r["wr_id"], status=4, opcode="recv", qpn=qp.qpn)
            return base_error(dev, qp, psn, 0x63)
        dev.sg_scatter(qp, r["sg_list"], cur[2], pay)
        cur[2] += len(pay)
        qp.b_cur = None if pos in "LO" else cur
        if pos in "LO":
            inv = None
            if "ieth" in f:
                mr = dev.mr_by_rkey(f["ieth"], qp.pd)
                if mr is None:
                    qp.rq.popleft()
                    dev.complete(qp.recv_cq, wr_id=r["wr_id"], status=9, opcode="recv", qpn=qp.qpn)
                    return base_error(dev, qp, psn, 0x61)
                mr.valid = False
                inv = f["ieth"]
            qp.rq.popleft()
            qp.b_msn = (qp.b_msn + 1) & M24
            dev.complete(qp.recv_cq, wr_id=r["wr_id"], opcode="recv", qpn=qp.qpn, byte_len=cur[2],
                         imm=f.get("imm"), inv=inv)
    elif opcode == 0x0C:
        if "remote_read" not in acc or qp.attrs.get("max_dest_rd_atomic", 16) == 0:
            return base_error(dev, qp, psn, 0x61)
        L = f["dlen"]
        if L > (1 << 31):
            return base_error(dev, qp, psn, 0x61)
        if L:
            mr = dev.mr_by_rkey(f["rkey"], qp.pd)
            if mr is None or "remote_read" not in mr.access or not mr.contains(f["va"], L):
                return base_error(dev, qp, psn, 0x62)
        n = max(1, -(-L // P))
        qp.b_msn = (qp.b_msn + 1) & M24
        read_responses(dev, qp, mr if L else None, f["va"], L, psn, qp.b_msn)
        qp.b_res.append(("read", psn, f["va"], f["rkey"], L))
        qp.b_epsn = (psn + n) & M24
        return
    else:  # atomics
        if "remote_atomic" not in acc or qp.attrs.get("max_dest_rd_atomic", 16) == 0:
            return base_error(dev, qp, psn, 0x61)
        if f["va"] % 8:
            return base_error(dev, qp, psn, 0x61)
        mr = dev.mr_by_rkey(f["rkey"], qp.pd)
        if mr is None or "remote_atomic" not in mr.access or not mr.contains(f["va"], 8):
            return base_error(dev, qp, psn, 0x62)
        old = struct.unpack("<Q", mr.read(f["va"], 8))[0]
        new = (f["sa"] if old == f["cmp"] else old) if opcode == 0x13 else (old + f["sa"]) & (2**64 - 1)
        mr.write(f["va"], struct.pack("<Q", new))
        qp.b_msn = (qp.b_msn + 1) & M24
        qp.b_res.append(("atomic", psn, opcode, old))
        dev.send_pkt(qp, 0x12, psn, struct.pack("!IQ", (0x1F << 24) | qp.b_msn, old))
        qp.b_epsn = (psn + 1) & M24
        return
    qp.b_epsn = (psn + 1) & M24
    if ackreq:
        base_ack(dev, qp)
