//! on_response: ACKs, NAKs, READ responses, atomic acknowledgements.

use crate::common::*;
use metaroce_codec::Opcode;
use metaroce_spec::model::requester::{RequesterAttrs, RequesterState, WorkRequest, WrOp};
use metaroce_spec::model::{Effect, Field, WcStatus};

/// Three 1-packet SENDs (PSN 0, 1, 2) and a 3-packet SEND (3, 4, 5).
fn four_sends(attrs: RequesterAttrs) -> RequesterState {
    let mut s = state(attrs);
    for wr in [
        WorkRequest::send(10),
        WorkRequest::send(10).unsignaled(),
        WorkRequest::send(10),
        WorkRequest::send(2500),
    ] {
        s = s.post_send(wr, 0).0;
    }
    s
}

/// MR-REQ-3, MR-REQ-2, MR-REQ-1: a cumulative ACK completes every SEND it
/// covers, in order, signaled ones only.
#[test]
fn mr_req_3_cumulative_ack_completes_in_order() {
    let s = four_sends(rc(1024));
    let (s, out) = respond(s, &ack(1), 10);
    assert_eq!(
        completions(&out),
        vec![(0, WcStatus::Success)],
        "WR 1 is unsignaled"
    );
    let (s, out) = respond(s, &ack(4), 11);
    assert_eq!(
        completions(&out),
        vec![(2, WcStatus::Success)],
        "WR 3 ends at PSN 5"
    );
    let (_, out) = respond(s, &ack(5), 12);
    assert_eq!(completions(&out), vec![(3, WcStatus::Success)]);
    // sq_sig_all: unsignaled work requests complete too.
    let s = four_sends(RequesterAttrs {
        sq_sig_all: true,
        ..rc(1024)
    });
    let (_, out) = respond(s, &ack(1), 10);
    assert_eq!(
        completions(&out),
        vec![(0, WcStatus::Success), (1, WcStatus::Success)]
    );
}

/// MR-NAK-5, MR-REQ-5, MR-TMR-5: NAK 0x60 acknowledges earlier PSNs and
/// resends every outstanding packet from the NAK PSN, in order, unchanged.
#[test]
fn mr_nak_5_go_back_n_resend_set() {
    let s = four_sends(rc(1024));
    let before: Vec<_> = s.queue.iter().map(|w| w.id).collect();
    assert_eq!(before, vec![0, 1, 2, 3]);
    let (s, out) = respond(s, &aeth_pkt(Opcode::RC_ACK, 4, 0x60), 10);
    assert_eq!(sent(&out), vec![(0x01, 4), (0x02, 5)]);
    assert_eq!(
        completions(&out),
        vec![(0, WcStatus::Success), (2, WcStatus::Success)]
    );
    let resent = sends(&out);
    assert_eq!(resent[1].headers.payload_len, Field::Exact(2500 - 2048));
    assert_eq!(s.retry_left, 6, "one retry counted");
    // MR-TMR-9: a repeated NAK with the same PSN starts no second retry.
    let (s, out) = respond(s, &aeth_pkt(Opcode::RC_ACK, 4, 0x60), 11);
    assert!(sent(&out).is_empty());
    assert_eq!(s.retry_left, 6);
    // A NAK from the first PSN resends a whole multi-packet message.
    let t = four_sends(rc(1024));
    let (_, out) = respond(t, &aeth_pkt(Opcode::RC_ACK, 2, 0x60), 10);
    assert_eq!(sent(&out), vec![(0x04, 2), (0x00, 3), (0x01, 4), (0x02, 5)]);
}

