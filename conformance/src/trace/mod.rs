//! Requirement traceability: for every requirement of SPEC.md, where the
//! model implements it, where the reference transport implements it, and
//! which tests and vectors check it (`metaroce spec coverage`).
//!
//! The rule CI enforces ([`Coverage::violations`]): every MUST and MUST NOT
//! that can be observed needs a model citation and a test citation, unless
//! `spec-model/TRACEABILITY.md` lists it as
//! - an **exception** (`model` or `test`): it cannot be modelled or tested, with the reason; or
//! - a **gap** (`gap`): not done yet, shown as such in every report.
//!
//! The lists must be exact: an entry for a requirement that is covered, or
//! for an ID SPEC.md lacks, is itself a violation, so the lists only shrink.
//! Citing an ID that SPEC.md lacks anywhere is a violation too.

mod exceptions;
mod report;
mod scan;

pub use exceptions::{Exception, ExceptionKind, parse_exceptions};
pub use report::{render_markdown, render_text};
pub use scan::{CitationMap, Citations, Place, citations_in, scan};

use metaroce_spec::requirements::{self, Keyword, Observation, Requirement};
use std::collections::BTreeMap;
use std::path::Path;

/// Path of the exceptions file, from the workspace root.
pub const EXCEPTIONS_FILE: &str = "spec-model/TRACEABILITY.md";

/// One requirement's coverage.
#[derive(Clone, Debug)]
pub struct Row {
    /// The requirement.
    pub req: &'static Requirement,
    /// Where it is cited.
    pub cited: Citations,
    /// Its entries in the exceptions file.
    pub exceptions: Vec<Exception>,
}

impl Row {
    /// Whether CI demands model and test citations for it.
    pub fn is_enforced(&self) -> bool {
        matches!(self.req.keyword, Keyword::Must | Keyword::MustNot)
            && self.req.observation != Observation::None
    }

    fn excepted(&self, kind: ExceptionKind) -> bool {
        self.exceptions.iter().any(|e| e.kind == kind)
    }

    /// `true` when listed as a gap.
    pub fn is_gap(&self) -> bool {
        self.excepted(ExceptionKind::Gap)
    }

    /// What it lacks that CI demands (`"model"`, `"test"`), ignoring gaps and exceptions.
    pub fn missing(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if !self.is_enforced() {
            return out;
        }
        if self.cited.count(Place::Model) == 0 && !self.excepted(ExceptionKind::NoModel) {
            out.push("model");
        }
        if self.cited.count(Place::Test) == 0 && !self.excepted(ExceptionKind::NoTest) {
            out.push("test");
        }
        out
    }

    /// One word for the table: `ok`, `GAP`, `excepted`, `MISSING` or `-` (not enforced).
    pub fn status(&self) -> &'static str {
        if !self.is_enforced() {
            "-"
        } else if self.missing().is_empty() {
            if self.exceptions.is_empty() {
                "ok"
            } else {
                "excepted"
            }
        } else if self.is_gap() {
            "GAP"
        } else {
            "MISSING"
        }
    }
}

/// The coverage of every requirement.
#[derive(Clone, Debug)]
pub struct Coverage {
    /// One row per requirement, in SPEC.md order.
    pub rows: Vec<Row>,
    /// Cited IDs that SPEC.md does not have, with the files citing them.
    pub unknown_citations: BTreeMap<String, Citations>,
    /// Exception entries for IDs SPEC.md does not have.
    pub unknown_exceptions: Vec<Exception>,
}

impl Coverage {
    /// Builds the coverage from a scan and the exceptions.
    pub fn new(mut cited: CitationMap, exceptions: Vec<Exception>) -> Self {
        let mut rows = Vec::new();
        for req in requirements::all() {
            rows.push(Row {
                req,
                cited: cited.remove(req.id).unwrap_or_default(),
                exceptions: exceptions
                    .iter()
                    .filter(|e| e.id == req.id)
                    .cloned()
                    .collect(),
            });
        }
        let unknown_exceptions = exceptions
            .into_iter()
            .filter(|e| requirements::get(&e.id).is_none())
            .collect();
        Coverage {
            rows,
            unknown_citations: cited,
            unknown_exceptions,
        }
    }

