//! The rows of SPEC.md §9.2 that apply before a packet reaches its QP, in
//! table order: the first row that matches decides.
//!
//! What admission never looks at, so never drops for: the UDP source port
//! (MR-ENC-14: any value, 0 included, on every packet type), the UDP checksum
//! (MR-ENC-17: 0 and correct values are accepted; a wrong one is only
//! reported, MR-ENC-18), the ECN and DSCP bits and the IPv4 TTL or IPv6 hop
//! limit (MR-ENC-22; the DSCP only marks trimmed MP packets, §7.10), the PCP
//! and VID of an 802.1Q tag (MR-ENC-2), and the ICRC-masked fields, which
//! may be rewritten in flight (MR-ICRC-5).
//!
//! Datagrams whose UDP destination port is readable and not 4791 are not
//! MetaRoCE packets (MR-ENC-11): rows 1–4 judge only datagrams that are, or
//! may be (a later IPv4 fragment, an IPv6 extension-header chain), addressed
//! to port 4791.

use super::rows;
use super::{Delivery, Dropped, LocalQp, MpAdmission, Receiver, UdpChecksum, Verdict, canonical};
use crate::model::mp::{ArrivalInfo, MpConfig, trim};
use crate::model::qp::{self, Packets, QpType};
use crate::model::responder::op::{Op, op_of};
use core::net::IpAddr;
use metaroce_codec::ethernet::{ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use metaroce_codec::ext::ExtHeaders;
use metaroce_codec::ipv4::PROTOCOL_UDP;
use metaroce_codec::ipv6::EXTENSION_HEADERS;
use metaroce_codec::udp::ROCEV2_PORT;
use metaroce_codec::{
    BthRepr, Dialect, EthernetRepr, IpRepr, Ipv4Repr, Ipv6Repr, Opcode, RocePacket, ServiceClass,
    UdpRepr, icrc,
};

const MALFORMED: Option<&str> = Some("malformed_drops");

/// ECN code point "congestion experienced".
const ECN_CE: u8 = 0b11;

fn drop(reqs: &'static [&'static str], counter: Option<&'static str>) -> Verdict<'static> {
    Verdict::Drop(Dropped { reqs, counter })
}

/// The verdict of a packet-only row (`rows`), when it drops.
fn row(dropped: Option<Dropped>) -> Option<Verdict<'static>> {
    dropped.map(Verdict::Drop)
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// The IP layer of an admitted datagram.
struct IpLayer<'a> {
    repr: IpRepr<'a>,
    /// The IP payload as the IP length gives it (MR-ENC-3: bytes after it,
    /// Ethernet padding, are never looked at).
    payload: &'a [u8],
    src: IpAddr,
    dst: IpAddr,
}

/// Decides what the bytes `wire` (an Ethernet frame, FCS optional) are to
/// the receiver `rx`.
pub fn admit<'a>(rx: &Receiver, wire: &'a [u8]) -> Verdict<'a> {
    let Ok((eth, rest)) = EthernetRepr::parse(wire) else {
        return Verdict::NotMetaRoce;
    };
    // "MR-ENC-2": with `vlan` declared, one tag (any PCP and VID) is accepted
    // like no tag; without it, or with two tags (MR-ENC-1), the frame is not
    // a MetaRoCE packet to this receiver.
    match eth.tags().len() {
        0 => {}
        1 if rx.vlan => {}
        _ => return Verdict::NotMetaRoce,
    }
    let ip = match eth.ethertype {
        ETHERTYPE_IPV4 => ipv4(rest),
        ETHERTYPE_IPV6 => ipv6(rest),
        _ => return Verdict::NotMetaRoce,
    };
    match ip {
        Ok(ip) => udp(rx, &ip),
        Err(verdict) => verdict,
    }
}

