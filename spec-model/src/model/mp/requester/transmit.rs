//! A packet the requester actually sent: update the state with the choices
//! the implementation made and report the requirements the packet breaks.

use super::{LossCause, MpRequester, Seg, WrOp};
use crate::Finding;
use crate::model::mp::spec_allows;
use metaroce_codec::{Opcode, RocePacket};

impl MpRequester {
    /// Records `packet`, sent from UDP source port `ev` at `now`, and returns
    /// the findings against it.
    pub fn on_transmit(&self, packet: &RocePacket<'_>, ev: u16, now: u64) -> (Self, Vec<Finding>) {
        let mut next = self.clone();
        next.now = next.now.max(now);
        let f = next.transmit(packet, ev, now);
        (next, f)
    }

    fn transmit(&mut self, p: &RocePacket<'_>, ev: u16, now: u64) -> Vec<Finding> {
        let mut f = Vec::new();
        let op = p.bth.opcode;
        if !self.cfg.entropy_set.is_empty() && !self.cfg.entropy_set.contains(&ev) {
            f.push(Finding::new(
                "MR-MPS-1",
                format!("source port {ev:#06x} is not in the entropy set"),
            ));
        }
        if !op.is_mp_request() {
            f.push(Finding::new(
                "MR-MPN-3",
                format!("requester sent opcode {:#04x}", op.0),
            ));
            return f;
        }
        let Some(m) = p.ext.mpeth else {
            f.push(Finding::new("MR-MPH-1", "request without MPETH"));
            return f;
        };
        if op == Opcode::MP_PROBE {
            let spec = self.probe_spec(ev);
            if !spec_allows(&spec, p, ev) {
                f.push(Finding::new("MR-MPF-4", "probe fields differ from §7.13"));
            }
            if self.entropy.retired.contains_key(&ev)
                && !self
                    .entropy
                    .probe_sent(ev, m.timestamp, now, self.cfg.retire_hold_max)
            {
                f.push(Finding::new(
                    "MR-MPF-3",
                    format!("probe on {ev:#06x} earlier than its hold"),
                ));
            }
            self.counters.mp_probes_sent += 1;
            return f;
        }
        // MR-MPP-21: O only toward a peer that announced it, and in every
        // packet of a message or in none (the first packet sent decides).
        if m.ordered && !self.cfg.peer_ordered {
            f.push(Finding::new(
                "MR-MPP-21",
                format!(
                    "MPETH O set (MSN {}) toward a peer that did not announce O",
                    m.msn.value()
                ),
            ));
        }
        if let Some(w) = self.wrs.values_mut().find(|w| w.msn == m.msn) {
            match w.ordered {
                Some(o) if o != m.ordered => f.push(Finding::new(
                    "MR-MPP-21",
                    format!(
                        "MPETH O {} in PSN {} but {} in an earlier packet of MSN {}",
                        u8::from(m.ordered),
                        p.bth.psn,
                        u8::from(o),
                        m.msn.value()
                    ),
                )),
                Some(_) => {}
                None => w.ordered = Some(m.ordered),
            }
        }
        let allowed = self.entropy.allowed_next(now);
        if !allowed.contains(&ev) {
            let id = if self.entropy.retired.contains_key(&ev)
                && self.entropy.retired.len() < self.entropy.set.len()
            {
                "MR-MPF-2"
            } else if self
                .entropy
                .skipped_until
                .get(&ev)
                .is_some_and(|&u| u > now)
            {
                "MR-MPS-5"
            } else {
                "MR-MPS-3"
            };
            f.push(Finding::new(
                id,
                format!("entropy {ev:#06x} not allowed now (allowed {allowed:x?})"),
            ));
        }
        let inflight = self.bytes_in_flight();
        let Some(idx) = self.idx_of(p.bth.psn) else {
            f.push(Finding::new("MR-PSN-3", "PSN outside the sent range"));
            return f;
        };
        let pmtu = self.cfg.pmtu.max(1);
        // MR-MPR-11: a further part of a READ already sent (R clear,
        // offset > 0).
        let part_wr = (op == Opcode::MP_READ_REQUEST && !m.retransmission && m.offset > 0)
            .then(|| {
                self.wrs
                    .values()
                    .find(|w| w.msn == m.msn && w.read.is_some() && w.sent > 0)
                    .map(|w| w.wr.wr)
            })
            .flatten();
        if let Some(wr) = part_wr {
            let w = self.wrs[&wr].clone();
            let r = w.read.clone().unwrap_or_default();
            let dma = p.ext.reth.map_or(0, |r| r.dma_len);
            let len = w.wr.op.len();
            let end = u64::from(m.offset) + u64::from(dma);
            if r.received.is_empty()
                || m.offset != r.asked_to
                || dma == 0
                || dma > self.read_bound()
                || end > u64::from(len)
                || (!dma.is_multiple_of(pmtu) && end != u64::from(len))
                || !spec_allows(&self.part_spec(&w, m.offset, dma, now), p, ev)
            {
                f.push(Finding::new(
                    "MR-MPR-11",
                    format!(
                        "READ part at offset {} of {dma} bytes (requested so far {}, bound {}, executed {})",
                        m.offset,
                        r.asked_to,
                        self.read_bound(),
                        !r.received.is_empty()
                    ),
                ));
            }
            if inflight > 0 && inflight + u64::from(dma) > self.cc.cwnd {
                f.push(Finding::new(
                    "MR-MPC-1",
                    format!("in flight {inflight} + part {dma} > cwnd {}", self.cc.cwnd),
                ));
            }
            self.tx_seq += 1;
            let seq = self.tx_seq;
            if let Some(rp) = self.wrs.get_mut(&wr).and_then(|w| w.read.as_mut()) {
                let (from, to) = (m.offset / pmtu, (end as u32).div_ceil(pmtu));
                for i in from..to {
                    rp.requested_seq.insert(i, seq);
                }
                rp.asked_to = rp.asked_to.max(end.min(u64::from(len)) as u32);
                rp.last_activity = now;
            }
            self.entropy.use_value(ev, now);
            return f;
        }
        // READ re-request of a READ already sent: offset > 0, or offset 0
        // with R set while the first response is deemed missing (MR-MPR-7
        // re-requests from the first missing byte, which may be byte 0).
        let rereq_wr = (op == Opcode::MP_READ_REQUEST)
            .then(|| {
                self.wrs
                    .values()
                    .find(|w| {
                        w.msn == m.msn
                            && w.read.as_ref().is_some_and(|r| {
                                m.offset > 0 || (m.retransmission && r.missing.contains(&0))
                            })
                    })
                    .map(|w| w.wr.wr)
            })
            .flatten();
        if let Some(wr) = rereq_wr {
            let w = self.wrs[&wr].clone();
            let dma = p.ext.reth.map_or(0, |r| r.dma_len);
            let first = m.offset / pmtu;
            let last = (m.offset + dma.max(1) - 1) / pmtu;
            let r = w.read.clone().unwrap_or_default();
            if (first..=last).any(|i| r.received.contains(&i)) || !m.offset.is_multiple_of(pmtu) {
                f.push(Finding::new(
                    "MR-MPR-8",
                    "re-request covers bytes already received",
                ));
            }
            if u64::from(m.offset) + u64::from(dma) > u64::from(r.asked_to) {
                f.push(Finding::new(
                    "MR-MPR-7",
                    format!(
                        "re-request beyond the bytes requested so far ({})",
                        r.asked_to
                    ),
                ));
            }
            let mut spec = self.rerequest_spec(&w, m.offset, dma, now);
            spec.mpeth.ordered = crate::model::Field::Any; // MR-MPP-21 above
            if !spec_allows(&spec, p, ev) {
                f.push(Finding::new(
                    "MR-MPR-7",
                    "re-request fields differ from §7.9",
                ));
            }
            // The range is counted in flight already (§7.12). Exempt from cwnd
            // when every response it asks for is deemed missing and not
            // re-requested since (MR-MPC-10).
            let exempt = (first..=last).all(|i| r.missing.contains(&i));
            if !exempt && inflight > self.cc.cwnd {
                f.push(Finding::new(
                    "MR-MPC-1",
                    format!(
                        "re-request of responses not deemed missing while {inflight} in flight > cwnd {} (MR-MPC-10 exempts only missing ones)",
                        self.cc.cwnd
                    ),
                ));
            }
            self.tx_seq += 1;
            let seq = self.tx_seq;
            if let Some(rp) = self.wrs.get_mut(&wr).and_then(|w| w.read.as_mut()) {
                for i in first..=last {
                    rp.missing.remove(&i);
                    rp.requested_seq.insert(i, seq);
                }
                rp.last_activity = now;
            }
            self.entropy.use_value(ev, now);
            return f;
        }
        let len = p.payload.len() as u32;
        if let Some((start, seg)) = self
            .segs
            .range(..=idx)
            .next_back()
            .map(|(&k, s)| (k, s.clone()))
            && idx < start + u64::from(seg.npsn)
        {
            // A retransmission.
            let atomic_wait = self.wrs.get(&seg.wr).is_some_and(|w| {
                matches!(w.wr.op, WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. })
                    && w.atomic_done.is_none()
            });
            if seg.acked && !atomic_wait {
                f.push(Finding::new(
                    "MR-MPL-6",
                    format!("PSN {} retransmitted after it was acknowledged", p.bth.psn),
                ));
            } else if seg.lost.is_none() && !atomic_wait {
                f.push(Finding::new(
                    "MR-MPL-4",
                    format!("PSN {} retransmitted before it was deemed lost", p.bth.psn),
                ));
            }
            if seg.lost == Some(LossCause::Rnr) && now < self.rnr_until {
                f.push(Finding::new(
                    "MR-MPP-18",
                    "retransmission before the RNR wait ended",
                ));
            }
            if seg.lost == Some(LossCause::Resource) && !self.resource_due(start, now) {
                f.push(Finding::new(
                    "MR-MPP-25",
                    format!(
                        "PSN {} named by a resource NAK resent before every earlier PSN was acknowledged or one RTO passed",
                        p.bth.psn
                    ),
                ));
            }
            if let Some(w) = self.wrs.get(&seg.wr) {
                let mut spec = self.packet_spec(w, seg.offset, true, now);
                spec.udp_src_port = crate::model::Field::Any;
                spec.psn = crate::model::Field::Exact(p.bth.psn);
                spec.mpeth.ordered = crate::model::Field::Any; // MR-MPP-21 above
                if !spec_allows(&spec, p, ev) {
                    f.push(Finding::new(
                        "MR-MPL-7",
                        "retransmission differs from the original or lacks R/AckReq",
                    ));
                }
            }
            if ev == seg.entropy && allowed.len() > 1 {
                f.push(Finding::new(
                    "MR-MPS-7",
                    format!("retransmission reuses entropy {ev:#06x}"),
                ));
            }
            // Bytes in flight counting this copy: a unit still in flight is
            // counted once already. The oldest unacknowledged PSN, deemed lost,
            // is exempt once per loss (MR-MPC-10); a further copy before it is
            // deemed lost again is not.
            // (An acknowledged one is MR-MPL-6 already.)
            let after = if seg.lost.is_some() {
                inflight + u64::from(len)
            } else {
                inflight
            };
            let exempt = seg.lost.is_some() && self.oldest_unacked() == Some(start);
            if !seg.acked && !exempt && inflight > 0 && after > self.cc.cwnd {
                f.push(Finding::new(
                    "MR-MPC-1",
                    format!(
                        "in flight {after} with this copy > cwnd {}{}",
                        self.cc.cwnd,
                        if self.oldest_unacked() == Some(start) {
                            " (MR-MPC-10: one copy of the oldest PSN per loss)"
                        } else {
                            ""
                        }
                    ),
                ));
            }
            self.counters.retransmitted_packets += 1;
            match seg.lost {
                Some(LossCause::Reorder) => self.counters.mp_retx_reorder += 1,
                Some(LossCause::Timeout) => self.counters.mp_retx_timeout += 1,
                Some(LossCause::Trimmed) => self.counters.mp_retx_trim += 1,
                _ => {}
            }
            self.tx_seq += 1;
            let seq = self.tx_seq;
            if let Some(s) = self.segs.get_mut(&start) {
                s.tx_time = now;
                s.tx_seq = seq;
                s.entropy = ev;
                s.lost = None;
                self.refused.remove(&start);
            }
            let wr = seg.wr;
            self.refresh_read_request(wr, seq, now);
            self.entropy.use_value(ev, now);
            return f;
        }
        // A first transmission: it must be the next new packet.
        let Some((w, offset)) = self.next_new().map(|(w, o)| (w.clone(), o)) else {
            f.push(Finding::new(
                "MR-MPH-3",
                "packet for no posted work request",
            ));
            return f;
        };
        let spec = self.packet_spec(&w, offset, false, now);
        let mut spec_no_ev = spec.clone();
        spec_no_ev.udp_src_port = crate::model::Field::Any;
        if let WrOp::Read { len, .. } = w.wr.op {
            // MR-MPH-12, MR-MPR-11: the whole read (L set) or a first part
            // of a multiple of PMTU below it (L clear), at most the bound.
            spec_no_ev.mpeth.dma_len = crate::model::Field::Any;
            spec_no_ev.mpeth.last = crate::model::Field::Any;
            let dma = p.ext.reth.map_or(0, |r| r.dma_len);
            let shape = if dma == len {
                m.last
            } else {
                dma > 0 && dma < len && dma.is_multiple_of(pmtu) && !m.last
            };
            if !shape {
                f.push(Finding::new(
                    "MR-MPH-12",
                    format!(
                        "first READ request asks for {dma} of {len} bytes (L {})",
                        m.last
                    ),
                ));
            } else if dma > self.read_bound() {
                f.push(Finding::new(
                    "MR-MPR-11",
                    format!(
                        "first READ request asks for {dma} bytes > max(PMTU, cwnd) {}",
                        self.read_bound()
                    ),
                ));
            }
        }
        spec_no_ev.mpeth.ordered = crate::model::Field::Any; // MR-MPP-21 above
        if !spec_allows(&spec_no_ev, p, ev) {
            let id = if p.bth.psn != self.psn(w.first_idx + u64::from(offset / pmtu)) {
                "MR-MPH-10"
            } else if m.msn != w.msn {
                "MR-MPH-3"
            } else if m.first != (m.offset == 0) || m.retransmission {
                "MR-MPH-2"
            } else if !p.bth.ack_req && m.last {
                "MR-MPH-9"
            } else {
                "MR-MPH-11"
            };
            f.push(Finding::new(
                id,
                "first transmission differs from §7.2/§7.3",
            ));
        }
        // §7.12: a READ request costs the bytes it asks for.
        let bytes = match w.wr.op {
            WrOp::Read { .. } => u64::from(p.ext.reth.map_or(0, |r| r.dma_len)),
            _ => u64::from(len),
        };
        if inflight > 0 && inflight + bytes > self.cc.cwnd {
            f.push(Finding::new(
                "MR-MPC-1",
                format!("in flight {inflight} + {bytes} > cwnd {}", self.cc.cwnd),
            ));
        }
        let unit_last = idx + u64::from(w.npsn_tail(offset, pmtu)) - 1;
        if unit_last as i64 - self.cum_idx > i64::from(self.cfg.window) {
            f.push(Finding::new(
                "MR-MPW-2",
                format!("PSN {} beyond W of the cumulative ACK", p.bth.psn),
            ));
        }
        // MR-MPP-11: unless it goes at once with O toward a peer that
        // honours O, with no earlier READ or atomic outstanding.
        if self.fence_waits(&w) && !(m.ordered && self.fence_may_order(&w)) {
            f.push(Finding::new(
                "MR-MPP-11",
                "fenced work request sent before earlier ones completed",
            ));
        }
        if now < self.rnr_until {
            f.push(Finding::new("MR-MPP-18", "new packet during the RNR wait"));
        }
        self.tx_seq += 1;
        let npsn = w.npsn_tail(offset, pmtu);
        self.segs.insert(
            idx,
            Seg {
                wr: w.wr.wr,
                npsn,
                offset,
                len,
                tx_time: now,
                tx_seq: self.tx_seq,
                entropy: ev,
                acked: false,
                lost: None,
                psn_acked: false,
            },
        );
        let seq = self.tx_seq;
        if let Some(ws) = self.wrs.get_mut(&w.wr.wr) {
            ws.sent += 1;
            if let Some(r) = ws.read.as_mut() {
                let dma = p.ext.reth.map_or(0, |r| r.dma_len);
                r.first_len = dma;
                r.asked_to = dma;
            }
        }
        self.refresh_read_request(w.wr.wr, seq, now);
        self.last_sent_idx = Some(unit_last);
        self.entropy.use_value(ev, now);
        f
    }

    /// A READ request (first or retransmitted) was sent: every response
    /// not received is requested anew.
    fn refresh_read_request(&mut self, wr: u64, seq: u64, now: u64) {
        let Some(w) = self.wrs.get_mut(&wr) else {
            return;
        };
        let n = w.npsn;
        // Only the responses requested so far (MR-MPR-11).
        let n = match &w.read {
            Some(r) if !w.wr.op.is_empty() => r.asked_to.div_ceil(self.cfg.pmtu.max(1)).min(n),
            _ => n,
        };
        if let Some(r) = w.read.as_mut() {
            for i in 0..n {
                if !r.received.contains(&i) {
                    r.missing.remove(&i);
                    r.requested_seq.insert(i, seq);
                }
            }
            r.last_activity = now;
        }
    }
}
