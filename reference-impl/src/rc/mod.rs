//! Base RC transport: a requester and a responder per QP (SPEC §6).

pub(crate) mod requester;
pub(crate) mod responder;

use crate::qp_config::{Env, QpConfig, QueueDepths};
use crate::rx::RxPacket;
use metaroce_agent::qp_state::QpState;
use metaroce_codec::Opcode;
use requester::Requester;
use responder::Responder;

/// The Base RC strategy of one QP.
#[derive(Debug, Default)]
pub(crate) struct RcTransport {
    pub req: Requester,
    pub rsp: Responder,
}

/// Response opcodes 0x0D–0x12 (§4.3); every other RC opcode is a request.
pub(crate) const fn is_response(opcode: u8) -> bool {
    Opcode(opcode).is_rc_response()
}

impl RcTransport {
    pub(crate) fn new(_cfg: &QpConfig) -> Self {
        RcTransport::default()
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
        if is_response(pkt.bth.opcode.0) {
            if state.accepts_responses() {
                self.req.on_response(cfg, pkt, env);
            }
        } else if state.accepts_requests() {
            self.rsp.handle_request(cfg, pkt, env);
        }
    }

    /// Responses first, then request packets (RTS only, §6.2).
    pub(crate) fn poll_transmit(
        &mut self,
        cfg: &QpConfig,
        state: QpState,
        env: &mut Env<'_>,
    ) -> Option<Vec<u8>> {
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

    pub(crate) fn queue_depths(&self) -> QueueDepths {
        QueueDepths {
            send: self.req.depth(),
            recv: self.rsp.recv_depth(),
            responses: self.rsp.responses_queued(),
            unacked: self.req.unacked(),
            incomplete: self.rsp.incomplete(),
        }
    }
}
