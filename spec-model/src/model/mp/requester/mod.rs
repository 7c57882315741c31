//! The MP requester (SPEC.md §7.3, §7.4, §7.7–§7.9, §7.12, §7.13) as a pure
//! state machine.
//!
//! Events: [`MpRequester::post_send`], [`MpRequester::on_ack`] (MP ACK, MP
//! Atomic Acknowledge, MP READ Response), [`MpRequester::on_timer`], and
//! [`MpRequester::on_transmit`], which records a packet the implementation
//! actually sent (its entropy value and timestamp are its choice within the
//! allowed sets) and returns findings for that packet. Each event's
//! [`Outcomes`] names what may or must be sent next: [`MpRequester::next_packets`].
//!
//! PSNs are kept as unwrapped 64-bit indexes (`idx`) from the initial
//! `sq_psn`; the wire PSN is `sq_psn + idx` modulo 2^24.

mod ack;
pub mod cc;
pub mod loss;
pub mod read;
pub mod rtt;
mod send;
mod transmit;

pub use cc::{CcState, LossEvent};
pub use rtt::RttState;

use super::entropy::EntropyState;
use super::{MpConfig, packets_for};
use crate::model::{CompletionSpec, Effect, Field, Outcomes, WcStatus};
use metaroce_codec::{Msn, Opcode, Psn};
use std::collections::{BTreeMap, BTreeSet};

/// The operation of a send work request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WrOp {
    /// MP SEND (with immediate or invalidate).
    Send {
        /// Bytes.
        len: u32,
        /// Immediate data.
        imm: Option<u32>,
        /// R_Key to invalidate.
        invalidate: Option<u32>,
    },
    /// MP WRITE (with immediate).
    Write {
        /// Remote VA.
        va: u64,
        /// R_Key.
        rkey: u32,
        /// Bytes.
        len: u32,
        /// Immediate data.
        imm: Option<u32>,
    },
    /// MP READ.
    Read {
        /// Remote VA.
        va: u64,
        /// R_Key.
        rkey: u32,
        /// Bytes.
        len: u32,
    },
    /// MP Compare-Swap.
    CmpSwap {
        /// Remote VA.
        va: u64,
        /// R_Key.
        rkey: u32,
        /// Compare value.
        compare: u64,
        /// Swap value.
        swap: u64,
    },
    /// MP Fetch-Add.
    FetchAdd {
        /// Remote VA.
        va: u64,
        /// R_Key.
        rkey: u32,
        /// Addend.
        add: u64,
    },
    /// FLUSH or ATOMIC WRITE: not carried by MP (MR-MPN-4).
    Unsupported,
}

impl WrOp {
    /// The MP opcode.
    pub fn opcode(&self) -> Opcode {
        match self {
            WrOp::Send { imm: Some(_), .. } => Opcode::MP_SEND_IMM,
            WrOp::Send {
                invalidate: Some(_),
                ..
            } => Opcode::MP_SEND_INV,
            WrOp::Send { .. } => Opcode::MP_SEND,
            WrOp::Write { imm: Some(_), .. } => Opcode::MP_WRITE_IMM,
            WrOp::Write { .. } => Opcode::MP_WRITE,
            WrOp::Read { .. } => Opcode::MP_READ_REQUEST,
            WrOp::CmpSwap { .. } => Opcode::MP_CMP_SWAP,
            WrOp::FetchAdd { .. } => Opcode::MP_FETCH_ADD,
            WrOp::Unsupported => Opcode(0),
        }
    }

    /// Message length (MPETH).
    pub fn len(&self) -> u32 {
        match *self {
            WrOp::Send { len, .. } | WrOp::Write { len, .. } | WrOp::Read { len, .. } => len,
            WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. } => 8,
            WrOp::Unsupported => 0,
        }
    }

    /// Whether the length is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A send work request as posted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendWr {
    /// Work-request number (the model's numbering).
    pub wr: u64,
    /// Operation.
    pub op: WrOp,
    /// Fence flag (MR-MPP-11).
    pub fence: bool,
    /// Completion requested.
    pub signaled: bool,
}

