"""ICRC per MetaRoCE SPEC §5 (pure bytes; no scapy needed)."""
import struct
import zlib

_PREFIX_CRC = zlib.crc32(b"\xff" * 8)  # 0xDEBB20E3 after reflection handling by zlib


def icrc_value(ip_to_pad: bytes) -> int:
    """CRC-32 over 8x0xFF + masked IP/UDP/BTH + rest (SPEC §5.1, §5.2).

    `ip_to_pad` is the bytes from the first byte of the IP header to the
    last pad byte (ICRC trailer excluded)."""
    b = bytearray(ip_to_pad)
    ver = b[0] >> 4
    if ver == 4:
        ihl = (b[0] & 0x0F) * 4
        b[1] = 0xFF            # ToS
        b[8] = 0xFF            # TTL
        b[10] = b[11] = 0xFF   # header checksum
        u = ihl
    elif ver == 6:
        b[0] |= 0x0F           # low 4 bits of byte 0 = high nibble of TC
        b[1] = b[2] = b[3] = 0xFF  # rest of TC + flow label
        b[7] = 0xFF            # hop limit
        u = 40
    else:
        raise ValueError("not IPv4/IPv6")
    b[u + 6] = b[u + 7] = 0xFF    # UDP checksum
    b[u + 8 + 4] = 0xFF           # BTH byte 4
    return zlib.crc32(bytes(b[u:]), zlib.crc32(bytes(b[:u]), _PREFIX_CRC)) & 0xFFFFFFFF


def icrc_bytes(ip_to_pad: bytes) -> bytes:
    """The 4 trailer bytes in wire order (least-significant byte first, §5.2)."""
    return struct.pack("<I", icrc_value(ip_to_pad))
