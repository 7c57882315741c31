//! pcapng and classic pcap writers (contracts: see [`super`]).
//!
//! Written by hand: the formats are tiny, and `pcap-parser`'s serialisation sits
//! behind an optional feature (pulling in `cookie-factory`) and builds options
//! from owned structures whose lengths and padding the caller must keep consistent.

use std::io::{self, Write};

use super::{ByteOrder, OPT_COMMENT};

/// `LINKTYPE_ETHERNET`, the link type the writers use by default.
pub const LINKTYPE_ETHERNET: u16 = 1;

const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
const EPB: u32 = 6;
const BOM: u32 = 0x1A2B_3C4D;
const OPT_ENDOFOPT: u16 = 0;
const IF_TSRESOL: u16 = 9;
/// `if_tsresol` value 9: timestamps count 10^-9 s.
const TSRESOL_NANOS: u8 = 9;

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Appends fields in a chosen byte order.
struct Enc<'a> {
    buf: &'a mut Vec<u8>,
    order: ByteOrder,
}

impl Enc<'_> {
    fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&match self.order {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        });
    }

    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&match self.order {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        });
    }

    /// `bytes` zero-padded to a multiple of 4.
    fn padded(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        let pad = bytes.len().next_multiple_of(4) - bytes.len();
        self.buf.extend_from_slice(&[0; 3][..pad]);
    }

    /// A pcapng option; the caller has checked `value.len() <= u16::MAX`.
    fn option(&mut self, code: u16, value: &[u8]) {
        self.u16(code);
        self.u16(value.len() as u16);
        self.padded(value);
    }
}

fn data_len(data: &[u8], orig_len: u32) -> io::Result<u32> {
    let len = u32::try_from(data.len())
        .map_err(|_| invalid(format!("packet of {} bytes is too long", data.len())))?;
    if orig_len < len {
        return Err(invalid(format!(
            "orig_len {orig_len} is less than the {len} captured bytes"
        )));
    }
    Ok(len)
}

/// Writes a pcapng file: one section, one interface, Enhanced Packet Blocks.
///
/// The Section Header Block and Interface Description Block (snaplen 0,
/// `if_tsresol` = 9) are written by the constructor; packets follow with
/// nanosecond timestamps and optional `opt_comment` options.
#[derive(Debug)]
pub struct PcapNgWriter<W: Write> {
    out: W,
    order: ByteOrder,
    /// Reused for every block, so that each goes out in one `write_all`.
    scratch: Vec<u8>,
}

impl<W: Write> PcapNgWriter<W> {
    /// Starts a little-endian file whose interface has link type Ethernet.
    pub fn new(out: W) -> io::Result<Self> {
        Self::new_with_linktype(out, LINKTYPE_ETHERNET)
    }

    /// Starts a little-endian file whose interface has link type `linktype`.
    pub fn new_with_linktype(out: W, linktype: u16) -> io::Result<Self> {
        Self::with_byte_order(out, linktype, ByteOrder::Little)
    }

    /// Starts a file in byte order `order` whose interface has link type `linktype`.
    pub fn with_byte_order(out: W, linktype: u16, order: ByteOrder) -> io::Result<Self> {
        let mut w = PcapNgWriter {
            out,
            order,
            scratch: Vec::with_capacity(256),
        };
        w.block(SHB, |e| {
            e.u32(BOM);
            e.u16(1); // major version
            e.u16(0); // minor version
            e.u32(u32::MAX); // section length -1 (unknown), as two halves
            e.u32(u32::MAX);
        })?;
        w.block(IDB, |e| {
            e.u16(linktype);
            e.u16(0); // reserved
            e.u32(0); // snaplen: no limit
            e.option(IF_TSRESOL, &[TSRESOL_NANOS]);
            e.option(OPT_ENDOFOPT, &[]);
        })?;
        Ok(w)
    }

    /// Writes one packet with at most one comment.
    pub fn write_packet(
        &mut self,
        timestamp_ns: u64,
        data: &[u8],
        orig_len: u32,
        comment: Option<&str>,
    ) -> io::Result<()> {
        self.write_packet_with_comments(timestamp_ns, data, orig_len, comment.as_slice())
    }

    /// Writes one packet with any number of comments (each one `opt_comment`).
    ///
    /// Fails with `InvalidInput`, writing nothing, if `orig_len < data.len()`,
    /// a comment exceeds 65,535 bytes, or the block exceeds 4 GiB.
    pub fn write_packet_with_comments(
        &mut self,
        timestamp_ns: u64,
        data: &[u8],
        orig_len: u32,
        comments: &[&str],
    ) -> io::Result<()> {
        let caplen = data_len(data, orig_len)?;
        if let Some(c) = comments.iter().find(|c| c.len() > usize::from(u16::MAX)) {
            return Err(invalid(format!("comment of {} bytes is too long", c.len())));
        }
        self.block(EPB, |e| {
            e.u32(0); // interface id
            e.u32((timestamp_ns >> 32) as u32);
            e.u32(timestamp_ns as u32);
            e.u32(caplen);
            e.u32(orig_len);
            e.padded(data);
            for c in comments {
                e.option(OPT_COMMENT, c.as_bytes());
            }
            if !comments.is_empty() {
                e.option(OPT_ENDOFOPT, &[]);
            }
        })
    }

