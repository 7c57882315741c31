//! The MP setup block: the MetaRoCE block in the private data of an RDMA-CM
//! REQ or REP that carries a QP's MP parameters (SPEC.md §6.22 reserves it,
//! §7.1.1 defines version 1; MR-MPN-7 … MR-MPN-11).
//!
//! The block starts the consumer's private data (after RDMA-CM's 36-byte
//! header in a REQ). Version 1 is [`MpSetupBlock::LEN`] = 24 bytes,
//! big-endian:
//!
//! ```text
//! 0-1 magic "MR" | 2 version | 3 length | 4 flags M T FL O RN | 5 trim DSCP
//! 6-7 window | 8-9 entropy set size | 10 planes | 11 ACK coalescing µs
//! 12 ACK prompt µs | 13-15 reserved | 16-19 max staged bytes | 20-23 reserved
//! ```
//!
//! [`MpSetupBlock::parse`] reads any version by its version-1 fields and
//! returns the bytes after the block as its length gives them; it rejects
//! only what makes the block unreadable (magic, version 0, a length below 24
//! or beyond the input). [`MpSetupBlock::validate`] checks the ranges §7.1.1
//! gives (MR-MPN-11). Reserved bits are kept, so a block round-trips.

use crate::error::{Layer, WireError};
use core::ops::RangeInclusive;

/// Byte offsets and masks of the block's fields.
pub mod field {
    /// "MR", 2 bytes.
    pub const MAGIC: usize = 0;
    /// Version, 1 byte.
    pub const VERSION: usize = 2;
    /// Length of the block in bytes, 1 byte.
    pub const LENGTH: usize = 3;
    /// Flags, 1 byte.
    pub const FLAGS: usize = 4;
    /// Trim DSCP (mask [`TRIM_DSCP_MASK`]), 1 byte.
    pub const TRIM_DSCP: usize = 5;
    /// Receive window W, 2 bytes.
    pub const WINDOW: usize = 6;
    /// Entropy set size N, 2 bytes.
    pub const ENTROPY_SET_SIZE: usize = 8;
    /// Planes, 1 byte.
    pub const PLANES: usize = 10;
    /// ACK coalescing time in µs, 1 byte.
    pub const ACK_COALESCE_US: usize = 11;
    /// ACK prompt bound in µs, 1 byte.
    pub const ACK_PROMPT_US: usize = 12;
    /// Reserved, 3 bytes.
    pub const RESERVED: usize = 13;
    /// Max staged bytes, 4 bytes.
    pub const MAX_STAGED_BYTES: usize = 16;
    /// Reserved, 4 bytes.
    pub const RESERVED2: usize = 20;

    /// Flag M: MP asked for (REQ) or accepted (REP).
    pub const FLAG_MP: u8 = 0x80;
    /// Flag T: trimming on, byte 5 holds the trim DSCP.
    pub const FLAG_TRIM: u8 = 0x40;
    /// Flag FL: IPv6 flow labels carry the entropy values.
    pub const FLAG_FLOW_LABEL: u8 = 0x20;
    /// Flag O: the sender's responder honours the MPETH O flag.
    pub const FLAG_ORDERED: u8 = 0x10;
    /// Flag RN: the sender's requester understands NAK 0x66.
    pub const FLAG_RESOURCE_NAK: u8 = 0x08;
    /// The DSCP bits of byte 5.
    pub const TRIM_DSCP_MASK: u8 = 0x3F;
}

/// The magic bytes "MR".
pub const MAGIC: [u8; 2] = *b"MR";

/// One MP setup block (version 1 fields; a later version's extra bytes are
/// skipped by [`MpSetupBlock::parse`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MpSetupBlock {
    /// Version (1 for the layout of SPEC v1.2).
    pub version: u8,
    /// Length in bytes including the first four.
    pub length: u8,
    /// Flags byte, reserved bits included.
    pub flags: u8,
    /// Byte 5 as sent (DSCP in the low 6 bits).
    pub trim_dscp: u8,
    /// Largest receive window W the sender accepts.
    pub window: u16,
    /// N of the sender's entropy set.
    pub entropy_set_size: u16,
    /// Planes the sender sprays over.
    pub planes: u8,
    /// The sender's `mp_ack_coalesce_time` in µs.
    pub ack_coalesce_us: u8,
    /// The sender's `mp_ack_prompt_max` in µs.
    pub ack_prompt_us: u8,
    /// Bytes 13–15 as sent.
    pub reserved: [u8; 3],
    /// The sender's `mp_max_staged_bytes`.
    pub max_staged_bytes: u32,
    /// Bytes 20–23 as sent.
    pub reserved2: [u8; 4],
}

