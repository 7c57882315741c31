#!/usr/bin/env python3
"""Independent RoCEv2 oracle built on scapy (scapy.contrib.roce, scapy 2.8).

Used by codec/tests/oracle_scapy.rs. Two modes:

  generate --count N --seed S
      Builds N frames with scapy (Ether / 0-2 VLAN tags / IPv4 or IPv6 / UDP
      4791 / BTH / extension headers / payload / pad), lets scapy fill the
      lengths, checksums and the ICRC, and prints one JSON line per frame:
      {"hex": ..., "case": "plain"|"masked"|"corrupt", "expect": {...}}.
      "expect" is scapy's own view of the bytes it built (re-dissected with
      Ether(bytes)), see scapy_view().

  icrc
      Reads hex frames (one per line) on stdin, e.g. frames the Rust codec
      built, and prints one JSON line per frame: {"view": {...}} with scapy's
      view (which includes the ICRC scapy computes, "icrc_computed"), or
      {"error": "..."} when scapy cannot dissect it as RoCEv2.

Field names in a view are "<header>.<field>" and match the names the Rust
test gives the codec's fields. Integers are JSON numbers; byte strings are
lowercase hex; flags are 0/1.

scapy.contrib.roce only knows BTH, AETH, CNPPadding and the ICRC; the other
extension headers (RETH, AtomicETH, AtomicAckETH, ImmDt, IETH, DETH, FETH)
are defined here from rocev2-facts.md §3, and the opcode → header layout
table from §2.3 (written independently of the codec's table).
"""

import argparse
import json
import random
import socket
import sys
import zlib

from scapy.fields import (
    BitField,
    ByteField,
    IntField,
    ThreeBytesField,
    X3BytesField,
    XIntField,
    XLongField,
)
from scapy.layers.inet import IP, UDP, IPOption_NOP, IPOption_Router_Alert
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1AD, Dot1Q, Ether
from scapy.packet import Packet, Raw, bind_layers

from scapy.contrib.roce import AETH, BTH, CNPPadding

ROCEV2_PORT = 4791


# --------------------------------------------------------------------------
# Extension headers scapy does not define (rocev2-facts §3).
# --------------------------------------------------------------------------


def _next_header(pkt, _payload=None):
    """guess_payload_class for extension headers: the header that follows
    `pkt` in its opcode's layout, else Raw (payload + pad).

    A header cannot tell what follows it from its own fields (RETH is followed
    by ImmDt in WRITE Only with Immediate but by data in WRITE Only), so we
    look up the BTH opcode in LAYOUT.
    """
    bth = pkt.underlayer
    while bth is not None and not isinstance(bth, BTH):
        bth = bth.underlayer
    if bth is None:
        return Raw
    headers = LAYOUT.get(bth.opcode, [])
    for i, cls in enumerate(headers):
        if type(pkt) is cls and i + 1 < len(headers):
            return headers[i + 1]
    return Raw


class _Ext(Packet):
    """Base of the extension headers defined here."""

    guess_payload_class = _next_header


class RETH(_Ext):
    name = "RETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), IntField("dma_len", 0)]


class AtomicETH(_Ext):
    name = "AtomicETH"
    fields_desc = [
        XLongField("va", 0),
        XIntField("rkey", 0),
        XLongField("swap_add", 0),
        XLongField("compare", 0),
    ]


class AtomicAckETH(_Ext):
    name = "AtomicAckETH"
    fields_desc = [XLongField("orig", 0)]


class ImmDt(_Ext):
    name = "ImmDt"
    fields_desc = [XIntField("value", 0)]


class IETH(_Ext):
    name = "IETH"
    fields_desc = [XIntField("rkey", 0)]


class DETH(_Ext):
    name = "DETH"
    fields_desc = [XIntField("qkey", 0), ByteField("reserved", 0), X3BytesField("src_qp", 0)]


class FETH(_Ext):
    """FLUSH ETH: reserved 26 bits, selectivity level 2, placement type 4."""

    name = "FETH"
    fields_desc = [
        BitField("reserved", 0, 26),
        BitField("selectivity_level", 0, 2),
        BitField("placement_type", 0, 4),
    ]


