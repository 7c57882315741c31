//! Probes of retired entropy values (SPEC §7.13, MR-MPF-2/3/7).

use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug)]
struct ProbeState {
    next_at: u64,
    wait: u64,
    /// Timestamp of the outstanding probe (at most one, MR-MPF-3).
    outstanding: Option<u32>,
}

/// Probe schedule of every retired value.
#[derive(Clone, Debug, Default)]
pub(crate) struct Probes {
    per: BTreeMap<u16, ProbeState>,
    hold: u64,
    hold_max: u64,
    /// Probes sent (MR-MPF-9 `mp_probes_sent`).
    pub sent: u64,
}

impl Probes {
    pub(crate) fn new(hold: u64, hold_max: u64) -> Self {
        Probes {
            per: BTreeMap::new(),
            hold,
            hold_max,
            sent: 0,
        }
    }

    /// MR-MPF-3: the first probe no earlier than `mp_retire_hold` after
    /// the retirement.
    pub(crate) fn on_retire(&mut self, v: u16, now: u64) {
        self.per.entry(v).or_insert(ProbeState {
            next_at: now + self.hold,
            wait: self.hold,
            outstanding: None,
        });
    }

    /// A value whose probe is due at `now`.
    pub(crate) fn due(&self, now: u64) -> Option<u16> {
        self.per
            .iter()
            .find(|(_, s)| s.next_at <= now)
            .map(|(&v, _)| v)
    }

    /// A probe on `v` with timestamp `ts` left at `now`: the next one waits
    /// twice as long, at most `mp_retire_hold_max` (MR-MPF-3).
    pub(crate) fn on_sent(&mut self, v: u16, now: u64, ts: u32) {
        if let Some(s) = self.per.get_mut(&v) {
            s.outstanding = Some(ts);
            s.wait = (s.wait * 2).min(self.hold_max);
            s.next_at = now + s.wait;
            self.sent += 1;
        }
    }

    /// An MP ACK echoed `v` and `ts`: returns true when it answers the
    /// outstanding probe (MR-MPF-2, MR-MPF-7).
    pub(crate) fn answered(&mut self, v: u16, ts: u32) -> bool {
        match self.per.get(&v) {
            Some(s) if s.outstanding == Some(ts) => {
                self.per.remove(&v);
                true
            }
            _ => false,
        }
    }

    /// The earliest time a probe is due.
    pub(crate) fn deadline(&self) -> Option<u64> {
        self.per.values().map(|s| s.next_at).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_then_doubling_and_answer() {
        let mut p = Probes::new(500, 1_600);
        p.on_retire(0xC001, 1_000);
        assert_eq!(p.due(1_499), None, "MR-MPF-3: hold");
        assert_eq!(p.due(1_500), Some(0xC001));
        p.on_sent(0xC001, 1_500, 77);
        assert_eq!(p.deadline(), Some(2_500), "twice the wait");
        p.on_sent(0xC001, 2_500, 78);
        assert_eq!(p.deadline(), Some(4_100), "at most the hold max");
        assert!(!p.answered(0xC001, 77), "a stale probe's echo");
        assert!(p.answered(0xC001, 78));
        assert_eq!(p.deadline(), None);
        assert_eq!(p.sent, 2);
    }
}
