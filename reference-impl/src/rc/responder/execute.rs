//! Executing an in-sequence request (SPEC §6.6): checks in the order the
//! SPEC gives (opcode sequence, access and resources, lengths, receive work
//! request, memory key and range), then placement, completion, MSN and ACK.

use super::ack::Response;
use super::dup::Slot;
use super::{ACK_SYNDROME, InProgress, Responder};
use crate::cq::{WcOpcode, WcStatus, WorkCompletion};
use crate::mr::{Access, MemFault};
use crate::qp_config::{Env, QpConfig};
use crate::rx::RxPacket;
use crate::wr::RecvWr;
use metaroce_codec::Opcode;

/// Largest RETH DMA length (MR-EXT-5, MR-RSP-4).
const MAX_DMA_LEN: u32 = 1 << 31;

/// Packet position within its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pos {
    First,
    Middle,
    Last,
    Only,
}

/// The request kinds a Base RC responder executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Send(Pos),
    Write(Pos),
    Read,
    Atomic,
}

fn kind_of(op: Opcode) -> Option<Kind> {
    use Pos::*;
    Some(match op {
        Opcode::RC_SEND_FIRST => Kind::Send(First),
        Opcode::RC_SEND_MIDDLE => Kind::Send(Middle),
        Opcode::RC_SEND_LAST | Opcode::RC_SEND_LAST_IMM | Opcode::RC_SEND_LAST_INV => {
            Kind::Send(Last)
        }
        Opcode::RC_SEND_ONLY | Opcode::RC_SEND_ONLY_IMM | Opcode::RC_SEND_ONLY_INV => {
            Kind::Send(Only)
        }
        Opcode::RC_WRITE_FIRST => Kind::Write(First),
        Opcode::RC_WRITE_MIDDLE => Kind::Write(Middle),
        Opcode::RC_WRITE_LAST | Opcode::RC_WRITE_LAST_IMM => Kind::Write(Last),
        Opcode::RC_WRITE_ONLY | Opcode::RC_WRITE_ONLY_IMM => Kind::Write(Only),
        Opcode::RC_READ_REQUEST => Kind::Read,
        Opcode::RC_CMP_SWAP | Opcode::RC_FETCH_ADD => Kind::Atomic,
        _ => return None,
    })
}

/// NAK syndromes.
const NAK_INVALID: u8 = 0x61;
const NAK_ACCESS: u8 = 0x62;
const NAK_OPERATIONAL: u8 = 0x63;

