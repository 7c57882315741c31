//! Accepting new MP request packets: the checks of MR-MPP-2/3, placement
//! at the packet's offset as it arrives (MR-MPP-1, MR-MPP-4), receive work
//! requests in MSN order (§7.5, MR-MPP-17), completion in MSN order
//! (MR-MPP-6) and READ / atomic execution once every earlier message is
//! placed (MR-MPP-7).

use super::ack::{Job, Trigger};
use super::{Exec, Kept, MpResponder, Msg};
use crate::cq::{WcOpcode, WcStatus, WorkCompletion};
use crate::mr::Access;
use crate::qp_config::{Env, QpConfig};
use crate::rx::RxPacket;
use crate::timing::rnr_timer_ns;
use metaroce_codec::Opcode;
use metaroce_codec::ext::RethRepr;

const NAK_INVALID: u8 = 0x61;
const NAK_ACCESS: u8 = 0x62;
const NAK_OPERATIONAL: u8 = 0x63;
/// NAK code 6, resource NAK (SPEC §7.16).
const NAK_RESOURCE: u8 = 0x66;
const MAX_LEN: u32 = 1 << 31;

/// A fatal condition: the syndrome and the PSN index it names.
type Fatal = (u8, u64);

impl MpResponder {
    /// A new (not yet received, in-window) request packet.
    pub(super) fn accept(
        &mut self,
        cfg: &QpConfig,
        pkt: &RxPacket<'_>,
        idx: u64,
        t: Trigger,
        env: &mut Env<'_>,
    ) {
        if let Err((syn, at)) = self.accept_inner(cfg, pkt, idx, t, env) {
            return self.fatal(cfg, env, syn, at, Some(&t));
        }
        if let Err((syn, at)) = self.progress_inner(cfg, env) {
            self.fatal(cfg, env, syn, at, Some(&t));
        }
    }

