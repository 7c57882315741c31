//! A judge of observed request streams: checks, packet by packet, what a
//! third-party requester (for example Linux rxe) puts on the wire, knowing
//! neither its work requests nor, necessarily, its PMTU or `timeout`.
//!
//! The judge learns messages from the packets (a SEND First starts a message,
//! a READ request reserves its response PSNs, …), learns the first PSN it
//! sees, and follows acknowledgements from the responses. It reports
//! [`Finding`]s for requirements visible on the wire: PSN progression and
//! READ reservation (MR-PSN-3, MR-PSN-4), packetization and opcode sequence
//! (MR-PKT-1, MR-PKT-2), RETH (MR-PKT-3), AckReq (MR-PKT-6, MR-PKT-7), SE
//! (MR-BTH-7), go-back-N after a sequence NAK (MR-NAK-5), RNR waits
//! (MR-RNR-3, MR-RNR-4, MR-RNR-5), retransmission of acknowledged PSNs
//! (MR-REQ-6), retransmission contents (MR-REQ-5), timeout windows (MR-TMR-1
//! to MR-TMR-4, when timestamps and `timeout` are known) and silence after a
//! fatal NAK (MR-QP-5). UC and UD streams get their own rules (MR-UC-1,
//! MR-UD-10, MR-UD-4).

mod pmtu;
mod retransmit;
mod sequence;

pub use pmtu::{PMTUS, PmtuSet};

use super::attrs::QpType;
use super::psn::{HALF_SPACE, in_block, packet_count};
use super::rnr::rnr_wait_ns;
use crate::Finding;
use crate::model::kept_ext::KeptExt;
use foldhash::HashMap;
use metaroce_codec::ext::SyndromeKind;
use metaroce_codec::icrc::PayloadMark;
use metaroce_codec::{Opcode, Psn, RocePacket, ServiceClass};

/// Payload buffers kept for reuse.
const SPARE_BUFFERS: usize = 64;

/// Most unacknowledged packets kept per QP; beyond, the oldest quarter is
/// forgotten (a later retransmission of one is not compared with it). A
/// capture of one direction only never acknowledges anything.
pub const MAX_SENT: usize = 16_384;

/// What the judge is told about the observed QP; everything else it learns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JudgeConfig {
    /// Service type of the observed QP.
    pub qp_type: QpType,
    /// PMTU, if known; otherwise learnt from packet lengths.
    pub pmtu: Option<u32>,
    /// The largest PMTU the implementation supports (`max_pmtu`, SPEC §2),
    /// if declared: the PMTU is learnt among the values up to it, so a
    /// packet longer than it is a finding (MR-PKT-1). Ignored when `pmtu`
    /// is given.
    pub max_pmtu: Option<u32>,
    /// The requester's `timeout` attribute, if known (timing checks need it
    /// and timestamps).
    pub timeout: Option<u8>,
    /// Packets may be missing from the capture (lost between the requester
    /// and the capture point, as with netem or a lossy link): a PSN gap is
    /// taken as lost packets rather than skipped PSNs (MR-PSN-3 and the
    /// message checks restart after it), and a retransmission that leaves a
    /// PSN out is not judged (it may have been lost again).
    pub lossy: bool,
    /// How far capture timestamps may be off, in ns: every timer window
    /// (MR-TMR-1 … MR-TMR-3, MR-RNR-3, MR-RNR-5) is widened by this much on
    /// each side before a retransmission time is a finding.
    pub tolerance_ns: u64,
}

/// The first transmission of a request packet, kept until acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Sent {
    opcode: Opcode,
    se: bool,
    ext: KeptExt,
    payload: Kept,
    /// PSNs it occupies (a READ: its response PSNs).
    span: u32,
    /// Last (re)transmission.
    last_tx_ns: Option<u64>,
}

/// The payload of a packet kept for comparison with its retransmissions.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kept {
    /// Its bytes (in a reused buffer).
    Bytes(Vec<u8>),
    /// Its mark from the ICRC computation
    /// ([`RequestStreamJudge::on_request_marked`]): compared by CRC-32.
    Mark(PayloadMark),
}

