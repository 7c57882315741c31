//! The responder side of one connection: the responder model fed with every
//! request, a queue of the responses it expects (required, optional, and the
//! alternative branches that unknown state allows), and the matching of the
//! observed responses against that queue.
//!
//! Matching rules:
//!
//! - Responses answer requests in request order (MR-READ-4, MR-ACK-3), but
//!   come back late: the requester pipelines. An observed response is given to
//!   the oldest queued request one of whose branches still lacks a response
//!   it fits.
//! - When a response goes to a later request, every older request is retired:
//!   a required response of it that was not observed is a finding, except an
//!   Acknowledge that a later acknowledgement covers (MR-ACK-1: "that packet's
//!   PSN or later"; an ACK may cover several requests).
//! - Unknown state (receive queue, access, memory, resources) gives several
//!   branches; the one whose responses are observed is taken, and the
//!   requests after it are judged again from its state (they are kept for
//!   that). The first AETH seen teaches the MSN the same way.
//! - Responses to requests before the first one observed are not judged.
//!
//! Cost: the failure branches of an in-sequence request (RNR NAK, fatal
//! NAKs, drops) are built only when something depends on them (see
//! `Later`); a response that none of them can take (an ACK, say) rules them
//! all out unbuilt. The findings are those of building every branch at once
//! (`tests/deferred.rs` compares the two).
//!
//! Bounds: at most [`MAX_PENDING`] queued requests per connection; when more
//! arrive with no response, the oldest is retired early, its Acknowledge
//! obligations kept (PSN, frame, requirements only) in a list of at most
//! [`MAX_LOOSE`] entries until a later acknowledgement covers them.

use super::ConversationFinding;
use super::response::{Mismatch, Resp, blame, describe_spec, is_plain_ack};
use crate::Finding;
use crate::model::kept_ext::KeptExt;
use crate::model::responder::{Branch, DeferredFails, Fail, NakState, ResponderState};
use crate::model::{Effect, Outcomes, PacketSpec};
use metaroce_codec::ext::SyndromeKind;
use metaroce_codec::{BthRepr, Msn, Psn, RocePacket};
use std::collections::VecDeque;

/// Most requests queued per connection while their responses are awaited.
pub const MAX_PENDING: usize = 512;

/// Unanswered requests whose other branches a lossy capture tries when a
/// response fits nothing (a bound on the judge's work, not a rule of SPEC.md).
const REINTERPRET_DEPTH: usize = 8;

/// Most Acknowledge obligations kept per connection for requests retired
/// early (beyond [`MAX_PENDING`]); older ones are forgotten unjudged.
pub const MAX_LOOSE: usize = 1024;

/// Most continuation packets one queued run stands for.
const MAX_RUN: u32 = 1024;

/// A request kept for judging again: headers and the payload length (the
/// payload's bytes do not matter to a responder whose memory is unknown).
#[derive(Clone, Debug)]
struct Stored {
    frame: u64,
    timestamp_ns: u64,
    bth: BthRepr,
    ext: KeptExt,
    payload_len: usize,
}

/// One response a branch expects: one of the packets its outcomes list,
/// and what was observed of it.
#[derive(Clone, Debug)]
struct Expect {
    /// Where its spec is: the `at`-th effect of the branch's required
    /// outcomes (`required`) or optional ones, an [`Effect::Send`].
    at: usize,
    reqs: &'static [&'static str],
    required: bool,
    /// Frame of the response observed for it.
    got: Option<u64>,
    /// A later acknowledgement covers it (plain ACKs only).
    covered: bool,
    /// Already reported missing (a later response of the same request showed it skipped).
    reported: bool,
    /// For the optional ACK of a run of continuation packets: the run's
    /// first PSN and length. The ACK may carry any of its PSNs, and any
    /// number of them may come (`spec.psn` is then `Any`).
    run: Option<(Psn, u32)>,
}

impl Expect {
    /// Its spec, in branch `b` (the branch it was listed from).
    fn spec<'b>(&self, b: &'b Branch) -> Option<&'b PacketSpec> {
        let list = if self.required {
            &b.outcomes.required
        } else {
            &b.outcomes.optional
        };
        match list.get(self.at).map(|c| &c.value) {
            Some(Effect::Send(spec)) => Some(spec),
            _ => None,
        }
    }

    fn psn_allows(&self, spec: &PacketSpec, psn: Psn) -> bool {
        match self.run {
            Some((first, n)) => psn.distance(first) < n,
            None => spec.psn.allows(&psn),
        }
    }

    /// Whether response `r` may fill this slot of branch `b`.
    fn takes(&self, b: &Branch, r: &Resp) -> bool {
        (self.got.is_none() || self.run.is_some())
            && self
                .spec(b)
                .is_some_and(|spec| self.psn_allows(spec, r.psn) && r.mismatch(spec).is_none())
    }
}

