//! A judge for observed MP streams (captures): MP request packets of one QP
//! direction and the MP ACKs that answer them, in time order. It may start
//! mid-conversation, so every check is made only where the capture shows
//! enough to be sure (no finding on what the capture cannot tell).
//!
//! Checks: entropy set membership (MR-MPS-1) and coverage before repeat
//! (MR-MPS-3); retransmissions only of PSNs not acknowledged (MR-MPL-6) and
//! not before they can be deemed lost (MR-MPL-4), with R set and the
//! original fields (MR-MPL-7); bytes in flight against `mp_cwnd_max`
//! (MR-MPC-1, MR-MPC-5), except what MR-MPC-10 exempts (READ re-requests,
//! and one copy of the oldest unacknowledged PSN per loss); ACK content: cumulative PSN monotone (MR-MPA-3),
//! SACK base rule (MR-MPA-4), bits only for PSNs sent (MR-MPA-4), never
//! un-reporting (MR-MPA-5), echoed R/T flags (MR-MPA-6), syndrome 0x1F
//! (MR-MPA-8), no NAK 0x60 (MR-MPL-9), BTH flags (MR-MPH-6); MPETH O alike
//! in every packet of a message (MR-MPP-21; whether the peer announced O
//! is known only from a CM exchange, see below); and, for a capture
//! taken at the responder, the ACK deadlines (MR-MPA-1, MR-MPA-2).
//!
//! # What the CM exchange adds ([`MpJudge::setup`])
//!
//! When the capture holds the RDMA-CM REQ and REP whose MetaRoCE setup
//! blocks set the QP up (SPEC.md §7.1.1), the conversation judge gives
//! the judge the agreed values (`cfg.window`, `cfg.trim_dscp`,
//! `cfg.peer_ordered`, `cfg.resource_nak`) and the frames of the two
//! blocks, and three more rules are judged, each naming the block it
//! rests on:
//!
//! - MR-MPP-21: MPETH O set toward a peer whose block had O clear (first
//!   such packet of the connection);
//! - MR-MPP-23: NAK 0x66 toward a requester whose block had RN clear (this
//!   rule is judged without a CM exchange too when `cfg.resource_nak` is
//!   `Some(false)` from a profile);
//! - MR-MPW-2: a packet whose PSN p is more than W after the cumulative
//!   ACK PSN. Only what the capture proves: the packet is held until an
//!   MP ACK triggered by a packet the requester stamped later (echoed
//!   timestamp after p's, MR-MPA-6) still has p more than W after its
//!   cumulative PSN. That ACK left the responder after every ACK the
//!   requester had when it built p (the responder's cumulative PSN only
//!   grows, MR-MPA-3), so a lost or reordered ACK cannot make a correct
//!   requester fail. First such packet of the connection.
//!
//! # The order of MP ACKs (MR-MPA-3, MR-MPA-5)
//!
//! Both rules speak of the order in which the responder *sent* its ACKs.
//! MP ACKs are sprayed too (each leaves from a value of the responder's
//! entropy set, MR-MPS-1, MR-MPS-9), so ACKs on different paths may reach
//! a capture point in the opposite order; that is the network's doing, not
//! the responder's. [`AckOrder`] says what the judge may assume:
//!
//! - [`AckOrder::AsSent`]: the ACKs come in the order they were sent (a
//!   harness that sees the responder's output directly). Every ACK is
//!   compared with everything reported before it.
//! - [`AckOrder::AsCaptured`] (the default, and what `metaroce check`
//!   uses): an ACK is compared only with ACKs the capture *proves* were
//!   sent before it, which are
//!   1. the earlier ACKs on the same path: same UDP source port (the
//!      addresses, the destination port 4791 and the QPs are those of the
//!      connection), so the same 5-tuple, which ECMP keeps on one path and
//!      a path delivers in order; and
//!   2. the ACKs captured before the ACK's triggering packet was (its
//!      echoed UDP source port and MPETH timestamp, MR-MPA-6, name a
//!      request of the capture; when several of the latest
//!      1024 transmissions carry that echo, the earliest counts), by more
//!      than the timestamp tolerance: such an ACK left the responder
//!      before the capture point saw it, so before the trigger reached the
//!      responder, so before this ACK was sent. This holds wherever the
//!      capture point lies on the path between the peers.
//!
//!   ACKs on different paths, neither proven first, are not compared: a
//!   cumulative PSN lower than one seen on another path is no finding.
//!
//! # MR-MPL-6 and the sender's clock
//!
//! MR-MPL-6 counts only acknowledgements the requester had *processed*
//! when the copy left: a copy built before a covering ACK reached the
//! requester may be captured after that ACK (a loaded host hands it to
//! the link late). A copy's MPETH timestamp is the requester's clock
//! between building it and handing it to the link (MR-MPH-5, new per
//! copy, MR-MPL-7), so the judge keeps one number per requester, the
//! clock offset: the smallest (capture time − timestamp) modulo 2^32 over
//! its stamped packets so far (probes included; a stamp of 0 is skipped).
//! A copy's stamp plus that offset is when it was stamped, in capture time,
//! late by at most the fastest transit to the capture point; both sides
//! are taken modulo 2^32, so the 32-bit stamp may wrap (every ~4.3 s) and
//! capture times exceed it. A copy of an acknowledged PSN is MR-MPL-6 only
//! when stamped after the capture time of the first ACK known to cover the
//! PSN (its first SACK bit, else the first cumulative mark at or past it;
//! a forgotten mark only makes that time later) by more than
//! [`MpJudge::tolerance_ns`]. When no earlier stamped packet was seen, the
//! stamp is 0 or no covering ACK is remembered, nothing is reported. The
//! finding names the copy, the ACK and, when kept, the previous copy.
//! A harness whose capture times are the requester's own time and that
//! feeds each ACK when the requester receives it (the differential fuzz
//! driver) sets [`SenderClock::Capture`]: stamps are then compared with
//! the ACK's time directly, with no estimate and no tolerance.

