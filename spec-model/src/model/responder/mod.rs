//! The Base responder (SPEC.md §6.6–§6.12, §6.15, §6.16, §6.19) for RC QPs,
//! and the receive side of UD (§6.20) and UC (§6.21) QPs.
//!
//! [`ResponderState::on_request`] is a pure function
//! `(state, request packet) -> (state, Outcomes)`. Where SPEC.md allows a
//! choice, or where the outcome depends on state the model does not know
//! ([`Knowledge::Unknown`]: receive queue, memory regions, attributes of a
//! QP seen only in a capture), the model returns every allowed outcome.
//! Outcomes that lead to different next states are separate [`Branch`]es
//! ([`ResponderState::branches`]); `on_request` returns the first branch's
//! state and lists the other branches' outcomes as alternatives, so a judge
//! that sees which alternative happened takes that branch's state.
//!
//! Contract: nothing here panics on any packet the codec can parse.
//!
//! Files, by concern: [`psn`] (classification), `gate` (header, opcode,
//! state and P_Key checks before sequencing), `message` (SEND and WRITE),
//! `rdma` (READ, atomics, FLUSH, ATOMIC WRITE), `dup` (duplicates), `nak`
//! (sequence NAK and the fatal, RNR and drop outcomes of failed checks),
//! `ack` (the response packets), [`memory`], [`recv`], [`resources`], `ud`, `uc`.

mod ack;
pub mod config;
mod continuation;
mod dup;
mod gate;
pub mod memory;
mod message;
mod nak;
pub(crate) mod op;
pub mod psn;
mod rdma;
pub mod recv;
pub mod resources;
mod uc;
mod ud;

pub use config::{Features, QpAttributes};
pub use memory::{AccessFlags, KeyFault, MemoryRegion};
pub use psn::PsnClass;
pub use recv::RecvWr;
pub use resources::{Resource, ResourceKind, ResourceRing};

use crate::model::qp::{QpState, QpType};
use crate::model::{Knowledge, Outcomes};
use metaroce_codec::{Msn, Psn, RocePacket};
use std::collections::VecDeque;

/// Which NAK the responder has sent that holds back further sequence NAKs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NakState {
    /// None outstanding.
    #[default]
    None,
    /// A sequence NAK (0x60) was sent; no other until an expected packet is
    /// executed (MR-NAK-2).
    Sequence,
    /// An RNR NAK was sent; ahead packets are dropped silently until the
    /// expected PSN arrives (MR-RNR-2).
    Rnr,
}

/// Where a WRITE in progress puts its next bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WriteTarget {
    /// Virtual address of the next byte.
    pub va: u64,
    /// R_Key from the RETH.
    pub rkey: u32,
    /// Bytes of the DMA length not yet written.
    pub remaining: u32,
}

/// A multi-packet message in progress (its First packet was executed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A SEND.
    Send {
        /// The receive work request it consumes.
        recv: Knowledge<RecvWr>,
        /// Payload bytes received so far.
        received: u32,
    },
    /// An RDMA WRITE.
    Write {
        /// Where its bytes go (unknown for a message whose First packet the
        /// observer never saw).
        target: Knowledge<WriteTarget>,
    },
}

/// The state of a QP's responder (receive side).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponderState {
    /// Service type.
    pub qp_type: QpType,
    /// QP state: requests are processed only where §6.2 says so.
    pub qp_state: QpState,
    /// Attributes.
    pub attrs: QpAttributes,
    /// Declared features.
    pub features: Features,
    /// Expected PSN (ePSN).
    pub epsn: Psn,
    /// Message sequence number (RC).
    pub msn: Knowledge<Msn>,
    /// The NAK that holds back sequence NAKs.
    pub nak: NakState,
    /// The message in progress (`Known(None)`: none).
    pub in_progress: Knowledge<Option<Message>>,
    /// Responder resources.
    pub resources: ResourceRing,
    /// Posted receive work requests not yet consumed, in posting order.
    pub recv_queue: Knowledge<VecDeque<RecvWr>>,
    /// Memory regions of the QP's device.
    pub memory: Knowledge<Vec<MemoryRegion>>,
    /// For a state learned from a capture: the first PSN observed. Duplicates
    /// of earlier PSNs refer to requests the observer never saw.
    pub observed_from: Option<Psn>,
}

/// One complete outcome of an event, with the state it leads to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Branch {
    /// The state after the event, if this outcome is the one observed.
    pub state: ResponderState,
    /// What may and must be observed.
    pub outcomes: Outcomes,
}

