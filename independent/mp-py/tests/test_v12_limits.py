"""SPEC v1.2 (2026-12-02): the QP attributes mp_max_staged_bytes, mp_peer_resource_nak and
mp_peer_ordered and mp_ack_dscp (AGENT.md; MR-MPA-12), staging refusal (MR-MPP-5,
MR-MPP-23), and READ follow-ups whose length is not a nonzero multiple of PMTU and does not
end the read (§7.9, MR-MPR-9/12)."""
import os, sys, struct, json, unittest
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mpnic.device import Device
from mpnic.agent import Agent, PROFILE
from mpnic import wire as W
from tests.test_device import MAC_I, IP_I, call, frame


def raw(ag, **kw):
    kw.setdefault("id", 1)
    rep, _ = ag.handle_line(json.dumps(kw).encode())
    return rep


RTR = {"dest_qpn": 0x11, "rq_psn": 100, "pmtu": 256, "max_dest_rd_atomic": 16,
       "min_rnr_timer": 12, "path": {"dest_mac": "02:00:00:00:00:01", "dest_ip": "10.0.0.1"}}


def setup(**mp_attrs):
    dev = Device(MAC_I, IP_I)
    ag = Agent(dev)
    pd = call(ag, op="alloc_pd")["pd"]
    cq = call(ag, op="create_cq")["cq"]
    mr = call(ag, op="reg_mr", pd=pd, length=4096,
              access=["local_write", "remote_write", "remote_read", "remote_atomic"])
    qpn = call(ag, op="create_qp", pd=pd, qp_type="rc", send_cq=cq, recv_cq=cq)["qpn"]
    call(ag, op="modify_qp", qpn=qpn, state="init",
         attrs={"access": ["remote_write", "remote_read", "remote_atomic"]})
    return dev, ag, cq, mr, qpn


def to_rtr(ag, qpn, **extra):
    return raw(ag, op="modify_qp", qpn=qpn, state="rtr",
               attrs=dict(RTR, mp=True, mp_entropy_set=[0xC000 + i for i in range(8)], **extra))


def acks(dev):
    """(syndrome, BTH PSN = cumulative ACK, SACK bitmap) of every MP ACK sent; clears the queue."""
    out = []
    for fr in dev.txq:
        ipb = fr[14:]
        if ipb[28] == W.ACK:
            syn_msn, _, bm = struct.unpack_from("!IIQ", ipb, 40)
            out.append((syn_msn >> 24, int.from_bytes(ipb[37:40], "big"), bm))
    dev.txq.clear()
    return out


class Attrs(unittest.TestCase):
    def test_accepted_and_reported(self):
        dev, ag, cq, mr, qpn = setup()
        rep = to_rtr(ag, qpn, mp_max_staged_bytes=0, mp_peer_resource_nak=True, mp_peer_ordered=True)
        self.assertTrue(rep["ok"], rep)
        at = call(ag, op="query_qp", qpn=qpn)["attrs"]
        self.assertEqual((at["mp_max_staged_bytes"], at["mp_peer_resource_nak"], at["mp_peer_ordered"]),
                         (0, True, True))

    def test_defaults(self):
        dev, ag, cq, mr, qpn = setup()
        self.assertTrue(to_rtr(ag, qpn)["ok"])
        at = call(ag, op="query_qp", qpn=qpn)["attrs"]
        self.assertEqual((at["mp_max_staged_bytes"], at["mp_peer_resource_nak"], at["mp_peer_ordered"]),
                         (PROFILE["mp_max_staged_bytes"], False, False))

    def test_above_declared_out_of_range(self):
        dev, ag, cq, mr, qpn = setup()
        rep = to_rtr(ag, qpn, mp_max_staged_bytes=PROFILE["mp_max_staged_bytes"] + 1)
        self.assertEqual((rep["error"]["code"], rep["error"].get("field")),
                         ("out_of_range", "attrs.mp_max_staged_bytes"))
        self.assertEqual(call(ag, op="query_qp", qpn=qpn)["state"], "init")
        self.assertTrue(to_rtr(ag, qpn, mp_max_staged_bytes=PROFILE["mp_max_staged_bytes"])["ok"])

    def test_bad_type(self):
        dev, ag, cq, mr, qpn = setup()
        for k, x in (("mp_peer_ordered", 1), ("mp_peer_resource_nak", "yes"), ("mp_max_staged_bytes", True)):
            rep = to_rtr(ag, qpn, **{k: x})
            self.assertEqual((rep["error"]["code"], rep["error"].get("field")), ("bad_type", "attrs." + k))

    def test_only_with_mp_on_init_rtr(self):
        dev, ag, cq, mr, qpn = setup()
        rep = raw(ag, op="modify_qp", qpn=qpn, state="rtr", attrs=dict(RTR, mp_max_staged_bytes=0))
        self.assertEqual(rep["error"]["code"], "unexpected_attribute")
        self.assertTrue(to_rtr(ag, qpn)["ok"])
        rep = raw(ag, op="modify_qp", qpn=qpn, state="rts",
                  attrs={"sq_psn": 1, "timeout": 14, "retry_cnt": 7, "rnr_retry": 7,
                         "max_rd_atomic": 16, "mp_peer_ordered": True})
        self.assertEqual(rep["error"]["code"], "unexpected_attribute")


