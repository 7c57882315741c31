//! The per-packet capture checker behind `metaroce check`: decode each frame,
//! verify its ICRC, run the spec model's static validators
//! ([`metaroce_spec::validate`]) and keep a running summary.
//!
//! With a [`ConversationConfig`] ([`Checker::with_conversation`]) each RoCE
//! frame also goes to the conversation judge
//! ([`metaroce_spec::judge::ConversationJudge`]), which rebuilds every RC
//! connection and judges it with the requester and responder models; its
//! findings name several frames, and [`Checker::finish`] reports what was
//! required and never observed.
//!
//! Memory does not grow with the capture: a frame's findings are returned to
//! the caller, and the summary holds counters only (one per requirement ID
//! seen, at most the number of requirements); the conversation judge's memory
//! is bounded by the connections alive (see its module).
//!
//! Around the checker: [`pipeline`] (a capture file's frames read and
//! judged, on one thread or several: [`parallel`]; a live link's: `live`,
//! feature `libpcap`), [`Declared`] (what a
//! capability profile declares that the checker judges against), [`Filter`]
//! (which frames and findings count: time range, QPs), [`Tally`] (the counts
//! per requirement and per QP of what is reported), [`junit_xml`] (JUnit
//! XML) and [`write_annotated`] (the capture written back with each finding
//! as a packet comment).

mod annotate;
mod declared;
mod filter;
mod junit;
#[cfg(feature = "libpcap")]
pub mod live;
pub mod parallel;
pub mod pipeline;
mod report;
mod tally;

pub use annotate::{AnnotateError, Annotations, MAX_ANNOTATIONS, write_annotated};
pub use declared::Declared;
pub use filter::{Filter, FrameVerdict, TimeBound};
pub use junit::junit_xml;
pub use report::{
    JudgeCounts, connection_text, finding_json, finding_text, reported_json, reported_text,
    summary_text,
};
pub use tally::{IdTally, MAX_SAMPLES, Tally};

use metaroce_codec::cm::{CmMad, carries_mad};
use metaroce_codec::decap::{self, Encapsulation};
use metaroce_codec::{Frame, IpRepr, Opcode, ParseOptions, ServiceClass, icrc};
use metaroce_spec::Profile;
use metaroce_spec::judge::{
    ConnectionSummary, ConversationConfig, ConversationFinding, ConversationJudge, PacketMeta,
};
use metaroce_spec::model::receiver::FrameAdmission;
use metaroce_spec::requirements;
use metaroce_spec::validate::{Context, taken_as_trimmed, validate_frame, validate_undecodable};
use metaroce_spec::{Finding, Severity};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

