//! MP ACKs and MP Atomic Acknowledges at the requester: acknowledgement
//! (MR-MPA-10), RTT samples (§7.7), skipping (MR-MPS-5), probe answers
//! (MR-MPF-7), NAKs (§7.10, §7.15), congestion signals (§7.12) and
//! completions (MR-MPP-10, MR-MPP-14).

use super::{LossCause, MpRequester, WrOp};
use crate::model::mp::{ArrivalInfo, trim};
use crate::model::{CompletionSpec, Effect, Field, Outcomes, WcStatus};
use metaroce_codec::ext::SyndromeKind;
use metaroce_codec::{Opcode, RocePacket};

impl MpRequester {
    /// A response arrives at `arrival.now_ns`: MP ACK, MP Atomic Acknowledge
    /// or MP READ Response. Returns the next state and what follows: drops,
    /// completions, ERR, and what may or must be sent now.
    pub fn on_ack(&self, packet: &RocePacket<'_>, arrival: &ArrivalInfo) -> (Self, Outcomes) {
        let mut next = self.clone();
        let now = arrival.now_ns;
        next.now = next.now.max(now);
        if next.error {
            return (next, Outcomes::none());
        }
        let mut out = match packet.bth.opcode {
            Opcode::MP_READ_RESPONSE => {
                let trimmed = trim::is_trimmed(&next.cfg, packet, arrival);
                next.on_read_response(packet, arrival, trimmed)
            }
            Opcode::MP_ACK | Opcode::MP_ATOMIC_ACK => next.on_sack(packet, arrival),
            _ => Outcomes::none().require(&["MR-OPC-3"], Effect::Drop { counter: None }),
        };
        if next.error
            || out
                .required
                .iter()
                .any(|c| matches!(c.value, Effect::Drop { .. }))
        {
            return (next, out);
        }
        out = next.complete_in_order(out);
        let send = next.next_packets(now);
        out.required.extend(send.required);
        out.optional.extend(send.optional);
        (next, out)
    }

