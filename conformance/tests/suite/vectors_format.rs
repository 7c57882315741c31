//! The vector format: the committed schema is current, bad files are
//! reported with file, line and column, and every committed vector loads.
// traceability: ignore-file (requirement IDs below are vector data, one of them deliberately unknown)

use metaroce_conformance::vector::load::{load_dir, load_vector};
use metaroce_conformance::vector::schema::schema_json;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn committed_schema_is_current() {
    let committed = std::fs::read_to_string(repo().join("vectors/schema.json")).unwrap();
    assert!(
        committed == schema_json(),
        "vectors/schema.json is stale: run `cargo run -p metaroce-conformance -- vectors schema > vectors/schema.json`"
    );
}

#[test]
fn every_committed_vector_loads() {
    let set = load_dir(&repo().join("vectors")).unwrap_or_else(|errors| {
        panic!(
            "{}",
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    assert!(!set.tests.is_empty());
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn scratch(name: &str) -> PathBuf {
    // Cargo's scratch directory for integration tests (target/tmp), not /tmp.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("metaroce-vectors-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const GOOD: &str = "id: t.one\ntitle: t\nrequirements: [MR-RSP-1]\nprofile: base\nrole: requester\nsteps:\n  - wait: {within_us: 10}\n";

#[test]
fn unknown_key_names_file_line_and_column() {
    let dir = scratch("unknown");
    let file = write(
        &dir,
        "bad.yaml",
        &GOOD.replace("role: requester", "role: requester\nbogus: 1"),
    );
    let e = load_vector(&file).unwrap_err();
    assert_eq!(e.line, Some(6), "{e}");
    assert!(e.column.is_some(), "{e}");
    assert!(e.message.contains("bogus"), "{e}");
    assert!(
        e.to_string().starts_with(&format!("{}:6:", file.display())),
        "{e}"
    );
}

#[test]
fn semantic_errors_are_named() {
    let dir = scratch("semantic");
    let cases = [
        (
            GOOD.replace("MR-RSP-1", &format!("MR-{}-1", "NOPE")),
            "not a requirement",
        ),
        (GOOD.replace("id: t.one", "id: T One"), "id `T One`"),
        (
            GOOD.replace("  - wait: {within_us: 10}", "  - send: {opcode: RC_BOGUS}"),
            "unknown opcode name `RC_BOGUS`",
        ),
        (
            GOOD.replace(
                "  - wait: {within_us: 10}",
                "  - send: {opcode: RC_SEND_ONLY, bth: {psn: \"${nope + 1}\"}}",
            ),
            "unknown name `nope`",
        ),
        (
            GOOD.replace(
                "  - wait: {within_us: 10}",
                "  - expect_memory: {mr: x, bytes: \"00\"}",
            ),
            "no MR named `x`",
        ),
        // `from_step` names an earlier frame (a `send` or `expect`), for a
        // lower bound only.
        (
            GOOD.replace(
                "  - wait: {within_us: 10}",
                "  - wait: {within_us: 10}\n  - expect_none: {lower_bound: true, from_step: 0}",
            ),
            "from_step: 0 must name an earlier `send` or `expect`",
        ),
        (
            GOOD.replace(
                "  - wait: {within_us: 10}",
                "  - expect: {}\n  - expect_none: {from_step: 0}",
            ),
            "with `lower_bound: true`",
        ),
        (
            GOOD.replace(
                "  - wait: {within_us: 10}",
                "  - expect: {}\n  - expect_none: {lower_bound: true, from_step: 1}",
            ),
            "from_step: 1 must name an earlier",
        ),
        ("id: [".to_string(), ""),
        ("a: &a [*a]".to_string(), ""),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let file = write(&dir, &format!("c{i}.yaml"), text);
        let e = load_vector(&file).unwrap_err();
        assert!(e.message.contains(want), "case {i}: {e}");
    }
}

#[test]
fn budgets_bound_depth_and_size() {
    let dir = scratch("budget");
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let file = write(&dir, "deep.yaml", &deep);
    assert!(load_vector(&file).is_err());
    let big = "#".repeat(2 << 20);
    let file = write(&dir, "big.yaml", &big);
    let e = load_vector(&file).unwrap_err();
    assert!(e.message.contains("limit"), "{e}");
}

#[test]
fn duplicate_ids_are_reported() {
    let dir = scratch("dup");
    write(&dir, "a.yaml", GOOD);
    write(&dir, "b.yaml", GOOD);
    let errors = load_dir(&dir).unwrap_err();
    assert!(
        errors
            .iter()
            .any(|e| e.message.contains("used by another vector"))
    );
}

#[test]
fn committed_report_schema_is_current() {
    let committed = std::fs::read_to_string(repo().join("conformance/report-schema.json")).unwrap();
    assert!(
        committed == metaroce_conformance::report::json::schema_json(),
        "conformance/report-schema.json is stale: run `cargo run -p metaroce-conformance -- vectors report-schema > conformance/report-schema.json`"
    );
}
