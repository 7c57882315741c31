import os, sys, struct, time, unittest
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mpnic.device import Device
from mpnic.agent import Agent
from mpnic import wire as W
import json

MAC_I = bytes.fromhex("020000000002"); MAC_H = bytes.fromhex("020000000001")
IP_I = bytes([10, 0, 0, 2]); IP_H = bytes([10, 0, 0, 1])


def call(ag, **kw):
    kw.setdefault("id", 1)
    rep, _ = ag.handle_line(json.dumps(kw).encode())
    assert rep["ok"], rep
    return rep


def setup(pmtu=256):
    dev = Device(MAC_I, IP_I)
    ag = Agent(dev)
    pd = call(ag, op="alloc_pd")["pd"]
    cq = call(ag, op="create_cq")["cq"]
    mr = call(ag, op="reg_mr", pd=pd, length=4096, access=["local_write", "remote_write", "remote_read", "remote_atomic"])
    qpn = call(ag, op="create_qp", pd=pd, qp_type="rc", send_cq=cq, recv_cq=cq)["qpn"]
    call(ag, op="modify_qp", qpn=qpn, state="init", attrs={"access": ["remote_write", "remote_read", "remote_atomic"]})
    call(ag, op="modify_qp", qpn=qpn, state="rtr", attrs={"dest_qpn": 0x11, "rq_psn": 100, "pmtu": pmtu,
         "max_dest_rd_atomic": 16, "min_rnr_timer": 12, "path": {"dest_mac": "02:00:00:00:00:01", "dest_ip": "10.0.0.1"},
         "mp": True, "mp_entropy_set": [0xC000 + i for i in range(8)]})
    call(ag, op="modify_qp", qpn=qpn, state="rts", attrs={"sq_psn": 1000, "timeout": 14, "retry_cnt": 7, "rnr_retry": 7, "max_rd_atomic": 16})
    return dev, ag, cq, mr, qpn


def frame(qpn, op, psn, ext, payload=b"", ackreq=0, sport=0xC123):
    fr = W.build_frame(MAC_I, MAC_H, IP_H, IP_I, 0, 64, sport, op, 0, 0xFFFF, qpn, ackreq, psn, ext, payload)
    return fr


