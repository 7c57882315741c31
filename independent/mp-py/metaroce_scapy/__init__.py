"""Scapy layers for the MetaRoCE MP profile (SPEC §7.2), bound after
scapy.contrib.roce.BTH.  ``import metaroce_scapy`` registers them.

Layers: MPETH (16 B), SACKETH (24 B), RETH (16 B), ImmDt (4 B), IETH (4 B),
AtomicETH (28 B), AtomicAckETH (8 B).  The BTH opcode alone decides which
headers follow (MR-OPC-1): MPETH/SACKETH dispatch on the underlying BTH.
"""
import struct

from scapy.packet import Packet, bind_layers, Raw
from scapy.fields import (BitField, XBitField, IntField, XIntField, XLongField,
                          XShortField, ShortField, LongField)
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.contrib.roce import BTH, AETH

from .icrc import icrc_value, icrc_bytes  # noqa: F401

MP_OPCODES = {
    0xC0: "MP_SEND",
    0xC1: "MP_SEND_WITH_IMMEDIATE",
    0xC2: "MP_WRITE",
    0xC3: "MP_WRITE_WITH_IMMEDIATE",
    0xC4: "MP_READ_REQUEST",
    0xC5: "MP_READ_RESPONSE",
    0xC6: "MP_COMPARE_SWAP",
    0xC7: "MP_FETCH_ADD",
    0xC8: "MP_ATOMIC_ACKNOWLEDGE",
    0xC9: "MP_ACK",
    0xCA: "MP_PROBE",
    0xCB: "MP_SEND_WITH_INVALIDATE",
}
globals().update({v: k for k, v in MP_OPCODES.items()})

# headers after BTH per opcode (SPEC §7.2 table), names of the classes below
MP_HEADERS = {
    0xC0: ("MPETH",),
    0xC1: ("MPETH", "ImmDt"),
    0xC2: ("MPETH", "RETH"),
    0xC3: ("MPETH", "RETH", "ImmDt"),
    0xC4: ("MPETH", "RETH"),
    0xC5: ("MPETH",),
    0xC6: ("MPETH", "AtomicETH"),
    0xC7: ("MPETH", "AtomicETH"),
    0xC8: ("SACKETH", "AtomicAckETH"),
    0xC9: ("SACKETH",),
    0xCA: ("MPETH",),
    0xCB: ("MPETH", "IETH"),
}
HDR_LEN = {"MPETH": 16, "SACKETH": 24, "RETH": 16, "ImmDt": 4, "IETH": 4,
           "AtomicETH": 28, "AtomicAckETH": 8}
# opcodes that carry payload (SPEC §7.2 "Payload" column 0..P)
MP_DATA_OPCODES = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xCB}

# add the MP names to BTH's opcode enum (display only)
_opf = BTH.fields_desc[0]
for _k, _v in MP_OPCODES.items():
    _opf.i2s[_k] = _v
    _opf.s2i[_v] = _k


def mp_header_bytes(opcode):
    """Bytes of BTH + extension headers for an MP opcode (§7.2 column)."""
    return 12 + sum(HDR_LEN[h] for h in MP_HEADERS[opcode])


class _Chained(Packet):
    """An extension header whose successor depends on the BTH opcode."""

    def _bth(self):
        u = self.underlayer
        while u is not None and not isinstance(u, BTH):
            u = u.underlayer
        return u

    def guess_payload_class(self, payload):
        bth = self._bth()
        if bth is None or bth.opcode not in MP_HEADERS:
            return Raw
        chain = MP_HEADERS[bth.opcode]
        me = type(self).__name__
        if me in chain:
            i = chain.index(me)
            if i + 1 < len(chain):
                return globals()[chain[i + 1]]
        return Raw



class MPETH(_Chained):
    """MP extended transport header, 16 bytes (SPEC §7.2)."""
    name = "MPETH"
    fields_desc = [
        BitField("first", 0, 1),
        BitField("last", 0, 1),
        BitField("retransmission", 0, 1),
        BitField("reserved", 0, 5),
        XBitField("msn", 0, 24),
        IntField("offset", 0),
        IntField("msg_len", 0),
        IntField("timestamp", 0),
    ]


class SACKETH(_Chained):
    """Selective ACK extended transport header, 24 bytes (SPEC §7.2)."""
    name = "SACKETH"
    fields_desc = [
        XBitField("syndrome", 0x1F, 8),
        XBitField("msn", 0xFFFFFF, 24),
        BitField("ecn_ce", 0, 1),
        BitField("retransmission", 0, 1),
        BitField("trimmed", 0, 1),
        BitField("reserved_flags", 0, 5),
        XBitField("sack_base_psn", 0, 24),
        XLongField("sack_bitmap", 0),
        XShortField("echoed_entropy", 0),
        XShortField("reserved", 0),
        IntField("echoed_timestamp", 0),
    ]

    def acked_psns(self):
        """PSNs whose bitmap bit is 1 (bit 0 = MSB of byte 8)."""
        return [(self.sack_base_psn + i) & 0xFFFFFF for i in range(64)
                if (self.sack_bitmap >> (63 - i)) & 1]


class RETH(_Chained):
    name = "RETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), IntField("dma_len", 0)]


class ImmDt(_Chained):
    name = "ImmDt"
    fields_desc = [XIntField("imm", 0)]


class IETH(_Chained):
    name = "IETH"
    fields_desc = [XIntField("rkey", 0)]


class AtomicETH(_Chained):
    name = "AtomicETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0),
                   XLongField("swap_add", 0), XLongField("compare", 0)]


class AtomicAckETH(_Chained):
    name = "AtomicAckETH"
    fields_desc = [XLongField("orig", 0)]


for _op, _chain in MP_HEADERS.items():
    bind_layers(BTH, globals()[_chain[0]], opcode=_op)


def bitmap_from_psns(base, psns):
    """SACK bitmap value with bit i set for each PSN base+i in psns."""
    v = 0
    for p in psns:
        i = (p - base) & 0xFFFFFF
        if i < 64:
            v |= 1 << (63 - i)
    return v


def fix_icrc(pkt):
    """Rebuild a (Ether/)IP/UDP/BTH/... packet so lengths and the ICRC are
    correct per SPEC §5, using our own ICRC (works for IPv4 and IPv6)."""
    raw = bytes(pkt)
    ip = pkt[IP] if IP in pkt else pkt[IPv6]
    ipb = bytes(ip)
    start = len(raw) - len(ipb)
    body = ipb[:-4]
    return pkt.__class__(raw[:start] + body + icrc_bytes(body))


def check_icrc(ip_bytes):
    """True when the 4 trailer bytes of `ip_bytes` (IP header .. ICRC) are right."""
    return icrc_bytes(ip_bytes[:-4]) == ip_bytes[-4:]
