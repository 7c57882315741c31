//! The differential target's judges of the MP conversation: A's MP QP (the
//! requester) posts work requests to B's MP QP (the responder).
//!
//! Two judges, both at capture points where what they see is certain:
//!
//! 1. **Requester** (A's port): A's MP requests as A sends them (frames
//!    A's timers sent during an `Advance` event are stamped with its start,
//!    and the judge's timestamp tolerance grows to the longest such span,
//!    which weakens the time-based parts of MR-MPL-4, MR-MPC-1 and
//!    MR-MPS-3 after long advances, never the PSN-based ones), and B's MP
//!    ACKs as A receives them (those the model's admission, §9.2, delivers
//!    to A's MP QP), go to the spec model's
//!    [`MpJudge`] (the judge of `metaroce check`), which applies the
//!    requester rules a capture at the requester shows: entropy set and
//!    coverage before repeat (MR-MPS-1, MR-MPS-3), retransmission only of
//!    PSNs not acknowledged, not before they can be deemed lost, with R
//!    and the original fields (MR-MPL-4, MR-MPL-6, MR-MPL-7), bytes in
//!    flight against `mp_cwnd_max` (MR-MPC-1, a lower bound on what is in
//!    flight), and the ACK content rules it can check from A's side. A
//!    capture at the requester stays sound when frames are lost between
//!    the peers (a request lost after A's port looks sent, as it was; an
//!    ACK lost before it was never received), so this judge runs in every
//!    mode, until a frame not from A reaches B's MP QP (an `Inject` event):
//!    B's answers to it would reach A as ACKs of PSNs A never sent. In
//!    `Inject` mode the link may reorder and duplicate B's ACKs, so the
//!    responder's ordering rules MR-MPA-3 and MR-MPA-5 are not judged there
//!    (the link does so whatever their UDP source port, so not even
//!    `AckOrder::AsCaptured`'s same-path rule holds; elsewhere the judge
//!    runs with `AckOrder::AsSent`: A receives B's ACKs in sending order). The
//!    ACK deadlines (MR-MPA-1, MR-MPA-2) need a capture at the responder
//!    and are not judged.
//! 2. **Responder** (B's port): what B's MP QP acknowledges is checked
//!    against what the harness handed it (every frame delivered to it that
//!    admission let through, injected ones included, so this judge runs in
//!    every mode):
//!    - the cumulative ACK PSN and every PSN the SACK bitmap reports
//!      received were delivered to B, within the receive window of the
//!      moment (MR-MPA-4, MR-MPW-1): the harness's cumulative PSN counts a
//!      delivered PSN as received even if B may have dropped it (a
//!      malformed frame), so it is never behind B's and a PSN it finds
//!      beyond `c + W` is beyond B's window too;
//!    - each MP ACK echoes the UDP source port and MPETH timestamp of a
//!      request delivered to B (MR-MPA-6);
//!    - each MP Probe delivered to B's MP QP in RTS draws an MP ACK echoing
//!      it within `mp_ack_prompt_max` (MR-MPF-5). (Late but sent counts as
//!      answered: the harness learns when B sent a frame only to within
//!      the event.)
//!    - a request whose PSN B has already acknowledged cumulatively (a
//!      duplicate, from A's retransmissions or the link's duplication), or
//!      whose PSN is beyond B's window for certain (injected), changes no
//!      byte of B's memory (MR-MPW-3, MR-MPP-8, MR-MPP-12, MR-MPW-1;
//!      `Judges::at_b`).
//!
//! Not judged: what B's MP QP placed and completed (the memory and
//! receive completions of MP messages; `reference_stateful`'s properties
//! cover bytes nobody addressed), READ responses and atomic results, the
//! exact SACK base and ACK timing of the responder's ACK policy (the MP
//! responder model, `model::mp::responder`, is not driven here), and the
//! congestion window below `mp_cwnd_max` (the judge cannot know the cwnd
//! from a capture; MR-MPC-7's changes stay in the judge's code paths).

