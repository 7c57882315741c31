//! One connection seen in a capture: the request stream of one requester
//! QP to one responder QP, and the responses that come back. A Base RC
//! connection is judged by the requester and responder models; an MP one by
//! the MP judge ([`MpJudge`]), and its READ responses against their
//! requests (`mp_read.rs`).

use super::cm::Declared;
use super::expect::ResponderSide;
use super::mp_read::MpReads;
use super::rd_atomic::{Limit, RdAtomic};
use super::response::Resp;
use super::{ConversationConfig, ConversationFinding, PacketMeta};
use crate::model::Knowledge;
use crate::model::mp::judge::MpJudge;
use crate::model::qp::QpType;
use crate::model::requester::QpType as RequesterQpType;
use crate::model::requester::judge::{JudgeConfig, RequestStreamJudge};
use crate::model::responder::{QpAttributes, ResponderState};
use metaroce_codec::ext::SyndromeKind;
use metaroce_codec::icrc::PayloadMark;
use metaroce_codec::{Msn, Opcode, Psn, RocePacket};
use std::net::IpAddr;

/// What identifies a connection: the requester's and responder's addresses
/// and the responder's QPN (the DestQP of the requests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionKey {
    /// The requester's IP address (source of the requests).
    pub requester: IpAddr,
    /// The responder's IP address (destination of the requests).
    pub responder: IpAddr,
    /// The responder QPN (DestQP of the requests).
    pub responder_qpn: u32,
}

/// Counts for one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionSummary {
    /// The connection.
    pub key: ConnectionKey,
    /// The requester QPN (DestQP of the responses), once a response was paired.
    pub requester_qpn: Option<u32>,
    /// Request packets.
    pub requests: u64,
    /// Response packets paired with the connection.
    pub responses: u64,
    /// Packets that arrived with ECN CE (both directions).
    pub ce_marked: u64,
    /// Findings so far.
    pub findings: u64,
    /// Request packets not given to the responder model (it starts once the
    /// PMTU is known).
    pub unjudged_requests: u64,
    /// Responses not judged (answers to requests before the first one judged).
    pub unjudged_responses: u64,
    /// An MP connection (MP opcodes), judged by the MP judge.
    pub mp: bool,
    /// Frame of its first packet.
    pub first_frame: u64,
    /// Frame of its latest packet.
    pub last_frame: u64,
    /// The connection was closed before the end of the capture: idle for
    /// longer than the idle time, or the oldest when the table was full.
    pub evicted: bool,
    /// What the connection declared or showed of its behaviour.
    pub behaviour: Behaviour,
}

/// A connection's behaviour, as declared by its RDMA-CM setup or learned
/// from its packets; the judge holds it to this.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Behaviour {
    /// The responder's ACKs carry end-to-end credits (`Some(true)`) or code
    /// 31 (`Some(false)`), from `credits_frame` on (or as declared).
    pub credits: Option<bool>,
    /// The frame that declared or first showed `credits`.
    pub credits_frame: u64,
    /// The credits were declared (CM End-to-End Flow Control, or the
    /// profile), not learned.
    pub credits_declared: bool,
    /// What the responder's first ACK showed (`Some(true)`: credit codes),
    /// and its frame: learned even when `credits` was declared.
    pub credits_seen: Option<(bool, u64)>,
    /// Frames of the RDMA-CM REQ and REP that declared the connection.
    pub cm: Option<[u64; 2]>,
    /// What the MP setup blocks of its RDMA-CM exchange agreed, when the
    /// REQ asked for MP (SPEC.md §7.1.1).
    pub cm_mp: Option<super::CmMp>,
    /// The End-to-End Flow Control bit the responder's side declared in
    /// the CM exchange (shown; the ACKs decide `credits`).
    pub cm_credits: Option<bool>,
    /// The path MTU, declared by the CM REQ or learned from packet sizes.
    pub pmtu: Option<u32>,
    /// The M (MigReq) bits of its requests: bit 0 some had 0, bit 1 some had 1.
    pub migreq: u8,
    /// Some of its packets were ECN-capable (ECT(0), ECT(1) or CE).
    pub ecn_capable: bool,
    /// The most requests in a row without AckReq.
    pub ack_req_gap: u32,
    /// The capture point lost frames of this connection (a request gap that a
    /// later acknowledgement covers), first at this frame.
    pub capture_loss_from: Option<u64>,
    /// Acknowledges captured before the request they acknowledge (within the
    /// reordering tolerance), and the first of them.
    pub reordered: u64,
    /// The frame of the first such Acknowledge.
    pub reordered_frame: Option<u64>,
    /// The limit on RDMA-resource operations outstanding the requester is
    /// held to (its CM exchange's or the profile's), when there is one.
    pub rd_limit: Option<Limit>,
    /// The most RDMA-resource operations outstanding at once as captured
    /// (0: none, or no limit to judge them against).
    pub rd_peak: u16,
}

