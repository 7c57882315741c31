//! Turning work requests into request packets (SPEC §6.5): opcodes by
//! position, RETH/ImmDt/IETH/AtomicETH, AckReq policy, PSN numbering and the
//! limits on what may be started (window, `max_rd_atomic`, fence).

use super::{Requester, SendWqe};
use crate::cq::WcStatus;
use crate::qp_config::{Env, QpConfig};
use crate::wire::Out;
use crate::wr::WrOp;
use metaroce_codec::Opcode;
use metaroce_codec::ext::{AtomicEthRepr, IethRepr, ImmDtRepr, RethRepr};

/// AckReq at least every this many request packets (MR-PKT-7 asks ≤ 64).
pub(crate) const ACK_REQ_INTERVAL: u32 = 16;

impl Requester {
    /// The next request packet, if one may be sent now.
    pub(crate) fn poll_transmit(&mut self, cfg: &QpConfig, env: &mut Env<'_>) -> Option<Vec<u8>> {
        if self.rnr_until.is_some() {
            return None;
        }
        let path = cfg.path()?;
        loop {
            if self.cursor < self.started {
                match self.packet_at_cursor(cfg, env) {
                    Ok(Some(out)) => return Some(path.build(out)),
                    Ok(None) => continue, // skipped an acknowledged packet
                    Err(status) => {
                        let psn = self.sq.get(self.cursor).map(|w| w.first);
                        self.fail_at(cfg, env, psn, status);
                        return None;
                    }
                }
            }
            if !self.try_start(cfg, env) {
                return None;
            }
        }
    }

    /// Starts the next WQE if allowed: gives it PSNs (MR-PSN-3).
    fn try_start(&mut self, cfg: &QpConfig, env: &mut Env<'_>) -> bool {
        let Some(w) = self.sq.get(self.started) else {
            return false;
        };
        if w.error.is_some() {
            return false;
        }
        // MR-PSN-4: the outstanding span stays far below 2^23.
        if self.outstanding() && self.next_fresh.distance(self.una) >= cfg.window {
            return false;
        }
        let rd = w.wr.op.is_rd_atomic();
        if rd && self.rd_held() >= usize::from(cfg.max_rd_atomic) {
            return false; // MR-REQ-7, MR-DUP-3
        }
        if w.wr.fence && self.rd_outstanding > 0 {
            return false; // MR-REQ-8
        }
        let local = if w.len > cfg.max_msg_size {
            Err(WcStatus::LocLenErr) // MR-PKT-8
        } else {
            let scatter = matches!(w.wr.op, WrOp::Read(_)) || w.wr.op.is_atomic();
            env.mem
                .check_local(cfg.pd, &w.wr.sg_list, scatter)
                .map_err(|_| WcStatus::LocProtErr) // MR-PKT-9
        };
        let pmtu = u64::from(cfg.pmtu);
        let index = self.started;
        let Some(w) = self.sq.get_mut(index) else {
            return false;
        };
        if let Err(status) = local {
            w.error = Some(status);
            self.complete_front(cfg, env);
            return !env.enter_err;
        }
        w.first = self.next_fresh;
        w.npsn = if w.wr.op.is_atomic() {
            1
        } else {
            w.len.div_ceil(pmtu).max(1) as u32
        };
        w.started = true;
        self.next_fresh = self.next_fresh.add(w.npsn);
        self.started += 1;
        if rd {
            self.rd_outstanding += 1;
        }
        if self.cursor == index {
            self.cursor_pkt = 0;
        }
        true
    }

    /// Builds the packet at the cursor and advances it. `Ok(None)` when that
    /// packet needs no sending (already acknowledged, MR-REQ-6).
    fn packet_at_cursor(
        &mut self,
        cfg: &QpConfig,
        env: &mut Env<'_>,
    ) -> Result<Option<Out>, WcStatus> {
        let pmtu = cfg.pmtu;
        let una = self.una;
        let Some(w) = self.sq.get(self.cursor) else {
            return Ok(None);
        };
        let k = self.cursor_pkt;
        let rd = w.wr.op.is_rd_atomic();
        let psn = if matches!(w.wr.op, WrOp::Read(_)) {
            w.first.add(w.rcv_pkts)
        } else {
            w.first.add(k)
        };
        // A SEND or WRITE packet an ACK has covered is never resent, even
        // when a retry restarts at an earlier unanswered READ (MR-REQ-6).
        let skip = if rd {
            w.done
        } else {
            psn.is_before(una) || psn.is_before(self.ack_hi)
        };
        if skip || k >= w.npsn {
            self.advance_cursor(rd);
            return Ok(None);
        }
        let (out, span) = build(w, k, pmtu, cfg, env)?;
        self.advance_cursor(rd);
        Ok(Some(self.note_sent(out, span, cfg, env)))
    }

    fn advance_cursor(&mut self, whole: bool) {
        let npsn = self.sq.get(self.cursor).map_or(0, |w| w.npsn);
        self.cursor_pkt += 1;
        if whole || self.cursor_pkt >= npsn {
            self.cursor += 1;
            self.cursor_pkt = 0;
        }
    }