use super::differential::local_qp;
use super::pair::{Kind, MP_CWND, MP_WINDOW, Pair, mp_entropy};
use metaroce_codec::{Frame, Opcode, ParseOptions, Psn, RocePacket, icrc};
use metaroce_spec::Severity;
use metaroce_spec::model::mp::judge::{AckOrder, CapturePoint, MpJudge, SenderClock};
use metaroce_spec::model::mp::{MpConfig, packets_for};
use metaroce_spec::model::receiver::{Receiver, Verdict, admit};
use std::collections::{BTreeMap, BTreeSet};

/// Most PSNs, echoes and probes the responder judge keeps; beyond, it
/// stops (bounded memory; stopping only makes the run judge less).
const MAX_KEPT: usize = 1 << 16;

/// A's MP requests kept for late duplicates.
const HISTORY: usize = 64;

const A: usize = 0;
const B: usize = 1;

/// What B's MP QP was handed in this connection.
#[derive(Clone, Debug)]
struct Responder {
    /// The harness's cumulative PSN: every PSN from B's first expected one
    /// up to here was delivered within the window.
    cum: Psn,
    /// PSNs beyond `cum` delivered within the window.
    received: BTreeSet<u32>,
    /// (UDP source port, MPETH timestamp) of every MP request delivered.
    echoes: BTreeSet<(u16, u32)>,
    /// Probes delivered to B in RTS and not yet answered: echo → (deadline, what).
    probes: BTreeMap<(u16, u32), (u64, String)>,
    /// The latest cumulative ACK PSN B sent: every PSN up to it B has
    /// received, so a request with such a PSN is a duplicate at B.
    acked: Option<Psn>,
}

impl Responder {
    fn new(rq_psn: Psn) -> Self {
        Responder {
            cum: rq_psn.sub(1),
            received: BTreeSet::new(),
            echoes: BTreeSet::new(),
            probes: BTreeMap::new(),
            acked: None,
        }
    }

    /// Whether B may report `q` received: at or before the harness's
    /// cumulative PSN, or delivered within the window.
    fn may_report(&self, q: Psn) -> bool {
        !q.is_after(self.cum) || self.received.contains(&q.value())
    }

    fn full(&self) -> bool {
        self.received.len() >= MAX_KEPT
            || self.echoes.len() >= MAX_KEPT
            || self.probes.len() >= MAX_KEPT
    }
}

/// The MP judges of one run.
#[derive(Debug)]
pub struct MpWatch {
    /// The requester judge at A's port; `None` once stopped.
    requester: Option<MpJudge>,
    /// The responder judge of B's MP QP; `None` once stopped.
    responder: Option<Responder>,
    /// Capture frames of the MP conversation.
    frames: u64,
    /// MP frames judged (requests and ACKs at A, ACKs at B).
    pub judged: u64,
    /// `mp_ack_prompt_max` (ns).
    prompt: u64,
    /// The link may reorder B's frames on their way to A (`Inject` mode):
    /// the responder's ordering rules MR-MPA-3 and MR-MPA-5 then do not
    /// hold at A's port, and the requester judge's findings of them are
    /// ignored.
    pub reordering: bool,
    /// The latest MP requests (not probes) A sent to B's MP QP, as sent,
    /// oldest first (at most [`HISTORY`]).
    history: std::collections::VecDeque<Vec<u8>>,
}

/// A's MP QP's parameters, as `Pair` connects it.
fn requester_config(pair: &Pair) -> MpConfig {
    MpConfig {
        pmtu: pair.pmtu,
        entropy_set: mp_entropy(A),
        window: MP_WINDOW,
        cwnd_init: MP_CWND,
        cwnd_max: MP_CWND,
        ..MpConfig::default()
    }
}

fn parse(wire: &[u8]) -> Option<Frame<'_>> {
    Frame::parse(wire, &ParseOptions::default()).ok()
}

/// An MP request opcode (what a requester sends, probes included).
fn is_request(op: Opcode) -> bool {
    op.is_mp()
        && op != Opcode::MP_READ_RESPONSE
        && op != Opcode::MP_ACK
        && op != Opcode::MP_ATOMIC_ACK
}