/// MR-NAK-6, MR-QP-6, MR-QP-7: an error NAK completes earlier work requests,
/// fails the NAKed one with its status, flushes the rest and enters ERR.
#[test]
fn mr_nak_6_error_naks() {
    for (syndrome, status) in [
        (0x61, WcStatus::RemInvReqErr),
        (0x62, WcStatus::RemAccessErr),
        (0x63, WcStatus::RemOpErr),
        (0x64, WcStatus::RemOpErr),
        (0x7F, WcStatus::RemOpErr),
    ] {
        let s = four_sends(rc(1024));
        let (s, out) = respond(s, &aeth_pkt(Opcode::RC_ACK, 2, syndrome), 10);
        assert_eq!(
            completions(&out),
            vec![
                (0, WcStatus::Success),
                (2, status),
                (3, WcStatus::WrFlushErr)
            ],
            "syndrome {syndrome:#x}"
        );
        assert!(enters_error(&out));
        // MR-QP-6: posted in ERR → flushed; MR-QP-5: responses dropped.
        let (s, out) = s.post_send(WorkRequest::send(1), 11);
        assert_eq!(completions(&out), vec![(4, WcStatus::WrFlushErr)]);
        assert!(sent(&out).is_empty());
        let (_, out) = respond(s, &ack(5), 12);
        assert!(dropped(&out, "MR-QP-5"));
    }
}

/// MR-REQ-9: responses later than the last PSN sent, or earlier than the
/// oldest unacknowledged PSN minus one, are dropped with no other effect.
/// MR-REQ-11: reserved syndromes are dropped.
#[test]
fn mr_req_9_and_11_drops() {
    let s = four_sends(rc(1024));
    let (s, out) = respond(s, &ack(6), 10);
    assert!(dropped(&out, "MR-REQ-9"));
    let (s, _) = respond(s, &ack(2), 11);
    let (s, out) = respond(s, &ack(1), 12);
    assert!(dropped(&out, "MR-REQ-9"), "PSN 1 < una - 1 = 2");
    let before = s.clone();
    let (s, out) = respond(s, &ack(2), 13);
    assert!(
        out.required.is_empty(),
        "a duplicate ACK of una - 1 changes nothing"
    );
    assert_eq!(s, before);
    for syndrome in [0x40, 0x5F, 0x80, 0xFF] {
        let (t, out) = respond(s.clone(), &aeth_pkt(Opcode::RC_ACK, 5, syndrome), 14);
        assert!(dropped(&out, "MR-REQ-11"), "{syndrome:#x}");
        assert_eq!(t, s);
    }
}

/// MR-READ-7: READ responses placed in order at (PSN - request PSN) × PMTU,
/// completion on the Last.
#[test]
fn mr_read_7_scatter_and_complete() {
    let s = state(rc(1024));
    let (s, _) = s.post_send(WorkRequest::read(2500, 0x100, 7).local(9, 64), 0);
    let (s, out) = respond(s, &read_resp(Opcode::RC_READ_RESPONSE_FIRST, 0, 1024), 1);
    assert!(
        matches!(&out.required[0].value, Effect::Write { key: 9, offset: 64, bytes } if bytes.len() == 1024)
    );
    assert!(completions(&out).is_empty());
    let (s, out) = respond(s, &read_resp(Opcode::RC_READ_RESPONSE_MIDDLE, 1, 1024), 2);
    assert!(matches!(
        &out.required[0].value,
        Effect::Write { offset: 1088, .. }
    ));
    let (_, out) = respond(s, &read_resp(Opcode::RC_READ_RESPONSE_LAST, 2, 452), 3);
    assert!(matches!(
        &out.required[0].value,
        Effect::Write { offset: 2112, .. }
    ));
    assert_eq!(completions(&out), vec![(0, WcStatus::Success)]);
}

