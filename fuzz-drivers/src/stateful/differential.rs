//! The `differential` target: the reference transport and the spec model on
//! the same event sequence; the model judges what the transport does.
//!
//! Node A (the requester) posts RC work requests and, on the second
//! `PostSend` tag of the event table, MP work requests to B's MP QP; node
//! B (the responder) posts receives on its RC QP and keeps 32 posted on its
//! MP QP; frames cross the link, time passes, QPs are reset. The first
//! input byte picks a mode: `Strict` (nothing lost), `Lossy` (responses may
//! be lost; MP requests may be lost or joined by a late duplicate of an old
//! one) or `Inject` (any impairment both ways, structure-aware frames
//! injected at B from A's addresses, among them MP requests beyond B's
//! window and late duplicates). Four judges watch B's RC side:
//!
//! 1. **Admission** (every frame reaching B): the model's receive path
//!    (`receiver::Device`, SPEC §9.2) decides drop or delivery; B's drop
//!    counters must move exactly as the verdict says (one counter, by one).
//! 2. **Responder** (every frame delivered to B's RC QP): the Base responder
//!    model with everything known (B's attributes, its memory regions and
//!    their bytes, its receive queue) lists every allowed outcome; what B
//!    did in answer (the frames it sent, its receive completions, the bytes
//!    of its memory outside receive buffers, entering ERR, its drop counter)
//!    must be one of them, whose state the model then takes.
//! 3. **Conversation** (mode `Strict`): every frame at A's port
//!    (requests as A sent them, responses as A received them, each at A's
//!    time) goes to `judge::ConversationJudge`, which applies the requester
//!    rules to A and the responder rules to B, pipelining and ACK coalescing
//!    included; every MUST finding fails the run. (At B's port the judge
//!    would see A's timeout retransmissions, sent before an RNR NAK reached
//!    A, arrive after it, and blame A for MR-RNR-3.) Not in `Lossy` mode:
//!    there the judge must guess what a request whose responses were all
//!    lost did; six such guesses were fixed in the judge (lossy-mode
//!    branch re-interpretation, MSN re-learning, MR-REQ-4/6/9 and MR-RNR-4
//!    acknowledgement bookkeeping), and at least one remains (a SEND whose
//!    responses were lost is taken as executed; the RNR NAK for its
//!    retransmission is then an MR-DUP-2 finding). `Lossy` mode runs the
//!    admission and responder judges, which need no guess.
//!
//! 4. **Notification point** (every frame reaching B): the model's
//!    `NpDecision` (§6.17) wants exactly one CNP from B when it is `Send`,
//!    none otherwise (MR-CNP-1, MR-CNP-2, MR-CNP-4), on B's RC and UD QPs.
//!
//! 5. **MP conversation** (`mp_watch`, every mode): A's MP requests and
//!    B's MP ACKs at A's port go to the spec model's `MpJudge` (entropy,
//!    selective retransmission, bytes in flight against `mp_cwnd_max`, ACK
//!    content), until a frame not from A reaches B's MP QP; B's MP ACKs are
//!    checked against what B was handed (cumulative PSN and SACK bits only
//!    for PSNs delivered within the window, echoes of a delivered request,
//!    every probe answered), and a duplicate or beyond-window MP request
//!    must leave B's memory as it is. What B's MP QP places and completes
//!    is not modelled (see `mp_watch` for what is not judged and why).
//!
//! And one bound on A: the **retry bound** (MR-TMR-5, MR-TMR-6, in every
//! mode): A sends no PSN to B's RC QP more than `1 + retry_cnt` times
//! between two frames from B reaching it.
//!
//! On top, every property of `reference_stateful` (no completion twice, no
//! byte changed that no operation addressed, bounded queues).

use super::Tally;
use super::input::Input;
use super::mp_watch::{MpWatch, changed, fill_mp_recvs, memory, rewrite_target};
use super::pair::{Event, Kind, LINK_CAP, Modified, Pair};
use super::reference;
use core::net::IpAddr;
use metaroce_codec::{Frame, IpRepr, Opcode, ParseOptions, Psn, icrc};
use metaroce_ref::{Access, DeviceConfig, QpState as RefState, WorkCompletion};
use metaroce_spec::Severity;
use metaroce_spec::judge::{ConversationConfig, ConversationJudge, MAX_PENDING, PacketMeta};
use metaroce_spec::model::congestion::NpDecision;
use metaroce_spec::model::mp::{spec_allows, spec_allows_dscp};
use metaroce_spec::model::qp::{QpState, QpType};
use metaroce_spec::model::receiver::{
    Device as RxModel, FrameAdmission, LocalQp, MpAdmission, Received, Receiver, Verdict,
};
use metaroce_spec::model::responder::{
    AccessFlags, Features, MemoryRegion, QpAttributes, RecvWr, ResponderState,
};
use metaroce_spec::model::{Effect, Knowledge, Outcomes, WcStatus};
use std::collections::{BTreeMap, BTreeSet};

/// Most events one input runs.
pub const MAX_EVENTS: usize = 160;

/// The features the reference transport declares (its capability profile:
/// atomics, SEND with Invalidate, immediate data; no FLUSH, ATOMIC WRITE or
/// credits).
pub const REF_FEATURES: Features = Features {
    atomics: true,
    flush: false,
    atomic_write: false,
    send_with_invalidate: true,
    invalidate_reg_mr: true,
    immediate: true,
    credits: false,
};

/// How frames cross the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every frame arrives, in order.
    Strict,
    /// Responses may be lost on their way to A.
    Lossy,
    /// Any impairment, and injected frames.
    Inject,
}

const A: usize = 0;
const B: usize = 1;

/// The model side of the run.
struct Judges {
    mode: Mode,
    rx: RxModel,
    rsp: ResponderState,
    conv: Option<ConversationJudge>,
    /// What the conversation judge's frames show of admission (§9.2).
    admission: FrameAdmission,
    frames: u64,
    /// Frames the responder model judged.
    judged: u64,
    /// The conversation judge stopped at an ERR by verbs; the next
    /// connection gets a new one.
    resume: bool,
    trace: bool,
    /// R_Keys of B's regions invalidated by SEND with Invalidate.
    invalid: BTreeSet<u32>,
    /// L_Keys of the buffers of each receive work request posted at B.
    recv_lkeys: BTreeMap<u64, Vec<u32>>,
    /// Bytes of B's regions (by L_Key, by offset) inside posted receive
    /// buffers: SEND data lands there, which the responder model does not
    /// describe.
    recv_mask: BTreeMap<u32, Vec<bool>>,
    /// How often A sent each PSN to B's RC QP since a frame from B last
    /// reached A (the retry bound, see [`Judges::count_send`]).
    streak: BTreeMap<u32, u32>,
    /// The MP conversation's judges (`mp_watch`).
    mp: MpWatch,
    /// The time an `Advance` event started, until its frames are captured.
    advanced_from: Option<u64>,
}

