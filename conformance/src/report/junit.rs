//! JUnit XML for CI (quick-junit): one test suite per profile and area,
//! one test case per vector. FAIL is a failure, ERROR and INCONC errors,
//! UNSUPPORTED and XFAIL skipped, the rest successes. Each test case has a
//! property per requirement it checks: name the ID, value its URL in the
//! SPEC page ([`spec_url`]).

use crate::run::SuiteResult;
use crate::run::verdict::Verdict;
use crate::spec_site::spec_url;
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use std::collections::BTreeMap;
use std::time::Duration;

/// The JUnit XML text.
pub fn junit_xml(result: &SuiteResult) -> Result<String, String> {
    let mut report = Report::new("metaroce");
    let mut suites: BTreeMap<String, TestSuite> = BTreeMap::new();
    for t in &result.tests {
        let name = format!("{}.{}", t.profile, t.area);
        let suite = suites
            .entry(name.clone())
            .or_insert_with(|| TestSuite::new(name));
        let message = t.reason.clone().unwrap_or_default();
        let status = match t.verdict {
            Verdict::Fail => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(format!(
                    "{}: {message}",
                    t.failed_requirement.as_deref().unwrap_or("?")
                ));
                s.set_type("FAIL");
                s
            }
            Verdict::Error | Verdict::Inconc => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
                s.set_message(message);
                s.set_type(t.verdict.name());
                s
            }
            Verdict::Unsupported | Verdict::Xfail => {
                let mut s = TestCaseStatus::skipped();
                s.set_message(format!("{}: {message}", t.verdict.name()));
                s
            }
            _ => TestCaseStatus::success(),
        };
        let mut case = TestCase::new(t.id.clone(), status);
        case.set_classname(t.file.clone());
        case.set_time(Duration::from_micros(t.duration_us));
        // Each requirement the test checks, with where its text is.
        for id in &t.requirements {
            case.add_property(Property::new(id.as_str(), spec_url(id)));
        }
        let steps: Vec<String> = t
            .steps
            .iter()
            .map(|s| {
                format!(
                    "step {} {} {}: {}",
                    s.index,
                    s.kind,
                    if s.ok { "ok" } else { "FAILED" },
                    s.detail
                )
            })
            .collect();
        case.set_system_out(format!(
            "verdict {}\nrequirements {}\n{}",
            t.verdict.name(),
            t.requirements.join(" "),
            steps.join("\n")
        ));
        suite.add_test_case(case);
    }
    report.add_test_suites(suites.into_values());
    report.to_string().map_err(|e| e.to_string())
}
