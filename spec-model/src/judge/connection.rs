//! One RC connection seen in a capture: the request stream of one requester
//! QP to one responder QP, and the responses that come back.

use super::expect::ResponderSide;
use super::response::Resp;
use super::{ConversationConfig, ConversationFinding, PacketMeta};
use crate::model::qp::QpType;
use crate::model::requester::QpType as RequesterQpType;
use crate::model::requester::judge::{JudgeConfig, RequestStreamJudge};
use crate::model::responder::{QpAttributes, ResponderState};
use metaroce_codec::{Psn, RocePacket};
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
}

/// The state of one connection.
#[derive(Clone, Debug)]
pub(crate) struct Connection {
    pub summary: ConnectionSummary,
    /// PSN of the first request and the PSN after the newest.
    pub psn_range: Option<(Psn, Psn)>,
    requester: RequestStreamJudge,
    responder: ResponderSide,
}

impl Connection {
    pub fn new(key: ConnectionKey, cfg: &ConversationConfig) -> Self {
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
            },
            psn_range: None,
            requester: RequestStreamJudge::new(JudgeConfig {
                qp_type: RequesterQpType::Rc,
                pmtu: cfg.pmtu,
                timeout: cfg.timeout,
                lossy: cfg.lossy,
            }),
            responder: ResponderSide::new(cfg.lossy),
        }
    }

    /// Whether `psn` lies in the PSNs this connection's requests used (with
    /// the READ reservations the requester judge knows).
    pub fn holds(&self, psn: Psn) -> bool {
        let Some((first, end)) = self.psn_range else {
            return false;
        };
        let end = self.requester.next_psn().unwrap_or(end);
        psn.distance(first) < end.distance(first)
    }

    pub fn on_request(
        &mut self,
        meta: &PacketMeta,
        pkt: &RocePacket<'_>,
        cfg: &ConversationConfig,
        out: &mut Vec<ConversationFinding>,
    ) {
        self.summary.requests += 1;
        let psn = pkt.bth.psn;
        self.psn_range = Some(match self.psn_range {
            None => (psn, psn.add(1)),
            Some((first, end)) if !psn.is_before(end) => (first, psn.add(1)),
            Some(r) => r,
        });
        for f in self.requester.on_request(pkt, Some(meta.timestamp_ns)) {
            out.push(ConversationFinding {
                finding: f,
                frames: vec![meta.frame],
            });
        }
        let pmtu = cfg
            .pmtu
            .or_else(|| self.requester.pmtu_candidates().single());
        let features = cfg.features;
        self.responder.on_request(
            (meta.frame, meta.timestamp_ns),
            pkt,
            || {
                let attrs = QpAttributes::unknown(pmtu?, pkt.bth.pkey);
                Some(ResponderState::learned(QpType::Rc, attrs, features, pkt))
            },
            out,
        );
        self.summary.unjudged_requests = self.responder.skipped_requests;
    }

    pub fn on_response(
        &mut self,
        meta: &PacketMeta,
        pkt: &RocePacket<'_>,
        out: &mut Vec<ConversationFinding>,
    ) {
        self.summary.responses += 1;
        self.summary.requester_qpn = Some(pkt.bth.dest_qp);
        if meta.icrc_valid {
            // A response with a wrong ICRC never reaches the requester (§5.3).
            self.requester.on_response(pkt, Some(meta.timestamp_ns));
        }
        let r = Resp::of(meta.frame, pkt, meta.udp_src_port);
        self.responder.on_response(r, out);
        self.summary.unjudged_responses = self.responder.unjudged_responses;
    }

    pub fn finish(&mut self, end_ns: u64, grace_ns: u64, out: &mut Vec<ConversationFinding>) {
        self.responder.finish(end_ns, grace_ns, out);
    }

    /// Requests queued at the responder side.
    pub fn pending(&self) -> usize {
        self.responder.pending()
    }
}
