//! The spec model driven by an event sequence (frames, time, verbs, a
//! modelled peer); its invariants must hold after every event.
#![no_main]

use libfuzzer_sys::fuzz_target;
use metaroce_fuzz::or_crash;
use metaroce_fuzz::stateful::model;

fuzz_target!(|data: &[u8]| or_crash(model::run(data)));
