"""Writes the static codec vectors of vectors/codec/ (run from this folder:
`python3 codec_vectors.py`). Frames come from frames.py (the SPEC byte
layout); the expected fields are the values put into the frames here, and
the findings are the requirement IDs SPEC.md makes the sender break. Set
MUTATE=1 (and VROOT=another folder) to write every frame with one BTH byte
flipped, which must turn most vectors into FAILs."""
import sys, json, os, textwrap
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frames import *
MUTATE = bool(os.environ.get('MUTATE'))
ROOT = os.environ.get('VROOT', os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
F = 'codec'

def emit(folder, name, text):
    d = os.path.join(ROOT, folder); os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name + '.yaml'), 'w') as f:
        f.write(text)
def hexparts(f, eth=14, iplen=20):
    cuts = [0, eth, eth + iplen, eth + iplen + 8, eth + iplen + 8 + 12, len(f) - 4, len(f)]
    out = []
    for a, b in zip(cuts, cuts[1:]):
        if b > a: out.append(f[a:b].hex())
    return ' '.join(out)
def fmt(v):
    if isinstance(v, bool): return 'true' if v else 'false'
    if isinstance(v, int): return hex(v) if v > 9 else str(v)
    if v is None: return 'null'
    if isinstance(v, dict): return '{' + ', '.join(f'{k}: {fmt(x)}' for k, x in v.items()) + '}'
    return json.dumps(v)
def cv(name, title, reqs, f, fields, findings, base_only=False, eth=14, iplen=20, raw_hex=None):
    if MUTATE:
        # flip one byte of the BTH (P_Key low byte): the ICRC no longer verifies
        b = bytearray(f); b[eth + iplen + 8 + 3] ^= 0x01; f = bytes(b)
    body = f"id: codec.{name}\ntitle: {json.dumps(title)}\nrequirements: [{', '.join(reqs)}]\n"
    body += f"frame: \"{raw_hex or hexparts(f, eth, iplen)}\"\n"
    if base_only: body += "base_only: true\n"
    body += "fields:\n" + ''.join(f"  {k}: {fmt(v)}\n" for k, v in fields.items())
    body += f"findings: [{', '.join(findings)}]\n"
    emit(F, name.replace('.', '_'), body)

P8 = bytes.fromhex('0001020304050607')
# ---- valid frames, one per header kind
cv('bth.send_only', 'RC SEND Only: every BTH field at its byte position (SPEC §4.1)', ['MR-BTH-2', 'MR-ICRC-1'],
   frame(bth(0x04, 0x123456, dqp=0xABCDEF, ack=1, pkey=0x8001) + P8),
   {'roce': True, 'icrc_valid': True, 'bth.opcode': 4, 'bth.se': False, 'bth.m': False, 'bth.pad_count': 0, 'bth.tver': 0,
    'bth.pkey': 0x8001, 'bth.fecn': False, 'bth.becn': False, 'bth.resv6a': 0, 'bth.dest_qp': 0xABCDEF, 'bth.ack_req': True,
    'bth.resv7': 0, 'bth.psn': 0x123456, 'payload_len': 8, 'payload': '0001020304050607'}, [])
cv('bth.send_last_se_pad', 'RC SEND Last with SE and 7 payload bytes: PadCnt 1 and one zero pad byte', ['MR-PKT-4', 'MR-BTH-7'],
   frame(bth(0x02, 0xFFFFFF, dqp=0x12, se=1, pad=1, ack=1) + P8[:7] + b'\0'),
   {'icrc_valid': True, 'bth.opcode': 2, 'bth.se': True, 'bth.pad_count': 1, 'bth.psn': 0xFFFFFF, 'payload_len': 7, 'pad_len': 1}, [])
cv('reth.write_only', 'RC WRITE Only: RETH VA, R_Key and DMA length most-significant byte first', ['MR-EXT-6', 'MR-PKT-3'],
   frame(bth(0x0A, 7, ack=1) + reth(0x0123456789ABCDEF, 0xA1B2C3D4, 8) + P8),
   {'icrc_valid': True, 'bth.opcode': 0x0A, 'reth.va': 0x0123456789ABCDEF, 'reth.rkey': 0xA1B2C3D4, 'reth.dma_len': 8, 'payload_len': 8}, [])