/// Why a PSN was deemed lost (§7.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossCause {
    /// (a): K later-sent PSNs acknowledged.
    Reorder,
    /// (b): RTO.
    Timeout,
    /// (c): NAK 0x65.
    Trimmed,
    /// RNR NAK: retransmit after the RNR wait (MR-MPP-18).
    Rnr,
    /// Resource NAK 0x66: arrived, not accepted; resent once every earlier
    /// PSN is acknowledged or one RTO after the NAK (MR-MPP-25). Not a
    /// loss: no retirement, no decrease, no RTO expiry (MR-MPF-11).
    Resource,
}

/// One transmitted unit: a packet, or a READ request with its reserved PSNs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seg {
    /// Work request.
    pub wr: u64,
    /// PSNs this unit covers (n for a READ request, else 1).
    pub npsn: u32,
    /// MPETH offset.
    pub offset: u32,
    /// Payload bytes.
    pub len: u32,
    /// Time of the latest transmission.
    pub tx_time: u64,
    /// Order of the latest transmission among all transmissions.
    pub tx_seq: u64,
    /// Entropy value of the latest transmission.
    pub entropy: u16,
    /// Acknowledged (cumulatively or selectively).
    pub acked: bool,
    /// Deemed lost and not yet retransmitted.
    pub lost: Option<LossCause>,
    /// An atomic whose PSN an MP ACK reported before it was resent to get
    /// its Atomic Acknowledge (MR-MPP-14): acknowledging it again is no
    /// acknowledgement of new PSNs (MR-MPL-8).
    pub psn_acked: bool,
}

/// READ progress at the requester (§7.9).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadProgress {
    /// Response indexes (offset / PMTU) received.
    pub received: BTreeSet<u32>,
    /// Response indexes deemed missing and not yet re-requested.
    pub missing: BTreeSet<u32>,
    /// Per response index, the transmission sequence of the latest request covering it.
    pub requested_seq: BTreeMap<u32, u64>,
    /// Time of the latest request transmission or response arrival (MR-MPR-6).
    pub last_activity: u64,
    /// RETH DMA length of the first request (the whole read or a first
    /// part, MR-MPH-12, MR-MPR-11).
    pub first_len: u32,
    /// Bytes requested so far from offset 0 (first request and further
    /// parts, MR-MPR-11): only these are in flight (§7.12) and may be
    /// missing or re-requested (MR-MPR-6, MR-MPR-7).
    pub asked_to: u32,
}

/// A posted work request and its progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrState {
    /// As posted.
    pub wr: SendWr,
    /// MPETH MSN.
    pub msn: Msn,
    /// Index of its first PSN.
    pub first_idx: u64,
    /// PSNs it takes.
    pub npsn: u32,
    /// Packets (SEND/WRITE) first-transmitted so far (1 for a sent READ/atomic).
    pub sent: u32,
    /// READ progress.
    pub read: Option<ReadProgress>,
    /// Atomic acknowledged, with the original value.
    pub atomic_done: Option<u64>,
    /// MPETH O of its first packet sent (MR-MPP-21: every packet alike).
    pub ordered: Option<bool>,
}

/// Requester counters of §9.3.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequesterCounters {
    /// `retransmitted_packets`.
    pub retransmitted_packets: u64,
    /// `mp_retx_reorder`.
    pub mp_retx_reorder: u64,
    /// `mp_retx_timeout`.
    pub mp_retx_timeout: u64,
    /// `mp_retx_trim`.
    pub mp_retx_trim: u64,
    /// `mp_probes_sent`.
    pub mp_probes_sent: u64,
    /// `mp_entropy_retired`.
    pub mp_entropy_retired: u64,
}

