//! UD (§6.20) and UC (§6.21) receive.

use super::*;
use metaroce_codec::ext::DethRepr;

fn ud(recvs: &[u32]) -> ResponderState {
    let attrs = QpAttributes {
        pmtu: PMTU,
        ..QpAttributes::defaults()
    };
    let mut st = ResponderState::new(QpType::Ud, attrs, Features::ALL, Psn::new(0))
        .with_qp_state(QpState::Rts);
    for (id, &cap) in recvs.iter().enumerate() {
        st = st.post_recv(RecvWr::new(id as u64, cap));
    }
    st
}

fn ud_send(psn: u32, qkey: u32, len: usize) -> PacketBuilder {
    req(Opcode::UD_SEND_ONLY, psn)
        .deth(DethRepr {
            qkey,
            reserved: 0,
            src_qp: 0x33,
        })
        .payload(vec![1; len])
}

#[test]
fn ud_delivers_with_40_bytes_of_header_space_mr_ud_6_ud_3() {
    let (next, o) = run(&ud(&[100]), &ud_send(77, 0x1111_1111, 10));
    assert!(sent(&o).is_empty(), "MR-UD-3");
    assert!(o.required.iter().any(|c| matches!(&c.value,
        Effect::Complete(c) if c.byte_len == Field::Exact(50) && c.status == Field::Exact(WcStatus::Success))), "MR-UD-6");
    assert_eq!(next.recv_queue.known().map(|q| q.len()), Some(0));
    // Any PSN is accepted: no sequence checks (MR-UD-3).
    let (_, o) = run(
        &next.post_recv(RecvWr::new(9, 100)),
        &ud_send(5, 0x1111_1111, 1),
    );
    assert!(sent(&o).is_empty() && o.required.len() == 1, "MR-UD-3");
}

#[test]
fn ud_drops_mr_ud_2_ud_7_ud_9() {
    assert_drop(&run(&ud(&[100]), &ud_send(0, 0x2222, 10)).1, "MR-UD-2");
    assert_drop(&run(&ud(&[]), &ud_send(0, 0x1111_1111, 10)).1, "MR-UD-7");
    assert_drop(
        &run(&ud(&[9000]), &ud_send(0, 0x1111_1111, PMTU as usize + 4)).1,
        "MR-UD-9",
    );
    // RC opcodes on a UD QP (MR-OPC-3).
    assert_drop(
        &run(&ud(&[100]), &req(Opcode::RC_SEND_ONLY, 0)).1,
        "MR-OPC-3",
    );
}

#[test]
fn ud_buffer_too_small_drops_or_fails_the_wr_mr_ud_8() {
    let st = ud(&[45]);
    let all = branches(&st, &ud_send(0, 0x1111_1111, 10));
    assert_eq!(all.len(), 2, "MR-UD-8");
    assert_drop(&all[0].outcomes, "MR-UD-8");
    assert_eq!(
        all[0].state.recv_queue.known().map(|q| q.len()),
        Some(1),
        "not consumed"
    );
    assert!(
        all[1].outcomes.required.iter().any(|c| matches!(&c.value,
        Effect::Complete(c) if c.status == Field::Exact(WcStatus::LocLenErr))),
        "MR-UD-8"
    );
    assert!(
        all.iter().all(|b| b.state.qp_state == QpState::Rts),
        "MR-UD-8"
    );
}

fn uc(recvs: u64) -> ResponderState {
    let attrs = QpAttributes {
        pmtu: PMTU,
        ..QpAttributes::defaults()
    };
    let mut st = ResponderState::new(QpType::Uc, attrs, Features::ALL, Psn::new(0))
        .with_qp_state(QpState::Rts)
        .with_region(MemoryRegion::new(RKEY, 1, VA, 4096, AccessFlags::ALL));
    for id in 0..recvs {
        st = st.post_recv(RecvWr::new(id, 4096));
    }
    st
}

#[test]
fn uc_never_acknowledges_mr_uc_1() {
    let (next, o) = run(
        &uc(1),
        &req(Opcode::UC_SEND_ONLY, 0).ack_req(true).payload(*b"x"),
    );
    assert!(sent(&o).is_empty() && o.optional.is_empty(), "MR-UC-1");
    assert!(
        o.required
            .iter()
            .any(|c| matches!(c.value, Effect::Complete(_)))
    );
    assert_eq!(next.epsn, Psn::new(1));
}

#[test]
fn uc_resynchronises_on_first_or_only_mr_uc_2() {
    let p = PMTU as usize;
    let st = uc(2);
    // A gap before an Only: accepted, ePSN resynchronised.
    let (st, o) = run(&st, &req(Opcode::UC_SEND_ONLY, 10).payload(*b"x"));
    assert!(
        o.required
            .iter()
            .any(|c| matches!(c.value, Effect::Complete(_))),
        "MR-UC-2"
    );
    assert_eq!(st.epsn, Psn::new(11), "MR-UC-2");
    // A First in sequence, then its Middle is lost: the Last is dropped.
    let (st, _) = run(&st, &req(Opcode::UC_SEND_FIRST, 11).payload(vec![0; p]));
    let (st, o) = run(&st, &req(Opcode(0x22), 13).payload(*b"end"));
    assert_drop(&o, "MR-UC-2");
    assert_eq!(
        st.in_progress,
        Knowledge::Known(None),
        "MR-UC-2: rest of message dropped"
    );
    assert_eq!(st.qp_state, QpState::Rts);
}

#[test]
fn uc_errors_drop_the_message_silently_mr_uc_3() {
    // No receive WR: no RNR NAK, a silent drop.
    let (st, o) = run(&uc(0), &req(Opcode::UC_SEND_ONLY, 0).payload(*b"x"));
    assert_drop(&o, "MR-UC-3");
    assert_eq!(
        (st.qp_state, st.epsn),
        (QpState::Rts, Psn::new(1)),
        "MR-UC-3"
    );
    // A bad R_Key: silent drop, QP stays in RTS.
    let b = reth(req(Opcode::UC_WRITE_ONLY, 0), VA, RKEY + 1, 1).payload(*b"x");
    let (st, o) = run(&uc(0), &b);
    assert_drop(&o, "MR-UC-3");
    assert_eq!(st.qp_state, QpState::Rts, "MR-UC-3");
    // A Middle with no message in progress: silent drop.
    let (_, o) = run(
        &uc(0),
        &req(Opcode(0x21), 0).payload(vec![0; PMTU as usize]),
    );
    assert_drop(&o, "MR-UC-3");
}
