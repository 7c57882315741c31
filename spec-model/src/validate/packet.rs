//! Packetization as one packet shows it (SPEC.md §4.3 table, §6.5, §6.19,
//! §6.20, §6.21): pad, payload length by position, RETH length, AckReq and
//! the SE and AckReq bits of Base responses.

use super::{Context, PMTU_VALUES, Packet};
use crate::Finding;
use metaroce_codec::bth::GSI_QPN;
use metaroce_codec::opcode::{PayloadRule, Position};
use metaroce_codec::{Opcode, ServiceClass};

/// The largest RETH DMA length (MR-EXT-5).
const MAX_DMA_LEN: u32 = 1 << 31;

/// Pad, lengths, RETH and AckReq checks of a packet with a known layout.
pub(super) fn check(p: &Packet<'_, '_>, ctx: &Context, out: &mut Vec<Finding>) {
    let Some(layout) = p.layout else {
        return;
    };
    if !p.trimmed {
        pad(p, layout.payload, out);
        if layout.payload == PayloadRule::Data {
            length(p, layout.position, ctx, out);
        }
    }
    reth(p, out);
    ack_req(p, out);
}

/// MR-PKT-4 (PadCnt and zero pad bytes) and MR-PKT-5 (no pad without payload).
fn pad(p: &Packet<'_, '_>, rule: PayloadRule, out: &mut Vec<Finding>) {
    let bth = &p.roce.bth;
    match rule {
        PayloadRule::Data => {
            let len = p.payload_len;
            let need = (4 - len % 4) % 4;
            if usize::from(bth.pad_count) != need {
                out.push(Finding::new(
                    "MR-PKT-4",
                    format!(
                        "PadCnt {} but payload {len} bytes needs {need}",
                        bth.pad_count
                    ),
                ));
            }
            if p.roce.pad.iter().any(|&b| b != 0) {
                out.push(Finding::new(
                    "MR-PKT-4",
                    format!("pad bytes {:02x?} are not zero", p.roce.pad),
                ));
            }
        }
        PayloadRule::None => {
            // The CNP (MR-CNP-3), MP ACKs (MR-MPH-6) and the MP Probe
            // (MR-MPF-4) have rules of their own for PadCnt.
            let own_rule = matches!(
                p.op,
                Opcode::CNP | Opcode::MP_ACK | Opcode::MP_ATOMIC_ACK | Opcode::MP_PROBE
            );
            if bth.pad_count != 0 && !own_rule {
                out.push(Finding::new(
                    "MR-PKT-5",
                    format!(
                        "PadCnt {} in {}, which carries no payload",
                        bth.pad_count, p.op
                    ),
                ));
            }
        }
    }
}

/// Payload length against the PMTU and the packet's place in its message.
fn length(p: &Packet<'_, '_>, position: Position, ctx: &Context, out: &mut Vec<Finding>) {
    let len = p.payload_len;
    let limit = ctx.payload_limit();
    if len > limit {
        let what = match ctx.pmtu {
            Some(_) => "the PMTU",
            None => "the largest PMTU",
        };
        out.push(Finding::new(
            "MR-ENC-23",
            format!("payload {len} bytes exceeds {what} ({limit})"),
        ));
        if p.op.class() == ServiceClass::Ud {
            out.push(Finding::new(
                "MR-UD-4",
                format!("UD message of {len} bytes is longer than the PMTU ({limit})"),
            ));
        }
    }
    if !matches!(p.op.class(), ServiceClass::Rc | ServiceClass::Uc) {
        return;
    }
    if p.op == Opcode::RC_ATOMIC_WRITE {
        if len != 8 {
            out.push(Finding::new(
                "MR-FLUSH-7",
                format!("ATOMIC WRITE carries {len} payload bytes instead of 8"),
            ));
        }
        return;
    }
    // READ responses are packetized by the responder (MR-READ-2), SEND and
    // WRITE by the requester (MR-PKT-1).
    let id = if Opcode(p.op.operation()).is_rc_read_response() {
        "MR-READ-2"
    } else {
        "MR-PKT-1"
    };
    match position {
        Position::First | Position::Middle => {
            let exact = match ctx.pmtu {
                Some(pmtu) => len == pmtu as usize,
                None => PMTU_VALUES.iter().any(|&v| v as usize == len),
            };
            if !exact {
                let need = match ctx.pmtu {
                    Some(pmtu) => format!("exactly the PMTU ({pmtu})"),
                    None => "exactly a PMTU (256, 512, 1024, 2048 or 4096)".to_string(),
                };
                out.push(Finding::new(
                    id,
                    format!("{} carries {len} payload bytes, not {need}", p.op),
                ));
            }
        }
        Position::Last if len == 0 => {
            out.push(Finding::new(
                id,
                format!(
                    "{} carries no payload; a Last packet carries 1..PMTU bytes",
                    p.op
                ),
            ));
        }
        _ => {}
    }
}