/// The state of one MP requester QP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpRequester {
    /// Parameters.
    pub cfg: MpConfig,
    /// QPN of the responder (BTH DestQP).
    pub remote_qpn: u32,
    /// Initial `sq_psn` (PSN of index 0).
    pub sq_psn: Psn,
    /// Index of the next PSN to assign.
    pub next_idx: u64,
    /// Number of messages posted (next MSN).
    pub next_msn: u64,
    /// Work requests posted and not completed, by posting order.
    pub wrs: BTreeMap<u64, WrState>,
    /// Transmitted units not cumulatively acknowledged, by first PSN index.
    pub segs: BTreeMap<u64, Seg>,
    /// Newest cumulative ACK PSN as an index (−1 before any: `sq_psn` − 1).
    pub cum_idx: i64,
    /// Latest-transmission sequence numbers of acknowledged PSNs (rule (a)).
    pub acked_seqs: Vec<u64>,
    /// Transmissions so far.
    pub tx_seq: u64,
    /// READ responses that have arrived: (PSN index, arrival sequence).
    pub read_arrivals: Vec<(u64, u64)>,
    /// Entropy values.
    pub entropy: EntropyState,
    /// RTT estimator.
    pub rtt: RttState,
    /// Congestion control.
    pub cc: CcState,
    /// No new message before this time (RNR wait, MR-MPP-18).
    pub rnr_until: u64,
    /// Units named by a resource NAK, with the time one RTO after it
    /// (MR-MPP-25).
    pub refused: BTreeMap<u64, u64>,
    /// RNR and resource NAKs counted against `rnr_retry` (MR-MPP-25).
    pub rnr_naks: u32,
    /// Consecutive RTO expirations without new acknowledgements (MR-MPL-8).
    pub retries: u32,
    /// Time of the latest acknowledgement (tail-loss probe, MR-MPL-10).
    pub last_ack_time: u64,
    /// Index of the last PSN sent, if any.
    pub last_sent_idx: Option<u64>,
    /// The QP is in ERR.
    pub error: bool,
    /// Time of the latest event.
    pub now: u64,
    /// Counters.
    pub counters: RequesterCounters,
}

impl MpRequester {
    /// A requester in RTS with nothing posted.
    pub fn new(cfg: MpConfig, remote_qpn: u32, sq_psn: Psn) -> Self {
        let entropy = EntropyState::new(&cfg.entropy_set);
        let cc = CcState::new(&cfg);
        MpRequester {
            cfg,
            remote_qpn,
            sq_psn,
            next_idx: 0,
            next_msn: 0,
            wrs: BTreeMap::new(),
            segs: BTreeMap::new(),
            cum_idx: -1,
            acked_seqs: Vec::new(),
            tx_seq: 0,
            read_arrivals: Vec::new(),
            entropy,
            rtt: RttState::default(),
            cc,
            rnr_until: 0,
            refused: BTreeMap::new(),
            rnr_naks: 0,
            retries: 0,
            last_ack_time: 0,
            last_sent_idx: None,
            error: false,
            now: 0,
            counters: RequesterCounters::default(),
        }
    }

    /// The wire PSN of index `idx`.
    pub fn psn(&self, idx: u64) -> Psn {
        self.sq_psn.add(idx as u32)
    }

    /// The index of a wire PSN near the current window (half-space rule
    /// around the newest cumulative ACK PSN).
    pub fn idx_of(&self, psn: Psn) -> Option<u64> {
        let anchor = self.cum_idx + 1;
        let anchor_psn = self.psn(anchor.max(0) as u64);
        let d = psn.distance(anchor_psn) as i64;
        let d = if d >= 1 << 23 { d - (1 << 24) } else { d };
        u64::try_from(anchor.max(0) + d).ok()
    }

