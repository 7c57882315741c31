//! Running one vector against an IUT: setup through the agent, the steps,
//! and the verdict.

use super::context::{Context, MrHandle};
use super::iut::{Iut, IutError, Observed};
use super::matching::{check_fields, frame_view, lookup, summary};
use super::packet::{build, bytes, num};
use super::verdict::{Direction, PacketRecord, StepRecord, TestResult, Verdict};
use crate::vector::hex;
use crate::vector::model::{
    CompletionStep, ExpectNoneStep, ExpectStep, MemoryStep, ModifyQpStep, PostSendStep, Profile,
    RecvSetup, Refusal, Role, Sge, Step, Vector,
};
use metaroce_agent::rng::SplitMix64;
use metaroce_spec::requirements::{self, Keyword};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

mod observe;
mod setup;
mod steps;

/// The longest window a step may have (µs): §10.3's longest timer,
/// `mp_retire_hold_max` (10 s), with room for a few of them.
const MAX_WINDOW_US: u64 = 60_000_000;

/// Why a test stopped early.
enum Stop {
    /// The IUT broke the step's requirement.
    Fail { requirement: String, reason: String },
    /// A precondition was not reached.
    Inconc(String),
    /// The test bed failed.
    Error(String),
}

impl From<IutError> for Stop {
    fn from(e: IutError) -> Self {
        Stop::Error(e.0)
    }
}

/// What the runner knows about the IUT before a test.
#[derive(Clone, Debug)]
pub struct TestBed {
    /// The capability profile (the agent's `hello.profile`, possibly
    /// overridden by the user's profile file).
    pub profile: Map<String, Value>,
    /// The IUT's data-plane addresses.
    pub iut: super::iut::Endpoint,
    /// Extra time added to every window (0 on virtual time).
    pub margin_ns: u64,
    /// Seed of this test's random choices (harness QPN, PSNs).
    pub seed: u64,
    /// The agent places canary bytes around MRs (`read_canary` in its ops).
    pub canaries: bool,
    /// The harness QPNs of earlier tests: a late packet to one of them is
    /// ignored (on a live link packets of the previous test may still be in
    /// flight when the next begins).
    pub stale_qpns: std::collections::BTreeSet<u32>,
    /// The harness's first QPN in this test (the second is one more): the
    /// IUT's `dest_qpn`. Distinct from every earlier test's.
    pub harness_qpn: u32,
    /// What this test may cost (docs/budgets.md): spent, it ends as ERROR.
    pub budget: super::budget::Budget,
}

/// Canary bytes on each side of every MR the setup registers.
pub const CANARY_LEN: u64 = 64;
/// Their value.
pub const CANARY_FILL: u8 = 0xA5;

/// A harness QPN for a test with this seed that none of `stale` uses (nor
/// its successor, the second QP's).
pub fn harness_qpn(seed: u64, stale: &std::collections::BTreeSet<u32>) -> u32 {
    let mut rng = SplitMix64::new(seed ^ 0x5EED_0F0F_4A55_0001);
    loop {
        let q = ((rng.next_u64() & 0xFF_FFFE) | 0x10) as u32;
        if !stale.contains(&q) && !stale.contains(&(q + 1)) {
            return q;
        }
    }
}

/// Runs one vector. `file` is how reports name it.
pub fn run_test(iut: &mut dyn Iut, bed: &TestBed, vector: &Vector, file: &str) -> TestResult {
    run_test_with_context(iut, bed, vector, file).0
}

