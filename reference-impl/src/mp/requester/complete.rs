//! MP ACKs and MP Atomic Acknowledges at the requester (SPEC §7.6, §7.7,
//! §7.8, §7.10, §7.12–§7.15).

use super::MpRequester;
use crate::cq::WcStatus;
use crate::mp::loss::{LossRule, UnitState, by_reorder};
use crate::mp::rtt::sample_from_echo;
use crate::qp::{Env, QpConfig};
use crate::rx::RxPacket;
use crate::timing::rnr_timer_ns;
use metaroce_codec::Opcode;
use metaroce_codec::ext::SackethRepr;

/// What one acknowledgement did.
#[derive(Debug, Default)]
pub(super) struct Acked {
    /// Transmission orders of the units newly acknowledged.
    pub seqs: Vec<u64>,
    /// Payload bytes newly acknowledged.
    pub bytes: u64,
}

impl MpRequester {
    /// A response on an MP QP in RTS.
    pub(crate) fn on_response(&mut self, cfg: &QpConfig, pkt: &RxPacket<'_>, env: &mut Env<'_>) {
        match pkt.bth.opcode {
            Opcode::MP_ACK | Opcode::MP_ATOMIC_ACK => self.on_ack(cfg, pkt, env),
            Opcode::MP_READ_RESPONSE => self.on_read_response(cfg, pkt, env),
            _ => {}
        }
        if !env.enter_err {
            self.complete_front(cfg, env);
        }
    }

    /// Echoed entropy and timestamp: RTT sample (MR-MPL-1), probe answers
    /// (MR-MPF-7) and skipping (MR-MPS-5). Returns the sample.
    fn echo(&mut self, s: &SackethRepr, now: u64) -> u64 {
        let r = sample_from_echo(now, s.echoed_timestamp);
        self.rtt.sample(r);
        let v = s.echoed_entropy;
        if self.probes.answered(v, s.echoed_timestamp) {
            self.entropy.restore(v);
        }
        if s.ecn_ce {
            self.entropy.skip(v, now + self.rtt.srtt());
        }
        r
    }

    fn on_ack(&mut self, cfg: &QpConfig, pkt: &RxPacket<'_>, env: &mut Env<'_>) {
        let Some(s) = pkt.ext.sacketh else { return };
        let syn = s.syndrome.0;
        // MR-MPP-19, MR-MPL-9.
        if matches!(syn, 0x40..=0x5F | 0x80..=0xFF | 0x60) {
            return;
        }
        let now = env.now;
        let cum = self.index(pkt.bth.psn).map_or(self.cum_next, |c| c + 1);
        if cum > self.sent_end {
            return; // MR-MPA-10
        }
        let r = self.echo(&s, now);
        let mut acked = Acked::default();
        if cum > self.cum_next {
            self.cum_next = cum;
        }
        let keys: Vec<u64> = self.units.range(..cum).map(|(&k, _)| k).collect();
        for key in keys {
            self.ack_unit(key, &mut acked);
        }
        // zoo: mp-go-back-n — the bitmap is ignored.
        if (matches!(syn, 0x00..=0x1F) || pkt.bth.opcode == Opcode::MP_ATOMIC_ACK)
            && !zoo!(cfg.mutant, MpGoBackN)
        {
            self.ack_bitmap(&s, &mut acked);
        }
        if !acked.seqs.is_empty() {
            self.progressed(cfg);
        }
        if pkt.bth.opcode == Opcode::MP_ATOMIC_ACK {
            self.atomic_result(cfg, pkt, &s, &mut acked, env);
            if env.enter_err {
                return;
            }
        }
        let base = self.index(s.sack_base_psn);
        match syn {
            0x00..=0x1F => {
                // MR-MPC-2, MR-MPC-9. The signal is taken before the losses
                // it reveals, so that a marked or late one is their
                // congestion evidence (§7.12, MR-MPC-7).
                if acked.bytes > 0 {
                    let q = r.saturating_sub(self.rtt.base_rtt());
                    self.cc
                        .on_signal(now, self.rtt.srtt(), s.ecn_ce, q, acked.bytes);
                }
                // MR-MPL-3: rule (a).
                let lost = by_reorder(self.units.iter_mut(), &mut acked.seqs, self.k);
                for key in lost {
                    self.deem_lost(key, LossRule::Reorder, now, env);
                }
            }
            0x20..=0x3F => {
                // MR-MPP-18.
                let Some(unit) = base.and_then(|b| self.units.get(&b)) else {
                    return;
                };
                if cfg.rnr_retry != 7 {
                    if self.rnr_left == 0 {
                        return self.fail_at(cfg, env, base, WcStatus::RnrRetryExcErr);
                    }
                    self.rnr_left -= 1;
                }
                self.rnr_msn = Some(unit.msn);
                self.rnr_until = Some(now + rnr_timer_ns(syn & 0x1F));
            }
            0x65 => {
                // MR-MPT-6, MR-MPT-7: resend now; no retirement.
                if let Some(b) = base
                    && self
                        .units
                        .get(&b)
                        .is_some_and(|u| u.state == UnitState::InFlight)
                {
                    self.deem_lost(b, LossRule::Trim, now, env);
                }
            }
            _ => {
                // MR-MPP-16.
                let status = match syn {
                    0x61 => WcStatus::RemInvReqErr,
                    0x62 => WcStatus::RemAccessErr,
                    _ => WcStatus::RemOpErr,
                };
                self.fail_at(cfg, env, base, status);
            }
        }
    }