use super::MpConfig;
use crate::Finding;
use metaroce_codec::ext::Syndrome;
use metaroce_codec::{Opcode, Psn, RocePacket};
use std::collections::{BTreeMap, BTreeSet};

/// Transmissions whose echoes the judge remembers (bounded memory).
const RECENT: usize = 1024;

/// Which clock the requester's MPETH timestamps are on, for MR-MPL-6
/// (see "MR-MPL-6 and the sender's clock").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SenderClock {
    /// Its own, mapped onto capture time by the smallest (capture time −
    /// timestamp) seen (a capture from a link).
    #[default]
    Estimated,
    /// The capture's clock, and ACK times are when the requester received
    /// them (a harness at the requester's port whose capture times are
    /// the requester's own time): a copy stamped after its covering ACK's
    /// time is MR-MPL-6, with no estimate and no tolerance.
    Capture,
}

/// Where the capture was taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CapturePoint {
    /// At the requester: request times are transmit times.
    #[default]
    Requester,
    /// At the responder: request times are arrival times, so ACK deadlines apply.
    Responder,
}

/// Most paths (UDP source ports of MP ACKs) whose latest ACK the judge
/// keeps per connection: the size of the largest entropy set (MR-MPS-2).
/// ACKs on further paths are compared only by the trigger's time.
const MAX_PATHS: usize = 256;

/// What the judge may assume about the order of the MP ACKs it is given
/// (see the module documentation, "The order of MP ACKs").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AckOrder {
    /// The ACKs come in the order the responder sent them (a harness that
    /// sees the responder's output before any network): MR-MPA-3 and
    /// MR-MPA-5 compare each ACK with every earlier one.
    AsSent,
    /// The ACKs come as a capture point behind the spraying saw them: ACKs
    /// on different paths may have been reordered, so an ACK is compared
    /// only with those proven sent before it (same path, or captured
    /// before its triggering packet).
    #[default]
    AsCaptured,
}

/// The latest MP ACK seen on one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PathAck {
    /// Its cumulative ACK PSN.
    cum: Psn,
    /// Its SACK base PSN.
    base: Psn,
    /// Its SACK bitmap.
    bitmap: u64,
}

impl PathAck {
    /// Whether this ACK's bitmap reports `q` received beyond its cumulative PSN.
    fn sacked(&self, q: Psn) -> bool {
        let i = q.distance(self.base);
        q.is_after(self.cum) && i < 64 && self.bitmap & (1u64 << (63 - i)) != 0
    }
}

/// What an MP ACK is compared with (MR-MPA-3, MR-MPA-5).
#[derive(Clone, Copy, Debug)]
struct Earlier {
    /// The latest cumulative ACK PSN of the ACKs proven sent before it.
    cum: Option<Psn>,
    /// The previous ACK on its path ([`AckOrder::AsCaptured`]).
    path: Option<PathAck>,
    /// PSNs first reported received (in a bitmap) at a capture time before
    /// this were reported by an ACK sent before it.
    before: u64,
}

/// One observed request transmission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sent {
    time: u64,
    ev: u16,
    ts: u32,
    retx: bool,
    opcode: Opcode,
    msn: u32,
    offset: u32,
    msg_len: u32,
    len: u32,
    /// PSNs the request takes: n for a READ request (MR-MPH-12), else 1.
    span: u32,
    /// Order of this transmission.
    seq: u64,
    /// Capture frame of this transmission.
    frame: u64,
}

/// The frames of the RDMA-CM REQ and REP whose setup blocks set up the QP
/// direction a judge follows (SPEC.md §7.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetupBlocks {
    /// The REQ or REP that carried the requester's block (its RN).
    pub requester: u64,
    /// The REQ or REP that carried the responder's block (its O).
    pub responder: u64,
}

/// Packets an MP judge saw with the trimming DSCP ([`MpJudge::on_dscp`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrimDscpSeen {
    /// Complete (their ICRC verifies): sent with it, MR-MPT-9.
    pub intact: u64,
    /// Trimmed by a switch, damaged, or with the ICRC not captured.
    pub not_intact: u64,
    /// MR-MPT-9 was reported (once per connection).
    pub reported: bool,
}

