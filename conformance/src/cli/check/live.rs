//! `metaroce check --live IFACE`: the checks of a capture file on a link as
//! it runs (feature `libpcap`). Frames come from libpcap with the BPF filter
//! `udp port 4791` (or the `--port` values); findings are printed and
//! flushed as they are found; the run stops on Ctrl-C or after `--duration`,
//! then the conversation judge's last findings and the summary follow.
//! Opening the interface needs root or `CAP_NET_RAW`; a failure to open it
//! is bad input (exit 4). The loop is [`crate::check::live`].

use super::{CheckArgs, Emitter};
use crate::capture::live::LiveCapture;
use crate::check::live::{LiveEnded, bpf, judge_live};
use crate::check::{Filter, Reported, Tally};
use crate::exit;
use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// libpcap's read timeout (packets are delivered at once: immediate mode).
const POLL_MS: i32 = 100;

/// Runs the live check on `iface`; returns the exit code.
pub(super) fn run(args: &CheckArgs, iface: &str) -> u8 {
    if args.annotate.is_some() {
        eprintln!("metaroce check: --annotate needs a capture file, not --live");
        return exit::BAD_INPUT;
    }
    let opened = LiveCapture::open(iface, &bpf(&super::roce_ports(&args.ports)), POLL_MS)
        .and_then(LiveCapture::nonblocking);
    let mut capture = match opened {
        Ok(c) => c,
        Err(e) => {
            eprintln!("metaroce check: {e}");
            return exit::BAD_INPUT;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    if let Err(e) = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)) {
        eprintln!("metaroce check: cannot catch Ctrl-C ({e}); use --duration");
    }
    let deadline = args
        .duration
        .filter(|d| d.is_finite() && *d >= 0.0)
        .map(|d| Instant::now() + Duration::from_secs_f64(d.min(1e9)));
    let mut checker = match args.checker() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("metaroce check: {e}");
            return exit::BAD_INPUT;
        }
    };
    let stdout = io::stdout();
    let mut em = Emitter {
        out: stdout.lock(),
        format: args.format,
        filter: Filter::new(args.qps.clone(), args.from, args.to),
        tally: Tally::default(),
        notes: None,
    };
    let time = em.filter.clone();
    let ended = judge_live(
        &mut capture,
        &mut checker,
        time,
        &stop,
        deadline,
        &mut |found: &[Reported]| em.emit(found).and_then(|()| em.out.flush()),
    );
    match ended {
        LiveEnded::Stopped => {}
        LiveEnded::Capture(e) => {
            eprintln!("metaroce check: {e}");
            return exit::ERROR;
        }
        LiveEnded::Output(e) => return super::super::output_error("check", &e),
    }
    let last = checker.finish();
    let name = format!("live {iface}");
    if let Err(e) = em
        .emit(&last)
        .and_then(|()| em.conclude(&checker, &name, args.junit.as_deref()))
    {
        return super::super::output_error("check", &e);
    }
    em.verdict()
}
