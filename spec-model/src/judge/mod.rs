//! The conversation judge: rebuilds each connection of a capture from its
//! packets and judges it with the models.
//!
//! [`ConversationJudge::on_packet`] takes every decoded RoCE packet in capture
//! order with its [`PacketMeta`]. Requests are grouped by [`ConnectionKey`]:
//! (requester IP, responder IP, DestQP). Responses (READ responses,
//! Acknowledge, Atomic Acknowledge; MP ACK, MP Atomic Acknowledge, MP READ
//! response) travel the other way addressed to the requester QPN; a
//! connection learns that QPN from the first response whose PSN lies in its
//! request PSNs (with one connection of the profile per IP-pair direction any
//! response pairs with it).
//!
//! Each Base RC connection feeds
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
//! Each MP connection feeds the MP judge
//! ([`MpJudge`](crate::model::mp::judge::MpJudge)) with its requests and MP
//! ACKs (ordered as captured, [`AckOrder::AsCaptured`](crate::model::mp::judge::AckOrder):
//! ACKs the network reordered across paths are not compared):
//! selective retransmission, SACK consistency, spraying, cwnd; its MP
//! READ Responses are checked against their READ requests (MSN, read
//! length and, with the PMTU known, PSN: MR-MPR-1; see `mp_read.rs`).
//!
//! A Base connection with a limit on outstanding RDMA-resource operations
//! (the Responder Resources of its RDMA-CM setup, MR-CM-4, or a profile's
//! [`RdLimits`], MR-REQ-7) counts its requester's READs, atomics, FLUSHes
//! and ATOMIC WRITEs against it, every doubt counting for the requester
//! (see `rd_atomic.rs`).
//!
//! CE marks and CNPs go to the CNP judge (`cnp.rs`, MR-CNP-1, MR-CNP-2,
//! MR-CNP-6) when [`ConversationConfig::np`] declares CNP generation.
//!
//! State is learned, never assumed: nothing before the first request of a
//! connection is judged, and unknown state (MSN, receive queue, memory,
//! access, responder resources) allows every outcome SPEC.md allows until
//! the responses show which one happened.
//!
//! Not judged here: UC and UD packets, MP Atomic Acknowledges, and reserved
//! opcodes (the per-packet validators cover them).
//!
//! Memory is bounded by the connections alive, not by the capture's length:
//! a connection without a packet for [`ConversationConfig::idle_ns`] is
//! closed (its missing responses reported) and forgotten, and when
//! [`MAX_CONNECTIONS`] are open the least recently active one is closed to
//! make room. Per connection at most [`MAX_PENDING`] queued requests and
//! [`MAX_LOOSE`] pending Acknowledge obligations, the requester judge's
//! unacknowledged packets, or the MP judge's PSNs in flight. Summaries of
//! closed connections are kept up to [`MAX_CLOSED`], then only counted.

mod cm;
mod cnp;
mod connection;
mod expect;
mod mp_read;
mod mp_setup;
mod rd_atomic;
mod response;
mod shadow;

#[cfg(test)]
mod tests;

pub use cm::{Declared, MAX_SETUPS};
pub use cnp::{MAX_MP_QPS, MAX_SLOTS};
pub use connection::{Behaviour, ConnectionKey, ConnectionSummary};
pub use expect::{MAX_LOOSE, MAX_PENDING};
pub use mp_read::MAX_READS;
pub use mp_setup::CmMp;
pub use rd_atomic::{Limit, LimitSource, MAX_CANDIDATES, MAX_TRACKED, RdLimits};

use crate::Finding;
use crate::model::congestion::np::NpParams;
use crate::model::mp::MpConfig;
use crate::model::responder::Features;
use cnp::{CnpJudge, Mark};
use connection::Connection;
use foldhash::HashMap;
use metaroce_codec::icrc::PayloadMark;
use metaroce_codec::{Opcode, RocePacket, ServiceClass};
use std::net::IpAddr;

/// Most connections open at once; a further one closes the least recently
/// active.
pub const MAX_CONNECTIONS: usize = 4096;

/// Most summaries of closed connections kept for [`ConversationJudge::connections`].
pub const MAX_CLOSED: usize = 65_536;

