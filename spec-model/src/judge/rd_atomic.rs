//! The requester's outstanding RDMA-resource operations (READ, Compare-Swap,
//! Fetch-Add, FLUSH, ATOMIC WRITE) against the limit its peer announced:
//! MR-CM-4 with the Responder Resources of the RDMA-CM exchange (the REP's
//! for the active side, the REQ's for the passive side: Linux
//! `drivers/infiniband/core/cm.c`, `cm_rep_handler` / `cm_format_rep_event`,
//! sets the active side's `initiator_depth` from the REP's Responder
//! Resources and `cm_init_qp_rts_attr` makes it the QP's `max_rd_atomic`),
//! else MR-REQ-7 with a capability profile's `max_rd_atomic`, else (as
//! information) its `max_dest_rd_atomic`.
//!
//! An operation is outstanding from its first transmission until its last
//! response arrives (MR-REQ-7). The capture shows neither moment at the
//! requester, so every doubt counts for the requester:
//!
//! - it stops being outstanding at the first response that shows the
//!   responder finished it: its own last response (READ Response Last or
//!   Only, Atomic Acknowledge, the Acknowledge of a FLUSH or ATOMIC WRITE),
//!   any response at or after the PSN of the next request (a later response
//!   implies the earlier ones, IBA vol 1 §9.7.5.1), or a NAK;
//! - a request whose PSN is not after the newest one, or a READ that
//!   re-reads the tail of an outstanding READ (a partial retry: same R_Key,
//!   same end address, later start), is a retransmission, not a new
//!   operation;
//! - an older operation counts against a new one only when the capture
//!   shows its own last response (the response at the last PSN of its range,
//!   the PSN before the next captured request) more than the reordering
//!   tolerance after the new request, and it was never retransmitted: one
//!   ended by a later response lost its own response at the capture point
//!   (or the network, when the requester retries it), one retransmitted may
//!   have had an earlier copy of its response, and one whose response comes
//!   within the tolerance may have been recorded late by a capture point
//!   that records the two directions apart. Operations still open when the
//!   connection ends do not count.
//!
//! A new operation beyond the limit is therefore a candidate until the
//! responses of the older ones show whether they were outstanding. Memory:
//! nothing until a connection with a limit sends its first RDMA-resource
//! operation; then at most [`MAX_TRACKED`] operations (further ones are not
//! counted) and [`MAX_CANDIDATES`] open candidates per connection.

use super::ConversationFinding;
use crate::Finding;
use metaroce_codec::ext::RethRepr;
use metaroce_codec::{Opcode, Psn};
use std::collections::VecDeque;

/// Most operations followed per connection; beyond, new ones are not
/// counted (the count can only be too low).
pub const MAX_TRACKED: usize = 512;

/// Most requests beyond the limit awaiting the responses that decide them.
pub const MAX_CANDIDATES: usize = 8;

/// Most frames of older operations named in a finding.
const MAX_NAMED: usize = 4;

/// The limits a capability profile declares (`None`: not declared).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RdLimits {
    /// `max_rd_atomic`: the largest `max_rd_atomic` a requester QP of these
    /// NICs has (MR-REQ-7).
    pub max_rd_atomic: Option<u8>,
    /// `max_dest_rd_atomic`: the largest number of responder resources a
    /// responder QP of these NICs has.
    pub max_dest_rd_atomic: Option<u8>,
}

/// Where a connection's limit came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitSource {
    /// The peer's Responder Resources in the RDMA-CM exchange of these REQ
    /// and REP frames; `initiator_depth` is what the requester's side set
    /// itself up to issue ([`Declared::initiator_depth`](super::Declared)).
    Cm {
        /// Frames of the REQ and the REP.
        frames: [u64; 2],
        /// The requester's own Initiator Depth in the exchange.
        initiator_depth: u8,
    },
    /// The profile's `max_rd_atomic` (MR-REQ-7).
    MaxRdAtomic,
    /// The profile's `max_dest_rd_atomic` (information only: a consumer may
    /// give a requester QP more than its peer's responder resources).
    MaxDestRdAtomic,
}

/// The limit a connection's requester is held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// Operations that may be outstanding at once.
    pub value: u8,
    /// Where it came from.
    pub source: LimitSource,
}