/// The judges of one connection, by profile.
#[derive(Clone, Debug)]
enum Sides {
    Base {
        requester: Box<RequestStreamJudge>,
        responder: Box<ResponderSide>,
    },
    Mp {
        judge: Box<MpJudge>,
        /// MP READ Responses against their requests.
        reads: Box<MpReads>,
    },
}

/// The state of one connection.
#[derive(Clone, Debug)]
pub(crate) struct Connection {
    pub summary: ConnectionSummary,
    /// PSN of the first request and the PSN after the newest.
    pub psn_range: Option<(Psn, Psn)>,
    /// Capture time of its latest packet.
    pub last_ns: u64,
    sides: Sides,
    /// What its CM exchange declared.
    declared: Option<Declared>,
    /// Requests since the last one with AckReq.
    since_ack_req: u32,
    /// The newest Acknowledge: PSN, MSN, frame (MR-ACK-3).
    newest_ack: Option<(Psn, Msn, u64)>,
    /// Frame of the first AETH: where an unknown MSN was learned.
    msn_from: Option<u64>,
    /// An Acknowledge captured before the request it acknowledges, held
    /// for the reordering tolerance (see [`Connection::on_response`]).
    early: std::collections::VecDeque<Early>,
    /// Judged as lossy: configured so, or the capture point evidently lost
    /// frames of this connection (see [`Connection::capture_loss`]).
    lossy: bool,
    /// The oldest request gap not yet explained: the first PSN a captured
    /// request skipped, and that request's frame.
    gap: Option<(Psn, u64)>,
    /// Findings withheld while `gap` is unexplained (not lossy): a response
    /// that covers the gap shows capture loss and drops those that rested
    /// on it; a sequence NAK or a retransmission into it shows a real gap
    /// and releases them, as does the end of the connection.
    held: Vec<ConversationFinding>,
    /// The newest Acknowledge judged while it acknowledged a PSN after every
    /// captured request: a later request beyond it shows the capture point
    /// lost the requests it covers (otherwise it acknowledges a PSN never
    /// sent, MR-ACK-4).
    ahead_ack: Option<Psn>,
    /// Where the findings of the packet being judged start in its output.
    mark: usize,
    /// The PSN after the newest READ response: the READs' PSNs reach at
    /// least here (the requester judge may not know a READ's length).
    read_end: Option<Psn>,
    /// The oldest request its receiver dropped as far as the capture shows
    /// (a wrong ICRC, say) whose fate is open: its PSN and frame. A later
    /// acknowledgement that covers it shows its receiver took it (the
    /// capture point recorded it wrong); a sequence NAK or its
    /// retransmission shows it was dropped.
    dropped: Option<(Psn, u64)>,
    /// Verdicts on `dropped` frames: (frame, its receiver took it), taken by
    /// the conversation judge after each packet.
    pub verdicts: Vec<(u64, bool)>,
    /// Its requester's outstanding RDMA-resource operations (MR-CM-4,
    /// MR-REQ-7), from its first one when it has a limit.
    rd: Option<Box<RdAtomic>>,
    /// Its recent WRITE, READ and atomic requests, for the shadow memory
    /// (empty unless the judge keeps one).
    pub mem: super::shadow::Messages,
}

/// Most findings withheld per connection while a gap is unexplained; beyond
/// it they are released (judged as without the gap).
const MAX_HELD: usize = 256;

/// What a gap in the captured requests explains when the capture point lost
/// them: the skipped PSNs, the message structure and length around them and the
/// responses the judge expected for requests it never saw.
const GAP_FINDINGS: [&str; 10] = [
    "MR-PSN-3", "MR-PKT-1", "MR-PKT-2", "MR-PKT-3", "MR-ACK-1", "MR-ACK-4", "MR-NAK-1", "MR-NAK-2",
    "MR-MSN-1", "MR-MSN-2",
];

