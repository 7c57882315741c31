//! Base Transport Header (12 bytes).

use crate::error::{Layer, WireError, be16, be24, check_emit, parse_fixed};
use crate::opcode::Opcode;
use crate::seq::Psn;

/// Byte offsets and masks of BTH fields (SPEC §4.1).
pub mod field {
    /// Opcode byte.
    pub const OPCODE: usize = 0;
    /// SE, M, PadCnt, TVer byte.
    pub const FLAGS: usize = 1;
    /// Solicited event mask in [`FLAGS`].
    pub const SE: u8 = 0x80;
    /// MigReq mask in [`FLAGS`].
    pub const MIGREQ: u8 = 0x40;
    /// PadCnt mask in [`FLAGS`].
    pub const PAD_COUNT: u8 = 0x30;
    /// Transport version mask in [`FLAGS`].
    pub const TVER: u8 = 0x0F;
    /// P_Key, 2 bytes.
    pub const PKEY: usize = 2;
    /// FECN, BECN, reserved byte (masked in the ICRC).
    pub const CONGESTION: usize = 4;
    /// FECN mask in [`CONGESTION`].
    pub const FECN: u8 = 0x80;
    /// BECN mask in [`CONGESTION`].
    pub const BECN: u8 = 0x40;
    /// Reserved (6 bits) mask in [`CONGESTION`].
    pub const RESV6A: u8 = 0x3F;
    /// Destination QP, 3 bytes.
    pub const DEST_QP: usize = 5;
    /// AckReq and reserved byte.
    pub const ACK_REQ_BYTE: usize = 8;
    /// AckReq mask in [`ACK_REQ_BYTE`].
    pub const ACK_REQ: u8 = 0x80;
    /// Reserved (7 bits) mask in [`ACK_REQ_BYTE`].
    pub const RESV7: u8 = 0x7F;
    /// PSN, 3 bytes.
    pub const PSN: usize = 9;
}

/// The QPN of the general services interface (QP 1): communication
/// management datagrams (SPEC.md §6.22).
pub const GSI_QPN: u32 = 1;

/// Whether two P_Keys match (IBA 10.9, SPEC.md MR-BTH-5): equal low 15 bits,
/// not zero, and at least one of the two a full member (bit 15 set). 0x0000
/// and 0x8000 match nothing.
pub const fn pkey_matches(a: u16, b: u16) -> bool {
    let key = a & 0x7FFF;
    key != 0 && key == b & 0x7FFF && (a | b) & 0x8000 != 0
}

/// A Base Transport Header. Every bit is kept, reserved bits included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct BthRepr {
    /// Opcode.
    pub opcode: Opcode,
    /// Solicited event.
    pub se: bool,
    /// Migration request (M).
    pub migreq: bool,
    /// Pad count (2 bits).
    pub pad_count: u8,
    /// Transport header version (4 bits); 0 on RoCEv2.
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward explicit congestion notification.
    pub fecn: bool,
    /// Backward explicit congestion notification (set in CNPs).
    pub becn: bool,
    /// Reserved 6 bits after FECN/BECN.
    pub resv6a: u8,
    /// Destination QP number (24 bits).
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Reserved 7 bits after AckReq.
    pub resv7: u8,
    /// Packet sequence number.
    pub psn: Psn,
}

impl BthRepr {
    /// Bytes on the wire.
    pub const LEN: usize = 12;

    /// Parses a BTH.
    #[inline]
    pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        parse_fixed::<{ Self::LEN }, _>(Layer::Bth, input, |b| {
            let flags = b[field::FLAGS];
            let congestion = b[field::CONGESTION];
            let ack_byte = b[field::ACK_REQ_BYTE];
            BthRepr {
                opcode: Opcode(b[field::OPCODE]),
                se: flags & field::SE != 0,
                migreq: flags & field::MIGREQ != 0,
                pad_count: (flags & field::PAD_COUNT) >> 4,
                tver: flags & field::TVER,
                pkey: be16(b, field::PKEY),
                fecn: congestion & field::FECN != 0,
                becn: congestion & field::BECN != 0,
                resv6a: congestion & field::RESV6A,
                dest_qp: be24(b, field::DEST_QP),
                ack_req: ack_byte & field::ACK_REQ != 0,
                resv7: ack_byte & field::RESV7,
                psn: Psn::new(be24(b, field::PSN)),
            }
        })
    }

    /// Bytes on the wire.
    pub const fn buffer_len(&self) -> usize {
        Self::LEN
    }

    /// Writes the header. Fields wider than their bit width are masked.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        check_emit(Layer::Bth, buf, Self::LEN)?;
        buf[field::OPCODE] = self.opcode.0;
        buf[field::FLAGS] = (u8::from(self.se) << 7)
            | (u8::from(self.migreq) << 6)
            | ((self.pad_count & 0x3) << 4)
            | (self.tver & field::TVER);
        buf[2..4].copy_from_slice(&self.pkey.to_be_bytes());
        buf[field::CONGESTION] =
            (u8::from(self.fecn) << 7) | (u8::from(self.becn) << 6) | (self.resv6a & field::RESV6A);
        buf[5..8].copy_from_slice(&self.dest_qp.to_be_bytes()[1..]);
        buf[field::ACK_REQ_BYTE] = (u8::from(self.ack_req) << 7) | (self.resv7 & field::RESV7);
        buf[9..12].copy_from_slice(&self.psn.value().to_be_bytes()[1..]);
        Ok(())
    }
}

#[cfg(test)]
mod pkey_tests {
    use super::pkey_matches;

    #[test]
    fn pkey_matching_follows_iba_10_9() {
        assert!(pkey_matches(0xFFFF, 0xFFFF));
        assert!(pkey_matches(0x7FFF, 0xFFFF), "limited packet, full QP");
        assert!(pkey_matches(0xFFFF, 0x7FFF), "full packet, limited QP");
        assert!(!pkey_matches(0x7FFF, 0x7FFF), "two limited members");
        assert!(!pkey_matches(0x8000, 0x8000), "0x8000 is invalid");
        assert!(!pkey_matches(0x0000, 0x8000), "0x0000 is invalid");
        assert!(!pkey_matches(0x8123, 0xFFFF), "other key");
    }
}