/// Rows 1–3 for IPv4.
#[allow(clippy::result_large_err)] // the error is the verdict itself
fn ipv4(bytes: &[u8]) -> Result<IpLayer<'_>, Verdict<'static>> {
    if bytes.len() < Ipv4Repr::MIN_LEN {
        return Err(drop(&["MR-ROB-1"], MALFORMED)); // row 1
    }
    if bytes[0] >> 4 != 4 {
        return Err(Verdict::NotMetaRoce);
    }
    if bytes[9] != PROTOCOL_UDP {
        return Err(Verdict::NotMetaRoce);
    }
    let ihl = usize::from(bytes[0] & 0x0F);
    let total = usize::from(be16(bytes, 2).unwrap_or(0));
    let flags_frag = be16(bytes, 6).unwrap_or(0);
    let fragment = flags_frag & 0x2000 != 0 || flags_frag & 0x1FFF != 0;
    let first_fragment = flags_frag & 0x1FFF == 0;
    // The UDP destination port, when this datagram shows it.
    let port_at = ihl * 4 + 2;
    let dst_port = if first_fragment && ihl >= 5 && port_at + 2 <= total.min(bytes.len()) {
        be16(bytes, port_at)
    } else {
        None
    };
    if dst_port.is_some_and(|p| p != ROCEV2_PORT) {
        return Err(Verdict::NotMetaRoce); // "MR-ENC-11"
    }
    if total > bytes.len() {
        return Err(drop(&["MR-ROB-1"], MALFORMED)); // row 1
    }
    if let Some(v) = row(rows::ipv4_form(bytes[0] & 0x0F, fragment)) {
        return Err(v); // row 2
    }
    let Ok((v4, rest)) = Ipv4Repr::parse(bytes) else {
        return Err(drop(&["MR-ROB-1"], MALFORMED));
    };
    let Some(payload) = total
        .checked_sub(Ipv4Repr::MIN_LEN)
        .and_then(|n| rest.get(..n))
    else {
        return Err(drop(&["MR-ROB-1"], MALFORMED)); // total length below the header
    };
    if let Some(v) = row(rows::ipv4_checksum(v4.checksum, v4.compute_checksum())) {
        return Err(v); // row 3
    }
    Ok(IpLayer {
        repr: IpRepr::V4(v4),
        payload,
        src: IpAddr::V4(v4.src),
        dst: IpAddr::V4(v4.dst),
    })
}

/// Rows 1 and 4 for IPv6.
#[allow(clippy::result_large_err)] // the error is the verdict itself
fn ipv6(bytes: &[u8]) -> Result<IpLayer<'_>, Verdict<'static>> {
    if bytes.len() < Ipv6Repr::LEN {
        return Err(drop(&["MR-ROB-1"], MALFORMED)); // row 1
    }
    if bytes[0] >> 4 != 6 {
        return Err(Verdict::NotMetaRoce);
    }
    let next_header = bytes[6];
    if EXTENSION_HEADERS.contains(&next_header) {
        return Err(drop(&["MR-ENC-9"], MALFORMED)); // row 4
    }
    if next_header != PROTOCOL_UDP {
        return Err(Verdict::NotMetaRoce);
    }
    let Ok((v6, rest)) = Ipv6Repr::parse(bytes) else {
        return Err(drop(&["MR-ROB-1"], MALFORMED));
    };
    if let Some(port) = be16(rest, 2)
        && port != ROCEV2_PORT
        && usize::from(v6.payload_len) >= 4
    {
        return Err(Verdict::NotMetaRoce); // "MR-ENC-11"
    }
    let Some(payload) = rest.get(..usize::from(v6.payload_len)) else {
        return Err(drop(&["MR-ROB-1"], MALFORMED)); // row 1
    };
    Ok(IpLayer {
        repr: IpRepr::V6(v6),
        payload,
        src: IpAddr::V6(v6.src),
        dst: IpAddr::V6(v6.dst),
    })
}

/// The MP parameters of the QP a possibly trimmed packet names, when the
/// packet has the DSCP and opcode of a trimmed packet (§7.10).
fn trim_candidate<'r>(rx: &'r Receiver, ip: &IpLayer<'_>) -> Option<(&'r LocalQp, MpAdmission)> {
    let (bth, _) = BthRepr::parse(ip.payload.get(UdpRepr::LEN..)?).ok()?;
    let qp = rx.qps.get(&bth.dest_qp)?;
    let mp = qp.mp?;
    let candidate =
        mp.trimming && mp.trim_dscp == Some(ip.repr.dscp()) && trim::is_data_opcode(bth.opcode);
    candidate.then_some((qp, mp))
}

