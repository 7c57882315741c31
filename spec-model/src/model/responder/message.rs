//! In-sequence request packets: the opcode sequence, and SEND and RDMA WRITE
//! messages (SPEC.md §6.6, §6.7, §6.12). RC uses every check with its NAK;
//! UC ([`super::uc`]) runs the same checks and turns every failure into a
//! silent drop.

use super::op::{Op, Pos, op_of};
use super::{
    Branch, Eval, Fail, Message, NakState, RecvWr, ResponderState, WriteTarget, ack, memory, rdma,
};
use crate::model::Cited;
use crate::model::{CompletionSpec, Effect, Field, Knowledge, Outcomes, WcStatus};
use metaroce_codec::RocePacket;
use metaroce_codec::ext::Syndrome;

/// Largest RETH DMA length (MR-RSP-4, §10).
pub(crate) const MAX_DMA_LEN: u32 = 1 << 31;

/// A NAK 0x61 citing `reqs`.
pub(crate) const fn invalid(reqs: &'static [&'static str]) -> Fail {
    Fail::nak(Syndrome::NAK_INVALID_REQUEST, reqs)
}

/// A NAK 0x62 citing `reqs`.
pub(crate) const fn access(reqs: &'static [&'static str]) -> Fail {
    Fail::nak(Syndrome::NAK_REMOTE_ACCESS, reqs)
}

/// A packet whose opcode's headers are missing: cannot come from the codec,
/// which parses the headers the opcode names; dropped as malformed.
pub(crate) const MALFORMED: Fail = Fail::Drop {
    reqs: &["MR-ROB-1"],
    counter: Some("malformed_drops"),
};

/// The expected-PSN packet of an RC QP: opcode sequence, then the operation.
pub(crate) fn execute_rc(
    st: &ResponderState,
    pkt: &RocePacket<'_>,
    eval: &mut Eval,
    out: &mut Vec<Branch>,
) -> Result<(), Fail> {
    let op = op_of(pkt.bth.opcode);
    let current = sequence(st, op, eval)?;
    let branch = match op {
        Op::Send { .. } | Op::Write { .. } => {
            return message(st, pkt, op, current, eval, true, out);
        }
        Op::Read => rdma::read(st, pkt, eval),
        Op::CompareSwap | Op::FetchAdd => rdma::atomic(st, pkt, op, eval),
        Op::Flush => rdma::flush(st, pkt, eval),
        Op::AtomicWrite => rdma::atomic_write(st, pkt, eval),
        Op::Response | Op::Reserved => Err(MALFORMED),
    }?;
    out.push(branch);
    Ok(())
}

/// The opcode-sequence check (MR-RSP-2): the message this packet continues
/// (`Some`) or `None` when it starts one (or is not a SEND or WRITE).
pub(crate) fn sequence(
    st: &ResponderState,
    op: Op,
    eval: &mut Eval,
) -> Result<Option<Message>, Fail> {
    let continues = matches!(
        op,
        Op::Send {
            pos: Pos::Middle | Pos::Last,
            ..
        } | Op::Write {
            pos: Pos::Middle | Pos::Last,
            ..
        }
    );
    let fail = invalid(&["MR-RSP-2"]);
    match &st.in_progress {
        Knowledge::Known(current) => {
            let fits = match (current, op) {
                (Some(Message::Send { .. }), Op::Send { .. })
                | (Some(Message::Write { .. }), Op::Write { .. }) => continues,
                (Some(_), _) => false,
                (None, _) => !continues,
            };
            Eval::require(fits, fail)?;
            Ok(current.clone())
        }
        // The observer never saw where the previous message ended: the packet
        // may continue one, or break the sequence.
        Knowledge::Unknown => {
            eval.maybe.push(fail);
            Ok(match op {
                _ if !continues => None,
                Op::Send { .. } => Some(Message::Send {
                    recv: Knowledge::Unknown,
                    received: 0,
                }),
                _ => Some(Message::Write {
                    target: Knowledge::Unknown,
                }),
            })
        }
    }
}

fn payload_fits(pos: Pos, len: u64, pmtu: u64) -> bool {
    match pos {
        Pos::First | Pos::Middle => len == pmtu,
        Pos::Last => (1..=pmtu).contains(&len),
        Pos::Only => len <= pmtu,
    }
}