/// The judge's state.
///
/// Memory is bounded by the PSNs in flight, not by the capture's length:
/// transmissions are forgotten once cumulatively acknowledged (a later
/// request with such a PSN is still caught, MR-MPL-6), acknowledged
/// transmission orders only as long as an unacknowledged PSN may need them,
/// and two uses per entropy value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpJudge {
    /// Parameters of the observed QP (entropy set of the requester, K, PMTU, bounds).
    pub cfg: MpConfig,
    /// Where the capture was taken.
    pub point: CapturePoint,
    /// What the judge may assume about the order of MP ACKs (default:
    /// [`AckOrder::AsCaptured`]).
    pub ack_order: AckOrder,
    /// How far capture timestamps may be off (ns): the loss-by-time rule
    /// (MR-MPL-4), the ACK deadlines (MR-MPA-1), the age below which a
    /// packet surely counts in flight (MR-MPC-1), and the time a copy may
    /// be stamped after its covering ACK was captured (MR-MPL-6) are
    /// widened by it.
    pub tolerance_ns: u64,
    /// Which clock the requester's timestamps are on (default:
    /// [`SenderClock::Estimated`]).
    pub sender_clock: SenderClock,
    /// The setup blocks the QP's values came from, when the capture holds
    /// its CM exchange (see "What the CM exchange adds"); `None`: the
    /// values are a profile's or the defaults, and MR-MPP-21's O toward
    /// the peer and MR-MPW-2 are not judged.
    pub setup: Option<SetupBlocks>,
    /// MR-MPP-21 (bit 0) and MR-MPW-2 (bit 1) reported from the setup.
    setup_reported: u8,
    /// Packets captured with the trimming DSCP: complete ones (their
    /// ICRC verifies, MR-MPT-9) and the others (trimmed by a switch, or
    /// damaged), and whether MR-MPT-9 was reported.
    pub trim_dscp_seen: TrimDscpSeen,
    /// The first packet held for MR-MPW-2: PSN, MPETH timestamp, frame.
    beyond_window: Option<(Psn, u32, u64)>,
    /// Latest transmission per PSN, not yet cumulatively acknowledged.
    sent: BTreeMap<u32, Sent>,
    /// First PSN observed (earlier PSNs are outside the capture).
    first_psn: Option<Psn>,
    /// Transmissions so far.
    seq: u64,
    /// Latest cumulative ACK PSN observed.
    cum: Option<Psn>,
    /// PSNs reported received beyond `cum`, with the capture time ([`Self::clock`])
    /// and frame of the first ACK that reported each.
    sacked: BTreeMap<u32, (u64, u64)>,
    /// The latest capture time seen (capture times that go back are taken
    /// as this: times kept for ACKs are never earlier than the truth).
    clock: u64,
    /// When `cum` took each of its latest values: (capture time, value,
    /// frame of that ACK), oldest first, at most [`RECENT`].
    cum_marks: std::collections::VecDeque<(u64, Psn, u64)>,
    /// The requester's clock against capture time: the smallest (capture
    /// time − MPETH timestamp) modulo 2^32 over its packets (MR-MPH-5);
    /// see "MR-MPL-6 and the sender's clock" in the module documentation.
    clock_offset: Option<u32>,
    /// The latest MP ACK per path (UDP source port), at most [`MAX_PATHS`].
    paths: BTreeMap<u16, PathAck>,
    /// Orders of acknowledged transmissions (those an unacknowledged PSN
    /// may still count as later, MR-MPL-3/4).
    acked_seqs: BTreeSet<u64>,
    /// PSNs named by a NAK 0x65.
    trim_naked: BTreeSet<u32>,
    /// PSNs named by a resource NAK 0x66 (§7.16): arrived, not accepted,
    /// out of flight, resent without being deemed lost (MR-MPP-25).
    resource_naked: BTreeSet<u32>,
    /// Per entropy value, the orders of its last two uses.
    uses: BTreeMap<u16, Vec<u64>>,
    /// Values that may have been ineligible (E echoed, loss, probe): the
    /// latest order at which that was so.
    doubtful: BTreeMap<u16, u64>,
    /// Values that may be retired (a use of them may have been deemed
    /// lost, MR-MPF-1): doubtful at every later order, since a retired
    /// value stays out of the rounds until a probe on it is answered,
    /// which this judge does not follow (so it keeps them doubtful).
    retired: BTreeSet<u16>,
    /// (entropy, timestamp, capture time) of the latest [`RECENT`]
    /// transmissions, to tell an echo that names one packet from one that
    /// names several, and when the packet an echo names was captured.
    recent: std::collections::VecDeque<(u16, u32, u64)>,
    /// Requests that need a prompt ACK: PSN → (deadline, frame).
    ack_due: BTreeMap<u32, (u64, u64)>,
    /// MPETH O and frame of the first packet seen of each of the latest
    /// [`RECENT`] messages, by MSN (MR-MPP-21), and those MSNs oldest first.
    ordered: BTreeMap<u32, (bool, u64)>,
    ordered_age: std::collections::VecDeque<u32>,
    /// Findings so far.
    pub findings: Vec<Finding>,
    /// The frames each finding concerns (parallel to `findings`).
    finding_frames: Vec<Vec<u64>>,
}

impl MpJudge {
    /// A judge for a QP with parameters `cfg`, captured at `point`.
    pub fn new(cfg: MpConfig, point: CapturePoint) -> Self {
        MpJudge {
            cfg,
            point,
            ack_order: AckOrder::default(),
            tolerance_ns: 0,
            sender_clock: SenderClock::default(),
            setup: None,
            setup_reported: 0,
            trim_dscp_seen: TrimDscpSeen::default(),
            beyond_window: None,
            sent: BTreeMap::new(),
            first_psn: None,
            seq: 0,
            cum: None,
            sacked: BTreeMap::new(),
            clock: 0,
            cum_marks: std::collections::VecDeque::new(),
            clock_offset: None,
            paths: BTreeMap::new(),
            acked_seqs: BTreeSet::new(),
            trim_naked: BTreeSet::new(),
            resource_naked: BTreeSet::new(),
            uses: BTreeMap::new(),
            doubtful: BTreeMap::new(),
            retired: BTreeSet::new(),
            recent: std::collections::VecDeque::new(),
            ack_due: BTreeMap::new(),
            ordered: BTreeMap::new(),
            ordered_age: std::collections::VecDeque::new(),
            findings: Vec::new(),
            finding_frames: Vec::new(),
        }
    }

    /// MR-MPP-21: O set in every packet of a message or in none; the first
    /// packet the capture shows of each message decides.
    fn judge_ordered(&mut self, frame: u64, psn: Psn, m: &metaroce_codec::ext::MpethRepr) {
        let msn = m.msn.value();
        match self.ordered.get(&msn) {
            Some(&(o, first)) if o != m.ordered => self.report(
                "MR-MPP-21",
                format!(
                    "MPETH O {} in PSN {psn} but {} in an earlier packet of MSN {msn}",
                    u8::from(m.ordered),
                    u8::from(o)
                ),
                vec![frame, first],
            ),
            Some(_) => {}
            None => {
                if self.ordered_age.len() >= RECENT
                    && let Some(old) = self.ordered_age.pop_front()
                {
                    self.ordered.remove(&old);
                }
                self.ordered_age.push_back(msn);
                self.ordered.insert(msn, (m.ordered, frame));
            }
        }
    }

