//! Any bytes: `Frame::parse` (MetaRoCE and plain RoCEv2) and `icrc::verify`
//! must not panic.
#![no_main]

use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};
use metaroce_fuzz::{check_parse, or_crash};

fuzz_target!(|data: &[u8]| or_crash(check_parse(data)));

// Structure-aware: mutated frames keep lengths, PadCnt and ICRC consistent
// unless the mutation targets them (metaroce_fuzz::mutate_frame).
fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    metaroce_fuzz::mutate_frame::packet_mutator(data, size, max_size, seed, fuzzer_mutate)
});