/// What the model's receive path (admission, §9.2) knows about node
/// `node`'s QP of `kind`: its attributes and current state as the device
/// reports them, the pair's addresses, the reference's features.
pub fn local_qp(pair: &Pair, node: usize, kind: Kind) -> LocalQp {
    let n = &pair.nodes[node];
    let info = n.dev.query_qp(n.qpn(kind)).ok();
    LocalQp {
        qp_type: if kind == Kind::Ud {
            QpType::Ud
        } else {
            QpType::Rc
        },
        mp: (kind == Kind::Mp).then_some(MpAdmission {
            trim_dscp: None,
            trimming: false,
        }),
        state: info.map_or(QpState::Reset, |i| state(i.state)),
        p_key: 0xFFFF,
        q_key: info.and_then(|i| i.attrs.qkey).unwrap_or(0),
        features: REF_FEATURES,
        local_ip: (kind != Kind::Ud).then_some(IpAddr::V4(n.ip)),
        remote_ip: (kind != Kind::Ud).then_some(IpAddr::V4(pair.nodes[1 - node].ip)),
        dest_qpn: info.and_then(|i| i.attrs.dest_qpn).unwrap_or(0),
        pmtu: info.and_then(|i| i.attrs.pmtu).unwrap_or(1024),
    }
}

/// Runs one input; `Err` names what the model does not allow.
pub fn run(data: &[u8]) -> Result<(), String> {
    run_tally(data).map(|_| ())
}

/// [`run`], with what the run did (`judged`: frames the responder model
/// judged at B).
pub fn run_tally(data: &[u8]) -> Result<Tally, String> {
    run_tally_with(data, &|c| c)
}

/// [`run_tally`] with both devices' [`DeviceConfig`] passed through
/// `configure` first. With `metaroce-ref`'s feature `zoo` this selects a
/// bug-zoo mutant (`|c| DeviceConfig { mutant: Some(m), ..c }`), which the
/// judges must then catch (`conformance/tests/fuzz_differential_zoo.rs`);
/// the `differential` target itself runs the unmutated transport.
pub fn run_tally_with(
    data: &[u8],
    configure: &dyn Fn(DeviceConfig) -> DeviceConfig,
) -> Result<Tally, String> {
    let mut inp = Input::new(data);
    let mode = [Mode::Strict, Mode::Lossy, Mode::Inject][inp.pick(3)];
    let mut pair = Pair::with_config(&mut inp, true, configure)?;
    pair.observe = true;
    pair.split_buffers = true;
    let mut j = Judges::new(&pair, mode);
    fill_mp_recvs(&mut pair);
    let mut done = [BTreeSet::new(), BTreeSet::new()];
    let mut events = 0;
    let trace = std::env::var_os("METAROCE_FUZZ_TRACE").is_some();
    for i in 0..MAX_EVENTS {
        if inp.is_empty() {
            break;
        }
        let tag = inp.pick(Event::TABLE.len());
        let event = Event::TABLE[tag];
        // The second `PostSend` of the table posts on A's MP QP.
        let on = if tag == 1 { Kind::Mp } else { Kind::Rc };
        if trace {
            eprintln!("event {i}: {event:?} ({on:?}) at {} ns", pair.now);
        }
        j.step(&mut pair, event, on, &mut inp, &mut done)
            .map_err(|e| format!("{mode:?} mode, event {i} ({event:?}): {e}"))?;
        events += 1;
    }
    // Frames still in flight arrive before the capture ends.
    let mut rest = Input::new(&[]);
    for _ in 0..64 {
        if pair.links.iter().all(|l| l.is_empty()) {
            break;
        }
        j.flow(&mut pair, &mut rest, &mut done, true)
            .map_err(|e| format!("{mode:?} mode, draining the link: {e}"))?;
    }
    if let Some(conv) = &mut j.conv {
        must_findings(conv.finish(), "at the end of the run")?;
    }
    Ok(Tally {
        events,
        completed_ok: pair.completed_ok,
        judged: j.judged,
    })
}

impl Judges {
    fn new(pair: &Pair, mode: Mode) -> Self {
        let b = &pair.nodes[B];
        let local = |kind: Kind| local_qp(pair, B, kind);
        let qps = [Kind::Rc, Kind::Mp, Kind::Ud]
            .into_iter()
            .map(|k| (b.qpn(k), local(k)))
            .collect();
        let rx = RxModel::new(Receiver {
            vlan: false,
            mp: true,
            qps,
        });
        // Strict mode only: in a lossy capture the judge must guess what a
        // request whose responses were all lost did, and its guesses are
        // not yet good enough for a fuzzer (see the module documentation).
        let conv = (mode == Mode::Strict)
            .then(|| ConversationJudge::new(conversation_config(pair.pmtu, mode)));
        Judges {
            mode,
            rx,
            rsp: responder(pair, &BTreeSet::new()),
            invalid: BTreeSet::new(),
            recv_lkeys: BTreeMap::new(),
            conv,
            admission: FrameAdmission::new(ParseOptions::default().dialect),
            frames: 0,
            judged: 0,
            resume: false,
            trace: std::env::var_os("METAROCE_FUZZ_TRACE").is_some(),
            recv_mask: BTreeMap::new(),
            streak: BTreeMap::new(),
            mp: {
                let mut mp = MpWatch::new(pair);
                mp.reordering = mode == Mode::Inject;
                mp
            },
            advanced_from: None,
        }
    }

