//! The MP requester (SPEC §7.3–§7.13): sprays packets over the entropy set,
//! tracks every sent unit, retransmits only lost PSNs, re-requests missing
//! READ ranges, limits bytes in flight with cwnd, and completes work
//! requests in posting order.
//!
//! PSNs and MSNs are kept as unwrapped `u64` indices from `sq_psn` and MSN 0;
//! the wire values are these modulo 2^24.

mod complete;
mod read;
mod send;

use super::cc::{Cwnd, LossKind};
use super::config::{Dscps, MpConfig};
use super::entropy::EntropySet;
use super::flight::{TxOrder, UnitMap};
use super::loss::{LossRule, ReorderWatch, Unit, UnitState};
use super::probe::Probes;
use super::rtt::RttEstimator;
use crate::cq::{WcStatus, WorkCompletion};
use crate::error::VerbsError;
use crate::qp_config::{Env, QpConfig};
use crate::wr::{SendWr, WrOp};
use metaroce_codec::Psn;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// One send work request of an MP QP.
#[derive(Clone, Debug)]
pub(crate) struct MpWqe {
    pub wr: SendWr,
    pub len: u64,
    /// Unwrapped MSN (MR-MPH-3).
    pub msn: u64,
    /// First PSN index.
    pub first: u64,
    /// PSNs used (packets, or the READ's reserved block).
    pub npsn: u32,
    pub started: bool,
    /// SEND/WRITE: packets acknowledged.
    pub acked: u32,
    /// READ: all bytes placed; atomic: original value placed.
    pub done: bool,
    /// READ: per response packet, received.
    pub got: Vec<bool>,
    /// READ: per response packet, later responses since last asked.
    pub later: Vec<u32>,
    /// READ: per response packet, timestamp of the latest request for it.
    pub asked: Vec<u32>,
    /// READ: the later of the latest request transmission and the latest
    /// response arrival (MR-MPR-6).
    pub activity: u64,
    /// READ: ranges (first packet, packets) to re-request.
    pub rereq: VecDeque<(u32, u32, LossRule)>,
    /// READ: RETH DMA length of the first request (the whole read, or a
    /// first part, MR-MPH-12, MR-MPR-11).
    pub first_len: u64,
    /// READ: bytes requested so far, from offset 0 (first request and
    /// further parts, MR-MPR-11); only these count in flight (§7.12) and
    /// may be re-requested (MR-MPR-7).
    pub asked_to: u64,
    /// READ: a response has arrived, so the READ has executed and further
    /// parts may be asked for (MR-MPR-11).
    pub executed: bool,
    /// A local error found when the WQE was started.
    pub error: Option<WcStatus>,
    /// Sent with MPETH O in every packet (a fenced request toward a peer
    /// that honours O, MR-MPP-11, MR-MPP-21).
    pub ordered: bool,
}

impl MpWqe {
    pub(crate) fn is_read(&self) -> bool {
        matches!(self.wr.op, WrOp::Read(_))
    }

    pub(crate) fn finished(&self) -> bool {
        if self.wr.op.is_rd_atomic() {
            self.done
        } else {
            self.started && self.acked >= self.npsn
        }
    }

    /// READ: the response packets requested so far (MR-MPR-11).
    /// A READ of length 0 has its one empty response requested with the
    /// request.
    pub(crate) fn asked_pkts(&self, pmtu: u32) -> usize {
        if self.len == 0 {
            return self.got.len();
        }
        (self.asked_to.div_ceil(u64::from(pmtu)) as usize).min(self.got.len())
    }

    pub(crate) fn completion(&self, status: WcStatus) -> WorkCompletion {
        self.wr.completion(self.len, status)
    }
}

