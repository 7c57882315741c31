//! MP READ and atomic requests: acceptance, execution once every earlier
//! message is placed (MR-MPP-7), READ responses and re-requests (§7.9),
//! atomics once per MSN (§7.14), and duplicates (MR-MPW-3).

use super::ack::AckReasons;
use super::placement::{MsgKind, StoredRequest};
use super::{KeptOp, MpResponder, Trigger};
use crate::model::OutOfLine;
use crate::model::mp::packets_for;
use crate::model::{Effect, Field, MpethSpec, Outcomes, PacketSpec};
use metaroce_codec::ext::Syndrome;
use metaroce_codec::{Opcode, Psn, RocePacket};

impl MpResponder {
    /// A new request packet (in window, not received, not trimmed).
    pub(crate) fn on_new(&mut self, p: &RocePacket<'_>, t: &Trigger) -> Outcomes {
        let now = self.now;
        let Some(m) = p.ext.mpeth else {
            return Outcomes::none().require(&["MR-MPH-1"], Effect::Drop { counter: None });
        };
        match MsgKind::of(p.bth.opcode) {
            Some(MsgKind::Send | MsgKind::Write) => self.on_new_data(p, &m, t, now),
            Some(MsgKind::Read) => self.on_new_read(p, t, now),
            Some(MsgKind::Atomic) => self.on_new_atomic(p, t, now),
            None => Outcomes::none().require(&["MR-OPC-3"], Effect::Drop { counter: None }),
        }
    }

    fn keep(&mut self, op: KeptOp) {
        // MR-MPR-10: the last max_dest_rd_atomic operations, oldest evicted.
        self.resources.push_back(op);
        while self.resources.len() > self.cfg.max_dest_rd_atomic {
            self.resources.pop_front();
        }
    }

    fn on_new_read(&mut self, p: &RocePacket<'_>, t: &Trigger, now: u64) -> Outcomes {
        let m = p.ext.mpeth.unwrap_or_default();
        let reth = p.ext.reth.unwrap_or_default();
        if m.offset != 0 {
            // A re-request for a READ never accepted matches no kept READ (MR-MPR-9).
            return Outcomes::none().require(&["MR-MPR-9"], Effect::Drop { counter: None });
        }
        // MR-MPH-12, MR-MPR-11 (SPEC v1.2): the first request asks for the
        // whole read or, for a read requested in parts, for a multiple of
        // PMTU shorter than it (at least one byte when the read has any).
        let part_ok = reth.dma_len == m.msg_len
            || (reth.dma_len > 0
                && reth.dma_len < m.msg_len
                && reth.dma_len.is_multiple_of(self.cfg.pmtu.max(1)));
        if m.msg_len > 1 << 31 || !part_ok || self.cfg.max_dest_rd_atomic == 0 {
            return self.fatal(
                &["MR-MPR-12", "MR-MPP-15"],
                Syndrome::NAK_INVALID_REQUEST,
                t,
            );
        }
        let Some(index) = self.msg_index(m.msn) else {
            return Outcomes::none().require(&["MR-MPP-8"], Effect::Drop { counter: None });
        };
        if m.msg_len > 0
            && self
                .check_key(reth.rkey, reth.va, u64::from(m.msg_len), |a| a.read)
                .is_none()
        {
            // MR-MPR-4 (MR-MPR-3: no check for length 0).
            return self.fatal(&["MR-MPR-4"], Syndrome::NAK_REMOTE_ACCESS, t);
        }
        if !self.record_message(index, p, &m) {
            return self.fatal(&["MR-MPP-3"], Syndrome::NAK_INVALID_REQUEST, t);
        }
        if let Some(msg) = self.messages.get_mut(&index) {
            msg.request = Some(StoredRequest {
                trigger: *t,
                opcode: p.bth.opcode,
                mpeth: m,
                reth: Some(reth),
                atomic: None,
            });
        }
        self.keep(KeptOp::Read {
            msn: m.msn,
            first_psn: p.bth.psn,
            va: reth.va,
            rkey: reth.rkey,
            len: m.msg_len,
            timestamp: m.timestamp,
        });
        // MR-MPR-2: all n reserved PSNs are received.
        let n = packets_for(m.msg_len, self.cfg.pmtu);
        let mark = self.received.mark(p.bth.psn, n);
        let why = AckReasons {
            ack_req: p.bth.ack_req,
            opens_gap: mark.opened_gap,
            fills_gap: mark.filled_gap,
            ecn_ce: t.ecn_ce,
            duplicate: false,
        };
        let out = self.progress(Outcomes::none());
        self.ack_policy(out, t, why, now)
    }