cv('reth.write_first', 'RC WRITE First of a 2048-byte message, PMTU 1024: RETH DMA length 2048, 1024 payload bytes', ['MR-PKT-3'],
   frame(bth(0x06, 7) + reth(0x10000, 0x55, 2048) + bytes(1024)),
   {'icrc_valid': True, 'bth.opcode': 6, 'reth.dma_len': 2048, 'payload_len': 1024}, [])
cv('reth.read_request', 'RC READ Request: RETH only, no payload, PadCnt 0', ['MR-PKT-5'],
   frame(bth(0x0C, 9, ack=1) + reth(0x2000, 0x77, 4096)),
   {'icrc_valid': True, 'bth.opcode': 0x0C, 'reth.va': 0x2000, 'reth.rkey': 0x77, 'reth.dma_len': 4096, 'payload_len': 0}, [])
cv('aeth.ack_v4', 'SPEC §5.4 V4: RC Acknowledge, syndrome 0x1F, MSN 5, PSN 0x10, ICRC trailer 22 54 c8 65', ['MR-ICRC-1', 'MR-ICRC-2'],
   None, {'icrc_valid': True, 'bth.opcode': 0x11, 'bth.psn': 0x10, 'bth.dest_qp': 0x12, 'aeth.syndrome': 0x1F, 'aeth.msn': 5,
          'syndrome': 'ack', 'icrc': 0x65C85422, 'ip.total_len': 48, 'udp.length': 28}, [],
   raw_hex='020000000002020000000001 0800 4502003000004000401126b90a0000020a000001 c00112b7001c0000 1100ffff0000001200000010 1f000005 2254c865') if not MUTATE else None
cv('aeth.nak_seq', 'RC Acknowledge carrying NAK 0x60 (PSN sequence error) with MSN 3', ['MR-NAK-1'],
   frame(bth(0x11, 0x42) + aeth(0x60, 3)),
   {'icrc_valid': True, 'aeth.syndrome': 0x60, 'aeth.msn': 3, 'syndrome': 'nak_seq'}, [])
cv('aeth.rnr', 'RC Acknowledge carrying an RNR NAK with timer code 12 (syndrome 0x2C)', ['MR-RNR-1'],
   frame(bth(0x11, 0x42) + aeth(0x2C, 0)),
   {'icrc_valid': True, 'aeth.syndrome': 0x2C, 'syndrome': 'rnr'}, [])
cv('atomiceth.cmp_swap', 'RC Compare-Swap: AtomicETH (28 bytes) VA, R_Key, Swap and Compare most-significant byte first', ['MR-EXT-6'],
   frame(bth(0x13, 1, ack=1) + atomiceth(0x1122334455667788, 0x99AABBCC, 0x0102030405060708, 0x1112131415161718)),
   {'icrc_valid': True, 'bth.opcode': 0x13, 'atomic_eth.va': 0x1122334455667788, 'atomic_eth.rkey': 0x99AABBCC,
    'atomic_eth.swap_add': 0x0102030405060708, 'atomic_eth.compare': 0x1112131415161718, 'payload_len': 0}, [])
cv('atomicacketh.ack', 'RC Atomic Acknowledge: AETH then AtomicAckETH with the original value', ['MR-EXT-3', 'MR-EXT-6'],
   frame(bth(0x12, 1) + aeth(0x00, 1) + atomicack(0xFEDCBA9876543210)),
   {'icrc_valid': True, 'bth.opcode': 0x12, 'aeth.msn': 1, 'atomic_ack_eth.orig': 0xFEDCBA9876543210}, [])
cv('immdt.send_only_imm', 'RC SEND Only with Immediate: ImmDt right after BTH', ['MR-EXT-3', 'MR-OPC-1'],
   frame(bth(0x05, 3, ack=1) + imm(0xDEADBEEF) + P8[:4]),
   {'icrc_valid': True, 'bth.opcode': 5, 'immdt.value': 0xDEADBEEF, 'payload_len': 4}, [])