    fn accept_inner(
        &mut self,
        cfg: &QpConfig,
        pkt: &RxPacket<'_>,
        idx: u64,
        t: Trigger,
        env: &mut Env<'_>,
    ) -> Result<(), Fatal> {
        let Some(m) = pkt.ext.mpeth else {
            return Ok(());
        };
        let op = pkt.bth.opcode;
        let bad = Err((NAK_INVALID, idx));
        let Some(msn) = self
            .unwrap_msn(m.msn.value())
            .filter(|&x| x >= self.next_msn)
        else {
            return Ok(()); // a completed message: nothing to place (MR-MPP-8)
        };
        let p = cfg.pmtu;
        let rd_ok = |need: Access| cfg.access.contains(need) && cfg.max_dest_rd_atomic > 0;
        match op {
            Opcode::MP_READ_REQUEST => {
                if m.offset != 0 {
                    return Ok(()); // a re-request of a READ never accepted
                }
                let Some(reth) = pkt.ext.reth else { return bad };
                // MR-MPH-12, MR-MPR-11 (SPEC v1.2): the whole read, or a
                // first part of a multiple of PMTU below it.
                let first_part =
                    reth.dma_len > 0 && reth.dma_len < m.msg_len && reth.dma_len.is_multiple_of(p);
                if !rd_ok(Access::REMOTE_READ)
                    || (reth.dma_len != m.msg_len && !first_part)
                    || m.msg_len > MAX_LEN
                    || self.msgs.contains_key(&msn)
                {
                    return bad;
                }
                let n = m.msg_len.div_ceil(p).max(1);
                self.msgs
                    .insert(msn, exec_msg(op, m.msg_len, Some(reth), idx, t, None));
                // MR-MPR-2: all n PSNs received with the request.
                self.received(idx, n, t, pkt.bth.ack_req);
                return Ok(());
            }
            Opcode::MP_CMP_SWAP | Opcode::MP_FETCH_ADD => {
                let Some(a) = pkt.ext.atomic_eth else {
                    return bad;
                };
                if !rd_ok(Access::REMOTE_ATOMIC)
                    || a.va % 8 != 0
                    || m.msg_len != 8
                    || self.msgs.contains_key(&msn)
                {
                    return bad;
                }
                self.msgs
                    .insert(msn, exec_msg(op, 8, None, idx, t, Some(a)));
                self.received(idx, 1, t, pkt.bth.ack_req);
                return Ok(());
            }
            _ => {}
        }
        // MR-MPP-3: a data packet's offsets, lengths and flags.
        let len = pkt.payload.len() as u32;
        let end = u64::from(m.offset) + u64::from(len);
        let is_write = matches!(op, Opcode::MP_WRITE | Opcode::MP_WRITE_IMM);
        if m.offset % p != 0
            || end > u64::from(m.msg_len)
            || (!m.last && len != p)
            || m.first != (m.offset == 0)
            || m.last != (end == u64::from(m.msg_len))
            || m.msg_len > MAX_LEN
            || (is_write && pkt.ext.reth.is_none_or(|r| r.dma_len != m.msg_len))
        {
            return bad;
        }
        let k = m.offset / p;
        let Some(first) = idx.checked_sub(u64::from(k)) else {
            return bad;
        };
        let npkts = m.msg_len.div_ceil(p).max(1);
        // A packet refused for lack of resources (MR-MPP-23) must leave no
        // trace: the message state it creates is forgotten then.
        let created = !self.msgs.contains_key(&msn);
        let msg = self.msgs.entry(msn).or_insert_with(|| Msg {
            opcode: op,
            len: m.msg_len,
            reth: pkt.ext.reth,
            imm: pkt.ext.immdt.map(|i| i.value),
            ieth: pkt.ext.ieth.map(|i| i.rkey),
            first,
            npkts,
            placed: vec![false; npkts as usize],
            placed_count: 0,
            wr: None,
            staged: Vec::new(),
            exec: None,
            ordered: m.ordered,
        });
        if msg.opcode != op
            || msg.len != m.msg_len
            || msg.reth != pkt.ext.reth
            || msg.first != first
        {
            return bad; // MR-MPP-3: differs from an earlier packet
        }
        if msg.placed.get(k as usize).is_none_or(|&b| b) {
            return Ok(());
        }
        // MR-MPP-20: a packet of an ordered message is kept (staged, so it
        // may be acknowledged, MR-MPA-9) and placed by `release`.
        msg.ordered |= m.ordered;
        let ordered = msg.ordered;
        if is_write {
            // MR-MPP-17: a WRITE with Immediate whose receive work request
            // is known missing is refused from then on; packets placed
            // before stay placed and acknowledged.
            if op == Opcode::MP_WRITE_IMM {
                self.assign(cfg, env)?;
                if self.recv_missing(msn) {
                    self.refuse_rnr(cfg, env, msn, idx, t);
                    return Ok(());
                }
            }
            // MR-MPP-2: key and the whole range before any byte.
            let r = pkt.ext.reth.unwrap_or(RethRepr {
                va: 0,
                rkey: 0,
                dma_len: 0,
            });
            if !cfg.access.contains(Access::REMOTE_WRITE)
                || (r.dma_len > 0
                    && env
                        .mem
                        .check_remote(
                            cfg.pd,
                            r.rkey,
                            r.va,
                            u64::from(r.dma_len),
                            Access::REMOTE_WRITE,
                        )
                        .is_err())
            {
                return Err((NAK_ACCESS, idx));
            }
            if ordered && !self.earlier_all_placed(msn) {
                // MR-MPP-20: held, in the same staging budget as SEND
                // packets (MR-MPP-5), or refused (MR-MPP-23).
                if self.staged_bytes + u64::from(len) > self.max_staged {
                    self.refuse_for_resources(t, idx, created.then_some(msn));
                    return Ok(());
                }
                self.staged_bytes += u64::from(len);
                self.msgs
                    .get_mut(&msn)
                    .ok_or((NAK_INVALID, idx))?
                    .staged
                    .push((m.offset, pkt.payload.to_vec()));
            } else if len > 0 {
                // MR-MPP-1: placed now, whatever arrived before.
                let va = r.va.wrapping_add(u64::from(m.offset));
                env.mem
                    .remote_write(cfg.pd, r.rkey, va, pkt.payload)
                    .map_err(|_| (NAK_ACCESS, idx))?;
            }
        } else {
            // MR-MPP-4: a SEND waits for its receive work request.
            self.assign(cfg, env)?;
            let hold = ordered && !self.earlier_all_placed(msn);
            let missing = self.recv_missing(msn);
            let msg = self.msgs.get_mut(&msn).ok_or((NAK_INVALID, idx))?;
            if let Some(wr) = msg.wr.as_ref().filter(|_| !hold) {
                place_send(cfg, env, wr, m.offset, pkt.payload).map_err(|s| (s, idx))?;
            } else if missing {
                self.refuse_rnr(cfg, env, msn, idx, t);
                return Ok(());
            } else if self.max_staged == 0 || self.staged_bytes + u64::from(len) > self.max_staged {
                self.refuse_for_resources(t, idx, created.then_some(msn));
                return Ok(());
            } else {
                // MR-MPP-5: staged, so it may be acknowledged.
                self.staged_bytes += u64::from(len);
                msg.staged.push((m.offset, pkt.payload.to_vec()));
            }
        }
        let msg = self.msgs.get_mut(&msn).ok_or((NAK_INVALID, idx))?;
        msg.placed[k as usize] = true;
        msg.placed_count += 1;
        self.received(idx, 1, t, pkt.bth.ack_req);
        Ok(())
    }

