//! The conversation judge: rebuilds each RC connection of a capture from its
//! packets and judges it with the requester and responder models.
//!
//! [`ConversationJudge::on_packet`] takes every decoded RoCE packet in capture
//! order with its [`PacketMeta`]. Requests (RC request opcodes) are grouped by
//! [`ConnectionKey`]: (requester IP, responder IP, DestQP). Responses (READ
//! responses, Acknowledge, Atomic Acknowledge) travel the other way addressed
//! to the requester QPN; a connection learns that QPN from the first response
//! whose PSN lies in its request PSNs (with one connection per IP-pair
//! direction any response pairs with it).
//!
//! Each connection feeds
//!
//! - [`RequestStreamJudge`](crate::model::requester::judge::RequestStreamJudge)
//!   with its requests and responses (the requester's rules), and
//! - the responder model, started with
//!   [`ResponderState::learned`](crate::model::responder::ResponderState::learned)
//!   at the first request once the PMTU is known (from the configuration or
//!   learnt from packet lengths), with every request; the responses it expects
//!   are matched against those observed, in order, allowing pipelining and ACK
//!   coalescing (see `expect.rs`).
//!
//! State is learned, never assumed: nothing before the first request of a
//! connection is judged, and unknown state (MSN, receive queue, memory,
//! access, responder resources) allows every outcome SPEC.md allows until
//! the responses show which one happened.
//!
//! Not judged here: UC, UD, CNP and MP packets, and reserved opcodes (the
//! per-packet validators and the MP judge cover them).
//!
//! Memory: at most [`MAX_CONNECTIONS`] connections (packets of further ones
//! are counted, not judged); per connection at most
//! [`MAX_PENDING`] queued requests and [`MAX_LOOSE`] pending Acknowledge
//! obligations, and the requester judge's unacknowledged packets.

mod connection;
mod expect;
mod response;

#[cfg(test)]
mod tests;

pub use connection::{ConnectionKey, ConnectionSummary};
pub use expect::{MAX_LOOSE, MAX_PENDING};

use crate::Finding;
use crate::model::responder::Features;
use connection::Connection;
use metaroce_codec::{Opcode, RocePacket, ServiceClass};
use std::collections::HashMap;
use std::net::IpAddr;

/// Most connections tracked at once.
pub const MAX_CONNECTIONS: usize = 4096;

/// What the judge is told about the traffic; everything else it learns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversationConfig {
    /// Path MTU, if known; otherwise learnt per connection from packet lengths.
    pub pmtu: Option<u32>,
    /// The requesters' `timeout` attribute, if known (enables the timer checks).
    pub timeout: Option<u8>,
    /// Features the responders declare (default: every optional responder
    /// feature, no credits).
    pub features: Features,
    /// Packets may be missing from the capture (lost between a peer and the
    /// capture point: netem, a lossy link). Gaps in a request stream are
    /// then taken as loss, and a required response that was never observed
    /// is reported as information, not as a MUST finding.
    pub lossy: bool,
    /// How long after a request its response may come (`base_ack_delay_max`
    /// of §10; default 64 µs, the largest that may be declared). Requests
    /// less than this before the end of the capture are not judged for a
    /// missing response. Response delays are not judged otherwise: a
    /// capture's timestamps are not the responder's.
    pub ack_delay_ns: u64,
}

impl Default for ConversationConfig {
    fn default() -> Self {
        ConversationConfig {
            pmtu: None,
            timeout: None,
            features: Features::ALL,
            lossy: false,
            ack_delay_ns: 64_000,
        }
    }
}

/// Where and when a packet was captured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMeta {
    /// Frame number in the capture (1-based).
    pub frame: u64,
    /// Capture time, nanoseconds.
    pub timestamp_ns: u64,
    /// IP source address.
    pub src: IpAddr,
    /// IP destination address.
    pub dst: IpAddr,
    /// UDP source port.
    pub udp_src_port: u16,
    /// IP ECN code point.
    pub ecn: u8,
    /// The ICRC is right. A packet with a wrong one is judged as its sender's
    /// act but its receiver drops it (§5.3): a request does not reach
    /// the responder model, a response does not reach the requester judge.
    pub icrc_valid: bool,
}

/// A finding of the conversation judge, with the frames it concerns (the
/// frame that shows it first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversationFinding {
    /// Requirement, severity, one-line explanation.
    pub finding: Finding,
    /// Frames involved, the one that shows the finding first.
    pub frames: Vec<u64>,
}

/// Judges the RC conversations of a capture; see the module documentation.
#[derive(Clone, Debug)]
pub struct ConversationJudge {
    cfg: ConversationConfig,
    conns: Vec<Connection>,
    by_key: HashMap<ConnectionKey, usize>,
    /// (responder IP, requester IP, requester QPN) → connection.
    by_response: HashMap<(IpAddr, IpAddr, u32), usize>,
    /// Packets of connections beyond [`MAX_CONNECTIONS`].
    untracked: u64,
    /// Responses paired with no connection.
    orphans: u64,
    /// Latest capture time seen.
    last_ns: u64,
}

