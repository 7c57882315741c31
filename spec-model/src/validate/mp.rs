//! MP headers and packetization as one packet shows them (SPEC.md §7.2–7.4,
//! §7.6, §7.9, §7.10, §7.13, §7.14).

use super::{Context, PMTU_VALUES, Packet, is_mp_data};
use crate::Finding;
use metaroce_codec::ext::{MpethRepr, SackethRepr, SyndromeKind};
use metaroce_codec::{IpRepr, Opcode};

/// Lowest entropy value (§7.1, §10.3).
const ENTROPY_MIN: u16 = 0xC000;

/// The smallest PMTU: every MP offset is a multiple of it.
const MIN_PMTU: u64 = 256;

/// Checks of MP packets (profile MP, opcodes 0xC0–0xCB).
pub(super) fn check(p: &Packet<'_, '_>, ctx: &Context, out: &mut Vec<Finding>) {
    if !p.op.is_mp() || p.layout.is_none() {
        return;
    }
    if let Some(udp) = &p.frame.udp
        && udp.src_port < ENTROPY_MIN
    {
        out.push(Finding::new(
            "MR-MPS-1",
            format!(
                "UDP source port 0x{:04x} cannot be an entropy value (0xC000–0xFFFF)",
                udp.src_port
            ),
        ));
    }
    if ctx.mp_flow_label_entropy
        && let (Some(udp), Some(IpRepr::V6(ip))) = (&p.frame.udp, &p.frame.ip)
        && ip.flow_label != u32::from(udp.src_port)
    {
        // "MR-MPS-8": the flow label is the entropy value, zero-extended.
        out.push(Finding::new(
            "MR-MPS-8",
            format!(
                "IPv6 flow label 0x{:05x} is not the entropy value 0x{:04x} (mp_flow_label_entropy)",
                ip.flow_label, udp.src_port
            ),
        ));
    }
    if let (Some(trim), Some(ip)) = (ctx.trim_dscp, &p.frame.ip)
        && ip.dscp() == trim
        && !p.trimmed
    {
        out.push(Finding::new(
            "MR-MPT-9",
            format!("complete MP packet sent with the trimming DSCP {trim}"),
        ));
    }
    if let Some(m) = p.roce.ext.mpeth {
        ack_req(p, &m, out);
        match p.op {
            op if is_mp_data(op) => data(p, &m, ctx, out),
            Opcode::MP_READ_REQUEST => read_request(p, &m, ctx, out),
            Opcode::MP_CMP_SWAP | Opcode::MP_FETCH_ADD => atomic(&m, out),
            Opcode::MP_PROBE => probe(p, &m, out),
            _ => {}
        }
    }
    if let Some(sack) = p.roce.ext.sacketh {
        acknowledgement(p, &sack, out);
    }
}

/// MR-MPH-9: AckReq in every request with L or R set, and in every probe.
fn ack_req(p: &Packet<'_, '_>, m: &MpethRepr, out: &mut Vec<Finding>) {
    if p.roce.bth.ack_req || p.op == Opcode::MP_READ_RESPONSE {
        return;
    }
    let why = if p.op == Opcode::MP_PROBE {
        "an MP Probe"
    } else if m.last {
        "a request with L set"
    } else if m.retransmission {
        "a retransmission (R set)"
    } else {
        return;
    };
    out.push(Finding::new(
        "MR-MPH-9",
        format!("{} is {why} but has no AckReq", p.op),
    ));
}

/// MP SEND, WRITE and READ Response packets: F and L flags (MR-MPH-2),
/// packetization (MR-MPH-10 for requests, MR-MPR-1 for READ responses) and
/// the WRITE's RETH (MR-MPH-11).
fn data(p: &Packet<'_, '_>, m: &MpethRepr, ctx: &Context, out: &mut Vec<Finding>) {
    let offset = u64::from(m.offset);
    let msg_len = u64::from(m.msg_len);
    if m.first != (offset == 0) {
        out.push(Finding::new(
            "MR-MPH-2",
            format!("F is {} but the offset is {offset}", flag(m.first)),
        ));
    }
    if matches!(p.op, Opcode::MP_WRITE | Opcode::MP_WRITE_IMM)
        && let Some(reth) = p.roce.ext.reth
        && reth.dma_len != m.msg_len
    {
        out.push(Finding::new(
            "MR-MPH-11",
            format!(
                "RETH DMA length {} but the message length is {}",
                reth.dma_len, m.msg_len
            ),
        ));
    }
    if p.trimmed {
        return;
    }
    let len = p.payload_len as u64;
    let ends = offset + len == msg_len;
    if m.last != ends {
        out.push(Finding::new(
            "MR-MPH-2",
            format!(
                "L is {} but offset {offset} + payload {len} {} the message length {msg_len}",
                flag(m.last),
                if ends { "equals" } else { "differs from" }
            ),
        ));
    }
    let id = if p.op == Opcode::MP_READ_RESPONSE {
        "MR-MPR-1"
    } else {
        "MR-MPH-10"
    };
    if let Some(problem) = packetization(offset, len, msg_len, ctx.pmtu) {
        out.push(Finding::new(id, problem));
    }
}