    /// MR-MPP-17, §7.5: the receive work request of receive-consuming
    /// message `msn` is determined (the opcode of every earlier message not
    /// completed is known) and none is posted for it. Assignment stopped at
    /// `blocked` for want of one, so every later such message, once the
    /// messages between are known, lacks one too (it would be a later
    /// receive than the one `blocked` waits for).
    fn recv_missing(&self, msn: u64) -> bool {
        self.blocked
            .is_some_and(|b| b <= msn && (b..msn).all(|j| self.msgs.contains_key(&j)))
    }

    /// Determines receive work requests in MSN order (§7.5) and places
    /// staged SEND payloads.
    fn assign(&mut self, cfg: &QpConfig, env: &mut Env<'_>) -> Result<(), Fatal> {
        while let Some(m) = self.msgs.get_mut(&self.assign_msn) {
            if m.consumes() && m.wr.is_none() {
                let Some(wr) = self.rq.pop_front() else {
                    self.blocked = Some(self.assign_msn);
                    return Ok(());
                };
                if !m.ordered {
                    for (off, data) in std::mem::take(&mut m.staged) {
                        self.staged_bytes = self.staged_bytes.saturating_sub(data.len() as u64);
                        place_send(cfg, env, &wr, off, &data).map_err(|s| (s, m.first))?;
                    }
                }
                m.wr = Some(wr);
            }
            self.assign_msn += 1;
        }
        self.blocked = None;
        Ok(())
    }

    /// After a receive was posted.
    pub(super) fn progress(&mut self, cfg: &QpConfig, env: &mut Env<'_>) {
        if let Err((syn, at)) = self.progress_inner(cfg, env) {
            // No packet triggers this NAK: a posted receive let a staged
            // message be placed, and it did not fit.
            self.fatal(cfg, env, syn, at, None);
        }
    }

    /// Completes messages in MSN order (MR-MPP-6, MR-MPP-9) and executes
    /// READs and atomics at the head (MR-MPP-7).
    fn progress_inner(&mut self, cfg: &QpConfig, env: &mut Env<'_>) -> Result<(), Fatal> {
        self.assign(cfg, env)?;
        self.release(cfg, env)?;
        while let Some(m) = self.msgs.get(&self.next_msn) {
            let ready = match m.opcode {
                Opcode::MP_READ_REQUEST | Opcode::MP_CMP_SWAP | Opcode::MP_FETCH_ADD => {
                    m.exec.is_some()
                }
                _ => m.placed_count == m.npkts && (!m.consumes() || m.wr.is_some()),
            };
            if !ready {
                break;
            }
            let Some(m) = self.msgs.remove(&self.next_msn) else {
                break;
            };
            let msn = self.next_msn;
            self.next_msn += 1;
            self.complete(cfg, env, msn, m)?;
            self.release(cfg, env)?;
        }
        Ok(())
    }

