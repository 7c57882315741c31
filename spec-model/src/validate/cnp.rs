//! The CNP (SPEC.md §4.2 "CNP payload", §6.17): MR-CNP-3.

use super::Packet;
use crate::Finding;
use metaroce_codec::Opcode;

/// MR-CNP-3: SE, PadCnt, TVer, FECN and AckReq 0 (M either value, v1.1); BECN 1; PSN 0; 16 zero
/// bytes after BTH and nothing else before the ICRC. (P_Key: MR-BTH-4; ICRC:
/// MR-ICRC-1; port: MR-ENC-11.)
pub(super) fn check(p: &Packet<'_, '_>, out: &mut Vec<Finding>) {
    if p.op != Opcode::CNP {
        return;
    }
    let bth = &p.roce.bth;
    let mut wrong = |what: String| out.push(Finding::new("MR-CNP-3", format!("CNP {what}")));
    if !bth.becn {
        wrong("without BECN".to_string());
    }
    for (set, name) in [(bth.se, "SE"), (bth.fecn, "FECN"), (bth.ack_req, "AckReq")] {
        if set {
            wrong(format!("with {name} set"));
        }
    }
    if bth.tver != 0 {
        wrong(format!("with TVer {}", bth.tver));
    }
    if bth.pad_count != 0 {
        wrong(format!("with PadCnt {}", bth.pad_count));
    }
    if bth.psn.value() != 0 {
        wrong(format!("with PSN {} instead of 0", bth.psn.value()));
    }
    if let Some(cnp) = p.roce.ext.cnp
        && cnp.reserved.iter().any(|&b| b != 0)
    {
        wrong(format!("reserved bytes {:02x?} are not zero", cnp.reserved));
    }
    let extra = p.payload_len;
    if extra != 0 {
        wrong(format!("carries {extra} bytes after its 16 reserved bytes"));
    }
}
