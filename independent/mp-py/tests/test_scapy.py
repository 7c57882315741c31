import os, sys, unittest, struct
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import metaroce_scapy as m
from metaroce_scapy import MPETH, SACKETH, RETH, ImmDt, AtomicETH, AtomicAckETH, IETH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.contrib.roce import BTH

H = bytes.fromhex

# SPEC §5.4 vectors: bytes from IP header to end of pad, then trailer
V = [
 ("45c2003c718c400040119161 0a001101 0a001201 000012b700280000"
  "8100ffff4000011800000000 00000000000000000000000000000000", "82fd002a"),
 ("45010040047840004011b4d5 c0a80007 c0a80007 c00012b7002caca2"
  "2460ffff000000d300cf1710 4630818be28935d90e9a95505401be885e50 0000", "78f353f3"),
 ("668123450020114020010db8000000000000000000000001 20010db8000000000000000000000002"
  "c12312b700200000 0430ffff00000011 80000001 0102030405 000000", "f8e9f089"),
 ("4502003000004000401126b9 0a000002 0a000001 c00112b7001c0000"
  "1100ffff00000012 00000010 1f000005", "2254c865"),
]


def vb(s):
    return H(s.replace(" ", ""))


class TestICRC(unittest.TestCase):
    def test_vectors(self):
        for body, tr in V:
            self.assertEqual(m.icrc_bytes(vb(body)), H(tr))

    def test_value_byte_order(self):
        self.assertEqual(m.icrc_value(vb(V[0][0])), 0x2A00FD82)

    def test_masked_fields_invariant(self):
        b = bytearray(vb(V[0][0]))
        ref = m.icrc_bytes(bytes(b))
        for idx in (1, 8, 10, 11, 26, 27, 32):  # ToS, TTL, csum, UDP csum, BTH byte 4
            c = bytearray(b); c[idx] ^= 0x5A
            self.assertEqual(m.icrc_bytes(bytes(c)), ref, idx)
        for idx in (4, 30, 31, 33, 36):  # IP id, P_Key, DestQP, ...
            c = bytearray(b); c[idx] ^= 0x01
            self.assertNotEqual(m.icrc_bytes(bytes(c)), ref, idx)
        b6 = bytearray(vb(V[2][0])); ref6 = m.icrc_bytes(bytes(b6))
        for idx in (0, 1, 2, 3, 7):
            c = bytearray(b6); c[idx] ^= (0x0F if idx == 0 else 0xFF)
            self.assertEqual(m.icrc_bytes(bytes(c)), ref6, idx)

    def test_scapy_dissect_v4(self):
        p = IP(vb(V[3][0]) + H(V[3][1]))
        self.assertEqual(p[BTH].opcode, 0x11)
        self.assertEqual(p[BTH].icrc, 0x2254c865)
        self.assertTrue(m.check_icrc(bytes(p)))


class TestMPHeaders(unittest.TestCase):
    def test_mpeth_bytes(self):
        h = MPETH(first=1, last=1, retransmission=1, msn=0x123456, offset=0x1000,
                  msg_len=0x2000, timestamp=0xDEADBEEF)
        self.assertEqual(bytes(h), H("e0123456 00001000 00002000 deadbeef".replace(" ", "")))
        self.assertEqual(len(MPETH()), 16)

    def test_sacketh_bytes(self):
        s = SACKETH(syndrome=0x1F, msn=0xFFFFFF, ecn_ce=1, retransmission=0, trimmed=1,
                    sack_base_psn=0x000102, sack_bitmap=m.bitmap_from_psns(0x102, [0x102, 0x104, 0x102 + 63]),
                    echoed_entropy=0xC003, echoed_timestamp=7)
        b = bytes(s)
        self.assertEqual(len(b), 24)
        self.assertEqual(b[:4], H("1fffffff"))
        self.assertEqual(b[4:8], H("a0000102"))
        self.assertEqual(b[8:16], H("a000000000000001"))
        self.assertEqual(b[16:20], H("c0030000"))
        self.assertEqual(b[20:24], H("00000007"))
        self.assertEqual(SACKETH(b).acked_psns(), [0x102, 0x104, 0x141])

    def test_header_sizes_match_table(self):
        want = {0xC0: 28, 0xC1: 32, 0xC2: 44, 0xC3: 48, 0xC4: 44, 0xC5: 28, 0xC6: 56,
                0xC7: 56, 0xC8: 44, 0xC9: 36, 0xCA: 28, 0xCB: 32}
        for op, n in want.items():
            self.assertEqual(m.mp_header_bytes(op), n, hex(op))

    def build(self, bth, *rest):
        p = IP(src="10.0.0.1", dst="10.0.0.2", flags="DF") / UDP(sport=0xC123, dport=4791, chksum=0) / bth
        for r in rest:
            p = p / r
        return IP(bytes(p))

    def test_write_imm_roundtrip_and_icrc(self):
        pay = b"hello world!"
        p = self.build(BTH(opcode=0xC3, ackreq=1, dqpn=0x11, psn=5),
                       MPETH(first=1, last=1, msn=3, offset=0, msg_len=12, timestamp=99),
                       RETH(va=0x1122334455667788, rkey=0xABCD, dma_len=12),
                       ImmDt(imm=0xCAFEBABE), pay)
        self.assertTrue(m.check_icrc(bytes(p)))
        self.assertEqual(p[MPETH].msn, 3)
        self.assertEqual(p[RETH].va, 0x1122334455667788)
        self.assertEqual(p[ImmDt].imm, 0xCAFEBABE)
        self.assertEqual(bytes(p[ImmDt].payload), pay)
        raw = bytes(p)
        self.assertEqual(raw[20 + 8 + 12 + 16 + 16:20 + 8 + 12 + 16 + 16 + 4], H("cafebabe"))

    def test_ack_and_atomic_ack_dissect(self):
        p = self.build(BTH(opcode=0xC8, psn=9), SACKETH(sack_base_psn=9, sack_bitmap=1 << 63),
                       AtomicAckETH(orig=0x0102030405060708))
        self.assertEqual(p[AtomicAckETH].orig, 0x0102030405060708)
        self.assertTrue(m.check_icrc(bytes(p)))
        p = self.build(BTH(opcode=0xC7, psn=9, ackreq=1), MPETH(first=1, last=1, msg_len=8),
                       AtomicETH(va=8, rkey=2, swap_add=3, compare=0))
        self.assertEqual(p[AtomicETH].swap_add, 3)
        p = self.build(BTH(opcode=0xCB, psn=9, ackreq=1), MPETH(first=1, last=1, msg_len=0), IETH(rkey=0x55))
        self.assertEqual(p[IETH].rkey, 0x55)

    def test_fix_icrc_ether(self):
        p = Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=0xC000, dport=4791) / \
            BTH(opcode=0xCA, ackreq=1) / MPETH()
        q = m.fix_icrc(p)
        self.assertTrue(m.check_icrc(bytes(q[IP])))


if __name__ == "__main__":
    unittest.main()
