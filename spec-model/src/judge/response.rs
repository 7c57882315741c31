//! An observed response, kept compactly, and how it is compared with what the
//! responder model expects ([`PacketSpec`]).

use crate::model::{Field, PacketSpec, SyndromeSpec};
use metaroce_codec::ext::{Syndrome, SyndromeKind};
use metaroce_codec::{Msn, Opcode, Psn, RocePacket};

/// A response packet as the judge keeps it: the fields a responder's
/// [`PacketSpec`] constrains. Payload bytes are not kept, only their number:
/// a capture never shows the responder's memory, so the model never asks for
/// particular READ response bytes when judging one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Resp {
    pub frame: u64,
    pub opcode: Opcode,
    pub psn: Psn,
    pub dest_qp: u32,
    pub syndrome: Option<Syndrome>,
    pub msn: Option<Msn>,
    pub orig: Option<u64>,
    pub payload_len: usize,
    pub udp_src_port: u16,
    /// The credit code of an ACK syndrome is judged by the connection
    /// (against its declared or learned credits), not against the spec.
    pub credits_apart: bool,
}

/// Where a response differs from a spec, in the order a reader wants to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mismatch {
    Opcode,
    Psn,
    DestQp,
    Syndrome,
    Msn,
    AtomicOrig,
    Payload,
    UdpPort,
}

impl Resp {
    pub fn of(frame: u64, pkt: &RocePacket<'_>, udp_src_port: u16) -> Self {
        Resp {
            frame,
            opcode: pkt.bth.opcode,
            psn: pkt.bth.psn,
            dest_qp: pkt.bth.dest_qp,
            syndrome: pkt.ext.aeth.map(|a| a.syndrome),
            msn: pkt.ext.aeth.map(|a| a.msn),
            orig: pkt.ext.atomic_ack_eth.map(|a| a.orig),
            payload_len: pkt.payload.len(),
            udp_src_port,
            credits_apart: false,
        }
    }

    /// An Acknowledge, READ response or atomic acknowledgement that acknowledges
    /// its PSN (an ACK syndrome, or a READ Middle without AETH): what MR-ACK-1
    /// accepts as covering an earlier PSN.
    pub fn acknowledges(&self) -> bool {
        let rdma = self.opcode.is_rc_read_response() || self.opcode == Opcode::RC_ATOMIC_ACK;
        match self.syndrome.map(Syndrome::kind) {
            Some(SyndromeKind::Ack { .. }) => true,
            None => rdma,
            _ => false,
        }
    }

    /// The first field where the response breaks `spec`, or `None` when it fits.
    pub fn mismatch(&self, spec: &PacketSpec) -> Option<Mismatch> {
        if !spec.opcode.allows(&self.opcode) {
            return Some(Mismatch::Opcode);
        }
        if !spec.psn.allows(&self.psn) {
            return Some(Mismatch::Psn);
        }
        if !spec.dest_qp.allows(&self.dest_qp) {
            return Some(Mismatch::DestQp);
        }
        let syndrome = match self.syndrome {
            // An ACK syndrome with its credit code set to 31 ("no credit
            // information"): the code is judged elsewhere.
            Some(s) if self.credits_apart && s.0 & 0x60 == 0 => {
                Some(metaroce_codec::ext::Syndrome(s.0 | 0x1F))
            }
            other => other,
        };
        match (&spec.syndrome, syndrome) {
            (Some(s), Some(got)) if !s.allows(got) => return Some(Mismatch::Syndrome),
            (Some(_), None) | (None, Some(_)) => return Some(Mismatch::Syndrome),
            _ => {}
        }
        if let Some(m) = self.msn
            && !spec.msn.allows(&m)
        {
            return Some(Mismatch::Msn);
        }
        match (&spec.atomic_orig, self.orig) {
            (Field::Any, _) => {}
            (f, Some(v)) if f.allows(&v) => {}
            _ => return Some(Mismatch::AtomicOrig),
        }
        let len_ok = match &spec.payload {
            Field::Any => true,
            Field::Exact(v) => v.len() == self.payload_len,
            Field::OneOf(vs) => vs.iter().any(|v| v.len() == self.payload_len),
        };
        if !len_ok {
            return Some(Mismatch::Payload);
        }
        if !spec.udp_src_port.allows(&self.udp_src_port) {
            return Some(Mismatch::UdpPort);
        }
        None
    }

