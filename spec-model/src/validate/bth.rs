//! Base Transport Header (SPEC.md §4.1): reserved bits, congestion bits,
//! P_Key and the solicited-event bit.

use super::{Context, Packet};
use crate::Finding;
use metaroce_codec::{Opcode, ServiceClass};

/// MR-BTH-2, MR-BTH-4, MR-BTH-7 and MR-BTH-9. M (MigReq) is not judged:
/// either value is allowed (SPEC.md §4.1, v1.1).
pub(super) fn check(p: &Packet<'_, '_>, ctx: &Context, out: &mut Vec<Finding>) {
    let bth = &p.roce.bth;
    let cnp = p.op == Opcode::CNP;
    // TVer and FECN of a CNP are judged against MR-CNP-3 (cnp.rs).
    if !cnp {
        if bth.tver != 0 {
            out.push(Finding::new(
                "MR-BTH-2",
                format!("TVer {} instead of 0", bth.tver),
            ));
        }
        if bth.fecn {
            out.push(Finding::new("MR-BTH-9", "FECN set; should be 0"));
        }
        if bth.becn {
            out.push(Finding::new("MR-BTH-9", "BECN set outside a CNP"));
        }
    }
    if bth.resv6a != 0 {
        out.push(Finding::new(
            "MR-BTH-9",
            format!("Resv6a 0x{:02x} instead of 0", bth.resv6a),
        ));
    }
    if bth.resv7 != 0 {
        out.push(Finding::new(
            "MR-BTH-9",
            format!("Resv7 0x{:02x} instead of 0", bth.resv7),
        ));
    }
    pkey(bth.pkey, ctx, out);
    if bth.se && se_allowed(p) == Some(false) {
        out.push(Finding::new(
            "MR-BTH-7",
            format!(
                "SE set in {}, which is not the last or only packet of a SEND or WRITE with Immediate",
                p.op
            ),
        ));
    }
}

/// MR-BTH-4: the QP's P_Key, which is never 0x0000 or 0x8000 (low 15 bits
/// zero: invalid, §4.1, §10.1).
fn pkey(value: u16, ctx: &Context, out: &mut Vec<Finding>) {
    if value & 0x7FFF == 0 {
        out.push(Finding::new(
            "MR-BTH-4",
            format!("P_Key 0x{value:04x} is invalid (its low 15 bits are 0), no QP's P_Key"),
        ));
    } else if let Some(expected) = ctx.pkey
        && value != expected
    {
        out.push(Finding::new(
            "MR-BTH-4",
            format!("P_Key 0x{value:04x} but the QP's P_Key is 0x{expected:04x}"),
        ));
    }
}

/// Whether this request may carry SE (MR-BTH-7); `None` where another
/// requirement judges SE (responses: MR-ACK-6, MR-MPH-6; CNP: MR-CNP-3) or
/// the opcode is not a MetaRoCE one.
fn se_allowed(p: &Packet<'_, '_>) -> Option<bool> {
    p.layout?;
    let op = p.op;
    match op.class() {
        ServiceClass::Rc | ServiceClass::Uc => match op.operation() {
            o if Opcode(o).is_rc_response() => None,
            0x02..=0x05 | 0x09 | 0x0B | 0x16 | 0x17 => Some(true),
            _ => Some(false),
        },
        ServiceClass::Ud => Some(true),
        ServiceClass::Vendor => match op {
            Opcode::MP_ACK | Opcode::MP_ATOMIC_ACK => None,
            Opcode::MP_SEND | Opcode::MP_SEND_IMM | Opcode::MP_SEND_INV | Opcode::MP_WRITE_IMM => {
                Some(p.roce.ext.mpeth.is_some_and(|m| m.last))
            }
            _ => Some(false),
        },
        ServiceClass::Cnp | ServiceClass::Rd | ServiceClass::Xrc => None,
    }
}
