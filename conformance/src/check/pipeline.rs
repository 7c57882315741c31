//! How the frames of a capture file reach the [`Checker`]: the file opened
//! (mapped into memory, or read through a 1 MiB buffer), every frame read in
//! capture order, the time range of a [`Filter`] applied, and the frames
//! judged on this thread ([`judge_capture`] with one thread) or on several
//! ([`super::parallel`]). Each frame's findings go to the caller's sink as
//! they are found, in frame order whatever the number of threads; what the
//! sink does with them (print, count, keep for annotation) is the caller's.

use super::parallel::{BATCH, Job};
use super::{Checker, Filter, FrameVerdict, Inspection, Reported};
use crate::capture::{CaptureError, CaptureReader, map_file};
use indicatif::ProgressBar;
use std::io;
use std::path::Path;

/// The capture reader's buffer.
const READ_BUFFER: usize = 1 << 20;

/// A capture opened for checking: mapped into memory, or read.
pub enum Opened {
    /// Mapped: the frames borrow the mapping (several threads may judge it).
    Mapped(CaptureReader<io::Empty>),
    /// Read through a buffer (not a regular file, or `no_mmap`).
    Streamed(CaptureReader<std::fs::File>),
}

impl Opened {
    /// Opens `file`: mapped when it is a regular file (unless `no_mmap`),
    /// otherwise read through a 1 MiB buffer.
    ///
    /// # Errors
    /// The file cannot be opened, or does not start as a capture.
    pub fn open(file: &Path, no_mmap: bool) -> Result<Opened, CaptureError> {
        let f = std::fs::File::open(file)?;
        if !no_mmap && let Ok(Some(bytes)) = map_file(&f) {
            return Ok(Opened::Mapped(CaptureReader::from_bytes(bytes)?));
        }
        // 1 MiB reads: a quarter of the system calls of the default buffer.
        Ok(Opened::Streamed(CaptureReader::with_capacity(
            f,
            READ_BUFFER,
        )?))
    }
}

/// How reading and judging the frames ended.
#[derive(Debug)]
pub enum Ended {
    /// Every frame judged (or the time range passed).
    Done,
    /// The capture is bad from this record on (frames before it were judged).
    BadInput(CaptureError),
    /// The sink failed (writing findings).
    Output(io::Error),
}

/// Reads and judges every frame of `opened` in capture order, the frames
/// outside `time`'s range skipped (reading stops after its end); each
/// frame's findings (when there are some) go to `sink`, and the first error
/// of `sink` ends the check. A mapped capture is judged on `threads`
/// threads (`threads - 1` workers and this one, [`super::parallel`]), a
/// read one on this thread. `progress` follows the bytes read.
pub fn judge_capture<F>(
    opened: &mut Opened,
    threads: usize,
    checker: &mut Checker,
    time: Filter,
    sink: &mut F,
    progress: Option<&ProgressBar>,
) -> Ended
where
    F: FnMut(&[Reported]) -> io::Result<()> + Send,
{
    let mut time = time;
    match opened {
        Opened::Mapped(reader) if threads > 1 => {
            parallel(reader, threads, checker, &mut time, sink, progress)
        }
        Opened::Mapped(reader) => mapped(reader, checker, &mut time, sink, progress),
        Opened::Streamed(reader) => sequential(reader, checker, &mut time, sink, progress),
    }
}

/// Reads and judges every frame on this thread.
fn sequential<R: io::Read, F: FnMut(&[Reported]) -> io::Result<()>>(
    reader: &mut CaptureReader<R>,
    checker: &mut Checker,
    time: &mut Filter,
    sink: &mut F,
    progress: Option<&ProgressBar>,
) -> Ended {
    loop {
        let frame = match reader.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ended::Done,
            Err(e) => return Ended::BadInput(e),
        };
        if time.has_time_range() {
            match time.frame(frame.timestamp_ns) {
                FrameVerdict::Take => {}
                FrameVerdict::Skip => continue,
                FrameVerdict::Stop => return Ended::Done,
            }
        }
        let found =
            checker.check_frame(frame.number, frame.timestamp_ns, frame.linktype, frame.data);
        if !found.is_empty()
            && let Err(e) = sink(&found)
        {
            return Ended::Output(e);
        }
        if let Some(pb) = progress
            && frame.number % 4096 == 0
        {
            pb.set_position(reader.position());
        }
    }
}