/// MR-READ-7, MR-READ-8, MR-REQ-5: a gap drops the later response and
/// re-requests from the first missing PSN with VA and length adjusted.
#[test]
fn mr_read_8_gap_rerequest() {
    let s = state(rc(1024));
    let (s, _) = s.post_send(WorkRequest::read(2500, 0x100, 7), 0);
    let (s, _) = respond(s, &read_resp(Opcode::RC_READ_RESPONSE_FIRST, 0, 1024), 1);
    let (s, out) = respond(s, &read_resp(Opcode::RC_READ_RESPONSE_LAST, 2, 452), 2);
    assert!(dropped(&out, "MR-READ-7"));
    let p = &sends(&out)[0];
    assert_eq!(p.psn, Field::Exact(metaroce_codec::Psn::new(1)));
    let Field::Exact(reth) = p.headers.reth else {
        panic!()
    };
    assert_eq!(
        (reth.va, reth.rkey, reth.dma_len),
        (0x100 + 1024, 7, 2500 - 1024)
    );
    // The re-request is answered with First (1024) and Last.
    let (r, _) = respond(
        s.clone(),
        &read_resp(Opcode::RC_READ_RESPONSE_FIRST, 1, 1024),
        3,
    );
    let (_, out) = respond(r, &read_resp(Opcode::RC_READ_RESPONSE_LAST, 2, 452), 4);
    assert_eq!(completions(&out), vec![(0, WcStatus::Success)]);
    // MR-READ-7 (SPEC v1.1): Middle and Last there (rxe's replay) are accepted too.
    let (r, out) = respond(
        s.clone(),
        &read_resp(Opcode::RC_READ_RESPONSE_MIDDLE, 1, 1024),
        3,
    );
    assert!(completions(&out).is_empty() && !enters_error(&out));
    let (_, out) = respond(r, &read_resp(Opcode::RC_READ_RESPONSE_LAST, 2, 452), 4);
    assert_eq!(completions(&out), vec![(0, WcStatus::Success)]);
    // A Middle at the READ's first PSN, before anything arrived, is not.
    let s = state(rc(1024));
    let (s, _) = s.post_send(WorkRequest::read(2500, 0x100, 7), 0);
    let (_, out) = respond(s, &read_resp(Opcode::RC_READ_RESPONSE_MIDDLE, 0, 1024), 1);
    assert_eq!(completions(&out), vec![(0, WcStatus::BadRespErr)]);
}

/// MR-REQ-4: an ACK beyond a READ whose responses did not arrive re-requests it.
#[test]
fn mr_req_4_implicit_nak_rereads() {
    let s = state(rc(1024));
    let (s, _) = s.post_send(WorkRequest::read(2500, 0x100, 7), 0);
    let (s, out) = s.post_send(WorkRequest::send(1), 0);
    assert_eq!(sent(&out), vec![(0x04, 3)]);
    let (s, out) = respond(s, &ack(3), 5);
    assert_eq!(sent(&out), vec![(0x0C, 0), (0x04, 3)]);
    assert!(completions(&out).is_empty());
    assert_eq!(s.retry_left, 6);
}

/// MR-REQ-4: an ACK at exactly the READ's last PSN also means its responses
/// were lost (the READ reserved PSNs 0–2; the ACK for PSN 2 acknowledges them).
#[test]
fn mr_req_4_ack_at_the_reads_last_psn_rereads() {
    let s = state(rc(1024));
    let (s, out) = s.post_send(WorkRequest::read(2500, 0x100, 7), 0);
    assert_eq!(sent(&out), vec![(0x0C, 0)]);
    let (s, out) = respond(s, &ack(2), 5);
    assert_eq!(sent(&out), vec![(0x0C, 0)], "the READ is requested again");
    assert!(completions(&out).is_empty());
    assert_eq!(s.retry_left, 6);
}

/// MR-ATOM-6: the original value is written before the completion.
#[test]
fn mr_atom_6_atomic_ack() {
    let s = state(rc(1024));
    let (s, out) = s.post_send(
        WorkRequest::new(
            WrOp::CmpSwap {
                va: 8,
                rkey: 1,
                compare: 0,
                swap: 1,
            },
            8,
        )
        .local(3, 16),
        0,
    );
    assert_eq!(sent(&out), vec![(0x13, 0)]);
    let (_, out) = respond(s, &atomic_ack(0, 0x0102_0304_0506_0708), 1);
    assert_eq!(
        out.required[0].value,
        Effect::Write {
            key: 3,
            offset: 16,
            bytes: 0x0102_0304_0506_0708u64.to_le_bytes().to_vec()
        }
    );
    assert_eq!(completions(&out), vec![(0, WcStatus::Success)]);
}

