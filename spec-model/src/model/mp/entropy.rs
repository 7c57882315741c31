//! Entropy values of an MP sender: rounds, skipping after ECN echoes,
//! retirement and the probe schedule (SPEC.md §7.4, §7.13).

use std::collections::{BTreeMap, BTreeSet};

/// A retired value and its probe schedule (MR-MPF-3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retired {
    /// Time of retirement.
    pub at: u64,
    /// Earliest time the next probe may be sent.
    pub next_probe_at: u64,
    /// The wait that led to `next_probe_at` (doubles after an unanswered probe).
    pub wait: u64,
    /// The outstanding probe: its MPETH timestamp and send time.
    pub probe: Option<(u32, u64)>,
}

/// The entropy state of one MP sender.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntropyState {
    /// The entropy set (N values).
    pub set: Vec<u16>,
    /// R: values not yet used in the current round.
    pub round: BTreeSet<u16>,
    /// Skipped values and the time their skip ends (MR-MPS-5).
    pub skipped_until: BTreeMap<u16, u64>,
    /// Retired values (MR-MPF-1).
    pub retired: BTreeMap<u16, Retired>,
}

impl EntropyState {
    /// A fresh state: the first round holds every value.
    pub fn new(set: &[u16]) -> Self {
        EntropyState {
            set: set.to_vec(),
            round: set.iter().copied().collect(),
            skipped_until: BTreeMap::new(),
            retired: BTreeMap::new(),
        }
    }

    fn not_retired(&self) -> BTreeSet<u16> {
        self.set
            .iter()
            .copied()
            .filter(|v| !self.retired.contains_key(v))
            .collect()
    }

    /// Values usable at `now`: not retired and not skipped, except that every
    /// non-retired value is eligible while more than half of them are skipped
    /// (MR-MPS-6), and every value when all are retired (MR-MPF-8).
    pub fn eligible(&self, now: u64) -> BTreeSet<u16> {
        let live = self.not_retired();
        if live.is_empty() {
            return self.set.iter().copied().collect();
        }
        let skipped: BTreeSet<u16> = live
            .iter()
            .copied()
            .filter(|v| self.skipped_until.get(v).is_some_and(|&u| u > now))
            .collect();
        if skipped.len() * 2 > live.len() {
            live
        } else {
            live.difference(&skipped).copied().collect()
        }
    }

    /// The values the next data packet may use (MR-MPS-3, MR-MPS-5,
    /// MR-MPF-2): eligible values of the current round or, when none is left,
    /// of a new round.
    pub fn allowed_next(&self, now: u64) -> BTreeSet<u16> {
        let eligible = self.eligible(now);
        let in_round: BTreeSet<u16> = self.round.intersection(&eligible).copied().collect();
        if in_round.is_empty() {
            eligible
        } else {
            in_round
        }
    }

    /// Records that a data packet used `v` at `now`.
    pub fn use_value(&mut self, v: u16, now: u64) {
        let eligible = self.eligible(now);
        if !self.round.iter().any(|x| eligible.contains(x)) || !self.round.contains(&v) {
            // New round: every value not retired (all values if all are).
            let live = self.not_retired();
            self.round = if live.is_empty() {
                self.set.iter().copied().collect()
            } else {
                live
            };
        }
        self.round.remove(&v);
    }

    /// An MP ACK echoing `v` with E arrived at `now`: skip `v` for `srtt` (MR-MPS-5).
    pub fn skip(&mut self, v: u16, now: u64, srtt: u64) {
        if self.set.contains(&v) {
            self.skipped_until.insert(v, now.saturating_add(srtt));
        }
    }

    /// Retires `v` at `now` (MR-MPF-1); the first probe waits `hold` (MR-MPF-3).
    /// Returns whether it was newly retired.
    pub fn retire(&mut self, v: u16, now: u64, hold: u64) -> bool {
        if !self.set.contains(&v) || self.retired.contains_key(&v) {
            return false;
        }
        self.retired.insert(
            v,
            Retired {
                at: now,
                next_probe_at: now.saturating_add(hold),
                wait: hold,
                probe: None,
            },
        );
        self.round.remove(&v);
        true
    }