    /// MR-MPT-9 from a capture: a packet of this QP's connection sent by
    /// its requester (`from_requester`) or its responder, captured in
    /// `frame` with DSCP `dscp`. A packet with the trimming DSCP whose ICRC
    /// verifies (`intact`) is complete as its sender built it (the ICRC
    /// covers every byte but the masked IP fields, DSCP among them; a
    /// switch that cuts the payload leaves no valid ICRC, §7.10), so its
    /// sender used the trimming DSCP: a finding, first such packet of the
    /// connection, naming the frame and the setup block that agreed the
    /// DSCP. One whose ICRC fails is a trimmed packet (it carries the DSCP
    /// legitimately after a trimming switch) or a damaged one: counted, no
    /// finding; one whose ICRC the capture did not record (`intact`
    /// false too) cannot be told from a trimmed one.
    pub fn on_dscp(&mut self, frame: u64, dscp: u8, intact: bool, from_requester: bool) {
        let Some(d) = self.cfg.trim_dscp.filter(|&d| d == dscp) else {
            return;
        };
        if !intact {
            self.trim_dscp_seen.not_intact += 1;
            return;
        }
        self.trim_dscp_seen.intact += 1;
        if self.trim_dscp_seen.reported {
            return;
        }
        self.trim_dscp_seen.reported = true;
        let who = if from_requester {
            "requester"
        } else {
            "responder"
        };
        let mut frames = vec![frame];
        let agreed = match self.setup {
            Some(s) => {
                let block = s.requester.min(s.responder);
                frames.push(block);
                format!(" agreed in the setup block of frame {block}")
            }
            None => String::new(),
        };
        self.report(
            "MR-MPT-9",
            format!(
                "the {who} sent a complete packet (its ICRC verifies: no switch trimmed it) with DSCP {d}, the trimming DSCP{agreed} (first such packet)"
            ),
            frames,
        );
    }

    /// MR-MPP-21 and MR-MPW-2 against the values of the setup blocks (see
    /// "What the CM exchange adds").
    #[inline(never)]
    fn judge_setup(&mut self, frame: u64, psn: Psn, m: &metaroce_codec::ext::MpethRepr) {
        let Some(s) = self.setup else { return };
        if m.ordered && !self.cfg.peer_ordered && self.setup_reported & 1 == 0 {
            self.setup_reported |= 1;
            self.report(
                "MR-MPP-21",
                format!(
                    "MPETH O set in PSN {psn} toward a peer whose setup block (frame {}) had O clear: it does not honour O (first such packet)",
                    s.responder
                ),
                vec![frame, s.responder],
            );
        }
        if self.setup_reported & 2 == 0
            && self.beyond_window.is_none()
            && let Some(c) = self.cum
            && self.beyond_w(psn, c)
        {
            self.beyond_window = Some((psn, m.timestamp, frame));
        }
    }

    /// PSN `p` is more than W after cumulative ACK PSN `c` (MR-MPW-2).
    fn beyond_w(&self, p: Psn, c: Psn) -> bool {
        p.is_after(c) && p.distance(c) > self.cfg.window
    }

    /// An MP ACK in `frame` with cumulative PSN `cum` triggered by a
    /// packet stamped `echoed_ts` ([`Self::echoed`] found `echoes` of
    /// them): whether it proves the held packet beyond the window
    /// (MR-MPW-2).
    #[inline(never)]
    fn judge_window(&mut self, frame: u64, cum: Psn, echoed_ts: u32, echoes: usize) {
        let (Some((p, ts, p_frame)), Some(s)) = (self.beyond_window, self.setup) else {
            return;
        };
        if !self.beyond_w(p, cum) {
            // The responder's cumulative PSN reached p − W: the requester
            // may have had it when it built p.
            self.beyond_window = None;
            return;
        }
        let later = echoed_ts.wrapping_sub(ts);
        if echoes == 0 || later == 0 || later >= 1 << 31 {
            return;
        }
        self.beyond_window = None;
        self.setup_reported |= 2;
        self.report(
            "MR-MPW-2",
            format!(
                "PSN {p} sent more than W = {} (agreed in frames {} and {}) after the cumulative ACK PSN: an MP ACK triggered by a later packet still acknowledges only up to {cum}",
                self.cfg.window,
                s.requester.min(s.responder),
                s.requester.max(s.responder)
            ),
            vec![p_frame, frame, s.requester.min(s.responder)],
        );
    }

    /// The findings since the last call, each with the frames it concerns
    /// (the frame that shows it first).
    pub fn take_findings(&mut self) -> Vec<(Finding, Vec<u64>)> {
        let frames = std::mem::take(&mut self.finding_frames);
        std::mem::take(&mut self.findings)
            .into_iter()
            .zip(frames)
            .collect()
    }

    /// PSNs not yet cumulatively acknowledged whose transmission the judge
    /// keeps (its memory).
    pub fn in_flight(&self) -> usize {
        self.sent.len()
    }

    fn report(&mut self, id: &'static str, message: impl Into<String>, frames: Vec<u64>) {
        self.findings.push(Finding::new(id, message));
        self.finding_frames.push(frames);
    }

    fn cum_acked(&self, p: Psn) -> bool {
        self.cum.is_some_and(|c| !p.is_after(c))
    }

    fn acked(&self, p: Psn) -> bool {
        self.cum_acked(p) || self.sacked.contains_key(&p.value())
    }

    /// Acknowledged transmissions after order `seq`, counted up to `cap`.
    fn acked_after(&self, seq: u64, cap: usize) -> usize {
        self.acked_seqs.range(seq + 1..).take(cap).count()
    }

    fn check_deadlines(&mut self, now: u64) {
        if self.point != CapturePoint::Responder {
            return;
        }
        let tol = self.tolerance_ns;
        let late: Vec<(u32, u64)> = self
            .ack_due
            .iter()
            .filter(|&(_, &(d, _))| d.saturating_add(tol) < now)
            .map(|(&p, &(_, f))| (p, f))
            .collect();
        for (p, frame) in late {
            self.ack_due.remove(&p);
            self.report(
                "MR-MPA-1",
                format!("no MP ACK covered PSN {p} in time"),
                vec![frame],
            );
        }
    }

    /// An MP request packet (data, READ request, atomic or probe) observed at
    /// `now` with UDP source port `ev`.
    pub fn request(&self, p: &RocePacket<'_>, ev: u16, now: u64) -> Self {
        let mut j = self.clone();
        j.on_request(0, p, ev, now);
        j
    }

