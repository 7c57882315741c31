//! The rows of SPEC.md §9.2 that depend on the packet alone, not on the
//! receiving QP: each returns the drop its row demands, `None` when the row
//! does not match. [`admit`](super::admit) walks them (with the QP's rows)
//! over raw bytes; [`FrameAdmission`] walks them over a frame a capture
//! checker has already decoded, so both apply one rule.

use super::Dropped;
use metaroce_codec::opcode::PayloadRule;
use metaroce_codec::{Dialect, Frame, IcrcStatus, IpRepr, Opcode, RocePacket, ServiceClass};

use crate::model::responder::op::{Op, op_of};

const MALFORMED: Option<&str> = Some("malformed_drops");

/// Smallest UDP length: UDP header, BTH and ICRC (MR-ROB-3).
pub(super) const UDP_LEN_MIN: usize = 8 + 12 + 4;

const fn drop(reqs: &'static [&'static str], counter: Option<&'static str>) -> Option<Dropped> {
    Some(Dropped { reqs, counter })
}

/// Row 2: an IPv4 header with options (IHL other than 5) or a fragment.
pub(super) fn ipv4_form(ihl: u8, fragment: bool) -> Option<Dropped> {
    if ihl != 5 || fragment {
        return drop(&["MR-ENC-5"], MALFORMED);
    }
    None
}

/// Row 3: an IPv4 header checksum that does not match the header.
pub(super) fn ipv4_checksum(checksum: u16, computed: u16) -> Option<Dropped> {
    if checksum != computed {
        return drop(&["MR-ROB-2"], MALFORMED);
    }
    None
}

/// Row 6: a UDP length other than the IP payload length (`ip_len`).
pub(super) fn udp_ip_length(udp_len: usize, ip_len: usize) -> Option<Dropped> {
    if udp_len > ip_len {
        drop(&["MR-ROB-1", "MR-ENC-15"], MALFORMED)
    } else if udp_len != ip_len {
        drop(&["MR-ENC-15"], MALFORMED)
    } else {
        None
    }
}

/// Row 7: a UDP length not a multiple of 4, or too short for BTH and ICRC.
pub(super) fn udp_length(udp_len: usize) -> Option<Dropped> {
    if !udp_len.is_multiple_of(4) || udp_len < UDP_LEN_MIN {
        return drop(&["MR-ROB-3"], MALFORMED);
    }
    None
}

/// Row 9: BTH TVer other than 0.
pub(super) fn tver(tver: u8) -> Option<Dropped> {
    if tver != 0 {
        return drop(&["MR-BTH-1"], MALFORMED);
    }
    None
}

/// Row 10, the part no QP table decides: QP 0, QP 1 (GSI) and 0xFFFFFF
/// (multicast) are outside MetaRoCE v1 (MR-BTH-6), like a QPN with no QP.
pub(super) const fn special_qpn(qpn: u32) -> bool {
    matches!(qpn, 0 | 1 | 0xFF_FFFF)
}

/// The drop of a packet whose DestQP names no QP (row 10).
pub(super) const UNKNOWN_QP: Dropped = Dropped {
    reqs: &["MR-BTH-6"],
    counter: Some("unknown_qp_drops"),
};

/// Row 11, the part no QP decides: a service class MetaRoCE never
/// delivers (RD, XRC, reserved vendor opcodes, CNP-class and UD opcodes
/// other than the defined ones).
pub(super) fn foreign_class(op: Opcode) -> Option<Dropped> {
    match op.class() {
        ServiceClass::Rd | ServiceClass::Xrc => drop(&["MR-OPC-4"], MALFORMED),
        ServiceClass::Vendor if op.0 >= 0xE0 => drop(&["MR-OPC-4"], MALFORMED),
        ServiceClass::Cnp if op != Opcode::CNP => drop(&["MR-OPC-4", "MR-OPC-3"], MALFORMED),
        ServiceClass::Ud if op != Opcode::UD_SEND_ONLY && op != Opcode::UD_SEND_ONLY_IMM => {
            drop(&["MR-OPC-4", "MR-OPC-3"], MALFORMED)
        }
        _ => None,
    }
}

/// Row 13: a reserved RC opcode; and a reserved UC opcode, for which
/// SPEC.md names no row (§9.1 asks for a defined outcome and drop is the
/// only one consistent with §9.2).
pub(super) fn reserved_opcode(op: Opcode) -> Option<Dropped> {
    let reserved = op_of(op) == Op::Reserved;
    match op.class() {
        ServiceClass::Rc if reserved => drop(&["MR-OPC-2"], MALFORMED),
        ServiceClass::Uc if reserved => drop(&["MR-ROB-5"], MALFORMED),
        _ => None,
    }
}

/// Whether opcode `op` carries no payload in `dialect` (row 20).
pub(super) fn carries_no_payload(op: Opcode, dialect: Dialect) -> bool {
    op.layout(dialect)
        .is_some_and(|l| l.payload == PayloadRule::None)
}

/// Row 20 for a packet read whole: padding or payload in a packet whose
/// opcode carries none (`no_payload`, [`carries_no_payload`]; a trimmed MP
/// packet is exempt).
pub(super) fn unwanted_payload(
    packet: &RocePacket<'_>,
    no_payload: bool,
    trimmed: bool,
) -> Option<Dropped> {
    if !trimmed && no_payload && (packet.bth.pad_count != 0 || !packet.payload.is_empty()) {
        return drop(&["MR-ROB-4"], MALFORMED);
    }
    None
}

