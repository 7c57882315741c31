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
use metaroce_spec::requirements::{self, Keyword};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

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
}

/// Canary bytes on each side of every MR the setup registers.
pub const CANARY_LEN: u64 = 64;
/// Their value.
pub const CANARY_FILL: u8 = 0xA5;

/// A tiny deterministic generator for the harness's own choices.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A harness QPN for a test with this seed that none of `stale` uses (nor
/// its successor, the second QP's).
pub fn harness_qpn(seed: u64, stale: &std::collections::BTreeSet<u32>) -> u32 {
    let mut rng = SplitMix(seed ^ 0x5EED_0F0F_4A55_0001);
    loop {
        let q = ((rng.next() & 0xFF_FFFE) | 0x10) as u32;
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
    let mut t = Test {
        iut,
        bed,
        vector,
        packets: Vec::new(),
        steps: Vec::new(),
        pending: VecDeque::new(),
        step: None,
        ctx: None,
        start_ns: 0,
        deregistered: Default::default(),
    };
    let outcome = t.run();
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
        verdict,
        reason,
        failed_requirement,
        duration_us: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
        attempts: 1,
        steps,
        packets,
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

    fn deadline(&self, within_us: u64) -> u64 {
        self.iut
            .now_ns()
            .saturating_add(within_us.saturating_mul(1_000))
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

    fn setup(&mut self) -> Result<(), Stop> {
        let v = self.vector;
        let q = &v.setup.qp;
        let mut rng = SplitMix(self.bed.seed);
        self.setup_call(json!({"op": "reset"}), "reset")?;
        let pd = field_u64(
            &self.setup_call(json!({"op": "alloc_pd"}), "alloc_pd")?,
            "pd",
            "alloc_pd",
        )?;
        let cq = field_u64(
            &self.setup_call(json!({"op": "create_cq"}), "create_cq")?,
            "cq",
            "create_cq",
        )?;
        let mut mrs = BTreeMap::new();
        let mut bindings = crate::vector::expr::Bindings::default();
        let mut other_pd = None;
        for mr in &v.setup.mrs {
            let mr_pd = if mr.other_pd {
                match other_pd {
                    Some(p) => p,
                    None => {
                        let p = field_u64(
                            &self.setup_call(json!({"op": "alloc_pd"}), "alloc_pd (second PD)")?,
                            "pd",
                            "alloc_pd",
                        )?;
                        other_pd = Some(p);
                        p
                    }
                }
            } else {
                pd
            };
            let mut req = json!({"op": "reg_mr", "pd": mr_pd, "length": mr.length,
                "access": mr.access, "fill": mr.fill});
            if self.bed.canaries {
                req["canary_len"] = CANARY_LEN.into();
                req["canary_fill"] = CANARY_FILL.into();
            }
            if let Some(content) = &mr.content {
                let ctx0 = Context {
                    bindings: bindings.clone(),
                    harness: self.iut.harness(),
                    iut: self.bed.iut,
                    iut_qpn: 0,
                    iut_qpn2: 0,
                    cq,
                    udp_sport: 0,
                    p_key: q.p_key,
                    traffic_class: 0,
                    mrs: BTreeMap::new(),
                    start_ns: 0,
                    margin_ns: 0,
                    counters_at_start: BTreeMap::new(),
                    rtr_attrs: Map::new(),
                };
                let data = bytes(content, &ctx0)
                    .map_err(|e| Stop::Error(format!("setup.mrs.{}: {e}", mr.name)))?;
                req["hex"] = Value::String(hex::encode(&data));
            }
            let what = format!("reg_mr `{}`", mr.name);
            let r = self.setup_call(req, &what)?;
            let h = MrHandle {
                handle: field_u64(&r, "mr", &what)?,
                addr: field_u64(&r, "addr", &what)?,
                len: field_u64(&r, "length", &what)?,
                lkey: field_u64(&r, "lkey", &what)?,
                rkey: field_u64(&r, "rkey", &what)?,
            };
            for (k, val) in [
                ("addr", h.addr),
                ("len", h.len),
                ("lkey", h.lkey),
                ("rkey", h.rkey),
            ] {
                bindings.set(format!("mr.{}.{k}", mr.name), val);
            }
            mrs.insert(mr.name.clone(), h);
        }
        let h_qpn = self.bed.harness_qpn;
        let rq_psn = q.rq_psn.unwrap_or((rng.next() & 0xFF_FFFF) as u32);
        let sq_psn = q.sq_psn.unwrap_or((rng.next() & 0xFF_FFFF) as u32);
        let udp_sport = 0xC000 | (rng.next() & 0x3FFF) as u16;
        let n_qps = if v.setup.second_qp { 2 } else { 1 };
        let mut qpns = Vec::new();
        let mut iut_sport = 0;
        let mut rtr_attrs = Map::new();
        for k in 0..n_qps {
            let what = if k == 0 {
                "the QP under test"
            } else {
                "the second QP"
            };
            let r = self.setup_call(
                json!({"op": "create_qp", "pd": pd, "qp_type": q.qp_type, "send_cq": cq, "recv_cq": cq}),
                &format!("create_qp ({what})"),
            )?;
            let qpn = field_u64(&r, "qpn", "create_qp")?;
            let peer = h_qpn + k;
            let is_ud = q.qp_type == "ud";
            let init = if is_ud {
                json!({"q_key": q.q_key, "p_key": q.p_key})
            } else {
                json!({"access": q.access, "p_key": q.p_key})
            };
            // `setup.qp.state` stops the QP under test early (MR-QP tests).
            let stop = if k == 0 { q.state.as_str() } else { "rts" };
            if stop == "reset" {
                qpns.push(qpn as u32);
                continue;
            }
            self.setup_call(
                json!({"op": "modify_qp", "qpn": qpn, "state": "init", "attrs": init}),
                &format!("modify_qp {what} to INIT"),
            )?;
            if stop == "init" {
                qpns.push(qpn as u32);
                continue;
            }
            let rtr = if is_ud {
                json!({})
            } else {
                let mut a = json!({"dest_qpn": peer, "rq_psn": rq_psn, "pmtu": q.pmtu,
                    "max_dest_rd_atomic": q.max_dest_rd_atomic, "min_rnr_timer": q.min_rnr_timer,
                    "path": {"dest_mac": mac_text(self.iut.harness().mac),
                             "dest_ip": self.iut.harness().ip.to_string(),
                             "traffic_class": q.traffic_class}});
                if k == 0
                    && let Value::Object(m) = &a
                {
                    rtr_attrs = m.clone();
                }
                if v.profile == Profile::Mp {
                    let mp = q.mp.clone().unwrap_or(crate::vector::model::MpSetup {
                        entropy_set_size: 8,
                        window: 1024,
                        trim_dscp: None,
                        entropy_set: None,
                    });
                    a["mp"] = Value::Bool(true);
                    a["mp_entropy_set_size"] = mp.entropy_set_size.into();
                    a["mp_window"] = mp.window.into();
                    if let Some(d) = mp.trim_dscp {
                        a["mp_trim_dscp"] = d.into();
                    }
                    if let Some(set) = &mp.entropy_set {
                        a["mp_entropy_set"] = set.clone().into();
                    }
                }
                a
            };
            self.setup_call(
                json!({"op": "modify_qp", "qpn": qpn, "state": "rtr", "attrs": rtr}),
                &format!("modify_qp {what} to RTR"),
            )?;
            if stop == "rtr" {
                qpns.push(qpn as u32);
                continue;
            }
            let rts = if is_ud {
                json!({"sq_psn": sq_psn})
            } else {
                json!({"sq_psn": sq_psn, "timeout": q.timeout, "retry_cnt": q.retry_cnt,
                    "rnr_retry": q.rnr_retry, "max_rd_atomic": q.max_rd_atomic})
            };
            self.setup_call(
                json!({"op": "modify_qp", "qpn": qpn, "state": "rts", "attrs": rts}),
                &format!("modify_qp {what} to RTS"),
            )?;
            if k == 0 {
                let info = self.setup_call(json!({"op": "query_qp", "qpn": qpn}), "query_qp")?;
                match info.get("udp_src_port").and_then(Value::as_u64) {
                    Some(port) => iut_sport = port,
                    // An agent that cannot tell the QP's UDP source port
                    // (AGENT.md: optional) leaves `${iut.udp_sport}` unknown:
                    // a vector that compares against it cannot be judged.
                    None if vector_mentions(self.vector, "iut.udp_sport") => {
                        return Err(Stop::Inconc(
                            "the agent does not report the QP's UDP source port (query_qp \
                             udp_src_port), which this test compares against"
                                .into(),
                        ));
                    }
                    None => {}
                }
                // An MP QP's entropy set, as the IUT reports it (MR-PICS-5):
                // `iut.ev0`, `iut.ev1`, ... and `iut.ev_count`.
                let set: Vec<u64> = info
                    .get("attrs")
                    .and_then(|a| a.get("mp_entropy_set"))
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_u64).collect())
                    .unwrap_or_default();
                bindings.set("iut.ev_count", set.len() as u64);
                for (i, ev) in set.iter().enumerate() {
                    bindings.set(format!("iut.ev{i}"), *ev);
                }
            }
            qpns.push(qpn as u32);
        }
        bindings.set("psn", u64::from(rq_psn));
        bindings.set("iut.psn", u64::from(sq_psn));
        bindings.set("iut.qpn", u64::from(qpns[0]));
        bindings.set("iut.qpn2", u64::from(qpns.get(1).copied().unwrap_or(0)));
        bindings.set("h.qpn", u64::from(h_qpn));
        bindings.set("h.qpn2", u64::from(h_qpn + 1));
        bindings.set("pmtu", u64::from(q.pmtu));
        bindings.set("iut.udp_sport", iut_sport);
        bindings.set("h.ip", u64::from(u32::from(self.iut.harness().ip)));
        bindings.set("iut.ip", u64::from(u32::from(self.bed.iut.ip)));
        let counters = self.read_counters().unwrap_or_default();
        // Whatever came during setup belongs to no step (late frames of an
        // earlier test, frames of the reset): logged, not judged.
        for o in self.iut.drain()? {
            let note = "during setup: ignored".to_string();
            self.log(Direction::Received, o.at_ns, &o.bytes, note);
        }
        self.start_ns = self.iut.now_ns();
        self.ctx = Some(Context {
            bindings,
            harness: self.iut.harness(),
            iut: self.bed.iut,
            iut_qpn: qpns[0],
            iut_qpn2: qpns.get(1).copied().unwrap_or(0),
            cq,
            udp_sport,
            p_key: q.p_key,
            traffic_class: u32::from(q.traffic_class),
            mrs,
            start_ns: self.start_ns,
            margin_ns: self.bed.margin_ns,
            counters_at_start: counters,
            rtr_attrs,
        });
        if q.state != "reset" {
            for r in &v.setup.recvs {
                self.post_recv(r).map_err(Stop::Inconc)?;
            }
        }
        Ok(())
    }

    fn read_counters(&mut self) -> Option<BTreeMap<String, u64>> {
        let reply = self.iut.agent(json!({"op": "counters"})).ok()?;
        let map = agent_ok(reply, "counters").ok()?;
        let c = map.get("counters")?.as_object()?;
        Some(
            c.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                .collect(),
        )
    }

    fn sg_json(&self, sg: &[Sge]) -> Result<Value, String> {
        let ctx = self.ctx();
        let mut out = Vec::new();
        for s in sg {
            let mr = ctx
                .mrs
                .get(&s.mr)
                .ok_or_else(|| format!("no MR `{}`", s.mr))?;
            let lkey = match &s.lkey {
                Some(n) => num(n, ctx)?,
                None => mr.lkey,
            };
            out.push(json!({"addr": mr.addr + s.offset, "length": s.length, "lkey": lkey}));
        }
        Ok(Value::Array(out))
    }

    fn qpn_for(&self, second: bool) -> u32 {
        if second {
            self.ctx().iut_qpn2
        } else {
            self.ctx().iut_qpn
        }
    }

    fn post_recv(&mut self, r: &RecvSetup) -> Result<(), String> {
        let sg = self.sg_json(&r.sg)?;
        let qpn = self.qpn_for(r.second_qp);
        let reply = self
            .iut
            .agent(json!({"op": "post_recv", "qpn": qpn, "wr_id": r.wr_id, "sg_list": sg}))
            .map_err(|e| e.0)?;
        agent_ok(reply, "post_recv").map(drop)
    }

    fn run_step(&mut self, step: &Step) -> Result<(), Stop> {
        match step {
            Step::Send(s) => {
                let ctx = self.ctx();
                let frame = build(s, ctx).map_err(|e| Stop::Error(format!("send: {e}")))?;
                let copies = s.repeat.unwrap_or(1).clamp(1, 10_000);
                for _ in 0..copies {
                    self.iut.send(&frame)?;
                    let now = self.iut.now_ns();
                    // `sent_ns`: when the harness last sent, in ns since the
                    // test began (timing vectors measure from it).
                    let since = now.saturating_sub(self.start_ns);
                    if let Some(ctx) = self.ctx.as_mut() {
                        ctx.bindings.set("sent_ns", since);
                    }
                    self.log(
                        Direction::Sent,
                        now,
                        &frame,
                        s.note.clone().unwrap_or_default(),
                    );
                }
                let sum = self
                    .packets
                    .last()
                    .map(|p| p.summary.clone())
                    .unwrap_or_default();
                self.record(
                    "send",
                    true,
                    if copies > 1 {
                        format!("{sum} ×{copies}")
                    } else {
                        sum
                    },
                );
                Ok(())
            }
            Step::Expect(e) => self.expect(e),
            Step::ExpectNone(e) => self.expect_none(e),
            Step::Wait(w) => {
                let deadline = self.deadline(w.within_us);
                while let Some(o) = self.iut.recv(deadline)? {
                    self.pending.push_back(o);
                }
                self.record("wait", true, format!("{} µs", w.within_us));
                Ok(())
            }
            Step::PostSend(p) => self.post_send(p),
            Step::PostRecv(r) => {
                self.post_recv(r).map_err(Stop::Inconc)?;
                self.record("post_recv", true, format!("wr_id {}", r.wr_id));
                Ok(())
            }
            Step::ExpectCompletion(c) => self.expect_completion(c),
            Step::ExpectNoCompletion(w) => {
                let ctx = self.ctx();
                let req = json!({"op": "poll_cq", "cq": ctx.cq, "max": 16,
                    "wait_ms": wait_ms(w.within_us * 1_000 + self.bed.margin_ns)});
                let reply = self.iut.agent(req)?;
                let map = agent_ok(reply, "poll_cq").map_err(Stop::Error)?;
                let got = map
                    .get("completions")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if let Some(first) = got.first() {
                    let reason = format!("a completion appeared where none may: {first}");
                    self.record("expect_no_completion", false, reason.clone());
                    return Err(self.fail(&None, reason));
                }
                self.record(
                    "expect_no_completion",
                    true,
                    format!("none in {} µs", w.within_us),
                );
                Ok(())
            }
            Step::ExpectMemory(m) => self.expect_memory(m),
            Step::WriteMemory(m) => {
                let ctx = self.ctx();
                let mr = *ctx
                    .mrs
                    .get(&m.mr)
                    .ok_or_else(|| Stop::Error(format!("no MR `{}`", m.mr)))?;
                let data =
                    bytes(&m.bytes, ctx).map_err(|e| Stop::Error(format!("write_memory: {e}")))?;
                let reply = self.iut.agent(json!({"op": "write_mr", "mr": mr.handle,
                    "offset": m.offset, "hex": hex::encode(&data)}))?;
                agent_ok(reply, "write_mr").map_err(Stop::Inconc)?;
                self.record(
                    "write_memory",
                    true,
                    format!("{} bytes at {}+{}", data.len(), m.mr, m.offset),
                );
                Ok(())
            }
            Step::ExpectCounters(want) => {
                // MR-ROB-10 counts once the traffic has quiesced: on a live
                // IUT the last frame may still be in its receive path.
                if !self.iut.virtual_time() {
                    let until = self.iut.now_ns().saturating_add(self.bed.margin_ns);
                    while let Some(o) = self.iut.recv(until)? {
                        self.pending.push_back(o);
                    }
                }
                // Counters are a SHOULD (MR-ROB-9): an IUT that declares none
                // still runs the rest of the vector.
                if self.bed.profile.get("counters") == Some(&Value::Bool(false)) {
                    self.record(
                        "expect_counters",
                        true,
                        "skipped: the capability profile declares counters absent".into(),
                    );
                    return Ok(());
                }
                let now = self.read_counters().ok_or_else(|| {
                    Stop::Inconc("expect_counters: the agent reports no counters".into())
                })?;
                let start = self.ctx().counters_at_start.clone();
                let mut view = Map::new();
                for (k, v) in &now {
                    view.insert(
                        k.clone(),
                        json!(v.saturating_sub(start.get(k).copied().unwrap_or(0))),
                    );
                }
                let view = Value::Object(view);
                match check_fields(&view, want, self.ctx()) {
                    Ok(()) => {
                        self.record("expect_counters", true, "counters as expected".into());
                        Ok(())
                    }
                    Err(misses) => {
                        let reason = format!("counters: {}", misses.join("; "));
                        self.record("expect_counters", false, reason.clone());
                        Err(self.fail(&None, reason))
                    }
                }
            }
            Step::DeregMr(d) => {
                let mr = *self
                    .ctx()
                    .mrs
                    .get(&d.mr)
                    .ok_or_else(|| Stop::Error(format!("no MR `{}`", d.mr)))?;
                let reply = self.iut.agent(json!({"op": "dereg_mr", "mr": mr.handle}))?;
                agent_ok(reply, "dereg_mr").map_err(Stop::Inconc)?;
                self.deregistered.insert(d.mr.clone());
                self.record("dereg_mr", true, format!("`{}`", d.mr));
                Ok(())
            }
            Step::ModifyQp(m) => self.modify_qp(m),
            Step::ExpectQpState(want) => {
                let qpn = self.ctx().iut_qpn;
                let reply = self.iut.agent(json!({"op": "query_qp", "qpn": qpn}))?;
                let map = agent_ok(reply, "query_qp").map_err(Stop::Inconc)?;
                let got = map.get("state").and_then(Value::as_str).unwrap_or("none");
                if got.eq_ignore_ascii_case(&want.state) {
                    self.record("expect_qp_state", true, got.to_string());
                    Ok(())
                } else {
                    let reason = format!("QP state {got}, expected {}", want.state);
                    self.record("expect_qp_state", false, reason.clone());
                    Err(self.fail(&want.requirement, reason))
                }
            }
        }
    }

    /// The next frame before `deadline`: pending ones first. Frames that
    /// are not RoCE (ARP, neighbour discovery on a real link) are logged and
    /// skipped.
    fn next_frame(&mut self, deadline: u64) -> Result<Option<(Observed, Value)>, Stop> {
        loop {
            let o = match self.pending.pop_front() {
                Some(o) => o,
                None => match self.iut.recv(deadline)? {
                    Some(o) => o,
                    None => return Ok(None),
                },
            };
            let mut view = frame_view(&o.bytes);
            // `at_ns`: when the frame came, in ns since the test began
            // (for timing matchers and captures).
            if let Value::Object(map) = &mut view {
                map.insert("at_ns".into(), json!(o.at_ns.saturating_sub(self.start_ns)));
            }
            let roce = view.get("roce") == Some(&Value::Bool(true));
            let error = view.get("error").is_some_and(|e| !e.is_null());
            if !roce && !error {
                self.log(
                    Direction::Received,
                    o.at_ns,
                    &o.bytes,
                    "not RoCE: ignored".into(),
                );
                continue;
            }
            let dest = lookup(&view, "bth.dest_qp").and_then(Value::as_u64);
            if dest.is_some_and(|q| self.bed.stale_qpns.contains(&(q as u32))) {
                let note = "late, for an earlier test's QP: ignored".to_string();
                self.log(Direction::Received, o.at_ns, &o.bytes, note);
                continue;
            }
            return Ok(Some((o, view)));
        }
    }

    /// A waiting window as a reason states it: the vector's window, plus
    /// the test bed's margin on a live IUT.
    fn window_text(&self, within_us: u64) -> String {
        if self.bed.margin_ns == 0 {
            format!("{within_us} µs")
        } else {
            format!(
                "{within_us} µs (+ {} µs window margin)",
                self.bed.margin_ns / 1_000
            )
        }
    }

    fn expect(&mut self, e: &ExpectStep) -> Result<(), Stop> {
        let deadline = self.deadline(e.within_us);
        let count = e.count.unwrap_or(1).max(1);
        for n in 0..count {
            let mut skipped = 0u32;
            loop {
                let Some((o, view)) = self.next_frame(deadline)? else {
                    let want: Vec<String> = e.fields.keys().cloned().collect();
                    let reason = format!(
                        "expected a packet ({}{}), nothing arrived within {}",
                        want.join(", "),
                        if count > 1 {
                            format!("; {n} of {count} came")
                        } else {
                            String::new()
                        },
                        self.window_text(e.within_us)
                    );
                    self.record("expect", false, reason.clone());
                    return Err(self.fail(&e.requirement, reason));
                };
                match check_fields(&view, &e.fields, self.ctx()) {
                    Ok(()) => {
                        self.log(
                            Direction::Received,
                            o.at_ns,
                            &o.bytes,
                            "expected: matched".into(),
                        );
                        for (name, path) in &e.capture {
                            let value =
                                lookup(&view, path).and_then(Value::as_u64).ok_or_else(|| {
                                    Stop::Error(format!(
                                        "capture `{name}`: the packet has no number at `{path}`"
                                    ))
                                })?;
                            if let Some(ctx) = self.ctx.as_mut() {
                                ctx.bindings.set(name.clone(), value);
                            }
                        }
                        break;
                    }
                    Err(misses)
                        if e.skip_unmatched && e.max_skipped.is_none_or(|m| skipped < m) =>
                    {
                        skipped += 1;
                        self.log(
                            Direction::Received,
                            o.at_ns,
                            &o.bytes,
                            format!("skipped (allowed): {}", misses.join("; ")),
                        );
                    }
                    Err(misses) => {
                        let reason = format!("{}: {}", summary(&view), misses.join("; "));
                        self.log(
                            Direction::Received,
                            o.at_ns,
                            &o.bytes,
                            format!("expected other: {}", misses.join("; ")),
                        );
                        self.record("expect", false, reason.clone());
                        return Err(self.fail(&e.requirement, reason));
                    }
                }
            }
        }
        let sum = self
            .packets
            .last()
            .map(|p| p.summary.clone())
            .unwrap_or_default();
        self.record("expect", true, sum);
        Ok(())
    }

    fn expect_none(&mut self, e: &ExpectNoneStep) -> Result<(), Stop> {
        // A quiet window that bounds a timer from below shrinks on a live
        // IUT by the margin (delays only make packets look later); one that
        // says "never answered" grows by it, so a delayed answer is still
        // seen.
        let now = self.iut.now_ns();
        let window = e.within_us.saturating_mul(1_000);
        let deadline = if e.lower_bound {
            if !self.iut.virtual_time() && window <= self.bed.margin_ns {
                return Err(Stop::Inconc(format!(
                    "a {} µs lower bound on a timer cannot be judged on this test bed (window margin {} µs)",
                    e.within_us,
                    self.bed.margin_ns / 1_000
                )));
            }
            now.saturating_add(
                window
                    - if self.iut.virtual_time() {
                        0
                    } else {
                        self.bed.margin_ns
                    },
            )
        } else {
            self.deadline(e.within_us)
        };
        while let Some((o, view)) = self.next_frame(deadline)? {
            if e.fields.is_empty() || check_fields(&view, &e.fields, self.ctx()).is_ok() {
                let reason = format!(
                    "no packet may arrive within {} µs; got {}",
                    e.within_us,
                    summary(&view)
                );
                self.log(
                    Direction::Received,
                    o.at_ns,
                    &o.bytes,
                    "must not arrive".into(),
                );
                self.record("expect_none", false, reason.clone());
                return Err(self.fail(&e.requirement, reason));
            }
            self.log(
                Direction::Received,
                o.at_ns,
                &o.bytes,
                "not matching expect_none: ignored".into(),
            );
        }
        self.record(
            "expect_none",
            true,
            format!("nothing in {} µs", e.within_us),
        );
        Ok(())
    }

    fn post_send(&mut self, p: &PostSendStep) -> Result<(), Stop> {
        let ctx = self.ctx();
        let sg = self.sg_json(&p.sg).map_err(Stop::Error)?;
        let mut req = json!({"op": "post_send", "qpn": self.qpn_for(p.second_qp), "wr_id": p.wr_id,
            "opcode": p.opcode, "sg_list": sg});
        let n = |x: &Option<crate::vector::model::Num>| -> Result<Option<u64>, Stop> {
            x.as_ref()
                .map(|v| num(v, ctx))
                .transpose()
                .map_err(|e| Stop::Error(format!("post_send: {e}")))
        };
        for (key, val) in [
            ("remote_addr", n(&p.remote_addr)?),
            ("rkey", n(&p.rkey)?),
            ("imm", n(&p.imm)?),
            ("invalidate_rkey", n(&p.invalidate_rkey)?),
            ("compare", n(&p.compare)?),
            ("swap", n(&p.swap)?),
            ("add", n(&p.add)?),
        ] {
            if let Some(v) = val {
                req[key] = v.into();
            }
        }
        if let Some(s) = p.signaled {
            req["signaled"] = s.into();
        }
        if p.fence {
            req["fence"] = true.into();
        }
        if p.solicited {
            req["solicited"] = true.into();
        }
        if let Some(ud) = &p.ud {
            let h = self.iut.harness();
            let qpn = match &ud.qpn {
                Some(q) => num(q, ctx).map_err(|e| Stop::Error(format!("post_send.ud: {e}")))?,
                None => ctx.bindings.get("h.qpn").unwrap_or(0),
            };
            let qkey = num(&ud.qkey, ctx).map_err(|e| Stop::Error(format!("post_send.ud: {e}")))?;
            req["ud"] = json!({"ip": h.ip.to_string(), "mac": mac_text(h.mac),
                "qpn": qpn, "qkey": qkey});
        }
        let reply = self.iut.agent(req)?;
        let what = format!("post_send {} wr_id {}", p.opcode, p.wr_id);
        self.refusal_step(
            "post_send",
            &what,
            reply,
            p.refused.as_ref().and_then(Refusal::expected),
            &p.requirement,
        )
    }

    fn modify_qp(&mut self, m: &ModifyQpStep) -> Result<(), Stop> {
        let ctx = self.ctx();
        let qpn = ctx.iut_qpn;
        let mut attrs = if m.rtr_defaults {
            ctx.rtr_attrs.clone()
        } else {
            Map::new()
        };
        for (k, v) in &m.attrs {
            let v = match v {
                Value::String(t) if crate::vector::expr::is_expression(t) => json!(
                    crate::vector::expr::eval(t, &ctx.bindings)
                        .map_err(|e| Stop::Error(format!("modify_qp.attrs.{k}: {e}")))?
                ),
                other => other.clone(),
            };
            attrs.insert(k.clone(), v);
        }
        let what = format!("modify_qp to {}", m.state);
        let reply = self
            .iut
            .agent(json!({"op": "modify_qp", "qpn": qpn, "state": m.state, "attrs": attrs}))?;
        self.refusal_step(
            "modify_qp",
            &what,
            reply,
            m.refused.as_ref().and_then(Refusal::expected),
            &m.requirement,
        )
    }

    /// Judges an agent reply against `refused` (an error code, `any`, or
    /// `None`: the request must succeed). A refusal the vector does not
    /// expect is INCONC; an acceptance it does not expect, or another code
    /// than the one expected, FAILs.
    fn refusal_step(
        &mut self,
        kind: &'static str,
        what: &str,
        reply: Value,
        refused: Option<&str>,
        requirement: &Option<String>,
    ) -> Result<(), Stop> {
        let code = match &reply {
            Value::Object(map) if map.get("ok") == Some(&Value::Bool(true)) => None,
            Value::Object(map) => Some(
                map.get("error")
                    .and_then(|e| e.get("code"))
                    .and_then(Value::as_str)
                    .unwrap_or("no code")
                    .to_string(),
            ),
            _ => Some("malformed reply".to_string()),
        };
        match (refused, code) {
            (None, None) => {
                self.record(kind, true, format!("{what}: accepted"));
                Ok(())
            }
            (None, Some(_)) => Err(Stop::Inconc(
                agent_ok(reply, what).err().unwrap_or_default(),
            )),
            (Some(want), Some(got)) if want == "any" || want == got => {
                self.record(kind, true, format!("{what}: refused as required ({got})"));
                Ok(())
            }
            (Some(want), got) => {
                let reason = match got {
                    None => format!("{what}: the agent accepted a request it must refuse ({want})"),
                    Some(got) => format!("{what}: refused with `{got}`, expected `{want}`"),
                };
                self.record(kind, false, reason.clone());
                Err(self.fail(requirement, reason))
            }
        }
    }

    fn expect_completion(&mut self, c: &CompletionStep) -> Result<(), Stop> {
        let ctx = self.ctx();
        let req = json!({"op": "poll_cq", "cq": ctx.cq, "max": 1,
            "wait_ms": wait_ms(c.within_us * 1_000 + self.bed.margin_ns)});
        let reply = self.iut.agent(req)?;
        let map = agent_ok(reply, "poll_cq").map_err(Stop::Error)?;
        let got = map
            .get("completions")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .cloned();
        let Some(wc) = got else {
            let reason = format!(
                "expected a completion, none within {}",
                self.window_text(c.within_us)
            );
            self.record("expect_completion", false, reason.clone());
            return Err(self.fail(&c.requirement, reason));
        };
        match check_fields(&wc, &c.fields, self.ctx()) {
            Ok(()) => {
                self.record("expect_completion", true, wc.to_string());
                Ok(())
            }
            Err(misses) => {
                let reason = format!("completion {wc}: {}", misses.join("; "));
                self.record("expect_completion", false, reason.clone());
                Err(self.fail(&c.requirement, reason))
            }
        }
    }

    /// Every MR's canaries must be as the setup left them (MR-SEC-4: no
    /// byte outside the region is read or written... written, here).
    fn check_canaries(&mut self) -> Result<(), Stop> {
        let mrs: Vec<(String, MrHandle)> = self
            .ctx()
            .mrs
            .iter()
            .filter(|(k, _)| !self.deregistered.contains(*k))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        for (name, mr) in mrs {
            let reply = self
                .iut
                .agent(json!({"op": "read_canary", "mr": mr.handle}))?;
            let map = agent_ok(reply, "read_canary").map_err(Stop::Error)?;
            for side in ["before", "after"] {
                let bytes = map
                    .get(side)
                    .and_then(Value::as_str)
                    .map(hex::decode)
                    .transpose()
                    .map_err(Stop::Error)?
                    .unwrap_or_default();
                if let Some(i) = bytes.iter().position(|&b| b != CANARY_FILL) {
                    let changed = bytes.iter().filter(|&&b| b != CANARY_FILL).count();
                    let offset = if side == "before" {
                        format!("{} bytes before its start", bytes.len() - i)
                    } else {
                        format!("{} bytes after its end", i + 1)
                    };
                    let reason = format!(
                        "memory outside MR `{name}` was written: {changed} canary byte(s) {side} it changed, the first {offset} ({:#04x}, was {CANARY_FILL:#04x})",
                        bytes[i]
                    );
                    self.record("canaries", false, reason.clone());
                    return Err(Stop::Fail {
                        requirement: "MR-SEC-4".into(),
                        reason,
                    });
                }
            }
        }
        if !self.ctx().mrs.is_empty() {
            self.record(
                "canaries",
                true,
                format!("{CANARY_LEN} canary bytes on each side of every MR intact"),
            );
        }
        Ok(())
    }

    fn expect_memory(&mut self, m: &MemoryStep) -> Result<(), Stop> {
        let ctx = self.ctx();
        let mr = *ctx
            .mrs
            .get(&m.mr)
            .ok_or_else(|| Stop::Error(format!("no MR `{}`", m.mr)))?;
        let want = bytes(&m.bytes, ctx).map_err(|e| Stop::Error(format!("expect_memory: {e}")))?;
        let reply = self
            .iut
            .agent(json!({"op": "read_mr", "mr": mr.handle, "offset": m.offset,
            "length": want.len()}))?;
        let map = agent_ok(reply, "read_mr").map_err(Stop::Inconc)?;
        let got = map
            .get("hex")
            .and_then(Value::as_str)
            .map(hex::decode)
            .transpose()
            .map_err(Stop::Error)?
            .unwrap_or_default();
        if let Some(i) = (0..want.len()).find(|&i| got.get(i) != Some(&want[i])) {
            let reason = format!(
                "{} at offset {}: expected {:#04x}, found {} ({} of {} bytes differ)",
                m.mr,
                m.offset + i as u64,
                want[i],
                got.get(i).map_or("nothing".into(), |b| format!("{b:#04x}")),
                (0..want.len())
                    .filter(|&j| got.get(j) != Some(&want[j]))
                    .count(),
                want.len()
            );
            self.record("expect_memory", false, reason.clone());
            return Err(self.fail(&m.requirement, reason));
        }
        self.record(
            "expect_memory",
            true,
            format!("{} bytes of {} at {}", want.len(), m.mr, m.offset),
        );
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
        failed_requirement: None,
        duration_us: 0,
        attempts: 1,
        steps: Vec::new(),
        packets: Vec::new(),
    }
}

/// Whether a binding name appears anywhere in a vector (its steps' fields and
/// expressions, as the loader keeps them).
fn vector_mentions(vector: &Vector, name: &str) -> bool {
    serde_json::to_string(vector).is_ok_and(|text| text.contains(name))
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
