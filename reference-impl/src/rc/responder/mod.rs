//! The Base RC responder (SPEC §6.6–§6.12): executes request packets in PSN
//! order, acknowledges, NAKs gaps once, answers duplicates, and queues
//! responses that `poll_transmit` turns into packets.

mod ack;
mod dup;
mod execute;
mod psn;
mod rnr;

use crate::cq::{WcOpcode, WcStatus, WorkCompletion};
use crate::qp_config::{Env, QpConfig, flushed_recv};
use crate::rx::RxPacket;
use crate::wr::RecvWr;
use ack::{Response, Responses};
use dup::{DupAction, Resources};
use metaroce_codec::{Msn, Opcode, Psn};
use psn::{GapState, PsnClass, classify};
use std::collections::VecDeque;

pub(crate) use ack::ACK_SYNDROME;

/// A multi-packet message in progress (for the opcode-sequence rule, MR-RSP-2).
#[derive(Clone, Debug)]
enum InProgress {
    /// A SEND that consumed `wr`; `offset` bytes placed so far.
    Send { wr: RecvWr, offset: u64 },
    /// A WRITE: next VA, bytes of the DMA length still due, total length.
    Write {
        rkey: u32,
        va: u64,
        remaining: u64,
        total: u32,
    },
}

/// Responder state of one RC QP.
#[derive(Debug, Default)]
pub(crate) struct Responder {
    epsn: Psn,
    msn: Msn,
    gap: GapState,
    progress: Option<InProgress>,
    rq: VecDeque<RecvWr>,
    resources: Resources,
    responses: Responses,
}

impl Responder {
    /// MR-QP-9: on entering RTR, expected PSN = `rq_psn`, MSN = 0.
    pub(crate) fn start(&mut self, cfg: &QpConfig) {
        self.epsn = Psn::new(cfg.rq_psn);
        self.msn = Msn::new(0);
        self.gap = GapState::Open;
        self.progress = None;
        self.resources = Resources::new(cfg.max_dest_rd_atomic);
        self.responses.clear();
    }

    pub(crate) fn post_recv(&mut self, wr: RecvWr) {
        self.rq.push_back(wr);
    }

    /// The receive work requests posted and not consumed, in order,
    /// leaving none (a QP that turns MP at RTR hands them over).
    pub(crate) fn take_posted(&mut self) -> VecDeque<RecvWr> {
        std::mem::take(&mut self.rq)
    }

    pub(crate) fn recv_depth(&self) -> usize {
        self.rq.len() + usize::from(matches!(self.progress, Some(InProgress::Send { .. })))
    }

    /// The multi-packet message in progress (0 or 1).
    pub(crate) fn incomplete(&self) -> usize {
        usize::from(self.progress.is_some())
    }

    pub(crate) fn responses_queued(&self) -> usize {
        self.responses.len()
    }

    /// Flushes receive work requests in posting order (MR-QP-6); the one a
    /// SEND in progress consumed comes first.
    pub(crate) fn flush(&mut self, cfg: &QpConfig, env: &mut Env<'_>) {
        if let Some(InProgress::Send { wr, .. }) = self.progress.take() {
            cfg.complete_recv(env, flushed_recv(wr.wr_id));
        }
        while let Some(wr) = self.rq.pop_front() {
            cfg.complete_recv(env, flushed_recv(wr.wr_id));
        }
        self.responses.clear();
    }

    /// The next response packet.
    pub(crate) fn poll_transmit(&mut self, cfg: &QpConfig) -> Option<Vec<u8>> {
        let path = cfg.path()?;
        self.responses.next_packet(&path, cfg.pmtu)
    }

