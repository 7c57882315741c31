//! The Base-profile requester and completer (SPEC.md §6.4, §6.5, §6.8,
//! §6.10, §6.11, §6.13–§6.16, §6.19–§6.21) as a pure state machine, and a
//! judge for observed request streams.
//!
//! Events are methods that take the state by value and return the next state
//! with the [`Outcomes`] the spec allows:
//!
//! - [`RequesterState::post_send`]: the application posts a work request;
//! - [`RequesterState::on_response`]: a response packet arrives;
//! - [`RequesterState::on_timer`]: time passes (RNR wait, local ACK timeout).
//!
//! Time is an argument in nanoseconds; nothing reads a clock. The model sends
//! every packet of a message as soon as the message may start.
//!
//! Alternatives: where the outcome of a timer event carries an alternative
//! (the timer may still wait), the returned state is the one for the primary
//! outcome set; a caller that observed the alternative instead keeps the state
//! it had, as if the event had not happened yet.
//!
//! [`judge::RequestStreamJudge`] checks captures of third-party requesters
//! without knowing their work requests.

mod attrs;
mod completion;
mod credits;
pub mod judge;
mod local;
mod packetize;
mod psn;
mod response;
mod retry;
mod rnr;
mod send;
mod timer;
mod wr;

pub use attrs::{QpStatus, QpType, RequesterAttrs};
pub use credits::credit_count;
pub use local::LocalRegion;
pub use packetize::{RequestPacket, packetize, psn_span, reread_packet};
pub use psn::packet_count;
pub use rnr::rnr_wait_ns;
pub use timer::{RetransmitCause, RetransmitWindow, local_ack_timeout_ns};
pub use wr::{UdDest, WorkRequest, WrOp};

use crate::model::{Knowledge, Outcomes, WcStatus};
use metaroce_codec::{Msn, Psn};
use std::collections::VecDeque;

/// Where a work request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WqePhase {
    /// Posted, not started (waits for a limit: order, `max_rd_atomic`,
    /// fence, credits, PSN window).
    Waiting,
    /// Every packet sent; not yet fully acknowledged or answered.
    Sent,
    /// Finished successfully; completes when it reaches the head of the queue.
    Done,
    /// Ends with this status without sending (LOC_LEN_ERR and the like);
    /// completes when it reaches the head of the queue.
    Failed(WcStatus, &'static [&'static str]),
    /// Its local buffers could not be read when it was to start (MR-PKT-9):
    /// nothing of it is sent and nothing posted after it starts; at the head
    /// of the queue it completes with this status and the QP enters ERR.
    LocalError(WcStatus, &'static [&'static str]),
}

/// One posted send work request and its progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendWqe {
    /// The model's number of the work request (posting order, from 0).
    pub id: u64,
    /// The work request.
    pub wr: WorkRequest,
    /// Progress.
    pub phase: WqePhase,
    /// First PSN (valid once started).
    pub first_psn: Psn,
    /// PSNs it occupies (valid once started).
    pub span: u32,
    /// Message number (1, 2, 3, … from RTS; SPEC.md §6.10), once started.
    pub msg_number: Msn,
    /// READ response packets (or the atomic acknowledgement) received in order.
    pub responses: u32,
    /// A READ First response arrived and its Last not yet.
    pub stream_open: bool,
    /// A READ re-request for this missing PSN was sent on a gap (MR-READ-8).
    pub reread_psn: Option<Psn>,
}

impl SendWqe {
    /// The last PSN of the work request.
    pub fn last_psn(&self) -> Psn {
        psn::block_last(self.first_psn, self.span)
    }

    /// The work request occupies `p`.
    pub fn holds(&self, p: Psn) -> bool {
        self.phase == WqePhase::Sent && psn::in_block(p, self.first_psn, self.span)
    }
}

/// An RNR wait in progress (SPEC.md §6.11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RnrWait {
    /// PSN of the RNR NAK: retransmission resumes there (MR-RNR-4).
    pub psn: Psn,
    /// Arrival of the RNR NAK.
    pub arrived_ns: u64,
    /// The table time of its timer code (MR-RNR-3).
    pub wait_ns: u64,
}

/// The requester side of one QP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequesterState {
    /// Attributes.
    pub attrs: RequesterAttrs,
    /// RTS or ERR.
    pub status: QpStatus,
    /// Posted work requests not yet completed, in posting order.
    pub queue: VecDeque<SendWqe>,
    /// Number of the next posted work request.
    pub next_wr_id: u64,
    /// PSN of the next new request packet.
    pub next_psn: Psn,
    /// Oldest unacknowledged PSN (equals `next_psn` when nothing is outstanding).
    pub una: Psn,
    /// Number of the next message started (the first is 1).
    pub next_msg_number: Msn,
    /// Transport retries left (MR-TMR-5).
    pub retry_left: u8,
    /// RNR retries left (MR-RNR-6; unused when `rnr_retry` is 7).
    pub rnr_left: u8,
    /// Start of the local ACK timeout: the later of the last transmission of
    /// the oldest unacknowledged packet and the last acknowledgement of new
    /// PSNs (MR-TMR-1). `None` while the timer is stopped.
    pub timer_ref_ns: Option<u64>,
    /// RNR wait in progress.
    pub rnr_wait: Option<RnrWait>,
    /// Credit limit (MSN + credits) of the newest ACK, 0 before the first
    /// ("MR-CRD-3": a requester starts with no credits); `None` = no limit.
    pub credit_limit: Option<Msn>,
    /// PSN of the NAK 0x60 that started the go-back-N retry in progress (MR-TMR-9).
    pub nak_retry_psn: Option<Psn>,
    /// The local memory regions work requests may name (MR-PKT-9,
    /// MR-REQ-12). `Unknown` (the default): every local buffer is taken as
    /// valid.
    pub local: Knowledge<Vec<LocalRegion>>,
}

