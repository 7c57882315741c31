//! The checks of §6.6 and §9.2, conforming and violating cases.

use super::*;

#[test]
fn state_gate_mr_qp_3_qp_4_qp_5() {
    let b = req(Opcode::RC_SEND_ONLY, 0).ack_req(true);
    for (state, id) in [
        (QpState::Reset, "MR-QP-3"),
        (QpState::Init, "MR-QP-3"),
        (QpState::Err, "MR-QP-5"),
    ] {
        let st = rc(0, 1).with_qp_state(state);
        let (next, o) = run(&st, &b);
        assert_drop(&o, id);
        assert_eq!(next, st, "{id}");
    }
    // RTR: requests processed, responses dropped.
    let st = rc(0, 1).with_qp_state(QpState::Rtr);
    let (_, o) = run(&st, &b);
    assert_ack(&o, 0, 1); // MR-QP-4
    let (_, o) = run(&st, &req(Opcode::RC_ACK, 0));
    assert_drop(&o, "MR-QP-4");
}

#[test]
fn header_checks_mr_bth_1_bth_5_opc_2_opc_3_opc_4_rob_4_pics_3() {
    let st = rc(0, 1);
    let (_, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 0).bth(|b| b.tver = 1));
    assert_drop(&o, "MR-BTH-1");
    let (_, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 0).bth(|b| b.pkey = 0x1234));
    assert_drop(&o, "MR-BTH-5");
    // The membership bit is ignored.
    let (_, o) = run(
        &st,
        &req(Opcode::RC_SEND_ONLY, 0)
            .ack_req(true)
            .bth(|b| b.pkey = 0x7FFF),
    );
    assert_ack(&o, 0, 1);
    let (_, o) = run(&st, &req(Opcode(0x15), 0));
    assert_drop(&o, "MR-OPC-2");
    let (_, o) = run(&st, &req(Opcode::UC_SEND_ONLY, 0));
    assert_drop(&o, "MR-OPC-3");
    let (_, o) = run(&st, &req(Opcode::MP_SEND, 0));
    assert_drop(&o, "MR-OPC-3");
    let (_, o) = run(&st, &req(Opcode(0x44), 0));
    assert_drop(&o, "MR-OPC-4");
    let (_, o) = run(&st, &req(Opcode(0xE4), 0));
    assert_drop(&o, "MR-OPC-4");
    let (_, o) = run(
        &st,
        &reth(req(Opcode::RC_READ_REQUEST, 0), VA, RKEY, 8).payload(*b"xxxx"),
    );
    assert_drop(&o, "MR-ROB-4");
    let mut plain = rc(0, 1);
    plain.features = Features::DEFAULT;
    let (_, o) = run(&plain, &atomic(req(Opcode::RC_FETCH_ADD, 0), VA, 1, 0));
    assert_drop(&o, "MR-PICS-3");
    // A CNP is not the responder's: nothing at all (MR-CNP-5).
    let (next, o) = run(&st, &PacketBuilder::new(Opcode::CNP).dest_qp(0x11));
    assert_eq!((next, o), (st, Outcomes::none()), "MR-CNP-5");
}

#[test]
fn opcode_sequence_mr_rsp_2() {
    let p = PMTU as usize;
    // Middle without First.
    let (st, o) = run(
        &rc(0, 1),
        &req(Opcode::RC_SEND_MIDDLE, 0).payload(vec![0; p]),
    );
    assert_fatal(&st, &o, 0x61, 0, "MR-RSP-2");
    // SEND in progress, WRITE Middle arrives.
    let (st, _) = run(
        &rc(0, 1),
        &req(Opcode::RC_SEND_FIRST, 0).payload(vec![0; p]),
    );
    let (st2, o) = run(&st, &req(Opcode::RC_WRITE_MIDDLE, 1).payload(vec![0; p]));
    assert_fatal(&st2, &o, 0x61, 1, "MR-RSP-2");
    // SEND in progress, READ arrives.
    let (st2, o) = run(&st, &reth(req(Opcode::RC_READ_REQUEST, 1), VA, RKEY, 8));
    assert_fatal(&st2, &o, 0x61, 1, "MR-RSP-2");
    // Conforming: SEND Middle, SEND Last.
    let (st, o) = run(&st, &req(Opcode::RC_SEND_MIDDLE, 1).payload(vec![0; p]));
    assert!(sent(&o).is_empty());
    let (_, o) = run(
        &st,
        &req(Opcode::RC_SEND_LAST, 2).ack_req(true).payload(*b"end"),
    );
    assert_ack(&o, 2, 1);
}

