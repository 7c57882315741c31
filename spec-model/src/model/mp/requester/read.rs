//! READ responses at the requester: placement bookkeeping, missing responses
//! and re-requests (§7.9), trimmed responses (MR-MPT-8).

use super::MpRequester;
use super::cc::LossEvent;
use crate::model::mp::ArrivalInfo;
use crate::model::{Effect, Outcomes};
use metaroce_codec::RocePacket;

impl MpRequester {
    /// An MP READ Response arrives (MR-MPR-5). `trimmed`: recognised as
    /// trimmed (§7.10), so the range it carried is re-requested at once
    /// (MR-MPT-8).
    pub(crate) fn on_read_response(
        &mut self,
        p: &RocePacket<'_>,
        arrival: &ArrivalInfo,
        trimmed: bool,
    ) -> Outcomes {
        let now = arrival.now_ns;
        let Some(m) = p.ext.mpeth else {
            return Outcomes::none().require(&["MR-MPR-5"], Effect::Drop { counter: None });
        };
        let pmtu = self.cfg.pmtu.max(1);
        let found = self.wrs.values().find(|w| {
            w.read.is_some() && w.msn == m.msn && w.wr.op.len() == m.msg_len && w.sent > 0
        });
        let Some(w) = found.cloned() else {
            return Outcomes::none().require(&["MR-MPR-5"], Effect::Drop { counter: None });
        };
        let i = m.offset / pmtu;
        let expect_len = self.resp_len(&w, i);
        let psn_ok = self.idx_of(p.bth.psn) == Some(w.first_idx + u64::from(i));
        // A response beyond the bytes requested so far answers no request
        // (MR-MPR-11).
        if !m.offset.is_multiple_of(pmtu)
            || i >= w.npsn
            || i >= self.asked_pkts(&w)
            || !psn_ok
            || (!trimmed && p.payload.len() as u32 != expect_len)
        {
            return Outcomes::none().require(&["MR-MPR-5"], Effect::Drop { counter: None });
        }
        // RTT sample from the echoed request timestamp (§7.7).
        let r = u64::from((now as u32).wrapping_sub(m.timestamp));
        self.rtt.sample(r);
        let mut newly = 0u64;
        if let Some(rp) = self.wrs.get_mut(&w.wr.wr).and_then(|w| w.read.as_mut()) {
            rp.last_activity = now;
            if trimmed {
                if !rp.received.contains(&i) {
                    rp.missing.insert(i);
                }
            } else if rp.received.insert(i) {
                rp.missing.remove(&i);
                newly = u64::from(expect_len);
            }
        }
        if trimmed {
            // A trim is congestion evidence in itself (§7.12, MR-MPC-7).
            let srtt = self.rtt.srtt_or(&self.cfg);
            self.cc.on_loss(&self.cfg, LossEvent::Trim, now, srtt);
            return Outcomes::none();
        }
        self.tx_seq_arrivals(w.first_idx + u64::from(i));
        if newly > 0 {
            let srtt = self.rtt.srtt_or(&self.cfg);
            let q = r.saturating_sub(self.rtt.base_rtt(&self.cfg));
            self.cc
                .signal(&self.cfg, now, srtt, newly, arrival.ecn_ce, q);
        }
        self.detect_read_missing(now, false);
        Outcomes::none()
    }

    fn tx_seq_arrivals(&mut self, idx: u64) {
        let seq = self.tx_seq;
        if !self.read_arrivals.iter().any(|&(i, _)| i == idx) {
            self.read_arrivals.push((idx, seq));
        }
    }

    /// MR-MPR-6: response q of an outstanding READ is missing once K distinct
    /// later response PSNs have arrived since it was last requested, or (by
    /// timer) once the RTO has passed since the latest request or response.
    /// A missing response is a loss event: it decreases cwnd when it has
    /// congestion evidence (MR-MPC-7, §7.12); the RTO's timer started at the
    /// READ's latest request or response.
    ///
    /// Returns whether the timer fired for a READ with no unacknowledged PSN
    /// before its own, which counts as an RTO expiry (§7.9).
    pub(crate) fn detect_read_missing(&mut self, now: u64, by_timer: bool) -> bool {
        let k = self.cfg.reorder_threshold as usize;
        let rto = self.rtt.rto(&self.cfg);
        let mut counted = false;
        let unacked_before: Vec<u64> = self
            .segs
            .iter()
            .filter(|(_, s)| !s.acked)
            .map(|(&i, _)| i)
            .collect();
        // The loss events found: K later responses, or the RTO since the
        // timer's start.
        let mut events: Vec<LossEvent> = Vec::new();
        let arrivals = self.read_arrivals.clone();
        let asked: Vec<u32> = self.wrs.values().map(|w| self.asked_pkts(w)).collect();
        for (w, &n) in self.wrs.values_mut().zip(&asked) {
            let first = w.first_idx;
            // Only requested responses can be missing (MR-MPR-7).
            let sent = w.sent > 0;
            let Some(r) = w.read.as_mut() else { continue };
            if !sent {
                continue;
            }
            let stale = by_timer && now.saturating_sub(r.last_activity) >= rto;
            let behind = unacked_before.iter().any(|&i| i < first);
            for i in 0..n {
                if r.received.contains(&i) || r.missing.contains(&i) {
                    continue;
                }
                let since = r.requested_seq.get(&i).copied().unwrap_or(0);
                let later = arrivals
                    .iter()
                    .filter(|&&(idx, seq)| idx > first + u64::from(i) && seq >= since)
                    .count();
                if later >= k || stale {
                    if later < k && !behind {
                        counted = true;
                    }
                    r.missing.insert(i);
                    events.push(if later >= k {
                        LossEvent::Reorder
                    } else {
                        LossEvent::Timeout {
                            since: r.last_activity,
                        }
                    });
                }
            }
        }
        // One decrease at most (MR-MPC-3), when any event has evidence
        // (MR-MPC-7, §7.12).
        let srtt = self.rtt.srtt_or(&self.cfg);
        if events.iter().any(|&e| self.cc.has_evidence(e, now, srtt)) {
            self.cc.decrease(&self.cfg, now, srtt);
        }
        counted
    }
}
