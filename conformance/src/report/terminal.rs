//! The terminal summary: verdict counts, then each test that did not pass
//! with its reason, then counts by profile and area.

use crate::run::SuiteResult;
use crate::run::verdict::Verdict;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The summary text.
pub fn summary(result: &SuiteResult, verbose: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "IUT: {}", result.iut);
    let _ = writeln!(out, "window margin: {}", result.margin);
    let mut shown = false;
    for t in &result.tests {
        let interesting =
            !matches!(t.verdict, Verdict::Pass | Verdict::Unsupported) || t.attempts > 1;
        if interesting || verbose {
            if !shown {
                let _ = writeln!(out);
                shown = true;
            }
            let _ = writeln!(out, "{:<14} {}  ({})", t.verdict.name(), t.id, t.file);
            if let Some(r) = &t.reason {
                let blame = t
                    .failed_requirement
                    .as_deref()
                    .map(|r| format!("{r}: "))
                    .unwrap_or_default();
                let _ = writeln!(out, "{:<14} {blame}{r}", "");
            }
        }
    }
    let _ = writeln!(out);
    let mut by_area: BTreeMap<(String, String), BTreeMap<Verdict, usize>> = BTreeMap::new();
    for t in &result.tests {
        *by_area
            .entry((t.profile.clone(), t.area.clone()))
            .or_default()
            .entry(t.verdict)
            .or_default() += 1;
    }
    let _ = writeln!(
        out,
        "{:<8} {:<6} {:>5} {:>5} {:>6}",
        "profile", "area", "tests", "pass", "other"
    );
    for ((profile, area), counts) in &by_area {
        let total: usize = counts.values().sum();
        let pass = counts.get(&Verdict::Pass).copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "{profile:<8} {area:<6} {total:>5} {pass:>5} {:>6}",
            total - pass
        );
    }
    let _ = writeln!(out);
    let counts: Vec<String> = Verdict::ALL
        .iter()
        .map(|v| (v, result.count(*v)))
        .filter(|(_, n)| *n > 0)
        .map(|(v, n)| format!("{n} {}", v.name()))
        .collect();
    let _ = writeln!(
        out,
        "{} tests in {:.2} s: {}",
        result.tests.len(),
        result.seconds,
        counts.join(", ")
    );
    out
}