/// What the judge is told about the traffic; everything else it learns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversationConfig {
    /// Path MTU, if known; otherwise learnt per connection from packet lengths.
    pub pmtu: Option<u32>,
    /// The largest PMTU the NICs support (`max_pmtu`, SPEC §2), if
    /// declared: a PMTU not given is learnt among the values up to it.
    pub max_pmtu: Option<u32>,
    /// The requesters' `timeout` attribute, if known (enables the timer checks).
    pub timeout: Option<u8>,
    /// Features the responders declare (default: every optional responder
    /// feature, no credits).
    pub features: Features,
    /// Whether the responders send end-to-end credits, when declared (a
    /// capability profile); `None` (default): each connection's RDMA-CM
    /// setup declares it, or its first ACK shows it.
    pub credits: Option<bool>,
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
    /// How far capture timestamps may be off, in ns: every time window the
    /// judges check (retransmission timeouts, RNR waits, MP loss by time,
    /// CNP delay and pacing) is widened by this much on each side.
    pub tolerance_ns: u64,
    /// The limits on outstanding RDMA-resource operations a capability
    /// profile declares; a connection whose RDMA-CM setup is in the capture
    /// is held to the Responder Resources its peer announced instead
    /// (MR-CM-4; see `rd_atomic.rs`).
    pub rd_limits: RdLimits,
    /// Payload bytes the shadow memory may keep (0, the default: no shadow
    /// memory). With it, a READ response or an atomic's original value that
    /// contradicts what the capture proves was there is information naming
    /// both frames (MR-READ-6, MR-ATOM-4; see `shadow.rs`).
    pub shadow_bytes: usize,
    /// How long an Acknowledge may be captured before the request it
    /// acknowledges (a capture point that records the two directions
    /// apart): within it the two are judged in their sent order, and the
    /// reordering is a note about the capture (default 50 µs; 0: none).
    pub reorder_ns: u64,
    /// A connection without a packet for this long is closed: its missing
    /// responses are reported and its state is forgotten (default 10 s).
    pub idle_ns: u64,
    /// The MP parameters of the observed MP QPs (default: §10.3, with the
    /// end of each judged parameter's range that fails no allowed value:
    /// K 1, RTO floor 10 µs, ACK bound 50 µs, cwnd ceiling 64 MiB; entropy
    /// set unknown, so MR-MPS-1 and MR-MPS-3 are not judged).
    pub mp: MpConfig,
    /// The notification points' CNP parameters, when they declare
    /// `cnp_generation` (default: declared, §10.2 values); `None`: CE marks
    /// and CNPs are not judged.
    pub np: Option<NpParams>,
}