cv('immdt.write_only_imm', 'RC WRITE Only with Immediate: RETH then ImmDt (32 header bytes with BTH)', ['MR-EXT-3', 'MR-OPC-1'],
   frame(bth(0x0B, 3, ack=1) + reth(0x3000, 0x44, 4) + imm(0x01020304) + P8[:4]),
   {'icrc_valid': True, 'bth.opcode': 0x0B, 'reth.dma_len': 4, 'immdt.value': 0x01020304, 'payload_len': 4}, [])
cv('ieth.send_only_inv', 'RC SEND Only with Invalidate: IETH carries the R_Key to invalidate', ['MR-EXT-3'],
   frame(bth(0x17, 3, ack=1) + imm(0x00ABCDEF) + P8),
   {'icrc_valid': True, 'bth.opcode': 0x17, 'ieth.rkey': 0x00ABCDEF, 'payload_len': 8}, [])
cv('deth.ud_send', 'UD SEND Only: DETH Q_Key and source QP, reserved byte 0', ['MR-EXT-1', 'MR-EXT-3'],
   frame(bth(0x64, 5, dqp=0x33) + deth(0x11111111, 0x123456) + P8),
   {'icrc_valid': True, 'bth.opcode': 0x64, 'deth.qkey': 0x11111111, 'deth.src_qp': 0x123456, 'deth.reserved': 0, 'payload_len': 8}, [])
cv('feth.flush', 'RC FLUSH: FETH (selectivity 0, placement type 1) then RETH', ['MR-EXT-3'],
   frame(bth(0x1C, 5, ack=1) + feth(0, 1) + reth(0x4000, 0x66, 64)),
   {'icrc_valid': True, 'bth.opcode': 0x1C, 'feth.selectivity_level': 0, 'feth.placement_type': 1, 'reth.dma_len': 64}, [])
cv('cnp.v1', 'SPEC §5.4 V1: an IPv4 CNP captured from hardware (ToS 0xC2, DestQP 0x118, BECN), ICRC 82 fd 00 2a', ['MR-CNP-3', 'MR-ICRC-1'],
   None, {'icrc_valid': True, 'bth.opcode': 0x81, 'bth.becn': True, 'bth.dest_qp': 0x118, 'bth.psn': 0, 'cnp.reserved_zero': True,
          'ip.dscp': 48, 'ip.ecn': 2, 'icrc': 0x2A00FD82}, [],
   raw_hex='020000000002020000000001 0800 45c2003c718c400040119161 0a001101 0a001201 000012b700280000 8100ffff4000011800000000 00000000000000000000000000000000 82fd002a') if not MUTATE else None
cv('icrc.v2_uc_send', 'SPEC §5.4 V2: IPv4 UC SEND Only, 18 payload bytes, PadCnt 2, M = 1, ICRC 78 f3 53 f3', ['MR-ICRC-1', 'MR-ICRC-2'],
   None, {'icrc_valid': True, 'bth.opcode': 0x24, 'bth.m': True, 'bth.pad_count': 2, 'payload_len': 18, 'icrc': 0xF353F378}, ['MR-BTH-2'],
   raw_hex='020000000002020000000001 0800 45010040047840004011b4d5 c0a80007 c0a80007 c00012b7002caca2 2460ffff000000d300cf1710 4630818be28935d90e9a95505401be885e50 0000 78f353f3') if not MUTATE else None
cv('read_response.only', 'RC READ Response Only: AETH then the 5 bytes read, PadCnt 3', ['MR-PKT-4'],
   frame(bth(0x10, 0x20, pad=3) + aeth(0, 2) + P8[:5] + bytes(3)),
   {'icrc_valid': True, 'bth.opcode': 0x10, 'aeth.msn': 2, 'payload_len': 5, 'bth.pad_count': 3, 'pad_len': 3}, [])
cv('enc.udp_checksum_correct', 'a correct non-zero UDP checksum is allowed', ['MR-ENC-16', 'MR-ENC-17'],
   with_udp_checksum(frame(bth(0x04, 1, ack=1) + P8)), {'icrc_valid': True, 'udp.checksum': {'not': 0}}, [])
cv('enc.vlan_one_tag', 'one 802.1Q tag (TPID 0x8100) before EtherType 0x0800 is allowed', ['MR-ENC-1'],
   frame(bth(0x04, 1, ack=1) + P8, vlan=0x6005), {'roce': True, 'icrc_valid': True, 'eth.ethertype': 0x0800}, [], eth=18)
