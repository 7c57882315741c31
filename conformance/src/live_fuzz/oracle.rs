//! Judging one batch (conformance/FUZZ.md): run its vector (see [`super::batch`] for
//! the oracle steps and what each finds); if every step passed, look for READ
//! responses to out-of-range READs ([`super::leak`]), then, if the agent says
//! the fuzz QP is still RTS, probe the fuzz QP itself.

use super::batch::{self, PROBE_WITHIN_US};
use crate::run::context::Context;
use crate::run::iut::{Iut, IutError};
use crate::run::matching::{check_fields, frame_view};
use crate::run::packet::build;
use crate::run::session::{TestBed, run_test_with_context};
use crate::run::verdict::{TestResult, Verdict};
use crate::vector::model::{ExpectStep, Step, Vector};
use serde::Serialize;
use serde_json::{Value, json};
use std::fmt;

/// What kind of bug a finding shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum FindingKind {
    /// A liveness probe failed (sentinel QP, or the fuzz QP while RTS).
    Hang,
    /// Memory outside the targeted MR changed (canaries, the `ro` MR).
    Memory,
    /// A completion that should not exist.
    Completion,
}

impl FindingKind {
    /// Every kind, in report order.
    pub const ALL: [FindingKind; 3] = [
        FindingKind::Hang,
        FindingKind::Memory,
        FindingKind::Completion,
    ];

    /// The name reports use.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::Hang => "HANG",
            FindingKind::Memory => "MEMORY",
            FindingKind::Completion => "COMPLETION",
        }
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The outcome of one batch.
#[derive(Clone, Debug)]
pub struct Judgement {
    /// The finding, with the requirement broken and why.
    pub finding: Option<(FindingKind, String, String)>,
    /// The fuzz QP probe ran and failed (its steps belong in the reproducer).
    pub fuzz_qp_hang: bool,
    /// PSN offsets of out-of-range READs answered with data ([`super::leak`]).
    pub leak_offsets: Vec<u32>,
    /// The session's result (its packets are the batch's pcap).
    pub result: TestResult,
    /// The batch could not be judged (the test bed failed, or a stimulus
    /// could not be built): not a finding.
    pub error: Option<String>,
}

/// Runs `vector` (a batch without the fuzz QP probe) and judges it.
pub fn judge(iut: &mut dyn Iut, bed: &TestBed, vector: &Vector) -> Result<Judgement, IutError> {
    let (mut result, ctx) = run_test_with_context(iut, bed, vector, "fuzz batch");
    let mut j = Judgement {
        finding: None,
        fuzz_qp_hang: false,
        leak_offsets: Vec::new(),
        result: result.clone(),
        error: None,
    };
    match result.verdict {
        Verdict::Fail | Verdict::PassNonstrict => {
            let failed = result.steps.iter().rev().find(|s| !s.ok);
            let kind = match failed.map(|s| s.kind.as_str()) {
                Some("canaries" | "expect_memory") => FindingKind::Memory,
                Some("expect_no_completion") => FindingKind::Completion,
                _ => FindingKind::Hang,
            };
            let requirement = result.failed_requirement.clone().unwrap_or_default();
            let reason = result.reason.clone().unwrap_or_default();
            j.finding = Some((kind, requirement, reason));
        }
        // A spent budget is the IUT's doing (a livelock, a wedge, a flood):
        // a HANG finding, minimised like the others.
        Verdict::Error
            if result
                .reason
                .as_deref()
                .is_some_and(crate::run::budget::is_exceeded) =>
        {
            let reason = result.reason.clone().unwrap_or_default();
            j.finding = Some((FindingKind::Hang, "MR-ROB-7".into(), reason));
        }
        Verdict::Error | Verdict::Inconc => {
            j.error = Some(result.reason.clone().unwrap_or_default());
        }
        _ => {
            if let Some(ctx) = &ctx
                && let Some((offsets, reason)) = super::leak::leaks(&result, ctx)
            {
                j.finding = Some((FindingKind::Memory, "MR-SEC-6".into(), reason));
                j.leak_offsets = offsets;
            } else if let Some(ctx) = ctx
                && let Some(reason) = probe_fuzz_qp(iut, bed, &ctx, &mut result)?
            {
                j.finding = Some((FindingKind::Hang, "MR-ROB-7".into(), reason));
                j.fuzz_qp_hang = true;
                j.result = result;
            }
        }
    }
    Ok(j)
}

/// When the agent reports the fuzz QP in RTS, sends the duplicate WRITE of
/// [`batch::fuzz_qp_probe`] and waits for its ACK. Returns why the probe
/// failed, or `None` (alive, or not RTS: a QP in ERR owes no answer).
fn probe_fuzz_qp(
    iut: &mut dyn Iut,
    bed: &TestBed,
    ctx: &Context,
    result: &mut TestResult,
) -> Result<Option<String>, IutError> {
    let reply = iut.agent(json!({"op": "query_qp", "qpn": ctx.iut_qpn}))?;
    let state = reply.get("state").and_then(Value::as_str).unwrap_or("");
    if !state.eq_ignore_ascii_case("rts") {
        return Ok(None);
    }
    let Step::Send(send) = batch::probe_send_step() else {
        return Ok(None);
    };
    let expect: ExpectStep = serde_json::from_value(batch::probe_expect_json())
        .map_err(|e| IutError(format!("fuzz QP probe: {e}")))?;
    let frame = build(&send, ctx).map_err(|e| IutError(format!("fuzz QP probe: {e}")))?;
    // Whatever the batch left unread is not the probe's answer.
    iut.drain()?;
    iut.send(&frame)?;
    let deadline = iut
        .now_ns()
        .saturating_add(PROBE_WITHIN_US * 1_000)
        .saturating_add(bed.margin_ns);
    let record = |result: &mut TestResult, dir, at, bytes: &[u8], note: &str| {
        let view = frame_view(bytes);
        result.packets.push(crate::run::verdict::PacketRecord {
            at_ns: at,
            direction: dir,
            step: None,
            summary: crate::run::matching::summary(&view),
            note: note.into(),
            bytes: bytes.to_vec(),
        });
    };
    let sent_at = iut.now_ns().saturating_sub(ctx.start_ns);
    record(
        result,
        crate::run::verdict::Direction::Sent,
        sent_at,
        &frame,
        "liveness probe: duplicate WRITE on the fuzz QP",
    );
    while let Some(o) = iut.recv(deadline)? {
        let view = frame_view(&o.bytes);
        let at = o.at_ns.saturating_sub(ctx.start_ns);
        if check_fields(&view, &expect.fields, ctx).is_ok() {
            record(
                result,
                crate::run::verdict::Direction::Received,
                at,
                &o.bytes,
                "fuzz QP probe answered",
            );
            return Ok(None);
        }
        record(
            result,
            crate::run::verdict::Direction::Received,
            at,
            &o.bytes,
            "not the probe's answer",
        );
    }
    Ok(Some(format!(
        "the agent reports the fuzz QP {:#08x} in RTS, but a duplicate WRITE with AckReq drew no ACK within {PROBE_WITHIN_US} µs (MR-DUP-2, MR-ROB-7)",
        ctx.iut_qpn
    )))
}