/// What was observed of one branch of a request's outcome (the branch
/// itself, its state and outcomes, is kept beside it as the model built
/// it: see [`Entry::branches`]).
#[derive(Clone, Debug)]
struct Alt {
    sends: Vec<Expect>,
    /// Every response given to the request fits this branch.
    viable: bool,
    /// Where to look first for the next response.
    cursor: usize,
}

impl Alt {
    /// The expectations of branch `b`'s packets, in a vector from `spare`.
    fn of(b: &Branch, spare: &mut Vec<Vec<Expect>>) -> Alt {
        let mut sends = spare.pop().unwrap_or_default();
        let lists = [(&b.outcomes.required, true), (&b.outcomes.optional, false)];
        for (list, required) in lists {
            for (at, cited) in list.iter().enumerate() {
                if matches!(cited.value, Effect::Send(_)) {
                    sends.push(Expect {
                        at,
                        reqs: cited.reqs,
                        required,
                        got: None,
                        covered: false,
                        reported: false,
                        run: None,
                    });
                }
            }
        }
        Alt {
            sends,
            viable: true,
            cursor: 0,
        }
    }

    /// The slot of branch `b` response `r` fills, looking from the cursor on.
    fn slot(&self, b: &Branch, r: &Resp) -> Option<usize> {
        let n = self.sends.len();
        (0..n)
            .map(|i| (self.cursor + i) % n)
            .find(|&i| self.sends[i].takes(b, r))
    }

    /// Gives `r` to this branch (`b`): fills its slot, or rules it out.
    fn give(&mut self, b: &Branch, r: &Resp) {
        match self.slot(b, r) {
            Some(i) => {
                self.sends[i].got = Some(r.frame);
                self.cursor = i + 1;
            }
            None => self.viable = false,
        }
    }

    fn missing(&self) -> usize {
        self.sends
            .iter()
            .filter(|e| e.required && e.got.is_none() && !e.covered)
            .count()
    }
}

/// Appends branch `b` to `out`, and after it, flattened the same way, the
/// branches of the alternatives its outcomes nest (each from a copy of its
/// state): the order in which [`Entry::best`] prefers them.
fn flatten(mut b: Branch, out: &mut Vec<Branch>) {
    let alternatives = std::mem::take(&mut b.outcomes.alternatives);
    let state = (!alternatives.is_empty()).then(|| b.state.clone());
    out.push(b);
    if let Some(state) = state {
        for outcomes in alternatives {
            flatten(
                Branch {
                    state: state.clone(),
                    outcomes,
                },
                out,
            );
        }
    }
}

/// A queued request with its branches and the responses given to it.
#[derive(Clone, Debug)]
struct Entry {
    req: Stored,
    /// The branches of its outcome as the model built them (kept, not
    /// copied: a branch's responder state and packet specs are some 500
    /// bytes, and moving them into the judge's own types was a quarter of
    /// the judging thread's time on a stream of small requests).
    branches: Vec<Branch>,
    /// What was observed of each branch, by index in `branches`.
    alts: Vec<Alt>,
    chosen: usize,
    observed: Vec<Resp>,
    /// A run of continuation packets (`req` is the first): the frame of
    /// each; empty for a single request.
    run_frames: Vec<u64>,
    /// Failure branches not built yet: they follow `alts`, and are built
    /// ([`Entry::materialize`]) as soon as anything depends on them.
    later: Option<Box<Later>>,
}

/// The failure branches of a request that unknown state makes possible,
/// deferred: each sends at most one packet (a NAK with its syndrome, an RNR
/// NAK, or nothing for a drop), so whether one takes a response, and how many
/// required responses it misses before any, is known without building it.
#[derive(Clone, Debug)]
struct Later {
    fails: DeferredFails,
    /// A response was given to the request, and none of these branches
    /// takes it: they are all not viable (as they would be, built).
    dead: bool,
    /// The MSN taught to the request's branches while deferred.
    learned: Option<Msn>,
}

