//! The receive path before a QP: which bytes reaching a port become a packet
//! of which QP (SPEC.md §3, §4, §5.3, §9.2), and the device that ties the
//! receive path, the notification point and the reaction points together.
//!
//! [`admit`] is a pure function `(receiver, wire bytes) -> Verdict`: it walks
//! the rows of the table of §9.2 in order and the first row that matches
//! decides. A packet that passes every row is delivered to its QP in
//! canonical form ([`canonical`]): the bits §4.1, §4.2 and §7.2 tell the
//! receiver to ignore are cleared, so no QP model can depend on them.
//! [`Device`] keeps the §9.3 counters and, per QP, the congestion state; it
//! changes only the QP the packet names.
//!
//! [`FrameAdmission`] applies the rows that need no knowledge of the
//! receiving QP to a frame already decoded (a capture checker's), with the
//! same row functions.
//!
//! Files: `admit` (the rows of §9.2), `rows` (the rows that depend on the
//! packet alone, and `FrameAdmission`), `canonical` (ignored bits),
//! `counters` (§9.3), `device` (dispatch, CNP and DCQCN glue, reset).

mod admit;
pub mod canonical;
pub mod counters;
pub mod device;
mod rows;

pub use admit::admit;
pub use counters::Counters;
pub use device::{Device, Received};
pub use rows::FrameAdmission;

use crate::model::mp::ArrivalInfo;
use crate::model::qp::{QpState, QpType};
use crate::model::responder::Features;
use crate::model::{Effect, Outcomes};
use core::net::IpAddr;
use metaroce_codec::RocePacket;
use std::collections::BTreeMap;

/// The MP parameters admission needs (SPEC.md §7.1, §7.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MpAdmission {
    /// `mp_trim_dscp`; `None`: trimming off.
    pub trim_dscp: Option<u8>,
    /// The implementation declares `mp_trimming`.
    pub trimming: bool,
}

/// What the receive path knows about one local QP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalQp {
    /// Service type.
    pub qp_type: QpType,
    /// MP parameters when the QP is an MP QP (RC only).
    pub mp: Option<MpAdmission>,
    /// Current state (§6.2).
    pub state: QpState,
    /// P_Key of the QP.
    pub p_key: u16,
    /// Q_Key (UD).
    pub q_key: u32,
    /// Features the implementation declares (§2).
    pub features: Features,
    /// Local IP address (RC, UC, MP: the path's; UD: unused).
    pub local_ip: Option<IpAddr>,
    /// Remote IP address (RC, UC, MP).
    pub remote_ip: Option<IpAddr>,
    /// Peer QPN (`dest_qpn`, RC and UC).
    pub dest_qpn: u32,
    /// Path MTU in bytes.
    pub pmtu: u32,
}

impl LocalQp {
    /// A Base QP of `qp_type` in RTS with P_Key 0xFFFF, Q_Key 0x11111111,
    /// every feature, PMTU 1024, path 10.0.0.1 (remote) → 10.0.0.2 (local)
    /// and peer QPN 0x12.
    pub fn base(qp_type: QpType) -> Self {
        LocalQp {
            qp_type,
            mp: None,
            state: QpState::Rts,
            p_key: 0xFFFF,
            q_key: 0x1111_1111,
            features: Features::ALL,
            local_ip: Some(IpAddr::from([10, 0, 0, 2])),
            remote_ip: Some(IpAddr::from([10, 0, 0, 1])),
            dest_qpn: 0x12,
            pmtu: 1024,
        }
    }

    /// Whether addresses bind this QP (MR-SEC-9: RC, UC and MP QPs).
    pub const fn is_connected(&self) -> bool {
        matches!(self.qp_type, QpType::Rc | QpType::Uc)
    }
}

/// The receiving side of one device: its declarations and its QPs by QPN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receiver {
    /// The implementation declares `vlan`.
    pub vlan: bool,
    /// The implementation declares `mp` (MP opcodes are decoded).
    pub mp: bool,
    /// Local QPs by QPN.
    pub qps: BTreeMap<u32, LocalQp>,
}

/// A packet dropped before it reaches a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// The requirements that demand the drop.
    pub reqs: &'static [&'static str],
    /// The §9.3 counter it bumps.
    pub counter: Option<&'static str>,
}

/// What the UDP checksum of an admitted packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdpChecksum {
    /// Zero: accepted (MR-ENC-17).
    Zero,
    /// Correct: accepted (MR-ENC-17).
    Correct,
    /// Non-zero and wrong: the receiver may drop the packet instead of
    /// delivering it (MR-ENC-18).
    Wrong,
    /// Not judged (a trimmed packet: its datagram is incomplete).
    NotJudged,
}

/// A packet that passed admission, for the QP it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery<'a> {
    /// The QP.
    pub qpn: u32,
    /// The packet with every ignored bit cleared ([`canonical::canonical`]).
    pub packet: RocePacket<'a>,
    /// IP source address.
    pub src_ip: IpAddr,
    /// IP destination address.
    pub dst_ip: IpAddr,
    /// IP and UDP facts (ECN, DSCP, entropy, IP length for trimming).
    pub arrival: ArrivalInfo,
    /// The packet is an MP trimmed packet (§7.10).
    pub trimmed: bool,
    /// The UDP checksum.
    pub udp_checksum: UdpChecksum,
}

/// The outcome of admission.
// Delivery is large (it carries the parsed packet); clarity over size, as
// for `Effect` (the model is not fast code).
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// Not a MetaRoCE packet: not IP, not UDP, or UDP destination port other
    /// than 4791 (MR-ENC-11). Nothing of MetaRoCE happens.
    NotMetaRoce,
    /// Dropped with no other effect.
    Drop(Dropped),
    /// Delivered to a QP (a CNP to the QP's reaction point).
    Deliver(Delivery<'a>),
}

impl<'a> Verdict<'a> {
    /// The observable outcome of a drop (nothing for other verdicts: a
    /// delivered packet's outcome is its QP's).
    pub fn outcomes(&self) -> Outcomes {
        match self {
            Verdict::Drop(d) => {
                Outcomes::none().require(d.reqs, Effect::Drop { counter: d.counter })
            }
            Verdict::NotMetaRoce | Verdict::Deliver(_) => Outcomes::none(),
        }
    }

    /// The drop, if this is one.
    pub const fn dropped(&self) -> Option<&Dropped> {
        match self {
            Verdict::Drop(d) => Some(d),
            _ => None,
        }
    }

    /// The delivery, if this is one.
    pub const fn delivery(&self) -> Option<&Delivery<'a>> {
        match self {
            Verdict::Deliver(d) => Some(d),
            _ => None,
        }
    }
}

#[cfg(test)]
mod rows_tests;
#[cfg(test)]
mod tests;