    /// Builds a block (header, `body`, both total lengths) and writes it at once.
    fn block(&mut self, block_type: u32, body: impl FnOnce(&mut Enc<'_>)) -> io::Result<()> {
        self.scratch.clear();
        let mut enc = Enc {
            buf: &mut self.scratch,
            order: self.order,
        };
        enc.u32(block_type);
        enc.u32(0); // total length, patched below
        body(&mut enc);
        let len = u32::try_from(self.scratch.len() + 4)
            .map_err(|_| invalid(format!("block of {} bytes is too long", self.scratch.len())))?;
        let len_bytes = match self.order {
            ByteOrder::Little => len.to_le_bytes(),
            ByteOrder::Big => len.to_be_bytes(),
        };
        self.scratch[4..8].copy_from_slice(&len_bytes);
        self.scratch.extend_from_slice(&len_bytes);
        self.out.write_all(&self.scratch)
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// The underlying writer, mutably (writing to it corrupts the file unless it
    /// writes whole blocks).
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// Returns the underlying writer, not flushed.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Timestamp resolution of a classic pcap file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TsPrecision {
    /// Magic `a1b2c3d4`: the fraction counts microseconds.
    Microsecond,
    /// Magic `a1b23c4d`: the fraction counts nanoseconds.
    #[default]
    Nanosecond,
}

/// How a [`PcapWriter`] writes its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PcapConfig {
    /// Link type of every packet.
    pub linktype: u16,
    /// Timestamp resolution (nanosecond timestamps are truncated to microseconds).
    pub precision: TsPrecision,
    /// Byte order of the header and record headers.
    pub byte_order: ByteOrder,
    /// Snapshot length in the header; longer packets are rejected (0: no check).
    pub snaplen: u32,
}

impl Default for PcapConfig {
    /// Ethernet, nanoseconds, little-endian, snaplen 262,144.
    fn default() -> Self {
        PcapConfig {
            linktype: LINKTYPE_ETHERNET,
            precision: TsPrecision::Nanosecond,
            byte_order: ByteOrder::Little,
            snaplen: 262_144,
        }
    }
}

/// Writes a classic pcap file.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    config: PcapConfig,
    scratch: Vec<u8>,
}

impl<W: Write> PcapWriter<W> {
    /// Starts a file with [`PcapConfig::default`].
    pub fn new(out: W) -> io::Result<Self> {
        Self::with_config(out, PcapConfig::default())
    }

    /// Starts a file as `config` says, writing its 24-byte header.
    pub fn with_config(out: W, config: PcapConfig) -> io::Result<Self> {
        let mut w = PcapWriter {
            out,
            config,
            scratch: Vec::with_capacity(256),
        };
        let mut e = w.enc();
        e.u32(match config.precision {
            TsPrecision::Microsecond => 0xa1b2_c3d4,
            TsPrecision::Nanosecond => 0xa1b2_3c4d,
        });
        e.u16(2); // version 2.4
        e.u16(4);
        e.u32(0); // thiszone
        e.u32(0); // sigfigs
        e.u32(config.snaplen);
        e.u32(u32::from(config.linktype));
        w.out.write_all(&w.scratch)?;
        Ok(w)
    }

    fn enc(&mut self) -> Enc<'_> {
        self.scratch.clear();
        Enc {
            buf: &mut self.scratch,
            order: self.config.byte_order,
        }
    }

    /// Writes one packet record.
    ///
    /// Fails with `InvalidInput`, writing nothing, if `orig_len < data.len()`,
    /// the packet exceeds a non-zero snaplen, or the timestamp lies past 2106.
    pub fn write_packet(
        &mut self,
        timestamp_ns: u64,
        data: &[u8],
        orig_len: u32,
    ) -> io::Result<()> {
        let caplen = data_len(data, orig_len)?;
        let snaplen = self.config.snaplen;
        if snaplen != 0 && caplen > snaplen {
            return Err(invalid(format!(
                "packet of {caplen} bytes exceeds the snaplen {snaplen}"
            )));
        }
        let secs = u32::try_from(timestamp_ns / 1_000_000_000)
            .map_err(|_| invalid(format!("timestamp {timestamp_ns} ns does not fit in pcap")))?;
        let nanos = (timestamp_ns % 1_000_000_000) as u32;
        let frac = match self.config.precision {
            TsPrecision::Microsecond => nanos / 1000,
            TsPrecision::Nanosecond => nanos,
        };
        let mut e = self.enc();
        e.u32(secs);
        e.u32(frac);
        e.u32(caplen);
        e.u32(orig_len);
        e.buf.extend_from_slice(data);
        self.out.write_all(&self.scratch)
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// The underlying writer, mutably.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// Returns the underlying writer, not flushed.
    pub fn into_inner(self) -> W {
        self.out
    }
}
