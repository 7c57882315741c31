//! Packet-capture file I/O: streaming pcap/pcapng reading and pcap/pcapng writing.
//!
//! # Reading
//!
//! [`CaptureReader`] reads classic pcap (either byte order, microsecond or
//! nanosecond magic, and the rare "modified" pcap) and pcapng (any number of
//! sections, each in either byte order; Interface Description Blocks with their
//! link types and `if_tsresol`/`if_tsoffset`; Enhanced, Simple and obsolete Packet
//! Blocks; every other block is skipped). The format is detected from the first
//! four bytes. Parsing is delegated to the `pcap-parser` crate, driven through its
//! streaming `refill`/`consume` protocol. [`CaptureReader::from_bytes`] reads a
//! capture held whole in memory (a file mapped by [`map_file`]) through the
//! same protocol without copying a packet; its frames, errors and offsets are
//! the streaming reader's, and [`Frame::data_offset`] locates each packet in
//! the bytes (so other threads can borrow them).
//!
//! Contracts:
//!
//! * **Constant memory.** The reader keeps one buffer ([`DEFAULT_BUFFER_CAPACITY`]
//!   unless chosen otherwise). It grows only when a single record does not fit, and
//!   never beyond [`MAX_BUFFER_CAPACITY`] (a larger record is
//!   [`CaptureError::Malformed`]). [`CaptureReader::buffer_capacity`] reports it.
//! * **Lending, allocation-free API.** [`CaptureReader::next_frame`] returns a
//!   [`Frame`] that borrows the reader's buffer; it is valid until the next call.
//!   Our code allocates nothing per packet (`pcap-parser` allocates a small vector
//!   for the options of a pcapng packet block that carries options).
//! * **Errors say what and where.** Every [`CaptureError`] except `Io` and `Empty`
//!   carries the byte offset of the record or block at fault, and its `Display`
//!   is one line that names the offset. Packets before a bad record are returned
//!   normally; the error comes when the bad record is reached. After an error, or
//!   at the end of the file, `next_frame` returns `Ok(None)`.
//! * **No panics** on any input bytes.
//!
//! | input | result |
//! | --- | --- |
//! | 0 bytes | [`CaptureError::Empty`] |
//! | 1–3 bytes, or an unknown magic | [`CaptureError::NotACapture`] (missing bytes shown as 0) |
//! | file ends inside the header or a record | [`CaptureError::Truncated`] with that record's offset |
//! | inconsistent lengths, unknown interface, bad `if_tsresol`, ... | [`CaptureError::Malformed`] |
//!
//! Timestamps are converted to nanoseconds since the Unix epoch (truncating
//! finer resolutions; pcapng `if_tsoffset` is added; a result outside `u64` is
//! clamped). Simple Packet Blocks carry no timestamp and get 0. The pcap header's
//! link type is reported without its FCS bits (the low 16 bits).
//!
//! # Writing
//!
//! [`PcapNgWriter`] writes one section (SHB) with one interface (IDB, snaplen 0,
//! `if_tsresol` = 9, i.e. nanoseconds) and then Enhanced Packet Blocks, each with
//! any number of `opt_comment` options, shown by Wireshark/tshark as packet
//! comments (`frame.comment`). [`PcapWriter`] writes classic pcap with microsecond
//! or nanosecond timestamps. Both write little-endian by default and big-endian on
//! request, write one `write_all` per packet (wrap unbuffered sinks in a
//! `BufWriter` anyway), and reject with `InvalidInput` what the format cannot
//! hold (a packet longer than `u32`, `orig_len < data.len()`, a comment longer
//! than 65,535 bytes, ...), writing nothing for that packet.

mod block;
mod bytes;
mod error;
#[cfg(feature = "libpcap")]
pub mod live;
mod read;
mod write;

#[cfg(test)]
mod tests;

pub use bytes::{SharedBytes, map_file};
pub use error::CaptureError;
pub use read::{CaptureReader, DEFAULT_BUFFER_CAPACITY, MAX_BUFFER_CAPACITY};
pub use write::{LINKTYPE_ETHERNET, PcapConfig, PcapNgWriter, PcapWriter, TsPrecision};

use std::fmt;

/// The container format of a capture file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CaptureFormat {
    /// Classic libpcap format (`.pcap`).
    Pcap,
    /// pcapng (`.pcapng`).
    PcapNg,
}