impl Responder {
    pub(super) fn execute(&mut self, cfg: &QpConfig, pkt: &RxPacket<'_>, env: &mut Env<'_>) {
        let psn = pkt.bth.psn;
        let Some(kind) = kind_of(pkt.bth.opcode) else {
            // Not reachable after the device's opcode checks; invalid anyway.
            return self.fatal(cfg, env, psn, NAK_INVALID, None);
        };
        let p = cfg.pmtu as usize;
        let len = pkt.payload.len();

        // 1. Opcode sequence (MR-RSP-2).
        let in_sequence = match (&self.progress, kind) {
            (Some(InProgress::Send { .. }), Kind::Send(Pos::Middle | Pos::Last)) => true,
            (Some(InProgress::Write { .. }), Kind::Write(Pos::Middle | Pos::Last)) => true,
            (Some(_), _) => false,
            (None, Kind::Send(Pos::Middle | Pos::Last) | Kind::Write(Pos::Middle | Pos::Last)) => {
                false
            }
            (None, _) => true,
        };
        if !in_sequence {
            let recv = self.take_send_in_progress(WcStatus::RemInvReqErr);
            return self.fatal(cfg, env, psn, NAK_INVALID, recv);
        }

        // 2. QP access rights and resources (MR-RSP-3).
        let allowed = match kind {
            Kind::Write(Pos::First | Pos::Only) => cfg.access.contains(Access::REMOTE_WRITE),
            Kind::Read => cfg.access.contains(Access::REMOTE_READ) && cfg.max_dest_rd_atomic > 0,
            Kind::Atomic => {
                cfg.access.contains(Access::REMOTE_ATOMIC) && cfg.max_dest_rd_atomic > 0
            }
            _ => true,
        };
        if !allowed {
            return self.fatal(cfg, env, psn, NAK_INVALID, None);
        }

        // 3. Lengths (MR-RSP-4, MR-RSP-5, MR-ATOM-1).
        let pos_ok = match kind {
            Kind::Send(pos) | Kind::Write(pos) => match pos {
                Pos::First | Pos::Middle => len == p,
                Pos::Last => (1..=p).contains(&len),
                Pos::Only => len <= p,
            },
            Kind::Read | Kind::Atomic => len == 0,
        };
        let reth_ok = pkt.ext.reth.is_none_or(|r| r.dma_len <= MAX_DMA_LEN);
        let atomic_ok = pkt.ext.atomic_eth.is_none_or(|a| a.va % 8 == 0);
        let write_ok = match (kind, &self.progress, pkt.ext.reth) {
            (Kind::Write(Pos::First), _, Some(r)) => (len as u64) < u64::from(r.dma_len),
            (Kind::Write(Pos::Only), _, Some(r)) => len as u64 == u64::from(r.dma_len),
            (Kind::Write(Pos::Middle), Some(InProgress::Write { remaining, .. }), _) => {
                (len as u64) < *remaining
            }
            (Kind::Write(Pos::Last), Some(InProgress::Write { remaining, .. }), _) => {
                len as u64 == *remaining
            }
            (Kind::Write(_), _, _) => false,
            _ => true,
        };
        if !(pos_ok && reth_ok && atomic_ok && write_ok) {
            let recv = self.take_send_in_progress(WcStatus::RemInvReqErr);
            return self.fatal(cfg, env, psn, NAK_INVALID, recv);
        }

        // 4. Receive work request (MR-RNR-1): SEND First/Only and the packet
        // of a WRITE with Immediate that consumes it.
        let consumes = matches!(kind, Kind::Send(Pos::First | Pos::Only))
            || matches!(
                pkt.bth.opcode,
                Opcode::RC_WRITE_ONLY_IMM | Opcode::RC_WRITE_LAST_IMM
            );
        if consumes && !self.rnr_check(cfg, psn, env) {
            return;
        }

        // 5. Keys and ranges, then execution.
        let result = match kind {
            Kind::Send(pos) => self.exec_send(cfg, pkt, pos, env),
            Kind::Write(pos) => self.exec_write(cfg, pkt, pos, env),
            Kind::Read => return self.exec_read(cfg, pkt, env),
            Kind::Atomic => return self.exec_atomic(cfg, pkt, env),
        };
        if let Err((syndrome, recv)) = result {
            return self.fatal(cfg, env, psn, syndrome, recv);
        }
        self.epsn = self.epsn.add(1); // MR-RSP-1
        if pkt.bth.ack_req {
            // zoo: ack-psn-off-by-one
            let acked = zoo!(cfg.mutant, AckPsnOffByOne => psn.add(1), else psn);
            // MR-ACK-1, MR-ACK-2.
            self.responses.push(Response::Ack {
                psn: acked,
                // zoo: credit-code-zero
                syndrome: zoo!(cfg.mutant, CreditCodeZero => 0x00, else ACK_SYNDROME),
                // zoo: msn-off-by-one
                msn: zoo!(cfg.mutant, MsnOffByOne => self.msn.add(1), else self.msn),
            });
        }
    }

    fn take_send_in_progress(&mut self, status: WcStatus) -> Option<(RecvWr, WcStatus, WcOpcode)> {
        match self.progress.take() {
            Some(InProgress::Send { wr, .. }) => Some((wr, status, WcOpcode::Recv)),
            other => {
                self.progress = other;
                None
            }
        }
    }

