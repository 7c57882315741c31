//! `metaroce spec html` and `metaroce spec show`, run as a user runs them:
//! the page has an anchor for every requirement of the registry, every
//! internal link resolves, requirement IDs in the text are links; `show`
//! prints a requirement and answers an unknown ID with close matches.

// traceability: ignore-file (IDs here are examples and misspellings for the
// renderer and `spec show`, not citations)

use metaroce_spec::requirements;
use std::collections::HashSet;
use std::process::{Command, Output};

fn metaroce(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_metaroce"))
        .args(args)
        .env_remove("METAROCE_SPEC_URL")
        .output()
        .expect("runs metaroce")
}

/// Every value of `attr="..."` in `html`.
fn attr_values<'h>(html: &'h str, attr: &str) -> Vec<&'h str> {
    let needle = format!("{attr}=\"");
    html.match_indices(&needle)
        .filter_map(|(at, _)| {
            let rest = &html[at + needle.len()..];
            rest.find('"').map(|end| &rest[..end])
        })
        .collect()
}

#[test]
fn the_spec_page_anchors_every_requirement_and_every_link_resolves() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("metaroce-spec-site-{}", std::process::id()));
    let out = metaroce(&["spec", "html", dir.to_str().expect("UTF-8 path")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(dir.join("spec.html")).expect("spec.html written");
    let _ = std::fs::remove_dir_all(&dir);

    let ids: Vec<&str> = attr_values(&html, "id");
    let mut unique = HashSet::new();
    for id in &ids {
        assert!(unique.insert(*id), "anchor {id} defined twice");
    }
    for r in requirements::all() {
        assert!(unique.contains(r.id), "no anchor for {}", r.id);
    }
    let links: Vec<&str> = attr_values(&html, "href")
        .into_iter()
        .filter_map(|h| h.strip_prefix('#'))
        .collect();
    for target in &links {
        assert!(
            unique.contains(target),
            "link to #{target} resolves to nothing"
        );
    }
    // Cross-links: requirement IDs written in the text (outside their own
    // item and the index) are links too. SPEC.md names other requirements
    // in notes, tables and Appendix B; each requirement links to itself once
    // and the index once.
    let req_links = links.iter().filter(|l| l.starts_with("MR-")).count();
    let n = requirements::all().len();
    assert!(
        req_links > 2 * n + 50,
        "{req_links} links to requirements for {n} requirements: the text's IDs are not linked"
    );
    // A table of contents and the index by area.
    assert!(html.contains("href=\"#7-2-mp-opcodes-and-headers\""));
    assert!(html.contains("id=\"requirement-index\""));
    assert!(html.contains("id=\"area-BTH\""));
}

#[test]
fn spec_show_prints_a_requirement_and_suggests_for_an_unknown_id() {
    let r = requirements::get("MR-BTH-2").expect("MR-BTH-2 exists");
    for query in ["MR-BTH-2", "mr-bth-2", "BTH-2"] {
        let out = metaroce(&["spec", "show", query]);
        assert_eq!(out.status.code(), Some(0), "{query}");
        let text = String::from_utf8(out.stdout).expect("UTF-8");
        assert!(text.starts_with("MR-BTH-2 (MUST; wire)"), "{text}");
        assert!(text.contains(r.text), "{text}");
        assert!(text.contains("spec.html#MR-BTH-2"), "{text}");
    }
    let out = metaroce(&["spec", "show", "MR-BHT-2"]);
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no requirement MR-BHT-2"), "{err}");
    assert!(err.contains("did you mean MR-BTH-2"), "{err}");
}

#[test]
fn reports_link_requirement_ids_to_the_spec_page_written_next_to_them() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("metaroce-report-links-{}", std::process::id()));
    let vectors = concat!(env!("CARGO_MANIFEST_DIR"), "/../vectors");
    let out = metaroce(&[
        "run",
        "--vectors",
        vectors,
        "-k",
        "codec.bth",
        "--report-dir",
        dir.to_str().expect("UTF-8 path"),
    ]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect(name);
    let (report, spec, junit) = (read("report.html"), read("spec.html"), read("report.xml"));
    let _ = std::fs::remove_dir_all(&dir);

    let anchors: HashSet<&str> = attr_values(&spec, "id").into_iter().collect();
    let mut linked = 0;
    for href in attr_values(&report.replace('\'', "\""), "href") {
        if let Some(id) = href.strip_prefix("spec.html#") {
            assert!(
                anchors.contains(id),
                "report links {href}, spec.html has no such anchor"
            );
            linked += 1;
        }
    }
    // The requirements table links each of the registry's requirements.
    assert!(
        linked >= requirements::all().len(),
        "only {linked} requirement links in report.html"
    );
    // The verdict filter and folded texts.
    assert!(report.contains("type=radio name=rf"), "no verdict filter");
    assert!(report.contains("<details><summary>"), "no folded text");
    // JUnit: a property per requirement a test case checks, naming its URL.
    assert!(
        junit.contains("<property name=\"MR-BTH-2\" value=\"spec.html#MR-BTH-2\""),
        "no requirement property in report.xml"
    );
}