    /// A request packet (MR-PSN-2).
    pub(crate) fn handle_request(&mut self, cfg: &QpConfig, pkt: &RxPacket<'_>, env: &mut Env<'_>) {
        match classify(pkt.bth.psn, self.epsn) {
            PsnClass::Expected => {
                self.gap = GapState::Open;
                self.execute(cfg, pkt, env);
            }
            PsnClass::Ahead => {
                // MR-NAK-1, MR-NAK-2, MR-RNR-2, MR-SEC-10: never executed.
                // zoo: seq-nak-every-packet
                if self.gap == GapState::Open || zoo!(cfg.mutant, SeqNakEveryPacket) {
                    self.responses.push(Response::Ack {
                        psn: self.epsn,
                        syndrome: 0x60,
                        msn: self.msn,
                    });
                    self.gap = GapState::SeqNakSent;
                    env.counters.seq_naks_sent += 1;
                }
            }
            PsnClass::Duplicate => {
                env.counters.duplicate_requests += 1;
                self.duplicate(cfg, pkt, env);
            }
        }
    }

    /// A duplicate request (SPEC §6.9).
    fn duplicate(&mut self, cfg: &QpConfig, pkt: &RxPacket<'_>, env: &mut Env<'_>) {
        let psn = pkt.bth.psn;
        let action = match pkt.bth.opcode {
            Opcode::RC_READ_REQUEST => match pkt.ext.reth {
                // zoo: dup-read-ignored
                Some(r) => zoo!(cfg.mutant, DupReadIgnored => DupAction::Drop,
                    else self.resources.match_read(psn, r.va, r.rkey, r.dma_len, cfg.pmtu)),
                None => DupAction::Drop,
            },
            Opcode::RC_CMP_SWAP | Opcode::RC_FETCH_ADD => self.resources.match_atomic(psn),
            _ => {
                // MR-DUP-1, MR-DUP-2: no effect but an ACK when asked.
                if pkt.bth.ack_req {
                    self.responses.push(Response::Ack {
                        psn: self.epsn.sub(1),
                        syndrome: ACK_SYNDROME,
                        msn: self.msn,
                    });
                }
                DupAction::Drop
            }
        };
        match action {
            DupAction::ReRead {
                psn,
                va,
                rkey,
                len,
                block,
            } => {
                self.responses.cancel_read(block.0, block.1);
                // Re-validate the R_Key and read memory again (MR-DUP-4).
                let data = if len == 0 {
                    Ok(Vec::new())
                } else {
                    env.mem.remote_read(cfg.pd, rkey, va, u64::from(len))
                };
                match data {
                    Ok(data) => self.responses.push(Response::Read {
                        first: psn,
                        data,
                        next: 0,
                        msn: self.msn,
                    }),
                    Err(_) => self.fatal(cfg, env, psn, 0x62, None),
                }
            }
            DupAction::Replay { psn, orig } => {
                // zoo: atomic-replay-reexecutes — executed again, not replayed.
                let kept = zoo!(cfg.mutant, AtomicReplayReexecutes
                    => crate::zoo::atomic_again(env.mem, cfg.pd, pkt).unwrap_or(orig), else orig);
                self.responses.push(Response::AtomicAck {
                    psn,
                    orig: kept,
                    msn: self.msn,
                })
            }
            DupAction::Drop => {}
        }
    }

    /// A fatal NAK: queued responses leave first, then the NAK with the
    /// offending PSN and current MSN (MR-NAK-3); the receive work request
    /// involved completes with its status before the flush (MR-QP-7); the
    /// QP enters ERR (MR-RSP-11).
    fn fatal(
        &mut self,
        cfg: &QpConfig,
        env: &mut Env<'_>,
        psn: Psn,
        syndrome: u8,
        recv: Option<(RecvWr, WcStatus, WcOpcode)>,
    ) {
        if let Some(path) = cfg.path() {
            self.responses.drain(&path, cfg.pmtu, env.urgent);
            env.urgent
                .push_back(path.build(ack::ack(psn, syndrome, self.msn)));
        }
        if let Some((wr, status, opcode)) = recv {
            cfg.complete_recv(
                env,
                WorkCompletion {
                    wr_id: wr.wr_id,
                    status,
                    opcode,
                    qpn: cfg.qpn,
                    byte_len: 0,
                    imm: None,
                    invalidated_rkey: None,
                    src_qp: None,
                },
            );
        }
        env.enter_err = true;
    }
}
