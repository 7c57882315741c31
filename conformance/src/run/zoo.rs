//! The bug zoo's catch table (`metaroce zoo`, reference-impl/ZOO.md): the
//! suite against the unmutated reference transport and against each of its
//! mutants, and which vectors catch which mutant. The suite proves it can
//! fail: every mutant must FAIL some vector, and the unmutated transport
//! must PASS them all ([`all_caught`]).

use super::budget::Budget;
use super::iut::builtin::Builtin;
use super::verdict::Verdict;
use super::{RunOptions, SuiteResult, run_suite};
use crate::vector::VectorSet;
use metaroce_ref::zoo::Mutant;
use std::fmt::Write as _;
use std::path::Path;

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
    budget: Budget,
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

/// Whether the suite passes the zoo: every test PASS or UNSUPPORTED
/// against the unmutated transport, and every mutant caught by some vector.
pub fn all_caught(clean: &SuiteResult, rows: &[Catch]) -> bool {
    let clean_ok = clean
        .tests
        .iter()
        .all(|t| matches!(t.verdict, Verdict::Pass | Verdict::Unsupported));
    clean_ok && rows.iter().all(|r| !r.caught_by.is_empty())
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