/// Judges the frames of one capture, in order.
#[derive(Debug)]
pub struct Checker {
    inspector: Inspector,
    summary: Summary,
    conversation: Option<ConversationJudge>,
    /// What the frames show of the capture point's ICRCs.
    icrc: IcrcEvidence,
    /// Informational per-packet findings already reported, by flow
    /// (addresses, DestQP) and requirement: each is reported once per
    /// connection (at most [`MAX_INFO_FLOWS`] remembered).
    info_seen: HashSet<(u128, u128, u32, &'static str)>,
    /// Frames that carried a lone 802.1ad service tag (the network's), and
    /// the first of them.
    service_tagged: (u64, u64),
    /// Frames whose UDP checksum the sending host left to its NIC
    /// ([`Inspection::udp_checksum_partial`]), and the first of them.
    udp_checksum_partial: (u64, u64),
    /// MP data packets trimmed too short to decode, on connections whose
    /// trim DSCP they carry ([`Checker::judge_undecodable_as_trimmed`]),
    /// and the first of them.
    trimmed_undecodable: (u64, u64),
}

/// Most flows whose informational findings are remembered
/// ([`Checker::info_seen`]); beyond, they are reported every time.
const MAX_INFO_FLOWS: usize = 65_536;

/// Most ICRC findings held while it is not known whether the capture point
/// records ICRCs; beyond, they are reported at once.
const MAX_HELD_ICRC: usize = 4096;

/// Whether the capture point records ICRCs, from evidence: a RoCE frame
/// with a valid ICRC shows that it does (a wrong one is then the sender's,
/// MR-ICRC-1); a capture in which no RoCE frame has a valid ICRC was taken
/// where ICRCs are not recorded (the mlx5 RDMA sniffer, for one), which is a
/// note about the capture, not a finding about its senders.
#[derive(Debug, Default)]
struct IcrcEvidence {
    /// A RoCE frame with a valid ICRC was seen.
    valid_seen: bool,
    /// RoCE frames with an invalid ICRC.
    invalid: u64,
    /// ICRC findings held until a valid ICRC is seen (or the capture ends).
    held: Vec<Reported>,
    /// ICRC findings of requests whose fate the conversation judge follows
    /// (a capture that records ICRCs): an acknowledgement that covers one
    /// shows its receiver took it, so the capture point recorded it wrong.
    pending: Vec<Reported>,
    /// Frames with a wrong ICRC that their receiver evidently took, and the
    /// first of them.
    taken: (u64, u64),
    /// Directions (source, destination address) that carried a frame with a
    /// wrong ICRC, at most [`MAX_ICRC_DIRECTIONS`].
    directions: HashSet<(u128, u128)>,
    /// A frame with a wrong ICRC went the opposite way of an earlier one:
    /// the peer answered traffic whose every captured ICRC is wrong, so its
    /// receiver took those frames and the wire carried good ICRCs.
    answered: bool,
}

/// Most directions remembered while looking for an answered exchange.
const MAX_ICRC_DIRECTIONS: usize = 1024;

impl IcrcEvidence {
    /// Remembers the direction of a frame with a wrong ICRC; one going the
    /// opposite way of an earlier one shows an answered exchange.
    fn note_direction(&mut self, ip: Option<&IpRepr<'_>>) {
        let Some(ip) = ip else { return };
        let (s, d) = match ip {
            IpRepr::V4(v4) => (u128::from(v4.src.to_bits()), u128::from(v4.dst.to_bits())),
            IpRepr::V6(v6) => (v6.src.to_bits(), v6.dst.to_bits()),
        };
        // A host talking to itself (loopback) answers nobody.
        if s != d && self.directions.contains(&(d, s)) {
            self.answered = true;
            self.directions.clear();
        } else if self.directions.len() < MAX_ICRC_DIRECTIONS {
            self.directions.insert((s, d));
        }
    }
}

/// Fewest RoCE frames, all with a wrong ICRC, that show a capture point
/// not recording ICRCs (fewer are judged as their senders' errors).
const MIN_ICRC_EVIDENCE: u64 = 8;

/// The ICRC findings' requirement.
const ICRC_ID: &str = "MR-ICRC-1";

/// The part of the check that needs no state: decoding a frame, verifying
/// its ICRC and running the per-packet validators. It is `Sync`, so frames
/// can be inspected on several threads ([`parallel`]) while the
/// [`Checker`] absorbs the inspections in frame order.
#[derive(Clone, Debug)]
pub struct Inspector {
    ctx: Context,
    options: ParseOptions,
    /// Only frames of this profile are judged (`--profile`).
    profile: Option<Profile>,
    /// Admission as far as a frame shows it (SPEC.md §9.2), for the
    /// conversation judge.
    admission: FrameAdmission,
}

/// What one frame shows on its own ([`Inspector::inspect`]), waiting to be
/// absorbed by the [`Checker`] ([`Checker::absorb`]).
///
/// A plain struct the frame is decoded into in place
/// ([`Inspector::inspect_into`], [`Frame::parse_from`]): a `Frame` is some
/// 400 bytes, and moving it after the parse (as returning it in a `Result`
/// and building an enum around it did) cost more than its ICRC on small
/// frames.
#[derive(Debug, Default)]
pub struct Inspection<'a> {
    /// The frame as decoded (meaningful when `outcome` is `Decoded`).
    frame: Frame<'a>,
    /// What became of the frame.
    outcome: Outcome,
    /// The ICRC's verdict (decoded frames).
    status: icrc::IcrcStatus,
    /// The payload's mark, taken with the ICRC: the conversation judge
    /// keeps it instead of a copy of the payload.
    mark: Option<icrc::PayloadMark>,
    /// Its receiver may deliver it: it passes the rows of SPEC.md §9.2 a
    /// capture shows ([`FrameAdmission`], from the ICRC verdict above and
    /// the validators' verdict on the IPv4 header checksum).
    admitted: bool,
    /// It would pass admission with a good ICRC (the same as `admitted`
    /// unless its ICRC fails): what its receiver did when the capture
    /// point is found not to record ICRCs.
    admitted_if_icrc_good: bool,
    /// The CM MAD it carries to QP1, decoded.
    cm: Option<CmMad>,
    /// The per-packet findings.
    findings: Vec<Finding>,
    /// The layers the capture added around the frame, taken off before it
    /// was decoded (empty for a plain Ethernet frame).
    encapsulation: Encapsulation,
    /// Its UDP checksum holds only the pseudo-header sum: the sending host
    /// left it to its NIC and the capture was taken before the NIC filled
    /// it in ([`metaroce_codec::UdpRepr::partial_checksum`]); its MR-ENC-16
    /// finding was dropped.
    udp_checksum_partial: bool,
}

/// What became of an inspected frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Outcome {
    /// Not inspected yet, or not Ethernet: not judged.
    #[default]
    Skipped,
    /// Left out by the profile filter.
    Filtered,
    /// The codec could not decode it; `roce` when a RoCE header failed or a
    /// RoCE packet sits behind IPv6 extension headers.
    Undecodable { roce: bool },
    /// A UDP datagram to a RoCE port that the capture cut inside its RoCE
    /// headers: counted, not judged.
    CutInHeaders,
    /// Decoded: `frame` holds it.
    Decoded,
}