    #[allow(clippy::type_complexity)]
    fn exec_send(
        &mut self,
        cfg: &QpConfig,
        pkt: &RxPacket<'_>,
        pos: Pos,
        env: &mut Env<'_>,
    ) -> Result<(), (u8, Option<(RecvWr, WcStatus, WcOpcode)>)> {
        let (wr, offset) = match (pos, self.progress.take()) {
            (Pos::First | Pos::Only, _) => match self.rq.pop_front() {
                Some(wr) => (wr, 0u64), // MR-RSP-13: posting order
                None => return Err((NAK_OPERATIONAL, None)),
            },
            (_, Some(InProgress::Send { wr, offset })) => (wr, offset),
            _ => return Err((NAK_INVALID, None)),
        };
        let capacity: u64 = wr.sg_list.iter().map(|s| u64::from(s.len)).sum();
        let end = offset + pkt.payload.len() as u64;
        if end > capacity {
            // MR-RSP-8.
            return Err((
                NAK_INVALID,
                Some((wr, WcStatus::RemInvReqErr, WcOpcode::Recv)),
            ));
        }
        let placed = env
            .mem
            .check_local(cfg.pd, &wr.sg_list, true)
            .and_then(|()| env.mem.scatter(cfg.pd, &wr.sg_list, offset, pkt.payload));
        if placed.is_err() {
            // MR-RSP-9.
            return Err((
                NAK_OPERATIONAL,
                Some((wr, WcStatus::LocProtErr, WcOpcode::Recv)),
            ));
        }
        if matches!(pos, Pos::First | Pos::Middle) {
            self.progress = Some(InProgress::Send { wr, offset: end });
            return Ok(());
        }
        let mut invalidated = None;
        // zoo: send-inv-ignored — the IETH is not acted on.
        if let Some(ieth) = zoo!(cfg.mutant, SendInvIgnored => None, else pkt.ext.ieth) {
            // MR-RSP-10.
            if env.mem.invalidate(cfg.pd, ieth.rkey).is_err() {
                return Err((
                    NAK_INVALID,
                    Some((wr, WcStatus::RemInvReqErr, WcOpcode::Recv)),
                ));
            }
            invalidated = Some(ieth.rkey);
        }
        self.msn = self.msn.add(1); // MR-MSN-1
        cfg.complete_recv(
            env,
            WorkCompletion {
                wr_id: wr.wr_id,
                status: WcStatus::Success,
                opcode: WcOpcode::Recv,
                qpn: cfg.qpn,
                byte_len: end as u32,
                imm: pkt.ext.immdt.map(|i| i.value), // MR-EXT-4
                invalidated_rkey: invalidated,
                src_qp: None,
            },
        );
        Ok(())
    }

    #[allow(clippy::type_complexity)]
    fn exec_write(
        &mut self,
        cfg: &QpConfig,
        pkt: &RxPacket<'_>,
        pos: Pos,
        env: &mut Env<'_>,
    ) -> Result<(), (u8, Option<(RecvWr, WcStatus, WcOpcode)>)> {
        let (rkey, va, remaining, total) = match (pos, pkt.ext.reth, self.progress.take()) {
            (Pos::First | Pos::Only, Some(r), _) => {
                // MR-RSP-6, MR-RSP-7, MR-SEC-5: the whole range before any byte.
                if r.dma_len > 0
                    && env
                        .mem
                        .check_remote(
                            cfg.pd,
                            r.rkey,
                            r.va,
                            // zoo: rkey-bounds-off-by-one — one byte short.
                            zoo!(cfg.mutant, RkeyBoundsOffByOne => u64::from(r.dma_len) - 1,
                                else u64::from(r.dma_len)),
                            // zoo: write-access-unchecked
                            zoo!(cfg.mutant, WriteAccessUnchecked => Access::NONE,
                                else Access::REMOTE_WRITE),
                        )
                        .is_err()
                {
                    return Err((NAK_ACCESS, None));
                }
                (r.rkey, r.va, u64::from(r.dma_len), r.dma_len)
            }
            (
                _,
                _,
                Some(InProgress::Write {
                    rkey,
                    va,
                    remaining,
                    total,
                }),
            ) => (rkey, va, remaining, total),
            _ => return Err((NAK_INVALID, None)),
        };
        if !pkt.payload.is_empty()
            // zoo: rkey-bounds-off-by-one, write-access-unchecked — the
            // write makes the weakened checks above, not the correct ones.
            && zoo!(cfg.mutant, RkeyBoundsOffByOne
                => env.mem.zoo_remote_write(cfg.pd, rkey, va, pkt.payload, Access::REMOTE_WRITE, 1),
                else zoo!(cfg.mutant, WriteAccessUnchecked
                    => env.mem.zoo_remote_write(cfg.pd, rkey, va, pkt.payload, Access::NONE, 0),
                    else env.mem.remote_write(cfg.pd, rkey, va, pkt.payload)))
            .is_err()
        {
            return Err((NAK_ACCESS, None));
        }
        let len = pkt.payload.len() as u64;
        if matches!(pos, Pos::First | Pos::Middle) {
            self.progress = Some(InProgress::Write {
                rkey,
                va: va + len,
                remaining: remaining - len,
                total,
            });
            return Ok(());
        }
        self.msn = self.msn.add(1); // MR-MSN-1
        if let Some(imm) = pkt.ext.immdt {
            let Some(wr) = self.rq.pop_front() else {
                return Err((NAK_OPERATIONAL, None));
            };
            cfg.complete_recv(
                env,
                WorkCompletion {
                    wr_id: wr.wr_id,
                    status: WcStatus::Success,
                    opcode: WcOpcode::RecvRdmaWithImm,
                    qpn: cfg.qpn,
                    byte_len: total,
                    imm: Some(imm.value),
                    invalidated_rkey: None,
                    src_qp: None,
                },
            );
        }
        Ok(())
    }

