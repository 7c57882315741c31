//! What an MP requester may or must send now: retransmissions of lost PSNs,
//! READ re-requests, the next new packet and probes (§7.3, §7.8, §7.9,
//! §7.12, §7.13).

use super::{LossCause, MpRequester, WrOp, WrState};
use crate::model::OutOfLine;
use crate::model::outcome::HeaderSpec;
use crate::model::{Effect, Field, MpethSpec, Outcomes, PacketSpec};
use metaroce_codec::{Msn, Opcode};

impl MpRequester {
    /// The entropy constraint of the next data packet (MR-MPS-3, MR-MPS-5,
    /// MR-MPS-6, MR-MPF-2, MR-MPF-8).
    pub fn entropy_field(&self, now: u64) -> Field<u16> {
        Field::OneOf(self.entropy.allowed_next(now).into_iter().collect())
    }

    /// The packet of work request `w` with MPETH offset `offset`: PSN, MSN,
    /// offset, length, F/L/R, AckReq, RETH DMA length (§7.2, §7.3,
    /// MR-MPH-2, MR-MPH-3, MR-MPH-9 to MR-MPH-13, MR-MPL-7).
    pub fn packet_spec(&self, w: &WrState, offset: u32, retx: bool, now: u64) -> PacketSpec {
        let p = self.cfg.pmtu.max(1);
        let len = w.wr.op.len();
        let last = match w.wr.op {
            WrOp::Read { .. } | WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. } => true,
            _ => offset + len.saturating_sub(offset).min(p) == len,
        };
        let dma_len = match w.wr.op {
            WrOp::Write { len, .. } => Field::Exact(len),
            // MR-MPH-12, MR-MPR-11: the whole read or a first part; a copy
            // asks for what the first request asked for.
            WrOp::Read { .. } => Field::Exact(self.first_read_len(w)),
            _ => Field::Any,
        };
        let last = match w.wr.op {
            WrOp::Read { len, .. } => self.first_read_len(w) == len,
            _ => last,
        };
        PacketSpec {
            psn: Field::Exact(self.psn(w.first_idx + u64::from(offset / p))),
            dest_qp: Field::Exact(self.remote_qpn),
            udp_src_port: self.entropy_field(now),
            headers: OutOfLine::new(HeaderSpec {
                ack_req: if last || retx {
                    Field::Exact(true)
                } else {
                    Field::Any
                },
                ..HeaderSpec::default()
            }),
            mpeth: OutOfLine::new(MpethSpec {
                first: Field::Exact(offset == 0),
                last: Field::Exact(last),
                retransmission: Field::Exact(retx),
                msn: Field::Exact(w.msn),
                offset: Field::Exact(offset),
                msg_len: Field::Exact(len),
                timestamp: Field::Any,
                dma_len,
                ordered: self.ordered_field(w),
            }),
            ..PacketSpec::opcode(w.wr.op.opcode())
        }
    }

    /// MPETH O of a packet of `w` (MR-MPP-21): never toward a peer that did
    /// not announce O; as the message's first packet had it; set on a
    /// fenced request sent before the earlier ones completed (MR-MPP-11);
    /// else the requester's choice.
    pub fn ordered_field(&self, w: &WrState) -> Field<bool> {
        if !self.cfg.peer_ordered {
            Field::Exact(false)
        } else if let Some(o) = w.ordered {
            Field::Exact(o)
        } else if self.fence_waits(w) {
            Field::Exact(true)
        } else {
            Field::Any
        }
    }

    /// `w` is fenced and an earlier work request has not completed
    /// (MR-MPP-11), so it may not go yet without O.
    pub(crate) fn fence_waits(&self, w: &WrState) -> bool {
        w.wr.fence && w.sent == 0 && self.wrs.keys().any(|&k| k < w.wr.wr)
    }

    /// MR-MPP-11 (SPEC v1.2): a fenced request may go at once with O only
    /// toward a peer that honours O and with no earlier READ or atomic
    /// incomplete (the fence of MR-REQ-8 keeps their data from being sent).
    pub(crate) fn fence_may_order(&self, w: &WrState) -> bool {
        self.cfg.peer_ordered
            && !self.wrs.range(..w.wr.wr).any(|(_, e)| {
                matches!(
                    e.wr.op,
                    WrOp::Read { .. } | WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. }
                )
            })
    }

    /// An MP Probe on `v` (MR-MPF-4): flags 0, MSN 0, offset 0, length 0,
    /// AckReq, BTH PSN = last PSN sent (or `sq_psn` − 1).
    pub fn probe_spec(&self, v: u16) -> PacketSpec {
        let psn = self
            .last_sent_idx
            .map_or(self.sq_psn.sub(1), |i| self.psn(i));
        PacketSpec {
            psn: Field::Exact(psn),
            dest_qp: Field::Exact(self.remote_qpn),
            udp_src_port: Field::Exact(v),
            headers: OutOfLine::new(HeaderSpec {
                ack_req: Field::Exact(true),
                // MR-MPA-12.
                dscp: self.cfg.control_dscp(),
                ..HeaderSpec::default()
            }),
            payload: Field::Exact(Vec::new()),
            mpeth: OutOfLine::new(MpethSpec {
                first: Field::Exact(false),
                last: Field::Exact(false),
                retransmission: Field::Exact(false),
                msn: Field::Exact(Msn::new(0)),
                offset: Field::Exact(0),
                msg_len: Field::Exact(0),
                timestamp: Field::Any,
                dma_len: Field::Any,
                ordered: Field::Exact(false),
            }),
            ..PacketSpec::opcode(Opcode::MP_PROBE)
        }
    }

    /// The DMA length of READ `w`'s first request: as sent, or, before it
    /// is sent, the whole read when it is at most [`Self::read_bound`] and
    /// that bound otherwise (MR-MPR-11).
    pub(crate) fn first_read_len(&self, w: &WrState) -> u32 {
        match &w.read {
            Some(r) if w.sent > 0 => r.first_len,
            _ => w.wr.op.len().min(self.read_bound()),
        }
    }

    /// A further part of READ `w` for bytes [off, off + len) (MR-MPR-11):
    /// as a re-request of that range, but with R clear.
    pub fn part_spec(&self, w: &WrState, off: u32, len: u32, now: u64) -> PacketSpec {
        let mut s = self.rerequest_spec(w, off, len, now);
        s.mpeth.retransmission = Field::Exact(false);
        s
    }

    /// A READ re-request for bytes [off, off + len) of READ `w` (MR-MPR-7).
    pub fn rerequest_spec(&self, w: &WrState, off: u32, len: u32, now: u64) -> PacketSpec {
        let mut s = self.packet_spec(w, off, true, now);
        s.mpeth.first = Field::Exact(off == 0);
        // MR-MPH-2 (SPEC v1.2): L exactly when the range reaches the end.
        if let Field::Exact(total) = s.mpeth.msg_len {
            s.mpeth.last = Field::Exact(u64::from(off) + u64::from(len) == u64::from(total));
        }
        s.mpeth.dma_len = Field::Exact(len);
        s
    }

    /// The first work request (posting order) with a packet not yet sent, and
    /// the offset of that packet.
    pub(crate) fn next_new(&self) -> Option<(&WrState, u32)> {
        self.wrs.values().find_map(|w| {
            let units = match w.wr.op {
                WrOp::Read { .. } | WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. } => 1,
                _ => w.npsn,
            };
            (w.sent < units).then_some((w, w.sent * self.cfg.pmtu))
        })
    }

    /// Everything that may or must be sent at `now`.
    ///
    /// Required: retransmissions of PSNs deemed lost and READ re-requests of
    /// missing ranges, while the congestion window allows (MR-MPL-3,
    /// MR-MPL-5, MR-MPT-6, MR-MPT-8, MR-MPR-7, MR-MPC-1). Allowed beyond
    /// cwnd (MR-MPC-10): those re-requests, and the retransmission of the
    /// oldest unacknowledged PSN while it is deemed lost. Allowed: the next
    /// new packet within cwnd (MR-MPC-1), the window (MR-MPW-2), fence
    /// (MR-MPP-11) and RNR wait (MR-MPP-18); probes whose time has come
    /// (MR-MPF-3) and a tail-loss probe (MR-MPL-10). Only the first listed
    /// data packet's entropy set is exact; the rest use the set as it stands
    /// now (the state after [`MpRequester::on_transmit`] refines it).
    pub fn next_packets(&self, now: u64) -> Outcomes {
        let mut out = Outcomes::none();
        if self.error {
            return out;
        }
        let cwnd = self.cc.cwnd;
        let mut inflight = self.bytes_in_flight();
        let fits = |inflight: u64, bytes: u64| inflight == 0 || inflight + bytes <= cwnd;
        let oldest = self.oldest_unacked();
        for (&idx, seg) in &self.segs {
            let Some(cause) = seg.lost else { continue };
            if cause == LossCause::Rnr && now < self.rnr_until {
                continue;
            }
            if cause == LossCause::Resource && !self.resource_due(idx, now) {
                continue;
            }
            // MR-MPC-10: the oldest unacknowledged PSN, deemed lost, may go
            // beyond cwnd (once: its retransmission clears `lost`).
            let exempt = oldest == Some(idx);
            if !exempt && !fits(inflight, u64::from(seg.len)) {
                break;
            }
            let Some(w) = self.wrs.get(&seg.wr) else {
                continue;
            };
            let mut spec = self.packet_spec(w, seg.offset, true, now);
            spec.psn = Field::Exact(self.psn(idx));
            let reqs: &'static [&'static str] = match cause {
                LossCause::Reorder => &["MR-MPL-3", "MR-MPL-7", "MR-MPC-1"],
                LossCause::Timeout => &["MR-MPL-5", "MR-MPL-7", "MR-MPC-1"],
                LossCause::Trimmed => &["MR-MPT-6", "MR-MPL-7", "MR-MPC-1"],
                LossCause::Rnr => &["MR-MPP-18", "MR-MPL-7"],
                LossCause::Resource => &["MR-MPP-25", "MR-MPL-7"],
            };
            if fits(inflight, u64::from(seg.len)) {
                out = out.require(reqs, Effect::Send(spec));
            } else {
                out = out.allow(&["MR-MPC-10", "MR-MPL-7"], Effect::Send(spec));
            }
            inflight += u64::from(seg.len);
        }
        for w in self.wrs.values() {
            let Some(r) = &w.read else { continue };
            for (first, last) in ranges(&r.missing) {
                let p = self.cfg.pmtu;
                let off = first * p;
                let end = ((last + 1) * p).min(w.wr.op.len());
                let len = end.saturating_sub(off);
                let spec = Effect::Send(self.rerequest_spec(w, off, len, now));
                // The range is already counted in flight (§7.12): it adds no
                // bytes, and may go beyond cwnd (MR-MPC-10).
                if fits(inflight, 0) {
                    out = out.require(&["MR-MPR-7", "MR-MPR-8", "MR-MPC-1"], spec);
                } else {
                    out = out.allow(&["MR-MPR-7", "MR-MPR-8", "MR-MPC-10"], spec);
                }
            }
        }
        // MR-MPR-11: further parts of READs that have executed (a response
        // arrived), each at most the bound and within cwnd.
        for w in self.wrs.values() {
            let Some(r) = &w.read else { continue };
            let len = w.wr.op.len();
            if w.sent == 0 || r.received.is_empty() || r.asked_to >= len {
                continue;
            }
            let part = (len - r.asked_to).min(self.read_bound());
            if fits(inflight, u64::from(part)) {
                out = out.allow(
                    &["MR-MPR-11", "MR-MPC-1"],
                    Effect::Send(self.part_spec(w, r.asked_to, part, now)),
                );
                inflight += u64::from(part);
            }
        }
        if let Some((w, offset)) = self.next_new() {
            let bytes = match w.wr.op {
                WrOp::Read { .. } => u64::from(self.first_read_len(w)),
                WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. } => 0,
                _ => u64::from(w.wr.op.len().saturating_sub(offset).min(self.cfg.pmtu)),
            };
            let idx = w.first_idx + u64::from(offset / self.cfg.pmtu.max(1));
            let fenced = self.fence_waits(w) && !self.fence_may_order(w);
            let in_window = (idx as i64 + w.npsn_tail(offset, self.cfg.pmtu) as i64 - 1)
                - self.cum_idx
                <= i64::from(self.cfg.window);
            if fits(inflight, bytes) && !fenced && in_window && now >= self.rnr_until {
                out = out.allow(
                    &["MR-MPC-1", "MR-MPW-2", "MR-MPP-11", "MR-MPH-10"],
                    Effect::Send(self.packet_spec(w, offset, false, now)),
                );
            }
        }
        for v in self.entropy.probes_due(now) {
            let outstanding = self
                .entropy
                .retired
                .get(&v)
                .and_then(|r| r.probe)
                .is_some_and(|(_, sent)| now < sent.saturating_add(self.entropy.retired[&v].wait));
            if !outstanding {
                out = out.allow(&["MR-MPF-3", "MR-MPF-4"], Effect::Send(self.probe_spec(v)));
            }
        }
        let srtt = self.rtt.srtt_or(&self.cfg);
        if self.segs.values().any(|s| !s.acked)
            && now >= self.last_ack_time.saturating_add(2 * srtt)
        {
            for v in self.entropy.eligible(now) {
                out = out.allow(&["MR-MPL-10"], Effect::Send(self.probe_spec(v)));
            }
        }
        out
    }
}

impl WrState {
    /// PSNs the unit starting at `offset` covers (n for a READ request).
    pub(crate) fn npsn_tail(&self, _offset: u32, _pmtu: u32) -> u32 {
        match self.wr.op {
            WrOp::Read { .. } => self.npsn,
            _ => 1,
        }
    }
}

/// Contiguous runs of a set of indexes, as (first, last) pairs.
pub(crate) fn ranges(set: &std::collections::BTreeSet<u32>) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &i in set {
        match out.last_mut() {
            Some((_, last)) if *last + 1 == i => *last = i,
            _ => out.push((i, i)),
        }
    }
    out
}
