//! Tests of the capture module, and the helpers they share.

mod malformed;
mod pcap;
mod pcapng;
mod streaming;
mod tshark;

use std::io::Cursor;

use super::{ByteOrder, CaptureError, CaptureReader};

/// An owned copy of a [`super::Frame`], plus the offset just past its record.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owned {
    number: u64,
    offset: u64,
    end: u64,
    timestamp_ns: u64,
    linktype: u32,
    interface: u32,
    orig_len: u32,
    data: Vec<u8>,
    comments: Vec<String>,
}

/// Reads every frame of `reader`, stopping at the first error.
fn drain<R: std::io::Read>(reader: &mut CaptureReader<R>) -> (Vec<Owned>, Option<CaptureError>) {
    drain_with(reader, |_| {})
}

/// [`drain`], showing each frame to `each`.
fn drain_with<R: std::io::Read>(
    reader: &mut CaptureReader<R>,
    mut each: impl FnMut(&super::Frame<'_>),
) -> (Vec<Owned>, Option<CaptureError>) {
    let mut frames = Vec::new();
    loop {
        match reader.next_frame() {
            Ok(Some(f)) => {
                each(&f);
                let mut owned = Owned {
                    number: f.number,
                    offset: f.offset,
                    end: 0,
                    timestamp_ns: f.timestamp_ns,
                    linktype: f.linktype,
                    interface: f.interface,
                    orig_len: f.orig_len,
                    data: f.data.to_vec(),
                    comments: f.comments().map(str::to_owned).collect(),
                };
                owned.end = reader.position();
                frames.push(owned);
            }
            Ok(None) => return (frames, None),
            Err(e) => {
                // Once failed, the reader stays finished.
                assert!(matches!(reader.next_frame(), Ok(None)));
                return (frames, Some(e));
            }
        }
    }
}

/// Reads `bytes` whole; panics if even the header is rejected. The reader
/// over the same bytes in memory ([`CaptureReader::from_bytes`]) must give
/// the same frames and the same error.
fn read_all(bytes: &[u8]) -> (Vec<Owned>, Option<CaptureError>) {
    let mut reader = CaptureReader::new(Cursor::new(bytes)).expect("capture header");
    let streamed = drain(&mut reader);
    assert_same_in_memory(bytes, Ok(&streamed));
    streamed
}

/// Reads `bytes` with [`CaptureReader::from_bytes`] and checks it against
/// what the streaming reader gave: its header error, or its frames (with
/// each `data_offset` locating the frame's data in `bytes`) and error.
fn assert_same_in_memory(
    bytes: &[u8],
    streamed: Result<&(Vec<Owned>, Option<CaptureError>), &CaptureError>,
) {
    let shared: super::SharedBytes = std::sync::Arc::new(bytes.to_vec());
    let mut reader = match (CaptureReader::from_bytes(shared), streamed) {
        (Ok(reader), Ok(_)) => reader,
        (Err(e), Err(expected)) => {
            assert_eq!(e.to_string(), expected.to_string());
            return;
        }
        (r, s) => panic!(
            "in memory {:?}, streaming {:?}",
            r.err().map(|e| e.to_string()),
            s.err().map(|e| e.to_string())
        ),
    };
    let mut offsets = Vec::new();
    let (frames, err) = drain_with(&mut reader, |f| offsets.push((f.data_offset, f.data.len())));
    let (want, want_err) = streamed.expect("streamed frames");
    assert_eq!(&frames, want);
    assert_eq!(
        err.map(|e| e.to_string()),
        want_err.as_ref().map(|e| e.to_string())
    );
    for ((at, len), f) in offsets.into_iter().zip(&frames) {
        let at = at as usize;
        assert_eq!(&bytes[at..at + len], f.data.as_slice());
    }
}

/// A recognisable packet of `len` bytes.
fn packet(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
}

/// Hand-built pcapng blocks, independent of the writer under test.
struct Ng(ByteOrder);

impl Ng {
    fn u16(&self, v: u16) -> [u8; 2] {
        match self.0 {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }

    fn u32(&self, v: u32) -> [u8; 4] {
        match self.0 {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }

    fn block(&self, block_type: u32, body: &[u8]) -> Vec<u8> {
        let len = (12 + body.len()) as u32;
        [
            &self.u32(block_type)[..],
            &self.u32(len),
            body,
            &self.u32(len),
        ]
        .concat()
    }

    fn option(&self, code: u16, value: &[u8]) -> Vec<u8> {
        let mut v = [&self.u16(code)[..], &self.u16(value.len() as u16), value].concat();
        v.resize(v.len().next_multiple_of(4), 0);
        v
    }

    fn shb(&self) -> Vec<u8> {
        let body = [
            &self.u32(0x1A2B_3C4D)[..],
            &self.u16(1),
            &self.u16(0),
            &[0xff; 8],
        ]
        .concat();
        self.block(0x0A0D_0D0A, &body)
    }

    fn idb(&self, linktype: u16, snaplen: u32, options: &[Vec<u8>]) -> Vec<u8> {
        let mut body = [&self.u16(linktype)[..], &[0, 0], &self.u32(snaplen)].concat();
        if !options.is_empty() {
            body.extend(options.concat());
            body.extend(self.option(0, &[]));
        }
        self.block(1, &body)
    }

    fn epb(&self, if_id: u32, ts: u64, data: &[u8], orig_len: u32, options: &[Vec<u8>]) -> Vec<u8> {
        let mut body = [
            &self.u32(if_id)[..],
            &self.u32((ts >> 32) as u32),
            &self.u32(ts as u32),
            &self.u32(data.len() as u32),
            &self.u32(orig_len),
            data,
        ]
        .concat();
        body.resize(body.len().next_multiple_of(4), 0);
        if !options.is_empty() {
            body.extend(options.concat());
            body.extend(self.option(0, &[]));
        }
        self.block(6, &body)
    }

    fn spb(&self, data: &[u8], orig_len: u32) -> Vec<u8> {
        let mut body = [&self.u32(orig_len)[..], data].concat();
        body.resize(body.len().next_multiple_of(4), 0);
        self.block(3, &body)
    }

    /// Obsolete Packet Block (type 2).
    fn pb(&self, if_id: u16, ts: u64, data: &[u8], orig_len: u32) -> Vec<u8> {
        let mut body = [
            &self.u16(if_id)[..],
            &self.u16(0),
            &self.u32((ts >> 32) as u32),
            &self.u32(ts as u32),
            &self.u32(data.len() as u32),
            &self.u32(orig_len),
            data,
        ]
        .concat();
        body.resize(body.len().next_multiple_of(4), 0);
        self.block(2, &body)
    }
}

/// Offsets at which records start, plus the file length; walked independently
/// of the reader (pcapng: little-endian block lengths; pcap: caplen).
fn record_starts(file: &[u8], pcapng: bool) -> Vec<usize> {
    let le = |at: usize| u32::from_le_bytes(file[at..at + 4].try_into().unwrap()) as usize;
    let mut starts = vec![0];
    let mut at = if pcapng { le(4) } else { 24 };
    while at < file.len() {
        starts.push(at);
        at += if pcapng { le(at + 4) } else { 16 + le(at + 8) };
    }
    assert_eq!(at, file.len());
    starts.push(at);
    starts
}
