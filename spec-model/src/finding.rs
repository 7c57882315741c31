//! A finding: a requirement an observation breaks (or an informational note about it).
// traceability: ignore-file (IDs in this file are data, not citations)

use crate::requirements::{self, Requirement, Severity};
use core::fmt;

/// One finding of the model or a validator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The requirement (`MR-<AREA>-<n>`).
    pub id: &'static str,
    /// From the requirement's keyword: MUST → `Must`, SHOULD → `Should`, MAY → `Info`.
    pub severity: Severity,
    /// What was observed and why it breaks the requirement, in one line.
    pub message: String,
}

impl Finding {
    /// A finding against requirement `id`, with the severity its keyword gives.
    ///
    /// `id` is a constant in the model's code; the traceability test checks that
    /// every cited ID exists in SPEC.md. An unknown ID (a bug, never input) is
    /// reported as a MUST so it cannot hide.
    pub fn new(id: &'static str, message: impl Into<String>) -> Self {
        let severity = requirements::get(id).map_or(Severity::Must, |r| r.keyword.severity());
        Finding {
            id,
            severity,
            message: message.into(),
        }
    }

    /// An informational note filed under requirement `id`, whatever its keyword.
    pub fn info(id: &'static str, message: impl Into<String>) -> Self {
        Finding {
            id,
            severity: Severity::Info,
            message: message.into(),
        }
    }

    /// The requirement, from the registry.
    pub fn requirement(&self) -> Option<&'static Requirement> {
        requirements::get(self.id)
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} [{}] {}",
            self.id,
            self.severity.as_str(),
            self.message
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severity_follows_the_keyword() {
        assert_eq!(Finding::new("MR-QP-1", "x").severity, Severity::Must);
        let should = requirements::all()
            .iter()
            .find(|r| r.keyword == requirements::Keyword::Should)
            .unwrap();
        assert_eq!(Finding::new(should.id, "x").severity, Severity::Should);
        assert_eq!(Finding::new("MR-NOPE-9", "x").severity, Severity::Must);
    }
}
