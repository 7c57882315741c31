//! Execution: placement, completions, READ responses, atomics, FLUSH, ATOMIC WRITE, RNR.

use super::*;

#[test]
fn multi_packet_read_mr_read_2_read_3_read_6_msn_3() {
    let st = rc(7, 0);
    let (next, o) = run(
        &st,
        &reth(
            req(Opcode::RC_READ_REQUEST, 7),
            VA + 16,
            RKEY,
            2 * PMTU + 10,
        ),
    );
    let r = sent(&o);
    let ops: Vec<_> = r.iter().map(|p| p.opcode.clone()).collect();
    assert_eq!(
        ops,
        [
            Opcode::RC_READ_RESPONSE_FIRST,
            Opcode::RC_READ_RESPONSE_MIDDLE,
            Opcode::RC_READ_RESPONSE_LAST
        ]
        .map(Field::Exact),
        "MR-READ-2"
    );
    assert_eq!(r[0].psn, Field::Exact(Psn::new(7)), "MR-READ-2");
    assert_eq!(r[2].psn, Field::Exact(Psn::new(9)), "MR-READ-2");
    assert!(
        r[0].syndrome.is_some() && r[2].syndrome.is_some(),
        "MR-READ-3: AETH on First and Last"
    );
    assert!(r[1].syndrome.is_none(), "MR-READ-3: no AETH on Middle");
    assert_eq!(
        r[0].msn,
        Field::Exact(Msn::new(1)),
        "MR-MSN-3: the MSN counts the READ"
    );
    let expect: Vec<u8> = (16..16 + 2 * PMTU + 10).map(|i| i as u8).collect();
    let got: Vec<u8> = r
        .iter()
        .flat_map(|p| match &p.payload {
            Field::Exact(b) => b.clone(),
            _ => panic!("contents are known"),
        })
        .collect();
    assert_eq!(got, expect, "MR-READ-6, MR-SEC-6: only bytes of the range");
    assert_eq!(next.epsn, Psn::new(10), "MR-RSP-1");
    assert_eq!(next.resources.len(), 1, "MR-DUP-3");
}

#[test]
fn write_places_bytes_and_write_imm_completes_mr_rsp_14_rsp_12_ext_4() {
    let st = rc(0, 1);
    let b = imm(
        reth(req(Opcode::RC_WRITE_ONLY_IMM, 0), VA + 8, RKEY, 3).ack_req(true),
        0xCAFE_F00D,
    )
    .payload(*b"abc");
    let (next, o) = run(&st, &b);
    assert!(
        o.required.iter().any(|c| c.value
            == Effect::Write {
                key: RKEY,
                offset: 8,
                bytes: b"abc".to_vec()
            }),
        "MR-RSP-14"
    );
    assert!(
        o.required.iter().any(|c| matches!(&c.value,
        Effect::Complete(c) if c.wr == 0 && c.imm == Field::Exact(Some(0xCAFE_F00D)))),
        "MR-EXT-4"
    );
    assert_eq!(
        next.region(RKEY).unwrap().read(VA + 8, 3),
        Field::Exact(b"abc".to_vec())
    );
    assert_ack(&o, 0, 1);
}

#[test]
fn send_completes_receive_wrs_in_order_mr_rsp_12_rsp_13() {
    let st = rc(0, 2);
    let p = PMTU as usize;
    let (st, o) = run(&st, &req(Opcode::RC_SEND_FIRST, 0).payload(vec![1; p]));
    assert!(
        !o.required
            .iter()
            .any(|c| matches!(c.value, Effect::Complete(_)))
    );
    let (st, o) = run(
        &st,
        &imm(req(Opcode::RC_SEND_LAST_IMM, 1), 7).payload(*b"xy"),
    );
    let done = |o: &Outcomes| {
        o.required
            .iter()
            .find_map(|c| match &c.value {
                Effect::Complete(c) => Some(c.clone()),
                _ => None,
            })
            .expect("a completion")
    };
    let c = done(&o);
    assert_eq!(
        (c.wr, c.byte_len, c.imm),
        (0, Field::Exact(PMTU + 2), Field::Exact(Some(7))),
        "MR-RSP-12"
    );
    let (_, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 2).payload(*b"z"));
    assert_eq!(done(&o).wr, 1, "MR-RSP-13");
}