    /// Retired values whose next probe may be sent at `now` (MR-MPF-3).
    pub fn probes_due(&self, now: u64) -> Vec<u16> {
        self.retired
            .iter()
            .filter(|(_, r)| r.next_probe_at <= now)
            .map(|(&v, _)| v)
            .collect()
    }

    /// A probe on `v` with timestamp `ts` was sent at `now`: the next one waits
    /// twice as long, at most `hold_max` (MR-MPF-3). Returns `false` when the
    /// probe was too early.
    pub fn probe_sent(&mut self, v: u16, ts: u32, now: u64, hold_max: u64) -> bool {
        let Some(r) = self.retired.get_mut(&v) else {
            return true;
        };
        let ok = now >= r.next_probe_at;
        let wait = r.wait.saturating_mul(2).min(hold_max);
        r.wait = wait;
        r.next_probe_at = now.saturating_add(wait);
        r.probe = Some((ts, now));
        ok
    }

    /// An MP ACK echoed `v` and `ts`: if it answers the outstanding probe on a
    /// retired value, the value returns to use (MR-MPF-7). Returns whether it did.
    pub fn probe_answered(&mut self, v: u16, ts: u32) -> bool {
        let answered = self
            .retired
            .get(&v)
            .and_then(|r| r.probe)
            .is_some_and(|(pts, _)| pts == ts);
        if answered {
            self.retired.remove(&v);
        }
        answered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_cover_the_set_before_repeating_mr_mps_3() {
        let mut e = EntropyState::new(&[1, 2, 3]);
        let mut used = BTreeSet::new();
        for _ in 0..3 {
            let a = e.allowed_next(0);
            let v = *a.iter().next().unwrap();
            assert!(!used.contains(&v), "MR-MPS-3: no repeat within a round");
            used.insert(v);
            e.use_value(v, 0);
        }
        assert_eq!(e.allowed_next(0).len(), 3, "new round");
    }

    #[test]
    fn skip_and_saturation_mr_mps_5_mr_mps_6() {
        let mut e = EntropyState::new(&[1, 2, 3, 4]);
        e.skip(1, 0, 100);
        assert!(!e.allowed_next(50).contains(&1), "MR-MPS-5");
        assert!(e.allowed_next(100).contains(&1), "skip ends after srtt");
        e.skip(2, 0, 100);
        e.skip(3, 0, 100);
        assert_eq!(e.eligible(50).len(), 4, "MR-MPS-6: more than half skipped");
    }

    #[test]
    fn retire_probe_and_return_mr_mpf_2_mr_mpf_3_mr_mpf_7_mr_mpf_8() {
        let mut e = EntropyState::new(&[1, 2]);
        assert!(e.retire(1, 1000, 500));
        assert!(!e.allowed_next(1000).contains(&1), "MR-MPF-2");
        assert!(
            e.probes_due(1499).is_empty(),
            "MR-MPF-3: not before the hold"
        );
        assert_eq!(e.probes_due(1500), vec![1]);
        assert!(e.probe_sent(1, 77, 1500, 10_000));
        assert!(
            e.probes_due(2499).is_empty(),
            "MR-MPF-3: twice the previous wait"
        );
        assert!(!e.probe_answered(1, 78), "wrong timestamp");
        assert!(e.probe_answered(1, 77), "MR-MPF-7");
        assert!(e.allowed_next(3000).contains(&1) || e.eligible(3000).contains(&1));
        e.retire(1, 0, 5);
        e.retire(2, 0, 5);
        assert_eq!(
            e.allowed_next(0).len(),
            2,
            "MR-MPF-8: keep sending over retired values"
        );
    }
}