/// Whether `op` is an RC request opcode the models know.
fn is_request(op: Opcode) -> bool {
    op.class() == ServiceClass::Rc
        && matches!(op.0, 0x00..=0x0C | 0x13 | 0x14 | 0x16 | 0x17 | 0x1C | 0x1D)
}

/// Whether `op` is an RC response opcode.
fn is_response(op: Opcode) -> bool {
    (Opcode::RC_READ_RESPONSE_FIRST.0..=Opcode::RC_ATOMIC_ACK.0).contains(&op.0)
}

impl ConversationJudge {
    /// A judge that has seen nothing.
    pub fn new(cfg: ConversationConfig) -> Self {
        ConversationJudge {
            cfg,
            conns: Vec::new(),
            by_key: HashMap::new(),
            by_response: HashMap::new(),
            untracked: 0,
            orphans: 0,
            last_ns: 0,
        }
    }

    /// Judges one packet; returns the findings it shows.
    pub fn on_packet(
        &mut self,
        meta: &PacketMeta,
        pkt: &RocePacket<'_>,
    ) -> Vec<ConversationFinding> {
        let mut out = Vec::new();
        self.last_ns = self.last_ns.max(meta.timestamp_ns);
        let op = pkt.bth.opcode;
        let ce = meta.ecn == 3;
        if is_request(op) {
            let key = ConnectionKey {
                requester: meta.src,
                responder: meta.dst,
                responder_qpn: pkt.bth.dest_qp,
            };
            let idx = match self.by_key.get(&key) {
                Some(&i) => i,
                None if self.conns.len() >= MAX_CONNECTIONS => {
                    self.untracked += 1;
                    return out;
                }
                None => {
                    self.conns.push(Connection::new(key, &self.cfg));
                    self.by_key.insert(key, self.conns.len() - 1);
                    self.conns.len() - 1
                }
            };
            let conn = &mut self.conns[idx];
            conn.summary.ce_marked += u64::from(ce);
            conn.on_request(meta, pkt, &self.cfg, &mut out);
            conn.summary.findings += out.len() as u64;
        } else if is_response(op) {
            let Some(idx) = self.pair(meta, pkt) else {
                self.orphans += 1;
                return out;
            };
            let conn = &mut self.conns[idx];
            conn.summary.ce_marked += u64::from(ce);
            conn.on_response(meta, pkt, &mut out);
            conn.summary.findings += out.len() as u64;
        }
        out
    }

    /// The connection a response belongs to, pairing it on first sight.
    fn pair(&mut self, meta: &PacketMeta, pkt: &RocePacket<'_>) -> Option<usize> {
        let qpn = pkt.bth.dest_qp;
        let rkey = (meta.src, meta.dst, qpn);
        if let Some(&i) = self.by_response.get(&rkey) {
            return Some(i);
        }
        let psn = pkt.bth.psn;
        let unpaired: Vec<usize> = self
            .conns
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.summary.key.responder == meta.src
                    && c.summary.key.requester == meta.dst
                    && c.summary.requester_qpn.is_none()
            })
            .map(|(i, _)| i)
            .collect();
        let holding: Vec<usize> = unpaired
            .iter()
            .copied()
            .filter(|&i| self.conns[i].holds(psn))
            .collect();
        let idx = match (holding.as_slice(), unpaired.as_slice()) {
            ([i], _) | ([], [i]) => *i,
            _ => return None,
        };
        self.conns[idx].summary.requester_qpn = Some(qpn);
        self.by_response.insert(rkey, idx);
        Some(idx)
    }

    /// The capture ended: what was required and never observed.
    pub fn finish(&mut self) -> Vec<ConversationFinding> {
        let mut all = Vec::new();
        for c in &mut self.conns {
            let mut out = Vec::new();
            c.finish(self.last_ns, self.cfg.ack_delay_ns, &mut out);
            c.summary.findings += out.len() as u64;
            all.extend(out);
        }
        all
    }

    /// Per-connection counts, in order of first appearance.
    pub fn connections(&self) -> Vec<ConnectionSummary> {
        self.conns.iter().map(|c| c.summary).collect()
    }

    /// Packets not judged: of connections beyond [`MAX_CONNECTIONS`], and
    /// responses paired with no connection.
    pub fn untracked(&self) -> (u64, u64) {
        (self.untracked, self.orphans)
    }

    /// Requests queued at the responder sides (the memory the judge holds).
    pub fn pending(&self) -> usize {
        self.conns.iter().map(Connection::pending).sum()
    }
}
