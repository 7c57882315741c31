//! Replays the fuzz corpora and past crashers through the checks of the
//! `codec_parse` and `codec_roundtrip` fuzz targets, so `cargo test` catches a
//! regression without a fuzzer.
//!
//! The checks are the fuzz targets' own, from `metaroce-fuzz-drivers` (a
//! dev-dependency: test oracle code, not codec API).

use metaroce_fuzz_drivers::checks;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

/// Corpus directories that must exist and hold inputs.
const CORPORA: [&str; 2] = ["corpus/codec_parse", "corpus/codec_roundtrip"];
/// Past crashers, any target (every file but README.md, in any subdirectory).
const REGRESSIONS: &str = "artifacts-regressions";

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// Every regular file under `dir`, recursively, sorted; README.md skipped.
fn inputs_under(dir: &Path) -> Vec<PathBuf> {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            files.extend(inputs_under(&path));
        } else if path.file_name().is_some_and(|n| n != "README.md") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// Runs both checks on one input; a failed property or a panic is an `Err`.
fn replay(path: &Path) -> Result<(), String> {
    let data = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    catch_unwind(AssertUnwindSafe(|| {
        checks::check_parse(&data).and_then(|()| checks::check_roundtrip(&data))
    }))
    .unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Err(format!("panicked: {message}"))
    })
}

#[test]
fn fuzz_corpus_and_regressions_replay_clean() {
    let fuzz = fuzz_dir();
    let mut inputs = Vec::new();
    for corpus in CORPORA {
        let files = inputs_under(&fuzz.join(corpus));
        assert!(
            !files.is_empty(),
            "fuzz/{corpus} is empty: regenerate it with \
             `cargo run --manifest-path fuzz/Cargo.toml --example seed-corpus`"
        );
        inputs.extend(files);
    }
    let regressions = inputs_under(&fuzz.join(REGRESSIONS));
    let regression_count = regressions.len();
    inputs.extend(regressions);

    let failures: Vec<String> = inputs
        .iter()
        .filter_map(|path| {
            replay(path)
                .err()
                .map(|e| format!("{}: {e}", path.display()))
        })
        .collect();
    println!(
        "replayed {} fuzz inputs ({regression_count} past crashers) through check_parse and check_roundtrip",
        inputs.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} inputs fail:\n{}",
        failures.len(),
        inputs.len(),
        failures.join("\n")
    );
}
