//! The counters of SPEC.md §9.3 that the receive path, the notification
//! point and the reaction point keep.
//!
//! "MR-ROB-10": each counter equals the number of events of its kind. The
//! model counts the events it decides, so a judge that replays the packets
//! seen on the wire through [`super::Device`] obtains the values an
//! implementation's counters must show once traffic has quiesced.

use super::Verdict;

/// §9.3 counters (device-wide).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counters {
    /// Packets dropped for a wrong ICRC.
    pub icrc_errors: u64,
    /// Packets dropped by rows 1–9, 11–17 and 20 of §9.2.
    pub malformed_drops: u64,
    /// Packets dropped for DestQP 0, 1, 0xFFFFFF or a missing QP.
    pub unknown_qp_drops: u64,
    /// Packets dropped for a P_Key mismatch.
    pub pkey_violations: u64,
    /// UD packets dropped for a Q_Key mismatch.
    pub qkey_violations: u64,
    /// CNPs sent.
    pub cnp_sent: u64,
    /// CNPs received for existing QPs.
    pub cnp_received: u64,
    /// Packets received with ECN CE.
    pub ecn_ce_received: u64,
}

impl Counters {
    /// The counter named `name` (§9.3 spelling), if this struct keeps it.
    pub fn get(&self, name: &str) -> Option<u64> {
        Some(match name {
            "icrc_errors" => self.icrc_errors,
            "malformed_drops" => self.malformed_drops,
            "unknown_qp_drops" => self.unknown_qp_drops,
            "pkey_violations" => self.pkey_violations,
            "qkey_violations" => self.qkey_violations,
            "cnp_sent" => self.cnp_sent,
            "cnp_received" => self.cnp_received,
            "ecn_ce_received" => self.ecn_ce_received,
            _ => return None,
        })
    }

    fn slot(&mut self, name: &str) -> Option<&mut u64> {
        Some(match name {
            "icrc_errors" => &mut self.icrc_errors,
            "malformed_drops" => &mut self.malformed_drops,
            "unknown_qp_drops" => &mut self.unknown_qp_drops,
            "pkey_violations" => &mut self.pkey_violations,
            "qkey_violations" => &mut self.qkey_violations,
            "cnp_sent" => &mut self.cnp_sent,
            "cnp_received" => &mut self.cnp_received,
            "ecn_ce_received" => &mut self.ecn_ce_received,
            _ => return None,
        })
    }

    /// The counters with `name` increased by one (saturating; an unknown name
    /// changes nothing).
    #[must_use]
    pub fn bump(mut self, name: &str) -> Self {
        if let Some(c) = self.slot(name) {
            *c = c.saturating_add(1);
        }
        self
    }

    /// The counters after admission decided `verdict` (drops only).
    #[must_use]
    pub fn after(self, verdict: &Verdict<'_>) -> Self {
        match verdict.dropped().and_then(|d| d.counter) {
            Some(name) => self.bump(name),
            None => self,
        }
    }
}
