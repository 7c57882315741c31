//! The HTML certification report: one self-contained file (inline CSS and
//! SVG, no scripts, no external resources) with the summary by profile and
//! area, a per-requirement table, and for each test that did not pass its
//! steps and a ladder diagram of the packets exchanged.

use super::Digests;
use crate::run::SuiteResult;
use crate::run::verdict::{Direction, TestResult, Verdict};
use metaroce_spec::requirements;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// Escapes text for HTML content and attribute values. (Five characters:
/// a crate would add a dependency for less than this function.)
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:100em}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;vertical-align:top}\
th{background:#f3f3f3}.v{font-weight:600;white-space:nowrap}.PASS{color:#176a17}.PASS-NONSTRICT{color:#6a6a17}\
.FAIL{color:#b00020}.ERROR,.INCONC{color:#a05000}.UNSUPPORTED,.XFAIL,.INFO{color:#555}\
code{font-size:12px}.mono{font-family:ui-monospace,monospace;font-size:12px}h2{margin-top:2em}\
details{margin:.5em 0}svg text{font:11px ui-monospace,monospace}\
table.wide{width:100%;table-layout:fixed}table.wide td{overflow-wrap:anywhere}td.v.wrap{white-space:normal}\
td details{margin:0}td summary{cursor:pointer}.why{font-weight:400}\
.filter>input{position:absolute;opacity:0}.filter>label{display:inline-block;margin:0 .3em .3em 0;padding:1px 8px;\
border:1px solid #bbb;border-radius:10px;cursor:pointer;font-size:13px}.filter>input:checked+label{background:#222;color:#fff}";

/// The verdict filter of a table: one radio button per verdict class
/// (and "all"), CSS only: a checked button hides the rows of other classes.
/// `group` names the radio group; the table that follows must have class
/// `wide` and rows of class `row r-CLASS`.
fn filter_bar(h: &mut String, group: &str, classes: &[(&str, usize)]) {
    let _ = write!(
        h,
        "<style>{}</style><input type=radio name={group} id={group}-all checked><label for={group}-all>all</label>",
        classes
            .iter()
            .map(|(c, _)| format!("#{group}-{c}:checked~table tr.row:not(.r-{c}){{display:none}}"))
            .collect::<String>()
    );
    for (class, n) in classes {
        let _ = write!(
            h,
            "<input type=radio name={group} id={group}-{class}><label for={group}-{class} class='{class}'>{} ({n})</label>",
            class.replace('_', " ")
        );
    }
}

/// `text`, escaped; folded under its first `max` characters when longer.
fn folded(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        esc(text)
    } else {
        format!(
            "<details><summary>{}</summary>{}</details>",
            esc(&crate::spec_site::shorten(text, max)),
            esc(text)
        )
    }
}

/// A requirement ID linked to its anchor in the SPEC page.
fn req_link(id: &str) -> String {
    format!(
        "<a href='{}'>{}</a>",
        esc(&crate::spec_site::spec_url(id)),
        esc(id)
    )
}

fn req_links(ids: &[String]) -> String {
    ids.iter()
        .map(|id| req_link(id))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The requirement IDs listed as unobservable in `vectors/UNOBSERVABLE.md`,
/// with their reason.
pub fn unobservable(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() >= 3 && cells[1].starts_with("MR-") {
            out.insert(cells[1].to_string(), cells[2].to_string());
        }
    }
    out
}

/// The worst verdict among `verdicts` (FAIL over ERROR over ... over PASS).
fn worst(verdicts: impl Iterator<Item = Verdict>) -> Option<Verdict> {
    let rank = |v: Verdict| match v {
        Verdict::Fail => 7,
        Verdict::Error => 6,
        Verdict::Inconc => 5,
        Verdict::Xfail => 4,
        Verdict::PassNonstrict => 3,
        Verdict::Unsupported => 2,
        Verdict::Info => 1,
        Verdict::Pass => 0,
    };
    verdicts.max_by_key(|v| rank(*v))
}

/// The whole report.
pub fn report_html(
    result: &SuiteResult,
    digests: &Digests,
    unobservable: &BTreeMap<String, String>,
) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>MetaRoCE certification report: {}</title><style>{STYLE}</style></head><body>",
        esc(&result.iut)
    );
    let _ = write!(h, "<h1>MetaRoCE certification report</h1><table>");
    let rows = [
        ("Implementation under test", result.iut.clone()),
        ("Tool", format!("metaroce {}", env!("CARGO_PKG_VERSION"))),
        ("Vector set SHA-256", digests.vector_set_sha256.clone()),
        ("Capability profile SHA-256", digests.profile_sha256.clone()),
        ("Window margin", result.margin.clone()),
        (
            "Tests",
            format!("{} in {:.2} s", result.tests.len(), result.seconds),
        ),
    ];
    for (k, v) in rows {
        let _ = write!(
            h,
            "<tr><th>{}</th><td class=mono>{}</td></tr>",
            esc(k),
            esc(&v)
        );
    }
    h.push_str("</table>");
    // Verdict totals.
    h.push_str("<h2>Summary</h2><table><tr>");
    for v in Verdict::ALL {
        let _ = write!(h, "<th class='v {0}'>{0}</th>", v.name());
    }
    h.push_str("</tr><tr>");
    for v in Verdict::ALL {
        let _ = write!(h, "<td>{}</td>", result.count(v));
    }
    h.push_str("</tr></table>");
    // By profile and area.
    let mut by_area: BTreeMap<(&str, &str), BTreeMap<Verdict, usize>> = BTreeMap::new();
    for t in &result.tests {
        *by_area
            .entry((&t.profile, &t.area))
            .or_default()
            .entry(t.verdict)
            .or_default() += 1;
    }
    h.push_str(
        "<h2>By profile and area</h2><table><tr><th>profile</th><th>area</th><th>tests</th>",
    );
    for v in Verdict::ALL {
        let _ = write!(h, "<th class='v {0}'>{0}</th>", v.name());
    }
    h.push_str("</tr>");
    for ((profile, area), counts) in &by_area {
        let total: usize = counts.values().sum();
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{total}</td>",
            esc(profile),
            esc(area)
        );
        for v in Verdict::ALL {
            let n = counts.get(&v).copied().unwrap_or(0);
            if n == 0 {
                h.push_str("<td></td>");
            } else {
                let _ = write!(h, "<td class='v {}'>{n}</td>", v.name());
            }
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
    requirement_table(&mut h, result, unobservable);
    // Tests that did not pass.
    let failing: Vec<&TestResult> = result
        .tests
        .iter()
        .filter(|t| !matches!(t.verdict, Verdict::Pass | Verdict::Unsupported))
        .collect();
    let _ = write!(h, "<h2>Tests that did not pass ({})</h2>", failing.len());
    for t in failing {
        test_detail(&mut h, t);
    }
    // Every test.
    h.push_str("<h2 id=every-test>Every test</h2><div class=filter>");
    let counts: Vec<(&str, usize)> = Verdict::ALL
        .iter()
        .map(|v| (v.name(), result.count(*v)))
        .filter(|(_, n)| *n > 0)
        .collect();
    filter_bar(&mut h, "tf", &counts);
    h.push_str("<table class=wide><colgroup><col style='width:9em'><col style='width:22%'><col style='width:16%'><col><col style='width:30%'></colgroup>\
        <tr><th>verdict</th><th>id</th><th>requirements</th><th>title</th><th>reason</th></tr>");
    for t in &result.tests {
        let _ = write!(
            h,
            "<tr class='row r-{0}'><td class='v {0}'>{0}</td><td class=mono><a id='t-{1}'></a>{1}</td><td class=mono>{2}</td><td>{3}</td><td>{4}</td></tr>",
            t.verdict.name(),
            esc(&t.id),
            req_links(&t.requirements),
            esc(&t.title),
            esc(t.reason.as_deref().unwrap_or(""))
        );
    }
    h.push_str("</table></div></body></html>\n");
    h
}

fn requirement_table(
    h: &mut String,
    result: &SuiteResult,
    unobservable: &BTreeMap<String, String>,
) {
    let mut tests_of: BTreeMap<&str, Vec<&TestResult>> = BTreeMap::new();
    for t in &result.tests {
        let mut ids: BTreeSet<&str> = t.requirements.iter().map(String::as_str).collect();
        if let Some(f) = &t.failed_requirement {
            ids.insert(f);
        }
        for id in ids {
            tests_of.entry(id).or_default().push(t);
        }
    }
    let all = requirements::all();
    let covered = all.iter().filter(|r| tests_of.contains_key(r.id)).count();
    let _ = write!(
        h,
        "<h2 id=requirements>Requirements</h2><p>{covered} of {} requirements of SPEC.md are checked by at least one test of this run; {} are listed as not observable from the wire or the agent.</p>",
        all.len(),
        unobservable.len()
    );
    let mut rows = Vec::new();
    for r in all {
        let tests = tests_of.get(r.id).map(Vec::as_slice).unwrap_or(&[]);
        let (verdict, class) = match worst(tests.iter().map(|t| t.verdict)) {
            Some(v) => (v.name().to_string(), v.name()),
            None => match unobservable.get(r.id) {
                Some(why) => (
                    format!(
                        "<details><summary>not observable</summary><span class=why>{}</span></details>",
                        esc(why)
                    ),
                    "not_observable",
                ),
                None => ("not tested".into(), "not_tested"),
            },
        };
        rows.push((r, tests, verdict, class));
    }
    let mut classes: Vec<(&str, usize)> = Vec::new();
    for name in Verdict::ALL
        .iter()
        .map(|v| v.name())
        .chain(["not_tested", "not_observable"])
    {
        let n = rows.iter().filter(|row| row.3 == name).count();
        if n > 0 {
            classes.push((name, n));
        }
    }
    h.push_str("<div class=filter>");
    filter_bar(h, "rf", &classes);
    h.push_str("<table class=wide><colgroup><col style='width:8em'><col style='width:7.5em'><col style='width:10em'><col style='width:24%'><col></colgroup>\
        <tr><th>requirement</th><th>keyword</th><th>verdict</th><th>tests</th><th>text</th></tr>");
    for (r, tests, verdict, class) in rows {
        let links: Vec<String> = tests
            .iter()
            .map(|t| format!("<a href='#t-{0}'>{0}</a>", esc(&t.id)))
            .collect();
        let shown_class = if class.starts_with("not_") {
            "INFO"
        } else {
            class
        };
        let _ = write!(
            h,
            "<tr class='row r-{class}'><td class=mono>{}</td><td>{}</td><td class='v wrap {shown_class}'>{}</td><td class=mono>{}</td>\
             <td>{}</td></tr>",
            req_link(r.id),
            r.keyword.as_str(),
            verdict, // verdict names, or markup built from escaped text above
            if links.len() > 4 {
                format!(
                    "<details><summary>{} tests</summary>{}</details>",
                    links.len(),
                    links.join(" ")
                )
            } else {
                links.join(" ")
            },
            folded(r.text, 80)
        );
    }
    h.push_str("</table></div>");
}

fn test_detail(h: &mut String, t: &TestResult) {
    let _ = write!(
        h,
        "<details open><summary><span class='v {0}'>{0}</span> <code>{1}</code> — {2}</summary>",
        t.verdict.name(),
        esc(&t.id),
        esc(&t.title)
    );
    let _ = write!(
        h,
        "<p>File <code>{}</code>; requirements <code>{}</code>{}</p>",
        esc(&t.file),
        req_links(&t.requirements),
        t.failed_requirement
            .as_ref()
            .map(|r| format!("; blamed on <code>{}</code>", req_link(r)))
            .unwrap_or_default()
    );
    if let Some(r) = &t.reason {
        let _ = write!(h, "<p><b>Expected vs observed:</b> {}</p>", esc(r));
    }
    h.push_str("<table><tr><th>step</th><th>kind</th><th></th><th>detail</th></tr>");
    for s in &t.steps {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td class='v {}'>{}</td><td class=mono>{}</td></tr>",
            s.index,
            s.kind,
            if s.ok { "PASS" } else { "FAIL" },
            if s.ok { "ok" } else { "failed" },
            esc(&s.detail)
        );
    }
    h.push_str("</table>");
    ladder(h, t);
    h.push_str("</details>");
}