    fn step(
        &mut self,
        pair: &mut Pair,
        event: Event,
        on: Kind,
        inp: &mut Input<'_>,
        done: &mut [BTreeSet<u64>; 2],
    ) -> Result<(), String> {
        match event {
            Event::PostSend => pair.post_send_on(A, on, inp)?,
            Event::PostRecv => {
                if let Some(wr) = pair.post_recv_on(B, Kind::Rc, inp)? {
                    self.post_recv(pair, &wr);
                }
            }
            Event::Deliver | Event::Inject if self.mode != Mode::Inject => {
                let from = inp.pick(2);
                let count = 1 + inp.pick(8);
                self.deliver(pair, from, count, inp)?;
            }
            Event::Deliver => {
                let from = inp.pick(2);
                if from == A {
                    let count = 1 + inp.pick(8);
                    self.deliver(pair, A, count, inp)?;
                } else {
                    self.streak.clear(); // B's frames may reach A
                    pair.deliver(B, 1 + inp.pick(8), inp);
                    for f in std::mem::take(&mut pair.delivered[A]) {
                        if self.trace {
                            eprintln!("  at A: {}", describe_mp(&f));
                        }
                        self.mp.a_received(pair, &f, pair.now)?;
                    }
                }
            }
            Event::Inject => {
                let mut wire = pair.injected_frame(B, inp);
                // Of the frames aimed at B's MP QP, one in four is a
                // well-formed MP request beyond its window instead
                // (MR-MPW-1), one in four a late duplicate of an old request
                // of A's (MR-MPW-3).
                if MpWatch::to_b_mp(pair, &wire) {
                    let instead = match inp.pick(4) {
                        0 => self.mp.beyond_window(inp.pick(4) as u32),
                        1 => self.mp.late_duplicate(),
                        _ => None,
                    };
                    if let Some(w) = instead {
                        wire = w;
                    }
                }
                self.at_b(pair, &wire, true)?;
            }
            Event::Advance => {
                let dt = match inp.pick(3) {
                    0 => 1_000,
                    1 => u64::from(inp.u16()) * 100,
                    _ => 4096u64 << (inp.pick(12) as u32),
                };
                self.advanced_from = Some(pair.now);
                pair.advance(dt);
            }
            Event::Modify => {
                let did = pair.modify(inp)?;
                self.modified(pair, did);
            }
        }
        self.flow(pair, inp, done, false)
    }

    /// Pumps both devices; in `Strict` and `Lossy` mode a link past half its
    /// capacity delivers at once (a full link would lose frames), and with
    /// `drain` every link delivers.
    fn flow(
        &mut self,
        pair: &mut Pair,
        inp: &mut Input<'_>,
        done: &mut [BTreeSet<u64>; 2],
        drain: bool,
    ) -> Result<(), String> {
        pair.pump()?;
        self.capture(pair)?;
        if self.mode != Mode::Inject {
            for from in [A, B] {
                let n = pair.links[from].len();
                if n > LINK_CAP / 2 || drain {
                    self.deliver(pair, from, n, inp)?;
                }
            }
            pair.pump()?;
            self.capture(pair)?;
        }
        let wcs = pair.nodes[B].completions.clone();
        self.invalidated_by_mp(pair, &wcs);
        reference::check(pair, done)?;
        if pair.nodes[B]
            .dev
            .query_qp(pair.nodes[B].qpn(Kind::Mp))
            .is_ok_and(|i| i.state == RefState::Rts)
        {
            self.mp.probes_due(pair.now)?;
            fill_mp_recvs(pair);
        } else {
            self.mp.b_err();
        }
        Ok(())
    }

    fn capture(&mut self, pair: &mut Pair) -> Result<(), String> {
        // A frame lost to the link's capacity (a device sent more in one
        // event than the link holds) is a loss `Strict` mode's
        // conversation judge does not allow for: it stops, as in the other
        // modes. (The MP judges and the per-frame judges at B stay sound.)
        if pair.overflowed != [0; 2] && self.conv.is_some() {
            self.conv = None;
            self.resume = false;
        }
        // The capture point is A's port: A's frames as A sends them, B's as
        // A receives them (so every timestamp is A's own time).
        // Frames A's timers sent during an `Advance` left at some time
        // since its start: the MP judge takes the start, with the span as
        // the timestamps' tolerance.
        let from = self.advanced_from.take().unwrap_or(pair.now);
        for f in std::mem::take(&mut pair.sent[A]) {
            self.count_send(pair, &f)?;
            self.observe(pair, &f, A)?;
            self.mp.a_sent(pair, &f, from, pair.now - from)?;
        }
        for f in std::mem::take(&mut pair.sent[B]) {
            self.mp.b_sent(pair, &f)?;
        }
        pair.delivered = [Vec::new(), Vec::new()];
        Ok(())
    }

    /// B posted a receive on its RC QP: the model's receive queue gets it.
    fn post_recv(&mut self, pair: &Pair, wr: &metaroce_ref::RecvWr) {
        let b = &pair.nodes[B];
        let capacity: u64 = wr.sg_list.iter().map(|s| u64::from(s.len)).sum();
        let writable = wr.sg_list.iter().all(|s| {
            b.mrs.iter().any(|m| {
                m.info.lkey == s.lkey
                    && !self.invalid.contains(&m.info.rkey)
                    && m.access.contains(Access::LOCAL_WRITE)
                    && s.addr >= m.info.addr
                    && s.addr + u64::from(s.len) <= m.info.addr + m.info.len
            })
        });
        for s in &wr.sg_list {
            let Some(m) = b.mrs.iter().find(|m| m.info.lkey == s.lkey) else {
                continue;
            };
            let mask = self
                .recv_mask
                .entry(s.lkey)
                .or_insert_with(|| vec![false; m.info.len as usize]);
            let start = s.addr.saturating_sub(m.info.addr).min(m.info.len) as usize;
            let end = (s.addr.saturating_add(u64::from(s.len)))
                .saturating_sub(m.info.addr)
                .min(m.info.len) as usize;
            mask[start..end.max(start)].fill(true);
        }
        if self.recv_lkeys.len() < 4096 {
            self.recv_lkeys
                .insert(wr.wr_id, wr.sg_list.iter().map(|s| s.lkey).collect());
        }
        let rwr = RecvWr {
            writable,
            ..RecvWr::new(wr.wr_id, u32::try_from(capacity).unwrap_or(u32::MAX))
        };
        if self.rsp.qp_state != QpState::Err {
            self.rsp = self.rsp.post_recv(rwr);
        }
    }

