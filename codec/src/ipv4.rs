//! IPv4 header; options are kept as bytes.

use crate::error::{Layer, WireError, be16, be32, check_emit, parse_fixed};
use core::net::Ipv4Addr;

/// Byte offsets of IPv4 fields.
pub mod field {
    /// Version (high nibble) and IHL (low nibble).
    pub const VER_IHL: usize = 0;
    /// DSCP (6 bits) and ECN (2 bits).
    pub const TOS: usize = 1;
    /// Total length, 2 bytes.
    pub const TOTAL_LEN: usize = 2;
    /// Identification, 2 bytes.
    pub const IDENT: usize = 4;
    /// Flags (3 bits) and fragment offset (13 bits), 2 bytes.
    pub const FLAGS_FRAG: usize = 6;
    /// Time to live.
    pub const TTL: usize = 8;
    /// Protocol.
    pub const PROTOCOL: usize = 9;
    /// Header checksum, 2 bytes.
    pub const CHECKSUM: usize = 10;
    /// Source address, 4 bytes.
    pub const SRC: usize = 12;
    /// Destination address, 4 bytes.
    pub const DST: usize = 16;
}

/// Bytes of an IPv4 header without options.
const MIN_HEADER_LEN: usize = 20;

/// IP protocol number of UDP.
pub const PROTOCOL_UDP: u8 = 17;

/// An IPv4 header. Every bit is kept, so a parsed header emits unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Repr<'a> {
    /// Header length in 32-bit words (5–15).
    pub ihl: u8,
    /// DSCP and ECN byte.
    pub tos: u8,
    /// Total length of the datagram (header and payload) as sent.
    pub total_len: u16,
    /// Identification.
    pub ident: u16,
    /// Flags and fragment offset as one 16-bit field.
    pub flags_frag: u16,
    /// Time to live.
    pub ttl: u8,
    /// Protocol of the payload.
    pub protocol: u8,
    /// Header checksum as sent.
    pub checksum: u16,
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Option bytes, `(ihl - 5) * 4` of them.
    pub options: &'a [u8],
}

impl<'a> Ipv4Repr<'a> {
    /// Bytes without options.
    pub const MIN_LEN: usize = MIN_HEADER_LEN;

    /// Parses the header (options included). Does not check the checksum.
    #[inline]
    pub fn parse(input: &'a [u8]) -> Result<(Self, &'a [u8]), WireError> {
        let (b, rest) = parse_fixed::<MIN_HEADER_LEN, _>(Layer::Ipv4, input, |b| *b)?;
        let ver_ihl = b[field::VER_IHL];
        if ver_ihl >> 4 != 4 {
            return Err(WireError::invalid(
                Layer::Ipv4,
                "version",
                field::VER_IHL,
                u64::from(ver_ihl >> 4),
                "EtherType says IPv4 but the version is not 4",
            ));
        }
        let ihl = ver_ihl & 0x0F;
        if ihl < 5 {
            return Err(WireError::invalid(
                Layer::Ipv4,
                "ihl",
                field::VER_IHL,
                u64::from(ihl),
                "header length below 5 words",
            ));
        }
        let options_len = usize::from(ihl - 5) * 4;
        if rest.len() < options_len {
            return Err(WireError::truncated(
                Layer::Ipv4,
                "options",
                Self::MIN_LEN,
                options_len,
                rest.len(),
            ));
        }
        let (options, rest) = rest.split_at(options_len);
        let repr = Ipv4Repr {
            ihl,
            tos: b[field::TOS],
            total_len: be16(&b, field::TOTAL_LEN),
            ident: be16(&b, field::IDENT),
            flags_frag: be16(&b, field::FLAGS_FRAG),
            ttl: b[field::TTL],
            protocol: b[field::PROTOCOL],
            checksum: be16(&b, field::CHECKSUM),
            src: Ipv4Addr::from(be32(&b, field::SRC)),
            dst: Ipv4Addr::from(be32(&b, field::DST)),
            options,
        };
        Ok((repr, rest))
    }

    /// Header bytes on the wire: `ihl * 4`, or 20 plus the options if `ihl`
    /// understates them (a builder may set an inconsistent `ihl`).
    pub fn buffer_len(&self) -> usize {
        Self::MIN_LEN + self.options.len()
    }

    /// DSCP (upper six bits of the ToS byte).
    pub const fn dscp(&self) -> u8 {
        self.tos >> 2
    }

    /// ECN code point (lower two bits of the ToS byte).
    pub const fn ecn(&self) -> u8 {
        self.tos & 0x3
    }