# scapy's AETH has no idea what follows it; in an Atomic Acknowledge (0x12)
# it is AtomicAckETH, in READ responses it is data. Give it the same
# layout-driven guess as our headers (a patch local to this process).
AETH.guess_payload_class = _next_header

# Opcode → extension headers, in wire order (rocev2-facts §2.3).
RC_LAYOUT = {
    0x00: [], 0x01: [], 0x02: [], 0x03: [ImmDt], 0x04: [], 0x05: [ImmDt],
    0x06: [RETH], 0x07: [], 0x08: [], 0x09: [ImmDt], 0x0A: [RETH],
    0x0B: [RETH, ImmDt], 0x0C: [RETH], 0x0D: [AETH], 0x0E: [], 0x0F: [AETH],
    0x10: [AETH], 0x11: [AETH], 0x12: [AETH, AtomicAckETH],
    0x13: [AtomicETH], 0x14: [AtomicETH], 0x16: [IETH], 0x17: [IETH],
    0x1C: [FETH, RETH], 0x1D: [RETH],
}  # fmt: skip
LAYOUT = dict(RC_LAYOUT)
for _op in range(0x00, 0x0C):  # UC: SEND and WRITE only, same headers as RC
    LAYOUT[0x20 | _op] = RC_LAYOUT[_op]
LAYOUT[0x64] = [DETH]
LAYOUT[0x65] = [DETH, ImmDt]
LAYOUT[0x81] = [CNPPadding]

# Opcodes whose packets carry data (rocev2-facts §2.3 "Payload" column).
# ATOMIC WRITE (0x1D) carries exactly 8 bytes; the rest carry none.
DATA_OPS = (
    set(range(0x00, 0x0C)) | {0x0D, 0x0E, 0x0F, 0x10, 0x16, 0x17}
    | set(range(0x20, 0x2C)) | {0x64, 0x65}
)  # fmt: skip
ATOMIC_WRITE = 0x1D

# Opcodes with no layout anywhere in the table: reserved RC/UC/UD/CNP codes
# and manufacturer-specific codes outside MetaRoCE's 0xC0–0xCB. Everything
# after their BTH is payload (for scapy: Raw; for the codec: no layout).
UNKNOWN_OPS = [0x15, 0x18, 0x1B, 0x1E, 0x1F, 0x2C, 0x3F, 0x66, 0x80, 0x82, 0x9F, 0xE0, 0xFF]

for _op, _headers in LAYOUT.items():
    if _headers:
        bind_layers(BTH, _headers[0], opcode=_op)

# UDP picks its payload class by walking UDP.payload_guess in registration
# order and matching on either port. A random source port that some other
# scapy layer claims (53 = DNS, the UDP default sport, ...) must not win over
# the RoCEv2 destination port, so put BTH's binding first.
UDP.payload_guess.insert(0, ({"dport": ROCEV2_PORT}, BTH))

EXT_PREFIX = {
    RETH: "reth",
    AETH: "aeth",
    AtomicETH: "atomic_eth",
    AtomicAckETH: "atomic_ack_eth",
    ImmDt: "immdt",
    IETH: "ieth",
    DETH: "deth",
    FETH: "feth",
}


# --------------------------------------------------------------------------
# scapy's view of a frame.
# --------------------------------------------------------------------------


def _mac(s):
    return s.replace(":", "").lower()


def _ip_hex(family, s):
    return socket.inet_pton(family, s).hex()