    /// Frames cross from `from` one by one; frames reaching B are judged.
    fn deliver(
        &mut self,
        pair: &mut Pair,
        from: usize,
        count: usize,
        inp: &mut Input<'_>,
    ) -> Result<(), String> {
        for _ in 0..count {
            let Some(frame) = pair.links[from].pop_front() else {
                return Ok(());
            };
            // Responses may be lost on their way to A, which is where the
            // judge's capture is: "lost between a peer and the capture
            // point", as its lossy mode assumes. (Requests lost before B
            // would look delivered to it; Inject mode loses those, judged
            // by the responder model alone.)
            if self.mode == Mode::Lossy && from == B && inp.pick(8) == 7 {
                continue; // lost (an exhausted input loses nothing)
            }
            // MP requests may be lost on their way to B, or come with a
            // late duplicate of an old request of A's, in every mode but
            // `Strict` (the MP judges need no guess about either).
            if self.mode != Mode::Strict && from == A && MpWatch::to_b_mp(pair, &frame) {
                match inp.pick(8) {
                    7 => continue,
                    6 => {
                        if let Some(old) = self.mp.late_duplicate() {
                            if self.mp.unchanging_at_b(pair, &old).is_some() {
                                rewrite_target(pair, &old);
                                // The RC responder model learns the bytes
                                // too (the duplicate may not be delivered).
                                self.resync_memory(pair);
                            }
                            self.at_b(pair, &old, false)?;
                        }
                    }
                    _ => {}
                }
            }
            if from == A {
                self.at_b(pair, &frame, false)?;
            } else {
                self.streak.clear();
                self.observe(pair, &frame, B)?;
                self.mp.a_received(pair, &frame, pair.now)?;
                pair.hand(A, &frame);
            }
        }
        Ok(())
    }

