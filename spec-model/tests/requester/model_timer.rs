//! on_timer: the local ACK timeout, retries, RNR waits.

use crate::common::*;
use metaroce_codec::Opcode;
use metaroce_spec::model::WcStatus;
use metaroce_spec::model::requester::{
    RequesterAttrs, RequesterState, RetransmitCause, WorkRequest, local_ack_timeout_ns, rnr_wait_ns,
};

const T14: u64 = 67_108_864;

fn one_send(attrs: RequesterAttrs) -> RequesterState {
    state(attrs).post_send(WorkRequest::send(10), 0).0
}

/// MR-TMR-1, MR-TMR-2, MR-TMR-3: nothing before T; from T the model may
/// retransmit (with the alternative "not yet") and must by 4T.
#[test]
fn mr_tmr_1_2_3_window() {
    assert_eq!(local_ack_timeout_ns(14), Some(T14));
    let s = one_send(rc(1024));
    let w = s.retransmit_window().unwrap();
    assert_eq!(w.cause, RetransmitCause::Timeout);
    assert_eq!(
        (w.earliest_ns, w.should_by_ns, w.must_by_ns),
        (T14, 2 * T14, Some(4 * T14))
    );
    let (s2, out) = s.clone().on_timer(T14 - 1);
    assert!(out.required.is_empty() && out.alternatives.is_empty());
    assert_eq!(s2, s, "MR-TMR-1: nothing changes before T");
    let (_, out) = s.clone().on_timer(T14);
    assert_eq!(sent(&out), vec![(0x04, 0)]);
    assert_eq!(out.alternatives.len(), 1, "may still wait until 4T");
    assert!(out.alternatives[0].required.is_empty());
    let (_, out) = s.on_timer(4 * T14);
    assert_eq!(sent(&out), vec![(0x04, 0)]);
    assert!(out.alternatives.is_empty(), "MR-TMR-2: due at 4T");
}

/// MR-TMR-5, MR-TMR-6: retry_cnt 7 is seven retries, then RETRY_EXC_ERR.
#[test]
fn mr_tmr_6_retry_cnt_7_is_seven_retries() {
    let mut s = one_send(rc(1024));
    let mut now = 0;
    for retry in 1..=7 {
        now += T14;
        let (next, out) = s.on_timer(now);
        s = next;
        assert_eq!(sent(&out), vec![(0x04, 0)], "retry {retry}");
        assert!(completions(&out).is_empty());
    }
    now += T14;
    let (s, out) = s.on_timer(now);
    assert!(sent(&out).is_empty());
    assert_eq!(completions(&out), vec![(0, WcStatus::RetryExcErr)]);
    assert!(enters_error(&out));
    assert!(s.retransmit_window().is_none());
}

/// MR-TMR-5: retry_cnt 0 fails at the first timeout; a NAK 0x60 counts too.
#[test]
fn mr_tmr_5_counts_timeouts_and_naks() {
    let s = one_send(RequesterAttrs {
        retry_cnt: 0,
        ..rc(1024)
    });
    let (_, out) = s.on_timer(T14);
    assert_eq!(completions(&out), vec![(0, WcStatus::RetryExcErr)]);
    let s = one_send(RequesterAttrs {
        retry_cnt: 1,
        ..rc(1024)
    });
    let (s, out) = respond(s, &aeth_pkt(Opcode::RC_ACK, 0, 0x60), 5);
    assert_eq!(sent(&out), vec![(0x04, 0)]);
    let (_, out) = s.on_timer(5 + T14);
    assert_eq!(completions(&out), vec![(0, WcStatus::RetryExcErr)]);
}

/// MR-TMR-7: an ACK of new PSNs resets the counters and restarts the timer.
#[test]
fn mr_tmr_7_reset_on_progress() {
    let s = state(rc(1024));
    let (s, _) = s.post_send(WorkRequest::send(10), 0);
    let (s, _) = s.post_send(WorkRequest::send(10), 0);
    let (s, _) = s.on_timer(T14);
    let (s, _) = s.on_timer(2 * T14);
    assert_eq!(s.retry_left, 5);
    let (s, _) = respond(s, &ack(0), 2 * T14 + 10);
    assert_eq!(s.retry_left, 7);
    assert_eq!(s.retransmit_window().unwrap().earliest_ns, 3 * T14 + 10);
}