class Staging(unittest.TestCase):
    def _send_behind_gap(self, **extra):
        dev, ag, cq, mr, qpn = setup()
        self.assertTrue(to_rtr(ag, qpn, **extra)["ok"])
        call(ag, op="modify_qp", qpn=qpn, state="rts",
             attrs={"sq_psn": 1000, "timeout": 14, "retry_cnt": 7, "rnr_retry": 7, "max_rd_atomic": 16})
        call(ag, op="post_recv", qpn=qpn, wr_id=1,
             sg_list=[{"addr": mr["addr"], "length": 256, "lkey": mr["lkey"]}])
        # PSN 100 (MSN 0) missing: the receive WR of MSN 1 is not yet known (§7.5)
        dev.handle_frame(1, frame(qpn, W.SEND, 101, W.mpeth(1, 1, 0, 1, 0, 3, 7), b"bbb", ackreq=1))
        for t in range(2, 5):
            dev.tick(t * 10**6)
        first = acks(dev)
        dev.handle_frame(5 * 10**6, frame(qpn, W.PROBE, 101, W.mpeth(0, 0, 0, 0, 0, 0, 2), ackreq=1))
        return dev, first, acks(dev)

    def test_refused_dropped_without_ack(self):
        """mp_max_staged_bytes 0, no RN (MR-MPP-5, MR-MPP-23): neither staged nor acknowledged."""
        dev, first, probe = self._send_behind_gap(mp_max_staged_bytes=0)
        self.assertEqual(first, [])
        self.assertEqual(probe, [(0x1F, 99, 0)])

    def test_refused_dropped_even_toward_rn_peer(self):
        """mpnic does not declare mp_resource_nak: it drops, never NAKs 0x66 (§7.16)."""
        dev, first, probe = self._send_behind_gap(mp_max_staged_bytes=0, mp_peer_resource_nak=True)
        self.assertEqual(first, [])
        self.assertEqual(probe, [(0x1F, 99, 0)])

    def test_staged_within_limit(self):
        dev, first, probe = self._send_behind_gap(mp_max_staged_bytes=3)
        self.assertTrue(first and all(a[0] == 0x1F and a[2] != 0 for a in first), first)
        self.assertNotEqual(probe[-1][2], 0)


