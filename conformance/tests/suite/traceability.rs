//! The traceability check CI enforces: every observable MUST of SPEC.md is
//! implemented by the model and checked by a test, or is listed in
//! spec-model/TRACEABILITY.md (as an exception with its reason, or as a gap),
//! and those lists hold no stale entries.

use metaroce_conformance::trace::{Coverage, render_text};
use std::path::Path;

#[test]
fn every_must_is_implemented_and_tested_or_listed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let cov = Coverage::of_workspace(root).expect("workspace scans");
    eprintln!("{}", render_text(&cov, false));
    let violations = cov.violations();
    assert!(
        violations.is_empty(),
        "{} traceability violation(s):\n{}",
        violations.len(),
        violations.join("\n")
    );
}