    /// Posts a send work request (in posting order; MSN and PSNs assigned now,
    /// MR-MPH-3, MR-PSN-3).
    pub fn post_send(&self, wr: SendWr) -> (Self, Outcomes) {
        let mut next = self.clone();
        if wr.op == WrOp::Unsupported {
            // MR-MPN-4: no packet, LOC_QP_OP_ERR.
            let out = Outcomes::none().require(
                &["MR-MPN-4"],
                Effect::Complete(CompletionSpec {
                    wr: wr.wr,
                    status: Field::Exact(WcStatus::LocQpOpErr),
                    byte_len: Field::Any,
                    imm: Field::Any,
                }),
            );
            return (next, out);
        }
        let npsn = match wr.op {
            WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. } => 1,
            _ => packets_for(wr.op.len(), self.cfg.pmtu),
        };
        let read = matches!(wr.op, WrOp::Read { .. }).then(ReadProgress::default);
        let state = WrState {
            msn: Msn::new(next.next_msn as u32),
            first_idx: next.next_idx,
            npsn,
            sent: 0,
            read,
            atomic_done: None,
            ordered: None,
            wr,
        };
        next.next_msn += 1;
        next.next_idx += u64::from(npsn);
        next.wrs.insert(state.wr.wr, state);
        let out = next.next_packets(next.now);
        (next, out)
    }

    /// Bytes in flight (§7.12): payload of units sent and neither acknowledged
    /// nor deemed lost, plus READ response bytes requested and not received
    /// (those deemed missing included, so a re-request adds none: MR-MPC-10).
    pub fn bytes_in_flight(&self) -> u64 {
        let data: u64 = self
            .segs
            .values()
            .filter(|s| !s.acked && s.lost.is_none())
            .map(|s| u64::from(s.len))
            .sum();
        let reads: u64 = self
            .wrs
            .values()
            .filter_map(|w| {
                let r = w.read.as_ref()?;
                (w.sent > 0).then(|| {
                    (0..self.asked_pkts(w))
                        .filter(|i| !r.received.contains(i))
                        .map(|i| u64::from(self.resp_len(w, i)))
                        .sum::<u64>()
                })
            })
            .sum();
        data + reads
    }

    /// Whether the unit at `idx`, named by a resource NAK, may be resent at
    /// `now`: every earlier PSN is acknowledged, or one RTO has passed since
    /// the NAK (MR-MPP-25).
    pub fn resource_due(&self, idx: u64, now: u64) -> bool {
        self.refused.get(&idx).is_none_or(|&t| now >= t)
            || (idx as i64) <= self.cum_idx + 1
            || self.segs.range(..idx).all(|(_, s)| s.acked)
    }

    /// Index of the unit holding the oldest unacknowledged PSN (§7.12), if any.
    pub fn oldest_unacked(&self) -> Option<u64> {
        self.segs.iter().find(|(_, s)| !s.acked).map(|(&i, _)| i)
    }

    /// The response packets of READ `w` requested so far (first request and
    /// further parts, MR-MPR-11); all n for a READ of length 0.
    pub(crate) fn asked_pkts(&self, w: &WrState) -> u32 {
        let Some(r) = &w.read else { return 0 };
        if w.wr.op.is_empty() {
            return w.npsn;
        }
        r.asked_to.div_ceil(self.cfg.pmtu.max(1)).min(w.npsn)
    }

    /// MR-MPR-11: the most a READ request (first or further part) may ask
    /// for now, max(PMTU, cwnd rounded down to a multiple of PMTU).
    pub fn read_bound(&self) -> u32 {
        let p = u64::from(self.cfg.pmtu.max(1));
        (self.cc.cwnd / p * p).max(p).min(u64::from(u32::MAX)) as u32
    }

    /// Payload bytes of response `i` of READ `w`.
    pub(crate) fn resp_len(&self, w: &WrState, i: u32) -> u32 {
        let p = self.cfg.pmtu.max(1);
        w.wr.op.len().saturating_sub(i * p).min(p)
    }
}

#[cfg(test)]
pub(crate) mod tests;
