//! State learned from a capture: unknown receive queue, memory, MSN and message boundaries.

use super::*;

fn learned(first: &PacketBuilder) -> ResponderState {
    let frame = first.frame();
    let pkt = frame.roce.unwrap();
    ResponderState::learned(
        QpType::Rc,
        QpAttributes::unknown(PMTU, 0xFFFF),
        Features::ALL,
        &pkt,
    )
}

fn has_syndrome(o: &Outcomes, want: SyndromeSpec) -> bool {
    sent(o).iter().any(|p| p.syndrome == Some(want))
}

#[test]
fn learned_state_starts_at_the_first_psn_with_unknown_msn() {
    let b = req(Opcode::RC_SEND_ONLY, 500).ack_req(true).payload(*b"x");
    let st = learned(&b);
    assert_eq!(st.epsn, Psn::new(500));
    assert_eq!(st.msn, Knowledge::Unknown);
    let all = branches(&st, &b);
    // Executed (ACK, any MSN), RNR (queue unknown), or NAK 0x61 (a message may
    // have been in progress before the capture started).
    let ack = &all[0];
    assert_eq!(one_sent(&ack.outcomes).msn, Field::Any, "MSN unknown");
    assert_eq!(
        one_sent(&ack.outcomes).psn,
        Field::Exact(Psn::new(500)),
        "MR-ACK-2"
    );
    assert!(
        all.iter()
            .any(|b| has_syndrome(&b.outcomes, SyndromeSpec::AnyRnrNak)),
        "MR-RNR-1"
    );
    assert!(
        all.iter().any(|b| has_syndrome(
            &b.outcomes,
            SyndromeSpec::Exact(Syndrome::NAK_INVALID_REQUEST)
        )),
        "MR-RSP-2"
    );
    // on_request folds the other branches into alternatives.
    let (_, o) = run(&st, &b);
    assert_eq!(o.alternatives.len(), all.len() - 1);
}

#[test]
fn send_to_unknown_receive_buffers_may_nak_mr_rsp_8_mr_rsp_9() {
    // The observer never saw the receive work request: its buffers may be
    // too short (NAK 0x61) or not writable (NAK 0x63). Found by the
    // differential fuzz target: the reference transport's NAK 0x63 for an
    // unwritable receive buffer was a MUST finding of the conversation judge.
    for op in [Opcode::RC_SEND_ONLY, Opcode::RC_SEND_FIRST] {
        let mut b = req(op, 9).ack_req(true).payload(vec![0; PMTU as usize]);
        if op == Opcode::RC_SEND_ONLY {
            b = b.payload(*b"x");
        }
        let st = learned(&b);
        let all = branches(&st, &b);
        for (code, id) in [
            (Syndrome::NAK_INVALID_REQUEST, "MR-RSP-8"),
            (Syndrome::NAK_REMOTE_OP, "MR-RSP-9"),
        ] {
            assert!(
                all.iter()
                    .any(|b| has_syndrome(&b.outcomes, SyndromeSpec::Exact(code))),
                "{id}: {op:?}"
            );
        }
    }
}

#[test]
fn learned_msn_is_then_enforced_mr_msn_1() {
    let b = req(Opcode::RC_SEND_ONLY, 7).ack_req(true);
    let st = learned(&b);
    let (st, _) = run(&st, &b);
    let st = st.learn_msn(Msn::new(41)); // the ACK the responder sent carried MSN 41
    let (st, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 8).ack_req(true));
    assert_ack(&o, 8, 42);
    // A second learn does not override what is known.
    assert_eq!(
        st.learn_msn(Msn::new(1)).msn,
        Knowledge::Known(Msn::new(42))
    );
}

#[test]
fn write_to_unknown_memory_allows_ack_or_nak_0x62() {
    let first = reth(req(Opcode::RC_WRITE_ONLY, 3), VA, RKEY, 4)
        .ack_req(true)
        .payload(*b"abcd");
    let st = learned(&first);
    let all = branches(&st, &first);
    assert_eq!(
        one_sent(&all[0].outcomes).opcode,
        Field::Exact(Opcode::RC_ACK)
    );
    assert!(
        all.iter().any(|b| has_syndrome(
            &b.outcomes,
            SyndromeSpec::Exact(Syndrome::NAK_REMOTE_ACCESS)
        )),
        "MR-RSP-6"
    );
    assert!(
        all.iter().any(|b| has_syndrome(
            &b.outcomes,
            SyndromeSpec::Exact(Syndrome::NAK_INVALID_REQUEST)
        )),
        "MR-RSP-3"
    );
    // No placement is claimed for memory the model does not know.
    assert!(
        !all[0]
            .outcomes
            .required
            .iter()
            .any(|c| matches!(c.value, Effect::Write { .. }))
    );
}

#[test]
fn read_of_unknown_contents_allows_any_payload() {
    let first = reth(req(Opcode::RC_READ_REQUEST, 0), VA, RKEY, 2 * PMTU);
    let st = learned(&first);
    let (next, o) = run(&st, &first);
    let r = sent(&o);
    assert_eq!(r.len(), 2, "MR-READ-2");
    assert!(r.iter().all(|p| p.payload == Field::Any));
    assert_eq!(next.epsn, Psn::new(2));
    // The READ is now kept: its duplicate is re-executed (MR-DUP-4) or, where
    // the R_Key cannot be checked, NAKed.
    let all = branches(&next, &first);
    assert_eq!(sent(&all[0].outcomes).len(), 2, "MR-DUP-4");
}

#[test]
fn duplicates_of_requests_before_the_capture_are_replayed_or_dropped() {
    let st = learned(&req(Opcode::RC_SEND_ONLY, 1000));
    let all = branches(&st, &atomic(req(Opcode::RC_CMP_SWAP, 990), VA, 1, 0));
    assert_eq!(all.len(), 2);
    assert_eq!(
        one_sent(&all[0].outcomes).atomic_orig,
        Field::Any,
        "MR-DUP-5"
    );
    assert_drop(&all[1].outcomes, "MR-DUP-6");
}

#[test]
fn middle_packet_first_seen_continues_an_unknown_message() {
    let b = req(Opcode::RC_WRITE_MIDDLE, 50).payload(vec![0; PMTU as usize]);
    let st = learned(&b);
    let all = branches(&st, &b);
    assert_eq!(all[0].state.epsn, Psn::new(51));
    assert!(matches!(
        all[0].state.in_progress,
        Knowledge::Known(Some(Message::Write {
            target: Knowledge::Unknown
        }))
    ));
    assert!(
        all.iter().any(|b| b.state.qp_state == QpState::Err),
        "MR-RSP-2 alternative"
    );
    let (st, o) = run(
        &all[0].state,
        &req(Opcode::RC_WRITE_LAST, 51).ack_req(true).payload(*b"e"),
    );
    assert_eq!(one_sent(&o).psn, Field::Exact(Psn::new(51)));
    assert_eq!(st.in_progress, Knowledge::Known(None));
}
