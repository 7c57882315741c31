//! The local ACK timeout and the RNR wait as time windows (SPEC.md §6.14, §6.11).

use super::RequesterState;
use super::attrs::QpStatus;
use crate::model::Outcomes;

/// Local ACK timeout T = 4.096 µs × 2^`timeout` in nanoseconds; `None` for
/// `timeout` 0, which disables the timer.
pub fn local_ack_timeout_ns(timeout: u8) -> Option<u64> {
    (timeout != 0).then(|| 4096u64 << u32::from(timeout.min(31)))
}

/// What a pending retransmission waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetransmitCause {
    /// The local ACK timeout.
    Timeout,
    /// The end of an RNR wait.
    Rnr,
}

/// When the next retransmission is allowed, should happen and must happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetransmitWindow {
    /// Its cause.
    pub cause: RetransmitCause,
    /// Not earlier than this ("MR-TMR-1": T after the reference; "MR-RNR-3":
    /// the table time after the RNR NAK).
    pub earliest_ns: u64,
    /// Recommended latest ("MR-TMR-3": 2T; "MR-RNR-5": twice the table time
    /// plus 100 µs).
    pub should_by_ns: u64,
    /// Latest allowed ("MR-TMR-2": 4T); `None` when SPEC.md sets no bound (RNR).
    pub must_by_ns: Option<u64>,
}

impl RequesterState {
    /// The window of the next retransmission, if one is pending: none when
    /// nothing is unacknowledged ("MR-TMR-8") or `timeout` is 0 and no RNR
    /// wait runs ("MR-TMR-4").
    pub fn retransmit_window(&self) -> Option<RetransmitWindow> {
        if self.status != QpStatus::Rts || !self.has_outstanding() {
            return None;
        }
        if let Some(w) = self.rnr_wait {
            return Some(RetransmitWindow {
                cause: RetransmitCause::Rnr,
                earliest_ns: w.arrived_ns.saturating_add(w.wait_ns),
                should_by_ns: w
                    .arrived_ns
                    .saturating_add(w.wait_ns.saturating_mul(2))
                    .saturating_add(100_000),
                must_by_ns: None,
            });
        }
        let t = local_ack_timeout_ns(self.attrs.timeout)?;
        let start = self.timer_ref_ns?;
        Some(RetransmitWindow {
            cause: RetransmitCause::Timeout,
            earliest_ns: start.saturating_add(t),
            should_by_ns: start.saturating_add(t.saturating_mul(2)),
            must_by_ns: Some(start.saturating_add(t.saturating_mul(4))),
        })
    }

    /// Time `now_ns` has come.
    ///
    /// Before the window opens nothing may be sent ("MR-TMR-1", "MR-RNR-3",
    /// "MR-TMR-4", "MR-TMR-8"). Once it is open the model retransmits: after an
    /// RNR wait, every outstanding packet from the RNR NAK's PSN ("MR-RNR-4",
    /// not counted against `retry_cnt`, "MR-RNR-7"); after the local ACK
    /// timeout, one retry counted against `retry_cnt` from the oldest
    /// unacknowledged PSN, or RETRY_EXC_ERR when none is left ("MR-TMR-5").
    /// Until the latest allowed time the outcome carries the alternative
    /// "not yet" (Outcomes::none(); keep the previous state if observed).
    pub fn on_timer(mut self, now_ns: u64) -> (Self, Outcomes) {
        let mut out = Outcomes::none();
        let Some(window) = self.retransmit_window() else {
            return (self, out);
        };
        if now_ns < window.earliest_ns {
            return (self, out);
        }
        match window.cause {
            RetransmitCause::Rnr => {
                let psn = self.rnr_wait.map_or(self.una, |w| w.psn);
                self.rnr_wait = None;
                self.resend_from(psn, now_ns, &["MR-RNR-3", "MR-RNR-4", "MR-REQ-5"], &mut out);
                self.pump(now_ns, &mut out);
            }
            RetransmitCause::Timeout => {
                let una = self.una;
                let start = self
                    .queue
                    .iter()
                    .find(|w| w.holds(una))
                    .map_or(una, |w| w.first_psn.add(w.responses).max_psn(una));
                self.go_back(
                    start,
                    now_ns,
                    &["MR-TMR-1", "MR-TMR-2", "MR-REQ-5"],
                    &mut out,
                );
            }
        }
        let late = window.must_by_ns.is_some_and(|m| now_ns >= m);
        if !late {
            out = out.or(Outcomes::none());
        }
        (self, out)
    }
}

/// The later of two PSNs (half-space order).
trait MaxPsn {
    fn max_psn(self, other: Self) -> Self;
}

impl MaxPsn for metaroce_codec::Psn {
    fn max_psn(self, other: Self) -> Self {
        if other.is_after(self) { other } else { self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_values() {
        assert_eq!(local_ack_timeout_ns(0), None);
        assert_eq!(local_ack_timeout_ns(1), Some(8192));
        // 14 gives 67.1 ms, 18 gives 1.07 s (SPEC.md §6.14).
        assert_eq!(local_ack_timeout_ns(14), Some(67_108_864));
        assert_eq!(local_ack_timeout_ns(18), Some(1_073_741_824));
    }
}