#[cfg(test)]
thread_local! {
    /// Tests only: build every branch at once (as before branches were
    /// deferred), to compare the findings with and without deferral.
    pub(super) static EAGER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the branch of failure `f` cannot take response `r` (its only
/// packet, if any, carries a syndrome `r` does not).
fn rejects(f: &Fail, r: &Resp) -> bool {
    match f {
        Fail::Drop { .. } => true,
        Fail::Rnr => !r.syndrome.is_some_and(|s| (0x20..=0x3F).contains(&s.0)),
        Fail::Nak { syndrome, .. } => r.syndrome != Some(*syndrome),
        // NAK 0x61, or rxe's positive ACK (MR-RSP-10).
        Fail::InvalidateFailed { .. } => !r.syndrome.is_some_and(|s| {
            s == metaroce_codec::ext::Syndrome::NAK_INVALID_REQUEST || s.0 <= 0x1F
        }),
    }
}

/// Required responses the branch of failure `f` misses before any response:
/// a drop sends nothing, a NAK or RNR NAK is required.
fn least_missing(f: &Fail) -> usize {
    match f {
        Fail::Drop { .. } => 0,
        Fail::Rnr | Fail::Nak { .. } | Fail::InvalidateFailed { .. } => 1,
    }
}

impl Entry {
    /// The first packet of a run of continuation packets: the state after
    /// it, and the optional Acknowledge of MR-ACK-5 for any PSN of the run.
    fn run(req: Stored, state: ResponderState, mut ack: PacketSpec) -> Box<Self> {
        ack.psn = crate::model::Field::Any;
        let frame = req.frame;
        let psn = req.bth.psn;
        const REQS: &[&str] = &["MR-ACK-5"];
        let outcomes = Outcomes::none().allow(REQS, Effect::Send(ack));
        Box::new(Entry {
            req,
            branches: vec![Branch { state, outcomes }],
            alts: vec![Alt {
                sends: vec![Expect {
                    at: 0,
                    reqs: REQS,
                    required: false,
                    got: None,
                    covered: false,
                    reported: false,
                    run: Some((psn, 1)),
                }],
                viable: true,
                cursor: 0,
            }],
            chosen: 0,
            observed: Vec::new(),
            run_frames: vec![frame],
            later: None,
        })
    }

    /// Whether this is a run that the continuation packet `req` (the next
    /// PSN, same opcode) extends.
    fn extends(&self, req: &Stored) -> bool {
        let n = self.run_frames.len() as u32;
        n != 0
            && n < MAX_RUN
            && self.observed.is_empty()
            && self.req.bth.opcode == req.bth.opcode
            && self.req.bth.psn.add(n) == req.bth.psn
            && self.alts.len() == 1
            && self.later.is_none()
            && !self.alts[0].sends.is_empty()
    }

    /// Extends this run ([`Self::extends`]) by `req`, leading to `state`.
    fn extend(&mut self, req: &Stored, state: ResponderState) {
        if let Some(x) = self.alts[0].sends.first_mut() {
            x.run = x.run.map(|(first, n)| (first, n + 1));
        }
        self.branches[0].state = state;
        self.run_frames.push(req.frame);
        self.req.timestamp_ns = req.timestamp_ns;
    }

    /// The requests this entry stands for, one by one.
    fn requests(&self) -> Vec<Stored> {
        if self.run_frames.is_empty() {
            return vec![self.req.clone()];
        }
        self.run_frames
            .iter()
            .enumerate()
            .map(|(i, &frame)| {
                let mut s = self.req.clone();
                s.frame = frame;
                s.bth.psn = self.req.bth.psn.add(i as u32);
                s
            })
            .collect()
    }

    /// A request with its first branches and, deferred, the failure
    /// branches after them ([`ResponderState::branches_deferred`]).
    /// The branches are taken from `first` (left empty); the entry and
    /// the vectors in it are those of a retired request when `spare` has
    /// one, filled field by field (an entry is built and retired at every
    /// packet of a SEND stream: moving a whole one about was measurable).
    fn new(
        req: Stored,
        first: &mut Vec<Branch>,
        later: Option<DeferredFails>,
        spare: &mut Spare,
    ) -> Box<Self> {
        let mut e = match spare.entries.pop() {
            Some(mut e) => {
                e.req = req;
                e.chosen = 0;
                e
            }
            None => Box::new(Entry {
                req,
                branches: Vec::new(),
                alts: Vec::new(),
                chosen: 0,
                observed: Vec::new(),
                run_frames: Vec::new(),
                later: None,
            }),
        };
        let Entry { branches, alts, .. } = &mut *e;
        if first.iter().all(|b| b.outcomes.alternatives.is_empty()) {
            std::mem::swap(branches, first); // both empty but the model's
        } else {
            for b in first.drain(..) {
                flatten(b, branches);
            }
        }
        alts.extend(branches.iter().map(|b| Alt::of(b, &mut spare.sends)));
        e.later = match (later, spare.laters.pop()) {
            (None, kept) => {
                spare.laters.extend(kept);
                None
            }
            (Some(fails), Some(mut kept)) => {
                // Field by field: no whole `Later` built and moved in.
                kept.fails = fails;
                kept.dead = false;
                kept.learned = None;
                Some(kept)
            }
            (Some(fails), None) => Some(Box::new(Later {
                fails,
                dead: false,
                learned: None,
            })),
        };
        #[cfg(test)]
        if EAGER.with(std::cell::Cell::get) {
            e.materialize();
        }
        e.chosen = e.best();
        e
    }

    /// Builds the deferred failure branches, in the state they would be in
    /// had they been built with the others: the responses given so far
    /// replayed, the MSN learnt taught.
    fn materialize(&mut self) {
        let Some(later) = self.later.take() else {
            return;
        };
        // A failure executes nothing: only the request's headers matter.
        let pkt = RocePacket {
            bth: self.req.bth,
            ext: self.req.ext.get(),
            payload: &[],
            pad: &[],
            icrc: [0; 4],
        };
        let from = self.branches.len();
        for b in later.fails.build(&pkt) {
            flatten(b, &mut self.branches);
        }
        for b in &mut self.branches[from..] {
            if let Some(m) = later.learned {
                b.state = b.state.learn_msn(m);
            }
            let mut a = Alt::of(b, &mut Vec::new());
            for r in &self.observed {
                if !a.viable {
                    break;
                }
                a.give(b, r);
            }
            self.alts.push(a);
        }
    }

    /// The built viable branch with the fewest required responses missing
    /// (the first such).
    fn best_built(&self) -> Option<usize> {
        self.alts
            .iter()
            .enumerate()
            .filter(|(_, a)| a.viable)
            .min_by_key(|(i, a)| (a.missing(), *i))
            .map(|(i, _)| i)
    }

    /// The viable branch with the fewest required responses missing (the
    /// first such). Deferred branches come after the built ones, so one of
    /// them is best only when it misses fewer; then they are built.
    fn best(&mut self) -> usize {
        if self.alts.len() == 1 && self.alts[0].viable && self.later.as_ref().is_none_or(|l| l.dead)
        {
            return 0; // the only branch, nothing deferred
        }
        let built = self.best_built();
        let least = self
            .later
            .as_ref()
            .filter(|l| !l.dead)
            .and_then(|l| l.fails.fails().iter().map(least_missing).min());
        if let Some(least) = least
            && built.is_none_or(|i| least < self.alts[i].missing())
        {
            self.materialize();
            return self.best_built().unwrap_or(self.chosen);
        }
        built.unwrap_or(self.chosen)
    }

    /// Whether a deferred branch not known to be non-viable may take `r`.
    fn later_may_take(&self, r: &Resp) -> bool {
        self.later
            .as_ref()
            .is_some_and(|l| !l.dead && !l.fails.fails().iter().all(|f| rejects(f, r)))
    }

    fn fits(&mut self, r: &Resp) -> bool {
        if self.built_fits(r) {
            return true;
        }
        if self.later_may_take(r) {
            self.materialize();
            return self.built_fits(r);
        }
        false
    }

    /// Whether a built viable branch may take `r`.
    fn built_fits(&self, r: &Resp) -> bool {
        self.alts
            .iter()
            .zip(&self.branches)
            .any(|(a, b)| a.viable && a.slot(b, r).is_some())
    }

    /// Gives `r` to this request; returns whether the chosen branch changed.
    fn attribute(&mut self, r: Resp) -> bool {
        if self.later_may_take(&r) {
            self.materialize();
        } else if let Some(l) = self.later.as_mut() {
            l.dead = true; // none takes `r`: not viable
        }
        for (a, b) in self.alts.iter_mut().zip(&self.branches) {
            if a.viable {
                a.give(b, &r);
            }
        }
        self.observed.push(r);
        let before = self.chosen;
        self.chosen = self.best();
        before != self.chosen
    }

    /// The required responses of the chosen branch listed before the one
    /// the response in `frame` answered and not observed: skipped. Marked
    /// reported, and returned with their requirements.
    fn skipped_before(&mut self, frame: u64) -> Vec<(PacketSpec, &'static [&'static str])> {
        let (Some(alt), Some(b)) = (
            self.alts.get_mut(self.chosen),
            self.branches.get(self.chosen),
        ) else {
            return Vec::new();
        };
        let Some(at) = alt.sends.iter().position(|x| x.got == Some(frame)) else {
            return Vec::new();
        };
        let mut skipped = Vec::new();
        for x in alt.sends[..at].iter_mut() {
            if let Some(spec) = x.spec(b)
                && x.required
                && x.got.is_none()
                && !x.covered
                && !x.reported
                && !is_plain_ack(spec)
            {
                x.reported = true;
                skipped.push((spec.clone(), x.reqs));
            }
        }
        skipped
    }

    fn state(&self) -> &ResponderState {
        &self.branches[self.chosen].state
    }
}

/// An Acknowledge obligation of a request retired early.
#[derive(Clone, Copy, Debug)]
struct Loose {
    psn: Psn,
    frame: u64,
    reqs: &'static [&'static str],
}

