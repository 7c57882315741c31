//! The JSON report, schema version 1. Its JSON Schema is generated from
//! [`JsonReport`] and committed as `conformance/report-schema.json`
//! (`metaroce vectors report-schema`; a test fails when it is stale).

use super::Digests;
use crate::run::SuiteResult;
use crate::run::verdict::{TestResult, Verdict};
use schemars::JsonSchema;
use serde::Serialize;
use std::collections::BTreeMap;

/// Version of the JSON report's schema: bumped on any change that is not
/// a new optional field.
pub const SCHEMA_VERSION: u32 = 1;

/// The tool that wrote a report.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Tool {
    /// `metaroce`.
    pub name: String,
    /// Its version.
    pub version: String,
}

/// The JSON report of `metaroce run`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct JsonReport<'a> {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The tool.
    pub tool: Tool,
    /// The implementation under test and the adapter that reached it.
    pub iut: &'a str,
    /// The capability profile used (the agent's, with the user's overrides).
    pub profile: &'a serde_json::Map<String, serde_json::Value>,
    /// SHA-256 of the vector set and the profile.
    pub digests: &'a Digests,
    /// The window margin on a live IUT, and how it was found.
    pub window_margin: &'a str,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
    /// Tests per verdict name (every verdict present, zeros included).
    pub counts: BTreeMap<String, usize>,
    /// The exit code of the run (0, 1 or 2).
    pub exit_code: u8,
    /// Every test.
    pub tests: &'a [TestResult],
}

/// The report.
pub fn report<'a>(result: &'a SuiteResult, digests: &'a Digests) -> JsonReport<'a> {
    JsonReport {
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "metaroce".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        iut: &result.iut,
        profile: &result.profile,
        digests,
        window_margin: &result.margin,
        seconds: result.seconds,
        counts: Verdict::ALL
            .iter()
            .map(|v| (v.name().to_string(), result.count(*v)))
            .collect(),
        exit_code: result.exit_code(),
        tests: &result.tests,
    }
}

/// The report as a JSON value.
pub fn report_json(result: &SuiteResult, digests: &Digests) -> serde_json::Value {
    serde_json::to_value(report(result, digests)).unwrap_or_default()
}

/// The JSON Schema of the report, pretty, ending in a newline.
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(JsonReport<'static>);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}
