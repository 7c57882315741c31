//! The fuzz targets' library: what only the targets use, and (re-exported)
//! what the main workspace's corpus replays share with them, from the
//! workspace crate `metaroce-fuzz-drivers`.
//!
//! - [`checks`]: `check_parse` and `check_roundtrip` on raw bytes.
//! - [`spec`]: the `codec_builder` target's packet description and
//!   `check_builder`.
//! - [`mutate_frame`]: the structure-aware mutation of the packet targets'
//!   `fuzz_mutator!`.
//! - [`dict`]: the libFuzzer dictionaries, generated from the codec's tables.
//! - [`stateful`]: the drivers of `model_stateful`, `reference_stateful` and
//!   `differential`.
#![forbid(unsafe_code)]

pub mod mutate_frame;
pub mod spec;

pub use metaroce_fuzz_drivers::{checks, dict, stateful};

pub use checks::{check_parse, check_roundtrip};
pub use spec::{BuilderSpec, check_builder};

/// Panics with the message of a violated property, so that libFuzzer
/// records the input as a crash.
pub fn or_crash(result: Result<(), String>) {
    if let Err(message) = result {
        panic!("{message}");
    }
}