/// The responder side of one connection.
#[derive(Clone, Debug, Default)]
pub(crate) struct ResponderSide {
    /// The model's state while no request is queued (None until the first
    /// request the model could start from); with requests queued, the state
    /// after them is the newest one's ([`Self::state`]).
    idle: Option<ResponderState>,
    pending: VecDeque<Box<Entry>>,
    loose: VecDeque<Loose>,
    /// PSN of the first request judged: responses before it are not judged.
    first: Option<Psn>,
    /// Requests seen before the model could start (PMTU unknown).
    pub skipped_requests: u64,
    /// Responses not judged (before the first request judged).
    pub unjudged_responses: u64,
    /// Acknowledge obligations forgotten when [`MAX_LOOSE`] overflowed.
    pub forgotten: u64,
    /// PSN of the latest request retired early (beyond [`MAX_PENDING`]).
    retired_early: Option<Psn>,
    /// Responses may be lost before the capture point: a missing one is
    /// information, not a finding.
    lossy: bool,
    /// Frame of the last sequence NAK observed (for MR-NAK-2).
    seq_nak_frame: Option<u64>,
    /// Allocations of retired requests, for the next ones.
    spare: Spare,
}

/// Most vectors (or boxes) of each kind [`Spare`] keeps.
const SPARE: usize = 32;

