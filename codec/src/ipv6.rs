//! IPv6 fixed header. Extension headers are reported as unsupported by
//! [`Ipv6Repr::parse`]; [`Ipv6Repr::parse_with_extensions`] walks the common
//! ones to show what follows them.

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
        let (repr, rest) = Self::parse_fixed_header(input)?;
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

    /// Parses the fixed header and walks the extension headers after it (see
    /// [`ExtensionChain`]), within the payload length (or the bytes present,
    /// if fewer). Errors are those of the fixed header only.
    pub fn parse_with_extensions(input: &[u8]) -> Result<(Self, ExtensionChain<'_>), WireError> {
        let (repr, rest) = Self::parse_fixed_header(input)?;
        let payload = rest.get(..usize::from(repr.payload_len)).unwrap_or(rest);
        Ok((repr, walk_extensions(repr.next_header, payload)))
    }

    /// The fixed header, whatever its next header.
    pub fn parse_fixed_header(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
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

/// Extension headers [`walk_extensions`] steps over: Hop-by-Hop Options,
/// Routing, Fragment and Destination Options (RFC 8200 §4).
pub const WALKED_EXTENSION_HEADERS: [u8; 4] = [0, 43, 44, 60];

/// Bytes of a Fragment header.
const FRAGMENT_LEN: usize = 8;

/// What follows the extension headers of an IPv6 packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExtensionChain<'a> {
    /// Extension headers stepped over.
    pub count: usize,
    /// The next-header value after the last of them: the upper-layer
    /// protocol (17 for UDP), or an extension header the walk does not step
    /// over (ESP, AH, Mobility, HIP, Shim6).
    pub next_header: u8,
    /// The bytes after the last header stepped over.
    pub rest: &'a [u8],
    /// The walk stopped early: a header was cut short, or a Fragment header
    /// of a non-first fragment (no upper-layer header follows) was met.
    /// `next_header` and `rest` are then those before that header.
    pub incomplete: bool,
}

/// Walks the extension headers in `WALKED_EXTENSION_HEADERS` that start
/// with `next_header` at the front of `payload` (the bytes after the fixed
/// header). Hop-by-Hop, Routing and Destination Options headers are
/// (Hdr Ext Len + 1) × 8 bytes (byte 1); a Fragment header is 8 bytes. Never
/// panics; every step consumes at least 8 bytes, so the walk ends.
pub fn walk_extensions(next_header: u8, payload: &[u8]) -> ExtensionChain<'_> {
    let mut chain = ExtensionChain {
        count: 0,
        next_header,
        rest: payload,
        incomplete: false,
    };
    while WALKED_EXTENSION_HEADERS.contains(&chain.next_header) {
        let bytes = chain.rest;
        let len = if chain.next_header == 44 {
            // Fragment offset: upper 13 bits of bytes 2–3.
            let offset = bytes
                .get(2..4)
                .map(|b| u16::from_be_bytes([b[0], b[1]]) >> 3);
            if offset.is_some_and(|o| o != 0) {
                chain.incomplete = true;
                return chain;
            }
            FRAGMENT_LEN
        } else {
            bytes
                .get(1)
                .map_or(usize::MAX, |&l| (usize::from(l) + 1) * 8)
        };
        let (Some(&next), Some(rest)) = (bytes.first(), bytes.get(len..)) else {
            chain.incomplete = true;
            return chain;
        };
        chain = ExtensionChain {
            count: chain.count + 1,
            next_header: next,
            rest,
            incomplete: false,
        };
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An extension header of `len8` 8-byte units after the first 8, followed by `next`.
    fn options(next: u8, len8: u8) -> Vec<u8> {
        let mut h = vec![0u8; (usize::from(len8) + 1) * 8];
        h[0] = next;
        h[1] = len8;
        h
    }

    #[test]
    fn walks_hop_by_hop_routing_fragment_destination_to_udp() {
        let mut p = options(43, 0); // Hop-by-Hop, next Routing
        p.extend(options(44, 2)); // Routing of 24 bytes, next Fragment
        p.extend([60, 0, 0, 0, 0, 0, 0, 1]); // Fragment, offset 0, M set, next Destination
        p.extend(options(17, 1)); // Destination Options of 16 bytes, next UDP
        p.extend([0x12, 0x34, 0x12, 0xB7]);
        let c = walk_extensions(0, &p);
        assert_eq!((c.count, c.next_header, c.incomplete), (4, 17, false));
        assert_eq!(c.rest, &[0x12, 0x34, 0x12, 0xB7]);
    }

    #[test]
    fn stops_without_panicking() {
        // Nothing to walk.
        let c = walk_extensions(17, &[1, 2]);
        assert_eq!((c.count, c.next_header, c.rest.len()), (0, 17, 2));
        // Cut short: a 16-byte header with 9 bytes present, and no bytes at all.
        let p = options(17, 1);
        let c = walk_extensions(60, &p[..9]);
        assert!(c.incomplete && c.count == 0 && c.next_header == 60);
        assert!(walk_extensions(0, &[]).incomplete);
        // A non-first fragment carries no upper-layer header.
        let c = walk_extensions(44, &[17, 0, 0x00, 0x08, 0, 0, 0, 0, 1, 2]);
        assert!(c.incomplete && c.count == 0);
        // ESP is not walked.
        let c = walk_extensions(0, &[50, 0, 0, 0, 0, 0, 0, 0, 9]);
        assert_eq!((c.count, c.next_header, c.incomplete), (1, 50, false));
        // Every byte string, every start: no panic.
        for n in 0..40u8 {
            let bytes: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37)).collect();
            for nh in [0, 43, 44, 60] {
                let _ = walk_extensions(nh, &bytes);
            }
        }
    }

    #[test]
    fn parse_with_extensions_bounds_the_walk_by_the_payload_length() {
        let mut ip = [0u8; Ipv6Repr::LEN];
        ip[0] = 0x60;
        ip[field::PAYLOAD_LEN + 1] = 12;
        ip[field::NEXT_HEADER] = 0;
        let mut bytes = ip.to_vec();
        bytes.extend(options(17, 0));
        bytes.extend([0xAA; 8]);
        let (repr, c) = Ipv6Repr::parse_with_extensions(&bytes).unwrap();
        assert_eq!(repr.next_header, 0);
        assert_eq!((c.count, c.next_header, c.rest.len()), (1, 17, 4));
        assert!(Ipv6Repr::parse(&bytes).is_err());
    }
}