impl Inspector {
    /// Decodes, verifies and validates one captured frame.
    pub fn inspect<'a>(&self, linktype: u32, data: &'a [u8]) -> Inspection<'a> {
        let mut inspection = Inspection::default();
        self.inspect_into(linktype, data, &mut inspection);
        inspection
    }

    /// [`Inspector::inspect`] into a place the caller holds (fresh or used
    /// before): the frame is decoded where it stays, not moved after.
    ///
    /// A plain Ethernet frame holding RoCE with at most one tag is decoded
    /// at once (the fast path); anything else is first stripped of the
    /// layers the capture added ([`decap::decapsulate`]: a link-layer
    /// header other than Ethernet, a QinQ service tag, ERSPAN, GRE, VXLAN)
    /// and the frame inside is judged.
    pub fn inspect_into<'a>(&self, linktype: u32, data: &'a [u8], out: &mut Inspection<'a>) {
        out.status = icrc::IcrcStatus::NotRoce;
        out.mark = None;
        out.admitted = false;
        out.admitted_if_icrc_good = false;
        out.cm = None;
        out.findings.clear();
        out.outcome = Outcome::Skipped;
        out.encapsulation.clear();
        out.udp_checksum_partial = false;
        if linktype != decap::LINKTYPE_ETHERNET && !decap::LINKTYPES.contains(&linktype) {
            return;
        }
        let parsed = decap::parse_captured(
            linktype,
            data,
            &mut out.frame,
            &mut out.encapsulation,
            &self.options,
        );
        let ip_wire = match parsed {
            Ok(ip_wire) => ip_wire,
            Err(e) => {
                if self.profile.is_some() {
                    out.outcome = Outcome::Filtered;
                    return;
                }
                out.findings = validate_undecodable(data, &e, &self.ctx);
                // A RoCE header failed, or a RoCE packet sits behind IPv6
                // extension headers (MR-ENC-8).
                let roce = e.layer.is_roce() || out.findings.iter().any(|f| f.id == "MR-ENC-8");
                out.outcome = Outcome::Undecodable { roce };
                return;
            }
        };
        if out.frame.cut_in_roce_headers() {
            out.outcome = if self.profile.is_some() {
                Outcome::Filtered
            } else {
                Outcome::CutInHeaders
            };
            return;
        }
        let frame = &out.frame;
        if let Some(p) = self.profile
            && frame
                .roce
                .as_ref()
                .is_none_or(|r| profile_of(r.bth.opcode) != p)
        {
            out.outcome = Outcome::Filtered;
            return;
        }
        (out.status, out.mark) = icrc::verify_ip_marked(frame, ip_wire);
        out.findings = validate_frame(frame, out.status, &self.ctx);
        if !out.findings.is_empty() {
            out.udp_checksum_partial = drop_partial_udp_checksum(frame, &mut out.findings);
        }
        if let Some(roce) = &frame.roce {
            let trimmed = taken_as_trimmed(frame, out.status, &self.ctx);
            // The validators report a wrong IPv4 header checksum (MR-ENC-7):
            // without findings it is right, and is not summed again.
            let ipv4_checksum_right = out.findings.is_empty().then_some(true);
            out.admitted = self
                .admission
                .admit(frame, out.status, trimmed, ipv4_checksum_right)
                .is_ok();
            out.admitted_if_icrc_good = out.admitted
                || matches!(out.status, icrc::IcrcStatus::Invalid { .. })
                    && self
                        .admission
                        .admit(frame, icrc::IcrcStatus::Valid, trimmed, ipv4_checksum_right)
                        .is_ok();
            if carries_mad(roce) {
                // A management datagram to QP1 (connection management), not
                // UD data: the UD data rules do not apply to it.
                out.findings.retain(|f| !f.id.starts_with("MR-UD-"));
                out.cm = CmMad::parse(roce.payload).ok();
            }
        }
        out.outcome = Outcome::Decoded;
    }
}

/// A finding with the frames it concerns (the first shows it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reported {
    /// Frames involved; a per-packet finding names one.
    pub frames: Vec<u64>,
    /// The finding.
    pub finding: Finding,
    /// Whether the conversation judge (not a per-packet validator) found it.
    pub conversation: bool,
    /// QPNs concerned: both ends of the connection when the conversation
    /// judge follows it (responder first), else the packet's DestQP.
    pub qpns: Vec<u32>,
    /// The connection concerned, named by its first frame, when the
    /// conversation judge follows it.
    pub connection: Option<u64>,
}

impl Reported {
    fn of(c: ConversationFinding) -> Self {
        Reported {
            frames: c.frames,
            finding: c.finding,
            conversation: true,
            qpns: c.qpns,
            connection: c.connection,
        }
    }
}

/// Counts over the frames checked so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Frames read.
    pub frames: u64,
    /// Frames that decoded as RoCE or failed inside a RoCE header.
    pub roce_frames: u64,
    /// Frames the codec could not decode (RoCE or not).
    pub undecodable: u64,
    /// Frames left out by the profile filter.
    pub filtered: u64,
    /// Frames the capture cut short (it keeps the first bytes of each
    /// frame, or recorded fewer than the IP header says): decoded as far
    /// as they go, their payload lengths taken from the IP and UDP
    /// headers, their ICRC not checked.
    pub cut: u64,
    /// Of those, RoCE frames cut inside their RoCE headers: not judged.
    pub cut_in_headers: u64,
    /// Frames whose ICRC the capture did not record (cut in the payload,
    /// pad or ICRC).
    pub icrc_not_captured: u64,
    /// Frames found inside layers the capture added, per kind of
    /// encapsulation (`erspan-ii`, `sll`, `qinq`, ...: the layers' names
    /// joined by `/`).
    pub encapsulated: std::collections::BTreeMap<String, u64>,
    /// Findings of severity MUST.
    pub must: u64,
    /// Findings of severity SHOULD.
    pub should: u64,
    /// Informational findings.
    pub info: u64,
    /// Findings per requirement ID.
    pub by_id: HashMap<&'static str, u64>,
    /// Notes about the capture (not findings about its senders): how the
    /// capture point recorded the traffic, each stated once.
    pub notes: Vec<String>,
}

impl Summary {
    /// All findings.
    pub fn findings(&self) -> u64 {
        self.must + self.should + self.info
    }

    /// Requirement IDs with their counts, in SPEC.md order (unknown IDs last).
    pub fn by_id_in_spec_order(&self) -> Vec<(&'static str, u64)> {
        let mut ids: Vec<(&'static str, u64)> =
            self.by_id.iter().map(|(id, n)| (*id, *n)).collect();
        ids.sort_by_key(|(id, _)| spec_order(id));
        ids
    }

    fn count(&mut self, finding: &Finding) {
        match finding.severity {
            Severity::Must => self.must += 1,
            Severity::Should => self.should += 1,
            Severity::Info => self.info += 1,
        }
        *self.by_id.entry(finding.id).or_default() += 1;
    }

    /// Takes back [`Self::count`] of `finding` (held again).
    fn uncount(&mut self, finding: &Finding) {
        let n = match finding.severity {
            Severity::Must => &mut self.must,
            Severity::Should => &mut self.should,
            Severity::Info => &mut self.info,
        };
        *n = n.saturating_sub(1);
        if let Some(c) = self.by_id.get_mut(finding.id) {
            *c = c.saturating_sub(1);
            if *c == 0 {
                self.by_id.remove(finding.id);
            }
        }
    }
}

/// Where requirement `id` stands in SPEC.md (unknown IDs last).
pub(crate) fn spec_order(id: &str) -> (usize, &str) {
    (requirements::get(id).map_or(usize::MAX, |r| r.line), id)
}

/// The profile a RoCE opcode belongs to: MP opcodes (0xC0–0xDF) are MP,
/// everything else Base.
pub fn profile_of(op: Opcode) -> Profile {
    if op.class() == ServiceClass::Vendor && op.0 <= 0xDF {
        Profile::Mp
    } else {
        Profile::Base
    }
}

impl Checker {
    /// A checker for traffic described by `ctx`.
    pub fn new(ctx: Context) -> Self {
        // Captures hold frames cut short and RoCE v1.
        let options = ParseOptions {
            accept_cut: true,
            roce_v1: true,
            ..ctx.parse_options()
        };
        Checker {
            inspector: Inspector {
                admission: FrameAdmission::new(options.dialect),
                ctx,
                options,
                profile: None,
            },
            summary: Summary::default(),
            conversation: None,
            icrc: IcrcEvidence::default(),
            info_seen: HashSet::new(),
            service_tagged: (0, 0),
            udp_checksum_partial: (0, 0),
            trimmed_undecodable: (0, 0),
        }
    }