def scapy_view(pkt):
    """Every field scapy decodes, as a flat dict. Raises ValueError if the
    frame is not Ethernet / [VLAN] / IP / UDP / BTH as scapy sees it."""
    v = {}
    if not isinstance(pkt, Ether):
        raise ValueError("not Ethernet")
    v["eth.dst"] = _mac(pkt.dst)
    v["eth.src"] = _mac(pkt.src)
    tpid = pkt.type
    layer = pkt.payload
    count = 0
    while isinstance(layer, Dot1Q):  # Dot1AD is a subclass
        v[f"vlan{count}.tpid"] = tpid
        v[f"vlan{count}.pcp"] = layer.prio
        v[f"vlan{count}.dei"] = layer.dei
        v[f"vlan{count}.vid"] = layer.vlan
        tpid = layer.type
        layer = layer.payload
        count += 1
    v["eth.vlan_count"] = count
    v["eth.type"] = tpid

    if isinstance(layer, IP):
        v["ip.version"] = 4
        v["ip.ihl"] = layer.ihl
        v["ip.tos"] = layer.tos
        v["ip.len"] = layer.len
        v["ip.id"] = layer.id
        v["ip.flags_frag"] = (int(layer.flags) << 13) | layer.frag
        v["ip.ttl"] = layer.ttl
        v["ip.proto"] = layer.proto
        v["ip.chksum"] = layer.chksum
        v["ip.src"] = _ip_hex(socket.AF_INET, layer.src)
        v["ip.dst"] = _ip_hex(socket.AF_INET, layer.dst)
        # The option bytes as they are on the wire (scapy re-serialises the
        # parsed options exactly).
        v["ip.options"] = bytes(layer)[20 : layer.ihl * 4].hex()
    elif isinstance(layer, IPv6):
        v["ip.version"] = 6
        v["ip.tc"] = layer.tc
        v["ip.fl"] = layer.fl
        v["ip.plen"] = layer.plen
        v["ip.nh"] = layer.nh
        v["ip.hlim"] = layer.hlim
        v["ip.src"] = _ip_hex(socket.AF_INET6, layer.src)
        v["ip.dst"] = _ip_hex(socket.AF_INET6, layer.dst)
    else:
        raise ValueError(f"no IP layer after the Ethernet header: {layer.summary()}")

    udp = layer.payload
    if not isinstance(udp, UDP):
        raise ValueError("no UDP layer")
    v["udp.sport"] = udp.sport
    v["udp.dport"] = udp.dport
    v["udp.len"] = udp.len
    v["udp.chksum"] = udp.chksum

    bth = udp.payload
    if not isinstance(bth, BTH):
        raise ValueError("no BTH layer")
    v["bth.opcode"] = bth.opcode
    v["bth.se"] = bth.solicited
    v["bth.m"] = bth.migreq
    v["bth.pad_count"] = bth.padcount
    v["bth.tver"] = bth.version
    v["bth.pkey"] = bth.pkey
    v["bth.fecn"] = bth.fecn
    v["bth.becn"] = bth.becn
    v["bth.resv6a"] = bth.resv6
    v["bth.dest_qp"] = bth.dqpn
    v["bth.ack_req"] = bth.ackreq
    v["bth.resv7"] = bth.resv7
    v["bth.psn"] = bth.psn

    layer = bth.payload
    while type(layer) in EXT_PREFIX or isinstance(layer, CNPPadding):
        if isinstance(layer, CNPPadding):
            v["cnp.reserved"] = f"{layer.reserved1:016x}{layer.reserved2:016x}"
        else:
            prefix = EXT_PREFIX[type(layer)]
            for f in layer.fields_desc:
                v[f"{prefix}.{f.name}"] = layer.getfieldval(f.name)
        layer = layer.payload
    # What is left is payload + pad (scapy does not split them; PadCnt does).
    body = bytes(layer.load) if isinstance(layer, Raw) else b""
    if bth.padcount > len(body):
        raise ValueError("pad count exceeds the bytes after the headers")
    payload, pad = body[: len(body) - bth.padcount], body[len(body) - bth.padcount :]
    v["payload_len"] = len(payload)
    v["payload_crc32"] = zlib.crc32(payload) & 0xFFFFFFFF
    v["pad"] = pad.hex()
    # scapy's BTH.icrc is the trailer read big-endian; the wire bytes are
    # that value's big-endian bytes (rocev2-facts §4.2).
    trailer = bth.icrc.to_bytes(4, "big")
    # scapy's own ICRC over the dissected bytes (masks applied by scapy).
    computed = bth.compute_icrc(b"")
    v["icrc"] = trailer.hex()
    v["icrc_computed"] = computed.hex()
    v["icrc_valid"] = int(computed == trailer)
    return v


