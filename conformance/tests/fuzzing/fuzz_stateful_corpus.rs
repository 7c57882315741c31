//! Replays the committed corpora and past crashers of the stateful fuzz
//! targets (`model_stateful`, `reference_stateful`, `differential`) through
//! the same drivers and checks, so `cargo test` catches a regression of the
//! spec model or the reference transport without a fuzzer.
//!
//! The drivers are the fuzz targets' own, from `metaroce-fuzz-drivers`
//! (`fuzz-drivers/src/stateful/`); the fuzz crate itself is a workspace of
//! its own (libFuzzer, sancov flags).
//!
//! Besides "no input fails", each corpus must show that the drivers reach
//! deep state: work requests complete successfully, and frames reach the
//! QP models and the responder judge.

use metaroce_fuzz_drivers::stateful;

use stateful::Tally;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// Every regular file under `dir` (none if it does not exist), sorted;
/// README.md skipped.
fn inputs_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "README.md"))
        .collect();
    files.sort();
    files
}

/// Runs `run` on every input of `target`'s corpus and past crashers; a
/// failure or panic names the file.
fn replay(target: &str, run: fn(&[u8]) -> Result<Tally, String>) -> Tally {
    let fuzz = fuzz_dir();
    let corpus = inputs_under(&fuzz.join("corpus").join(target));
    assert!(
        !corpus.is_empty(),
        "fuzz/corpus/{target} is empty: regenerate it (fuzz/README.md, Seeding)"
    );
    let regressions = inputs_under(&fuzz.join("artifacts-regressions").join(target));
    let mut total = Tally::default();
    let mut failures = Vec::new();
    for path in corpus.iter().chain(&regressions) {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        match catch_unwind(AssertUnwindSafe(|| run(&data))) {
            Ok(Ok(t)) => total = total.plus(t),
            Ok(Err(e)) => failures.push(format!("{}: {e}", path.display())),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{}: panicked: {message}", path.display()));
            }
        }
    }
    println!(
        "{target}: {} inputs ({} past crashers): {total:?}",
        corpus.len() + regressions.len(),
        regressions.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} {target} inputs fail:\n{}",
        failures.len(),
        corpus.len() + regressions.len(),
        failures.join("\n")
    );
    total
}

#[test]
fn model_stateful_corpus_replays_clean() {
    let t = replay("model_stateful", stateful::model::run_tally);
    assert!(t.judged > 100, "frames reach the QP models: {t:?}");
    assert!(
        t.completed_ok > 10,
        "work requests complete in the model: {t:?}"
    );
}

#[test]
fn reference_stateful_corpus_replays_clean() {
    let t = replay("reference_stateful", stateful::reference::run_tally);
    assert!(t.judged > 100, "frames cross the link: {t:?}");
    assert!(t.completed_ok > 10, "work requests complete: {t:?}");
}

#[test]
fn differential_corpus_replays_clean() {
    let t = replay("differential", stateful::differential::run_tally);
    assert!(
        t.judged > 100,
        "the responder model judges B's answers: {t:?}"
    );
    assert!(t.completed_ok > 10, "work requests complete: {t:?}");
}
