//! Window congestion control on ECN echoes and delay (SPEC §7.12).

use super::config::MpTuning;

/// cwnd and the limits on its changes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cwnd {
    /// Congestion window in bytes.
    pub cwnd: u64,
    last_md: Option<u64>,
    ai_epoch: u64,
    ai_in_epoch: u64,
    /// Fractional bytes of additive increase carried over.
    ai_frac: u64,
    pmtu: u64,
    max: u64,
    ai_bytes: u64,
    md_milli: u64,
    target: u64,
    /// Multiplicative decreases applied (for reports).
    pub decreases: u64,
    /// When the latest marked or late signal arrived (congestion evidence).
    last_evidence: Option<u64>,
    /// When the latest signal arrived.
    last_signal: Option<u64>,
}

/// A loss event of SPEC §7.12, by what can make it congestion evidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LossKind {
    /// Found by K later acknowledgements or responses: needs a marked or
    /// late signal within the last srtt.
    Reorder,
    /// A NAK 0x65 or a trimmed READ response: a full queue, evidence itself.
    Trim,
    /// Found by a timer that started at `since`: also evidence when no
    /// signal has arrived since then (nothing acknowledged for an RTO).
    Timeout { since: u64 },
}

impl Cwnd {
    /// MR-MPC-6: cwnd starts at `mp_cwnd_init`.
    pub(crate) fn new(t: &MpTuning, pmtu: u32) -> Self {
        let pmtu = u64::from(pmtu);
        Cwnd {
            cwnd: t.cwnd_init.clamp(pmtu, t.cwnd_max.max(pmtu)),
            last_md: None,
            ai_epoch: 0,
            ai_in_epoch: 0,
            ai_frac: 0,
            pmtu,
            max: t.cwnd_max.max(pmtu),
            ai_bytes: t.ai_bytes,
            md_milli: u64::from(t.md_factor_milli),
            target: t.target_qdelay_ns,
            decreases: 0,
            last_evidence: None,
            last_signal: None,
        }
    }

    /// MR-MPC-1: a packet of `bytes` may leave when it fits in cwnd, or when
    /// nothing is in flight.
    pub(crate) fn allows(&self, in_flight: u64, bytes: u64) -> bool {
        in_flight == 0 || in_flight + bytes <= self.cwnd
    }

    /// MR-MPC-2: one signal. `qdelay` is r − base_rtt (MR-MPC-9).
    /// Marked or late signals are remembered as congestion evidence for
    /// the losses of the next srtt (MR-MPC-7).
    pub(crate) fn on_signal(&mut self, now: u64, srtt: u64, marked: bool, qdelay: u64, acked: u64) {
        let late = qdelay >= self.target;
        self.last_signal = Some(now);
        if marked || late {
            self.last_evidence = Some(now);
        }
        match (marked, late) {
            (false, false) => self.increase(now, srtt, acked),
            (true, true) => self.decrease(now, srtt),
            _ => {}
        }
    }

    /// MR-MPC-7: a loss, a NAK 0x65, a trimmed or a missing READ response
    /// decreases cwnd only with congestion evidence: a marked or late signal
    /// at most one srtt ago, a trim, or (a loss by time) no signal since the
    /// timer started.
    pub(crate) fn on_loss(&mut self, now: u64, srtt: u64, kind: LossKind) {
        let recent = self
            .last_evidence
            .is_some_and(|t| now.saturating_sub(t) <= srtt);
        let evidence = recent
            || match kind {
                LossKind::Reorder => false,
                LossKind::Trim => true,
                LossKind::Timeout { since } => self.last_signal.is_none_or(|t| t <= since),
            };
        if evidence {
            self.decrease(now, srtt);
        }
    }

    fn increase(&mut self, now: u64, srtt: u64, acked: u64) {
        if now.saturating_sub(self.ai_epoch) >= srtt.max(1) {
            self.ai_epoch = now;
            self.ai_in_epoch = 0;
        }
        // cwnd += ai_bytes × acked / cwnd, at most ai_bytes + PMTU per
        // srtt (MR-MPC-8), never above cwnd_max (MR-MPC-5).
        let num = self
            .ai_bytes
            .saturating_mul(acked)
            .saturating_add(self.ai_frac);
        let inc = num / self.cwnd.max(1);
        self.ai_frac = num % self.cwnd.max(1);
        let room = (self.ai_bytes + self.pmtu).saturating_sub(self.ai_in_epoch);
        let inc = inc.min(room);
        self.ai_in_epoch += inc;
        self.cwnd = (self.cwnd + inc).min(self.max);
    }

