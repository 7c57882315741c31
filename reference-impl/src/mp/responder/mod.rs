//! The MP responder (SPEC §7.5, §7.6, §7.9–§7.11, §7.14, §7.15): places
//! packets as they arrive, completes messages in MSN order, executes READs
//! and atomics once every earlier message is placed, and acknowledges with
//! SACKETH.

mod ack;
mod place;

use super::config::{Dscps, MpConfig};
use super::entropy::EntropySet;
use super::sack::{PsnClass, RecvMap};
use crate::qp_config::{Env, QpConfig, flushed_recv};
use crate::rx::RxPacket;
use crate::wire::ECN_CE;
use crate::wr::RecvWr;
use ack::{Job, Trigger};
use metaroce_codec::Opcode;
use metaroce_codec::ext::{AtomicEthRepr, RethRepr};
use std::collections::{BTreeMap, VecDeque};

/// A message not yet completed, learnt from any of its packets.
#[derive(Clone, Debug)]
pub(crate) struct Msg {
    pub opcode: Opcode,
    pub len: u32,
    pub reth: Option<RethRepr>,
    pub imm: Option<u32>,
    pub ieth: Option<u32>,
    /// PSN index of the message's first packet.
    pub first: u64,
    /// Packets (1 for READ and atomics).
    pub npkts: u32,
    pub placed: Vec<bool>,
    pub placed_count: u32,
    /// The receive work request, once determined (§7.5).
    pub wr: Option<RecvWr>,
    /// SEND payloads received before the work request was determined.
    pub staged: Vec<(u32, Vec<u8>)>,
    /// READ / atomic request stored for execution (MR-MPA-9).
    pub exec: Option<Exec>,
    /// MPETH O (SPEC v1.2 §7.5): its packets are kept in `staged` until
    /// every earlier message is entirely placed (MR-MPP-20).
    pub ordered: bool,
}

/// A READ or atomic request waiting for execution.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exec {
    pub atomic: Option<AtomicEthRepr>,
    pub echo: Trigger,
}

/// A READ or atomic kept in responder resources (MR-MPR-10).
#[derive(Clone, Debug)]
pub(crate) struct Kept {
    pub msn: u64,
    pub first: u64,
    pub reth: Option<RethRepr>,
    pub len: u32,
    /// The original value of an executed atomic.
    pub orig: Option<u64>,
}

impl Msg {
    fn consumes(&self) -> bool {
        matches!(
            self.opcode,
            Opcode::MP_SEND | Opcode::MP_SEND_IMM | Opcode::MP_SEND_INV | Opcode::MP_WRITE_IMM
        )
    }

    fn is_write(&self) -> bool {
        matches!(self.opcode, Opcode::MP_WRITE | Opcode::MP_WRITE_IMM)
    }

    /// Where its bytes go is known: a WRITE, or a SEND whose receive work
    /// request is determined.
    fn has_target(&self) -> bool {
        self.is_write() || self.wr.is_some()
    }

    /// Every byte placed, none held (MR-MPP-20's "entirely placed"); a
    /// READ or atomic counts once executed, when it leaves `msgs`.
    fn entirely_placed(&self) -> bool {
        self.exec.is_none()
            && self.placed_count == self.npkts
            && self.staged.is_empty()
            && self.has_target()
    }
}

/// Responder state of one MP QP.
#[derive(Debug)]
pub(crate) struct MpResponder {
    pub(super) map: RecvMap,
    pub(super) msgs: BTreeMap<u64, Msg>,
    /// Unwrapped MSN of the next message to complete.
    pub(super) next_msn: u64,
    /// Next message whose receive work request is to be determined.
    pub(super) assign_msn: u64,
    /// The first message that found no receive work request (MR-MPP-17);
    /// every later receive-consuming message whose receive is determined
    /// finds none either (`MpResponder::recv_missing`).
    pub(super) blocked: Option<u64>,
    pub(super) rq: VecDeque<RecvWr>,
    pub(super) kept: VecDeque<Kept>,
    pub(super) jobs: VecDeque<Job>,
    /// Accepted packets not covered by an MP ACK, and the first's arrival.
    pub(super) uncovered: u32,
    pub(super) uncovered_since: u64,
    pub(super) last: Option<Trigger>,
    /// READ responses take values by rounds (§7.4, MR-MPS-3).
    pub(super) entropy: EntropySet,
    /// MP ACKs and MP Atomic Acknowledges rotate over the set outside the
    /// rounds (§7.4, MR-MPS-9): the index of the next one's value.
    pub(super) ack_turn: usize,
    /// DSCPs of READ responses and acknowledgements (MR-MPT-9, MR-MPA-12).
    pub(super) dscps: Dscps,
    /// The time of the latest RNR NAK of each message not yet completed:
    /// at most one per RNR timer period per message (MR-MPP-17).
    pub(super) rnr_last: BTreeMap<u64, u64>,
    /// SEND payload bytes staged, and the limit (`mp_max_staged_bytes`).
    pub(super) staged_bytes: u64,
    pub(super) max_staged: u64,
    /// The peer announced RN: refusals get NAK 0x66 (MR-MPP-23).
    pub(super) peer_rn: bool,
    pub(super) coalesce_count: u32,
    pub(super) coalesce_time: u64,
    pub(super) now: u64,
    /// The device's bug-zoo mutant (feature `zoo`).
    #[cfg(feature = "zoo")]
    pub(super) mutant: Option<crate::zoo::Mutant>,
}

