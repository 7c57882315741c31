//! Duplicates and the responder resources (§6.9).

use super::*;

#[test]
fn duplicate_send_is_reacked_not_reexecuted_mr_dup_1_dup_2() {
    let (st, _) = run(
        &rc(0, 2),
        &req(Opcode::RC_SEND_ONLY, 0).ack_req(true).payload(*b"a"),
    );
    let (st, _) = run(&st, &req(Opcode::RC_SEND_ONLY, 1).payload(*b"b"));
    let (next, o) = run(
        &st,
        &req(Opcode::RC_SEND_ONLY, 0).ack_req(true).payload(*b"a"),
    );
    assert_eq!(next, st, "MR-DUP-1: no state change");
    assert_ack(&o, 1, 2); // MR-DUP-2: ePSN − 1, current MSN
    assert!(o.required[0].reqs.contains(&"MR-DUP-2"));
    assert!(
        !o.required
            .iter()
            .any(|c| matches!(c.value, Effect::Complete(_))),
        "MR-DUP-1"
    );
    // Without AckReq the ACK is optional.
    let (_, o) = run(&st, &req(Opcode::RC_SEND_ONLY, 0).payload(*b"a"));
    assert!(o.required.is_empty() && o.optional.len() == 1, "MR-ACK-5");
}

#[test]
fn duplicate_read_from_the_middle_is_reexecuted_mr_dup_4() {
    let st = rc(100, 1);
    let (st, _) = run(
        &st,
        &reth(req(Opcode::RC_READ_REQUEST, 100), VA, RKEY, 4 * PMTU),
    );
    let (st, _) = run(&st, &req(Opcode::RC_SEND_ONLY, 104).payload(*b"x"));
    // The requester lost responses 102 and 103 and re-requests from 102.
    let b = reth(
        req(Opcode::RC_READ_REQUEST, 102),
        VA + 2 * u64::from(PMTU),
        RKEY,
        2 * PMTU,
    );
    let (next, o) = run(&st, &b);
    assert_eq!(next, st, "MR-DUP-4: no state change");
    let r = sent(&o);
    assert_eq!(r.len(), 2, "MR-DUP-4");
    assert_eq!(r[0].opcode, Field::Exact(Opcode::RC_READ_RESPONSE_FIRST));
    assert_eq!(
        r[0].psn,
        Field::Exact(Psn::new(102)),
        "MR-DUP-4: starts at p"
    );
    assert_eq!(r[1].psn, Field::Exact(Psn::new(103)));
    assert_eq!(r[0].msn, Field::Exact(Msn::new(2)), "MR-MSN-2: current MSN");
    let expect: Vec<u8> = (2 * PMTU..3 * PMTU).map(|i| i as u8).collect();
    assert_eq!(
        r[0].payload,
        Field::Exact(expect),
        "MR-DUP-4: memory read again"
    );
    // Another VA (SPEC v1.1 MR-DUP-6): dropped (hfi1 would check only its
    // R_Key) or answered from its own VA, First at p (rxe answers any
    // sub-range).
    let b = reth(req(Opcode::RC_READ_REQUEST, 102), VA, RKEY, 2 * PMTU);
    let all = branches(&st, &b);
    assert_eq!(all.len(), 2, "MR-DUP-6: answer or drop");
    let answer = sent(&all[0].outcomes);
    assert_eq!(answer.len(), 2, "MR-DUP-6: as a READ of its own length");
    assert_eq!(answer[0].psn, Field::Exact(Psn::new(102)));
    let expect: Vec<u8> = (0..PMTU).map(|i| i as u8).collect();
    assert_eq!(answer[0].payload, Field::Exact(expect), "its own VA");
    assert_drop(&all[1].outcomes, "MR-DUP-6");
    // Shorter than the rest: answer or drop too.
    let b = reth(
        req(Opcode::RC_READ_REQUEST, 102),
        VA + 2 * u64::from(PMTU),
        RKEY,
        PMTU,
    );
    assert_eq!(branches(&st, &b).len(), 2, "MR-DUP-6: answer or drop");
    // Longer than the rest: dropped (MR-DUP-6).
    let b = reth(
        req(Opcode::RC_READ_REQUEST, 102),
        VA + 2 * u64::from(PMTU),
        RKEY,
        3 * PMTU,
    );
    assert_drop(&run(&st, &b).1, "MR-DUP-6");
}