    /// Don't-fragment flag.
    pub const fn dont_fragment(&self) -> bool {
        self.flags_frag & 0x4000 != 0
    }

    /// More-fragments flag.
    pub const fn more_fragments(&self) -> bool {
        self.flags_frag & 0x2000 != 0
    }

    /// Fragment offset in 8-byte units.
    pub const fn fragment_offset(&self) -> u16 {
        self.flags_frag & 0x1FFF
    }

    /// `true` when this datagram is a fragment (first or later).
    pub const fn is_fragment(&self) -> bool {
        self.more_fragments() || self.fragment_offset() != 0
    }

    /// The checksum this header should carry (0 for a header longer than
    /// IPv4 allows, which no parse produces). Summed from the fields, with
    /// no copy of the header: this runs on every IPv4 frame a check reads.
    pub fn compute_checksum(&self) -> u16 {
        if self.buffer_len() > 60 {
            return 0;
        }
        let [s0, s1, s2, s3] = self.src.octets();
        let [d0, d1, d2, d3] = self.dst.octets();
        let words = [
            u16::from_be_bytes([0x40 | (self.ihl & 0x0F), self.tos]),
            self.total_len,
            self.ident,
            self.flags_frag,
            u16::from_be_bytes([self.ttl, self.protocol]),
            u16::from_be_bytes([s0, s1]),
            u16::from_be_bytes([s2, s3]),
            u16::from_be_bytes([d0, d1]),
            u16::from_be_bytes([d2, d3]),
        ];
        let fixed: u32 = words.iter().map(|&w| u32::from(w)).sum();
        fold_complement(fixed + ones_sum(self.options))
    }

    /// Writes the header into the start of `buf`, fields as they are.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        check_emit(Layer::Ipv4, buf, self.buffer_len())?;
        buf[field::VER_IHL] = 0x40 | (self.ihl & 0x0F);
        buf[field::TOS] = self.tos;
        buf[2..4].copy_from_slice(&self.total_len.to_be_bytes());
        buf[4..6].copy_from_slice(&self.ident.to_be_bytes());
        buf[6..8].copy_from_slice(&self.flags_frag.to_be_bytes());
        buf[field::TTL] = self.ttl;
        buf[field::PROTOCOL] = self.protocol;
        buf[10..12].copy_from_slice(&self.checksum.to_be_bytes());
        buf[12..16].copy_from_slice(&self.src.octets());
        buf[16..20].copy_from_slice(&self.dst.octets());
        buf[20..20 + self.options.len()].copy_from_slice(self.options);
        Ok(())
    }
}

/// The 16-bit one's-complement Internet checksum of `data`.
pub fn internet_checksum(data: &[u8]) -> u16 {
    fold_complement(ones_sum(data))
}

/// The sum of `data` as big-endian 16-bit words (an odd last byte padded
/// with zero), unfolded. At most 128 KiB of data: the sum fits in 32 bits.
fn ones_sum(data: &[u8]) -> u32 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for pair in &mut chunks {
        sum += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

/// Folds a 32-bit sum into 16 bits and complements it.
fn fold_complement(mut sum: u32) -> u16 {
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Summing the fields gives what checksumming the emitted header
        /// (checksum field zeroed) gives, options of any length included.
        #[test]
        fn checksum_from_fields_matches_the_emitted_header(
            ihl in 0u8..16, tos: u8, total_len: u16, ident: u16, flags_frag: u16,
            ttl: u8, protocol: u8, checksum: u16, src: u32, dst: u32,
            options in proptest::collection::vec(any::<u8>(), 0..=40),
        ) {
            let ip = Ipv4Repr {
                ihl, tos, total_len, ident, flags_frag, ttl, protocol, checksum,
                src: Ipv4Addr::from(src), dst: Ipv4Addr::from(dst), options: &options,
            };
            let mut header = vec![0u8; ip.buffer_len()];
            ip.emit(&mut header).unwrap();
            header[field::CHECKSUM..field::CHECKSUM + 2].fill(0);
            prop_assert_eq!(ip.compute_checksum(), internet_checksum(&header));
        }
    }

    #[test]
    fn a_header_longer_than_ipv4_allows_has_checksum_zero() {
        let options = [0u8; 41];
        let ip = Ipv4Repr {
            ihl: 15,
            tos: 0,
            total_len: 0,
            ident: 0,
            flags_frag: 0,
            ttl: 64,
            protocol: PROTOCOL_UDP,
            checksum: 0,
            src: Ipv4Addr::LOCALHOST,
            dst: Ipv4Addr::LOCALHOST,
            options: &options,
        };
        assert_eq!(ip.compute_checksum(), 0);
    }
}
