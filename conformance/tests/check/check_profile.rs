//! `metaroce check --profile FILE` with the numbers a capability profile
//! declares: `max_pmtu` (SPEC §2) and the MP parameters of SPEC §10.3 the
//! MP judge holds a capture to (`mp_reorder_threshold`, `mp_rto_min`,
//! `mp_cwnd_max`), and `max_rd_atomic` / `max_dest_rd_atomic` (the
//! READs a requester may have outstanding). Each capture is clean without the key and has a finding
//! naming its frame with the key declared strictly; a value outside its
//! range is bad input naming the key and the range.

use crate::check_mp_acks::{ack, capture, send};
use crate::common::*;
use metaroce_codec::ext::{AethRepr, RethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, PacketBuilder};
use std::path::PathBuf;

/// A profile file holding `yaml`.
fn profile(name: &str, yaml: &str) -> PathBuf {
    let path = temp_path(name);
    std::fs::write(&path, yaml).unwrap();
    path
}

/// The findings as (frame, ID) of `metaroce check` on `frames`, with
/// `yaml` as the capability profile when given.
fn findings(name: &str, frames: &[(u64, Vec<u8>)], yaml: Option<&str>) -> Vec<(u64, String)> {
    let cap = capture(&format!("{name}.pcapng"), frames);
    let prof = yaml.map(|y| profile(&format!("{name}.yaml"), y));
    let mut args = vec!["check", "--format", "jsonl"];
    if let Some(p) = &prof {
        args.extend(["--profile", p.to_str().unwrap()]);
    }
    let out = metaroce(&args, &cap);
    std::fs::remove_file(cap).unwrap();
    if let Some(p) = prof {
        std::fs::remove_file(p).unwrap();
    }
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|l| Some((l["frame"].as_u64()?, l["id"].as_str()?.to_owned())))
        .collect()
}

fn found(frame: u64, id: &str) -> (u64, String) {
    (frame, id.to_owned())
}

#[test]
fn max_pmtu_bounds_the_learnt_pmtu() {
    // A two-packet RC SEND whose first packet carries 1024 bytes: PMTU
    // 1024, learnt; longer than any PMTU up to a declared max_pmtu 512.
    let frames: Vec<(u64, Vec<u8>)> = [
        PacketBuilder::new(Opcode::RC_SEND_FIRST)
            .psn(100)
            .payload(vec![7; 1024]),
        PacketBuilder::new(Opcode::RC_SEND_LAST)
            .psn(101)
            .ack_req(true)
            .payload(vec![7; 10]),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, b)| (i as u64 * 1_000, b.build()))
    .collect();
    assert_eq!(findings("pmtu-none", &frames, None), []);
    assert_eq!(findings("pmtu-4096", &frames, Some("max_pmtu: 4096\n")), []);
    assert_eq!(
        findings("pmtu-512", &frames, Some("max_pmtu: 512\n")),
        [found(1, "MR-PKT-1")]
    );
}

/// PSNs 0..=3 sent 1 µs apart; their ACK (all four) is dropped by the
/// requester (bad IPv4 header checksum, MR-ENC-7), and PSN 2 is resent
/// 200 µs after the first send.
fn resent_after_200_us() -> Vec<(u64, Vec<u8>)> {
    let mut frames: Vec<(u64, Vec<u8>)> = (0..4u32)
        .map(|psn| (u64::from(psn) * 1_000, send(psn, 5_000 + psn, false)))
        .collect();
    frames.push((10_000, ack(3, 5_003, 0xD001).ipv4_checksum(0xBAD).build()));
    frames.push((200_000, send(2, 205_000, true)));
    frames
}

#[test]
fn mp_rto_min_makes_an_early_resend_mr_mpl_4() {
    let frames = resent_after_200_us();
    // Undeclared: the RTO floor is 10 µs, so 198 µs may be a timeout.
    assert_eq!(findings("rto-none", &frames, None), [found(5, "MR-ENC-7")]);
    assert_eq!(
        findings("rto-100", &frames, Some("mp_rto_min: 100\n")),
        [found(5, "MR-ENC-7")]
    );
    // Declared 1 ms: nothing acknowledged, too early for any RTO.
    assert_eq!(
        findings("rto-1000", &frames, Some("mp_rto_min: 1000\n")),
        [found(5, "MR-ENC-7"), found(6, "MR-MPL-4")]
    );
}

#[test]
fn mp_reorder_threshold_counts_the_later_psns_acknowledged() {
    // PSNs 0..=4; the ACK takes PSN 0 and selectively 2..=4 (three PSNs
    // after PSN 1); PSN 1 is resent 2 µs later, long before any RTO.
    let mut frames: Vec<(u64, Vec<u8>)> = (0..5u32)
        .map(|psn| (u64::from(psn) * 1_000, send(psn, 5_000 + psn, false)))
        .collect();
    let sack = ack(0, 5_004, 0xD001)
        .ext(|e| {
            let s = e.sacketh.as_mut().unwrap();
            s.sack_bitmap = 0b0111 << 60; // PSNs 2, 3, 4 after base PSN 1
            s.echoed_entropy = 0xC004;
        })
        .build();
    frames.push((10_000, sack));
    frames.push((12_000, send(1, 5_012, true)));
    let slow_rto = "mp_rto_min: 10000\n";
    assert_eq!(findings("k-none", &frames, Some(slow_rto)), []);
    assert_eq!(
        findings(
            "k-3",
            &frames,
            Some(&format!("{slow_rto}mp_reorder_threshold: 3\n"))
        ),
        []
    );
    assert_eq!(
        findings(
            "k-4",
            &frames,
            Some(&format!("{slow_rto}mp_reorder_threshold: 4\n"))
        ),
        [found(7, "MR-MPL-4")]
    );
}