/// Runs one vector and also returns what its setup made (QPs, MRs,
/// bindings; `None` when the setup did not finish), for a caller that goes
/// on talking to the IUT afterwards (`metaroce fuzz`'s oracles).
pub fn run_test_with_context(
    iut: &mut dyn Iut,
    bed: &TestBed,
    vector: &Vector,
    file: &str,
) -> (TestResult, Option<Context>) {
    let started = Instant::now();
    let mut metered = super::budget::Metered::start(iut, bed.budget);
    let mut t = Test {
        iut: &mut metered,
        bed,
        vector,
        packets: Vec::new(),
        steps: Vec::new(),
        pending: VecDeque::new(),
        step: None,
        ctx: None,
        start_ns: 0,
        deregistered: Default::default(),
        step_anchors: BTreeMap::new(),
        quiet_end: None,
        gave_up: None,
        late: None,
    };
    let outcome = match (t.run(), &t.gave_up) {
        (
            Err(Stop::Fail {
                requirement,
                reason,
            }),
            Some(why),
        ) => Err(Stop::Inconc(format!(
            "{why}; a later step could not be judged ({requirement}: {reason})"
        ))),
        (outcome, _) => outcome,
    };
    // A match later than an `expect.late` bound, in a test that otherwise
    // passed.
    let outcome = match (outcome, t.late.take()) {
        (Ok(()), Some((requirement, reason))) => Err(Stop::Fail {
            requirement,
            reason,
        }),
        (outcome, _) => outcome,
    };
    let (verdict, reason, failed_requirement) = match outcome {
        Ok(()) => (Verdict::Pass, None, None),
        Err(Stop::Fail {
            requirement,
            reason,
        }) => {
            let soft = requirements::get(&requirement).is_some_and(|r| {
                matches!(
                    r.keyword,
                    Keyword::Should | Keyword::ShouldNot | Keyword::May
                )
            });
            let verdict = if soft {
                Verdict::PassNonstrict
            } else {
                Verdict::Fail
            };
            (verdict, Some(reason), Some(requirement))
        }
        Err(Stop::Inconc(reason)) => (Verdict::Inconc, Some(reason), None),
        Err(Stop::Error(reason)) => (Verdict::Error, Some(reason), None),
    };
    let Test {
        packets,
        steps,
        ctx,
        ..
    } = t;
    let result = TestResult {
        verdict,
        reason,
        failed_requirement,
        duration_us: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
        steps,
        packets,
        ..result_of(vector, file)
    };
    (result, ctx)
}

/// The capability keys a vector needs that the profile lacks. A key written
/// `!KEY` needs the feature declared absent (false or 0): tests of how an
/// implementation treats packets of a feature it lacks (MR-PICS-3).
pub fn missing_capabilities(vector: &Vector, profile: &Map<String, Value>) -> Vec<String> {
    let mut needs: Vec<&str> = vector.needs.iter().map(String::as_str).collect();
    if vector.profile == Profile::Mp {
        needs.push("mp");
    }
    let declared = |k: &str| match profile.get(k) {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_u64() != Some(0),
        Some(_) => true,
        None => false,
    };
    // `!key`: the test applies only when the profile declares `key` absent
    // (for requirements on an implementation *without* a feature, such as
    // MR-CRD-1).
    needs
        .into_iter()
        .filter(|k| match k.strip_prefix('!') {
            Some(absent) => declared(absent),
            None => !declared(k),
        })
        .map(String::from)
        .collect()
}

struct Test<'a> {
    iut: &'a mut dyn Iut,
    bed: &'a TestBed,
    vector: &'a Vector,
    packets: Vec<PacketRecord>,
    steps: Vec<StepRecord>,
    /// Frames received and not yet judged.
    pending: VecDeque<Observed>,
    step: Option<usize>,
    ctx: Option<Context>,
    start_ns: u64,
    /// MRs a `dereg_mr` step removed: their canaries are gone with them.
    deregistered: std::collections::BTreeSet<String>,
    /// When a frame of each `send` or matching `expect` step passed the
    /// harness (just before it sent it, or when it arrived), by step index;
    /// the last entry is the latest frame of the exchange (`anchor`). A
    /// quiet window that bounds a timer from below starts there, not when
    /// the harness reaches that step (D2); `expect_none.from_step` names
    /// an earlier one.
    step_anchors: BTreeMap<usize, u64>,
    /// On a live IUT, a lower-bound quiet window (its step, and its end
    /// before the margin shrank it): the next step's window runs from that
    /// end, so the timer's upper side keeps the margin too.
    quiet_end: Option<(usize, u64)>,
    /// Set when an `expect_no_completion` step saw the IUT give up with
    /// RETRY_EXC_ERR (its own retry budget ran out, which the step's
    /// frame did not cause): a later FAIL is INCONC, since the QP is in
    /// the error state for a reason the vector did not intend (D3).
    gave_up: Option<String>,
    /// The first `expect` whose packet matched after its `late` bound: the
    /// requirement it falls short of and why, judged once the test has
    /// otherwise passed.
    late: Option<(String, String)>,
}

