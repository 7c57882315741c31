//! Verdicts and what a test leaves behind.

use schemars::JsonSchema;
use serde::Serialize;
use std::fmt;

/// The outcome of one test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING-KEBAB-CASE")]
pub enum Verdict {
    /// The requirement holds.
    Pass,
    /// An allowed alternative was seen, or a SHOULD was not met.
    PassNonstrict,
    /// Information only.
    Info,
    /// The IUT's capability profile declares the feature absent.
    Unsupported,
    /// Failed, and listed as a known failure in the expectations file.
    Xfail,
    /// A precondition was not reached (setup refused, nothing to judge).
    Inconc,
    /// The IUT broke a requirement.
    Fail,
    /// The harness or the test bed failed; never blamed on the IUT.
    Error,
}

impl Verdict {
    /// Every verdict, in report order.
    pub const ALL: [Verdict; 8] = [
        Verdict::Pass,
        Verdict::PassNonstrict,
        Verdict::Info,
        Verdict::Unsupported,
        Verdict::Xfail,
        Verdict::Inconc,
        Verdict::Fail,
        Verdict::Error,
    ];

    /// The name reports use.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::PassNonstrict => "PASS-NONSTRICT",
            Verdict::Info => "INFO",
            Verdict::Unsupported => "UNSUPPORTED",
            Verdict::Xfail => "XFAIL",
            Verdict::Inconc => "INCONC",
            Verdict::Fail => "FAIL",
            Verdict::Error => "ERROR",
        }
    }

    /// Whether the verdict counts as passing in JUnit terms.
    pub fn is_ok(self) -> bool {
        !matches!(self, Verdict::Fail | Verdict::Error | Verdict::Inconc)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Direction of a logged packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Harness → IUT.
    Sent,
    /// IUT → harness.
    Received,
}

/// One packet of a test's traffic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PacketRecord {
    /// Nanoseconds since the test started.
    pub at_ns: u64,
    /// Who sent it.
    pub direction: Direction,
    /// The step it belongs to (0-based), if any.
    pub step: Option<usize>,
    /// One-line summary (`RDMA WRITE Only psn=5 qp=0x12`).
    pub summary: String,
    /// What the step expected of it, or why it was sent.
    pub note: String,
    /// The frame.
    #[serde(skip)]
    pub bytes: Vec<u8>,
}

/// The result of one step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct StepRecord {
    /// 0-based step index.
    pub index: usize,
    /// Step kind (`send`, `expect`, ...).
    pub kind: String,
    /// Whether the step held.
    pub ok: bool,
    /// What happened.
    pub detail: String,
}

/// The result of one test.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct TestResult {
    /// Vector id.
    pub id: String,
    /// Vector title.
    pub title: String,
    /// The vector file, relative to the vector set's root.
    pub file: String,
    /// Requirements checked.
    pub requirements: Vec<String>,
    /// `base` or `mp` (`codec` for static codec vectors).
    pub profile: String,
    /// `requester`, `responder`, `peer` or `codec`.
    pub role: String,
    /// The area (first segment of the first requirement: `RSP`, `NAK`, ...).
    pub area: String,
    /// The verdict.
    pub verdict: Verdict,
    /// One line explaining a verdict other than PASS.
    pub reason: Option<String>,
    /// The requirement a FAIL is blamed on.
    pub failed_requirement: Option<String>,
    /// Wall-clock duration in microseconds (of the last attempt).
    pub duration_us: u64,
    /// Times the test ran (more than 1 only with `--retries` on a live IUT).
    pub attempts: u32,
    /// Steps.
    pub steps: Vec<StepRecord>,
    /// Traffic.
    pub packets: Vec<PacketRecord>,
}

impl TestResult {
    /// The area of a requirement ID (`MR-NAK-2` → `NAK`).
    pub fn area_of(requirement: &str) -> String {
        requirement.split('-').nth(1).unwrap_or("OTHER").to_string()
    }
}
