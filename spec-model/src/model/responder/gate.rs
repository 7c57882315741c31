//! Checks made before sequencing, in the order of SPEC.md §9.2: TVer, opcode
//! class, reserved opcodes, declared features, QP state, P_Key, PadCnt.

use super::op::{Op, op_of};
use super::{Branch, ResponderState};
use crate::model::qp::{self, Packets, QpType};
use crate::model::{Effect, Outcomes};
use metaroce_codec::{Opcode, RocePacket, ServiceClass};

const MALFORMED: Option<&str> = Some("malformed_drops");

fn drop(
    st: &ResponderState,
    reqs: &'static [&'static str],
    counter: Option<&'static str>,
) -> Branch {
    Branch {
        state: st.clone(),
        outcomes: Outcomes::none().require(reqs, Effect::Drop { counter }),
    }
}

/// The outcome of a packet that does not pass the checks before sequencing,
/// or `None` when it goes on to the transport's rules.
pub(crate) fn check(st: &ResponderState, pkt: &RocePacket<'_>) -> Option<Branch> {
    let opcode = pkt.bth.opcode;
    if pkt.bth.tver != 0 {
        return Some(drop(st, &["MR-BTH-1"], MALFORMED));
    }
    let class_matches = match (opcode.class(), st.qp_type) {
        (ServiceClass::Rc, QpType::Rc)
        | (ServiceClass::Uc, QpType::Uc)
        | (ServiceClass::Ud, QpType::Ud) => true,
        (ServiceClass::Rd | ServiceClass::Xrc, _) => {
            return Some(drop(st, &["MR-OPC-4"], MALFORMED));
        }
        (ServiceClass::Vendor, _) if opcode.0 >= 0xE0 => {
            return Some(drop(st, &["MR-OPC-4"], MALFORMED));
        }
        // A CNP is the reaction point's: the responder neither answers it nor
        // changes any state for it.
        (ServiceClass::Cnp, _) if opcode == Opcode::CNP => {
            return Some(Branch {
                state: st.clone(), // "MR-CNP-5"
                outcomes: Outcomes::none(),
            });
        }
        (ServiceClass::Cnp, _) => return Some(drop(st, &["MR-OPC-4"], MALFORMED)),
        _ => false,
    };
    if !class_matches {
        // Includes MP opcodes on a Base QP.
        return Some(drop(st, &["MR-OPC-3"], MALFORMED));
    }
    let op = op_of(opcode);
    if op == Op::Reserved {
        return Some(match st.qp_type {
            QpType::Rc => drop(st, &["MR-OPC-2"], MALFORMED),
            QpType::Ud => drop(st, &["MR-OPC-4", "MR-OPC-3"], MALFORMED),
            // SPEC.md names no requirement for reserved UC opcodes; §9.1 asks for
            // a defined outcome, and drop is the only one consistent with §9.2.
            QpType::Uc => drop(st, &["MR-ROB-5"], MALFORMED),
        });
    }
    if op.feature_absent(&st.features) {
        return Some(drop(st, &["MR-PICS-3"], MALFORMED));
    }
    let behaviour = qp::behaviour(st.qp_state);
    if op == Op::Response {
        return Some(match behaviour.responses {
            // "MR-QP-3", "MR-QP-4", "MR-QP-5" (through the behaviour table).
            Packets::Dropped => drop(st, behaviour.reqs, MALFORMED),
            // Processed by the requester (completer), not by the responder.
            Packets::Processed | Packets::NotApplicable => Branch {
                state: st.clone(),
                outcomes: Outcomes::none(),
            },
        });
    }
    if behaviour.requests != Packets::Processed {
        return Some(drop(st, behaviour.reqs, MALFORMED));
    }
    if !metaroce_codec::bth::pkey_matches(pkt.bth.pkey, st.attrs.p_key) {
        return Some(drop(st, &["MR-BTH-5"], Some("pkey_violations")));
    }
    if !op.has_payload() && (pkt.bth.pad_count != 0 || !pkt.payload.is_empty()) {
        return Some(drop(st, &["MR-ROB-4"], MALFORMED));
    }
    None
}