class T(unittest.TestCase):
    def test_read_last_first(self):
        dev, ag, cq, mr, qpn = setup()
        call(ag, op="post_send", qpn=qpn, wr_id=7, opcode="rdma_read", remote_addr=0x40000, rkey=5,
             sg_list=[{"addr": mr["addr"], "length": 600, "lkey": mr["lkey"]}])
        self.assertEqual(len(dev.txq), 1)
        now = time.monotonic_ns()
        ext = W.mpeth(0, 1, 0, 0, 512, 600, now & 0xFFFFFFFF)
        dev.handle_frame(now, frame(qpn, W.READ_RESP, 1002, ext, b"\x01" * 88))
        r = call(ag, op="read_mr", mr=mr["mr"], offset=512, length=88)
        self.assertEqual(r["hex"], "01" * 88)

    def test_write_out_of_order_and_ack(self):
        dev, ag, cq, mr, qpn = setup()
        now = time.monotonic_ns()
        reth = W.reth(mr["addr"], mr["rkey"], 600)
        dev.handle_frame(now, frame(qpn, W.WRITE, 102, W.mpeth(0, 1, 0, 0, 512, 600, 5) + reth, b"\x40" * 88, ackreq=1))
        self.assertEqual(call(ag, op="read_mr", mr=mr["mr"], offset=512, length=88)["hex"], "40" * 88)
        self.assertEqual(len(dev.txq), 1)
        fr = dev.txq[-1]
        ipb = fr[14:]
        self.assertEqual(ipb[28], 0xC9)
        syn_msn, b, bm = struct.unpack_from("!IIQ", ipb, 40)
        self.assertEqual(syn_msn, 0x1FFFFFFF)
        self.assertEqual(b & 0xFFFFFF, 100)
        self.assertEqual(bm, 1 << 61)
        self.assertEqual(W.icrc(ipb[:-4]), ipb[-4:])

    def test_read_in_parts(self):
        """v1.2 §7.9, MR-MPH-12, MR-MPR-11/12: a first request for 512 of 600 bytes (L clear)
        is answered for [0, 512) only; the further part (offset 512, R clear) from the kept READ."""
        dev, ag, cq, mr, qpn = setup()
        now = time.monotonic_ns()

        def resps():
            out = []
            for fr in dev.txq:
                if fr[42] == W.READ_RESP:
                    w0, off, ln, _ = struct.unpack_from("!IIII", fr, 54)
                    out.append((int.from_bytes(fr[51:54], "big"), off, ln, bool(w0 >> 30 & 1),
                                bool(w0 >> 29 & 1)))
            dev.txq.clear()
            return out

        ext = W.mpeth(1, 0, 0, 0, 0, 600, 77) + W.reth(mr["addr"], mr["rkey"], 512)
        dev.handle_frame(now, frame(qpn, W.READ_REQ, 100, ext, ackreq=1))
        self.assertEqual(resps(), [(100, 0, 600, False, False), (101, 256, 600, False, False)])
        ext = W.mpeth(0, 1, 0, 0, 512, 600, 78) + W.reth(mr["addr"], mr["rkey"], 88)
        dev.handle_frame(now, frame(qpn, W.READ_REQ, 102, ext, ackreq=1))
        self.assertEqual(resps(), [(102, 512, 600, True, False)])
        # a part whose MSN names no accepted READ: dropped, not acknowledged (MR-MPR-12)
        ext = W.mpeth(0, 1, 0, 5, 512, 600, 79) + W.reth(mr["addr"], mr["rkey"], 88)
        dev.handle_frame(now, frame(qpn, W.READ_REQ, 105, ext, ackreq=1))
        self.assertEqual(dev.txq, [])
        self.assertEqual(call(ag, op="query_qp", qpn=qpn)["state"], "rts")


    def test_read_requested_in_parts(self):
        """MR-MPR-11, MR-MPH-12 (v1.2): a READ longer than max(PMTU, cwnd) is requested in
        parts: the first asks for a multiple of PMTU with L clear, the rest follows with
        R clear once a response to the first has arrived."""
        dev, ag, cq, mr, qpn = setup()
        qp = dev.qps[qpn]
        qp.cwnd = 256                                  # one PMTU
        call(ag, op="post_send", qpn=qpn, wr_id=7, opcode="rdma_read", remote_addr=0x40000, rkey=5,
             sg_list=[{"addr": mr["addr"], "length": 600, "lkey": mr["lkey"]}])

        def reqs():
            out = []
            for fr in dev.txq:
                if fr[42] == W.READ_REQ:
                    w0, off, ln, _ = struct.unpack_from("!IIII", fr, 54)
                    dl = struct.unpack_from("!I", fr, 70 + 12)[0]
                    out.append((int.from_bytes(fr[51:54], "big"), off, dl, w0 >> 31 & 1,
                                w0 >> 30 & 1, w0 >> 29 & 1))
            dev.txq.clear()
            return out

        first = reqs()
        self.assertEqual(first, [(1000, 0, 256, 1, 0, 0)])
        asked = {0: 256}
        todo = [(0, 256)]
        now = time.monotonic_ns()
        for _ in range(8):                            # bounded: answer every range asked for
            if not todo:
                break
            off, n = todo.pop(0)
            for o in range(off, off + n, 256):
                ln = min(256, 600 - o)
                ext = W.mpeth(o == 0, o + ln == 600, 0, 0, o, 600, now & 0xFFFFFFFF)
                with dev.lock:
                    dev.handle_frame(now, frame(qpn, W.READ_RESP, 1000 + o // 256, ext, b"\x05" * ln))
            for psn, o, dl, f, l, r in reqs():
                self.assertEqual((psn, f, r, l), (1000 + o // 256, 0, 0, int(o + dl == 600)))
                self.assertEqual(o % 256, 0)
                asked[o] = dl
                todo.append((o, dl))
        self.assertEqual(sum(asked.values()), 600)
        self.assertEqual(call(ag, op="read_mr", mr=mr["mr"], offset=0, length=600)["hex"], "05" * 600)


if __name__ == "__main__":
    unittest.main()
