//! Inputs that are not (valid) captures: what error, at which offset, and no panics.

use super::{Ng, read_all};
use crate::capture::{ByteOrder, CaptureError, CaptureReader, MAX_BUFFER_CAPACITY};

fn open(bytes: &[u8]) -> Result<CaptureReader<&[u8]>, CaptureError> {
    let reader = CaptureReader::new(bytes);
    if let Err(e) = &reader {
        super::assert_same_in_memory(bytes, Err(e));
    }
    reader
}

/// Reads `bytes` expecting `Malformed` at `offset` with a reason containing
/// `reason`, after `packets` good packets.
fn assert_malformed(bytes: &[u8], packets: usize, offset: u64, reason: &str) {
    let (frames, err) = read_all(bytes);
    assert_eq!(frames.len(), packets, "{err:?}");
    match err {
        Some(CaptureError::Malformed {
            offset: o,
            reason: r,
        }) => {
            assert_eq!(o, offset, "{r}");
            assert!(r.contains(reason), "{r:?} lacks {reason:?}");
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[test]
fn text_and_empty_files_are_not_captures() {
    let err = open(b"Hello, world\n").err().unwrap();
    assert!(matches!(err, CaptureError::NotACapture { magic } if &magic == b"Hell"));
    let msg = err.to_string();
    assert!(
        msg.contains("not a pcap or pcapng") && msg.contains("offset 0"),
        "{msg}"
    );
    assert!(msg.contains("\"Hell\""), "{msg}");
    assert_eq!(err.offset(), Some(0));

    let err = open(b"").err().unwrap();
    assert!(matches!(err, CaptureError::Empty));
    assert!(err.to_string().contains("empty file"));

    let err = open(&[0x0a, 0x0d, 0x0d]).err().unwrap();
    assert!(matches!(
        err,
        CaptureError::NotACapture {
            magic: [0x0a, 0x0d, 0x0d, 0]
        }
    ));
}

/// SHB + IDB (48 bytes), one good EPB (36 bytes, ends at 84), then `tail`.
fn ng_with(tail: &[u8]) -> Vec<u8> {
    let ng = Ng(ByteOrder::Little);
    [
        ng.shb(),
        ng.idb(1, 0, &[]),
        ng.epb(0, 0, &[1, 2, 3, 4], 4, &[]),
        tail.to_vec(),
    ]
    .concat()
}

#[test]
fn inconsistent_pcapng_blocks() {
    let ng = Ng(ByteOrder::Little);
    let mut epb = ng.epb(0, 0, &[9; 8], 8, &[]);
    epb[20..24].copy_from_slice(&1000u32.to_le_bytes());
    assert_malformed(&ng_with(&epb), 1, 84, "captured length 1000 does not fit");

    let mut odd = ng.spb(&[1; 8], 8);
    odd[4..8].copy_from_slice(&21u32.to_le_bytes());
    assert_malformed(&ng_with(&odd), 1, 84, "not a multiple of 4");

    let tiny = [&3u32.to_le_bytes()[..], &8u32.to_le_bytes()].concat();
    assert_malformed(&ng_with(&tiny), 1, 84, "less than the minimum 16");

    for mut block in [ng.spb(&[1; 8], 8), ng.epb(0, 0, &[1; 8], 8, &[])] {
        let n = block.len();
        block[n - 4] ^= 4;
        assert_malformed(&ng_with(&block), 1, 84, "trailing total length");
    }

    let mut shb = ng.shb();
    shb[8] = 0;
    assert!(matches!(
        open(&shb),
        Err(CaptureError::Malformed { offset: 0, .. })
    ));
    assert_malformed(&ng_with(&shb), 1, 84, "byte-order magic");

    let mut v2 = ng.shb();
    v2[12] = 2;
    assert_malformed(&v2, 0, 0, "unsupported pcapng version 2.0");

    let bad_resol = [ng.shb(), ng.idb(1, 0, &[ng.option(9, &[20])])].concat();
    assert_malformed(&bad_resol, 0, 28, "invalid if_tsresol 0x14");

    let huge = [&6u32.to_le_bytes()[..], &0x7fff_fff0u32.to_le_bytes()].concat();
    assert_malformed(&ng_with(&huge), 1, 84, "exceeds the reader's limit");
}

#[test]
fn pcap_record_beyond_the_limit_is_malformed() {
    let mut bytes = crate::capture::PcapWriter::new(Vec::new())
        .unwrap()
        .into_inner();
    bytes.extend([0; 8]);
    bytes.extend(((MAX_BUFFER_CAPACITY * 2) as u32).to_le_bytes());
    bytes.extend([0; 4]);
    assert_malformed(&bytes, 0, 24, "exceeds the reader's limit");
}

#[test]
fn a_large_declared_block_cut_short_is_truncated() {
    let ng = Ng(ByteOrder::Little);
    let mut big = ng.epb(0, 0, &vec![7; 1 << 20], 1 << 20, &[]);
    big.truncate(100_000);
    let (frames, err) = read_all(&ng_with(&big));
    assert_eq!(frames.len(), 1);
    match err {
        Some(CaptureError::Truncated {
            offset: 84,
            needed: Some(n),
        }) => {
            assert_eq!(n, (1 << 20) + 32 - 100_000)
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
}

fn assert_one_line_with_offset(e: &CaptureError) {
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "{msg}");
    if let Some(offset) = e.offset() {
        assert!(msg.contains(&format!("offset {offset}")), "{msg}");
    }
}

/// Random byte mutations and cuts of valid files never panic nor hang.
#[test]
fn mutated_files_never_panic() {
    let bases = [
        super::pcapng::hand_built(ByteOrder::Little),
        super::pcapng::hand_built(ByteOrder::Big),
        super::streaming::sample_pcapng(),
        super::streaming::sample_pcap(),
    ];
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for base in &bases {
        for _ in 0..3000 {
            let mut bytes = base.clone();
            for _ in 0..1 + rand() % 4 {
                let at = (rand() % bytes.len() as u64) as usize;
                bytes[at] = [0, 0xff, 0x80, 0x7f, rand() as u8][(rand() % 5) as usize];
            }
            if rand() % 4 == 0 {
                bytes.truncate((rand() % bytes.len() as u64) as usize);
            }
            // The reader over the bytes in memory agrees with the streaming one.
            match CaptureReader::new(&bytes[..]) {
                Ok(mut r) => super::assert_same_in_memory(&bytes, Ok(&super::drain(&mut r))),
                Err(e) => super::assert_same_in_memory(&bytes, Err(&e)),
            }
            let mut reader = match CaptureReader::with_capacity(&bytes[..], 4096) {
                Ok(reader) => reader,
                Err(e) => {
                    assert_one_line_with_offset(&e);
                    continue;
                }
            };
            for _ in 0..=bytes.len() {
                match reader.next_frame() {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => {
                        assert_one_line_with_offset(&e);
                        break;
                    }
                }
            }
            assert!(
                matches!(reader.next_frame(), Ok(None)),
                "reader did not finish"
            );
        }
    }
}