#[test]
fn access_and_resources_mr_rsp_3() {
    let mut st = rc(0, 1);
    st.attrs.access = Knowledge::Known(AccessFlags::WRITE);
    let (next, o) = run(&st, &reth(req(Opcode::RC_READ_REQUEST, 0), VA, RKEY, 8));
    assert_fatal(&next, &o, 0x61, 0, "MR-RSP-3");
    let (next, o) = run(&st, &atomic(req(Opcode::RC_CMP_SWAP, 0), VA, 1, 0));
    assert_fatal(&next, &o, 0x61, 0, "MR-RSP-3");
    let (next, o) = run(
        &st,
        &feth(reth(req(Opcode::RC_FLUSH, 0), VA, RKEY, 8), 0, 1),
    );
    assert_fatal(&next, &o, 0x61, 0, "MR-RSP-3");
    st.attrs.access = Knowledge::Known(AccessFlags::READ);
    let (next, o) = run(
        &st,
        &reth(req(Opcode::RC_WRITE_ONLY, 0), VA, RKEY, 1).payload(*b"x"),
    );
    assert_fatal(&next, &o, 0x61, 0, "MR-RSP-3");
    let b = reth(req(Opcode::RC_ATOMIC_WRITE, 0), VA, RKEY, 8).payload([0; 8]);
    let (next, o) = run(&st, &b);
    assert_fatal(&next, &o, 0x61, 0, "MR-RSP-3");
    // max_dest_rd_atomic 0: no RDMA-resource operation.
    let mut st = rc(0, 1);
    st.attrs.max_dest_rd_atomic = Knowledge::Known(0);
    let (next, o) = run(&st, &reth(req(Opcode::RC_READ_REQUEST, 0), VA, RKEY, 8));
    assert_fatal(&next, &o, 0x61, 0, "MR-RSP-3");
}

#[test]
fn payload_lengths_mr_rsp_4() {
    let p = PMTU as usize;
    let cases = [
        (
            req(Opcode::RC_SEND_ONLY, 0).payload(vec![0; p + 1]),
            "Only > PMTU",
        ),
        (
            req(Opcode::RC_SEND_FIRST, 0).payload(vec![0; p - 4]),
            "First < PMTU",
        ),
        (
            reth(req(Opcode::RC_WRITE_ONLY, 0), VA, RKEY, 1 << 31 | 4).payload([0; 4]),
            "DMA length > 2^31",
        ),
        (
            reth(req(Opcode::RC_READ_REQUEST, 0), VA, RKEY, u32::MAX),
            "READ DMA length > 2^31",
        ),
        (
            reth(req(Opcode::RC_ATOMIC_WRITE, 0), VA, RKEY, 8).payload([0; 4]),
            "ATOMIC WRITE 4 bytes",
        ),
    ];
    for (b, what) in cases {
        let (next, o) = run(&rc(0, 1), &b);
        assert_fatal(&next, &o, 0x61, 0, "MR-RSP-4");
        assert!(!what.is_empty());
    }
    // SEND Last empty.
    let (st, _) = run(
        &rc(0, 1),
        &req(Opcode::RC_SEND_FIRST, 0).payload(vec![0; p]),
    );
    let (next, o) = run(&st, &req(Opcode::RC_SEND_LAST, 1));
    assert_fatal(&next, &o, 0x61, 1, "MR-RSP-4");
}