    /// An MP ACK or MP Atomic Acknowledge observed at `now`, every one on
    /// one path (UDP source port 0).
    pub fn ack(&self, p: &RocePacket<'_>, now: u64) -> Self {
        self.ack_on(p, 0, now)
    }

    /// An MP ACK or MP Atomic Acknowledge from UDP source port `path`
    /// observed at `now`.
    pub fn ack_on(&self, p: &RocePacket<'_>, path: u16, now: u64) -> Self {
        let mut j = self.clone();
        j.on_ack(0, p, path, now);
        j
    }

    /// End of the capture at `now`: deadlines that passed are reported.
    pub fn finish(&self, now: u64) -> Vec<Finding> {
        let mut j = self.clone();
        j.check_deadlines(now);
        j.findings
    }

    /// End of the capture at `now`, in place: the deadlines that passed
    /// join the findings.
    pub fn finish_at(&mut self, now: u64) {
        self.check_deadlines(now);
    }

    /// [`Self::request`] in place, for the request in capture frame `frame`.
    pub fn on_request(&mut self, frame: u64, p: &RocePacket<'_>, ev: u16, now: u64) {
        self.check_deadlines(now);
        let Some(m) = p.ext.mpeth else { return };
        // When the requester built this copy, in capture time (None when
        // the judge cannot tell): MR-MPL-6 below.
        let built = self.note_stamp(m.timestamp, now);
        if !self.cfg.entropy_set.is_empty() && !self.cfg.entropy_set.contains(&ev) {
            self.report(
                "MR-MPS-1",
                format!("source port {ev:#06x} outside the entropy set"),
                vec![frame],
            );
        }
        if self.recent.len() >= RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back((ev, m.timestamp, now));
        if p.bth.opcode == Opcode::MP_PROBE {
            self.doubtful.insert(ev, self.seq);
            return;
        }
        if self.setup.is_some() {
            self.judge_setup(frame, p.bth.psn, &m);
        }
        self.judge_ordered(frame, p.bth.psn, &m);
        let psn = p.bth.psn;
        self.first_psn.get_or_insert(psn);
        self.seq += 1;
        let seq = self.seq;
        let len = p.payload.len() as u32;
        // MR-MPC-10: the oldest unacknowledged PSN the capture shows, resent
        // when it can have been deemed lost, is exempt from cwnd once per loss.
        let oldest = !self.acked(psn)
            && !self
                .sent
                .keys()
                .any(|&o| !self.acked(Psn::new(o)) && psn.is_after(Psn::new(o)));
        let mut exempt = false;
        // A resend that only a resource NAK explains retires no value
        // (MR-MPF-11).
        let mut refused_only = false;
        // Retransmission checks. A PSN cumulatively acknowledged has been
        // sent (the responder received it), so any request that carries it
        // again is a retransmission, whether or not the capture holds the
        // original.
        let prev = self.sent.get(&psn.value()).copied();
        // A READ request with R set may re-request missing responses
        // (MR-MPR-7), and one with R clear and a nonzero offset is a
        // further part of a READ pulled in parts (MR-MPR-11, MR-MPR-12):
        // either's PSN, the READ's first PSN plus offset / PMTU, is one the
        // responder acknowledged when it accepted the READ (MR-MPR-2), and
        // its timing is MR-MPR-6's or cwnd's. The capture does not show
        // which responses are missing, so MR-MPL-4 and MR-MPL-6 are not
        // judged on it.
        let rerequest =
            p.bth.opcode == Opcode::MP_READ_REQUEST && (m.retransmission || m.offset > 0);
        // An atomic is retransmitted while no MP Atomic Acknowledge has
        // arrived, even if an MP ACK reported its PSN (MR-MPP-14): not
        // judged by MR-MPL-6 either.
        let atomic =
            matches!(p.bth.opcode, Opcode::MP_CMP_SWAP | Opcode::MP_FETCH_ADD) && m.retransmission;
        let rerequest = rerequest || atomic;
        if prev.is_none() && self.cum_acked(psn) && !rerequest {
            self.judge_mpl_6(psn, built, vec![frame]);
            if !m.retransmission || !p.bth.ack_req {
                self.report(
                    "MR-MPL-7",
                    format!("retransmission of PSN {psn} without R or AckReq"),
                    vec![frame],
                );
            }
            return;
        }
        if let Some(prev) = prev {
            let frames = vec![frame, prev.frame];
            if rerequest {
                // Judged by neither MR-MPL-4 nor MR-MPL-6 (above).
            } else if self.acked(psn) {
                self.judge_mpl_6(psn, built, frames.clone());
            } else {
                let k = self.cfg.reorder_threshold as usize;
                let later_acked = self.acked_after(prev.seq, k);
                let age = now.saturating_sub(prev.time);
                let may_be_lost = later_acked >= k
                    || age.saturating_add(self.tolerance_ns) >= self.cfg.rto_min
                    || self.trim_naked.contains(&psn.value());
                // MR-MPP-25: a PSN named by a resource NAK is resent
                // without a loss verdict.
                refused_only = !may_be_lost && self.resource_naked.contains(&psn.value());
                exempt = oldest && may_be_lost;
                if !may_be_lost && !refused_only {
                    self.report(
                        "MR-MPL-4",
                        format!(
                            "PSN {psn} retransmitted with {later_acked} later PSNs acknowledged, {age} ns after its last copy"
                        ),
                        frames.clone(),
                    );
                }
            }
            if !m.retransmission || !p.bth.ack_req {
                self.report(
                    "MR-MPL-7",
                    format!("retransmission of PSN {psn} without R or AckReq"),
                    frames.clone(),
                );
            }
            if (prev.opcode, prev.msn, prev.offset, prev.msg_len)
                != (p.bth.opcode, m.msn.value(), m.offset, m.msg_len)
                && p.bth.opcode != Opcode::MP_READ_REQUEST
            {
                self.report(
                    "MR-MPL-7",
                    format!("retransmission of PSN {psn} differs from the original"),
                    frames,
                );
            }
            // The lost copy's value may be retired now.
            if !refused_only {
                self.doubtful.insert(prev.ev, seq);
                self.retired.insert(prev.ev);
            }
        }
        self.trim_naked.remove(&psn.value());
        self.resource_naked.remove(&psn.value());
        // Bytes in flight, lower bound: unacknowledged, not NAKed, younger
        // than the smallest possible RTO and with fewer than K later PSNs
        // acknowledged, so none of them can have been deemed lost.
        let k = self.cfg.reorder_threshold as usize;
        let inflight: u64 = self
            .sent
            .iter()
            .filter(|&(&q, s)| {
                !self.acked(Psn::new(q))
                    && !self.trim_naked.contains(&q)
                    && !self.resource_naked.contains(&q)
                    && now.saturating_sub(s.time).saturating_add(self.tolerance_ns)
                        < self.cfg.rto_min
                    && self.acked_after(s.seq, k) < k
                    && q != psn.value()
            })
            .map(|(_, s)| u64::from(s.len))
            .sum();
        // A READ request with R set (a re-request, or a resent READ request)
        // adds no request payload; a re-request of missing responses is
        // exempt (MR-MPC-10), and the capture cannot tell which are missing.
        if p.bth.opcode == Opcode::MP_READ_REQUEST && m.retransmission {
            exempt = true;
        }
        if !exempt && inflight > 0 && inflight + u64::from(len) > self.cfg.cwnd_max {
            self.report(
                "MR-MPC-1",
                format!(
                    "at least {inflight} bytes in flight plus {len} exceed mp_cwnd_max {}",
                    self.cfg.cwnd_max
                ),
                vec![frame],
            );
        }
        self.note_losses(now);
        for &v in &self.retired {
            self.doubtful.insert(v, seq);
        }
        // Coverage before repeat (MR-MPS-3), judged only between the previous
        // two uses of the value, where a whole round must lie.
        if let Some(&[from, _]) = self.uses.get(&ev).map(Vec::as_slice) {
            let missing: Vec<u16> = self
                .cfg
                .entropy_set
                .iter()
                .copied()
                .filter(|&u| u != ev)
                .filter(|u| {
                    !self
                        .uses
                        .get(u)
                        .is_some_and(|s| s.iter().any(|&x| x > from))
                })
                .filter(|u| {
                    self.doubtful
                        .get(u)
                        .is_none_or(|&x| x <= from.saturating_sub(1))
                })
                .collect();
            if !missing.is_empty() {
                self.report(
                    "MR-MPS-3",
                    format!("entropy {ev:#06x} reused before {missing:x?} were used in the round"),
                    vec![frame],
                );
            }
        }
        let uses = self.uses.entry(ev).or_default();
        uses.push(seq);
        if uses.len() > 2 {
            uses.remove(0);
        }
        if (p.bth.ack_req || m.retransmission) && !self.acked(psn) {
            self.ack_due
                .insert(psn.value(), (now + self.cfg.ack_prompt_max, frame));
        }
        self.sent.insert(
            psn.value(),
            Sent {
                time: now,
                ev,
                ts: m.timestamp,
                retx: m.retransmission,
                opcode: p.bth.opcode,
                msn: m.msn.value(),
                offset: m.offset,
                msg_len: m.msg_len,
                len,
                span: if p.bth.opcode == Opcode::MP_READ_REQUEST {
                    super::packets_for(m.msg_len, self.cfg.pmtu)
                } else {
                    1
                },
                seq,
                frame,
            },
        );
    }

