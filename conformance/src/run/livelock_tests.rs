//! A livelocked IUT costs its tests an ERROR, never the run (issue 23,
//! docs/budgets.md): the reference transport whose next timer is always
//! due as soon as it has one armed, as a cargo-mutants mutant of a
//! requester's `poll_timeout` made it. Virtual time then crawls one
//! nanosecond per firing and, without the event budget, a requester test
//! never ends.

use super::budget::{Budget, is_exceeded};
use super::iut::builtin::Builtin;
use super::verdict::Verdict;
use super::{RunOptions, SuiteResult, run_suite};
use metaroce_ref::agent::Agent;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

/// Always due while any timer is armed.
fn livelocked(agent: &Agent) -> Option<u64> {
    agent.device().poll_timeout().map(|_| 0)
}

fn vectors() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("vectors")
}

fn run(next_timer: fn(&Agent) -> Option<u64>, filters: &[&str]) -> SuiteResult {
    let root = vectors().join("base");
    let set = crate::vector::load_dir(&root).expect("the committed vectors load");
    let options = RunOptions {
        seed: 1,
        filters: filters.iter().map(|f| f.to_string()).collect(),
        budget: Budget {
            events: 200_000,
            wall: Duration::from_secs(60),
        },
        ..RunOptions::default()
    };
    // The test itself is bounded: the run happens on a thread, and a run
    // that has not finished after five minutes fails the test.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut iut = Builtin::with_timer(1, next_timer);
        let r = run_suite(&set, &root, &mut iut, &options, &mut |_, _, _| {});
        let _ = tx.send(r);
    });
    rx.recv_timeout(Duration::from_secs(300))
        .expect("the run completes in spite of the livelocked IUT")
        .expect("the run starts")
}

const TESTS: [&str; 3] = [
    "base.req.nak.fatal_future_psn",
    "base.rsp.ack.fields",
    "base.rsp.dup.write_reack",
];

#[test]
fn a_livelocked_iut_costs_its_test_an_error_and_the_run_goes_on() {
    let r = run(livelocked, &TESTS);
    assert_eq!(r.tests.len(), 3, "every selected test ran");
    let verdict = |id: &str| {
        r.tests
            .iter()
            .find(|t| t.id == id)
            .unwrap_or_else(|| panic!("{id} ran"))
    };
    let req = verdict("base.req.nak.fatal_future_psn");
    assert_eq!(req.verdict, Verdict::Error, "{:?}", req.reason);
    let reason = req.reason.as_deref().unwrap_or_default();
    assert!(
        is_exceeded(reason) && reason.contains("timer fired"),
        "{reason}"
    );
    // The responder tests after it arm no timer: they still pass (the
    // budget is per test).
    for id in &TESTS[1..] {
        let t = verdict(id);
        assert_eq!(t.verdict, Verdict::Pass, "{id}: {:?}", t.reason);
    }
}

#[test]
fn the_same_tests_pass_on_the_device_s_own_timer() {
    let own = |a: &Agent| a.device().poll_timeout();
    let r = run(own, &TESTS);
    for t in &r.tests {
        assert_eq!(t.verdict, Verdict::Pass, "{}: {:?}", t.id, t.reason);
    }
}

/// Always due, timer armed or not.
fn always_due(_: &Agent) -> Option<u64> {
    Some(0)
}

#[test]
fn a_livelocked_iut_is_a_hang_finding_of_the_fuzzer_with_its_reproducer() {
    let set = crate::vector::load_dir(&vectors().join("base")).expect("the committed vectors load");
    let (seeds, _) = crate::live_fuzz::seeds::from_vectors(&set);
    let options = crate::live_fuzz::FuzzOptions {
        packets: 8,
        batch: 8,
        max_replays: 2,
        max_findings: 1,
        budget: Budget {
            events: 20_000,
            wall: Duration::from_secs(60),
        },
        ..Default::default()
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut iut = Builtin::with_timer(1, always_due);
        let r = crate::live_fuzz::fuzz(&mut iut, seeds, &options, &mut |_, _| {});
        let _ = tx.send(r);
    });
    let summary = rx
        .recv_timeout(Duration::from_secs(300))
        .expect("the fuzzer stops in spite of the livelocked IUT")
        .expect("the fuzzer starts");
    let f = summary.findings.first().expect("a finding");
    assert_eq!(f.kind, crate::live_fuzz::FindingKind::Hang, "{}", f.reason);
    assert!(is_exceeded(&f.reason), "{}", f.reason);
    assert!(f.reproduced, "the reproducer spends the budget again");
}
