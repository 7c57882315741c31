//! Sequence NAKs for ahead packets, and what a failed check of an
//! in-sequence RC packet produces: a fatal NAK and ERR, an RNR NAK, or a drop
//! (SPEC.md §6.6, §6.8, §6.11).

use super::{Branch, Fail, Message, NakState, ResponderState, ack};
use crate::model::qp::QpState;
use crate::model::{CompletionSpec, Effect, Field, Knowledge, Outcomes, WcStatus};
use metaroce_codec::RocePacket;
use metaroce_codec::ext::Syndrome;

/// A request ahead of the expected PSN: the first one NAKs 0x60 (MR-NAK-1),
/// later ones are dropped silently until an expected packet is executed
/// (MR-NAK-2), or, after an RNR NAK, until it arrives (MR-RNR-2). Nothing is
/// executed (MR-SEC-10).
pub(crate) fn ahead(st: &ResponderState, _pkt: &RocePacket<'_>) -> Branch {
    match st.nak {
        NakState::None => {
            let nak = ack::nak(st, st.epsn, Syndrome::NAK_PSN_SEQ); // "MR-NAK-1"
            Branch {
                state: ResponderState {
                    nak: NakState::Sequence,
                    ..st.clone()
                },
                outcomes: Outcomes::none().require(&["MR-NAK-1", "MR-SEC-10"], Effect::Send(nak)),
            }
        }
        NakState::Sequence => Branch {
            state: st.clone(),
            outcomes: Outcomes::none().require(&["MR-NAK-2"], Effect::Drop { counter: None }),
        },
        NakState::Rnr => Branch {
            state: st.clone(),
            outcomes: Outcomes::none().require(&["MR-RNR-2"], Effect::Drop { counter: None }),
        },
    }
}

/// The receive WR of the SEND in progress, if one holds a known one.
fn send_in_progress(st: &ResponderState) -> Option<u64> {
    match &st.in_progress {
        Knowledge::Known(Some(Message::Send {
            recv: Knowledge::Known(wr),
            ..
        })) => Some(wr.id),
        _ => None,
    }
}

/// The outcome of a failed check of an in-sequence RC packet.
pub(crate) fn rc_fail(st: &ResponderState, pkt: &RocePacket<'_>, fail: Fail) -> Branch {
    let psn = pkt.bth.psn;
    match fail {
        Fail::Nak { syndrome, reqs, wc } => {
            // "MR-NAK-3": PSN of the offending packet, current MSN; "MR-RSP-11": then ERR.
            let mut outcomes =
                Outcomes::none().require(reqs, Effect::Send(ack::nak(st, psn, syndrome)));
            let statuses = |s: &[WcStatus]| match s {
                [one] => Field::Exact(*one),
                many => Field::OneOf(many.to_vec()),
            };
            if let Some((wr, status)) = wc {
                outcomes = outcomes.require(
                    reqs,
                    Effect::Complete(CompletionSpec {
                        wr,
                        status: statuses(status),
                        byte_len: Field::Any,
                        imm: Field::Any,
                    }),
                );
            } else if let Some(wr) = send_in_progress(st) {
                // "MR-RSP-11": the receive WR a SEND in progress holds
                // completes in error: the NAK's status (rxe), the local one
                // (rdmavt) or a flush.
                let own = match syndrome {
                    Syndrome::NAK_REMOTE_ACCESS => WcStatus::RemAccessErr,
                    Syndrome::NAK_REMOTE_OP => WcStatus::RemOpErr,
                    _ => WcStatus::RemInvReqErr,
                };
                outcomes = outcomes.require(
                    &["MR-RSP-11"],
                    Effect::Complete(CompletionSpec {
                        wr,
                        status: Field::OneOf(vec![
                            own,
                            WcStatus::LocQpOpErr,
                            WcStatus::LocProtErr,
                            WcStatus::WrFlushErr,
                        ]),
                        byte_len: Field::Any,
                        imm: Field::Any,
                    }),
                );
            }
            outcomes = outcomes.require(&["MR-RSP-11"], Effect::EnterError);
            Branch {
                state: ResponderState {
                    qp_state: QpState::Err, // "MR-RSP-11"
                    ..st.clone()
                },
                outcomes,
            }
        }
        Fail::InvalidateFailed { wc } => {
            let nak = Fail::Nak {
                syndrome: Syndrome::NAK_INVALID_REQUEST,
                reqs: &["MR-RSP-10"],
                wc: wc.map(|wr| (wr, &[WcStatus::RemInvReqErr][..])),
            };
            let mut branch = rc_fail(st, pkt, nak);
            // rxe (`RESPST_ERR_INVALIDATE_RKEY`): a positive ACK with the
            // MSN before this message, then the same completion and ERR.
            let mut rxe = Outcomes::none().require(&["MR-RSP-10"], Effect::Send(ack::ack(st, psn)));
            if let Some(wr) = wc {
                rxe = rxe.require(
                    &["MR-RSP-10"],
                    Effect::Complete(CompletionSpec {
                        wr,
                        status: Field::Exact(WcStatus::RemInvReqErr),
                        byte_len: Field::Any,
                        imm: Field::Any,
                    }),
                );
            }
            branch.outcomes = branch
                .outcomes
                .or(rxe.require(&["MR-RSP-11"], Effect::EnterError));
            branch
        }
        Fail::Rnr => Branch {
            // "MR-RNR-1": drop, keep the expected PSN, RNR NAK with this PSN and the MSN.
            state: ResponderState {
                nak: NakState::Rnr,
                ..st.clone()
            },
            outcomes: Outcomes::none().require(&["MR-RNR-1"], Effect::Send(ack::rnr_nak(st, psn))),
        },
        Fail::Drop { reqs, counter } => Branch {
            state: st.clone(),
            outcomes: Outcomes::none().require(reqs, Effect::Drop { counter }),
        },
    }
}