    /// The latest transmissions whose (entropy, timestamp) is `echo`: how
    /// many, and when the earliest of them was captured.
    fn echoed(&self, echo: (u16, u32)) -> (usize, Option<u64>) {
        self.recent
            .iter()
            .filter(|&&(ev, ts, _)| (ev, ts) == echo)
            .fold((0, None), |(n, first), &(_, _, t)| {
                (n + 1, Some(first.map_or(t, |f: u64| f.min(t))))
            })
    }

    /// What an MP ACK from UDP source port `path`, whose echo names
    /// transmissions captured at `trigger` at the earliest, may be compared
    /// with (MR-MPA-3, MR-MPA-5): what the ACKs proven sent before it
    /// reported, by [`Self::ack_order`] (see the module documentation).
    fn earlier(&self, path: u16, trigger: Option<u64>) -> Earlier {
        if self.ack_order == AckOrder::AsSent {
            return Earlier {
                cum: self.cum,
                path: None,
                before: u64::MAX,
            };
        }
        // The trigger reached the responder after the capture point saw
        // it; ACKs captured before `before` were sent before this one.
        let before = trigger.map_or(0, |t| t.saturating_sub(self.tolerance_ns));
        let by_time = match self.cum_marks.partition_point(|&(t, _, _)| t < before) {
            0 => None,
            n => self.cum_marks.get(n - 1).map(|&(_, c, _)| c),
        };
        let path = self.paths.get(&path).copied();
        let cum = match (by_time, path.map(|p| p.cum)) {
            (Some(a), Some(b)) => Some(if b.is_after(a) { b } else { a }),
            (a, b) => a.or(b),
        };
        Earlier { cum, path, before }
    }

