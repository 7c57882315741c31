//! `metaroce fuzz`: the live network fuzzer (see [`crate::live_fuzz`] and
//! conformance/FUZZ.md), and `metaroce fuzz export`.

use super::run::{BudgetArgs, IutArgs, default_vectors, load_set};
use crate::exit;
use crate::live_fuzz::{self, FindingKind, FuzzOptions, export};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `metaroce fuzz`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct FuzzArgs {
    /// `export`: a finding → a suite vector.
    #[command(subcommand)]
    pub command: Option<FuzzCommand>,
    /// The implementation under test and how to reach it.
    #[command(flatten)]
    pub target: IutArgs,
    /// Stop after this many stimuli.
    #[arg(long, default_value_t = 2_000)]
    pub packets: u64,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 60)]
    pub duration: u64,
    /// Seed of every random choice (a run is reproduced by its seed).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Stimuli per batch: the oracles run after every batch.
    #[arg(long, default_value_t = 8)]
    pub batch: usize,
    /// Stop after this many findings.
    #[arg(long, default_value_t = 5)]
    pub max_findings: usize,
    /// Replays a finding's minimisation may spend.
    #[arg(long, default_value_t = 64)]
    pub max_replays: usize,
    /// Where findings are saved (created only when there is one).
    #[arg(long, default_value = "metaroce-fuzz")]
    pub out: PathBuf,
    /// The vectors whose `send` steps seed the mutations
    /// [default: ./vectors, else the repository's vectors/].
    #[arg(long)]
    pub vectors: Option<PathBuf>,
    /// Extra time for every window on a live IUT, in µs (default: measured).
    #[arg(long)]
    pub margin_us: Option<u64>,
    /// What one batch may cost (spent: a HANG finding).
    #[command(flatten)]
    pub budget: BudgetArgs,
}

/// Subcommands of `metaroce fuzz`.
#[derive(Debug, Subcommand)]
pub enum FuzzCommand {
    /// Turn a finding (its folder, or its reproducer.yaml) into a vector of the suite.
    Export(ExportArgs),
}

/// Arguments of `metaroce fuzz export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A finding folder (`metaroce-fuzz/001-memory`) or a reproducer YAML file.
    pub finding: PathBuf,
    /// Where the vector goes [default: the vectors folder's base/fuzz/].
    #[arg(long)]
    pub to: Option<PathBuf>,
    /// The vector's id (default: the finding's, `fuzz.KIND.HASH`).
    #[arg(long)]
    pub id: Option<String>,
}

/// Runs `metaroce fuzz` or `metaroce fuzz export`.
pub fn run(args: &FuzzArgs) -> u8 {
    if let Some(FuzzCommand::Export(e)) = &args.command {
        return run_export(e);
    }
    if args.packets == 0 || args.batch == 0 {
        eprintln!("metaroce fuzz: --packets and --batch must be at least 1");
        return exit::BAD_INPUT;
    }
    let root = args.vectors.clone().unwrap_or_else(default_vectors);
    let set = match load_set(&root) {
        Ok(set) => set,
        Err(code) => return code,
    };
    let (seeds, _skipped) = live_fuzz::seeds::from_vectors(&set);
    // The builtin IUT is seeded as `metaroce run` seeds it by default, so
    // that a reproducer replays under `metaroce run` as it ran here.
    let mut iut = match args.target.open(1) {
        Ok(iut) => iut,
        Err(e) => {
            eprintln!("metaroce fuzz: {e}");
            return exit::ERROR;
        }
    };
    let options = FuzzOptions {
        packets: args.packets,
        duration: Duration::from_secs(args.duration),
        seed: args.seed,
        batch: args.batch,
        max_replays: args.max_replays,
        max_findings: args.max_findings.max(1),
        margin_ns: args.margin_us.map(|us| us * 1_000),
        budget: args.budget.budget(),
    };
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(args.packets);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} packets {elapsed} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    });
    let mut on_progress = |sent: u64, findings: usize| {
        if let Some(bar) = &bar {
            bar.set_position(sent);
            bar.set_message(format!("{findings} finding(s)"));
        }
    };
    let summary = match live_fuzz::fuzz(iut.as_mut(), seeds, &options, &mut on_progress) {
        Ok(s) => s,
        Err(e) => {
            if let Some(bar) = &bar {
                bar.abandon();
            }
            eprintln!("metaroce fuzz: {}: {e}", iut.describe());
            return exit::ERROR;
        }
    };
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    println!(
        "metaroce fuzz: {}: {} packets in {} batches, {:.2} s, {:.0} packets/s (seed {}, {} seeds from {})",
        summary.iut,
        summary.packets,
        summary.batches,
        summary.seconds,
        summary.packets_per_second(),
        args.seed,
        summary.seeds,
        root.display()
    );
    let kinds: Vec<String> = FindingKind::ALL
        .iter()
        .map(|k| format!("{k} {}", summary.count(*k)))
        .collect();
    println!("findings: {}", kinds.join(", "));
    let mut code = exit::OK;
    for (i, f) in summary.findings.iter().enumerate() {
        code = exit::FAIL;
        let saved = match export::save(&args.out, i + 1, f, &summary.iut) {
            Ok(dir) => dir.display().to_string(),
            Err(e) => {
                eprintln!("metaroce fuzz: saving finding {}: {e}", i + 1);
                return exit::ERROR;
            }
        };
        println!(
            "  #{} {} after {} packets: {}: {}\n     {} of {} stimuli after {} replays, reproducer {} → {saved}",
            i + 1,
            f.kind,
            f.after_packets,
            f.requirement,
            f.reason,
            f.reproducer_len(),
            f.batch.len(),
            f.replays,
            if f.reproduced {
                "FAILs"
            } else {
                "does NOT fail again"
            }
        );
    }
    if !summary.errors.is_empty() {
        println!(
            "{} batch(es) could not be judged (test bed errors, not findings); first: {}",
            summary.errors.len(),
            summary.errors[0]
        );
    }
    code
}

fn run_export(e: &ExportArgs) -> u8 {
    let to =
        e.to.clone()
            .unwrap_or_else(|| default_vectors().join("base").join("fuzz"));
    match export::export(&e.finding, &to, e.id.as_deref()) {
        Ok(path) => {
            println!("{}", path.display());
            exit::OK
        }
        Err(err) => {
            eprintln!("metaroce fuzz export: {err}");
            exit::BAD_INPUT
        }
    }
}
