//! The MP responder (SPEC.md §7.5, §7.6, §7.9–§7.11, §7.14, §7.15) as a pure
//! state machine: `on_packet(&self, packet, arrival) -> (state, Outcomes)`.
//!
//! Processing order of one request packet: QP in ERR → drop; reserved MP
//! opcode → drop (MR-MPH-8); probe → ACK without state change (MR-MPF-5,
//! MR-MPF-6); window → drop (MR-MPW-1); trimmed → NAK 0x65 (MR-MPT-5);
//! duplicate → ACK, READ re-execution or atomic replay (MR-MPW-3, MR-MPR-9,
//! MR-MPP-12); header checks (MR-MPP-3) → NAK 0x61; key checks (MR-MPP-2,
//! MR-MPR-4, MR-ATOM-2) → NAK 0x62; then placement or storage, execution of
//! READs and atomics whose earlier messages are placed (MR-MPP-7), in-order
//! completion (MR-MPP-6) and the ACK policy (MR-MPA-1, MR-MPA-2).

mod ack;
mod exec;
mod placement;

pub use ack::AckDebt;
pub use placement::{MsgKind, MsgState};

use super::memory::{MemoryRegion, RecvQueue, RecvWr};
use super::sack::{PsnClass, Received};
use super::{ArrivalInfo, MpConfig, trim};
use crate::model::{Effect, Outcomes};
use metaroce_codec::{Msn, Opcode, Psn, RocePacket};
use std::collections::{BTreeMap, VecDeque};

/// Responder counters of §9.3 that MP traffic moves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponderCounters {
    /// `malformed_drops` (reserved MP opcodes, trimmed packets too short).
    pub malformed_drops: u64,
    /// `duplicate_requests`.
    pub duplicate_requests: u64,
    /// `ecn_ce_received`.
    pub ecn_ce_received: u64,
    /// `mp_out_of_window`.
    pub mp_out_of_window: u64,
    /// `mp_trimmed_received`.
    pub mp_trimmed_received: u64,
    /// `rnr_naks_sent`.
    pub rnr_naks_sent: u64,
}

/// The packet whose arrival triggers (or is the latest covered by) an MP ACK:
/// what the SACKETH echoes (MR-MPA-6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trigger {
    /// BTH PSN.
    pub psn: Psn,
    /// UDP source port.
    pub entropy: u16,
    /// MPETH timestamp.
    pub timestamp: u32,
    /// Arrived with ECN CE.
    pub ecn_ce: bool,
    /// MPETH R.
    pub retransmission: bool,
    /// Trimmed.
    pub trimmed: bool,
}

impl Trigger {
    fn of(packet: &RocePacket<'_>, arrival: &ArrivalInfo, trimmed: bool) -> Self {
        let m = packet.ext.mpeth.unwrap_or_default();
        Trigger {
            psn: packet.bth.psn,
            entropy: arrival.udp_src_port,
            timestamp: m.timestamp,
            ecn_ce: arrival.ecn_ce,
            retransmission: m.retransmission,
            trimmed,
        }
    }
}

/// An operation kept in responder resources (§6.9, MR-MPR-10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeptOp {
    /// An accepted MP READ.
    Read {
        /// MPETH MSN.
        msn: Msn,
        /// PSN of the original request (offset 0).
        first_psn: Psn,
        /// RETH VA of the read's first byte.
        va: u64,
        /// R_Key.
        rkey: u32,
        /// Length of the whole read.
        len: u32,
        /// MPETH timestamp of the first accepted request.
        timestamp: u32,
    },
    /// An accepted MP atomic; `orig` once executed (`Some(None)`: executed,
    /// original value unknown to the model).
    Atomic {
        /// MPETH MSN.
        msn: Msn,
        /// Request PSN.
        psn: Psn,
        /// Original value, once executed.
        orig: Option<Option<u64>>,
    },
}

/// The state of one MP responder QP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpResponder {
    /// Parameters.
    pub cfg: MpConfig,
    /// QPN of the requester (BTH DestQP of every response).
    pub remote_qpn: u32,
    /// Received PSNs, cumulative ACK PSN and window.
    pub received: Received,
    /// Messages seen and not completed, keyed by unwrapped MSN index
    /// (message number since the QP was connected).
    pub messages: BTreeMap<u64, MsgState>,
    /// Messages completed in order (the next to complete has this index).
    pub completed: u64,
    /// Receive work requests.
    pub recv_queue: RecvQueue,
    /// Receive work requests consumed so far.
    pub recv_consumed: u64,
    /// Registered memory.
    pub memory: Vec<MemoryRegion>,
    /// Responder resources, oldest first.
    pub resources: VecDeque<KeptOp>,
    /// Accepted packets not yet covered by an MP ACK.
    pub ack_debt: Option<AckDebt>,
    /// The most recently accepted packet (trigger of a coalesced ACK).
    pub last_trigger: Option<Trigger>,
    /// Bytes held in staging buffers.
    pub staged_bytes: u64,
    /// Messages (by index) refused for want of a receive, and the time of
    /// the last RNR NAK sent for each: at most one per RNR timer period per
    /// message (MR-MPP-17).
    pub rnr: BTreeMap<u64, u64>,
    /// The QP is in ERR.
    pub error: bool,
    /// Time of the latest event, in ns.
    pub now: u64,
    /// Counters.
    pub counters: ResponderCounters,
}