    /// MR-MPP-17: a packet of message `msn`, whose receive work request is
    /// known missing, is refused, neither placed nor acknowledged; the
    /// first refused packet of the message gets an RNR NAK naming it, later
    /// ones at most one per RNR timer period for that message.
    fn refuse_rnr(&mut self, cfg: &QpConfig, env: &mut Env<'_>, msn: u64, idx: u64, t: Trigger) {
        let wait = rnr_timer_ns(cfg.min_rnr_timer);
        // Only messages not yet completed can be refused (bounded by them).
        self.rnr_last = self.rnr_last.split_off(&self.next_msn);
        if self
            .rnr_last
            .get(&msn)
            .is_none_or(|&l| self.now.saturating_sub(l) >= wait)
        {
            self.rnr_last.insert(msn, self.now);
            env.counters.rnr_naks_sent += 1;
            self.push_ack(Trigger {
                syndrome: 0x20 | (cfg.min_rnr_timer & 0x1F),
                nak_base: Some(idx),
                idx: Some(idx),
                ..t
            });
        }
    }

    /// MR-MPP-23, MR-MPP-24: a packet refused for lack of resources is
    /// neither placed, staged nor acknowledged; NAK 0x66 toward a peer that
    /// announced RN, else dropped. It leaves the state as if it had not
    /// arrived (SPEC v1.2 §7.16): `created`, the message it alone made
    /// known, is forgotten, with the receive work request its arrival
    /// determined for it (an ordered SEND held, MR-MPP-20) unless a later
    /// message has taken one since.
    fn refuse_for_resources(&mut self, t: Trigger, idx: u64, created: Option<u64>) {
        if let Some(msn) = created
            && self
                .msgs
                .get(&msn)
                .is_some_and(|m| m.placed_count == 0 && m.staged.is_empty())
        {
            let wr_taken = self.msgs.get(&msn).is_some_and(|m| m.wr.is_some());
            if !wr_taken || self.assign_msn == msn + 1 {
                if let Some(wr) = self.msgs.remove(&msn).and_then(|m| m.wr) {
                    self.rq.push_front(wr);
                }
                if self.assign_msn > msn {
                    self.assign_msn = msn;
                    self.blocked = None;
                }
            }
        }
        if self.peer_rn {
            self.push_ack(Trigger {
                syndrome: NAK_RESOURCE,
                nak_base: Some(idx),
                idx: Some(idx),
                ..t
            });
        }
    }

    /// Every message before `msn` is entirely placed (a READ or atomic:
    /// executed), as `release` requires before it places an ordered one.
    fn earlier_all_placed(&self, msn: u64) -> bool {
        (self.next_msn..msn).all(|x| self.msgs.get(&x).is_some_and(Msg::entirely_placed))
    }

    /// MR-MPP-20: places the kept packets of each ordered message whose
    /// earlier messages are all entirely placed (a READ or atomic:
    /// executed, which happens when it completes).
    fn release(&mut self, cfg: &QpConfig, env: &mut Env<'_>) -> Result<(), Fatal> {
        let mut msn = self.next_msn;
        while let Some(m) = self.msgs.get_mut(&msn) {
            if m.exec.is_some() {
                break;
            }
            let write = m.is_write();
            if m.ordered && m.has_target() {
                for (off, data) in std::mem::take(&mut m.staged) {
                    self.staged_bytes = self.staged_bytes.saturating_sub(data.len() as u64);
                    match (&m.wr, m.reth) {
                        (Some(wr), _) if !write => {
                            place_send(cfg, env, wr, off, &data).map_err(|s| (s, m.first))?;
                        }
                        (_, Some(r)) if !data.is_empty() => {
                            let va = r.va.wrapping_add(u64::from(off));
                            env.mem
                                .remote_write(cfg.pd, r.rkey, va, &data)
                                .map_err(|_| (NAK_ACCESS, m.first))?;
                        }
                        _ => {}
                    }
                }
            }
            if !m.entirely_placed() {
                break;
            }
            msn += 1;
        }
        Ok(())
    }