    /// A checker that also runs the conversation judge with `cfg`.
    pub fn with_conversation(ctx: Context, cfg: ConversationConfig) -> Self {
        let mut checker = Checker::new(ctx);
        checker.conversation = Some(ConversationJudge::new(cfg));
        checker
    }

    /// Judges only RoCE frames of `profile` (others are counted as
    /// filtered): per packet and in the conversation judge.
    #[must_use]
    pub fn only_profile(mut self, profile: Option<Profile>) -> Self {
        self.inspector.profile = profile;
        self
    }

    /// The stateless part of this checker, to inspect frames on other
    /// threads; their inspections go to [`Checker::absorb`] in frame order.
    pub fn inspector(&self) -> &Inspector {
        &self.inspector
    }

    /// Judges frame `number` captured at `timestamp_ns`: the per-packet
    /// findings, then the conversation judge's (when enabled). The frame is
    /// decoded once. The same as [`Inspector::inspect`] then
    /// [`Checker::absorb`].
    pub fn check_frame(
        &mut self,
        number: u64,
        timestamp_ns: u64,
        linktype: u32,
        data: &[u8],
    ) -> Vec<Reported> {
        let mut inspection = Inspection::default();
        self.check_frame_in(number, timestamp_ns, linktype, data, &mut inspection)
    }

    /// [`Checker::check_frame`] with the frame decoded into `inspection`, a
    /// place the caller keeps (fresh or used before): a caller whose frames
    /// all borrow the same bytes (a mapped capture) saves building one per
    /// frame.
    pub fn check_frame_in<'a>(
        &mut self,
        number: u64,
        timestamp_ns: u64,
        linktype: u32,
        data: &'a [u8],
        inspection: &mut Inspection<'a>,
    ) -> Vec<Reported> {
        self.inspector.inspect_into(linktype, data, inspection);
        self.absorb(number, timestamp_ns, inspection)
    }