    /// One line: opcode, PSN and AETH.
    pub fn describe(&self) -> String {
        let mut s = format!("{} PSN {}", self.opcode, self.psn);
        if let (Some(syn), Some(msn)) = (self.syndrome, self.msn) {
            s.push_str(&format!(" syndrome {:#04x} MSN {msn}", syn.0));
        }
        s
    }
}

/// Whether `spec` is an Acknowledge with an ACK syndrome: an obligation a
/// later acknowledgement may cover (MR-ACK-1, "that packet's PSN or later").
pub(crate) fn is_plain_ack(spec: &PacketSpec) -> bool {
    spec.opcode == Field::Exact(Opcode::RC_ACK)
        && matches!(
            spec.syndrome,
            Some(SyndromeSpec::AnyAck | SyndromeSpec::AckCredits { .. })
        )
        || spec.opcode == Field::Exact(Opcode::RC_ACK)
            && matches!(spec.syndrome, Some(SyndromeSpec::Exact(s)) if s.0 <= 0x1F)
}

/// One line for a spec: opcode, PSN and AETH constraints.
pub(crate) fn describe_spec(spec: &PacketSpec) -> String {
    let opcode = match &spec.opcode {
        Field::Exact(o) => o.to_string(),
        _ => "a response".to_string(),
    };
    let mut s = match &spec.psn {
        Field::Exact(p) => format!("{opcode} PSN {p}"),
        _ => opcode,
    };
    match spec.syndrome {
        Some(SyndromeSpec::Exact(syn)) => s.push_str(&format!(" syndrome {:#04x}", syn.0)),
        Some(SyndromeSpec::AnyAck) => s.push_str(" (ACK syndrome)"),
        Some(SyndromeSpec::AckCredits { code }) => {
            s.push_str(&format!(" syndrome {code:#04x} or 0x1f"));
        }
        Some(SyndromeSpec::RnrNak { timer }) => {
            s.push_str(&format!(" syndrome {:#04x}", 0x20 | timer));
        }
        Some(SyndromeSpec::AnyRnrNak) => s.push_str(" (RNR NAK)"),
        None => {}
    }
    if let Field::Exact(m) = &spec.msn {
        s.push_str(&format!(" MSN {m}"));
    }
    if let Field::Exact(v) = &spec.atomic_orig {
        s.push_str(&format!(" original value {v:#x}"));
    }
    s
}

/// The requirement a mismatch in `field` breaks, among those `reqs` cites.
pub(crate) fn blame(reqs: &'static [&'static str], field: Mismatch) -> &'static str {
    if field == Mismatch::Msn && !reqs.contains(&"MR-MSN-3") {
        return "MR-MSN-2"; // every AETH carries the current MSN
    }
    let prefer: &[&str] = match field {
        Mismatch::Msn => &["MR-MSN-2", "MR-MSN-3"],
        Mismatch::Syndrome => &["MR-CRD-1", "MR-CRD-2", "MR-READ-3", "MR-ACK-2"],
        Mismatch::Psn => &["MR-ACK-2", "MR-ACK-1", "MR-NAK-1", "MR-NAK-3"],
        Mismatch::AtomicOrig => &["MR-DUP-5", "MR-ATOM-4"],
        Mismatch::Opcode | Mismatch::Payload | Mismatch::DestQp | Mismatch::UdpPort => &[],
    };
    prefer
        .iter()
        .find_map(|p| reqs.iter().find(|r| *r == p).copied())
        .or_else(|| reqs.first().copied())
        .unwrap_or("MR-ACK-3")
}