impl RequesterState {
    /// A QP that has just entered RTS with `attrs`: nothing posted, the first
    /// request packet will carry `sq_psn` (MR-QP-9).
    pub fn new(attrs: RequesterAttrs) -> Self {
        RequesterState {
            status: QpStatus::Rts,
            queue: VecDeque::new(),
            next_wr_id: 0,
            next_psn: attrs.sq_psn,
            una: attrs.sq_psn,
            next_msg_number: Msn::new(1),
            retry_left: attrs.retry_cnt.min(7),
            rnr_left: attrs.rnr_retry.min(7),
            timer_ref_ns: None,
            rnr_wait: None,
            credit_limit: Some(Msn::new(0)),
            nak_retry_psn: None,
            local: Knowledge::Unknown,
            attrs,
        }
    }

    /// The same QP with known local memory regions (MR-PKT-9, MR-REQ-12).
    #[must_use]
    pub fn with_local_regions(mut self, regions: Vec<LocalRegion>) -> Self {
        self.local = Knowledge::Known(regions);
        self
    }

    /// At least one request packet is unacknowledged.
    pub fn has_outstanding(&self) -> bool {
        self.una != self.next_psn
    }

    /// RDMA-resource operations outstanding (MR-REQ-7).
    pub fn outstanding_rdma(&self) -> usize {
        self.queue
            .iter()
            .filter(|w| w.phase == WqePhase::Sent && w.wr.op.is_rdma_resource())
            .count()
    }

    /// The application posts `wr` at time `now_ns`.
    ///
    /// Outcomes: the packets of every message that may start now (in order),
    /// or the completions of a work request that fails locally: LOC_LEN_ERR
    /// for a message longer than `max_msg_size` (MR-PKT-8, then ERR), SUCCESS or
    /// LOC_LEN_ERR for a UD message longer than the PMTU (MR-UD-4, MR-UD-5),
    /// WR_FLUSH_ERR in ERR (MR-QP-6).
    pub fn post_send(mut self, wr: WorkRequest, now_ns: u64) -> (Self, Outcomes) {
        let mut out = Outcomes::none();
        let id = self.next_wr_id;
        self.next_wr_id += 1;
        let mut wqe = SendWqe {
            id,
            wr,
            phase: WqePhase::Waiting,
            first_psn: self.next_psn,
            span: 0,
            msg_number: Msn::new(0),
            responses: 0,
            stream_open: false,
            reread_psn: None,
        };
        if self.status == QpStatus::Error {
            completion::push_flush(&mut out, id);
            return (self, out);
        }
        if let Some(status) = self.local_check(&wqe.wr) {
            wqe.phase = status;
        }
        if self.attrs.qp_type == QpType::Ud
            && wqe.phase == WqePhase::Waiting
            && wqe.wr.length > u64::from(self.attrs.pmtu)
            && self.queue.is_empty()
        {
            // "MR-UD-4": nothing is sent; "MR-UD-5": SUCCESS or LOC_LEN_ERR, QP stays in RTS.
            return (self, completion::ud_oversize(&wqe));
        }
        self.queue.push_back(wqe);
        self.pump(now_ns, &mut out);
        self.complete_front(&mut out);
        (self, out)
    }

    /// Local checks before a work request may start.
    fn local_check(&self, wr: &WorkRequest) -> Option<WqePhase> {
        if wr.length > self.attrs.max_msg_size.min(1 << 31) {
            // "MR-PKT-8": nothing sent; LOC_LEN_ERR at the head of the queue,
            // and that completion in error takes the QP to ERR (§6.2).
            return Some(WqePhase::LocalError(WcStatus::LocLenErr, &["MR-PKT-8"]));
        }
        let supported = match self.attrs.qp_type {
            QpType::Rc => true,
            QpType::Uc => matches!(
                wr.op,
                WrOp::Send | WrOp::SendImm { .. } | WrOp::Write { .. } | WrOp::WriteImm { .. }
            ),
            QpType::Ud => matches!(wr.op, WrOp::Send | WrOp::SendImm { .. }) && wr.ud.is_some(),
        };
        if !supported {
            // SPEC.md §6.13: LOC_QP_OP_ERR, an operation the QP cannot perform.
            return Some(WqePhase::Failed(WcStatus::LocQpOpErr, &[]));
        }
        if self.attrs.qp_type == QpType::Ud
            && wr.length > u64::from(self.attrs.pmtu)
            && !self.queue.is_empty()
        {
            // "MR-UD-4", "MR-UD-5" (queued behind other work requests).
            return Some(WqePhase::Failed(
                WcStatus::LocLenErr,
                &["MR-UD-4", "MR-UD-5"],
            ));
        }
        None
    }

    /// Index in the queue of the started work request that occupies `p`.
    fn wqe_holding(&self, p: Psn) -> Option<usize> {
        self.queue.iter().position(|w| w.holds(p))
    }
}