/// Most Acknowledges held per connection for the reordering tolerance.
const MAX_EARLY: usize = 8;

/// An Acknowledge held because it acknowledges a PSN no captured request
/// reached yet: a capture point that records the two directions apart
/// (host side) may put an ACK before its request.
#[derive(Clone, Copy, Debug)]
struct Early {
    meta: PacketMeta,
    bth: metaroce_codec::BthRepr,
    ext: metaroce_codec::ExtHeaders,
}

impl Connection {
    pub fn new(
        key: ConnectionKey,
        cfg: &ConversationConfig,
        mp: bool,
        meta: &PacketMeta,
        declared: Option<Declared>,
        cm_mp: Option<&super::CmMp>,
    ) -> Self {
        let pmtu = cfg.pmtu.or(declared.and_then(|d| d.pmtu));
        let rd_limit = Limit::of(
            declared.map(|d| (d.responder_resources, d.initiator_depth, d.frames)),
            cfg.rd_limits,
        )
        .filter(|_| !mp);
        let sides = if mp {
            // The values its CM exchange agreed, when the capture holds it.
            let mut j = match cm_mp.and_then(|c| c.mp_config(&cfg.mp)) {
                Some((mp_cfg, blocks)) => {
                    let mut j = MpJudge::new(mp_cfg, Default::default());
                    j.setup = Some(blocks);
                    j
                }
                None => MpJudge::new(cfg.mp.clone(), Default::default()),
            };
            j.tolerance_ns = cfg.tolerance_ns;
            Sides::Mp {
                judge: Box::new(j),
                reads: Box::new(MpReads::new(pmtu)),
            }
        } else {
            Sides::Base {
                requester: Box::new(RequestStreamJudge::new(JudgeConfig {
                    qp_type: RequesterQpType::Rc,
                    pmtu,
                    max_pmtu: cfg.max_pmtu,
                    timeout: cfg.timeout,
                    lossy: cfg.lossy,
                    tolerance_ns: cfg.tolerance_ns,
                })),
                responder: Box::new(ResponderSide::new(cfg.lossy)),
            }
        };
        Connection {
            summary: ConnectionSummary {
                key,
                requester_qpn: None,
                requests: 0,
                responses: 0,
                ce_marked: 0,
                findings: 0,
                unjudged_requests: 0,
                unjudged_responses: 0,
                mp,
                first_frame: meta.frame,
                last_frame: meta.frame,
                evicted: false,
                behaviour: Behaviour {
                    // The CM End-to-End Flow Control bit is shown, not
                    // held to: deployed stacks (mlx5) send credit codes with
                    // it clear; the ACKs show what the responder does.
                    credits: cfg.credits,
                    credits_frame: 0,
                    credits_declared: cfg.credits.is_some(),
                    cm_credits: declared.map(|d| d.credits),
                    cm: declared.map(|d| d.frames),
                    pmtu,
                    rd_limit,
                    ..Behaviour::default()
                },
            },
            psn_range: None,
            last_ns: meta.timestamp_ns,
            sides,
            declared,
            since_ack_req: 0,
            newest_ack: None,
            msn_from: None,
            early: std::collections::VecDeque::new(),
            lossy: cfg.lossy,
            gap: None,
            held: Vec::new(),
            ahead_ack: None,
            mark: 0,
            read_end: None,
            dropped: None,
            verdicts: Vec::new(),
            rd: None,
            mem: super::shadow::Messages::default(),
        }
    }

    /// Withholds the findings from `out[from..]` while a request gap is
    /// unexplained (see [`Connection::held`]).
    #[inline]
    fn hold(&mut self, out: &mut Vec<ConversationFinding>, from: usize) {
        if self.gap.is_none() || from >= out.len() {
            return;
        }
        self.hold_found(out, from);
    }

    /// [`Connection::hold`] with findings to withhold.
    #[inline(never)]
    fn hold_found(&mut self, out: &mut Vec<ConversationFinding>, from: usize) {
        if self.held.len() + (out.len() - from) > MAX_HELD {
            self.gap = None;
            out.splice(from..from, self.held.drain(..));
            return;
        }
        self.held.extend(out.drain(from..));
    }

