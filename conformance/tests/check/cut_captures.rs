//! Header-only captures: the rxe captures of vectors/captures/rxe/ cut to
//! the first 96 and 128 bytes of each frame, as `tcpdump -s 96` would
//! record them (written by our own pcap writer, caplen < origlen), decode
//! every RoCE frame, and the checker (per packet and conversation judge)
//! finds in them no MUST or SHOULD finding the whole capture does not
//! have. The ICRC of a cut frame is "not captured", never a finding.

use metaroce_codec::{Frame, ParseOptions};
use metaroce_conformance::capture::{CaptureReader, PcapWriter};
use metaroce_conformance::check::{Checker, Reported, Summary};
use metaroce_spec::Severity;
use metaroce_spec::judge::ConversationConfig;
use metaroce_spec::validate::Context;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// (number, timestamp, link type, bytes, original length) of each frame.
type Frames = Vec<(u64, u64, u32, Vec<u8>, u32)>;

fn read(bytes: Vec<u8>) -> Frames {
    let mut reader = CaptureReader::new(std::io::Cursor::new(bytes)).expect("opens");
    let mut all = Vec::new();
    while let Some(f) = reader.next_frame().expect("reads") {
        all.push((
            f.number,
            f.timestamp_ns,
            f.linktype,
            f.data.to_vec(),
            f.orig_len,
        ));
    }
    all
}

fn capture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../vectors/captures/rxe")
        .join(name);
    std::fs::read(&path).expect("reads the capture")
}

/// The capture written again keeping the first `snap` bytes of each frame.
fn cut(frames: &Frames, snap: usize) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new()).expect("writes the header");
    for (_, ts, _, data, orig) in frames {
        w.write_packet(*ts, &data[..data.len().min(snap)], *orig)
            .expect("writes the record");
    }
    w.into_inner()
}

/// Per-packet and conversation findings (MUST and SHOULD, as ID and
/// frames) and the summary.
fn check(frames: &Frames, lossy: bool) -> (BTreeSet<(&'static str, Vec<u64>)>, Summary) {
    let cfg = ConversationConfig {
        pmtu: Some(1024),
        lossy,
        ..ConversationConfig::default()
    };
    let mut checker = Checker::with_conversation(Context::default(), cfg);
    let mut found: Vec<Reported> = Vec::new();
    for (n, ts, lt, data, _) in frames {
        found.extend(checker.check_frame(*n, *ts, *lt, data));
    }
    found.extend(checker.finish());
    let serious = found
        .into_iter()
        .filter(|r| r.finding.severity != Severity::Info)
        .map(|r| (r.finding.id, r.frames))
        .collect();
    (serious, checker.summary().clone())
}

const CAPTURES: [(&str, bool); 15] = [
    ("rc_pingpong_clean.pcap", false),
    ("write_bw_clean.pcap", false),
    ("read_bw_clean.pcap", false),
    ("send_bw_clean.pcap", false),
    ("atomic_cas_clean.pcap", false),
    ("atomic_faa_clean.pcap", false),
    ("ref_rxe_interop.pcap", false),
    ("ref_rxe_write_long.pcap", false),
    ("write_bw_loss10.pcap", true),
    ("send_bw_loss10.pcap", true),
    ("read_bw_loss10.pcap", true),
    ("rc_pingpong_loss10.pcap", true),
    ("atomic_cas_loss10.pcap", true),
    ("atomic_faa_loss10.pcap", true),
    ("read_bw_loss10_both.pcap", true),
];

#[test]
fn rxe_captures_cut_to_96_and_128_bytes_decode_and_judge_as_whole() {
    for (name, lossy) in CAPTURES {
        let whole = read(capture(name));
        let (whole_found, whole_summary) = check(&whole, lossy);
        assert_eq!(
            whole_summary.cut, 0,
            "{name}: a whole capture has no cut frame"
        );
        for snap in [96, 128] {
            let frames = read(cut(&whole, snap));
            let longer = whole.iter().filter(|f| f.3.len() > snap).count() as u64;
            assert!(
                longer > 0,
                "{name}: some frames are longer than {snap} bytes"
            );
            assert!(
                frames
                    .iter()
                    .all(|f| f.3.len() <= snap && f.4 as usize >= f.3.len()),
                "{name}: the cut capture keeps caplen <= {snap} <= origlen"
            );
            let (found, summary) = check(&frames, lossy);
            let at = format!("{name} cut to {snap} bytes");
            assert_eq!(summary.roce_frames, whole_summary.roce_frames, "{at}");
            assert_eq!(summary.undecodable, whole_summary.undecodable, "{at}");
            assert_eq!(summary.cut, longer, "{at}: every longer frame is cut");
            assert_eq!(
                summary.cut_in_headers, 0,
                "{at}: RoCE headers fit in {snap} bytes"
            );
            let longer_roce = whole
                .iter()
                .filter(|f| f.3.len() > snap)
                .filter(|f| {
                    Frame::parse(&f.3, &ParseOptions::default()).is_ok_and(|p| p.roce.is_some())
                })
                .count() as u64;
            assert_eq!(summary.icrc_not_captured, longer_roce, "{at}");
            let extra: Vec<_> = found.difference(&whole_found).collect();
            assert!(
                extra.is_empty(),
                "{at}: findings the whole capture has not: {extra:#?}"
            );
            // What is lost with the payloads is the ICRC and payload bytes,
            // nothing the headers show.
            for lost in whole_found.difference(&found) {
                assert!(
                    lost.0.starts_with("MR-ICRC"),
                    "{at}: {lost:?} of the whole capture is not found"
                );
            }
        }
    }
}

#[test]
fn frames_cut_inside_their_roce_headers_are_counted_not_judged() {
    // 14 + 20 + 8 + 12 = 54 bytes end the BTH of an IPv4 RoCE frame: cut
    // at 60 bytes, a RETH (16 bytes) is cut short; at 50, the BTH.
    let whole = read(capture("write_bw_clean.pcap"));
    let (_, whole_summary) = check(&whole, false);
    for snap in [50, 60] {
        let frames = read(cut(&whole, snap));
        let (found, summary) = check(&frames, false);
        let at = format!("write_bw_clean cut to {snap} bytes");
        assert_eq!(summary.undecodable, 0, "{at}");
        assert!(summary.cut_in_headers > 0, "{at}");
        assert_eq!(summary.roce_frames, whole_summary.roce_frames, "{at}");
        assert!(
            found.iter().all(|(id, _)| !id.starts_with("MR-ICRC")),
            "{at}: {found:#?}"
        );
    }
}