impl Kept {
    /// Whether `payload` is the payload kept (by CRC-32 for a mark: equal
    /// CRCs are taken as equal bytes; a payload that differs by a burst of
    /// at most 32 bits, or by fewer than 4 bits, always has another CRC).
    fn is(&self, payload: &[u8]) -> bool {
        match self {
            Kept::Bytes(b) => b.as_slice() == payload,
            Kept::Mark(m) => m.matches(payload),
        }
    }
}

/// Why a retransmission started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    SeqNak(Psn),
    Rnr,
    ReadGap,
    Timeout,
}

/// A retransmission in progress: the PSN its next packet should carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Retx {
    cursor: Psn,
    cause: Cause,
}

/// A SEND or WRITE message of several packets in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Msg {
    write: bool,
    first_psn: Psn,
    /// Payload bytes so far.
    bytes: u64,
    /// RETH DMA length of a WRITE (unknown when the First was not seen).
    dma_len: Option<u32>,
    /// Consecutive packets without AckReq.
    since_ack_req: u32,
}

/// Checks an observed request stream; see the module documentation.
#[derive(Clone, Debug)]
pub struct RequestStreamJudge {
    config: JudgeConfig,
    pmtu: PmtuSet,
    /// PSN after the last new PSN sent (READ reservations included).
    next_psn: Option<Psn>,
    /// A READ whose reservation is not known yet (PMTU not known): PSN and length.
    read_unsized: Option<(Psn, u64)>,
    /// Highest PSN acknowledged.
    acked: Option<Psn>,
    /// PSN of the first request seen (what is unacknowledged before any ACK).
    first_psn: Option<Psn>,
    last_ack_ns: Option<u64>,
    sent: HashMap<u32, Sent>,
    /// Payload buffers of acknowledged packets, reused for new ones.
    spare: Vec<Vec<u8>>,
    /// The mark of the payload of the request being judged, when the
    /// caller took one ([`Self::on_request_marked`]).
    mark: Option<PayloadMark>,
    msg: Option<Msg>,
    retx: Option<Retx>,
    seq_nak: Option<Psn>,
    /// A NAK 0x60 repeated the PSN of the retry in progress (MR-TMR-9).
    repeated_nak: Option<Psn>,
    /// RNR NAK PSN, arrival and wait.
    rnr: Option<(Psn, Option<u64>, u64)>,
    /// A fatal NAK moved the QP to ERR.
    errored: bool,
    reported_error: bool,
}

impl RequestStreamJudge {
    /// A judge that has seen nothing yet.
    pub fn new(config: JudgeConfig) -> Self {
        let mut pmtu = config.pmtu.map_or(PmtuSet::ALL, PmtuSet::known);
        if let (None, Some(max)) = (config.pmtu, config.max_pmtu) {
            // An invalid `max_pmtu` (below 256) leaves every candidate.
            pmtu.narrow(|p| p <= max);
        }
        RequestStreamJudge {
            config,
            pmtu,
            next_psn: None,
            read_unsized: None,
            acked: None,
            first_psn: None,
            last_ack_ns: None,
            sent: HashMap::default(),
            spare: Vec::new(),
            mark: None,
            msg: None,
            retx: None,
            seq_nak: None,
            repeated_nak: None,
            rnr: None,
            errored: false,
            reported_error: false,
        }
    }

    /// The PMTU candidates still consistent with the stream.
    pub fn pmtu_candidates(&self) -> PmtuSet {
        self.pmtu
    }

    /// Unacknowledged packets kept (the judge's memory; at most [`MAX_SENT`]).
    pub fn unacknowledged(&self) -> usize {
        self.sent.len()
    }

    /// From now on packets may be missing from the capture (the capture
    /// point evidently lost some): judged as with [`JudgeConfig::lossy`].
    pub fn set_lossy(&mut self) {
        self.config.lossy = true;
    }

