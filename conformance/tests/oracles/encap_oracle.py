"""Builds RoCE frames inside the encapsulations mirrored and captured
traffic arrives in, with scapy, for conformance/tests/decode/oracle_encap.rs.

Usage: encap_oracle.py DIR

Writes one pcap per case into DIR (its link type as scapy writes it) and
prints one JSON object per case: the file, the link type, and the fields
scapy was told to build (the outer layer's and the inner BTH's), which the
test compares with what metaroce decodes and what tshark decodes.
"""

import json
import os
import sys

from scapy.all import Ether, IP, IPv6, UDP, GRE, Dot1Q, Dot1AD, Raw, wrpcap, load_contrib
from scapy.layers.l2 import CookedLinux, CookedLinuxV2
from scapy.layers.vxlan import VXLAN

load_contrib("roce")
load_contrib("erspan")
from scapy.contrib.roce import BTH  # noqa: E402
from scapy.contrib.erspan import ERSPAN_I, ERSPAN_II, ERSPAN_III, ERSPAN_PlatformSpecific  # noqa: E402

ICRC = b"\x00\x00\x00\x00"


def roce(psn, qp, opcode=4, payload=b"\x11" * 16):
    """An IPv4 RoCEv2 SEND Only (or other opcode) with a zero ICRC."""
    return (
        IP(src="10.0.0.1", dst="10.0.0.2", flags="DF", tos=2)
        / UDP(sport=0xC123, dport=4791, chksum=0)
        / BTH(opcode=opcode, dqpn=qp, psn=psn, pkey=0xFFFF)
        / Raw(payload + ICRC)
    )


def inner_eth(psn, qp):
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / roce(psn, qp)


def outer_eth():
    return Ether(src="02:aa:00:00:00:01", dst="02:aa:00:00:00:02")


def outer_ip():
    return IP(src="192.0.2.1", dst="192.0.2.2")


def main():
    out = sys.argv[1]
    cases = []

    def case(name, linktype, pkt, outer, psn, qp):
        path = os.path.join(out, name + ".pcap")
        wrpcap(path, [pkt], linktype=linktype)
        cases.append(
            {
                "name": name,
                "file": path,
                "linktype": linktype,
                "outer": outer,
                "bth": {"opcode": 4, "dest_qp": qp, "psn": psn},
            }
        )

    case(
        "erspan-ii",
        1,
        outer_eth() / outer_ip() / GRE(seqnum_present=1, sequence_number=7)
        / ERSPAN_II(vlan=100, cos=5, session_id=77, index=0x12345)
        / inner_eth(101, 0x11),
        {"name": "erspan-ii", "erspan_version": 1, "vlan": 100, "cos": 5, "session": 77,
         "index": 0x12345, "gre_protocol": 0x88BE},
        101,
        0x11,
    )
    case(
        "erspan-iii",
        1,
        outer_eth() / outer_ip() / GRE()
        / ERSPAN_III(vlan=200, cos=3, session_id=300, timestamp=0xDEADBEEF, hw=9, d=1, o=1)
        / ERSPAN_PlatformSpecific(platf_id=3)
        / inner_eth(102, 0x12),
        {"name": "erspan-iii", "erspan_version": 2, "vlan": 200, "cos": 3, "session": 300,
         "timestamp": 0xDEADBEEF, "hw_id": 9, "egress": True, "gre_protocol": 0x22EB},
        102,
        0x12,
    )
    case(
        "erspan-i",
        1,
        outer_eth() / outer_ip() / GRE() / ERSPAN_I() / inner_eth(103, 0x13),
        {"name": "erspan-i", "gre_protocol": 0x88BE},
        103,
        0x13,
    )
    case(
        "gre-teb",
        1,
        outer_eth() / outer_ip() / GRE(proto=0x6558, key_present=1, key=0xABCD) / inner_eth(104, 0x14),
        {"name": "gre", "gre_protocol": 0x6558, "gre_key": 0xABCD},
        104,
        0x14,
    )
    case(
        "vxlan",
        1,
        outer_eth() / outer_ip() / UDP(sport=40000, dport=4789) / VXLAN(vni=0x123456, flags=0x08)
        / inner_eth(105, 0x15),
        {"name": "vxlan", "vni": 0x123456, "src_port": 40000},
        105,
        0x15,
    )
    case(
        "qinq",
        1,
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        / Dot1AD(vlan=10, prio=1) / Dot1Q(vlan=20, prio=3) / roce(106, 0x16),
        {"name": "qinq", "tpid": 0x88A8, "vid": 10, "pcp": 1},
        106,
        0x16,
    )
    case(
        "s-tag",
        1,
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        / Dot1AD(vlan=30, prio=2) / roce(114, 0x1E),
        {"name": "s-tag", "tpid": 0x88A8, "vid": 30, "pcp": 2},
        114,
        0x1E,
    )
    case(
        "sll",
        113,
        CookedLinux(pkttype=4, lladdrtype=1, lladdrlen=6, src=b"\x02\x00\x00\x00\x00\x01\x00\x00", proto=0x0800)
        / roce(107, 0x17),
        {"name": "sll", "packet_type": 4, "hatype": 1, "protocol": 0x0800, "addr": "02:00:00:00:00:01"},
        107,
        0x17,
    )
    case(
        "sll2",
        276,
        CookedLinuxV2(proto=0x0800, ifindex=3, lladdrtype=1, pkttype=0, lladdrlen=6,
                      src=b"\x02\x00\x00\x00\x00\x01\x00\x00")
        / roce(108, 0x18),
        {"name": "sll2", "packet_type": 0, "hatype": 1, "protocol": 0x0800, "ifindex": 3,
         "addr": "02:00:00:00:00:01"},
        108,
        0x18,
    )
    case("raw-101", 101, roce(109, 0x19), {"name": "raw-ip", "linktype": 101}, 109, 0x19)
    case("raw-228", 228, roce(110, 0x1A), {"name": "raw-ip", "linktype": 228}, 110, 0x1A)
    v6 = (
        IPv6(src="fd00::1", dst="fd00::2")
        / UDP(sport=0xC123, dport=4791, chksum=0)
        / BTH(opcode=4, dqpn=0x1B, psn=111, pkey=0xFFFF)
        / Raw(b"\x22" * 8 + ICRC)
    )
    case("raw-229", 229, v6, {"name": "raw-ip", "linktype": 229}, 111, 0x1B)
    # RoCE v1: EtherType 0x8915, a GRH (IPv6 header in form, next header
    # 0x1B), then the BTH.
    grh = IPv6(src="fe80::1", dst="fe80::2", nh=0x1B, hlim=1, plen=12 + 8 + 4)
    v1 = (
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x8915)
        / Raw(bytes(grh)[:40])
        / Raw(bytes(BTH(opcode=4, dqpn=0x1C, psn=112, pkey=0xFFFF))[:12] + b"\x33" * 8 + ICRC)
    )
    case("roce-v1", 1, v1, None, 112, 0x1C)
    json.dump(cases, sys.stdout)


if __name__ == "__main__":
    main()