impl MpSetupBlock {
    /// Bytes of a version-1 block.
    pub const LEN: usize = 24;
    /// The windows a block may announce (§7.1.1 `window`, MR-MPN-11).
    pub const WINDOW_RANGE: RangeInclusive<u16> = 64..=16384;
    /// The entropy set sizes a block may announce (MR-MPN-11).
    pub const ENTROPY_SET_SIZE_RANGE: RangeInclusive<u16> = 1..=256;
    /// The planes a block may announce (§7.1.1 `planes`).
    pub const PLANES_RANGE: RangeInclusive<u8> = 1..=8;
    /// The ACK coalescing times, µs (§7.1.1 `ack_coalesce_us`).
    pub const ACK_COALESCE_US_RANGE: RangeInclusive<u8> = 1..=64;
    /// The ACK prompt bounds, µs (§7.1.1 `ack_prompt_us`).
    pub const ACK_PROMPT_US_RANGE: RangeInclusive<u8> = 1..=50;

    /// A version-1 block with length 24, reserved fields 0.
    pub fn v1() -> Self {
        MpSetupBlock {
            version: 1,
            length: Self::LEN as u8,
            ..MpSetupBlock::default()
        }
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        Self::LEN
    }

    /// Flag M.
    pub const fn mp(&self) -> bool {
        self.flags & field::FLAG_MP != 0
    }

    /// The trim DSCP when flag T is set.
    pub const fn trim(&self) -> Option<u8> {
        if self.flags & field::FLAG_TRIM != 0 {
            Some(self.trim_dscp & field::TRIM_DSCP_MASK)
        } else {
            None
        }
    }

    /// Flag O.
    pub const fn ordered(&self) -> bool {
        self.flags & field::FLAG_ORDERED != 0
    }

    /// Flag RN.
    pub const fn resource_nak(&self) -> bool {
        self.flags & field::FLAG_RESOURCE_NAK != 0
    }