/// §7.3: packet i of a message of L bytes carries offset i × P and
/// min(P, L − i × P) bytes. Without the PMTU, P is one of the five values.
fn packetization(offset: u64, len: u64, msg_len: u64, pmtu: Option<u32>) -> Option<String> {
    if offset + len > msg_len {
        return Some(format!(
            "offset {offset} + payload {len} exceeds the message length {msg_len}"
        ));
    }
    if offset >= msg_len && offset != 0 {
        return Some(format!(
            "offset {offset} lies beyond the message length {msg_len}"
        ));
    }
    match pmtu {
        Some(pmtu) => {
            let pmtu = u64::from(pmtu);
            let need = pmtu.min(msg_len - offset);
            if !offset.is_multiple_of(pmtu) {
                Some(format!(
                    "offset {offset} is not a multiple of the PMTU {pmtu}"
                ))
            } else if len != need {
                Some(format!(
                    "payload {len} bytes at offset {offset} of a {msg_len}-byte message needs {need}"
                ))
            } else {
                None
            }
        }
        None => {
            let not_last = offset + len < msg_len;
            if !offset.is_multiple_of(MIN_PMTU) {
                Some(format!("offset {offset} is not a multiple of any PMTU"))
            } else if not_last && !PMTU_VALUES.iter().any(|&v| u64::from(v) == len) {
                Some(format!(
                    "payload {len} bytes in a packet that does not end the message: needs exactly a PMTU"
                ))
            } else if not_last && !offset.is_multiple_of(len) {
                Some(format!(
                    "offset {offset} is not a multiple of the PMTU {len} this packet shows"
                ))
            } else {
                None
            }
        }
    }
}

/// MR-MPH-12 (first request: offset 0, F, a DMA length of the whole read or,
/// for a read requested in parts, a multiple of PMTU below it), MR-MPR-11
/// (further part, R clear) and MR-MPR-7 (re-request, R set): a range inside
/// the read at a PMTU boundary; MR-MPH-2 (F exactly at offset 0; in a request
/// with R clear, L exactly when the range reaches the end of the read).
fn read_request(p: &Packet<'_, '_>, m: &MpethRepr, ctx: &Context, out: &mut Vec<Finding>) {
    let dma_len = p.roce.ext.reth.map_or(0, |r| r.dma_len);
    let offset = u64::from(m.offset);
    let end = offset + u64::from(dma_len);
    let unit = ctx.pmtu.map_or(MIN_PMTU, u64::from);
    if m.first != (offset == 0) {
        out.push(Finding::new(
            "MR-MPH-2",
            format!("F is {} but the offset is {offset}", flag(m.first)),
        ));
    }
    if !m.retransmission && m.last != (end == u64::from(m.msg_len)) {
        out.push(Finding::new(
            "MR-MPH-2",
            format!(
                "L is {} but the request asks for bytes {offset}..{end} of a read of {}",
                flag(m.last),
                m.msg_len
            ),
        ));
    }
    if !m.retransmission && offset == 0 {
        let whole = dma_len == m.msg_len;
        let part = dma_len > 0 && dma_len < m.msg_len && u64::from(dma_len).is_multiple_of(unit);
        if !whole && !part {
            out.push(Finding::new(
                "MR-MPH-12",
                format!(
                    "MP READ Request (R clear, offset 0) with RETH DMA length {dma_len}: \
                     neither the message length {} nor a multiple of {unit} below it",
                    m.msg_len
                ),
            ));
        }
        return;
    }
    // A further part (R clear) or a re-request (R set).
    let id = if m.retransmission {
        "MR-MPR-7"
    } else {
        "MR-MPR-11"
    };
    let what = if m.retransmission {
        "READ re-request"
    } else {
        "further READ part"
    };
    if end > u64::from(m.msg_len) {
        out.push(Finding::new(
            id,
            format!(
                "{what} of {dma_len} bytes at offset {offset} exceeds the read length {}",
                m.msg_len
            ),
        ));
    }
    if !offset.is_multiple_of(unit) {
        out.push(Finding::new(
            id,
            format!("{what} at offset {offset}, not a multiple of {unit}"),
        ));
    }
    // SPEC v1.2 §7.9: a range is a multiple of PMTU long unless it ends
    // the read (256, the smallest PMTU, divides every PMTU).
    if !u64::from(dma_len).is_multiple_of(unit) && end != u64::from(m.msg_len) {
        out.push(Finding::new(
            id,
            format!(
                "{what} of {dma_len} bytes at offset {offset}: not a multiple of {unit} \
                 and not ending the read of {}",
                m.msg_len
            ),
        ));
    }
}

