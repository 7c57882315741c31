//! The RoCEv2 extension headers (SPEC §4.2).

use crate::error::{Layer, WireError, be24, be32, be64, check_emit, parse_fixed};
use crate::seq::Msn;

/// RDMA Extended Transport Header: target of a WRITE or READ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct RethRepr {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length of the whole message.
    pub dma_len: u32,
}

impl RethRepr {
    /// Bytes on the wire.
    pub const LEN: usize = 16;

    /// Parses the header.
    #[inline]
    pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        parse_fixed::<{ Self::LEN }, _>(Layer::Reth, input, |b| RethRepr {
            va: be64(b, 0),
            rkey: be32(b, 8),
            dma_len: be32(b, 12),
        })
    }

    /// Writes the header.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        check_emit(Layer::Reth, buf, Self::LEN)?;
        buf[0..8].copy_from_slice(&self.va.to_be_bytes());
        buf[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        buf[12..16].copy_from_slice(&self.dma_len.to_be_bytes());
        Ok(())
    }
}

/// The 8-bit AETH syndrome: ACK, RNR NAK or NAK with its 5-bit value.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Syndrome(pub u8);

/// What a [`Syndrome`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyndromeKind {
    /// ACK with an end-to-end credit code (31 = no credit information).
    Ack {
        /// Credit code 0–31.
        credit_code: u8,
    },
    /// Receiver not ready, with the RNR timer code.
    RnrNak {
        /// Timer code 0–31.
        timer: u8,
    },
    /// The reserved type 10 (0x40–0x5F).
    Reserved {
        /// Low five bits.
        value: u8,
    },
    /// Negative acknowledge with its code.
    Nak {
        /// NAK code 0–31.
        code: u8,
    },
}

impl Syndrome {
    /// ACK without credit information (`0x1F`).
    pub const ACK_UNLIMITED: Syndrome = Syndrome(0x1F);
    /// NAK: PSN sequence error.
    pub const NAK_PSN_SEQ: Syndrome = Syndrome(0x60);
    /// NAK: invalid request.
    pub const NAK_INVALID_REQUEST: Syndrome = Syndrome(0x61);
    /// NAK: remote access error.
    pub const NAK_REMOTE_ACCESS: Syndrome = Syndrome(0x62);
    /// NAK: remote operational error.
    pub const NAK_REMOTE_OP: Syndrome = Syndrome(0x63);
    /// NAK: invalid RD request.
    pub const NAK_INVALID_RD_REQUEST: Syndrome = Syndrome(0x64);
    /// MetaRoCE MP NAK: packet trimmed.
    pub const NAK_TRIMMED: Syndrome = Syndrome(0x65);
    /// MetaRoCE MP NAK: resource NAK, arrived but not accepted for lack of
    /// receiver resources (SPEC §7.16).
    pub const NAK_RESOURCE: Syndrome = Syndrome(0x66);

    /// Decodes bits 6:5 and 4:0. Bit 7 (reserved) is ignored here; it is kept
    /// in the value for round trips.
    pub const fn kind(self) -> SyndromeKind {
        let value = self.0 & 0x1F;
        match (self.0 >> 5) & 0x3 {
            0 => SyndromeKind::Ack { credit_code: value },
            1 => SyndromeKind::RnrNak { timer: value },
            2 => SyndromeKind::Reserved { value },
            _ => SyndromeKind::Nak { code: value },
        }
    }
}

impl Syndrome {
    /// The name of a NAK code: the five of IBA, and in an MP SACKETH
    /// (`mp`) MetaRoCE's codes 5 (packet trimmed, SPEC §7.10) and 6
    /// (resource NAK, §7.16). `None` for other syndromes and reserved codes.
    pub const fn nak_name(self, mp: bool) -> Option<&'static str> {
        match self.kind() {
            SyndromeKind::Nak { code } => match code {
                0 => Some("PSN sequence error"),
                1 => Some("invalid request"),
                2 => Some("remote access error"),
                3 => Some("remote operational error"),
                4 => Some("invalid RD request"),
                5 if mp => Some("packet trimmed"),
                6 if mp => Some("resource NAK"),
                _ => None,
            },
            _ => None,
        }
    }
}