/// A ladder diagram: the harness on the left, the IUT on the right, one
/// arrow per packet in time order, labelled with its summary and the step's
/// verdict on it.
fn ladder(h: &mut String, t: &TestResult) {
    if t.packets.is_empty() {
        return;
    }
    const ROW: usize = 34;
    let width = 900;
    let (left, right) = (150, 750);
    let height = 40 + ROW * t.packets.len();
    let _ = write!(
        h,
        "<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role=img aria-label='ladder diagram'>\
         <defs><marker id='a' markerWidth='8' markerHeight='8' refX='8' refY='4' orient='auto'><path d='M0,0 L8,4 L0,8 z'/></marker></defs>\
         <text x='{left}' y='14' text-anchor='middle'>harness</text><text x='{right}' y='14' text-anchor='middle'>IUT</text>\
         <line x1='{left}' y1='20' x2='{left}' y2='{height}' stroke='#888'/><line x1='{right}' y1='20' x2='{right}' y2='{height}' stroke='#888'/>"
    );
    let failed_step = t.steps.iter().find(|s| !s.ok).map(|s| s.index);
    for (i, p) in t.packets.iter().enumerate() {
        let y = 36 + ROW * i;
        let (x1, x2) = match p.direction {
            Direction::Sent => (left, right),
            Direction::Received => (right, left),
        };
        let bad = p.note.starts_with("expected other") || p.note.starts_with("must not");
        let color = if bad
            || (failed_step.is_some()
                && p.step == failed_step
                && p.direction == Direction::Received)
        {
            "#b00020"
        } else if p.note.starts_with("skipped")
            || p.note.contains("ignored")
            || p.note.contains("not judged")
        {
            "#999"
        } else {
            "#222"
        };
        let _ = write!(
            h,
            "<text x='8' y='{}' fill='#555'>{:.3} ms</text>\
             <line x1='{x1}' y1='{y}' x2='{x2}' y2='{}' stroke='{color}' marker-end='url(#a)'/>\
             <text x='{}' y='{}' text-anchor='middle' fill='{color}'>{}</text>\
             <text x='{}' y='{}' text-anchor='middle' fill='#666'>{}</text>",
            y + 4,
            p.at_ns as f64 / 1e6,
            y + 8,
            (left + right) / 2,
            y - 4,
            esc(&p.summary),
            (left + right) / 2,
            y + 20,
            esc(&truncate(
                &format!(
                    "{}{}",
                    p.step.map_or(String::new(), |s| format!("step {s}: ")),
                    p.note
                ),
                110
            )),
        );
    }
    h.push_str("</svg>");
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let cut: String = text.chars().take(max - 1).collect();
        format!("{cut}…")
    }
}