/// Row 21: a wrong ICRC ("MR-ICRC-3", "MR-ICRC-4"; a trimmed MP packet is
/// exempt, MR-MPT-3).
pub(super) fn icrc_wrong(valid: bool, trimmed: bool) -> Option<Dropped> {
    if !trimmed && !valid {
        return drop(&["MR-ICRC-3", "MR-ICRC-4"], Some("icrc_errors"));
    }
    None
}

/// Bit of [`FrameAdmission`]'s opcode table: the opcode carries no payload.
const NO_PAYLOAD: u8 = 0x80;

/// What a receiver does with a frame a capture shows, as far as the frame
/// alone tells: the rows of §9.2 that need no knowledge of the receiving
/// QP, in table order, each by the same function [`admit`](super::admit)
/// uses (the opcode's rows 11, 13 and 20 looked up in a table those
/// functions filled for the dialect, once).
///
/// [`FrameAdmission::admit`] returns `Err` naming the first row that
/// drops the frame (or, for a frame that is no decoded RoCE packet, that it
/// is no MetaRoCE packet at all, MR-ENC-11, with no counter); `Ok`: the
/// receiver delivers it if the QP it names exists, is in a state that
/// takes it, and matches its addresses, P_Key, Q_Key and features (rows
/// 10–19, which a capture does not show).
///
/// What admission never looks at is never looked at here either: the UDP
/// checksum (a wrong one may or may not be dropped, MR-ENC-18; like
/// [`admit`](super::admit), this delivers it), source port, ECN, DSCP and
/// TTL. Nor is row 5, the UDP destination port: the caller decoded the
/// frame as RoCE on a port it was told carries RoCE, a port other than
/// 4791 is its sender's fault (MR-ENC-11, a per-packet finding), and taking
/// a frame its receiver did take as dropped would make the judges blame
/// the sender for what that frame answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameAdmission {
    dialect: Dialect,
    /// Per opcode: the low 7 bits index `drops` plus one (0: rows 11 and
    /// 13 pass), [`NO_PAYLOAD`] row 20's "carries no payload".
    opcodes: [u8; 256],
    /// The distinct drops of rows 11 and 13.
    drops: Vec<Dropped>,
}

impl FrameAdmission {
    /// The rows for frames decoded in opcode dialect `dialect`.
    pub fn new(dialect: Dialect) -> Self {
        let mut opcodes = [0u8; 256];
        let mut drops: Vec<Dropped> = Vec::new();
        for (code, entry) in opcodes.iter_mut().enumerate() {
            let op = Opcode(code as u8);
            if let Some(d) = foreign_class(op).or_else(|| reserved_opcode(op)) {
                let at = drops.iter().position(|x| *x == d).unwrap_or_else(|| {
                    drops.push(d);
                    drops.len() - 1
                });
                // At most a handful of distinct drops: the index fits 7 bits.
                *entry = (at as u8 + 1) & !NO_PAYLOAD;
            }
            if carries_no_payload(op, dialect) {
                *entry |= NO_PAYLOAD;
            }
        }
        FrameAdmission {
            dialect,
            opcodes,
            drops,
        }
    }

    /// The dialect the table is for.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Judges `frame`, decoded in [`Self::dialect`] (a frame the codec
    /// cannot decode never reaches a QP either: rows 1, 4 and 8). `icrc`
    /// is its ICRC check, `trimmed` whether the caller takes it as an MP
    /// packet a switch trimmed (its UDP length, payload and ICRC are then
    /// not judged, MR-MPT-3), and `ipv4_checksum_right` the verdict on its
    /// IPv4 header checksum when the caller has one (`None`: computed
    /// here). Allocates nothing.
    pub fn admit(
        &self,
        frame: &Frame<'_>,
        icrc: IcrcStatus,
        trimmed: bool,
        ipv4_checksum_right: Option<bool>,
    ) -> Result<(), Dropped> {
        if let Some(IpRepr::V4(v4)) = &frame.ip {
            ok(ipv4_form(v4.ihl, v4.is_fragment()))?;
            if ipv4_checksum_right != Some(true) {
                ok(ipv4_checksum(v4.checksum, v4.compute_checksum()))?;
            }
        }
        let Some(packet) = &frame.roce else {
            return Err(NOT_METAROCE);
        };
        match &frame.udp {
            Some(udp) => {
                let udp_len = usize::from(udp.length);
                if !trimmed {
                    ok(udp_ip_length(udp_len, udp_len + frame.udp_excess.len()))?;
                }
                ok(udp_length(udp_len))?;
            }
            // RoCE v1 (a GRH, no UDP): its receiver is a RoCE v1 port,
            // judged by the same transport rows.
            None if frame.is_roce_v1() => {}
            None => return Err(NOT_METAROCE),
        }
        ok(tver(packet.bth.tver))?;
        if special_qpn(packet.bth.dest_qp) {
            return Err(UNKNOWN_QP);
        }
        let entry = self.opcodes[usize::from(packet.bth.opcode.0)];
        if let Some(d) = usize::from(entry & !NO_PAYLOAD)
            .checked_sub(1)
            .and_then(|i| self.drops.get(i))
        {
            return Err(*d); // rows 11, 13
        }
        ok(unwanted_payload(packet, entry & NO_PAYLOAD != 0, trimmed))?;
        ok(icrc_wrong(icrc.is_valid() != Some(false), trimmed))
    }
}

/// No RoCE packet (no UDP header, or a UDP port not decoded as RoCE): no
/// MetaRoCE packet to its receiver (MR-ENC-11), which counts nothing.
const NOT_METAROCE: Dropped = Dropped {
    reqs: &["MR-ENC-11"],
    counter: None,
};

fn ok(row: Option<Dropped>) -> Result<(), Dropped> {
    row.map_or(Ok(()), Err)
}
