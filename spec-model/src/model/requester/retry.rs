//! Go-back-N retransmission and the transport retry counter (SPEC.md §6.8,
//! §6.13, §6.14).

use super::packetize::{packetize, reread_packet};
use super::psn::HALF_SPACE;
use super::{RequesterState, WqePhase, WrOp};
use crate::model::{Effect, Outcomes, WcStatus};
use metaroce_codec::Psn;

impl RequesterState {
    /// A retry counted against `retry_cnt` ("MR-TMR-5"): with the counter at 0
    /// the oldest outstanding work request fails with RETRY_EXC_ERR and the QP
    /// enters ERR; otherwise every outstanding packet from `start` is resent.
    /// 7 is seven retries, not unlimited ("MR-TMR-6").
    pub(super) fn go_back(
        &mut self,
        start: Psn,
        now_ns: u64,
        reqs: &'static [&'static str],
        out: &mut Outcomes,
    ) {
        if self.retry_left == 0 {
            if let Some(idx) = self.oldest_outstanding() {
                self.fail(idx, WcStatus::RetryExcErr, &["MR-TMR-5", "MR-TMR-6"], out);
            }
            return;
        }
        self.retry_left -= 1; // "MR-TMR-5"
        self.resend_from(start, now_ns, reqs, out);
    }

    /// Resends, in PSN order, every outstanding request packet from `start`
    /// with its original PSN, opcode, headers and payload; a partly answered
    /// READ is re-requested from its first missing response ("MR-REQ-5").
    /// Nothing acknowledged is resent ("MR-REQ-6").
    pub(super) fn resend_from(
        &mut self,
        start: Psn,
        now_ns: u64,
        reqs: &'static [&'static str],
        out: &mut Outcomes,
    ) {
        let from = if self.una.is_after(start) {
            self.una
        } else {
            start
        };
        let not_before = |p: Psn| p.distance(from) < HALF_SPACE;
        let mut packets = Vec::new();
        for w in self.queue.iter_mut() {
            if w.phase != WqePhase::Sent || !not_before(w.last_psn()) {
                continue;
            }
            match w.wr.op {
                WrOp::Read { .. } => {
                    if let Some(p) = reread_packet(&w.wr, &self.attrs, w.first_psn, w.responses) {
                        packets.push(p);
                    }
                    w.stream_open = false;
                }
                _ => packets.extend(
                    packetize(&w.wr, &self.attrs, w.first_psn)
                        .into_iter()
                        .filter(|p| not_before(p.psn)),
                ),
            }
        }
        for p in &packets {
            *out = std::mem::take(out).require(reqs, Effect::Send(p.spec()));
        }
        if !packets.is_empty() {
            self.timer_ref_ns = Some(now_ns);
        }
    }
}
