//! Extension headers (SPEC.md §4.2, §7.2): reserved fields and the AETH
//! syndrome a Base responder may send.

use super::Packet;
use crate::Finding;
use metaroce_codec::Opcode;
use metaroce_codec::ext::{Syndrome, SyndromeKind};

/// FETH placement-type bits that are reserved (bits 28–29).
const FETH_PLT_RESERVED: u8 = 0b1100;

/// MR-EXT-1 (reserved fields are zero) and the AETH syndrome rules
/// MR-NAK-4, MR-READ-3 and MR-ATOM-4. The 16 CNP bytes are judged in cnp.rs.
pub(super) fn check(p: &Packet<'_, '_>, out: &mut Vec<Finding>) {
    let ext = &p.roce.ext;
    if let Some(deth) = ext.deth
        && deth.reserved != 0
    {
        out.push(reserved(format!("DETH byte 4 is 0x{:02x}", deth.reserved)));
    }
    if let Some(feth) = ext.feth {
        if feth.reserved != 0 {
            out.push(reserved(format!(
                "FETH bits 0–25 are 0x{:07x}",
                feth.reserved
            )));
        }
        if feth.selectivity_level > 1 {
            out.push(reserved(format!(
                "FETH selectivity level {} is reserved",
                feth.selectivity_level
            )));
        }
        if feth.placement_type & FETH_PLT_RESERVED != 0 {
            out.push(reserved(format!(
                "FETH placement type 0x{:x} has reserved bits set",
                feth.placement_type
            )));
        }
    }
    if let Some(mpeth) = ext.mpeth
        && mpeth.reserved != 0
    {
        out.push(reserved(format!(
            "MPETH reserved flag bits are 0x{:02x}",
            mpeth.reserved
        )));
    }
    if let Some(sack) = ext.sacketh {
        if sack.reserved_flags != 0 {
            out.push(reserved(format!(
                "SACKETH reserved flag bits are 0x{:02x}",
                sack.reserved_flags
            )));
        }
        if sack.reserved != 0 {
            out.push(reserved(format!(
                "SACKETH bytes 18–19 are 0x{:04x}",
                sack.reserved
            )));
        }
        reserved_syndrome("SACKETH", sack.syndrome, out);
    }
    if let Some(aeth) = ext.aeth
        && !reserved_syndrome("AETH", aeth.syndrome, out)
    {
        aeth_syndrome(p.op, aeth.syndrome, out);
    }
}

fn reserved(what: String) -> Finding {
    Finding::new("MR-EXT-1", format!("{what}; reserved fields are sent as 0"))
}

/// A syndrome with bit 0 set (0x80–0xFF) or of the reserved kind (0x40–0x5F)
/// sets reserved bits of AETH or SACKETH (MR-EXT-1). Returns whether it did.
fn reserved_syndrome(header: &str, syndrome: Syndrome, out: &mut Vec<Finding>) -> bool {
    let is_reserved =
        syndrome.0 & 0x80 != 0 || matches!(syndrome.kind(), SyndromeKind::Reserved { .. });
    if is_reserved {
        out.push(reserved(format!(
            "{header} syndrome 0x{:02x} is reserved",
            syndrome.0
        )));
    }
    is_reserved
}

/// What a Base responder may put in the AETH of each response.
fn aeth_syndrome(op: Opcode, syndrome: Syndrome, out: &mut Vec<Finding>) {
    let is_ack = matches!(syndrome.kind(), SyndromeKind::Ack { .. });
    match op {
        Opcode::RC_ACK => {
            if let SyndromeKind::Nak { code: 4..=31 } = syndrome.kind() {
                out.push(Finding::new(
                    "MR-NAK-4",
                    format!(
                        "NAK syndrome 0x{:02x} (code {}): Base sends NAK codes 0–3 only",
                        syndrome.0,
                        syndrome.0 & 0x1F
                    ),
                ));
            }
        }
        Opcode::RC_READ_RESPONSE_FIRST
        | Opcode::RC_READ_RESPONSE_LAST
        | Opcode::RC_READ_RESPONSE_ONLY
            if !is_ack =>
        {
            out.push(Finding::new(
                "MR-READ-3",
                format!(
                    "{op} with AETH syndrome 0x{:02x}, not an ACK syndrome (0x00–0x1F)",
                    syndrome.0
                ),
            ));
        }
        Opcode::RC_ATOMIC_ACK if !is_ack => {
            out.push(Finding::new(
                "MR-ATOM-4",
                format!(
                    "Atomic Acknowledge with AETH syndrome 0x{:02x}, not an ACK syndrome (0x00–0x1F)",
                    syndrome.0
                ),
            ));
        }
        _ => {}
    }
}
