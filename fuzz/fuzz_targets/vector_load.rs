//! Any bytes as a vector file: the loader (YAML with budgets, then the
//! checks of `metaroce run`) returns an error naming the file, never panics,
//! whether the bytes are read as a conversation vector or a codec vector.
#![no_main]

use libfuzzer_sys::fuzz_target;
use metaroce_conformance::vector::load::{codec_vector_from_bytes, vector_from_bytes};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let file = Path::new("fuzz-input.yaml");
    if let Err(e) = vector_from_bytes(file, data) {
        assert!(e.to_string().contains("fuzz-input.yaml"), "{e}");
    }
    if let Err(e) = codec_vector_from_bytes(file, data) {
        assert!(e.to_string().contains("fuzz-input.yaml"), "{e}");
    }
});
