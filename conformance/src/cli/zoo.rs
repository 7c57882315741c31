//! `metaroce zoo`: the suite against every bug-zoo mutant of the reference
//! transport (reference-impl/ZOO.md): which vectors catch which mutant.
//! The suite proves it can fail: every mutant must FAIL some vector, and
//! the unmutated transport must PASS them all.

use super::run::{BudgetArgs, default_vectors, load_set};
use crate::exit;
use crate::run::iut::builtin::Builtin;
use crate::run::verdict::Verdict;
use crate::run::{RunOptions, SuiteResult, run_suite};
use crate::vector::VectorSet;
use clap::Args;
use metaroce_ref::zoo::Mutant;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Arguments of `metaroce zoo`.
#[derive(Debug, Args)]
pub struct ZooArgs {
    /// List the mutants and stop.
    #[arg(long)]
    pub list: bool,
    /// Only this mutant (repeatable).
    #[arg(long = "mutant", short = 'm')]
    pub mutants: Vec<String>,
    /// The vector set [default: ./vectors, else the repository's vectors/].
    #[arg(long)]
    pub vectors: Option<PathBuf>,
    /// Run only vectors whose id contains this text (repeatable).
    #[arg(long = "filter", short = 'k')]
    pub filters: Vec<String>,
    /// Print the catch table as Markdown.
    #[arg(long)]
    pub markdown: bool,
    /// What one test may cost.
    #[command(flatten)]
    pub budget: BudgetArgs,
}

/// One mutant's row of the catch table.
#[derive(Clone, Debug)]
pub struct Catch {
    /// The mutant.
    pub mutant: Mutant,
    /// Vectors that FAILed against it.
    pub caught_by: Vec<String>,
    /// Tests with another verdict than against the unmutated transport
    /// (besides FAIL): INCONC, ERROR, ...
    pub other: Vec<String>,
}

/// Runs the set against the unmutated transport and each mutant.
pub fn catch_table(
    set: &VectorSet,
    root: &Path,
    mutants: &[Mutant],
    filters: &[String],
    budget: crate::run::budget::Budget,
) -> Result<(SuiteResult, Vec<Catch>), String> {
    let options = RunOptions {
        seed: 1,
        filters: filters.to_vec(),
        budget,
        ..RunOptions::default()
    };
    let run = |mutant: Option<&str>| -> Result<SuiteResult, String> {
        let mut iut = Builtin::new(1, mutant).map_err(|e| e.0)?;
        run_suite(set, root, &mut iut, &options, &mut |_, _, _| {}).map_err(|e| e.0)
    };
    let clean = run(None)?;
    let mut rows = Vec::new();
    for &m in mutants {
        let r = run(Some(m.name()))?;
        let mut row = Catch {
            mutant: m,
            caught_by: Vec::new(),
            other: Vec::new(),
        };
        for (t, c) in r.tests.iter().zip(&clean.tests) {
            if t.verdict == Verdict::Fail && c.verdict != Verdict::Fail {
                row.caught_by.push(t.id.clone());
            } else if t.verdict != c.verdict {
                row.other.push(format!("{} {}", t.verdict, t.id));
            }
        }
        rows.push(row);
    }
    Ok((clean, rows))
}

/// Runs `metaroce zoo`.
pub fn run(args: &ZooArgs) -> u8 {
    let mut mutants = Vec::new();
    for name in &args.mutants {
        match name.parse::<Mutant>() {
            Ok(m) => mutants.push(m),
            Err(e) => {
                eprintln!("metaroce zoo: {e}");
                return exit::BAD_INPUT;
            }
        }
    }
    if mutants.is_empty() {
        mutants = Mutant::ALL.to_vec();
    }
    if args.list {
        for m in &mutants {
            println!(
                "{:<28} {:<4} {:<9} {}  [{}]",
                m.name(),
                format!("{:?}", m.profile()).to_lowercase(),
                format!("{:?}", m.role()).to_lowercase(),
                m.description(),
                m.requirements().join(" ")
            );
        }
        return exit::OK;
    }
    let root = args.vectors.clone().unwrap_or_else(default_vectors);
    let set = match load_set(&root) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let (clean, rows) =
        match catch_table(&set, &root, &mutants, &args.filters, args.budget.budget()) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("metaroce zoo: {e}");
                return exit::ERROR;
            }
        };
    print!("{}", render(&clean, &rows, args.markdown));
    let clean_ok = clean
        .tests
        .iter()
        .all(|t| matches!(t.verdict, Verdict::Pass | Verdict::Unsupported));
    if clean_ok && rows.iter().all(|r| !r.caught_by.is_empty()) {
        exit::OK
    } else {
        exit::FAIL
    }
}

/// The catch table as text or Markdown.
pub fn render(clean: &SuiteResult, rows: &[Catch], markdown: bool) -> String {
    let mut out = String::new();
    let passed = clean.count(Verdict::Pass);
    let _ = writeln!(
        out,
        "unmutated reference transport: {} tests, {passed} PASS, {} UNSUPPORTED, {} other",
        clean.tests.len(),
        clean.count(Verdict::Unsupported),
        clean.tests.len() - passed - clean.count(Verdict::Unsupported)
    );
    if markdown {
        let _ = writeln!(
            out,
            "\n| mutant | profile | breaks | caught by | vectors (first 3) |\n|---|---|---|---:|---|"
        );
    } else {
        let _ = writeln!(out);
    }
    for r in rows {
        let first: Vec<&str> = r.caught_by.iter().take(3).map(String::as_str).collect();
        if markdown {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} |",
                r.mutant.name(),
                format!("{:?}", r.mutant.profile()).to_lowercase(),
                r.mutant.requirements().join(", "),
                r.caught_by.len(),
                first
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        } else {
            let status = if r.caught_by.is_empty() {
                "NOT CAUGHT"
            } else {
                "caught"
            };
            let _ = writeln!(
                out,
                "{:<28} {status:<10} by {:>3} vectors  {}",
                r.mutant.name(),
                r.caught_by.len(),
                first.join(", ")
            );
        }
    }
    let caught = rows.iter().filter(|r| !r.caught_by.is_empty()).count();
    let _ = writeln!(out, "\n{caught} of {} mutants caught", rows.len());
    out
}
