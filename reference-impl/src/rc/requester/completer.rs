//! The completer: acknowledgements, NAKs, READ responses and atomic
//! acknowledgements (SPEC §6.8, §6.13, §6.15, §6.16).

use super::{Requester, RetryCause};
use crate::cq::WcStatus;
use crate::qp_config::{Env, QpConfig};
use crate::rx::RxPacket;
use crate::wr::WrOp;
use metaroce_codec::ext::SyndromeKind;
use metaroce_codec::{Opcode, Psn};

impl Requester {
    /// A response packet on a QP in RTS.
    pub(crate) fn on_response(&mut self, cfg: &QpConfig, pkt: &RxPacket<'_>, env: &mut Env<'_>) {
        let psn = pkt.bth.psn;
        // MR-REQ-9: only [una - 1, last PSN sent].
        let base = self.una.sub(1);
        if psn.distance(base) >= self.sent_end.distance(base) {
            return;
        }
        let Some(aeth) = pkt.ext.aeth else {
            // READ Response Middle: no AETH.
            if pkt.bth.opcode == Opcode::RC_READ_RESPONSE_MIDDLE {
                self.on_read_response(cfg, pkt, env);
            }
            return;
        };
        let kind = aeth.syndrome.kind();
        if aeth.syndrome.0 & 0x80 != 0 || matches!(kind, SyndromeKind::Reserved { .. }) {
            return; // MR-REQ-11
        }
        match pkt.bth.opcode {
            Opcode::RC_ACK => match kind {
                // MR-CRD-5: any credit code is an acknowledgement.
                SyndromeKind::Ack { .. } => {
                    if let Some(retry) = self.ack_through(cfg, env, psn) {
                        self.go_back_n(cfg, env, retry, RetryCause::Implicit);
                    }
                }
                SyndromeKind::RnrNak { timer } => {
                    if psn == base {
                        return;
                    }
                    let _ = self.ack_through(cfg, env, psn.sub(1));
                    if !env.enter_err {
                        self.on_rnr_nak(cfg, env, psn, timer);
                    }
                }
                SyndromeKind::Nak { code: 0 } => {
                    if psn == base {
                        return;
                    }
                    let _ = self.ack_through(cfg, env, psn.sub(1));
                    if !env.enter_err {
                        let from = self.una;
                        self.go_back_n(cfg, env, from, RetryCause::SeqNak); // MR-NAK-5
                    }
                }
                SyndromeKind::Nak { code } => {
                    if psn == base {
                        return;
                    }
                    // MR-NAK-6.
                    let _ = self.ack_through(cfg, env, psn.sub(1));
                    let status = WcStatus::for_nak_code(code);
                    if !env.enter_err {
                        self.fail_at(cfg, env, Some(psn), status);
                    }
                }
                SyndromeKind::Reserved { .. } => {}
            },
            Opcode::RC_ATOMIC_ACK => self.on_atomic_ack(cfg, pkt, env),
            _ => self.on_read_response(cfg, pkt, env),
        }
    }

    /// Everything up to and including `psn` is acknowledged (MR-REQ-3).
    /// Returns the PSN to retry from when the acknowledgement reaches or
    /// passes the last PSN of an unanswered READ or atomic (MR-REQ-4).
    pub(super) fn ack_through(
        &mut self,
        cfg: &QpConfig,
        env: &mut Env<'_>,
        psn: Psn,
    ) -> Option<Psn> {
        if psn.add(1).is_after(self.ack_hi) {
            self.ack_hi = psn.add(1);
        }
        // Everything before `ack_hi` that an ACK can acknowledge is done, so
        // a READ answered later completes the SENDs and WRITEs behind it
        // that an earlier ACK covered (MR-REQ-3, MR-REQ-6).
        let hi = self.ack_hi;
        let mut target = hi;
        let mut retry = None;
        for w in self.sq.iter().take(self.started) {
            if w.acked_by_ack() || w.done {
                if !w.first.is_before(hi) {
                    break;
                }
                continue;
            }
            let missing = w.first.add(w.rcv_pkts);
            if missing.is_before(target) {
                target = missing;
                // Acknowledged at or past its last PSN with responses missing:
                // they were lost (MR-REQ-4).
                if !w.last().is_after(psn) {
                    retry = Some(missing);
                }
            }
            break;
        }
        self.progress(cfg, env, target);
        self.complete_front(cfg, env);
        retry
    }