impl MpResponder {
    pub(crate) fn new(cfg: &QpConfig, mp: &MpConfig, seed: u64) -> Self {
        MpResponder {
            // zoo: mp-window-not-enforced — the window is the whole half-space.
            map: RecvMap::new(
                cfg.rq_psn,
                zoo!(cfg.mutant, MpWindowNotEnforced => (1 << 23) - 1, else mp.window),
            ),
            msgs: BTreeMap::new(),
            next_msn: 0,
            assign_msn: 0,
            blocked: None,
            rq: VecDeque::new(),
            kept: VecDeque::new(),
            jobs: VecDeque::new(),
            uncovered: 0,
            uncovered_since: 0,
            last: None,
            entropy: EntropySet::new(mp.values.clone(), seed ^ 0x5A5A),
            ack_turn: 0,
            dscps: mp.dscps(),
            rnr_last: BTreeMap::new(),
            staged_bytes: 0,
            max_staged: mp.max_staged_bytes,
            peer_rn: mp.peer_resource_nak,
            coalesce_count: u32::from(mp.tuning.ack_coalesce_count),
            coalesce_time: mp.tuning.ack_coalesce_time_ns,
            now: 0,
            #[cfg(feature = "zoo")]
            mutant: cfg.mutant,
        }
    }

    pub(crate) fn post_recv(&mut self, cfg: &QpConfig, wr: RecvWr, env: &mut Env<'_>) {
        self.rq.push_back(wr);
        if self.blocked.is_some() {
            self.blocked = None;
            self.progress(cfg, env);
        }
    }

    pub(crate) fn recv_depth(&self) -> usize {
        self.rq.len() + self.msgs.values().filter(|m| m.wr.is_some()).count()
    }

    pub(crate) fn responses_queued(&self) -> usize {
        self.jobs.len()
    }

    /// Flushes receive work requests in posting order (MR-QP-6): those
    /// already determined for messages first.
    pub(crate) fn flush(&mut self, cfg: &QpConfig, env: &mut Env<'_>) {
        let assigned: Vec<RecvWr> = self.msgs.values_mut().filter_map(|m| m.wr.take()).collect();
        for wr in assigned.into_iter().chain(self.rq.drain(..)) {
            cfg.complete_recv(env, flushed_recv(wr.wr_id));
        }
        self.msgs.clear();
        self.jobs.clear();
        self.uncovered = 0;
        self.staged_bytes = 0;
    }

    /// The coalescing deadline (MR-MPA-2).
    pub(crate) fn poll_timeout(&self) -> Option<u64> {
        (self.uncovered > 0).then_some(self.uncovered_since + self.coalesce_time)
    }

    pub(crate) fn handle_timeout(&mut self, now: u64) {
        if self.uncovered > 0 && self.uncovered_since + self.coalesce_time <= now {
            if let Some(t) = self.last {
                self.push_ack(t);
            }
            self.uncovered = 0;
        }
    }