/// MR-MPH-13: an atomic is one packet with offset 0, length 8, F and L.
fn atomic(m: &MpethRepr, out: &mut Vec<Finding>) {
    if m.offset != 0 || m.msg_len != 8 || !m.first || !m.last {
        out.push(Finding::new(
            "MR-MPH-13",
            format!(
                "MP atomic with offset {}, message length {}, F {}, L {}: needs 0, 8, set, set",
                m.offset,
                m.msg_len,
                flag(m.first),
                flag(m.last)
            ),
        ));
    }
}

/// MR-MPF-4: a probe has MPETH flags 0, MSN 0, offset 0, length 0, no
/// payload and PadCnt 0 (AckReq: MR-MPH-9).
fn probe(p: &Packet<'_, '_>, m: &MpethRepr, out: &mut Vec<Finding>) {
    let mut wrong = |what: String| out.push(Finding::new("MR-MPF-4", format!("MP Probe {what}")));
    if m.first || m.last || m.retransmission {
        wrong(format!(
            "with flags F {} L {} R {}: all must be clear",
            flag(m.first),
            flag(m.last),
            flag(m.retransmission)
        ));
    }
    if m.msn.value() != 0 || m.offset != 0 || m.msg_len != 0 {
        wrong(format!(
            "with MSN {}, offset {}, length {}: all must be 0",
            m.msn.value(),
            m.offset,
            m.msg_len
        ));
    }
    let extra = p.payload_len;
    if extra != 0 {
        wrong(format!("carries {extra} payload bytes"));
    }
    if p.roce.bth.pad_count != 0 {
        wrong(format!("with PadCnt {}", p.roce.bth.pad_count));
    }
}

/// MP ACK and MP Atomic Acknowledge: MR-MPH-6 (AckReq, SE, PadCnt 0),
/// MR-MPA-8 (acknowledging syndrome 0x1F), MR-MPL-9 (no NAK code 0),
/// MR-MPT-5 (a NAK 0x65 has T set) and MR-MPP-13 (an atomic
/// acknowledgement acknowledges, bitmap bit 0 set).
fn acknowledgement(p: &Packet<'_, '_>, sack: &SackethRepr, out: &mut Vec<Finding>) {
    let bth = &p.roce.bth;
    for (wrong, what) in [
        (bth.ack_req, "AckReq set".to_string()),
        (bth.se, "SE set".to_string()),
        (bth.pad_count != 0, format!("PadCnt {}", bth.pad_count)),
    ] {
        if wrong {
            out.push(Finding::new("MR-MPH-6", format!("{} with {what}", p.op)));
        }
    }
    let syndrome = sack.syndrome;
    if syndrome.0 >= 0x80 || matches!(syndrome.kind(), SyndromeKind::Reserved { .. }) {
        return; // a reserved syndrome breaks MR-EXT-1 (ext.rs)
    }
    match syndrome.kind() {
        SyndromeKind::Ack { credit_code } if credit_code != 0x1F => {
            out.push(Finding::new(
                "MR-MPA-8",
                format!(
                    "{} with ACK syndrome 0x{:02x}: MP acknowledges with 0x1F",
                    p.op, syndrome.0
                ),
            ));
        }
        SyndromeKind::Nak { code: 0 } => {
            out.push(Finding::new(
                "MR-MPL-9",
                format!("{} with NAK code 0 (syndrome 0x60)", p.op),
            ));
        }
        _ => {}
    }
    if syndrome.0 == 0x65 && !sack.trimmed {
        out.push(Finding::new(
            "MR-MPT-5",
            format!("{} with NAK 0x65 (packet trimmed) but T clear", p.op),
        ));
    }
    if p.op == Opcode::MP_ATOMIC_ACK {
        if !matches!(syndrome.kind(), SyndromeKind::Ack { .. }) {
            out.push(Finding::new(
                "MR-MPP-13",
                format!(
                    "MP Atomic Acknowledge with syndrome 0x{:02x}, not an ACK syndrome",
                    syndrome.0
                ),
            ));
        }
        if sack.sack_bitmap >> 63 == 0 {
            out.push(Finding::new(
                "MR-MPP-13",
                "MP Atomic Acknowledge with SACK bitmap bit 0 clear: the request PSN is received",
            ));
        }
    }
}

fn flag(value: bool) -> &'static str {
    if value { "set" } else { "clear" }
}