impl Default for ConversationConfig {
    fn default() -> Self {
        ConversationConfig {
            pmtu: None,
            max_pmtu: None,
            timeout: None,
            features: Features::ALL,
            credits: None,
            lossy: false,
            ack_delay_ns: 64_000,
            tolerance_ns: 0,
            rd_limits: RdLimits::default(),
            shadow_bytes: 0,
            reorder_ns: 50_000,
            idle_ns: 10_000_000_000,
            mp: MpConfig {
                entropy_set: Vec::new(),
                // Undeclared parameters take the end of their §10.3 range
                // that judges no allowed value as a departure (§1.5): the
                // smallest K and RTO floor (a retransmission is not early
                // for any allowed value), the largest ACK bound and cwnd
                // ceiling. `--profile` declares the values instead.
                reorder_threshold: 1,
                rto_min: 10_000,
                ack_prompt_max: 50_000,
                cwnd_max: 67_108_864,
                ..MpConfig::default()
            },
            np: Some(NpParams::default()),
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
    /// IP DSCP.
    pub dscp: u8,
    /// The frame's ICRC was captured and verifies: every byte but the
    /// masked IP fields is as its sender built it (no switch trimmed it).
    pub icrc_valid: bool,
    /// The frame passes admission as far as a capture shows it
    /// ([`FrameAdmission`](crate::model::receiver::FrameAdmission): the
    /// rows of SPEC.md §9.2 that need no knowledge of the receiving QP, the
    /// IPv4 header checksum, UDP lengths and ICRC among them). A frame that
    /// fails it is judged as its sender's act, but its receiver drops it:
    /// a request does not reach the responder side (the Base responder
    /// model, the MP READ pairing), a response does not reach the requester
    /// side (the Base requester judge, the MP judge's ACKs), and a CE mark
    /// on it obliges no CNP.
    pub admitted: bool,
    /// The payload length on the wire when the capture did not record the
    /// whole packet (a header-only capture, [`metaroce_codec::Cut`]);
    /// `None`: the packet's payload is all there. The judges then see a
    /// payload of this length whose bytes are all zero: lengths are judged
    /// as ever; a rule that compares contents (a retransmission's bytes
    /// with the first transmission's) sees equal zeros between two such
    /// packets and finds nothing.
    pub payload_len: Option<usize>,
}

/// The payload the judges see for a packet whose payload the capture did
/// not record ([`PacketMeta::payload_len`]): zeros, as long as a UDP
/// datagram can carry.
static UNCAPTURED: [u8; 65536] = [0; 65536];

/// A finding of the conversation judge, with the frames it concerns (the
/// frame that shows it first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversationFinding {
    /// Requirement, severity, one-line explanation.
    pub finding: Finding,
    /// Frames involved, the one that shows the finding first.
    pub frames: Vec<u64>,
    /// QPNs of the connection or packets concerned, when known.
    pub qpns: Vec<u32>,
    /// The connection concerned, named by its first frame
    /// ([`ConnectionSummary::first_frame`]), when there is one.
    pub connection: Option<u64>,
}

/// Judges the conversations of a capture; see the module documentation.
#[derive(Clone, Debug)]
pub struct ConversationJudge {
    cfg: ConversationConfig,
    /// Open connections (a slot is `None` once its connection closed).
    conns: Vec<Option<Connection>>,
    free: Vec<usize>,
    /// (requester IP, responder IP, responder QPN, MP) → connection: a
    /// Base and an MP conversation may share addresses and QPNs in a
    /// capture (though not on one device).
    by_key: HashMap<Route, usize>,
    /// (responder IP, requester IP, requester QPN, MP) → connection.
    by_response: HashMap<Route, usize>,
    /// Summaries of closed connections (at most [`MAX_CLOSED`]).
    closed: Vec<ConnectionSummary>,
    /// Closed connections whose summary was not kept.
    closed_dropped: u64,
    /// Connections closed before the end of the capture.
    evicted: u64,
    cnp: Option<CnpJudge>,
    /// Responses paired with no connection.
    orphans: u64,
    /// Latest capture time seen.
    last_ns: u64,
    /// Capture time of the last idle sweep.
    swept_ns: u64,
    /// RDMA-CM exchanges seen (connections declared by their REQ and REP).
    setups: cm::Setups,
    /// The MP setup blocks of those exchanges (MR-MPN-7 … MR-MPN-11, MR-CM-6).
    mp_setups: mp_setup::MpSetups,
    /// Findings of the CM MAD given to [`ConversationJudge::on_cm`], out
    /// with the judgement of its packet.
    cm_found: Vec<ConversationFinding>,
    /// Verdicts on requests that failed admission (see
    /// [`ConversationJudge::take_admission_verdicts`]).
    verdicts: Vec<(u64, bool)>,
    /// The shadow memory, when [`ConversationConfig::shadow_bytes`] asks
    /// for one (see `shadow.rs`).
    shadow: Option<shadow::Shadow>,
}

/// A map key: source and destination address, a QPN, and whether the
/// conversation is MP. Addresses are kept as numbers (hashed in one word
/// each, where `IpAddr` hashes its family and each octet's slice).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Route {
    src: u128,
    dst: u128,
    qpn: u32,
    /// Bit 0: `src` is IPv6; bit 1: `dst` is IPv6; bit 2: MP.
    flags: u8,
}

impl Route {
    fn new(src: &IpAddr, dst: &IpAddr, qpn: u32, mp: bool) -> Self {
        let (src, src6) = addr_bits(src);
        let (dst, dst6) = addr_bits(dst);
        Route {
            src,
            dst,
            qpn,
            flags: u8::from(src6) | u8::from(dst6) << 1 | u8::from(mp) << 2,
        }
    }

    /// The key of connection `key` (MP or not).
    fn of(key: &ConnectionKey, mp: bool) -> Self {
        Route::new(&key.requester, &key.responder, key.responder_qpn, mp)
    }
}