    fn on_sack(&mut self, p: &RocePacket<'_>, arrival: &ArrivalInfo) -> Outcomes {
        let now = arrival.now_ns;
        let Some(s) = p.ext.sacketh else {
            return Outcomes::none().require(&["MR-MPH-6"], Effect::Drop { counter: None });
        };
        let kind = s.syndrome.kind();
        if matches!(kind, SyndromeKind::Reserved { .. }) || s.syndrome.0 & 0x80 != 0 {
            return Outcomes::none().require(&["MR-MPP-19"], Effect::Drop { counter: None });
        }
        if s.syndrome.0 == 0x60 {
            return Outcomes::none().require(&["MR-MPL-9"], Effect::Drop { counter: None });
        }
        let last_sent = self.last_sent_idx.map_or(-1, |i| i as i64);
        let cum = self.idx_of(p.bth.psn).map_or(i64::MIN, |i| i as i64);
        // The PSN before the first one (sq_psn − 1) maps to index −1.
        let cum = if p.bth.psn == self.sq_psn.sub(1) && self.cum_idx < 0 {
            -1
        } else {
            cum
        };
        // MR-MPA-10: nor a bitmap reporting a PSN later than the last sent
        // (a READ's reserved PSNs count as sent: `last_sent_idx` covers them).
        let unsent_bit = s.sack_bitmap != 0
            && self
                .idx_of(s.sack_base_psn.add(63 - s.sack_bitmap.trailing_zeros()))
                .is_some_and(|i| i as i64 > last_sent);
        if cum > last_sent || cum == i64::MIN || unsent_bit {
            return Outcomes::none().require(&["MR-MPA-10"], Effect::Drop { counter: None });
        }
        // RTT sample (MR-MPL-1) and queuing delay (MR-MPC-9).
        let r = u64::from((now as u32).wrapping_sub(s.echoed_timestamp));
        // MR-MPT-10: no sample from a NAK 0x65 whose MPETH was cut
        // (echoed timestamp 0).
        let no_sample = s.syndrome.0 == 0x65 && s.echoed_timestamp == 0;
        if !no_sample {
            self.rtt.sample(r);
        }
        let srtt = self.rtt.srtt_or(&self.cfg);
        if self
            .entropy
            .probe_answered(s.echoed_entropy, s.echoed_timestamp)
        {
            // MR-MPF-7: the value returns to use.
        }
        if s.ecn_ce {
            self.entropy.skip(s.echoed_entropy, now, srtt); // MR-MPS-5
        }
        let out = Outcomes::none();
        match kind {
            SyndromeKind::Nak { code: 5 } => {
                // MR-MPT-6 / MR-MPT-7: lost without retirement or retry count.
                if let Some(idx) = self.idx_of(s.sack_base_psn)
                    && let Some((&start, _)) = self.segs.range(..=idx).next_back()
                {
                    self.deem_lost(start, LossCause::Trimmed, now);
                }
            }
            SyndromeKind::Nak { code: 6 } if self.cfg.resource_nak != Some(false) => {
                // MR-MPP-25: arrived, not acknowledged; counted against
                // rnr_retry as an RNR NAK (§6.11).
                if let Some(idx) = self.idx_of(s.sack_base_psn)
                    && let Some((&start, seg)) = self.segs.range(..=idx).next_back()
                    && idx < start + u64::from(seg.npsn)
                    && !seg.acked
                {
                    if let Some(out) = self.count_rnr(s.sack_base_psn) {
                        self.cum_idx = self.cum_idx.max(cum);
                        return out;
                    }
                    if let Some(seg) = self.segs.get_mut(&start)
                        && seg.lost.is_none()
                    {
                        seg.lost = Some(LossCause::Resource);
                        let rto = self.rtt.rto(&self.cfg);
                        self.refused.insert(start, now.saturating_add(rto));
                    }
                }
            }
            SyndromeKind::Nak { code } => {
                // The BTH PSN still acknowledges cumulatively.
                self.cum_idx = self.cum_idx.max(cum);
                return self.fatal_nak(code, s.sack_base_psn);
            }
            SyndromeKind::RnrNak { timer } => {
                if let Some(out) = self.count_rnr(s.sack_base_psn) {
                    self.cum_idx = self.cum_idx.max(cum);
                    return out;
                }
                // MR-MPP-18: hold new messages; retransmit the refused message after the wait.
                self.rnr_until = now.saturating_add(crate::model::mp::config::rnr_timer_ns(timer));
                if let Some(idx) = self.idx_of(s.sack_base_psn)
                    && let Some(wr) = self.segs.get(&idx).map(|x| x.wr)
                {
                    let idxs: Vec<u64> = self
                        .segs
                        .iter()
                        .filter(|(_, x)| x.wr == wr && !x.acked)
                        .map(|(&i, _)| i)
                        .collect();
                    for i in idxs {
                        self.deem_lost(i, LossCause::Rnr, now);
                    }
                }
            }
            _ => {}
        }
        // Acknowledged: up to the cumulative PSN and every bitmap bit (MR-MPA-10).
        let mut newly_bytes = 0u64;
        let mut newly_psns = 0u64;
        let keys: Vec<u64> = self.segs.keys().copied().collect();
        for idx in keys {
            let Some(seg) = self.segs.get(&idx) else {
                continue;
            };
            let acked = (0..seg.npsn).any(|j| {
                let i = idx + u64::from(j);
                (i as i64) <= cum || s.is_sacked(self.psn(i))
            });
            if acked && !seg.acked {
                let (len, npsn, seq) = (seg.len, seg.npsn, seg.tx_seq);
                let again = seg.psn_acked;
                if let Some(seg) = self.segs.get_mut(&idx) {
                    seg.acked = true;
                    seg.lost = None;
                }
                if again {
                    // A resent atomic's PSN, acknowledged before (MR-MPL-8).
                    continue;
                }
                newly_bytes += u64::from(len);
                newly_psns += u64::from(npsn);
                for _ in 0..npsn {
                    self.acked_seqs.push(seq);
                }
            }
        }
        if cum > self.cum_idx {
            self.cum_idx = cum;
        }
        if p.bth.opcode == Opcode::MP_ATOMIC_ACK {
            let orig = p.ext.atomic_ack_eth.map_or(0, |a| a.orig);
            if let Some(idx) = self.idx_of(s.sack_base_psn)
                && let Some(wr) = self.segs.get(&idx).map(|x| x.wr)
                && let Some(w) = self.wrs.get_mut(&wr)
            {
                if w.atomic_done.is_none() {
                    // Answered: its resends' expiries no longer follow one
                    // another (MR-MPL-8).
                    self.rtt.backoff = 0;
                    self.retries = 0;
                }
                w.atomic_done = Some(orig);
            }
        }
        if newly_psns > 0 {
            // MR-MPL-2: back-off ends; MR-MPL-8: the retry count restarts.
            self.rtt.backoff = 0;
            self.retries = 0;
            self.last_ack_time = now;
        }
        if newly_bytes > 0 || newly_psns > 0 {
            let q = if no_sample {
                0
            } else {
                r.saturating_sub(self.rtt.base_rtt(&self.cfg))
            };
            self.cc
                .signal(&self.cfg, now, srtt, newly_bytes, s.ecn_ce, q); // MR-MPC-2
        }
        self.detect_reorder(now);
        // Forget units below the cumulative ACK whose work requests need nothing more.
        let drop: Vec<u64> = self
            .segs
            .iter()
            .filter(|(i, x)| x.acked && (**i as i64) <= self.cum_idx && !self.awaits_atomic(x.wr))
            .map(|(&i, _)| i)
            .collect();
        for i in drop {
            self.segs.remove(&i);
        }
        self.refused
            .retain(|i, _| self.segs.get(i).is_some_and(|s| !s.acked));
        out
    }