cv('enc.other_dport', 'a UDP datagram to port 4792 is not a MetaRoCE packet: nothing is judged', ['MR-ENC-11'],
   frame(bth(0x04, 1, ack=1) + P8, dport=4792), {'roce': False, 'udp.dst_port': 4792}, [])
def masked():
    f = bytearray(frame(bth(0x04, 1, ack=1) + P8))
    f[14 + 1] = (46 << 2) | 1   # TOS: DSCP 46, ECT(1)
    f[14 + 8] = 3               # TTL
    f[14 + 10:14 + 12] = b'\0\0'
    f[14 + 10:14 + 12] = struct.pack('!H', csum(bytes(f[14:34])))
    f[14 + 20 + 8 + 4] |= 0x80  # FECN (BTH byte 4)
    return with_udp_checksum(bytes(f))
def two_tags():
    f = frame(bth(0x04, 1, ack=1) + P8)
    return f[:12] + bytes.fromhex('81000005 81000006') + f[12:]
# ---- malformed frames: the sender's fault the validators must name
S = lambda **k: frame(bth(0x04, 1, ack=1, **k) + P8)
cv('bth.tver_1', 'TVer 1: a sender must send TVer 0', ['MR-BTH-2'], S(tver=1), {'bth.tver': 1, 'icrc_valid': True}, ['MR-BTH-2'])
cv('bth.migreq', 'M (MigReq) set: a sender must send 0', ['MR-BTH-2'], S(m=1), {'bth.m': True}, ['MR-BTH-2'])
cv('bth.resv6a', 'Resv6a 0x21: reserved bits must be sent as 0', ['MR-BTH-2'], S(resv6a=0x21), {'bth.resv6a': 0x21}, ['MR-BTH-2'])
cv('bth.resv7', 'Resv7 0x40: reserved bits must be sent as 0', ['MR-BTH-2'], S(resv7=0x40), {'bth.resv7': 0x40}, ['MR-BTH-2'])
cv('bth.fecn', 'FECN set on RoCEv2: must be 0', ['MR-BTH-2'], S(fecn=1), {'bth.fecn': True}, ['MR-BTH-2'])
cv('bth.becn_outside_cnp', 'BECN set in a SEND (BECN is 1 only in a CNP)', ['MR-BTH-2'], S(becn=1), {'bth.becn': True}, ['MR-BTH-2'])
cv('bth.pkey_zero', 'P_Key 0x0000 is no QP\'s P_Key', ['MR-BTH-4'], S(pkey=0), {'bth.pkey': 0}, ['MR-BTH-4'])
cv('bth.se_on_write_only', 'SE set in an RDMA WRITE Only (SE only in SEND or WRITE with Immediate)', ['MR-BTH-7'],
   frame(bth(0x0A, 1, ack=1, se=1) + reth(0x1000, 1, 8) + P8), {'bth.se': True}, ['MR-BTH-7'])
cv('pkt.padcnt_wrong', 'a 5-byte payload with PadCnt 0 (needs 3)', ['MR-PKT-4'],
   frame(bth(0x04, 1, ack=1) + P8[:5]), {'payload_len': 5, 'bth.pad_count': 0}, ['MR-PKT-4'])
cv('pkt.pad_not_zero', 'PadCnt 3 but the pad bytes are ff ff ff', ['MR-PKT-4'],
   frame(bth(0x04, 1, ack=1, pad=3) + P8[:5] + b'\xff\xff\xff'), {'payload_len': 5, 'pad_len': 3, 'icrc_valid': True}, ['MR-PKT-4'])
cv('pkt.padcnt_too_large', 'a SEND Only with no bytes after BTH and PadCnt 3: a decode error', ['MR-PKT-4', 'MR-ROB-4'],
   frame(bth(0x04, 1, ack=1, pad=3)), {'roce': True, 'error': {'not': None}}, ['MR-PKT-4'])
cv('pkt.padcnt_on_read', 'a READ Request with PadCnt 1 and one pad byte: opcodes without payload carry PadCnt 0', ['MR-PKT-5'],
   frame(bth(0x0C, 1, ack=1, pad=1) + reth(0x1000, 1, 8) + b'\0'), {'bth.pad_count': 1}, ['MR-PKT-5'])
