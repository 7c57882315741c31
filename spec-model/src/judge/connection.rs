//! One connection seen in a capture: the request stream of one requester
//! QP to one responder QP, and the responses that come back. A Base RC
//! connection is judged by the requester and responder models; an MP one by
//! the MP judge ([`MpJudge`]), and its READ responses against their
//! requests (`mp_read.rs`).

use super::expect::ResponderSide;
use super::mp_read::MpReads;
use super::response::Resp;
use super::{ConversationConfig, ConversationFinding, PacketMeta};
use crate::model::mp::judge::MpJudge;
use crate::model::qp::QpType;
use crate::model::requester::QpType as RequesterQpType;
use crate::model::requester::judge::{JudgeConfig, RequestStreamJudge};
use crate::model::responder::{QpAttributes, ResponderState};
use metaroce_codec::icrc::PayloadMark;
use metaroce_codec::{Opcode, Psn, RocePacket};
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
}

impl Connection {
    pub fn new(key: ConnectionKey, cfg: &ConversationConfig, mp: bool, meta: &PacketMeta) -> Self {
        let sides = if mp {
            let mut j = MpJudge::new(cfg.mp.clone(), Default::default());
            j.tolerance_ns = cfg.tolerance_ns;
            Sides::Mp {
                judge: Box::new(j),
                reads: Box::new(MpReads::new(cfg.pmtu)),
            }
        } else {
            Sides::Base {
                requester: Box::new(RequestStreamJudge::new(JudgeConfig {
                    qp_type: RequesterQpType::Rc,
                    pmtu: cfg.pmtu,
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
            },
            psn_range: None,
            last_ns: meta.timestamp_ns,
            sides,
        }
    }

    /// A packet of this connection was captured.
    fn touch(&mut self, meta: &PacketMeta) {
        self.summary.last_frame = meta.frame;
        self.last_ns = self.last_ns.max(meta.timestamp_ns);
    }

    /// Names this connection in `found`: its QPNs and first frame.
    pub fn label(&self, found: &mut [ConversationFinding]) {
        if found.is_empty() {
            return;
        }
        let qpns = self.qpns();
        for f in found {
            f.qpns.clone_from(&qpns);
            f.connection = Some(self.summary.first_frame);
        }
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
        let next = match &self.sides {
            Sides::Base { requester, .. } => requester.next_psn(),
            Sides::Mp { .. } => None,
        };
        let end = next.unwrap_or(end);
        psn.distance(first) < end.distance(first)
    }

    pub fn on_request(
        &mut self,
        meta: &PacketMeta,
        pkt: &RocePacket<'_>,
        mark: Option<PayloadMark>,
        cfg: &ConversationConfig,
        out: &mut Vec<ConversationFinding>,
    ) {
        self.touch(meta);
        self.summary.requests += 1;
        let psn = pkt.bth.psn;
        self.psn_range = Some(match self.psn_range {
            None => (psn, psn.add(1)),
            Some((first, end)) if !psn.is_before(end) => (first, psn.add(1)),
            Some(r) => r,
        });
        let (requester, responder) = match &mut self.sides {
            Sides::Mp { judge, reads } => {
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
        for f in requester.on_request_marked(pkt, Some(meta.timestamp_ns), mark) {
            out.push(ConversationFinding {
                finding: f,
                frames: vec![meta.frame],
                qpns: Vec::new(),
                connection: None,
            });
        }
        if !meta.admitted {
            // Its receiver drops it (§9.2): nothing for the responder side.
            return;
        }
        let pmtu = cfg.pmtu.or_else(|| requester.pmtu_candidates().single());
        let features = cfg.features;
        responder.on_request(
            (meta.frame, meta.timestamp_ns),
            pkt,
            || {
                let attrs = QpAttributes::unknown(pmtu?, pkt.bth.pkey);
                Some(ResponderState::learned(QpType::Rc, attrs, features, pkt))
            },
            out,
        );
        self.summary.unjudged_requests = responder.skipped_requests;
    }

    pub fn on_response(
        &mut self,
        meta: &PacketMeta,
        pkt: &RocePacket<'_>,
        out: &mut Vec<ConversationFinding>,
    ) {
        self.touch(meta);
        self.summary.responses += 1;
        self.summary.requester_qpn = Some(pkt.bth.dest_qp);
        let (requester, responder) = match &mut self.sides {
            Sides::Mp { judge, reads } => {
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
            Sides::Base {
                requester,
                responder,
            } => (requester, responder),
        };
        if meta.admitted {
            // A response its receiver drops (a wrong ICRC, §5.3, or another
            // row of §9.2) never reaches the requester.
            requester.on_response(pkt, Some(meta.timestamp_ns));
        }
        let r = Resp::of(meta.frame, pkt, meta.udp_src_port);
        responder.on_response(r, out);
        self.summary.unjudged_responses = responder.unjudged_responses;
    }

    /// The connection ends at `end_ns` (the capture ended, or it is evicted):
    /// what was required and never observed.
    pub fn finish(&mut self, end_ns: u64, grace_ns: u64, out: &mut Vec<ConversationFinding>) {
        match &mut self.sides {
            Sides::Base { responder, .. } => responder.finish(end_ns, grace_ns, out),
            Sides::Mp { judge, .. } => {
                judge.finish_at(end_ns);
                drain_mp(judge, out);
            }
        }
    }

    /// Requests queued at the responder side, or MP PSNs in flight.
    pub fn pending(&self) -> usize {
        match &self.sides {
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