    /// The gap is a real one (its PSNs were not sent, or the responder did
    /// not receive them): the withheld findings stand.
    fn real_gap(&mut self, out: &mut Vec<ConversationFinding>) {
        if let Some((_, frame)) = self.dropped.take() {
            self.verdicts.push((frame, false));
        }
        self.gap = None;
        self.ahead_ack = None;
        out.append(&mut self.held);
    }

    /// A response at `frame` acknowledges PSN `psn`, which a captured
    /// request gap skipped: the responder executed requests the capture
    /// never showed, so the capture point lost them. From here on the
    /// connection is judged as lossy; the findings that rested on the gap
    /// are dropped, the others released, and the responder model starts
    /// again at the next request.
    fn capture_loss(&mut self, frame: u64, out: &mut Vec<ConversationFinding>) {
        self.gap = None;
        self.ahead_ack = None;
        if let Some((_, dropped)) = self.dropped.take() {
            // Not lost: the frame its receiver seemed to drop was taken
            // (the capture point recorded it wrong).
            self.verdicts.push((dropped, true));
        } else {
            self.lossy = true;
            self.summary
                .behaviour
                .capture_loss_from
                .get_or_insert(frame);
        }
        let gap_free = |f: &ConversationFinding| !GAP_FINDINGS.contains(&f.finding.id);
        let now: Vec<ConversationFinding> = out
            .drain(self.mark.min(out.len())..)
            .filter(gap_free)
            .collect();
        out.extend(self.held.drain(..).filter(gap_free));
        out.extend(now);
        if let Sides::Base {
            requester,
            responder,
        } = &mut self.sides
        {
            if self.lossy {
                requester.set_lossy();
            }
            responder.resync(self.lossy);
        }
    }

    /// Whether an Acknowledge with PSN `psn` acknowledges a PSN after every
    /// request captured so far.
    fn ahead(&self, psn: Psn) -> bool {
        self.psn_range
            .is_some_and(|(first, _)| !self.holds(psn) && first.is_before(psn))
    }

    /// Delivers the held Acknowledges captured more than `reorder_ns`
    /// before `now_ns` (all of them with `u64::MAX`), in capture order.
    #[inline]
    fn deliver_early(&mut self, now_ns: u64, reorder_ns: u64, out: &mut Vec<ConversationFinding>) {
        if self.early.is_empty() {
            return;
        }
        while let Some(e) = self
            .early
            .pop_front_if(|e| now_ns.saturating_sub(e.meta.timestamp_ns) > reorder_ns)
        {
            let pkt = RocePacket {
                bth: e.bth,
                ext: e.ext,
                ..RocePacket::default()
            };
            self.respond(&e.meta, &pkt, out);
        }
    }

    /// The ECN code point of a packet of this connection.
    fn note_ecn(&mut self, ecn: u8) {
        self.summary.behaviour.ecn_capable |= ecn != 0;
    }

    /// Judges the credit code of an ACK syndrome against what the connection
    /// declared or showed first (MR-CRD-1, MR-CRD-2: a responder QP either
    /// has a shared receive queue and sends code 31, or sends credits).
    fn judge_credits(&mut self, frame: u64, code: u8, out: &mut Vec<ConversationFinding>) {
        let uses = code != 31;
        let b = &mut self.summary.behaviour;
        b.credits_seen.get_or_insert((uses, frame));
        let Some(credits) = b.credits else {
            b.credits = Some(uses);
            b.credits_frame = frame;
            return;
        };
        if credits == uses {
            return;
        }
        let (id, why) = match (credits, b.credits_declared) {
            (false, true) => (
                "MR-CRD-1",
                format!(
                    "credit code {code} in an ACK of a responder declared without end-to-end credits"
                ),
            ),
            (true, true) => (
                "MR-CRD-2",
                "credit code 31 in an ACK of a responder declared with end-to-end credits"
                    .to_string(),
            ),
            (c, false) => (
                "MR-CRD-2",
                format!(
                    "credit code {code} after ACKs with {}: a responder QP sends code 31 (shared receive queue) or credits, not both",
                    if c { "credit codes" } else { "code 31" }
                ),
            ),
        };
        let mut frames = vec![frame];
        if b.credits_frame != 0 {
            frames.push(b.credits_frame);
        }
        out.push(ConversationFinding {
            finding: crate::Finding::new(id, why),
            frames,
            qpns: Vec::new(),
            connection: None,
        });
    }