    /// Counts an inspected frame and runs the conversation judge on it:
    /// what [`Checker::check_frame`] reports for it. Frames must come in
    /// capture order. The inspection is read in place (it is large: moving
    /// it costs more than reading it); its findings are taken out.
    pub fn absorb(
        &mut self,
        number: u64,
        timestamp_ns: u64,
        inspection: &mut Inspection<'_>,
    ) -> Vec<Reported> {
        self.summary.frames += 1;
        if !inspection.encapsulation.is_empty() {
            self.count_encapsulation(number, &inspection.encapsulation);
        }
        match inspection.outcome {
            Outcome::Skipped => return Vec::new(),
            Outcome::CutInHeaders => {
                self.summary.roce_frames += 1;
                self.summary.cut += 1;
                self.summary.cut_in_headers += 1;
                return Vec::new();
            }
            Outcome::Filtered => {
                self.summary.filtered += 1;
                return Vec::new();
            }
            Outcome::Undecodable { roce } => {
                self.summary.undecodable += 1;
                self.summary.roce_frames += u64::from(roce);
                if roce && !inspection.findings.is_empty() && self.trimming_known() {
                    self.judge_undecodable_as_trimmed(number, inspection);
                }
                for f in &inspection.findings {
                    self.summary.count(f);
                }
                let findings = std::mem::take(&mut inspection.findings);
                return packet_reported(number, findings, Vec::new(), None);
            }
            Outcome::Decoded => {}
        }
        if inspection.udp_checksum_partial {
            if self.udp_checksum_partial.0 == 0 {
                self.udp_checksum_partial.1 = number;
            }
            self.udp_checksum_partial.0 += 1;
        }
        let frame = &inspection.frame;
        let (mark, mut admitted) = (inspection.mark, inspection.admitted);
        let mut findings = std::mem::take(&mut inspection.findings);
        self.judge_as_trimmed(inspection.status, frame, &mut findings);
        let mut released = Vec::new();
        if frame.roce.is_some() {
            self.summary.roce_frames += 1;
            match inspection.status {
                icrc::IcrcStatus::Valid if !self.icrc.valid_seen => {
                    self.icrc.valid_seen = true;
                    released = std::mem::take(&mut self.icrc.held);
                }
                icrc::IcrcStatus::Invalid { .. } => {
                    self.icrc.invalid += 1;
                    if !self.icrc.valid_seen && !self.icrc.answered {
                        self.icrc.note_direction(frame.ip.as_ref());
                    }
                    if !self.icrc.valid_seen {
                        // Undecided: its receiver may have taken it.
                        admitted = inspection.admitted_if_icrc_good;
                    }
                }
                _ => {}
            }
        }
        let held = !self.icrc.valid_seen
            && self.icrc.held.len() < MAX_HELD_ICRC
            && findings.iter().any(|f| f.id == ICRC_ID);
        let mut held_icrc = Vec::new();
        if held {
            let (icrc, rest): (Vec<Finding>, Vec<Finding>) =
                findings.into_iter().partition(|f| f.id == ICRC_ID);
            held_icrc = icrc;
            findings = rest;
        }
        if frame.cut.is_some() {
            self.summary.cut += 1;
        }
        if inspection.status == icrc::IcrcStatus::NotCaptured {
            self.summary.icrc_not_captured += 1;
        }
        let (Some(ip), Some(pkt)) = (frame.ip.as_ref(), frame.roce.as_ref()) else {
            for f in &findings {
                self.summary.count(f);
            }
            return packet_reported(number, findings, Vec::new(), None);
        };
        // RoCE v1 has no UDP header: its source port is taken as 0.
        let udp_src_port = match &frame.udp {
            Some(udp) => udp.src_port,
            None if frame.is_roce_v1() => 0,
            None => {
                for f in &findings {
                    self.summary.count(f);
                }
                return packet_reported(number, findings, Vec::new(), None);
            }
        };
        let (src, dst) = ip.addrs();
        self.once_per_flow(&src, &dst, pkt.bth.dest_qp, &mut findings);
        for f in &findings {
            self.summary.count(f);
        }
        let meta = PacketMeta {
            frame: number,
            timestamp_ns,
            src,
            dst,
            udp_src_port,
            ecn: ip.ecn(),
            dscp: ip.dscp(),
            icrc_valid: inspection.status == icrc::IcrcStatus::Valid,
            admitted,
            payload_len: (!frame.roce_whole())
                .then(|| frame.roce_payload_len())
                .flatten(),
        };
        let Some(judge) = self.conversation.as_mut() else {
            let mut all = packet_reported(number, findings, vec![pkt.bth.dest_qp], None);
            self.hold(number, held_icrc, vec![pkt.bth.dest_qp], None);
            self.release(released, &mut all);
            return all;
        };
        if let Some(cm) = &inspection.cm {
            judge.on_cm(&meta, cm);
        }
        let found = judge.on_packet_marked(&meta, pkt, mark);
        let (qpns, conn) = if findings.is_empty() && held_icrc.is_empty() {
            (Vec::new(), None)
        } else {
            match judge.qpns_of(&meta, pkt) {
                Some((q, c)) => (q, Some(c)),
                None => (vec![pkt.bth.dest_qp], None),
            }
        };
        if !admitted
            && self.icrc.valid_seen
            && self.icrc.pending.len() < MAX_HELD_ICRC
            && findings.iter().any(|f| f.id == ICRC_ID)
            && judge.follows(&meta, pkt)
        {
            let (icrc, rest): (Vec<Finding>, Vec<Finding>) =
                findings.into_iter().partition(|f| f.id == ICRC_ID);
            findings = rest;
            for f in &icrc {
                self.summary.uncount(f);
            }
            let pending = packet_reported(number, icrc, qpns.clone(), conn);
            self.icrc.pending.extend(pending);
        }
        if findings.is_empty() && held_icrc.is_empty() && released.is_empty() {
            // The common frame: nothing of its own to report.
            let mut all = Vec::new();
            self.settle_icrc(&mut all);
            if !found.is_empty() {
                all.reserve(found.len());
                for c in found {
                    self.summary.count(&c.finding);
                    all.push(Reported::of(c));
                }
            }
            return all;
        }
        let mut all = packet_reported(number, findings, qpns.clone(), conn);
        self.hold(number, held_icrc, qpns, conn);
        self.settle_icrc(&mut all);
        if !found.is_empty() {
            all.reserve(found.len());
            for c in found {
                self.summary.count(&c.finding);
                all.push(Reported::of(c));
            }
        }
        self.release(released, &mut all);
        all
    }

    /// A packet a switch trimmed (SPEC.md §7.10) on a connection whose
    /// RDMA-CM exchange agreed the trimming DSCP: an MP data packet with
    /// that DSCP whose ICRC fails is judged as trimmed (the validators'
    /// `Context::trim_dscp`): its ICRC and lengths are not its sender's
    /// (MR-MPT-3), so `findings` are those of the trimmed packet.
    fn judge_as_trimmed(
        &self,
        status: icrc::IcrcStatus,
        frame: &metaroce_codec::Frame<'_>,
        findings: &mut Vec<Finding>,
    ) {
        let (Some(judge), Some(ip), Some(roce)) = (&self.conversation, &frame.ip, &frame.roce)
        else {
            return;
        };
        if self.inspector.ctx.trim_dscp.is_some()
            || findings.is_empty()
            || !roce.bth.opcode.is_mp_data()
            || !matches!(status, icrc::IcrcStatus::Invalid { .. })
        {
            return;
        }
        let (src, dst) = ip.addrs();
        if judge.agreed_trim_dscp(src, dst, roce.bth.dest_qp) == Some(ip.dscp()) {
            let ctx = Context {
                trim_dscp: Some(ip.dscp()),
                ..self.inspector.ctx.clone()
            };
            *findings = validate_frame(frame, status, &ctx);
        }
    }

    /// Whether a trim DSCP is known for some connection: set for all
    /// (`Context::trim_dscp`) or agreed by an RDMA-CM exchange seen so
    /// far. When not, an undecodable frame is not looked at again.
    #[inline]
    fn trimming_known(&self) -> bool {
        self.inspector.ctx.trim_dscp.is_some()
            || self
                .conversation
                .as_ref()
                .is_some_and(ConversationJudge::any_trim_agreed)
    }