impl MpWatch {
    /// Judges of the MP connection as `pair` connected it.
    pub fn new(pair: &Pair) -> Self {
        let cfg = requester_config(pair);
        let prompt = cfg.ack_prompt_max;
        let mut requester = MpJudge::new(cfg, CapturePoint::Requester);
        // The harness hands the judge B's ACKs in the order B sent them,
        // except in `Inject` mode (`reordering`, below).
        requester.ack_order = AckOrder::AsSent;
        // A's MPETH stamps are its device time, the harness's time, and
        // B's ACKs are fed when A receives them: MR-MPL-6 compares the
        // stamp of a copy with its covering ACK directly (the capture
        // times of A's frames, taken at an `Advance`'s start, are not
        // needed for it).
        requester.sender_clock = SenderClock::Capture;
        let mut w = MpWatch {
            requester: Some(requester),
            responder: None,
            frames: 0,
            judged: 0,
            prompt,
            history: std::collections::VecDeque::new(),
            reordering: false,
        };
        w.responder = Some(Responder::new(w.rq_psn(pair)));
        w
    }

    /// B's MP QP's first expected PSN.
    fn rq_psn(&self, pair: &Pair) -> Psn {
        let b = &pair.nodes[B];
        Psn::new(
            b.dev
                .query_qp(b.qpn(Kind::Mp))
                .ok()
                .and_then(|i| i.attrs.rq_psn)
                .unwrap_or(0),
        )
    }

    /// Both ends of the MP connection reconnected: judging starts anew.
    pub fn reconnected(&mut self, pair: &Pair) {
        *self = MpWatch {
            judged: self.judged,
            reordering: self.reordering,
            ..MpWatch::new(pair)
        };
    }

    /// B's MP QP entered ERR by verbs: nothing it owes is due any more, and
    /// nothing delivered to it is received.
    pub fn b_err(&mut self) {
        if let Some(r) = &mut self.responder {
            r.probes.clear();
        }
    }

    /// A frame not from A reached B's MP QP: the requester judge stops (B's
    /// answers would acknowledge what A never sent).
    pub fn foreign_at_b(&mut self) {
        self.requester = None;
    }

    /// Whether `wire` is an MP frame to B's MP QP.
    pub fn to_b_mp(pair: &Pair, wire: &[u8]) -> bool {
        parse(wire)
            .and_then(|f| f.roce)
            .is_some_and(|p| p.bth.dest_qp == pair.nodes[B].qpn(Kind::Mp))
    }

    /// A frame A sent at `time`, or up to `late` ns after it: an MP request
    /// to B's MP QP goes to the requester judge, whose timestamp tolerance
    /// is the largest such uncertainty so far.
    pub fn a_sent(&mut self, pair: &Pair, wire: &[u8], time: u64, late: u64) -> Result<(), String> {
        let Some(j) = &mut self.requester else {
            return Ok(());
        };
        j.tolerance_ns = j.tolerance_ns.max(late);
        let Some(f) = parse(wire) else {
            return Ok(());
        };
        let (Some(p), Some(udp)) = (&f.roce, &f.udp) else {
            return Ok(());
        };
        if p.bth.dest_qp != pair.nodes[B].qpn(Kind::Mp) || !is_request(p.bth.opcode) {
            return Ok(());
        }
        self.frames += 1;
        self.judged += 1;
        if p.bth.opcode != Opcode::MP_PROBE {
            if self.history.len() >= HISTORY {
                self.history.pop_front();
            }
            self.history.push_back(wire.to_vec());
        }
        j.on_request(self.frames, p, udp.src_port, time);
        findings(j, wire, "A sent", self.reordering)
    }

    /// A frame handed to A at `now`: an MP ACK from B's MP QP that the
    /// model's admission (§9.2) delivers to A's MP QP goes to the requester
    /// judge. A frame admission drops (a bad ICRC, or a bad IPv4 header
    /// checksum or length after `Inject` mode's corruption of a byte the
    /// ICRC does not cover) never reached A's MP QP: A acknowledged
    /// nothing by it (MR-MPA-10 applies only to what A received).
    pub fn a_received(&mut self, pair: &Pair, wire: &[u8], now: u64) -> Result<(), String> {
        let Some(j) = &mut self.requester else {
            return Ok(());
        };
        let Some(f) = parse(wire) else {
            return Ok(());
        };
        let (Some(p), Some(udp)) = (&f.roce, &f.udp) else {
            return Ok(());
        };
        let qpn = pair.nodes[A].qpn(Kind::Mp);
        if p.bth.dest_qp != qpn || p.ext.sacketh.is_none() {
            return Ok(());
        }
        let receiver = Receiver {
            vlan: false,
            mp: true,
            qps: BTreeMap::from([(qpn, local_qp(pair, A, Kind::Mp))]),
        };
        if !matches!(admit(&receiver, wire), Verdict::Deliver(d) if d.qpn == qpn) {
            return Ok(());
        }
        self.frames += 1;
        self.judged += 1;
        j.on_ack(self.frames, p, udp.src_port, now);
        findings(j, wire, "A received", self.reordering)
    }

