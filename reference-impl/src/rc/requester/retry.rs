//! Local ACK timer, go-back-N retries and RNR waits (SPEC §6.14, §6.11).

use super::{Requester, RetryCause};
use crate::cq::WcStatus;
use crate::qp_config::{Env, QpConfig};
use crate::timing::{local_ack_timeout_ns, rnr_timer_ns};
use metaroce_codec::Psn;

impl Requester {
    /// (Re)starts the local ACK timer at now + T (MR-TMR-1, MR-TMR-2).
    pub(super) fn arm_timer(&mut self, cfg: &QpConfig, now: u64) {
        self.ack_deadline = local_ack_timeout_ns(cfg.timeout).map(|t| now.saturating_add(t));
    }

    /// The earliest deadline: RNR wait end or local ACK timeout.
    pub(crate) fn poll_timeout(&self) -> Option<u64> {
        match (self.rnr_until, self.ack_deadline) {
            (Some(r), _) => Some(r),
            (None, a) => a,
        }
    }

    pub(crate) fn handle_timeout(&mut self, cfg: &QpConfig, env: &mut Env<'_>) {
        let now = env.now;
        if let Some(until) = self.rnr_until {
            if until <= now {
                self.rnr_until = None; // MR-RNR-3/4: resend from the NAK PSN
            }
            return;
        }
        if self.ack_deadline.is_some_and(|d| d <= now) {
            self.ack_deadline = None;
            if self.outstanding() {
                env.counters.local_ack_timeouts += 1;
                self.go_back_n(cfg, env, self.una, RetryCause::Timeout);
            }
        }
    }

    /// New PSNs acknowledged: counters reset (MR-TMR-7), timer restarted or
    /// stopped (§6.14), and the retry in progress is over.
    pub(super) fn progress(&mut self, cfg: &QpConfig, env: &mut Env<'_>, new_una: Psn) {
        if !new_una.is_after(self.una) {
            return;
        }
        self.una = new_una;
        if self.una.is_after(self.ack_hi) {
            self.ack_hi = self.una;
        }
        if self.una.is_after(self.sent_end) {
            self.sent_end = self.una;
        }
        self.retry_left = cfg.retry_cnt;
        self.rnr_left = cfg.rnr_retry;
        self.retrying_from = None;
        if self.outstanding() {
            self.arm_timer(cfg, env.now);
        } else {
            self.ack_deadline = None; // MR-TMR-8
        }
    }

    /// Starts a go-back-N retry from `psn` (MR-NAK-5, MR-TMR-5, MR-TMR-6,
    /// MR-TMR-9, MR-REQ-4, MR-REQ-5).
    pub(super) fn go_back_n(
        &mut self,
        cfg: &QpConfig,
        env: &mut Env<'_>,
        psn: Psn,
        cause: RetryCause,
    ) {
        // An implicit retry starts at the oldest missing PSN: a later READ's
        // gap must not leave an earlier unanswered READ behind.
        let psn = if cause == RetryCause::Implicit && self.una.is_before(psn) {
            self.una
        } else {
            psn
        };
        if cause != RetryCause::Timeout && self.retrying_from == Some(psn) {
            return; // the same retry is already under way
        }
        // A resend from an earlier PSN may already be pending (a second NAK
        // 0x60 in a burst): that resend covers `psn`, so the cursor stays,
        // but this is still a retry, counted (MR-TMR-5) and recorded as the
        // one in progress (MR-TMR-9).
        let pending = psn.is_after(self.cursor_psn());
        // zoo: retry-forever — the exhausted counter is ignored.
        if self.retry_left == 0 && !zoo!(cfg.mutant, RetryForever) {
            // Counter at 0 and a retry is needed: fail the oldest (MR-TMR-5).
            self.fail_at(cfg, env, None, WcStatus::RetryExcErr);
            return;
        }
        self.retry_left = self.retry_left.saturating_sub(1);
        self.retrying_from = Some(psn);
        if !pending {
            self.seek(psn);
        }
        self.ack_deadline = None; // restarted when the first packet leaves
    }

    /// PSN of the packet at the cursor (the next fresh PSN past the end).
    fn cursor_psn(&self) -> Psn {
        match self.sq.get(self.cursor) {
            Some(w) if self.cursor < self.started => match w.wr.op {
                crate::wr::WrOp::Read(_) => w.first.add(w.rcv_pkts),
                _ => w.first.add(self.cursor_pkt),
            },
            _ => self.next_fresh,
        }
    }

    /// Moves the cursor to the packet with PSN `psn`.
    pub(super) fn seek(&mut self, psn: Psn) {
        self.cursor = self.started;
        self.cursor_pkt = 0;
        for (i, w) in self.sq.iter().take(self.started).enumerate() {
            if w.contains(psn) {
                self.cursor = i;
                self.cursor_pkt = psn.distance(w.first);
                return;
            }
        }
    }

    /// An RNR NAK for `psn` (MR-RNR-3, MR-RNR-4, MR-RNR-6, MR-RNR-7).
    pub(super) fn on_rnr_nak(&mut self, cfg: &QpConfig, env: &mut Env<'_>, psn: Psn, timer: u8) {
        if cfg.rnr_retry != 7 {
            if self.rnr_left == 0 {
                self.fail_at(cfg, env, Some(psn), WcStatus::RnrRetryExcErr);
                return;
            }
            self.rnr_left -= 1;
        }
        let from = self.una;
        self.seek(from);
        self.retrying_from = None;
        self.ack_deadline = None;
        // zoo: rnr-wait-ignored
        let wait = zoo!(cfg.mutant, RnrWaitIgnored => 0, else rnr_timer_ns(timer));
        self.rnr_until = Some(env.now.saturating_add(wait));
    }
}