    fn on_new_atomic(&mut self, p: &RocePacket<'_>, t: &Trigger, now: u64) -> Outcomes {
        let m = p.ext.mpeth.unwrap_or_default();
        let a = p.ext.atomic_eth.unwrap_or_default();
        if !a.va.is_multiple_of(8) || self.cfg.max_dest_rd_atomic == 0 {
            return self.fatal(
                &["MR-ATOM-1", "MR-MPP-15"],
                Syndrome::NAK_INVALID_REQUEST,
                t,
            );
        }
        if self.check_key(a.rkey, a.va, 8, |x| x.atomic).is_none() {
            return self.fatal(&["MR-ATOM-2", "MR-MPP-15"], Syndrome::NAK_REMOTE_ACCESS, t);
        }
        let Some(index) = self.msg_index(m.msn) else {
            return Outcomes::none().require(&["MR-MPP-8"], Effect::Drop { counter: None });
        };
        if !self.record_message(index, p, &m) {
            return self.fatal(&["MR-MPP-3"], Syndrome::NAK_INVALID_REQUEST, t);
        }
        if let Some(msg) = self.messages.get_mut(&index) {
            msg.request = Some(StoredRequest {
                trigger: *t,
                opcode: p.bth.opcode,
                mpeth: m,
                reth: None,
                atomic: Some(a),
            });
        }
        self.keep(KeptOp::Atomic {
            msn: m.msn,
            psn: p.bth.psn,
            orig: None,
        });
        let mark = self.received.mark(p.bth.psn, 1);
        let why = AckReasons {
            ack_req: p.bth.ack_req,
            opens_gap: mark.opened_gap,
            fills_gap: mark.filled_gap,
            ecn_ce: t.ecn_ce,
            duplicate: false,
        };
        let out = self.progress(Outcomes::none());
        self.ack_policy(out, t, why, now)
    }

    /// Executes every stored READ or atomic whose earlier messages are all
    /// entirely placed (MR-MPP-7).
    pub(crate) fn execute_ready(&mut self, mut out: Outcomes) -> Outcomes {
        let mut index = self.completed;
        while let Some(msg) = self.messages.get(&index) {
            if matches!(msg.kind, MsgKind::Read | MsgKind::Atomic) && !msg.executed {
                let Some(req) = msg.request.clone() else {
                    break;
                };
                out = match msg.kind {
                    MsgKind::Read => {
                        let reth = req.reth.unwrap_or_default();
                        let specs = self.read_responses(
                            req.trigger.psn,
                            &req,
                            req.mpeth.offset,
                            reth.dma_len,
                        );
                        specs.into_iter().fold(out, |o, s| {
                            o.require(&["MR-MPR-1", "MR-MPP-7", "MR-MPR-3"], Effect::Send(s))
                        })
                    }
                    _ => self.execute_atomic(out, &req),
                };
                if let Some(msg) = self.messages.get_mut(&index) {
                    msg.executed = true;
                }
            }
            if !self.messages.get(&index).is_some_and(|m| m.is_placed()) {
                break;
            }
            index += 1;
        }
        out
    }

