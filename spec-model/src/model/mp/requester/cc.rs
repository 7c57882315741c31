//! Window congestion control of an MP requester (SPEC.md §7.12).

use crate::model::mp::MpConfig;

/// Congestion-control state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CcState {
    /// Congestion window in bytes.
    pub cwnd: u64,
    /// Time of the last multiplicative decrease.
    pub last_md: Option<u64>,
    /// Additive increases applied within the last srtt: (time, bytes)
    /// (MR-MPC-8).
    pub increases: Vec<(u64, u64)>,
    /// Arrival time of the latest marked or late signal (§7.12, congestion
    /// evidence, case 1).
    pub last_evidence: Option<u64>,
    /// Arrival time of the latest signal (§7.12, case 3: nothing newly
    /// acknowledged since a timer started).
    pub last_signal: Option<u64>,
}

/// A loss event of §7.12 and what its congestion evidence depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossEvent {
    /// A PSN deemed lost under rule (a) of §7.8, or a READ response deemed
    /// missing by K later responses (MR-MPR-6): evidence only from a recent
    /// marked or late signal (case 1).
    Reorder,
    /// A NAK 0x65 or a trimmed READ response: evidence in itself (case 2).
    Trim,
    /// A loss by time (rule (b) of §7.8, or the RTO of MR-MPR-6) whose timer
    /// started at the given time: evidence also when no signal has arrived
    /// since then (case 3).
    Timeout {
        /// When the timer that expired started.
        since: u64,
    },
}

impl CcState {
    /// cwnd = `mp_cwnd_init` (MR-MPC-6), within [PMTU, `mp_cwnd_max`].
    pub fn new(cfg: &MpConfig) -> Self {
        CcState {
            cwnd: cfg
                .cwnd_init
                .clamp(u64::from(cfg.pmtu), cfg.cwnd_max.max(u64::from(cfg.pmtu))),
            last_md: None,
            increases: Vec::new(),
            last_evidence: None,
            last_signal: None,
        }
    }

    /// Whether loss event `ev` at `now` has congestion evidence (§7.12):
    /// a marked or late signal no more than `srtt` before `now` (case 1),
    /// a trim (case 2), or, for a loss by time, no signal since its timer
    /// started (case 3).
    pub fn has_evidence(&self, ev: LossEvent, now: u64, srtt: u64) -> bool {
        let recent = self
            .last_evidence
            .is_some_and(|s| now.saturating_sub(s) <= srtt);
        recent
            || match ev {
                LossEvent::Reorder => false,
                LossEvent::Trim => true,
                LossEvent::Timeout { since } => self.last_signal.is_none_or(|s| s <= since),
            }
    }

    /// MR-MPC-7: loss event `ev` at `now` decreases cwnd (subject to
    /// MR-MPC-3) exactly when it has congestion evidence. Returns whether a
    /// decrease applied.
    pub fn on_loss(&mut self, cfg: &MpConfig, ev: LossEvent, now: u64, srtt: u64) -> bool {
        self.has_evidence(ev, now, srtt) && self.decrease(cfg, now, srtt)
    }

    /// Multiplicative decrease at `now`, at most once per `srtt` (MR-MPC-3),
    /// never below one PMTU (MR-MPC-4). Returns whether it applied.
    pub fn decrease(&mut self, cfg: &MpConfig, now: u64, srtt: u64) -> bool {
        if self.last_md.is_some_and(|t| now.saturating_sub(t) < srtt) {
            return false;
        }
        let factor = 1000u64.saturating_sub(cfg.md_factor_milli);
        self.cwnd = (self.cwnd.saturating_mul(factor) / 1000).max(u64::from(cfg.pmtu));
        self.last_md = Some(now);
        true
    }