#[test]
fn write_length_against_dma_length_mr_rsp_5() {
    let (next, o) = run(
        &rc(0, 0),
        &reth(req(Opcode::RC_WRITE_ONLY, 0), VA, RKEY, 8).payload([0; 9]),
    );
    assert_fatal(&next, &o, 0x61, 0, "MR-RSP-5");
    let (next, o) = run(
        &rc(0, 0),
        &reth(req(Opcode::RC_WRITE_ONLY, 0), VA, RKEY, 8).payload([0; 7]),
    );
    assert_fatal(&next, &o, 0x61, 0, "MR-RSP-5");
    let p = PMTU as usize;
    let first = reth(req(Opcode::RC_WRITE_FIRST, 0), VA, RKEY, 2 * PMTU + 1).payload(vec![0; p]);
    let (st, _) = run(&rc(0, 0), &first);
    let (next, o) = run(&st, &req(Opcode::RC_WRITE_LAST, 1).payload(vec![0; p]));
    assert_fatal(&next, &o, 0x61, 1, "MR-RSP-5"); // bytes remain
}

#[test]
fn rkey_and_range_checked_before_any_byte_mr_rsp_6_sec_4_sec_5_sec_7_sec_8() {
    let st = rc(0, 0);
    let p = PMTU as usize;
    // A multi-packet WRITE whose range ends outside the region: NAK on First, nothing written.
    let b = reth(
        req(Opcode::RC_WRITE_FIRST, 0),
        VA + 4096 - 16,
        RKEY,
        2 * PMTU,
    )
    .payload(vec![0; p]);
    let (next, o) = run(&st, &b);
    assert_fatal(&next, &o, 0x62, 0, "MR-SEC-4");
    assert!(
        !o.required
            .iter()
            .any(|c| matches!(c.value, Effect::Write { .. })),
        "MR-SEC-5"
    );
    let (next, o) = run(&st, &reth(req(Opcode::RC_READ_REQUEST, 0), VA, RKEY + 1, 8));
    assert_fatal(&next, &o, 0x62, 0, "MR-RSP-6");
    let other_pd = st.with_region(MemoryRegion::new(7, 2, 0, 64, AccessFlags::ALL));
    let (next, o) = run(&other_pd, &reth(req(Opcode::RC_READ_REQUEST, 0), 0, 7, 8));
    assert_fatal(&next, &o, 0x62, 0, "MR-RSP-6"); // MR-SEC-7
    let ro = st.with_region(MemoryRegion::new(9, 1, 0, 64, AccessFlags::READ));
    let (next, o) = run(
        &ro,
        &reth(req(Opcode::RC_WRITE_ONLY, 0), 0, 9, 1).payload(*b"x"),
    );
    assert_fatal(&next, &o, 0x62, 0, "MR-RSP-6");
    // Atomics: MR-ATOM-2.
    let (next, o) = run(&st, &atomic(req(Opcode::RC_FETCH_ADD, 0), VA + 4096, 1, 0));
    assert_fatal(&next, &o, 0x62, 0, "MR-ATOM-2");
}

#[test]
fn zero_length_read_and_write_skip_key_checks_mr_rsp_7() {
    let st = rc(0, 0);
    let (next, o) = run(
        &st,
        &reth(req(Opcode::RC_READ_REQUEST, 0), 0xDEAD, 0xBAD, 0),
    );
    let r = one_sent(&o);
    assert_eq!(
        r.opcode,
        Field::Exact(Opcode::RC_READ_RESPONSE_ONLY),
        "MR-RSP-7, MR-READ-5"
    );
    assert_eq!(r.payload, Field::Exact(vec![]), "MR-READ-5");
    assert_eq!(next.epsn, Psn::new(1));
    let (_, o) = run(
        &st,
        &reth(req(Opcode::RC_WRITE_ONLY, 0), 0xDEAD, 0xBAD, 0).ack_req(true),
    );
    assert_ack(&o, 0, 1); // MR-RSP-7
}

