//! What the user tells the runner about the IUT: a capability profile
//! (YAML, SPEC §2 keys) that overrides the agent's declaration, and an
//! expectations file of known failures (XFAIL with a reason). Also the
//! calibration of windows on a live IUT.

use super::iut::{Iut, IutError};
use super::session::{TestBed, run_test};
use super::verdict::{Direction, TestResult, Verdict};
use crate::vector::load::{LoadError, parse_yaml};
use crate::vector::model::Vector;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// Reads a capability profile: a YAML mapping of SPEC §2 keys to values.
/// A key SPEC §2 does not list, or an MP local constant outside its §10.3
/// range, is an error naming the key and the file.
pub fn load_profile(file: &Path) -> Result<Map<String, Value>, LoadError> {
    let text = std::fs::read_to_string(file).map_err(|e| LoadError {
        file: file.to_path_buf(),
        line: None,
        column: None,
        message: e.to_string(),
    })?;
    let map: BTreeMap<String, ProfileValue> = parse_yaml(file, &text)?;
    let map: Map<String, Value> = map
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                ProfileValue::Bool(b) => Value::Bool(b),
                ProfileValue::Int(n) => Value::from(n),
                ProfileValue::Text(t) => Value::String(t),
            };
            (k, v)
        })
        .collect();
    super::profile_keys::check_keys(&map).map_err(|message| LoadError {
        file: file.to_path_buf(),
        line: None,
        column: None,
        message,
    })?;
    Ok(map)
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ProfileValue {
    Bool(bool),
    Int(u64),
    Text(String),
}

/// One known failure.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnownFailure {
    /// Vector id.
    pub id: String,
    /// Why it fails (shown in reports).
    pub reason: String,
}

/// The expectations file: known failures by vector id.
#[derive(Clone, Debug, Default)]
pub struct Expectations {
    known: BTreeMap<String, String>,
}

impl Expectations {
    /// Reads a YAML list of `{id, reason}`.
    pub fn load(file: &Path) -> Result<Self, LoadError> {
        let text = std::fs::read_to_string(file).map_err(|e| LoadError {
            file: file.to_path_buf(),
            line: None,
            column: None,
            message: e.to_string(),
        })?;
        let list: Vec<KnownFailure> = parse_yaml(file, &text)?;
        Ok(Expectations {
            known: list.into_iter().map(|k| (k.id, k.reason)).collect(),
        })
    }

    /// Whether the test with vector id `id` is a listed known failure.
    pub fn lists(&self, id: &str) -> bool {
        self.known.contains_key(id)
    }

    /// Turns a listed FAIL into XFAIL; a listed test that passes says so.
    pub fn apply(&self, result: &mut TestResult) {
        let Some(reason) = self.known.get(&result.id) else {
            return;
        };
        match result.verdict {
            Verdict::Fail => {
                result.verdict = Verdict::Xfail;
                result.reason = Some(format!(
                    "known failure ({reason}): {}",
                    result.reason.as_deref().unwrap_or("")
                ));
            }
            Verdict::Pass => {
                result.reason = Some(format!(
                    "listed as a known failure ({reason}) but passed: remove it from the expectations file"
                ));
            }
            _ => {}
        }
    }
}

/// The result of calibrating a live IUT.
#[derive(Clone, Copy, Debug)]
pub struct Calibration {
    /// Median round trip (request → ACK) in ns.
    pub median_ns: u64,
    /// Largest round trip seen in ns.
    pub max_ns: u64,
    /// Margin added to every window.
    pub margin_ns: u64,
    /// Round trips measured.
    pub samples: usize,
}

impl Calibration {
    /// For reports.
    pub fn describe(&self) -> String {
        format!(
            "{} µs (measured: {} round trips, median {} µs, max {} µs; margin = max(5 ms, 8 × the second largest))",
            self.margin_ns / 1_000,
            self.samples,
            self.median_ns / 1_000,
            self.max_ns / 1_000
        )
    }
}

const CALIBRATION: &str = r#"
id: calibration
title: round trip of a zero-length RDMA WRITE and its ACK
requirements: [MR-ACK-1]
profile: base
role: requester
steps:
"#;

/// Measures round trips to a live IUT: 16 zero-length RDMA WRITEs, each
/// answered by an ACK. The margin is max(5 ms, 8 × the second largest): a live test bed on a
/// shared machine stalls for milliseconds now and then; `--retries` absorbs
/// a stall during a test.
pub fn calibrate(iut: &mut dyn Iut) -> Result<Calibration, IutError> {
    let mut text = CALIBRATION.to_string();
    for k in 0..16 {
        text.push_str(&format!(
            "  - send: {{opcode: RC_WRITE_ONLY, bth: {{psn: \"${{psn + {k}}}\", ack_req: true}}, ext: {{reth: {{va: 0, rkey: 0, dma_len: 0}}}}}}\n  - expect: {{within_us: 1000000, fields: {{opcode: RC_ACK, bth.psn: \"${{psn + {k}}}\"}}}}\n"
        ));
    }
    let vector: Vector = parse_yaml(Path::new("<calibration>"), &text)
        .map_err(|e| IutError(format!("calibration vector: {e}")))?;
    let reply = iut.agent(serde_json::json!({"op": "hello"}))?;
    let iut_addr = super::hello_endpoint(&reply)?;
    let bed = TestBed {
        profile: Map::new(),
        iut: iut_addr,
        margin_ns: 0,
        seed: 0xCA11_B8A7,
        canaries: false,
        stale_qpns: Default::default(),
        harness_qpn: 0xCA11B0,
        budget: Default::default(),
    };
    let result = run_test(iut, &bed, &vector, "<calibration>");
    if result.verdict != Verdict::Pass {
        return Err(IutError(format!(
            "calibration failed ({}): {}",
            result.verdict,
            result.reason.unwrap_or_default()
        )));
    }
    let mut rtts = Vec::new();
    let mut sent_at = None;
    for p in &result.packets {
        match p.direction {
            Direction::Sent => sent_at = Some(p.at_ns),
            Direction::Received => {
                if let Some(s) = sent_at.take() {
                    rtts.push(p.at_ns.saturating_sub(s));
                }
            }
        }
    }
    rtts.sort_unstable();
    let median_ns = rtts.get(rtts.len() / 2).copied().unwrap_or(0);
    let max_ns = rtts.last().copied().unwrap_or(0);
    // One stall of a loaded host must not set the margin of the whole run
    // (it would swallow every timer test): the largest sample is dropped.
    let high_ns = rtts.iter().rev().nth(1).copied().unwrap_or(max_ns);
    Ok(Calibration {
        median_ns,
        max_ns,
        margin_ns: (8 * high_ns).max(5_000_000),
        samples: rtts.len(),
    })
}
