//! MR-PSN-4: the outstanding PSN span stays below 2^23, in the requester
//! model and in the request-stream judge. A READ of 2^31 bytes at PMTU 256
//! reserves 2^23 PSNs, so one READ brings the span to the limit without
//! sending millions of packets.

use crate::common::*;
use metaroce_codec::{Opcode, Psn};
use metaroce_spec::model::requester::judge::{JudgeConfig, RequestStreamJudge};
use metaroce_spec::model::requester::{WorkRequest, packetize, psn_span};

/// PSNs of 2^23.
const HALF: u32 = 1 << 23;

/// MR-PSN-4 (model): a SEND whose PSN would be 2^23 after the oldest
/// unacknowledged PSN waits; it starts once an ACK moves that PSN on.
#[test]
fn mr_psn_4_model_holds_a_packet_2_pow_23_after_una() {
    let s = state(rc(256));
    let (s, out) = s.post_send(WorkRequest::send(1), 0);
    assert_eq!(sent(&out), vec![(Opcode::RC_SEND_ONLY.0, 0)]);
    // PSNs 1 ..= 2^23 − 1: the READ ends one PSN short of the limit.
    let read = WorkRequest::read((1 << 31) - 256, 0x1000, 7);
    assert_eq!(psn_span(&read, 256), HALF - 1);
    let (s, out) = s.post_send(read, 0);
    assert_eq!(sent(&out), vec![(Opcode::RC_READ_REQUEST.0, 1)]);
    // Conforming: nothing is sent at PSN 2^23 (2^23 after the oldest
    // unacknowledged PSN 0) ...
    let (s, out) = s.post_send(WorkRequest::send(1), 0);
    assert!(sent(&out).is_empty(), "MR-PSN-4: {:?}", sent(&out));
    assert_eq!(s.next_psn, Psn::new(HALF));
    // ... until the ACK of PSN 0 makes PSN 1 the oldest: 2^23 − 1 after it.
    let (_, out) = respond(s, &ack(0), 10);
    assert_eq!(sent(&out), vec![(Opcode::RC_SEND_ONLY.0, HALF)], "MR-PSN-4");
}

/// The judge's view of a requester that sent a SEND at PSN 0 (acknowledged),
/// then a READ of `read_len` bytes from PSN 1, then a SEND at the next PSN.
fn judge_stream(read_len: u64) -> Vec<&'static str> {
    let mut j = RequestStreamJudge::new(JudgeConfig {
        pmtu: Some(256),
        ..JudgeConfig::default()
    });
    let attrs = rc(256);
    let mut ids = Vec::new();
    let mut feed = |j: &mut RequestStreamJudge, wr: &WorkRequest, psn: u32| {
        for p in packetize(wr, &attrs, Psn::new(psn)) {
            ids.extend(
                j.on_request(&from_request(&p).pkt(), None)
                    .iter()
                    .map(|f| f.id),
            );
        }
        psn_span(wr, 256)
    };
    feed(&mut j, &WorkRequest::send(1), 0);
    j.on_response(&ack(0).pkt(), None);
    let span = feed(&mut j, &WorkRequest::read(read_len, 0x1000, 7), 1);
    feed(&mut j, &WorkRequest::send(1), 1 + span);
    ids
}

/// MR-PSN-4 (judge): a new request PSN 2^23 − 1 after the oldest
/// unacknowledged PSN passes; one 2^23 after it is reported.
#[test]
fn mr_psn_4_judge_reports_a_packet_2_pow_23_after_una() {
    assert!(judge_stream((1 << 31) - 256).is_empty(), "MR-PSN-4");
    assert_eq!(judge_stream(1 << 31), vec!["MR-PSN-4"]);
}