    /// MR-ACK-3: an Acknowledge whose PSN moves back below an earlier one
    /// while its MSN advances is no duplicate's response.
    fn judge_ack_order(
        &mut self,
        frame: u64,
        psn: Psn,
        msn: Msn,
        out: &mut Vec<ConversationFinding>,
    ) {
        match self.newest_ack {
            Some((p, m, f)) if psn.is_before(p) => {
                if m.is_before(msn) {
                    out.push(ConversationFinding {
                        finding: crate::Finding::new(
                            "MR-ACK-3",
                            format!(
                                "Acknowledge PSN {psn} MSN {msn} moves back below the Acknowledge of frame {f} (PSN {p} MSN {m}) while its MSN advances"
                            ),
                        ),
                        frames: vec![frame, f],
                        qpns: Vec::new(),
                        connection: None,
                    });
                }
            }
            _ => self.newest_ack = Some((psn, msn, frame)),
        }
    }

    /// A packet of this connection was captured.
    fn touch(&mut self, meta: &PacketMeta) {
        self.summary.last_frame = meta.frame;
        self.last_ns = self.last_ns.max(meta.timestamp_ns);
    }

    /// Names this connection in `found`: its QPNs and first frame.
    #[inline]
    pub fn label(&self, found: &mut [ConversationFinding]) {
        if !found.is_empty() {
            self.label_found(found);
        }
    }

    /// [`Connection::label`] with findings to name (rare: kept out of line).
    #[inline(never)]
    fn label_found(&self, found: &mut [ConversationFinding]) {
        let qpns = self.qpns();
        for f in found {
            f.qpns.clone_from(&qpns);
            f.connection = Some(self.summary.first_frame);
        }
    }

    /// Whether the fate of the request at `frame` is followed (see
    /// `dropped`).
    pub fn follows(&self, frame: u64) -> bool {
        self.dropped.is_some_and(|(_, f)| f == frame)
    }

    /// The QPNs of both ends, as far as known (responder first).
    pub fn qpns(&self) -> Vec<u32> {
        let mut q = vec![self.summary.key.responder_qpn];
        q.extend(self.summary.requester_qpn);
        q
    }

    /// Whether `psn` lies in the PSNs this connection's requests used (with
    /// the READ reservations the requester judge knows).
    pub fn holds(&self, psn: Psn) -> bool {
        let Some((first, end)) = self.psn_range else {
            return false;
        };
        let end = self.next_psn().unwrap_or(end);
        psn.distance(first) < end.distance(first)
    }

    /// The PSN after the newest request and the READ responses it reserved
    /// (as far as the requester judge knows).
    fn next_psn(&self) -> Option<Psn> {
        let next = match &self.sides {
            Sides::Base { requester, .. } => requester.next_psn(),
            Sides::Mp { .. } => None,
        };
        next.or(self.psn_range.map(|(_, end)| end))
    }

    pub fn on_request(
        &mut self,
        meta: &PacketMeta,
        pkt: &RocePacket<'_>,
        mark: Option<PayloadMark>,
        cfg: &ConversationConfig,
        out: &mut Vec<ConversationFinding>,
    ) {
        let from = out.len();
        self.mark = from;
        // Beyond the tolerance: judged where they were captured.
        self.deliver_early(meta.timestamp_ns, cfg.reorder_ns, out);
        self.note_gap(pkt.bth.psn, meta.frame, out);
        self.request(meta, pkt, mark, cfg, out);
        self.hold(out, from);
        if let Some(d) = self.dropped.filter(|d| d.1 == meta.frame) {
            // What follows may rest on its receiver having dropped it.
            self.gap.get_or_insert(d);
        }
        let from = out.len();
        while let Some(e) = self.early.front().copied()
            && !self.ahead(e.bth.psn)
        {
            self.early.pop_front();
            let b = &mut self.summary.behaviour;
            if e.bth.psn == pkt.bth.psn {
                // Its request came right after it: reordered.
                b.reordered += 1;
                b.reordered_frame.get_or_insert(e.meta.frame);
            } else {
                // A later request covers it: the capture point lost the
                // requests it acknowledges.
                b.capture_loss_from.get_or_insert(e.meta.frame);
            }
            let pkt = RocePacket {
                bth: e.bth,
                ext: e.ext,
                ..RocePacket::default()
            };
            self.respond(&e.meta, &pkt, out);
        }
        self.hold(out, from);
    }

