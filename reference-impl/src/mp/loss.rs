//! Loss detection (SPEC §7.8): rule (a), K later transmissions
//! acknowledged, and rule (b), the RTO, over the requester's sent units.

/// Where a sent unit (a data packet, a READ request with its reserved PSNs,
/// or an atomic) is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnitState {
    /// Sent, neither acknowledged nor deemed lost.
    InFlight,
    /// Deemed lost, waiting for its retransmission.
    Lost,
    /// READ or atomic whose PSNs are acknowledged; waiting for responses.
    Sacked,
}

/// Why a PSN (or a READ response range) is sent again, for the counters of
/// SPEC §9.3: rule (a) of §7.8 or MR-MPR-6's K later responses, rule (b)
/// (the RTO), or a NAK 0x65 / trimmed READ response (§7.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LossRule {
    /// K later transmissions acknowledged (`mp_retx_reorder`).
    Reorder,
    /// The retransmission timeout (`mp_retx_timeout`).
    Timeout,
    /// Trimmed (`mp_retx_trim`); never retires the entropy value.
    Trim,
}

impl LossRule {
    /// Counts one retransmission under this rule.
    pub(crate) fn count(self, c: &mut crate::counters::Counters) {
        match self {
            LossRule::Reorder => c.mp_retx_reorder += 1,
            LossRule::Timeout => c.mp_retx_timeout += 1,
            LossRule::Trim => c.mp_retx_trim += 1,
        }
    }
}

/// One unit of the requester's flight.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Unit {
    /// Index in the send queue's MSN numbering (unwrapped MSN).
    pub msn: u64,
    /// PSNs covered (n for a READ request, else 1).
    pub span: u32,
    /// Bytes counted in flight while `InFlight`.
    pub bytes: u64,
    pub tx_time: u64,
    /// Order of the latest transmission.
    pub tx_seq: u64,
    /// Entropy value of the latest transmission.
    pub entropy: u16,
    pub state: UnitState,
    /// Acknowledged units sent after this one's latest transmission.
    pub later_acked: u32,
    /// Transmissions so far.
    pub sends: u32,
    /// An atomic: acknowledged only by its Atomic Acknowledge.
    pub atomic: bool,
    /// Why it waits to be sent again (`Lost`); `None` after an RNR wait,
    /// which is no loss.
    pub lost_by: Option<LossRule>,
}

/// MR-MPL-3 / MR-MPL-4: counts, for every in-flight unit, the newly
/// acknowledged units whose latest transmission came after its own, and
/// returns the keys that reach `k`.
pub(crate) fn by_reorder<'a>(
    units: impl Iterator<Item = (&'a u64, &'a mut Unit)>,
    newly_acked_seqs: &mut [u64],
    k: u32,
) -> Vec<u64> {
    newly_acked_seqs.sort_unstable();
    let mut lost = Vec::new();
    if newly_acked_seqs.is_empty() {
        return lost;
    }
    for (&key, u) in units {
        if u.state != UnitState::InFlight {
            continue;
        }
        let later = newly_acked_seqs.len() - newly_acked_seqs.partition_point(|&s| s <= u.tx_seq);
        u.later_acked = u.later_acked.saturating_add(later as u32);
        if u.later_acked >= k {
            lost.push(key);
        }
    }
    lost
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn unit(seq: u64) -> Unit {
        Unit {
            msn: 0,
            span: 1,
            bytes: 100,
            tx_time: seq,
            tx_seq: seq,
            entropy: 0xC000,
            state: UnitState::InFlight,
            later_acked: 0,
            sends: 1,
            atomic: false,
            lost_by: None,
        }
    }

    #[test]
    fn k_later_acknowledged() {
        let mut m: BTreeMap<u64, Unit> = (0..6).map(|i| (i, unit(i))).collect();
        // Units 2 and 3 acknowledged: only 2 later than unit 0 and 1.
        let lost = by_reorder(m.iter_mut(), &mut [2, 3], 3);
        assert!(lost.is_empty(), "MR-MPL-4: fewer than K");
        let lost = by_reorder(m.iter_mut(), &mut [4], 3);
        assert_eq!(lost, vec![0, 1], "MR-MPL-3");
        // A retransmitted unit counts from its new transmission.
        let u = m.get_mut(&0).unwrap();
        u.tx_seq = 10;
        u.later_acked = 0;
        let lost = by_reorder(m.iter_mut().filter(|(k, _)| **k == 0), &mut [5, 6, 7], 3);
        assert!(lost.is_empty());
    }
}
