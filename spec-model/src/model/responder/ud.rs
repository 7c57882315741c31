//! The receive side of a UD QP (SPEC.md §6.20): Q_Key, length, receive work
//! request; never an acknowledgement or NAK, never a PSN check (MR-UD-3).

use super::{Branch, ResponderState};
use crate::model::{CompletionSpec, Effect, Field, Knowledge, Outcomes, WcStatus};
use metaroce_codec::RocePacket;

/// Bytes left at the start of a UD receive buffer for the network header (MR-UD-6).
pub const UD_HEADER_SPACE: u32 = 40;

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

/// A UD packet that passed the checks before sequencing.
pub(crate) fn receive(st: &ResponderState, pkt: &RocePacket<'_>) -> Vec<Branch> {
    let Some(deth) = pkt.ext.deth else {
        return vec![drop(st, &["MR-ROB-1"], Some("malformed_drops"))];
    };
    if st.attrs.q_key.get().is_some_and(|q| q != deth.qkey) {
        return vec![drop(st, &["MR-UD-2"], Some("qkey_violations"))];
    }
    let len = u32::try_from(pkt.payload.len()).unwrap_or(u32::MAX);
    if len > st.attrs.pmtu {
        return vec![drop(st, &["MR-UD-9"], Some("malformed_drops"))];
    }
    // "MR-UD-3": the PSN is neither checked nor answered; it is only recorded.
    let mut next = st.clone();
    next.epsn = pkt.bth.psn.add(1);
    let Knowledge::Known(queue) = &st.recv_queue else {
        // Delivered or dropped: neither is visible on the wire.
        return vec![Branch {
            state: next,
            outcomes: Outcomes::none(),
        }];
    };
    let Some(&wr) = queue.front() else {
        return vec![drop(st, &["MR-UD-7"], None)];
    };
    if let Some(q) = next.recv_queue.known_mut() {
        q.pop_front();
    }
    let completion = |status, byte_len| {
        Effect::Complete(CompletionSpec {
            wr: wr.id,
            status: Field::Exact(status),
            byte_len,
            imm: Field::Exact(pkt.ext.immdt.map(|i| i.value)),
        })
    };
    let need = len.saturating_add(UD_HEADER_SPACE);
    if wr.capacity < need {
        // "MR-UD-8": drop without consuming the WR, or complete it with LOC_LEN_ERR.
        return vec![
            drop(st, &["MR-UD-8"], None),
            Branch {
                state: next,
                outcomes: Outcomes::none()
                    .require(&["MR-UD-8"], completion(WcStatus::LocLenErr, Field::Any)),
            },
        ];
    }
    vec![Branch {
        state: next,
        outcomes: Outcomes::none().require(
            &["MR-UD-6", "MR-EXT-4"],
            completion(WcStatus::Success, Field::Exact(need)),
        ),
    }]
}