    fn decrease(&mut self, now: u64, srtt: u64) {
        // MR-MPC-3: at most one decrease per srtt.
        if self
            .last_md
            .is_some_and(|t| now.saturating_sub(t) < srtt.max(1))
        {
            return;
        }
        self.last_md = Some(now);
        self.decreases += 1;
        let cut = self.cwnd * self.md_milli / 1000;
        // MR-MPC-4: never below one PMTU.
        self.cwnd = (self.cwnd - cut).max(self.pmtu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc() -> Cwnd {
        Cwnd::new(&MpTuning::default(), 4096)
    }

    #[test]
    fn starts_at_init_and_gates_in_flight() {
        let c = cc();
        assert_eq!(c.cwnd, 524_288, "MR-MPC-6");
        assert!(c.allows(0, 10_000_000), "MR-MPC-1: nothing in flight");
        assert!(c.allows(520_192, 4096));
        assert!(!c.allows(520_193, 4096));
    }

    #[test]
    fn md_once_per_srtt_and_floor() {
        let mut c = cc();
        c.on_signal(1_000, 10_000, true, 20_000, 4096);
        assert_eq!(c.cwnd, 524_288 - 524_288 * 3 / 10);
        let after = c.cwnd;
        c.on_loss(5_000, 10_000, LossKind::Trim);
        assert_eq!(c.cwnd, after, "MR-MPC-3");
        let mut t = 11_000;
        for _ in 0..100 {
            c.on_loss(t, 10_000, LossKind::Trim);
            t += 10_000;
        }
        assert_eq!(c.cwnd, 4096, "MR-MPC-4");
    }

    #[test]
    fn table_cells() {
        let mut c = cc();
        c.cwnd = 100_000;
        c.on_signal(0, 10_000, true, 0, 4096);
        c.on_signal(0, 10_000, false, 20_000, 4096);
        assert_eq!(c.cwnd, 100_000, "marked-early and late-unmarked: no change");
        c.on_signal(0, 10_000, false, 0, 100_000);
        assert_eq!(c.cwnd, 116_384, "AI: ai_bytes × acked / cwnd");
    }

    #[test]
    fn ai_bounded_per_srtt_and_by_max() {
        let mut c = cc();
        c.cwnd = 10_000;
        for _ in 0..100 {
            c.on_signal(0, 10_000, false, 0, 10_000);
        }
        assert_eq!(c.cwnd, 10_000 + 16_384 + 4096, "MR-MPC-8");
        for i in 0..10_000u64 {
            c.on_signal(i * 10_000, 10_000, false, 0, 1 << 20);
        }
        assert_eq!(c.cwnd, 786_432, "MR-MPC-5");
    }

    #[test]
    fn loss_decreases_only_with_congestion_evidence() {
        let srtt = 10_000;
        let mut c = cc();
        let init = c.cwnd;
        // MR-MPC-7: before any signal a loss by time decreases (nothing
        // acknowledged since its timer started); one by reordering does not.
        c.on_loss(1_000, srtt, LossKind::Reorder);
        assert_eq!(c.cwnd, init, "no evidence");
        c.on_signal(2_000, srtt, false, 0, 4096);
        let grown = c.cwnd;
        c.on_loss(3_000, srtt, LossKind::Timeout { since: 1_000 });
        assert_eq!(c.cwnd, grown, "a signal since the timer started");
        c.on_loss(3_000, srtt, LossKind::Timeout { since: 2_000 });
        assert_eq!(c.cwnd, grown - grown * 3 / 10, "no signal since");
        let a = c.cwnd;
        // A late, unmarked signal leaves cwnd alone but is evidence for the
        // next srtt, and no longer.
        c.on_signal(20_000, srtt, false, 10_000, 4096);
        assert_eq!(c.cwnd, a);
        let mut older = c;
        older.on_loss(30_001, srtt, LossKind::Reorder);
        assert_eq!(older.cwnd, a, "evidence older than srtt");
        c.on_loss(30_000, srtt, LossKind::Reorder);
        assert_eq!(c.cwnd, a - a * 3 / 10, "late signal within srtt");
        // A trim is evidence itself (after MR-MPC-3's srtt).
        let b = c.cwnd;
        c.on_loss(45_000, srtt, LossKind::Trim);
        assert_eq!(c.cwnd, b - b * 3 / 10);
    }
}