    /// Scans the workspace at `root` and reads its exceptions file.
    pub fn of_workspace(root: &Path) -> Result<Self, String> {
        let cited = scan(root).map_err(|e| format!("scanning {}: {e}", root.display()))?;
        let path = root.join(EXCEPTIONS_FILE);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let exceptions = parse_exceptions(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Coverage::new(cited, exceptions))
    }

    /// Everything CI rejects, one line each.
    pub fn violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        for row in &self.rows {
            let missing = row.missing();
            if !missing.is_empty() && !row.is_gap() {
                out.push(format!(
                    "{} ({}) has no {} citation and no exception or gap entry",
                    row.req.id,
                    row.req.keyword,
                    missing.join(" or ")
                ));
            }
            if row.is_gap() && missing.is_empty() {
                out.push(format!(
                    "{} is covered now: remove its gap entry",
                    row.req.id
                ));
            }
            for kind in [ExceptionKind::NoModel, ExceptionKind::NoTest] {
                let place = if kind == ExceptionKind::NoModel {
                    Place::Model
                } else {
                    Place::Test
                };
                if row.excepted(kind) && row.cited.count(place) > 0 {
                    out.push(format!(
                        "{} has a `{}` exception but is cited in {:?} code: remove the exception",
                        row.req.id,
                        kind.as_str(),
                        place
                    ));
                }
            }
        }
        for (id, cited) in &self.unknown_citations {
            let files: Vec<String> = cited
                .files
                .values()
                .flatten()
                .map(|p| p.display().to_string())
                .collect();
            out.push(format!(
                "{id} is cited but SPEC.md has no such requirement ({})",
                files.join(", ")
            ));
        }
        for e in &self.unknown_exceptions {
            out.push(format!(
                "{} is listed in {EXCEPTIONS_FILE} but SPEC.md has no such requirement",
                e.id
            ));
        }
        out
    }

    /// Per-area counts: (area, requirements, enforced, with model, with reference, with tests, with vectors, gaps).
    pub fn by_area(&self) -> Vec<AreaSummary> {
        let mut areas: Vec<AreaSummary> = Vec::new();
        for row in &self.rows {
            let i = match areas.iter().position(|a| a.area == row.req.area) {
                Some(i) => i,
                None => {
                    areas.push(AreaSummary {
                        area: row.req.area,
                        ..AreaSummary::default()
                    });
                    areas.len() - 1
                }
            };
            let a = &mut areas[i];
            a.total += 1;
            a.enforced += usize::from(row.is_enforced());
            a.model += usize::from(row.cited.count(Place::Model) > 0);
            a.reference += usize::from(row.cited.count(Place::Reference) > 0);
            a.test += usize::from(row.cited.count(Place::Test) > 0);
            a.vector += usize::from(row.cited.count(Place::Vector) > 0);
            a.gaps += usize::from(row.status() == "GAP");
        }
        areas
    }
}

/// Counts for one area of SPEC.md.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AreaSummary {
    /// Area, e.g. `BTH`.
    pub area: &'static str,
    /// Requirements.
    pub total: usize,
    /// MUST / MUST NOT requirements that are observable (CI demands model and test).
    pub enforced: usize,
    /// Requirements the model cites.
    pub model: usize,
    /// Requirements the reference transport cites.
    pub reference: usize,
    /// Requirements a test cites.
    pub test: usize,
    /// Requirements a vector cites.
    pub vector: usize,
    /// Enforced requirements listed as gaps (still missing).
    pub gaps: usize,
}

/// Finds the workspace root: the first ancestor of `start` that holds `spec-model/SPEC.md`.
pub fn find_root(start: &Path) -> Option<&Path> {
    start
        .ancestors()
        .find(|d| d.join("spec-model/SPEC.md").is_file())
}