    /// A request with PSN `psn` was captured at `frame`: it opens a gap
    /// (skips PSNs after the newest request), or fills the unexplained one
    /// (a retransmission into it: the PSNs were missing at the responder).
    fn note_gap(&mut self, psn: Psn, frame: u64, out: &mut Vec<ConversationFinding>) {
        let Some(mut end) = self.next_psn() else {
            return;
        };
        if let Some(r) = self.read_end.filter(|r| r.is_after(end)) {
            end = r;
        }
        if let Some(a) = self.ahead_ack {
            if psn == end {
                // The requests it acknowledged come after it: no capture
                // loss explains it (MR-ACK-4 stands).
                self.real_gap(out);
            } else if psn.is_after(a) {
                // Every PSN it covered past the captured requests was
                // skipped by the capture, and the requester sent them.
                self.capture_loss(frame, out);
                return;
            }
        }
        if let Some((from, _)) = self.gap
            && psn.is_before(end)
            && !psn.is_before(from)
        {
            self.real_gap(out);
        } else if self.gap.is_none() && psn.is_after(end) && !self.summary.mp {
            self.gap = Some((end, frame));
        }
    }

    fn request(
        &mut self,
        meta: &PacketMeta,
        pkt: &RocePacket<'_>,
        mark: Option<PayloadMark>,
        cfg: &ConversationConfig,
        out: &mut Vec<ConversationFinding>,
    ) {
        self.touch(meta);
        self.summary.requests += 1;
        self.note_ecn(meta.ecn);
        let b = &mut self.summary.behaviour;
        b.migreq |= if pkt.bth.migreq { 2 } else { 1 };
        if pkt.bth.ack_req {
            self.since_ack_req = 0;
        } else {
            self.since_ack_req = self.since_ack_req.saturating_add(1);
            b.ack_req_gap = b.ack_req_gap.max(self.since_ack_req);
        }
        let psn = pkt.bth.psn;
        let is_new = self.psn_range.is_none_or(|(_, end)| !psn.is_before(end));
        self.psn_range = Some(match self.psn_range {
            None => (psn, psn.add(1)),
            Some((first, end)) if !psn.is_before(end) => (first, psn.add(1)),
            Some(r) => r,
        });
        let (requester, responder) = match &mut self.sides {
            Sides::Mp { judge, reads } => {
                judge.on_dscp(meta.frame, meta.dscp, meta.icrc_valid, true);
                judge.on_request(meta.frame, pkt, meta.udp_src_port, meta.timestamp_ns);
                drain_mp(judge, out);
                if meta.admitted {
                    reads.on_request(pkt);
                }
                return;
            }
            Sides::Base {
                requester,
                responder,
            } => (requester, responder),
        };
        if let Some(limit) = self.summary.behaviour.rd_limit
            && (self.rd.is_some() || pkt.bth.opcode.is_rc_rdma_resource())
        {
            let rd = self
                .rd
                .get_or_insert_with(|| Box::new(RdAtomic::new(limit, cfg.reorder_ns)));
            rd.on_request(
                (meta.frame, meta.timestamp_ns),
                pkt.bth.opcode,
                psn,
                pkt.ext.reth,
                is_new,
                out,
            );
            self.summary.behaviour.rd_peak = rd.peak;
        }
        for f in requester.on_request_marked(pkt, Some(meta.timestamp_ns), mark) {
            out.push(ConversationFinding {
                finding: f,
                frames: vec![meta.frame],
                qpns: Vec::new(),
                connection: None,
            });
        }
        if !meta.admitted {
            // Its receiver drops it (§9.2): nothing for the responder side,
            // unless a later acknowledgement shows it was taken.
            if self.gap.is_none() && self.dropped.is_none() {
                self.dropped = Some((psn, meta.frame));
            }
            return;
        }
        let pmtu = self
            .summary
            .behaviour
            .pmtu
            .or_else(|| requester.pmtu_candidates().single());
        self.summary.behaviour.pmtu = pmtu;
        let features = cfg.features;
        let declared = self.declared;
        responder.on_request(
            (meta.frame, meta.timestamp_ns),
            pkt,
            || {
                let mut attrs = QpAttributes::unknown(pmtu?, pkt.bth.pkey);
                let Some(d) = declared else {
                    return Some(ResponderState::learned(QpType::Rc, attrs, features, pkt));
                };
                attrs.dest_qpn = Knowledge::Known(d.requester_qpn);
                let st = ResponderState::learned(QpType::Rc, attrs, features, pkt);
                // The first request of a connection whose setup the
                // capture holds: the responder's MSN starts at 0 (IBA vol 1
                // §9.7.5.1.1); a later first request leaves it to learn.
                Some(if pkt.bth.psn == d.starting_psn {
                    st.learn_msn(Msn::new(0))
                } else {
                    st
                })
            },
            out,
        );
        self.summary.unjudged_requests = responder.skipped_requests;
    }

