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
//! [`crate::capture::map_file`]). Its threads (`workers` and the calling
//! one) share a queue of numbered batches of [`BATCH`] frames. A thread
//! that finds room in the window reads the next batch's records (a record
//! header per frame, and the mapping's page faults; one thread at a time)
//! and then inspects that batch itself (borrowing the frames' bytes:
//! nothing is copied), while the bytes the reading touched are still in
//! its core's cache, and posts the result under the batch's number. The
//! calling thread absorbs the results in batch order; when the next one is
//! not ready, it does not wait idle but reads and inspects a batch itself.
//! Absorbed batches' vectors go back to a spare pool for later reads. So on a capture whose per-frame work dominates
//! (large frames: the ICRC) every thread inspects, on one whose ordered
//! work dominates (small frames: the judge) the workers read and inspect
//! and the calling thread only judges, and with `workers` = cores - 1 there
//! is one thread per core. At most `(workers + 1) ×` [`DEPTH`] batches are
//! being inspected or done and not yet absorbed, so memory stays bounded
//! whatever the capture's size.
//!
//! std's scoped threads, two mutexes and two condition variables suffice
//! for this shape (one queue, taken in order; the lock is taken a few
//! times per batch of hundreds of frames), so no dependency is added. The
//! conversation stage stays on one thread (README, "Speed", says how it
//! could be sharded by connection).

use super::{Inspection, Inspector};
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Frames per batch.
pub const BATCH: usize = 512;

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
    /// Batches absorbed, their vectors kept for the next reads: a batch's
    /// inspections are some 250 KB, and allocating them afresh (on one
    /// thread) and freeing them (on another) made the allocator return and
    /// re-fault their pages, twelve times the page faults of the capture.
    spare: Vec<Done<'b>>,
    /// Results of batches `next ..`, by `number - next`; `None`: not done yet.
    done: VecDeque<Option<Done<'b>>>,
    /// Number of the next batch the calling thread absorbs.
    next: u64,
    /// A thread is reading the next batch.
    reading: bool,
    /// The last batch has been read.
    exhausted: bool,
    /// The calling thread stopped: the workers leave.
    closed: bool,
    /// A worker died (it cannot: reading and inspection do not panic); the
    /// calling thread stops instead of waiting for it.
    broken: bool,
}

impl Queue<'_> {
    /// Whether a thread should read the next batch now: nobody else is,
    /// and there is more to read and room in the window.
    fn should_read(&self, window: usize) -> bool {
        !self.reading && !self.exhausted && !self.closed && self.done.len() < window
    }
}

struct Shared<'b> {
    queue: Mutex<Queue<'b>>,
    /// Signalled when reading may go on (a read ended, the window has
    /// room) or the queue closes (workers wait).
    work: Condvar,
    /// Signalled when a batch is queued or done, or the input ends (the
    /// calling thread waits).
    posted: Condvar,
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

    /// Reads the next batch with `source` (the caller saw
    /// [`Queue::should_read`]) and reserves its place in the window; returns
    /// the lock again, and the batch with its number and a vector for its
    /// inspections, for the caller to inspect (`None` at the end of the
    /// input).
    #[allow(clippy::type_complexity)]
    fn read<'g, S: FnMut(&mut Vec<Job>)>(
        &'g self,
        mut q: MutexGuard<'g, Queue<'b>>,
        source: &Mutex<S>,
    ) -> (MutexGuard<'g, Queue<'b>>, Option<(u64, Done<'b>)>) {
        q.reading = true;
        let (mut batch, inspected) = q.spare.pop().unwrap_or_default();
        batch.clear();
        drop(q);
        // Only the thread that set `reading` gets here, so the lock is free.
        let mut src = source.lock().unwrap_or_else(PoisonError::into_inner);
        (*src)(&mut batch);
        let mut q = self.lock();
        drop(src);
        q.reading = false;
        let read = if batch.is_empty() {
            q.spare.push((batch, inspected));
            q.exhausted = true;
            self.work.notify_all();
            self.posted.notify_one();
            None
        } else {
            // Batches are read in order by one thread at a time: this one
            // follows those being inspected or waiting to be judged.
            let number = q.next + q.done.len() as u64;
            q.done.push_back(None);
            // Another thread may read the next one meanwhile.
            self.work.notify_one();
            Some((number, (batch, inspected)))
        };
        (q, read)
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
}

/// Updates the queue when a thread leaves, also on a panic: the calling
/// thread's leaving closes the queue (the workers leave), a worker's panic
/// stops the calling thread; so the scope can always join every thread (it
/// then raises the panic).
struct Closer<'s, 'b> {
    shared: &'s Shared<'b>,
    /// Held by the calling thread.
    judge: bool,
}

impl Drop for Closer<'_, '_> {
    fn drop(&mut self) {
        let mut q = self.shared.lock();
        if self.judge {
            q.closed = true;
        } else if std::thread::panicking() {
            q.broken = true;
        }
        drop(q);
        self.shared.work.notify_all();
        self.shared.posted.notify_all();
    }
}

/// Inspects every job of a batch into `inspected` (a vector used before:
/// its inspections are filled again in place).
fn inspect_batch<'b>(
    bytes: &'b [u8],
    inspector: &Inspector,
    jobs: &[Job],
    inspected: &mut Vec<Inspection<'b>>,
) {
    inspected.truncate(jobs.len());
    inspected.resize_with(jobs.len(), Inspection::default);
    for (j, slot) in jobs.iter().zip(inspected.iter_mut()) {
        let data = j
            .start
            .checked_add(j.len)
            .and_then(|end| bytes.get(j.start..end))
            .unwrap_or_default();
        inspector.inspect_into(j.linktype, data, slot);
    }
}

