//! The Base RC requester and completer (SPEC §6.5, §6.13–§6.16): numbers
//! packets, keeps every unacknowledged work request, completes them in
//! posting order, and recovers by go-back-N.
//!
//! The send queue is one `VecDeque` of [`SendWqe`] in posting order. The
//! first `started` entries have PSNs; the rest wait. A cursor names the next
//! packet to (re)send: go-back-N just moves the cursor back.

mod completer;
mod packetize;
mod retry;

use crate::cq::{WcStatus, WorkCompletion};
use crate::error::VerbsError;
use crate::qp_config::{Env, QpConfig};
use crate::wr::SendWr;
use metaroce_codec::Psn;
use std::collections::VecDeque;

/// One send work request and its transport state.
#[derive(Clone, Debug)]
pub(crate) struct SendWqe {
    pub wr: SendWr,
    /// Message length in bytes.
    pub len: u64,
    /// First PSN (meaningful once started).
    pub first: Psn,
    /// PSNs the message uses: packets, or READ response packets (MR-PSN-3).
    pub npsn: u32,
    pub started: bool,
    /// READ: every response placed; atomic: original value placed.
    pub done: bool,
    /// READ response packets placed so far.
    pub rcv_pkts: u32,
    /// A local error found when the WQE was started.
    pub error: Option<WcStatus>,
}

impl SendWqe {
    pub(crate) fn last(&self) -> Psn {
        self.first.add(self.npsn.saturating_sub(1))
    }

    pub(crate) fn contains(&self, psn: Psn) -> bool {
        self.started && psn.distance(self.first) < self.npsn
    }

    /// SEND or WRITE: complete when acknowledged.
    pub(crate) fn acked_by_ack(&self) -> bool {
        !self.wr.op.is_rd_atomic()
    }

    pub(crate) fn completion(&self, status: WcStatus) -> WorkCompletion {
        self.wr.completion(self.len, status)
    }
}

/// Why a go-back-N retry starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RetryCause {
    /// Local ACK timeout.
    Timeout,
    /// NAK 0x60.
    SeqNak,
    /// An ACK beyond an unanswered READ or atomic, or a READ response gap.
    Implicit,
}

/// Requester state of one RC QP.
#[derive(Debug, Default)]
pub(crate) struct Requester {
    pub(super) sq: VecDeque<SendWqe>,
    /// WQEs `sq[..started]` have PSNs.
    pub(super) started: usize,
    /// Index in `sq` of the WQE of the next packet to send.
    pub(super) cursor: usize,
    /// Packet index inside that WQE.
    pub(super) cursor_pkt: u32,
    /// PSN of the next WQE to start.
    pub(super) next_fresh: Psn,
    /// Oldest unacknowledged PSN.
    pub(super) una: Psn,
    /// PSN after the highest PSN an ACK or response has acknowledged. It
    /// runs ahead of `una` when an ACK covers a SEND or WRITE behind an
    /// unanswered READ or atomic: those packets are not resent (MR-REQ-6).
    pub(super) ack_hi: Psn,
    /// PSN after the highest PSN sent (READs count their whole block).
    pub(super) sent_end: Psn,
    pub(super) retry_left: u8,
    pub(super) rnr_left: u8,
    pub(super) ack_deadline: Option<u64>,
    pub(super) rnr_until: Option<u64>,
    /// PSN of the NAK-driven retry in progress (MR-TMR-9).
    pub(super) retrying_from: Option<Psn>,
    /// READs and atomics started and not answered (MR-REQ-7).
    pub(super) rd_outstanding: u8,
    /// Request packets since the last one with AckReq (MR-PKT-7).
    pub(super) since_ack_req: u32,
}

impl Requester {
    /// MR-QP-9: the first request packet carries `sq_psn`.
    pub(crate) fn start(&mut self, cfg: &QpConfig) {
        let psn = Psn::new(cfg.sq_psn);
        self.next_fresh = psn;
        self.una = psn;
        self.ack_hi = psn;
        self.sent_end = psn;
        self.retry_left = cfg.retry_cnt;
        self.rnr_left = cfg.rnr_retry;
    }