impl fmt::Display for CaptureFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CaptureFormat::Pcap => "pcap",
            CaptureFormat::PcapNg => "pcapng",
        })
    }
}

/// Byte order of a pcap file or of a pcapng section.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// Least significant byte first (what nearly every capture tool writes).
    #[default]
    Little,
    /// Most significant byte first.
    Big,
}

/// pcapng option code of `opt_comment`, a UTF-8 comment (a packet comment in Wireshark).
pub const OPT_COMMENT: u16 = 1;

/// One captured packet, borrowed from the reader's buffer.
///
/// It stays valid until the next call to [`CaptureReader::next_frame`].
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    /// 1-based packet number, as Wireshark counts (`frame.number`).
    pub number: u64,
    /// Byte offset in the file of the pcap record or pcapng block holding the packet.
    pub offset: u64,
    /// Byte offset in the file of the packet's first byte (`data[0]`); 0 for
    /// a live capture.
    pub data_offset: u64,
    /// Capture time in nanoseconds since the Unix epoch.
    pub timestamp_ns: u64,
    /// Link-layer header type (a `LINKTYPE_*` number; 1 is Ethernet).
    pub linktype: u32,
    /// pcapng interface index within its section (always 0 for pcap).
    pub interface: u32,
    /// Length of the packet on the wire, which may exceed `data.len()`.
    pub orig_len: u32,
    /// The captured bytes.
    pub data: &'a [u8],
    /// The packet block's pcapng options (always empty for pcap and Simple Packet Blocks).
    pub options: PacketOptions<'a>,
}

impl<'a> Frame<'a> {
    /// The packet's `opt_comment` values, in file order (see [`PacketOptions::comments`]).
    pub fn comments(&self) -> impl Iterator<Item = &'a str> + 'a {
        self.options.comments()
    }
}

/// The raw options of a pcapng packet block, decoded lazily without allocating.
#[derive(Clone, Copy, Debug, Default)]
pub struct PacketOptions<'a> {
    raw: &'a [u8],
    byte_order: ByteOrder,
}

/// One pcapng option: its code and its value (without padding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketOption<'a> {
    /// Option code (1 is `opt_comment`).
    pub code: u16,
    /// Option value, exactly `option length` bytes.
    pub value: &'a [u8],
}

impl<'a> PacketOptions<'a> {
    pub(crate) fn new(raw: &'a [u8], byte_order: ByteOrder) -> Self {
        PacketOptions { raw, byte_order }
    }

    /// True when the block has no option before `opt_endofopt`.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// Iterates over the options up to `opt_endofopt`. An option whose declared
    /// length overruns the block ends the iteration.
    pub fn iter(&self) -> OptionIter<'a> {
        OptionIter {
            rest: self.raw,
            byte_order: self.byte_order,
        }
    }

    /// The `opt_comment` values that are valid UTF-8, in file order.
    pub fn comments(&self) -> impl Iterator<Item = &'a str> + 'a {
        self.iter()
            .filter(|o| o.code == OPT_COMMENT)
            .filter_map(|o| std::str::from_utf8(o.value).ok())
    }
}

impl<'a> IntoIterator for PacketOptions<'a> {
    type Item = PacketOption<'a>;
    type IntoIter = OptionIter<'a>;

    fn into_iter(self) -> OptionIter<'a> {
        self.iter()
    }
}

/// Iterator over [`PacketOptions`].
#[derive(Clone, Debug)]
pub struct OptionIter<'a> {
    rest: &'a [u8],
    byte_order: ByteOrder,
}

impl<'a> Iterator for OptionIter<'a> {
    type Item = PacketOption<'a>;

    fn next(&mut self) -> Option<PacketOption<'a>> {
        let (head, body) = self.rest.split_first_chunk::<4>()?;
        let u16_at = |i: usize| {
            let b = [head[i], head[i + 1]];
            match self.byte_order {
                ByteOrder::Little => u16::from_le_bytes(b),
                ByteOrder::Big => u16::from_be_bytes(b),
            }
        };
        let (code, len) = (u16_at(0), usize::from(u16_at(2)));
        if code == 0 || len > body.len() {
            self.rest = &[];
            return None;
        }
        let value = &body[..len];
        self.rest = body.get(len.next_multiple_of(4)..).unwrap_or(&[]);
        Some(PacketOption { code, value })
    }
}
