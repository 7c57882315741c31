//! The bits a receiver ignores (row 22 of SPEC.md §9.2).
//!
//! [`canonical`] clears them before a packet reaches its QP, so a packet that
//! differs from a valid one only there reaches the QP models as exactly the
//! same value and is processed exactly as the valid one.

use metaroce_codec::{Opcode, RocePacket};

/// The packet with every field the receiver must ignore set to zero:
/// - BTH M, Resv6a, Resv7 and FECN, and BECN outside CNPs ("MR-BTH-3");
/// - the reserved fields of extension headers: DETH byte 4, the reserved
///   bits 0–25 of FETH, the 16 bytes of a CNP, the reserved byte of RDETH and
///   XRCETH ("MR-EXT-2"). The FETH selectivity level and placement type are
///   not reserved fields: their reserved values are judged (MR-FLUSH-1);
/// - the reserved bits of MPETH byte 0 and of SACKETH byte 4 and bytes 18–19
///   ("MR-MPH-7").
pub fn canonical<'a>(packet: &RocePacket<'a>) -> RocePacket<'a> {
    let mut p = *packet;
    p.bth.migreq = false;
    p.bth.resv6a = 0;
    p.bth.resv7 = 0;
    p.bth.fecn = false;
    if p.bth.opcode != Opcode::CNP {
        p.bth.becn = false;
    }
    if let Some(deth) = &mut p.ext.deth {
        deth.reserved = 0;
    }
    if let Some(feth) = &mut p.ext.feth {
        feth.reserved = 0;
    }
    if let Some(cnp) = &mut p.ext.cnp {
        cnp.reserved = [0; 16];
    }
    if let Some(rdeth) = &mut p.ext.rdeth {
        rdeth.reserved = 0;
    }
    if let Some(xrceth) = &mut p.ext.xrceth {
        xrceth.reserved = 0;
    }
    if let Some(mpeth) = &mut p.ext.mpeth {
        mpeth.reserved = 0;
    }
    if let Some(sacketh) = &mut p.ext.sacketh {
        sacketh.reserved_flags = 0;
        sacketh.reserved = 0;
    }
    p
}
