//! Starting messages: the limits a new message waits for, and its packets.

use super::attrs::{QpStatus, QpType};
use super::local::{accessible, gathers};
use super::packetize::{packetize, psn_span};
use super::psn::HALF_SPACE;
use super::{RequesterState, WqePhase};
use crate::model::{Effect, Outcomes, WcStatus};

/// Requirements a new RC request packet satisfies, by kind.
const RC_DATA: &[&str] = &[
    "MR-PKT-1", "MR-PKT-2", "MR-PKT-3", "MR-PKT-6", "MR-PSN-3", "MR-BTH-4", "MR-BTH-7",
];
const RC_READ: &[&str] = &["MR-READ-1", "MR-PKT-3", "MR-PSN-3", "MR-BTH-4"];
const RC_ATOMIC: &[&str] = &["MR-PKT-6", "MR-PSN-3", "MR-BTH-4"];
const RC_ATOMIC_WRITE: &[&str] = &["MR-FLUSH-7", "MR-PKT-6", "MR-PSN-3", "MR-BTH-4"];
const UC_DATA: &[&str] = &["MR-PKT-1", "MR-PKT-2", "MR-UC-1", "MR-BTH-4", "MR-BTH-7"];
const UD_SEND: &[&str] = &["MR-UD-1", "MR-BTH-4"];

impl RequesterState {
    /// Starts, in posting order, every waiting message that may start now.
    pub(super) fn pump(&mut self, now_ns: u64, out: &mut Outcomes) {
        if self.status != QpStatus::Rts || self.rnr_wait.is_some() {
            return;
        }
        let mut i = 0;
        while i < self.queue.len() {
            match self.queue[i].phase {
                WqePhase::Waiting => {}
                WqePhase::LocalError(..) => return,
                _ => {
                    i += 1;
                    continue;
                }
            }
            let w = &self.queue[i];
            if gathers(w.wr.op)
                && !accessible(
                    &self.local,
                    w.wr.lkey,
                    w.wr.local_offset,
                    w.wr.length,
                    false,
                )
            {
                // "MR-PKT-9": nothing sent from outside the named buffers;
                // LOC_PROT_ERR and ERR once it is the oldest.
                self.queue[i].phase = WqePhase::LocalError(WcStatus::LocProtErr, &["MR-PKT-9"]);
                return;
            }
            if !self.may_start(i) {
                return;
            }
            self.start(i, now_ns, out);
            i += 1;
        }
    }

    /// Whether the waiting work request at `i` may start now.
    fn may_start(&self, i: usize) -> bool {
        let w = &self.queue[i];
        if self.attrs.qp_type != QpType::Rc {
            return true;
        }
        // "MR-REQ-7": at most max_rd_atomic RDMA-resource operations outstanding.
        if w.wr.op.is_rdma_resource()
            && self.outstanding_rdma() >= usize::from(self.attrs.max_rd_atomic)
        {
            return false;
        }
        // "MR-REQ-8": a fenced work request waits for every earlier READ and atomic.
        if w.wr.fence
            && self.queue.iter().take(i).any(|e| {
                e.phase == WqePhase::Sent
                    && (matches!(e.wr.op, super::WrOp::Read { .. }) || e.wr.op.is_atomic())
            })
        {
            return false;
        }
        // "MR-CRD-3": a receive-consuming message more than one beyond the
        // credit limit waits (one message beyond it may always go, as rdmavt
        // sends); "MR-CRD-4": code 31 lifts the limit.
        if self.attrs.credits
            && w.wr.op.is_receive_consuming()
            && let Some(limit) = self.credit_limit
            && self.next_msg_number.is_after(limit.add(1))
            && self.has_outstanding()
        {
            return false;
        }
        // "MR-PSN-4": no new packet 2^23 or more after the oldest unacknowledged PSN.
        let span = psn_span(&w.wr, self.attrs.pmtu);
        let last = self.next_psn.add(span.max(1) - 1);
        if last.distance(self.una) >= HALF_SPACE {
            return false;
        }
        true
    }

    /// Sends every packet of the work request at `i`.
    fn start(&mut self, i: usize, now_ns: u64, out: &mut Outcomes) {
        let first = self.next_psn;
        let span = psn_span(&self.queue[i].wr, self.attrs.pmtu);
        let packets = packetize(&self.queue[i].wr, &self.attrs, first);
        let op = self.queue[i].wr.op;
        let reqs: &'static [&'static str] = match self.attrs.qp_type {
            QpType::Ud => UD_SEND,
            QpType::Uc => UC_DATA,
            QpType::Rc if op.is_send() || op.is_write() => RC_DATA,
            QpType::Rc if matches!(op, super::WrOp::Read { .. }) => RC_READ,
            QpType::Rc if matches!(op, super::WrOp::AtomicWrite { .. }) => RC_ATOMIC_WRITE,
            QpType::Rc => RC_ATOMIC,
        };
        for p in &packets {
            *out = std::mem::take(out).require(reqs, Effect::Send(p.spec()));
        }
        if !self.has_outstanding() {
            // The timer restarts when a packet is sent while it is stopped (§6.14).
            self.timer_ref_ns = Some(now_ns);
        }
        self.next_psn = first.add(span); // "MR-PSN-3", "MR-BTH-8"
        let msg_number = self.next_msg_number;
        self.next_msg_number = msg_number.add(1);
        let w = &mut self.queue[i];
        w.first_psn = first;
        w.span = span;
        w.msg_number = msg_number;
        if self.attrs.qp_type == QpType::Rc {
            w.phase = WqePhase::Sent;
        } else {
            // UC and UD: nothing is acknowledged or retransmitted ("MR-UC-1", "MR-UD-1").
            w.phase = WqePhase::Done;
            self.una = self.next_psn;
            self.timer_ref_ns = None;
        }
    }
}