    fn execute_atomic(&mut self, out: Outcomes, req: &StoredRequest) -> Outcomes {
        let a = req.atomic.unwrap_or_default();
        let le = self.cfg.host_little_endian;
        let mut orig = None;
        if let Some((ri, off)) = self.check_key(a.rkey, a.va, 8, |x| x.atomic) {
            let mr = &mut self.memory[ri];
            if let Some(bytes) = mr.read(off, 8) {
                let arr: [u8; 8] = bytes.try_into().unwrap_or([0; 8]);
                let value = if le {
                    u64::from_le_bytes(arr)
                } else {
                    u64::from_be_bytes(arr)
                };
                let new = if req.opcode != Opcode::MP_CMP_SWAP {
                    Some(value.wrapping_add(a.swap_add))
                } else if a.compare == value {
                    Some(a.swap_add)
                } else {
                    None
                };
                if let Some(n) = new {
                    mr.write(off, &if le { n.to_le_bytes() } else { n.to_be_bytes() });
                }
                orig = Some(value);
            } else {
                // Unknown memory: the result is unknown as well.
                for b in mr.bytes.iter_mut().skip(off).take(8) {
                    *b = None;
                }
            }
        }
        for k in self.resources.iter_mut() {
            if let KeptOp::Atomic { msn, orig: o, .. } = k
                && *msn == req.mpeth.msn
            {
                *o = Some(orig);
            }
        }
        let spec = self.atomic_ack_spec(&req.trigger, orig);
        out.require(&["MR-MPP-13", "MR-MPP-12", "MR-ATOM-3"], Effect::Send(spec))
    }

    /// READ responses for bytes [o, o + d) of the read answered by `req`
    /// (MR-MPR-1, MR-MPR-3): PSN = original request PSN + offset / PMTU, MSN,
    /// offset, whole length, F, L, R (as the request); the timestamp is the
    /// request's plus a residence time (MR-MPR-14), left open.
    fn read_responses(&self, req_psn: Psn, req: &StoredRequest, o: u32, d: u32) -> Vec<PacketSpec> {
        let pmtu = self.cfg.pmtu.max(1);
        let m = req.mpeth;
        let reth = req.reth.unwrap_or_default();
        let first_psn = req_psn.sub(o / pmtu);
        let region = self.check_key(reth.rkey, reth.va, u64::from(m.msg_len), |a| a.read);
        let mut specs = Vec::new();
        let end = o.saturating_add(d).min(m.msg_len);
        let mut off = o;
        loop {
            let len = pmtu.min(end.saturating_sub(off));
            let payload = match region {
                Some((ri, base)) if len > 0 => self.memory[ri]
                    .read(base + off as usize, len as usize)
                    .map_or(Field::Any, Field::Exact),
                _ if len == 0 => Field::Exact(Vec::new()),
                _ => Field::Any,
            };
            specs.push(PacketSpec {
                psn: Field::Exact(first_psn.add(off / pmtu)),
                dest_qp: Field::Exact(self.remote_qpn),
                payload,
                udp_src_port: self.own_entropy(),
                mpeth: OutOfLine::new(MpethSpec {
                    first: Field::Exact(off == 0),
                    last: Field::Exact(off + len == m.msg_len),
                    retransmission: Field::Exact(m.retransmission),
                    msn: Field::Exact(m.msn),
                    offset: Field::Exact(off),
                    msg_len: Field::Exact(m.msg_len),
                    // MR-MPR-14 (SPEC v1.2): the request's timestamp advanced
                    // by a residence time the model cannot know (0 allowed).
                    timestamp: Field::Any,
                    dma_len: Field::Any,
                    // A reserved bit in a response (MR-MPH-7): not judged.
                    ordered: Field::Any,
                }),
                ..PacketSpec::opcode(Opcode::MP_READ_RESPONSE)
            });
            off += len;
            if off >= end {
                break;
            }
        }
        specs
    }

