//! The `metaroce` command. See `metaroce --help` and README.md.
use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(metaroce_conformance::cli::run())
}