    /// One frame reaches B (`injected`: from an `Inject` event, not from
    /// A): admission, responder, conversation.
    fn at_b(&mut self, pair: &mut Pair, wire: &[u8], injected: bool) -> Result<(), String> {
        let rc = pair.nodes[B].qpn(Kind::Rc);
        let mp = pair.nodes[B].qpn(Kind::Mp);
        self.sync_states(pair);
        let before = counters(&pair.nodes[B].dev);
        let was_err = self.rsp.qp_state == QpState::Err;
        let mp_rts = pair.nodes[B]
            .dev
            .query_qp(mp)
            .is_ok_and(|i| i.state == RefState::Rts);
        let (rx, received) = self.rx.receive(wire, pair.now);
        self.rx = rx;
        let verdict = received.verdict;
        if self.trace {
            let v = match &verdict {
                Verdict::Deliver(d) => format!("deliver to {:#x}", d.qpn),
                Verdict::Drop(d) => format!("drop {:?}", d.counter),
                Verdict::NotMetaRoce => "not MetaRoCE".to_string(),
            };
            let how = if injected { "injected" } else { "from A" };
            eprintln!("  at B ({how}, {v}): {}", describe_mp(wire));
        }
        let unchanging = self
            .mp
            .unchanging_at_b(pair, wire)
            .map(|why| (why, memory(pair)));
        if let Verdict::Deliver(d) = &verdict
            && d.qpn == mp
        {
            if injected {
                self.mp.foreign_at_b();
            }
            self.mp.b_delivered(wire, pair.now, mp_rts, pair.pmtu);
        }
        pair.hand(B, wire);
        // What B did in answer: frames (the link gets them), completions.
        let mut sent = Vec::new();
        while let Some(f) = pair.nodes[B].dev.poll_transmit() {
            sent.push(f);
        }
        let cq = pair.nodes[B].cq;
        let wcs = pair.nodes[B]
            .dev
            .poll_cq(cq, usize::MAX)
            .unwrap_or_default();
        pair.completed_ok += wcs
            .iter()
            .filter(|w| w.status == metaroce_ref::WcStatus::Success)
            .count() as u64;
        pair.nodes[B].completions.extend(wcs.iter().copied());
        self.invalidated_by_mp(pair, &wcs);
        let after = counters(&pair.nodes[B].dev);
        for f in &sent {
            if self.trace {
                eprintln!("  B sent: {}", describe_mp(f));
            }
            self.mp.b_sent(pair, f)?;
            pair.links[B].push_back(f.clone());
        }
        let summary = || describe(wire);
        if let Some((rule, before)) = unchanging
            && mp_rts
            && matches!(&verdict, Verdict::Deliver(d) if d.qpn == mp)
            && let Some(why) = changed(&before, &memory(pair))
        {
            return Err(format!("{rule}: {}, but {why}", summary()));
        }
        self.notification_point(&received, &sent, &summary)?;
        match verdict {
            Verdict::NotMetaRoce => same_counters(before, after, None, &summary)?,
            Verdict::Drop(d) => {
                same_counters(before, after, d.counter, &summary)?;
                if !sent.iter().all(|f| is_cnp(f)) {
                    return Err(format!(
                        "{}: admission drops {} ({:?}), but B answered with {}",
                        d.reqs.join(", "),
                        summary(),
                        d.counter,
                        sent.iter()
                            .map(|f| describe(f))
                            .collect::<Vec<_>>()
                            .join("; ")
                    ));
                }
            }
            Verdict::Deliver(d) if d.qpn == rc && !was_err => {
                let packet = d.packet;
                let rc_wcs: Vec<WorkCompletion> =
                    wcs.iter().filter(|w| w.qpn == rc).copied().collect();
                let obs = Observed {
                    sent: &sent,
                    wcs: &rc_wcs,
                    counters: (before, after),
                    err: pair.nodes[B]
                        .dev
                        .query_qp(rc)
                        .is_ok_and(|i| i.state == RefState::Err),
                };
                let branches = self.rsp.branches(&packet);
                let mut fit = None;
                'branches: for b in &branches {
                    for o in std::iter::once(&b.outcomes).chain(&b.outcomes.alternatives) {
                        if matches(o, &obs) && self.memory_matches(pair, &b.state) {
                            fit = Some(b.state.clone());
                            break 'branches;
                        }
                    }
                }
                match fit {
                    Some(state) => {
                        self.judged += 1;
                        self.rsp = state;
                        self.invalidated(pair, &rc_wcs);
                    }
                    None => {
                        let why = branches
                            .first()
                            .map(|b| mismatch(&b.outcomes, &obs, self.memory_diff(pair, &b.state)))
                            .unwrap_or_default();
                        let queue: Vec<(u64, u32, bool)> = self
                            .rsp
                            .recv_queue
                            .known()
                            .map(|q| {
                                q.iter()
                                    .take(3)
                                    .map(|w| (w.id, w.capacity, w.writable))
                                    .collect()
                            })
                            .unwrap_or_default();
                        return Err(format!(
                            "B's answer to {} is none the model allows (ePSN {}, {} branches, \
                             receive queue starts {queue:?}, in progress {:?}): {why}",
                            summary(),
                            self.rsp.epsn,
                            branches.len(),
                            self.rsp.in_progress
                        ));
                    }
                }
            }
            Verdict::Deliver(d) if d.qpn == pair.nodes[B].qpn(Kind::Mp) => {
                // B's MP QP is not judged here (`reference_stateful` covers
                // it); what an MP WRITE placed is taken as given, so the
                // responder model of the RC QP sees the regions as they are.
                self.resync_memory(pair);
            }
            Verdict::Deliver(_) => {}
        }
        Ok(())
    }

    /// The responder model's region bytes become B's.
    fn resync_memory(&mut self, pair: &Pair) {
        let b = &pair.nodes[B];
        let Some(regions) = self.rsp.memory.known_mut() else {
            return;
        };
        for r in regions.iter_mut() {
            if let Some(m) = b.mrs.iter().find(|m| m.info.rkey == r.rkey)
                && let Ok(now) = b.dev.read_mr(m.info.lkey, m.info.addr, m.info.len)
                && r.contents.known().is_some_and(|c| c.as_slice() != now)
            {
                r.contents = Knowledge::Known(now.to_vec());
            }
        }
    }

    /// The notification point (§6.17): B sends a CNP exactly when the
    /// model's `NpDecision` is `Send` (and it fits the CNP the model
    /// describes: DestQP the sender's QP, PSN 0, the QP's P_Key), none when
    /// the frame is dropped, not CE-marked, excluded (ACKs, CNPs, MP QPs,
    /// MR-CNP-6) or paced (MR-CNP-2, `cnp_interval` per destination QP).
    /// CE-marked frames come from `Inject` events (one in eight), on B's RC
    /// and UD QPs alike (a UD CNP goes to the DETH source QP).
    fn notification_point(
        &mut self,
        received: &Received<'_>,
        sent: &[Vec<u8>],
        summary: &dyn Fn() -> String,
    ) -> Result<(), String> {
        let cnps: Vec<&Vec<u8>> = sent.iter().filter(|f| is_cnp(f)).collect();
        match &received.np {
            NpDecision::Send(spec) => {
                let fits = |wire: &Vec<u8>| {
                    Frame::parse(wire, &ParseOptions::default())
                        .ok()
                        .and_then(|f| Some(spec_allows(&spec.packet(), &f.roce?, f.udp?.src_port)))
                        .unwrap_or(false)
                };
                match cnps.as_slice() {
                    [one] if fits(one) => Ok(()),
                    [one] => Err(format!(
                        "MR-CNP-4: B's CNP for {} is {}, the model wants DestQP {:#x} P_Key {:#x}",
                        summary(),
                        describe(one),
                        spec.dest_qp,
                        spec.p_key
                    )),
                    _ => Err(format!(
                        "MR-CNP-1: {} is CE-marked and due a CNP; B sent {} CNPs",
                        summary(),
                        cnps.len()
                    )),
                }
            }
            decision if !cnps.is_empty() => Err(format!(
                "MR-CNP-1, MR-CNP-2: B sent {} CNP(s) for {}, the model's notification point says {decision:?}",
                cnps.len(),
                summary()
            )),
            _ => Ok(()),
        }
    }

    /// After a SEND with Invalidate (MR-RSP-10) the region is invalid for
    /// its L_Key too: receive work requests with buffers in it can no longer
    /// be written (MR-RSP-9). The responder model keeps a receive WR's
    /// writability as posted, so the harness updates its queue.
    fn invalidated(&mut self, pair: &Pair, wcs: &[WorkCompletion]) {
        let b = &pair.nodes[B];
        for key in wcs.iter().filter_map(|w| w.invalidated_rkey) {
            self.invalid.insert(key);
            let Some(m) = b.mrs.iter().find(|m| m.info.rkey == key) else {
                continue;
            };
            let lkey = m.info.lkey;
            if let Some(q) = self.rsp.recv_queue.known_mut() {
                for wr in q.iter_mut() {
                    if self
                        .recv_lkeys
                        .get(&wr.id)
                        .is_some_and(|k| k.contains(&lkey))
                    {
                        wr.writable = false;
                    }
                }
            }
        }
    }

    /// An MP SEND with Invalidate completed at B (MR-MPP-9): the region is
    /// gone for B's RC QP too, which the RC responder model learns here.
    fn invalidated_by_mp(&mut self, pair: &Pair, wcs: &[WorkCompletion]) {
        let mp = pair.nodes[B].qpn(Kind::Mp);
        let mp_wcs: Vec<WorkCompletion> = wcs
            .iter()
            .filter(|w| w.qpn == mp && w.invalidated_rkey.is_some())
            .copied()
            .collect();
        if mp_wcs.is_empty() {
            return;
        }
        for key in mp_wcs.iter().filter_map(|w| w.invalidated_rkey) {
            if let Some(regions) = self.rsp.memory.known_mut() {
                regions.retain(|r| r.rkey != key);
            }
        }
        self.invalidated(pair, &mp_wcs);
    }

    /// The retry bound (MR-TMR-5, MR-TMR-6): while no frame from B reaches
    /// A, A sends nothing again but on its local ACK timeout, each time one
    /// retry from the oldest unacknowledged PSN, and after `retry_cnt`
    /// retries it gives up (RETRY_EXC_ERR). So A sends no PSN to B's RC QP
    /// more than `1 + retry_cnt` times between two frames from B reaching
    /// it (a bound, not the count: a retry counter reset only by progress
    /// may already be lower). RNR waits and NAK retries need a frame from
    /// B, which starts the count anew; so do reconnections.
    fn count_send(&mut self, pair: &Pair, wire: &[u8]) -> Result<(), String> {
        let Ok(frame) = Frame::parse(wire, &ParseOptions::default()) else {
            return Ok(());
        };
        let Some(p) = &frame.roce else {
            return Ok(());
        };
        if p.bth.dest_qp != pair.nodes[B].qpn(Kind::Rc) || p.bth.opcode == Opcode::CNP {
            return Ok(());
        }
        let psn = p.bth.psn.value();
        let n = self.streak.entry(psn).or_insert(0);
        *n += 1;
        let max = 1 + u32::from(pair.rc_retry_cnt);
        if *n > max {
            return Err(format!(
                "MR-TMR-5, MR-TMR-6: A sent {} {} times with no frame from B \
                 reaching it in between; retry_cnt {} allows {max}",
                describe(wire),
                *n,
                pair.rc_retry_cnt
            ));
        }
        if self.streak.len() > 4096 {
            self.streak.clear(); // bounded; forgetting only makes the check weaker
        }
        Ok(())
    }

    /// A frame at B's port, sent by node `sender`, to the conversation judge.
    fn observe(&mut self, pair: &Pair, wire: &[u8], sender: usize) -> Result<(), String> {
        if self.trace {
            eprintln!(
                "  {} -> {}: {}",
                ["A", "B"][sender],
                ["A", "B"][1 - sender],
                describe(wire)
            );
        }
        let Some(conv) = &mut self.conv else {
            return Ok(());
        };
        let Ok(frame) = Frame::parse(wire, &ParseOptions::default()) else {
            return Ok(());
        };
        let (Some(IpRepr::V4(ip)), Some(udp), Some(packet)) = (&frame.ip, &frame.udp, &frame.roce)
        else {
            return Ok(());
        };
        // Only the A–B conversation on the RC QPs.
        let peer = pair.nodes[1 - sender].qpn(Kind::Rc);
        if ip.src != pair.nodes[sender].ip || packet.bth.dest_qp != peer {
            return Ok(());
        }
        self.frames += 1;
        let meta = PacketMeta {
            frame: self.frames,
            timestamp_ns: pair.now,
            src: IpAddr::V4(ip.src),
            dst: IpAddr::V4(ip.dst),
            udp_src_port: udp.src_port,
            ecn: ip.tos & 3,
            dscp: ip.tos >> 2,
            icrc_valid: icrc::verify(&frame).is_valid() == Some(true),
            admitted: self
                .admission
                .admit(&frame, icrc::verify(&frame), false, None)
                .is_ok(),
            payload_len: None,
        };
        let found = conv.on_packet(&meta, packet);
        if conv.pending() > MAX_PENDING / 2 {
            // Near the judge's bound: requests retired early lose what their
            // responses would show (a known limit of the judge, reported),
            // so this run stops judging the conversation.
            self.conv = None;
        }
        must_findings(found, &describe(wire))
    }

    /// The model's QP state follows B's where verbs moved it.
    fn sync_states(&mut self, pair: &Pair) {
        let b = &pair.nodes[B];
        for (qpn, qp) in self.rx.receiver.qps.iter_mut() {
            if let Ok(info) = b.dev.query_qp(*qpn) {
                qp.state = state(info.state);
            }
        }
    }

    /// Verbs moved a QP: the responder model follows B's RC QP.
    fn modified(&mut self, pair: &mut Pair, did: Modified) {
        match did {
            Modified::Err(n, Kind::Rc) => {
                if n == B {
                    self.rsp = self.rsp.with_qp_state(QpState::Err);
                }
                // ERR by verbs ends the conversation outside the wire: what
                // is unanswered now is not the responder's fault. Judging
                // resumes with the next connection.
                if self.conv.is_some() {
                    self.conv = None;
                    self.resume = true;
                }
            }
            Modified::Err(B, Kind::Mp) => self.mp.b_err(),
            Modified::Reconnected(Kind::Mp) => {
                // The new MP connection starts with no MP frame in flight
                // (frames of the old one would be judged against the new).
                let qps = [pair.nodes[A].qpn(Kind::Mp), pair.nodes[B].qpn(Kind::Mp)];
                for link in &mut pair.links {
                    link.retain(|f| {
                        Frame::parse(f, &ParseOptions::default())
                            .ok()
                            .and_then(|f| f.roce)
                            .is_none_or(|p| !qps.contains(&p.bth.dest_qp))
                    });
                }
                self.mp.reconnected(pair);
                fill_mp_recvs(pair);
            }
            Modified::Reconnected(Kind::Rc) => {
                self.streak.clear();
                if self.mode != Mode::Inject {
                    // The judge takes the new connection as a new capture:
                    // frames of the old one do not cross into it.
                    pair.links = Default::default();
                }
                self.rsp = responder(pair, &self.invalid);
                self.recv_mask.clear();
                if self.conv.is_some() || self.resume {
                    // A new connection: what came before is not judged with it.
                    self.conv = Some(ConversationJudge::new(conversation_config(
                        pair.pmtu, self.mode,
                    )));
                    self.resume = false;
                }
            }
            _ => {}
        }
        self.sync_states(pair);
    }

    /// B's region bytes equal the model's, outside receive buffers.
    fn memory_matches(&self, pair: &Pair, st: &ResponderState) -> bool {
        self.memory_diff(pair, st).is_none()
    }

    fn memory_diff(&self, pair: &Pair, st: &ResponderState) -> Option<String> {
        let b = &pair.nodes[B];
        let regions = st.memory.known()?;
        for r in regions {
            let Some(m) = b.mrs.iter().find(|m| m.info.rkey == r.rkey) else {
                continue;
            };
            let Knowledge::Known(model) = &r.contents else {
                continue;
            };
            let Ok(now) = b.dev.read_mr(m.info.lkey, m.info.addr, m.info.len) else {
                continue;
            };
            if now == model.as_slice() {
                continue;
            }
            let mask = self.recv_mask.get(&m.info.lkey);
            for (i, (&got, &want)) in now.iter().zip(model).enumerate() {
                if got != want && !mask.is_some_and(|k| k.get(i).copied().unwrap_or(false)) {
                    return Some(format!(
                        "MR-SEC-4, MR-RSP-14: byte {i} of region {:#x} is {got:#04x} at B, the model says {want:#04x}",
                        r.rkey
                    ));
                }
            }
        }
        None
    }
}