# --------------------------------------------------------------------------
# generate
# --------------------------------------------------------------------------

PAYLOAD_EDGES = [0, 1, 2, 3, 4, 255, 256, 1024, 4095, 4096]
KNOWN_OPS = sorted(LAYOUT)


def _rand_ext(rng, cls):
    """A header instance with random field values."""
    if cls is CNPPadding:
        # Reserved bytes are zero when sent; sometimes make them not.
        if rng.random() < 0.3:
            return CNPPadding(reserved1=rng.getrandbits(64), reserved2=rng.getrandbits(64))
        return CNPPadding()
    return cls(**{f.name: rng.getrandbits(_field_bits(f)) for f in cls.fields_desc})


def _field_bits(f):
    """Width of a header field in bits."""
    if isinstance(f, BitField):
        return f.size
    if isinstance(f, ThreeBytesField):  # declared with a 4-byte struct format
        return 24
    return f.sz * 8


def _payload_len(rng, op):
    if op == ATOMIC_WRITE:
        return 8
    if op in LAYOUT and op not in DATA_OPS:
        return 0
    if rng.random() < 0.3:
        return rng.choice(PAYLOAD_EDGES)
    return rng.randint(0, 4096)


def _rand_bit(rng, p_one=0.5):
    return int(rng.random() < p_one)


def _build_one(rng, op):
    """Returns (scapy packet with icrc=None, payload length)."""
    eth = Ether(
        dst=":".join(f"{rng.getrandbits(8):02x}" for _ in range(6)),
        src=":".join(f"{rng.getrandbits(8):02x}" for _ in range(6)),
    )
    stack = eth
    vlans = rng.choice([0, 1, 2])
    for i in range(vlans):
        # Outer tag of a double-tagged frame: 802.1Q or 802.1ad.
        tag_cls = Dot1AD if (i == 0 and vlans == 2 and rng.random() < 0.5) else Dot1Q
        stack = stack / tag_cls(prio=rng.getrandbits(3), dei=rng.getrandbits(1), vlan=rng.getrandbits(12))

    if rng.random() < 0.5:
        ip = IP(
            src=socket.inet_ntop(socket.AF_INET, rng.getrandbits(32).to_bytes(4, "big")),
            dst=socket.inet_ntop(socket.AF_INET, rng.getrandbits(32).to_bytes(4, "big")),
            tos=rng.getrandbits(8),
            ttl=rng.getrandbits(8),
            id=rng.getrandbits(16),
            flags=rng.choice([0, 2]),  # DF or nothing; fragments are not RoCE
        )
        if rng.random() < 0.05:
            # Rare, but the codec and scapy both cover options in the ICRC.
            ip.options = rng.choice(
                [[IPOption_Router_Alert()], [IPOption_NOP(), IPOption_NOP(), IPOption_NOP(), IPOption_NOP()]]
            )
    else:
        ip = IPv6(
            src=socket.inet_ntop(socket.AF_INET6, rng.getrandbits(128).to_bytes(16, "big")),
            dst=socket.inet_ntop(socket.AF_INET6, rng.getrandbits(128).to_bytes(16, "big")),
            tc=rng.getrandbits(8),
            fl=rng.getrandbits(20),
            hlim=rng.getrandbits(8),
        )
    # Checksum 0 (as rxe sends) or let scapy compute a real one.
    udp = UDP(sport=rng.getrandbits(16), dport=ROCEV2_PORT, chksum=0 if rng.random() < 0.5 else None)

    length = _payload_len(rng, op)
    pad_count = (-length) % 4
    # Reserved fields: zero half the time, random otherwise.
    reserved = rng.random() < 0.5
    bth = BTH(
        opcode=op,
        solicited=_rand_bit(rng),
        migreq=_rand_bit(rng),
        padcount=pad_count,
        version=rng.getrandbits(4) if reserved else 0,
        pkey=rng.getrandbits(16),
        fecn=_rand_bit(rng, 0.2),
        becn=_rand_bit(rng, 0.2) if op != 0x81 else 1,
        resv6=rng.getrandbits(6) if reserved else 0,
        dqpn=rng.getrandbits(24),
        ackreq=_rand_bit(rng),
        resv7=rng.getrandbits(7) if reserved else 0,
        psn=rng.getrandbits(24),
    )
    pkt = stack / ip / udp / bth
    for cls in LAYOUT.get(op, []):
        pkt = pkt / _rand_ext(rng, cls)
    payload = rng.randbytes(length)
    # Pad bytes are zero when sent; sometimes make them not (the codec keeps
    # them as sent and the ICRC covers them).
    pad = rng.randbytes(pad_count) if rng.random() < 0.1 else bytes(pad_count)
    if payload or pad:
        pkt = pkt / Raw(payload + pad)
    return pkt, length


