//! Loss detection (§7.8), retirement of the entropy value a loss is
//! attributable to (§7.13), the decrease it causes (§7.12), and the RTO timer.

use super::cc::LossEvent;
use super::{LossCause, MpRequester, WrOp};
use crate::model::{CompletionSpec, Effect, Field, Outcomes, WcStatus};

impl MpRequester {
    /// Deems the unit at `idx` lost: retires its entropy value when the loss
    /// is attributable (rules (a), (b): MR-MPF-1; never for (c): MR-MPT-7)
    /// and applies a multiplicative decrease when the loss has congestion
    /// evidence (MR-MPC-7, §7.12; limited by MR-MPC-3). A loss by time
    /// (rule (b)) has its timer started at the unit's latest transmission.
    pub(crate) fn deem_lost(&mut self, idx: u64, cause: LossCause, now: u64) {
        let Some(seg) = self.segs.get_mut(&idx) else {
            return;
        };
        if seg.acked || seg.lost.is_some() {
            return;
        }
        seg.lost = Some(cause);
        let ev = seg.entropy;
        let event = match cause {
            LossCause::Reorder => Some(LossEvent::Reorder),
            LossCause::Timeout => Some(LossEvent::Timeout { since: seg.tx_time }),
            LossCause::Trimmed => Some(LossEvent::Trim),
            LossCause::Rnr | LossCause::Resource => None,
        };
        if matches!(cause, LossCause::Reorder | LossCause::Timeout)
            && self.entropy.retire(ev, now, self.cfg.retire_hold)
        {
            self.counters.mp_entropy_retired += 1;
        }
        if let Some(event) = event {
            let srtt = self.rtt.srtt_or(&self.cfg);
            self.cc.on_loss(&self.cfg, event, now, srtt);
        }
    }

    /// Rule (a): every unit not acknowledged and not lost with at least K
    /// acknowledged PSNs transmitted after its latest transmission (MR-MPL-3,
    /// MR-MPL-4).
    pub(crate) fn detect_reorder(&mut self, now: u64) {
        let k = self.cfg.reorder_threshold as usize;
        let lost: Vec<u64> = self
            .segs
            .iter()
            .filter(|(_, s)| !s.acked && s.lost.is_none())
            .filter(|(_, s)| self.acked_seqs.iter().filter(|&&q| q > s.tx_seq).count() >= k)
            .map(|(&i, _)| i)
            .collect();
        for i in lost {
            self.deem_lost(i, LossCause::Reorder, now);
        }
    }

    /// Rule (b) at `now`: the RTO expires when some unit's latest
    /// transmission is older than the RTO (doubled after expiries, MR-MPL-2);
    /// the expiry then deems lost every unit whose latest transmission is
    /// older than the RTO without doubling (MR-MPL-5), and resends atomics
    /// without an Atomic Acknowledge (MR-MPP-14). More than `retry_cnt`
    /// expiries in a row end the QP (MR-MPL-8). Returns the outcomes of the
    /// expiry.
    pub(crate) fn detect_timeout(&mut self, now: u64) -> Outcomes {
        let rto = self.rtt.rto(&self.cfg);
        let sweep = self.rtt.rto_undoubled(&self.cfg);
        let timed: Vec<(u64, u64)> = self
            .segs
            .iter()
            .filter(|(_, s)| s.lost.is_none())
            .filter(|(_, s)| {
                !s.acked
                    || self.wrs.get(&s.wr).is_some_and(|w| {
                        matches!(w.wr.op, WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. })
                            && w.atomic_done.is_none()
                    })
            })
            .map(|(&i, s)| (i, now.saturating_sub(s.tx_time)))
            .collect();
        if !timed.iter().any(|&(_, age)| age >= rto) {
            return Outcomes::none();
        }
        let expired: Vec<u64> = timed
            .iter()
            .filter(|&&(_, age)| age >= sweep)
            .map(|&(i, _)| i)
            .collect();
        for i in &expired {
            if let Some(s) = self.segs.get_mut(i)
                && s.acked
            {
                // An acknowledged atomic awaiting its Atomic Acknowledge is
                // sent again (MR-MPP-14): it arrived, so nothing is retired
                // or decreased (MR-MPF-11), but the expiry counts (MR-MPL-8).
                s.acked = false;
                s.psn_acked = true;
                s.lost = Some(LossCause::Timeout);
                continue;
            }
            self.deem_lost(*i, LossCause::Timeout, now);
        }
        self.expiry()
    }

    /// One RTO expiry (§7.7, §7.8): the RTO doubles, and more than
    /// `retry_cnt` expiries in a row end the QP (MR-MPL-8).
    pub(crate) fn expiry(&mut self) -> Outcomes {
        self.rtt.backoff += 1;
        self.retries += 1;
        if self.retries > self.cfg.retry_cnt {
            self.error = true;
            let mut out = Outcomes::none();
            if let Some(w) = self.wrs.values().next() {
                out = out.require(
                    &["MR-MPL-8"],
                    Effect::Complete(CompletionSpec {
                        wr: w.wr.wr,
                        status: Field::Exact(WcStatus::RetryExcErr),
                        byte_len: Field::Any,
                        imm: Field::Any,
                    }),
                );
            }
            return out.require(&["MR-MPL-8"], Effect::EnterError);
        }
        Outcomes::none()
    }

    /// Time passes to `now`: RTO expiries (MR-MPL-5), READ responses missing by
    /// time (MR-MPR-6), probes that came due (MR-MPF-3); then what may or must
    /// be sent.
    pub fn on_timer(&self, now: u64) -> (Self, Outcomes) {
        let mut next = self.clone();
        next.now = next.now.max(now);
        if next.error {
            return (next, Outcomes::none());
        }
        // MR-MPR-6 (SPEC v1.2, §7.9): a READ's timer firing is an RTO
        // expiry unless an earlier PSN is unacknowledged; with an expiry of
        // request PSNs at the same moment it counts once. Both timers are
        // judged against the RTO before this expiry doubles it.
        let fired = next.detect_read_missing(now, true);
        let before = next.retries;
        let mut out = next.detect_timeout(now);
        if fired && next.retries == before && !next.error {
            out = next.expiry();
        }
        if next.error {
            return (next, out);
        }
        let send = next.next_packets(now);
        out.required.extend(send.required);
        out.optional.extend(send.optional);
        (next, out)
    }
}
