//! RTT estimator and RTO (SPEC.md §7.7).

use crate::model::mp::MpConfig;

/// RFC 6298 estimator with MP bounds and back-off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RttState {
    /// Smoothed RTT, after the first sample.
    pub srtt: Option<u64>,
    /// RTT variation.
    pub rttvar: u64,
    /// Smallest sample since RTS (MR-MPC-9).
    pub min_rtt: Option<u64>,
    /// Expiries since the last acknowledgement of new PSNs (doubling, MR-MPL-2).
    pub backoff: u32,
}

impl RttState {
    /// Takes a sample `r` in ns (MR-MPL-1): first srtt = r, rttvar = r / 2;
    /// then rttvar = 3/4 rttvar + 1/4 |srtt − r|, srtt = 7/8 srtt + 1/8 r.
    pub fn sample(&mut self, r: u64) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                self.rttvar = (3 * self.rttvar + s.abs_diff(r)) / 4;
                self.srtt = Some((7 * s + r) / 8);
            }
        }
        self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
    }

    /// RTO = min(max, max(min, srtt + 4 rttvar)), `mp_rto_init` before the
    /// first sample, doubled per expiry up to `mp_rto_max` (MR-MPL-2).
    pub fn rto(&self, cfg: &MpConfig) -> u64 {
        let base = self.rto_undoubled(cfg);
        let mut rto = base;
        for _ in 0..self.backoff {
            rto = rto.saturating_mul(2).min(cfg.rto_max);
        }
        rto.min(cfg.rto_max.max(base))
    }

    /// The RTO before doubling: min(max, max(min, srtt + 4 rttvar)), or
    /// `mp_rto_init` before the first sample. At an expiry every unit whose
    /// latest transmission is at least this old is deemed lost (§7.8 rule (b)).
    pub fn rto_undoubled(&self, cfg: &MpConfig) -> u64 {
        match self.srtt {
            None => cfg.rto_init,
            Some(s) => (s + 4 * self.rttvar).clamp(cfg.rto_min, cfg.rto_max),
        }
    }

    /// srtt, or `mp_base_rtt` before the first sample.
    pub fn srtt_or(&self, cfg: &MpConfig) -> u64 {
        self.srtt.unwrap_or(cfg.base_rtt)
    }

    /// base_rtt for queuing delay: smallest sample, `mp_base_rtt` before any (MR-MPC-9).
    pub fn base_rtt(&self, cfg: &MpConfig) -> u64 {
        self.min_rtt.unwrap_or(cfg.base_rtt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimator_and_rto_mr_mpl_1_mr_mpl_2() {
        let cfg = MpConfig::default();
        let mut r = RttState::default();
        assert_eq!(r.rto(&cfg), 1_000_000, "MR-MPL-2: rto_init");
        r.sample(40_000);
        assert_eq!((r.srtt, r.rttvar), (Some(40_000), 20_000), "MR-MPL-1");
        assert_eq!(r.rto(&cfg), 120_000);
        r.sample(80_000);
        assert_eq!(r.rttvar, (3 * 20_000 + 40_000) / 4, "MR-MPL-1");
        assert_eq!(r.srtt, Some((7 * 40_000 + 80_000) / 8));
        r.sample(10_000);
        assert!(r.rto(&cfg) >= cfg.rto_min, "MR-MPL-2: lower bound");
        r.backoff = 3;
        assert_eq!(
            r.rto(&cfg),
            RttState { backoff: 0, ..r }.rto(&cfg) * 8,
            "MR-MPL-2: doubling"
        );
        r.backoff = 30;
        assert_eq!(r.rto(&cfg), cfg.rto_max, "MR-MPL-2: upper bound");
    }
}
