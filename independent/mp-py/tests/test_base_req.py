"""The Base RC requester (mpnic/base_req.py) and the Base responder's duplicate replay."""
import json
import os
import struct
import sys
import time
import unittest
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mpnic.device import Device
from mpnic.agent import Agent
from mpnic import wire as W
from tests.test_device import MAC_I, MAC_H, IP_I, IP_H, call


def setup(pmtu=256, timeout=14):
    dev = Device(MAC_I, IP_I)
    ag = Agent(dev)
    pd = call(ag, op="alloc_pd")["pd"]
    cq = call(ag, op="create_cq")["cq"]
    mr = call(ag, op="reg_mr", pd=pd, length=4096,
              access=["local_write", "remote_write", "remote_read", "remote_atomic"])
    qpn = call(ag, op="create_qp", pd=pd, qp_type="rc", send_cq=cq, recv_cq=cq)["qpn"]
    call(ag, op="modify_qp", qpn=qpn, state="init",
         attrs={"access": ["remote_write", "remote_read", "remote_atomic"]})
    call(ag, op="modify_qp", qpn=qpn, state="rtr", attrs={
        "dest_qpn": 0x11, "rq_psn": 100, "pmtu": pmtu, "max_dest_rd_atomic": 16, "min_rnr_timer": 12,
        "path": {"dest_mac": "02:00:00:00:00:01", "dest_ip": "10.0.0.1"}})
    call(ag, op="modify_qp", qpn=qpn, state="rts", attrs={
        "sq_psn": 1000, "timeout": timeout, "retry_cnt": 7, "rnr_retry": 7, "max_rd_atomic": 16})
    return dev, ag, cq, mr, qpn


def frame(qpn, op, psn, ext, payload=b""):
    return W.build_frame(MAC_I, MAC_H, IP_H, IP_I, 0, 64, 0xC123, op, 0, 0xFFFF, qpn, 0, psn, ext, payload)


def sent(dev):
    """(opcode, psn, ackreq, payload length) of every frame queued, then clear the queue."""
    out = []
    for fr in dev.txq:
        ipb = fr[14:]
        op = ipb[28]
        w3 = struct.unpack_from("!I", ipb, 36)[0]
        pad = (ipb[29] >> 4) & 3
        hdr = {0x00: 0, 0x01: 0, 0x02: 0, 0x04: 0, 0x06: 16, 0x0A: 16, 0x0C: 16, 0x12: 12, 0x10: 4, 0x11: 4}
        plen = len(ipb) - 40 - hdr.get(op, 0) - 4 - pad
        out.append((op, w3 & 0xFFFFFF, w3 >> 31, plen))
    dev.txq.clear()
    dev.txq_units.clear()
    return out


def rx(dev, fr):
    with dev.lock:
        dev.handle_frame(time.monotonic_ns(), fr)


def aeth(syn, msn):
    return struct.pack("!I", (syn << 24) | msn)