cv('pkt.write_len_mismatch', 'a WRITE Only whose RETH DMA length (16) differs from its payload (8)', ['MR-PKT-3'],
   frame(bth(0x0A, 1, ack=1) + reth(0x1000, 1, 16) + P8), {'reth.dma_len': 16, 'payload_len': 8}, ['MR-PKT-3'])
cv('pkt.ackreq_missing', 'a SEND Only without AckReq (the last packet of a message must ask for an ACK)', ['MR-PKT-6'],
   frame(bth(0x04, 1, ack=0) + P8), {'bth.ack_req': False}, ['MR-PKT-6'])
cv('ext.dma_len_over_2g', 'a READ Request with DMA length 2^31 + 1', ['MR-EXT-5'],
   frame(bth(0x0C, 1, ack=1) + reth(0x1000, 1, 0x80000001)), {'reth.dma_len': 0x80000001}, ['MR-EXT-5'])
cv('ext.deth_reserved', 'a UD SEND whose DETH reserved byte is 0x01', ['MR-EXT-1'],
   frame(bth(0x64, 5, dqp=0x33) + deth(0x11111111, 0x123456, res=1) + P8), {'deth.reserved': 1}, ['MR-EXT-1'])
cv('ext.truncated_reth', 'a WRITE Only whose UDP datagram ends inside RETH: a decode error', ['MR-EXT-3', 'MR-ROB-1'],
   frame(bth(0x0A, 1, ack=1) + reth(0x1000, 1, 8)[:8]), {'roce': True, 'error': {'not': None}}, ['MR-EXT-3'])
f_ok = frame(bth(0x04, 0x10, ack=1) + P8)
good_icrc = struct.unpack('<I', f_ok[-4:])[0]
cv('icrc.wrong', 'a SEND Only whose ICRC trailer has one bit flipped', ['MR-ICRC-1', 'MR-ICRC-3'],
   frame(bth(0x04, 0x10, ack=1) + P8, icrc=good_icrc ^ 0x00010000), {'icrc_valid': False}, ['MR-ICRC-1'])
cv('icrc.big_endian', 'a SEND Only whose ICRC is sent most-significant byte first', ['MR-ICRC-2'],
   frame(bth(0x04, 0x10, ack=1) + P8, icrc_be=True), {'icrc_valid': False}, ['MR-ICRC-2'])
cv('icrc.masked_fields', 'TOS, TTL, UDP checksum and BTH byte 4 changed after the ICRC was computed: the ICRC still verifies', ['MR-ICRC-5'],
   masked(), {'icrc_valid': True, 'ip.ttl': 3, 'ip.dscp': 46, 'bth.fecn': True}, ['MR-BTH-2'])
cv('enc.ipv4_options', 'an IPv4 header with IHL 6 (4 option bytes)', ['MR-ENC-4'],
   frame(bth(0x04, 1, ack=1) + P8, ihl=6, options=b'\x01\x01\x01\x01'), {'ip.ihl': 6, 'icrc_valid': True}, ['MR-ENC-4'], iplen=24)
cv('enc.no_df', 'an IPv4 header without Don\'t Fragment', ['MR-ENC-6'],
   frame(bth(0x04, 1, ack=1) + P8, df=False), {'ip.df': False}, ['MR-ENC-6'])
cv('enc.ip_checksum_bad', 'an IPv4 header checksum that does not match the header', ['MR-ENC-7', 'MR-ROB-2'],
   frame(bth(0x04, 1, ack=1) + P8, ip_csum=0x1234), {'ip.checksum_valid': False}, ['MR-ENC-7'])
cv('enc.udp_sport_low', 'UDP source port 0x1234 on a Base QP packet (0xC000-0xFFFF recommended)', ['MR-ENC-13'],
   frame(bth(0x04, 1, ack=1) + P8, sport=0x1234), {'udp.src_port': 0x1234}, ['MR-ENC-13'])
cv('enc.udp_checksum_wrong', 'a non-zero UDP checksum that is not the datagram\'s', ['MR-ENC-16'],
   frame(bth(0x04, 1, ack=1) + P8, udp_csum=0x1234), {'udp.checksum': 0x1234, 'icrc_valid': True}, ['MR-ENC-16'])
