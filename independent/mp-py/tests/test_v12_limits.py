"""SPEC v1.2 (2026-12-02): the QP attributes mp_max_staged_bytes, mp_peer_resource_nak and
mp_peer_ordered (AGENT.md), staging refusal (MR-MPP-5, MR-MPP-23), and READ follow-ups
whose length is not a multiple of PMTU and does not end the read (§7.9, MR-MPR-9/12)."""
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

    def test_first_request_not_pmtu_naks(self):
        """The same shape as a first request: NAK 0x61 (MR-MPR-12)."""
        dev, ag, cq, mr, qpn = setup()
        self.assertTrue(to_rtr(ag, qpn)["ok"])
        ext = W.mpeth(1, 0, 0, 0, 0, 1000, 77) + W.reth(mr["addr"], mr["rkey"], 300)
        dev.handle_frame(1, frame(qpn, W.READ_REQ, 100, ext, ackreq=1))
        self.assertEqual([a[0] for a in acks(dev)], [0x61])


if __name__ == "__main__":
    unittest.main()
