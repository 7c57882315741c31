//! RDMA-resource operations at the expected PSN: READ (§6.15), atomics
//! (§6.16), FLUSH and ATOMIC WRITE (§6.19).

use super::message::{MALFORMED, MAX_DMA_LEN, access, invalid};
use super::op::Op;
use super::{AccessFlags, Branch, Eval, Fail, NakState, Resource, ResourceKind, ResponderState};
use super::{ack, memory};
use crate::model::{Effect, Knowledge, Outcomes};
use metaroce_codec::RocePacket;

/// The QP grants `need` (MR-RSP-3).
fn qp_grants(st: &ResponderState, need: AccessFlags) -> Knowledge<bool> {
    st.attrs.access.map(|a| a.grants(need))
}

/// The QP has responder resources (MR-RSP-3: none when `max_dest_rd_atomic` is 0).
fn has_resources(st: &ResponderState) -> Knowledge<bool> {
    st.attrs.max_dest_rd_atomic.map(|n| n > 0)
}

/// Access and resources, the third check of §6.6.
fn admit(st: &ResponderState, need: AccessFlags, eval: &mut Eval) -> Result<(), Fail> {
    eval.check(qp_grants(st, need), invalid(&["MR-RSP-3"]))?;
    eval.check(has_resources(st), invalid(&["MR-RSP-3"]))
}

/// The key check of §6.6 with its NAK 0x62.
fn key(
    st: &ResponderState,
    eval: &mut Eval,
    (rkey, va, len): (u32, u64, u64),
    need: AccessFlags,
    check_range: bool,
    reqs: Option<&'static [&'static str]>,
) -> Result<(), Fail> {
    match memory::check_key(&st.memory, st.attrs.pd, rkey, va, len, need, check_range) {
        Knowledge::Known(Ok(_)) => Ok(()),
        // The operation's own requirement, or the fault's (MR-RSP-6 and the
        // §8 rule it breaks).
        Knowledge::Known(Err(fault)) => Err(access(reqs.unwrap_or(fault.reqs()))),
        Knowledge::Unknown => {
            eval.maybe.push(access(reqs.unwrap_or(&["MR-RSP-6"])));
            Ok(())
        }
    }
}

/// The state after accepting a resource operation that occupies `npsn` PSNs.
fn accept(st: &ResponderState, resource: Resource) -> ResponderState {
    let mut next = st.clone();
    next.nak = NakState::None; // "MR-NAK-2"
    next.epsn = resource.psn.add(resource.npsn); // "MR-RSP-1": by n for a READ
    next.msn = next.msn.map(|m| m.add(1)); // "MR-MSN-1"
    next.resources.push(resource, st.attrs.max_dest_rd_atomic); // "MR-DUP-3"
    next
}

/// An RDMA READ request.
pub(crate) fn read(
    st: &ResponderState,
    pkt: &RocePacket<'_>,
    eval: &mut Eval,
) -> Result<Branch, Fail> {
    let Some(reth) = pkt.ext.reth else {
        return Err(MALFORMED);
    };
    admit(st, AccessFlags::READ, eval)?;
    Eval::require(reth.dma_len <= MAX_DMA_LEN, invalid(&["MR-RSP-4"]))?;
    if reth.dma_len > 0 {
        // "MR-RSP-7": no key check for DMA length 0.
        let range = (reth.rkey, reth.va, u64::from(reth.dma_len));
        key(st, eval, range, AccessFlags::READ, true, None)?;
    }
    let next = accept(
        st,
        Resource {
            kind: ResourceKind::Read,
            psn: pkt.bth.psn,
            npsn: ack::read_npsn(reth.dma_len, st.attrs.pmtu),
            va: reth.va,
            rkey: reth.rkey,
            len: reth.dma_len,
            atomic_orig: Knowledge::Unknown,
        },
    );
    let mut outcomes = Outcomes::none();
    let reqs: &'static [&'static str] = if reth.dma_len == 0 {
        &["MR-READ-2", "MR-READ-3", "MR-READ-5", "MR-MSN-3"]
    } else {
        &["MR-READ-2", "MR-READ-3", "MR-READ-6", "MR-MSN-3"]
    };
    for response in ack::read_responses(&next, pkt.bth.psn, reth.va, reth.rkey, reth.dma_len) {
        outcomes = outcomes.require(reqs, Effect::Send(response));
    }
    Ok(Branch {
        state: next,
        outcomes,
    })
}

