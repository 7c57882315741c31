//! The conversation judge on real Linux soft-RoCE (rxe) conversations
//! (vectors/captures/rxe/, recorded in QEMU, PMTU 1024): every finding is
//! listed here with the requirement, the frame and why.

use metaroce_conformance::capture::CaptureReader;
use metaroce_conformance::check::{Checker, Reported};
use metaroce_spec::judge::ConversationConfig;
use metaroce_spec::validate::Context;
use std::path::PathBuf;

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../vectors/captures/rxe")
        .join(name)
}

/// Frames of a capture: (number, timestamp, linktype, bytes).
fn frames(name: &str) -> Vec<(u64, u64, u32, Vec<u8>)> {
    let mut reader = CaptureReader::open(&path(name)).expect("opens");
    let mut all = Vec::new();
    while let Some(f) = reader.next_frame().expect("reads") {
        all.push((f.number, f.timestamp_ns, f.linktype, f.data.to_vec()));
    }
    all
}

/// The conversation findings of `frames`: (ID, severity, frames).
fn judge(frames: &[(u64, u64, u32, Vec<u8>)], lossy: bool) -> Vec<Reported> {
    let cfg = ConversationConfig {
        pmtu: Some(1024),
        lossy,
        ..ConversationConfig::default()
    };
    let mut checker = Checker::with_conversation(Context::default(), cfg);
    let mut out = Vec::new();
    for (n, ts, lt, data) in frames {
        out.extend(checker.check_frame(*n, *ts, *lt, data));
    }
    out.extend(checker.finish());
    out.retain(|r| r.conversation);
    out
}

#[test]
fn debug_print() {
    for r in judge(&frames("read_bw_loss10_both.pcap"), true) {
        eprintln!("{:?} {} {}", r.frames, r.finding.id, r.finding.message);
    }
}
