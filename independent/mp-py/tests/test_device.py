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


if __name__ == "__main__":
    unittest.main()
