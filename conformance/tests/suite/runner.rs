//! The runner's verdict rules, on small vectors against the built-in IUT:
//! each rule shown passing and failing.

use metaroce_conformance::run::capability::Expectations;
use metaroce_conformance::run::iut::builtin::Builtin;
use metaroce_conformance::run::verdict::Verdict;
use metaroce_conformance::run::{RunOptions, SuiteResult, run_suite};
use metaroce_conformance::vector::load_dir;
use std::path::PathBuf;

const HEAD: &str = "title: t\nprofile: base\nrole: requester\n";

const WRITE: &str = "setup:\n  mrs: [{name: buf, length: 64, access: [local_write, remote_write]}]\nsteps:\n  - send: {opcode: RC_WRITE_ONLY, ext: {reth: {va: \"${mr.buf.addr}\", rkey: \"${mr.buf.rkey}\", dma_len: 4}}, payload: \"01020304\"}\n";

fn suite(name: &str, files: &[(&str, String)], options: RunOptions) -> SuiteResult {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("metaroce-runner-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (file, text) in files {
        std::fs::write(dir.join(file), text).unwrap();
    }
    let set = load_dir(&dir).unwrap_or_else(|e| panic!("{e:?}"));
    let mut iut = Builtin::new(7, None).unwrap();
    let result = run_suite(&set, &dir, &mut iut, &options, &mut |_, _, _| {}).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn vector(id: &str, requirements: &str, body: &str) -> String {
    format!("id: {id}\nrequirements: [{requirements}]\n{HEAD}{body}")
}

fn verdict_of(result: &SuiteResult, id: &str) -> (Verdict, String) {
    let t = result.tests.iter().find(|t| t.id == id).unwrap();
    (t.verdict, t.reason.clone().unwrap_or_default())
}

#[test]
fn expect_passes_and_fails_on_each_field() {
    let ok = format!(
        "{WRITE}  - expect: {{fields: {{opcode: RC_ACK, bth.psn: \"${{psn}}\", syndrome: ack, aeth.msn: 1}}}}\n  - expect_memory: {{mr: buf, bytes: \"01020304\"}}\n"
    );
    let bad_msn = ok.replace("aeth.msn: 1", "aeth.msn: 2");
    let bad_psn = ok.replace("bth.psn: \"${psn}\"", "bth.psn: \"${psn + 1}\"");
    let bad_mem = ok.replace("bytes: \"01020304\"", "bytes: \"01020305\"");
    let r = suite(
        "expect",
        &[
            ("a.yaml", vector("a", "MR-RSP-1", &ok)),
            ("b.yaml", vector("b", "MR-RSP-1", &bad_msn)),
            ("c.yaml", vector("c", "MR-RSP-1", &bad_psn)),
            ("d.yaml", vector("d", "MR-RSP-1", &bad_mem)),
        ],
        RunOptions::default(),
    );
    assert_eq!(
        verdict_of(&r, "a").0,
        Verdict::Pass,
        "{:?}",
        verdict_of(&r, "a")
    );
    let (v, why) = verdict_of(&r, "b");
    assert_eq!(v, Verdict::Fail);
    assert!(why.contains("aeth.msn: expected 2, observed 1"), "{why}");
    assert_eq!(verdict_of(&r, "c").0, Verdict::Fail);
    let (v, why) = verdict_of(&r, "d");
    assert_eq!(v, Verdict::Fail);
    assert!(why.contains("offset 3"), "{why}");
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn silence_and_absence() {
    // A WRITE with a wrong rkey is NAKed: expect_none fails on it, an
    // expect of an ACK fails on it, and after a packet to an unknown QP
    // expect_none passes.
    let nak = WRITE.replace("rkey: \"${mr.buf.rkey}\"", "rkey: \"${mr.buf.rkey + 1}\"");
    let r = suite(
        "none",
        &[
            (
                "a.yaml",
                vector(
                    "a",
                    "MR-SEC-5",
                    &format!("{nak}  - expect_none: {{within_us: 100}}\n"),
                ),
            ),
            (
                "b.yaml",
                vector(
                    "b",
                    "MR-SEC-5",
                    &format!("{nak}  - expect: {{fields: {{syndrome: ack}}}}\n"),
                ),
            ),
            (
                "c.yaml",
                vector(
                    "c",
                    "MR-SEC-5",
                    &format!("{nak}  - expect: {{fields: {{syndrome: nak_rem_access}}}}\n"),
                ),
            ),
            (
                "d.yaml",
                vector(
                    "d",
                    "MR-ROB-1",
                    &format!(
                        "{}  - expect_none: {{within_us: 1000}}\n",
                        WRITE.replace(
                            "opcode: RC_WRITE_ONLY,",
                            "opcode: RC_WRITE_ONLY, bth: {dest_qp: 0xABCDE},"
                        )
                    ),
                ),
            ),
            (
                "e.yaml",
                vector(
                    "e",
                    "MR-ROB-1",
                    &format!(
                        "{WRITE}  - expect: {{within_us: 1, count: 2, fields: {{opcode: RC_ACK}}}}\n"
                    ),
                ),
            ),
        ],
        RunOptions::default(),
    );
    assert_eq!(verdict_of(&r, "a").0, Verdict::Fail);
    assert_eq!(verdict_of(&r, "b").0, Verdict::Fail);
    assert_eq!(
        verdict_of(&r, "c").0,
        Verdict::Pass,
        "{:?}",
        verdict_of(&r, "c")
    );
    assert_eq!(
        verdict_of(&r, "d").0,
        Verdict::Pass,
        "{:?}",
        verdict_of(&r, "d")
    );
    let (v, why) = verdict_of(&r, "e");
    assert_eq!(v, Verdict::Fail);
    assert!(why.contains("1 of 2 came"), "{why}");
}

#[test]
fn capture_binds_later_steps() {
    let body = "setup:\n  mrs: [{name: src, length: 16, access: [local_write], content: \"aabb\"}]\nsteps:\n  - post_send: {wr_id: 1, opcode: send, sg: [{mr: src, length: 2}]}\n  - expect: {fields: {opcode: RC_SEND_ONLY}, capture: {req: bth.psn}}\n  - send: {opcode: RC_ACK, bth: {psn: \"${req}\"}, ext: {aeth: {syndrome: ack, msn: 1}}}\n  - expect_completion: {fields: {wr_id: 1, status_name: SUCCESS}}\n";
    let r = suite(
        "capture",
        &[(
            "a.yaml",
            vector(
                "a",
                "MR-REQ-1",
                &body.replace("role: requester", "role: responder"),
            ),
        )],
        RunOptions::default(),
    );
    assert_eq!(
        verdict_of(&r, "a").0,
        Verdict::Pass,
        "{:?}",
        verdict_of(&r, "a")
    );
}

#[test]
fn unsupported_inconc_xfail_and_nonstrict() {
    let fail = format!("{WRITE}  - expect: {{fields: {{aeth.msn: 9}}}}\n");
    let expectations_file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("metaroce-xfail-{}.yaml", std::process::id()));
    std::fs::write(&expectations_file, "- {id: x, reason: known}\n").unwrap();
    let options = RunOptions {
        expectations: Expectations::load(&expectations_file).unwrap(),
        ..RunOptions::default()
    };
    let r = suite(
        "verdicts",
        &[
            (
                "u.yaml",
                vector(
                    "u",
                    "MR-RSP-1",
                    &format!("needs: [no_such_capability]\n{WRITE}"),
                ),
            ),
            (
                "i.yaml",
                vector(
                    "i",
                    "MR-RSP-1",
                    &WRITE.replace("length: 64", "length: 99999999999"),
                ),
            ),
            ("x.yaml", vector("x", "MR-RSP-1", &fail)),
            // MR-CNP-6 is a SHOULD? Use any SHOULD requirement of SPEC.md.
            ("s.yaml", vector("s", &should_requirement(), &fail)),
        ],
        options,
    );
    assert_eq!(verdict_of(&r, "u").0, Verdict::Unsupported);
    assert_eq!(
        verdict_of(&r, "i").0,
        Verdict::Inconc,
        "{:?}",
        verdict_of(&r, "i")
    );
    assert_eq!(verdict_of(&r, "x").0, Verdict::Xfail);
    assert_eq!(verdict_of(&r, "s").0, Verdict::PassNonstrict);
    assert_eq!(r.exit_code(), 2, "INCONC without FAIL exits 2");
}

fn should_requirement() -> String {
    metaroce_spec::requirements::all()
        .iter()
        .find(|r| matches!(r.keyword, metaroce_spec::requirements::Keyword::Should))
        .unwrap()
        .id
        .to_string()
}

#[test]
fn the_committed_suite_passes_on_the_reference_transport() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../vectors");
    let set = load_dir(&root).unwrap_or_else(|e| panic!("{e:?}"));
    let mut iut = Builtin::new(1, None).unwrap();
    let r = run_suite(
        &set,
        &root,
        &mut iut,
        &RunOptions::default(),
        &mut |_, _, _| {},
    )
    .unwrap();
    let bad: Vec<String> = r
        .tests
        .iter()
        .filter(|t| !matches!(t.verdict, Verdict::Pass | Verdict::Unsupported))
        .map(|t| {
            format!(
                "{} {}: {}",
                t.verdict,
                t.id,
                t.reason.clone().unwrap_or_default()
            )
        })
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The built-in IUT, changed in one way a test needs.
struct Altered {
    inner: Builtin,
    /// Poses as a live IUT (`virtual_time` false), so the runner's retry
    /// rules apply.
    live: bool,
    /// An agent that cannot tell a QP's UDP source port (`query_qp`
    /// without `udp_src_port`, which AGENT.md makes optional).
    hide_udp_sport: bool,
}

impl Altered {
    fn live() -> Self {
        Altered {
            inner: Builtin::new(7, None).unwrap(),
            live: true,
            hide_udp_sport: false,
        }
    }

    fn no_source_port() -> Self {
        Altered {
            inner: Builtin::new(7, None).unwrap(),
            live: false,
            hide_udp_sport: true,
        }
    }
}

impl metaroce_conformance::run::iut::Iut for Altered {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn virtual_time(&self) -> bool {
        !self.live && self.inner.virtual_time()
    }
    fn harness(&self) -> metaroce_conformance::run::iut::Endpoint {
        self.inner.harness()
    }
    fn agent(
        &mut self,
        request: serde_json::Value,
    ) -> Result<serde_json::Value, metaroce_conformance::run::iut::IutError> {
        let mut reply = self.inner.agent(request)?;
        if self.hide_udp_sport
            && let Some(map) = reply.as_object_mut()
        {
            map.remove("udp_src_port");
        }
        Ok(reply)
    }
    fn send(&mut self, frame: &[u8]) -> Result<(), metaroce_conformance::run::iut::IutError> {
        self.inner.send(frame)
    }
    fn recv(
        &mut self,
        deadline_ns: u64,
    ) -> Result<
        Option<metaroce_conformance::run::iut::Observed>,
        metaroce_conformance::run::iut::IutError,
    > {
        self.inner.recv(deadline_ns)
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
    fn advance(&mut self, until_ns: u64) -> Result<(), metaroce_conformance::run::iut::IutError> {
        self.inner.advance(until_ns)
    }
    fn drain(
        &mut self,
    ) -> Result<
        Vec<metaroce_conformance::run::iut::Observed>,
        metaroce_conformance::run::iut::IutError,
    > {
        self.inner.drain()
    }
}

#[test]
fn a_live_iut_retries_failures_but_not_listed_known_failures() {
    // `--retries 2`: an unlisted FAIL runs three times (it might be a
    // timing accident); a FAIL the expectations file lists runs once (a
    // known departure), and still ends XFAIL; a PASS runs once.
    let fail = format!("{WRITE}  - expect: {{fields: {{aeth.msn: 9}}}}\n");
    let pass = format!("{WRITE}  - expect: {{fields: {{opcode: RC_ACK}}}}\n");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("metaroce-runner-retries-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("f.yaml"), vector("f", "MR-RSP-1", &fail)).unwrap();
    std::fs::write(dir.join("x.yaml"), vector("x", "MR-RSP-1", &fail)).unwrap();
    std::fs::write(dir.join("p.yaml"), vector("p", "MR-RSP-1", &pass)).unwrap();
    let expectations_file = dir.with_extension("expectations.yaml");
    std::fs::write(&expectations_file, "- {id: x, reason: known}\n").unwrap();
    let set = load_dir(&dir).unwrap_or_else(|e| panic!("{e:?}"));
    let options = RunOptions {
        retries: 2,
        expectations: Expectations::load(&expectations_file).unwrap(),
        ..RunOptions::default()
    };
    let mut iut = Altered::live();
    let r = run_suite(&set, &dir, &mut iut, &options, &mut |_, _, _| {}).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&expectations_file);
    let of = |id: &str| r.tests.iter().find(|t| t.id == id).unwrap();
    assert_eq!((of("f").verdict, of("f").attempts), (Verdict::Fail, 3));
    assert_eq!((of("x").verdict, of("x").attempts), (Verdict::Xfail, 1));
    assert_eq!((of("p").verdict, of("p").attempts), (Verdict::Pass, 1));
}

#[test]
fn an_unknown_udp_source_port_makes_its_tests_inconclusive() {
    // MR-ACK-6: an ACK leaves from the QP's UDP source port. When the agent
    // cannot say which port that is, the comparison cannot be made: INCONC,
    // not a FAIL of the IUT; tests that do not use the port still run.
    let ack = format!(
        "{WRITE}  - expect: {{fields: {{opcode: RC_ACK, udp.src_port: \"${{iut.udp_sport}}\"}}}}\n"
    );
    let plain = format!("{WRITE}  - expect: {{fields: {{opcode: RC_ACK}}}}\n");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("metaroce-runner-sport-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.yaml"), vector("t.sport", "MR-ACK-6", &ack)).unwrap();
    std::fs::write(dir.join("b.yaml"), vector("t.plain", "MR-ACK-6", &plain)).unwrap();
    let set = load_dir(&dir).unwrap_or_else(|e| panic!("{e:?}"));
    let run = |iut: &mut dyn metaroce_conformance::run::iut::Iut| {
        run_suite(&set, &dir, iut, &RunOptions::default(), &mut |_, _, _| {}).unwrap()
    };
    let told = run(&mut Builtin::new(7, None).unwrap());
    assert_eq!(verdict_of(&told, "t.sport").0, Verdict::Pass);
    let untold = run(&mut Altered::no_source_port());
    let (verdict, reason) = verdict_of(&untold, "t.sport");
    assert_eq!(verdict, Verdict::Inconc, "{reason}");
    assert!(reason.contains("UDP source port"), "{reason}");
    assert_eq!(verdict_of(&untold, "t.plain").0, Verdict::Pass);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn late_bound_passes_the_step_and_fails_its_requirement() {
    // Base local ACK timeout 14 (67 ms): the unanswered SEND is resent.
    let body = |late: &str| {
        format!(
            "setup:\n  mrs: [{{name: src, length: 16, access: [local_write], content: \"aabb\"}}]\nsteps:\n  - post_send: {{wr_id: 1, opcode: send, sg: [{{mr: src, length: 2}}]}}\n  - expect: {{fields: {{opcode: RC_SEND_ONLY}}}}\n  - expect: {{within_us: 300000, late: {late}, fields: {{opcode: RC_SEND_ONLY}}}}\n"
        )
    };
    let should = should_requirement();
    let files = [
        (
            "on_time.yaml",
            format!(
                "id: on_time\nrequirements: [MR-TMR-2]\ntitle: t\nprofile: base\nrole: responder\n{}",
                body(&format!("{{after_us: 300000, requirement: {should}}}"))
            ),
        ),
        (
            "late_should.yaml",
            format!(
                "id: late_should\nrequirements: [MR-TMR-2]\ntitle: t\nprofile: base\nrole: responder\n{}",
                body(&format!("{{after_us: 1, requirement: {should}}}"))
            ),
        ),
        (
            "late_must.yaml",
            format!(
                "id: late_must\nrequirements: [MR-TMR-2]\ntitle: t\nprofile: base\nrole: responder\n{}",
                body("{after_us: 1, requirement: MR-TMR-2}")
            ),
        ),
    ];
    let r = suite("late", &files, RunOptions::default());
    assert_eq!(
        verdict_of(&r, "on_time").0,
        Verdict::Pass,
        "{:?}",
        verdict_of(&r, "on_time")
    );
    let (v, why) = verdict_of(&r, "late_should");
    assert_eq!(v, Verdict::PassNonstrict, "{why}");
    assert!(why.contains("arrived later than"), "{why}");
    assert_eq!(verdict_of(&r, "late_must").0, Verdict::Fail);
}
