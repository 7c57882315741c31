//! RTT estimation and the retransmission timeout (SPEC §7.7, RFC 6298).

use super::config::MpTuning;

/// srtt, rttvar, the smallest sample and the RTO backoff.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RttEstimator {
    srtt: Option<u64>,
    rttvar: u64,
    /// Smallest sample since RTS (MR-MPC-9).
    pub min_rtt: Option<u64>,
    /// Consecutive expiries without new acknowledgements (doublings).
    pub backoff: u32,
    init: u64,
    min: u64,
    max: u64,
    base_rtt: u64,
}

impl RttEstimator {
    pub(crate) fn new(t: &MpTuning) -> Self {
        RttEstimator {
            srtt: None,
            rttvar: 0,
            min_rtt: None,
            backoff: 0,
            init: t.rto_init_ns,
            min: t.rto_min_ns,
            max: t.rto_max_ns,
            base_rtt: t.base_rtt_ns,
        }
    }

    /// MR-MPL-1: one RTT sample in ns.
    pub(crate) fn sample(&mut self, r: u64) {
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

    /// srtt, or `mp_base_rtt` before the first sample.
    pub(crate) fn srtt(&self) -> u64 {
        self.srtt.unwrap_or(self.base_rtt)
    }

    /// base_rtt of §7.12: the smallest sample, `mp_base_rtt` before any.
    pub(crate) fn base_rtt(&self) -> u64 {
        self.min_rtt.unwrap_or(self.base_rtt)
    }

    /// MR-MPL-2: RTO with bounds and the doubling after expiries.
    pub(crate) fn rto(&self) -> u64 {
        self.rto_undoubled()
            .saturating_mul(1u64 << self.backoff.min(30))
            .min(self.max)
    }

    /// The RTO with its bounds but without the doubling: at an expiry,
    /// every transmission older than this is deemed lost (§7.8 rule (b)).
    pub(crate) fn rto_undoubled(&self) -> u64 {
        match self.srtt {
            None => self.init,
            Some(s) => (s + 4 * self.rttvar).clamp(self.min, self.max),
        }
    }

    /// An RTO expiry.
    pub(crate) fn expired(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }

    /// New PSNs were acknowledged: the doubling ends.
    pub(crate) fn progressed(&mut self) {
        self.backoff = 0;
    }
}

/// An RTT sample from an echoed 32-bit timestamp (§7.7).
pub(crate) fn sample_from_echo(now: u64, echoed: u32) -> u64 {
    u64::from((now as u32).wrapping_sub(echoed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6298_and_bounds() {
        let t = MpTuning::default();
        let mut e = RttEstimator::new(&t);
        assert_eq!(e.rto(), 1_000_000, "mp_rto_init");
        e.sample(20_000);
        assert_eq!(e.srtt(), 20_000);
        // 20 µs + 4 × 10 µs = 60 µs < rto_min 100 µs.
        assert_eq!(e.rto(), 100_000);
        e.sample(60_000);
        // rttvar = 3/4·10000 + 1/4·40000 = 17500; srtt = 25000.
        assert_eq!(e.srtt(), 25_000);
        assert_eq!(e.rto(), 100_000);
        e.sample(2_000_000);
        let r = e.rto();
        assert!(r > 100_000 && r <= 16_000_000);
        assert_eq!(e.min_rtt, Some(20_000));
    }

    #[test]
    fn expiry_doubles_until_progress() {
        let t = MpTuning::default();
        let mut e = RttEstimator::new(&t);
        e.sample(20_000);
        e.expired();
        assert_eq!(e.rto(), 200_000);
        e.expired();
        assert_eq!(e.rto(), 400_000);
        for _ in 0..20 {
            e.expired();
        }
        assert_eq!(e.rto(), 16_000_000, "mp_rto_max");
        e.progressed();
        assert_eq!(e.rto(), 100_000);
    }

    #[test]
    fn echo_wraps() {
        assert_eq!(sample_from_echo(5, u32::MAX), 6);
        assert_eq!(sample_from_echo(1 << 32, 0), 0);
    }
}
