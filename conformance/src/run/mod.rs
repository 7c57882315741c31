//! The conformance runner: binds a vector set to an IUT,
//! runs every test, and collects verdicts for the reports.
//!
//! - [`iut`]: the implementations under test (builtin, raw, pcap);
//! - [`session`]: one vector against an IUT;
//! - [`codec_judge`]: static codec vectors (no IUT);
//! - [`packet`], [`matching`], [`context`]: building stimuli, judging what comes back;
//! - [`budget`]: how much one test may cost (events, wall clock);
//! - [`capability`]: the IUT's capability profile and the expectations file;
//! - [`profile_keys`]: the keys of a profile, and the MP local constants vectors use;
//! - [`verdict`]: verdicts and test results;
//! - [`zoo`]: the suite against every bug-zoo mutant of the reference transport (the catch table).

pub mod budget;
pub mod capability;
pub mod codec_judge;
pub mod context;
pub mod iut;
pub mod matching;
pub mod packet;
pub mod profile_keys;
pub mod session;
pub mod verdict;
pub mod zoo;

#[cfg(test)]
mod livelock_tests;
#[cfg(test)]
mod margin_tests;

use crate::vector::VectorSet;
use crate::vector::expr::{self, Bindings};
use crate::vector::model::{Num, Vector};
use capability::Expectations;
use iut::{Endpoint, Iut, IutError};
use serde_json::{Map, Value, json};
use session::{TestBed, missing_capabilities, run_test};
use std::path::Path;
use std::time::Instant;
use verdict::{TestResult, Verdict};

/// How the suite runs.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Seed of the harness's choices (QPNs, PSNs); each test derives its own.
    pub seed: u64,
    /// Only vectors whose id contains one of these (all when empty).
    pub filters: Vec<String>,
    /// Capability keys overriding what the agent declares.
    pub profile_override: Map<String, Value>,
    /// Known failures.
    pub expectations: Expectations,
    /// Extra time for every window on a live IUT; measured when `None`.
    pub margin_ns: Option<u64>,
    /// On a live IUT, how many times a test that does not pass is run again.
    pub retries: usize,
    /// What one test (one attempt) may cost.
    pub budget: budget::Budget,
}

/// Everything a run produced.
#[derive(Clone, Debug)]
pub struct SuiteResult {
    /// `implementation` of the agent's hello, and the IUT description.
    pub iut: String,
    /// The capability profile used.
    pub profile: Map<String, Value>,
    /// The window margin used on a live IUT (0 on virtual time), and how it was found.
    pub margin: String,
    /// One result per vector, in vector order.
    pub tests: Vec<TestResult>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl SuiteResult {
    /// How many tests got `verdict`.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.tests.iter().filter(|t| t.verdict == verdict).count()
    }

    /// The exit code of the contract in [`crate::exit`].
    pub fn exit_code(&self) -> u8 {
        if self.count(Verdict::Fail) > 0 {
            crate::exit::FAIL
        } else if self.count(Verdict::Error) + self.count(Verdict::Inconc) > 0 {
            crate::exit::ERROR
        } else {
            crate::exit::OK
        }
    }
}

fn selected(id: &str, filters: &[String]) -> bool {
    filters.is_empty() || filters.iter().any(|f| id.contains(f.as_str()))
}

/// Number of tests a run of `set` with `options` makes.
pub fn planned(set: &VectorSet, options: &RunOptions) -> usize {
    set.tests
        .iter()
        .filter(|v| selected(&v.vector.id, &options.filters))
        .count()
        + set
            .codec
            .iter()
            .filter(|v| selected(&v.vector.id, &options.filters))
            .count()
}

/// Asks the agent who it is and what it declares: the implementation's
/// name, its capability profile, its data-plane addresses and whether it
/// places canaries (`read_canary`).
pub fn hello(iut: &mut dyn Iut) -> Result<(String, Map<String, Value>, Endpoint, bool), IutError> {
    let reply = iut.agent(json!({"op": "hello", "v": 1, "client": "metaroce run"}))?;
    let endpoint = hello_endpoint(&reply)?;
    let map = reply
        .as_object()
        .filter(|m| m.get("ok") == Some(&Value::Bool(true)))
        .ok_or_else(|| IutError(format!("hello failed: {reply}")))?;
    let implementation = map
        .get("implementation")
        .map(|i| {
            format!(
                "{} {}",
                i.get("name").and_then(Value::as_str).unwrap_or("?"),
                i.get("version").and_then(Value::as_str).unwrap_or("?")
            )
        })
        .unwrap_or_else(|| "unknown".into());
    let profile = map
        .get("profile")
        .and_then(Value::as_object)
        .cloned()
        .ok_or_else(|| IutError("hello: no profile in the reply".into()))?;
    let canaries = map
        .get("ops")
        .and_then(Value::as_array)
        .is_some_and(|ops| ops.iter().any(|o| o == "read_canary"));
    Ok((implementation, profile, endpoint, canaries))
}