    fn on_atomic_ack(&mut self, cfg: &QpConfig, pkt: &RxPacket<'_>, env: &mut Env<'_>) {
        let psn = pkt.bth.psn;
        let ack_ok = pkt
            .ext
            .aeth
            .is_some_and(|a| matches!(a.syndrome.kind(), SyndromeKind::Ack { .. }));
        let Some(index) = self
            .sq
            .iter()
            .take(self.started)
            .position(|w| w.contains(psn))
        else {
            return; // already completed: a replayed acknowledgement
        };
        let w = &self.sq[index];
        if !w.wr.op.is_atomic() || !ack_ok {
            return self.fail_at(cfg, env, Some(psn), WcStatus::BadRespErr); // MR-REQ-10
        }
        if w.done {
            return;
        }
        let orig = pkt.ext.atomic_ack_eth.map_or(0, |a| a.orig);
        // MR-ATOM-6: host byte order into the local buffer.
        if env
            .mem
            .scatter(cfg.pd, &w.wr.sg_list, 0, &orig.to_ne_bytes())
            .is_err()
        {
            return self.fail_at(cfg, env, Some(psn), WcStatus::LocProtErr); // MR-REQ-12
        }
        self.sq[index].done = true;
        self.rd_outstanding = self.rd_outstanding.saturating_sub(1);
        if let Some(retry) = self.ack_through(cfg, env, psn) {
            self.go_back_n(cfg, env, retry, RetryCause::Implicit);
        }
    }

    fn on_read_response(&mut self, cfg: &QpConfig, pkt: &RxPacket<'_>, env: &mut Env<'_>) {
        let psn = pkt.bth.psn;
        let op = pkt.bth.opcode;
        let Some(index) = self
            .sq
            .iter()
            .take(self.started)
            .position(|w| w.contains(psn))
        else {
            return;
        };
        let w = &self.sq[index];
        if !matches!(w.wr.op, WrOp::Read(_)) {
            return self.fail_at(cfg, env, Some(psn), WcStatus::BadRespErr); // MR-REQ-10
        }
        if w.done {
            return;
        }
        let expected = w.first.add(w.rcv_pkts);
        if psn != expected {
            if psn.is_after(expected) {
                // MR-READ-7 drop; MR-READ-8 re-request the missing part now.
                self.go_back_n(cfg, env, expected, RetryCause::Implicit);
            }
            return;
        }
        let idx = w.rcv_pkts;
        let last = idx + 1 == w.npsn;
        let p = u64::from(cfg.pmtu);
        let offset = u64::from(idx) * p;
        let want = (w.len - offset.min(w.len)).min(p) as usize;
        let aeth_ok = pkt
            .ext
            .aeth
            .is_none_or(|a| matches!(a.syndrome.kind(), SyndromeKind::Ack { .. }));
        let position_ok = match op {
            Opcode::RC_READ_RESPONSE_FIRST | Opcode::RC_READ_RESPONSE_MIDDLE => !last,
            Opcode::RC_READ_RESPONSE_LAST | Opcode::RC_READ_RESPONSE_ONLY => last,
            _ => false,
        };
        if !aeth_ok || !position_ok || pkt.payload.len() != want {
            return self.fail_at(cfg, env, Some(psn), WcStatus::BadRespErr); // MR-REQ-10
        }
        // MR-READ-7: placed at (PSN − request PSN) × PMTU.
        if env
            .mem
            .scatter(cfg.pd, &w.wr.sg_list, offset, pkt.payload)
            .is_err()
        {
            return self.fail_at(cfg, env, Some(psn), WcStatus::LocProtErr); // MR-REQ-12
        }
        let w = &mut self.sq[index];
        w.rcv_pkts += 1;
        if last {
            w.done = true;
            self.rd_outstanding = self.rd_outstanding.saturating_sub(1);
        }
        // A response acknowledges every earlier request and itself.
        if let Some(retry) = self.ack_through(cfg, env, psn) {
            self.go_back_n(cfg, env, retry, RetryCause::Implicit);
        }
    }
}