    /// Parses a block at the start of `input` (the consumer's private data);
    /// returns it and the bytes after it. Offsets in errors are from the start
    /// of `input`.
    pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        let byte = |at: usize, name: &'static str| {
            input
                .get(at)
                .copied()
                .ok_or_else(|| WireError::truncated(Layer::Cm, name, at, 1, 0))
        };
        if input.len() < 4 {
            return Err(WireError::truncated(
                Layer::Cm,
                "mp_setup",
                0,
                4,
                input.len(),
            ));
        }
        let magic = [byte(0, "magic")?, byte(1, "magic")?];
        if magic != MAGIC {
            return Err(WireError::invalid(
                Layer::Cm,
                "magic",
                field::MAGIC,
                u64::from(u16::from_be_bytes(magic)),
                "not a MetaRoCE block (\"MR\")",
            ));
        }
        let version = byte(field::VERSION, "version")?;
        if version == 0 {
            return Err(WireError::invalid(
                Layer::Cm,
                "version",
                field::VERSION,
                0,
                "version 0 is not defined",
            ));
        }
        let length = byte(field::LENGTH, "length")?;
        if usize::from(length) < Self::LEN {
            return Err(WireError::invalid(
                Layer::Cm,
                "length",
                field::LENGTH,
                u64::from(length),
                "shorter than the 24 bytes of version 1",
            ));
        }
        let Some(b) = input.get(..usize::from(length)) else {
            return Err(WireError::truncated(
                Layer::Cm,
                "mp_setup",
                0,
                usize::from(length),
                input.len(),
            ));
        };
        let u16_at = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
        let block = MpSetupBlock {
            version,
            length,
            flags: b[field::FLAGS],
            trim_dscp: b[field::TRIM_DSCP],
            window: u16_at(field::WINDOW),
            entropy_set_size: u16_at(field::ENTROPY_SET_SIZE),
            planes: b[field::PLANES],
            ack_coalesce_us: b[field::ACK_COALESCE_US],
            ack_prompt_us: b[field::ACK_PROMPT_US],
            reserved: [b[13], b[14], b[15]],
            max_staged_bytes: u32::from_be_bytes([b[16], b[17], b[18], b[19]]),
            reserved2: [b[20], b[21], b[22], b[23]],
        };
        Ok((block, &input[usize::from(length)..]))
    }

    /// The ranges of §7.1.1 (MR-MPN-11): window 64–16384, entropy set size
    /// 1–256, planes 1–8. The first field out of range is the error.
    pub fn validate(&self) -> Result<(), WireError> {
        let check = |ok: bool, name: &'static str, at: usize, v: u64, why: &'static str| {
            if ok {
                Ok(())
            } else {
                Err(WireError::invalid(Layer::Cm, name, at, v, why))
            }
        };
        check(
            Self::WINDOW_RANGE.contains(&self.window),
            "window",
            field::WINDOW,
            u64::from(self.window),
            "outside 64-16384",
        )?;
        check(
            Self::ENTROPY_SET_SIZE_RANGE.contains(&self.entropy_set_size),
            "entropy_set_size",
            field::ENTROPY_SET_SIZE,
            u64::from(self.entropy_set_size),
            "outside 1-256",
        )?;
        check(
            Self::PLANES_RANGE.contains(&self.planes),
            "planes",
            field::PLANES,
            u64::from(self.planes),
            "outside 1-8",
        )
    }

    /// Writes the 24 bytes of the block (length byte as stored, so a later
    /// version's block is written as its version-1 part). Fails only when
    /// `buf` is shorter than [`Self::LEN`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        let Some(b) = buf.get_mut(..Self::LEN) else {
            return Err(WireError::buffer_too_small(Layer::Cm, Self::LEN, buf.len()));
        };
        b[0..2].copy_from_slice(&MAGIC);
        b[field::VERSION] = self.version;
        b[field::LENGTH] = self.length;
        b[field::FLAGS] = self.flags;
        b[field::TRIM_DSCP] = self.trim_dscp;
        b[6..8].copy_from_slice(&self.window.to_be_bytes());
        b[8..10].copy_from_slice(&self.entropy_set_size.to_be_bytes());
        b[field::PLANES] = self.planes;
        b[field::ACK_COALESCE_US] = self.ack_coalesce_us;
        b[field::ACK_PROMPT_US] = self.ack_prompt_us;
        b[13..16].copy_from_slice(&self.reserved);
        b[16..20].copy_from_slice(&self.max_staged_bytes.to_be_bytes());
        b[20..24].copy_from_slice(&self.reserved2);
        Ok(())
    }
}

/// What a REQ's or REP's private data holds where the block belongs
/// (SPEC.md §7.1.1): no block, a block, a block that cannot be read
/// (MR-MPN-11), or bytes the capture did not keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MpSetupField {
    /// The consumer's private data does not start with "MR": no block.
    #[default]
    Absent,
    /// The capture cut the frame before the bytes the block needs.
    NotCaptured,
    /// A readable block (of any version; its ranges are not checked:
    /// [`MpSetupBlock::validate`]).
    Block(MpSetupBlock),
    /// "MR" starts the private data but the block cannot be read: version 0,
    /// a length below 24, or a length that reaches beyond the private data.
    Unreadable {
        /// The field that makes it unreadable (`"version"`, `"length"`).
        field: &'static str,
        /// Its value.
        value: u8,
    },
}

