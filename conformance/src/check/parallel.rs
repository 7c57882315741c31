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
//! [`crate::capture::map_file`]), on `workers` threads and the calling one,
//! all alike. A thread reads the next batch of [`BATCH`] frames (a record
//! header per frame and the mapping's page faults; one thread at a time,
//! so batches are numbered in capture order), inspects it (borrowing the
//! frames' bytes: nothing is copied), waits for its turn, and hands the
//! inspections to the judge itself (`sink`, taken by one thread at a time,
//! in batch order), then reads another. So the inspections are judged on
//! the core that wrote them, from its cache: when one thread judged what
//! the others inspected, pulling every inspection's cache lines from
//! another core cost the judging thread half as much again as its judging
//! (README, "Speed"). What moves between cores instead is the judge's
//! state, once per batch. The judge's turns form a chain while the other
//! threads inspect the next batches, so on two cores a capture whose
//! judging and inspecting cost about the same (small frames) takes about
//! as long as its judging alone, and one whose inspecting dominates (large
//! frames: the ICRC) is inspected on every core. Each thread holds one
//! batch at a time, so memory stays bounded whatever the capture's size.
//!
//! std's scoped threads, two mutexes and two condition variables suffice
//! for this shape (the locks are taken a few times per batch of hundreds
//! of frames), so no dependency is added. The judge itself stays one
//! state machine (README, "Speed", says how it could be sharded by
//! connection).

use super::{Inspection, Inspector};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Frames per batch.
pub const BATCH: usize = 512;

/// How long a thread waiting for its turn to judge watches for it before
/// it sleeps ([`Shared::await_turn`]).
const SPIN: Duration = Duration::from_micros(200);

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

/// A batch: its jobs and their inspections, in order.
type Batch<'b> = (Vec<Job>, Vec<Inspection<'b>>);

/// What the threads share, under one lock.
struct Queue<'b> {
    /// Vectors of batches judged, for the next reads: a batch's inspections
    /// are some 250 KB, and allocating them afresh made the allocator
    /// return and re-fault their pages.
    spare: Vec<Batch<'b>>,
    /// Batches read so far: the number of the next one.
    read: u64,
    /// Number of the next batch to judge.
    next: u64,
    /// A thread is reading the next batch.
    reading: bool,
    /// The last batch has been read.
    exhausted: bool,
    /// The sink stopped, or a thread died (it cannot: reading, inspection
    /// and the sink do not panic): every thread leaves.
    closed: bool,
}

struct Shared<'b> {
    queue: Mutex<Queue<'b>>,
    /// Signalled when a read ends or the queue closes (threads waiting to read).
    work: Condvar,
    /// Signalled when a batch has been judged or the queue closes (threads
    /// waiting for their turn).
    turn: Condvar,
    /// [`Queue::next`] and [`Queue::closed`], for waiting without the lock.
    next: AtomicU64,
    closed: AtomicBool,
}

impl<'b> Shared<'b> {
    /// Copies `next` and `closed` where [`Self::await_turn`] watches them
    /// (under the lock, so a thread that sleeps sees them too).
    fn publish(&self, q: &Queue<'b>) {
        self.next.store(q.next, Ordering::Release);
        self.closed.store(q.closed, Ordering::Release);
    }

    fn lock(&self) -> MutexGuard<'_, Queue<'b>> {
        // A panic while the lock is held leaves nothing half-done that the
        // other threads could misread (each update is one assignment), and
        // the scope raises the panic when it joins the thread.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'g>(&self, cv: &Condvar, q: MutexGuard<'g, Queue<'b>>) -> MutexGuard<'g, Queue<'b>> {
        cv.wait(q).unwrap_or_else(PoisonError::into_inner)
    }

    /// The next batch for this thread to inspect, with its number: read
    /// with `source` when no other thread is reading (else waits for it);
    /// `None` when the input has ended or the queue closed.
    fn take<S: FnMut(&mut Vec<Job>)>(&self, source: &Mutex<S>) -> Option<(u64, Batch<'b>)> {
        let mut q = self.lock();
        loop {
            if q.closed || (q.exhausted && !q.reading) {
                return None;
            }
            if !q.reading && !q.exhausted {
                break;
            }
            q = self.wait(&self.work, q);
        }
        q.reading = true;
        let (mut jobs, inspected) = q.spare.pop().unwrap_or_default();
        drop(q);
        jobs.clear();
        // Only the thread that set `reading` gets here, so the lock is free.
        let mut src = source.lock().unwrap_or_else(PoisonError::into_inner);
        (*src)(&mut jobs);
        drop(src);
        let mut q = self.lock();
        q.reading = false;
        let taken = if jobs.is_empty() {
            q.spare.push((jobs, inspected));
            q.exhausted = true;
            None
        } else {
            q.read += 1;
            Some((q.read - 1, (jobs, inspected)))
        };
        drop(q);
        self.work.notify_all();
        taken
    }