#[test]
fn send_longer_than_receive_buffer_mr_rsp_8() {
    let st = rc(0, 0).post_recv(RecvWr::new(5, 4));
    let (next, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 0).payload([0; 5]));
    assert_fatal(&next, &o, 0x61, 0, "MR-RSP-8");
    assert!(
        o.required.iter().any(|c| matches!(&c.value,
        Effect::Complete(c) if c.wr == 5 && c.status == Field::OneOf(vec![
            WcStatus::LocLenErr, WcStatus::LocQpOpErr, WcStatus::RemInvReqErr]))),
        "MR-RSP-8"
    );
}

#[test]
fn send_into_unwritable_buffer_mr_rsp_9() {
    let st = rc(0, 0).post_recv(RecvWr {
        writable: false,
        ..RecvWr::new(3, 64)
    });
    let (next, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 0).payload([0; 5]));
    assert_fatal(&next, &o, 0x63, 0, "MR-RSP-9");
    assert!(
        o.required.iter().any(|c| matches!(&c.value,
        Effect::Complete(c) if c.wr == 3 && c.status == Field::Exact(WcStatus::LocProtErr))),
        "MR-RSP-9"
    );
}

#[test]
fn send_with_invalidate_mr_rsp_10_sec_8() {
    let st = rc(0, 2);
    let (next, o) = run(
        &st,
        &ieth(req(Opcode::RC_SEND_ONLY_INV, 0).ack_req(true), RKEY),
    );
    assert!(
        o.required
            .iter()
            .any(|c| c.value == Effect::Invalidate { key: RKEY }),
        "MR-RSP-10"
    );
    assert!(next.region(RKEY).is_none(), "MR-RSP-10");
    // Afterwards the key is refused (MR-SEC-8).
    let (after, o) = run(&next, &reth(req(Opcode::RC_READ_REQUEST, 1), VA, RKEY, 8));
    assert_fatal(&after, &o, 0x62, 1, "MR-SEC-8");
    // An unknown key cannot be invalidated (SPEC v1.1 MR-RSP-10): a plain
    // SEND completion without the key (rdmavt), or NAK 0x61 (IBA), or a
    // positive ACK (rxe), the last two with REM_INV_REQ_ERR and ERR.
    let not_invalidated = |st: &ResponderState, key: u32| {
        let all = branches(st, &ieth(req(Opcode::RC_SEND_ONLY_INV, 0), key));
        assert_eq!(all.len(), 2, "MR-RSP-10");
        let plain = &all[0];
        assert_eq!(plain.state.epsn, Psn::new(1), "MR-RSP-10: executed");
        assert!(
            !plain
                .outcomes
                .required
                .iter()
                .any(|c| matches!(c.value, Effect::Invalidate { .. })),
            "MR-RSP-10: nothing invalidated"
        );
        assert_fatal(&all[1].state, &all[1].outcomes, 0x61, 0, "MR-RSP-10");
        let rxe = &all[1].outcomes.alternatives[0];
        assert_eq!(one_sent(rxe).opcode, Field::Exact(Opcode::RC_ACK), "rxe");
        assert!(rxe.required.iter().any(|c| c.value == Effect::EnterError));
    };
    not_invalidated(&st, 0x999);
    // Nor a bound region.
    let mut bound = st.clone();
    if let Some(r) = bound.memory.known_mut().and_then(|m| m.first_mut()) {
        r.bound = true;
    }
    not_invalidated(&bound, RKEY);
    // Nor, without `invalidate_reg_mr`, a region registered with reg_mr.
    let plain = ResponderState {
        features: Features {
            invalidate_reg_mr: false,
            ..Features::ALL
        },
        ..st.clone()
    };
    not_invalidated(&plain, RKEY);
}

