//! Ethernet II with up to two 802.1Q / 802.1ad tags.

use crate::error::{Layer, WireError, be16, check_emit, parse_fixed};

/// Byte ranges of the Ethernet header.
pub mod field {
    use core::ops::Range;
    /// Destination MAC address.
    pub const DST: Range<usize> = 0..6;
    /// Source MAC address.
    pub const SRC: Range<usize> = 6..12;
    /// EtherType or the first tag's TPID.
    pub const ETHERTYPE: Range<usize> = 12..14;
}

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
/// EtherType of RoCE v1 (InfiniBand GRH and BTH directly over Ethernet).
pub const ETHERTYPE_ROCE_V1: u16 = 0x8915;
/// TPID of an 802.1Q (customer) tag.
pub const TPID_8021Q: u16 = 0x8100;
/// TPID of an 802.1ad (service) tag.
pub const TPID_8021AD: u16 = 0x88A8;
/// Legacy TPID some switches use for QinQ outer tags.
pub const TPID_QINQ_LEGACY: u16 = 0x9100;

/// Whether `value` is the TPID of a VLAN tag this codec decodes.
pub const fn is_tpid(value: u16) -> bool {
    matches!(value, TPID_8021Q | TPID_8021AD | TPID_QINQ_LEGACY)
}

/// One VLAN tag: TPID and the 16-bit tag control information.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct VlanTag {
    /// Tag protocol identifier (0x8100, 0x88A8 or 0x9100).
    pub tpid: u16,
    /// Tag control information: PCP (3 bits), DEI (1 bit), VID (12 bits).
    pub tci: u16,
}

impl VlanTag {
    /// Bytes on the wire.
    pub const LEN: usize = 4;

    /// An 802.1Q tag with the given priority and VLAN id.
    pub const fn dot1q(pcp: u8, vid: u16) -> Self {
        VlanTag {
            tpid: TPID_8021Q,
            tci: ((pcp as u16 & 0x7) << 13) | (vid & 0x0FFF),
        }
    }

    /// Priority code point (the PFC class).
    pub const fn pcp(self) -> u8 {
        (self.tci >> 13) as u8
    }

    /// Drop eligible indicator.
    pub const fn dei(self) -> bool {
        self.tci & 0x1000 != 0
    }

    /// VLAN identifier.
    pub const fn vid(self) -> u16 {
        self.tci & 0x0FFF
    }
}

/// Ethernet II header with zero, one or two VLAN tags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Destination MAC.
    pub dst: [u8; 6],
    /// Source MAC.
    pub src: [u8; 6],
    /// Tags in wire order (outer first); `vlan_count` of them are present.
    pub vlans: [VlanTag; 2],
    /// How many of `vlans` are on the wire (0, 1 or 2).
    pub vlan_count: u8,
    /// EtherType after the tags.
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Bytes without tags.
    pub const BASE_LEN: usize = 14;

    /// Parses the header and its tags. A third tag is reported as unsupported.
    #[inline]
    pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        let (repr, rest) = parse_fixed::<{ Self::BASE_LEN }, _>(Layer::Ethernet, input, |b| {
            let mut dst = [0u8; 6];
            let mut src = [0u8; 6];
            dst.copy_from_slice(&b[field::DST]);
            src.copy_from_slice(&b[field::SRC]);
            EthernetRepr {
                dst,
                src,
                ethertype: be16(b, field::ETHERTYPE.start),
                ..EthernetRepr::default()
            }
        })?;
        repr.with_tags(rest, Self::BASE_LEN)
    }

    /// Reads the VLAN tags that follow when `self.ethertype` is a TPID
    /// (`input` starts after that TPID, `offset` bytes into the frame, for
    /// error offsets) and sets `ethertype` to the one after them: what
    /// [`EthernetRepr::parse`] does after the MAC addresses, for link
    /// headers that carry the EtherType elsewhere (Linux cooked capture).
    pub fn with_tags(mut self, input: &[u8], offset: usize) -> Result<(Self, &[u8]), WireError> {
        let mut rest = input;
        let mut ethertype = self.ethertype;
        while is_tpid(ethertype) {
            let at = offset + input.len() - rest.len();
            if usize::from(self.vlan_count) >= self.vlans.len() {
                return Err(WireError::unsupported(
                    Layer::Vlan,
                    "tpid",
                    at.saturating_sub(2),
                    "more than two VLAN tags",
                ));
            }
            let ((tci, next), after) =
                parse_fixed::<{ VlanTag::LEN }, _>(Layer::Vlan, rest, |b| (be16(b, 0), be16(b, 2)))
                    .map_err(|e| e.shifted(at))?;
            self.vlans[usize::from(self.vlan_count)] = VlanTag {
                tpid: ethertype,
                tci,
            };
            self.vlan_count += 1;
            ethertype = next;
            rest = after;
        }
        self.ethertype = ethertype;
        Ok((self, rest))
    }

    /// The header without its outer tag (the frame inside a QinQ service
    /// tag), and that tag; `None` without tags.
    pub fn without_outer_tag(&self) -> Option<(Self, VlanTag)> {
        let tags = self.tags();
        let (&outer, inner) = tags.split_first()?;
        let mut repr = *self;
        repr.vlans = [VlanTag::default(); 2];
        repr.vlans[..inner.len()].copy_from_slice(inner);
        repr.vlan_count = inner.len() as u8;
        Some((repr, outer))
    }

    /// The tags on the wire.
    pub fn tags(&self) -> &[VlanTag] {
        &self.vlans[..usize::from(self.vlan_count.min(2))]
    }

    /// Bytes on the wire, tags included.
    pub fn buffer_len(&self) -> usize {
        Self::BASE_LEN + VlanTag::LEN * self.tags().len()
    }

    /// Writes the header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        check_emit(Layer::Ethernet, buf, self.buffer_len())?;
        buf[field::DST].copy_from_slice(&self.dst);
        buf[field::SRC].copy_from_slice(&self.src);
        let mut at = 12;
        for tag in self.tags() {
            buf[at..at + 2].copy_from_slice(&tag.tpid.to_be_bytes());
            buf[at + 2..at + 4].copy_from_slice(&tag.tci.to_be_bytes());
            at += 4;
        }
        buf[at..at + 2].copy_from_slice(&self.ethertype.to_be_bytes());
        Ok(())
    }
}
