//! The responder's record of received PSNs: the cumulative ACK PSN c, the
//! set received beyond it, the receive window (SPEC §7.11) and the SACK
//! bitmap of §7.6. PSNs are kept as unwrapped indices from `rq_psn`.

use metaroce_codec::Psn;
use std::collections::BTreeMap;

/// How a request PSN relates to the window (MR-MPW-1, MR-MPW-3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PsnClass {
    /// At or before c, or already received: a duplicate.
    Duplicate,
    /// Not yet received, within W of c: its unwrapped index.
    New(u64),
    /// W < (p − c) mod 2^24 < 2^23: dropped and counted.
    OutOfWindow,
}

/// Received PSNs of one MP responder.
#[derive(Clone, Debug, Default)]
pub(crate) struct RecvMap {
    /// PSN of index 0 (`rq_psn`).
    origin: Psn,
    /// Index of the first PSN not received: c = cum_next − 1.
    cum_next: u64,
    /// Received indices later than c + 1, as disjoint, non-adjacent
    /// ranges `start → end` (exclusive): a READ block of millions of PSNs
    /// costs one entry, not millions (MR-ROB-7).
    above: BTreeMap<u64, u64>,
    window: u32,
}

impl RecvMap {
    pub(crate) fn new(rq_psn: u32, window: u32) -> Self {
        RecvMap {
            origin: Psn::new(rq_psn),
            cum_next: 0,
            above: BTreeMap::new(),
            window,
        }
    }

    /// The wire PSN of an index.
    pub(crate) fn psn(&self, idx: u64) -> Psn {
        self.origin.add(idx as u32)
    }

    /// The cumulative ACK PSN c (initially `rq_psn` − 1).
    pub(crate) fn cum_psn(&self) -> Psn {
        self.origin.add((self.cum_next as u32).wrapping_sub(1))
    }

    /// h: the latest index received, if any later than c.
    fn high(&self) -> Option<u64> {
        self.above.last_key_value().map(|(_, &end)| end - 1)
    }

    /// Whether `idx` lies in a received range beyond c + 1.
    fn above_has(&self, idx: u64) -> bool {
        self.above
            .range(..=idx)
            .next_back()
            .is_some_and(|(_, &end)| idx < end)
    }

    /// Adds `[start, end)` to the ranges beyond c, merging neighbours.
    fn insert_range(&mut self, mut start: u64, mut end: u64) {
        if let Some((&s, &e)) = self.above.range(..=start).next_back()
            && e >= start
        {
            start = s;
            end = end.max(e);
        }
        let swallowed: Vec<u64> = self.above.range(start..=end).map(|(&s, _)| s).collect();
        for s in swallowed {
            if let Some(e) = self.above.remove(&s) {
                end = end.max(e);
            }
        }
        self.above.insert(start, end);
    }

    /// Classifies a request PSN (MR-MPW-1, MR-MPW-3).
    pub(crate) fn classify(&self, psn: Psn) -> PsnClass {
        let d = psn.distance(self.cum_psn());
        if d == 0 || d >= 1 << 23 {
            return PsnClass::Duplicate;
        }
        if d > self.window {
            return PsnClass::OutOfWindow;
        }
        let idx = self.cum_next + u64::from(d) - 1;
        if self.above_has(idx) {
            PsnClass::Duplicate
        } else {
            PsnClass::New(idx)
        }
    }

    /// Whether the index has been received.
    #[cfg(test)]
    pub(crate) fn has(&self, idx: u64) -> bool {
        idx < self.cum_next || self.above_has(idx)
    }

    /// The index of a PSN at or before c (duplicates), when within 2^23.
    pub(crate) fn index_of_old(&self, psn: Psn) -> Option<u64> {
        let back = self.cum_psn().distance(psn);
        // Nothing received yet (cum_next 0): no PSN is at or before c.
        (back < 1 << 23)
            .then(|| self.cum_next.checked_sub(1)?.checked_sub(u64::from(back)))
            .flatten()
    }

