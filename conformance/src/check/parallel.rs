//! Checking one capture on several cores, with the findings and their order
//! of the single-threaded check.
//!
//! The work of `metaroce check` splits in two:
//!
//! - per frame and independent: decoding, the ICRC (a CRC over every byte)
//!   and the per-packet validators ([`Inspector::inspect`]);
//! - ordered: the summary counts and the conversation judge, whose state per
//!   connection depends on every earlier packet ([`Checker::absorb`]).
//!
//! [`run`] is a pipeline over a capture held in memory (a mapped file, see
//! [`crate::capture::map_file`]): the calling thread reads the records
//! (cheap: a record header per frame), cuts them into batches of
//! [`BATCH`] frames and deals the batches to `workers` threads in turn;
//! each worker inspects its batches in order, borrowing the frames' bytes
//! (nothing is copied), and the calling thread takes the results back in
//! the same turn, worker by worker, so the batches come back in frame order
//! without a reordering buffer, and absorbs them one frame at a time.
//! At most [`DEPTH`] batches per worker are in flight, so memory stays
//! bounded whatever the capture's size.
//!
//! std's scoped threads and bounded channels suffice for this fixed shape
//! (no work stealing is needed: batches cost about the same), so no
//! dependency is added. The conversation stage stays on one thread: with
//! more cores than the inspection needs, it could be sharded by connection
//! (responses pair with connections by addresses and QPN), but on the
//! captures measured (README, "Speed") it is not the bottleneck.

use super::{Inspection, Inspector};
use std::collections::VecDeque;
use std::sync::mpsc;

/// Frames per batch dealt to a worker.
pub const BATCH: usize = 256;

/// Batches in flight per worker.
pub const DEPTH: usize = 4;

/// A frame to inspect: its place in the capture and in the shared bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Job {
    /// Frame number (1-based).
    pub number: u64,
    /// Capture time, ns.
    pub timestamp_ns: u64,
    /// Link type.
    pub linktype: u32,
    /// Offset of the frame's first byte in the shared bytes.
    pub start: usize,
    /// Captured length.
    pub len: usize,
}

/// Inspects the frames `source` lists on `workers` threads and hands each
/// inspection to `sink` in frame order, on the calling thread.
///
/// `source` appends up to [`BATCH`] jobs to the vector it is given; leaving
/// it empty ends the input. `sink` returns `false` to stop early (the
/// frames in flight are then dropped). A job whose bytes lie outside
/// `bytes` is inspected as an empty frame.
pub fn run<'b>(
    bytes: &'b [u8],
    inspector: &Inspector,
    workers: usize,
    mut source: impl FnMut(&mut Vec<Job>),
    mut sink: impl FnMut(&Job, Inspection<'b>) -> bool,
) {
    let workers = workers.max(1);
    std::thread::scope(|scope| {
        let mut to_workers = Vec::with_capacity(workers);
        let mut from_workers = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (job_tx, job_rx) = mpsc::sync_channel::<Vec<Job>>(DEPTH);
            let (done_tx, done_rx) = mpsc::channel::<(Vec<Job>, Vec<Inspection<'b>>)>();
            scope.spawn(move || {
                for jobs in job_rx {
                    let inspected = jobs
                        .iter()
                        .map(|j| {
                            let data = j
                                .start
                                .checked_add(j.len)
                                .and_then(|end| bytes.get(j.start..end))
                                .unwrap_or_default();
                            inspector.inspect(j.linktype, data)
                        })
                        .collect();
                    if done_tx.send((jobs, inspected)).is_err() {
                        break;
                    }
                }
            });
            to_workers.push(job_tx);
            from_workers.push(done_rx);
        }
        let mut in_flight = VecDeque::with_capacity(workers * DEPTH);
        let mut next = 0;
        let mut exhausted = false;
        loop {
            while !exhausted && in_flight.len() < workers * DEPTH {
                let mut batch = Vec::with_capacity(BATCH);
                source(&mut batch);
                if batch.is_empty() || to_workers[next].send(batch).is_err() {
                    exhausted = true;
                    break;
                }
                in_flight.push_back(next);
                next = (next + 1) % workers;
            }
            let Some(w) = in_flight.pop_front() else {
                break;
            };
            // A worker that died (it cannot: inspection does not panic) ends
            // the run; its panic is raised when the scope joins it.
            let Ok((jobs, inspected)) = from_workers[w].recv() else {
                break;
            };
            let mut go_on = true;
            for (job, inspection) in jobs.iter().zip(inspected) {
                if !sink(job, inspection) {
                    go_on = false;
                    break;
                }
            }
            if !go_on {
                break;
            }
        }
        // Dropping the senders ends the workers' loops; the scope joins them.
        drop(to_workers);
    });
}
