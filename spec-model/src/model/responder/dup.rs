//! Duplicate requests (SPEC.md §6.9): re-ACK, READ re-execution, atomic,
//! FLUSH and ATOMIC WRITE replay from the responder resources, or drop.

use super::message::access;
use super::op::{Op, op_of};
use super::{AccessFlags, Branch, Resource, ResourceKind, ResponderState, ack, memory, nak};
use crate::model::{Effect, Knowledge, Outcomes};
use metaroce_codec::{Psn, RocePacket};

fn same(st: &ResponderState, outcomes: Outcomes) -> Branch {
    Branch {
        state: st.clone(), // "MR-DUP-1": nothing changes
        outcomes,
    }
}

fn dropped(st: &ResponderState) -> Branch {
    same(
        st,
        Outcomes::none().require(
            &["MR-DUP-6"],
            Effect::Drop {
                counter: Some("duplicate_requests"),
            },
        ),
    )
}

/// Branches for a kept slot: replay when it is kept, drop when evicted, both
/// when the ring's capacity is unknown.
fn kept_or_dropped(st: &ResponderState, kept: Knowledge<bool>, replay: Vec<Branch>) -> Vec<Branch> {
    match kept {
        Knowledge::Known(true) => replay,
        Knowledge::Known(false) => vec![dropped(st)],
        Knowledge::Unknown => {
            let mut all = replay;
            all.push(dropped(st));
            all
        }
    }
}

/// A duplicate request (PSN before the expected PSN).
pub(crate) fn duplicate(st: &ResponderState, pkt: &RocePacket<'_>) -> Vec<Branch> {
    let psn = pkt.bth.psn;
    // A request the observer of a capture never saw: its slot is unknown.
    let unseen = st.observed_from.is_some_and(|first| psn.is_before(first));
    let kind = match op_of(pkt.bth.opcode) {
        Op::Send { .. } | Op::Write { .. } => {
            // "MR-DUP-1", "MR-DUP-2": re-ACK with ePSN − 1 and the current MSN.
            let a = ack::ack(st, st.epsn.sub(1));
            let outcomes = if pkt.bth.ack_req {
                Outcomes::none().require(&["MR-DUP-2"], Effect::Send(a))
            } else {
                Outcomes::none().allow(&["MR-ACK-5"], Effect::Send(a))
            };
            return vec![same(st, outcomes)];
        }
        Op::Read => return read(st, pkt, unseen),
        Op::CompareSwap => ResourceKind::CompareSwap,
        Op::FetchAdd => ResourceKind::FetchAdd,
        Op::Flush => ResourceKind::Flush,
        Op::AtomicWrite => ResourceKind::AtomicWrite,
        Op::Response | Op::Reserved => return vec![dropped(st)],
    };
    let replay = |orig: Knowledge<u64>| -> Branch {
        let outcomes = match kind {
            // "MR-DUP-5": the kept original value, not executed again.
            ResourceKind::CompareSwap | ResourceKind::FetchAdd => Outcomes::none()
                .require(&["MR-DUP-5"], Effect::Send(ack::atomic_ack(st, psn, orig))),
            // "MR-DUP-7": the same empty READ Response Only, no write.
            _ => Outcomes::none().require(
                &["MR-DUP-7"],
                Effect::Send(ack::empty_read_response(st, psn)),
            ),
        };
        same(st, outcomes)
    };
    match st.resources.find(st.attrs.max_dest_rd_atomic, |r| {
        r.kind == kind && r.psn == psn
    }) {
        Some((slot, kept)) => kept_or_dropped(st, kept, vec![replay(slot.atomic_orig)]),
        None if unseen => vec![replay(Knowledge::Unknown), dropped(st)],
        None => vec![dropped(st)], // "MR-DUP-6"
    }
}

/// How a duplicate READ at `psn` for `[va, va + len)` under `rkey` relates
/// to the kept READ `slot` (§6.9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fit {
    /// The re-request of the rest from `psn` (MR-DUP-4).
    ReRequest,
    /// Longer than what remains of the kept READ from `psn` (MR-DUP-6: drop).
    TooLong,
    /// Inside, but another VA or R_Key or a shorter length (MR-DUP-6: drop
    /// or answer).
    Other,
}

fn fit(slot: &Resource, psn: Psn, va: u64, rkey: u32, len: u32, pmtu: u32) -> Fit {
    let offset = u64::from(psn.distance(slot.psn)) * u64::from(pmtu);
    let rest = u64::from(slot.len).saturating_sub(offset);
    if u64::from(len) > rest {
        Fit::TooLong
    } else if rkey == slot.rkey
        && u128::from(va) == u128::from(slot.va) + u128::from(offset)
        && u64::from(len) == rest
    {
        Fit::ReRequest
    } else {
        Fit::Other
    }
}

/// A duplicate READ: re-executed from its PSN when it is the re-request of
/// a kept READ (MR-DUP-4), dropped when it lies outside every kept READ or
/// asks for more than the rest (MR-DUP-6), dropped or answered otherwise.
fn read(st: &ResponderState, pkt: &RocePacket<'_>, unseen: bool) -> Vec<Branch> {
    let Some(reth) = pkt.ext.reth else {
        return vec![dropped(st)];
    };
    let psn = pkt.bth.psn;
    // Answered as a new READ of its own VA, R_Key and length from `psn`; a
    // key that no longer grants the range of a re-request is NAKed 0x62
    // (rxe) or the request dropped (hfi1), MR-DUP-4; for another duplicate
    // (`rerequest` false) it is dropped, MR-DUP-6.
    let reexecute = |rerequest: bool| -> Vec<Branch> {
        let responses = ack::read_responses(st, psn, reth.va, reth.rkey, reth.dma_len);
        let mut outcomes = Outcomes::none();
        for r in responses {
            outcomes = outcomes.require(&["MR-DUP-4", "MR-READ-2", "MR-READ-6"], Effect::Send(r));
        }
        let ok = same(st, outcomes);
        if reth.dma_len == 0 {
            return vec![ok]; // "MR-RSP-7"
        }
        // "MR-DUP-4": the R_Key is validated again.
        let verdict = memory::check_key(
            &st.memory,
            st.attrs.pd,
            reth.rkey,
            reth.va,
            u64::from(reth.dma_len),
            AccessFlags::READ,
            true,
        );
        let mut bad = vec![dropped(st)];
        if rerequest {
            bad.insert(0, nak::rc_fail(st, pkt, access(&["MR-DUP-4", "MR-RSP-6"])));
        }
        match verdict {
            Knowledge::Known(Ok(_)) => vec![ok],
            Knowledge::Known(Err(_)) => bad,
            Knowledge::Unknown => std::iter::once(ok).chain(bad).collect(),
        }
    };
    let pmtu = st.attrs.pmtu.max(1);
    let found = st.resources.find(st.attrs.max_dest_rd_atomic, |r| {
        r.kind == ResourceKind::Read && r.contains(psn)
    });
    match found {
        Some((slot, kept)) => match fit(slot, psn, reth.va, reth.rkey, reth.dma_len, pmtu) {
            Fit::ReRequest => kept_or_dropped(st, kept, reexecute(true)),
            Fit::TooLong => vec![dropped(st)], // "MR-DUP-6"
            // "MR-DUP-6": another VA or R_Key, or shorter: drop or answer.
            Fit::Other => kept_or_dropped(st, Knowledge::Unknown, reexecute(false)),
        },
        None if unseen => {
            let mut all = reexecute(true);
            all.push(dropped(st));
            all
        }
        None => vec![dropped(st)], // "MR-DUP-6": evicted or never accepted
    }
}