    /// A packet a switch trimmed to fewer bytes than its headers and ICRC
    /// (SPEC.md §7.10, MR-MPT-4), which the codec cannot decode: an MP
    /// data packet whose bytes hold its BTH whole and whose DSCP is the
    /// trim DSCP of its connection (the one set for all, else the one its
    /// RDMA-CM exchange agreed) is a trimmed packet, not a malformed one:
    /// the findings its cut explains (no room for the ICRC, MR-ICRC-1; an
    /// extension header cut, MR-EXT-3; a PadCnt beyond the bytes left,
    /// MR-PKT-4) are dropped and the frame counted in a note. A packet cut
    /// inside its BTH names no connection and keeps its finding.
    #[inline(never)]
    fn judge_undecodable_as_trimmed(&mut self, number: u64, inspection: &mut Inspection<'_>) {
        const EXPLAINED: [&str; 3] = ["MR-ICRC-1", "MR-EXT-3", "MR-PKT-4"];
        let frame = &inspection.frame;
        let (Some(ip), Some(bth)) = (&frame.ip, frame.undecoded_bth(&self.inspector.options))
        else {
            return;
        };
        if !bth.opcode.is_mp_data() {
            return;
        }
        let trim = self.inspector.ctx.trim_dscp.or_else(|| {
            let (src, dst) = ip.addrs();
            self.conversation
                .as_ref()?
                .agreed_trim_dscp(src, dst, bth.dest_qp)
        });
        if trim != Some(ip.dscp()) {
            return;
        }
        let before = inspection.findings.len();
        inspection.findings.retain(|f| !EXPLAINED.contains(&f.id));
        if inspection.findings.len() < before {
            if self.trimmed_undecodable.0 == 0 {
                self.trimmed_undecodable.1 = number;
            }
            self.trimmed_undecodable.0 += 1;
        }
    }

    /// Reports or drops the pending ICRC findings the conversation judge
    /// gave a verdict on.
    #[inline(always)]
    fn settle_icrc(&mut self, out: &mut Vec<Reported>) {
        let Some(judge) = self.conversation.as_mut() else {
            return;
        };
        let verdicts = judge.take_admission_verdicts();
        if verdicts.is_empty() {
            return;
        }
        self.settle_verdicts(verdicts, out);
    }

    /// [`Checker::settle_icrc`] with verdicts to settle.
    #[inline(never)]
    fn settle_verdicts(&mut self, verdicts: Vec<(u64, bool)>, out: &mut Vec<Reported>) {
        for (frame, taken) in verdicts {
            let (this, rest): (Vec<Reported>, Vec<Reported>) =
                std::mem::take(&mut self.icrc.pending)
                    .into_iter()
                    .partition(|r| r.frames.first() == Some(&frame));
            self.icrc.pending = rest;
            if taken && !this.is_empty() {
                self.icrc.taken.0 += 1;
                if self.icrc.taken.1 == 0 {
                    self.icrc.taken.1 = frame;
                }
            } else {
                self.release(this, out);
            }
        }
    }

    /// Keeps the ICRC findings of frame `number` until it is known whether
    /// the capture point records ICRCs.
    #[inline]
    fn hold(&mut self, number: u64, icrc: Vec<Finding>, qpns: Vec<u32>, conn: Option<u64>) {
        if icrc.is_empty() {
            return;
        }
        self.icrc
            .held
            .extend(packet_reported(number, icrc, qpns, conn));
    }

    /// The capture point records ICRCs: the held ICRC findings are reported.
    #[inline]
    fn release(&mut self, released: Vec<Reported>, out: &mut Vec<Reported>) {
        if released.is_empty() {
            return;
        }
        for r in released {
            self.summary.count(&r.finding);
            out.push(r);
        }
    }

    /// Drops the informational findings already reported for this flow
    /// (one per connection and requirement, not one per frame).
    fn once_per_flow(&mut self, src: &IpAddr, dst: &IpAddr, qpn: u32, findings: &mut Vec<Finding>) {
        if !findings.iter().any(|f| f.severity == Severity::Info) {
            return;
        }
        let (s, d) = (ip_bits(src), ip_bits(dst));
        let seen = &mut self.info_seen;
        findings.retain(|f| {
            if f.severity != Severity::Info {
                return true;
            }
            let key = (s, d, qpn, f.id);
            if seen.contains(&key) {
                return false;
            }
            if seen.len() < MAX_INFO_FLOWS {
                seen.insert(key);
            }
            true
        });
    }

    /// Counts frame `number`, found inside `enc`.
    fn count_encapsulation(&mut self, number: u64, enc: &Encapsulation) {
        *self.summary.encapsulated.entry(enc.describe()).or_default() += 1;
        if enc
            .layers()
            .any(|l| matches!(l, decap::Outer::SingleServiceTag(_)))
        {
            if self.service_tagged.0 == 0 {
                self.service_tagged.1 = number;
            }
            self.service_tagged.0 += 1;
        }
    }