/// An address as a number, and whether it is IPv6 (read by reference:
/// only the bytes of its family are loaded).
fn addr_bits(a: &IpAddr) -> (u128, bool) {
    match a {
        IpAddr::V4(v4) => (u128::from(v4.to_bits()), false),
        IpAddr::V6(v6) => (v6.to_bits(), true),
    }
}

/// Whether `op` is an RC request opcode the models know.
fn is_request(op: Opcode) -> bool {
    op.is_rc_request()
}

/// Whether `op` is an RC response opcode.
fn is_response(op: Opcode) -> bool {
    op.is_rc_response()
}

/// Whether `op` is an MP request: data, READ request, atomics, probe.
fn is_mp_request(op: Opcode) -> bool {
    op.is_mp_request()
}

/// Whether `op` is an MP response: READ response, atomic acknowledgement, ACK.
fn is_mp_response(op: Opcode) -> bool {
    op.is_mp_response()
}

/// Whether a CE mark on `op` obliges its receiver to send a CNP
/// ("MR-CNP-1": a Base packet, not an Acknowledge, Atomic Acknowledge or
/// CNP; "MR-CNP-6": never for MP).
fn needs_cnp(op: Opcode) -> bool {
    let base = matches!(
        op.class(),
        ServiceClass::Rc | ServiceClass::Uc | ServiceClass::Ud
    );
    base && !matches!(op, Opcode::RC_ACK | Opcode::RC_ATOMIC_ACK)
}

impl ConversationJudge {
    /// A judge that has seen nothing.
    pub fn new(cfg: ConversationConfig) -> Self {
        let cnp = cfg
            .np
            .filter(|p| p.enabled)
            .map(|p| CnpJudge::new(p, cfg.tolerance_ns, cfg.lossy));
        let cfg_shadow = cfg.shadow_bytes;
        ConversationJudge {
            cfg,
            conns: Vec::new(),
            free: Vec::new(),
            by_key: HashMap::default(),
            by_response: HashMap::default(),
            closed: Vec::new(),
            closed_dropped: 0,
            evicted: 0,
            cnp,
            orphans: 0,
            last_ns: 0,
            swept_ns: 0,
            setups: cm::Setups::default(),
            mp_setups: mp_setup::MpSetups::default(),
            cm_found: Vec::new(),
            verdicts: Vec::new(),
            shadow: (cfg_shadow > 0).then(|| shadow::Shadow::new(cfg_shadow)),
        }
    }

    /// A CM MAD on QP1 ([`CmMad`](metaroce_codec::cm::CmMad)): a REQ and
    /// its REP declare a connection, which is then judged from its first
    /// packet with what they declared (see `cm.rs`); their MP setup blocks
    /// are judged (see `mp_setup.rs`), the findings given out with the
    /// MAD's packet by the next [`Self::on_packet`].
    pub fn on_cm(&mut self, meta: &PacketMeta, mad: &metaroce_codec::cm::CmMad) {
        self.setups.on_mad(meta.src, meta.dst, meta.frame, mad);
        self.mp_setups
            .on_mad(meta.src, meta.dst, meta.frame, mad, &mut self.cm_found);
    }

