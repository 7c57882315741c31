//! Budgets: how much one test may cost before the harness gives up on it
//! (docs/budgets.md). A livelocked, wedged or flooding IUT costs that test
//! an ERROR with the reason, never the run.
//!
//! - the **event budget** bounds the work of a virtual-time IUT (the
//!   built-in one): timer firings plus frames it sends, per test;
//! - the **wall-clock budget** bounds every IUT (builtin, raw, pcap, agent)
//!   in real time, per test (per attempt when `--retries` re-runs it).
//!
//! A [`Meter`] counts one test against its [`Budget`]; every error it
//! returns starts with [`EXCEEDED`], so that callers (the fuzzer's HANG
//! findings) can tell a budget from another test-bed failure.

use super::iut::{Endpoint, Iut, IutError, Observed};
use serde_json::Value;
use std::time::{Duration, Instant};

/// What every budget error's text begins with.
pub const EXCEEDED: &str = "budget exceeded: ";

/// The default event budget of one test on a virtual-time IUT. The
/// committed suite passes on the reference transport well within it; a
/// requester whose timer is always due spends it in a few seconds of a
/// debug build (`run::livelock_tests`).
pub const DEFAULT_EVENTS: u64 = 1_000_000;

/// The default wall-clock budget of one test. The longest window of a
/// committed vector is 300 ms, the widest retry margin 200 ms
/// ([`super::RETRY_MARGIN_CAP_NS`]) and an agent call may wait 10 s: a
/// vector of a dozen steps on a real NIC over a link finishes in well under
/// a minute; two minutes leave room for a loaded host.
pub const DEFAULT_WALL: Duration = Duration::from_secs(120);

/// How much one test may cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Timer firings plus frames sent by a virtual-time IUT, per test.
    pub events: u64,
    /// Real time per test, every IUT.
    pub wall: Duration,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            events: DEFAULT_EVENTS,
            wall: DEFAULT_WALL,
        }
    }
}

/// Whether a test's reason (an ERROR's) is a budget's.
pub fn is_exceeded(reason: &str) -> bool {
    reason.starts_with(EXCEEDED)
}

/// One test counted against its budget.
#[derive(Clone, Debug)]
pub struct Meter {
    budget: Budget,
    started: Instant,
    timers: u64,
    frames: u64,
}

impl Default for Meter {
    fn default() -> Self {
        Meter::start(Budget::default())
    }
}

impl Meter {
    /// Starts counting now.
    pub fn start(budget: Budget) -> Self {
        Meter {
            budget,
            started: Instant::now(),
            timers: 0,
            frames: 0,
        }
    }

    /// The budget counted against.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Checks the wall-clock budget.
    pub fn wall(&self) -> Result<(), IutError> {
        let spent = self.started.elapsed();
        if spent > self.budget.wall {
            return Err(IutError(format!(
                "{EXCEEDED}the test ran {:.1} s of wall-clock time, its budget is {} s \
                 (the IUT may be wedged or livelocked; --wall-budget-s)",
                spent.as_secs_f64(),
                self.budget.wall.as_secs()
            )));
        }
        Ok(())
    }

    fn events(&self) -> Result<(), IutError> {
        let n = self.timers + self.frames;
        if n > self.budget.events {
            return Err(IutError(format!(
                "{EXCEEDED}the IUT's timer fired {} times and it sent {} frames in this test \
                 without the test reaching its end: more than the event budget of {} \
                 (the IUT may be livelocked; --event-budget)",
                self.timers, self.frames, self.budget.events
            )));
        }
        // The clock is read once every 1,024 events: cheap, and still
        // within a millisecond of the wall-clock budget.
        if n.is_multiple_of(1_024) {
            self.wall()?;
        }
        Ok(())
    }

    /// Counts one timer firing of a virtual-time IUT.
    pub fn timer(&mut self) -> Result<(), IutError> {
        self.timers += 1;
        self.events()
    }

    /// Counts one frame a virtual-time IUT sent.
    pub fn frame(&mut self) -> Result<(), IutError> {
        self.frames += 1;
        self.events()
    }
}

/// An IUT whose every call first checks the wall-clock budget of the
/// current test: the session's view of any IUT. Each call of a live IUT is
/// bounded by its own deadline (a window, the agent's timeout), so a test
/// overruns its budget by one call at most; the adapter's own loops are
/// bounded by [`Iut::start_budget`].
pub struct Metered<'a> {
    inner: &'a mut dyn Iut,
    meter: Meter,
}

impl<'a> Metered<'a> {
    /// Starts a test on `inner` with `budget`.
    pub fn start(inner: &'a mut dyn Iut, budget: Budget) -> Self {
        inner.start_budget(budget);
        Metered {
            inner,
            meter: Meter::start(budget),
        }
    }
}

impl Iut for Metered<'_> {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn virtual_time(&self) -> bool {
        self.inner.virtual_time()
    }

    fn harness(&self) -> Endpoint {
        self.inner.harness()
    }

    fn agent(&mut self, request: Value) -> Result<Value, IutError> {
        self.meter.wall()?;
        self.inner.agent(request)
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), IutError> {
        self.meter.wall()?;
        self.inner.send(frame)
    }

    fn send_held(&mut self, frame: &[u8]) -> Result<(), IutError> {
        self.meter.wall()?;
        self.inner.send_held(frame)
    }

    fn recv(&mut self, deadline_ns: u64) -> Result<Option<Observed>, IutError> {
        self.meter.wall()?;
        self.inner.recv(deadline_ns)
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    fn advance(&mut self, until_ns: u64) -> Result<(), IutError> {
        self.meter.wall()?;
        self.inner.advance(until_ns)
    }

    fn drain(&mut self) -> Result<Vec<Observed>, IutError> {
        self.meter.wall()?;
        self.inner.drain()
    }

    fn start_budget(&mut self, budget: Budget) {
        self.meter = Meter::start(budget);
        self.inner.start_budget(budget);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_event_budget_ends_a_livelock_with_its_reason() {
        let mut m = Meter::start(Budget {
            events: 10,
            wall: Duration::from_secs(3_600),
        });
        for _ in 0..10 {
            m.timer().expect("within the budget");
        }
        let e = m.timer().expect_err("the 11th event is over the budget");
        assert!(is_exceeded(&e.0), "{e}");
        assert!(e.0.contains("timer fired 11 times"), "{e}");
    }

    #[test]
    fn frames_count_as_events() {
        let mut m = Meter::start(Budget {
            events: 3,
            wall: Duration::from_secs(3_600),
        });
        m.timer().expect("1");
        m.frame().expect("2");
        m.frame().expect("3");
        assert!(m.frame().is_err());
    }

    #[test]
    fn a_spent_wall_clock_budget_is_an_error() {
        let m = Meter::start(Budget {
            events: 10,
            wall: Duration::ZERO,
        });
        std::thread::sleep(Duration::from_millis(2));
        let e = m.wall().expect_err("no time at all");
        assert!(is_exceeded(&e.0) && e.0.contains("wall-clock"), "{e}");
    }

    #[test]
    fn other_reasons_are_not_budgets() {
        assert!(!is_exceeded("calibration failed"));
    }
}