/// Rows 5–8: UDP, then the RoCE packet.
fn udp<'a>(rx: &Receiver, ip: &IpLayer<'a>) -> Verdict<'a> {
    let Ok((udp, _)) = UdpRepr::parse(ip.payload) else {
        return drop(&["MR-ROB-1"], MALFORMED); // row 1: ends inside the UDP header
    };
    if udp.dst_port != ROCEV2_PORT {
        return Verdict::NotMetaRoce; // row 5, "MR-ENC-11"
    }
    let udp_len = usize::from(udp.length);
    let ip_len = ip.payload.len();
    let length_mismatch = rows::udp_ip_length(udp_len, ip_len);
    let candidate = trim_candidate(rx, ip);
    // "MR-MPT-3": a trimmed packet is not dropped for its UDP length; whether
    // it is trimmed is decided once its headers are read.
    if let (Some(d), None) = (length_mismatch, candidate) {
        return Verdict::Drop(d); // row 6
    }
    if let Some(v) = row(rows::udp_length(udp_len)) {
        return v; // row 7
    }
    let roce_bytes = &ip.payload[UdpRepr::LEN..];
    let arrival = ArrivalInfo {
        ecn_ce: ip.repr.ecn() == ECN_CE,
        dscp: ip.repr.dscp(),
        udp_src_port: udp.src_port, // "MR-ENC-14": any value is accepted
        ip_roce_len: None,
        now_ns: 0,
    };
    if let Some((_, mp)) = candidate {
        let Some(view) = trim::trimmed_view(roce_bytes) else {
            return drop(&["MR-MPT-4", "MR-ROB-1"], MALFORMED);
        };
        let cfg = MpConfig {
            pmtu: rx.qps.get(&view.bth.dest_qp).map_or(1024, |q| q.pmtu),
            trim_dscp: mp.trim_dscp,
            trimming: mp.trimming,
            ..MpConfig::default()
        };
        let arrival = ArrivalInfo {
            ip_roce_len: Some(roce_bytes.len()),
            ..arrival
        };
        if trim::is_trimmed(&cfg, &view, &arrival) {
            // "MR-MPT-3": neither its UDP length nor its ICRC is judged.
            return roce(rx, ip, &udp, view, Parsed::Trimmed, arrival);
        }
        if let Some(d) = length_mismatch {
            return Verdict::Drop(d); // row 6: complete, so not trimmed (MR-MPT-1)
        }
    }
    match parse_roce(roce_bytes, dialect(rx)) {
        Ok((packet, parsed)) => roce(rx, ip, &udp, packet, parsed, arrival),
        Err(verdict) => verdict,
    }
}

fn dialect(rx: &Receiver) -> Dialect {
    if rx.mp {
        Dialect::MetaRoce
    } else {
        Dialect::Base
    }
}

/// How the RoCE packet was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Parsed {
    /// Completely, ICRC included.
    Whole,
    /// PadCnt exceeds the bytes between the headers and the ICRC (row 20).
    PadTooLarge,
    /// A trimmed MP packet: headers only.
    Trimmed,
}

/// Row 8: BTH, the extension headers the opcode alone names, and the ICRC
/// must be present.
#[allow(clippy::result_large_err)] // the error is the verdict itself
fn parse_roce(
    bytes: &[u8],
    dialect: Dialect,
) -> Result<(RocePacket<'_>, Parsed), Verdict<'static>> {
    let short = || drop(&["MR-ROB-1"], MALFORMED);
    let (bth, rest) = BthRepr::parse(bytes).map_err(|_| short())?;
    // "MR-OPC-1": the headers after BTH follow from the opcode alone (the
    // tables of §4.3 and §7.2), never from the QP or the packet's length.
    let headers = bth.opcode.layout(dialect).map_or(&[][..], |l| l.headers);
    let (ext, rest) = ExtHeaders::parse(headers, rest).map_err(|_| short())?;
    let body_len = rest.len().checked_sub(4).ok_or_else(short)?;
    if usize::from(bth.pad_count) > body_len {
        let packet = RocePacket {
            bth,
            ext,
            payload: &rest[..body_len],
            pad: &[],
            icrc: [0; 4],
        };
        return Ok((packet, Parsed::PadTooLarge));
    }
    RocePacket::parse(bytes, dialect)
        .map(|p| (p, Parsed::Whole))
        .map_err(|_| short())
}

/// Whether an opcode is a response for the QP-state rule (§6.2).
fn is_response(op: Opcode) -> bool {
    op_of(op) == Op::Response
        || op == Opcode::MP_READ_RESPONSE
        || op == Opcode::MP_ATOMIC_ACK
        || op == Opcode::MP_ACK
}

/// Rows 11 and 12: the opcode's class against the QP's type.
fn class_check(op: Opcode, qp: &LocalQp) -> Option<Verdict<'static>> {
    if let Some(v) = row(rows::foreign_class(op)) {
        return Some(v);
    }
    let class = op.class();
    let matches = match (class, qp.qp_type, qp.mp.is_some()) {
        // CNPs are the reaction point's, whatever the QP type (§6.17, §6.18).
        (ServiceClass::Cnp, _, _) => true,
        (ServiceClass::Rc, QpType::Rc, false)
        | (ServiceClass::Uc, QpType::Uc, _)
        | (ServiceClass::Ud, QpType::Ud, _)
        | (ServiceClass::Vendor, QpType::Rc, true) => true,
        _ => false,
    };
    (!matches).then(|| drop(&["MR-OPC-3"], MALFORMED))
}