impl core::fmt::Debug for Syndrome {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Syndrome({:#04x} {:?})", self.0, self.kind())
    }
}

/// ACK Extended Transport Header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct AethRepr {
    /// Syndrome.
    pub syndrome: Syndrome,
    /// Responder's message sequence number.
    pub msn: Msn,
}

impl AethRepr {
    /// Bytes on the wire.
    pub const LEN: usize = 4;

    /// Parses the header.
    #[inline]
    pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        parse_fixed::<{ Self::LEN }, _>(Layer::Aeth, input, |b| AethRepr {
            syndrome: Syndrome(b[0]),
            msn: Msn::new(be24(b, 1)),
        })
    }

    /// Writes the header.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        check_emit(Layer::Aeth, buf, Self::LEN)?;
        buf[0] = self.syndrome.0;
        buf[1..4].copy_from_slice(&self.msn.value().to_be_bytes()[1..]);
        Ok(())
    }
}

/// Atomic Extended Transport Header (28 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct AtomicEthRepr {
    /// Virtual address of the 8-byte target.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap (compare-swap) or add (fetch-add) operand.
    pub swap_add: u64,
    /// Compare operand (compare-swap).
    pub compare: u64,
}

impl AtomicEthRepr {
    /// Bytes on the wire.
    pub const LEN: usize = 28;

    /// Parses the header.
    #[inline]
    pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        parse_fixed::<{ Self::LEN }, _>(Layer::AtomicEth, input, |b| AtomicEthRepr {
            va: be64(b, 0),
            rkey: be32(b, 8),
            swap_add: be64(b, 12),
            compare: be64(b, 20),
        })
    }

    /// Writes the header.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        check_emit(Layer::AtomicEth, buf, Self::LEN)?;
        buf[0..8].copy_from_slice(&self.va.to_be_bytes());
        buf[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        buf[12..20].copy_from_slice(&self.swap_add.to_be_bytes());
        buf[20..28].copy_from_slice(&self.compare.to_be_bytes());
        Ok(())
    }
}

/// Declares a header that is one big-endian integer field.
macro_rules! single_field_header {
    ($(#[$doc:meta])* $name:ident, $layer:expr, $field:ident: $ty:ty, $parser:ident, $(#[$fdoc:meta])*) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
        pub struct $name {
            $(#[$fdoc])*
            pub $field: $ty,
        }

        impl $name {
            /// Bytes on the wire.
            pub const LEN: usize = core::mem::size_of::<$ty>();

            /// Parses the header.
            #[inline]
            pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
                parse_fixed::<{ Self::LEN }, _>($layer, input, |b| $name { $field: $parser(b, 0) })
            }

            /// Writes the header.
            pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
                check_emit($layer, buf, Self::LEN)?;
                buf[..Self::LEN].copy_from_slice(&self.$field.to_be_bytes());
                Ok(())
            }
        }
    };
}

single_field_header!(
    /// Atomic ACK Extended Transport Header: the original value at the target.
    AtomicAckEthRepr, Layer::AtomicAckEth, orig: u64, be64,
    /// Value at the target before the atomic operation.
);
single_field_header!(
    /// Immediate data (opaque, delivered in network byte order).
    ImmDtRepr, Layer::ImmDt, value: u32, be32,
    /// The 32-bit immediate.
);
single_field_header!(
    /// Invalidate Extended Transport Header.
    IethRepr, Layer::Ieth, rkey: u32, be32,
    /// R_Key to invalidate.
);