    fn complete(
        &mut self,
        cfg: &QpConfig,
        env: &mut Env<'_>,
        msn: u64,
        m: Msg,
    ) -> Result<(), Fatal> {
        let wc = |wr_id: u64, opcode, imm, inv| WorkCompletion {
            wr_id,
            status: WcStatus::Success,
            opcode,
            qpn: cfg.qpn,
            byte_len: m.len,
            imm,
            invalidated_rkey: inv,
            src_qp: None,
        };
        match (m.opcode, m.exec) {
            (Opcode::MP_READ_REQUEST, Some(e)) => {
                let r = m.reth.unwrap_or(RethRepr {
                    va: 0,
                    rkey: 0,
                    dma_len: 0,
                });
                // MR-MPR-3, MR-MPR-4: the whole read is checked; a first part
                // (MR-MPR-11) is answered for its own range only.
                let data = if m.len == 0 {
                    Vec::new()
                } else {
                    let mut d = env
                        .mem
                        .remote_read(cfg.pd, r.rkey, r.va, u64::from(m.len))
                        .map_err(|_| (NAK_ACCESS, m.first))?;
                    d.truncate(r.dma_len.min(m.len) as usize);
                    d
                };
                self.keep(
                    cfg,
                    Kept {
                        msn,
                        first: m.first,
                        reth: m.reth,
                        len: m.len,
                        orig: None,
                    },
                );
                self.jobs.push_back(Job::Read {
                    msn: msn as u32 & 0xFF_FFFF,
                    first: m.first,
                    read_len: m.len,
                    offset: 0,
                    data,
                    next: 0,
                    echo: e.echo,
                });
            }
            (
                Opcode::MP_CMP_SWAP | Opcode::MP_FETCH_ADD,
                Some(Exec {
                    atomic: Some(a),
                    echo,
                }),
            ) => {
                // MR-MPP-12: once per MSN, §6.16 semantics.
                let cas = m.opcode == Opcode::MP_CMP_SWAP;
                let orig = env
                    .mem
                    .remote_atomic(cfg.pd, a.rkey, a.va, |old| {
                        if cas {
                            if old == a.compare { a.swap_add } else { old }
                        } else {
                            old.wrapping_add(a.swap_add)
                        }
                    })
                    .map_err(|_| (NAK_ACCESS, m.first))?;
                self.keep(
                    cfg,
                    Kept {
                        msn,
                        first: m.first,
                        reth: None,
                        len: 8,
                        orig: Some(orig),
                    },
                );
                self.jobs.push_back(Job::AtomicAck {
                    first: m.first,
                    orig,
                    echo,
                });
            }
            (Opcode::MP_WRITE_IMM, _) => {
                if let Some(wr) = &m.wr {
                    cfg.complete_recv(env, wc(wr.wr_id, WcOpcode::RecvRdmaWithImm, m.imm, None));
                }
            }
            (Opcode::MP_SEND | Opcode::MP_SEND_IMM | Opcode::MP_SEND_INV, _) => {
                let Some(wr) = &m.wr else { return Ok(()) };
                let mut inv = None;
                if let Some(rkey) = m.ieth {
                    // MR-MPP-9: invalidation at completion; MR-MPP-15: its
                    // failure's NAK names the message's last PSN.
                    if env.mem.invalidate(cfg.pd, rkey).is_err() {
                        // MR-RSP-10: the receive completes REM_INV_REQ_ERR.
                        let mut e = wc(wr.wr_id, WcOpcode::Recv, m.imm, None);
                        e.status = WcStatus::RemInvReqErr;
                        cfg.complete_recv(env, e);
                        return Err((NAK_INVALID, m.first + u64::from(m.npkts) - 1));
                    }
                    inv = Some(rkey);
                }
                cfg.complete_recv(env, wc(wr.wr_id, WcOpcode::Recv, m.imm, inv));
            }
            _ => {}
        }
        Ok(())
    }

    /// MR-MPR-10: the last `max_dest_rd_atomic` READs and atomics.
    fn keep(&mut self, cfg: &QpConfig, k: Kept) {
        self.kept.push_back(k);
        while self.kept.len() > usize::from(cfg.max_dest_rd_atomic.max(1)) {
            self.kept.pop_front();
        }
    }