impl MpResponder {
    /// A responder in RTR/RTS with nothing received: c = `rq_psn` − 1, SACKETH
    /// MSN 0xFFFFFF.
    pub fn new(cfg: MpConfig, remote_qpn: u32, rq_psn: Psn) -> Self {
        let received = Received::new(rq_psn, cfg.window);
        MpResponder {
            cfg,
            remote_qpn,
            received,
            messages: BTreeMap::new(),
            completed: 0,
            recv_queue: RecvQueue::Known(Vec::new()),
            recv_consumed: 0,
            memory: Vec::new(),
            resources: VecDeque::new(),
            ack_debt: None,
            last_trigger: None,
            staged_bytes: 0,
            rnr: BTreeMap::new(),
            error: false,
            now: 0,
            counters: ResponderCounters::default(),
        }
    }

    /// Adds a memory region.
    #[must_use]
    pub fn with_region(mut self, mr: MemoryRegion) -> Self {
        self.memory.push(mr);
        self
    }

    /// Sets the receive queue.
    #[must_use]
    pub fn with_recv_queue(mut self, q: RecvQueue) -> Self {
        self.recv_queue = q;
        self
    }

    /// SACKETH MSN: the last message completed in order, 0xFFFFFF before any
    /// (MR-MPA-7).
    pub fn ack_msn(&self) -> Msn {
        Msn::new((self.completed as u32).wrapping_sub(1))
    }

    /// Posts a receive work request.
    pub fn post_recv(&self, wr: RecvWr) -> (Self, Outcomes) {
        let mut next = self.clone();
        if let RecvQueue::Known(q) = &mut next.recv_queue {
            q.push(wr);
        }
        (next, Outcomes::none())
    }

    /// The driver observed an MP ACK from this responder at `now`: accepted
    /// packets so far are covered (resets the coalescing limits of MR-MPA-2).
    pub fn note_ack_sent(&self, _now: u64) -> Self {
        let mut next = self.clone();
        next.ack_debt = None;
        next
    }

    /// Time passes to `now`: an MP ACK is required once the oldest uncovered
    /// packet is `mp_ack_coalesce_time` old (MR-MPA-2).
    pub fn on_timer(&self, now: u64) -> (Self, Outcomes) {
        let mut next = self.clone();
        next.now = next.now.max(now);
        let mut out = Outcomes::none();
        if let (Some(debt), Some(t)) = (self.ack_debt, self.last_trigger)
            && !self.error
            && now >= debt.first_ns.saturating_add(self.cfg.ack_coalesce_time)
        {
            out = out.require(&["MR-MPA-2"], Effect::Send(next.ack_spec(&t)));
            next.ack_debt = None;
        }
        (next, out)
    }

    /// Unwrapped index of message `msn` relative to the next to complete.
    /// `None` for a message already completed (behind by the half-space rule).
    pub(crate) fn msg_index(&self, msn: Msn) -> Option<u64> {
        let next = Msn::new(self.completed as u32);
        let d = msn.distance(next);
        (d < 1 << 23).then_some(self.completed + u64::from(d))
    }

    /// One request packet arrives. Returns the next state and everything the
    /// responder must or may do in answer.
    pub fn on_packet(&self, packet: &RocePacket<'_>, arrival: &ArrivalInfo) -> (Self, Outcomes) {
        let mut next = self.clone();
        let out = next.process(packet, arrival);
        (next, out)
    }

    fn process(&mut self, packet: &RocePacket<'_>, arrival: &ArrivalInfo) -> Outcomes {
        let op = packet.bth.opcode;
        self.now = self.now.max(arrival.now_ns);
        if self.error {
            return Outcomes::none().require(&["MR-MPP-15"], Effect::Drop { counter: None });
        }
        if op.is_mp_reserved() {
            self.counters.malformed_drops += 1;
            return Outcomes::none().require(
                &["MR-MPH-8"],
                Effect::Drop {
                    counter: Some("malformed_drops"),
                },
            );
        }
        if !op.is_mp_request() {
            // Responses and non-MP opcodes are not requests for this side.
            return Outcomes::none().require(&["MR-OPC-3"], Effect::Drop { counter: None });
        }
        // MR-MPT-4 (SPEC v1.2): a trimmed packet cut inside its MPETH is
        // still answered from its BTH (echoed timestamp 0).
        let trimmed = trim::is_trimmed(&self.cfg, packet, arrival);
        if packet.ext.mpeth.is_none() && !trimmed {
            // "MR-MPH-1": an MP request without MPETH after BTH cannot be placed.
            return Outcomes::none().require(&["MR-MPH-1"], Effect::Drop { counter: None });
        }
        if arrival.ecn_ce {
            self.counters.ecn_ce_received += 1;
        }
        let trigger = Trigger::of(packet, arrival, trimmed);
        if op == Opcode::MP_PROBE {
            // MR-MPF-5 / MR-MPF-6: answer, change nothing.
            return Outcomes::none().require(
                &["MR-MPF-5", "MR-MPF-6"],
                Effect::Send(self.ack_spec(&trigger)),
            );
        }
        let psn = packet.bth.psn;
        match self.received.classify(psn) {
            PsnClass::OutOfWindow => {
                self.counters.mp_out_of_window += 1;
                return Outcomes::none().require(
                    &["MR-MPW-1", "MR-SEC-10"],
                    Effect::Drop {
                        counter: Some("mp_out_of_window"),
                    },
                );
            }
            PsnClass::Duplicate => {
                if trimmed {
                    self.counters.mp_trimmed_received += 1;
                }
                self.counters.duplicate_requests += 1;
                return self.on_duplicate(packet, &trigger);
            }
            PsnClass::New => {}
        }
        if trimmed {
            self.counters.mp_trimmed_received += 1;
            // MR-MPT-2: nothing placed, PSN not received; MR-MPT-5: NAK 0x65.
            return Outcomes::none().require(
                &["MR-MPT-5", "MR-MPT-2"],
                Effect::Send(self.trim_nak_spec(&trigger)),
            );
        }
        self.on_new(packet, &trigger)
    }
}

#[cfg(test)]
mod tests;