    /// A frame admission delivered to B's MP QP at `now`, B's MP QP in RTS
    /// before it (`rts`).
    pub fn b_delivered(&mut self, wire: &[u8], now: u64, rts: bool, pmtu: u32) {
        let Some(r) = &mut self.responder else {
            return;
        };
        if !rts {
            return;
        }
        let Some(f) = parse(wire) else { return };
        let (Some(p), Some(udp)) = (&f.roce, &f.udp) else {
            return;
        };
        let Some(m) = p.ext.mpeth else { return };
        if !is_request(p.bth.opcode) {
            return;
        }
        let echo = (udp.src_port, m.timestamp);
        r.echoes.insert(echo);
        if p.bth.opcode == Opcode::MP_PROBE {
            r.probes
                .entry(echo)
                .or_insert((now.saturating_add(self.prompt), describe(p)));
        } else {
            // A READ request reserves n PSNs, received together (MR-MPR-2):
            // counted from either length it carries (more is only weaker).
            let span = if p.bth.opcode == Opcode::MP_READ_REQUEST {
                let dma = p.ext.reth.map_or(0, |r| r.dma_len);
                packets_for(m.msg_len, pmtu).max(packets_for(dma, pmtu))
            } else {
                1
            };
            for k in 0..span.min(MP_WINDOW) {
                let q = p.bth.psn.add(k);
                let d = q.distance(r.cum);
                if d != 0 && d <= MP_WINDOW {
                    r.received.insert(q.value());
                }
            }
            while r.received.remove(&r.cum.add(1).value()) {
                r.cum = r.cum.add(1);
            }
        }
        if r.full() {
            self.responder = None;
        }
    }

    /// A frame B sent: an MP ACK to A's MP QP is checked against what B
    /// was handed.
    pub fn b_sent(&mut self, pair: &Pair, wire: &[u8]) -> Result<(), String> {
        let Some(r) = &mut self.responder else {
            return Ok(());
        };
        let Some(f) = parse(wire) else {
            return Ok(());
        };
        let Some(p) = &f.roce else {
            return Ok(());
        };
        let Some(s) = p.ext.sacketh else {
            return Ok(());
        };
        if p.bth.dest_qp != pair.nodes[A].qpn(Kind::Mp) {
            return Ok(());
        }
        self.judged += 1;
        let what = || describe(p);
        let cum = p.bth.psn;
        if !r.may_report(cum) {
            return Err(format!(
                "MR-MPA-4, MR-MPW-1: B's {} acknowledges up to PSN {cum}, but PSN {} \
                 was not delivered to it within the window (cumulative PSN {})",
                what(),
                r.cum.add(1),
                r.cum
            ));
        }
        for i in 0..64u32 {
            let q = s.sack_base_psn.add(i);
            if s.is_sacked(q) && q.is_after(cum) && !r.may_report(q) {
                return Err(format!(
                    "MR-MPA-4, MR-MPW-1: B's {} reports PSN {q} received, which was not \
                     delivered to it within the window (cumulative PSN {}, beyond it {:?})",
                    what(),
                    r.cum,
                    r.received.iter().take(8).collect::<Vec<_>>()
                ));
            }
        }
        let echo = (s.echoed_entropy, s.echoed_timestamp);
        // A fatal NAK (0x61–0x63, §7.15) that no packet triggered (a posted
        // receive let a staged message be placed, and it did not fit)
        // echoes nothing: entropy and timestamp 0.
        let untriggered = (0x61..=0x63).contains(&s.syndrome.0) && echo == (0, 0);
        if !untriggered && !r.echoes.contains(&echo) {
            return Err(format!(
                "MR-MPA-6: B's {} echoes entropy {:#06x} timestamp {:#x}, which no request \
                 delivered to it carried",
                what(),
                echo.0,
                echo.1
            ));
        }
        r.probes.remove(&echo);
        if r.acked.is_none_or(|a| cum.is_after(a)) {
            r.acked = Some(cum);
        }
        Ok(())
    }

