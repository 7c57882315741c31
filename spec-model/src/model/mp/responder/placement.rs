//! Per-message placement progress, header checks, placement of MP WRITE and
//! MP SEND data, and in-order completion (§7.5).

use super::ack::AckReasons;
use super::{MpResponder, Trigger};
use crate::model::mp::memory::{RecvQueue, RecvWr};
use crate::model::mp::packets_for;
use crate::model::{CompletionSpec, Effect, Field, Outcomes, SyndromeSpec, WcStatus};
use metaroce_codec::ext::{AtomicEthRepr, MpethRepr, RethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, Psn, RocePacket};
use std::collections::{BTreeMap, BTreeSet};

/// What kind of operation a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsgKind {
    /// MP SEND, SEND with Immediate, SEND with Invalidate.
    Send,
    /// MP WRITE, WRITE with Immediate.
    Write,
    /// MP READ.
    Read,
    /// MP Compare-Swap or Fetch-Add.
    Atomic,
}

impl MsgKind {
    /// The kind of an MP request opcode.
    pub fn of(op: Opcode) -> Option<Self> {
        Some(match op.0 {
            0xC0 | 0xC1 | 0xCB => MsgKind::Send,
            0xC2 | 0xC3 => MsgKind::Write,
            0xC4 => MsgKind::Read,
            0xC6 | 0xC7 => MsgKind::Atomic,
            _ => return None,
        })
    }
}

/// A READ or atomic request stored until every earlier message is placed
/// (MR-MPP-7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRequest {
    /// Echo information of the request.
    pub trigger: Trigger,
    /// Opcode of the request.
    pub opcode: Opcode,
    /// MPETH of the request.
    pub mpeth: MpethRepr,
    /// RETH (READ).
    pub reth: Option<RethRepr>,
    /// AtomicETH (atomics).
    pub atomic: Option<AtomicEthRepr>,
}

/// Placement progress of one message not yet completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MsgState {
    /// Opcode shared by every packet of the message.
    pub opcode: Opcode,
    /// Kind.
    pub kind: MsgKind,
    /// MPETH MSN.
    pub msn: Msn,
    /// MPETH message length.
    pub msg_len: u32,
    /// RETH of the message (WRITE, READ).
    pub reth: Option<RethRepr>,
    /// Immediate data.
    pub imm: Option<u32>,
    /// IETH R_Key.
    pub ieth: Option<u32>,
    /// Packets (PSNs) the message takes.
    pub npkts: u32,
    /// The message's last PSN (its first for a READ request or atomic
    /// plus the PSNs it takes, minus one).
    pub last_psn: Psn,
    /// Indexes (offset / PMTU) of packets placed.
    pub placed: BTreeSet<u32>,
    /// SEND payloads staged until the receive work request is known.
    pub staged: BTreeMap<u32, Vec<u8>>,
    /// The receive work request the message consumes, once determined.
    pub recv: Option<RecvWr>,
    /// READ or atomic: executed.
    pub executed: bool,
    /// READ or atomic: the request awaiting execution.
    pub request: Option<StoredRequest>,
    /// A packet of it carried MPETH O (SPEC v1.2 §7.5): on a responder that
    /// declares `mp_ordered_write`, its packets are staged until every
    /// earlier message is placed (MR-MPP-20).
    pub ordered: bool,
}

impl MsgState {
    /// Every byte placed (SEND, WRITE) or executed (READ, atomic).
    pub fn is_placed(&self) -> bool {
        match self.kind {
            MsgKind::Read | MsgKind::Atomic => self.executed,
            _ => self.placed.len() as u32 >= self.npkts && self.staged.is_empty(),
        }
    }

    /// A receive-consuming message (§1.3).
    pub fn consumes_receive(&self) -> bool {
        self.kind == MsgKind::Send || self.opcode == Opcode::MP_WRITE_IMM
    }
}