/// A SEND or WRITE packet whose sequence is right: its branch is appended
/// to `out` (built there: the commonest request's branch is the one the
/// capture checker builds most, and moving it about showed in its profile),
/// or the failure returned. `rc` adds ACKs and MSN.
pub(crate) fn message(
    st: &ResponderState,
    pkt: &RocePacket<'_>,
    op: Op,
    current: Option<Message>,
    eval: &mut Eval,
    rc: bool,
    out: &mut Vec<Branch>,
) -> Result<(), Fail> {
    let (pos, is_send, imm, inv) = match op {
        Op::Send { pos, imm, inv } => (pos, true, imm, inv),
        Op::Write { pos, imm } => (pos, false, imm, false),
        _ => return Err(MALFORMED),
    };
    let psn = pkt.bth.psn;
    let len = pkt.payload.len() as u64;
    let pmtu = u64::from(st.attrs.pmtu);

    // Access rights of the QP (MR-RSP-3): a WRITE needs remote write.
    let reth = if !is_send && pos.starts() {
        let Some(reth) = pkt.ext.reth else {
            return Err(MALFORMED);
        };
        let ok = st.attrs.access.map(|a| a.remote_write);
        eval.check(ok, invalid(&["MR-RSP-3"]))?;
        Some(reth)
    } else {
        None
    };

    // Lengths (MR-RSP-4, MR-RSP-5).
    Eval::require(payload_fits(pos, len, pmtu), invalid(&["MR-RSP-4"]))?;
    let target: Knowledge<WriteTarget> = match (reth, &current) {
        (Some(reth), _) => {
            Eval::require(reth.dma_len <= MAX_DMA_LEN, invalid(&["MR-RSP-4"]))?;
            Knowledge::Known(WriteTarget {
                va: reth.va,
                rkey: reth.rkey,
                remaining: reth.dma_len,
            })
        }
        (None, Some(Message::Write { target })) => *target,
        _ => Knowledge::Unknown,
    };
    if let Knowledge::Known(t) = target {
        Eval::require(len <= u64::from(t.remaining), invalid(&["MR-RSP-5"]))?;
        if pos.ends() {
            Eval::require(len == u64::from(t.remaining), invalid(&["MR-RSP-5"]))?;
        }
    }

    // A receive work request (RNR, §6.11): SEND First/Only take one, a WRITE
    // with Immediate takes one with its Last or Only packet.
    let takes_wr = (is_send && pos.starts()) || (!is_send && imm);
    let (recv, received) = match &current {
        Some(Message::Send { recv, received }) => (*recv, *received),
        _ => (Knowledge::Unknown, 0),
    };
    let recv: Knowledge<RecvWr> = if takes_wr {
        match &st.recv_queue {
            Knowledge::Known(q) => match q.front() {
                Some(wr) => Knowledge::Known(*wr),
                None => return Err(Fail::Rnr), // "MR-RNR-1"
            },
            Knowledge::Unknown => {
                eval.maybe.push(Fail::Rnr);
                Knowledge::Unknown
            }
        }
    } else {
        recv
    };
    let received = received.saturating_add(u32::try_from(len).unwrap_or(u32::MAX));

    // The receive buffers of a SEND (MR-RSP-8, MR-RSP-9). Unknown to an
    // observer of a capture: the buffer may be too short or not writable.
    if is_send && !recv.is_known() {
        eval.maybe
            .push(Fail::nak(Syndrome::NAK_INVALID_REQUEST, &["MR-RSP-8"]));
        eval.maybe
            .push(Fail::nak(Syndrome::NAK_REMOTE_OP, &["MR-RSP-9"]));
    }
    if let (true, Knowledge::Known(wr)) = (is_send, recv) {
        Eval::require(
            received <= wr.capacity,
            Fail::Nak {
                syndrome: Syndrome::NAK_INVALID_REQUEST,
                reqs: &["MR-RSP-8"],
                // LOC_LEN_ERR (verbs, mlx5), LOC_QP_OP_ERR (rdmavt),
                // REM_INV_REQ_ERR (rxe).
                wc: Some((
                    wr.id,
                    &[
                        WcStatus::LocLenErr,
                        WcStatus::LocQpOpErr,
                        WcStatus::RemInvReqErr,
                    ],
                )),
            },
        )?;
        Eval::require(
            wr.writable,
            Fail::Nak {
                syndrome: Syndrome::NAK_REMOTE_OP,
                reqs: &["MR-RSP-9"],
                wc: Some((wr.id, &[WcStatus::LocProtErr])),
            },
        )?;
    }

    // R_Key and range of the whole WRITE, on its first packet, before any
    // byte is placed (MR-RSP-6, MR-SEC-5); never for DMA length 0 (MR-RSP-7).
    if let Some(reth) = reth.filter(|r| r.dma_len > 0) {
        let verdict = memory::check_key(
            &st.memory,
            st.attrs.pd,
            reth.rkey,
            reth.va,
            u64::from(reth.dma_len),
            super::AccessFlags::WRITE,
            true,
        );
        match verdict {
            Knowledge::Known(Ok(_)) => {}
            Knowledge::Known(Err(fault)) => return Err(access(fault.reqs())),
            Knowledge::Unknown => eval.maybe.push(access(&["MR-RSP-6", "MR-SEC-5"])),
        }
    }

    // SEND with Invalidate (MR-RSP-10): the key must name a region of the
    // QP's protection domain that the implementation invalidates (every
    // region of the model is registered with `reg_mr`, which only
    // `invalidate_reg_mr` implementations invalidate). A key it does not
    // invalidate: NAK 0x61 or rxe's positive ACK, REM_INV_REQ_ERR and ERR
    // (deferred branches), or a plain SEND completion (rdmavt: this branch).
    let invalidate = if inv && pos.ends() {
        let Some(ieth) = pkt.ext.ieth else {
            return Err(MALFORMED);
        };
        let ok = st.memory.as_ref().map(|regions| {
            st.features.invalidate_reg_mr
                && regions
                    .iter()
                    .any(|r| r.rkey == ieth.rkey && r.pd == st.attrs.pd && !r.bound)
        });
        let fail = Fail::InvalidateFailed {
            wc: recv.get().map(|wr| wr.id),
        };
        match ok {
            Knowledge::Known(true) => Some(ieth.rkey),
            Knowledge::Known(false) => {
                eval.maybe.push(fail);
                None
            }
            Knowledge::Unknown => {
                eval.maybe.push(fail);
                Some(ieth.rkey)
            }
        }
    } else {
        None
    };

    // Execute. Nothing fails from here on: the branch is built where it is kept.
    let Branch {
        state: next,
        outcomes,
    } = out.push_mut(Branch {
        state: st.clone(),
        outcomes: Outcomes::none(),
    });
    next.nak = NakState::None; // "MR-NAK-2": an expected packet was executed
    next.epsn = psn.add(1); // "MR-RSP-1"
    if takes_wr && let Some(q) = next.recv_queue.known_mut() {
        q.pop_front(); // "MR-RSP-13": in posting order
    }
    let target = match target {
        Knowledge::Known(t) if !is_send => {
            if let Some(region) = memory::region_mut(&mut next.memory, t.rkey)
                && len > 0
                && region.covers(t.va, len)
            {
                region.write(t.va, pkt.payload);
                // "MR-RSP-14": placed before the ACK that covers it.
                outcomes.required.push(Cited {
                    value: Effect::Write {
                        key: t.rkey,
                        offset: region.offset(t.va),
                        bytes: pkt.payload.to_vec(),
                    },
                    reqs: &["MR-RSP-14"],
                });
            }
            Knowledge::Known(WriteTarget {
                va: t.va.wrapping_add(len),
                remaining: t
                    .remaining
                    .saturating_sub(u32::try_from(len).unwrap_or(u32::MAX)),
                ..t
            })
        }
        other => other,
    };
    if pos.ends() {
        next.in_progress = Knowledge::Known(None);
        if rc {
            next.msn = next.msn.map(|m| m.add(1)); // "MR-MSN-1"
        }
        if let Some(key) = invalidate {
            if let Some(regions) = next.memory.known_mut() {
                regions.retain(|r| r.rkey != key); // "MR-RSP-10", then "MR-SEC-8"
            }
            outcomes.required.push(Cited {
                value: Effect::Invalidate { key },
                reqs: &["MR-RSP-10"],
            });
        }
        if let (true, Knowledge::Known(wr)) = (is_send || imm, recv) {
            // "MR-RSP-12", "MR-EXT-4"
            outcomes.required.push(Cited {
                value: Effect::Complete(CompletionSpec {
                    wr: wr.id,
                    status: Field::Exact(WcStatus::Success),
                    byte_len: if is_send {
                        Field::Exact(received)
                    } else {
                        Field::Any
                    },
                    imm: Field::Exact(pkt.ext.immdt.map(|i| i.value)),
                }),
                reqs: &["MR-RSP-12", "MR-EXT-4"],
            });
        }
    } else {
        next.in_progress = Knowledge::Known(Some(if is_send {
            Message::Send { recv, received }
        } else {
            Message::Write { target }
        }));
    }
    if rc {
        let (list, reqs) = if pkt.bth.ack_req {
            (&mut outcomes.required, ack::ack_reqs(next)) // "MR-ACK-1", "MR-ACK-2"
        } else {
            (&mut outcomes.optional, &["MR-ACK-5"][..])
        };
        list.push(Cited {
            value: Effect::Send(ack::ack(next, psn)),
            reqs,
        });
    }
    Ok(())
}
