//! Streaming pcap/pcapng reader driving `pcap-parser` (contracts: see [`super`]).

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use circular::Buffer;
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{LegacyPcapReader, PcapError, PcapNGReader};

use super::block::{self, State, Step};
use super::bytes::{BytesBlocks, SharedBytes};
use super::{ByteOrder, CaptureError, CaptureFormat, Frame, PacketOptions};

/// Initial size of the reader's buffer used by [`CaptureReader::new`].
pub const DEFAULT_BUFFER_CAPACITY: usize = 64 * 1024;
/// The reader's buffer never grows beyond this; a longer record is malformed.
pub const MAX_BUFFER_CAPACITY: usize = 64 * 1024 * 1024;
/// Smallest buffer [`CaptureReader::with_capacity`] accepts (smaller requests are raised).
const MIN_BUFFER_CAPACITY: usize = 4096;

/// Where the adapter below parks the real `io::Error`, which `pcap-parser`
/// would otherwise reduce to a bare `ReadError`.
type ErrorSlot = Arc<Mutex<Option<io::Error>>>;

/// The caller's reader as handed to `pcap-parser`: retries `Interrupted` and
/// keeps the last error.
struct Source<R> {
    inner: R,
    error: ErrorSlot,
}

impl<R: Read> Read for Source<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.inner.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let kind = e.kind();
                    *self.error.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
                    return Err(kind.into());
                }
                ok => return ok,
            }
        }
    }
}

fn take_io_error(slot: &ErrorSlot) -> CaptureError {
    let parked = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
    CaptureError::Io(parked.unwrap_or_else(|| io::Error::other("read failed")))
}

enum Inner<R: Read> {
    Pcap(LegacyPcapReader<Source<R>>),
    PcapNg(PcapNGReader<Source<R>>),
    /// The whole capture in memory (a mapped file): nothing is copied.
    Bytes(BytesBlocks),
}

impl<R: Read> Inner<R> {
    fn get(&self) -> &dyn PcapReaderIterator {
        match self {
            Inner::Pcap(r) => r,
            Inner::PcapNg(r) => r,
            Inner::Bytes(r) => r,
        }
    }

    fn get_mut(&mut self) -> &mut dyn PcapReaderIterator {
        match self {
            Inner::Pcap(r) => r,
            Inner::PcapNg(r) => r,
            Inner::Bytes(r) => r,
        }
    }
}

/// Streaming reader of pcap and pcapng files over any [`Read`].
///
/// ```no_run
/// # use metaroce_conformance::capture::CaptureReader;
/// let mut reader = CaptureReader::open("trace.pcapng")?;
/// while let Some(frame) = reader.next_frame()? {
///     println!("{} {} {}", frame.number, frame.timestamp_ns, frame.data.len());
/// }
/// # Ok::<(), metaroce_conformance::capture::CaptureError>(())
/// ```
pub struct CaptureReader<R: Read> {
    inner: Inner<R>,
    io_error: ErrorSlot,
    state: State,
    capacity: usize,
    /// File offset of the first byte in the parser's buffer.
    offset: u64,
    /// Length of the block lent out by the last `next_frame`, consumed on the next call.
    pending: usize,
    packets: u64,
    done: bool,
}

impl CaptureReader<File> {
    /// Opens a capture file (see [`CaptureReader::new`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CaptureError> {
        Self::new(File::open(path)?)
    }
}

impl CaptureReader<io::Empty> {
    /// A reader over a whole capture held in memory, for example a mapped
    /// file ([`super::map_file`]): frames borrow `bytes` and nothing is
    /// copied. Errors, offsets and frames are those of the streaming reader
    /// over the same bytes; [`Frame::data_offset`] locates each packet in
    /// `bytes` (see [`CaptureReader::shared_bytes`]).
    pub fn from_bytes(bytes: SharedBytes) -> Result<Self, CaptureError> {
        let data: &[u8] = (*bytes).as_ref();
        if data.is_empty() {
            return Err(CaptureError::Empty);
        }
        let mut magic = [0u8; 4];
        let n = data.len().min(4);
        magic[..n].copy_from_slice(&data[..n]);
        let Some((format, mut order)) = block::detect(magic).filter(|_| n == 4) else {
            return Err(CaptureError::NotACapture { magic });
        };
        let header_len = match format {
            CaptureFormat::Pcap => block::PCAP_HEADER_LEN,
            CaptureFormat::PcapNg => {
                let Some((_, len, section_order)) = block::ng_header(data, order, 0)? else {
                    return Err(CaptureError::Truncated {
                        offset: 0,
                        needed: None,
                    });
                };
                order = section_order;
                len as usize
            }
        };
        if header_len >= MAX_BUFFER_CAPACITY {
            grown_capacity(MAX_BUFFER_CAPACITY, header_len, 0)?;
        }
        if data.len() < header_len {
            return Err(CaptureError::Truncated {
                offset: 0,
                needed: Some((header_len - data.len()) as u64),
            });
        }
        let blocks = BytesBlocks::new(bytes, format)
            .ok_or_else(|| CaptureError::malformed(0, format!("invalid {format} file header")))?;
        Ok(CaptureReader {
            inner: Inner::Bytes(blocks),
            io_error: ErrorSlot::default(),
            state: State::new(format, order, magic),
            capacity: 0,
            offset: 0,
            pending: 0,
            packets: 0,
            done: false,
        })
    }
}