/// Where the receive work request of a message stands.
enum RecvLookup {
    /// An earlier incomplete message is still unknown (§7.5).
    Undetermined,
    /// The receive queue is unknown to the model.
    Unknown,
    /// Determined, but none posted (MR-MPP-17).
    Missing,
    /// Determined.
    Found(RecvWr),
}

/// The checks of MR-MPP-3 on an MP SEND or WRITE packet; `false` → NAK 0x61.
pub(crate) fn data_header_ok(pmtu: u32, p: &RocePacket<'_>, m: &MpethRepr) -> bool {
    let payload = p.payload.len() as u64;
    let offset = u64::from(m.offset);
    let len = u64::from(m.msg_len);
    let end = offset + payload;
    let write = MsgKind::of(p.bth.opcode) == Some(MsgKind::Write);
    pmtu != 0
        && offset.is_multiple_of(u64::from(pmtu))
        && end <= len
        && (m.last || payload == u64::from(pmtu))
        && m.first == (offset == 0)
        && m.last == (end == len)
        && len <= 1 << 31
        && (!write || p.ext.reth.is_some_and(|r| r.dma_len == m.msg_len))
}

impl MpResponder {
    /// Checks a packet against the record of its message (MR-MPP-3: opcode,
    /// length and RETH must match earlier packets of the same MSN), creating
    /// the record for the message's first packet seen.
    pub(crate) fn record_message(&mut self, index: u64, p: &RocePacket<'_>, m: &MpethRepr) -> bool {
        let kind = MsgKind::of(p.bth.opcode).unwrap_or(MsgKind::Send);
        let reth = p.ext.reth;
        if let Some(msg) = self.messages.get_mut(&index) {
            msg.ordered |= m.ordered;
            return msg.opcode == p.bth.opcode && msg.msg_len == m.msg_len && msg.reth == reth;
        }
        let npkts = match kind {
            MsgKind::Atomic => 1,
            _ => packets_for(m.msg_len, self.cfg.pmtu),
        };
        self.messages.insert(
            index,
            MsgState {
                opcode: p.bth.opcode,
                kind,
                msn: m.msn,
                msg_len: m.msg_len,
                reth,
                imm: p.ext.immdt.map(|i| i.value),
                ieth: p.ext.ieth.map(|i| i.rkey),
                npkts,
                last_psn: p
                    .bth
                    .psn
                    .add((npkts.max(1) - 1).saturating_sub(m.offset / self.cfg.pmtu.max(1))),
                placed: BTreeSet::new(),
                staged: BTreeMap::new(),
                recv: None,
                executed: false,
                request: None,
                ordered: m.ordered,
            },
        );
        true
    }