    /// The capture ended: the conversation judge's last findings (responses
    /// required and never observed).
    pub fn finish(&mut self) -> Vec<Reported> {
        let mut out = Vec::new();
        if self.service_tagged.0 > 0 {
            self.summary.notes.push(format!(
                "802.1ad service tag (TPID 0x88A8) on {} frame(s), first at frame {}: a tag the network added, not the NIC's (a NIC sends at most an 802.1Q tag); taken off, the frame inside judged",
                self.service_tagged.0, self.service_tagged.1
            ));
        }
        if self.udp_checksum_partial.0 > 0 {
            self.summary.notes.push(format!(
                "UDP checksum not yet filled on {} frame(s), first at frame {}: offloaded to the NIC, capture taken on the sending host (the field holds only the pseudo-header sum, which the NIC completes); not judged (MR-ENC-16)",
                self.udp_checksum_partial.0, self.udp_checksum_partial.1
            ));
        }
        if self.trimmed_undecodable.0 > 0 {
            self.summary.notes.push(format!(
                "MP data packets trimmed by a switch too short to decode (their headers end with no room for the ICRC, or an extension header is cut), with their connection's trim DSCP: {} frame(s), first at frame {}; taken as trimmed (SPEC.md §7.10, MR-MPT-4), not judged further",
                self.trimmed_undecodable.0, self.trimmed_undecodable.1
            ));
        }
        if self.icrc.valid_seen {
            let held = std::mem::take(&mut self.icrc.held);
            self.release(held, &mut out);
        } else if self.icrc.invalid < MIN_ICRC_EVIDENCE || !self.icrc.answered {
            // Too few frames to say anything of the capture point, or no
            // peer answered them (a sender computing every ICRC wrong on a
            // link nobody answers): each wrong ICRC is its sender's.
            let held = std::mem::take(&mut self.icrc.held);
            self.release(held, &mut out);
        } else {
            // No RoCE frame has a valid ICRC, yet the peers answered each
            // other: their receivers took the frames, so the wire carried
            // good ICRCs and the capture point does not record them.
            self.icrc.held.clear();
            self.summary.notes.push(format!(
                "ICRC not recorded by the capture point: none of the {} RoCE frames has a valid ICRC, yet the peers answered each other; ICRCs are not judged",
                self.icrc.invalid
            ));
        }
        let Some(judge) = self.conversation.as_mut() else {
            return out;
        };
        let found: Vec<Reported> = judge.finish().into_iter().map(Reported::of).collect();
        for r in &found {
            self.summary.count(&r.finding);
        }
        out.extend(found);
        self.summary.notes.extend(judge.notes());
        self.settle_icrc(&mut out);
        let undecided = std::mem::take(&mut self.icrc.pending);
        self.release(undecided, &mut out);
        if self.icrc.taken.0 > 0 {
            self.summary.notes.push(format!(
                "ICRC recorded wrong by the capture point: {} request(s) with a wrong ICRC that a later acknowledgement covers (their receiver took them; first at frame {}); not judged",
                self.icrc.taken.0, self.icrc.taken.1
            ));
        }
        out
    }

    /// The connections the conversation judge follows or followed (empty
    /// without it).
    pub fn connections(&self) -> Vec<ConnectionSummary> {
        self.conversation
            .as_ref()
            .map_or_else(Vec::new, ConversationJudge::connections)
    }

    /// The conversation judge, if enabled.
    pub fn judge(&self) -> Option<&ConversationJudge> {
        self.conversation.as_ref()
    }

    /// Judges one captured frame and returns its per-packet findings (no
    /// conversation judge).
    pub fn check(&mut self, linktype: u32, data: &[u8]) -> Vec<Finding> {
        let mut inspection = Inspection::default();
        self.inspector.inspect_into(linktype, data, &mut inspection);
        let conversation = self.conversation.take();
        let reported = self.absorb(0, 0, &mut inspection);
        self.conversation = conversation;
        reported.into_iter().map(|r| r.finding).collect()
    }

    /// The counts so far.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }
}

/// Drops the MR-ENC-16 finding of a frame whose UDP checksum is the
/// pseudo-header sum alone ([`metaroce_codec::UdpRepr::partial_checksum`]):
/// checksum offload seen before the NIC, a note about the capture. Any
/// other wrong checksum keeps its finding. Whether one was dropped.
fn drop_partial_udp_checksum(frame: &Frame<'_>, findings: &mut Vec<Finding>) -> bool {
    let (Some(ip), Some(udp)) = (frame.ip.as_ref(), frame.udp.as_ref()) else {
        return false;
    };
    if udp.checksum == 0 || udp.checksum != udp.partial_checksum(ip) {
        return false;
    }
    let before = findings.len();
    findings.retain(|f| f.id != "MR-ENC-16");
    findings.len() < before
}

/// An address as a number (IPv4 in the low 32 bits).
fn ip_bits(a: &IpAddr) -> u128 {
    match a {
        IpAddr::V4(v4) => u128::from(v4.to_bits()),
        IpAddr::V6(v6) => v6.to_bits(),
    }
}

