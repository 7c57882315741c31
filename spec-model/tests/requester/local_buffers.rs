//! Local buffers named by L_Key: gathers (MR-PKT-9) and the results of
//! READs and atomics (MR-REQ-12).

use crate::common::*;
use metaroce_codec::Opcode;
use metaroce_spec::model::requester::{LocalRegion, RequesterState, WorkRequest, WrOp};
use metaroce_spec::model::{Effect, WcStatus};

/// Region 1: 4096 bytes, writable; region 2: 4096 bytes, read-only.
fn with_regions() -> RequesterState {
    state(rc(1024)).with_local_regions(vec![
        LocalRegion::new(1, 4096),
        LocalRegion::read_only(2, 4096),
    ])
}

fn writes(out: &metaroce_spec::model::Outcomes) -> usize {
    out.required
        .iter()
        .filter(|c| matches!(c.value, Effect::Write { .. }))
        .count()
}

fn fetch_add() -> WorkRequest {
    WorkRequest::new(
        WrOp::FetchAdd {
            va: 0x2000,
            rkey: 9,
            add: 1,
        },
        8,
    )
}

/// MR-PKT-9: a SEND from a valid buffer is sent; one from an unknown L_Key
/// or beyond its region completes LOC_PROT_ERR, sends nothing, and moves the
/// QP to ERR.
#[test]
fn mr_pkt_9_gather_from_an_invalid_buffer() {
    // Conforming: inside region 1, and from the read-only region 2 (a gather only reads).
    let (_, out) = with_regions().post_send(WorkRequest::send(4096).local(1, 0), 0);
    assert_eq!(sent(&out).len(), 4, "MR-PKT-9");
    let (_, out) = with_regions().post_send(WorkRequest::send(100).local(2, 10), 0);
    assert_eq!(sent(&out).len(), 1, "MR-PKT-9");
    // Violating buffers: unknown L_Key, range past the end.
    for wr in [
        WorkRequest::send(100).local(7, 0),
        WorkRequest::write(100, 0x1000, 5).local(1, 4000),
        WorkRequest::new(WrOp::AtomicWrite { va: 8, rkey: 5 }, 8).local(2, 4090),
    ] {
        let (s, out) = with_regions().post_send(wr, 0);
        assert!(sent(&out).is_empty(), "MR-PKT-9: nothing sent");
        assert_eq!(
            completions(&out),
            vec![(0, WcStatus::LocProtErr)],
            "MR-PKT-9"
        );
        assert!(enters_error(&out), "MR-PKT-9: QP to ERR");
        assert!(s.queue.is_empty());
    }
}

/// MR-PKT-9 behind other work requests: the bad one waits for the earlier
/// SEND's completion, nothing after it is sent, and later ones are flushed.
#[test]
fn mr_pkt_9_in_posting_order() {
    let s = with_regions();
    let (s, out) = s.post_send(WorkRequest::send(10).local(1, 0), 0);
    assert_eq!(sent(&out), vec![(Opcode::RC_SEND_ONLY.0, 0)]);
    let (s, out) = s.post_send(WorkRequest::send(10).local(7, 0), 0);
    assert!(
        sent(&out).is_empty() && completions(&out).is_empty(),
        "MR-PKT-9"
    );
    let (s, out) = s.post_send(WorkRequest::send(10).local(1, 0), 0);
    assert!(sent(&out).is_empty(), "MR-PKT-9: nothing after it starts");
    let (_, out) = respond(s, &ack(0), 5);
    assert_eq!(
        completions(&out),
        vec![
            (0, WcStatus::Success),
            (1, WcStatus::LocProtErr),
            (2, WcStatus::WrFlushErr)
        ],
        "MR-PKT-9"
    );
    assert!(enters_error(&out));
}

/// MR-REQ-12: READ data is written to a writable buffer; a READ into a
/// read-only region or past the region's end completes LOC_PROT_ERR with
/// nothing written, and the QP enters ERR.
#[test]
fn mr_req_12_read_data_that_cannot_be_written() {
    // Conforming: 2 responses into region 1.
    let (s, _) = with_regions().post_send(WorkRequest::read(2000, 0x1000, 5).local(1, 0), 0);
    let (s, out) = respond(s, &read_resp(Opcode::RC_READ_RESPONSE_FIRST, 0, 1024), 1);
    assert_eq!(writes(&out), 1, "MR-REQ-12");
    let (_, out) = respond(s, &read_resp(Opcode::RC_READ_RESPONSE_LAST, 1, 976), 2);
    assert_eq!(completions(&out), vec![(0, WcStatus::Success)]);
    // Violating: a read-only region.
    let (s, _) = with_regions().post_send(WorkRequest::read(100, 0x1000, 5).local(2, 0), 0);
    let (s, out) = respond(s, &read_resp(Opcode::RC_READ_RESPONSE_ONLY, 0, 100), 1);
    assert_eq!(writes(&out), 0, "MR-REQ-12: nothing written");
    assert_eq!(
        completions(&out),
        vec![(0, WcStatus::LocProtErr)],
        "MR-REQ-12"
    );
    assert!(enters_error(&out), "MR-REQ-12");
    assert!(s.queue.is_empty());
    // Violating: the second response falls past the region's end.
    let (s, _) = with_regions().post_send(WorkRequest::read(2000, 0x1000, 5).local(1, 3000), 0);
    let (s, out) = respond(s, &read_resp(Opcode::RC_READ_RESPONSE_FIRST, 0, 1024), 1);
    assert_eq!(writes(&out), 1);
    let (_, out) = respond(s, &read_resp(Opcode::RC_READ_RESPONSE_LAST, 1, 976), 2);
    assert_eq!(writes(&out), 0, "MR-REQ-12");
    assert_eq!(
        completions(&out),
        vec![(0, WcStatus::LocProtErr)],
        "MR-REQ-12"
    );
    assert!(enters_error(&out));
}

/// MR-REQ-12 for atomics: the original value goes to a writable 8-byte
/// buffer; an unknown L_Key completes LOC_PROT_ERR and ERR.
#[test]
fn mr_req_12_atomic_result_that_cannot_be_written() {
    let (s, _) = with_regions().post_send(fetch_add().local(1, 8), 0);
    let (_, out) = respond(s, &atomic_ack(0, 41), 1);
    assert_eq!(writes(&out), 1, "MR-REQ-12");
    assert_eq!(completions(&out), vec![(0, WcStatus::Success)]);
    let (s, out) = with_regions().post_send(fetch_add().local(3, 0), 0);
    assert_eq!(sent(&out).len(), 1, "the request itself is sent");
    let (_, out) = respond(s, &atomic_ack(0, 41), 1);
    assert_eq!(writes(&out), 0, "MR-REQ-12");
    assert_eq!(
        completions(&out),
        vec![(0, WcStatus::LocProtErr)],
        "MR-REQ-12"
    );
    assert!(enters_error(&out), "MR-REQ-12");
}

/// Unknown local regions (the default): every buffer is taken as valid.
#[test]
fn unknown_local_regions_are_not_judged() {
    let (_, out) = state(rc(1024)).post_send(WorkRequest::send(10).local(7, 1 << 40), 0);
    assert_eq!(sent(&out).len(), 1);
}
