//! The MP transport strategy (SPEC §7): an RC QP whose packets are sprayed
//! over an entropy set, placed out of order, acknowledged selectively and
//! recovered by selective retransmission. It sits beside Base RC
//! (`rc/`) as another [`crate::qp::Transport`] variant, chosen at the INIT
//! to RTR transition by [`crate::Device::modify_qp_mp`] (MR-MPN-1); a QP
//! without it stays Base in every respect (MR-MPN-2).
//!
//! Files by concern: `config` (§7.1, §10.3), `entropy` (§7.4), `probe`
//! (§7.13), `rtt` (§7.7), `loss` (§7.8), `flight` (the requester's units
//! by PSN and by transmission order), `cc` (§7.12), `sack` (§7.6, §7.11),
//! `requester/` and `responder/`.

pub(crate) mod cc;
pub mod config;
pub(crate) mod entropy;
pub(crate) mod flight;
pub(crate) mod loss;
pub(crate) mod probe;
pub(crate) mod requester;
pub(crate) mod responder;
pub(crate) mod rtt;
pub(crate) mod sack;

use crate::qp_config::{Env, QpConfig, QueueDepths};
use crate::rx::RxPacket;
use config::MpConfig;
use metaroce_agent::qp_state::QpState;
use metaroce_codec::Opcode;
use requester::MpRequester;
use responder::MpResponder;

/// MP response opcodes: READ Response, Atomic Acknowledge, ACK (§7.2).
pub(crate) const fn is_mp_response(opcode: u8) -> bool {
    Opcode(opcode).is_mp_response()
}

/// MP opcodes an MP QP accepts (0xC0–0xCB, MR-MPH-8).
pub(crate) const fn is_mp_opcode(opcode: u8) -> bool {
    Opcode(opcode).is_mp()
}

/// The MP strategy of one QP.
#[derive(Debug)]
pub(crate) struct MpTransport {
    pub cfg: MpConfig,
    pub req: MpRequester,
    pub rsp: MpResponder,
}

impl MpTransport {
    pub(crate) fn new(cfg: &QpConfig, mp: MpConfig, seed: u64) -> Self {
        MpTransport {
            req: MpRequester::new(cfg, &mp, seed),
            rsp: MpResponder::new(cfg, &mp, seed),
            cfg: mp,
        }
    }

    /// MR-QP-9 on entering RTS.
    pub(crate) fn start_requester(&mut self, cfg: &QpConfig) {
        self.req.start(cfg, &self.cfg);
    }

    pub(crate) fn flush(&mut self, cfg: &QpConfig, env: &mut Env<'_>) {
        self.req.flush(cfg, env);
        self.rsp.flush(cfg, env);
    }

    pub(crate) fn handle_packet(
        &mut self,
        cfg: &QpConfig,
        state: QpState,
        pkt: &RxPacket<'_>,
        env: &mut Env<'_>,
    ) {
        if is_mp_response(pkt.bth.opcode.0) {
            if state.accepts_responses() {
                self.req.on_response(cfg, pkt, env);
            }
        } else if state.accepts_requests() {
            self.rsp.handle_request(cfg, pkt, env);
        }
    }

    /// Responses first, then request packets (RTS only).
    pub(crate) fn poll_transmit(
        &mut self,
        cfg: &QpConfig,
        state: QpState,
        env: &mut Env<'_>,
    ) -> Option<Vec<u8>> {
        self.rsp.now = env.now;
        if state.accepts_requests()
            && let Some(frame) = self.rsp.poll_transmit(cfg)
        {
            return Some(frame);
        }
        if state == QpState::Rts {
            return self.req.poll_transmit(cfg, env);
        }
        None
    }

    pub(crate) fn poll_timeout(&self, state: QpState) -> Option<u64> {
        let rsp = if state.accepts_requests() {
            self.rsp.poll_timeout()
        } else {
            None
        };
        let req = if state == QpState::Rts {
            self.req.poll_timeout()
        } else {
            None
        };
        [rsp, req].into_iter().flatten().min()
    }

    pub(crate) fn handle_timeout(&mut self, cfg: &QpConfig, state: QpState, env: &mut Env<'_>) {
        if state.accepts_requests() {
            self.rsp.handle_timeout(env.now);
        }
        if state == QpState::Rts && self.req.poll_timeout().is_some_and(|t| t <= env.now) {
            self.req.handle_timeout(cfg, env);
        }
    }

    /// Diagnostics.
    pub(crate) fn summary(&self) -> String {
        let r = &self.req;
        let front = r.sq.front().map(|w| {
            format!(
                "front msn {} first {} npsn {} acked {} done {} read {} got {}/{} rereq {:?} started {}",
                w.msn,
                w.first,
                w.npsn,
                w.acked,
                w.done,
                w.is_read(),
                w.got.iter().filter(|g| **g).count(),
                w.got.len(),
                w.rereq,
                w.started
            )
        });
        format!(
            "req: sq {} started {} fresh {} cum {} sent_end {} units {} retx {:?} in_flight {} cwnd {} md {} srtt {} min_rtt {:?} rto {} rnr {:?} rd {} | {:?} | rsp: next_msn {} assign {} blocked {:?} msgs {:?} cum {:?} jobs {} rq {}",
            r.sq.len(),
            r.started,
            r.fresh,
            r.cum_next,
            r.sent_end,
            r.units.len(),
            r.retx.iter().take(5).collect::<Vec<_>>(),
            r.in_flight,
            r.cc.cwnd,
            r.cc.decreases,
            r.rtt.srtt(),
            r.rtt.min_rtt,
            r.rtt.rto(),
            r.rnr_until,
            r.rd_outstanding,
            front,
            self.rsp.next_msn,
            self.rsp.assign_msn,
            self.rsp.blocked,
            self.rsp
                .msgs
                .iter()
                .take(3)
                .map(|(k, m)| (*k, m.opcode.0, m.placed_count, m.npkts, m.wr.is_some()))
                .collect::<Vec<_>>(),
            self.rsp.map.cum_psn(),
            self.rsp.jobs.len(),
            self.rsp.rq.len(),
        )
    }

    pub(crate) fn queue_depths(&self) -> QueueDepths {
        QueueDepths {
            send: self.req.depth(),
            recv: self.rsp.recv_depth(),
            responses: self.rsp.responses_queued(),
            unacked: self.req.units.len(),
            incomplete: self.rsp.msgs.len(),
        }
    }
}
