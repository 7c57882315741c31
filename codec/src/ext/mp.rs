//! The MetaRoCE multipath headers, MPETH and SACKETH (SPEC.md, MP packet formats).

use super::Syndrome;
use crate::error::{Layer, WireError, be16, be24, be32, be64, check_emit, parse_fixed};
use crate::seq::{Msn, Psn};

/// MPETH flag bits (byte 0).
pub mod mpeth_flags {
    /// First packet of the message.
    pub const FIRST: u8 = 0x80;
    /// Last packet of the message.
    pub const LAST: u8 = 0x40;
    /// Retransmission.
    pub const RETRANSMISSION: u8 = 0x20;
    /// O: ordered message (SPEC v1.2 §7.5, MR-MPP-20, MR-MPP-21); a reserved
    /// bit before v1.2.
    pub const ORDERED: u8 = 0x10;
    /// Reserved bits.
    pub const RESERVED: u8 = 0x0F;
}

/// SACKETH flag bits (byte 4).
pub mod sacketh_flags {
    /// ECN-CE was seen on the triggering packet.
    pub const ECN_CE: u8 = 0x80;
    /// The triggering packet was a retransmission.
    pub const RETRANSMISSION: u8 = 0x40;
    /// The triggering packet was trimmed.
    pub const TRIMMED: u8 = 0x20;
    /// Reserved bits.
    pub const RESERVED: u8 = 0x1F;
}

/// Multipath Extended Transport Header (16 bytes), after the BTH of every MP
/// request and READ response.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct MpethRepr {
    /// F: first packet of the message.
    pub first: bool,
    /// L: last packet of the message.
    pub last: bool,
    /// R: retransmission.
    pub retransmission: bool,
    /// O: ordered message (§7.5): placed only after every earlier message.
    pub ordered: bool,
    /// Reserved low four bits of the flag byte, kept for round trips.
    pub reserved: u8,
    /// Message sequence number of the message the packet belongs to.
    pub msn: Msn,
    /// Byte offset of this packet's payload within the message.
    pub offset: u32,
    /// Total length of the message in bytes.
    pub msg_len: u32,
    /// Sender's transmit time in nanoseconds modulo 2^32.
    pub timestamp: u32,
}

impl MpethRepr {
    /// Bytes on the wire.
    pub const LEN: usize = 16;

    /// Parses the header.
    #[inline]
    pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        parse_fixed::<{ Self::LEN }, _>(Layer::Mpeth, input, |b| {
            let flags = b[0];
            MpethRepr {
                first: flags & mpeth_flags::FIRST != 0,
                last: flags & mpeth_flags::LAST != 0,
                retransmission: flags & mpeth_flags::RETRANSMISSION != 0,
                ordered: flags & mpeth_flags::ORDERED != 0,
                reserved: flags & mpeth_flags::RESERVED,
                msn: Msn::new(be24(b, 1)),
                offset: be32(b, 4),
                msg_len: be32(b, 8),
                timestamp: be32(b, 12),
            }
        })
    }

    /// The flag byte as sent.
    pub const fn flags(&self) -> u8 {
        (if self.first { mpeth_flags::FIRST } else { 0 })
            | (if self.last { mpeth_flags::LAST } else { 0 })
            | (if self.retransmission {
                mpeth_flags::RETRANSMISSION
            } else {
                0
            })
            | (if self.ordered {
                mpeth_flags::ORDERED
            } else {
                0
            })
            | (self.reserved & mpeth_flags::RESERVED)
    }

    /// Writes the header.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        check_emit(Layer::Mpeth, buf, Self::LEN)?;
        buf[0] = self.flags();
        buf[1..4].copy_from_slice(&self.msn.value().to_be_bytes()[1..]);
        buf[4..8].copy_from_slice(&self.offset.to_be_bytes());
        buf[8..12].copy_from_slice(&self.msg_len.to_be_bytes());
        buf[12..16].copy_from_slice(&self.timestamp.to_be_bytes());
        Ok(())
    }
}

/// Selective ACK Extended Transport Header (24 bytes), in MP ACK and MP Atomic
/// Acknowledge. The cumulative ACK PSN is the BTH PSN.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct SackethRepr {
    /// Syndrome, in the AETH code space (plus NAK 0x65, trimmed).
    pub syndrome: Syndrome,
    /// MSN of the last message completed in order at the responder.
    pub msn: Msn,
    /// E: ECN-CE seen on the triggering packet.
    pub ecn_ce: bool,
    /// R: the triggering packet was a retransmission.
    pub retransmission: bool,
    /// T: the triggering packet was trimmed.
    pub trimmed: bool,
    /// Reserved low five bits of the flag byte, kept for round trips.
    pub reserved_flags: u8,
    /// PSN of bitmap bit 0.
    pub sack_base_psn: Psn,
    /// Received PSNs: bit `i` (bit 0 = most significant) is `sack_base_psn + i`.
    pub sack_bitmap: u64,
    /// UDP source port of the packet that triggered this ACK.
    pub echoed_entropy: u16,
    /// Reserved 16 bits, kept for round trips.
    pub reserved: u16,
    /// MPETH timestamp of the triggering packet.
    pub echoed_timestamp: u32,
}

impl SackethRepr {
    /// Bytes on the wire.
    pub const LEN: usize = 24;

    /// Parses the header.
    #[inline]
    pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        parse_fixed::<{ Self::LEN }, _>(Layer::Sacketh, input, |b| {
            let flags = b[4];
            SackethRepr {
                syndrome: Syndrome(b[0]),
                msn: Msn::new(be24(b, 1)),
                ecn_ce: flags & sacketh_flags::ECN_CE != 0,
                retransmission: flags & sacketh_flags::RETRANSMISSION != 0,
                trimmed: flags & sacketh_flags::TRIMMED != 0,
                reserved_flags: flags & sacketh_flags::RESERVED,
                sack_base_psn: Psn::new(be24(b, 5)),
                sack_bitmap: be64(b, 8),
                echoed_entropy: be16(b, 16),
                reserved: be16(b, 18),
                echoed_timestamp: be32(b, 20),
            }
        })
    }

    /// The flag byte as sent.
    pub const fn flags(&self) -> u8 {
        (if self.ecn_ce {
            sacketh_flags::ECN_CE
        } else {
            0
        }) | (if self.retransmission {
            sacketh_flags::RETRANSMISSION
        } else {
            0
        }) | (if self.trimmed {
            sacketh_flags::TRIMMED
        } else {
            0
        }) | (self.reserved_flags & sacketh_flags::RESERVED)
    }

    /// Whether the bitmap marks `psn` as received (`false` outside the 64-PSN window).
    pub const fn is_sacked(&self, psn: Psn) -> bool {
        let i = psn.distance(self.sack_base_psn);
        i < 64 && self.sack_bitmap & (1u64 << (63 - i)) != 0
    }

    /// Writes the header.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        check_emit(Layer::Sacketh, buf, Self::LEN)?;
        buf[0] = self.syndrome.0;
        buf[1..4].copy_from_slice(&self.msn.value().to_be_bytes()[1..]);
        buf[4] = self.flags();
        buf[5..8].copy_from_slice(&self.sack_base_psn.value().to_be_bytes()[1..]);
        buf[8..16].copy_from_slice(&self.sack_bitmap.to_be_bytes());
        buf[16..18].copy_from_slice(&self.echoed_entropy.to_be_bytes());
        buf[18..20].copy_from_slice(&self.reserved.to_be_bytes());
        buf[20..24].copy_from_slice(&self.echoed_timestamp.to_be_bytes());
        Ok(())
    }
}