/// MR-TMR-4: timeout 0 never retransmits; MR-TMR-8: nothing outstanding,
/// nothing retransmitted.
#[test]
fn mr_tmr_4_and_8_no_retransmission() {
    let s = one_send(RequesterAttrs {
        timeout: 0,
        ..rc(1024)
    });
    assert!(s.retransmit_window().is_none());
    let (_, out) = s.on_timer(u64::MAX / 2);
    assert!(out.required.is_empty());
    let s = one_send(rc(1024));
    let (s, _) = respond(s, &ack(0), 1);
    assert!(s.retransmit_window().is_none());
    let (_, out) = s.on_timer(10 * T14);
    assert!(out.required.is_empty());
}

/// MR-RNR-3, MR-RNR-4, MR-RNR-5: wait the table time, then resend from the
/// NAK PSN; the window says 2 × time + 100 µs is recommended.
#[test]
fn mr_rnr_3_4_wait_then_resend() {
    let s = state(rc(1024));
    let (s, _) = s.post_send(WorkRequest::send(10), 0);
    let (s, _) = s.post_send(WorkRequest::send(2000), 0);
    let (s, out) = respond(s, &aeth_pkt(Opcode::RC_ACK, 1, 0x20 | 12), 1_000);
    assert!(
        out.required
            .iter()
            .all(|c| !matches!(c.value, metaroce_spec::model::Effect::Send(_)))
    );
    assert_eq!(
        completions(&out),
        vec![(0, WcStatus::Success)],
        "MR-RNR-4: PSN 0 acknowledged"
    );
    let w = s.retransmit_window().unwrap();
    assert_eq!(w.cause, RetransmitCause::Rnr);
    assert_eq!(w.earliest_ns, 1_000 + rnr_wait_ns(12));
    assert_eq!(w.should_by_ns, 1_000 + 2 * 640_000 + 100_000);
    let (s2, out) = s.clone().on_timer(1_000 + 639_999);
    assert!(out.required.is_empty());
    assert_eq!(s2, s);
    let (s, out) = s.on_timer(1_000 + 640_000);
    assert_eq!(sent(&out), vec![(0x00, 1), (0x02, 2)]);
    assert_eq!(s.retry_left, 7, "MR-RNR-7: not counted against retry_cnt");
}

/// MR-RNR-6, MR-RNR-7: rnr_retry counts RNR NAKs; at 0 the work request fails
/// with RNR_RETRY_EXC_ERR; 7 is unlimited.
#[test]
fn mr_rnr_6_exhaustion_and_unlimited() {
    let mut s = one_send(RequesterAttrs {
        rnr_retry: 2,
        ..rc(1024)
    });
    let mut now = 0;
    for _ in 0..2 {
        let (next, out) = respond(s, &aeth_pkt(Opcode::RC_ACK, 0, 0x21), now);
        assert!(completions(&out).is_empty());
        now += 10_000;
        let (next, out) = next.on_timer(now);
        assert_eq!(sent(&out), vec![(0x04, 0)]);
        s = next;
    }
    let (s, out) = respond(s, &aeth_pkt(Opcode::RC_ACK, 0, 0x21), now);
    assert_eq!(completions(&out), vec![(0, WcStatus::RnrRetryExcErr)]);
    assert!(enters_error(&out));
    assert_eq!(s.retry_left, 7);
    let mut s = one_send(RequesterAttrs {
        rnr_retry: 7,
        ..rc(1024)
    });
    for i in 0..50u64 {
        let (next, out) = respond(s, &aeth_pkt(Opcode::RC_ACK, 0, 0x21), i * 20_000);
        assert!(completions(&out).is_empty(), "7 is unlimited");
        s = next.on_timer(i * 20_000 + 10_000).0;
    }
}
