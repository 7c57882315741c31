//! A drawn packet description: `PacketBuilder` builds it, the parser must
//! read back what was built (or, with invalidating overrides, not panic).
#![no_main]

use libfuzzer_sys::fuzz_target;
use metaroce_fuzz::{BuilderSpec, check_builder, or_crash};

fuzz_target!(|spec: BuilderSpec| or_crash(check_builder(&spec)));