    /// MR-MPR-9: a re-request (or retransmission) of a kept READ, whose
    /// range [`follow_up_range_ok`] has accepted.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reread(
        &mut self,
        cfg: &QpConfig,
        msn: u64,
        offset: u32,
        read_len: u32,
        r: RethRepr,
        echo: Trigger,
        env: &mut Env<'_>,
    ) {
        let Some(k) = self.kept.iter().find(|k| {
            k.msn == msn
                && k.len == read_len
                && k.reth.is_some_and(|kr| kr.va == r.va && kr.rkey == r.rkey)
        }) else {
            return;
        };
        let first = k.first;
        let data = if r.dma_len == 0 {
            Ok(Vec::new())
        } else {
            env.mem.remote_read(
                cfg.pd,
                r.rkey,
                r.va.wrapping_add(u64::from(offset)),
                u64::from(r.dma_len),
            )
        };
        match data {
            Ok(data) => self.jobs.push_back(Job::Read {
                msn: msn as u32 & 0xFF_FFFF,
                first,
                read_len,
                offset,
                data,
                next: 0,
                // MR-MPH-2: R as the request (a further part, MR-MPR-11, is
                // not a re-request).
                echo,
            }),
            Err(_) => self.fatal(cfg, env, NAK_ACCESS, first, Some(&echo)),
        }
    }

    /// MR-MPP-15: the NAK leaves before the QP enters ERR. It echoes the
    /// packet being handled (MR-MPA-6), or nothing (entropy and timestamp
    /// 0) when no packet triggered it.
    pub(super) fn fatal(
        &mut self,
        cfg: &QpConfig,
        env: &mut Env<'_>,
        syndrome: u8,
        at: u64,
        echo: Option<&Trigger>,
    ) {
        let t = Trigger {
            idx: Some(at),
            entropy: echo.map_or(0, |e| e.entropy),
            ts: echo.map_or(0, |e| e.ts),
            ce: echo.is_some_and(|e| e.ce),
            retx: echo.is_some_and(|e| e.retx),
            trimmed: echo.is_some_and(|e| e.trimmed),
            syndrome,
            nak_base: Some(at),
            probe: false,
        };
        self.jobs.push_back(Job::Ack(t));
        if let Some(path) = cfg.path() {
            while let Some(frame) = self.next_packet(path, cfg.pmtu) {
                env.urgent.push_back(frame);
            }
        }
        let _ = NAK_OPERATIONAL;
        env.enter_err = true;
    }
}

fn exec_msg(
    op: Opcode,
    len: u32,
    reth: Option<RethRepr>,
    idx: u64,
    echo: Trigger,
    atomic: Option<metaroce_codec::ext::AtomicEthRepr>,
) -> Msg {
    Msg {
        opcode: op,
        len,
        reth,
        imm: None,
        ieth: None,
        first: idx,
        npkts: 1,
        placed: vec![true],
        placed_count: 1,
        wr: None,
        staged: Vec::new(),
        exec: Some(Exec { atomic, echo }),
        ordered: false, // executed in MSN order anyway (MR-MPP-7)
    }
}

/// Places SEND bytes at `offset` of a receive work request (MR-MPP-4).
fn place_send(
    cfg: &QpConfig,
    env: &mut Env<'_>,
    wr: &crate::wr::RecvWr,
    offset: u32,
    data: &[u8],
) -> Result<(), u8> {
    let capacity: u64 = wr.sg_list.iter().map(|s| u64::from(s.len)).sum();
    if u64::from(offset) + data.len() as u64 > capacity {
        return Err(NAK_INVALID);
    }
    env.mem
        .check_local(cfg.pd, &wr.sg_list, true)
        .and_then(|()| {
            env.mem
                .scatter(cfg.pd, &wr.sg_list, u64::from(offset), data)
        })
        .map_err(|_| NAK_OPERATIONAL)
}

/// MR-MPR-9, MR-MPR-12 (SPEC v1.2 §7.9): the range a READ follow-up asks for
/// starts at a multiple of PMTU inside the read and is a nonzero multiple of
/// PMTU long unless it ends the read (a zero-length READ's only range is its
/// empty first request). A follow-up asking for another range matches no
/// kept READ: it is dropped, not answered and not acknowledged.
pub(super) fn follow_up_range_ok(pmtu: u32, offset: u32, dma_len: u32, read_len: u32) -> bool {
    let end = u64::from(offset) + u64::from(dma_len);
    offset.is_multiple_of(pmtu)
        && (dma_len.is_multiple_of(pmtu) || end == u64::from(read_len))
        && end <= u64::from(read_len)
        && (offset < read_len || read_len == 0)
        && (dma_len > 0 || read_len == 0)
}
