//! Receiver-not-ready at a Base responder (SPEC §6.11, MR-RNR-1, MR-RNR-2).

use super::Responder;
use super::ack::Response;
use super::psn::GapState;
use crate::qp_config::{Env, QpConfig};
use metaroce_codec::Psn;

impl Responder {
    /// Whether a receive-consuming packet finds a receive work request; if
    /// not, queues an RNR NAK (syndrome 0x20 + `min_rnr_timer`, the packet's
    /// PSN, the current MSN), leaves the expected PSN unchanged and drops
    /// the packet (MR-RNR-1).
    pub(super) fn rnr_check(&mut self, cfg: &QpConfig, psn: Psn, env: &mut Env<'_>) -> bool {
        if !self.rq.is_empty() {
            return true;
        }
        self.responses.push(Response::Ack {
            psn,
            // zoo: rnr-timer-code-zero
            syndrome: 0x20 | zoo!(cfg.mutant, RnrTimerCodeZero => 0, else cfg.min_rnr_timer & 0x1F),
            msn: self.msn,
        });
        self.gap = GapState::RnrNakSent;
        env.counters.rnr_naks_sent += 1;
        false
    }
}
