//! The crc32fast baseline of the `metaroce check` speed benchmark
//! (`conformance/bench/check_speed.sh`): loads every frame of a capture into
//! memory (not timed), then times `crc32fast::hash` over each frame's bytes,
//! one hash per frame as an ICRC check does, `REPS` times (default 1).
//! Prints one line per pass: `crc32fast FRAMES BYTES SECONDS CRC CPU_SECONDS`
//! (elapsed time, then the thread's CPU time from `/proc/thread-self/schedstat`,
//! which a shared machine's preemption does not inflate; `-` where it is
//! not available).
//!
//! `cargo run --release -p metaroce-conformance --example crc_baseline -- FILE [REPS]`

use metaroce_conformance::capture::CaptureReader;
use std::process::ExitCode;
use std::time::Instant;

/// This thread's time on a CPU so far, in ns (Linux).
fn cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: crc_baseline FILE [REPS]");
        return ExitCode::from(4);
    };
    let reps: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let mut reader = match CaptureReader::open(&path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("crc_baseline: {path}: {e}");
            return ExitCode::from(4);
        }
    };
    // All frame bytes back to back, and where each frame ends.
    let mut bytes = Vec::new();
    let mut ends = Vec::new();
    loop {
        match reader.next_frame() {
            Ok(Some(f)) => {
                bytes.extend_from_slice(f.data);
                ends.push(bytes.len());
            }
            Ok(None) => break,
            Err(e) => {
                eprintln!("crc_baseline: {path}: {e}");
                return ExitCode::from(4);
            }
        }
    }
    for _ in 0..reps {
        let cpu_start = cpu_ns();
        let start = Instant::now();
        let mut acc = 0u32;
        let mut from = 0;
        for &end in &ends {
            acc ^= crc32fast::hash(&bytes[from..end]);
            from = end;
        }
        let secs = start.elapsed().as_secs_f64();
        let cpu = match (cpu_start, cpu_ns()) {
            (Some(a), Some(b)) => format!("{:.6}", b.saturating_sub(a) as f64 / 1e9),
            _ => "-".to_string(),
        };
        println!(
            "crc32fast {} {} {secs:.6} {acc:08x} {cpu}",
            ends.len(),
            bytes.len()
        );
    }
    ExitCode::SUCCESS
}
