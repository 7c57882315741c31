//! Fuzzing support for `metaroce-codec`: the properties the fuzz targets
//! check, kept here so that the targets, the corpus replay in the main
//! workspace's `cargo test` and this crate's own tests run the same code.
//!
//! - [`checks`]: `check_parse` and `check_roundtrip` on raw bytes (shared with
//!   `codec/tests/fuzz_corpus.rs` by `#[path]`).
//! - [`spec`]: the `codec_builder` target's packet description and
//!   `check_builder`.
//! - [`mutate`]: the structure-aware mutation of the packet targets'
//!   `fuzz_mutator!`.
//! - [`dict`]: the libFuzzer dictionaries, generated from the codec's tables.
//! - [`stateful`]: the drivers of `model_stateful`, `reference_stateful` and
//!   `differential` (shared with `conformance/tests/fuzz_stateful_corpus.rs`).
#![forbid(unsafe_code)]

pub mod checks;
pub mod dict;
pub mod mutate;
pub mod spec;
pub mod stateful;

pub use checks::{check_parse, check_roundtrip};
pub use spec::{BuilderSpec, check_builder};

/// Panics with the message of a violated property, so that libFuzzer
/// records the input as a crash.
pub fn or_crash(result: Result<(), String>) {
    if let Err(message) = result {
        panic!("{message}");
    }
}
