//! MR-CM-4 through the whole pipeline: an RDMA-CM REQ and REP on QP 1
//! (built from the codec's field offsets) declare the connection, and the
//! READs its active side then has outstanding are held to the REP's
//! Responder Resources.

use crate::check_mp_acks::capture;
use crate::common::*;
use metaroce_codec::cm::field;
use metaroce_codec::ext::{AethRepr, DethRepr, RethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, PacketBuilder};

const ACTIVE: [u8; 4] = [10, 0, 0, 1];
const PASSIVE: [u8; 4] = [10, 0, 0, 2];

/// A CM MAD of attribute `attr` from `src` to `dst` on QP 1; `fill` writes
/// the message fields.
fn mad(src: [u8; 4], dst: [u8; 4], attr: u16, fill: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut m = vec![0u8; 256];
    m[..4].copy_from_slice(&[1, 0x07, 2, 0x03]);
    m[field::ATTRIBUTE_ID..field::ATTRIBUTE_ID + 2].copy_from_slice(&attr.to_be_bytes());
    fill(&mut m);
    PacketBuilder::new(Opcode::UD_SEND_ONLY)
        .ipv4(src.into(), dst.into())
        .dest_qp(1)
        .deth(DethRepr {
            qkey: 0x8001_0000,
            reserved: 0,
            src_qp: 1,
        })
        .payload(m)
        .build()
}

/// REQ (active QPN 0x22, starting PSN 0, PMTU 1024) and REP (passive QPN
/// 0x12, `rr` Responder Resources and Initiator Depth), then three
/// one-packet READs 1 µs apart and their responses from 200 µs on.
fn frames(rr: u8) -> Vec<(u64, Vec<u8>)> {
    let req = mad(ACTIVE, PASSIVE, 0x0010, |m| {
        m[field::LOCAL_COMM_ID..][..4].copy_from_slice(&7u32.to_be_bytes());
        m[field::REQ_LOCAL_QPN..][..4].copy_from_slice(&[0, 0, 0x22, 4]);
        m[field::REQ_INITIATOR_DEPTH] = rr;
        m[field::REQ_MTU] = 3 << 4;
    });
    let rep = mad(PASSIVE, ACTIVE, 0x0013, |m| {
        m[field::LOCAL_COMM_ID..][..4].copy_from_slice(&9u32.to_be_bytes());
        m[field::REMOTE_COMM_ID..][..4].copy_from_slice(&7u32.to_be_bytes());
        m[field::REP_LOCAL_QPN..][..3].copy_from_slice(&[0, 0, 0x12]);
        m[field::REP_STARTING_PSN..][..3].copy_from_slice(&[0, 0, 100]);
        m[field::REP_RESPONDER_RESOURCES] = rr;
        m[field::REP_INITIATOR_DEPTH] = 4;
    });
    let read = |psn: u32| {
        PacketBuilder::new(Opcode::RC_READ_REQUEST)
            .ipv4(ACTIVE.into(), PASSIVE.into())
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
            .ipv4(PASSIVE.into(), ACTIVE.into())
            .psn(psn)
            .dest_qp(0x22)
            .aeth(AethRepr {
                syndrome: Syndrome(0x1F),
                msn: Msn::new(psn + 1),
            })
            .payload(vec![7; 64])
            .build()
    };
    let mut f = vec![(0, req), (10_000, rep)];
    f.extend((0..3u32).map(|psn| (100_000 + u64::from(psn) * 1_000, read(psn))));
    f.extend((0..3u32).map(|psn| (300_000 + u64::from(psn) * 100_000, only(psn))));
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
