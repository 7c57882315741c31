//! `metaroce fuzz`: a live network fuzzer with oracles
//! (conformance/FUZZ.md), against any IUT the harness drives (builtin, raw,
//! pcap).
//!
//! Each batch runs on a freshly reset IUT as one vector ([`batch`]): the
//! fuzz setup, `--batch` stimuli ([`mutate_send_steps`]: mutated seeds from the
//! committed vectors ([`seeds`]) and packets generated from the opcode
//! table), then the oracles ([`oracle`]): completions that should not exist,
//! a liveness probe on a sentinel QP (and on the fuzz QP while the agent
//! says it is RTS), the memory outside the targeted MR and the canaries
//! around every MR. A finding is minimised by replaying parts of its batch
//! ([`minimise`]) and saved as a reproducer vector plus the pcap of the batch
//! ([`export`]). The run is bounded by a packet count and a duration and
//! stops by itself.

pub mod batch;
pub mod export;
pub mod leak;
pub mod minimise;
pub mod mutate_send_steps;
pub mod oracle;
pub mod seeds;

use crate::run::iut::{Endpoint, Iut, IutError};
use crate::run::session::TestBed;
use crate::run::verdict::{TestResult, Verdict};
use crate::vector::model::{SendStep, Vector};
pub use oracle::FindingKind;
use serde_json::{Map, Value};
use std::time::{Duration, Instant};

/// How a fuzz run is bounded and seeded.
#[derive(Clone, Debug)]
pub struct FuzzOptions {
    /// Stop after this many stimuli.
    pub packets: u64,
    /// Stop after this much wall-clock time.
    pub duration: Duration,
    /// Seed of every random choice.
    pub seed: u64,
    /// Stimuli per batch (between two oracle checks).
    pub batch: usize,
    /// Replays a minimisation may spend.
    pub max_replays: usize,
    /// Stop after this many findings.
    pub max_findings: usize,
    /// Extra time for every window on a live IUT (measured when `None`).
    pub margin_ns: Option<u64>,
    /// What one batch (one replay) may cost: spent, it is a HANG finding.
    pub budget: crate::run::budget::Budget,
}

impl Default for FuzzOptions {
    fn default() -> Self {
        FuzzOptions {
            packets: 2_000,
            duration: Duration::from_secs(60),
            seed: 1,
            batch: 8,
            max_replays: 64,
            max_findings: 5,
            margin_ns: None,
            budget: Default::default(),
        }
    }
}

/// One finding, minimised.
#[derive(Clone, Debug)]
pub struct Finding {
    /// Its kind.
    pub kind: FindingKind,
    /// The requirement broken.
    pub requirement: String,
    /// Why, as the oracle saw it.
    pub reason: String,
    /// Stimuli sent before the batch that showed it started, plus that batch's.
    pub after_packets: u64,
    /// The batch as first run.
    pub batch: Vec<SendStep>,
    /// The first PSN of the batch.
    pub rq_psn: u32,
    /// The minimised reproducer vector.
    pub reproducer: Vector,
    /// Replays the minimisation spent.
    pub replays: usize,
    /// The reproducer, run once more on the IUT, FAILed.
    pub reproduced: bool,
    /// The run of the whole batch (its packets are the batch's pcap).
    pub batch_result: TestResult,
    /// The run of the reproducer.
    pub reproducer_result: TestResult,
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The IUT, as its agent and adapter describe it.
    pub iut: String,
    /// Stimuli sent (oracle probes not counted).
    pub packets: u64,
    /// Batches run.
    pub batches: u64,
    /// Batches the test bed could not judge (not findings).
    pub errors: Vec<String>,
    /// Every finding.
    pub findings: Vec<Finding>,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Seconds spent minimising and checking reproducers (not fuzzing).
    pub minimise_seconds: f64,
    /// Seeds taken from the vectors.
    pub seeds: usize,
}

impl Summary {
    /// Stimuli per second of fuzzing (minimisation excluded).
    pub fn packets_per_second(&self) -> f64 {
        let s = (self.seconds - self.minimise_seconds).max(1e-9);
        self.packets as f64 / s
    }

    /// Findings of one kind.
    pub fn count(&self, kind: FindingKind) -> usize {
        self.findings.iter().filter(|f| f.kind == kind).count()
    }
}

/// Progress after each batch: stimuli sent so far, findings so far.
pub type Progress<'a> = dyn FnMut(u64, usize) + 'a;

/// The harness's view of the IUT, from its `hello`.
struct Bed {
    profile: Map<String, Value>,
    iut: Endpoint,
    canaries: bool,
    margin_ns: u64,
    budget: crate::run::budget::Budget,
}

impl Bed {
    /// The same test bed `metaroce run` gives a single vector file with its
    /// default seed (1), so that a reproducer replays as it ran here.
    fn test_bed(&self) -> TestBed {
        TestBed {
            profile: self.profile.clone(),
            iut: self.iut,
            margin_ns: self.margin_ns,
            seed: 1,
            canaries: self.canaries,
            stale_qpns: Default::default(),
            harness_qpn: crate::run::session::harness_qpn(1, &Default::default()),
            budget: self.budget,
        }
    }
}