    /// Notes about the capture the judge drew from the traffic (not
    /// findings): connections in which the capture point lost frames.
    pub fn notes(&self) -> Vec<String> {
        let all = self.connections();
        let lost: Vec<u64> = all
            .iter()
            .filter(|c| c.behaviour.capture_loss_from.is_some())
            .map(|c| c.first_frame)
            .collect();
        let mut notes: Vec<String> = self.mp_setups.note().into_iter().collect();
        let reordered: Vec<u64> = all
            .iter()
            .filter_map(|c| c.behaviour.reordered_frame)
            .collect();
        if !reordered.is_empty() {
            let n: u64 = all.iter().map(|c| c.behaviour.reordered).sum();
            notes.push(format!(
                "cross-direction reordering by the capture point: {n} Acknowledge(s) captured before the request they acknowledge, within {} µs (first at frames {}); judged in their sent order",
                self.cfg.reorder_ns / 1000,
                reordered.iter().take(16).map(u64::to_string).collect::<Vec<_>>().join(", ")
            ));
        }
        if let Some(sh) = self
            .shadow
            .as_ref()
            .filter(|s| s.contradictions + s.dropped > 0)
        {
            notes.push(format!(
                "shadow memory: {} READ response(s) or atomic original value(s) contradicted what earlier frames of the capture proved ({} reported as information); {} payload byte(s) not kept over the {}-byte budget; a contradiction is no proof of a NIC fault (the host CPU, QPs not captured, NAKed WRITEs and lost frames change memory too)",
                sh.contradictions,
                sh.contradictions.min(shadow::MAX_REPORTED),
                sh.dropped,
                self.cfg.shadow_bytes
            ));
        }
        if lost.is_empty() {
            return notes;
        }
        notes.push(format!(
            "frames lost by the capture point: {} connection(s) show request PSN gaps that later acknowledgements cover (connections at frames {}{}); each is judged as --lossy does from the first such acknowledgement on, and the findings that rested on its gaps are withheld",
            lost.len(),
            lost.iter()
                .take(16)
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            if lost.len() > 16 { ", …" } else { "" }
        ));
        notes
    }

    /// Judges one packet; returns the findings it shows (and those of
    /// connections it closes, and CNP deadlines it passes).
    pub fn on_packet(
        &mut self,
        meta: &PacketMeta,
        pkt: &RocePacket<'_>,
    ) -> Vec<ConversationFinding> {
        self.on_packet_marked(meta, pkt, None)
    }

    /// [`Self::on_packet`] with the mark of the packet's payload taken while
    /// its ICRC was checked
    /// ([`verify_wire_marked`](metaroce_codec::icrc::verify_wire_marked)):
    /// a request's payload is then kept as that mark, not copied, for
    /// comparing its retransmissions with it (MR-REQ-5, by CRC-32).
    pub fn on_packet_marked(
        &mut self,
        meta: &PacketMeta,
        pkt: &RocePacket<'_>,
        mark: Option<PayloadMark>,
    ) -> Vec<ConversationFinding> {
        let headers_only;
        let (pkt, mark) = match meta.payload_len {
            Some(len) => {
                headers_only = RocePacket {
                    payload: UNCAPTURED.get(..len).unwrap_or(&UNCAPTURED),
                    pad: &UNCAPTURED[..usize::from(pkt.bth.pad_count)],
                    ..*pkt
                };
                (&headers_only, None)
            }
            None => (pkt, mark),
        };
        let mut out = std::mem::take(&mut self.cm_found);
        self.advance(meta.timestamp_ns, &mut out);
        let op = pkt.bth.opcode;
        self.mp_setups.on_packet(
            meta.src,
            meta.dst,
            pkt.bth.dest_qp,
            op,
            meta.frame,
            &mut out,
        );
        let ce = meta.ecn == 3;
        let mp_req = is_mp_request(op);
        let mut sender_qp = None;
        if is_request(op) || mp_req {
            let route = Route::new(&meta.src, &meta.dst, pkt.bth.dest_qp, mp_req);
            let idx = match self.by_key.get(&route) {
                Some(&i) => i,
                None => {
                    let key = ConnectionKey {
                        requester: meta.src,
                        responder: meta.dst,
                        responder_qpn: pkt.bth.dest_qp,
                    };
                    self.open(key, mp_req, meta, &mut out)
                }
            };
            if let Some(conn) = self.conns[idx].as_mut() {
                let from = out.len();
                conn.summary.ce_marked += u64::from(ce);
                conn.on_request(meta, pkt, mark, &self.cfg, &mut out);
                if let Some(sh) = self.shadow.as_mut()
                    && meta.payload_len.is_none()
                    && meta.admitted
                {
                    let pmtu = conn.summary.behaviour.pmtu;
                    sh.on_request(&mut conn.mem, pmtu, (meta.dst, meta.frame), pkt);
                }
                self.verdicts.append(&mut conn.verdicts);
                conn.summary.findings += (out.len() - from) as u64;
                conn.label(&mut out[from..]);
                sender_qp = conn.summary.requester_qpn;
            }
            if mp_req && let Some(cnp) = self.cnp.as_mut() {
                cnp.mp_qp(meta.dst, pkt.bth.dest_qp);
            }
        } else if is_response(op) || is_mp_response(op) {
            match self.pair(meta, pkt) {
                Some(idx) => {
                    if let Some(conn) = self.conns[idx].as_mut() {
                        let from = out.len();
                        conn.summary.ce_marked += u64::from(ce);
                        conn.on_response(meta, pkt, &self.cfg, &mut out);
                        if let Some(sh) = self.shadow.as_mut()
                            && meta.payload_len.is_none()
                            && meta.admitted
                        {
                            let pmtu = conn.summary.behaviour.pmtu;
                            let at = (meta.src, meta.frame);
                            sh.on_response(&mut conn.mem, pmtu, at, pkt, &mut out);
                        }
                        self.verdicts.append(&mut conn.verdicts);
                        conn.summary.findings += (out.len() - from) as u64;
                        conn.label(&mut out[from..]);
                        sender_qp = Some(conn.summary.key.responder_qpn);
                    }
                }
                None => self.orphans += 1,
            }
            if is_mp_response(op)
                && let Some(cnp) = self.cnp.as_mut()
            {
                cnp.mp_qp(meta.dst, pkt.bth.dest_qp);
            }
        }
        if let Some(cnp) = self.cnp.as_mut() {
            if op == Opcode::CNP {
                cnp.on_cnp(
                    meta.frame,
                    meta.timestamp_ns,
                    (meta.src, meta.dst),
                    pkt.bth.dest_qp,
                    &mut out,
                );
            } else if ce && meta.admitted && needs_cnp(op) {
                if let Some(deth) = pkt.ext.deth {
                    sender_qp = Some(deth.src_qp); // "MR-CNP-4": UD
                }
                cnp.on_mark(&Mark {
                    frame: meta.frame,
                    timestamp_ns: meta.timestamp_ns,
                    src: meta.src,
                    dst: meta.dst,
                    sender_qp,
                });
            }
        }
        out
    }