/// MR-EXT-5 (DMA length bound), MR-PKT-3 (DMA length is the message length,
/// as far as one packet shows it) and MR-FLUSH-7 (ATOMIC WRITE length 8).
fn reth(p: &Packet<'_, '_>, out: &mut Vec<Finding>) {
    let Some(reth) = p.roce.ext.reth else {
        return;
    };
    if reth.dma_len > MAX_DMA_LEN {
        out.push(Finding::new(
            "MR-EXT-5",
            format!("RETH DMA length {} exceeds 2^31", reth.dma_len),
        ));
    }
    if p.trimmed || !matches!(p.op.class(), ServiceClass::Rc | ServiceClass::Uc) {
        return;
    }
    let len = p.payload_len;
    let dma = reth.dma_len as usize;
    match p.op.operation() {
        // WRITE Only and Only with Immediate: the message is this payload.
        0x0A | 0x0B if dma != len => out.push(Finding::new(
            "MR-PKT-3",
            format!(
                "RETH DMA length {dma} but {} carries the whole message of {len} bytes",
                p.op
            ),
        )),
        // WRITE First: the message continues after this packet.
        0x06 if dma <= len => out.push(Finding::new(
            "MR-PKT-3",
            format!(
                "RETH DMA length {dma} but a WRITE First of {len} bytes starts a longer message"
            ),
        )),
        0x1D if p.op == Opcode::RC_ATOMIC_WRITE && dma != 8 => out.push(Finding::new(
            "MR-FLUSH-7",
            format!("ATOMIC WRITE with RETH DMA length {dma} instead of 8"),
        )),
        _ => {}
    }
}

/// AckReq rules of Base requests (MR-PKT-6, MR-UC-4, MR-UD-10) and the SE and
/// AckReq bits of Base responses (MR-ACK-6). A datagram for QP 1 is a
/// management datagram (SPEC.md §6.22, MR-CM-1), not UD data.
fn ack_req(p: &Packet<'_, '_>, out: &mut Vec<Finding>) {
    let bth = &p.roce.bth;
    match p.op.class() {
        ServiceClass::Rc => match p.op.operation() {
            0x02..=0x05 | 0x08..=0x0B | 0x13 | 0x14 | 0x16 | 0x17 | 0x1C | 0x1D if !bth.ack_req => {
                out.push(Finding::new("MR-PKT-6", format!("{} without AckReq", p.op)));
            }
            o if Opcode(o).is_rc_response() => {
                if bth.se {
                    out.push(Finding::new(
                        "MR-ACK-6",
                        format!("SE set in the response {}", p.op),
                    ));
                }
                if bth.ack_req {
                    out.push(Finding::new(
                        "MR-ACK-6",
                        format!("AckReq set in the response {}", p.op),
                    ));
                }
            }
            _ => {}
        },
        ServiceClass::Uc if bth.ack_req => {
            out.push(Finding::new("MR-UC-4", format!("AckReq set in {}", p.op)));
        }
        ServiceClass::Ud if bth.ack_req && bth.dest_qp != GSI_QPN => {
            out.push(Finding::new("MR-UD-10", format!("AckReq set in {}", p.op)));
        }
        _ => {}
    }
}