/// Judges every frame of a mapped capture on this thread. The frames borrow
/// the mapping, so one [`Inspection`] serves them all, each decoded where
/// the one before was, not built afresh per frame (a frame and its
/// encapsulation, some 800 bytes: 1.3 M of 231 M instructions on 10 MB of
/// `send256`).
fn mapped<F: FnMut(&[Reported]) -> io::Result<()>>(
    reader: &mut CaptureReader<io::Empty>,
    checker: &mut Checker,
    time: &mut Filter,
    sink: &mut F,
    progress: Option<&ProgressBar>,
) -> Ended {
    let Some(shared) = reader.shared_bytes().cloned() else {
        return sequential(reader, checker, time, sink, progress);
    };
    let bytes: &[u8] = (*shared).as_ref();
    let mut inspection = Inspection::default();
    loop {
        let (number, timestamp_ns, linktype, start, len) = match reader.next_frame() {
            Ok(Some(f)) => (
                f.number,
                f.timestamp_ns,
                f.linktype,
                f.data_offset,
                f.data.len(),
            ),
            Ok(None) => return Ended::Done,
            Err(e) => return Ended::BadInput(e),
        };
        if time.has_time_range() {
            match time.frame(timestamp_ns) {
                FrameVerdict::Take => {}
                FrameVerdict::Skip => continue,
                FrameVerdict::Stop => return Ended::Done,
            }
        }
        // The reader's frames lie in its bytes; one that did not would be
        // judged as an empty frame (as `parallel` does).
        let data = usize::try_from(start)
            .ok()
            .and_then(|s| bytes.get(s..s.checked_add(len)?))
            .unwrap_or_default();
        let found = checker.check_frame_in(number, timestamp_ns, linktype, data, &mut inspection);
        if !found.is_empty()
            && let Err(e) = sink(&found)
        {
            return Ended::Output(e);
        }
        if let Some(pb) = progress
            && number % 4096 == 0
        {
            pb.set_position(reader.position());
        }
    }
}

/// Judges every frame of a mapped capture on `threads` threads (`threads -
/// 1` workers and this one): each decodes, verifies and judges batches of
/// frames, the judging in frame order ([`super::parallel`]).
fn parallel<F: FnMut(&[Reported]) -> io::Result<()> + Send>(
    reader: &mut CaptureReader<io::Empty>,
    threads: usize,
    checker: &mut Checker,
    time: &mut Filter,
    sink: &mut F,
    progress: Option<&ProgressBar>,
) -> Ended {
    let Some(shared) = reader.shared_bytes().cloned() else {
        return sequential(reader, checker, time, sink, progress);
    };
    let bytes: &[u8] = (*shared).as_ref();
    let inspector = checker.inspector().clone();
    let mut read_error = None;
    let mut output_error = None;
    let mut stopped = false;
    let source = |batch: &mut Vec<Job>| {
        while !stopped && batch.len() < BATCH {
            let frame = match reader.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    read_error = Some(e);
                    break;
                }
            };
            if time.has_time_range() {
                match time.frame(frame.timestamp_ns) {
                    FrameVerdict::Take => {}
                    FrameVerdict::Skip => continue,
                    FrameVerdict::Stop => {
                        stopped = true;
                        break;
                    }
                }
            }
            batch.push(Job {
                number: frame.number,
                timestamp_ns: frame.timestamp_ns,
                linktype: frame.linktype,
                start: usize::try_from(frame.data_offset).unwrap_or(usize::MAX),
                len: frame.data.len(),
            });
            if let Some(pb) = progress
                && frame.number % 4096 == 0
            {
                pb.set_position(reader.position());
            }
        }
    };
    let judge = |job: &Job, inspection: &mut _| {
        let found = checker.absorb(job.number, job.timestamp_ns, inspection);
        if !found.is_empty()
            && let Err(e) = sink(&found)
        {
            output_error = Some(e);
            return false;
        }
        true
    };
    super::parallel::run(bytes, &inspector, threads.saturating_sub(1), source, judge);
    match (output_error, read_error) {
        (Some(e), _) => Ended::Output(e),
        (None, Some(e)) => Ended::BadInput(e),
        (None, None) => Ended::Done,
    }
}