    /// Whether `wire`, an MP request (not a probe) to B's MP QP, must leave
    /// B's memory as it is, and why: a duplicate, whose PSN B has already
    /// acknowledged cumulatively, which B acknowledges again without
    /// placing or executing it (MR-MPW-3, MR-MPP-8, MR-MPP-12); or a PSN
    /// beyond B's receive window for certain (beyond the harness's
    /// cumulative PSN, never behind B's, plus W), which B drops without
    /// changing any state (MR-MPW-1).
    pub fn unchanging_at_b(&self, pair: &Pair, wire: &[u8]) -> Option<&'static str> {
        let r = self.responder.as_ref()?;
        let p = parse(wire)?.roce?;
        if p.bth.dest_qp != pair.nodes[B].qpn(Kind::Mp)
            || !is_request(p.bth.opcode)
            || p.bth.opcode == Opcode::MP_PROBE
            || p.ext.mpeth.is_none()
        {
            return None;
        }
        if let Some(acked) = r.acked
            && !p.bth.psn.is_after(acked)
            && acked.distance(p.bth.psn) < MP_WINDOW
        {
            return Some("MR-MPW-3, MR-MPP-8: a duplicate at B's MP QP (B acknowledged its PSN)");
        }
        let d = p.bth.psn.distance(r.cum);
        // Far enough below 2^23 that B's cumulative PSN, at most a window
        // behind the harness's, cannot make it an old PSN.
        (d > MP_WINDOW && d < (1 << 23) - 4 * MP_WINDOW)
            .then_some("MR-MPW-1: beyond B's MP receive window")
    }

    /// A copy of A's latest MP request moved beyond B's receive window for
    /// certain: PSN `k` past the harness's cumulative PSN plus W, MSN 8
    /// ahead (a message B has not completed), ICRC made valid. A
    /// well-formed request no requester sends (MR-MPW-2), which B must drop
    /// (MR-MPW-1); `Inject` events send it now and then, since random
    /// injected frames are seldom consistent enough to be placed.
    pub fn beyond_window(&self, k: u32) -> Option<Vec<u8>> {
        let cum = self.responder.as_ref()?.cum;
        let wire = self.history.back()?;
        let mut f = parse(wire)?;
        let roce = f.roce.as_mut()?;
        roce.bth.psn = cum.add(MP_WINDOW + 1 + k % 4);
        let m = roce.ext.mpeth.as_mut()?;
        m.msn = m.msn.add(8);
        icrc::fill(&mut f);
        let mut buf = vec![0; f.buffer_len()];
        let n = f.emit(&mut buf).ok()?;
        buf.truncate(n);
        Some(buf)
    }

    /// An old request of A's, as A sent it: a late duplicate (the network
    /// may duplicate and delay any frame), which B, if it has acknowledged
    /// its PSN, must not place or execute again (MR-MPW-3, MR-MPP-8,
    /// MR-MPP-12), even though the bytes it wrote were since overwritten.
    /// The oldest kept MP WRITE packet with payload, else the oldest kept
    /// request.
    pub fn late_duplicate(&self) -> Option<Vec<u8>> {
        self.history
            .iter()
            .find(|w| {
                parse(w).and_then(|f| f.roce).is_some_and(|p| {
                    matches!(p.bth.opcode, Opcode::MP_WRITE | Opcode::MP_WRITE_IMM)
                        && !p.payload.is_empty()
                })
            })
            .or(self.history.front())
            .cloned()
    }

    /// Probes B has not answered by `now` beyond `mp_ack_prompt_max`.
    pub fn probes_due(&mut self, now: u64) -> Result<(), String> {
        let Some(r) = &self.responder else {
            return Ok(());
        };
        match r.probes.iter().find(|(_, (due, _))| *due < now) {
            Some((_, (due, what))) => Err(format!(
                "MR-MPF-5: B's MP QP did not answer the {what} delivered to it by {due} ns \
                 (now {now} ns)"
            )),
            None => Ok(()),
        }
    }
}