/// The data-plane addresses in a `hello` reply.
pub fn hello_endpoint(reply: &Value) -> Result<Endpoint, IutError> {
    let addresses = reply.get("addresses");
    let mac_text = addresses
        .and_then(|a| a.get("mac"))
        .and_then(Value::as_str)
        .ok_or_else(|| IutError("hello: no addresses.mac".into()))?;
    let ip_text = addresses
        .and_then(|a| a.get("ipv4"))
        .and_then(Value::as_str)
        .ok_or_else(|| IutError("hello: no addresses.ipv4".into()))?;
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = mac_text.split([':', '-']).collect();
    if parts.len() != 6 {
        return Err(IutError(format!("hello: bad MAC `{mac_text}`")));
    }
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16)
            .map_err(|_| IutError(format!("hello: bad MAC `{mac_text}`")))?;
    }
    let ip = ip_text
        .parse()
        .map_err(|_| IutError(format!("hello: bad IPv4 `{ip_text}`")))?;
    Ok(Endpoint { mac, ip })
}

/// The most a retry widens the window margin to (see [`retry_margin_ns`]).
pub const RETRY_MARGIN_CAP_NS: u64 = 200_000_000;

/// The window margin of attempt `attempt` (0 = the first) of a test on a
/// live IUT. A retry quadruples the calibrated margin per attempt, up to
/// [`RETRY_MARGIN_CAP_NS`]: a test bed that slows down after calibration (a
/// loaded host, an emulated guest) then gets windows it can meet, and a pass
/// that needed them is still reported FLAKY with the margin it needed. A
/// vector that races µs timers (`max_margin_us`) never gets more than its
/// bound, so a retry cannot turn its timing question into a pass.
pub fn retry_margin_ns(calibrated_ns: u64, attempt: usize, max_margin_us: Option<u64>) -> u64 {
    if attempt == 0 || calibrated_ns == 0 {
        return calibrated_ns;
    }
    let grown = calibrated_ns
        .saturating_mul(4u64.saturating_pow(attempt as u32))
        .min(RETRY_MARGIN_CAP_NS.max(calibrated_ns));
    match max_margin_us {
        Some(us) => grown.min(us.saturating_mul(1_000)).max(calibrated_ns),
        None => grown,
    }
}

/// A vector's `max_margin_us` for the IUT whose declared MP local
/// constants are bound in `declared` (`${profile.KEY}`).
///
/// # Errors
/// The expression has no value (the message names the vector's key).
pub fn max_margin_us(v: &Vector, declared: &Bindings) -> Result<Option<u64>, String> {
    match &v.max_margin_us {
        None => Ok(None),
        Some(Num::Int(us)) => Ok(Some(*us)),
        Some(Num::Expr(text)) => expr::eval(text, declared)
            .map(Some)
            .map_err(|e| format!("max_margin_us: {e}")),
    }
}