/// The conversation judge's configuration: PMTU known, timers not judged
/// (capture times are delivery times at B, not A's send times), losses
/// expected in `Lossy` mode.
fn conversation_config(pmtu: u32, mode: Mode) -> ConversationConfig {
    ConversationConfig {
        pmtu: Some(pmtu),
        timeout: None,
        features: REF_FEATURES,
        lossy: mode == Mode::Lossy,
        ..ConversationConfig::default()
    }
}

/// What B did in answer to one frame.
struct Observed<'a> {
    sent: &'a [Vec<u8>],
    wcs: &'a [WorkCompletion],
    counters: ([u64; 5], [u64; 5]),
    err: bool,
}

/// Whether one outcome set describes what B did (frames, completions, ERR,
/// drop counters; memory is checked against the branch's state).
fn matches(o: &Outcomes, obs: &Observed<'_>) -> bool {
    mismatch_reason(o, obs).is_none()
}

fn mismatch(o: &Outcomes, obs: &Observed<'_>, memory: Option<String>) -> String {
    mismatch_reason(o, obs)
        .or(memory)
        .unwrap_or_else(|| "an alternative branch fits nothing either".into())
}

fn mismatch_reason(o: &Outcomes, obs: &Observed<'_>) -> Option<String> {
    let effects = || o.required.iter().chain(&o.optional);
    let packets: Vec<(Vec<u8>, Option<String>)> = obs
        .sent
        .iter()
        .filter(|f| !is_cnp(f))
        .map(|f| (f.clone(), None))
        .collect();
    // Every frame B sent is a Send effect, in order; every required one is sent.
    let mut used = vec![false; o.required.len() + o.optional.len()];
    for (wire, _) in &packets {
        let Ok(frame) = Frame::parse(wire, &ParseOptions::default()) else {
            return Some(format!(
                "B sent a frame that does not parse: {}",
                describe(wire)
            ));
        };
        let (Some(p), Some(udp)) = (&frame.roce, &frame.udp) else {
            return Some("B sent a frame that is not RoCE".into());
        };
        let hit = effects().enumerate().position(|(i, c)| {
            !used[i]
                && matches!(&c.value, Effect::Send(s) if spec_allows(s, p, udp.src_port)
                    && frame.ip.as_ref().is_none_or(|ip| spec_allows_dscp(s, ip.dscp())))
        });
        match hit {
            Some(i) => used[i] = true,
            None => {
                return Some(format!(
                    "B sent {} which no Send effect allows; the model expects {}",
                    describe(wire),
                    expected(o)
                ));
            }
        }
    }
    for (i, c) in o.required.iter().enumerate() {
        if matches!(c.value, Effect::Send(_)) && !used[i] {
            return Some(format!(
                "{}: B sent nothing for a required {}",
                c.reqs.join(", "),
                expected(o)
            ));
        }
    }
    // Receive completions.
    let mut wc_used = vec![false; obs.wcs.len()];
    for c in effects() {
        let Effect::Complete(spec) = &c.value else {
            continue;
        };
        let hit = obs.wcs.iter().enumerate().position(|(i, w)| {
            !wc_used[i]
                && w.wr_id == spec.wr
                && spec.status.allows(&status(w.status))
                && spec.byte_len.allows(&w.byte_len)
                && spec.imm.allows(&w.imm)
        });
        match hit {
            Some(i) => wc_used[i] = true,
            None if o.required.iter().any(|r| std::ptr::eq(r, c)) => {
                return Some(format!(
                    "{}: no completion at B fits {spec:?}; B completed {:?}",
                    c.reqs.join(", "),
                    obs.wcs
                ));
            }
            None => {}
        }
    }
    // "MR-QP-6": entering ERR flushes every other receive.
    let enters = o.required.iter().any(|c| c.value == Effect::EnterError);
    for (i, w) in obs.wcs.iter().enumerate() {
        if enters && w.status == metaroce_ref::WcStatus::WrFlushErr {
            wc_used[i] = true;
        }
    }
    if let Some(i) = wc_used.iter().position(|u| !u) {
        return Some(format!(
            "B completed {:?}, which no Complete effect allows",
            obs.wcs[i]
        ));
    }
    // ERR.
    if enters != obs.err {
        return Some(format!(
            "MR-RSP-11: the model {} ERR, B {}",
            if enters { "enters" } else { "stays out of" },
            if obs.err { "is in ERR" } else { "is not" }
        ));
    }
    // Drop counters.
    let want = o.required.iter().find_map(|c| match c.value {
        Effect::Drop { counter } => counter,
        _ => None,
    });
    let (before, after) = obs.counters;
    let delta: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
    let expect: Vec<u64> = COUNTERS
        .iter()
        .map(|n| u64::from(want == Some(*n)))
        .collect();
    if delta != expect {
        return Some(format!(
            "counters {COUNTERS:?} moved by {delta:?}, the model says {want:?}"
        ));
    }
    None
}

