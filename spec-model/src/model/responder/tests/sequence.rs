//! PSN classification, sequence NAKs, MSN and ACK rules.

use super::*;

#[test]
fn expected_send_only_with_ackreq_is_executed_and_acked_mr_rsp_1_ack_1_ack_2_msn_1() {
    let st = rc(100, 1);
    let (next, o) = run(
        &st,
        &req(Opcode::RC_SEND_ONLY, 100).ack_req(true).payload(*b"hi"),
    );
    assert_eq!(next.epsn, Psn::new(101), "MR-RSP-1");
    assert_eq!(next.msn, Knowledge::Known(Msn::new(1)), "MR-MSN-1");
    assert_ack(&o, 100, 1); // MR-ACK-1, MR-ACK-2, MR-MSN-2
    assert!(o.alternatives.is_empty());
}

#[test]
fn ack_is_optional_without_ackreq_mr_ack_5() {
    let st = rc(0, 1);
    let (_, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 0));
    assert!(sent(&o).is_empty(), "MR-ACK-5: not required");
    assert_eq!(o.optional.len(), 1);
    assert!(o.optional[0].reqs.contains(&"MR-ACK-5"));
}

#[test]
fn responses_go_to_the_peer_qp_mr_ack_6() {
    let (_, o) = run(&rc(0, 1), &req(Opcode::RC_SEND_ONLY, 0).ack_req(true));
    assert_eq!(one_sent(&o).dest_qp, Field::Exact(0x12), "MR-ACK-6");
}

#[test]
fn ahead_psn_naks_once_per_gap_mr_nak_1_nak_2_sec_10() {
    let st = rc(10, 2);
    let (st, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 12).ack_req(true));
    let nak = one_sent(&o);
    assert_eq!(
        nak.syndrome,
        Some(SyndromeSpec::Exact(Syndrome::NAK_PSN_SEQ)),
        "MR-NAK-1"
    );
    assert_eq!(nak.psn, Field::Exact(Psn::new(10)), "MR-NAK-1: PSN = ePSN");
    assert_eq!(nak.msn, Field::Exact(Msn::new(0)), "MR-NAK-1: current MSN");
    assert_eq!(st.epsn, Psn::new(10), "MR-SEC-10: nothing executed");
    assert_eq!(st.recv_queue.known().map(|q| q.len()), Some(2), "MR-SEC-10");
    // A second ahead packet: silent (MR-NAK-2).
    let (st, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 13).ack_req(true));
    assert_drop(&o, "MR-NAK-2");
    // The expected packet is executed; the next gap NAKs again.
    let (st, _) = run(&st, &req(Opcode::RC_SEND_ONLY, 10).ack_req(true));
    assert_eq!(
        st.nak,
        NakState::None,
        "MR-NAK-2: reset by an executed expected packet"
    );
    let (_, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 14).ack_req(true));
    assert_eq!(one_sent(&o).psn, Field::Exact(Psn::new(11)), "MR-NAK-1");
}

#[test]
fn psn_wraps_across_0xffffff_mr_psn_1_psn_2_psn_5() {
    let mut st = rc(0xFF_FFFE, 8);
    for psn in [0xFF_FFFE, 0xFF_FFFF, 0, 1] {
        let (next, o) = run(&st, &req(Opcode::RC_SEND_ONLY, psn).ack_req(true));
        assert_eq!(one_sent(&o).psn, Field::Exact(Psn::new(psn)), "MR-PSN-5");
        st = next;
    }
    assert_eq!(st.epsn, Psn::new(2));
    // 0xFFFFFF is now a duplicate (MR-PSN-2), 3 is ahead.
    let (_, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 0xFF_FFFF).ack_req(true));
    assert_ack(&o, 1, 4); // MR-DUP-2
    let (_, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 3).ack_req(true));
    assert_eq!(
        one_sent(&o).syndrome,
        Some(SyndromeSpec::Exact(Syndrome::NAK_PSN_SEQ)),
        "MR-PSN-1"
    );
}

#[test]
fn read_wrapping_the_psn_space_mr_psn_5() {
    let st = rc(0xFF_FFFF, 0);
    let b = reth(req(Opcode::RC_READ_REQUEST, 0xFF_FFFF), VA, RKEY, 3 * PMTU);
    let (next, o) = run(&st, &b);
    let psns: Vec<_> = sent(&o).iter().map(|p| p.psn.clone()).collect();
    assert_eq!(
        psns,
        [0xFF_FFFF, 0, 1].map(|p| Field::Exact(Psn::new(p))),
        "MR-READ-2"
    );
    assert_eq!(next.epsn, Psn::new(2), "MR-RSP-1: advance by n");
}

#[test]
fn msn_counts_messages_only_mr_msn_1() {
    let st = rc(0, 1);
    let p = PMTU as usize;
    let (st, _) = run(
        &st,
        &reth(req(Opcode::RC_WRITE_FIRST, 0), VA, RKEY, 2 * PMTU).payload(vec![1; p]),
    );
    assert_eq!(
        st.msn,
        Knowledge::Known(Msn::new(0)),
        "MR-MSN-1: not on WRITE First"
    );
    let (st, o) = run(
        &st,
        &req(Opcode::RC_WRITE_LAST, 1)
            .ack_req(true)
            .payload(vec![2; p]),
    );
    assert_eq!(
        st.msn,
        Knowledge::Known(Msn::new(1)),
        "MR-MSN-1: on WRITE Last"
    );
    assert_ack(&o, 1, 1);
    let (st, _) = run(&st, &reth(req(Opcode::RC_READ_REQUEST, 2), VA, RKEY, 8));
    assert_eq!(
        st.msn,
        Knowledge::Known(Msn::new(2)),
        "MR-MSN-1: on READ accept"
    );
    let (st, _) = run(&st, &atomic(req(Opcode::RC_FETCH_ADD, 3), VA, 1, 0));
    assert_eq!(st.msn, Knowledge::Known(Msn::new(3)), "MR-MSN-1: on atomic");
}

#[test]
fn credits_mr_crd_1_crd_2() {
    let (_, o) = run(&rc(0, 2), &req(Opcode::RC_SEND_ONLY, 0).ack_req(true));
    assert_eq!(
        one_sent(&o).syndrome,
        Some(SyndromeSpec::Exact(Syndrome(0x1F))),
        "MR-CRD-1"
    );
    let mut st = rc(0, 6);
    st.features.credits = true;
    let (_, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 0).ack_req(true));
    // 5 WRs left: 4 credits (code 4), or code 31.
    assert_eq!(
        one_sent(&o).syndrome,
        Some(SyndromeSpec::AckCredits { code: 4 }),
        "MR-CRD-2"
    );
}