/// Runs the fuzzer against `iut` with `seeds` until the options' bounds.
pub fn fuzz(
    iut: &mut dyn Iut,
    seeds: Vec<SendStep>,
    options: &FuzzOptions,
    progress: &mut Progress<'_>,
) -> Result<Summary, IutError> {
    let started = Instant::now();
    let (implementation, profile, endpoint, canaries) = crate::run::hello(iut)?;
    let margin_ns = if iut.virtual_time() {
        0
    } else if let Some(m) = options.margin_ns {
        m
    } else {
        crate::run::capability::calibrate(iut)?.margin_ns
    };
    let bed = Bed {
        profile,
        iut: endpoint,
        canaries,
        margin_ns,
        budget: options.budget,
    };
    let mut summary = Summary {
        iut: format!("{implementation} via {}", iut.describe()),
        packets: 0,
        batches: 0,
        errors: Vec::new(),
        findings: Vec::new(),
        seconds: 0.0,
        minimise_seconds: 0.0,
        seeds: seeds.len(),
    };
    let mut generator = mutate_send_steps::Generator::new(seeds, options.seed);
    let batch_size = options.batch.max(1) as u64;
    while summary.packets < options.packets
        && started.elapsed() < options.duration
        && summary.findings.len() < options.max_findings
    {
        let n = batch_size.min(options.packets - summary.packets);
        generator.start_batch();
        // A first PSN anywhere but the last 256 of the space (the probes'
        // `${psn + 2}` is compared unwrapped).
        let rq_psn = generator.rng().below(0xFF_FF00) as u32;
        let sends: Vec<SendStep> = (0..n).map(|_| generator.stimulus()).collect();
        let id = format!("fuzz.batch-{}", summary.batches);
        let vector = batch::batch_vector(&id, &sends, rq_psn, false);
        let judged = oracle::judge(iut, &bed.test_bed(), &vector)?;
        summary.packets += n;
        summary.batches += 1;
        if let Some(e) = judged.error {
            if summary.errors.len() < 100 {
                summary
                    .errors
                    .push(format!("batch {}: {e}", summary.batches - 1));
            }
        } else if let Some((kind, requirement, reason)) = judged.finding.clone() {
            let t = Instant::now();
            let finding = reduce(
                iut,
                &bed,
                options,
                &judged,
                (kind, requirement, reason),
                sends,
                rq_psn,
                summary.packets,
            )?;
            summary.minimise_seconds += t.elapsed().as_secs_f64();
            summary.findings.push(finding);
        }
        progress(summary.packets, summary.findings.len());
    }
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// Minimises a finding and checks its reproducer once more.
#[allow(clippy::too_many_arguments)]
fn reduce(
    iut: &mut dyn Iut,
    bed: &Bed,
    options: &FuzzOptions,
    judged: &oracle::Judgement,
    (kind, requirement, reason): (FindingKind, String, String),
    sends: Vec<SendStep>,
    rq_psn: u32,
    after_packets: u64,
) -> Result<Finding, IutError> {
    let test_bed = bed.test_bed();
    let mut same = |candidate: &[SendStep]| -> Result<bool, IutError> {
        let v = batch::batch_vector("fuzz.minimise", candidate, rq_psn, false);
        let j = oracle::judge(iut, &test_bed, &v)?;
        Ok(j.finding.is_some_and(|(k, _, _)| k == kind))
    };
    let (minimal, replays) = minimise::minimise(&sends, options.max_replays, &mut same)?;
    // The minimal batch once more: which specific checks its reproducer needs.
    let last = oracle::judge(
        iut,
        &test_bed,
        &batch::batch_vector("fuzz.minimal", &minimal, rq_psn, false),
    )?;
    let (fuzz_probe, leak_offsets) = if last.finding.is_some() {
        (last.fuzz_qp_hang, last.leak_offsets)
    } else {
        (judged.fuzz_qp_hang, judged.leak_offsets.clone())
    };
    let extra: Vec<crate::vector::model::Step> = if leak_offsets.is_empty() {
        Vec::new()
    } else {
        vec![leak::expect_no_response(&leak_offsets)]
    };
    let id = export::finding_id(kind, &minimal, rq_psn);
    let reproducer = batch::batch_vector_with(&id, &minimal, rq_psn, fuzz_probe, &extra);
    let reproducer_result =
        crate::run::session::run_test(iut, &test_bed, &reproducer, "reproducer");
    Ok(Finding {
        kind,
        requirement,
        reason,
        after_packets,
        batch: sends,
        rq_psn,
        reproduced: reproducer_result.verdict == Verdict::Fail
            || (kind == FindingKind::Hang
                && reproducer_result.verdict == Verdict::Error
                && reproducer_result
                    .reason
                    .as_deref()
                    .is_some_and(crate::run::budget::is_exceeded)),
        reproducer,
        replays,
        batch_result: judged.result.clone(),
        reproducer_result,
    })
}