    /// A request whose PSN is at or before c or already received (MR-MPW-3):
    /// an MP ACK, no placement (MR-MPP-8); a READ re-request that matches a
    /// kept READ is answered for its range (MR-MPR-9); an executed atomic is
    /// acknowledged again with the kept value (MR-MPP-12).
    pub(crate) fn on_duplicate(&mut self, p: &RocePacket<'_>, t: &Trigger) -> Outcomes {
        let now = self.now;
        let m = p.ext.mpeth.unwrap_or_default();
        let mut out = Outcomes::none();
        match p.bth.opcode {
            Opcode::MP_READ_REQUEST => {
                let reth = p.ext.reth.unwrap_or_default();
                let pmtu = self.cfg.pmtu.max(1);
                let kept = self.resources.iter().find_map(|k| match *k {
                    KeptOp::Read {
                        msn,
                        first_psn,
                        va,
                        rkey,
                        len,
                        ..
                    } if msn == m.msn
                        && va == reth.va
                        && rkey == reth.rkey
                        && len == m.msg_len
                        && m.offset.is_multiple_of(pmtu)
                        // MR-MPR-9 (SPEC v1.2): a range that neither is a
                        // multiple of PMTU nor ends the read is dropped.
                        && (reth.dma_len.is_multiple_of(pmtu)
                            || u64::from(m.offset) + u64::from(reth.dma_len) == u64::from(len))
                        && u64::from(m.offset) + u64::from(reth.dma_len) <= u64::from(len)
                        // MR-MPR-9 (SPEC v1.2, AMBIGUITIES 50): a nonzero
                        // multiple of PMTU; only a zero-length READ asks
                        // for nothing.
                        && (reth.dma_len > 0 || len == 0)
                        && first_psn.add(m.offset / pmtu) == p.bth.psn =>
                    {
                        Some(first_psn)
                    }
                    _ => None,
                });
                let Some(first_psn) = kept else {
                    return Outcomes::none().require(&["MR-MPR-9"], Effect::Drop { counter: None });
                };
                let pending = self
                    .msg_index(m.msn)
                    .and_then(|i| self.messages.get(&i))
                    .is_some_and(|x| !x.executed);
                if !pending {
                    if m.msg_len > 0
                        && self
                            .check_key(reth.rkey, reth.va, u64::from(m.msg_len), |a| a.read)
                            .is_none()
                    {
                        return self.fatal(
                            &["MR-MPR-9", "MR-MPR-4"],
                            Syndrome::NAK_REMOTE_ACCESS,
                            t,
                        );
                    }
                    let req = StoredRequest {
                        trigger: *t,
                        opcode: p.bth.opcode,
                        mpeth: m,
                        reth: Some(reth),
                        atomic: None,
                    };
                    for s in self.read_responses(
                        first_psn.add(m.offset / pmtu),
                        &req,
                        m.offset,
                        reth.dma_len,
                    ) {
                        // MR-MPR-12: a further part (R clear) is answered
                        // like a re-request.
                        out = out.require(&["MR-MPR-9", "MR-MPR-12"], Effect::Send(s));
                    }
                }
            }
            Opcode::MP_CMP_SWAP | Opcode::MP_FETCH_ADD => {
                let kept = self.resources.iter().find_map(|k| match *k {
                    KeptOp::Atomic {
                        msn,
                        psn,
                        orig: Some(orig),
                    } if msn == m.msn && psn == p.bth.psn => Some(orig),
                    _ => None,
                });
                if let Some(orig) = kept {
                    let spec = self.atomic_ack_spec(t, orig);
                    out = out.require(&["MR-MPP-12"], Effect::Send(spec));
                }
            }
            _ => {}
        }
        // MR-MPP-8: nothing placed again; MR-MPW-3: acknowledged promptly.
        let why = AckReasons {
            duplicate: true,
            ..AckReasons::default()
        };
        self.ack_policy(out, t, why, now)
    }
}