/// Compare-Swap or Fetch-Add.
pub(crate) fn atomic(
    st: &ResponderState,
    pkt: &RocePacket<'_>,
    op: Op,
    eval: &mut Eval,
) -> Result<Branch, Fail> {
    let Some(a) = pkt.ext.atomic_eth else {
        return Err(MALFORMED);
    };
    admit(st, AccessFlags::ATOMIC, eval)?;
    Eval::require(a.va % 8 == 0, invalid(&["MR-ATOM-1"]))?;
    key(
        st,
        eval,
        (a.rkey, a.va, 8),
        AccessFlags::ATOMIC,
        true,
        Some(&["MR-ATOM-2", "MR-RSP-6"]),
    )?;

    // "MR-ATOM-3": executed once, here; duplicates replay the saved value.
    let orig: Knowledge<u64> = memory::region(&st.memory, a.rkey)
        .and_then(|r| r.read_u64(a.va))
        .into();
    let new = orig.map(|o| match op {
        Op::CompareSwap if o == a.compare => a.swap_add,
        Op::CompareSwap => o,
        _ => o.wrapping_add(a.swap_add),
    });
    let kind = if op == Op::CompareSwap {
        ResourceKind::CompareSwap
    } else {
        ResourceKind::FetchAdd
    };
    let mut next = accept(
        st,
        Resource {
            kind,
            psn: pkt.bth.psn,
            npsn: 1,
            va: a.va,
            rkey: a.rkey,
            len: 8,
            atomic_orig: orig,
        },
    );
    let mut outcomes = Outcomes::none();
    if let (Knowledge::Known(new), Some(region)) =
        (new, memory::region_mut(&mut next.memory, a.rkey))
    {
        region.write(a.va, &new.to_le_bytes());
        if Knowledge::Known(new) != orig {
            outcomes = outcomes.require(
                &["MR-ATOM-3"],
                Effect::Write {
                    key: a.rkey,
                    offset: region.offset(a.va),
                    bytes: new.to_le_bytes().to_vec(),
                },
            );
        }
    }
    let reply = ack::atomic_ack(&next, pkt.bth.psn, orig);
    outcomes = outcomes.require(&["MR-ATOM-3", "MR-ATOM-4"], Effect::Send(reply));
    Ok(Branch {
        state: next,
        outcomes,
    })
}

/// FLUSH.
pub(crate) fn flush(
    st: &ResponderState,
    pkt: &RocePacket<'_>,
    eval: &mut Eval,
) -> Result<Branch, Fail> {
    let (Some(feth), Some(reth)) = (pkt.ext.feth, pkt.ext.reth) else {
        return Err(MALFORMED);
    };
    let need = AccessFlags::for_placement(feth.placement_type);
    admit(st, need, eval)?;
    let valid =
        feth.placement_type != 0 && feth.placement_type & 0xC == 0 && feth.selectivity_level < 2;
    Eval::require(valid, invalid(&["MR-FLUSH-1"]))?;
    Eval::require(reth.dma_len <= MAX_DMA_LEN, invalid(&["MR-RSP-4"]))?;
    let range = (reth.rkey, reth.va, u64::from(reth.dma_len));
    // Selectivity 0: the RETH range; 1: the whole region of the R_Key.
    let whole_region = feth.selectivity_level == 1;
    key(
        st,
        eval,
        range,
        need,
        !whole_region,
        Some(&["MR-FLUSH-2", "MR-RSP-6"]),
    )?;
    let next = accept(
        st,
        Resource {
            kind: ResourceKind::Flush,
            psn: pkt.bth.psn,
            npsn: 1,
            va: reth.va,
            rkey: reth.rkey,
            len: reth.dma_len,
            atomic_orig: Knowledge::Unknown,
        },
    );
    let reply = ack::empty_read_response(&next, pkt.bth.psn);
    Ok(Branch {
        state: next,
        outcomes: Outcomes::none().require(&["MR-FLUSH-4"], Effect::Send(reply)),
    })
}

/// ATOMIC WRITE.
pub(crate) fn atomic_write(
    st: &ResponderState,
    pkt: &RocePacket<'_>,
    eval: &mut Eval,
) -> Result<Branch, Fail> {
    let Some(reth) = pkt.ext.reth else {
        return Err(MALFORMED);
    };
    admit(st, AccessFlags::WRITE, eval)?;
    Eval::require(pkt.payload.len() == 8, invalid(&["MR-RSP-4", "MR-FLUSH-5"]))?;
    Eval::require(
        reth.dma_len == 8 && reth.va % 8 == 0,
        invalid(&["MR-FLUSH-5"]),
    )?;
    key(
        st,
        eval,
        (reth.rkey, reth.va, 8),
        AccessFlags::WRITE,
        true,
        None,
    )?;
    let mut next = accept(
        st,
        Resource {
            kind: ResourceKind::AtomicWrite,
            psn: pkt.bth.psn,
            npsn: 1,
            va: reth.va,
            rkey: reth.rkey,
            len: 8,
            atomic_orig: Knowledge::Unknown,
        },
    );
    let mut outcomes = Outcomes::none();
    if let Some(region) = memory::region_mut(&mut next.memory, reth.rkey) {
        region.write(reth.va, pkt.payload);
        outcomes = outcomes.require(
            &["MR-FLUSH-6"],
            Effect::Write {
                key: reth.rkey,
                offset: region.offset(reth.va),
                bytes: pkt.payload.to_vec(),
            },
        );
    }
    let reply = ack::empty_read_response(&next, pkt.bth.psn);
    outcomes = outcomes.require(&["MR-FLUSH-4"], Effect::Send(reply));
    Ok(Branch {
        state: next,
        outcomes,
    })
}
