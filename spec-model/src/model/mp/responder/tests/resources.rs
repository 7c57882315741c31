//! MPETH placement at the responder (MR-MPH-1) and responder resources
//! (MR-MPR-10).

use super::*;

/// The responder of the other tests, keeping `n` READ and atomic operations.
fn keeping(n: usize) -> MpResponder {
    let mut r = responder();
    r.cfg.max_dest_rd_atomic = n;
    r
}

/// Whether `o` answers with MP READ Responses.
fn answers(o: &Outcomes) -> bool {
    required_sends(o)
        .iter()
        .any(|s| s.opcode == Field::Exact(Opcode::MP_READ_RESPONSE))
}

#[test]
fn request_without_mpeth_dropped_mr_mph_1() {
    let r = responder();
    // Conforming: MPETH directly after BTH; placed.
    let w = wire(write(100, 0, 0, 4, VA, RKEY, &[1; 4]));
    let (_, o) = r.on_packet(&w.roce(), &at(0, 0xC100));
    assert_eq!(writes(&o).len(), 1, "MR-MPH-1");
    // Violating: the same MP WRITE without MPETH: dropped, nothing placed.
    let mut bad = w.roce();
    bad.ext.mpeth = None;
    let (r2, o) = r.on_packet(&bad, &at(0, 0xC100));
    assert!(writes(&o).is_empty(), "MR-MPH-1");
    assert_eq!(o.required[0].reqs, &["MR-MPH-1"]);
    assert_eq!(o.required[0].value, Effect::Drop { counter: None });
    assert!(!r2.received.is_received(psn(100)));
}

#[test]
fn last_max_dest_rd_atomic_kept_mr_mpr_10() {
    // Three READs (MSN 0, 1, 2; 256 bytes each) with two resources.
    let mut r = keeping(2);
    for i in 0..3u32 {
        let (n, o) = step(&r, read(100 + i, i, 0, 256, VA, RKEY, 256), u64::from(i));
        assert!(answers(&o));
        r = n;
    }
    assert_eq!(r.resources.len(), 2, "MR-MPR-10: the last two");
    // The two newest are answered again when their requests repeat ...
    for i in 1..3u32 {
        let (_, o) = step(&r, read(100 + i, i, 0, 256, VA, RKEY, 256), 10);
        assert!(answers(&o), "MR-MPR-10: READ {i} kept");
    }
    // ... the oldest, evicted, is not.
    let (_, o) = step(&r, read(100, 0, 0, 256, VA, RKEY, 256), 10);
    assert!(!answers(&o), "MR-MPR-10: READ 0 evicted");
    // With three resources, all three are kept.
    let mut r = keeping(3);
    for i in 0..3u32 {
        r = step(&r, read(100 + i, i, 0, 256, VA, RKEY, 256), u64::from(i)).0;
    }
    let (_, o) = step(&r, read(100, 0, 0, 256, VA, RKEY, 256), 10);
    assert!(answers(&o), "MR-MPR-10: READ 0 kept");
}

#[test]
fn executed_atomic_kept_mr_mpr_10() {
    let r = keeping(1);
    let (r, o) = step(&r, fetch_add(100, 0, VA, RKEY, 5), 0);
    let first = required_sends(&o)
        .into_iter()
        .find(|s| s.opcode == Field::Exact(Opcode::MP_ATOMIC_ACK))
        .cloned()
        .expect("atomic acknowledge");
    // The repeated request is acknowledged again with the kept value.
    let (_, o) = step(&r, fetch_add(100, 0, VA, RKEY, 5), 1);
    let again: Vec<_> = required_sends(&o)
        .into_iter()
        .filter(|s| s.opcode == Field::Exact(Opcode::MP_ATOMIC_ACK))
        .collect();
    assert_eq!(again.len(), 1, "MR-MPR-10");
    assert_eq!(again[0].atomic_orig, first.atomic_orig, "MR-MPR-10");
    // A later READ evicts it (one resource): the repeat gets an MP ACK only.
    let (r, _) = step(&r, read(101, 1, 0, 256, VA, RKEY, 256), 2);
    let (_, o) = step(&r, fetch_add(100, 0, VA, RKEY, 5), 3);
    assert!(
        !required_sends(&o)
            .iter()
            .any(|s| s.opcode == Field::Exact(Opcode::MP_ATOMIC_ACK)),
        "MR-MPR-10: evicted"
    );
}

#[test]
fn resource_nak_only_toward_rn_mr_mpp_23() {
    // MSN 1 (a SEND) arrives while MSN 0 is unknown, with no staging.
    let nak_sends = |rn: Option<bool>| {
        let mut r = responder();
        r.cfg.resource_nak = rn;
        let (r, o) = step(&r, req(Opcode::MP_SEND, 101, 1, 0, 3, &[3; 3]), 0);
        assert!(!r.received.is_received(psn(101)), "MR-MPP-23: not accepted");
        assert!(
            required_sends(&o).is_empty(),
            "MR-MPP-23: a drop is allowed"
        );
        optional_sends(&o)
            .into_iter()
            .filter(|s| s.syndrome == Some(SyndromeSpec::Exact(Syndrome::NAK_RESOURCE)))
            .cloned()
            .collect::<Vec<_>>()
    };
    // Toward a requester that announced RN: NAK 0x66 naming the PSN.
    let naks = nak_sends(Some(true));
    assert_eq!(naks.len(), 1, "MR-MPP-23");
    assert_eq!(naks[0].sacketh.sack_base_psn, Field::Exact(psn(101)));
    assert_eq!(naks[0].sacketh.sack_bitmap, Field::Exact(0), "MR-MPP-23");
    // Toward any other peer (or one not known to): never.
    assert!(nak_sends(Some(false)).is_empty(), "MR-MPP-23");
    assert!(nak_sends(None).is_empty(), "MR-MPP-23");
}

#[test]
fn refused_packet_leaves_no_state_mr_mpp_23() {
    // MSN 1 (a SEND) arrives while MSN 0 is unknown, with no staging: refused.
    let r = responder();
    let (r, _) = step(&r, req(Opcode::MP_SEND, 101, 1, 0, 3, &[3; 3]), 0);
    assert!(
        r.messages.is_empty(),
        "MR-MPP-23: the refused packet's message is forgotten"
    );
    // The same responder had the packet been lost on the wire.
    let lost = responder();
    assert_eq!(
        r.messages, lost.messages,
        "MR-MPP-23: as if it had not arrived"
    );
}