/// The allocations of retired requests, emptied and kept for the next
/// requests (at most [`SPARE`] of each kind): a request's entry is built
/// and freed at every packet of a SEND stream, and the allocator's work
/// showed in its profile.
#[derive(Clone, Debug, Default)]
struct Spare {
    /// Scratch for a request's first branches (always empty between uses).
    first: Vec<Branch>,
    /// Entries of retired requests, their vectors emptied (the boxes and
    /// the vectors in them are what is reused).
    #[allow(clippy::vec_box)]
    entries: Vec<Box<Entry>>,
    sends: Vec<Vec<Expect>>,
    fails: Vec<Vec<Fail>>,
    /// Boxes of deferred branches (the boxes themselves are what is reused).
    #[allow(clippy::vec_box)]
    laters: Vec<Box<Later>>,
}

impl Spare {
    /// Keeps what `e` allocated.
    fn recycle(&mut self, mut e: Box<Entry>) {
        for a in &mut e.alts {
            keep(&mut self.sends, std::mem::take(&mut a.sends));
        }
        e.alts.clear();
        e.branches.clear();
        e.observed.clear();
        e.run_frames.clear();
        if let Some(mut later) = e.later.take() {
            keep(&mut self.fails, later.fails.take_fails());
            if self.laters.len() < SPARE {
                self.laters.push(later);
            }
        }
        if self.entries.len() < SPARE {
            self.entries.push(e);
        }
    }
}

/// Keeps `v`, emptied, in `pool` unless it is full or `v` allocated nothing.
fn keep<T>(pool: &mut Vec<Vec<T>>, mut v: Vec<T>) {
    if pool.len() < SPARE && v.capacity() > 0 {
        v.clear();
        pool.push(v);
    }
}

/// Findings of the responder side, with the frames they concern.
type Out = Vec<ConversationFinding>;

fn finding(id: &'static str, frames: Vec<u64>, message: String) -> ConversationFinding {
    ConversationFinding {
        finding: Finding::new(id, message),
        frames,
        qpns: Vec::new(),
        connection: None,
    }
}

/// A required response that was not observed: a finding, or information
/// when the capture may have lost it.
fn missing(
    lossy: bool,
    id: &'static str,
    frames: Vec<u64>,
    message: String,
) -> ConversationFinding {
    if !lossy {
        return finding(id, frames, message);
    }
    ConversationFinding {
        finding: Finding::info(id, format!("{message} (lost before the capture point?)")),
        frames,
        qpns: Vec::new(),
        connection: None,
    }
}

/// The requirement a missing response breaks, among those it cites.
fn missing_id(reqs: &'static [&'static str]) -> &'static str {
    [
        "MR-ACK-1",
        "MR-DUP-2",
        "MR-READ-2",
        "MR-ATOM-4",
        "MR-NAK-1",
        "MR-NAK-3",
    ]
    .iter()
    .find_map(|p| reqs.iter().find(|r| *r == p).copied())
    .or_else(|| reqs.first().copied())
    .unwrap_or("MR-ACK-1")
}

impl ResponderSide {
    /// A side that has seen nothing (`lossy`: see [`super::ConversationConfig::lossy`]).
    pub fn new(lossy: bool) -> Self {
        ResponderSide {
            lossy,
            ..ResponderSide::default()
        }
    }

    /// A request arrives. `start` builds the learned state when the model has
    /// not started (None: it cannot start yet).
    pub fn on_request(
        &mut self,
        (frame, timestamp_ns): (u64, u64),
        pkt: &RocePacket<'_>,
        start: impl FnOnce() -> Option<ResponderState>,
        out: &mut Out,
    ) {
        if self.idle.is_none() {
            self.idle = start();
            self.first = self.idle.as_ref().map(|_| pkt.bth.psn);
        }
        if self.idle.is_none() {
            self.skipped_requests += 1;
            return;
        }
        let stored = Stored {
            frame,
            timestamp_ns,
            bth: pkt.bth,
            ext: KeptExt::new(&pkt.ext),
            payload_len: pkt.payload.len(),
        };
        self.admit(stored, pkt, out);
    }

    /// The model's state after every queued request (None until it started).
    fn state(&self) -> Option<&ResponderState> {
        state_of(&self.pending, &self.idle)
    }

