//! Ordered messages (MPETH O, SPEC v1.2 §7.5) at a responder that declares
//! `mp_ordered_write` (MR-MPP-20), and at one that does not (MR-MPH-7).

use super::*;

/// `b` with MPETH O set.
fn ordered(b: metaroce_codec::PacketBuilder) -> metaroce_codec::PacketBuilder {
    b.ext(|e| {
        if let Some(m) = &mut e.mpeth {
            m.ordered = true;
        }
    })
}

/// The responder of the other tests, declaring `mp_ordered_write`, with
/// `staged` bytes of staging.
fn honouring(staged: u64) -> MpResponder {
    let mut r = responder();
    r.cfg.ordered_write = true;
    r.cfg.max_staged_bytes = staged;
    r
}

#[test]
fn ordered_write_waits_for_every_earlier_message_mr_mpp_20() {
    let r = honouring(4096);
    // MSN 0: its second packet only; placed at once (MR-MPP-1).
    let (r, o) = step(&r, write(101, 0, 256, 300, VA, RKEY, &[5; 44]), 0);
    assert_eq!(writes(&o), vec![(RKEY, 256, vec![5; 44])]);
    // MSN 1, ordered: staged, so reported received (MR-MPA-9), not placed.
    let (r, o) = step(
        &r,
        ordered(write(102, 1, 0, 4, VA + 1000, RKEY, &[9; 4])),
        1,
    );
    assert!(writes(&o).is_empty(), "MR-MPP-20");
    assert!(r.received.is_received(psn(102)));
    // A later WRITE without O is placed at once (MR-MPP-1).
    let (r, o) = step(&r, write(103, 2, 0, 2, VA + 2000, RKEY, &[3; 2]), 2);
    assert_eq!(writes(&o), vec![(RKEY, 2000, vec![3; 2])]);
    // MSN 0 completes: the ordered WRITE is placed after its bytes.
    let (r, o) = step(&r, write(100, 0, 0, 300, VA, RKEY, &[7; 256]), 3);
    assert_eq!(
        writes(&o),
        vec![(RKEY, 0, vec![7; 256]), (RKEY, 1000, vec![9; 4])],
        "MR-MPP-20"
    );
    assert_eq!(r.completed, 3);
    assert_eq!(r.ack_msn(), Msn::new(2), "MR-MPP-22");
}

#[test]
fn ordered_write_without_staging_room_is_refused_mr_mpp_20() {
    // No staging: neither placed nor reported received (MR-MPA-9).
    let r = honouring(0);
    let (r, _) = step(&r, write(101, 0, 256, 300, VA, RKEY, &[5; 44]), 0);
    let (r, o) = step(
        &r,
        ordered(write(102, 1, 0, 4, VA + 1000, RKEY, &[9; 4])),
        1,
    );
    assert!(writes(&o).is_empty(), "MR-MPP-20");
    assert!(!r.received.is_received(psn(102)), "MR-MPA-9");
    // Its retransmission after MSN 0 completed is placed on arrival.
    let (r, _) = step(&r, write(100, 0, 0, 300, VA, RKEY, &[7; 256]), 2);
    let (r, o) = step(
        &r,
        ordered(write(102, 1, 0, 4, VA + 1000, RKEY, &[9; 4])),
        3,
    );
    assert_eq!(writes(&o), vec![(RKEY, 1000, vec![9; 4])]);
    assert_eq!(r.completed, 2);
}

#[test]
fn ordered_send_waits_too_mr_mpp_20() {
    let r = honouring(4096);
    let (r, _) = step(&r, write(101, 0, 256, 300, VA, RKEY, &[5; 44]), 0);
    let (r, o) = step(&r, ordered(req(Opcode::MP_SEND, 102, 1, 0, 3, &[3; 3])), 1);
    assert!(writes(&o).is_empty(), "MR-MPP-20");
    let (r, o) = step(&r, write(100, 0, 0, 300, VA, RKEY, &[7; 256]), 2);
    assert_eq!(
        writes(&o),
        vec![(RKEY, 0, vec![7; 256]), (BUF, 0, vec![3; 3])],
        "MR-MPP-20"
    );
    assert_eq!(r.completed, 2);
}

#[test]
fn o_is_ignored_without_mp_ordered_write_mr_mph_7() {
    let r = responder();
    let (r, _) = step(&r, write(101, 0, 256, 300, VA, RKEY, &[5; 44]), 0);
    let (_, o) = step(
        &r,
        ordered(write(102, 1, 0, 4, VA + 1000, RKEY, &[9; 4])),
        1,
    );
    assert_eq!(writes(&o), vec![(RKEY, 1000, vec![9; 4])], "MR-MPH-7");
}