    /// A fatal NAK (§7.15, MR-MPP-15) for the packet `t`, then ERR.
    pub(crate) fn fatal(
        &mut self,
        reqs: &'static [&'static str],
        syndrome: Syndrome,
        t: &Trigger,
    ) -> Outcomes {
        let spec = self.nak_spec(syndrome, t);
        self.error = true;
        Outcomes::none()
            .require(reqs, Effect::Send(spec))
            .require(&["MR-MPP-15"], Effect::EnterError)
    }

    /// R_Key, access and bounds check (MR-MPP-2, MR-MPR-4, MR-SEC-4, MR-SEC-5,
    /// MR-SEC-8): the index of the region and the offset of `va` in it.
    pub(crate) fn check_key(
        &self,
        rkey: u32,
        va: u64,
        len: u64,
        need: fn(&super::super::Access) -> bool,
    ) -> Option<(usize, usize)> {
        self.memory.iter().enumerate().find_map(|(i, mr)| {
            if mr.key != rkey || mr.invalid || !need(&mr.access) {
                return None;
            }
            mr.offset_of(va, len).map(|off| (i, off))
        })
    }

    fn recv_lookup(&self, index: u64) -> RecvLookup {
        let mut k = 0usize;
        for j in self.completed..index {
            match self.messages.get(&j) {
                None => return RecvLookup::Undetermined,
                Some(m) if m.consumes_receive() => k += 1,
                Some(_) => {}
            }
        }
        match &self.recv_queue {
            RecvQueue::Unknown => RecvLookup::Unknown,
            RecvQueue::Known(q) => q
                .get(k)
                .cloned()
                .map_or(RecvLookup::Missing, RecvLookup::Found),
        }
    }

    /// A new (in-window, not received, not trimmed) MP SEND or WRITE packet.
    pub(crate) fn on_new_data(
        &mut self,
        p: &RocePacket<'_>,
        m: &MpethRepr,
        t: &Trigger,
        now: u64,
    ) -> Outcomes {
        if !data_header_ok(self.cfg.pmtu, p, m) {
            return self.fatal(&["MR-MPP-3"], Syndrome::NAK_INVALID_REQUEST, t);
        }
        let Some(index) = self.msg_index(m.msn) else {
            // A new PSN of a message already completed: never placed again.
            return Outcomes::none().require(&["MR-MPP-8"], Effect::Drop { counter: None });
        };
        // A packet refused for lack of resources leaves the state as if it
        // had not arrived (MR-MPP-23): the message it alone made known is
        // forgotten then.
        let created = !self.messages.contains_key(&index);
        if !self.record_message(index, p, m) {
            return self.fatal(&["MR-MPP-3"], Syndrome::NAK_INVALID_REQUEST, t);
        }
        let pkt = m.offset / self.cfg.pmtu.max(1);
        let mut out = Outcomes::none();
        let kind = self.messages.get(&index).map(|x| x.kind);
        let hold = self.held(index);
        if kind == Some(MsgKind::Write) {
            let reth = p.ext.reth.unwrap_or_default();
            let mut region = None;
            if reth.dma_len > 0 {
                // MR-MPP-2 / MR-SEC-5: the whole message range, before any byte.
                match self.check_key(reth.rkey, reth.va, u64::from(reth.dma_len), |a| a.write) {
                    Some(r) => region = Some(r),
                    None => {
                        return self.fatal(
                            &["MR-MPP-2", "MR-SEC-5"],
                            Syndrome::NAK_REMOTE_ACCESS,
                            t,
                        );
                    }
                }
            }
            // MR-MPP-17: a WRITE with Immediate whose receive is known
            // missing is refused before any byte is placed; packets placed
            // earlier stay placed and acknowledged.
            if self
                .messages
                .get(&index)
                .is_some_and(|x| x.consumes_receive())
                && let RecvLookup::Missing = self.recv_lookup(index)
            {
                return self.refuse_rnr(index, t, now);
            }
            if hold {
                // MR-MPP-20: staged, or refused when staging is full.
                if let Some(refused) = self.stage_ordered(index, pkt, p, t) {
                    return self.forget_refused(created, index, refused);
                }
            } else if let Some((ri, base)) = region
                && !p.payload.is_empty()
            {
                let off = base + m.offset as usize;
                let mr = &mut self.memory[ri];
                mr.write(off, p.payload);
                out = out.require(
                    &["MR-MPP-1"],
                    Effect::Write {
                        key: mr.key,
                        offset: off as u64,
                        bytes: p.payload.to_vec(),
                    },
                );
            }
            if let Some(msg) = self.messages.get_mut(&index)
                && !hold
            {
                msg.placed.insert(pkt);
            }
        } else {
            match self.recv_lookup(index) {
                RecvLookup::Missing => return self.refuse_rnr(index, t, now),
                _ if hold => {
                    if let Some(refused) = self.stage_ordered(index, pkt, p, t) {
                        return self.forget_refused(created, index, refused);
                    }
                }
                RecvLookup::Undetermined => {
                    let len = p.payload.len() as u64;
                    if self.staged_bytes + len > self.cfg.max_staged_bytes
                        || self.cfg.max_staged_bytes == 0
                    {
                        // MR-MPP-4 / MR-MPP-5: neither placed nor staged, so
                        // not received and not acknowledged; MR-MPP-23: NAK
                        // 0x66 only toward a requester that announced RN.
                        let ack = self.ack_spec(t);
                        let out =
                            Outcomes::none().allow(&["MR-MPP-4", "MR-MPP-5"], Effect::Send(ack));
                        let out = if self.cfg.resource_nak == Some(true) {
                            let nak = self.nak_spec(Syndrome::NAK_RESOURCE, t);
                            out.allow(&["MR-MPP-23", "MR-MPP-24"], Effect::Send(nak))
                        } else {
                            out
                        };
                        return self.forget_refused(created, index, out);
                    }
                    self.staged_bytes += len;
                    if let Some(msg) = self.messages.get_mut(&index) {
                        msg.staged.insert(pkt, p.payload.to_vec());
                    }
                }
                RecvLookup::Unknown => {
                    if let Some(msg) = self.messages.get_mut(&index) {
                        msg.placed.insert(pkt);
                    }
                }
                RecvLookup::Found(wr) => {
                    if u64::from(m.msg_len) > wr.len {
                        return self.recv_overflow(index, wr, t);
                    }
                    out = self.place_send(out, &wr, m.offset, p.payload);
                    if let Some(msg) = self.messages.get_mut(&index) {
                        msg.recv = Some(wr);
                        msg.placed.insert(pkt);
                    }
                }
            }
        }
        let completed = self.completed;
        self.rnr.retain(|&i, _| i >= completed);
        let mark = self.received.mark(p.bth.psn, 1);
        let why = AckReasons {
            ack_req: p.bth.ack_req,
            opens_gap: mark.opened_gap,
            fills_gap: mark.filled_gap,
            ecn_ce: t.ecn_ce,
            duplicate: false,
        };
        let out = self.progress(out);
        self.ack_policy(out, t, why, now)
    }

    /// MR-MPP-20: a packet of an ordered message that the responder, which
    /// declares `mp_ordered_write`, may not place yet, because an earlier
    /// message is not entirely placed (a READ or atomic: executed).
    fn held(&self, index: u64) -> bool {
        self.cfg.ordered_write
            && self.messages.get(&index).is_some_and(|m| m.ordered)
            && !(self.completed..index)
                .all(|i| self.messages.get(&i).is_some_and(MsgState::is_placed))
    }

    /// Stages a held packet of an ordered message as SEND data is staged
    /// (MR-MPP-5: exactly when it fits in `mp_max_staged_bytes`); `Some`:
    /// it does not fit and is refused, neither placed, staged nor
    /// acknowledged, as a SEND packet that does not fit (MR-MPP-5).
    fn stage_ordered(
        &mut self,
        index: u64,
        pkt: u32,
        p: &RocePacket<'_>,
        t: &Trigger,
    ) -> Option<Outcomes> {
        let len = p.payload.len() as u64;
        if self.staged_bytes + len > self.cfg.max_staged_bytes || self.cfg.max_staged_bytes == 0 {
            let ack = self.ack_spec(t);
            return Some(Outcomes::none().allow(&["MR-MPP-20", "MR-MPP-5"], Effect::Send(ack)));
        }
        self.staged_bytes += len;
        if let Some(msg) = self.messages.get_mut(&index) {
            msg.staged.insert(pkt, p.payload.to_vec());
        }
        None
    }

    /// MR-MPP-23 (SPEC v1.2 §7.16): a packet refused for lack of resources
    /// leaves the state as if it had not arrived, so the message state it
    /// `created` (nothing of it placed or staged) is removed: its opcode
    /// does not determine the receive work request of a later message.
    fn forget_refused(&mut self, created: bool, index: u64, out: Outcomes) -> Outcomes {
        if created
            && self
                .messages
                .get(&index)
                .is_some_and(|x| x.placed.is_empty() && x.staged.is_empty())
        {
            self.messages.remove(&index);
        }
        out
    }

    /// MR-MPP-4: SEND data goes at MPETH offset within the receive buffer.
    fn place_send(&mut self, out: Outcomes, wr: &RecvWr, offset: u32, data: &[u8]) -> Outcomes {
        if data.is_empty() {
            return out;
        }
        let off = wr.offset + u64::from(offset);
        if let Some(mr) = self.memory.iter_mut().find(|r| r.key == wr.key)
            && let Ok(o) = usize::try_from(off)
        {
            mr.write(o, data);
        }
        out.require(
            &["MR-MPP-4"],
            Effect::Write {
                key: wr.key,
                offset: off,
                bytes: data.to_vec(),
            },
        )
    }

    /// A SEND longer than its receive buffer: NAK 0x61 and REM_INV_REQ_ERR
    /// (the condition of §6.6 MR-RSP-8, signalled as MR-MPP-15 says).
    fn recv_overflow(&mut self, _index: u64, wr: RecvWr, t: &Trigger) -> Outcomes {
        let mut out = self.fatal(&["MR-MPP-15"], Syndrome::NAK_INVALID_REQUEST, t);
        out = out.require(
            &["MR-MPP-15"],
            Effect::Complete(CompletionSpec {
                wr: wr.wr,
                status: Field::Exact(WcStatus::RemInvReqErr),
                byte_len: Field::Any,
                imm: Field::Any,
            }),
        );
        out
    }

    /// No receive posted for a receive-consuming message (MR-MPP-17): refuse
    /// without placing or acknowledging; RNR NAK for the first refused packet,
    /// then at most one per RNR timer period.
    fn refuse_rnr(&mut self, index: u64, t: &Trigger, now: u64) -> Outcomes {
        let spec = self.rnr_spec(t);
        let out = Outcomes::none();
        match self.rnr.get(&index) {
            Some(&last) => {
                if now.saturating_sub(last) >= self.cfg.rnr_period_ns() {
                    out.allow(&["MR-MPP-17"], Effect::Send(spec))
                } else {
                    out
                }
            }
            None => {
                self.rnr.insert(index, now);
                self.counters.rnr_naks_sent += 1;
                out.require(&["MR-MPP-17"], Effect::Send(spec))
            }
        }
    }

    /// Runs placement of staged data, execution of READs and atomics and
    /// in-order completion until nothing changes.
    pub(crate) fn progress(&mut self, mut out: Outcomes) -> Outcomes {
        loop {
            let before = (self.completed, self.messages.clone());
            out = self.flush_staged(out);
            out = self.execute_ready(out);
            out = self.complete_in_order(out);
            if before == (self.completed, self.messages.clone()) {
                return out;
            }
        }
    }

    fn flush_staged(&mut self, mut out: Outcomes) -> Outcomes {
        let indexes: Vec<u64> = self
            .messages
            .iter()
            .filter(|(_, m)| !m.staged.is_empty())
            .map(|(&i, _)| i)
            .collect();
        for index in indexes {
            if self.held(index) {
                continue; // MR-MPP-20
            }
            if self.messages.get(&index).map(|m| m.kind) == Some(MsgKind::Write) {
                out = self.flush_ordered_write(out, index);
                continue;
            }
            let wr = match self.recv_lookup(index) {
                RecvLookup::Found(wr) => Some(wr),
                RecvLookup::Unknown => None,
                RecvLookup::Undetermined | RecvLookup::Missing => continue,
            };
            let staged = self
                .messages
                .get_mut(&index)
                .map(|m| std::mem::take(&mut m.staged))
                .unwrap_or_default();
            for (pkt, data) in staged {
                self.staged_bytes = self.staged_bytes.saturating_sub(data.len() as u64);
                if let Some(wr) = &wr {
                    let off = pkt.saturating_mul(self.cfg.pmtu);
                    out = self.place_send(out, wr, off, &data);
                }
                if let Some(m) = self.messages.get_mut(&index) {
                    m.placed.insert(pkt);
                    m.recv.clone_from(&wr);
                }
            }
        }
        out
    }

    /// MR-MPP-20: places the staged packets of an ordered WRITE once every
    /// earlier message is placed (its key was checked on arrival, MR-MPP-2).
    fn flush_ordered_write(&mut self, mut out: Outcomes, index: u64) -> Outcomes {
        let Some(m) = self.messages.get_mut(&index) else {
            return out;
        };
        let staged = std::mem::take(&mut m.staged);
        let reth = m.reth.unwrap_or_default();
        let region = self.check_key(reth.rkey, reth.va, u64::from(reth.dma_len), |a| a.write);
        for (pkt, data) in staged {
            self.staged_bytes = self.staged_bytes.saturating_sub(data.len() as u64);
            if let Some((ri, base)) = region
                && !data.is_empty()
            {
                let off = base + (pkt.saturating_mul(self.cfg.pmtu)) as usize;
                let mr = &mut self.memory[ri];
                mr.write(off, &data);
                out = out.require(
                    &["MR-MPP-20"],
                    Effect::Write {
                        key: mr.key,
                        offset: off as u64,
                        bytes: data,
                    },
                );
            }
            if let Some(m) = self.messages.get_mut(&index) {
                m.placed.insert(pkt);
            }
        }
        out
    }

    /// MR-MPP-6: complete the next message while it is entirely placed
    /// (executed, for READs and atomics); receive completions in MSN order
    /// with immediate data and invalidation at completion (MR-MPP-9).
    fn complete_in_order(&mut self, mut out: Outcomes) -> Outcomes {
        while let Some(msg) = self.messages.get(&self.completed) {
            if !msg.is_placed() {
                break;
            }
            let msg = msg.clone();
            if msg.consumes_receive() {
                let wr = match (&msg.recv, &mut self.recv_queue) {
                    (Some(wr), _) => Some(wr.wr),
                    (None, RecvQueue::Known(q)) => q.first().map(|w| w.wr),
                    (None, RecvQueue::Unknown) => None,
                };
                if let RecvQueue::Known(q) = &mut self.recv_queue
                    && !q.is_empty()
                {
                    q.remove(0);
                }
                self.recv_consumed += 1;
                // MR-MPP-9: invalidation at completion. A key naming no
                // valid region cannot be invalidated: MR-RSP-10 allows a
                // NAK 0x61 naming the message's last PSN (MR-MPP-15) with
                // REM_INV_REQ_ERR and ERR, or a plain completion.
                let mut status = Field::Exact(WcStatus::Success);
                if let Some(ieth) = msg.ieth {
                    if self.memory.iter().any(|r| r.key == ieth && !r.invalid) {
                        for mr in self.memory.iter_mut().filter(|r| r.key == ieth) {
                            mr.invalid = true;
                        }
                    } else {
                        status = Field::OneOf(vec![WcStatus::Success, WcStatus::RemInvReqErr]);
                        if let Some(t) = self.last_trigger {
                            let nak = self.sack_header(
                                Opcode::MP_ACK,
                                SyndromeSpec::Exact(Syndrome::NAK_INVALID_REQUEST),
                                msg.last_psn,
                                &t,
                            );
                            out = out
                                .allow(&["MR-MPP-15"], Effect::Send(nak))
                                .allow(&["MR-MPP-15"], Effect::EnterError);
                        }
                    }
                }
                if let Some(wr) = wr {
                    out = out.require(
                        &["MR-MPP-6", "MR-MPP-9", "MR-EXT-4"],
                        Effect::Complete(CompletionSpec {
                            wr,
                            status,
                            byte_len: if msg.kind == MsgKind::Send {
                                Field::Exact(msg.msg_len)
                            } else {
                                Field::Any
                            },
                            imm: if msg.imm.is_some() {
                                Field::Exact(msg.imm)
                            } else {
                                Field::Any
                            },
                        }),
                    );
                }
            }
            self.messages.remove(&self.completed);
            self.completed += 1;
        }
        out
    }
}
