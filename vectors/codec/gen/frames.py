"""Frames built from the SPEC.md §3-§5 byte layout, independent of metaroce-codec.

The ICRC follows SPEC §5.1-§5.2 with zlib's CRC-32 (checked against §5.4 V4)."""
import struct, zlib

def csum(b):
    if len(b) % 2: b += b'\0'
    s = sum(struct.unpack('!%dH' % (len(b)//2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff

def bth(op, psn, dqp=0x11, se=0, m=0, pad=0, tver=0, pkey=0xffff, fecn=0, becn=0, resv6a=0, ack=0, resv7=0):
    b0 = op
    b1 = (se << 7) | (m << 6) | (pad << 4) | tver
    b4 = (fecn << 7) | (becn << 6) | resv6a
    return struct.pack('!BBH', b0, b1, pkey) + struct.pack('!I', (b4 << 24) | dqp) + struct.pack('!I', (ack << 31) | (resv7 << 24) | psn)

def reth(va, rkey, ln): return struct.pack('!QII', va, rkey, ln)
def aeth(syn, msn): return struct.pack('!I', (syn << 24) | msn)
def atomiceth(va, rkey, swap, cmp): return struct.pack('!QIQQ', va, rkey, swap, cmp)
def atomicack(orig): return struct.pack('!Q', orig)
def imm(v): return struct.pack('!I', v)
def deth(qkey, sqp, res=0): return struct.pack('!II', qkey, (res << 24) | sqp)
def feth(sl, pt, res=0): return struct.pack('!I', (res << 6) | (sl << 4) | pt)

def icrc_of(ip, udp, roce_wo_icrc):
    ipm = bytearray(ip); ipm[1] = 0xff; ipm[8] = 0xff; ipm[10] = 0xff; ipm[11] = 0xff
    udpm = bytearray(udp); udpm[6] = 0xff; udpm[7] = 0xff
    r = bytearray(roce_wo_icrc); r[4] = 0xff
    return zlib.crc32(b'\xff' * 8 + bytes(ipm) + bytes(udpm) + bytes(r)) & 0xffffffff

def frame(roce, tos=0x02, ttl=64, sport=0xc123, dport=4791, src='10.0.0.1', dst='10.0.0.2',
          ident=0, df=True, ihl=5, ip_len=None, udp_len=None, ip_csum=None, udp_csum=0,
          icrc=None, icrc_be=False, trailer=b'', ethertype=0x0800, vlan=None, options=b''):
    ulen = 8 + len(roce) + 4 if udp_len is None else udp_len
    udp = struct.pack('!HHHH', sport, dport, ulen, udp_csum)
    tl = 20 + len(options) + 8 + len(roce) + 4 if ip_len is None else ip_len
    s = bytes(int(x) for x in src.split('.')); d = bytes(int(x) for x in dst.split('.'))
    ip = struct.pack('!BBHHHBBH4s4s', 0x40 | ihl, tos, tl, ident, 0x4000 if df else 0, ttl, 17, 0, s, d) + options
    c = csum(ip) if ip_csum is None else ip_csum
    ip = ip[:10] + struct.pack('!H', c) + ip[12:]
    if icrc is None:
        icrc = icrc_of(ip, udp, roce)
    tr = struct.pack('>I' if icrc_be else '<I', icrc)
    eth = bytes.fromhex('020000000002' '020000000001')
    if vlan is not None:
        eth += struct.pack('!HH', 0x8100, vlan)
    eth += struct.pack('!H', ethertype)
    return eth + ip + udp + roce + tr + trailer


def with_udp_checksum(f, eth=14):
    """Fills in the correct UDP checksum (RFC 768) of an IPv4 frame."""
    ip = f[eth:eth + 20]; udp = bytearray(f[eth + 20:])
    tl = struct.unpack('!H', ip[2:4])[0]
    udp = udp[:tl - 20]
    pseudo = ip[12:20] + struct.pack('!BBH', 0, 17, len(udp))
    udp[6:8] = b'\0\0'
    c = csum(pseudo + bytes(udp)) or 0xFFFF
    b = bytearray(f); b[eth + 26:eth + 28] = struct.pack('!H', c)
    return bytes(b)