/// Requester state of one MP QP.
#[derive(Debug)]
pub(crate) struct MpRequester {
    pub(super) sq: VecDeque<MpWqe>,
    /// `sq[..started]` have PSNs.
    pub(super) started: usize,
    /// Index in `sq` of the WQE whose packets are being sent for the first time.
    pub(super) fresh: usize,
    /// Next packet of that WQE.
    pub(super) fresh_pkt: u32,
    /// PSN of index 0 (`sq_psn`).
    pub(super) origin: Psn,
    /// Next PSN index to give a WQE.
    pub(super) next_psn: u64,
    /// Next unwrapped MSN.
    pub(super) next_msn: u64,
    /// PSN index after the last one sent.
    pub(super) sent_end: u64,
    /// First index not cumulatively acknowledged (c + 1).
    pub(super) cum_next: u64,
    /// Units sent and not acknowledged, by first PSN index.
    pub(super) units: UnitMap,
    /// In-flight units (and atomics awaiting their acknowledgement) by
    /// transmission order, for the RTO and rule (a); an entry counts only
    /// while [`Self::live`].
    pub(super) by_tx: TxOrder,
    /// Units deemed lost, to retransmit.
    pub(super) retx: BTreeSet<u64>,
    pub(super) tx_seq: u64,
    /// Bytes in flight (§7.12).
    pub(super) in_flight: u64,
    pub(super) rd_outstanding: u8,
    pub(super) entropy: EntropySet,
    pub(super) probes: Probes,
    pub(super) rtt: RttEstimator,
    pub(super) cc: Cwnd,
    pub(super) retry_left: u8,
    pub(super) rnr_left: u8,
    pub(super) rnr_until: Option<u64>,
    /// The message refused by the RNR NAK being waited out.
    pub(super) rnr_msn: Option<u64>,
    /// Units named by a resource NAK (MR-MPP-25), out of the flight until
    /// every earlier PSN is acknowledged or this deadline (one RTO after
    /// the NAK) passes.
    pub(super) refused: BTreeMap<u64, u64>,
    pub(super) k: u32,
    /// Rule (a) of §7.8 over the units' transmission orders.
    pub(super) reorder: ReorderWatch,
    /// Transmission orders acknowledged by the ACK being handled (a
    /// buffer kept between ACKs).
    pub(super) acked_seqs: Vec<u64>,
    pub(super) window: u32,
    pub(super) pmtu: u32,
    /// DSCPs of its data packets and probes (MR-MPT-9, MR-MPA-12).
    pub(super) dscps: Dscps,
    /// `mp_peer_ordered` (SPEC §7.5).
    pub(super) peer_ordered: bool,
    /// Probes to send now (values).
    pub(super) probe_now: VecDeque<u16>,
}

impl MpRequester {
    pub(crate) fn new(cfg: &QpConfig, mp: &MpConfig, seed: u64) -> Self {
        let t = &mp.tuning;
        MpRequester {
            sq: VecDeque::new(),
            started: 0,
            fresh: 0,
            fresh_pkt: 0,
            origin: Psn::new(cfg.sq_psn),
            next_psn: 0,
            next_msn: 0,
            sent_end: 0,
            cum_next: 0,
            units: UnitMap::default(),
            by_tx: TxOrder::default(),
            retx: BTreeSet::new(),
            tx_seq: 0,
            in_flight: 0,
            rd_outstanding: 0,
            // zoo: mp-single-entropy — a set of one value.
            entropy: EntropySet::new(
                zoo!(cfg.mutant, MpSingleEntropy => mp.values.iter().take(1).copied().collect(),
                    else mp.values.clone()),
                seed,
            ),
            probes: Probes::new(t.retire_hold_ns, t.retire_hold_max_ns),
            rtt: RttEstimator::new(t),
            cc: Cwnd::new(t, cfg.pmtu),
            retry_left: cfg.retry_cnt,
            rnr_left: cfg.rnr_retry,
            rnr_until: None,
            rnr_msn: None,
            refused: BTreeMap::new(),
            k: u32::from(t.reorder_threshold),
            reorder: ReorderWatch::new(u32::from(t.reorder_threshold)),
            acked_seqs: Vec::new(),
            window: mp.window,
            pmtu: cfg.pmtu,
            dscps: mp.dscps(),
            peer_ordered: mp.peer_ordered,
            probe_now: VecDeque::new(),
        }
    }

    /// MR-QP-9: the first request packet carries `sq_psn`; cwnd starts at
    /// `mp_cwnd_init` (MR-MPC-6).
    pub(crate) fn start(&mut self, cfg: &QpConfig, mp: &MpConfig) {
        self.origin = Psn::new(cfg.sq_psn);
        self.retry_left = cfg.retry_cnt;
        self.rnr_left = cfg.rnr_retry;
        self.pmtu = cfg.pmtu;
        self.cc = Cwnd::new(&mp.tuning, cfg.pmtu);
        self.rtt = RttEstimator::new(&mp.tuning);
    }

