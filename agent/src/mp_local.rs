//! The MP local constants of SPEC §10.3 that SPEC §2 lets a capability
//! profile declare (`mp_rto_init`, …): their defaults, ranges and the order
//! §10.3 requires among them. One table for the harness (`--profile`, the
//! `${profile.KEY}` bindings of vectors) and for an agent that checks the
//! values it is told to declare (`metaroce-ref serve --mp-timers`).

use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One MP local constant of SPEC §10.3 that a profile may declare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalConstant {
    /// The §2 key, the §10.3 constant's name.
    pub key: &'static str,
    /// The §10.3 default, what an IUT that does not declare it is held to.
    pub default: u64,
    /// The smallest value §10.3 allows.
    pub min: u64,
    /// The largest value §10.3 allows.
    pub max: u64,
    /// The §10.3 unit (the value is in it, as in the §10.3 table).
    pub unit: &'static str,
}

const fn local(
    key: &'static str,
    default: u64,
    min: u64,
    max: u64,
    unit: &'static str,
) -> LocalConstant {
    LocalConstant {
        key,
        default,
        min,
        max,
        unit,
    }
}

/// The MP local constants of SPEC §10.3 that §2 lets a profile declare.
/// `mp_rto_init` lies between `mp_rto_min` and `mp_rto_max`,
/// and `mp_retire_hold_max` is at least `mp_retire_hold` ([`ORDERED`]).
pub const MP_LOCAL: &[LocalConstant] = &[
    local("mp_reorder_threshold", 32, 1, 64, "PSNs"),
    local("mp_ack_coalesce_time", 8, 1, 64, "µs"),
    local("mp_ack_prompt_max", 4, 1, 50, "µs"),
    local("mp_rto_init", 1_000, 10, 1_000_000, "µs"),
    local("mp_rto_min", 100, 10, 10_000, "µs"),
    local("mp_rto_max", 16_000, 1_000, 1_000_000, "µs"),
    local("mp_retire_hold", 500, 10, 1_000_000, "µs"),
    local("mp_retire_hold_max", 64_000, 10, 10_000_000, "µs"),
    // At least the profile's `max_pmtu` (checked by [`check_cwnd_max`]);
    // here the smallest PMTU.
    local("mp_cwnd_max", 786_432, 256, 67_108_864, "bytes"),
];

/// The SPEC §2 default of `max_pmtu`, what a profile that omits it declares.
pub const DEFAULT_MAX_PMTU: u64 = 4096;

/// SPEC §2, §10.3 (v1.2): `mp_cwnd_max` is at least the profile's
/// `max_pmtu` (`None`: the §2 default), so that it is in range (at least
/// one PMTU) for every QP the implementation can create.
///
/// # Errors
/// `mp_cwnd_max` below `max_pmtu`, naming both.
pub fn check_cwnd_max(cwnd_max: u64, max_pmtu: Option<u64>) -> Result<(), String> {
    let pmtu = max_pmtu.unwrap_or(DEFAULT_MAX_PMTU);
    if cwnd_max < pmtu {
        return Err(format!(
            "mp_cwnd_max ({cwnd_max}) is below max_pmtu ({pmtu}); SPEC §2 wants at least the profile's max_pmtu"
        ));
    }
    Ok(())
}

/// Pairs (smaller, larger) of §10.3 whose values must be ordered.
pub const ORDERED: &[(&str, &str)] = &[
    ("mp_rto_min", "mp_rto_max"),
    ("mp_rto_min", "mp_rto_init"),
    ("mp_rto_init", "mp_rto_max"),
    ("mp_retire_hold", "mp_retire_hold_max"),
];

/// The value of every MP local constant for the profile `map`: the declared
/// one, else the §10.3 default.
///
/// # Errors
/// A declared value that is not an integer within its §10.3 range, two
/// declared values out of the order §10.3 requires, or `mp_cwnd_max` below
/// the profile's `max_pmtu` ([`check_cwnd_max`]). The message names the
/// key. An undeclared constant that the declared ones leave out of order
/// takes the nearest value in order (`mp_rto_min: 2000` alone makes
/// `mp_rto_init` 2000).
pub fn mp_local_values(map: &Map<String, Value>) -> Result<BTreeMap<&'static str, u64>, String> {
    let mut values = BTreeMap::new();
    for c in MP_LOCAL {
        let v = match map.get(c.key) {
            None => c.default,
            Some(v) => match v.as_u64() {
                Some(n) if (c.min..=c.max).contains(&n) => n,
                _ => {
                    return Err(format!(
                        "{}: {v} is outside {}..={} {} (SPEC §10.3)",
                        c.key, c.min, c.max, c.unit
                    ));
                }
            },
        };
        values.insert(c.key, v);
    }
    for &(lo, hi) in ORDERED {
        let (a, b) = (values[lo], values[hi]);
        if a <= b {
            continue;
        }
        // An undeclared constant takes its default moved into the range
        // the declared ones leave (`mp_rto_min: 2000` alone makes
        // `mp_rto_init` 2000); two declared values out of order are wrong.
        match (map.contains_key(lo), map.contains_key(hi)) {
            (true, true) => {
                return Err(format!(
                    "{lo} ({a}) is above {hi} ({b}); SPEC §10.3 wants {lo} ≤ {hi}"
                ));
            }
            (false, _) => {
                values.insert(lo, b);
            }
            (true, false) => {
                values.insert(hi, a);
            }
        }
    }
    check_cwnd_max(
        values["mp_cwnd_max"],
        map.get("max_pmtu").and_then(Value::as_u64),
    )?;
    Ok(values)
}