class BaseRequester(unittest.TestCase):
    def test_send_packetized_and_completed_by_ack(self):
        dev, ag, cq, mr, qpn = setup()
        call(ag, op="post_send", qpn=qpn, wr_id=1, opcode="send",
             sg_list=[{"addr": mr["addr"], "length": 600, "lkey": mr["lkey"]}])
        self.assertEqual(sent(dev), [(0x00, 1000, 0, 256), (0x01, 1001, 0, 256), (0x02, 1002, 1, 88)])
        rx(dev, frame(qpn, 0x11, 1001, aeth(0x1F, 0)))
        self.assertEqual(call(ag, op="poll_cq", cq=cq, max=4)["completions"], [])
        rx(dev, frame(qpn, 0x11, 1002, aeth(0x1F, 1)))
        c = call(ag, op="poll_cq", cq=cq, max=4)["completions"]
        self.assertEqual([(x["wr_id"], x["status_name"], x["byte_len"]) for x in c], [(1, "SUCCESS", 600)])

    def test_sequence_nak_goes_back_n(self):
        dev, ag, cq, mr, qpn = setup()
        call(ag, op="post_send", qpn=qpn, wr_id=1, opcode="send",
             sg_list=[{"addr": mr["addr"], "length": 600, "lkey": mr["lkey"]}])
        sent(dev)
        rx(dev, frame(qpn, 0x11, 1001, aeth(0x60, 0)))
        self.assertEqual([(o, p) for o, p, _, _ in sent(dev)], [(0x01, 1001), (0x02, 1002)])
        # the same NAK again while that retry is in progress starts no second one (MR-TMR-9)
        rx(dev, frame(qpn, 0x11, 1001, aeth(0x60, 0)))
        self.assertEqual(sent(dev), [])

    def test_ack_after_unanswered_read_rerequests_it_only(self):
        dev, ag, cq, mr, qpn = setup()
        call(ag, op="post_send", qpn=qpn, wr_id=1, opcode="rdma_read", remote_addr=0x30000, rkey=0x33,
             sg_list=[{"addr": mr["addr"], "length": 32, "lkey": mr["lkey"]}])
        call(ag, op="post_send", qpn=qpn, wr_id=2, opcode="send",
             sg_list=[{"addr": mr["addr"] + 64, "length": 4, "lkey": mr["lkey"]}])
        self.assertEqual([(o, p) for o, p, _, _ in sent(dev)], [(0x0C, 1000), (0x04, 1001)])
        rx(dev, frame(qpn, 0x11, 1001, aeth(0x1F, 2)))
        self.assertEqual([(o, p) for o, p, _, _ in sent(dev)], [(0x0C, 1000)])   # MR-REQ-4, MR-REQ-6
        rx(dev, frame(qpn, 0x10, 1000, aeth(0x1F, 2), b"\x66" * 32))
        c = call(ag, op="poll_cq", cq=cq, max=4)["completions"]
        self.assertEqual([(x["wr_id"], x["status_name"]) for x in c], [(1, "SUCCESS"), (2, "SUCCESS")])
        self.assertEqual(call(ag, op="read_mr", mr=mr["mr"], offset=0, length=32)["hex"], "66" * 32)

    def test_local_ack_timeout_retries_from_oldest(self):
        dev, ag, cq, mr, qpn = setup(timeout=1)   # T = 8.192 µs
        call(ag, op="post_send", qpn=qpn, wr_id=1, opcode="send",
             sg_list=[{"addr": mr["addr"], "length": 4, "lkey": mr["lkey"]}])
        sent(dev)
        with dev.lock:
            dev.tick(time.monotonic_ns() + 1_000_000)
        self.assertEqual([(o, p) for o, p, _, _ in sent(dev)], [(0x04, 1000)])
        self.assertEqual(dev.counters["local_ack_timeouts"], 1)


class BaseResponderReplay(unittest.TestCase):
    def test_duplicate_cmp_swap_replays_original(self):
        dev, ag, cq, mr, qpn = setup()
        atom = struct.pack("!QIQQ", mr["addr"], mr["rkey"], 9, 0)
        rx(dev, frame(qpn, 0x13, 100, atom))
        call(ag, op="write_mr", mr=mr["mr"], offset=0, hex="00" * 8)
        first = dev.txq[-1]
        sent(dev)
        rx(dev, frame(qpn, 0x13, 100, atom))
        self.assertEqual(len(dev.txq), 1)
        self.assertEqual(dev.txq[-1][14 + 40 + 4:14 + 40 + 12], first[14 + 40 + 4:14 + 40 + 12])
        self.assertEqual(dev.txq[-1][14 + 28], 0x12)
        self.assertEqual(call(ag, op="read_mr", mr=mr["mr"], offset=0, length=8)["hex"], "00" * 8)


if __name__ == "__main__":
    unittest.main()
