//! IPv6 fixed header. Extension headers are reported as unsupported.

use crate::error::{Layer, WireError, be16, be32, check_emit, parse_fixed};
use core::net::Ipv6Addr;

/// Byte offsets of IPv6 fields.
pub mod field {
    /// Version (4 bits), traffic class (8), flow label (20): 4 bytes.
    pub const VER_TC_FLOW: usize = 0;
    /// Payload length, 2 bytes.
    pub const PAYLOAD_LEN: usize = 4;
    /// Next header.
    pub const NEXT_HEADER: usize = 6;
    /// Hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source address, 16 bytes.
    pub const SRC: usize = 8;
    /// Destination address, 16 bytes.
    pub const DST: usize = 24;
}

/// Next-header values that are IPv6 extension headers (RFC 8200, IANA).
pub const EXTENSION_HEADERS: [u8; 9] = [0, 43, 44, 50, 51, 60, 135, 139, 140];

/// An IPv6 fixed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Traffic class (DSCP and ECN).
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Payload length as sent.
    pub payload_len: u16,
    /// Next header.
    pub next_header: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
}

impl Ipv6Repr {
    /// Bytes on the wire.
    pub const LEN: usize = 40;

    /// Parses the fixed header. An extension header in `next_header` is an
    /// `Unsupported` error, so it can never be mistaken for UDP.
    #[inline]
    pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        let ((first, repr), rest) = parse_fixed::<{ Self::LEN }, _>(Layer::Ipv6, input, |b| {
            let first = be32(b, field::VER_TC_FLOW);
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src.copy_from_slice(&b[field::SRC..field::SRC + 16]);
            dst.copy_from_slice(&b[field::DST..field::DST + 16]);
            let repr = Ipv6Repr {
                traffic_class: (first >> 20) as u8,
                flow_label: first & 0x000F_FFFF,
                payload_len: be16(b, field::PAYLOAD_LEN),
                next_header: b[field::NEXT_HEADER],
                hop_limit: b[field::HOP_LIMIT],
                src: Ipv6Addr::from(src),
                dst: Ipv6Addr::from(dst),
            };
            (first, repr)
        })?;
        if first >> 28 != 6 {
            return Err(WireError::invalid(
                Layer::Ipv6,
                "version",
                field::VER_TC_FLOW,
                u64::from(first >> 28),
                "EtherType says IPv6 but the version is not 6",
            ));
        }
        if EXTENSION_HEADERS.contains(&repr.next_header) {
            return Err(WireError::unsupported(
                Layer::Ipv6,
                "next_header",
                field::NEXT_HEADER,
                "IPv6 extension headers",
            ));
        }
        Ok((repr, rest))
    }

    /// Bytes on the wire.
    pub const fn buffer_len(&self) -> usize {
        Self::LEN
    }

    /// ECN code point (lower two bits of the traffic class).
    pub const fn ecn(&self) -> u8 {
        self.traffic_class & 0x3
    }

    /// DSCP (upper six bits of the traffic class).
    pub const fn dscp(&self) -> u8 {
        self.traffic_class >> 2
    }

    /// Writes the header into the start of `buf`. The flow label is masked to 20 bits.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        check_emit(Layer::Ipv6, buf, Self::LEN)?;
        let first =
            (6u32 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0xF_FFFF);
        buf[0..4].copy_from_slice(&first.to_be_bytes());
        buf[4..6].copy_from_slice(&self.payload_len.to_be_bytes());
        buf[field::NEXT_HEADER] = self.next_header;
        buf[field::HOP_LIMIT] = self.hop_limit;
        buf[8..24].copy_from_slice(&self.src.octets());
        buf[24..40].copy_from_slice(&self.dst.octets());
        Ok(())
    }
}