impl Limit {
    /// The limit of a connection: its CM exchange's, else the profile's.
    pub fn of(cm: Option<(u8, u8, [u64; 2])>, profile: RdLimits) -> Option<Limit> {
        if let Some((value, initiator_depth, frames)) = cm {
            return Some(Limit {
                value,
                source: LimitSource::Cm {
                    frames,
                    initiator_depth,
                },
            });
        }
        if let Some(value) = profile.max_rd_atomic {
            return Some(Limit {
                value,
                source: LimitSource::MaxRdAtomic,
            });
        }
        profile.max_dest_rd_atomic.map(|value| Limit {
            value,
            source: LimitSource::MaxDestRdAtomic,
        })
    }
}

/// One operation the capture shows the requester start.
#[derive(Clone, Copy, Debug)]
struct Op {
    psn: Psn,
    /// The PSN of the next captured request: the operation's PSNs end
    /// before it.
    end: Option<Psn>,
    frame: u64,
    seq: u64,
    retried: bool,
    /// A READ's RETH (for recognising its partial retries).
    reth: Option<RethRepr>,
}

/// A new operation that made more than the limit outstanding as captured.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    frame: u64,
    ts: u64,
    psn: Psn,
    opcode: Opcode,
    seq: u64,
    /// Older operations shown outstanding at it.
    confirmed: u16,
    /// Older operations whose fate is still open.
    pending: u16,
    /// Frames of the first confirmed ones.
    named: [u64; MAX_NAMED],
}

/// The operations of one connection's requester; see the module
/// documentation.
#[derive(Clone, Debug)]
pub(crate) struct RdAtomic {
    limit: Limit,
    /// The cross-direction reordering tolerance (ns).
    reorder_ns: u64,
    ops: VecDeque<Op>,
    candidates: VecDeque<Candidate>,
    next_seq: u64,
    /// Excesses shown (the first is reported).
    pub excesses: u64,
    /// The most operations outstanding at once as captured (before the
    /// tolerances above).
    pub peak: u16,
}

impl RdAtomic {
    pub fn new(limit: Limit, reorder_ns: u64) -> Self {
        RdAtomic {
            limit,
            reorder_ns,
            ops: VecDeque::new(),
            candidates: VecDeque::new(),
            next_seq: 0,
            excesses: 0,
            peak: 0,
        }
    }

    /// A request of the connection, captured at `frame`/`ts`; `is_new`:
    /// its PSN is after every earlier request's.
    pub fn on_request(
        &mut self,
        (frame, ts): (u64, u64),
        opcode: Opcode,
        psn: Psn,
        reth: Option<RethRepr>,
        is_new: bool,
        out: &mut Vec<ConversationFinding>,
    ) {
        let read = opcode == Opcode::RC_READ_REQUEST;
        if read
            && let Some(r) = reth
            && let Some(o) = self.ops.iter_mut().find(|o| {
                o.reth.is_some_and(|or| {
                    or.rkey == r.rkey
                        && or.va < r.va
                        && or.va.wrapping_add(u64::from(or.dma_len))
                            == r.va.wrapping_add(u64::from(r.dma_len))
                }) && o.psn.is_before(psn)
            })
        {
            // The tail of an outstanding READ read again: its retry.
            o.retried = true;
            return;
        }
        if !is_new {
            // Go-back-N from `psn`: every operation not ended before it.
            for o in &mut self.ops {
                if o.end.is_none_or(|e| psn.is_before(e)) {
                    o.retried = true;
                }
            }
            return;
        }
        if let Some(last) = self.ops.back_mut()
            && last.end.is_none()
        {
            last.end = Some(psn);
        }
        if !opcode.is_rc_rdma_resource() || self.ops.len() >= MAX_TRACKED {
            return;
        }
        let older = self.ops.len();
        let seq = self.next_seq;
        self.next_seq += 1;
        self.ops.push_back(Op {
            psn,
            end: None,
            frame,
            seq,
            retried: false,
            reth: reth.filter(|_| read),
        });
        self.peak = self.peak.max((older + 1).min(usize::from(u16::MAX)) as u16);
        if older < usize::from(self.limit.value) || self.candidates.len() >= MAX_CANDIDATES {
            return;
        }
        self.candidates.push_back(Candidate {
            frame,
            ts,
            psn,
            opcode,
            seq,
            confirmed: 0,
            pending: older.min(usize::from(u16::MAX)) as u16,
            named: [0; MAX_NAMED],
        });
        self.decide(out);
    }

