//! MR-CM-4 through the whole pipeline: an RDMA-CM REQ and REP on QP 1
//! (`cm_mp_setup`'s builders, the limit written at the codec's field
//! offsets) declare the connection, and the
//! READs its active side then has outstanding are held to the REP's
//! Responder Resources.

use crate::check_mp_acks::capture;
use crate::check_profile::three_reads_in_flight;
use crate::cm_mp_setup::{from_active, from_passive, rep, req};
use crate::common::*;
use metaroce_codec::cm::field;

/// REQ (active QPN 0x22, starting PSN 0, PMTU 1024, Initiator Depth `rr`)
/// and REP (passive QPN 0x12, `rr` Responder Resources), then three
/// one-packet READs of the active side 1 µs apart from 100 µs on, and
/// their responses from 300 µs on.
fn frames(rr: u8) -> Vec<(u64, Vec<u8>)> {
    let mut req = req(&[]);
    req[field::REQ_INITIATOR_DEPTH] = rr;
    let mut rep = rep(&[]);
    rep[field::REP_RESPONDER_RESOURCES] = rr;
    let mut f = vec![(0, from_active(req)), (10_000, from_passive(rep))];
    f.extend(
        three_reads_in_flight()
            .into_iter()
            .map(|(t, frame)| (t + 100_000, frame)),
    );
    f
}

/// `metaroce check --format jsonl` on `frames`: (frame, id, severity, frames).
fn check(name: &str, frames: &[(u64, Vec<u8>)]) -> Vec<(u64, String, String, Vec<u64>)> {
    let cap = capture(name, frames);
    let out = metaroce(&["check", "--format", "jsonl"], &cap);
    std::fs::remove_file(cap).unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            let frames = v["frames"]
                .as_array()
                .map(|a| a.iter().filter_map(serde_json::Value::as_u64).collect())
                .unwrap_or_default();
            (
                v["frame"].as_u64().unwrap_or(0),
                v["id"].as_str().unwrap_or("").to_owned(),
                v["severity"].as_str().unwrap_or("").to_owned(),
                frames,
            )
        })
        .collect()
}

#[test]
fn reads_beyond_the_rep_responder_resources_are_mr_cm_4() {
    // Three READs outstanding against 2 Responder Resources: the third
    // (frame 5) names the REQ (1), the REP (2) and the older READs.
    assert_eq!(
        check("cm-rr2.pcapng", &frames(2)),
        [(5, "MR-CM-4".into(), "must".into(), vec![5, 1, 2, 3, 4])]
    );
    // Three announced: clean.
    assert_eq!(check("cm-rr3.pcapng", &frames(3)), []);
}
