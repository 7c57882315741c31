//! Helpers shared by the tests that run the `metaroce` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `vectors/captures/sample.pcapng`.
pub fn sample() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../vectors/captures/sample.pcapng")
}

/// Runs `metaroce ARGS FILE`.
pub fn metaroce(args: &[&str], file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_metaroce"))
        // Requirement links in the output: the default, whatever the caller's environment.
        .env_remove("METAROCE_SPEC_URL")
        .args(args)
        .arg(file)
        .output()
        .expect("runs metaroce")
}

/// Standard output as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("output is UTF-8")
}

/// A path in cargo's scratch directory for integration tests
/// (`target/tmp`, not the system's /tmp, so runs leave no litter there),
/// unique to this test process.
pub fn temp_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("metaroce-test-{}-{name}", std::process::id()))
}

/// Writes `bytes` to a fresh [`temp_path`] and returns it.
pub fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = temp_path(name);
    std::fs::write(&path, bytes).expect("writes the temporary file");
    path
}

/// The real captures, `../shared/captures/real/` beside the repository
/// (`METAROCE_REAL_CAPTURES` overrides it, e.g. from a git worktree), or
/// `None` when absent. With `CI=true` an absent directory fails the test.
pub fn real_captures() -> Option<PathBuf> {
    let dir = std::env::var_os("METAROCE_REAL_CAPTURES").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/captures/real"),
        PathBuf::from,
    );
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{} absent (CI=true: the real captures must be there)",
        dir.display()
    );
    println!("SKIP: ../shared/captures/real absent");
    None
}