/// Inspects the frames `source` lists on `workers` threads and the calling
/// thread, and hands each inspection to `sink` in frame order, on the
/// calling thread.
///
/// `source` appends up to [`BATCH`] jobs to the vector it is given, and
/// leaving it empty ends the input; it is called by one thread at a time,
/// whichever runs short of work. `sink` returns `false` to stop early (the
/// frames in flight are then dropped, and `source` is not called again). A
/// job whose bytes lie outside `bytes` is inspected as an empty frame.
/// With `workers` 0 the calling thread does everything.
pub fn run<'b>(
    bytes: &'b [u8],
    inspector: &Inspector,
    workers: usize,
    source: impl FnMut(&mut Vec<Job>) + Send,
    mut sink: impl FnMut(&Job, &mut Inspection<'b>) -> bool,
) {
    let shared = Shared {
        queue: Mutex::new(Queue {
            spare: Vec::new(),
            done: VecDeque::new(),
            next: 0,
            reading: false,
            exhausted: false,
            closed: false,
            broken: false,
        }),
        work: Condvar::new(),
        posted: Condvar::new(),
    };
    let shared = &shared;
    let source = &Mutex::new(source);
    let window = (workers + 1) * DEPTH;
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(move || {
                let _closer = Closer {
                    shared,
                    judge: false,
                };
                loop {
                    let mut q = shared.lock();
                    let (number, (jobs, mut inspected)) = loop {
                        if q.should_read(window) {
                            let read;
                            (q, read) = shared.read(q, source);
                            if let Some(batch) = read {
                                break batch;
                            }
                            continue;
                        }
                        if q.closed || (q.exhausted && !q.reading) {
                            return;
                        }
                        q = shared.wait(&shared.work, q);
                    };
                    drop(q);
                    inspect_batch(bytes, inspector, &jobs, &mut inspected);
                    shared.post(number, (jobs, inspected));
                }
            });
        }
        let _closer = Closer {
            shared,
            judge: true,
        };
        // The vectors of the batch absorbed last, to give back.
        let mut absorbed: Option<Done<'b>> = None;
        loop {
            // The next result in order: taken when done; else read and
            // inspect a batch here; else wait for a worker.
            let (jobs, mut inspected) = {
                let mut q = shared.lock();
                q.spare.extend(absorbed.take());
                loop {
                    if q.broken || (q.done.is_empty() && q.exhausted) {
                        return;
                    }
                    if let Some(result) = q.done.front_mut().and_then(Option::take) {
                        q.done.pop_front();
                        q.next += 1;
                        drop(q);
                        // Room in the window: a waiting worker may read.
                        shared.work.notify_one();
                        break result;
                    }
                    if q.should_read(window) {
                        let read;
                        (q, read) = shared.read(q, source);
                        if let Some((number, (jobs, mut inspected))) = read {
                            drop(q);
                            inspect_batch(bytes, inspector, &jobs, &mut inspected);
                            shared.post(number, (jobs, inspected));
                            q = shared.lock();
                        }
                    } else {
                        q = shared.wait(&shared.posted, q);
                    }
                }
            };
            for (job, inspection) in jobs.iter().zip(inspected.iter_mut()) {
                if !sink(job, inspection) {
                    return; // `_closer` closes the queue
                }
            }
            absorbed = Some((jobs, inspected));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{Checker, Outcome};
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
        let mut seen = Vec::new();
        run(
            &bytes,
            checker.inspector(),
            1,
            |batch| batch.extend(source.take().unwrap_or_default()),
            |job, inspection| {
                seen.push((job.number, inspection.outcome));
                true
            },
        );
        // Undecodable at its first header (not RoCE), as an empty frame is.
        assert_eq!(seen, [(1, Outcome::Undecodable { roce: false })]);
    }
}