    /// One signal (MR-MPC-2): `acked` new bytes, `marked` (E or CE), queuing
    /// delay `q`. Records the signal's time, and, when marked or late, its
    /// time as congestion evidence (§7.12, MR-MPC-7). Additive increase `mp_ai_bytes` × acked / cwnd when neither
    /// marked nor late, capped at `mp_cwnd_max` (MR-MPC-5) and so that the
    /// increases within any srtt add up to at most `mp_ai_bytes` plus one
    /// PMTU (MR-MPC-8); decrease when both.
    pub fn signal(
        &mut self,
        cfg: &MpConfig,
        now: u64,
        srtt: u64,
        acked: u64,
        marked: bool,
        q: u64,
    ) {
        let late = q >= cfg.target_qdelay;
        self.last_signal = Some(now);
        if marked || late {
            self.last_evidence = Some(now);
        }
        match (marked, late) {
            (false, false) => {
                let inc = cfg.ai_bytes.saturating_mul(acked) / self.cwnd.max(1);
                // "MR-MPC-8": the table's increase, within what the last srtt left.
                self.increases
                    .retain(|&(t, _)| now.saturating_sub(t) < srtt);
                let recent = self
                    .increases
                    .iter()
                    .fold(0u64, |a, &(_, b)| a.saturating_add(b));
                let budget = cfg
                    .ai_bytes
                    .saturating_add(u64::from(cfg.pmtu))
                    .saturating_sub(recent);
                let before = self.cwnd;
                self.cwnd = self.cwnd.saturating_add(inc.min(budget)).min(cfg.cwnd_max);
                let added = self.cwnd.saturating_sub(before);
                if added > 0 {
                    self.increases.push((now, added));
                }
            }
            (true, true) => {
                self.decrease(cfg, now, srtt);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_of_7_12_mr_mpc_2_to_mr_mpc_6() {
        let cfg = MpConfig {
            cwnd_init: 100_000,
            ..MpConfig::default()
        };
        let mut c = CcState::new(&cfg);
        assert_eq!(c.cwnd, 100_000, "MR-MPC-6");
        c.signal(&cfg, 0, 10_000, 50_000, false, 0);
        assert_eq!(
            c.cwnd,
            100_000 + 16_384 * 50_000 / 100_000,
            "MR-MPC-2: additive increase"
        );
        let before = c.cwnd;
        c.signal(&cfg, 0, 10_000, 50_000, true, 0);
        c.signal(&cfg, 0, 10_000, 50_000, false, 20_000);
        assert_eq!(
            c.cwnd, before,
            "MR-MPC-2: no change when only marked or only late"
        );
        c.signal(&cfg, 100, 10_000, 1, true, 20_000);
        assert_eq!(
            c.cwnd,
            before * 700 / 1000,
            "MR-MPC-2: multiplicative decrease"
        );
        assert!(!c.decrease(&cfg, 5_000, 10_000), "MR-MPC-3: once per srtt");
        assert!(c.decrease(&cfg, 10_100, 10_000));
        for i in 0..100 {
            c.decrease(&cfg, 20_000 * (i + 2), 10_000);
        }
        assert_eq!(c.cwnd, 1024, "MR-MPC-4: never below one PMTU");
        for i in 0..10_000 {
            c.signal(&cfg, 1_000_000 + i * 10_000, 10_000, 1 << 20, false, 0);
        }
        assert_eq!(c.cwnd, cfg.cwnd_max, "MR-MPC-5");
    }

    #[test]
    fn congestion_evidence_of_7_12_mr_mpc_7() {
        let cfg = MpConfig {
            cwnd_init: 100_000,
            ..MpConfig::default()
        };
        let srtt = 10_000;
        let mut c = CcState::new(&cfg);
        // Before any signal: a loss by time has evidence (case 3), a loss
        // by reordering has none, a trim always has (case 2).
        assert!(!c.has_evidence(LossEvent::Reorder, 1_000, srtt));
        assert!(c.has_evidence(LossEvent::Timeout { since: 0 }, 1_000, srtt));
        assert!(c.has_evidence(LossEvent::Trim, 1_000, srtt));
        // An unmarked, early signal at 2 000: still no evidence for (a); a
        // loss by time whose timer started before it has none either.
        c.signal(&cfg, 2_000, srtt, 1, false, 0);
        assert!(!c.has_evidence(LossEvent::Reorder, 3_000, srtt));
        assert!(!c.has_evidence(LossEvent::Timeout { since: 1_000 }, 3_000, srtt));
        assert!(c.has_evidence(LossEvent::Timeout { since: 2_000 }, 3_000, srtt));
        assert!(!c.on_loss(&cfg, LossEvent::Reorder, 3_000, srtt));
        let before = c.cwnd;
        // A late (unmarked) signal at 4 000: no change by the table, but
        // evidence for losses up to one srtt later.
        c.signal(&cfg, 4_000, srtt, 1, false, cfg.target_qdelay);
        assert_eq!(c.cwnd, before, "MR-MPC-2: late, unmarked");
        assert!(c.has_evidence(LossEvent::Reorder, 14_000, srtt));
        assert!(!c.has_evidence(LossEvent::Reorder, 14_001, srtt));
        // A marked (early) signal is evidence too.
        c.signal(&cfg, 20_000, srtt, 1, true, 0);
        assert!(c.on_loss(&cfg, LossEvent::Reorder, 25_000, srtt));
        assert_eq!(c.cwnd, before * 700 / 1000, "MR-MPC-7");
        // MR-MPC-3 still holds.
        assert!(!c.on_loss(&cfg, LossEvent::Trim, 26_000, srtt));
    }
}
