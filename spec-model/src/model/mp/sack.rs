//! The responder's record of received PSNs: cumulative ACK PSN, the set of
//! PSNs received beyond it, and the SACK base rule and bitmap (§7.6, §7.11).

use metaroce_codec::Psn;
use std::collections::BTreeSet;

/// Where a request PSN falls relative to the receive window (§7.11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsnClass {
    /// At or before the cumulative ACK PSN, or already received: a duplicate (MR-MPW-3).
    Duplicate,
    /// Within the window and not yet received.
    New,
    /// More than W beyond the cumulative ACK PSN (MR-MPW-1).
    OutOfWindow,
}

/// What marking a PSN received did (§7.6 definitions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarkEffect {
    /// The PSN was later than h + 1.
    pub opened_gap: bool,
    /// The PSN was missing and a later PSN had been received.
    pub filled_gap: bool,
}

/// Received PSNs of an MP responder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// Cumulative ACK PSN c: it and every earlier PSN have been received.
    pub cum: Psn,
    /// PSNs later than `cum` that have been received, as distances from `cum`
    /// (1 ..= W).
    beyond: BTreeSet<u32>,
    /// Window W.
    window: u32,
}

impl Received {
    /// Nothing received yet: c = `rq_psn` − 1.
    pub fn new(rq_psn: Psn, window: u32) -> Self {
        Received {
            cum: rq_psn.sub(1),
            beyond: BTreeSet::new(),
            window,
        }
    }

    /// The latest PSN received so far, h (c when none later).
    pub fn highest(&self) -> Psn {
        self.beyond.last().map_or(self.cum, |&d| self.cum.add(d))
    }

    /// Classifies a request PSN (MR-MPW-1, MR-MPW-3).
    pub fn classify(&self, p: Psn) -> PsnClass {
        let d = p.distance(self.cum);
        if d == 0 || d >= 1 << 23 || self.beyond.contains(&d) {
            PsnClass::Duplicate
        } else if d > self.window {
            PsnClass::OutOfWindow
        } else {
            PsnClass::New
        }
    }

    /// Whether `p` has been received.
    pub fn is_received(&self, p: Psn) -> bool {
        self.classify(p) == PsnClass::Duplicate
    }

    /// Marks `n` PSNs from `p` received (n > 1 for a READ request, MR-MPR-2).
    /// PSNs outside the window are ignored.
    pub fn mark(&mut self, p: Psn, n: u32) -> MarkEffect {
        let h = self.highest();
        let effect = MarkEffect {
            opened_gap: p.is_after(h.add(1)),
            filled_gap: h.is_after(p.add(n.saturating_sub(1))),
        };
        // PSNs beyond the window are ignored, so at most W + 1 are looked at
        // (a READ may reserve 2^23 of them).
        for i in 0..n.max(1).min(self.window.saturating_add(1)) {
            let q = p.add(i);
            if self.classify(q) == PsnClass::New {
                self.beyond.insert(q.distance(self.cum));
            }
        }
        // Advance c over the contiguous run.
        let mut advance = 0;
        while self.beyond.contains(&(advance + 1)) {
            advance += 1;
        }
        if advance > 0 {
            self.cum = self.cum.add(advance);
            self.beyond = self
                .beyond
                .iter()
                .filter(|&&d| d > advance)
                .map(|&d| d - advance)
                .collect();
        }
        effect
    }

    /// The SACK base PSN of an ACK-syndrome MP ACK triggered by a packet with
    /// PSN `t` (SACK base rule of §7.6, MR-MPA-4): c + 1, or t − 63 when t is
    /// later than c + 64.
    pub fn ack_base(&self, t: Psn) -> Psn {
        if t.is_after(self.cum.add(64)) {
            t.sub(63)
        } else {
            self.cum.add(1)
        }
    }

    /// The 64-bit bitmap whose bit i reports PSN base + i (MR-MPA-4).
    pub fn bitmap(&self, base: Psn) -> u64 {
        (0..64u32).fold(0u64, |acc, i| {
            if self.is_received(base.add(i)) {
                acc | (1u64 << (63 - i))
            } else {
                acc
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cumulative_advances_and_wraps_mr_psn_5() {
        let mut r = Received::new(Psn::new(0xFF_FFFE), 64);
        assert_eq!(r.cum, Psn::new(0xFF_FFFD));
        let e = r.mark(Psn::new(0), 1);
        assert!(e.opened_gap, "0 after the wrap opens a gap");
        assert_eq!(r.highest(), Psn::new(0));
        let e = r.mark(Psn::new(0xFF_FFFE), 1);
        assert!(e.filled_gap);
        let e = r.mark(Psn::new(0xFF_FFFF), 1);
        assert!(e.filled_gap);
        assert_eq!(r.cum, Psn::new(0), "c crosses 0xFFFFFF to 0");
        assert_eq!(r.classify(Psn::new(0xFF_FFF0)), PsnClass::Duplicate);
        assert_eq!(r.classify(Psn::new(64)), PsnClass::New);
        assert_eq!(r.classify(Psn::new(65)), PsnClass::OutOfWindow, "MR-MPW-1");
    }

    #[test]
    fn sack_base_rule_mr_mpa_4() {
        let mut r = Received::new(Psn::new(10), 1024);
        r.mark(Psn::new(12), 1);
        assert_eq!(r.ack_base(Psn::new(12)), Psn::new(10));
        assert_eq!(r.bitmap(Psn::new(10)), 1u64 << 61);
        r.mark(Psn::new(100), 1);
        // 100 is later than c + 64 = 73: base = 100 - 63 = 37, bit 63 set.
        assert_eq!(r.ack_base(Psn::new(100)), Psn::new(37));
        assert_eq!(r.bitmap(Psn::new(37)), 1);
    }
}
