//! The reference transport and the spec model on the same event sequence:
//! fails when the transport does something the model does not allow.
//!
//! Built with the feature `zoo` (`cargo fuzz run --features zoo …`), both
//! devices run the bug-zoo mutant named by the environment variable
//! `METAROCE_ZOO_MUTANT` (unset: the unmutated transport), to see the target
//! find it; the default build never selects a mutant.
#![no_main]

use libfuzzer_sys::fuzz_target;
use metaroce_fuzz::or_crash;
use metaroce_fuzz::stateful::differential;

#[cfg(not(feature = "zoo"))]
fuzz_target!(|data: &[u8]| or_crash(differential::run(data)));

#[cfg(feature = "zoo")]
fuzz_target!(|data: &[u8]| {
    use metaroce_ref::DeviceConfig;
    use metaroce_ref::zoo::Mutant;
    use std::sync::OnceLock;
    static MUTANT: OnceLock<Option<Mutant>> = OnceLock::new();
    let mutant = *MUTANT.get_or_init(|| {
        let name = std::env::var("METAROCE_ZOO_MUTANT").ok()?;
        match name.parse() {
            Ok(m) => Some(m),
            Err(e) => panic!("METAROCE_ZOO_MUTANT: {e}"),
        }
    });
    let configure = |c: DeviceConfig| DeviceConfig { mutant, ..c };
    or_crash(differential::run_tally_with(data, &configure).map(|_| ()));
});
