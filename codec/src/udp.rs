//! UDP header.

use crate::error::{Layer, WireError, be16, check_emit, parse_fixed};
use crate::frame::IpRepr;
use crate::ipv4::PROTOCOL_UDP;

/// Byte offsets of UDP fields.
pub mod field {
    /// Source port, 2 bytes.
    pub const SRC_PORT: usize = 0;
    /// Destination port, 2 bytes.
    pub const DST_PORT: usize = 2;
    /// Length (header and data), 2 bytes.
    pub const LENGTH: usize = 4;
    /// Checksum, 2 bytes.
    pub const CHECKSUM: usize = 6;
}

/// The IANA port of RoCEv2.
pub const ROCEV2_PORT: u16 = 4791;

/// A UDP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct UdpRepr {
    /// Source port (the entropy of a RoCEv2 flow).
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Length of header and data as sent.
    pub length: u16,
    /// Checksum as sent (RoCEv2 senders use 0).
    pub checksum: u16,
}

impl UdpRepr {
    /// Bytes on the wire.
    pub const LEN: usize = 8;

    /// Parses the header. Does not check the length or checksum.
    #[inline]
    pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        parse_fixed::<{ Self::LEN }, _>(Layer::Udp, input, |b| UdpRepr {
            src_port: be16(b, field::SRC_PORT),
            dst_port: be16(b, field::DST_PORT),
            length: be16(b, field::LENGTH),
            checksum: be16(b, field::CHECKSUM),
        })
    }

    /// Bytes on the wire.
    pub const fn buffer_len(&self) -> usize {
        Self::LEN
    }

    /// Writes the header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        check_emit(Layer::Udp, buf, Self::LEN)?;
        buf[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        buf[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        buf[4..6].copy_from_slice(&self.length.to_be_bytes());
        buf[6..8].copy_from_slice(&self.checksum.to_be_bytes());
        Ok(())
    }

    /// What the checksum field holds when the sending host left the
    /// checksum to its NIC (checksum offload) and the frame was captured
    /// before the NIC filled it in: the one's-complement sum of the
    /// pseudo-header alone (addresses, protocol 17 and this header's
    /// length; RFC 768, RFC 8200 §8.1), folded and not complemented. Linux
    /// writes it so for `CHECKSUM_PARTIAL` (`udp4_hwcsum`: `uh->check =
    /// ~csum_tcpudp_magic(src, dst, len, IPPROTO_UDP, 0)`;
    /// `udp6_hwcsum_outgoing`: `~csum_ipv6_magic(..)`), and the NIC adds
    /// the header and payload and complements the result; Wireshark 4.2
    /// and later mark such a field "matches partial checksum, likely
    /// caused by UDP checksum offload".
    pub fn partial_checksum(&self, ip: &IpRepr<'_>) -> u16 {
        let mut sum = u32::from(PROTOCOL_UDP) + u32::from(self.length);
        let mut add = |bytes: &[u8]| {
            for pair in bytes.chunks_exact(2) {
                sum += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
            }
        };
        match ip {
            IpRepr::V4(v4) => {
                add(&v4.src.octets());
                add(&v4.dst.octets());
            }
            IpRepr::V6(v6) => {
                add(&v6.src.octets());
                add(&v6.dst.octets());
            }
        }
        while sum > 0xFFFF {
            sum = (sum & 0xFFFF) + (sum >> 16);
        }
        sum as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4::internet_checksum;

    /// The partial checksum completed as a NIC does (the header with that
    /// value in its checksum field, and the payload, summed and
    /// complemented) is the full UDP checksum of the datagram.
    #[test]
    fn the_partial_checksum_completes_to_the_full_one() {
        let src = [10u8, 0, 0, 1];
        let dst = [10u8, 0, 0, 2];
        let payload = [0x12u8, 0x34, 0x56, 0x78, 0x9A];
        let mut udp = UdpRepr {
            src_port: 49152,
            dst_port: ROCEV2_PORT,
            length: (UdpRepr::LEN + payload.len()) as u16,
            checksum: 0,
        };
        let ip = IpRepr::V4(crate::ipv4::Ipv4Repr {
            ihl: 5,
            tos: 0,
            total_len: 20 + udp.length,
            ident: 0,
            flags_frag: 0x4000,
            ttl: 64,
            protocol: PROTOCOL_UDP,
            checksum: 0,
            src: src.into(),
            dst: dst.into(),
            options: &[],
        });
        // The full checksum, summed over pseudo-header, header and payload.
        let mut whole = Vec::new();
        whole.extend_from_slice(&src);
        whole.extend_from_slice(&dst);
        whole.extend_from_slice(&[0, PROTOCOL_UDP]);
        whole.extend_from_slice(&udp.length.to_be_bytes());
        let mut header = [0u8; UdpRepr::LEN];
        udp.emit(&mut header).unwrap();
        whole.extend_from_slice(&header);
        whole.extend_from_slice(&payload);
        let full = internet_checksum(&whole);
        // The NIC's completion: the partial value in the field, no
        // pseudo-header.
        udp.checksum = udp.partial_checksum(&ip);
        udp.emit(&mut header).unwrap();
        let mut nic = header.to_vec();
        nic.extend_from_slice(&payload);
        assert_eq!(internet_checksum(&nic), full);
        assert_ne!(udp.checksum, full);
    }
}