    /// Bookkeeping for a packet about to leave: AckReq policy, retransmission
    /// counter, highest PSN sent and the local ACK timer (§6.14).
    fn note_sent(&mut self, mut out: Out, span: u32, cfg: &QpConfig, env: &mut Env<'_>) -> Out {
        self.since_ack_req += 1;
        if self.since_ack_req >= ACK_REQ_INTERVAL {
            out.ack_req = true;
        }
        if out.ack_req {
            self.since_ack_req = 0;
        }
        let psn = metaroce_codec::Psn::new(out.psn);
        if psn.is_before(self.sent_end) {
            env.counters.retransmitted_packets += 1;
        }
        let end = psn.add(span);
        if end.is_after(self.sent_end) {
            self.sent_end = end;
        }
        if self.ack_deadline.is_none() || psn == self.una {
            self.arm_timer(cfg, env.now);
        }
        out
    }
}

/// The request packet `k` of `w` and the PSNs it covers.
fn build(
    w: &SendWqe,
    k: u32,
    pmtu: u32,
    cfg: &QpConfig,
    env: &Env<'_>,
) -> Result<(Out, u32), WcStatus> {
    let p = u64::from(pmtu);
    let n = w.npsn;
    let gather = |offset: u64, len: u64| {
        env.mem
            .gather(cfg.pd, &w.wr.sg_list, offset, len as usize)
            .map_err(|_| WcStatus::LocProtErr)
    };
    let out = match w.wr.op {
        WrOp::Read(remote) => {
            // MR-READ-1, MR-REQ-5: a partly answered READ asks for the rest.
            let done = u64::from(w.rcv_pkts) * p;
            let mut out = Out::new(Opcode::RC_READ_REQUEST, w.first.add(w.rcv_pkts).value());
            out.ext.reth = Some(RethRepr {
                va: remote.va.wrapping_add(done),
                rkey: remote.rkey,
                dma_len: w.len.saturating_sub(done) as u32,
            });
            out.ect = true;
            return Ok((out, n - w.rcv_pkts));
        }
        WrOp::CompareSwap {
            remote,
            compare,
            swap,
        } => atomic(
            Opcode::RC_CMP_SWAP,
            w,
            remote.va,
            remote.rkey,
            swap,
            compare,
        ),
        WrOp::FetchAdd { remote, add } => {
            atomic(Opcode::RC_FETCH_ADD, w, remote.va, remote.rkey, add, 0)
        }
        op => {
            let last = k + 1 == n;
            let first = k == 0;
            let offset = u64::from(k) * p;
            let len = (w.len - offset.min(w.len)).min(p);
            let remote = match op {
                WrOp::Write(r) | WrOp::WriteImm(r, _) => Some(r),
                _ => None,
            };
            let is_write = remote.is_some();
            let imm = match op {
                WrOp::SendImm(i) | WrOp::WriteImm(_, i) => Some(i),
                _ => None,
            };
            let inv = match op {
                WrOp::SendInv(r) => Some(r),
                _ => None,
            };
            let opcode = opcode_for(is_write, first, last, imm.is_some(), inv.is_some());
            let mut out = Out::new(opcode, w.first.add(k).value());
            out.ect = true; // MR-ENC-20, as READ requests and atomics
            if first && let Some(remote) = remote {
                out.ext.reth = Some(RethRepr {
                    va: remote.va,
                    rkey: remote.rkey,
                    dma_len: w.len as u32, // MR-PKT-3
                });
            }
            if last {
                out.ext.immdt = imm.map(|value| ImmDtRepr { value });
                out.ext.ieth = inv.map(|rkey| IethRepr { rkey });
                // zoo: ackreq-never-on-last
                out.ack_req = zoo!(cfg.mutant, AckReqNeverOnLast => false, else true); // MR-PKT-6
                // MR-BTH-7: SE only on the last packet of SEND / WRITE-imm.
                out.se = w.wr.solicited && (!is_write || imm.is_some());
            }
            out.payload = gather(offset, len)?;
            out
        }
    };
    Ok((out, 1))
}

fn atomic(opcode: Opcode, w: &SendWqe, va: u64, rkey: u32, swap_add: u64, compare: u64) -> Out {
    let mut out = Out::new(opcode, w.first.value());
    out.ext.atomic_eth = Some(AtomicEthRepr {
        va,
        rkey,
        swap_add,
        compare,
    });
    out.ack_req = true; // MR-PKT-6
    out.ect = true;
    out
}

/// The opcode of a SEND or WRITE packet by position (MR-PKT-1).
fn opcode_for(write: bool, first: bool, last: bool, imm: bool, inv: bool) -> Opcode {
    match (write, first, last) {
        (false, true, true) if imm => Opcode::RC_SEND_ONLY_IMM,
        (false, true, true) if inv => Opcode::RC_SEND_ONLY_INV,
        (false, true, true) => Opcode::RC_SEND_ONLY,
        (false, true, false) => Opcode::RC_SEND_FIRST,
        (false, false, false) => Opcode::RC_SEND_MIDDLE,
        (false, false, true) if imm => Opcode::RC_SEND_LAST_IMM,
        (false, false, true) if inv => Opcode::RC_SEND_LAST_INV,
        (false, false, true) => Opcode::RC_SEND_LAST,
        (true, true, true) if imm => Opcode::RC_WRITE_ONLY_IMM,
        (true, true, true) => Opcode::RC_WRITE_ONLY,
        (true, true, false) => Opcode::RC_WRITE_FIRST,
        (true, false, false) => Opcode::RC_WRITE_MIDDLE,
        (true, false, true) if imm => Opcode::RC_WRITE_LAST_IMM,
        (true, false, true) => Opcode::RC_WRITE_LAST,
    }
}