    pub(crate) fn depth(&self) -> usize {
        self.sq.len()
    }

    /// The wire PSN of an index.
    pub(super) fn psn(&self, idx: u64) -> Psn {
        self.origin.add(idx as u32)
    }

    /// The index of a wire PSN, taken within 2^23 of the first PSN not
    /// cumulatively acknowledged.
    pub(super) fn index(&self, psn: Psn) -> Option<u64> {
        let base = self.cum_next;
        let b = self.psn(base);
        let d = psn.distance(b);
        if d < 1 << 23 {
            Some(base + u64::from(d))
        } else {
            base.checked_sub(u64::from(b.distance(psn)))
        }
    }

    /// `post_send` on an MP QP.
    pub(crate) fn post(
        &mut self,
        cfg: &QpConfig,
        wr: SendWr,
        flushed: bool,
        env: &mut Env<'_>,
    ) -> Result<(), VerbsError> {
        if wr.ud.is_some() {
            return Err(VerbsError::BadDestination);
        }
        if wr.op.is_atomic() && (wr.sg_list.len() != 1 || wr.sg_list[0].len != 8) {
            return Err(VerbsError::UnsupportedOperation(
                "an atomic needs one 8-byte local buffer",
            ));
        }
        let len = if wr.op.is_atomic() { 8 } else { wr.total_len() };
        let wqe = MpWqe {
            wr,
            len,
            msn: 0,
            first: 0,
            npsn: 0,
            started: false,
            acked: 0,
            done: false,
            got: Vec::new(),
            later: Vec::new(),
            asked: Vec::new(),
            activity: 0,
            rereq: VecDeque::new(),
            first_len: 0,
            asked_to: 0,
            executed: false,
            error: None,
            ordered: false,
        };
        if flushed {
            cfg.complete_send(env, wqe.completion(WcStatus::WrFlushErr));
        } else {
            self.sq.push_back(wqe);
        }
        Ok(())
    }

