//! The JSON report, schema version 1 (documented in `vectors/README.md`).

use super::Digests;
use crate::run::SuiteResult;
use crate::run::verdict::Verdict;
use serde_json::{Value, json};

/// Version of the JSON report's schema.
pub const SCHEMA_VERSION: u32 = 1;

/// The report as a JSON value.
pub fn report_json(result: &SuiteResult, digests: &Digests) -> Value {
    let counts: serde_json::Map<String, Value> = Verdict::ALL
        .iter()
        .map(|v| (v.name().to_string(), json!(result.count(*v))))
        .collect();
    json!({
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "metaroce", "version": env!("CARGO_PKG_VERSION")},
        "iut": result.iut,
        "profile": result.profile,
        "digests": digests,
        "window_margin": result.margin,
        "seconds": result.seconds,
        "counts": counts,
        "exit_code": result.exit_code(),
        "tests": result.tests,
    })
}