    pub fn on_response(
        &mut self,
        meta: &PacketMeta,
        pkt: &RocePacket<'_>,
        cfg: &ConversationConfig,
        out: &mut Vec<ConversationFinding>,
    ) {
        let from = out.len();
        self.mark = from;
        self.deliver_early(meta.timestamp_ns, cfg.reorder_ns, out);
        self.response(meta, pkt, cfg, out);
        self.hold(out, from);
    }

    fn response(
        &mut self,
        meta: &PacketMeta,
        pkt: &RocePacket<'_>,
        cfg: &ConversationConfig,
        out: &mut Vec<ConversationFinding>,
    ) {
        if cfg.reorder_ns > 0
            && pkt.bth.opcode == Opcode::RC_ACK
            && pkt.payload.is_empty()
            && self.ahead(pkt.bth.psn)
        {
            // Perhaps captured before its request: held for the tolerance.
            if self.early.len() >= MAX_EARLY {
                self.deliver_early(u64::MAX, 0, out);
            }
            self.touch(meta);
            self.early.push_back(Early {
                meta: *meta,
                bth: pkt.bth,
                ext: pkt.ext,
            });
            return;
        }
        self.respond(meta, pkt, out);
    }

    fn respond(
        &mut self,
        meta: &PacketMeta,
        pkt: &RocePacket<'_>,
        out: &mut Vec<ConversationFinding>,
    ) {
        self.touch(meta);
        self.summary.responses += 1;
        self.summary.requester_qpn = Some(pkt.bth.dest_qp);
        self.note_ecn(meta.ecn);
        let requester = match &mut self.sides {
            Sides::Mp { judge, reads } => {
                judge.on_dscp(meta.frame, meta.dscp, meta.icrc_valid, false);
                drain_mp(judge, out);
                if pkt.ext.sacketh.is_some() && meta.admitted {
                    judge.on_ack(meta.frame, pkt, meta.udp_src_port, meta.timestamp_ns);
                    drain_mp(judge, out);
                } else if pkt.bth.opcode == Opcode::MP_READ_RESPONSE && meta.admitted {
                    let before = reads.judged;
                    for finding in reads.on_response(pkt) {
                        out.push(ConversationFinding {
                            finding,
                            frames: vec![meta.frame],
                            qpns: Vec::new(),
                            connection: None,
                        });
                    }
                    if reads.judged == before {
                        // Its READ is not in the capture.
                        self.summary.unjudged_responses += 1;
                    }
                } else {
                    // MP Atomic Acknowledges are counted, not judged.
                    self.summary.unjudged_responses += 1;
                }
                return;
            }
            Sides::Base { requester, .. } => requester,
        };
        if meta.admitted {
            // A response its receiver drops (a wrong ICRC, §5.3, or another
            // row of §9.2) never reaches the requester.
            requester.on_response(pkt, Some(meta.timestamp_ns));
        }
        if let Some(rd) = self.rd.as_mut() {
            // Whether or not it was admitted: a response that ends an
            // operation can only make the count lower.
            rd.on_response(meta.timestamp_ns, pkt.bth.opcode, pkt.bth.psn, out);
        }
        let mut r = Resp::of(meta.frame, pkt, meta.udp_src_port);
        if matches!(
            pkt.bth.opcode,
            Opcode::RC_READ_RESPONSE_FIRST
                | Opcode::RC_READ_RESPONSE_MIDDLE
                | Opcode::RC_READ_RESPONSE_LAST
                | Opcode::RC_READ_RESPONSE_ONLY
        ) && self.read_end.is_none_or(|e| !pkt.bth.psn.is_before(e))
        {
            self.read_end = Some(pkt.bth.psn.add(1));
        }
        let covers_gap = self
            .gap
            .is_some_and(|(from, _)| r.acknowledges() && !r.psn.is_before(from));
        if covers_gap && (self.ahead_ack.is_none() || self.holds(r.psn)) {
            // It covers PSNs a captured request skipped: the requester
            // sent them (a later one was captured) and the responder
            // executed them, so the capture point lost them.
            self.capture_loss(meta.frame, out);
        } else if r.acknowledges()
            && self.ahead(r.psn)
            && let Some(end) = self.next_psn()
        {
            // Ahead of every captured request: held until a later request
            // shows whether the requester sent what it covers.
            self.gap.get_or_insert((end, meta.frame));
            if self.ahead_ack.is_none_or(|a| r.psn.is_after(a)) {
                self.ahead_ack = Some(r.psn);
            }
        } else if self.gap.is_some()
            && r.syndrome
                .is_some_and(|s| matches!(s.kind(), SyndromeKind::Nak { code: 0 }))
        {
            // The responder did not receive the skipped PSNs: a real gap.
            self.real_gap(out);
        }
        let Sides::Base { responder, .. } = &mut self.sides else {
            return;
        };
        // Credit codes are judged here, against the connection's own
        // behaviour, not against a responder declared without credits.
        r.credits_apart = true;
        let from = out.len();
        responder.on_response(r, out);
        self.summary.unjudged_responses = responder.unjudged_responses;
        if let Some(a) = pkt.ext.aeth {
            if self.msn_from.is_none() {
                self.msn_from = Some(meta.frame);
            }
            if let SyndromeKind::Ack { credit_code } = a.syndrome.kind() {
                self.judge_credits(meta.frame, credit_code, out);
                if pkt.bth.opcode == Opcode::RC_ACK {
                    self.judge_ack_order(meta.frame, pkt.bth.psn, a.msn, out);
                }
            }
        }
        // An MSN judged against one learned from an earlier AETH names that
        // frame too: the earlier one may be the wrong one.
        if let Some(learned) = self.msn_from.filter(|&f| f != meta.frame)
            && !self.declared.is_some_and(|d| {
                self.psn_range
                    .is_some_and(|(first, _)| first == d.starting_psn)
            })
        {
            for f in &mut out[from..] {
                if f.finding.id.starts_with("MR-MSN-") && !f.frames.contains(&learned) {
                    f.frames.push(learned);
                    f.finding.message.push_str(&format!(
                        " (the MSN was learned from the AETH of frame {learned})"
                    ));
                }
            }
        }
    }