    /// Index in `sq` of the started WQE holding PSN index `idx`.
    pub(super) fn wqe_at(&self, idx: u64) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.started.min(self.sq.len()));
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.sq[mid].first + u64::from(self.sq[mid].npsn) <= idx {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let i = lo;
        (i < self.started && self.sq[i].first <= idx).then_some(i)
    }

    /// Completes finished WQEs at the front, in posting order (MR-MPP-10,
    /// MR-MPR-5, MR-MPP-14).
    pub(super) fn complete_front(&mut self, cfg: &QpConfig, env: &mut Env<'_>) {
        while let Some(w) = self.sq.front() {
            if !w.started {
                if let Some(status) = w.error {
                    let wc = w.completion(status);
                    self.sq.pop_front();
                    cfg.complete_send(env, wc);
                    if status == WcStatus::LocProtErr {
                        env.enter_err = true;
                        return;
                    }
                    continue;
                }
                break;
            }
            if !w.finished() {
                break;
            }
            let Some(w) = self.sq.pop_front() else { break };
            self.started -= 1;
            // Counted until completion, so the responder still keeps every
            // READ the requester may re-request (MR-MPR-10).
            if w.wr.op.is_rd_atomic() {
                self.rd_outstanding = self.rd_outstanding.saturating_sub(1);
            }
            if self.fresh == 0 {
                self.fresh_pkt = 0;
            } else {
                self.fresh -= 1;
            }
            if w.wr.signaled || cfg.sq_sig_all {
                cfg.complete_send(env, w.completion(WcStatus::Success));
            }
        }
    }

    /// Completes the WQE containing `idx` with `status`, flushes earlier
    /// unfinished ones first (posting order), and asks for ERR (MR-MPP-16).
    pub(super) fn fail_at(
        &mut self,
        cfg: &QpConfig,
        env: &mut Env<'_>,
        idx: Option<u64>,
        status: WcStatus,
    ) {
        while let Some(w) = self.sq.pop_front() {
            let hit = idx
                .is_none_or(|i| w.started && w.first <= i && i < w.first + u64::from(w.npsn))
                || !w.started;
            if hit {
                cfg.complete_send(env, w.completion(status));
                break;
            }
            let st = if w.finished() {
                WcStatus::Success
            } else {
                WcStatus::WrFlushErr
            };
            cfg.complete_send(env, w.completion(st));
        }
        self.clear();
        env.enter_err = true;
    }

    fn clear(&mut self) {
        self.started = 0;
        self.fresh = 0;
        self.fresh_pkt = 0;
        self.units.clear();
        self.by_tx.clear();
        self.retx.clear();
        self.reorder.clear();
        self.in_flight = 0;
        self.rd_outstanding = 0;
        self.rnr_until = None;
        self.refused.clear();
        self.probe_now.clear();
    }

    /// Flushes every remaining WQE in posting order (MR-QP-6).
    pub(crate) fn flush(&mut self, cfg: &QpConfig, env: &mut Env<'_>) {
        while let Some(w) = self.sq.pop_front() {
            cfg.complete_send(env, w.completion(WcStatus::WrFlushErr));
        }
        self.clear();
    }

    /// Bytes in flight recomputed from the flight (§7.12): payload of
    /// in-flight units plus READ response bytes requested (first request
    /// and parts) and not received.
    pub(super) fn flight(&self) -> u64 {
        let p = u64::from(self.pmtu);
        let units: u64 = self
            .units
            .values()
            .filter(|u| u.state == UnitState::InFlight)
            .map(|u| u.bytes)
            .sum();
        let reads: u64 = self
            .sq
            .iter()
            .take(self.started)
            .filter(|w| w.is_read() && !w.done && self.fresh_done(w))
            .map(|w| {
                let got: u64 = w
                    .got
                    .iter()
                    .enumerate()
                    .filter(|(_, g)| **g)
                    .map(|(q, _)| (w.len - (q as u64 * p).min(w.len)).min(p))
                    .sum();
                w.asked_to - got.min(w.asked_to)
            })
            .sum();
        units + reads
    }

    /// Whether a started WQE's first transmission has left.
    fn fresh_done(&self, w: &MpWqe) -> bool {
        w.first < self.sent_end
    }

    /// Whether the RTO of MR-MPR-6 runs for READ `w`: it has been sent and
    /// misses responses. A READ that has PSNs but waits for cwnd or the
    /// window has had no transmission to time from; re-requesting it would
    /// send a first transmission (offset 0) outside cwnd and ahead of
    /// `sent_end`, and the responder's cumulative ACK PSN would then pass
    /// the last PSN sent, so that every later ACK is ignored (MR-MPA-10).
    fn read_timed(&self, w: &MpWqe) -> bool {
        w.is_read()
            && !w.done
            && self.fresh_done(w)
            && w.got[..w.asked_pkts(self.pmtu)].iter().any(|g| !g)
    }

    /// Removes a unit from the flight (acknowledged).
    pub(super) fn unit_acked(&mut self, key: u64) -> Option<Unit> {
        let u = self.units.remove(key)?;
        self.retx.remove(&key);
        if u.state == UnitState::InFlight {
            self.in_flight = self.in_flight.saturating_sub(u.bytes);
        }
        Some(u)
    }

    /// Deems a unit lost under `rule`. A loss retires its entropy value
    /// (MR-MPF-1); trimming does not (MR-MPT-7). It decreases cwnd when it
    /// has congestion evidence (MR-MPC-7); a loss by time (rule (b)) has
    /// its timer started at the unit's latest transmission.
    pub(super) fn deem_lost(&mut self, key: u64, rule: LossRule, now: u64, env: &mut Env<'_>) {
        let Some(u) = self.units.get_mut(key) else {
            return;
        };
        if u.state == UnitState::InFlight {
            self.in_flight = self.in_flight.saturating_sub(u.bytes);
        }
        u.state = UnitState::Lost;
        u.lost_by = Some(rule);
        let v = u.entropy;
        let kind = match rule {
            LossRule::Reorder => LossKind::Reorder,
            LossRule::Trim => LossKind::Trim,
            LossRule::Timeout => LossKind::Timeout { since: u.tx_time },
        };
        self.retx.insert(key);
        if rule != LossRule::Trim && self.entropy.retire(v) {
            self.probes.on_retire(v, now);
            env.counters.mp_entropy_retired += 1;
        }
        // MR-MPC-7: a decrease only with congestion evidence.
        self.cc.on_loss(now, self.rtt.srtt(), kind);
    }

    /// The earliest time `handle_timeout` has work.
    pub(crate) fn poll_timeout(&self) -> Option<u64> {
        let rto = self.rtt.rto();
        let oldest = self
            .by_tx
            .iter()
            .find(|&(seq, key)| self.live(seq, key))
            .and_then(|(_, key)| self.units.get(key))
            .map(|u| u.tx_time + rto);
        let reads = self
            .sq
            .iter()
            .take(self.started)
            .filter(|w| self.read_timed(w))
            .map(|w| w.activity + rto)
            .min();
        let refused = self.refused.values().min().copied();
        [
            oldest,
            reads,
            self.probes.deadline(),
            self.rnr_until,
            refused,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// RTO expiries (MR-MPL-5, MR-MPL-8, MR-MPR-6), the end of an RNR wait
    /// (MR-MPP-18) and due probes (MR-MPF-3).
    pub(crate) fn handle_timeout(&mut self, cfg: &QpConfig, env: &mut Env<'_>) {
        let now = env.now;
        if self.rnr_until.is_some_and(|t| t <= now) {
            self.rnr_until = None;
            if let Some(msn) = self.rnr_msn.take() {
                let keys: Vec<u64> = self
                    .units
                    .iter()
                    .filter(|(_, u)| u.msn == msn && u.state == UnitState::InFlight)
                    .map(|(k, _)| k)
                    .collect();
                for key in keys {
                    self.requeue(key);
                }
            }
        }
        self.release_refused(now);
        let rto = self.rtt.rto();
        // Rule (b) of §7.8 (MR-MPL-5): the timer expires when the oldest
        // transmission in flight is older than the RTO (doubled after
        // expiries, MR-MPL-2); the expiry then deems lost every unit whose
        // latest transmission is older than the RTO without doubling, as
        // TCP's RTO resends the whole flight (RFC 6298 §5.4, RFC 8985
        // §6.3). Expiring one unit per doubled RTO left the rest of a
        // burst lost in an incast counted in flight, cwnd full, and the QP
        // out of retries (issue 20).
        let sweep = self.rtt.rto_undoubled();
        let mut expired = Vec::new();
        let mut due = false;
        for (seq, key) in self.by_tx.iter() {
            if !self.live(seq, key) {
                continue;
            }
            match self.units.get(key) {
                Some(u) if !due && u.tx_time + rto <= now => {
                    due = true;
                    expired.push(key);
                }
                Some(u) if due && u.tx_time + sweep <= now => expired.push(key),
                _ => break,
            }
        }
        let mut reads = Vec::new();
        for (i, w) in self.sq.iter().enumerate().take(self.started) {
            if self.read_timed(w) && w.activity + rto <= now {
                reads.push(i);
            }
        }
        // A READ behind an unacknowledged earlier PSN may not have been
        // executed yet (MR-MPP-7): its missing responses are re-requested
        // (MR-MPR-6), but that expiry neither doubles the RTO nor counts
        // against retry_cnt; the earlier PSN's own RTO does. Otherwise the
        // READs' timers, expiring one after another, keep pushing back the
        // RTO of the lost PSN they wait for and use up retry_cnt (found by
        // MR_SIM_SEED=200 MR_SIM_MESSAGES=10000 mp_scenarios, MP loss 10 %).
        let counted = !expired.is_empty()
            || reads
                .iter()
                .any(|&i| self.units.first_in(0, self.sq[i].first).is_none());
        if counted {
            env.counters.local_ack_timeouts += 1;
            self.rtt.expired();
            // MR-MPL-8: more than retry_cnt expiries in a row.
            if self.retry_left == 0 {
                let idx = self.sq.front().map(|w| w.first);
                return self.fail_at(cfg, env, idx, WcStatus::RetryExcErr);
            }
            self.retry_left -= 1;
        }
        if !expired.is_empty() || !reads.is_empty() {
            for key in expired {
                if self
                    .units
                    .get(key)
                    .is_some_and(|u| u.state == UnitState::Sacked || u.psn_acked)
                {
                    self.resend_atomic(key);
                } else {
                    self.deem_lost(key, LossRule::Timeout, now, env);
                }
            }
            for i in reads {
                self.read_missing_all(i, now);
            }
        }
        while let Some(v) = self.probes.due(now) {
            self.probes.on_sent(v, now, now as u32);
            self.probe_now.push_back(v);
            env.counters.mp_probes_sent += 1;
        }
        self.prune_tx();
    }

    /// MR-MPP-14: an atomic whose PSN is acknowledged and whose Atomic
    /// Acknowledge has not arrived within the RTO is sent again (counted
    /// under the RTO). Its PSN is acknowledged, so it is not deemed lost
    /// (§7.8): no multiplicative decrease (MR-MPC-7) and no retirement of
    /// its entropy value (MR-MPF-1). The usual cause is a responder that
    /// waits to execute it until every earlier message is placed
    /// (MR-MPP-7), not a loss on its path. The same holds for every later
    /// RTO of its resends (`psn_acked`).
    fn resend_atomic(&mut self, key: u64) {
        if let Some(u) = self.units.get_mut(key) {
            // A resend is in flight until an MP ACK reports it again.
            if u.state == UnitState::InFlight {
                self.in_flight = self.in_flight.saturating_sub(u.bytes);
            }
            u.state = UnitState::Lost;
            u.lost_by = Some(LossRule::Timeout);
            self.retx.insert(key);
        }
    }

    /// MR-MPP-25: the unit named by a resource NAK arrived and was not
    /// accepted. It leaves the flight without a loss verdict (no
    /// retirement, no decrease, no RTO expiry: MR-MPF-11) and is resent
    /// once every earlier PSN is acknowledged or one RTO after the NAK.
    pub(super) fn refuse(&mut self, key: u64, now: u64) {
        let Some(u) = self.units.get_mut(key) else {
            return;
        };
        if u.state != UnitState::InFlight {
            return; // already to be resent, or acknowledged
        }
        self.in_flight = self.in_flight.saturating_sub(u.bytes);
        u.state = UnitState::Lost;
        u.lost_by = None;
        self.refused.insert(key, now + self.rtt.rto());
        self.release_refused(now);
    }

    /// Moves the refused units whose turn has come to the resend queue.
    pub(super) fn release_refused(&mut self, now: u64) {
        while let Some(key) = self
            .refused
            .iter()
            .find(|&(&key, &due)| {
                due <= now || self.cum_next >= key || self.units.first_in(0, key).is_none()
            })
            .map(|(&key, _)| key)
        {
            self.refused.remove(&key);
            if self
                .units
                .get(key)
                .is_some_and(|u| u.state == UnitState::Lost)
            {
                self.retx.insert(key);
            }
        }
    }

    /// A unit to resend without a loss verdict (RNR).
    fn requeue(&mut self, key: u64) {
        if let Some(u) = self.units.get_mut(key) {
            if u.state == UnitState::InFlight {
                self.in_flight = self.in_flight.saturating_sub(u.bytes);
            }
            u.state = UnitState::Lost;
            u.lost_by = None;
            self.retx.insert(key);
        }
    }

    /// Whether the transmission of order `seq` of unit `key` is still in
    /// [`Self::by_tx`]: the unit is held, that is its latest transmission,
    /// and it is in flight or an atomic awaiting its acknowledgement (not
    /// deemed lost).
    pub(super) fn live(&self, seq: u64, key: u64) -> bool {
        self.units
            .get(key)
            .is_some_and(|u| u.tx_seq == seq && u.state != UnitState::Lost)
    }

    /// Drops the transmissions at the front of [`Self::by_tx`] that no
    /// longer count (acknowledged, deemed lost or sent again).
    pub(super) fn prune_tx(&mut self) {
        let units = &self.units;
        self.by_tx.prune(|seq, key| {
            units
                .get(key)
                .is_some_and(|u| u.tx_seq == seq && u.state != UnitState::Lost)
        });
    }

    /// New PSNs were acknowledged: the retry budget and RTO doubling reset.
    pub(super) fn progressed(&mut self, cfg: &QpConfig) {
        self.rtt.progressed();
        self.retry_left = cfg.retry_cnt;
    }
}