def _mutate_masked(rng, pkt, trailer):
    """Changes only ICRC-masked fields, keeping the ICRC scapy computed: the
    ICRC must stay valid (rocev2-facts §4.1)."""
    pkt[BTH].icrc = int.from_bytes(trailer, "big")
    pkt[BTH].fecn = rng.getrandbits(1)
    pkt[BTH].becn = rng.getrandbits(1)
    pkt[BTH].resv6 = rng.getrandbits(6)
    pkt[UDP].chksum = rng.getrandbits(16)
    if IP in pkt:
        pkt[IP].tos = rng.getrandbits(8)
        pkt[IP].ttl = rng.getrandbits(8)
        pkt[IP].chksum = None  # scapy recomputes it; masked anyway
    else:
        pkt[IPv6].tc = rng.getrandbits(8)
        pkt[IPv6].fl = rng.getrandbits(20)
        pkt[IPv6].hlim = rng.getrandbits(8)


def generate(count, seed):
    rng = random.Random(seed)
    ops = KNOWN_OPS + UNKNOWN_OPS
    out = sys.stdout
    for i in range(count):
        op = ops[i % len(ops)]
        pkt, length = _build_one(rng, op)
        data = bytes(pkt)  # scapy fills lengths, checksums and the ICRC
        roll = rng.random()
        case = "plain"
        if roll < 0.10:
            # Corrupt the trailer: XOR a random non-zero value into it.
            case = "corrupt"
            flip = rng.randint(1, 0xFFFFFFFF).to_bytes(4, "big")
            data = data[:-4] + bytes(a ^ b for a, b in zip(data[-4:], flip))
        elif roll < 0.15:
            case = "masked"
            _mutate_masked(rng, pkt, data[-4:])
            data = bytes(pkt)
        expect = scapy_view(Ether(data))
        # Self-checks of this script (not of the codec).
        assert expect["bth.opcode"] == op, (op, expect)
        assert expect["payload_len"] == length, (length, expect)
        assert expect["icrc_valid"] == (case != "corrupt"), (case, expect)
        out.write(json.dumps({"hex": data.hex(), "case": case, "expect": expect}) + "\n")


# --------------------------------------------------------------------------
# icrc
# --------------------------------------------------------------------------


def icrc_mode():
    # Read everything first, so the caller may write all of stdin before
    # reading any output.
    lines = sys.stdin.read().split()
    out = sys.stdout
    for line in lines:
        try:
            view = scapy_view(Ether(bytes.fromhex(line)))
            out.write(json.dumps({"view": view}) + "\n")
        except Exception as e:  # report, do not stop: one line per input
            out.write(json.dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    gen = sub.add_parser("generate", help="build frames with scapy")
    gen.add_argument("--count", type=int, required=True)
    gen.add_argument("--seed", type=int, required=True)
    sub.add_parser("icrc", help="scapy's view and ICRC of hex frames on stdin")
    args = parser.parse_args()
    if args.mode == "generate":
        generate(args.count, args.seed)
    else:
        icrc_mode()


if __name__ == "__main__":
    main()