fn agent_ok(reply: Value, what: &str) -> Result<Map<String, Value>, String> {
    match reply {
        Value::Object(map) if map.get("ok") == Some(&Value::Bool(true)) => Ok(map),
        Value::Object(map) => {
            let err = map.get("error").cloned().unwrap_or(Value::Null);
            Err(format!(
                "{what}: the agent refused: {} ({})",
                err.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message"),
                err.get("code").and_then(Value::as_str).unwrap_or("no code"),
            ))
        }
        other => Err(format!(
            "{what}: the agent's reply is not an object: {other}"
        )),
    }
}

fn field_u64(map: &Map<String, Value>, key: &str, what: &str) -> Result<u64, Stop> {
    map.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| Stop::Error(format!("{what}: the agent's reply has no `{key}`")))
}

/// Microseconds → the agent's milliseconds, rounded up, at least 1.
fn wait_ms(ns: u64) -> u64 {
    ns.div_ceil(1_000_000).clamp(1, 10_000)
}

impl Test<'_> {
    fn ctx(&self) -> &Context {
        self.ctx.as_ref().expect("setup made the context")
    }

    fn blame(&self, narrower: &Option<String>) -> String {
        narrower
            .clone()
            .unwrap_or_else(|| self.vector.requirements[0].clone())
    }

    fn fail(&self, narrower: &Option<String>, reason: String) -> Stop {
        Stop::Fail {
            requirement: self.blame(narrower),
            reason,
        }
    }

    /// An agent request during setup: a refusal is INCONC.
    fn setup_call(&mut self, request: Value, what: &str) -> Result<Map<String, Value>, Stop> {
        let reply = self.iut.agent(request)?;
        agent_ok(reply, what).map_err(Stop::Inconc)
    }

    fn log(&mut self, direction: Direction, at_ns: u64, bytes: &[u8], note: String) {
        let view = frame_view(bytes);
        self.packets.push(PacketRecord {
            at_ns: at_ns.saturating_sub(self.start_ns),
            direction,
            step: self.step,
            summary: summary(&view),
            note,
            bytes: bytes.to_vec(),
        });
    }

    fn record(&mut self, kind: &'static str, ok: bool, detail: String) {
        self.steps.push(StepRecord {
            index: self.step.unwrap_or(0),
            kind: kind.into(),
            ok,
            detail,
        });
    }

    /// The frame of the current step passed the harness at `at_ns`.
    fn set_anchor(&mut self, at_ns: u64) {
        if let Some(i) = self.step {
            self.step_anchors.insert(i, at_ns);
        }
    }

    /// The step that set the latest anchor, and the anchor.
    fn anchor(&self) -> Option<(usize, u64)> {
        self.step_anchors.last_key_value().map(|(&i, &t)| (i, t))
    }

    /// A step's window in µs: its number, or its expression evaluated with
    /// the names bound so far (`${profile.mp_rto_init}` among them).
    fn window_us(&self, within: &crate::vector::model::Num) -> Result<u64, Stop> {
        let us = num(within, self.ctx()).map_err(|e| Stop::Error(format!("within_us: {e}")))?;
        if us > MAX_WINDOW_US {
            return Err(Stop::Error(format!(
                "within_us: {us} µs is more than the {MAX_WINDOW_US} µs a window may last"
            )));
        }
        Ok(us)
    }

    fn deadline(&self, within_us: u64) -> u64 {
        let now = self.iut.now_ns();
        let from = match (self.quiet_end, self.step) {
            (Some((q, end)), Some(i)) if i == q + 1 => now.max(end),
            _ => now,
        };
        from.saturating_add(within_us.saturating_mul(1_000))
            .saturating_add(self.bed.margin_ns)
    }

    fn run(&mut self) -> Result<(), Stop> {
        let stale = self.iut.drain()?;
        drop(stale);
        self.setup()?;
        for (i, step) in self.vector.steps.iter().enumerate() {
            self.step = Some(i);
            self.run_step(step)?;
        }
        self.step = None;
        if self.bed.canaries {
            self.check_canaries()?;
        }
        // What arrived after the last step is kept in the log, unjudged.
        let rest: Vec<Observed> = self.pending.drain(..).collect();
        for o in rest {
            self.log(
                Direction::Received,
                o.at_ns,
                &o.bytes,
                "after the last step (not judged)".into(),
            );
        }
        Ok(())
    }
}