impl<R: Read> CaptureReader<R> {
    /// The bytes a reader made by [`CaptureReader::from_bytes`] reads
    /// (`None` for a streaming reader).
    pub fn shared_bytes(&self) -> Option<&SharedBytes> {
        match &self.inner {
            Inner::Bytes(b) => Some(b.bytes()),
            _ => None,
        }
    }

    /// Reads the magic and file header (pcap) or first section header (pcapng),
    /// with a buffer of [`DEFAULT_BUFFER_CAPACITY`] bytes.
    pub fn new(reader: R) -> Result<Self, CaptureError> {
        Self::with_capacity(reader, DEFAULT_BUFFER_CAPACITY)
    }

    /// Like [`CaptureReader::new`] with a buffer of `capacity` bytes (raised to
    /// 4 KiB, capped at [`MAX_BUFFER_CAPACITY`]); the buffer grows only for a
    /// record that does not fit.
    pub fn with_capacity(reader: R, capacity: usize) -> Result<Self, CaptureError> {
        let mut capacity = capacity.clamp(MIN_BUFFER_CAPACITY, MAX_BUFFER_CAPACITY);
        let io_error = ErrorSlot::default();
        let mut src = Source {
            inner: reader,
            error: io_error.clone(),
        };
        let mut buf = Buffer::with_capacity(capacity);
        let fill = |buf: &mut Buffer, src: &mut Source<R>, want: usize| {
            fill_to(buf, src, want).map_err(|_| take_io_error(&io_error))
        };

        fill(&mut buf, &mut src, 4)?;
        let head = buf.data();
        if head.is_empty() {
            return Err(CaptureError::Empty);
        }
        let mut magic = [0u8; 4];
        let n = head.len().min(4);
        magic[..n].copy_from_slice(&head[..n]);
        let Some((format, mut order)) = block::detect(magic).filter(|_| n == 4) else {
            return Err(CaptureError::NotACapture { magic });
        };

        let header_len = match format {
            CaptureFormat::Pcap => block::PCAP_HEADER_LEN,
            CaptureFormat::PcapNg => {
                fill(&mut buf, &mut src, 12)?;
                let Some((_, len, section_order)) = block::ng_header(buf.data(), order, 0)? else {
                    return Err(CaptureError::Truncated {
                        offset: 0,
                        needed: None,
                    });
                };
                order = section_order;
                let len = len as usize;
                if len >= capacity {
                    // Grow only once the data fills the buffer (a corrupt
                    // length in a short file then costs no memory).
                    let grown = grown_capacity(capacity, len, 0)?;
                    fill(&mut buf, &mut src, len)?;
                    if buf.available_data() == capacity {
                        capacity = grown;
                        buf.grow(capacity);
                    }
                }
                len
            }
        };
        fill(&mut buf, &mut src, header_len)?;
        let avail = buf.available_data();
        if avail < header_len {
            return Err(CaptureError::Truncated {
                offset: 0,
                needed: Some((header_len - avail) as u64),
            });
        }

        let header_error = |e: PcapError<&[u8]>| match e {
            PcapError::ReadError => take_io_error(&io_error),
            _ => CaptureError::malformed(0, format!("invalid {format} file header")),
        };
        let inner = match format {
            CaptureFormat::Pcap => {
                Inner::Pcap(LegacyPcapReader::from_buffer(buf, src).map_err(header_error)?)
            }
            CaptureFormat::PcapNg => {
                Inner::PcapNg(PcapNGReader::from_buffer(buf, src).map_err(header_error)?)
            }
        };
        Ok(CaptureReader {
            inner,
            io_error,
            state: State::new(format, order, magic),
            capacity,
            offset: 0,
            pending: 0,
            packets: 0,
            done: false,
        })
    }

    /// The detected container format.
    pub fn format(&self) -> CaptureFormat {
        self.state.format()
    }

    /// Byte order of the pcap file, or of the current pcapng section.
    pub fn byte_order(&self) -> ByteOrder {
        self.state.byte_order()
    }

    /// Current size in bytes of the reader's buffer (its whole memory for
    /// data); 0 for a reader over bytes in memory, which has none.
    pub fn buffer_capacity(&self) -> usize {
        self.capacity
    }

    /// Number of packets returned so far.
    pub fn packets_read(&self) -> u64 {
        self.packets
    }

    /// Byte offset just past the last record returned or skipped.
    pub fn position(&self) -> u64 {
        self.offset + self.pending as u64
    }