    /// Queues request `stored` (packet `pkt`) arriving in the state after the
    /// queued ones. The commonest packet, a Middle continuing a known
    /// message, is judged without the whole model (the same single branch:
    /// its state and an optional ACK), and consecutive ones share one queued
    /// run.
    fn admit(&mut self, stored: Stored, pkt: &RocePacket<'_>, out: &mut Out) {
        let Some(st) = state_of(&self.pending, &self.idle) else {
            return;
        };
        let entry = match st.continuation_state(pkt) {
            Some(next) => {
                if let Some(tail) = self.pending.back_mut()
                    && tail.extends(&stored)
                {
                    tail.extend(&stored, next);
                    return;
                }
                // The run's Acknowledge, built once per run.
                let ack = next.continuation_ack(pkt.bth.psn);
                Entry::run(stored, next, ack)
            }
            None => {
                let mut first = std::mem::take(&mut self.spare.first);
                let fails = self.spare.fails.pop().unwrap_or_default();
                let later = st.branches_deferred_into(pkt, &mut first, fails);
                let e = Entry::new(stored, &mut first, later, &mut self.spare);
                self.spare.first = first;
                e
            }
        };
        self.push(entry, out);
    }

    /// [`Self::admit`] for a request kept without its payload bytes.
    fn admit_stored(&mut self, stored: Stored, out: &mut Out) {
        let zeros = vec![0u8; stored.payload_len];
        let pkt = RocePacket {
            bth: stored.bth,
            ext: stored.ext.get(),
            payload: &zeros,
            pad: &[],
            icrc: [0; 4],
        };
        self.admit(stored.clone(), &pkt, out);
    }

    /// Queues a request, retiring the oldest beyond [`MAX_PENDING`].
    fn push(&mut self, entry: Box<Entry>, out: &mut Out) {
        self.pending.push_back(entry);
        if self.pending.len() > MAX_PENDING
            && let Some(old) = self.pending.pop_front()
        {
            self.retired_early = Some(old.req.bth.psn);
            self.retire(old, None, true, out);
        }
    }

    /// A response of this connection's responder is observed.
    pub fn on_response(&mut self, r: Resp, out: &mut Out) {
        let before_start = self.first.is_none_or(|f| r.psn.is_before(f));
        if self.idle.is_none() || before_start {
            self.unjudged_responses += 1;
            return;
        }
        if r.acknowledges() {
            self.cover(r.psn);
        }
        let seq_nak = r
            .syndrome
            .is_some_and(|s| matches!(s.kind(), SyndromeKind::Nak { code: 0 }));
        let fit = self.pending.iter_mut().position(|e| e.fits(&r));
        let Some(i) = fit.or_else(|| self.reinterpret(&r, out)) else {
            if self.retired_early.is_some_and(|p| !r.psn.is_after(p)) {
                // It may answer a request retired early (beyond MAX_PENDING
                // unanswered ones), whose expectations are gone.
                self.unjudged_responses += 1;
                return;
            }
            self.unexpected(&r, out);
            if seq_nak {
                self.seq_nak_frame = Some(r.frame);
            }
            return;
        };
        if seq_nak {
            self.seq_nak_frame = Some(r.frame);
        }
        for _ in 0..i {
            if let Some(old) = self.pending.pop_front() {
                self.retire(old, Some(r.frame), false, out);
            }
        }
        let Some(head) = self.pending.front_mut() else {
            return;
        };
        let mut changed = head.attribute(r);
        let skipped = head.skipped_before(r.frame);
        let req_frame = head.req.frame;
        let (opcode, psn) = (head.req.bth.opcode, head.req.bth.psn);
        for (spec, reqs) in skipped {
            out.push(missing(
                self.lossy,
                missing_id(reqs),
                vec![req_frame, r.frame],
                format!(
                    "{opcode} (PSN {psn}) needs {}; none was observed before the response in frame {}",
                    describe_spec(&spec),
                    r.frame
                ),
            ));
        }
        let Some(head) = self.pending.front_mut() else {
            return;
        };
        if let Some(m) = r.msn
            && !head.state().msn.is_known()
        {
            learn(head, m);
            changed = true;
        }
        if changed {
            self.rebase(0, out);
        }
    }

    /// The capture ended at `end_ns`: every queued request is retired, but
    /// a request less than `grace_ns` before the end may still be answered
    /// after it, so its missing responses are not judged.
    pub fn finish(&mut self, end_ns: u64, grace_ns: u64, out: &mut Out) {
        while let Some(mut old) = self.pending.pop_front() {
            if self.pending.is_empty() {
                self.idle = Some(old.state().clone());
            }
            if end_ns.saturating_sub(old.req.timestamp_ns) < grace_ns {
                let chosen = old.chosen;
                for x in &mut old.alts[chosen].sends {
                    x.reported = true; // "MR-ACK-1": its deadline is after the end
                }
            }
            self.retire(old, None, false, out);
        }
        for l in self.loose.drain(..) {
            out.push(missing(
                self.lossy,
                missing_id(l.reqs),
                vec![l.frame],
                format!(
                    "no acknowledgement of PSN {} or later was observed for the request in frame {}",
                    l.psn, l.frame
                ),
            ));
        }
    }