/// Fails on the judge's MUST findings (but the ordering rules of B's ACKs
/// when the link reorders them).
fn findings(j: &mut MpJudge, wire: &[u8], at: &str, reordering: bool) -> Result<(), String> {
    match j.take_findings().into_iter().find(|(f, _)| {
        f.severity == Severity::Must && !(reordering && matches!(f.id, "MR-MPA-3" | "MR-MPA-5"))
    }) {
        Some((f, frames)) => Err(format!(
            "{}: {} (MP capture frames {frames:?}; {at} {})",
            f.id,
            f.message,
            parse(wire)
                .and_then(|f| f.roce.map(|p| describe(&p)))
                .unwrap_or_default()
        )),
        None => Ok(()),
    }
}

/// One line about an MP frame.
fn describe(p: &RocePacket<'_>) -> String {
    format!(
        "{} psn {} qp {:#x} ackreq {} {:?} {:?} {} bytes",
        p.bth.opcode,
        p.bth.psn,
        p.bth.dest_qp,
        p.bth.ack_req,
        p.ext.mpeth,
        p.ext.sacketh,
        p.payload.len()
    )
}

/// B's application rewrites the bytes an MP WRITE packet of A's placed
/// (each byte XOR 0x5A), as it may once the WRITE has completed: a late
/// duplicate of that packet placed again would then change them.
pub fn rewrite_target(pair: &mut Pair, wire: &[u8]) {
    let Ok(f) = Frame::parse(wire, &ParseOptions::default()) else {
        return;
    };
    let Some(p) = f.roce else { return };
    let (Some(r), Some(m)) = (p.ext.reth, p.ext.mpeth) else {
        return;
    };
    if !matches!(p.bth.opcode, Opcode::MP_WRITE | Opcode::MP_WRITE_IMM) || p.payload.is_empty() {
        return;
    }
    let b = &mut pair.nodes[B];
    let Some(mr) = b.mrs.iter().find(|x| x.info.rkey == r.rkey) else {
        return;
    };
    let (lkey, start, end) = (mr.info.lkey, mr.info.addr, mr.info.addr + mr.info.len);
    let va = r.va.wrapping_add(u64::from(m.offset));
    let len = p.payload.len() as u64;
    if va < start || va.saturating_add(len) > end {
        return;
    }
    let Ok(now) = b.dev.read_mr(lkey, va, len) else {
        return;
    };
    let flipped: Vec<u8> = now.iter().map(|x| x ^ 0x5A).collect();
    let _ = b.dev.write_mr(lkey, va, &flipped);
}

/// The bytes of B's regions.
pub fn memory(pair: &Pair) -> Vec<Vec<u8>> {
    let b = &pair.nodes[B];
    b.mrs
        .iter()
        .map(|m| {
            b.dev
                .read_mr(m.info.lkey, m.info.addr, m.info.len)
                .map(<[u8]>::to_vec)
                .unwrap_or_default()
        })
        .collect()
}

/// The first byte that differs between two [`memory`] snapshots.
pub fn changed(before: &[Vec<u8>], after: &[Vec<u8>]) -> Option<String> {
    before
        .iter()
        .zip(after)
        .enumerate()
        .find_map(|(r, (b, a))| {
            let i = b.iter().zip(a).position(|(x, y)| x != y)?;
            Some(format!(
                "byte {i} of B's region {r} changed from {:#04x} to {:#04x}",
                b[i], a[i]
            ))
        })
}

/// Receives B keeps posted on its MP QP (8 KiB each, at the start of its
/// results region), refilled when fewer than half are left.
const MP_RECVS: usize = 32;

/// B keeps [`MP_RECVS`] receives posted on its MP QP (refilled below half).
pub fn fill_mp_recvs(pair: &mut Pair) {
    let qpn = pair.nodes[B].qpn(Kind::Mp);
    let posted = pair.nodes[B]
        .outstanding
        .values()
        .filter(|&&(q, r)| q == qpn && r)
        .count();
    if posted >= MP_RECVS / 2 {
        return;
    }
    for _ in posted..MP_RECVS {
        if !pair.post_recv_fixed(B, Kind::Mp, 8192) {
            break;
        }
    }
}
