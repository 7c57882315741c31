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
        }
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
    /// delay `q`. Additive increase `mp_ai_bytes` × acked / cwnd when neither
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
}