/// Declares a header of a reserved byte and a 24-bit number.
macro_rules! reserved_and_24 {
    ($(#[$doc:meta])* $name:ident, $layer:expr, $field:ident, $(#[$fdoc:meta])*) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
        pub struct $name {
            /// Reserved byte, kept for round trips.
            pub reserved: u8,
            $(#[$fdoc])*
            pub $field: u32,
        }

        impl $name {
            /// Bytes on the wire.
            pub const LEN: usize = 4;

            /// Parses the header.
            #[inline]
            pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
                parse_fixed::<{ Self::LEN }, _>($layer, input, |b| $name {
                    reserved: b[0],
                    $field: be24(b, 1),
                })
            }

            /// Writes the header; the number is masked to 24 bits.
            pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
                check_emit($layer, buf, Self::LEN)?;
                buf[0] = self.reserved;
                buf[1..4].copy_from_slice(&self.$field.to_be_bytes()[1..]);
                Ok(())
            }
        }
    };
}

reserved_and_24!(
    /// Reliable Datagram Extended Transport Header.
    RdethRepr, Layer::Rdeth, ee_context,
    /// End-to-end context (24 bits).
);
reserved_and_24!(
    /// XRC Extended Transport Header.
    XrcethRepr, Layer::Xrceth, xrc_srq,
    /// XRC shared receive queue number (24 bits).
);

/// Datagram Extended Transport Header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct DethRepr {
    /// Queue key.
    pub qkey: u32,
    /// Reserved byte, kept for round trips.
    pub reserved: u8,
    /// Source QP number (24 bits).
    pub src_qp: u32,
}

impl DethRepr {
    /// Bytes on the wire.
    pub const LEN: usize = 8;

    /// Parses the header.
    #[inline]
    pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        parse_fixed::<{ Self::LEN }, _>(Layer::Deth, input, |b| DethRepr {
            qkey: be32(b, 0),
            reserved: b[4],
            src_qp: be24(b, 5),
        })
    }

    /// Writes the header; the source QP is masked to 24 bits.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        check_emit(Layer::Deth, buf, Self::LEN)?;
        buf[0..4].copy_from_slice(&self.qkey.to_be_bytes());
        buf[4] = self.reserved;
        buf[5..8].copy_from_slice(&self.src_qp.to_be_bytes()[1..]);
        Ok(())
    }
}

/// FLUSH Extended Transport Header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct FethRepr {
    /// Reserved upper 26 bits, kept for round trips.
    pub reserved: u32,
    /// Selectivity level (2 bits).
    pub selectivity_level: u8,
    /// Placement type (4 bits).
    pub placement_type: u8,
}

impl FethRepr {
    /// Bytes on the wire.
    pub const LEN: usize = 4;

    /// Parses the header.
    #[inline]
    pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        parse_fixed::<{ Self::LEN }, _>(Layer::Feth, input, |b| {
            let word = be32(b, 0);
            FethRepr {
                reserved: word >> 6,
                selectivity_level: ((word >> 4) & 0x3) as u8,
                placement_type: (word & 0xF) as u8,
            }
        })
    }

    /// Writes the header; fields are masked to their widths.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        check_emit(Layer::Feth, buf, Self::LEN)?;
        let word = ((self.reserved & 0x03FF_FFFF) << 6)
            | (u32::from(self.selectivity_level & 0x3) << 4)
            | u32::from(self.placement_type & 0xF);
        buf[0..4].copy_from_slice(&word.to_be_bytes());
        Ok(())
    }
}

/// The 16 reserved bytes after the BTH of a CNP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct CnpRepr {
    /// Reserved bytes, zero when sent; kept for round trips.
    pub reserved: [u8; 16],
}

impl CnpRepr {
    /// Bytes on the wire.
    pub const LEN: usize = 16;

    /// Parses the reserved block.
    #[inline]
    pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        parse_fixed::<{ Self::LEN }, _>(Layer::Cnp, input, |b| CnpRepr { reserved: *b })
    }

    /// Writes the reserved block.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        check_emit(Layer::Cnp, buf, Self::LEN)?;
        buf[..16].copy_from_slice(&self.reserved);
        Ok(())
    }
}