impl ResponderState {
    /// A responder that has just entered RTR: expected PSN `rq_psn`, MSN 0
    /// (MR-QP-9), no receive work requests and no memory regions (all known).
    /// Every `rq_psn` 0 … 0xFFFFFF is accepted, and PSN classification is
    /// modulo 2^24, so the wrap needs no special case (MR-PSN-5).
    pub fn new(qp_type: QpType, attrs: QpAttributes, features: Features, rq_psn: Psn) -> Self {
        ResponderState {
            qp_type,
            qp_state: QpState::Rtr,
            attrs,
            features,
            epsn: rq_psn,                       // "MR-QP-9"
            msn: Knowledge::Known(Msn::new(0)), // "MR-QP-9"
            nak: NakState::None,
            in_progress: Knowledge::Known(None),
            resources: ResourceRing::default(),
            recv_queue: Knowledge::Known(VecDeque::new()),
            memory: Knowledge::Known(Vec::new()),
            observed_from: None,
        }
    }

    /// A responder learned from a capture whose first request to this QP is
    /// `first`: in RTS, expected PSN = that PSN, MSN unknown (the first MSN
    /// the responder sends is learned with [`Self::learn_msn`]), and receive
    /// queue, memory and the message in progress unknown.
    pub fn learned(
        qp_type: QpType,
        attrs: QpAttributes,
        features: Features,
        first: &RocePacket<'_>,
    ) -> Self {
        ResponderState {
            qp_type,
            qp_state: QpState::Rts,
            attrs,
            features,
            epsn: first.bth.psn,
            msn: Knowledge::Unknown,
            nak: NakState::None,
            in_progress: if qp_type == QpType::Ud {
                Knowledge::Known(None)
            } else {
                Knowledge::Unknown
            },
            resources: ResourceRing::default(),
            recv_queue: Knowledge::Unknown,
            memory: Knowledge::Unknown,
            observed_from: Some(first.bth.psn),
        }
    }

    /// The state with an unknown MSN set to `msn`, the MSN of an AETH the
    /// responder was seen to send; a known MSN is kept (and then enforced).
    #[must_use]
    pub fn learn_msn(&self, msn: Msn) -> Self {
        let mut next = self.clone();
        if !next.msn.is_known() {
            next.msn = Knowledge::Known(msn);
        }
        next
    }

    /// The state in QP state `qp_state`.
    #[must_use]
    pub fn with_qp_state(&self, qp_state: QpState) -> Self {
        ResponderState {
            qp_state,
            ..self.clone()
        }
    }

    /// The state with `region` registered (memory must be known).
    #[must_use]
    pub fn with_region(&self, region: MemoryRegion) -> Self {
        let mut next = self.clone();
        if let Some(regions) = next.memory.known_mut() {
            regions.push(region);
        }
        next
    }

    /// The state with `wr` posted to the receive queue (which must be known).
    #[must_use]
    pub fn post_recv(&self, wr: RecvWr) -> Self {
        let mut next = self.clone();
        if let Some(q) = next.recv_queue.known_mut() {
            q.push_back(wr);
        }
        next
    }

    /// The region with `rkey`, if known.
    pub fn region(&self, rkey: u32) -> Option<&MemoryRegion> {
        memory::region(&self.memory, rkey)
    }

    /// Every complete outcome of `packet` arriving, each with its next state.
    /// The first is the one a conforming peer with the usual state produces.
    pub fn branches(&self, packet: &RocePacket<'_>) -> Vec<Branch> {
        let (mut all, later) = self.branches_deferred(packet);
        if let Some(later) = later {
            all.extend(later.build(packet));
        }
        all
    }

    /// [`Self::branches`] with the failure branches of an in-sequence RC
    /// request that unknown state makes possible left unbuilt: the first
    /// branches, then (when there are any) what builds the rest. The first
    /// branches followed by [`DeferredFails::build`] are exactly
    /// [`Self::branches`]. A judge that sees the first branch's response
    /// builds the others only when it needs them.
    pub(crate) fn branches_deferred(
        &self,
        packet: &RocePacket<'_>,
    ) -> (Vec<Branch>, Option<DeferredFails>) {
        let mut first = Vec::new();
        let later = self.branches_deferred_into(packet, &mut first, Vec::new());
        (first, later)
    }

    /// [`Self::branches_deferred`] for a caller that judges request after
    /// request and reuses its allocations: the first branches are appended
    /// to `first`, and `fails` (emptied) holds the deferred failures, if
    /// any.
    pub(crate) fn branches_deferred_into(
        &self,
        packet: &RocePacket<'_>,
        first: &mut Vec<Branch>,
        mut fails: Vec<Fail>,
    ) -> Option<DeferredFails> {
        if let Some(done) = gate::check(self, packet) {
            first.push(done);
            return None;
        }
        match self.qp_type {
            QpType::Rc => {
                fails.clear();
                self.rc(packet, first, fails)
            }
            QpType::Uc => {
                first.extend(uc::receive(self, packet));
                None
            }
            QpType::Ud => {
                first.extend(ud::receive(self, packet));
                None
            }
        }
    }