    /// The connection ends at `end_ns` (the capture ended, or it is evicted):
    /// what was required and never observed.
    pub fn finish(&mut self, end_ns: u64, grace_ns: u64, out: &mut Vec<ConversationFinding>) {
        let from = out.len();
        self.deliver_early(u64::MAX, 0, out);
        self.hold(out, from);
        if self.lossy {
            // Unexplained at the end, in a connection whose capture point
            // lost frames: what rests on the gap is information.
            for f in &mut self.held {
                if GAP_FINDINGS.contains(&f.finding.id)
                    && f.finding.severity != crate::Severity::Info
                {
                    f.finding = crate::Finding::info(
                        f.finding.id,
                        format!(
                            "{} (the capture point lost frames of this connection)",
                            f.finding.message
                        ),
                    );
                }
            }
        }
        self.real_gap(out);
        match &mut self.sides {
            Sides::Base { responder, .. } => responder.finish(end_ns, grace_ns, out),
            Sides::Mp { judge, .. } => {
                judge.finish_at(end_ns);
                drain_mp(judge, out);
            }
        }
    }

    /// Requests queued at the responder side, or MP PSNs in flight, and
    /// RDMA-resource operations followed.
    pub fn pending(&self) -> usize {
        let rd = self.rd.as_ref().map_or(0, |r| r.held());
        rd + match &self.sides {
            Sides::Base { responder, .. } => responder.pending(),
            Sides::Mp { judge, reads } => judge.in_flight() + reads.kept(),
        }
    }
}

/// Moves the MP judge's findings to `out`.
fn drain_mp(j: &mut MpJudge, out: &mut Vec<ConversationFinding>) {
    for (finding, frames) in j.take_findings() {
        out.push(ConversationFinding {
            finding,
            frames,
            qpns: Vec::new(),
            connection: None,
        });
    }
}
