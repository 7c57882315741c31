//! MP READ at the requester (SPEC §7.9): placement of responses at their
//! offset in any order, missing-response detection (K later responses or
//! the RTO) and re-requests of the missing ranges only.

use super::MpRequester;
use super::complete::Acked;
use crate::cq::WcStatus;
use crate::mp::cc::LossKind;
use crate::mp::loss::LossRule;
use crate::mp::rtt::sample_from_echo;
use crate::qp_config::{Env, QpConfig};
use crate::rx::RxPacket;
use crate::wire::ECN_CE;

impl MpRequester {
    pub(super) fn on_read_response(
        &mut self,
        cfg: &QpConfig,
        pkt: &RxPacket<'_>,
        env: &mut Env<'_>,
    ) {
        let Some(m) = pkt.ext.mpeth else { return };
        let now = env.now;
        let p = u64::from(self.pmtu);
        // MR-MPR-5: MSN, offset and length must match an outstanding READ.
        let Some(i) = (0..self.started).find(|&i| {
            let w = &self.sq[i];
            w.is_read() && !w.done && (w.msn as u32 & 0xFF_FFFF) == m.msn.value()
        }) else {
            return;
        };
        let w = &self.sq[i];
        let off = u64::from(m.offset);
        let want = (w.len - off.min(w.len)).min(p);
        let q = off / p;
        let psn_ok = pkt.bth.psn == self.psn(w.first + q);
        // A response beyond the bytes requested so far answers no request
        // (MR-MPR-11): dropped.
        if u64::from(m.msg_len) != w.len
            || off % p != 0
            || (off >= w.len && w.len != 0)
            || q >= u64::from(w.npsn)
            || q as usize >= w.asked_pkts(self.pmtu)
            || !psn_ok
        {
            return;
        }
        let q = q as usize;
        if w.got[q] {
            return; // a duplicate response
        }
        // The READ has executed: further parts may follow (MR-MPR-11).
        self.sq[i].executed = true;
        if pkt.trimmed {
            env.counters.mp_trimmed_received += 1;
            // MR-MPT-8: re-request that range at once, no retirement.
            self.sq[i].rereq.push_back((q as u32, 1, LossRule::Trim));
            self.sq[i].asked[q] = now as u32;
            // A trim is congestion evidence itself (MR-MPC-7).
            self.cc.on_loss(now, self.rtt.srtt(), LossKind::Trim);
            return;
        }
        if pkt.payload.len() as u64 != want {
            return;
        }
        let w = &self.sq[i];
        if env
            .mem
            .scatter(cfg.pd, &w.wr.sg_list, off, pkt.payload)
            .is_err()
        {
            let first = w.first;
            return self.fail_at(cfg, env, Some(first), WcStatus::LocProtErr);
        }
        // RTT sample from the echoed request timestamp (§7.7), one signal.
        let r = sample_from_echo(now, m.timestamp);
        self.rtt.sample(r);
        self.progressed(cfg);
        let qd = r.saturating_sub(self.rtt.base_rtt());
        self.cc
            .on_signal(now, self.rtt.srtt(), pkt.ecn == ECN_CE, qd, want.max(1));
        self.in_flight = self.in_flight.saturating_sub(want);
        let k = self.k;
        let w = &mut self.sq[i];
        w.got[q] = true;
        w.activity = now;
        // MR-MPR-6: K later responses, answering a request sent after the
        // latest ask for q, make q missing.
        let mut missing = Vec::new();
        for j in 0..q {
            if !w.got[j] && (m.timestamp.wrapping_sub(w.asked[j]) as i32) >= 0 {
                w.later[j] += 1;
                if w.later[j] >= k {
                    missing.push(j);
                }
            }
        }
        let (first, npsn) = (w.first, w.npsn);
        if w.got.iter().all(|&g| g) {
            w.done = true;
            w.rereq.clear();
        }
        if !missing.is_empty() {
            self.ask(i, &missing, LossKind::Reorder, now);
        }
        // MR-MPR-6 counts later responses "on the QP": those of earlier
        // READs still missing responses count this one too (their PSNs are
        // lower, and the responder answers READs in MSN order, MR-MPP-7).
        // Without it, a lost last response of a READ waited for the RTO.
        for e in 0..i {
            let pmtu = self.pmtu;
            let w = &mut self.sq[e];
            if !w.is_read() || w.done {
                continue;
            }
            let mut missing = Vec::new();
            // Only requested responses can be missing (MR-MPR-7).
            for j in 0..w.asked_pkts(pmtu) {
                if !w.got[j] && (m.timestamp.wrapping_sub(w.asked[j]) as i32) >= 0 {
                    w.later[j] += 1;
                    if w.later[j] >= k {
                        missing.push(j);
                    }
                }
            }
            if !missing.is_empty() {
                self.ask(e, &missing, LossKind::Reorder, now);
            }
        }
        // MR-MPA-11: a response acknowledges every PSN of the READ's block
        // and before.
        let keys: Vec<u64> = self
            .units
            .range(0, first + u64::from(npsn))
            .map(|(k, _)| k)
            .collect();
        let mut acked = Acked::default();
        for key in keys {
            self.ack_unit(key, &mut acked);
        }
    }

    /// Queues re-requests for the packets `missing` (ascending) of READ
    /// `i`, as contiguous ranges (MR-MPR-7, MR-MPR-8), and counts one
    /// missing-response loss event of `kind` (MR-MPC-7: a decrease only
    /// with congestion evidence).
    fn ask(&mut self, i: usize, missing: &[usize], kind: LossKind, now: u64) {
        let rule = match kind {
            LossKind::Reorder => LossRule::Reorder,
            LossKind::Trim => LossRule::Trim,
            LossKind::Timeout { .. } => LossRule::Timeout,
        };
        let w = &mut self.sq[i];
        let mut start: Option<(usize, usize)> = None;
        let mut ranges = Vec::new();
        for &j in missing {
            w.later[j] = 0;
            w.asked[j] = now as u32;
            start = match start {
                Some((s, e)) if e == j => Some((s, j + 1)),
                Some(r) => {
                    ranges.push(r);
                    Some((j, j + 1))
                }
                None => Some((j, j + 1)),
            };
        }
        ranges.extend(start);
        for (s, e) in ranges {
            w.rereq.push_back((s as u32, (e - s) as u32, rule));
        }
        self.cc.on_loss(now, self.rtt.srtt(), kind);
    }

    /// The READ's RTO expired (MR-MPR-6): every missing range again. The
    /// timer started at the READ's latest request or response.
    pub(super) fn read_missing_all(&mut self, i: usize, now: u64) {
        let Some(w) = self.sq.get_mut(i) else { return };
        let since = w.activity;
        w.activity = now;
        if self.units.contains_key(w.first) {
            return; // the request itself is unacknowledged: its RTO resends it
        }
        w.rereq.clear();
        // Only requested responses can be missing (MR-MPR-7); the rest of
        // the read is asked for in parts (MR-MPR-11).
        let missing: Vec<usize> = (0..w.asked_pkts(self.pmtu))
            .filter(|&j| !w.got[j])
            .collect();
        if !missing.is_empty() {
            self.ask(i, &missing, LossKind::Timeout { since }, now);
        }
    }
}