/// Per-packet findings as reported (none, for most frames: no allocation).
#[inline]
fn packet_reported(
    number: u64,
    findings: Vec<Finding>,
    qpns: Vec<u32>,
    connection: Option<u64>,
) -> Vec<Reported> {
    if findings.is_empty() {
        return Vec::new();
    }
    findings
        .into_iter()
        .map(|finding| Reported {
            frames: vec![number],
            finding,
            conversation: false,
            qpns: qpns.clone(),
            connection,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::LINKTYPE_ETHERNET;
    use metaroce_codec::ethernet::{TPID_8021AD, TPID_QINQ_LEGACY};
    use metaroce_codec::{Opcode, PacketBuilder, VlanTag};

    /// An IPv6 RC SEND Only frame with a Destination Options header before UDP.
    fn behind_destination_options() -> Vec<u8> {
        let frame = PacketBuilder::new(Opcode::RC_SEND_ONLY)
            .ack_req(true)
            .payload(vec![1, 2, 3, 4])
            .ipv6("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap())
            .build();
        let ip = 14;
        let mut out = frame[..ip + 40].to_vec();
        out[ip + 6] = 60;
        let len = u16::from_be_bytes([out[ip + 4], out[ip + 5]]) + 8;
        out[ip + 4..ip + 6].copy_from_slice(&len.to_be_bytes());
        out.extend([17, 0, 0, 0, 0, 0, 0, 0]);
        out.extend_from_slice(&frame[ip + 40..]);
        out
    }

    /// A plain IPv4 RC SEND Only frame with an 802.1Q or 802.1ad tag.
    fn tagged(tpid: u16) -> Vec<u8> {
        PacketBuilder::new(Opcode::RC_SEND_ONLY)
            .ack_req(true)
            .payload(vec![1, 2, 3, 4])
            .vlan(VlanTag { tpid, tci: 30 })
            .build()
    }

    #[test]
    fn a_lone_service_tag_is_the_networks_a_note_not_mr_enc_1() {
        let mut checker = Checker::new(Context::default());
        let f = checker.check(LINKTYPE_ETHERNET, &tagged(TPID_8021AD));
        assert!(f.is_empty(), "{f:?}");
        let f = checker.check(LINKTYPE_ETHERNET, &tagged(TPID_8021AD));
        assert!(f.is_empty(), "{f:?}");
        checker.finish();
        let s = checker.summary();
        assert_eq!(s.encapsulated.get("s-tag"), Some(&2), "{s:?}");
        assert_eq!(s.notes.len(), 1, "{s:?}");
        assert!(s.notes[0].contains("802.1ad service tag"), "{s:?}");
        // A tag with another TPID in its place is still the NIC's MR-ENC-1.
        let mut checker = Checker::new(Context::default());
        let f = checker.check(LINKTYPE_ETHERNET, &tagged(TPID_QINQ_LEGACY));
        assert_eq!(f.iter().map(|f| f.id).collect::<Vec<_>>(), ["MR-ENC-1"]);
        checker.finish();
        assert!(checker.summary().notes.is_empty());
    }

    /// A RoCE frame from 10.0.0.1 to 10.0.0.2 with UDP checksum `sum`.
    fn with_udp_checksum(sum: u16) -> Vec<u8> {
        PacketBuilder::new(Opcode::RC_SEND_ONLY)
            .ack_req(true)
            .payload(vec![1, 2, 3, 4, 5, 6, 7, 8])
            .ipv4([10, 0, 0, 1].into(), [10, 0, 0, 2].into())
            .udp_checksum(sum)
            .build()
    }

    /// The pseudo-header sum of [`with_udp_checksum`]'s frames, summed here
    /// by hand: addresses, protocol 17, UDP length (8 + 12 BTH + 8 payload
    /// + 4 ICRC = 32), folded, not complemented.
    const PARTIAL: u16 = {
        let sum: u32 = 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 17 + 32;
        sum as u16
    };

    #[test]
    fn a_partial_udp_checksum_is_a_capture_note_a_wrong_one_mr_enc_16() {
        let mut checker = Checker::new(Context::default());
        for _ in 0..3 {
            let f = checker.check(LINKTYPE_ETHERNET, &with_udp_checksum(PARTIAL));
            assert!(f.is_empty(), "{f:?}");
        }
        // A genuinely wrong checksum next to them is still the sender's.
        let f = checker.check(LINKTYPE_ETHERNET, &with_udp_checksum(PARTIAL ^ 0x0100));
        assert_eq!(f.iter().map(|f| f.id).collect::<Vec<_>>(), ["MR-ENC-16"]);
        checker.finish();
        let s = checker.summary();
        assert_eq!(s.notes.len(), 1, "{s:?}");
        assert!(
            s.notes[0].starts_with("UDP checksum not yet filled on 3 frame(s)"),
            "{s:?}"
        );
        assert_eq!(s.by_id.get("MR-ENC-16"), Some(&1));
    }

    /// An MP SEND from 10.0.0.1 with DSCP 46 cut to its first `n` bytes,
    /// its IPv4 and UDP lengths set to match (as a switch trims it).
    /// Its payload is 62 bytes: PadCnt 2.
    fn mp_send_cut_to(n: u16) -> Vec<u8> {
        let whole = PacketBuilder::new(Opcode::MP_SEND)
            .payload(vec![7; 62])
            .ipv4([10, 0, 0, 1].into(), [10, 0, 0, 2].into())
            .traffic_class(46 << 2)
            .build();
        let mut cut = whole[..usize::from(n)].to_vec();
        cut[16..18].copy_from_slice(&(n - 14).to_be_bytes());
        cut[38..40].copy_from_slice(&(n - 34).to_be_bytes());
        cut
    }

    #[test]
    fn a_packet_trimmed_to_its_headers_with_the_trim_dscp_set_for_all() {
        // 70 bytes: headers through MPETH, no room for the ICRC; 64: MPETH
        // cut; 74: 4 bytes after the headers, fewer than PadCnt and the
        // ICRC. With trim DSCP 46 for all, all are trimmed packets.
        let ctx = Context {
            trim_dscp: Some(46),
            ..Context::default()
        };
        let mut checker = Checker::new(ctx);
        for n in [70, 64, 74] {
            let f = checker.check(LINKTYPE_ETHERNET, &mp_send_cut_to(n));
            assert!(f.is_empty(), "{n}: {f:?}");
        }
        checker.finish();
        let s = checker.summary();
        assert_eq!((s.undecodable, s.roce_frames, s.must), (3, 3, 0));
        assert_eq!(s.notes.len(), 1, "{s:?}");
        // `Checker::check` numbers every frame 0.
        assert!(s.notes[0].contains("3 frame(s), first at frame 0"), "{s:?}");
        // Without it, they are damaged SENDs.
        let mut checker = Checker::new(Context::default());
        let ids: Vec<&str> = [70, 64, 74]
            .into_iter()
            .flat_map(|n| checker.check(LINKTYPE_ETHERNET, &mp_send_cut_to(n)))
            .map(|f| f.id)
            .collect();
        assert_eq!(ids, ["MR-ICRC-1", "MR-EXT-3", "MR-PKT-4"]);
        checker.finish();
        assert!(checker.summary().notes.is_empty());
    }

    #[test]
    fn ipv6_extension_headers_before_roce_are_mr_enc_8() {
        let mut checker = Checker::new(Context::default());
        let f = checker.check(LINKTYPE_ETHERNET, &behind_destination_options());
        assert_eq!(f.iter().map(|f| f.id).collect::<Vec<_>>(), ["MR-ENC-8"]);
        let s = checker.summary();
        assert_eq!((s.undecodable, s.roce_frames, s.must), (1, 1, 1));
    }
}