#[test]
fn atomics_execute_once_with_original_value_mr_atom_3_atom_4() {
    let st = rc(0, 0);
    let word = |st: &ResponderState| st.region(RKEY).unwrap().read_u64(VA + 8).unwrap();
    let start = word(&st);
    let (st, o) = run(&st, &atomic(req(Opcode::RC_FETCH_ADD, 0), VA + 8, 5, 0));
    let a = one_sent(&o);
    assert_eq!(a.opcode, Field::Exact(Opcode::RC_ATOMIC_ACK), "MR-ATOM-4");
    assert_eq!(a.psn, Field::Exact(Psn::new(0)), "MR-ATOM-4");
    assert_eq!(a.atomic_orig, Field::Exact(start), "MR-ATOM-4");
    assert_eq!(a.msn, Field::Exact(Msn::new(1)), "MR-ATOM-4");
    assert_eq!(word(&st), start.wrapping_add(5), "MR-ATOM-3");
    // Compare-Swap that does not match: no write, original returned.
    let (st2, o) = run(&st, &atomic(req(Opcode::RC_CMP_SWAP, 1), VA + 8, 99, 0));
    assert_eq!(
        one_sent(&o).atomic_orig,
        Field::Exact(start + 5),
        "MR-ATOM-3"
    );
    assert_eq!(word(&st2), start + 5);
    // One that matches swaps.
    let (st3, _) = run(
        &st,
        &atomic(req(Opcode::RC_CMP_SWAP, 1), VA + 8, 99, start + 5),
    );
    assert_eq!(word(&st3), 99, "MR-ATOM-3");
}

#[test]
fn flush_and_atomic_write_answer_with_empty_read_response_mr_flush_4_flush_6() {
    let st = rc(0, 0);
    let (st, o) = run(
        &st,
        &feth(reth(req(Opcode::RC_FLUSH, 0), VA, RKEY, 64), 0, 1),
    );
    let r = one_sent(&o);
    assert_eq!(
        r.opcode,
        Field::Exact(Opcode::RC_READ_RESPONSE_ONLY),
        "MR-FLUSH-4"
    );
    assert_eq!(
        (r.psn.clone(), r.payload.clone()),
        (Field::Exact(Psn::new(0)), Field::Exact(vec![])),
        "MR-FLUSH-4"
    );
    let b = reth(req(Opcode::RC_ATOMIC_WRITE, 1), VA + 16, RKEY, 8).payload([9; 8]);
    let (st, o) = run(&st, &b);
    assert_eq!(
        one_sent(&o).msn,
        Field::Exact(Msn::new(2)),
        "MR-FLUSH-4, MR-MSN-1"
    );
    assert_eq!(
        st.region(RKEY).unwrap().read(VA + 16, 8),
        Field::Exact(vec![9; 8]),
        "MR-FLUSH-6"
    );
}

#[test]
fn rnr_then_retry_mr_rnr_1_rnr_2() {
    let st = rc(20, 0);
    let (st, o) = run(
        &st,
        &req(Opcode::RC_SEND_ONLY, 20).ack_req(true).payload(*b"hi"),
    );
    let n = one_sent(&o);
    assert_eq!(
        n.syndrome,
        Some(SyndromeSpec::RnrNak { timer: 12 }),
        "MR-RNR-1"
    );
    assert_eq!(n.psn, Field::Exact(Psn::new(20)), "MR-RNR-1");
    assert_eq!(n.msn, Field::Exact(Msn::new(0)), "MR-RNR-1");
    assert_eq!(st.epsn, Psn::new(20), "MR-RNR-1: ePSN unchanged");
    assert_eq!(st.qp_state, QpState::Rts, "RNR is not fatal");
    // The requester's later packets arrive: silently dropped, no sequence NAK.
    let (st, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 21).ack_req(true));
    assert_drop(&o, "MR-RNR-2");
    // A receive WR is posted; the retry succeeds.
    let st = st.post_recv(RecvWr::new(0, 64));
    let (st, o) = run(
        &st,
        &req(Opcode::RC_SEND_ONLY, 20).ack_req(true).payload(*b"hi"),
    );
    assert_ack(&o, 20, 1);
    assert_eq!(st.nak, NakState::None);
    // An ahead packet now gets a sequence NAK again.
    let (_, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 23).ack_req(true));
    assert_eq!(
        one_sent(&o).syndrome,
        Some(SyndromeSpec::Exact(Syndrome::NAK_PSN_SEQ))
    );
}

#[test]
fn rnr_for_write_with_immediate_mr_rnr_1() {
    let b = reth(req(Opcode::RC_WRITE_ONLY_IMM, 0), VA, RKEY, 1).payload(*b"x");
    let (st, o) = run(&rc(0, 0), &imm(b, 1));
    assert_eq!(
        one_sent(&o).syndrome,
        Some(SyndromeSpec::RnrNak { timer: 12 }),
        "MR-RNR-1"
    );
    assert!(
        !o.required
            .iter()
            .any(|c| matches!(c.value, Effect::Write { .. }))
    );
    assert_eq!(st.epsn, Psn::new(0));
}