impl MpSetupField {
    /// Reads the place of the block: `captured` is the consumer's private
    /// data as far as the capture kept it, `size` its length on the wire
    /// (56 bytes in a REQ after RDMA-CM's header, 196 in a REP). Never
    /// fails: a cut capture gives [`MpSetupField::NotCaptured`].
    pub fn read(captured: &[u8], size: usize) -> Self {
        let captured = captured.get(..size).unwrap_or(captured);
        let whole = captured.len() >= size;
        match captured.get(..2) {
            None if whole => return MpSetupField::Absent,
            None => return MpSetupField::NotCaptured,
            Some(m) if m != MAGIC => return MpSetupField::Absent,
            Some(_) => {}
        }
        if let Some(&length) = captured.get(field::LENGTH)
            && usize::from(length) > size
            && captured.get(field::VERSION).is_some_and(|&v| v != 0)
        {
            return MpSetupField::Unreadable {
                field: "length",
                value: length,
            };
        }
        match MpSetupBlock::parse(captured) {
            Ok((block, _)) => MpSetupField::Block(block),
            Err(e) => match e.kind {
                crate::error::WireErrorKind::Invalid { value, .. } => MpSetupField::Unreadable {
                    field: e.field,
                    value: u8::try_from(value).unwrap_or(u8::MAX),
                },
                _ if whole => MpSetupField::Unreadable {
                    field: "length",
                    value: captured.get(field::LENGTH).copied().unwrap_or(0),
                },
                _ => MpSetupField::NotCaptured,
            },
        }
    }

    /// The block, when one was read.
    pub const fn block(&self) -> Option<&MpSetupBlock> {
        match self {
            MpSetupField::Block(b) => Some(b),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::WireErrorKind;

    fn sample() -> MpSetupBlock {
        MpSetupBlock {
            flags: field::FLAG_MP | field::FLAG_TRIM | field::FLAG_RESOURCE_NAK,
            trim_dscp: 46,
            window: 1024,
            entropy_set_size: 128,
            planes: 8,
            ack_coalesce_us: 8,
            ack_prompt_us: 4,
            max_staged_bytes: 524_288,
            ..MpSetupBlock::v1()
        }
    }

    const BYTES: [u8; 24] = [
        0x4D, 0x52, 1, 24, 0xC8, 46, 0x04, 0x00, 0x00, 0x80, 8, 8, 4, 0, 0, 0, 0x00, 0x08, 0x00,
        0x00, 0, 0, 0, 0,
    ];

    #[test]
    fn known_bytes_parse_and_emit_mr_mpn_7() {
        let (b, rest) = MpSetupBlock::parse(&BYTES).unwrap();
        assert_eq!(b, sample());
        assert!(rest.is_empty());
        assert!(b.mp() && b.resource_nak() && !b.ordered());
        assert_eq!(b.trim(), Some(46));
        let mut buf = [0xa5; 24];
        b.emit(&mut buf).unwrap();
        assert_eq!(buf, BYTES);
        assert!(b.validate().is_ok());
    }

    #[test]
    fn every_truncated_prefix_fails() {
        for n in 0..BYTES.len() {
            let e = MpSetupBlock::parse(&BYTES[..n]).unwrap_err();
            assert!(
                matches!(e.kind, WireErrorKind::Truncated { .. }),
                "{n}: {e:?}"
            );
        }
    }

    #[test]
    fn a_later_version_is_read_by_its_version_1_fields_mr_mpn_11() {
        let mut v2 = BYTES.to_vec();
        v2[2] = 2;
        v2[3] = 28;
        v2.extend_from_slice(&[9, 9, 9, 9, 0xEE]);
        let (b, rest) = MpSetupBlock::parse(&v2).unwrap();
        assert_eq!((b.version, b.window), (2, 1024));
        assert_eq!(rest, &[0xEE]);
    }

    #[test]
    fn unreadable_and_out_of_range_blocks_mr_mpn_11() {
        let mut bad = BYTES;
        bad[0] = b'X';
        assert_eq!(MpSetupBlock::parse(&bad).unwrap_err().field, "magic");
        let mut bad = BYTES;
        bad[3] = 20;
        assert_eq!(MpSetupBlock::parse(&bad).unwrap_err().field, "length");
        let mut bad = BYTES;
        bad[2] = 0;
        assert_eq!(MpSetupBlock::parse(&bad).unwrap_err().field, "version");
        let small = MpSetupBlock {
            window: 63,
            ..sample()
        };
        assert_eq!(small.validate().unwrap_err().field, "window");
        let none = MpSetupBlock {
            entropy_set_size: 0,
            ..sample()
        };
        assert_eq!(none.validate().unwrap_err().field, "entropy_set_size");
        let planes = MpSetupBlock {
            planes: 9,
            ..sample()
        };
        assert_eq!(planes.validate().unwrap_err().field, "planes");
        assert!(sample().emit(&mut [0; 23]).is_err());
    }
}