    /// Time moved on to `now_ns`: CNP deadlines that passed, and (now and
    /// then) connections idle for longer than the idle time are closed.
    fn advance(&mut self, now_ns: u64, out: &mut Vec<ConversationFinding>) {
        self.last_ns = self.last_ns.max(now_ns);
        if let Some(cnp) = self.cnp.as_mut() {
            cnp.advance(self.last_ns, out);
        }
        let idle = self.cfg.idle_ns;
        if self.last_ns.saturating_sub(self.swept_ns) < (idle / 4).max(1) {
            return;
        }
        self.swept_ns = self.last_ns;
        let before = self.last_ns.saturating_sub(idle);
        let stale: Vec<usize> = self
            .conns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.as_ref().is_some_and(|c| c.last_ns < before))
            .map(|(i, _)| i)
            .collect();
        for i in stale {
            self.close(i, out);
        }
        if let Some(cnp) = self.cnp.as_mut() {
            cnp.forget_idle(before);
        }
    }

    /// Opens a connection for `key`, closing the least recently active one
    /// when [`MAX_CONNECTIONS`] are open.
    fn open(
        &mut self,
        key: ConnectionKey,
        mp: bool,
        meta: &PacketMeta,
        out: &mut Vec<ConversationFinding>,
    ) -> usize {
        if self.by_key.len() >= MAX_CONNECTIONS {
            let oldest = self
                .conns
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.as_ref().map(|c| (c.last_ns, i)))
                .min()
                .map(|(_, i)| i);
            if let Some(i) = oldest {
                self.close(i, out);
            }
        }
        let declared = if mp {
            None
        } else {
            self.setups
                .take(&(key.requester, key.responder, key.responder_qpn))
        };
        let cm_mp = self
            .mp_setups
            .view(&(key.requester, key.responder, key.responder_qpn));
        let mut conn = Connection::new(key, &self.cfg, mp, meta, declared, cm_mp.as_ref());
        let b = &mut conn.summary.behaviour;
        b.cm_mp = cm_mp;
        if b.cm.is_none() {
            b.cm = cm_mp.map(|c| c.frames);
        }
        let idx = match self.free.pop() {
            Some(i) => {
                self.conns[i] = Some(conn);
                i
            }
            None => {
                self.conns.push(Some(conn));
                self.conns.len() - 1
            }
        };
        self.by_key.insert(Route::of(&key, mp), idx);
        if let Some(d) = declared {
            // The responses' DestQP is declared: they pair at once.
            self.by_response.insert(
                Route::new(&key.responder, &key.requester, d.requester_qpn, mp),
                idx,
            );
        }
        idx
    }

    /// Closes connection `idx` before the end of the capture: what it still
    /// owed is reported, its summary kept.
    fn close(&mut self, idx: usize, out: &mut Vec<ConversationFinding>) {
        let Some(mut c) = self.conns.get_mut(idx).and_then(Option::take) else {
            return;
        };
        let from = out.len();
        c.finish(self.last_ns, self.cfg.ack_delay_ns, out);
        self.verdicts.append(&mut c.verdicts);
        c.summary.findings += (out.len() - from) as u64;
        c.label(&mut out[from..]);
        c.summary.evicted = true;
        self.evicted += 1;
        self.by_key.remove(&Route::of(&c.summary.key, c.summary.mp));
        self.by_response.retain(|_, &mut i| i != idx);
        self.free.push(idx);
        self.keep_summary(c.summary);
    }

    fn keep_summary(&mut self, summary: ConnectionSummary) {
        if self.closed.len() < MAX_CLOSED {
            self.closed.push(summary);
        } else {
            self.closed_dropped += 1;
        }
    }

    /// The connection a response belongs to, pairing it on first sight.
    fn pair(&mut self, meta: &PacketMeta, pkt: &RocePacket<'_>) -> Option<usize> {
        let qpn = pkt.bth.dest_qp;
        let mp = is_mp_response(pkt.bth.opcode);
        let rkey = Route::new(&meta.src, &meta.dst, qpn, mp);
        if let Some(&i) = self.by_response.get(&rkey) {
            return Some(i);
        }
        // An RC QP is connected to one peer QP: a response addressed to the
        // responder QP of the reverse connection belongs to the connection
        // whose responder is that one's requester QP.
        let reverse = self
            .by_key
            .get(&rkey)
            .and_then(|&i| self.conns.get(i)?.as_ref()?.summary.requester_qpn)
            .and_then(|q| self.by_key.get(&Route::new(&meta.dst, &meta.src, q, mp)))
            .copied()
            .filter(|&i| {
                self.conns[i]
                    .as_ref()
                    .is_some_and(|c| c.summary.requester_qpn.is_none())
            });
        if let Some(idx) = reverse {
            if let Some(c) = self.conns[idx].as_mut() {
                c.summary.requester_qpn = Some(qpn);
            }
            self.by_response.insert(rkey, idx);
            return Some(idx);
        }
        let psn = pkt.bth.psn;
        let unpaired: Vec<usize> = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (i, c)))
            .filter(|(_, c)| {
                c.summary.key.responder == meta.src
                    && c.summary.key.requester == meta.dst
                    && c.summary.requester_qpn.is_none()
                    && c.summary.mp == mp
            })
            .map(|(i, _)| i)
            .collect();
        let holding: Vec<usize> = unpaired
            .iter()
            .copied()
            .filter(|&i| self.conns[i].as_ref().is_some_and(|c| c.holds(psn)))
            .collect();
        let idx = match (holding.as_slice(), unpaired.as_slice()) {
            ([i], _) | ([], [i]) => *i,
            _ => return None,
        };
        if let Some(c) = self.conns[idx].as_mut() {
            c.summary.requester_qpn = Some(qpn);
        }
        self.by_response.insert(rkey, idx);
        Some(idx)
    }

    /// The capture ended: what was required and never observed.
    pub fn finish(&mut self) -> Vec<ConversationFinding> {
        let mut all = std::mem::take(&mut self.cm_found);
        if let Some(cnp) = self.cnp.as_mut() {
            // Deadlines up to the last packet were judged as time passed;
            // later ones fall after the capture and are not judged.
            cnp.advance(self.last_ns, &mut all);
        }
        for c in self.conns.iter_mut().flatten() {
            let mut out = Vec::new();
            c.finish(self.last_ns, self.cfg.ack_delay_ns, &mut out);
            self.verdicts.append(&mut c.verdicts);
            c.summary.findings += out.len() as u64;
            c.label(&mut out);
            all.extend(out);
        }
        all
    }

    /// Per-connection counts, closed connections included, in order of
    /// first appearance.
    pub fn connections(&self) -> Vec<ConnectionSummary> {
        let mut all: Vec<ConnectionSummary> = self.closed.clone();
        all.extend(self.conns.iter().flatten().map(|c| c.summary));
        all.sort_by_key(|c| c.first_frame);
        all
    }

    /// Connections closed before the end of the capture (idle or to make
    /// room), and how many of their summaries were not kept.
    pub fn evicted(&self) -> (u64, u64) {
        (self.evicted, self.closed_dropped)
    }

    /// What the traffic showed of requests that failed admission as far as
    /// the capture shows it (`admitted: false`, a wrong ICRC say), each
    /// (frame, taken): `true` when a later acknowledgement covers it (its
    /// receiver took it: the capture point recorded it wrong), `false` when
    /// a sequence NAK, its retransmission or the end of its connection
    /// shows it was dropped. One such request per connection is followed at
    /// a time ([`Self::follows`]); the others get no verdict.
    pub fn take_admission_verdicts(&mut self) -> Vec<(u64, bool)> {
        std::mem::take(&mut self.verdicts)
    }

    /// Whether the judge follows the fate of request `pkt` (captured as
    /// `meta`) and will give a verdict on it.
    pub fn follows(&self, meta: &PacketMeta, pkt: &RocePacket<'_>) -> bool {
        if !is_request(pkt.bth.opcode) {
            return false;
        }
        let key = ConnectionKey {
            requester: meta.src,
            responder: meta.dst,
            responder_qpn: pkt.bth.dest_qp,
        };
        self.by_key
            .get(&Route::of(&key, false))
            .and_then(|&i| self.conns.get(i)?.as_ref())
            .is_some_and(|c| c.follows(meta.frame))
    }

    /// Payload bytes the shadow memory holds (0 without one), and those it
    /// did not keep.
    pub fn shadow_bytes(&self) -> (usize, u64) {
        self.shadow
            .as_ref()
            .map_or((0, 0), |s| (s.held(), s.dropped))
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.by_key.len()
    }

    /// Responses paired with no connection.
    pub fn orphans(&self) -> u64 {
        self.orphans
    }

    /// Requests queued at the responder sides and MP PSNs in flight (the
    /// memory the judge holds).
    pub fn pending(&self) -> usize {
        self.conns.iter().flatten().map(Connection::pending).sum()
    }

    /// The trimming DSCP that the RDMA-CM exchange of the QP `dest_qp` at
    /// `dst` agreed with `src` (SPEC.md §7.1.1, MR-MPN-9: the REQ's, for
    /// both directions), when the capture holds the exchange and it set up
    /// an MP QP with trimming on.
    pub fn agreed_trim_dscp(&self, src: IpAddr, dst: IpAddr, dest_qp: u32) -> Option<u8> {
        self.mp_setups.view(&(src, dst, dest_qp))?.agreed?.trim_dscp
    }

    /// Whether some RDMA-CM exchange in the capture so far agreed a
    /// trimming DSCP: when not, [`ConversationJudge::agreed_trim_dscp`] is
    /// `None` for every connection.
    pub fn any_trim_agreed(&self) -> bool {
        self.mp_setups.trim_agreed()
    }

    /// The QPNs of the connection `pkt` belongs to and its first frame, when
    /// the judge follows it (for reporting per-packet findings by QP and
    /// connection).
    pub fn qpns_of(&self, meta: &PacketMeta, pkt: &RocePacket<'_>) -> Option<(Vec<u32>, u64)> {
        let op = pkt.bth.opcode;
        let mp = is_mp_request(op) || is_mp_response(op);
        let idx = if is_request(op) || is_mp_request(op) {
            let key = ConnectionKey {
                requester: meta.src,
                responder: meta.dst,
                responder_qpn: pkt.bth.dest_qp,
            };
            self.by_key.get(&Route::of(&key, mp))
        } else {
            self.by_response
                .get(&Route::new(&meta.src, &meta.dst, pkt.bth.dest_qp, mp))
        }?;
        self.conns
            .get(*idx)?
            .as_ref()
            .map(|c| (c.qpns(), c.summary.first_frame))
    }
}