    /// [`Self::ack_on`] in place, for the MP ACK in capture frame `frame`.
    pub fn on_ack(&mut self, frame: u64, p: &RocePacket<'_>, path: u16, now: u64) {
        let Some(s) = p.ext.sacketh else { return };
        self.clock = self.clock.max(now);
        if p.bth.ack_req || p.bth.se || p.bth.pad_count != 0 {
            self.report(
                "MR-MPH-6",
                "MP ACK with AckReq, SE or PadCnt set",
                vec![frame],
            );
        }
        let cum = p.bth.psn;
        // The transmissions the echo names (MR-MPA-6): the trigger is one.
        let (echoes, trigger_time) = self.echoed((s.echoed_entropy, s.echoed_timestamp));
        let earlier = self.earlier(path, trigger_time);
        if let Some(old) = earlier.cum
            && cum.is_before(old)
        {
            self.report(
                "MR-MPA-3",
                format!("cumulative ACK PSN moved back from {old} to {cum}"),
                vec![frame],
            );
        }
        if self.beyond_window.is_some() {
            self.judge_window(frame, cum, s.echoed_timestamp, echoes);
        }
        if s.syndrome.0 == 0x60 {
            self.report("MR-MPL-9", "MP responder sent NAK code 0", vec![frame]);
        }
        if s.syndrome.0 < 0x1F {
            self.report(
                "MR-MPA-8",
                format!("ACK syndrome {:#04x}, not 0x1F", s.syndrome.0),
                vec![frame],
            );
        }
        // MR-MPA-5: nothing reported received may be reported missing (by
        // an ACK proven sent before this one).
        for i in 0..64u32 {
            let q = s.sack_base_psn.add(i);
            if q.is_after(cum)
                && !s.is_sacked(q)
                && (self
                    .sacked
                    .get(&q.value())
                    .is_some_and(|&(t, _)| t < earlier.before)
                    || earlier.path.is_some_and(|a| a.sacked(q)))
            {
                self.report(
                    "MR-MPA-5",
                    format!("PSN {q} reported received, now missing"),
                    vec![frame],
                );
            }
        }
        // MR-MPA-4: bits only for PSNs that were sent (within the capture),
        // a READ request's n reserved PSNs included (MR-MPR-2). A PSN at or
        // before the latest cumulative ACK PSN seen was sent too: its
        // transmission was forgotten as acknowledged, and an ACK the network
        // delivered out of order (older cumulative PSN, MR-MPA-3's concern)
        // may still report it in its bitmap.
        if let Some(first) = self.first_psn {
            for i in 0..64u32 {
                let q = s.sack_base_psn.add(i);
                if s.is_sacked(q)
                    && !q.is_before(first)
                    && q.is_after(cum)
                    && !self.cum_acked(q)
                    && !self
                        .sent
                        .iter()
                        .any(|(&p, x)| q.distance(Psn::new(p)) < x.span)
                {
                    self.report(
                        "MR-MPA-4",
                        format!("bitmap reports PSN {q}, never sent"),
                        vec![frame],
                    );
                }
            }
        }
        // The triggering packet, by its echoes (MR-MPA-6, SACK base rule),
        // when they name one packet only: packets sent at one instant on
        // one value (a burst longer than the entropy set, a retransmission
        // beside new packets) share both.
        let mut matching = self
            .sent
            .iter()
            .filter(|(_, x)| x.ev == s.echoed_entropy && x.ts == s.echoed_timestamp)
            .map(|(&q, x)| (Psn::new(q), *x));
        // A transmission already forgotten (acknowledged) may share them
        // too: the echo must be unique among the recent transmissions.
        let unique = echoes <= 1;
        let trigger = match (matching.next(), matching.next()) {
            (Some(one), None) if unique => Some(one),
            _ => None,
        };
        if let Some((t, x)) = trigger {
            if s.retransmission != x.retx {
                self.report(
                    "MR-MPA-6",
                    format!(
                        "R flag {} but the trigger had R {}",
                        s.retransmission, x.retx
                    ),
                    vec![frame, x.frame],
                );
            }
            if s.syndrome.0 <= 0x1F && p.bth.opcode == Opcode::MP_ACK {
                let base = if t.is_after(cum.add(64)) {
                    t.sub(63)
                } else {
                    cum.add(1)
                };
                if s.sack_base_psn != base {
                    self.report(
                        "MR-MPA-4",
                        format!("SACK base {} where the rule gives {base}", s.sack_base_psn),
                        vec![frame, x.frame],
                    );
                }
            }
        }
        if s.ecn_ce {
            self.doubtful.insert(s.echoed_entropy, self.seq);
        }
        if s.syndrome.0 == 0x65 {
            self.trim_naked.insert(s.sack_base_psn.value());
            self.ack_due.remove(&s.sack_base_psn.value());
        }
        if s.syndrome == Syndrome::NAK_RESOURCE {
            // MR-MPP-23: only toward a requester that announced RN.
            if self.cfg.resource_nak == Some(false) {
                let (block, frames) = match self.setup {
                    Some(b) => (
                        format!(" (its setup block, frame {}, had RN clear)", b.requester),
                        vec![frame, b.requester],
                    ),
                    None => (String::new(), vec![frame]),
                };
                self.report(
                    "MR-MPP-23",
                    format!(
                        "resource NAK 0x66 for PSN {} toward a requester that did not announce RN{block}",
                        s.sack_base_psn
                    ),
                    frames,
                );
            }
            self.resource_naked.insert(s.sack_base_psn.value());
            self.ack_due.remove(&s.sack_base_psn.value());
        }
        // Record what is now acknowledged.
        let newly: Vec<u64> = self
            .sent
            .iter()
            .filter(|&(&q, _)| {
                let q = Psn::new(q);
                !self.acked(q) && (!q.is_after(cum) || s.is_sacked(q))
            })
            .map(|(_, x)| x.seq)
            .collect();
        self.acked_seqs.extend(newly);
        if self.cum.is_none_or(|c| cum.is_after(c)) {
            self.cum = Some(cum);
            self.mark_cum(cum, frame);
        }
        if self.paths.len() < MAX_PATHS || self.paths.contains_key(&path) {
            self.paths.insert(
                path,
                PathAck {
                    cum,
                    base: s.sack_base_psn,
                    bitmap: s.sack_bitmap,
                },
            );
        }
        for i in 0..64u32 {
            let q = s.sack_base_psn.add(i);
            if s.is_sacked(q) && q.is_after(cum) {
                self.sacked.entry(q.value()).or_insert((self.clock, frame));
            }
        }
        let c = self.cum;
        self.sacked
            .retain(|&q, _| c.is_none_or(|c| Psn::new(q).is_after(c)));
        let covered: Vec<u32> = self
            .ack_due
            .keys()
            .copied()
            .filter(|&q| self.acked(Psn::new(q)))
            .collect();
        for q in covered {
            self.ack_due.remove(&q);
        }
        if let Some((t, _)) = trigger {
            self.ack_due.remove(&t.value());
        }
        self.note_losses(now);
        self.forget_acknowledged();
        self.check_deadlines(now);
    }

