//! The stateful and differential targets' drivers: event sequences read from
//! fuzz input, run against the spec model (`model`), the reference transport
//! (`reference`), or both (`differential`), with the checks each target makes.
//!
//! The fuzz targets run them, and so do the corpus replays of the main
//! workspace (`conformance/tests/fuzzing/fuzz_stateful_corpus.rs`,
//! `conformance/tests/fuzz_differential_zoo.rs`).
//!
//! Every `run` is bounded: at most `MAX_EVENTS` events per input, frames and
//! timers per event capped, and queues that drop their oldest entry when full.

pub mod differential;
pub mod frame;
pub mod input;
pub mod model;
pub mod mp_watch;
pub mod pair;
pub mod reference;
pub mod spec_frame;

/// What one run did, for the corpus replay's check that the committed
/// inputs reach deep state (not only that nothing fails).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Events run.
    pub events: u64,
    /// Work completions with status SUCCESS.
    pub completed_ok: u64,
    /// Frames (or packets) a model judged or a QP model took.
    pub judged: u64,
}

impl Tally {
    /// The sum of two tallies.
    pub fn plus(self, o: Tally) -> Tally {
        Tally {
            events: self.events + o.events,
            completed_ok: self.completed_ok + o.completed_ok,
            judged: self.judged + o.judged,
        }
    }
}