fn expected(o: &Outcomes) -> String {
    let list: Vec<String> = o
        .required
        .iter()
        .map(|c| format!("required {:?} {:?}", c.reqs, short(&c.value)))
        .chain(
            o.optional
                .iter()
                .map(|c| format!("optional {:?} {:?}", c.reqs, short(&c.value))),
        )
        .collect();
    format!("[{}]", list.join("; "))
}

fn short(e: &Effect) -> String {
    match e {
        Effect::Send(s) => format!(
            "Send {:?} psn {:?} syndrome {:?} msn {:?}",
            s.opcode, s.psn, s.syndrome, s.msn
        ),
        other => format!("{other:?}"),
    }
}

/// The §9.3 drop counters compared, in this order.
const COUNTERS: [&str; 5] = [
    "icrc_errors",
    "malformed_drops",
    "unknown_qp_drops",
    "pkey_violations",
    "qkey_violations",
];

fn counters(dev: &metaroce_ref::Device) -> [u64; 5] {
    let c = dev.counters();
    [
        c.icrc_errors,
        c.malformed_drops,
        c.unknown_qp_drops,
        c.pkey_violations,
        c.qkey_violations,
    ]
}

/// Admission's verdict and B's counters agree: `counter` (if any) moved by
/// one, every other drop counter stayed.
fn same_counters(
    before: [u64; 5],
    after: [u64; 5],
    counter: Option<&str>,
    what: &dyn Fn() -> String,
) -> Result<(), String> {
    let delta: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
    let expect: Vec<u64> = COUNTERS
        .iter()
        .map(|n| u64::from(counter == Some(*n)))
        .collect();
    if delta == expect {
        return Ok(());
    }
    Err(format!(
        "MR-ROB-1 (§9.2): for {} admission says {counter:?}, B's counters {COUNTERS:?} moved by {delta:?}",
        what()
    ))
}