#[test]
fn misaligned_atomic_mr_atom_1() {
    let (next, o) = run(
        &rc(0, 0),
        &atomic(req(Opcode::RC_CMP_SWAP, 0), VA + 4, 1, 0),
    );
    assert_fatal(&next, &o, 0x61, 0, "MR-ATOM-1");
}

#[test]
fn flush_fields_and_access_mr_flush_1_flush_2() {
    let st = rc(0, 0);
    for (sl, pt) in [(0, 0), (0, 4), (2, 1), (3, 1)] {
        let (next, o) = run(
            &st,
            &feth(reth(req(Opcode::RC_FLUSH, 0), VA, RKEY, 8), sl, pt),
        );
        assert_fatal(&next, &o, 0x61, 0, "MR-FLUSH-1");
    }
    let (next, o) = run(
        &st,
        &feth(reth(req(Opcode::RC_FLUSH, 0), VA, RKEY, 8192), 0, 1),
    );
    assert_fatal(&next, &o, 0x62, 0, "MR-FLUSH-2");
    let ro = st.with_region(MemoryRegion::new(9, 1, 0, 64, AccessFlags::READ));
    let (next, o) = run(&ro, &feth(reth(req(Opcode::RC_FLUSH, 0), 0, 9, 8), 0, 2));
    assert_fatal(&next, &o, 0x62, 0, "MR-FLUSH-2");
    // Selectivity 1 ignores the RETH range.
    let (_, o) = run(
        &st,
        &feth(reth(req(Opcode::RC_FLUSH, 0), VA, RKEY, 8192), 1, 1),
    );
    assert_eq!(
        one_sent(&o).opcode,
        Field::Exact(Opcode::RC_READ_RESPONSE_ONLY),
        "MR-FLUSH-4"
    );
}

#[test]
fn atomic_write_lengths_mr_flush_5() {
    let st = rc(0, 0);
    let (next, o) = run(
        &st,
        &reth(req(Opcode::RC_ATOMIC_WRITE, 0), VA, RKEY, 4).payload([0; 8]),
    );
    assert_fatal(&next, &o, 0x61, 0, "MR-FLUSH-5");
    let (next, o) = run(
        &st,
        &reth(req(Opcode::RC_ATOMIC_WRITE, 0), VA + 4, RKEY, 8).payload([0; 8]),
    );
    assert_fatal(&next, &o, 0x61, 0, "MR-FLUSH-5");
}

#[test]
fn fatal_nak_carries_current_msn_and_moves_to_err_mr_nak_3_rsp_11() {
    let (st, _) = run(&rc(0, 1), &req(Opcode::RC_SEND_ONLY, 0));
    let (next, o) = run(
        &st,
        &req(Opcode::RC_SEND_MIDDLE, 1).payload(vec![0; PMTU as usize]),
    );
    assert_eq!(one_sent(&o).msn, Field::Exact(Msn::new(1)), "MR-NAK-3");
    assert_fatal(&next, &o, 0x61, 1, "MR-RSP-2");
    // In ERR, everything is dropped (MR-QP-5).
    let (_, o) = run(&next, &req(Opcode::RC_SEND_ONLY, 1));
    assert_drop(&o, "MR-QP-5");
}

#[test]
fn no_nak_codes_4_to_31_mr_nak_4() {
    // Every NAK the RC responder can produce is 0x60–0x63.
    let st = rc(0, 0);
    for op in 0..=0x1Fu8 {
        let b = reth(req(Opcode(op), 0), VA, RKEY, 8).payload(vec![0; 8]);
        let (_, o) = run(&st, &b);
        for p in sent(&o) {
            if let Some(SyndromeSpec::Exact(s)) = p.syndrome {
                assert!(
                    s.0 <= 0x1F || (0x60..=0x63).contains(&s.0),
                    "MR-NAK-4: {s:?}"
                );
            }
        }
    }
}