    /// A request packet (or probe) on an MP QP that accepts requests.
    pub(crate) fn handle_request(&mut self, cfg: &QpConfig, pkt: &RxPacket<'_>, env: &mut Env<'_>) {
        self.now = env.now;
        let Some(m) = pkt.ext.mpeth else { return };
        let echo = Trigger {
            idx: None,
            entropy: pkt.udp_src_port,
            ts: m.timestamp,
            ce: pkt.ecn == ECN_CE,
            retx: m.retransmission,
            trimmed: false,
            syndrome: ack::ACK_SYNDROME,
            nak_base: None,
            probe: false,
        };
        if pkt.bth.opcode == Opcode::MP_PROBE {
            // zoo: mp-probe-unanswered
            zoo!(cfg.mutant, MpProbeUnanswered => return);
            // MR-MPF-5, MR-MPF-6: an MP ACK, no state change.
            return self.push_ack(Trigger {
                probe: true,
                ..echo
            });
        }
        let class = self.map.classify(pkt.bth.psn);
        if pkt.trimmed {
            env.counters.mp_trimmed_received += 1;
            // MR-MPT-2, MR-MPT-5: never placed; NAK 0x65 or a duplicate.
            if let PsnClass::New(idx) = class {
                return self.push_ack(Trigger {
                    trimmed: true,
                    syndrome: 0x65,
                    nak_base: Some(idx),
                    idx: Some(idx),
                    ..echo
                });
            }
        }
        match class {
            PsnClass::OutOfWindow => env.counters.mp_out_of_window += 1, // MR-MPW-1
            PsnClass::Duplicate => {
                env.counters.duplicate_requests += 1;
                self.duplicate(cfg, pkt, echo, env);
            }
            PsnClass::New(idx) => {
                let t = Trigger {
                    idx: Some(idx),
                    ..echo
                };
                self.accept(cfg, pkt, idx, t, env);
            }
        }
    }

    /// Marks PSNs received and applies the ACK policy (MR-MPA-1, MR-MPA-2).
    pub(super) fn received(&mut self, idx: u64, n: u32, t: Trigger, ack_req: bool) {
        let (opens, fills) = self.map.mark(idx, n);
        self.last = Some(t);
        if ack_req || opens || fills || t.ce {
            return self.push_ack(t);
        }
        if self.uncovered == 0 {
            self.uncovered_since = self.now;
        }
        self.uncovered += 1;
        if self.uncovered >= self.coalesce_count {
            self.push_ack(t);
        }
    }

    /// MR-MPW-3, MR-MPR-9, MR-MPP-12: duplicates are acknowledged, never
    /// placed again; kept READs and atomics are answered again.
    fn duplicate(&mut self, cfg: &QpConfig, pkt: &RxPacket<'_>, echo: Trigger, env: &mut Env<'_>) {
        let Some(m) = pkt.ext.mpeth else { return };
        let msn = self.unwrap_msn(m.msn.value());
        let idx = self.map.index_of_old(pkt.bth.psn);
        // zoo: mp-replace-after-complete — a duplicate WRITE is placed again.
        zoo!(cfg.mutant, MpReplaceAfterComplete => crate::zoo::place_again(env.mem, cfg.pd, pkt));
        match pkt.bth.opcode {
            Opcode::MP_READ_REQUEST => {
                let Some(r) = pkt.ext.reth else { return };
                if !place::follow_up_range_ok(cfg.pmtu, m.offset, r.dma_len, m.msg_len) {
                    return; // MR-MPR-9, MR-MPR-12: dropped, not acknowledged
                }
                if let Some(msn) = msn {
                    self.reread(cfg, msn, m.offset, m.msg_len, r, echo, env);
                }
            }
            Opcode::MP_CMP_SWAP | Opcode::MP_FETCH_ADD => {
                let kept = msn.and_then(|msn| {
                    self.kept
                        .iter()
                        .find(|k| k.msn == msn && k.orig.is_some())
                        .cloned()
                });
                if let Some(k) = kept {
                    return self.jobs.push_back(Job::AtomicAck {
                        first: k.first,
                        orig: k.orig.unwrap_or(0),
                        echo,
                    });
                }
            }
            _ => {}
        }
        self.push_ack(Trigger { idx, ..echo });
    }

    /// The unwrapped MSN of a wire MSN not older than the next to complete.
    pub(super) fn unwrap_msn(&self, wire: u32) -> Option<u64> {
        let d = wire.wrapping_sub(self.next_msn as u32) & 0xFF_FFFF;
        if d < 1 << 23 {
            Some(self.next_msn + u64::from(d))
        } else {
            self.next_msn.checked_sub(u64::from((1 << 24) - d))
        }
    }

    /// The next response packet.
    pub(crate) fn poll_transmit(&mut self, cfg: &QpConfig) -> Option<Vec<u8>> {
        let path = cfg.path()?;
        self.next_packet(path, cfg.pmtu)
    }
}