    /// The PSN the next new request packet should carry, once learnt.
    pub fn next_psn(&self) -> Option<Psn> {
        self.next_psn
    }

    /// The requester sent `pkt` at `now_ns` (if timestamps are known).
    pub fn on_request(&mut self, pkt: &RocePacket<'_>, now_ns: Option<u64>) -> Vec<Finding> {
        self.on_request_marked(pkt, now_ns, None)
    }

    /// [`Self::on_request`] with the mark of the packet's payload taken
    /// while its ICRC was checked
    /// ([`verify_wire_marked`](metaroce_codec::icrc::verify_wire_marked)):
    /// the judge then keeps the mark instead of a copy of the payload to
    /// compare a retransmission with (MR-REQ-5), by CRC-32. A mark of
    /// another length than the payload's is not used.
    pub fn on_request_marked(
        &mut self,
        pkt: &RocePacket<'_>,
        now_ns: Option<u64>,
        mark: Option<PayloadMark>,
    ) -> Vec<Finding> {
        self.mark = mark.filter(|m| m.len as usize == pkt.payload.len());
        let f = self.judge_request(pkt, now_ns);
        self.mark = None;
        f
    }

    fn judge_request(&mut self, pkt: &RocePacket<'_>, now_ns: Option<u64>) -> Vec<Finding> {
        let mut f = Vec::new();
        if self.errored {
            if !self.reported_error {
                self.reported_error = true;
                f.push(Finding::new(
                    "MR-QP-5",
                    format!(
                        "request PSN {} sent after a fatal NAK moved the QP to ERR",
                        pkt.bth.psn
                    ),
                ));
            }
            return f;
        }
        if !self.is_request(pkt.bth.opcode) {
            f.push(Finding::new(
                "MR-OPC-5",
                format!(
                    "{} is not a request opcode of a {:?} QP",
                    pkt.bth.opcode, self.config.qp_type
                ),
            ));
            return f;
        }
        if self.config.qp_type == QpType::Ud {
            self.on_ud(pkt, &mut f);
            return f;
        }
        let psn = pkt.bth.psn;
        let Some(next) = self.next_psn else {
            self.first_psn = Some(psn);
            self.on_new(pkt, now_ns, true, &mut f);
            return f;
        };
        if psn.distance(next) < HALF_SPACE {
            let lost = self.config.lossy && psn != next && self.read_unsized.is_none();
            if lost {
                self.msg = None; // packets were lost: join again as at the start
            } else {
                self.check_reservation(psn, next, &mut f);
            }
            self.end_retransmission(psn, &mut f);
            self.on_new(pkt, now_ns, lost, &mut f);
        } else if self.config.qp_type == QpType::Uc {
            f.push(Finding::new(
                "MR-UC-1",
                format!("UC packet PSN {psn} repeats an earlier PSN (a retransmission)"),
            ));
        } else {
            self.on_retransmit(pkt, now_ns, &mut f);
        }
        f
    }

