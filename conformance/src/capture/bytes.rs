//! A capture held whole in memory: a mapped file ([`map_file`]) or any
//! shared bytes, read by [`CaptureReader::from_bytes`](super::CaptureReader::from_bytes)
//! without copying a packet.
//!
//! [`BytesBlocks`] drives `pcap-parser`'s block parsers over the bytes
//! through the same `PcapReaderIterator` protocol as its streaming readers,
//! so the capture reader's checks, errors and offsets are the same on both
//! paths (the tests compare them on every sample and malformed capture).

use std::fs::File;
use std::io;
use std::sync::Arc;

use pcap_parser::nom::{self, Offset};
use pcap_parser::pcapng::{parse_block_be, parse_block_le, parse_sectionheaderblock};
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{
    Block, LegacyPcapBlock, PcapBlockOwned, PcapError, PcapHeader, parse_pcap_frame,
    parse_pcap_frame_be, parse_pcap_frame_modified, parse_pcap_header,
};

use super::CaptureFormat;
use super::read::MAX_BUFFER_CAPACITY;

/// Bytes of a whole capture, shared between the reader and the threads that
/// judge its frames.
pub type SharedBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Maps `file` into memory read-only, when it is a regular, non-empty file
/// (`Ok(None)` otherwise: a pipe, a device, an empty file).
///
/// Reading a mapped capture copies nothing (a `read` copies every byte from
/// the page cache, a third of `metaroce check`'s time on large frames).
/// The price: the file must not be truncated or rewritten while it is
/// mapped: a truncation makes the process fail with SIGBUS, a rewrite gives
/// mixed contents. `metaroce check --no-mmap` reads instead.
pub fn map_file(file: &File) -> io::Result<Option<SharedBytes>> {
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() == 0 {
        return Ok(None);
    }
    let map = map_read_only(file)?;
    // Read ahead aggressively; advice is only a hint, its failure harmless.
    #[cfg(unix)]
    let _ = map.advise(memmap2::Advice::Sequential);
    Ok(Some(Arc::new(map)))
}

/// The one unsafe call of the crate.
#[allow(unsafe_code)]
fn map_read_only(file: &File) -> io::Result<memmap2::Mmap> {
    // SAFETY: the mapping is read-only and private to this process; the
    // memory stays valid while the `Mmap` lives (it is owned by the
    // `SharedBytes` every borrower holds or outlives). What Rust cannot
    // guarantee is that no other process truncates or rewrites the file
    // meanwhile (see `map_file`): `metaroce check` documents it and offers
    // `--no-mmap`.
    unsafe { memmap2::Mmap::map(file) }
}

/// How the records of a classic pcap file are parsed.
type PcapFrameParser = fn(&[u8]) -> nom::IResult<&[u8], LegacyPcapBlock<'_>, PcapError<&[u8]>>;

/// `pcap-parser`'s block parsers driven over bytes in memory, as its
/// streaming readers drive them over a buffer (the input is always
/// exhausted: an incomplete record is the end of the file).
pub(super) struct BytesBlocks {
    bytes: SharedBytes,
    pos: usize,
    /// Classic pcap: its header (returned first) and record parser.
    pcap: Option<(PcapHeader, PcapFrameParser)>,
    big_endian: bool,
}

impl BytesBlocks {
    /// Blocks of `bytes`, whose file header (pcap) or first section header
    /// (pcapng) must parse; `None` when it does not.
    pub(super) fn new(bytes: SharedBytes, format: CaptureFormat) -> Option<Self> {
        let data: &[u8] = (*bytes).as_ref();
        let pcap = match format {
            CaptureFormat::Pcap => {
                let (_, header) = parse_pcap_header(data).ok()?;
                let parse: PcapFrameParser = if header.is_modified_format() {
                    parse_pcap_frame_modified
                } else if header.is_bigendian() {
                    parse_pcap_frame_be
                } else {
                    parse_pcap_frame
                };
                Some((header, parse))
            }
            CaptureFormat::PcapNg => {
                parse_sectionheaderblock(data).ok()?;
                None
            }
        };
        Some(BytesBlocks {
            bytes,
            pos: 0,
            pcap,
            big_endian: false,
        })
    }

    pub(super) fn bytes(&self) -> &SharedBytes {
        &self.bytes
    }

    fn rest(&self) -> &[u8] {
        let all: &[u8] = (*self.bytes).as_ref();
        all.get(self.pos..).unwrap_or_default()
    }
}

impl PcapReaderIterator for BytesBlocks {
    fn next(&mut self) -> Result<(usize, PcapBlockOwned<'_>), PcapError<&[u8]>> {
        if self.pos == 0
            && let Some((header, _)) = &self.pcap
        {
            return Ok((header.size(), PcapBlockOwned::from(header.clone())));
        }
        let all: &[u8] = (*self.bytes).as_ref();
        let data = all.get(self.pos..).unwrap_or_default();
        if data.is_empty() {
            return Err(PcapError::Eof);
        }
        let parsed = match &self.pcap {
            Some((_, parse)) => parse(data).map(|(rem, b)| (rem, PcapBlockOwned::from(b))),
            None if self.big_endian => parse_block_be(data).map(|(rem, b)| (rem, b.into())),
            None => parse_block_le(data).map(|(rem, b)| (rem, b.into())),
        };
        match parsed {
            // The streaming reader never holds a record this long.
            Ok((rem, _)) if data.offset(rem) >= MAX_BUFFER_CAPACITY => {
                Err(PcapError::BufferTooSmall)
            }
            Ok((rem, b)) => {
                if let PcapBlockOwned::NG(Block::SectionHeader(shb)) = &b {
                    self.big_endian = shb.big_endian();
                }
                Ok((data.offset(rem), b))
            }
            Err(nom::Err::Error(e) | nom::Err::Failure(e)) => Err(e),
            Err(nom::Err::Incomplete(_)) => Err(PcapError::UnexpectedEof),
        }
    }

    fn consume(&mut self, offset: usize) {
        self.pos = self.pos.saturating_add(offset);
    }

    fn consume_noshift(&mut self, offset: usize) {
        self.consume(offset);
    }

    fn consumed(&self) -> usize {
        self.pos
    }

    fn refill(&mut self) -> Result<(), PcapError<&[u8]>> {
        Ok(())
    }

    fn position(&self) -> usize {
        0
    }

    fn grow(&mut self, _new_size: usize) -> bool {
        true
    }

    fn data(&self) -> &[u8] {
        self.rest()
    }

    fn reader_exhausted(&self) -> bool {
        true
    }
}
