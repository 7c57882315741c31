"""SPEC v1.2 §7.8: K = mp_reorder_threshold (default 32, agent attribute 1-64) and
rule (b): each RTO expiry deems lost every PSN at least the undoubled RTO old."""
import json, os, struct, sys, unittest
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mpnic.device import Device, Cfg
from mpnic.agent import Agent
from tests.test_device import MAC_I, IP_I, call, frame
from mpnic import wire as W


def rc(ag, **kw):
    kw.setdefault("id", 1)
    return ag.handle_line(json.dumps(kw).encode())[0]


RTR = {"dest_qpn": 0x11, "rq_psn": 100, "pmtu": 256, "max_dest_rd_atomic": 16, "min_rnr_timer": 12,
       "path": {"dest_mac": "02:00:00:00:00:01", "dest_ip": "10.0.0.1"}, "mp": True,
       "mp_entropy_set": [0xC000 + i for i in range(8)]}


def mp_qp(extra=None):
    dev = Device(MAC_I, IP_I)
    ag = Agent(dev)
    pd = call(ag, op="alloc_pd")["pd"]
    cq = call(ag, op="create_cq")["cq"]
    mr = call(ag, op="reg_mr", pd=pd, length=4096, access=["local_write"])
    qpn = call(ag, op="create_qp", pd=pd, qp_type="rc", send_cq=cq, recv_cq=cq)["qpn"]
    call(ag, op="modify_qp", qpn=qpn, state="init", attrs={"access": []})
    return dev, ag, mr, qpn, dict(RTR, **(extra or {}))


def to_rts(ag, qpn, rtr):
    call(ag, op="modify_qp", qpn=qpn, state="rtr", attrs=rtr)
    call(ag, op="modify_qp", qpn=qpn, state="rts",
         attrs={"sq_psn": 1000, "timeout": 14, "retry_cnt": 7, "rnr_retry": 7, "max_rd_atomic": 16})


def post_sends(dev, ag, mr, qpn, n):
    for i in range(n):
        call(ag, op="post_send", qpn=qpn, wr_id=i, opcode="send",
             sg_list=[{"addr": mr["addr"], "length": 16, "lkey": mr["lkey"]}])
    qp = dev.qps[qpn]
    assert len(qp.unit_list) == n and all(u.txcount == 1 for u in qp.unit_list)
    return qp


class ReorderThreshold(unittest.TestCase):
    def test_attribute_range(self):
        for bad in (0, 65, -1):
            dev, ag, mr, qpn, rtr = mp_qp({"mp_reorder_threshold": bad})
            rep = rc(ag, op="modify_qp", qpn=qpn, state="rtr", attrs=rtr)
            self.assertFalse(rep["ok"], bad)
            self.assertEqual(rep["error"]["code"], "out_of_range")
            self.assertEqual(rep["error"].get("field"), "attrs.mp_reorder_threshold")
            self.assertEqual(call(ag, op="query_qp", qpn=qpn)["state"], "init")   # unchanged
        dev, ag, mr, qpn, rtr = mp_qp({"mp_reorder_threshold": "3"})
        self.assertEqual(rc(ag, op="modify_qp", qpn=qpn, state="rtr", attrs=rtr)["error"]["code"], "bad_type")
        for good in (1, 3, 64):
            dev, ag, mr, qpn, rtr = mp_qp({"mp_reorder_threshold": good})
            to_rts(ag, qpn, rtr)
            self.assertEqual(call(ag, op="query_qp", qpn=qpn)["attrs"]["mp_reorder_threshold"], good)

    def test_only_with_mp(self):
        dev, ag, mr, qpn, rtr = mp_qp({"mp_reorder_threshold": 3})
        del rtr["mp"], rtr["mp_entropy_set"]
        rep = rc(ag, op="modify_qp", qpn=qpn, state="rtr", attrs=rtr)
        self.assertEqual(rep["error"]["code"], "unexpected_attribute")

    def test_default_is_32(self):
        self.assertEqual(Cfg.K, 32)
        dev, ag, mr, qpn, rtr = mp_qp()
        to_rts(ag, qpn, rtr)
        self.assertEqual(call(ag, op="query_qp", qpn=qpn)["attrs"]["mp_reorder_threshold"], 32)

    def _reorder(self, extra, nacked):
        dev, ag, mr, qpn, rtr = mp_qp(extra)
        to_rts(ag, qpn, rtr)
        qp = post_sends(dev, ag, mr, qpn, nacked + 1)
        first = qp.unit_list[0]
        for u in qp.unit_list[1:]:
            dev.ack_unit(qp, u)
        dev.detect_losses(first.tx_ns, qp)
        return first

    def test_k_honoured(self):
        # K = 3 set: three later PSNs acknowledged deem the first lost (rule (a))
        self.assertTrue(self._reorder({"mp_reorder_threshold": 3}, 3).lost)
        self.assertFalse(self._reorder({"mp_reorder_threshold": 4}, 3).lost)
        # default K = 32: 31 later PSNs are not enough, 32 are
        self.assertFalse(self._reorder(None, 31).lost)
        self.assertTrue(self._reorder(None, 32).lost)


