//! Structured decode and encode errors.
//!
//! Every error names the layer and field it concerns and the byte offset from
//! the start of the frame (or of the header, for a header parsed on its own),
//! so that a user can find the byte in a hex dump.

use core::fmt;

/// The protocol layer (or header) an error concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layer {
    /// Ethernet II header.
    Ethernet,
    /// An 802.1Q / 802.1ad tag.
    Vlan,
    /// IPv4 header.
    Ipv4,
    /// IPv6 header.
    Ipv6,
    /// UDP header.
    Udp,
    /// Base Transport Header.
    Bth,
    /// RDMA Extended Transport Header.
    Reth,
    /// ACK Extended Transport Header.
    Aeth,
    /// Atomic Extended Transport Header.
    AtomicEth,
    /// Atomic ACK Extended Transport Header.
    AtomicAckEth,
    /// Immediate data.
    ImmDt,
    /// Invalidate Extended Transport Header.
    Ieth,
    /// Datagram Extended Transport Header.
    Deth,
    /// Reliable Datagram Extended Transport Header.
    Rdeth,
    /// XRC Extended Transport Header.
    Xrceth,
    /// FLUSH Extended Transport Header.
    Feth,
    /// The 16 reserved bytes of a CNP.
    Cnp,
    /// MetaRoCE multipath extended header.
    Mpeth,
    /// MetaRoCE selective-ACK extended header.
    Sacketh,
    /// Payload and pad.
    Payload,
    /// Management datagram header (QP1, IBA vol 1 §13.4.3).
    Mad,
    /// Communication management message (IBA vol 1 §12.6).
    Cm,
    /// Invariant CRC trailer.
    Icrc,
    /// A capture's link-layer header other than Ethernet (Linux cooked
    /// capture SLL or SLL2).
    Link,
    /// A GRE header (of a mirror or tunnel the capture holds).
    Gre,
    /// An ERSPAN header (type II or III) after GRE.
    Erspan,
    /// A VXLAN header.
    Vxlan,
    /// The Global Route Header of a RoCE v1 packet.
    Grh,
}

impl Layer {
    /// Lower-case name used in messages and JSON (`"bth"`, `"ipv4"` ...).
    pub const fn name(self) -> &'static str {
        match self {
            Layer::Ethernet => "eth",
            Layer::Vlan => "vlan",
            Layer::Ipv4 => "ipv4",
            Layer::Ipv6 => "ipv6",
            Layer::Udp => "udp",
            Layer::Bth => "bth",
            Layer::Reth => "reth",
            Layer::Aeth => "aeth",
            Layer::AtomicEth => "atomic_eth",
            Layer::AtomicAckEth => "atomic_ack_eth",
            Layer::ImmDt => "immdt",
            Layer::Ieth => "ieth",
            Layer::Deth => "deth",
            Layer::Rdeth => "rdeth",
            Layer::Xrceth => "xrceth",
            Layer::Feth => "feth",
            Layer::Cnp => "cnp",
            Layer::Mpeth => "mpeth",
            Layer::Sacketh => "sacketh",
            Layer::Payload => "payload",
            Layer::Mad => "mad",
            Layer::Cm => "cm",
            Layer::Icrc => "icrc",
            Layer::Link => "link",
            Layer::Gre => "gre",
            Layer::Erspan => "erspan",
            Layer::Vxlan => "vxlan",
            Layer::Grh => "grh",
        }
    }

    /// Whether the layer is part of a RoCE packet (BTH to ICRC): an error
    /// there is an error of a packet already known to be RoCE.
    pub const fn is_roce(self) -> bool {
        !matches!(
            self,
            Layer::Ethernet
                | Layer::Vlan
                | Layer::Ipv4
                | Layer::Ipv6
                | Layer::Udp
                | Layer::Link
                | Layer::Gre
                | Layer::Erspan
                | Layer::Vxlan
                | Layer::Grh
        )
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WireErrorKind {
    /// The input ends before the header (or the length a header declares) does.
    Truncated {
        /// Bytes the layer needs, counted from the error's offset.
        needed: usize,
        /// Bytes that were there, counted from the error's offset.
        available: usize,
    },
    /// A field holds a value that makes the rest undecodable.
    Invalid {
        /// The offending value.
        value: u64,
        /// Why it cannot be decoded.
        reason: &'static str,
    },
    /// A well-formed feature this codec does not decode (IPv6 extension headers, a third VLAN tag).
    Unsupported {
        /// What is not supported.
        what: &'static str,
    },
    /// `emit` was handed a buffer shorter than the value's `buffer_len()`.
    BufferTooSmall {
        /// Bytes the value needs.
        needed: usize,
        /// Bytes the buffer has.
        available: usize,
    },
}

/// A decode or encode error: what, where and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WireError {
    /// Layer the error concerns.
    pub layer: Layer,
    /// Field name within the layer (`"header"` when the whole header is short).
    pub field: &'static str,
    /// Byte offset of the layer or field, from the start of the parsed input.
    pub offset: usize,
    /// What went wrong.
    pub kind: WireErrorKind,
}