    /// MR-MPA-10: every PSN whose bitmap bit is 1.
    fn ack_bitmap(&mut self, s: &SackethRepr, acked: &mut Acked) {
        if s.sack_bitmap == 0 {
            return;
        }
        let Some(base) = self.index(s.sack_base_psn) else {
            return;
        };
        for i in 0..64u64 {
            if s.sack_bitmap & (1 << (63 - i)) == 0 {
                continue;
            }
            let idx = base + i;
            if let Some((&key, u)) = self.units.range(..=idx).next_back()
                && key + u64::from(u.span) > idx
            {
                self.ack_unit(key, acked);
            }
        }
    }

    /// One unit acknowledged (MR-MPA-10): SEND/WRITE packets leave the
    /// flight; READ requests wait for responses; atomics for their
    /// acknowledgement (MR-MPP-14).
    pub(super) fn ack_unit(&mut self, key: u64, acked: &mut Acked) {
        let Some(u) = self.units.get(&key).copied() else {
            return;
        };
        if u.state == UnitState::Sacked {
            return;
        }
        acked.seqs.push(u.tx_seq);
        acked.bytes += u.bytes;
        if u.atomic {
            if u.state == UnitState::InFlight {
                self.in_flight = self.in_flight.saturating_sub(u.bytes);
            }
            self.retx.remove(&key);
            if let Some(unit) = self.units.get_mut(&key) {
                unit.state = UnitState::Sacked;
                if !self.by_tx.values().any(|&k| k == key) {
                    self.by_tx.insert(unit.tx_seq, key);
                }
            }
            return;
        }
        self.unit_acked(key);
        if let Some(i) = self.wqe_at(key)
            && !self.sq[i].wr.op.is_rd_atomic()
        {
            self.sq[i].acked += 1;
        }
    }

    /// MR-MPP-13/14: the original value of an atomic.
    fn atomic_result(
        &mut self,
        cfg: &QpConfig,
        pkt: &RxPacket<'_>,
        s: &SackethRepr,
        acked: &mut Acked,
        env: &mut Env<'_>,
    ) {
        let Some(idx) = self.index(s.sack_base_psn) else {
            return;
        };
        let Some(i) = self.wqe_at(idx) else { return };
        let w = &self.sq[i];
        if !w.wr.op.is_atomic() || w.first != idx {
            return self.fail_at(cfg, env, Some(idx), WcStatus::BadRespErr);
        }
        if w.done {
            return;
        }
        let orig = pkt.ext.atomic_ack_eth.map_or(0, |a| a.orig);
        if env
            .mem
            .scatter(cfg.pd, &w.wr.sg_list, 0, &orig.to_ne_bytes())
            .is_err()
        {
            return self.fail_at(cfg, env, Some(idx), WcStatus::LocProtErr);
        }
        self.sq[i].done = true;
        if let Some(u) = self.unit_acked(idx)
            && u.state != UnitState::Sacked
        {
            acked.seqs.push(u.tx_seq);
            acked.bytes += u.bytes;
        }
    }
}