class RtoSweep(unittest.TestCase):
    def test_expiry_sweeps_psns_older_than_undoubled_rto(self):
        dev, ag, mr, qpn, rtr = mp_qp()
        to_rts(ag, qpn, rtr)
        qp = post_sends(dev, ag, mr, qpn, 3)
        a, b, c = qp.unit_list
        rto0 = Cfg.rto_init                  # no RTT sample yet: the undoubled RTO (§7.8)
        qp.backoff = 2                       # one expiry before: the RTO is 2 x rto0
        now = a.tx_ns + 10 * rto0
        a.tx_ns = now - 2 * rto0             # its (doubled) timer ran out: an expiry
        b.tx_ns = now - 3 * rto0 // 2        # older than the undoubled RTO, younger than the doubled
        c.tx_ns = now - rto0 // 2            # younger than the undoubled RTO
        dev.req_tick(now, qp)
        self.assertEqual(dev.counters["mp_retx_timeout"], 2)
        self.assertEqual((a.txcount, b.txcount, c.txcount), (2, 2, 1))
        self.assertEqual(qp.backoff, 4)
        self.assertEqual(qp.rto_expiries, 1)

    def test_no_expiry_no_sweep(self):
        dev, ag, mr, qpn, rtr = mp_qp()
        to_rts(ag, qpn, rtr)
        qp = post_sends(dev, ag, mr, qpn, 2)
        a, b = qp.unit_list
        rto0 = Cfg.rto_init
        qp.backoff = 2
        now = a.tx_ns + 10 * rto0
        a.tx_ns = now - 2 * rto0 + 1         # the doubled RTO has not quite elapsed
        b.tx_ns = now - 3 * rto0 // 2
        dev.req_tick(now, qp)
        self.assertEqual(dev.counters["mp_retx_timeout"], 0)
        self.assertEqual((a.txcount, b.txcount), (1, 1))