class ReadFollowUp(unittest.TestCase):
    def test_part_not_pmtu_dropped(self):
        """§7.9 v1.2: a further part of 300 bytes at offset 256 of a 1000-byte read (PMTU 256)
        is dropped unanswered; the part after it (512 bytes) is answered."""
        dev, ag, cq, mr, qpn = setup()
        self.assertTrue(to_rtr(ag, qpn)["ok"])

        def resps():
            out = [(int.from_bytes(fr[51:54], "big"), struct.unpack_from("!I", fr, 58)[0])
                   for fr in dev.txq if fr[42] == W.READ_RESP]
            n = len(dev.txq)
            dev.txq.clear()
            return out, n

        ext = W.mpeth(1, 0, 0, 0, 0, 1000, 77) + W.reth(mr["addr"], mr["rkey"], 256)
        dev.handle_frame(1, frame(qpn, W.READ_REQ, 100, ext, ackreq=1))
        for t in range(2, 5):                  # the request's own MP ACK leaves
            dev.tick(t * 10**6)
        self.assertEqual(resps()[0], [(100, 0)])
        ext = W.mpeth(0, 0, 0, 0, 256, 1000, 78) + W.reth(mr["addr"], mr["rkey"], 300)
        dev.handle_frame(5 * 10**6, frame(qpn, W.READ_REQ, 101, ext, ackreq=1))
        for t in range(6, 9):
            dev.tick(t * 10**6)
        self.assertEqual(resps(), ([], 0))     # no response, no acknowledgement
        self.assertEqual(call(ag, op="query_qp", qpn=qpn)["state"], "rtr")
        ext = W.mpeth(0, 0, 0, 0, 256, 1000, 79) + W.reth(mr["addr"], mr["rkey"], 512)
        dev.handle_frame(9 * 10**6, frame(qpn, W.READ_REQ, 101, ext, ackreq=1))
        self.assertEqual(resps()[0], [(101, 256), (102, 512)])

    def _first_part(self):
        dev, ag, cq, mr, qpn = setup()
        self.assertTrue(to_rtr(ag, qpn)["ok"])
        ext = W.mpeth(1, 0, 0, 0, 0, 1000, 77) + W.reth(mr["addr"], mr["rkey"], 256)
        dev.handle_frame(1, frame(qpn, W.READ_REQ, 100, ext, ackreq=1))
        for t in range(2, 5):                  # the request's own MP ACK leaves
            dev.tick(t * 10**6)
        self.assertEqual([fr[42] for fr in dev.txq], [W.READ_RESP, W.ACK])
        dev.txq.clear()
        return dev, ag, mr, qpn

    def test_part_zero_length_dropped(self):
        """§7.9 / MR-MPR-9 (2026-12-02, AMBIGUITIES 50; vector mp.read.part_zero_length): a
        further part at offset 256 of a 1000-byte read with DMA length 0 matches no kept READ:
        neither answered nor acknowledged (no duplicate MP ACK, none at the following ticks);
        the part after it (offset 256, 512 bytes) is answered and acknowledged."""
        dev, ag, mr, qpn = self._first_part()
        ext = W.mpeth(0, 0, 0, 0, 256, 1000, 78) + W.reth(mr["addr"], mr["rkey"], 0)
        dev.handle_frame(5 * 10**6, frame(qpn, W.READ_REQ, 101, ext, ackreq=1))
        for t in range(6, 9):
            dev.tick(t * 10**6)
        self.assertEqual(list(dev.txq), [])
        self.assertEqual(call(ag, op="query_qp", qpn=qpn)["state"], "rtr")
        ext = W.mpeth(0, 0, 0, 0, 256, 1000, 79) + W.reth(mr["addr"], mr["rkey"], 512)
        dev.handle_frame(9 * 10**6, frame(qpn, W.READ_REQ, 101, ext, ackreq=1))
        self.assertEqual(sorted(fr[42] for fr in dev.txq), [W.READ_RESP, W.READ_RESP, W.ACK])
        self.assertEqual([(int.from_bytes(fr[51:54], "big"), struct.unpack_from("!I", fr, 58)[0])
                          for fr in dev.txq if fr[42] == W.READ_RESP], [(101, 256), (102, 512)])

    def test_copy_zero_length_dropped(self):
        """A copy of the first request (offset 0, R set) with DMA length 0 of the nonempty
        read asks for nothing either: dropped, no ACK (only a READ of length 0 asks for an
        empty range)."""
        dev, ag, mr, qpn = self._first_part()
        ext = W.mpeth(1, 0, 1, 0, 0, 1000, 78) + W.reth(mr["addr"], mr["rkey"], 0)
        dev.handle_frame(5 * 10**6, frame(qpn, W.READ_REQ, 100, ext, ackreq=1))
        for t in range(6, 9):
            dev.tick(t * 10**6)
        self.assertEqual(list(dev.txq), [])

    def test_zero_length_read_copy_answered(self):
        """A READ of length 0: its first request asks for the empty range, and a copy of it
        (R set) is still answered (one empty response) and acknowledged as a duplicate."""
        dev, ag, cq, mr, qpn = setup()
        self.assertTrue(to_rtr(ag, qpn)["ok"])
        ext = W.mpeth(1, 1, 0, 0, 0, 0, 77) + W.reth(mr["addr"], mr["rkey"], 0)
        dev.handle_frame(1, frame(qpn, W.READ_REQ, 100, ext, ackreq=1))
        for t in range(2, 5):
            dev.tick(t * 10**6)
        self.assertEqual([fr[42] for fr in dev.txq], [W.READ_RESP, W.ACK])
        dev.txq.clear()
        ext = W.mpeth(1, 1, 1, 0, 0, 0, 78) + W.reth(mr["addr"], mr["rkey"], 0)
        dev.handle_frame(5 * 10**6, frame(qpn, W.READ_REQ, 100, ext, ackreq=1))
        self.assertEqual(sorted(fr[42] for fr in dev.txq), [W.READ_RESP, W.ACK])

    def test_first_request_not_pmtu_naks(self):
        """The same shape as a first request: NAK 0x61 (MR-MPR-12)."""
        dev, ag, cq, mr, qpn = setup()
        self.assertTrue(to_rtr(ag, qpn)["ok"])
        ext = W.mpeth(1, 0, 0, 0, 0, 1000, 77) + W.reth(mr["addr"], mr["rkey"], 300)
        dev.handle_frame(1, frame(qpn, W.READ_REQ, 100, ext, ackreq=1))
        self.assertEqual([a[0] for a in acks(dev)], [0x61])