    /// The responder took requests this side never saw (a response covers
    /// them: the capture point lost them, or recorded them wrong): what the
    /// queued requests expected rested on that and is withheld; the model
    /// starts again at the next request (its MSN learned again from the
    /// responses), lossy from then on when `lossy`.
    pub fn resync(&mut self, lossy: bool) {
        while let Some(e) = self.pending.pop_front() {
            self.spare.recycle(e);
        }
        self.loose.clear();
        self.idle = None;
        self.first = None;
        self.retired_early = None;
        self.seq_nak_frame = None;
        self.lossy |= lossy;
    }

    /// Queued requests (for the summary and the memory bound).
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// An acknowledgement of `psn` covers the plain-ACK obligations up to it.
    fn cover(&mut self, psn: Psn) {
        for e in &mut self.pending {
            // Deferred NAK branches are no plain-ACK obligations (their
            // syndromes are NAKs); built if one ever were.
            if e.later.as_ref().is_some_and(|l| {
                l.fails
                    .fails()
                    .iter()
                    .any(|f| matches!(f, Fail::Nak { syndrome, .. } if syndrome.0 <= 0x1F))
            }) {
                e.materialize();
            }
            for (a, b) in e.alts.iter_mut().zip(&e.branches) {
                for x in &mut a.sends {
                    if x.required
                        && x.got.is_none()
                        && let Some(spec) = x.spec(b)
                        && is_plain_ack(spec)
                        && let crate::model::Field::Exact(p) = spec.psn
                        && !psn.is_before(p)
                    {
                        x.covered = true;
                    }
                }
            }
        }
        self.loose.retain(|l| psn.is_before(l.psn));
    }

    /// Lossy captures only: a response that fits no queued request may show
    /// that an earlier request whose responses were all lost took another
    /// branch (an RNR NAK instead of execution leaves the MSN where it was).
    /// Tries the other branches of the oldest such requests (at most
    /// [`REINTERPRET_DEPTH`]), re-judging the later ones from each; keeps the
    /// first that lets the response fit and returns where it fits. Failing
    /// that, the MSN learnt so far is forgotten (it may have come from the
    /// replayed response of a duplicate) and learnt again.
    fn reinterpret(&mut self, r: &Resp, out: &mut Out) -> Option<usize> {
        if !self.lossy {
            return None;
        }
        for e in &mut self.pending {
            e.materialize();
        }
        let saved = (self.pending.clone(), self.idle.clone());
        let depth = self.pending.len().min(REINTERPRET_DEPTH);
        for j in 0..depth {
            if !self.pending[j].observed.is_empty() {
                continue;
            }
            for b in 0..self.pending[j].alts.len() {
                if b == saved.0[j].chosen || !self.pending[j].alts[b].viable {
                    continue;
                }
                self.pending[j].chosen = b;
                // Findings of a branch count only if the branch is kept.
                let mut scratch = Out::new();
                self.rebase(j, &mut scratch);
                if let Some(i) = self.pending.iter_mut().position(|e| e.fits(r)) {
                    out.append(&mut scratch);
                    return Some(i);
                }
                (self.pending, self.idle) = saved.clone();
            }
        }
        // The MSN learnt from a response that answered a duplicate (its
        // original's response lost) is the MSN at the replay, not at the
        // original's execution: forget it and learn it again from `r`.
        if depth > 0 {
            for b in &mut self.pending[0].branches {
                b.state.msn = crate::model::Knowledge::Unknown;
            }
            let mut scratch = Out::new();
            self.rebase(0, &mut scratch);
            if let Some(i) = self.pending.iter_mut().position(|e| e.fits(r)) {
                out.append(&mut scratch);
                return Some(i);
            }
            (self.pending, self.idle) = saved;
        }
        None
    }

    /// Judges the queued requests from `idx + 1` on again from the state
    /// after request `idx`'s chosen branch (a run is judged packet by
    /// packet again, and may become several entries).
    fn rebase(&mut self, idx: usize, out: &mut Out) {
        if idx >= self.pending.len() {
            return;
        }
        let tail: Vec<Box<Entry>> = self.pending.drain(idx + 1..).collect();
        for e in tail {
            let start = self.pending.len();
            for s in e.requests() {
                self.admit_stored(s, out);
            }
            let start = start.min(self.pending.len());
            for r in e.observed {
                let at = (start..self.pending.len())
                    .find(|&i| self.pending[i].fits(&r))
                    .unwrap_or(start);
                if let Some(fresh) = self.pending.get_mut(at) {
                    fresh.attribute(r);
                }
            }
        }
    }

