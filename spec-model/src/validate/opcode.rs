//! Opcodes (SPEC.md §4.3, §7.2): reserved, unused and MP opcodes.

use super::Packet;
use crate::Finding;
use metaroce_codec::ServiceClass;

/// MR-OPC-5 and MR-OPC-6. Returns whether the packet is a MetaRoCE opcode
/// with a known layout, so that its headers and payload can be judged.
pub(super) fn check(p: &Packet<'_, '_>, out: &mut Vec<Finding>) -> bool {
    let op = p.op;
    let class = op.class();
    if matches!(class, ServiceClass::Rd | ServiceClass::Xrc) {
        // RD and XRC are "parsed, not supported": not reserved, and no
        // capability declares them, so SPEC.md gives no sender rule. Noted.
        out.push(Finding::info(
            "MR-OPC-5",
            format!(
                "opcode 0x{:02x} is of the {} class, which MetaRoCE v1 does not support",
                op.0,
                if class == ServiceClass::Rd {
                    "RD"
                } else {
                    "XRC"
                }
            ),
        ));
        return false;
    }
    if p.layout.is_some() {
        return true;
    }
    match op.0 {
        _ if op.is_mp() => out.push(Finding::new(
            "MR-OPC-6",
            format!(
                "MP opcode 0x{:02x} from an implementation checked as Base (no MP QP)",
                op.0
            ),
        )),
        _ if op.is_mp_reserved() => out.push(Finding::new(
            "MR-OPC-5",
            format!("opcode 0x{:02x} is reserved for MP", op.0),
        )),
        _ if class == ServiceClass::Vendor => out.push(Finding::new(
            "MR-OPC-5",
            format!("opcode 0x{:02x} is not used by MetaRoCE v1", op.0),
        )),
        _ => out.push(Finding::new(
            "MR-OPC-5",
            format!("opcode 0x{:02x} is reserved", op.0),
        )),
    }
    false
}
