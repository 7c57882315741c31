//! UDP header.

use crate::error::{Layer, WireError, be16, check_emit, parse_fixed};

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
}
