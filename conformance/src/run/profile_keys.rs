//! The keys of a capability profile (SPEC §2), and the MP local constants of
//! SPEC §10.3 among them with their defaults and ranges: the names
//! `${profile.KEY}` a vector may use (vectors/README.md), the values the
//! runner binds to them, and the checks `--profile FILE` makes.

use crate::vector::expr::Bindings;
// The table has its home in the agent crate, which the reference transport
// also uses to check the values `metaroce-ref serve --mp-timers` declares.
pub use metaroce_agent::mp_local::{
    LocalConstant, MP_LOCAL, ORDERED, check_cwnd_max, mp_local_values,
};
pub use metaroce_agent::profile::PROFILE_KEYS;
use serde_json::{Map, Value};

/// The prefix of the names vectors use for these constants.
pub const NAME_PREFIX: &str = "profile.";

/// The names `profile.KEY` of every MP local constant, bound to its value
/// for the profile `map` (see [`mp_local_values`]).
///
/// # Errors
/// As [`mp_local_values`].
pub fn bindings(map: &Map<String, Value>) -> Result<Bindings, String> {
    let mut b = Bindings::default();
    for (k, v) in mp_local_values(map)? {
        b.set(format!("{NAME_PREFIX}{k}"), v);
    }
    Ok(b)
}

/// Checks the keys of a profile: each must be a key of SPEC §2, and the MP
/// local constants must hold (see [`mp_local_values`]).
///
/// # Errors
/// The first key that SPEC §2 does not list, or a bad MP local constant.
pub fn check_keys(map: &Map<String, Value>) -> Result<(), String> {
    if let Some(k) = map.keys().find(|k| !PROFILE_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "`{k}` is not a capability-profile key of SPEC §2 (the keys are listed in spec-model/SPEC.md §2)"
        ));
    }
    mp_local_values(map).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_keys() -> Vec<String> {
        let spec = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../spec-model/SPEC.md"
        ))
        .expect("SPEC.md");
        let start = spec.find("## 2. Capability profile").expect("§2");
        let section = &spec[start..];
        let end = section.find("\n## 3.").expect("§3");
        section[..end]
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .map(String::from)
            .collect()
    }

    #[test]
    fn the_keys_are_those_of_spec_section_2() {
        let want = spec_keys();
        assert!(want.len() > 30, "{want:?}");
        assert_eq!(PROFILE_KEYS, want.as_slice());
        for c in MP_LOCAL {
            assert!(PROFILE_KEYS.contains(&c.key), "{}", c.key);
            assert!((c.min..=c.max).contains(&c.default), "{}", c.key);
        }
    }

    #[test]
    fn defaults_unless_declared_and_ranges_checked() {
        let mut map = Map::new();
        let v = mp_local_values(&map).unwrap();
        assert_eq!(v["mp_rto_init"], 1000);
        assert_eq!(v["mp_retire_hold"], 500);
        map.insert("mp_rto_init".into(), 5000.into());
        assert_eq!(mp_local_values(&map).unwrap()["mp_rto_init"], 5000);
        map.insert("mp_rto_init".into(), 5.into());
        let e = mp_local_values(&map).unwrap_err();
        assert!(
            e.contains("mp_rto_init") && e.contains("10..=1000000"),
            "{e}"
        );
        map.insert("mp_rto_init".into(), "fast".into());
        assert!(mp_local_values(&map).unwrap_err().contains("mp_rto_init"));
        let mut map = Map::new();
        map.insert("mp_rto_min".into(), 2000.into());
        let v = mp_local_values(&map).unwrap();
        assert_eq!((v["mp_rto_init"], v["mp_rto_max"]), (2000, 16000));
        map.insert("mp_rto_max".into(), 1500.into());
        let e = mp_local_values(&map).unwrap_err();
        assert!(
            e.contains("mp_rto_min (2000) is above mp_rto_max (1500)"),
            "{e}"
        );
        let mut map = Map::new();
        map.insert("mp_retire_hold".into(), 100_000.into());
        assert_eq!(
            mp_local_values(&map).unwrap()["mp_retire_hold_max"],
            100_000
        );
    }

    #[test]
    fn cwnd_max_at_least_max_pmtu() {
        // SPEC §2 (v1.2): at least the profile's max_pmtu, 4096 when omitted.
        let mut map = Map::new();
        map.insert("mp_cwnd_max".into(), 2048.into());
        let e = check_keys(&map).unwrap_err();
        assert!(
            e.contains("mp_cwnd_max (2048) is below max_pmtu (4096)"),
            "{e}"
        );
        map.insert("max_pmtu".into(), 2048.into());
        assert_eq!(check_keys(&map), Ok(()));
        map.insert("max_pmtu".into(), 4096.into());
        map.insert("mp_cwnd_max".into(), 4096.into());
        assert_eq!(check_keys(&map), Ok(()));
    }

    #[test]
    fn unknown_keys_are_named() {
        let mut map = Map::new();
        map.insert("mp".into(), true.into());
        assert_eq!(check_keys(&map), Ok(()));
        map.insert("mp_rto_initial".into(), 1000.into());
        let e = check_keys(&map).unwrap_err();
        assert!(
            e.contains("`mp_rto_initial` is not a capability-profile key"),
            "{e}"
        );
    }
}
