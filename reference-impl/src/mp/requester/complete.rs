//! MP ACKs and MP Atomic Acknowledges at the requester (SPEC §7.6, §7.7,
//! §7.8, §7.10, §7.12–§7.15).

use super::MpRequester;
use crate::cq::WcStatus;
use crate::mp::loss::{LossRule, UnitState};
use crate::mp::rtt::sample_from_echo;
use crate::qp_config::{Env, QpConfig};
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
        self.prune_tx();
    }

    /// Echoed entropy and timestamp: RTT sample (MR-MPL-1), probe answers
    /// (MR-MPF-7) and skipping (MR-MPS-5). Returns the sample.
    fn echo(&mut self, s: &SackethRepr, now: u64) -> u64 {
        let r = sample_from_echo(now, s.echoed_timestamp);
        // MR-MPT-10: a NAK 0x65 whose echoed timestamp is 0 (the MPETH was
        // cut) gives no sample.
        if !(s.syndrome.0 == 0x65 && s.echoed_timestamp == 0) {
            self.rtt.sample(r);
        }
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
        // The list of acknowledged orders is a buffer kept between ACKs.
        let mut acked = Acked {
            seqs: std::mem::take(&mut self.acked_seqs),
            bytes: 0,
        };
        acked.seqs.clear();
        self.on_ack_with(cfg, pkt, env, &mut acked);
        self.acked_seqs = acked.seqs;
    }

    fn on_ack_with(
        &mut self,
        cfg: &QpConfig,
        pkt: &RxPacket<'_>,
        env: &mut Env<'_>,
        acked: &mut Acked,
    ) {
        let Some(s) = pkt.ext.sacketh else { return };
        let syn = s.syndrome.0;
        // MR-MPP-19, MR-MPL-9.
        if matches!(syn, 0x40..=0x5F | 0x80..=0xFF | 0x60) {
            return;
        }
        let now = env.now;
        let cum = self.index(pkt.bth.psn).map_or(self.cum_next, |c| c + 1);
        if cum > self.sent_end || self.names_unsent(&s) {
            return; // MR-MPA-10
        }
        let r = self.echo(&s, now);
        if cum > self.cum_next {
            self.cum_next = cum;
        }
        // Every unit before c + 1, in PSN order, without collecting them.
        let mut from = 0;
        while let Some(key) = self.units.first_in(from, cum) {
            self.ack_unit(key, acked);
            from = key + 1;
        }
        // zoo: mp-go-back-n — the bitmap is ignored.
        if (matches!(syn, 0x00..=0x1F) || pkt.bth.opcode == Opcode::MP_ATOMIC_ACK)
            && !zoo!(cfg.mutant, MpGoBackN)
        {
            self.ack_bitmap(&s, acked);
        }
        if !acked.seqs.is_empty() {
            self.progressed(cfg);
            self.release_refused(now);
        }
        if pkt.bth.opcode == Opcode::MP_ATOMIC_ACK {
            self.atomic_result(cfg, pkt, &s, acked, env);
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
                // MR-MPL-3: rule (a), for the units in flight (in PSN
                // order, as the losses retire entropy values and start
                // probes in that order).
                for &seq in &acked.seqs {
                    self.reorder.acked(seq);
                }
                if !acked.seqs.is_empty()
                    && let Some(t) = self.reorder.threshold()
                {
                    let mut lost: Vec<u64> = self
                        .by_tx
                        .iter()
                        .take_while(|&(seq, _)| seq < t)
                        .filter(|&(seq, key)| self.live(seq, key))
                        .map(|(_, key)| key)
                        .filter(|&k| {
                            self.units
                                .get(k)
                                .is_some_and(|u| u.state == UnitState::InFlight && !u.psn_acked)
                        })
                        .collect();
                    lost.sort_unstable();
                    for key in lost {
                        self.deem_lost(key, LossRule::Reorder, now, env);
                    }
                }
            }
            0x20..=0x3F => {
                // MR-MPP-18.
                let Some(unit) = base.and_then(|b| self.units.get(b)) else {
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
            0x66 => {
                // MR-MPP-25: arrived, not acknowledged; counted against
                // rnr_retry as an RNR NAK is (§6.11).
                let Some(b) = base.filter(|&b| {
                    self.units
                        .get(b)
                        .is_some_and(|u| u.state != UnitState::Sacked)
                }) else {
                    return;
                };
                if cfg.rnr_retry != 7 {
                    if self.rnr_left == 0 {
                        return self.fail_at(cfg, env, base, WcStatus::RnrRetryExcErr);
                    }
                    self.rnr_left -= 1;
                }
                self.refuse(b, now);
            }
            0x65 => {
                // MR-MPT-6, MR-MPT-7: resend now; no retirement.
                if let Some(b) = base
                    && self
                        .units
                        .get(b)
                        .is_some_and(|u| u.state == UnitState::InFlight)
                {
                    self.deem_lost(b, LossRule::Trim, now, env);
                }
            }
            _ => {
                // MR-MPP-16.
                let status = WcStatus::for_nak_code(syn & 0x1F);
                self.fail_at(cfg, env, base, status);
            }
        }
    }

    /// MR-MPA-10: the bitmap reports as received a PSN later than the last
    /// one sent, the PSNs reserved by a READ request counting as sent
    /// (`sent_end` covers them). Bit 63 − i is PSN SACK base + i.
    fn names_unsent(&self, s: &SackethRepr) -> bool {
        if s.sack_bitmap == 0 {
            return false;
        }
        let latest = 63 - s.sack_bitmap.trailing_zeros();
        self.index(s.sack_base_psn.add(latest))
            .is_some_and(|i| i >= self.sent_end)
    }

    /// MR-MPA-10: every PSN whose bitmap bit is 1. Walks the units that
    /// overlap the bitmap's 64 PSNs (in PSN order) rather than looking up
    /// each of the 64 PSNs.
    fn ack_bitmap(&mut self, s: &SackethRepr, acked: &mut Acked) {
        if s.sack_bitmap == 0 {
            return;
        }
        let Some(base) = self.index(s.sack_base_psn) else {
            return;
        };
        let end = base + 64;
        // The bits of PSN indices [lo, hi) (bit 0, the most significant,
        // is `base`).
        let bits = |lo: u64, hi: u64| -> u64 {
            let (a, b) = (lo.max(base) - base, hi.min(end).saturating_sub(base));
            if a >= b {
                return 0;
            }
            let upto_b = if b == 64 { u64::MAX } else { !(u64::MAX >> b) };
            upto_b & (u64::MAX >> a)
        };
        let mut hit = [0u64; 64];
        let mut n = 0;
        // A unit starting before the bitmap may span into it (a READ).
        let before = self
            .units
            .last_before(base)
            .map(|(k, u)| (k, k + u64::from(u.span)));
        let within = self
            .units
            .range(base, end)
            .map(|(k, u)| (k, k + u64::from(u.span)));
        for (key, stop) in before.into_iter().chain(within) {
            if s.sack_bitmap & bits(key, stop) != 0 && n < hit.len() {
                hit[n] = key;
                n += 1;
            }
        }
        for &key in &hit[..n] {
            self.ack_unit(key, acked);
        }
    }

    /// One unit acknowledged (MR-MPA-10): SEND/WRITE packets leave the
    /// flight; READ requests wait for responses; atomics for their
    /// acknowledgement (MR-MPP-14).
    pub(super) fn ack_unit(&mut self, key: u64, acked: &mut Acked) {
        let Some(u) = self.units.get(key).copied() else {
            return;
        };
        if u.state == UnitState::Sacked {
            return;
        }
        // MR-MPL-8, MR-MPF-11: an MP ACK of an atomic resent while it
        // awaits its Atomic Acknowledge reports a PSN acknowledged before:
        // no acknowledgement of new PSNs (the resends keep counting as RTO
        // expiries) and no signal for rule (a) or cwnd.
        if !(u.atomic && u.psn_acked) {
            acked.seqs.push(u.tx_seq);
            acked.bytes += u.bytes;
        }
        if u.atomic {
            if u.state == UnitState::InFlight {
                self.in_flight = self.in_flight.saturating_sub(u.bytes);
            }
            self.retx.remove(&key);
            if let Some(unit) = self.units.get_mut(key) {
                unit.state = UnitState::Sacked;
                unit.psn_acked = true;
                // Back in the transmission order if it was deemed lost.
                let seq = unit.tx_seq;
                self.by_tx.insert(seq, key);
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
        // The atomic is answered: the expiries of its resends no longer
        // follow one another (MR-MPL-8).
        self.progressed(cfg);
        if let Some(u) = self.unit_acked(idx)
            && u.state != UnitState::Sacked
        {
            acked.seqs.push(u.tx_seq);
            acked.bytes += u.bytes;
        }
    }
}
