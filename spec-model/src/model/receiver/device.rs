//! One device: admission, the §9.3 counters, the notification point and the
//! reaction point of every QP, as a pure function
//! `(device, wire bytes, time) -> (device, Received)`.
//!
//! "MR-ROB-6": a packet changes only the state of the QP its DestQP names
//! (and the device-wide counters and CNP pacing slots); a dropped packet
//! changes no QP at all, so "MR-ROB-7" holds in its functional part: after
//! any sequence of malformed packets, valid traffic is processed exactly as
//! without them (the "no added delay" part is a timing property of an
//! implementation, which the model does not have). The protocol state of a QP (responder, requester)
//! is the caller's: it hands [`Received::delivery`] to that QP's model.

use super::{Counters, Delivery, Receiver, Verdict, admit};
use crate::model::congestion::{
    DcqcnParams, Marked, NotificationPoint, NpDecision, NpParams, ReactionPoint, RpChange, RpEvent,
};
use crate::model::qp::{QpState, QpType};
use crate::model::{Effect, Outcomes};
use metaroce_codec::Opcode;
use std::collections::BTreeMap;

/// The state of a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// Declarations and QPs.
    pub receiver: Receiver,
    /// §9.3 counters.
    pub counters: Counters,
    /// Notification-point parameters.
    pub np_params: NpParams,
    /// Notification-point state.
    pub np: NotificationPoint,
    /// Reaction-point parameters when `dcqcn_reaction` is declared.
    pub dcqcn: Option<DcqcnParams>,
    /// Reaction-point state per Base QP that entered RTS.
    pub rps: BTreeMap<u32, ReactionPoint>,
}

/// What one frame did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received<'a> {
    /// Admission's verdict.
    pub verdict: Verdict<'a>,
    /// What the device itself must or may show (drops, CNPs).
    pub outcomes: Outcomes,
    /// The notification point's decision (delivered non-CNP packets).
    pub np: NpDecision,
    /// What a delivered CNP did to the QP's rate.
    pub rate: Option<RpChange>,
}

impl Received<'_> {
    /// The packet for the QP's own model, if admission delivered one that is
    /// not a CNP.
    pub fn delivery(&self) -> Option<&Delivery<'_>> {
        self.verdict
            .delivery()
            .filter(|d| d.packet.bth.opcode != Opcode::CNP)
    }
}

impl Device {
    /// A device with `receiver`, zero counters, default CNP parameters and
    /// no reaction point.
    pub fn new(receiver: Receiver) -> Self {
        Device {
            receiver,
            counters: Counters::default(),
            np_params: NpParams::default(),
            np: NotificationPoint::default(),
            dcqcn: None,
            rps: BTreeMap::new(),
        }
    }

    /// The QP `qpn` enters RTS at `now_ns`: its reaction point starts at the
    /// line rate (Base QPs, when `dcqcn_reaction` is declared).
    #[must_use]
    pub fn enter_rts(&self, qpn: u32, now_ns: u64) -> Self {
        let mut next = self.clone();
        if let Some(qp) = next.receiver.qps.get_mut(&qpn) {
            qp.state = QpState::Rts;
            if let (Some(p), None) = (&self.dcqcn, qp.mp) {
                next.rps.insert(qpn, ReactionPoint::new(p, now_ns));
            }
        }
        next
    }

    /// The QP `qpn` moves to RESET at `now_ns` ("MR-QP-8"): its congestion
    /// state is cleared (no reaction-point state until it enters RTS again,
    /// and its CNP pacing slot forgotten); nothing is observable (no
    /// completion, no packet).
    pub fn reset(&self, qpn: u32) -> (Self, Outcomes) {
        let mut next = self.clone();
        if let Some(qp) = next.receiver.qps.get_mut(&qpn) {
            qp.state = QpState::Reset;
            next.rps.remove(&qpn);
            next.np = next.np.forget_qp(qp.dest_qpn);
        }
        (next, Outcomes::none())
    }

    /// A frame arrives at `now_ns`.
    pub fn receive<'a>(&self, wire: &'a [u8], now_ns: u64) -> (Self, Received<'a>) {
        let verdict = admit(&self.receiver, wire);
        let mut next = self.clone();
        next.counters = next.counters.after(&verdict);
        let mut received = Received {
            verdict,
            outcomes: verdict.outcomes(),
            np: NpDecision::Nothing,
            rate: None,
        };
        let Verdict::Deliver(d) = verdict else {
            // "MR-ICRC-4", "MR-ROB-6": a dropped packet changes no QP.
            return (next, received);
        };
        let Some(qp) = self.receiver.qps.get(&d.qpn) else {
            return (next, received);
        };
        if d.arrival.ecn_ce {
            next.counters = next.counters.bump("ecn_ce_received");
        }
        if d.packet.bth.opcode == Opcode::CNP {
            next.counters = next.counters.bump("cnp_received");
            if qp.mp.is_some() {
                // "MR-MPN-5": no effect on an MP QP's congestion state.
                received.outcomes =
                    Outcomes::none().require(&["MR-MPN-5"], Effect::Drop { counter: None });
            } else if let (Some(p), Some(rp)) = (&self.dcqcn, self.rps.get(&d.qpn)) {
                // "MR-DCQCN-8": only a CNP that passed admission and names
                // this QP reaches its reaction point.
                let (rp, change) = rp.on_event(p, now_ns, RpEvent::Cnp);
                next.rps.insert(d.qpn, rp);
                received.rate = Some(change);
            }
            return (next, received);
        }
        let sender_qp = match (qp.qp_type, d.packet.ext.deth) {
            (QpType::Ud, Some(deth)) => deth.src_qp,
            _ => qp.dest_qpn,
        };
        let marked = Marked {
            opcode: d.packet.bth.opcode,
            ecn_ce: d.arrival.ecn_ce,
            mp: qp.mp.is_some(),
            sender_qp,
            p_key: qp.p_key,
            src_ip: d.src_ip,
            dst_ip: d.dst_ip,
        };
        let (np, decision) = self.np.on_packet(&self.np_params, now_ns, &marked);
        next.np = np;
        if let NpDecision::Send(_) = decision {
            next.counters = next.counters.bump("cnp_sent");
        }
        received.outcomes = decision.outcomes();
        received.np = decision;
        (next, received)
    }
}
