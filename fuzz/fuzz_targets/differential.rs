//! The reference transport and the spec model on the same event sequence:
//! fails when the transport does something the model does not allow.
#![no_main]

use libfuzzer_sys::fuzz_target;
use metaroce_fuzz::or_crash;
use metaroce_fuzz::stateful::differential;

fuzz_target!(|data: &[u8]| or_crash(differential::run(data)));
