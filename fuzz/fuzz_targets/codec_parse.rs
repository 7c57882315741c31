//! Any bytes: `Frame::parse` (MetaRoCE and plain RoCEv2) and `icrc::verify`
//! must not panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use metaroce_fuzz::{check_parse, or_crash};

fuzz_target!(|data: &[u8]| or_crash(check_parse(data)));
