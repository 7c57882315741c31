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
//! [`crate::capture::map_file`]): a reader thread walks the records (a
//! record header per frame; it takes the page faults of the mapping), cuts
//! them into numbered batches of [`BATCH`] frames and queues them;
//! `workers` threads take the oldest queued batch, inspect it (borrowing
//! the frames' bytes: nothing is copied) and post the result under its
//! number. The calling thread absorbs the results in batch order. When the
//! next result is not ready yet, it does not wait idle: it takes the oldest
//! queued batch and inspects it itself. So on a capture whose per-frame work dominates (large frames:
//! the ICRC) every thread inspects, and on one whose ordered work dominates
//! (small frames: the judge) the workers keep the calling thread supplied
//! and it only judges; with `workers` = cores − 1 no core is left idle
//! either way. At most `(workers + 1) ×` [`DEPTH`] batches are queued or
//! done and not yet absorbed, so memory stays bounded whatever the
//! capture's size.
//!
//! std's scoped threads, a mutex and three condition variables suffice for
//! this shape (one queue, taken in order; a batch is a few hundred frames,
//! so the lock is taken a few thousand times a second), so no dependency
//! is added. The conversation stage stays on one thread (README, "Speed",
//! says how it could be sharded by connection).

use super::{Inspection, Inspector};
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Frames per batch.
pub const BATCH: usize = 256;

/// Batches queued or done ahead of the judge, per inspecting thread.
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

/// An inspected batch: its jobs and their inspections, in order.
type Done<'b> = (Vec<Job>, Vec<Inspection<'b>>);

/// What the threads share, under one lock.
struct Queue<'b> {
    /// Batches not taken yet, oldest first, with their numbers.
    todo: VecDeque<(u64, Vec<Job>)>,
    /// Results of batches `next ..`, by `number - next`; `None`: not done yet.
    done: VecDeque<Option<Done<'b>>>,
    /// Number of the next batch the calling thread absorbs.
    next: u64,
    /// The reader has queued its last batch.
    exhausted: bool,
    /// The calling thread stopped: the reader and the workers leave.
    closed: bool,
    /// The reader or a worker died (they cannot: reading and inspection do
    /// not panic); the calling thread stops instead of waiting for it.
    broken: bool,
}

struct Shared<'b> {
    queue: Mutex<Queue<'b>>,
    /// Signalled when a batch is queued or the queue closes (workers wait).
    work: Condvar,
    /// Signalled when a batch is queued or done, or the reader ends (the
    /// calling thread waits).
    posted: Condvar,
    /// Signalled when the calling thread takes a result (the reader waits
    /// for room in the window).
    room: Condvar,
}

impl<'b> Shared<'b> {
    fn lock(&self) -> MutexGuard<'_, Queue<'b>> {
        // A panic while the lock is held leaves nothing half-done that the
        // other threads could misread (each update is one push or take), and
        // the scope raises the panic when it joins the thread.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'g>(&self, cv: &Condvar, q: MutexGuard<'g, Queue<'b>>) -> MutexGuard<'g, Queue<'b>> {
        cv.wait(q).unwrap_or_else(PoisonError::into_inner)
    }

    /// Posts the result of batch `number`.
    fn post(&self, number: u64, result: Done<'b>) {
        let mut q = self.lock();
        if let Some(at) = number.checked_sub(q.next)
            && let Some(slot) = usize::try_from(at).ok().and_then(|i| q.done.get_mut(i))
        {
            *slot = Some(result);
        }
        drop(q);
        self.posted.notify_one();
    }

    fn wake_all(&self) {
        self.work.notify_all();
        self.posted.notify_all();
        self.room.notify_all();
    }
}

/// Who holds a [`Closer`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Reader,
    Worker,
    Judge,
}

/// Updates the queue when a thread leaves, also on a panic: the reader's end
/// ends the input, the calling thread's closes the queue (the reader and
/// the workers leave), a panic elsewhere stops the calling thread; so the
/// scope can always join every thread (it then raises the panic).
struct Closer<'s, 'b> {
    shared: &'s Shared<'b>,
    role: Role,
}

impl Drop for Closer<'_, '_> {
    fn drop(&mut self) {
        let mut q = self.shared.lock();
        match self.role {
            Role::Judge => {
                q.closed = true;
                q.todo.clear();
            }
            Role::Reader => q.exhausted = true,
            Role::Worker => {}
        }
        if self.role != Role::Judge && std::thread::panicking() {
            q.broken = true;
        }
        drop(q);
        self.shared.wake_all();
    }
}

/// Inspects every job of a batch.
fn inspect_batch<'b>(bytes: &'b [u8], inspector: &Inspector, jobs: &[Job]) -> Vec<Inspection<'b>> {
    jobs.iter()
        .map(|j| {
            let data = j
                .start
                .checked_add(j.len)
                .and_then(|end| bytes.get(j.start..end))
                .unwrap_or_default();
            inspector.inspect(j.linktype, data)
        })
        .collect()
}

