//! The packets a Base responder sends: ACK, NAKs, READ responses, atomic
//! acknowledgements (SPEC.md §6.7, §6.8, §6.10, §6.15, §6.16, §6.19).

use super::{ResponderState, memory, recv};
use crate::model::{Field, Knowledge, PacketSpec, SyndromeSpec};
use metaroce_codec::ext::Syndrome;
use metaroce_codec::{Msn, Opcode, Psn};

/// READ responses listed one by one up to this many packets; a longer READ
/// (possible only with PMTU 256 and a DMA length above 16 MiB) lists the first
/// this many. A bound on the model's memory, not a rule of SPEC.md.
pub const MAX_LISTED_READ_RESPONSES: u32 = 1 << 16;

/// The syndrome an ACK may carry: code 31 without `credits` (MR-CRD-1); with
/// `credits`, code 31 or the code of the receive WRs posted (MR-CRD-2).
pub(crate) fn ack_syndrome(st: &ResponderState) -> SyndromeSpec {
    if !st.features.credits {
        return SyndromeSpec::Exact(Syndrome::ACK_UNLIMITED); // "MR-CRD-1"
    }
    match &st.recv_queue {
        // "MR-CRD-2"
        Knowledge::Known(q) => SyndromeSpec::AckCredits {
            code: recv::credit_code(q.len()),
        },
        Knowledge::Unknown => SyndromeSpec::AnyAck,
    }
}

/// The requirements an ACK answers to, with the credit rule that applies.
pub(crate) fn ack_reqs(st: &ResponderState) -> &'static [&'static str] {
    if st.features.credits {
        &["MR-ACK-1", "MR-ACK-2", "MR-MSN-2", "MR-CRD-2"]
    } else {
        &["MR-ACK-1", "MR-ACK-2", "MR-MSN-2", "MR-CRD-1"]
    }
}

fn msn(st: &ResponderState) -> Field<Msn> {
    st.msn.get().map_or(Field::Any, Field::Exact) // "MR-MSN-2"
}

/// A response of `opcode` with PSN `psn` to the peer QP (MR-ACK-6).
fn response(st: &ResponderState, opcode: Opcode, psn: Psn) -> PacketSpec {
    PacketSpec {
        psn: Field::Exact(psn),
        dest_qp: st.attrs.dest_qpn.get().map_or(Field::Any, Field::Exact), // "MR-ACK-6"
        ..PacketSpec::opcode(opcode)
    }
}

/// An Acknowledge with PSN `psn` and the current MSN (MR-ACK-2).
pub(crate) fn ack(st: &ResponderState, psn: Psn) -> PacketSpec {
    PacketSpec {
        syndrome: Some(ack_syndrome(st)),
        msn: msn(st),
        payload: Field::Exact(Vec::new()),
        ..response(st, Opcode::RC_ACK, psn)
    }
}

/// A NAK (sequence or fatal) with PSN `psn` and the current MSN (MR-NAK-1, MR-NAK-3).
pub(crate) fn nak(st: &ResponderState, psn: Psn, syndrome: Syndrome) -> PacketSpec {
    PacketSpec {
        syndrome: Some(SyndromeSpec::Exact(syndrome)),
        msn: msn(st),
        payload: Field::Exact(Vec::new()),
        ..response(st, Opcode::RC_ACK, psn)
    }
}

/// An RNR NAK with `min_rnr_timer` (MR-RNR-1).
pub(crate) fn rnr_nak(st: &ResponderState, psn: Psn) -> PacketSpec {
    let syndrome = match st.attrs.min_rnr_timer.get() {
        Some(timer) => SyndromeSpec::RnrNak { timer },
        None => SyndromeSpec::AnyRnrNak,
    };
    PacketSpec {
        syndrome: Some(syndrome),
        msn: msn(st),
        payload: Field::Exact(Vec::new()),
        ..response(st, Opcode::RC_ACK, psn)
    }
}

/// The number of response PSNs of a READ of `len` bytes: max(1, ceil(len / PMTU)).
pub(crate) fn read_npsn(len: u32, pmtu: u32) -> u32 {
    len.div_ceil(pmtu.max(1)).max(1)
}

/// The responses of a READ of `[va, va + len)` under `rkey`, starting at PSN
/// `first` (MR-READ-2, MR-READ-3, MR-READ-5, MR-READ-6, MR-MSN-3, MR-SEC-6).
/// `st` is the state after the READ was accepted.
pub(crate) fn read_responses(
    st: &ResponderState,
    first: Psn,
    va: u64,
    rkey: u32,
    len: u32,
) -> Vec<PacketSpec> {
    let pmtu = st.attrs.pmtu.max(1);
    let n = read_npsn(len, pmtu);
    let region = memory::region(&st.memory, rkey);
    (0..n.min(MAX_LISTED_READ_RESPONSES))
        .map(|i| {
            let opcode = match (n, i) {
                (1, _) => Opcode::RC_READ_RESPONSE_ONLY, // "MR-READ-5" for len 0
                (_, 0) => Opcode::RC_READ_RESPONSE_FIRST,
                (n, i) if i == n - 1 => Opcode::RC_READ_RESPONSE_LAST,
                _ => Opcode::RC_READ_RESPONSE_MIDDLE,
            };
            let offset = u64::from(i) * u64::from(pmtu);
            let chunk = (u64::from(len) - offset.min(u64::from(len))).min(u64::from(pmtu));
            // "MR-READ-6", "MR-SEC-6": the bytes of [VA, VA + L), in order.
            let payload = if len == 0 {
                Field::Exact(Vec::new())
            } else {
                region.map_or(Field::Any, |r| r.read(va.wrapping_add(offset), chunk))
            };
            let aeth = opcode != Opcode::RC_READ_RESPONSE_MIDDLE; // "MR-READ-3"
            PacketSpec {
                syndrome: aeth.then(|| ack_syndrome(st)),
                msn: if aeth { msn(st) } else { Field::Any },
                payload,
                ..response(st, opcode, first.add(i))
            }
        })
        .collect()
}

/// An Atomic Acknowledge (MR-ATOM-4, MR-DUP-5).
pub(crate) fn atomic_ack(st: &ResponderState, psn: Psn, orig: Knowledge<u64>) -> PacketSpec {
    PacketSpec {
        syndrome: Some(ack_syndrome(st)),
        msn: msn(st),
        atomic_orig: orig.get().map_or(Field::Any, Field::Exact),
        payload: Field::Exact(Vec::new()),
        ..response(st, Opcode::RC_ATOMIC_ACK, psn)
    }
}

/// The empty READ Response Only that answers FLUSH and ATOMIC WRITE (MR-FLUSH-4).
pub(crate) fn empty_read_response(st: &ResponderState, psn: Psn) -> PacketSpec {
    PacketSpec {
        syndrome: Some(ack_syndrome(st)),
        msn: msn(st),
        payload: Field::Exact(Vec::new()),
        ..response(st, Opcode::RC_READ_RESPONSE_ONLY, psn)
    }
}