    pub(crate) fn depth(&self) -> usize {
        self.sq.len()
    }

    /// `post_send` on an RC QP.
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
        let wqe = SendWqe {
            wr,
            len,
            first: Psn::new(0),
            npsn: 0,
            started: false,
            done: false,
            rcv_pkts: 0,
            error: None,
        };
        if flushed {
            // MR-QP-6: posted in ERR → flushed at once.
            cfg.complete_send(env, wqe.completion(WcStatus::WrFlushErr));
        } else {
            self.sq.push_back(wqe);
        }
        Ok(())
    }

    /// Completes, in posting order, every WQE at the front that is finished
    /// (MR-REQ-1, MR-REQ-2, MR-REQ-3).
    pub(super) fn complete_front(&mut self, cfg: &QpConfig, env: &mut Env<'_>) {
        while let Some(w) = self.sq.front() {
            if !w.started {
                if let Some(status) = w.error {
                    // A local error, reported once every earlier WQE is done.
                    let wc = w.completion(status);
                    self.sq.pop_front();
                    cfg.complete_send(env, wc);
                    if matches!(status, WcStatus::LocProtErr | WcStatus::LocLenErr) {
                        // MR-PKT-9, MR-PKT-8 (SPEC v1.1): a completion in
                        // error takes the QP to ERR.
                        env.enter_err = true;
                        return;
                    }
                    continue;
                }
                break;
            }
            let finished = if w.acked_by_ack() {
                w.last().is_before(self.una)
            } else {
                w.done
            };
            if !finished {
                break;
            }
            let Some(w) = self.sq.pop_front() else { break };
            self.started -= 1;
            if self.cursor == 0 {
                self.cursor_pkt = 0;
            } else {
                self.cursor -= 1;
            }
            if w.wr.signaled || cfg.sq_sig_all {
                cfg.complete_send(env, w.completion(WcStatus::Success));
            }
        }
    }

    /// Completes the WQE containing `psn` with `status` (earlier unfinished
    /// ones are flushed first, to keep posting order) and asks for ERR.
    pub(super) fn fail_at(
        &mut self,
        cfg: &QpConfig,
        env: &mut Env<'_>,
        psn: Option<Psn>,
        status: WcStatus,
    ) {
        while let Some(w) = self.sq.pop_front() {
            let hit = psn.is_none_or(|p| w.contains(p)) || !w.started;
            if hit {
                cfg.complete_send(env, w.completion(status));
                break;
            }
            cfg.complete_send(env, w.completion(WcStatus::WrFlushErr));
        }
        self.started = 0;
        self.cursor = 0;
        env.enter_err = true;
    }

    /// Flushes every remaining WQE in posting order (MR-QP-6).
    pub(crate) fn flush(&mut self, cfg: &QpConfig, env: &mut Env<'_>) {
        while let Some(w) = self.sq.pop_front() {
            cfg.complete_send(env, w.completion(WcStatus::WrFlushErr));
        }
        self.started = 0;
        self.cursor = 0;
        self.cursor_pkt = 0;
        self.ack_deadline = None;
        self.rnr_until = None;
        self.rd_outstanding = 0;
    }

    /// READs and atomics the responder must still hold in its resources:
    /// every started one from the oldest unanswered one on. It is the
    /// MR-REQ-7 count while responses arrive in order; when an earlier
    /// response is lost and later ones arrive, it keeps counting the later
    /// ones, since each took a responder slot (MR-DUP-3) and the retry of
    /// the unanswered one must find it still kept (MR-DUP-4, MR-DUP-5)
    /// rather than dropped as evicted (MR-DUP-6).
    pub(super) fn rd_held(&self) -> usize {
        self.sq
            .iter()
            .take(self.started)
            .filter(|w| w.wr.op.is_rd_atomic())
            .skip_while(|w| w.done)
            .count()
    }

    /// PSNs sent and not acknowledged.
    pub(crate) fn unacked(&self) -> usize {
        self.sent_end.distance(self.una) as usize
    }

    /// Whether some sent request packet is unacknowledged.
    pub(super) fn outstanding(&self) -> bool {
        self.una != self.sent_end
    }
}
