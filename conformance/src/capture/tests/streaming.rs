//! Streaming: bounded buffer, short reads, I/O errors, and every truncated prefix.

use std::io::{self, Cursor, Read};

use super::{drain, packet, read_all, record_starts};
use crate::capture::{
    CaptureError, CaptureReader, DEFAULT_BUFFER_CAPACITY, MAX_BUFFER_CAPACITY, PcapNgWriter,
    PcapWriter,
};

/// Generates a pcapng file of `count` packets of `size` bytes on the fly, so the
/// test itself holds no more than one packet either.
struct Generated {
    count: usize,
    size: usize,
    chunk: Cursor<Vec<u8>>,
    writer: PcapNgWriter<Vec<u8>>,
}

impl Generated {
    fn new(count: usize, size: usize) -> Self {
        let mut writer = PcapNgWriter::new(Vec::new()).unwrap();
        let header = std::mem::take(writer.get_mut());
        Generated {
            count,
            size,
            chunk: Cursor::new(header),
            writer,
        }
    }
}

impl Read for Generated {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = self.chunk.read(buf)?;
            if n > 0 || self.count == 0 {
                return Ok(n);
            }
            self.count -= 1;
            let data = packet(self.size, self.count as u8);
            let ts = self.count as u64;
            self.writer
                .write_packet(ts, &data, self.size as u32, Some("c"))?;
            self.chunk = Cursor::new(std::mem::take(self.writer.get_mut()));
        }
    }
}

#[test]
fn large_file_streams_in_a_bounded_buffer() {
    let (count, size) = (5_000, 4096);
    let mut reader = CaptureReader::new(Generated::new(count, size)).unwrap();
    let mut n = 0u64;
    let mut bytes = 0usize;
    while let Some(f) = reader.next_frame().unwrap() {
        n += 1;
        assert_eq!(f.number, n);
        assert_eq!(f.data.len(), size);
        assert_eq!(f.data[1], 7 ^ (count as u64 - n) as u8);
        bytes += f.data.len();
    }
    assert_eq!(n, count as u64);
    assert!(bytes > 300 * DEFAULT_BUFFER_CAPACITY);
    assert_eq!(reader.buffer_capacity(), DEFAULT_BUFFER_CAPACITY);
}

#[test]
fn buffer_grows_only_for_a_record_that_does_not_fit() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    w.write_packet(1, &packet(100, 1), 100).unwrap();
    w.write_packet(2, &packet(200_000, 2), 200_000).unwrap();
    w.write_packet(3, &packet(100, 3), 100).unwrap();
    let bytes = w.into_inner();
    let mut reader = CaptureReader::with_capacity(Cursor::new(&bytes), 8192).unwrap();
    assert_eq!(reader.buffer_capacity(), 8192);
    let (frames, err) = drain(&mut reader);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(frames[1].data, packet(200_000, 2));
    assert_eq!(frames[2].data, packet(100, 3));
    assert_eq!(reader.buffer_capacity(), 262_144);
    assert!(reader.buffer_capacity() <= MAX_BUFFER_CAPACITY);
}

/// Returns one to three bytes per call, and sometimes `Interrupted`.
struct Trickle<'a> {
    data: &'a [u8],
    calls: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.calls.is_multiple_of(5) {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = (1 + self.calls % 3).min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

pub(super) fn sample_pcapng() -> Vec<u8> {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    for i in 0..6u8 {
        let comments = ["x"; 3];
        w.write_packet_with_comments(
            u64::from(i),
            &packet(usize::from(i) * 9, i),
            200,
            &comments[..usize::from(i % 4)],
        )
        .unwrap();
    }
    w.into_inner()
}

pub(super) fn sample_pcap() -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    for i in 0..6u8 {
        w.write_packet(u64::from(i), &packet(usize::from(i) * 9, i), 200)
            .unwrap();
    }
    w.into_inner()
}

#[test]
fn short_reads_and_interruptions_change_nothing() {
    for bytes in [sample_pcapng(), sample_pcap()] {
        let expected = read_all(&bytes);
        let trickle = Trickle {
            data: &bytes,
            calls: 0,
        };
        let mut reader = CaptureReader::new(trickle).unwrap();
        let got = drain(&mut reader);
        assert_eq!(got.0, expected.0);
        assert!(got.1.is_none());
    }
}

/// Gives at most 50 bytes per read, then fails with a custom error after `ok` bytes.
struct Failing {
    data: Vec<u8>,
    ok: usize,
}

impl Read for Failing {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.ok == 0 {
            return Err(io::Error::other("disk on fire"));
        }
        let n = buf.len().min(self.ok).min(self.data.len()).min(50);
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data.drain(..n);
        self.ok -= n;
        Ok(n)
    }
}

#[test]
fn io_errors_keep_their_cause() {
    let bytes = sample_pcapng();
    let mut reader = CaptureReader::new(Failing {
        data: bytes.clone(),
        ok: 120,
    })
    .unwrap();
    let (frames, err) = drain(&mut reader);
    assert_eq!(frames.len(), 1);
    match err {
        Some(CaptureError::Io(e)) => assert_eq!(e.to_string(), "disk on fire"),
        other => panic!("expected Io, got {other:?}"),
    }
    let early = CaptureReader::new(Failing { data: bytes, ok: 0 });
    assert!(matches!(early, Err(CaptureError::Io(e)) if e.to_string() == "disk on fire"));
}

/// Every prefix: the complete packets, then `Truncated` at the cut record (or a
/// clean end at a record boundary); `NotACapture` below four bytes.
fn check_every_prefix(file: &[u8], pcapng: bool) {
    let (all, err) = read_all(file);
    assert!(err.is_none());
    let starts = record_starts(file, pcapng);
    let header_end = starts[1];
    for cut in 0..=file.len() {
        let result = CaptureReader::with_capacity(Cursor::new(&file[..cut]), 4096);
        let mut reader = match result {
            Ok(reader) => reader,
            Err(CaptureError::Empty) => {
                assert_eq!(cut, 0);
                continue;
            }
            Err(CaptureError::NotACapture { magic }) => {
                assert!((1..4).contains(&cut), "cut {cut}: magic {magic:?}");
                continue;
            }
            Err(CaptureError::Truncated { offset: 0, .. }) => {
                assert!((4..header_end).contains(&cut), "cut {cut}");
                continue;
            }
            Err(e) => panic!("cut {cut}: {e}"),
        };
        assert!(cut >= header_end);
        let (frames, err) = drain(&mut reader);
        let complete: Vec<_> = all
            .iter()
            .filter(|f| f.end <= cut as u64)
            .cloned()
            .collect();
        assert_eq!(frames, complete, "cut {cut}");
        if starts.contains(&cut) {
            assert!(err.is_none(), "cut {cut}: {err:?}");
        } else {
            let start = *starts.iter().filter(|&&s| s < cut).max().unwrap() as u64;
            match err {
                Some(CaptureError::Truncated { offset, needed }) => {
                    assert_eq!(offset, start, "cut {cut}");
                    if let Some(n) = needed {
                        let next = starts.iter().find(|&&s| s > cut).unwrap();
                        assert_eq!(n, (next - cut) as u64, "cut {cut}");
                    }
                }
                other => panic!("cut {cut}: expected Truncated, got {other:?}"),
            }
        }
    }
}

#[test]
fn every_truncated_prefix_pcapng() {
    check_every_prefix(&sample_pcapng(), true);
}

#[test]
fn every_truncated_prefix_pcap() {
    check_every_prefix(&sample_pcap(), false);
}