/// Row 15 for MP opcodes: atomics, invalidate and immediate need their features.
fn mp_feature_absent(op: Opcode, qp: &LocalQp) -> bool {
    let f = &qp.features;
    match op {
        Opcode::MP_CMP_SWAP | Opcode::MP_FETCH_ADD => !f.atomics,
        Opcode::MP_SEND_INV => !f.send_with_invalidate,
        Opcode::MP_SEND_IMM | Opcode::MP_WRITE_IMM => !f.immediate,
        _ => false,
    }
}

/// Rows 9–21, then delivery.
fn roce<'a>(
    rx: &Receiver,
    ip: &IpLayer<'a>,
    udp: &UdpRepr,
    packet: RocePacket<'a>,
    parsed: Parsed,
    arrival: ArrivalInfo,
) -> Verdict<'a> {
    let bth = &packet.bth;
    let op = bth.opcode;
    if let Some(v) = row(rows::tver(bth.tver)) {
        return v; // row 9
    }
    // Row 10, "MR-BTH-6": QP 0, QP 1 (GSI) and 0xFFFFFF (multicast) are outside
    // MetaRoCE v1, like a QPN with no QP; nothing is sent in response.
    let qp = if rows::special_qpn(bth.dest_qp) {
        None
    } else {
        rx.qps.get(&bth.dest_qp)
    };
    let Some(qp) = qp else {
        return Verdict::Drop(rows::UNKNOWN_QP);
    };
    if let Some(verdict) = class_check(op, qp) {
        return verdict; // rows 11, 12
    }
    let base_op = op_of(op);
    if let Some(v) = row(rows::reserved_opcode(op)) {
        return v; // row 13 (and reserved UC opcodes)
    }
    if qp.mp.is_some() && op.is_mp_reserved() {
        return drop(&["MR-MPH-8"], MALFORMED); // row 14
    }
    if base_op.feature_absent(&qp.features) || (qp.mp.is_some() && mp_feature_absent(op, qp)) {
        return drop(&["MR-PICS-3"], MALFORMED); // row 15
    }
    let behaviour = qp::behaviour(qp.state);
    let packets = if op == Opcode::CNP {
        // A CNP is neither request nor response; a QP that drops both drops it.
        if behaviour.requests == Packets::Dropped && behaviour.responses == Packets::Dropped {
            Packets::Dropped
        } else {
            Packets::Processed
        }
    } else if is_response(op) {
        behaviour.responses
    } else {
        behaviour.requests
    };
    if packets == Packets::Dropped {
        return drop(behaviour.reqs, MALFORMED); // row 16
    }
    if qp.is_connected()
        && (qp.remote_ip.is_some_and(|a| a != ip.src) || qp.local_ip.is_some_and(|a| a != ip.dst))
    {
        return drop(&["MR-SEC-9"], MALFORMED); // row 17
    }
    if !metaroce_codec::bth::pkey_matches(bth.pkey, qp.p_key) {
        return drop(&["MR-BTH-5"], Some("pkey_violations")); // row 18
    }
    if qp.qp_type == QpType::Ud
        && let Some(deth) = packet.ext.deth
        && deth.qkey != qp.q_key
    {
        return drop(&["MR-UD-2"], Some("qkey_violations")); // row 19
    }
    let trimmed = parsed == Parsed::Trimmed;
    if parsed == Parsed::PadTooLarge {
        return drop(&["MR-ROB-4"], MALFORMED); // row 20
    }
    let no_payload = rows::carries_no_payload(op, dialect(rx));
    if let Some(v) = row(rows::unwanted_payload(&packet, no_payload, trimmed)) {
        return v; // row 20
    }
    // "MR-ICRC-3", "MR-ICRC-6": the ICRC is checked here, before the packet
    // reaches its QP, so a packet that fails it places nothing, answers
    // nothing and changes no state (MR-ICRC-4). Trimmed packets are exempt
    // (MR-MPT-3).
    let udp_checksum = if trimmed {
        UdpChecksum::NotJudged
    } else {
        let valid = icrc::compute(&ip.repr, udp, &packet) == packet.icrc_value();
        if let Some(v) = row(rows::icrc_wrong(valid, trimmed)) {
            return v; // row 21
        }
        match udp.checksum {
            0 => UdpChecksum::Zero,
            c if c == crate::validate::encap::udp_checksum_of(&ip.repr, udp, &packet) => {
                UdpChecksum::Correct
            }
            _ => UdpChecksum::Wrong,
        }
    };
    Verdict::Deliver(Delivery {
        qpn: bth.dest_qp,
        packet: canonical::canonical(&packet), // row 22
        src_ip: ip.src,
        dst_ip: ip.dst,
        arrival,
        trimmed,
        udp_checksum,
    })
}
