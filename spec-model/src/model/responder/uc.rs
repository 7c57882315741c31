//! The receive side of a UC QP (SPEC.md §6.21): the RC message rules without
//! acknowledgements; a PSN gap resynchronises on a First or Only packet; every
//! failure drops the message silently and keeps the QP as it is.

use super::op::op_of;
use super::{Branch, Eval, ResponderState, message};
use crate::model::{Effect, Knowledge, Outcomes};
use metaroce_codec::RocePacket;

/// A UC packet that passed the checks before sequencing.
pub(crate) fn receive(st: &ResponderState, pkt: &RocePacket<'_>) -> Vec<Branch> {
    let op = op_of(pkt.bth.opcode);
    let starts = match op {
        super::op::Op::Send { pos, .. } | super::op::Op::Write { pos, .. } => pos.starts(),
        _ => false,
    };
    let psn = pkt.bth.psn;
    let mut base = st.clone();
    if psn != st.epsn {
        if !starts {
            // "MR-UC-2": a Middle or Last out of sequence is dropped with the
            // rest of its message.
            base.in_progress = Knowledge::Known(None);
            return vec![Branch {
                state: base,
                outcomes: Outcomes::none().require(&["MR-UC-2"], Effect::Drop { counter: None }),
            }];
        }
        // "MR-UC-2": a First or Only resynchronises the expected PSN.
        base.epsn = psn;
        base.in_progress = Knowledge::Known(None);
    }
    // "MR-UC-3": a failed check drops the message silently; the QP stays as it is.
    let dropped = {
        let mut s = base.clone();
        s.epsn = psn.add(1);
        s.in_progress = Knowledge::Known(None);
        Branch {
            state: s,
            outcomes: Outcomes::none().require(&["MR-UC-3"], Effect::Drop { counter: None }),
        }
    };
    let mut eval = Eval::default();
    let mut all = Vec::with_capacity(2);
    let primary = message::sequence(&base, op, &mut eval)
        .and_then(|current| message::message(&base, pkt, op, current, &mut eval, false, &mut all));
    // "MR-UC-1": no acknowledgement either way.
    if primary.is_err() {
        all.push(dropped.clone());
    }
    if !eval.maybe.is_empty() && !all.contains(&dropped) {
        all.push(dropped);
    }
    all
}