    fn exec_read(&mut self, cfg: &QpConfig, pkt: &RxPacket<'_>, env: &mut Env<'_>) {
        let psn = pkt.bth.psn;
        let Some(r) = pkt.ext.reth else {
            return self.fatal(cfg, env, psn, NAK_INVALID, None);
        };
        // MR-RSP-7: a zero-length READ is not key-checked.
        let data = if r.dma_len == 0 {
            Ok(Vec::new())
        } else {
            // zoo: read-leak — up to 4 KiB past the MR end, from what follows it.
            zoo!(cfg.mutant, ReadLeak
                => env.mem.zoo_remote_read(cfg.pd, r.rkey, r.va, u64::from(r.dma_len), 4096),
                else env.mem.remote_read(cfg.pd, r.rkey, r.va, u64::from(r.dma_len)))
        };
        let data = match data {
            Ok(d) => d,
            Err(MemFault::Key | MemFault::Access | MemFault::Range) => {
                return self.fatal(cfg, env, psn, NAK_ACCESS, None); // MR-RSP-6
            }
        };
        let n = (r.dma_len as u64).div_ceil(u64::from(cfg.pmtu)).max(1) as u32;
        self.msn = self.msn.add(1); // MR-MSN-1: on accepting the READ
        self.resources.push(Slot::Read {
            first: psn,
            n,
            va: r.va,
            rkey: r.rkey,
            len: r.dma_len,
        });
        self.responses.push(Response::Read {
            first: psn,
            data,
            next: 0,
            msn: self.msn,
        });
        self.epsn = psn.add(n); // MR-RSP-1: advance by n
    }

    fn exec_atomic(&mut self, cfg: &QpConfig, pkt: &RxPacket<'_>, env: &mut Env<'_>) {
        let psn = pkt.bth.psn;
        let Some(a) = pkt.ext.atomic_eth else {
            return self.fatal(cfg, env, psn, NAK_INVALID, None);
        };
        let is_cas = pkt.bth.opcode == Opcode::RC_CMP_SWAP;
        // MR-ATOM-2, MR-ATOM-3: checked, then executed exactly once.
        let result = env.mem.remote_atomic(cfg.pd, a.rkey, a.va, |old| {
            if is_cas {
                if old == a.compare { a.swap_add } else { old }
            } else {
                old.wrapping_add(a.swap_add)
            }
        });
        let Ok(orig) = result else {
            return self.fatal(cfg, env, psn, NAK_ACCESS, None);
        };
        self.msn = self.msn.add(1);
        self.resources.push(Slot::Atomic { psn, orig });
        self.responses.push(Response::AtomicAck {
            psn,
            orig,
            msn: self.msn,
        }); // MR-ATOM-4
        self.epsn = psn.add(1);
    }
}
