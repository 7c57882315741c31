//! The CNP notification point (SPEC.md §6.17) as a pure state machine.
//!
//! [`NotificationPoint::on_packet`] takes a packet that passed admission
//! (so the header checks of §9 and the ICRC check, MR-CNP-1) and says
//! whether a CNP is due, and to whom. The state is the time of the last CNP
//! per pacing scope; time is an argument (ns).

use crate::model::{Effect, Field, Outcomes, PacketSpec};
use core::net::IpAddr;
use metaroce_codec::{Opcode, Psn};
use std::collections::BTreeMap;

/// `cnp_pacing_scope` (§2, §10.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PacingScope {
    /// One CNP per destination QP per interval (default).
    #[default]
    Qp,
    /// One CNP per (source, destination) IP pair per interval.
    IpPair,
    /// One CNP per port per interval.
    Port,
}

/// Notification-point parameters (§2, §10.2). Times in ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NpParams {
    /// `cnp_generation` is declared.
    pub enabled: bool,
    /// `cnp_interval`: minimum time between CNPs of one scope.
    pub interval_ns: u64,
    /// `cnp_delay_max`: latest a due CNP may leave after the marked packet.
    pub delay_max_ns: u64,
    /// `cnp_pacing_scope`.
    pub scope: PacingScope,
}

impl Default for NpParams {
    /// §10.2 defaults: generation on, 50 µs interval, 10 µs delay, scope `qp`.
    fn default() -> Self {
        NpParams {
            enabled: true,
            interval_ns: 50_000,
            delay_max_ns: 10_000,
            scope: PacingScope::Qp,
        }
    }
}

/// What one pacing slot is keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScopeKey {
    /// The QP the CNP is addressed to.
    Qp(u32),
    /// The marked packet's (source, destination) addresses.
    IpPair(IpAddr, IpAddr),
    /// The whole port.
    Port,
}

/// A packet that passed admission, as the notification point sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marked {
    /// Its opcode.
    pub opcode: Opcode,
    /// ECN was CE.
    pub ecn_ce: bool,
    /// The receiving QP is an MP QP.
    pub mp: bool,
    /// The QP that sent it: the receiving QP's `dest_qpn` (RC, UC) or the
    /// DETH source QP (UD).
    pub sender_qp: u32,
    /// The receiving QP's P_Key.
    pub p_key: u16,
    /// IP source address of the marked packet.
    pub src_ip: IpAddr,
    /// IP destination address of the marked packet.
    pub dst_ip: IpAddr,
}

/// A CNP the notification point must send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CnpSpec {
    /// DestQP: the QP that sent the marked packet (MR-CNP-4).
    pub dest_qp: u32,
    /// P_Key of the receiving QP.
    pub p_key: u16,
    /// IP source address: the marked packet's destination (MR-CNP-4).
    pub src_ip: IpAddr,
    /// IP destination address: the marked packet's source (MR-CNP-4).
    pub dst_ip: IpAddr,
    /// Latest time the CNP may leave (`cnp_delay_max` after the mark, MR-CNP-1).
    pub not_after_ns: u64,
}

impl CnpSpec {
    /// The BTH constraints of the CNP (opcode 0x81, PSN 0, the QP's P_Key,
    /// SE and AckReq 0, no payload; MR-CNP-3 for the format, MR-CNP-4 for
    /// DestQP). The IP addresses are in [`CnpSpec::src_ip`] and
    /// [`CnpSpec::dst_ip`].
    pub fn packet(&self) -> PacketSpec {
        let mut spec = PacketSpec::opcode(Opcode::CNP);
        spec.psn = Field::Exact(Psn::new(0));
        spec.dest_qp = Field::Exact(self.dest_qp);
        spec.headers.pkey = Field::Exact(self.p_key);
        spec.headers.se = Field::Exact(false);
        spec.headers.ack_req = Field::Exact(false);
        spec.headers.payload_len = Field::Exact(0);
        spec
    }
}

/// What the notification point does with one admitted packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpDecision {
    /// Not CE-marked, or the implementation does not generate CNPs.
    Nothing,
    /// CE-marked but of a kind that never causes a CNP (with the requirement
    /// that says so).
    Excluded(&'static [&'static str]),
    /// CE-marked, but a CNP of the same scope left less than `cnp_interval` ago.
    Paced,
    /// A CNP is due.
    Send(CnpSpec),
}

impl NpDecision {
    /// The observable outcome.
    pub fn outcomes(&self) -> Outcomes {
        match self {
            NpDecision::Send(cnp) => {
                Outcomes::none().require(&["MR-CNP-1", "MR-CNP-4"], Effect::Send(cnp.packet()))
            }
            NpDecision::Nothing | NpDecision::Excluded(_) | NpDecision::Paced => Outcomes::none(),
        }
    }
}

/// The notification point's state: the time of the last CNP per scope.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NotificationPoint {
    /// Last CNP time (ns) per pacing slot.
    pub last_cnp: BTreeMap<ScopeKey, u64>,
}

impl NotificationPoint {
    /// The pacing slot of a CNP for `m` under `scope`.
    pub fn key(scope: PacingScope, m: &Marked) -> ScopeKey {
        match scope {
            PacingScope::Qp => ScopeKey::Qp(m.sender_qp),
            PacingScope::IpPair => ScopeKey::IpPair(m.src_ip, m.dst_ip),
            PacingScope::Port => ScopeKey::Port,
        }
    }

    /// Whether a CNP of slot `key` may leave at `now_ns` ("MR-CNP-2": not
    /// less than `cnp_interval` after the previous one of the same slot).
    pub fn may_send(&self, params: &NpParams, key: ScopeKey, now_ns: u64) -> bool {
        self.last_cnp
            .get(&key)
            .is_none_or(|&last| now_ns.saturating_sub(last) >= params.interval_ns)
    }

    /// An admitted packet arrives at `now_ns`.
    pub fn on_packet(&self, params: &NpParams, now_ns: u64, m: &Marked) -> (Self, NpDecision) {
        if !params.enabled || !m.ecn_ce {
            return (self.clone(), NpDecision::Nothing);
        }
        if m.mp {
            // "MR-CNP-6": MP signals congestion in SACKETH, never with CNPs.
            return (self.clone(), NpDecision::Excluded(&["MR-CNP-6"]));
        }
        if matches!(
            m.opcode,
            Opcode::RC_ACK | Opcode::RC_ATOMIC_ACK | Opcode::CNP
        ) {
            return (self.clone(), NpDecision::Excluded(&["MR-CNP-1"]));
        }
        let key = Self::key(params.scope, m);
        if !self.may_send(params, key, now_ns) {
            return (self.clone(), NpDecision::Paced); // "MR-CNP-2"
        }
        let mut next = self.clone();
        next.last_cnp.insert(key, now_ns);
        // "MR-CNP-4": to the sender's QP, addresses swapped.
        let cnp = CnpSpec {
            dest_qp: m.sender_qp,
            p_key: m.p_key,
            src_ip: m.dst_ip,
            dst_ip: m.src_ip,
            not_after_ns: now_ns.saturating_add(params.delay_max_ns), // "MR-CNP-1"
        };
        (next, NpDecision::Send(cnp))
    }

    /// The state after a QP whose peer is `peer_qpn` is reset: the pacing
    /// slot of its CNPs is forgotten ("MR-QP-8"; the slots of the other
    /// scopes are the port's, not the QP's).
    #[must_use]
    pub fn forget_qp(&self, peer_qpn: u32) -> Self {
        let mut next = self.clone();
        next.last_cnp.remove(&ScopeKey::Qp(peer_qpn));
        next
    }
}