    /// Waits until batch `number` is the next to judge; `false` if the
    /// queue closed meanwhile.
    ///
    /// The wait is on the judges' chain: the thread judging the batch
    /// before will soon be done (a batch of small frames takes some 150 µs
    /// to judge). Waking a thread asleep on a condition variable took tens
    /// of microseconds on a virtual machine, for each of hundreds of
    /// batches, so the thread first watches `next` for up to [`SPIN`] (it
    /// has nothing else to do: it holds its batch), then sleeps.
    fn await_turn(&self, number: u64) -> bool {
        let started = Instant::now();
        let mut spins = 0u32;
        while self.next.load(Ordering::Acquire) != number && !self.closed.load(Ordering::Acquire) {
            std::hint::spin_loop();
            spins += 1;
            if !spins.is_multiple_of(64) {
                continue;
            }
            // A thread of ours that is runnable on this core (more threads
            // than cores) goes first.
            std::thread::yield_now();
            if started.elapsed() > SPIN {
                let mut q = self.lock();
                while q.next != number && !q.closed {
                    q = self.wait(&self.turn, q);
                }
                return !q.closed;
            }
        }
        !self.closed.load(Ordering::Acquire)
    }

    /// Batch `number`'s turn is over: the next one's begins; `go` false
    /// closes the queue. Its vectors are kept for a later read.
    fn end_turn(&self, batch: Batch<'b>, go: bool) {
        let mut q = self.lock();
        q.next += 1;
        q.closed |= !go;
        self.publish(&q);
        q.spare.push(batch);
        drop(q);
        self.turn.notify_all();
        if !go {
            self.work.notify_all();
        }
    }
}

/// Closes the queue when a thread leaves on a panic, so that the others do
/// not wait for its turn forever and the scope can join every thread (it
/// then raises the panic).
struct Closer<'s, 'b>(&'s Shared<'b>);

impl Drop for Closer<'_, '_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut q = self.0.lock();
            q.closed = true;
            self.0.publish(&q);
            drop(q);
            self.0.work.notify_all();
            self.0.turn.notify_all();
        }
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
/// thread, and hands each inspection to `sink` in frame order (on whichever
/// thread inspected it, one thread at a time).
///
/// `source` appends up to [`BATCH`] jobs to the vector it is given, and
/// leaving it empty ends the input; it is called by one thread at a time,
/// whichever is out of work. `sink` returns `false` to stop early (the
/// frames in flight are then dropped, and `source` is not called again). A
/// job whose bytes lie outside `bytes` is inspected as an empty frame.
/// With `workers` 0 the calling thread does everything.
pub fn run<'b>(
    bytes: &'b [u8],
    inspector: &Inspector,
    workers: usize,
    source: impl FnMut(&mut Vec<Job>) + Send,
    sink: impl FnMut(&Job, &mut Inspection<'b>) -> bool + Send,
) {
    let shared = &Shared {
        queue: Mutex::new(Queue {
            spare: Vec::new(),
            read: 0,
            next: 0,
            reading: false,
            exhausted: false,
            closed: false,
        }),
        work: Condvar::new(),
        turn: Condvar::new(),
        next: AtomicU64::new(0),
        closed: AtomicBool::new(false),
    };
    let source = &Mutex::new(source);
    let sink = &Mutex::new(sink);
    let work = move || {
        let _closer = Closer(shared);
        while let Some((number, (jobs, mut inspected))) = shared.take(source) {
            inspect_batch(bytes, inspector, &jobs, &mut inspected);
            if !shared.await_turn(number) {
                return;
            }
            // Its turn: no other thread holds the sink.
            let mut judge = sink.lock().unwrap_or_else(PoisonError::into_inner);
            let go = jobs
                .iter()
                .zip(inspected.iter_mut())
                .all(|(job, inspection)| (*judge)(job, inspection));
            drop(judge);
            shared.end_turn((jobs, inspected), go);
            if !go {
                return;
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(work);
        }
        work();
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