    /// Returns the next packet, `Ok(None)` at the end of the input, or the error
    /// that stops reading; after an error or the end, always `Ok(None)`.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        if self.pending > 0 {
            self.inner.get_mut().consume(self.pending);
            self.offset += self.pending as u64;
            self.pending = 0;
        }
        if self.done {
            return Ok(None);
        }
        let (len, packet) = match self.advance() {
            Ok(Some(found)) => found,
            other => {
                self.done = true;
                return other.map(|_| None);
            }
        };
        let block = self.inner.get().data().get(..len).unwrap_or_default();
        let Some(data) = block.get(packet.data.clone()) else {
            self.done = true;
            return Err(CaptureError::malformed(
                self.offset,
                "packet data lies outside its block",
            ));
        };
        self.pending = len;
        self.packets += 1;
        Ok(Some(Frame {
            number: self.packets,
            offset: self.offset,
            data_offset: self.offset + packet.data.start as u64,
            timestamp_ns: packet.timestamp_ns,
            linktype: packet.linktype,
            interface: packet.interface,
            orig_len: packet.orig_len,
            data,
            options: PacketOptions::new(
                block.get(packet.options).unwrap_or_default(),
                self.state.byte_order(),
            ),
        }))
    }

    /// Parses blocks until a packet: returns its block length and description.
    fn advance(&mut self) -> Result<Option<(usize, block::Packet)>, CaptureError> {
        enum Outcome {
            Block(usize, Step),
            NeedMore,
            Invalid,
        }
        loop {
            let outcome = match self.inner.get_mut().next() {
                Ok((len, b)) => Outcome::Block(len, self.state.on_block(b, self.offset)?),
                Err(PcapError::Eof) => return Ok(None),
                Err(
                    PcapError::Incomplete(_) | PcapError::UnexpectedEof | PcapError::BufferTooSmall,
                ) => Outcome::NeedMore,
                Err(PcapError::ReadError) => return Err(take_io_error(&self.io_error)),
                Err(_) => Outcome::Invalid,
            };
            match outcome {
                Outcome::Block(len, step) => {
                    let data = self.inner.get().data().get(..len).unwrap_or_default();
                    self.state.check_block(data, self.offset)?;
                    match step {
                        Step::Skip => {
                            self.inner.get_mut().consume(len);
                            self.offset += len as u64;
                        }
                        Step::Packet(p) => return Ok(Some((len, p))),
                    }
                }
                Outcome::NeedMore => {
                    if !self.fill_more()? {
                        return Ok(None);
                    }
                }
                Outcome::Invalid => {
                    return Err(self.state.diagnose(self.inner.get().data(), self.offset));
                }
            }
        }
    }

    /// Handles a record that is not complete in the buffer: reports truncation
    /// at the end of input, else grows the buffer if it is full of this record
    /// (so a corrupt length costs no memory before the data is really there) and
    /// refills it. `Ok(false)` at a clean end of input.
    fn fill_more(&mut self) -> Result<bool, CaptureError> {
        let it = self.inner.get();
        let data = it.data();
        let avail = data.len();
        let exhausted = it.reader_exhausted();
        if avail == 0 && exhausted {
            return Ok(false);
        }
        let declared = self.state.declared_len(data, self.offset)?;
        let mut grow_to = None;
        if let Some(total) = declared {
            if total >= MAX_BUFFER_CAPACITY as u64 {
                let total = usize::try_from(total).unwrap_or(usize::MAX);
                grown_capacity(self.capacity, total, self.offset)?;
            }
            if total <= avail as u64 {
                // The whole record is there, yet the parser wants more: its
                // inner lengths contradict its total length.
                return Err(self.state.diagnose(data, self.offset));
            }
            if total >= self.capacity as u64 {
                let total = usize::try_from(total).unwrap_or(usize::MAX);
                grow_to = Some(grown_capacity(self.capacity, total, self.offset)?);
            }
        }
        if exhausted {
            return Err(CaptureError::Truncated {
                offset: self.offset,
                needed: declared.map(|total| total - avail as u64),
            });
        }
        if let Some(capacity) = grow_to.filter(|_| avail >= self.capacity) {
            self.inner.get_mut().grow(capacity);
            self.capacity = capacity;
        }
        self.inner
            .get_mut()
            .refill()
            .map_err(|_| take_io_error(&self.io_error))?;
        Ok(true)
    }
}

/// The capacity to grow to so that a record of `total` bytes fits (the parser
/// wants strictly more room than the record).
fn grown_capacity(current: usize, total: usize, offset: u64) -> Result<usize, CaptureError> {
    let needed = total.saturating_add(1);
    if needed > MAX_BUFFER_CAPACITY {
        return Err(CaptureError::malformed(
            offset,
            format!(
                "record of {total} bytes exceeds the reader's limit of {MAX_BUFFER_CAPACITY} bytes"
            ),
        ));
    }
    Ok(current
        .saturating_mul(2)
        .max(needed.next_power_of_two())
        .min(MAX_BUFFER_CAPACITY))
}

/// Reads until `buf` holds `want` bytes, it is full, or the input ends.
fn fill_to<R: Read>(buf: &mut Buffer, src: &mut Source<R>, want: usize) -> io::Result<()> {
    while buf.available_data() < want {
        let space = buf.space();
        if space.is_empty() {
            break;
        }
        match src.read(space)? {
            0 => break,
            n => {
                buf.fill(n);
            }
        }
    }
    Ok(())
}