    /// The responder sent `pkt` (a response) at `now_ns`.
    pub fn on_response(&mut self, pkt: &RocePacket<'_>, now_ns: Option<u64>) {
        let op = pkt.bth.opcode;
        if !op.is_rc_response() {
            return;
        }
        let psn = pkt.bth.psn;
        if let Some(next) = self.next_psn {
            // Responses outside the outstanding window are dropped by the requester.
            if psn.distance(next) < HALF_SPACE {
                return;
            }
        }
        // "MR-REQ-9": so are those before the oldest unacknowledged PSN minus
        // one (a late answer to a duplicate, say), whatever their syndrome.
        if self.acked.is_some_and(|a| psn.is_before(a)) {
            return;
        }
        if matches!(
            op,
            Opcode::RC_READ_RESPONSE_FIRST | Opcode::RC_READ_RESPONSE_MIDDLE
        ) {
            let len = pkt.payload.len() as u32;
            self.pmtu.narrow(|p| p == len);
        }
        // Only READ responses acknowledge the PSNs of a READ, in order, and
        // only its Atomic Acknowledge the PSN of an atomic ("MR-REQ-4"); the
        // oldest unacknowledged PSN is the first request's before any ACK.
        let expected = self.acked.map(|a| a.add(1)).or(self.first_psn);
        let awaited = expected.and_then(|e| {
            let (_, s) = self.holding(e)?;
            matches!(
                s.opcode,
                Opcode::RC_READ_REQUEST | Opcode::RC_CMP_SWAP | Opcode::RC_FETCH_ADD
            )
            .then_some((e, s.opcode))
        });
        let own_response = match awaited {
            Some((_, Opcode::RC_READ_REQUEST)) => op.is_rc_read_response(),
            Some(_) => op == Opcode::RC_ATOMIC_ACK,
            None => false,
        };
        if let Some((e, Opcode::RC_READ_REQUEST)) = awaited
            && own_response
            && psn.is_after(e)
        {
            return; // "MR-READ-7": later than the next expected response, dropped
        }
        // "MR-REQ-4": an ACK or NAK beyond a READ or atomic whose responses
        // are missing does not acknowledge them; it is retried from the
        // first missing one.
        let upto = |p: Psn| match awaited {
            Some((e, _)) if !own_response => e.sub(1),
            _ => p,
        };
        // A NAK (any code) for una − 1, an acknowledged PSN, concerns no
        // outstanding PSN (MR-NAK-5, MR-NAK-6, MR-RNR-3 need one): the
        // requester drops it, as the requester model does (a late answer
        // to a duplicate, say).
        let nak = pkt.ext.aeth.is_some_and(|a| {
            !matches!(
                a.syndrome.kind(),
                SyndromeKind::Ack { .. } | SyndromeKind::Reserved { .. }
            )
        });
        if nak && self.acked.is_some_and(|a| !psn.is_after(a)) {
            return;
        }
        match pkt.ext.aeth.map(|a| a.syndrome.kind()) {
            None | Some(SyndromeKind::Ack { .. }) => self.set_acked(upto(psn), now_ns),
            Some(SyndromeKind::Nak { code: 0 }) => {
                self.set_acked(upto(psn.sub(1)), now_ns);
                let in_progress = self.retx.is_some_and(|r| r.cause == Cause::SeqNak(psn));
                if in_progress {
                    self.repeated_nak = Some(psn);
                } else {
                    self.seq_nak = Some(psn);
                }
            }
            Some(SyndromeKind::RnrNak { timer }) => {
                self.set_acked(upto(psn.sub(1)), now_ns);
                self.rnr = Some((psn, now_ns, rnr_wait_ns(timer)));
            }
            Some(SyndromeKind::Nak { .. }) => self.errored = true,
            Some(SyndromeKind::Reserved { .. }) => {}
        }
    }

    fn is_request(&self, op: Opcode) -> bool {
        match (self.config.qp_type, op.class()) {
            (QpType::Rc, ServiceClass::Rc) => op.is_rc_request(),
            (QpType::Uc, ServiceClass::Uc) => op.operation() <= 0x0B,
            (QpType::Ud, _) => matches!(op, Opcode::UD_SEND_ONLY | Opcode::UD_SEND_ONLY_IMM),
            _ => false,
        }
    }

    /// Acknowledgement of every PSN up to `p`.
    fn set_acked(&mut self, p: Psn, now_ns: Option<u64>) {
        if self.acked.is_some_and(|a| !p.is_after(a)) {
            return;
        }
        self.acked = Some(p);
        self.last_ack_ns = now_ns;
        if self.seq_nak.is_some_and(|n| !n.is_after(p)) {
            self.seq_nak = None;
        }
        self.repeated_nak = None;
        // "MR-RNR-4": the retry after an RNR wait resends what is still
        // outstanding from the NAK's PSN on; PSNs acknowledged since are not.
        if let Some((rnr_psn, arrived, wait)) = self.rnr
            && !p.is_before(rnr_psn)
        {
            self.rnr = Some((p.add(1), arrived, wait));
        }
        let done = self.sent.extract_if(|&k, s| {
            let last = Psn::new(k).add(s.span.max(1) - 1);
            !last.is_after(p)
        });
        for (_, s) in done {
            if let Kept::Bytes(b) = s.payload
                && self.spare.len() < SPARE_BUFFERS
            {
                self.spare.push(b);
            }
        }
    }