#[test]
fn mp_cwnd_max_bounds_the_bytes_in_flight() {
    // Six 64-byte MP SENDs 100 ns apart, none acknowledged yet.
    let frames: Vec<(u64, Vec<u8>)> = (0..6u32)
        .map(|psn| (u64::from(psn) * 100, send(psn, 5_000 + psn, false)))
        .collect();
    assert_eq!(findings("cwnd-none", &frames, None), []);
    // 256 bytes: the fifth packet puts 4 × 64 + 64 in flight.
    assert_eq!(
        findings(
            "cwnd-256",
            &frames,
            Some("max_pmtu: 256\nmp_cwnd_max: 256\n")
        ),
        [found(5, "MR-MPC-1"), found(6, "MR-MPC-1")]
    );
}

#[test]
fn a_number_out_of_range_is_bad_input_naming_the_key_and_range() {
    let frames = vec![(0, send(0, 5_000, false))];
    let cap = capture("range.pcapng", &frames);
    for (yaml, want) in [
        (
            "max_pmtu: 1500\n",
            "max_pmtu: 1500 is not 256, 512, 1024, 2048 or 4096",
        ),
        (
            "mp_reorder_threshold: 65\n",
            "mp_reorder_threshold: 65 is outside 1..=64",
        ),
        ("mp_rto_min: 5\n", "mp_rto_min: 5 is outside 10..=10000 µs"),
        (
            "mp_ack_prompt_max: 0\n",
            "mp_ack_prompt_max: 0 is outside 1..=50 µs",
        ),
        (
            "mp_cwnd_max: 100\n",
            "mp_cwnd_max: 100 is outside 256..=67108864 bytes",
        ),
        (
            "mp_cwnd_max: 1024\n",
            "mp_cwnd_max (1024) is below max_pmtu (4096)",
        ),
        ("max_rd_atomic: 0\n", "max_rd_atomic: 0 is outside 1..=255"),
    ] {
        let p = profile("range.yaml", yaml);
        let out = metaroce(&["check", "--profile", p.to_str().unwrap()], &cap);
        std::fs::remove_file(p).unwrap();
        assert_eq!(out.status.code(), Some(4), "{yaml}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{yaml}: {err}");
    }
    std::fs::remove_file(cap).unwrap();
}

/// Three one-packet READs 10.0.0.1 → 10.0.0.2 QPN 0x12, 1 µs apart, then
/// their READ Response Only 100 µs apart, starting 200 µs later.
pub(crate) fn three_reads_in_flight() -> Vec<(u64, Vec<u8>)> {
    let read = |psn: u32| {
        PacketBuilder::new(Opcode::RC_READ_REQUEST)
            .ipv4([10, 0, 0, 1].into(), [10, 0, 0, 2].into())
            .psn(psn)
            .dest_qp(0x12)
            .ack_req(true)
            .ext(|e| {
                e.reth = Some(RethRepr {
                    va: 0x1000 + 64 * u64::from(psn),
                    rkey: 7,
                    dma_len: 64,
                })
            })
            .build()
    };
    let only = |psn: u32| {
        PacketBuilder::new(Opcode::RC_READ_RESPONSE_ONLY)
            .ipv4([10, 0, 0, 2].into(), [10, 0, 0, 1].into())
            .psn(psn)
            .dest_qp(0x22)
            .aeth(AethRepr {
                syndrome: Syndrome(0x1F),
                msn: Msn::new(psn + 1),
            })
            .payload(vec![7; 64])
            .build()
    };
    let mut frames: Vec<(u64, Vec<u8>)> = (0..3u32)
        .map(|psn| (u64::from(psn) * 1_000, read(psn)))
        .collect();
    frames.extend((0..3u32).map(|psn| (200_000 + u64::from(psn) * 100_000, only(psn))));
    frames
}

#[test]
fn max_rd_atomic_bounds_the_outstanding_reads_mr_req_7() {
    let frames = three_reads_in_flight();
    // Undeclared (and no RDMA-CM setup in the capture): not judged.
    assert_eq!(findings("rd-none", &frames, None), []);
    assert_eq!(findings("rd-3", &frames, Some("max_rd_atomic: 3\n")), []);
    // Two allowed: the third READ (frame 3) is one too many.
    assert_eq!(
        findings("rd-2", &frames, Some("max_rd_atomic: 2\n")),
        [found(3, "MR-REQ-7")]
    );
    // max_dest_rd_atomic alone: the same frame, as information.
    let cap = capture("rd-dest.pcapng", &frames);
    let p = profile("rd-dest.yaml", "max_dest_rd_atomic: 2\n");
    let out = metaroce(
        &[
            "check",
            "--format",
            "jsonl",
            "--profile",
            p.to_str().unwrap(),
        ],
        &cap,
    );
    std::fs::remove_file(cap).unwrap();
    std::fs::remove_file(p).unwrap();
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        (lines[0]["id"].as_str(), lines[0]["severity"].as_str()),
        (Some("MR-REQ-7"), Some("info"))
    );
}