    /// Counts an RNR or resource NAK against `rnr_retry` (§6.11, 7 meaning
    /// unlimited): past it, the work request holding `base` completes with
    /// RNR_RETRY_EXC_ERR and the QP enters ERR (MR-MPP-25, MR-RNR-6).
    fn count_rnr(&mut self, base: metaroce_codec::Psn) -> Option<Outcomes> {
        if self.cfg.rnr_retry >= 7 {
            return None;
        }
        if self.rnr_naks < self.cfg.rnr_retry {
            self.rnr_naks += 1;
            return None;
        }
        Some(self.fail_at(base, WcStatus::RnrRetryExcErr, &["MR-MPP-25"]))
    }

    fn awaits_atomic(&self, wr: u64) -> bool {
        self.wrs.get(&wr).is_some_and(|w| {
            matches!(w.wr.op, WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. })
                && w.atomic_done.is_none()
        })
    }

    /// MR-MPP-16: the work request holding `base` completes with the status of
    /// §6.8, earlier fully acknowledged ones with SUCCESS, other earlier ones
    /// with WR_FLUSH_ERR; the QP enters ERR.
    fn fatal_nak(&mut self, code: u8, base: metaroce_codec::Psn) -> Outcomes {
        let status = match code {
            1 => WcStatus::RemInvReqErr,
            2 => WcStatus::RemAccessErr,
            _ => WcStatus::RemOpErr,
        };
        self.fail_at(base, status, &["MR-MPP-16"])
    }

    /// The work request holding `base` completes with `status`, earlier
    /// fully acknowledged ones with SUCCESS, other earlier ones with
    /// WR_FLUSH_ERR; the QP enters ERR.
    fn fail_at(
        &mut self,
        base: metaroce_codec::Psn,
        status: WcStatus,
        reqs: &'static [&'static str],
    ) -> Outcomes {
        let idx = self.idx_of(base).unwrap_or(u64::MAX);
        let mut out = Outcomes::none();
        let wrs: Vec<_> = self.wrs.values().cloned().collect();
        for w in wrs {
            let holds = idx >= w.first_idx && idx < w.first_idx + u64::from(w.npsn);
            let st = if holds {
                status
            } else if w.first_idx + u64::from(w.npsn) <= idx && self.wr_acked(w.wr.wr) {
                WcStatus::Success
            } else {
                WcStatus::WrFlushErr
            };
            out = out.require(
                reqs,
                Effect::Complete(CompletionSpec {
                    wr: w.wr.wr,
                    status: Field::Exact(st),
                    byte_len: Field::Any,
                    imm: Field::Any,
                }),
            );
        }
        self.wrs.clear();
        self.error = true;
        out.require(reqs, Effect::EnterError)
    }

    /// Every PSN of work request `wr` acknowledged.
    fn wr_acked(&self, wr: u64) -> bool {
        let Some(w) = self.wrs.get(&wr) else {
            return true;
        };
        let units = match w.wr.op {
            WrOp::Read { .. } | WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. } => 1,
            _ => w.npsn,
        };
        w.sent >= units
            && (0..w.npsn).all(|j| {
                let i = w.first_idx + u64::from(j);
                (i as i64) <= self.cum_idx || self.segs.get(&i).is_none_or(|x| x.acked)
            })
    }

    /// MR-MPP-10, MR-MPR-5, MR-MPP-14: complete work requests in posting order
    /// while the oldest is done.
    pub(crate) fn complete_in_order(&mut self, mut out: Outcomes) -> Outcomes {
        while let Some((&id, w)) = self.wrs.iter().next() {
            let done = match w.wr.op {
                WrOp::Read { .. } => w
                    .read
                    .as_ref()
                    .is_some_and(|r| r.received.len() as u32 >= w.npsn),
                WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. } => w.atomic_done.is_some(),
                _ => self.wr_acked(id),
            };
            if !done {
                break;
            }
            let signaled = w.wr.signaled;
            let reqs: &'static [&'static str] = match w.wr.op {
                WrOp::Read { .. } => &["MR-MPR-5"],
                WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. } => &["MR-MPP-14"],
                _ => &["MR-MPP-10"],
            };
            if signaled {
                out = out.require(
                    reqs,
                    Effect::Complete(CompletionSpec {
                        wr: id,
                        status: Field::Exact(WcStatus::Success),
                        byte_len: Field::Any,
                        imm: Field::Any,
                    }),
                );
            }
            self.wrs.remove(&id);
            self.segs.retain(|_, s| s.wr != id);
        }
        out
    }
}
