//! `metaroce check --threads N` gives the findings, their order, the summary
//! and the exit code of the single-threaded check (`--threads 1`) and of the
//! check that reads the file instead of mapping it (`--no-mmap`): on the
//! committed captures, and on a generated one long enough to fill several
//! rounds of the pipeline (batches of 256 frames, 4 per worker) with
//! findings spread through it.

use crate::common::*;
use std::path::{Path, PathBuf};

use metaroce_codec::ext::{AethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, PacketBuilder};
use metaroce_conformance::capture::PcapWriter;
use std::net::Ipv4Addr;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// The committed captures: the sample and the rxe ones.
fn committed() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../vectors/captures");
    let mut all = vec![dir.join("sample.pcapng")];
    let mut rxe: Vec<PathBuf> = std::fs::read_dir(dir.join("rxe"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
        .collect();
    rxe.sort();
    assert!(rxe.len() >= 10, "{rxe:?}");
    all.extend(rxe);
    all
}

/// 3,000 SEND Only requests on 3 QPs with their ACKs; every 97th request
/// has a wrong ICRC (its receiver drops it: it is sent again, then ACKed),
/// every 401st skips a PSN (the responder NAKs the
/// skipped PSN: a real gap, not capture loss), every 613th ACK is missing.
fn long_capture() -> PathBuf {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    let mut ts = 1_000_000_000u64;
    let mut psn = [0u32; 3];
    let mut msn = [0u32; 3];
    for i in 0..3000u32 {
        let q = (i % 3) as usize;
        let skip = i % 401 == 400;
        if skip {
            psn[q] += 1;
        }
        let frame = PacketBuilder::new(Opcode::RC_SEND_ONLY)
            .ipv4(A, B)
            .dest_qp(0x200 + q as u32)
            .psn(psn[q])
            .ack_req(true)
            .payload(vec![(i % 251) as u8; 64 + (i % 5) as usize * 4])
            .build();
        if i % 97 == 96 {
            let mut bad = frame.clone();
            let last = bad.len() - 5;
            bad[last] ^= 0x40;
            ts += 1_000;
            w.write_packet(ts, &bad, bad.len() as u32).unwrap();
        }
        ts += 1_000;
        w.write_packet(ts, &frame, frame.len() as u32).unwrap();
        if i % 613 != 612 {
            let (syndrome, at) = if skip {
                (Syndrome::NAK_PSN_SEQ, (psn[q] + 0xFF_FFFF) & 0xFF_FFFF)
            } else {
                msn[q] += 1;
                (Syndrome::ACK_UNLIMITED, psn[q])
            };
            let ack = PacketBuilder::new(Opcode::RC_ACK)
                .dest_qp(0x100 + q as u32)
                .psn(at)
                .aeth(AethRepr {
                    syndrome,
                    msn: Msn::new(msn[q]),
                })
                .ipv4(B, A)
                .build();
            ts += 1_000;
            w.write_packet(ts, &ack, ack.len() as u32).unwrap();
        }
        psn[q] = (psn[q] + 1) & 0xFF_FFFF;
    }
    temp_file("threads-long.pcap", &w.into_inner())
}

/// Runs `check ARGS` with one thread, with `--no-mmap`, and with 2 and 3
/// threads; all must print the same and exit the same.
fn assert_same(file: &Path, args: &[&str]) -> String {
    let run = |extra: &[&str]| {
        let all: Vec<&str> = ["check", "--no-progress"]
            .iter()
            .chain(args)
            .chain(extra)
            .copied()
            .collect();
        let out = metaroce(&all, file);
        assert!(out.status.code().is_some_and(|c| c <= 1), "{out:?}");
        (out.status.code(), stdout(&out))
    };
    let one = run(&["--threads", "1"]);
    for extra in [&["--no-mmap"][..], &["--threads", "2"], &["--threads", "3"]] {
        let other = run(extra);
        assert_eq!(one, other, "{} {args:?} {extra:?}", file.display());
    }
    one.1
}

#[test]
fn threads_change_nothing_on_the_committed_captures() {
    for file in committed() {
        assert_same(&file, &[]);
        assert_same(&file, &["--format", "jsonl", "--lossy"]);
    }
}

#[test]
fn threads_change_nothing_on_a_long_capture_with_findings() {
    let file = long_capture();
    let text = assert_same(&file, &["--format", "jsonl"]);
    let frames: Vec<u64> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|l| l["frame"].as_u64().unwrap())
        .collect();
    // Findings all through the capture, not only in its first batches.
    assert!(frames.len() > 30, "{}", frames.len());
    assert!(frames.iter().any(|&f| f > 5000), "{frames:?}");
    assert!(text.contains("MR-ICRC-1"), "{text}");
    assert!(text.contains("MR-PSN-3"), "{text}");
    // The time range and QP filters go through the pipeline's reader.
    assert_same(&file, &["--from", "1.5", "--to", "3.5"]);
    assert_same(&file, &["--qp", "0x201", "--format", "jsonl"]);
    std::fs::remove_file(file).unwrap();
}
