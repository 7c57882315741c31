//! The resource NAK 0x66 at the requester (MR-MPP-25, MR-MPF-11,
//! MR-MPP-16).

use super::*;
use crate::model::WcStatus;

fn nak66(base: u32, ev: u16, ts: u32) -> SackethRepr {
    let mut s = sack(0xFF_FFFF, base, 0, ev, ts);
    s.syndrome = Syndrome::NAK_RESOURCE;
    s
}

#[test]
fn resource_nak_resent_after_earlier_acked_without_loss_mr_mpp_25() {
    let (r, evs) = sent_write(2);
    let cwnd = r.cc.cwnd;
    let (r, o) = ack_at(&r, 0xFF_FFFF, nak66(1, evs[1], 1), 500);
    assert!(
        required_psns(&o).is_empty(),
        "MR-MPP-25: PSN 0 not yet acknowledged"
    );
    assert!(r.entropy.retired.is_empty(), "MR-MPF-11: no retirement");
    assert_eq!(r.cc.cwnd, cwnd, "MR-MPF-11: no decrease");
    assert_eq!(r.bytes_in_flight(), 256, "PSN 1 left the flight");
    // Resent before PSN 0 is acknowledged: a finding.
    let w = wire(build(&r, &r.packet_spec(&r.wrs[&1], 256, true, 501), 501));
    assert!(ids(&r.on_transmit(&w.roce(), 0xC003, 501).1).contains(&"MR-MPP-25"));
    // PSN 0 acknowledged: PSN 1 is due, resent without a finding.
    let (r, o) = ack_at(&r, 0, sack(0, 1, 0, evs[0], 0), 600);
    assert_eq!(required_psns(&o), vec![1], "MR-MPP-25");
    let (r, f, _) = send_next(&r, 601);
    assert!(f.is_empty(), "{f:?}");
    assert_eq!(r.retries, 0, "MR-MPF-11: no RTO expiry counted");
    assert!(r.entropy.retired.is_empty());
}

#[test]
fn resource_nak_resent_one_rto_later_mr_mpp_25() {
    let (r, evs) = sent_write(2);
    let (r, _) = ack_at(&r, 0xFF_FFFF, nak66(1, evs[1], 1), 500);
    let due = r.refused[&1];
    assert!(!required_psns(&r.next_packets(due - 1)).contains(&1));
    assert!(
        required_psns(&r.next_packets(due)).contains(&1),
        "MR-MPP-25"
    );
}

#[test]
fn resource_naks_count_against_rnr_retry_mr_mpp_25() {
    let mut c = cfg();
    c.rnr_retry = 1;
    let r = MpRequester::new(c, 0x22, psn(0));
    let (r, _) = r.post_send(write_wr(1, 256));
    let (r, _, ev) = send_next(&r, 0);
    // The first is retried at once (nothing earlier is outstanding).
    let (r, o) = ack_at(&r, 0xFF_FFFF, nak66(0, ev, 0), 100);
    assert_eq!(required_psns(&o), vec![0], "MR-MPP-25");
    assert!(!r.error);
    let (r, _, ev) = send_next(&r, 101);
    // The second exhausts rnr_retry 1.
    let (r, o) = ack_at(&r, 0xFF_FFFF, nak66(0, ev, 101), 200);
    assert!(r.error, "MR-MPP-25");
    assert!(o.required.iter().any(|c| matches!(
        &c.value,
        Effect::Complete(cs) if cs.status == Field::Exact(WcStatus::RnrRetryExcErr)
    )));
}

#[test]
fn resource_nak_ends_qp_without_rn_mr_mpp_16() {
    let mut c = cfg();
    c.resource_nak = Some(false);
    let r = MpRequester::new(c, 0x22, psn(0));
    let (r, _) = r.post_send(write_wr(1, 256));
    let (r, _, ev) = send_next(&r, 0);
    let (r, o) = ack_at(&r, 0xFF_FFFF, nak66(0, ev, 0), 100);
    assert!(r.error, "MR-MPP-16");
    assert!(o.required.iter().any(|c| c.reqs == ["MR-MPP-16"]));
}
