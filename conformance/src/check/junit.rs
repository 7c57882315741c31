//! `metaroce check --format junit`: the verdict as JUnit XML (written with
//! `quick-junit`), for CI systems that show test reports.
//!
//! Two test suites: `requirements`, one test case per requirement with
//! findings (failed when one is a MUST or SHOULD, with the first
//! [`MAX_SAMPLES`](super::MAX_SAMPLES) findings as its description), and
//! `connections`, one test case per connection (failed when a MUST or SHOULD
//! finding concerns it). A requirement's test case has a property `url`:
//! its text in the SPEC page. A capture without findings gives one passing test
//! case, `conforms`.

use super::{Summary, Tally, connection_text};
use metaroce_spec::judge::ConnectionSummary;
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

/// The JUnit XML report of a run over `name` (the capture).
pub fn junit_xml(
    name: &str,
    summary: &Summary,
    tally: &Tally,
    connections: &[ConnectionSummary],
) -> String {
    let mut report = Report::new(format!("metaroce check {name}"));
    let mut reqs = TestSuite::new("requirements");
    for (id, t) in tally.by_id() {
        let serious = t.must + t.should;
        let status = if serious > 0 {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(format!(
                "{} finding(s) ({} must, {} should, {} info), first at frame {}",
                t.total(),
                t.must,
                t.should,
                t.info,
                t.first_frame
            ));
            s.set_type(t.worst().as_str());
            s.set_description(t.samples.join("\n"));
            s
        } else {
            TestCaseStatus::success()
        };
        let mut case = TestCase::new(id, status);
        case.set_classname("requirements");
        case.add_property(Property::new("url", crate::spec_site::spec_url(id)));
        if serious == 0 {
            // Information only: passed, with what was noted.
            case.set_system_out(t.samples.join("\n"));
        }
        reqs.add_test_case(case);
    }
    if tally.by_id().is_empty() {
        let mut case = TestCase::new("conforms", TestCaseStatus::success());
        case.set_classname("requirements");
        case.set_system_out(format!(
            "{} frames, {} RoCE frames: no finding",
            summary.frames, summary.roce_frames
        ));
        reqs.add_test_case(case);
    }
    report.add_test_suite(reqs);
    let mut conns = TestSuite::new("connections");
    for c in connections {
        let by_id = tally.for_connection(c);
        let serious: u64 = by_id.iter().map(|(_, t)| t.must + t.should).sum();
        let status = if serious > 0 {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            let ids: Vec<String> = by_id
                .iter()
                .map(|(id, t)| format!("{id} ×{}", t.total()))
                .collect();
            s.set_message(ids.join(", "));
            s
        } else {
            TestCaseStatus::success()
        };
        let mut case = TestCase::new(connection_text(c), status);
        case.set_classname("connections");
        conns.add_test_case(case);
    }
    report.add_test_suite(conns);
    report
        .to_string()
        .unwrap_or_else(|e| format!("<!-- JUnit serialisation failed: {e} -->\n"))
}