/// MR-REQ-10: responses of the wrong kind fail the work request with
/// BAD_RESP_ERR and move the QP to ERR.
#[test]
fn mr_req_10_bad_response() {
    let cases = [
        (
            WorkRequest::send(10),
            read_resp(Opcode::RC_READ_RESPONSE_ONLY, 0, 10),
        ),
        (WorkRequest::read(10, 0, 1), atomic_ack(0, 5)),
        (
            WorkRequest::read(2500, 0, 1),
            read_resp(Opcode::RC_READ_RESPONSE_MIDDLE, 0, 1024),
        ),
        (
            WorkRequest::read(2500, 0, 1),
            read_resp(Opcode::RC_READ_RESPONSE_LAST, 0, 1024),
        ),
        (WorkRequest::read(10, 0, 1), {
            let mut p = read_resp(Opcode::RC_READ_RESPONSE_ONLY, 0, 10);
            p.ext.aeth.as_mut().unwrap().syndrome = metaroce_codec::ext::Syndrome(0x20);
            p
        }),
    ];
    for (i, (wr, resp)) in cases.into_iter().enumerate() {
        let s = state(rc(1024));
        let (s, _) = s.post_send(wr, 0);
        let (s, _) = s.post_send(WorkRequest::send(1), 0);
        let (_, out) = respond(s, &resp, 1);
        assert_eq!(
            completions(&out),
            vec![(0, WcStatus::BadRespErr), (1, WcStatus::WrFlushErr)],
            "case {i}"
        );
        assert!(enters_error(&out));
    }
    // FLUSH and ATOMIC WRITE accept a READ Response Only without payload.
    let s = state(rc(1024));
    let (s, _) = s.post_send(WorkRequest::new(WrOp::AtomicWrite { va: 8, rkey: 1 }, 8), 0);
    let (_, out) = respond(s, &read_resp(Opcode::RC_READ_RESPONSE_ONLY, 0, 0), 1);
    assert_eq!(completions(&out), vec![(0, WcStatus::Success)]);
}

/// Robustness: every opcode, syndrome and PSN shape reaches the completer and
/// the judge without a panic.
#[test]
fn no_panic_on_any_response_shape() {
    use metaroce_spec::model::requester::judge::{JudgeConfig, RequestStreamJudge};
    let mut base = state(RequesterAttrs {
        max_rd_atomic: 1,
        ..rc(256)
    });
    for wr in [
        WorkRequest::read(600, 0, 1),
        WorkRequest::send(600),
        WorkRequest::new(
            WrOp::FetchAdd {
                va: 0,
                rkey: 1,
                add: 1,
            },
            8,
        ),
    ] {
        base = base.post_send(wr, 0).0;
    }
    let mut judge = RequestStreamJudge::new(JudgeConfig::default());
    for op in 0..=255u8 {
        for psn in [0u32, 1, 2, 3, 5, 0xFF_FFFF, 0x80_0000] {
            for syndrome in [0x00, 0x1F, 0x20, 0x3F, 0x40, 0x60, 0x61, 0x65, 0x80, 0xFF] {
                let mut p = aeth_pkt(Opcode(op), psn, syndrome);
                p.payload = vec![0; (psn as usize % 3) * 128];
                let _ = respond(base.clone(), &p, 1);
                judge.on_response(&p.pkt(), Some(1));
                let _ = judge.on_request(&p.pkt(), Some(2));
            }
        }
    }
}

/// MR-REQ-10 (SPEC v1.1): a READ response in the expected position with the
/// wrong payload length fails the READ with BAD_RESP_ERR or LOC_LEN_ERR
/// (hfi1's `ack_len_err`), and the QP enters ERR.
#[test]
fn mr_req_10_read_response_of_the_wrong_length() {
    let s = state(rc(1024));
    let (s, _) = s.post_send(WorkRequest::read(2500, 0x100, 7), 0);
    let (_, out) = respond(s, &read_resp(Opcode::RC_READ_RESPONSE_FIRST, 0, 1000), 1);
    let spec = out
        .required
        .iter()
        .find_map(|c| match &c.value {
            Effect::Complete(spec) if spec.wr == 0 => Some(spec.status.clone()),
            _ => None,
        })
        .expect("the READ completes");
    assert_eq!(
        spec,
        Field::OneOf(vec![WcStatus::BadRespErr, WcStatus::LocLenErr])
    );
    assert!(enters_error(&out), "MR-REQ-10");
}