class AckRulesV12(unittest.TestCase):
    def _qp(self, n):
        dev, ag, mr, qpn, rtr = mp_qp()
        to_rts(ag, qpn, rtr)
        return dev, qpn, post_sends(dev, ag, mr, qpn, n)

    def test_sack_beyond_sent_ignored(self):
        # MR-MPA-10: an MP ACK whose bitmap reports a PSN never sent is ignored whole
        dev, qpn, qp = self._qp(2)                           # PSNs 1000, 1001 sent
        a = qp.unit_list[0]
        now = a.tx_ns + 5000
        bm = (1 << 63) | (1 << 61)                            # 1000 and 1002
        ext = W.sacketh(0x1F, 0, 0, 0, 0, 1000, bm, 0xC000, 0)
        with dev.lock:
            dev.handle_frame(now, frame(qpn, W.ACK, 999, ext))
        self.assertFalse(a.acked)
        ext = W.sacketh(0x1F, 0, 0, 0, 0, 1000, 1 << 63, 0xC000, 0)   # 1000 only: honoured
        with dev.lock:                                        # completions notify under it
            dev.handle_frame(now, frame(qpn, W.ACK, 999, ext))
        self.assertTrue(a.acked)

    def test_no_rtt_sample_from_trim_nak_with_ts_0(self):
        # MR-MPT-10: a NAK 0x65 with echoed timestamp 0 gives no RTT sample
        dev, qpn, qp = self._qp(2)
        now = (1 << 40) + 5000                               # low 32 bits: 5000 ns after 0
        ext = W.sacketh(0x65, 0, 0, 0, 0, 1000, 0, 0xC000, 0)
        dev.handle_frame(now, frame(qpn, W.ACK, 999, ext))
        self.assertIsNone(qp.srtt)
        self.assertEqual(dev.counters["mp_retx_trim"], 1)     # still a trim loss, resent
        ext = W.sacketh(0x65, 0, 0, 0, 0, 1001, 0, 0xC000, 4000)
        dev.handle_frame(now, frame(qpn, W.ACK, 999, ext))
        self.assertEqual(qp.srtt, 1000)                      # a nonzero echo is a sample

    def test_base_rtt_ages(self):
        # MR-MPC-9: base_rtt from the last mp_base_rtt_window, nothing older than twice it
        dev, qpn, qp = self._qp(1)
        win = 100_000_000                                     # the default, 100 ms
        t0 = 1 << 40
        for dt, ts_ago, base in ((0, 50000, 50000), (win + win // 2, 80000, 50000),
                                 (2 * win + win // 2, 90000, 80000), (5 * win, 95000, 95000)):
            now = t0 + dt
            dev.rtt_sample(now, qp, (now - ts_ago) & 0xFFFFFFFF)
            self.assertEqual(qp.base_rtt, base, dt)


class AtomicResend(unittest.TestCase):
    """MR-MPF-11, MR-MPL-8, MR-MPP-14 (2026-12-02; vector mp.req.atomic_resend_counts): an
    atomic acknowledged by MP ACKs but never by an Atomic Acknowledge is resent at each RTO
    expiry without retiring its entropy value or decreasing cwnd; the repeated MP ACK is no
    progress, so with retry_cnt 1 the second expiry ends it with RETRY_EXC_ERR."""

    def test_resend_retires_nothing_and_counts(self):
        dev, ag, mr, qpn, rtr = mp_qp()
        call(ag, op="modify_qp", qpn=qpn, state="rtr", attrs=rtr)
        call(ag, op="modify_qp", qpn=qpn, state="rts",
             attrs={"sq_psn": 1000, "timeout": 14, "retry_cnt": 1, "rnr_retry": 7, "max_rd_atomic": 16})
        cq = call(ag, op="query_qp", qpn=qpn)["send_cq"]
        call(ag, op="post_send", qpn=qpn, wr_id=1, opcode="atomic_fetch_and_add", remote_addr=0x9000,
             rkey=0x55, add=1, sg_list=[{"addr": mr["addr"], "length": 8, "lkey": mr["lkey"]}])
        qp = dev.qps[qpn]
        (u,) = qp.unit_list
        cwnd = qp.cwnd
        dev.txq.clear()
        now = u.tx_ns
        for n in (1, 2):
            # the MP ACK reports the atomic's PSN (cumulative 1000), no Atomic Acknowledge
            ext = W.sacketh(0x1F, 0xFFFFFF, 0, 0, 0, 1001, 0, u.ev, 0)
            with dev.lock:
                dev.handle_frame(now + 1000, frame(qpn, W.ACK, 1000, ext))
            now = u.tx_ns + 2 * qp.rto()          # past the (doubled) RTO: an expiry
            with dev.lock:
                dev.req_tick(now, qp)
            if n == 1:
                resent = [fr for fr in dev.txq if fr[42] == W.FETCH_ADD]
                self.assertEqual(len(resent), 1)
                self.assertTrue(resent[0][54] & 0x20, "R set (MR-MPP-14)")
                dev.txq.clear()
            self.assertEqual(dev.counters["mp_entropy_retired"], 0)
            self.assertEqual(qp.retired, {})
            self.assertEqual(qp.cwnd, cwnd)
        self.assertEqual([fr for fr in dev.txq if fr[42] == W.FETCH_ADD], [])
        wc = call(ag, op="poll_cq", cq=cq, max=4)["completions"]
        self.assertEqual([(c["wr_id"], c["status"]) for c in wc], [(1, 12)])


class ReadRerequestLaterRead(unittest.TestCase):
    """MR-MPR-6 (vector mp.req.read_rerequest_later_read): q is deemed missing once responses
    with at least K distinct PSNs later than q have arrived *on the QP* since the latest
    request that asked for q, so responses of a later READ count too. Two READs (512 and 768
    bytes, PMTU 256: PSNs 1000-1001 and 1002-1004), K = 3; the first READ's response 1001
    is lost, the second READ's three responses arrive: 1001 is re-requested at once, long
    before any RTO (no time passes in this test)."""

    def _reqs(self, dev):
        out = []
        for fr in dev.txq:
            if fr[42] == W.READ_REQ:
                w0, off, ln, _ = struct.unpack_from("!IIII", fr, 54)
                dl = struct.unpack_from("!I", fr, 70 + 12)[0]
                va, rkey = struct.unpack_from("!QI", fr, 70)
                out.append((int.from_bytes(fr[51:54], "big"), w0 >> 29 & 1, w0 & 0xFFFFFF, off, ln,
                            dl, va, rkey))
        dev.txq.clear()
        return out

    def _run(self, k, later_psns):
        dev, ag, mr, qpn, rtr = mp_qp({"mp_reorder_threshold": k})
        to_rts(ag, qpn, rtr)
        call(ag, op="post_send", qpn=qpn, wr_id=1, opcode="rdma_read", remote_addr=0x40000, rkey=0x99,
             sg_list=[{"addr": mr["addr"], "length": 512, "lkey": mr["lkey"]}])
        call(ag, op="post_send", qpn=qpn, wr_id=2, opcode="rdma_read", remote_addr=0x50000, rkey=0x99,
             sg_list=[{"addr": mr["addr"] + 1024, "length": 768, "lkey": mr["lkey"]}])
        qp = dev.qps[qpn]
        first = self._reqs(dev)
        self.assertEqual([(r[0], r[1], r[3]) for r in first], [(1000, 0, 0), (1002, 0, 0)])
        now = max(u.tx_ns for u in qp.unit_list) + 1000      # well inside the RTO
        ts = now & 0xFFFFFFFF

        def resp(psn, msn, off, length):
            ext = W.mpeth(off == 0, off + 256 >= length, 0, msn, off, length, ts)
            with dev.lock:
                dev.handle_frame(now, frame(qpn, W.READ_RESP, psn, ext, b"\x07" * 256))

        resp(1000, 0, 0, 512)                                 # 1001 (offset 256) is lost
        for psn in later_psns:
            resp(psn, 1, (psn - 1002) * 256, 768)
        return dev, qp, now

    def test_later_read_responses_count(self):
        dev, qp, now = self._run(3, (1002, 1003))
        self.assertEqual(self._reqs(dev), [])                 # two later PSNs: not yet (K = 3)
        dev, qp, now = self._run(3, (1002, 1003, 1004))
        self.assertLess(now - max(u.tx_ns for u in qp.unit_list), qp.rto())
        rr = self._reqs(dev)
        self.assertEqual(len(rr), 1, rr)
        # MR-MPR-7: R set, the first READ's MSN, offset, read length, VA, R_Key, DMA length
        self.assertEqual(rr[0], (1001, 1, 0, 256, 512, 256, 0x40000, 0x99))
        self.assertEqual(dev.counters["mp_retx_reorder"], 1)

    def test_k_honoured_across_reads(self):
        dev, qp, now = self._run(4, (1002, 1003, 1004))
        self.assertEqual(self._reqs(dev), [])                 # three later PSNs, K = 4


if __name__ == "__main__":
    unittest.main()