    /// A new packet arrives at `psn` while a READ's reservation is unsized or
    /// PSNs were skipped ("MR-PSN-3").
    fn check_reservation(&mut self, psn: Psn, next: Psn, f: &mut Vec<Finding>) {
        if let Some((read_psn, len)) = self.read_unsized.take() {
            let n = psn.distance(read_psn);
            if !self.pmtu.narrow(|p| packet_count(len, p) == n) {
                f.push(Finding::new(
                    "MR-PSN-3",
                    format!(
                        "PSN {psn} follows a READ of {len} B at PSN {read_psn}: {n} PSNs reserved, which fits no PMTU"
                    ),
                ));
            }
            return;
        }
        if psn != next {
            f.push(Finding::new(
                "MR-PSN-3",
                format!(
                    "new request PSN {psn}, expected {next}: {} PSN(s) skipped",
                    psn.distance(next)
                ),
            ));
        }
    }

    /// PSNs a READ request occupies: exact when the PMTU is known, otherwise
    /// the fewest any candidate gives (the reservation is checked later).
    fn read_span(&mut self, psn: Psn, len: u64) -> u32 {
        if let Some(p) = self.pmtu.single() {
            return packet_count(len, p);
        }
        self.read_unsized = Some((psn, len));
        packet_count(len, self.pmtu.largest())
    }

    /// What is kept of `payload`, the payload of the request being judged:
    /// its mark when the caller gave one, else a copy in a reused buffer.
    fn keep_payload(&mut self, payload: &[u8]) -> Kept {
        if let Some(m) = self.mark.take() {
            return Kept::Mark(m);
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(payload);
        Kept::Bytes(buf)
    }

    /// Keeps `s` as the transmission of `psn`, forgetting the oldest quarter
    /// of the unacknowledged packets beyond [`MAX_SENT`].
    fn keep_sent(&mut self, psn: Psn, s: Sent) {
        if self.sent.len() >= MAX_SENT {
            let newest = self.next_psn.unwrap_or(psn);
            let mut ages: Vec<u32> = self
                .sent
                .keys()
                .map(|&k| newest.distance(Psn::new(k)))
                .collect();
            ages.sort_unstable();
            let cut = ages[ages.len() - MAX_SENT / 4];
            self.sent.retain(|&k, _| newest.distance(Psn::new(k)) < cut);
        }
        self.sent.insert(psn.value(), s);
    }

    /// The `Sent` entry whose block holds `psn`.
    fn holding(&self, psn: Psn) -> Option<(Psn, &Sent)> {
        self.sent
            .iter()
            .map(|(&k, s)| (Psn::new(k), s))
            .find(|(k, s)| in_block(psn, *k, s.span.max(1)))
    }

    fn on_ud(&mut self, pkt: &RocePacket<'_>, f: &mut Vec<Finding>) {
        let psn = pkt.bth.psn;
        if let Some(next) = self.next_psn
            && psn != next
        {
            f.push(Finding::new(
                "MR-UD-10",
                format!("UD PSN {psn}, expected {next} (one more per packet)"),
            ));
        }
        if pkt.bth.ack_req {
            f.push(Finding::new(
                "MR-UD-10",
                format!("UD packet PSN {psn} has AckReq set"),
            ));
        }
        let len = pkt.payload.len() as u32;
        if let Some(p) = self.pmtu.single() {
            if len > p {
                f.push(Finding::new(
                    "MR-UD-4",
                    format!("UD packet PSN {psn} carries {len} B, more than the PMTU {p}"),
                ));
            }
        } else {
            self.pmtu.narrow(|p| p >= len);
        }
        self.next_psn = Some(psn.add(1));
    }
}
