"""Frame build/parse with struct (fast path; the scapy layers are for tests)."""
import struct
import zlib

M24 = 0xFFFFFF
HALF = 1 << 23

_PRE = zlib.crc32(b"\xff" * 8)


def pdiff(a, b):
    return (a - b) & M24


def later(a, b):
    """a later than b (half-space rule §6.4)"""
    d = (a - b) & M24
    return 0 < d < HALF


def icrc(ipb: bytes) -> bytes:
    """ICRC trailer for IPv4 bytes ip-header..pad (SPEC §5)."""
    b = bytearray(ipb[:20 + 8 + 12])
    b[1] = 0xFF; b[8] = 0xFF; b[10] = 0xFF; b[11] = 0xFF
    b[26] = 0xFF; b[27] = 0xFF; b[32] = 0xFF
    c = zlib.crc32(bytes(b), _PRE)
    c = zlib.crc32(memoryview(ipb)[40:], c)
    return struct.pack("<I", c & 0xFFFFFFFF)


def ip_csum(h: bytes) -> int:
    s = sum(struct.unpack("!10H", h))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


# MP opcodes
SEND, SEND_IMM, WRITE, WRITE_IMM, READ_REQ, READ_RESP, CMP_SWAP, FETCH_ADD, \
    ATOMIC_ACK, ACK, PROBE, SEND_INV = range(0xC0, 0xCC)
HDRS = {
    0xC0: ("MPETH",), 0xC1: ("MPETH", "IMM"), 0xC2: ("MPETH", "RETH"),
    0xC3: ("MPETH", "RETH", "IMM"), 0xC4: ("MPETH", "RETH"), 0xC5: ("MPETH",),
    0xC6: ("MPETH", "ATOM"), 0xC7: ("MPETH", "ATOM"), 0xC8: ("SACK", "AACK"),
    0xC9: ("SACK",), 0xCA: ("MPETH",), 0xCB: ("MPETH", "IETH"),
}
HLEN = {"MPETH": 16, "SACK": 24, "RETH": 16, "IMM": 4, "IETH": 4, "ATOM": 28, "AACK": 8}
HDR_BYTES = {op: sum(HLEN[h] for h in hs) for op, hs in HDRS.items()}
DATA_OPS = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xCB}
REQ_OPS = {0xC0, 0xC1, 0xC2, 0xC3, 0xC4, 0xC6, 0xC7, 0xCA, 0xCB}
RESP_OPS = {0xC5, 0xC8, 0xC9}
RECV_CONSUMING = {0xC0, 0xC1, 0xC3, 0xCB}
SEND_OPS = {0xC0, 0xC1, 0xCB}


class Pkt:
    __slots__ = ("src_mac", "dst_ip", "src_ip", "tos", "sport", "opcode", "se", "padcnt",
                 "pkey", "dqpn", "ackreq", "psn", "f", "l", "r", "msn", "offset", "msg_len",
                 "ts", "va", "rkey", "dma_len", "imm", "ieth", "swap_add", "compare",
                 "syndrome", "ecn_ce", "sack_r", "trimmed", "sack_base", "bitmap",
                 "echo_ev", "echo_ts", "orig", "payload", "ce")


def build_frame(dst_mac, src_mac, src_ip, dst_ip, tos, ttl, sport, opcode, se, pkey,
                dqpn, ackreq, psn, ext: bytes, payload: bytes, ip_id=0):
    pad = (-len(payload)) & 3
    udp_len = 8 + 12 + len(ext) + len(payload) + pad + 4
    tot = 20 + udp_len
    iph = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, tos, tot, ip_id, 0x4000, ttl, 17, 0,
                                src_ip, dst_ip))
    struct.pack_into("!H", iph, 10, ip_csum(bytes(iph)))
    udp = struct.pack("!HHHH", sport, 4791, udp_len, 0)
    bth = struct.pack("!BBHII", opcode, (se << 7) | (pad << 4), pkey, dqpn & M24,
                      (ackreq << 31) | (psn & M24))
    ipb = bytes(iph) + udp + bth + ext + payload + b"\x00" * pad
    return dst_mac + src_mac + b"\x08\x00" + ipb + icrc(ipb)


def mpeth(f, l, r, msn, offset, msg_len, ts):
    return struct.pack("!IIII", (f << 31) | (l << 30) | (r << 29) | (msn & M24),
                       offset, msg_len, ts & 0xFFFFFFFF)


def sacketh(syn, msn, e, r, t, base, bitmap, ev, ts):
    return struct.pack("!IIQHHI", (syn << 24) | (msn & M24),
                       (e << 31) | (r << 30) | (t << 29) | (base & M24),
                       bitmap, ev, 0, ts & 0xFFFFFFFF)


def reth(va, rkey, dlen):
    return struct.pack("!QII", va, rkey, dlen)
