//! # metaroce-fuzz-drivers: what the fuzz targets run
//!
//! The fuzz crate (`fuzz/`, built by cargo-fuzz in a workspace of its own)
//! holds only the libFuzzer entry points; what they run lives here, in the
//! main workspace, so the corpus replays of `cargo test` run the same code:
//!
//! - [`checks`]: `check_parse` and `check_roundtrip` on raw bytes (the
//!   `codec_parse` and `codec_roundtrip` targets; replayed by
//!   `codec/tests/fuzz_corpus.rs`);
//! - [`dict`]: the libFuzzer dictionaries, generated from the codec's
//!   tables (checked by `codec/tests/fuzz_dict.rs`);
//! - [`stateful`]: the drivers of `model_stateful`, `reference_stateful`
//!   and `differential` (replayed by
//!   `conformance/tests/fuzzing/fuzz_stateful_corpus.rs` and
//!   `conformance/tests/fuzz_differential_zoo.rs`).
#![forbid(unsafe_code)]

pub mod checks;
pub mod dict;
pub mod stateful;

pub use checks::{check_parse, check_roundtrip};
