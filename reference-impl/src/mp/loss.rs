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
    /// Transmissions so far.
    pub sends: u32,
    /// An atomic: acknowledged only by its Atomic Acknowledge.
    pub atomic: bool,
    /// An atomic whose PSN an MP ACK has reported: never deemed lost again
    /// (§7.8), only resent at the RTO until its Atomic Acknowledge arrives
    /// (MR-MPP-14), so its entropy values never retire for it (MR-MPF-1).
    pub psn_acked: bool,
    /// Why it waits to be sent again (`Lost`); `None` after an RNR wait,
    /// which is no loss.
    pub lost_by: Option<LossRule>,
}

/// Rule (a) of §7.8 (MR-MPL-3, MR-MPL-4) without a scan of the flight
/// per acknowledgement. The acknowledged units sent after a unit's latest
/// transmission are those acknowledged with a later transmission order (an
/// order is given when a unit leaves, so a later one was acknowledged after
/// it left): their number depends only on the unit's own order s, and
/// reaches K exactly when s lies below the K-th largest order acknowledged
/// so far. So the watch keeps those K orders, and the units deemed lost
/// are the in-flight ones below the smallest of them: found in the
/// requester's transmission-order map from its start, O(K + lost) per
/// acknowledgement instead of O(units).
#[derive(Clone, Debug)]
pub(crate) struct ReorderWatch {
    k: usize,
    /// The K largest transmission orders acknowledged, ascending.
    top: Vec<u64>,
}

impl ReorderWatch {
    pub(crate) fn new(k: u32) -> Self {
        let k = (k as usize).max(1);
        ReorderWatch {
            k,
            top: Vec::with_capacity(k),
        }
    }

    /// One unit acknowledged whose latest transmission had order `seq`.
    pub(crate) fn acked(&mut self, seq: u64) {
        if self.top.len() == self.k {
            if seq <= self.top[0] {
                return;
            }
            self.top.remove(0);
        }
        let at = self.top.partition_point(|&s| s < seq);
        self.top.insert(at, seq);
    }

    /// In-flight units whose latest transmission order is below this have
    /// K or more later units acknowledged: deemed lost. `None` until K
    /// units have been acknowledged.
    pub(crate) fn threshold(&self) -> Option<u64> {
        (self.top.len() == self.k).then(|| self.top[0])
    }

    /// Forgets every acknowledgement (the flight was cleared).
    pub(crate) fn clear(&mut self) {
        self.top.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counting of rule (a) done the slow way: for every in-flight
    /// order, the acknowledged orders later than it.
    fn lost_by_count(in_flight: &[u64], acked: &[u64], k: usize) -> Vec<u64> {
        in_flight
            .iter()
            .copied()
            .filter(|&s| acked.iter().filter(|&&a| a > s).count() >= k)
            .collect()
    }

    fn lost_by_watch(w: &ReorderWatch, in_flight: &[u64]) -> Vec<u64> {
        let t = w.threshold();
        in_flight
            .iter()
            .copied()
            .filter(|&s| t.is_some_and(|t| s < t))
            .collect()
    }

    #[test]
    fn k_later_acknowledged() {
        let mut w = ReorderWatch::new(3);
        // Units 2 and 3 acknowledged: only 2 later than units 0 and 1.
        w.acked(2);
        w.acked(3);
        assert_eq!(
            lost_by_watch(&w, &[0, 1, 4, 5]),
            Vec::<u64>::new(),
            "MR-MPL-4"
        );
        w.acked(4);
        assert_eq!(lost_by_watch(&w, &[0, 1, 5]), vec![0, 1], "MR-MPL-3");
        // Unit 0 retransmitted (order 10): it counts from its new order.
        w.acked(5);
        w.acked(6);
        w.acked(7);
        assert_eq!(lost_by_watch(&w, &[10]), Vec::<u64>::new());
        w.acked(11);
        w.acked(12);
        assert_eq!(lost_by_watch(&w, &[10]), Vec::<u64>::new());
        w.acked(13);
        assert_eq!(lost_by_watch(&w, &[10]), vec![10]);
        w.clear();
        assert_eq!(w.threshold(), None);
    }

    #[test]
    fn the_watch_agrees_with_counting() {
        // Orders acknowledged out of order, with gaps (bounded, fixed
        // pseudo-random sequence): after every acknowledgement the watch
        // names exactly the units the count names, for K = 1, 3 and 64.
        for k in [1usize, 3, 64] {
            let mut w = ReorderWatch::new(k as u32);
            let mut acked = Vec::new();
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            for _ in 0..150 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let seq = x % 200;
                if acked.contains(&seq) {
                    continue;
                }
                acked.push(seq);
                w.acked(seq);
                let in_flight: Vec<u64> = (0..200).filter(|s| !acked.contains(s)).collect();
                assert_eq!(
                    lost_by_watch(&w, &in_flight),
                    lost_by_count(&in_flight, &acked, k),
                    "k {k}"
                );
            }
        }
    }
}
