//! The entropy set of an MP QP and spraying by rounds (SPEC §7.4), with
//! path-aware skipping and retirement (§7.13; probes are in `probe.rs`).

use metaroce_agent::rng::SplitMix64;

/// Condition of one entropy value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ValueState {
    /// Skipped until this time (an ACK echoing it carried E, MR-MPS-5).
    pub skip_until: u64,
    /// Retired after an attributable loss (MR-MPF-1).
    pub retired: bool,
}

/// N values, their conditions and the current round.
#[derive(Clone, Debug)]
pub(crate) struct EntropySet {
    values: Vec<u16>,
    pub(crate) state: Vec<ValueState>,
    /// Indices of values not yet used in this round, in reverse drawing
    /// order (the next candidate last, so that taking it moves nothing).
    round: Vec<usize>,
    rng: SplitMix64,
    /// Values not retired.
    live: usize,
    /// The latest `skip_until` ever set: at or after it no value is
    /// skipped, and the per-packet skipping test is skipped.
    skip_horizon: u64,
}

impl EntropySet {
    /// A set over `values`; `seed` drives the per-round order (MR-MPS-4).
    pub(crate) fn new(values: Vec<u16>, seed: u64) -> Self {
        let n = values.len();
        EntropySet {
            values,
            state: vec![ValueState::default(); n],
            round: Vec::new(),
            rng: SplitMix64::new(seed),
            live: n,
            skip_horizon: 0,
        }
    }

    /// Index of a value of the set.
    pub(crate) fn index_of(&self, v: u16) -> Option<usize> {
        self.values.iter().position(|&x| x == v)
    }

    fn skipped(&self, i: usize, now: u64) -> bool {
        self.state[i].skip_until > now
    }

    /// MR-MPS-5/6: skipping holds unless more than half of the values that
    /// are not retired are skipped.
    /// (One pass, no allocation: this runs for every packet sent.)
    fn skipping_saturated(&self, now: u64) -> bool {
        if now >= self.skip_horizon {
            return false; // nothing is skipped
        }
        let (mut live, mut skipped) = (0usize, 0usize);
        for s in self.state.iter().filter(|s| !s.retired) {
            live += 1;
            skipped += usize::from(s.skip_until > now);
        }
        skipped * 2 > live
    }

    fn eligible(&self, i: usize, now: u64, saturated: bool, all_retired: bool) -> bool {
        let s = self.state[i];
        if all_retired {
            return true; // MR-MPF-8: keep sending over the retired values
        }
        !s.retired && (saturated || !self.skipped(i, now))
    }

    fn new_round(&mut self, all_retired: bool) {
        // A new round holds every value that is not retired (§7.4), or
        // every value when all are retired (MR-MPF-8), in a fresh
        // pseudo-random order (MR-MPS-4).
        self.round = (0..self.values.len())
            .filter(|&i| all_retired || !self.state[i].retired)
            .collect();
        for i in (1..self.round.len()).rev() {
            let j = (self.rng.next_u64() % (i as u64 + 1)) as usize;
            self.round.swap(i, j);
        }
        self.round.reverse(); // stored next-last
    }

    /// The value of the next data packet (MR-MPS-3), preferring one other
    /// than `avoid` (MR-MPS-7, a retransmission's lost copy).
    pub(crate) fn next(&mut self, now: u64, avoid: Option<u16>) -> u16 {
        let all_retired = self.live == 0;
        let saturated = self.skipping_saturated(now);
        for attempt in 0..2 {
            let pick = self.round.iter().rposition(|&i| {
                self.eligible(i, now, saturated, all_retired)
                    && (attempt == 1 || Some(self.values[i]) != avoid)
            });
            if let Some(pos) = pick {
                let i = self.round.remove(pos);
                return self.values[i];
            }
            if attempt == 0 && avoid.is_some() && self.round.len() > 1 {
                continue;
            }
            // No eligible value left in R: a new round (§7.4).
            self.new_round(all_retired);
            let pick = self.round.iter().rposition(|&i| {
                self.eligible(i, now, saturated, all_retired) && Some(self.values[i]) != avoid
            });
            let pick = pick.or_else(|| {
                self.round
                    .iter()
                    .rposition(|&i| self.eligible(i, now, saturated, all_retired))
            });
            if let Some(pos) = pick {
                let i = self.round.remove(pos);
                return self.values[i];
            }
        }
        self.values.first().copied().unwrap_or(0xC000)
    }

