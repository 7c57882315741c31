//! `metaroce-ref-serve`: the agent alone (`metaroce-ref serve` does the same
//! inside the `metaroce-ref` binary).
use std::process::ExitCode;

fn main() -> ExitCode {
    metaroce_ref::agent::cli::serve(std::env::args().skip(1))
}