cv('enc.two_vlan_tags', 'two 802.1Q tags before the EtherType (at most one is allowed)', ['MR-ENC-1'],
   two_tags(), {'roce': True, 'icrc_valid': True}, ['MR-ENC-1'], eth=22)
cv('opc.reserved_rc_15', 'the reserved RC opcode 0x15', ['MR-OPC-5'],
   frame(bth(0x15, 1) + P8), {'bth.opcode': 0x15}, ['MR-OPC-5'])
cv('opc.unused_e0', 'opcode 0xE0 (not used by MetaRoCE v1)', ['MR-OPC-5'],
   frame(bth(0xE0, 1) + P8), {'bth.opcode': 0xE0}, ['MR-OPC-5'])
cv('opc.mp_in_base', 'an MP opcode (0xC0) from an implementation judged as Base', ['MR-OPC-6'],
   frame(bth(0xC0, 1, ack=1) + reth(0x1000, 1, 8) + bytes(16) + P8), {'bth.opcode': 0xC0}, ['MR-OPC-6'], base_only=True)
cv('cnp.no_becn', 'a CNP without BECN', ['MR-CNP-3'],
   frame(bth(0x81, 0, dqp=0x118) + bytes(16), tos=0xC2), {'bth.becn': False}, ['MR-CNP-3'])
cv('cnp.reserved_not_zero', 'a CNP whose 16 reserved bytes are not zero', ['MR-CNP-3'],
   frame(bth(0x81, 0, dqp=0x118, becn=1) + b'\x01' + bytes(15), tos=0xC2), {'cnp.reserved_zero': False}, ['MR-CNP-3'])
cv('ack.se_set', 'an Acknowledge with SE set (responses carry SE 0)', ['MR-ACK-6'],
   frame(bth(0x11, 1, se=1) + aeth(0, 1)), {'bth.se': True}, ['MR-ACK-6'])
cv('ack.reserved_syndrome', 'an Acknowledge with the reserved NAK code 0x66 (Base sends NAK codes 0-3 only)', ['MR-NAK-4'],
   frame(bth(0x11, 1) + aeth(0x66, 1)), {'aeth.syndrome': 0x66}, ['MR-NAK-4'])
cv('pkt.bth_truncated', 'a UDP datagram too short for BTH and ICRC: a decode error', ['MR-ICRC-1', 'MR-ROB-1'],
   frame(bth(0x04, 1, ack=1)[:4], icrc=0), {'roce': True, 'error': {'not': None}}, ['MR-ICRC-1'])
# ---- IPv6
if not MUTATE:
    cv('icrc.v3_ipv6', 'SPEC §5.4 V3: IPv6 RC SEND Only, traffic class 0x68, flow label 0x12345, PadCnt 3, ICRC f8 e9 f0 89', ['MR-ICRC-1', 'MR-ENC-1'],
       None, {'icrc_valid': True, 'ip.version': 6, 'eth.ethertype': 0x86DD, 'bth.opcode': 4, 'bth.pad_count': 3, 'payload_len': 5, 'icrc': 0x89F0E9F8}, [],
       raw_hex='020000000002020000000001 86dd 668123450020114020010db8000000000000000000000001 20010db8000000000000000000000002 c12312b700200000 0430ffff00000011 80000001 0102030405 000000 f8e9f089')
    v3_ip = bytes.fromhex('668123450020114020010db800000000000000000000000120010db8000000000000000000000002')
    udp_roce = bytes.fromhex('c12312b7002000000430ffff00000011800000010102030405000000f8e9f089')
    hbh = bytes.fromhex('1100010400000000')  # next header UDP, length 0, PadN of 4 bytes
    ip6 = bytearray(v3_ip); ip6[4:6] = (len(udp_roce) + 8).to_bytes(2, 'big'); ip6[6] = 0
    cv('enc.ipv6_extension_header', 'an IPv6 packet with a Hop-by-Hop header before UDP to port 4791 (no extension headers allowed)', ['MR-ENC-8'],
       None, {'error': {'not': None}}, ['MR-ENC-8'],
       raw_hex='020000000002020000000001 86dd ' + bytes(ip6).hex() + ' ' + hbh.hex() + ' ' + udp_roce.hex())
