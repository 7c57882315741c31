//! Two reference devices on a lossy link, driven by verbs, impairments, time
//! and injected frames: no panic, no completion twice, no byte changed that
//! no operation addressed, bounded queues.
#![no_main]

use libfuzzer_sys::fuzz_target;
use metaroce_fuzz::or_crash;
use metaroce_fuzz::stateful::reference;

fuzz_target!(|data: &[u8]| or_crash(reference::run(data)));