    /// Marks `[idx, idx + n)` received. Returns (opened a gap, filled a gap)
    /// as §7.6 defines them.
    pub(crate) fn mark(&mut self, idx: u64, n: u32) -> (bool, bool) {
        let h = self.high().unwrap_or(self.cum_next.wrapping_sub(1));
        let opens = idx > self.cum_next && (self.high().is_none() || idx > h + 1);
        let fills = self.high().is_some_and(|h| idx < h);
        // Only PSNs within the window are kept (a READ may reserve up to
        // 2^31 / PMTU PSNs; the ones beyond W are not received, MR-MPW-1),
        // as ranges: a READ block costs one entry (MR-ROB-7).
        let start = idx.max(self.cum_next);
        let end = idx
            .saturating_add(u64::from(n))
            .min(self.cum_next.saturating_add(u64::from(self.window)));
        if start == self.cum_next && start < end {
            // In order (the usual case): c moves on, no range is made.
            self.cum_next = end;
        } else if start < end {
            self.insert_range(start, end);
        }
        while let Some((&s, &e)) = self.above.first_key_value() {
            if s > self.cum_next {
                break;
            }
            self.cum_next = self.cum_next.max(e);
            self.above.remove(&s);
        }
        (opens, fills)
    }

    /// SACK base and bitmap by the base rule of §7.6 for a trigger at index
    /// `t` (MR-MPA-4); `nak_base` names the PSN of a NAK instead.
    pub(crate) fn bitmap(&self, t: Option<u64>, nak_base: Option<u64>) -> (Psn, u64) {
        let base = match (nak_base, t) {
            (Some(b), _) => b,
            (None, Some(t)) if t > self.cum_next + 63 => t - 63,
            _ => self.cum_next,
        };
        // Bit i (the most significant first) is base + i: set the bits of
        // the indices before c + 1, then those of each received range
        // overlapping the 64, instead of 64 lookups.
        let end = base + 64;
        let span = |lo: u64, hi: u64| -> u64 {
            let (a, b) = (lo.max(base) - base, hi.min(end).saturating_sub(base));
            if a >= b {
                return 0;
            }
            let upto_b = if b == 64 { u64::MAX } else { !(u64::MAX >> b) };
            upto_b & (u64::MAX >> a)
        };
        let mut bits = span(0, self.cum_next);
        let before = self.above.range(..base).next_back();
        for (&s, &e) in before.into_iter().chain(self.above.range(base..end)) {
            bits |= span(s, e);
        }
        (self.psn(base), bits)
    }

