//! `metaroce-ref fabric`: the built-in scenarios of the fabric simulator
//! (`metaroce_ref::sim::fabric`), each run with Base and with MP on the
//! same leaf–spine fabric, workload and seed, on virtual time. Prints the
//! summary table (Markdown); with `--json`, writes the summaries with the
//! series of the plots and the simulator's own cost (CPU seconds, frames
//! per CPU second); with `--html`, a self-contained page of plots. See
//! docs/fabric.md.
//!
//! Exit status: 0 when every message of every run was delivered exactly
//! once, 1 otherwise, 2 on bad arguments.

use clap::Args;
use metaroce_ref::sim::fabric::Pfc;
use metaroce_ref::sim::fabric::html::{self, Run};
use metaroce_ref::sim::fabric::report::{Plots, plots};
use metaroce_ref::sim::fabric::run::Profile;
use metaroce_ref::sim::fabric::scenario::{NAMES, Size, Summary, builtin, run_profile, table};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `fabric`.
#[derive(Debug, Args)]
pub struct FabricArgs {
    /// Scenario: permutation, allreduce, alltoall, incast, link-failure,
    /// flapping, degraded, mixed, or all.
    #[arg(long)]
    scenario: String,
    /// Hosts (16 per leaf from 64 hosts up, else hosts/4, at least 4).
    #[arg(long, default_value_t = 32)]
    hosts: usize,
    /// Oversubscription of the leaves' uplinks (1 = non-blocking).
    #[arg(long, default_value_t = 1.0)]
    oversub: f64,
    /// Seed of the workload, the fabric and the devices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A quarter of the bytes (the size the tests use).
    #[arg(long)]
    small: bool,
    /// MP reorder threshold K (SPEC §10.3 `mp_reorder_threshold`, 1–64;
    /// default: the SPEC default, 32).
    #[arg(long)]
    mp_reorder: Option<u8>,
    /// Lossless fabric: PFC pauses (XOFF 256 KiB, XON 128 KiB per
    /// ingress port) instead of tail drops.
    #[arg(long)]
    pfc: bool,
    /// Write the summaries (with the series of the plots) as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the HTML report (plots per scenario) here.
    #[arg(long)]
    html: Option<PathBuf>,
}

#[derive(Serialize)]
struct Row {
    #[serde(flatten)]
    summary: Summary,
    /// The series of the HTML report's plots.
    plots: Plots,
    /// CPU seconds of the run (this thread), or wall seconds where the
    /// thread's CPU time is not readable.
    cpu_s: f64,
    /// Frames put on a wire (every hop) per CPU second.
    frames_per_cpu_s: f64,
    /// Virtual time to the job's completion per CPU second, in µs (the
    /// CPU time includes set-up and the exactly-once drain after it).
    sim_us_per_cpu_s: f64,
}

/// This thread's CPU time in seconds (Linux: /proc/thread-self/schedstat).
fn cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// Runs `fabric`.
pub fn main(args: &FabricArgs) -> ExitCode {
    let names: Vec<&str> = if args.scenario == "all" {
        NAMES.to_vec()
    } else {
        vec![args.scenario.as_str()]
    };
    if args.hosts < 4 || args.hosts > 4096 {
        eprintln!("fabric: --hosts must be 4..=4096 (got {})", args.hosts);
        return ExitCode::from(2);
    }
    let size = if args.small { Size::Small } else { Size::Full };
    let mut rows = Vec::new();
    for name in names {
        let Some(mut s) = builtin(name, args.hosts, args.oversub, args.seed, size) else {
            eprintln!(
                "fabric: unknown scenario {name:?} (one of {}, or all)",
                NAMES.join(", ")
            );
            return ExitCode::from(2);
        };
        if let Some(k) = args.mp_reorder {
            s.mp.tuning.reorder_threshold = k;
        }
        if args.pfc {
            s.fabric.pfc = Some(Pfc::default());
        }
        for profile in [Profile::Base, Profile::Mp] {
            eprint!(
                "fabric: {name} {} on {} hosts ... ",
                profile.name(),
                args.hosts
            );
            let (wall, cpu) = (Instant::now(), cpu_seconds());
            let (summary, r) = run_profile(&s, profile, args.seed);
            let spent = match (cpu, cpu_seconds()) {
                (Some(a), Some(b)) => b - a,
                _ => wall.elapsed().as_secs_f64(),
            }
            .max(1e-9);
            eprintln!(
                "{:.1} s CPU, {:.2} M frames/s",
                spent,
                r.frames as f64 / spent / 1e6
            );
            if let Some((t, h, id, status)) = r.first_error {
                eprintln!(
                    "fabric:   {} error completions, the first at {:.1} µs on host {h} (message {id}): {status:?}",
                    r.errors,
                    t as f64 / 1e3
                );
            }
            rows.push(Row {
                plots: plots(&s.fabric, &r),
                cpu_s: (spent * 1000.0).round() / 1000.0,
                frames_per_cpu_s: (r.frames as f64 / spent).round(),
                sim_us_per_cpu_s: (r.jct_ns as f64 / 1e3 / spent).round(),
                summary,
            });
        }
    }
    let summaries: Vec<Summary> = rows.iter().map(|r| r.summary.clone()).collect();
    println!("{}", table(&summaries));
    if let Some(path) = &args.json {
        let text = match serde_json::to_string_pretty(&rows) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("fabric: JSON: {e}");
                return ExitCode::from(1);
            }
        };
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("fabric: writing {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    if let Some(path) = &args.html {
        let runs: Vec<Run> = (rows.iter())
            .map(|r| Run {
                summary: &r.summary,
                plots: &r.plots,
            })
            .collect();
        let command: Vec<String> = std::env::args().collect();
        let page = match html::report(&command.join(" "), &runs) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("fabric: HTML: {e}");
                return ExitCode::from(1);
            }
        };
        if let Err(e) = std::fs::write(path, page) {
            eprintln!("fabric: writing {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    if summaries
        .iter()
        .any(|s| s.messages_lost > 0 || s.duplicated > 0)
    {
        eprintln!("fabric: some messages were not delivered exactly once");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