class AckDscp(unittest.TestCase):
    """AGENT.md §6.9 `mp_ack_dscp`, MR-MPA-12 (vectors mp.ack.dscp, mp.ack.dscp_atomic,
    mp.ack.dscp_default): on a QP whose traffic class is 40 (DSCP 10)."""
    PATH = {"dest_mac": "02:00:00:00:00:01", "dest_ip": "10.0.0.1", "traffic_class": 40}

    def _qp(self, **extra):
        dev, ag, cq, mr, qpn = setup()
        rep = to_rtr(ag, qpn, **dict({"path": self.PATH}, **extra))
        return dev, ag, mr, qpn, rep

    def test_ack_dscp_values_and_errors(self):
        dev, ag, mr, qpn, rep = self._qp(mp_ack_dscp=64)
        self.assertEqual((rep["error"]["code"], rep["error"].get("field")),
                         ("out_of_range", "attrs.mp_ack_dscp"))
        for x in (-1,):
            rep = to_rtr(ag, qpn, path=self.PATH, mp_ack_dscp=x)
            self.assertEqual(rep["error"]["code"], "out_of_range")
        rep = to_rtr(ag, qpn, path=self.PATH, mp_ack_dscp="46")
        self.assertEqual(rep["error"]["code"], "bad_type")
        rep = to_rtr(ag, qpn, path=self.PATH, mp_ack_dscp=20, mp_trim_dscp=20)
        self.assertEqual((rep["error"]["code"], rep["error"].get("field")),
                         ("bad_value", "attrs.mp_ack_dscp"))
        rep = raw(ag, op="modify_qp", qpn=qpn, state="rtr", attrs=dict(RTR, mp_ack_dscp=46))
        self.assertEqual(rep["error"]["code"], "unexpected_attribute")   # without mp: true
        self.assertEqual(call(ag, op="query_qp", qpn=qpn)["state"], "init")
        # equal to the data DSCP is allowed (only the trimming DSCP is excluded)
        self.assertTrue(to_rtr(ag, qpn, path=self.PATH, mp_ack_dscp=10, mp_trim_dscp=20)["ok"])
        self.assertEqual(call(ag, op="query_qp", qpn=qpn)["attrs"]["mp_ack_dscp"], 10)
        rep = raw(ag, op="modify_qp", qpn=qpn, state="rts",
                  attrs={"sq_psn": 1, "timeout": 14, "retry_cnt": 7, "rnr_retry": 7,
                         "max_rd_atomic": 16, "mp_ack_dscp": 46})
        self.assertEqual(rep["error"]["code"], "unexpected_attribute")

    def test_null_and_default_reported(self):
        for extra in ({}, {"mp_ack_dscp": None}):
            dev, ag, mr, qpn, rep = self._qp(**extra)
            self.assertTrue(rep["ok"], rep)
            at = call(ag, op="query_qp", qpn=qpn)["attrs"]
            self.assertIn("mp_ack_dscp", at)
            self.assertIsNone(at["mp_ack_dscp"])

    def _dscps(self, dev):
        out = [(fr[14 + 28], fr[14 + 1] >> 2) for fr in dev.txq]
        dev.txq.clear()
        return out

    def _write_and_atomic(self, **extra):
        dev, ag, mr, qpn, rep = self._qp(**extra)
        self.assertTrue(rep["ok"], rep)
        ext = W.mpeth(1, 1, 0, 0, 0, 4, 1) + W.reth(mr["addr"], mr["rkey"], 4)
        dev.handle_frame(1, frame(qpn, W.WRITE, 100, ext, b"\1\2\3\4", ackreq=1))
        ext = W.mpeth(1, 1, 0, 1, 0, 8, 2) + struct.pack("!QIQQ", mr["addr"] + 64, mr["rkey"], 2, 0)
        dev.handle_frame(2, frame(qpn, W.FETCH_ADD, 101, ext, ackreq=1))
        ext = W.mpeth(1, 1, 0, 2, 0, 256, 3) + W.reth(mr["addr"], mr["rkey"], 256)
        dev.handle_frame(3, frame(qpn, W.READ_REQ, 102, ext, ackreq=1))
        for t in range(2, 5):
            dev.tick(t * 10**6)
        return dev, ag, qpn, self._dscps(dev)

    def test_acks_carry_ack_dscp(self):
        dev, ag, qpn, out = self._write_and_atomic(mp_ack_dscp=46)
        ops = {op for op, _ in out}
        self.assertTrue({W.ACK, W.ATOMIC_ACK, W.READ_RESP} <= ops, out)
        for op, d in out:
            self.assertEqual(d, 10 if op == W.READ_RESP else 46, (hex(op), d))
        # the requester's MP Probe too (MR-MPA-12)
        qp = dev.qps[qpn]
        dev.send_pkt(qp, W.PROBE, 999, W.mpeth(0, 0, 0, 0, 0, 0, 5), ackreq=1)
        dev.send_pkt(qp, W.SEND, 1000, W.mpeth(1, 1, 0, 0, 0, 1, 5), b"x")
        self.assertEqual(self._dscps(dev), [(W.PROBE, 46), (W.SEND, 10)])

    def test_acks_default_traffic_class(self):
        dev, ag, qpn, out = self._write_and_atomic()
        self.assertTrue({W.ACK, W.ATOMIC_ACK} <= {op for op, _ in out}, out)
        self.assertEqual({d for _, d in out}, {10})


if __name__ == "__main__":
    unittest.main()
