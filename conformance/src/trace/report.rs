//! Renders the coverage table.

use super::{Coverage, Place};
use std::fmt::Write;

/// The per-area summary, then one line per requirement.
pub fn render_text(cov: &Coverage, all_rows: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<7} {:>5} {:>8} {:>6} {:>9} {:>6} {:>8} {:>5}",
        "area", "reqs", "enforced", "model", "reference", "tests", "vectors", "gaps"
    );
    let mut total = super::AreaSummary {
        area: "total",
        ..Default::default()
    };
    for a in cov.by_area() {
        let _ = writeln!(
            out,
            "{:<7} {:>5} {:>8} {:>6} {:>9} {:>6} {:>8} {:>5}",
            a.area, a.total, a.enforced, a.model, a.reference, a.test, a.vector, a.gaps
        );
        total.total += a.total;
        total.enforced += a.enforced;
        total.model += a.model;
        total.reference += a.reference;
        total.test += a.test;
        total.vector += a.vector;
        total.gaps += a.gaps;
    }
    let _ = writeln!(
        out,
        "{:<7} {:>5} {:>8} {:>6} {:>9} {:>6} {:>8} {:>5}",
        total.area,
        total.total,
        total.enforced,
        total.model,
        total.reference,
        total.test,
        total.vector,
        total.gaps
    );
    if all_rows {
        out.push('\n');
        let _ = writeln!(
            out,
            "{:<10} {:<10} {:<10} {:>5} {:>9} {:>5} {:>7}  status",
            "id", "keyword", "observed", "model", "reference", "tests", "vectors"
        );
        for row in &cov.rows {
            let c = cells(row);
            let _ = writeln!(
                out,
                "{:<10} {:<10} {:<10} {:>5} {:>9} {:>5} {:>7}  {}",
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
            );
        }
    }
    let violations = cov.violations();
    if !violations.is_empty() {
        let _ = writeln!(out, "\n{} violation(s):", violations.len());
        for v in violations {
            let _ = writeln!(out, "  {v}");
        }
    }
    out
}

/// A Markdown table of every requirement, for documents.
pub fn render_markdown(cov: &Coverage) -> String {
    let mut out = String::from(
        "| ID | keyword | observed | model | reference | tests | vectors | status |\n|---|---|---|---|---|---|---|---|\n",
    );
    for row in &cov.rows {
        let _ = writeln!(out, "| {} |", cells(row).join(" | "));
    }
    out
}

/// One requirement's cells: ID, keyword, observation, the citation counts
/// (model, reference, tests, vectors) and the status.
fn cells(row: &super::Row) -> [String; 8] {
    [
        row.req.id.to_string(),
        row.req.keyword.as_str().to_string(),
        row.req.observation.as_str().to_string(),
        row.cited.count(Place::Model).to_string(),
        row.cited.count(Place::Reference).to_string(),
        row.cited.count(Place::Test).to_string(),
        row.cited.count(Place::Vector).to_string(),
        row.status().to_string(),
    ]
}
