//! ICRC (SPEC.md §5): present, right, least-significant byte first.

use super::Packet;
use crate::Finding;
use metaroce_codec::IcrcStatus;

/// MR-ICRC-1 and MR-ICRC-2. A trimmed MP packet carries no valid ICRC by
/// design (§7.10) and is not judged.
pub(super) fn check(p: &Packet<'_, '_>, out: &mut Vec<Finding>) {
    if p.trimmed {
        return;
    }
    if let IcrcStatus::Invalid { expected, found } = p.icrc {
        if found.swap_bytes() == expected {
            out.push(Finding::new(
                "MR-ICRC-2",
                format!(
                    "ICRC 0x{expected:08x} sent most-significant byte first (trailer {:02x?})",
                    p.roce.icrc
                ),
            ));
        } else {
            out.push(Finding::new(
                "MR-ICRC-1",
                format!("ICRC trailer holds 0x{found:08x} but the packet needs 0x{expected:08x}"),
            ));
        }
    }
}