    /// c as an index plus one (first missing index).
    #[cfg(test)]
    pub(crate) fn cum_next(&self) -> u64 {
        self.cum_next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmap_and_base_rule() {
        let mut m = RecvMap::new(0xFF_FFFE, 1024);
        assert_eq!(m.cum_psn(), Psn::new(0xFF_FFFD));
        assert_eq!(m.classify(Psn::new(0xFF_FFFE)), PsnClass::New(0));
        assert_eq!(m.mark(0, 1), (false, false));
        assert_eq!(m.cum_psn(), Psn::new(0xFF_FFFE));
        // Index 2 opens a gap (1 missing), index 1 fills it.
        assert_eq!(m.mark(2, 1), (true, false));
        let (base, bits) = m.bitmap(Some(2), None);
        assert_eq!(base, Psn::new(0xFF_FFFF));
        assert_eq!(bits, 1 << 62, "bit 0 = c + 1 missing, bit 1 received");
        assert_eq!(m.mark(1, 1), (false, true));
        assert_eq!(m.cum_psn(), Psn::new(0x00_0000), "wraps");
        // A trigger beyond c + 64: base t − 63 (MR-MPA-4).
        m.mark(100, 1);
        let (base, bits) = m.bitmap(Some(100), None);
        assert_eq!(base, m.psn(37));
        assert_eq!(bits, 1, "bit 63 = the trigger");
        // NAK base.
        let (base, _) = m.bitmap(Some(100), Some(50));
        assert_eq!(base, m.psn(50));
    }

    #[test]
    fn window_and_duplicates() {
        let mut m = RecvMap::new(10, 64);
        m.mark(0, 3);
        assert_eq!(m.classify(Psn::new(12)), PsnClass::Duplicate);
        assert_eq!(m.classify(Psn::new(5)), PsnClass::Duplicate);
        assert_eq!(m.classify(Psn::new(13 + 63)), PsnClass::New(66));
        assert_eq!(m.classify(Psn::new(13 + 64)), PsnClass::OutOfWindow);
        m.mark(5, 1);
        assert_eq!(m.classify(Psn::new(15)), PsnClass::Duplicate);
        assert_eq!(m.index_of_old(Psn::new(11)), Some(1));
    }

    #[test]
    fn duplicate_before_anything_received_has_no_index() {
        // A PSN before rq_psn arriving first (a stale or injected packet)
        // is a duplicate of nothing: no index, and no arithmetic overflow
        // (found by the reference_stateful fuzz target).
        let m = RecvMap::new(10, 64);
        assert_eq!(m.classify(Psn::new(9)), PsnClass::Duplicate);
        assert_eq!(m.index_of_old(Psn::new(9)), None);
        assert_eq!(m.index_of_old(Psn::new(0xFF_FFF0)), None);
    }

    #[test]
    fn a_huge_read_marks_no_more_than_the_window() {
        // An MP READ of 2^31 bytes at PMTU 256 reserves 2^23 PSNs; only the
        // W within the window are kept, so memory stays bounded (found by
        // the reference_stateful fuzz target: 200 MB for one injected READ).
        let mut m = RecvMap::new(0, 64);
        m.mark(0, 1 << 23);
        assert_eq!(m.cum_next(), 64, "MR-MPR-2: the PSNs in the window");
        assert!(m.above.is_empty());
        assert_eq!(m.classify(Psn::new(127)), PsnClass::New(127));
        assert_eq!(m.classify(Psn::new(128)), PsnClass::OutOfWindow);
    }

    #[test]
    fn ranges_merge_and_fill() {
        let mut m = RecvMap::new(0, 1024);
        m.mark(10, 2); // 10, 11
        m.mark(14, 1); // 14
        m.mark(12, 2); // 12, 13 joins both
        assert_eq!(m.above.len(), 1);
        assert!(m.has(14) && !m.has(15) && !m.has(9));
        assert_eq!(m.mark(5, 1), (false, true), "5 lies before h = 14: fills");
        m.mark(0, 5);
        assert_eq!(m.cum_next(), 6);
        m.mark(6, 4);
        assert_eq!(m.cum_next(), 15);
    }

    #[test]
    fn bitmap_agrees_with_has() {
        // Ranges received out of order (a fixed pseudo-random sequence):
        // every bitmap, at every base around them, has bit i set exactly
        // when base + i has been received.
        let mut m = RecvMap::new(0xFF_FF00, 1024);
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..60 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            m.mark(x % 200, 1 + (x >> 32) as u32 % 4);
            for base in [0u64, 1, 5, 63, 64, 100, 150, 199] {
                let (psn, bits) = m.bitmap(None, Some(base));
                assert_eq!(psn, m.psn(base));
                for i in 0..64u64 {
                    assert_eq!(
                        bits >> (63 - i) & 1 == 1,
                        m.has(base + i),
                        "base {base} bit {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn read_block_marks_all() {
        // MR-MPR-2: the n PSNs of a READ are received together.
        let mut m = RecvMap::new(0, 1024);
        m.mark(0, 5);
        assert_eq!(m.cum_next(), 5);
    }
}