/// Runs the suite. `progress` is called after each test with (done, total, result).
pub fn run_suite(
    set: &VectorSet,
    root: &Path,
    iut: &mut dyn Iut,
    options: &RunOptions,
    progress: &mut dyn FnMut(usize, usize, &TestResult),
) -> Result<SuiteResult, IutError> {
    let started = Instant::now();
    let (implementation, mut profile, iut_addr, canaries) = hello(iut)?;
    for (k, v) in &options.profile_override {
        profile.insert(k.clone(), v.clone());
    }
    // `max_margin_us` may follow the IUT's declared timers.
    let declared = profile_keys::bindings(&profile)
        .map_err(|e| IutError(format!("capability profile: {e}")))?;
    let (margin_ns, margin) = if iut.virtual_time() {
        (0, "none (virtual time)".to_string())
    } else if let Some(m) = options.margin_ns {
        (m, format!("{} µs (given)", m / 1_000))
    } else {
        let m = capability::calibrate(iut)?;
        (m.margin_ns, m.describe())
    };
    let total = planned(set, options);
    let mut tests = Vec::with_capacity(total);
    let rel = |p: &Path| {
        p.strip_prefix(root)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    for (i, loaded) in set.codec.iter().enumerate() {
        if !selected(&loaded.vector.id, &options.filters) {
            continue;
        }
        let mut result = codec_judge::judge(&loaded.vector, &rel(&loaded.file));
        options.expectations.apply(&mut result);
        tests.push(result);
        progress(tests.len(), total, &tests[tests.len() - 1]);
        let _ = i;
    }
    let mut stale_qpns = std::collections::BTreeSet::new();
    for (i, loaded) in set.tests.iter().enumerate() {
        let v = &loaded.vector;
        if !selected(&v.id, &options.filters) {
            continue;
        }
        let missing = missing_capabilities(v, &profile);
        let max_margin_us = match max_margin_us(v, &declared) {
            Ok(m) => m,
            Err(e) => {
                let mut result = session::inconclusive(v, &rel(&loaded.file), e);
                result.verdict = Verdict::Error;
                tests.push(result);
                progress(tests.len(), total, &tests[tests.len() - 1]);
                continue;
            }
        };
        // A test the IUT cannot run is UNSUPPORTED, whatever the test bed:
        // the margin decides only among tests it supports.
        let too_slow = max_margin_us
            .filter(|&us| margin_ns > us.saturating_mul(1_000))
            .filter(|_| missing.is_empty());
        let mut result = if let Some(us) = too_slow {
            session::inconclusive(
                v,
                &rel(&loaded.file),
                format!(
                    "the test races timers of about {us} µs; this test bed's window margin is {} µs, so it cannot answer in time",
                    margin_ns / 1_000
                ),
            )
        } else if missing.is_empty() {
            // On a live IUT a test that does not pass may be re-run
            // (`--retries`), each time with a wider window margin: the
            // verdict is the last attempt's, a pass after a failure is
            // reported as flaky, never hidden, and a FAIL is never replaced
            // by a later INCONC (a wider margin can make a timer's lower
            // bound unjudgeable; it cannot clear the failure seen before).
            let attempts = if iut.virtual_time() {
                1
            } else {
                1 + options.retries
            };
            let mut earlier: Vec<String> = Vec::new();
            let mut first_fail: Option<TestResult> = None;
            let mut attempt = 0;
            loop {
                let seed = options.seed
                    ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    ^ (attempt as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
                let bed = TestBed {
                    profile: profile.clone(),
                    iut: iut_addr,
                    margin_ns: retry_margin_ns(margin_ns, attempt, max_margin_us),
                    seed,
                    canaries,
                    stale_qpns: stale_qpns.clone(),
                    harness_qpn: session::harness_qpn(seed, &stale_qpns),
                    budget: options.budget,
                };
                let mut result = run_test(iut, &bed, v, &rel(&loaded.file));
                stale_qpns.extend([bed.harness_qpn, bed.harness_qpn + 1]);
                attempt += 1;
                // PASS-NONSTRICT is retried too: a SHOULD can be missed
                // because a packet came late (rxe's READ re-request after
                // 60 ms + the margin, 2026-11-29); a real departure shows
                // on every attempt.
                // A FAIL the expectations file lists is settled too: a known
                // departure is not a timing question, and retrying it cost
                // the rxe lab about 50 s per run.
                let settled = matches!(result.verdict, Verdict::Pass | Verdict::Unsupported)
                    || (result.verdict == Verdict::Fail && options.expectations.lists(&v.id));
                if settled || attempt >= attempts {
                    if result.verdict == Verdict::Inconc
                        && let Some(failed) = first_fail.take()
                    {
                        let note = format!(
                            "a later attempt (window margin {} µs) was inconclusive: {}",
                            bed.margin_ns / 1_000,
                            result.reason.unwrap_or_default()
                        );
                        result = failed;
                        result.reason = Some(match result.reason.take() {
                            Some(r) => format!("{r} ({note})"),
                            None => note,
                        });
                    } else if !earlier.is_empty() {
                        let note = format!(
                            "attempt {attempt} of {attempts}, window margin {} µs; earlier: {}",
                            bed.margin_ns / 1_000,
                            earlier.join(" | ")
                        );
                        result.reason = Some(match result.reason.take() {
                            Some(r) => format!("{r} ({note})"),
                            None => format!("FLAKY on this test bed: passed on {note}"),
                        });
                    }
                    result.attempts = attempt as u32;
                    break result;
                }
                if result.verdict == Verdict::Fail && first_fail.is_none() {
                    first_fail = Some(result.clone());
                }
                earlier.push(format!(
                    "{} (window margin {} µs) {}",
                    result.verdict,
                    bed.margin_ns / 1_000,
                    result.reason.clone().unwrap_or_default()
                ));
            }
        } else {
            session::unsupported(v, &rel(&loaded.file), &missing)
        };
        options.expectations.apply(&mut result);
        tests.push(result);
        progress(tests.len(), total, &tests[tests.len() - 1]);
    }
    Ok(SuiteResult {
        iut: format!("{implementation} via {}", iut.describe()),
        profile,
        margin,
        tests,
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod retry_margin_tests {
    use super::{RETRY_MARGIN_CAP_NS, retry_margin_ns};

    #[test]
    fn first_attempt_and_virtual_time_keep_the_margin() {
        assert_eq!(retry_margin_ns(5_000_000, 0, None), 5_000_000);
        assert_eq!(retry_margin_ns(0, 3, None), 0);
    }

    #[test]
    fn retries_quadruple_up_to_the_cap() {
        assert_eq!(retry_margin_ns(5_000_000, 1, None), 20_000_000);
        assert_eq!(retry_margin_ns(5_000_000, 2, None), 80_000_000);
        assert_eq!(retry_margin_ns(5_000_000, 3, None), RETRY_MARGIN_CAP_NS);
        assert_eq!(retry_margin_ns(5_000_000, 60, None), RETRY_MARGIN_CAP_NS);
        // A calibrated margin above the cap is never shrunk.
        assert_eq!(retry_margin_ns(300_000_000, 1, None), 300_000_000);
    }

    #[test]
    fn a_timer_racing_vector_never_exceeds_its_bound() {
        assert_eq!(retry_margin_ns(5_000_000, 2, Some(8_000)), 8_000_000);
        // ... nor drops below the calibrated margin.
        assert_eq!(retry_margin_ns(5_000_000, 1, Some(1_000)), 5_000_000);
    }
}