fn mac_text(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The result of a test whose precondition the test bed cannot meet.
pub fn inconclusive(vector: &Vector, file: &str, reason: String) -> TestResult {
    let mut r = unsupported(vector, file, &[]);
    r.verdict = Verdict::Inconc;
    r.reason = Some(reason);
    r
}

/// The result of a test the IUT's profile rules out.
pub fn unsupported(vector: &Vector, file: &str, missing: &[String]) -> TestResult {
    TestResult {
        verdict: Verdict::Unsupported,
        reason: Some(
            missing
                .iter()
                .map(|k| match k.strip_prefix('!') {
                    Some(present) => format!("the capability profile declares {present} present"),
                    None => format!("the capability profile declares {k} absent"),
                })
                .collect::<Vec<_>>()
                .join("; "),
        ),
        ..result_of(vector, file)
    }
}

/// A vector's result before it runs: its identity, no verdict reason, no
/// steps, one attempt (the verdict field is a placeholder the caller sets).
fn result_of(vector: &Vector, file: &str) -> TestResult {
    TestResult {
        id: vector.id.clone(),
        title: vector.title.clone(),
        file: file.to_string(),
        requirements: vector.requirements.clone(),
        profile: match vector.profile {
            Profile::Base => "base",
            Profile::Mp => "mp",
        }
        .into(),
        role: match vector.role {
            Role::Requester => "requester",
            Role::Responder => "responder",
            Role::Peer => "peer",
        }
        .into(),
        area: TestResult::area_of(&vector.requirements[0]),
        verdict: Verdict::Inconc,
        reason: None,
        failed_requirement: None,
        duration_us: 0,
        attempts: 1,
        steps: Vec::new(),
        packets: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::missing_capabilities;
    use crate::vector::model::Vector;
    use serde_json::{Map, Value, json};

    fn vector(needs: &[&str]) -> Vector {
        serde_json::from_value(json!({
            "id": "t", "title": "t", "requirements": ["MR-CRD-1"], "profile": "base",
            "role": "requester", "needs": needs, "steps": [{"wait": {"within_us": 1}}]
        }))
        .expect("a valid vector")
    }

    fn profile(credits: bool) -> Map<String, Value> {
        let mut p = Map::new();
        p.insert("credits".into(), Value::Bool(credits));
        p.insert("atomics".into(), Value::Bool(true));
        p
    }

    #[test]
    fn negated_need_applies_only_when_the_key_is_false() {
        assert!(missing_capabilities(&vector(&["!credits"]), &profile(false)).is_empty());
        assert_eq!(
            missing_capabilities(&vector(&["!credits"]), &profile(true)),
            ["!credits"]
        );
        assert_eq!(
            missing_capabilities(&vector(&["credits", "atomics"]), &profile(false)),
            ["credits"]
        );
        // A key the profile does not give counts as absent (false).
        assert!(missing_capabilities(&vector(&["!flush"]), &profile(true)).is_empty());
        assert_eq!(
            missing_capabilities(&vector(&["flush"]), &profile(true)),
            ["flush"]
        );
    }
}