    /// The value of the `turn`-th acknowledgement: a rotation over the set
    /// of its own, outside the rounds of data packets (§7.4, MR-MPS-9).
    pub(crate) fn rotation(&self, turn: usize) -> u16 {
        match self.values.len() {
            0 => 0xC000,
            n => self.values[turn % n],
        }
    }

    /// MR-MPS-5: an ACK echoing `v` carried E.
    pub(crate) fn skip(&mut self, v: u16, until: u64) {
        if let Some(i) = self.index_of(v) {
            let s = &mut self.state[i];
            s.skip_until = s.skip_until.max(until);
            self.skip_horizon = self.skip_horizon.max(until);
        }
    }

    /// MR-MPF-1: retire `v`; returns whether it was live.
    pub(crate) fn retire(&mut self, v: u16) -> bool {
        match self.index_of(v) {
            Some(i) if !self.state[i].retired => {
                self.state[i].retired = true;
                self.live -= 1;
                true
            }
            _ => false,
        }
    }

    /// MR-MPF-7: a probe on `v` was answered.
    pub(crate) fn restore(&mut self, v: u16) {
        if let Some(i) = self.index_of(v)
            && self.state[i].retired
        {
            self.state[i].retired = false;
            self.live += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(n: u16) -> EntropySet {
        EntropySet::new((0..n).map(|i| 0xC000 + i).collect(), 7)
    }

    #[test]
    fn every_value_once_per_round() {
        // MR-MPS-3: each run of N packets from a round start covers the set.
        let mut s = set(16);
        for _ in 0..5 {
            let mut seen: Vec<u16> = (0..16).map(|_| s.next(0, None)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..16).map(|i| 0xC000 + i).collect::<Vec<_>>());
        }
    }

    #[test]
    fn rounds_are_shuffled_anew() {
        // MR-MPS-4.
        let mut s = set(32);
        let a: Vec<u16> = (0..32).map(|_| s.next(0, None)).collect();
        let b: Vec<u16> = (0..32).map(|_| s.next(0, None)).collect();
        assert_ne!(a, b);
    }

    #[test]
    fn skipped_values_wait_unless_most_are_skipped() {
        let mut s = set(8);
        s.skip(0xC003, 1_000);
        let used: Vec<u16> = (0..21).map(|_| s.next(500, None)).collect();
        assert!(!used.contains(&0xC003), "MR-MPS-5");
        assert!(s.next(1_000, None) >= 0xC000);
        // MR-MPS-6: five of eight skipped: all become eligible.
        let mut s = set(8);
        for v in 0..5 {
            s.skip(0xC000 + v, 1_000);
        }
        let used: Vec<u16> = (0..16).map(|_| s.next(0, None)).collect();
        assert!(used.contains(&0xC000));
    }

    #[test]
    fn retired_values_are_not_used_and_all_retired_keeps_sending() {
        let mut s = set(4);
        assert!(s.retire(0xC002));
        assert!(!s.retire(0xC002));
        let used: Vec<u16> = (0..12).map(|_| s.next(0, None)).collect();
        assert!(!used.contains(&0xC002), "MR-MPF-2");
        s.restore(0xC002);
        let used: Vec<u16> = (0..8).map(|_| s.next(0, None)).collect();
        assert!(used.contains(&0xC002), "MR-MPF-7");
        for v in 0..4 {
            s.retire(0xC000 + v);
        }
        let mut used: Vec<u16> = (0..4).map(|_| s.next(0, None)).collect();
        used.sort_unstable();
        used.dedup();
        assert_eq!(used.len(), 4, "MR-MPF-8: rounds over retired values");
    }

    #[test]
    fn retransmission_avoids_the_lost_value() {
        // MR-MPS-7.
        let mut s = set(4);
        for _ in 0..20 {
            assert_ne!(s.next(0, Some(0xC001)), 0xC001);
            // The avoided value stays in its round for later packets.
        }
    }
}