/// Fails on the MUST findings of the conversation judge. (SPEC v1.1 settled
/// the two questions once waived here: MR-RNR-4 / MR-REQ-4, an RNR NAK beyond
/// a READ that lost its responses, and MR-RSP-11, the receive WR of a SEND
/// that a fatal NAK ends; the model allows both now.)
fn must_findings(
    findings: Vec<metaroce_spec::judge::ConversationFinding>,
    at: &str,
) -> Result<(), String> {
    match findings
        .iter()
        .find(|f| f.finding.severity == Severity::Must)
    {
        Some(f) => Err(format!(
            "{}: {} (frames {:?}; {at})",
            f.finding.id, f.finding.message, f.frames
        )),
        None => Ok(()),
    }
}

fn is_cnp(wire: &[u8]) -> bool {
    Frame::parse(wire, &ParseOptions::default())
        .ok()
        .and_then(|f| f.roce)
        .is_some_and(|p| p.bth.opcode == Opcode::CNP)
}

/// One line about a frame: opcode, PSN, DestQP and the headers that matter.
pub fn describe(wire: &[u8]) -> String {
    match Frame::parse(wire, &ParseOptions::default()) {
        Ok(f) => match f.roce {
            Some(p) => format!(
                "{} psn {} qp {:#x} port {:#06x} ackreq {} {:?}{:?}{:?} {} bytes",
                p.bth.opcode,
                p.bth.psn,
                p.bth.dest_qp,
                f.udp.map_or(0, |u| u.src_port),
                p.bth.ack_req,
                p.ext.aeth,
                p.ext.reth,
                p.ext.atomic_eth,
                p.payload.len()
            ),
            None => format!("a non-RoCE frame of {} bytes", wire.len()),
        },
        Err(e) => format!("an undecodable frame ({e})"),
    }
}

/// [`describe`] with the MP extension headers (MPETH, SACKETH) of an MP
/// frame (traces).
fn describe_mp(wire: &[u8]) -> String {
    let mp = Frame::parse(wire, &ParseOptions::default())
        .ok()
        .and_then(|f| f.roce)
        .filter(|p| p.ext.mpeth.is_some() || p.ext.sacketh.is_some())
        .map(|p| format!(" {:?} {:?}", p.ext.mpeth, p.ext.sacketh))
        .unwrap_or_default();
    format!("{}{mp}", describe(wire))
}

fn state(s: RefState) -> QpState {
    match s {
        RefState::Reset => QpState::Reset,
        RefState::Init => QpState::Init,
        RefState::Rtr => QpState::Rtr,
        RefState::Rts => QpState::Rts,
        RefState::Sqd => QpState::Sqd,
        RefState::Sqe => QpState::Sqe,
        RefState::Err => QpState::Err,
    }
}

fn status(s: metaroce_ref::WcStatus) -> WcStatus {
    use metaroce_ref::WcStatus as R;
    match s {
        R::Success => WcStatus::Success,
        R::LocLenErr => WcStatus::LocLenErr,
        R::LocQpOpErr => WcStatus::LocQpOpErr,
        R::LocProtErr => WcStatus::LocProtErr,
        R::WrFlushErr => WcStatus::WrFlushErr,
        R::BadRespErr => WcStatus::BadRespErr,
        R::RemInvReqErr => WcStatus::RemInvReqErr,
        R::RemAccessErr => WcStatus::RemAccessErr,
        R::RemOpErr => WcStatus::RemOpErr,
        R::RetryExcErr => WcStatus::RetryExcErr,
        R::RnrRetryExcErr => WcStatus::RnrRetryExcErr,
        R::FatalErr | R::GeneralErr => WcStatus::FatalErr,
    }
}

/// The Base responder model of B's RC QP, everything known: attributes,
/// regions with their current bytes, an empty receive queue.
fn responder(pair: &Pair, invalid: &BTreeSet<u32>) -> ResponderState {
    let b = &pair.nodes[B];
    let qpn = b.qpn(Kind::Rc);
    let info = b.dev.query_qp(qpn).ok();
    let a = info.map(|i| i.attrs);
    let access = |x: Access| AccessFlags {
        remote_read: x.contains(Access::REMOTE_READ),
        remote_write: x.contains(Access::REMOTE_WRITE),
        remote_atomic: x.contains(Access::REMOTE_ATOMIC),
        flush_global: false,
        flush_persistent: false,
    };
    let attrs = QpAttributes {
        pmtu: a.and_then(|a| a.pmtu).unwrap_or(pair.pmtu),
        access: Knowledge::Known(access(a.and_then(|a| a.access).unwrap_or(Access::NONE))),
        max_dest_rd_atomic: Knowledge::Known(a.and_then(|a| a.max_dest_rd_atomic).unwrap_or(16)),
        min_rnr_timer: Knowledge::Known(a.and_then(|a| a.min_rnr_timer).unwrap_or(0)),
        dest_qpn: Knowledge::Known(a.and_then(|a| a.dest_qpn).unwrap_or(0)),
        p_key: a.and_then(|a| a.pkey).unwrap_or(0xFFFF),
        pd: 1,
        q_key: Knowledge::Known(a.and_then(|a| a.qkey).unwrap_or(0)),
    };
    let rq_psn = Psn::new(a.and_then(|a| a.rq_psn).unwrap_or(0));
    let mut st = ResponderState::new(QpType::Rc, attrs, REF_FEATURES, rq_psn)
        .with_qp_state(info.map_or(QpState::Reset, |i| state(i.state)));
    for m in b.mrs.iter().filter(|m| !invalid.contains(&m.info.rkey)) {
        let bytes = b
            .dev
            .read_mr(m.info.lkey, m.info.addr, m.info.len)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        st = st.with_region(MemoryRegion::with_contents(
            m.info.rkey,
            1,
            m.info.addr,
            access(m.access),
            bytes,
        ));
    }
    st
}
