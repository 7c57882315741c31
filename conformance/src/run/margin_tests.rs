//! The window margin of a live test bed never fails a correct IUT (issue
//! 19, D2 and D3): the built-in reference poses as a live IUT (its time
//! stays virtual, so the runs are exact) and runs committed vectors with a
//! margin or a slow harness that made them FAIL.

use super::budget::Budget;
use super::iut::builtin::Builtin;
use super::iut::{Endpoint, Iut, IutError, Observed};
use super::verdict::Verdict;
use super::{RunOptions, SuiteResult, run_suite};
use serde_json::Value;
use std::path::PathBuf;

/// The built-in IUT posing as a live one; `late_ns` after each frame the
/// harness sends passes before the harness goes on (a harness descheduled
/// after its send, as on a loaded machine), and `late_recv_ns` after each
/// frame it takes (a slow harness judging a burst).
struct Live {
    inner: Builtin,
    late_ns: u64,
    late_recv_ns: u64,
}

impl Iut for Live {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn virtual_time(&self) -> bool {
        false
    }
    fn harness(&self) -> Endpoint {
        self.inner.harness()
    }
    fn agent(&mut self, request: Value) -> Result<Value, IutError> {
        self.inner.agent(request)
    }
    fn send(&mut self, frame: &[u8]) -> Result<(), IutError> {
        self.inner.send(frame)?;
        let until = self.inner.now_ns().saturating_add(self.late_ns);
        self.inner.advance(until)
    }
    fn send_held(&mut self, frame: &[u8]) -> Result<(), IutError> {
        self.inner.send_held(frame)
    }
    fn recv(&mut self, deadline_ns: u64) -> Result<Option<Observed>, IutError> {
        let o = self.inner.recv(deadline_ns)?;
        if o.is_some() && self.late_recv_ns > 0 {
            let until = self.inner.now_ns().saturating_add(self.late_recv_ns);
            self.inner.advance(until)?;
        }
        Ok(o)
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
    fn advance(&mut self, until_ns: u64) -> Result<(), IutError> {
        self.inner.advance(until_ns)
    }
    fn drain(&mut self) -> Result<Vec<Observed>, IutError> {
        self.inner.drain()
    }
    fn start_budget(&mut self, budget: Budget) {
        self.inner.start_budget(budget);
    }
}

fn run(late_ns: u64, margin_ns: u64, filters: &[&str]) -> SuiteResult {
    run_on(None, late_ns, margin_ns, filters)
}

fn run_on(mutant: Option<&str>, late_ns: u64, margin_ns: u64, filters: &[&str]) -> SuiteResult {
    run_live(mutant, (late_ns, 0), margin_ns, filters)
}

/// `late`: (after each send, after each frame taken).
fn run_live(
    mutant: Option<&str>,
    late: (u64, u64),
    margin_ns: u64,
    filters: &[&str],
) -> SuiteResult {
    let (late_ns, late_recv_ns) = late;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("vectors");
    let set = crate::vector::load_dir(&root).expect("the committed vectors load");
    let options = RunOptions {
        seed: 1,
        filters: filters.iter().map(|f| f.to_string()).collect(),
        margin_ns: Some(margin_ns),
        ..RunOptions::default()
    };
    let mut iut = Live {
        inner: Builtin::new(7, mutant).expect("the built-in IUT starts"),
        late_ns,
        late_recv_ns,
    };
    run_suite(&set, &root, &mut iut, &options, &mut |_, _, _| {}).expect("the run completes")
}

fn verdict(r: &SuiteResult, id: &str) -> (Verdict, String) {
    let t = r
        .tests
        .iter()
        .find(|t| t.id == id)
        .unwrap_or_else(|| panic!("{id} ran"));
    (t.verdict, t.reason.clone().unwrap_or_default())
}

/// D2: the RNR timer (1.28 ms) runs from the RNR NAK the harness sent,
/// not from when the harness got to the quiet window after it: a harness
/// 500 µs late judged the retry sent on time early.
#[test]
fn a_lower_bound_runs_from_the_frame_that_started_the_timer() {
    let r = run(500_000, 100_000, &["base.req.rnr.prompt_retry"]);
    let (v, reason) = verdict(&r, "base.req.rnr.prompt_retry");
    assert_eq!(v, Verdict::Pass, "{reason}");
    // A retry that is early is still caught (MR-RNR-3), late harness or
    // not: the mutant that resends at once after an RNR NAK.
    for late in [0, 500_000] {
        let r = run_on(
            Some("rnr-wait-ignored"),
            late,
            100_000,
            &["base.req.rnr.prompt_retry"],
        );
        let (v, reason) = verdict(&r, "base.req.rnr.prompt_retry");
        assert_eq!(v, Verdict::Fail, "late {late}: {reason}");
    }
}

/// D3: a margin longer than the IUT's retry budget: the requester gives up
/// with RETRY_EXC_ERR inside a "no completion" window, which the frame of
/// the step did not cause.
#[test]
fn a_retry_budget_running_out_in_the_margin_is_not_a_completion() {
    let ids = [
        "mp.req.ack_beyond_sent",
        "mp.loss.reserved_syndrome_dropped",
        "mp.req.read_wrong_msn_dropped",
    ];
    let r = run(0, 400_000_000, &ids);
    for id in ids {
        let (v, reason) = verdict(&r, id);
        assert!(
            matches!(v, Verdict::Pass | Verdict::Inconc),
            "{id}: {v:?}: {reason}"
        );
        assert!(
            v == Verdict::Pass || reason.contains("RETRY_EXC_ERR"),
            "{id}: {reason}"
        );
    }
}

/// A harness slow to judge a burst (10 µs per frame: 1.28 ms for the 128
/// packets of mp.cc.cwnd_init) reaches the quiet window after it late; the
/// retransmission at mp_rto_init (1 ms), well after the window and its
/// margin, is not "within" it (seen live with longer declared timers,
/// `metaroce-ref serve --mp-timers`).
#[test]
fn a_quiet_window_ends_after_its_margin_from_the_frame_that_opened_it() {
    let id = "mp.cc.cwnd_init";
    let r = run_live(None, (0, 10_000), 50_000, &[id]);
    let (v, reason) = verdict(&r, id);
    assert_eq!(v, Verdict::Pass, "{reason}");
    // A packet beyond the window inside it is still caught, late harness
    // or not: the mutant whose congestion window does not hold.
    for late in [0, 10_000] {
        let r = run_live(Some("mp-cwnd-ignored"), (0, late), 50_000, &[id]);
        let (v, reason) = verdict(&r, id);
        assert_eq!(v, Verdict::Fail, "late {late}: {reason}");
    }
}

/// Issue 19 D1: the retire hold runs from the ACK that revealed the loss,
/// not from the harness's later ACK; a harness slow to take the
/// retransmission in between (150 µs) judged a probe sent on time early.
#[test]
fn a_probe_hold_runs_from_the_ack_that_revealed_the_loss() {
    let id = "mp.path.probe_after_retire";
    let r = run_live(None, (0, 150_000), 50_000, &[id]);
    let (v, reason) = verdict(&r, id);
    assert_eq!(v, Verdict::Pass, "{reason}");
}