/// Inspects the frames `source` lists on `workers` threads and the calling
/// thread, and hands each inspection to `sink` in frame order, on the
/// calling thread.
///
/// `source` runs on a thread of its own; it appends up to [`BATCH`] jobs
/// to the vector it is given, and leaving it empty ends the input. `sink`
/// returns `false` to stop early (the frames in flight are then dropped,
/// and `source` is not called again). A job whose bytes lie outside `bytes`
/// is inspected as an empty frame. With `workers` 0 the calling thread
/// inspects everything.
pub fn run<'b>(
    bytes: &'b [u8],
    inspector: &Inspector,
    workers: usize,
    mut source: impl FnMut(&mut Vec<Job>) + Send,
    mut sink: impl FnMut(&Job, Inspection<'b>) -> bool,
) {
    let shared = Shared {
        queue: Mutex::new(Queue {
            todo: VecDeque::new(),
            done: VecDeque::new(),
            next: 0,
            exhausted: false,
            closed: false,
            broken: false,
        }),
        work: Condvar::new(),
        posted: Condvar::new(),
        room: Condvar::new(),
    };
    let shared = &shared;
    let window = (workers + 1) * DEPTH;
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let _closer = Closer {
                shared,
                role: Role::Reader,
            };
            for number in 0.. {
                let mut q = shared.lock();
                while !q.closed && q.done.len() >= window {
                    q = shared.wait(&shared.room, q);
                }
                if q.closed {
                    return;
                }
                drop(q);
                let mut batch = Vec::with_capacity(BATCH);
                source(&mut batch);
                if batch.is_empty() {
                    return; // `_closer` ends the input
                }
                let mut q = shared.lock();
                q.todo.push_back((number, batch));
                q.done.push_back(None);
                drop(q);
                shared.work.notify_one();
                shared.posted.notify_one();
            }
        });
        for _ in 0..workers {
            scope.spawn(move || {
                let _closer = Closer {
                    shared,
                    role: Role::Worker,
                };
                loop {
                    let mut q = shared.lock();
                    let (number, jobs) = loop {
                        if let Some(batch) = q.todo.pop_front() {
                            break batch;
                        }
                        if q.closed || (q.exhausted && q.todo.is_empty()) {
                            return;
                        }
                        q = shared.wait(&shared.work, q);
                    };
                    drop(q);
                    let inspected = inspect_batch(bytes, inspector, &jobs);
                    shared.post(number, (jobs, inspected));
                }
            });
        }
        let _closer = Closer {
            shared,
            role: Role::Judge,
        };
        loop {
            // The next result in order: taken when done; else inspect the
            // oldest queued batch here; else wait for the reader or a worker.
            let (jobs, inspected) = {
                let mut q = shared.lock();
                loop {
                    if q.broken {
                        return;
                    }
                    if q.done.is_empty() && q.exhausted {
                        return;
                    }
                    if let Some(result) = q.done.front_mut().and_then(Option::take) {
                        q.done.pop_front();
                        q.next += 1;
                        drop(q);
                        shared.room.notify_one();
                        break result;
                    }
                    if let Some((number, jobs)) = q.todo.pop_front() {
                        drop(q);
                        let inspected = inspect_batch(bytes, inspector, &jobs);
                        shared.post(number, (jobs, inspected));
                        q = shared.lock();
                    } else {
                        q = shared.wait(&shared.posted, q);
                    }
                }
            };
            for (job, inspection) in jobs.iter().zip(inspected) {
                if !sink(job, inspection) {
                    return; // `_closer` closes the queue
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Checker;
    use metaroce_spec::validate::Context;

    /// `n` jobs over `bytes`, each a slice of 3 bytes (not Ethernet frames:
    /// they decode to findings, which is all the pipeline needs).
    fn jobs(n: u64) -> impl FnMut(&mut Vec<Job>) {
        let mut next = 1;
        move |batch: &mut Vec<Job>| {
            while batch.len() < BATCH && next <= n {
                batch.push(Job {
                    number: next,
                    timestamp_ns: next,
                    linktype: 1,
                    start: usize::try_from(next % 61).unwrap_or(0),
                    len: 3,
                });
                next += 1;
            }
        }
    }

    #[test]
    fn every_frame_reaches_the_sink_once_in_order_with_any_worker_count() {
        let bytes = vec![0xAB; 64];
        let checker = Checker::new(Context::default());
        let n = 10 * BATCH as u64 + 17;
        for workers in [0, 1, 2, 5] {
            let mut seen = Vec::new();
            run(&bytes, checker.inspector(), workers, jobs(n), |job, _| {
                seen.push(job.number);
                true
            });
            assert_eq!(seen, (1..=n).collect::<Vec<_>>(), "{workers} workers");
        }
    }

    #[test]
    fn a_sink_that_stops_ends_the_run_without_waiting_for_the_rest() {
        let bytes = vec![0; 64];
        let checker = Checker::new(Context::default());
        for workers in [0, 1, 3] {
            let mut calls = 0;
            run(
                &bytes,
                checker.inspector(),
                workers,
                jobs(100_000),
                |_, _| {
                    calls += 1;
                    calls < 300
                },
            );
            assert_eq!(calls, 300, "{workers} workers");
        }
    }

    #[test]
    fn a_job_outside_the_bytes_is_inspected_as_an_empty_frame() {
        let bytes = vec![0; 8];
        let checker = Checker::new(Context::default());
        let mut source = Some(vec![Job {
            number: 1,
            timestamp_ns: 0,
            linktype: 1,
            start: usize::MAX,
            len: 2,
        }]);
        let mut seen = 0;
        run(
            &bytes,
            checker.inspector(),
            1,
            |batch| batch.extend(source.take().unwrap_or_default()),
            |_, _| {
                seen += 1;
                true
            },
        );
        assert_eq!(seen, 1);
    }
}
