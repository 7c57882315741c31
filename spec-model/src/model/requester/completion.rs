//! Acknowledgement bookkeeping and send completions (SPEC.md §6.13, §6.2).

use super::attrs::QpStatus;
use super::{RequesterState, SendWqe, WqePhase};
use crate::model::{CompletionSpec, Effect, Field, Outcomes, WcStatus};
use metaroce_codec::Psn;

fn completion(wr: u64, status: Field<WcStatus>) -> Effect {
    Effect::Complete(CompletionSpec {
        wr,
        status,
        byte_len: Field::Any,
        imm: Field::Any,
    })
}

/// A work request posted in ERR completes with WR_FLUSH_ERR ("MR-QP-6").
pub(super) fn push_flush(out: &mut Outcomes, id: u64) {
    *out = std::mem::take(out).require(
        &["MR-QP-6"],
        completion(id, Field::Exact(WcStatus::WrFlushErr)),
    );
}

/// A UD message longer than the PMTU: nothing sent ("MR-UD-4"), completion
/// with SUCCESS (the QP stays in RTS) or LOC_LEN_ERR (the QP leaves RTS)
/// ("MR-UD-5"). An unsignaled work request may also complete silently with
/// SUCCESS.
pub(super) fn ud_oversize(w: &SendWqe) -> Outcomes {
    let reqs: &'static [&'static str] = &["MR-UD-4", "MR-UD-5"];
    // LOC_LEN_ERR leaves RTS (SQE or ERR, §6.2); the requester model keeps
    // no SQE, so the change of state is allowed, not required.
    let error = Outcomes::none()
        .require(reqs, completion(w.id, Field::Exact(WcStatus::LocLenErr)))
        .allow(reqs, Effect::EnterError);
    let success = if w.wr.signaled {
        Outcomes::none().require(reqs, completion(w.id, Field::Exact(WcStatus::Success)))
    } else {
        Outcomes::none()
    };
    error.or(success)
}

impl RequesterState {
    /// Completes, in posting order, the finished work requests at the head of
    /// the queue ("MR-REQ-1"); a success only when signaled or `sq_sig_all`,
    /// an error always ("MR-REQ-2").
    pub(super) fn complete_front(&mut self, out: &mut Outcomes) {
        while let Some(w) = self.queue.front() {
            match w.phase {
                WqePhase::Done => {
                    if w.wr.signaled || self.attrs.sq_sig_all {
                        *out = std::mem::take(out).require(
                            &["MR-REQ-1", "MR-REQ-2", "MR-REQ-3"],
                            completion(w.id, Field::Exact(WcStatus::Success)),
                        );
                    }
                }
                WqePhase::Failed(status, reqs) => {
                    *out =
                        std::mem::take(out).require(reqs, completion(w.id, Field::Exact(status)));
                }
                WqePhase::LocalError(status, reqs) => {
                    *out =
                        std::mem::take(out).require(reqs, completion(w.id, Field::Exact(status)));
                    self.queue.pop_front();
                    self.enter_error(reqs, out);
                    return;
                }
                WqePhase::Waiting | WqePhase::Sent => return,
            }
            self.queue.pop_front();
        }
    }

    /// Acknowledges every PSN up to and including `p` (cumulative ACK,
    /// implicit ACK by a later response, or the PSNs before a NAK).
    ///
    /// SEND and WRITE work requests whose last PSN is `p` or earlier are done
    /// ("MR-REQ-3"). A READ or atomic whose responses have not all arrived and
    /// whose last PSN is `p` or earlier lost its responses: the return value
    /// is the PSN to retry from ("MR-REQ-4"); acknowledgement stops there.
    pub(super) fn ack_through(&mut self, p: Psn, now_ns: u64) -> Option<Psn> {
        let mut new_una = p.add(1);
        let mut restart = None;
        for w in self.queue.iter_mut() {
            if w.phase != WqePhase::Sent {
                continue;
            }
            let last = w.last_psn();
            let covered = !last.is_after(p);
            if w.wr.op.is_send() || w.wr.op.is_write() {
                if covered {
                    w.phase = WqePhase::Done;
                    continue;
                }
                break;
            }
            // READ, atomic, FLUSH, ATOMIC WRITE: answered only by their responses.
            if w.first_psn.add(w.responses).is_after(p) {
                break;
            }
            let missing = w.first_psn.add(w.responses);
            if covered {
                restart = Some(missing);
            }
            new_una = missing;
            break;
        }
        self.advance_una(new_una, now_ns);
        restart
    }

    /// Moves the oldest unacknowledged PSN forward to `new_una` if that is
    /// progress: counters reset ("MR-TMR-7") and the timer restarts (§6.14).
    pub(super) fn advance_una(&mut self, new_una: Psn, now_ns: u64) {
        let span = self.next_psn.distance(self.una);
        let step = new_una.distance(self.una);
        if step == 0 || step > span {
            return;
        }
        self.una = new_una;
        self.retry_left = self.attrs.retry_cnt.min(7); // "MR-TMR-7"
        self.rnr_left = self.attrs.rnr_retry.min(7); // "MR-TMR-7"
        if let Some(nak) = self.nak_retry_psn
            && new_una.is_after(nak)
        {
            self.nak_retry_psn = None;
        }
        self.timer_ref_ns = self.has_outstanding().then_some(now_ns);
    }

    /// Ends the work request at `idx` with `status`: earlier work requests
    /// complete as acknowledged, the QP enters ERR and every later work
    /// request is flushed ("MR-QP-7", "MR-QP-6").
    pub(super) fn fail(
        &mut self,
        idx: usize,
        status: WcStatus,
        reqs: &'static [&'static str],
        out: &mut Outcomes,
    ) {
        for w in self.queue.iter_mut().take(idx) {
            if matches!(w.phase, WqePhase::Sent | WqePhase::Waiting) {
                w.phase = WqePhase::Done;
            }
        }
        if let Some(w) = self.queue.get_mut(idx) {
            w.phase = WqePhase::Failed(status, reqs);
        }
        for w in self.queue.iter_mut().skip(idx + 1) {
            // Flushed with the rest when the QP enters ERR below.
            if matches!(w.phase, WqePhase::LocalError(..)) {
                w.phase = WqePhase::Waiting;
            }
        }
        self.complete_front(out);
        self.enter_error(reqs, out);
    }

    /// The QP enters ERR: every remaining work request completes with
    /// WR_FLUSH_ERR in posting order ("MR-QP-6"), after the failed one ("MR-QP-7").
    pub(super) fn enter_error(&mut self, reqs: &'static [&'static str], out: &mut Outcomes) {
        *out = std::mem::take(out).require(reqs, Effect::EnterError);
        for w in self.queue.drain(..) {
            push_flush(out, w.id);
        }
        self.status = QpStatus::Error;
        self.timer_ref_ns = None;
        self.rnr_wait = None;
        self.una = self.next_psn;
    }

    /// The oldest started, unfinished work request.
    pub(super) fn oldest_outstanding(&self) -> Option<usize> {
        self.queue.iter().position(|w| w.phase == WqePhase::Sent)
    }
}
