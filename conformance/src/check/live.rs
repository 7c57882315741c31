//! How the frames of a live link reach the [`Checker`] (`metaroce check
//! --live IFACE`, feature `libpcap`): libpcap's frames, filtered by BPF to
//! the RoCE ports ([`bpf`]), judged as they arrive until a stop flag is set
//! or a deadline passes ([`judge_live`]); each frame's findings go to the
//! caller's sink at once.

use super::{Checker, Filter, FrameVerdict, Reported};
use crate::capture::live::{LiveCapture, LiveError, ROCE_FILTER};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long to sleep when no packet is waiting, so that the stop flag and
/// the deadline are noticed without spinning.
const IDLE_SLEEP: Duration = Duration::from_millis(2);

/// The BPF filter for the RoCE ports (4791 and the further ports).
pub fn bpf(ports: &[u16]) -> String {
    match ports {
        [4791] | [] => ROCE_FILTER.to_string(),
        ports => {
            let alts: Vec<String> = ports.iter().map(|p| format!("port {p}")).collect();
            format!("udp and ({})", alts.join(" or "))
        }
    }
}

/// How a live check ended.
#[derive(Debug)]
pub enum LiveEnded {
    /// Stopped: the flag was set, the deadline passed or the time range ended.
    Stopped,
    /// Reading from the link failed.
    Capture(LiveError),
    /// The sink failed (writing findings).
    Output(io::Error),
}

/// Judges the frames of `capture` as they arrive, those outside `time`'s
/// range skipped (the check stops after its end), until `stop` is set or
/// `deadline` passes; each frame's findings (when there are some) go to
/// `sink`, whose first error ends the check.
pub fn judge_live<F: FnMut(&[Reported]) -> io::Result<()>>(
    capture: &mut LiveCapture,
    checker: &mut Checker,
    time: Filter,
    stop: &AtomicBool,
    deadline: Option<Instant>,
    sink: &mut F,
) -> LiveEnded {
    let mut time = time;
    while !stop.load(Ordering::SeqCst) && deadline.is_none_or(|d| Instant::now() < d) {
        let frame = match capture.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => {
                std::thread::sleep(IDLE_SLEEP);
                continue;
            }
            Err(e) => return LiveEnded::Capture(e),
        };
        if time.has_time_range() {
            match time.frame(frame.timestamp_ns) {
                FrameVerdict::Take => {}
                FrameVerdict::Skip => continue,
                FrameVerdict::Stop => break,
            }
        }
        let found =
            checker.check_frame(frame.number, frame.timestamp_ns, frame.linktype, frame.data);
        if !found.is_empty()
            && let Err(e) = sink(&found)
        {
            return LiveEnded::Output(e);
        }
    }
    LiveEnded::Stopped
}