impl WireError {
    /// The input is shorter than `needed` bytes at `offset`.
    pub const fn truncated(
        layer: Layer,
        field: &'static str,
        offset: usize,
        needed: usize,
        available: usize,
    ) -> Self {
        WireError {
            layer,
            field,
            offset,
            kind: WireErrorKind::Truncated { needed, available },
        }
    }

    /// A field value makes the rest undecodable.
    pub const fn invalid(
        layer: Layer,
        field: &'static str,
        offset: usize,
        value: u64,
        reason: &'static str,
    ) -> Self {
        WireError {
            layer,
            field,
            offset,
            kind: WireErrorKind::Invalid { value, reason },
        }
    }

    /// A well-formed feature this codec does not decode.
    pub const fn unsupported(
        layer: Layer,
        field: &'static str,
        offset: usize,
        what: &'static str,
    ) -> Self {
        WireError {
            layer,
            field,
            offset,
            kind: WireErrorKind::Unsupported { what },
        }
    }

    /// An emit buffer is too small.
    pub const fn buffer_too_small(layer: Layer, needed: usize, available: usize) -> Self {
        WireError {
            layer,
            field: "buffer",
            offset: 0,
            kind: WireErrorKind::BufferTooSmall { needed, available },
        }
    }

    /// The same error with its offset moved `base` bytes further into the input.
    ///
    /// Header parsers report offsets relative to the header; the frame parser
    /// shifts them to frame offsets. Saturates rather than overflowing.
    #[must_use]
    pub const fn shifted(mut self, base: usize) -> Self {
        self.offset = self.offset.saturating_add(base);
        self
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            WireErrorKind::Truncated { needed, available } => write!(
                f,
                "{}.{} at byte {}: truncated: needs {} bytes, {} available",
                self.layer, self.field, self.offset, needed, available
            ),
            WireErrorKind::Invalid { value, reason } => write!(
                f,
                "{}.{} at byte {}: invalid value {} (0x{:x}): {}",
                self.layer, self.field, self.offset, value, value, reason
            ),
            WireErrorKind::Unsupported { what } => write!(
                f,
                "{}.{} at byte {}: unsupported: {}",
                self.layer, self.field, self.offset, what
            ),
            WireErrorKind::BufferTooSmall { needed, available } => write!(
                f,
                "{}: emit buffer too small: needs {} bytes, {} available",
                self.layer, needed, available
            ),
        }
    }
}

impl std::error::Error for WireError {}

/// Checks that `buf` can hold `needed` bytes before an `emit`.
pub(crate) fn check_emit(layer: Layer, buf: &[u8], needed: usize) -> Result<(), WireError> {
    if buf.len() < needed {
        Err(WireError::buffer_too_small(layer, needed, buf.len()))
    } else {
        Ok(())
    }
}

/// Takes a header of fixed length `N` from the front of `input` (nom's
/// `take`) and decodes its fields from the array with `decode`.
///
/// A short input gives an exact `Truncated` error naming the whole header;
/// offsets are relative to `input` (callers shift them). Fields are read at
/// named offsets of the array (each header's `field` module), so one nom call
/// frames the header instead of one call per field.
#[inline(always)]
pub(crate) fn parse_fixed<const N: usize, O>(
    layer: Layer,
    input: &[u8],
    decode: impl FnOnce(&[u8; N]) -> O,
) -> Result<(O, &[u8]), WireError> {
    use nom::Parser;
    let truncated = || WireError::truncated(layer, "header", 0, N, input.len());
    let (rest, head) = nom::bytes::complete::take::<_, _, nom::error::Error<&[u8]>>(N)
        .parse(input)
        .map_err(|_| truncated())?;
    let head: &[u8; N] = head.try_into().map_err(|_| truncated())?;
    Ok((decode(head), rest))
}

/// Big-endian 16 bits at `at`.
#[inline(always)]
pub(crate) const fn be16<const N: usize>(b: &[u8; N], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Big-endian 24 bits at `at`.
#[inline(always)]
pub(crate) const fn be24<const N: usize>(b: &[u8; N], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}

/// Big-endian 32 bits at `at`.
#[inline(always)]
pub(crate) const fn be32<const N: usize>(b: &[u8; N], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Big-endian 64 bits at `at`.
#[inline(always)]
pub(crate) const fn be64<const N: usize>(b: &[u8; N], at: usize) -> u64 {
    (be32(b, at) as u64) << 32 | be32(b, at + 4) as u64
}