    /// The cumulative ACK PSN seen so far became `cum` at [`Self::clock`].
    /// Marks no echo can need any more are dropped: a trigger is one of
    /// the [`RECENT`] latest transmissions, so the comparison uses at most
    /// one mark before the oldest of them was captured.
    fn mark_cum(&mut self, cum: Psn, frame: u64) {
        let oldest = self
            .recent
            .front()
            .map_or(0, |&(_, _, t)| t.saturating_sub(self.tolerance_ns));
        while self.cum_marks.len() >= RECENT
            || self.cum_marks.get(1).is_some_and(|&(t, _, _)| t < oldest)
        {
            self.cum_marks.pop_front();
        }
        self.cum_marks.push_back((self.clock, cum, frame));
    }

    /// A request stamped `ts` (MPETH timestamp, the requester's clock,
    /// MR-MPH-5) captured at `now`: the clock offset takes it in, and the
    /// result is when the requester stamped it, in capture time, or None
    /// when no earlier stamped packet was seen or the stamp is 0.
    fn note_stamp(&mut self, ts: u32, now: u64) -> Option<u64> {
        if ts == 0 {
            return None;
        }
        if self.sender_clock == SenderClock::Capture {
            // The stamp is `now` modulo 2^32, give or take a capture time
            // taken early: within 2^31 ns either side.
            let delta = i64::from(ts.wrapping_sub(now as u32) as i32);
            return Some(now.saturating_add_signed(delta));
        }
        // Capture times modulo 2^32 against the 32-bit stamp: the
        // difference is right across either one's wrap.
        let d = (now as u32).wrapping_sub(ts);
        let earlier = self.clock_offset;
        let off = match earlier {
            // `d` is the smaller one when it lies (modularly) before.
            Some(o) if d.wrapping_sub(o) <= 1 << 31 => o,
            _ => d,
        };
        self.clock_offset = Some(off);
        earlier?;
        // How long after its stamp, beyond the fastest packet, this copy
        // was captured: 0 ..= 2^31 since `off` is at most `d`.
        let lag = u64::from(d.wrapping_sub(off));
        Some(now.saturating_sub(lag))
    }

    /// The capture time and frame of the first ACK known to cover `psn`
    /// (a SACK bit, else the first cumulative mark at or past it; a mark
    /// forgotten makes the time later than the truth, never earlier).
    fn first_ack_of(&self, psn: Psn) -> Option<(u64, u64)> {
        if let Some(&a) = self.sacked.get(&psn.value()) {
            return Some(a);
        }
        self.cum_marks
            .iter()
            .find(|&&(_, c, _)| !psn.is_after(c))
            .map(|&(t, _, f)| (t, f))
    }

    /// MR-MPL-6 for a copy of the acknowledged PSN `psn` that the
    /// requester stamped at `built` (capture time): reported only when
    /// it was stamped later than the first covering ACK was captured, by
    /// more than the tolerance, so after that ACK reached the requester's
    /// link. Frames: the copy, the ACK, then `frames`' others.
    fn judge_mpl_6(&mut self, psn: Psn, built: Option<u64>, mut frames: Vec<u64>) {
        let (Some(built), Some((acked, ack_frame))) = (built, self.first_ack_of(psn)) else {
            return;
        };
        let tolerance = match self.sender_clock {
            SenderClock::Estimated => self.tolerance_ns,
            SenderClock::Capture => 0,
        };
        if built <= acked.saturating_add(tolerance) {
            return;
        }
        frames.insert(1.min(frames.len()), ack_frame);
        self.report(
            "MR-MPL-6",
            format!(
                "PSN {psn} retransmitted in a copy stamped {} ns after the ACK that covered it was captured",
                built - acked
            ),
            frames,
        );
    }

    /// A loss attributable to a value retires it (MR-MPF-1) when the PSN
    /// is deemed lost, which may be long before the capture shows its
    /// retransmission (the RTO deems every PSN in flight lost at once), or
    /// never (a later ACK acknowledges it before it is resent): every value
    /// whose latest unacknowledged use may have been deemed lost by `now`
    /// may be retired, so doubtful from the next request on. Run at each
    /// request and after each ACK (whose SACK bits may reach K, §7.8 rule
    /// (a), before a later ACK acknowledges the PSN cumulatively).
    fn note_losses(&mut self, now: u64) {
        let k = self.cfg.reorder_threshold as usize;
        let lost_values: Vec<u16> = self
            .sent
            .iter()
            .filter(|&(&q, s)| {
                !self.acked(Psn::new(q))
                    && (now.saturating_sub(s.time).saturating_add(self.tolerance_ns)
                        >= self.cfg.rto_min
                        || self.acked_after(s.seq, k) >= k)
            })
            .map(|(_, s)| s.ev)
            .collect();
        self.retired.extend(lost_values);
    }

    /// Forgets what no later packet can need: transmissions cumulatively
    /// acknowledged (a request with such a PSN is judged by `cum` alone),
    /// trim NAKs of them, and acknowledged orders older than every
    /// unacknowledged transmission.
    fn forget_acknowledged(&mut self) {
        let Some(c) = self.cum else { return };
        self.sent.retain(|&q, _| Psn::new(q).is_after(c));
        self.trim_naked.retain(|&q| Psn::new(q).is_after(c));
        self.resource_naked.retain(|&q| Psn::new(q).is_after(c));
        let oldest = self
            .sent
            .iter()
            .filter(|&(&q, _)| !self.sacked.contains_key(&q))
            .map(|(_, x)| x.seq)
            .min()
            .unwrap_or(self.seq);
        self.acked_seqs = self.acked_seqs.split_off(&oldest);
    }
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