    /// A request packet addressed to this QP arrives: the next state and every
    /// allowed outcome (other branches as [`Outcomes::alternatives`]).
    pub fn on_request(&self, packet: &RocePacket<'_>) -> (ResponderState, Outcomes) {
        let mut branches = self.branches(packet).into_iter();
        let Some(first) = branches.next() else {
            return (self.clone(), Outcomes::none());
        };
        let mut outcomes = first.outcomes;
        outcomes.alternatives.extend(branches.map(|b| b.outcomes));
        (first.state, outcomes)
    }

    /// An RC request: its first branches appended to `first`, and the
    /// deferred failures (`maybe`: an empty vector to collect them in).
    fn rc(
        &self,
        packet: &RocePacket<'_>,
        first: &mut Vec<Branch>,
        maybe: Vec<Fail>,
    ) -> Option<DeferredFails> {
        match psn::classify(self.epsn, packet.bth.psn) {
            PsnClass::Ahead => {
                first.push(nak::ahead(self, packet));
                None
            }
            PsnClass::Duplicate => {
                first.extend(dup::duplicate(self, packet));
                None
            }
            PsnClass::Expected => {
                // "MR-RSP-1": only the expected PSN is executed.
                let cleared = (self.nak == NakState::Rnr).then(|| ResponderState {
                    nak: NakState::None, // "MR-RNR-2": the expected PSN arrived
                    ..self.clone()
                });
                let arrived = cleared.as_ref().unwrap_or(self);
                let mut eval = Eval { maybe };
                if let Err(fail) = message::execute_rc(arrived, packet, &mut eval, first) {
                    first.push(nak::rc_fail(arrived, packet, fail));
                }
                if eval.maybe.is_empty() {
                    return None;
                }
                Some(DeferredFails {
                    arrived: cleared.unwrap_or_else(|| self.clone()),
                    fails: eval.maybe,
                })
            }
        }
    }
}

/// The failure branches of an in-sequence RC request that unknown state
/// makes possible besides the first branch, not built yet
/// ([`ResponderState::branches_deferred`]): the state the request arrived
/// in and the failures, in the order [`ResponderState::branches`] lists
/// their branches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DeferredFails {
    arrived: ResponderState,
    fails: Vec<Fail>,
}

impl DeferredFails {
    /// Takes the vector of the failures (for reuse by
    /// [`ResponderState::branches_deferred_into`]), leaving none.
    pub(crate) fn take_fails(&mut self) -> Vec<Fail> {
        std::mem::take(&mut self.fails)
    }

    /// The failures whose branches [`Self::build`] builds.
    pub(crate) fn fails(&self) -> &[Fail] {
        &self.fails
    }

    /// The branches, for the request `packet` they were deferred for
    /// (only its headers matter: a failure executes nothing).
    pub(crate) fn build(&self, packet: &RocePacket<'_>) -> Vec<Branch> {
        self.fails
            .iter()
            .map(|&f| nak::rc_fail(&self.arrived, packet, f))
            .collect()
    }
}

/// Why an in-sequence packet is not executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fail {
    /// A fatal NAK with this code; optionally the receive WR completes in
    /// error, with one of these statuses.
    Nak {
        syndrome: metaroce_codec::ext::Syndrome,
        reqs: &'static [&'static str],
        wc: Option<(u64, &'static [crate::model::WcStatus])>,
    },
    /// A SEND with Invalidate whose key is not invalidated (MR-RSP-10): NAK
    /// 0x61 with the receive WR in REM_INV_REQ_ERR, or (rxe) a positive ACK
    /// with the same completion; ERR either way.
    InvalidateFailed {
        /// The receive work request, if known.
        wc: Option<u64>,
    },
    /// No receive work request (RNR).
    Rnr,
    /// Dropped with nothing sent.
    Drop {
        reqs: &'static [&'static str],
        counter: Option<&'static str>,
    },
}

impl Fail {
    pub(crate) const fn nak(
        syndrome: metaroce_codec::ext::Syndrome,
        reqs: &'static [&'static str],
    ) -> Self {
        Fail::Nak {
            syndrome,
            reqs,
            wc: None,
        }
    }
}

/// Collects the failures that unknown state makes possible.
#[derive(Debug, Default)]
pub(crate) struct Eval {
    /// Failures that may happen instead of the path taken.
    pub maybe: Vec<Fail>,
}

impl Eval {
    /// A check: known pass goes on, known failure stops with `fail`, unknown
    /// goes on and records `fail` as a possible alternative.
    pub(crate) fn check(&mut self, ok: Knowledge<bool>, fail: Fail) -> Result<(), Fail> {
        match ok {
            Knowledge::Known(true) => Ok(()),
            Knowledge::Known(false) => Err(fail),
            Knowledge::Unknown => {
                self.maybe.push(fail);
                Ok(())
            }
        }
    }

    /// A check whose outcome is known.
    pub(crate) fn require(ok: bool, fail: Fail) -> Result<(), Fail> {
        if ok { Ok(()) } else { Err(fail) }
    }
}

#[cfg(test)]
mod tests;