#[test]
fn duplicate_atomic_replays_the_saved_value_mr_dup_5() {
    let st = rc(0, 0);
    let (st, o) = run(&st, &atomic(req(Opcode::RC_FETCH_ADD, 0), VA, 1, 0));
    let orig = one_sent(&o).atomic_orig.clone();
    let (next, o) = run(&st, &atomic(req(Opcode::RC_FETCH_ADD, 0), VA, 1, 0));
    assert_eq!(next, st, "MR-DUP-5: not executed again");
    let a = one_sent(&o);
    assert_eq!(a.atomic_orig, orig, "MR-DUP-5");
    assert_eq!(a.psn, Field::Exact(Psn::new(0)), "MR-DUP-5");
}

#[test]
fn duplicate_flush_and_atomic_write_mr_dup_7() {
    let st = rc(0, 0);
    let (st, _) = run(
        &st,
        &feth(reth(req(Opcode::RC_FLUSH, 0), VA, RKEY, 8), 0, 1),
    );
    let aw = reth(req(Opcode::RC_ATOMIC_WRITE, 1), VA, RKEY, 8).payload([7; 8]);
    let (st, _) = run(&st, &aw);
    let st = st.with_region(MemoryRegion::new(1, 1, 0, 8, AccessFlags::ALL));
    let (next, o) = run(&st, &aw);
    assert_eq!(next, st, "MR-DUP-7: not written again");
    assert_eq!(
        one_sent(&o).opcode,
        Field::Exact(Opcode::RC_READ_RESPONSE_ONLY),
        "MR-DUP-7"
    );
    assert!(
        !o.required
            .iter()
            .any(|c| matches!(c.value, Effect::Write { .. })),
        "MR-DUP-7"
    );
    let (_, o) = run(
        &st,
        &feth(reth(req(Opcode::RC_FLUSH, 0), VA, RKEY, 8), 0, 1),
    );
    assert_eq!(one_sent(&o).psn, Field::Exact(Psn::new(0)), "MR-DUP-7");
}

#[test]
fn ring_reuses_the_oldest_slot_and_evicted_duplicates_drop_mr_dup_3_dup_6() {
    let mut st = rc(0, 0); // 4 responder resources
    for psn in 0..5 {
        let (next, o) = run(&st, &atomic(req(Opcode::RC_FETCH_ADD, psn), VA, 1, 0));
        assert_eq!(
            one_sent(&o).opcode,
            Field::Exact(Opcode::RC_ATOMIC_ACK),
            "MR-DUP-3: no NAK"
        );
        st = next;
    }
    // PSN 0 is beyond the 4 slots the QP must keep (SPEC v1.1 MR-DUP-3:
    // keeping more is allowed): replayed or dropped. PSN 1 is kept: replayed.
    let old = branches(&st, &atomic(req(Opcode::RC_FETCH_ADD, 0), VA, 1, 0));
    assert_eq!(old.len(), 2, "MR-DUP-3: perhaps kept");
    assert_eq!(
        one_sent(&old[0].outcomes).opcode,
        Field::Exact(Opcode::RC_ATOMIC_ACK),
        "MR-DUP-5"
    );
    assert_drop(&old[1].outcomes, "MR-DUP-6");
    let (_, o) = run(&st, &atomic(req(Opcode::RC_FETCH_ADD, 1), VA, 1, 0));
    assert_eq!(
        one_sent(&o).opcode,
        Field::Exact(Opcode::RC_ATOMIC_ACK),
        "MR-DUP-5"
    );
    // A duplicate READ that was never accepted: dropped.
    let (_, o) = run(&st, &reth(req(Opcode::RC_READ_REQUEST, 2), VA, RKEY, 8));
    assert_drop(&o, "MR-DUP-6");
}
