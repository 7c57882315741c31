//! Any bytes: whatever `Frame::parse` accepts, `to_bytes` gives back byte for byte.
#![no_main]

use libfuzzer_sys::fuzz_target;
use metaroce_fuzz::{check_roundtrip, or_crash};

fuzz_target!(|data: &[u8]| or_crash(check_roundtrip(data)));