    /// A response of the connection with PSN `psn`, captured at `ts`.
    pub fn on_response(
        &mut self,
        ts: u64,
        opcode: Opcode,
        psn: Psn,
        out: &mut Vec<ConversationFinding>,
    ) {
        if self.ops.is_empty() {
            return;
        }
        // READ Response First and Middle end no operation of their own.
        let last = !matches!(
            opcode,
            Opcode::RC_READ_RESPONSE_FIRST | Opcode::RC_READ_RESPONSE_MIDDLE
        );
        let mut ended = false;
        while let Some(o) = self.ops.front().copied() {
            let own = match o.end {
                Some(e) if !psn.is_before(e) => false,
                _ if last && !psn.is_before(o.psn) => {
                    o.end.is_some_and(|e| e == psn.add(1)) && !o.retried
                }
                _ => break,
            };
            self.ops.pop_front();
            ended = true;
            for c in self.candidates.iter_mut().filter(|c| c.seq > o.seq) {
                c.pending = c.pending.saturating_sub(1);
                if own && ts.saturating_sub(c.ts) > self.reorder_ns {
                    if let Some(slot) = c.named.get_mut(usize::from(c.confirmed)) {
                        *slot = o.frame;
                    }
                    c.confirmed = c.confirmed.saturating_add(1);
                }
            }
        }
        if ended {
            self.decide(out);
        }
    }

    /// Reports the candidates shown beyond the limit and drops those that
    /// can no longer be.
    fn decide(&mut self, out: &mut Vec<ConversationFinding>) {
        let limit = u16::from(self.limit.value);
        let mut i = 0;
        while let Some(c) = self.candidates.get(i).copied() {
            if c.confirmed >= limit {
                self.excesses += 1;
                if self.excesses == 1 {
                    let mut frames = vec![c.frame];
                    if let LimitSource::Cm { frames: cm, .. } = self.limit.source {
                        frames.extend(cm);
                    }
                    let n = usize::from(c.confirmed).min(MAX_NAMED);
                    frames.extend(&c.named[..n]);
                    out.push(ConversationFinding {
                        finding: self.finding(&c),
                        frames,
                        qpns: Vec::new(),
                        connection: None,
                    });
                }
            } else if c.confirmed + c.pending >= limit {
                i += 1;
                continue;
            }
            self.candidates.remove(i);
        }
    }

    /// The finding for candidate `c`, shown beyond the limit.
    fn finding(&self, c: &Candidate) -> Finding {
        let n = usize::from(c.confirmed).min(MAX_NAMED);
        let older = c.named[..n]
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let what = if n == 0 {
            format!(
                "{} PSN {} (frame {}) makes 1 RDMA-resource operation outstanding",
                c.opcode, c.psn, c.frame
            )
        } else {
            format!(
                "{} PSN {} (frame {}) makes {} RDMA-resource operations outstanding: the last responses of the older ones (requests at frames {older}{}) were captured after it",
                c.opcode,
                c.psn,
                c.frame,
                u32::from(c.confirmed) + 1,
                if usize::from(c.confirmed) > n {
                    ", …"
                } else {
                    ""
                },
            )
        };
        let v = self.limit.value;
        match self.limit.source {
            LimitSource::Cm {
                frames: [req, rep],
                initiator_depth,
            } if initiator_depth > v => Finding::info(
                "MR-CM-4",
                format!(
                    "{what}, more than the {v} Responder Resources its peer announced in the RDMA-CM exchange (REQ frame {req}, REP frame {rep}); the requester's side announced an Initiator Depth of {initiator_depth} in the same exchange, so its consumer set the excess up"
                ),
            ),
            LimitSource::Cm {
                frames: [req, rep], ..
            } => Finding::new(
                "MR-CM-4",
                format!(
                    "{what}, more than the {v} Responder Resources its peer announced in the RDMA-CM exchange (REQ frame {req}, REP frame {rep})"
                ),
            ),
            LimitSource::MaxRdAtomic => Finding::new(
                "MR-REQ-7",
                format!(
                    "{what}, more than the profile's max_rd_atomic ({v}), the most any requester QP of these NICs may have"
                ),
            ),
            LimitSource::MaxDestRdAtomic => Finding::info(
                "MR-REQ-7",
                format!(
                    "{what}, more than the profile's max_dest_rd_atomic ({v}): more than the responder can hold (MR-DUP-3), though not by itself a departure (a consumer may set a requester's max_rd_atomic above its peer's responder resources)"
                ),
            ),
        }
    }

    /// Operations and candidates held (memory).
    pub fn held(&self) -> usize {
        self.ops.len() + self.candidates.len()
    }
}