    /// A queued request leaves the queue: its missing required responses are
    /// findings (`by`: the later response that shows they were skipped).
    fn retire(&mut self, mut e: Box<Entry>, by: Option<u64>, early: bool, out: &mut Out) {
        let best = e.best();
        let (Some(alt), Some(b)) = (e.alts.get(best), e.branches.get(best)) else {
            self.spare.recycle(e);
            return;
        };
        for (x, spec) in alt
            .sends
            .iter()
            .filter(|x| x.required && x.got.is_none() && !x.covered && !x.reported)
            .filter_map(|x| Some((x, x.spec(b)?)))
        {
            if is_plain_ack(spec)
                && early
                && let crate::model::Field::Exact(psn) = spec.psn
            {
                if self.loose.len() >= MAX_LOOSE {
                    self.loose.pop_front();
                    self.forgotten += 1;
                }
                self.loose.push_back(Loose {
                    psn,
                    frame: e.req.frame,
                    reqs: x.reqs,
                });
                continue;
            }
            let mut frames = vec![e.req.frame];
            let when = match by {
                Some(f) => {
                    frames.push(f);
                    format!(" before the response in frame {f}")
                }
                None if early => format!(" within {MAX_PENDING} later requests"),
                None => " by the end of the capture".to_string(),
            };
            out.push(missing(
                self.lossy,
                missing_id(x.reqs),
                frames,
                format!(
                    "{} (PSN {}) needs {}; none was observed{when}",
                    e.req.bth.opcode,
                    e.req.bth.psn,
                    describe_spec(spec)
                ),
            ));
        }
        self.spare.recycle(e);
    }

    /// A response that fits no queued request.
    fn unexpected(&mut self, r: &Resp, out: &mut Out) {
        for e in &mut self.pending {
            e.materialize(); // every expectation is a candidate below
        }
        if let Some(st) = self.state()
            && st.nak == NakState::Sequence
            && r.syndrome
                .is_some_and(|s| matches!(s.kind(), SyndromeKind::Nak { code: 0 }))
        {
            let mut frames = vec![r.frame];
            frames.extend(self.seq_nak_frame);
            out.push(finding(
                "MR-NAK-2",
                frames,
                format!(
                    "{} is a second sequence NAK before the expected PSN {} was executed",
                    r.describe(),
                    st.epsn
                ),
            ));
            return;
        }
        if let Some(st) = self.state() {
            let last = st.epsn.sub(1);
            if r.acknowledges() && r.psn.is_after(last) {
                out.push(finding(
                    "MR-ACK-4",
                    vec![r.frame],
                    format!(
                        "{} acknowledges a PSN not executed (last executed PSN {last})",
                        r.describe()
                    ),
                ));
                return;
            }
        }
        // The nearest expectation: an unanswered response with the same PSN
        // and opcode, else the same PSN, else the same opcode, else the first
        // required one of a chosen branch.
        let score = |chosen: bool, x: &Expect, spec: &PacketSpec| -> u8 {
            let psn = x.psn_allows(spec, r.psn);
            let op = spec.opcode.allows(&r.opcode);
            match (psn, op) {
                (true, true) => 4,
                (true, false) => 3,
                (false, true) => 2,
                _ if chosen && x.required => 1,
                _ => 0,
            }
        };
        let mut best: Option<(u8, &Entry, &Expect, &PacketSpec)> = None;
        for e in &self.pending {
            for (i, (alt, b)) in e.alts.iter().zip(&e.branches).enumerate() {
                for x in alt.sends.iter().filter(|x| x.got.is_none()) {
                    let Some(spec) = x.spec(b) else { continue };
                    let sc = score(i == e.chosen, x, spec);
                    if sc > 0 && best.is_none_or(|(s, ..)| sc > s) {
                        best = Some((sc, e, x, spec));
                    }
                }
            }
        }
        let near = best.map(|(_, e, x, spec)| (e, x, spec));
        if let Some((e, x, spec)) = near {
            let field = r.mismatch(spec).unwrap_or(Mismatch::Opcode);
            out.push(finding(
                blame(x.reqs, field),
                vec![r.frame, e.req.frame],
                format!(
                    "{} fits no expected response; the request in frame {} expects {} ({:?} differs; cites {})",
                    r.describe(),
                    e.req.frame,
                    describe_spec(spec),
                    field,
                    x.reqs.join(", ")
                ),
            ));
            return;
        }
        let Some(st) = self.state() else {
            return;
        };
        out.push(finding(
            "MR-ACK-3",
            vec![r.frame],
            format!(
                "{} answers no request (expected PSN {}, last executed {})",
                r.describe(),
                st.epsn,
                st.epsn.sub(1)
            ),
        ));
    }
}

/// The state after the requests `pending`, or `idle` when none is queued.
fn state_of<'a>(
    pending: &'a VecDeque<Box<Entry>>,
    idle: &'a Option<ResponderState>,
) -> Option<&'a ResponderState> {
    match pending.back() {
        Some(e) => Some(e.state()),
        None => idle.as_ref(),
    }
}

/// Teaches every branch of `e` the MSN `m` its response carried.
fn learn(e: &mut Entry, m: Msn) {
    for b in &mut e.branches {
        b.state = b.state.learn_msn(m);
    }
    if let Some(l) = e.later.as_mut() {
        // Deferred branches learn it when built (a later MSN would not
        // change a known one).
        l.learned.get_or_insert(m);
    }
}
