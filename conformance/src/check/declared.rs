//! What a capability profile (the YAML file `metaroce run --profile` takes,
//! SPEC §2 keys) declares that `metaroce check --profile` judges against,
//! instead of learning it from the traffic.

use crate::run::profile_keys::{MP_LOCAL, check_cwnd_max};
use metaroce_spec::judge::RdLimits;
use metaroce_spec::model::mp::MpConfig;
use metaroce_spec::model::responder::Features;

/// What a capability profile declares that the checker judges against
/// (`None`: not declared).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Declared {
    /// `credits`: the responders generate end-to-end credits.
    pub credits: Option<bool>,
    /// `cnp_generation`: the receivers send CNPs for CE-marked packets.
    pub cnp_generation: Option<bool>,
    /// `mp`: the NICs implement the MP profile (`false`: Base only, as `--base`).
    pub mp: Option<bool>,
    /// The responder features (`atomics`, `flush`, `atomic_write`,
    /// `send_with_invalidate`, `immediate`; `credits`), when any is declared.
    pub features: Option<Features>,
    /// `max_pmtu`: the largest PMTU (bytes); a PMTU not given with `--pmtu`
    /// is learnt among the values up to it.
    pub max_pmtu: Option<u32>,
    /// The MP parameters of SPEC §10.3 the MP judge holds the traffic to.
    pub mp_params: MpParams,
    /// `max_rd_atomic` and `max_dest_rd_atomic` (1–255, SPEC §2): the
    /// RDMA-resource operations a requester may have outstanding on a
    /// connection whose RDMA-CM setup is not in the capture (MR-REQ-7).
    pub rd_limits: RdLimits,
    /// `mp_resource_nak`: the requesters announce RN (SPEC §7.16); `false`
    /// makes an MP ACK with NAK 0x66 a finding (MR-MPP-23).
    pub mp_resource_nak: Option<bool>,
}

/// The MP parameters of SPEC §10.3 a profile may declare (`None`: not
/// declared; the judge then takes the end of the range that fails no
/// allowed value). Times in ns, sizes in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MpParams {
    /// `mp_reorder_threshold` K (1–64 PSNs).
    pub reorder_threshold: Option<u32>,
    /// `mp_rto_min` (10–10000 µs in the profile).
    pub rto_min_ns: Option<u64>,
    /// `mp_ack_prompt_max` (1–50 µs in the profile).
    pub ack_prompt_max_ns: Option<u64>,
    /// `mp_cwnd_max` (the profile's `max_pmtu`–67108864 bytes).
    pub cwnd_max: Option<u64>,
}

/// The PMTU values of SPEC §10.1 (`max_pmtu` is one of them).
const PMTUS: [u64; 5] = [256, 512, 1024, 2048, 4096];

impl Declared {
    /// Reads the keys of a capability profile that the checker uses; a key
    /// of the wrong type is an error naming it. Keys it does not use are
    /// ignored (the file is the one `metaroce run` takes).
    ///
    /// # Errors
    /// A flag the checker uses is not `true` or `false`; a number it uses
    /// is not an integer within its SPEC §2 / §10.3 range (the error names
    /// the key and the range).
    pub fn from_profile(map: &serde_json::Map<String, serde_json::Value>) -> Result<Self, String> {
        let flag = |key: &str| -> Result<Option<bool>, String> {
            match map.get(key) {
                None => Ok(None),
                Some(serde_json::Value::Bool(b)) => Ok(Some(*b)),
                Some(v) => Err(format!("{key}: {v} is not true or false")),
            }
        };
        let mut features = Features::DEFAULT;
        let mut any = false;
        for (key, field) in [
            ("atomics", &mut features.atomics),
            ("flush", &mut features.flush),
            ("atomic_write", &mut features.atomic_write),
            ("send_with_invalidate", &mut features.send_with_invalidate),
            ("immediate", &mut features.immediate),
        ] {
            if let Some(b) = flag(key)? {
                *field = b;
                any = true;
            }
        }
        let int = |key: &str, lo: u64, hi: u64, unit: &str| -> Result<Option<u64>, String> {
            match map.get(key) {
                None => Ok(None),
                Some(v) => match v.as_u64() {
                    Some(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
                    _ => Err(format!("{key}: {v} is outside {lo}..={hi}{unit}")),
                },
            }
        };
        let max_pmtu = match map.get("max_pmtu") {
            None => None,
            Some(v) => match v.as_u64().filter(|n| PMTUS.contains(n)) {
                Some(n) => Some(n as u32),
                None => {
                    return Err(format!(
                        "max_pmtu: {v} is not 256, 512, 1024, 2048 or 4096 (SPEC §2)"
                    ));
                }
            },
        };
        // The MP local constants of SPEC §2 / §10.3, with the ranges of
        // `metaroce_agent::mp_local::MP_LOCAL` (their one home).
        let local = |key: &str| -> Result<Option<u64>, String> {
            let c = MP_LOCAL
                .iter()
                .find(|c| c.key == key)
                .ok_or_else(|| format!("{key}: not an MP local constant of SPEC §2"))?;
            int(key, c.min, c.max, &format!(" {} (SPEC §10.3)", c.unit))
        };
        let mp_params = MpParams {
            reorder_threshold: local("mp_reorder_threshold")?.map(|k| k as u32),
            rto_min_ns: local("mp_rto_min")?.map(|us| us * 1_000),
            ack_prompt_max_ns: local("mp_ack_prompt_max")?.map(|us| us * 1_000),
            cwnd_max: local("mp_cwnd_max")?,
        };
        if let Some(c) = mp_params.cwnd_max {
            check_cwnd_max(c, max_pmtu.map(u64::from))?;
        }
        let rd = |key: &str| -> Result<Option<u8>, String> {
            Ok(int(key, 1, 255, " (SPEC §2)")?.map(|n| n as u8))
        };
        let rd_limits = RdLimits {
            max_rd_atomic: rd("max_rd_atomic")?,
            max_dest_rd_atomic: rd("max_dest_rd_atomic")?,
        };
        let credits = flag("credits")?;
        features.credits = credits.unwrap_or(false);
        Ok(Declared {
            credits,
            cnp_generation: flag("cnp_generation")?,
            mp: flag("mp")?,
            features: any.then_some(features),
            max_pmtu,
            mp_params,
            rd_limits,
            mp_resource_nak: flag("mp_resource_nak")?,
        })
    }
}

impl Declared {
    /// Replaces the MP judge's parameters with the declared ones, and its
    /// PMTU with `pmtu` (`--pmtu`) or, without it, with at most the
    /// declared `max_pmtu`.
    pub fn apply_mp(&self, mp: &mut MpConfig, pmtu: Option<u32>) {
        let d = &self.mp_params;
        if let Some(k) = d.reorder_threshold {
            mp.reorder_threshold = k;
        }
        if let Some(t) = d.rto_min_ns {
            mp.rto_min = t;
        }
        if let Some(t) = d.ack_prompt_max_ns {
            mp.ack_prompt_max = t;
        }
        if let Some(c) = d.cwnd_max {
            mp.cwnd_max = c;
        }
        if self.mp_resource_nak.is_some() {
            mp.resource_nak = self.mp_resource_nak;
        }
        match (pmtu, self.max_pmtu) {
            (Some(p), _) => mp.pmtu = p,
            (None, Some(max)) => mp.pmtu = mp.pmtu.min(max),
            (None, None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value, json};

    fn profile(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn numbers_are_read_within_their_range() {
        let d = Declared::from_profile(&profile(json!({
            "max_pmtu": 2048, "mp_reorder_threshold": 8, "mp_rto_min": 200,
            "mp_ack_prompt_max": 4, "mp_cwnd_max": 1_048_576,
        })))
        .unwrap();
        assert_eq!(d.max_pmtu, Some(2048));
        assert_eq!(d.rd_limits, RdLimits::default());
        let rd = Declared::from_profile(&profile(json!({
            "max_rd_atomic": 16, "max_dest_rd_atomic": 8,
        })))
        .unwrap();
        assert_eq!(
            rd.rd_limits,
            RdLimits {
                max_rd_atomic: Some(16),
                max_dest_rd_atomic: Some(8)
            }
        );
        assert_eq!(
            d.mp_params,
            MpParams {
                reorder_threshold: Some(8),
                rto_min_ns: Some(200_000),
                ack_prompt_max_ns: Some(4_000),
                cwnd_max: Some(1_048_576),
            }
        );
        let mut mp = MpConfig::default();
        d.apply_mp(&mut mp, None);
        assert_eq!(
            (mp.reorder_threshold, mp.rto_min, mp.ack_prompt_max),
            (8, 200_000, 4_000)
        );
        assert_eq!((mp.cwnd_max, mp.pmtu), (1_048_576, 1024));
        assert_eq!(mp.resource_nak, None, "undeclared: not known");
        let rn = Declared::from_profile(&profile(json!({"mp_resource_nak": false}))).unwrap();
        rn.apply_mp(&mut mp, None);
        assert_eq!(mp.resource_nak, Some(false), "MR-MPP-23 judged");
        d.apply_mp(&mut mp, Some(4096));
        assert_eq!(mp.pmtu, 4096);
        // Undeclared: nothing changes.
        let before = MpConfig::default();
        let mut mp = before.clone();
        Declared::default().apply_mp(&mut mp, None);
        assert_eq!(mp, before);
    }

    #[test]
    fn a_value_out_of_range_is_an_error_naming_the_key_and_range() {
        for (key, v, range) in [
            ("max_pmtu", json!(1500), "256, 512, 1024, 2048 or 4096"),
            ("max_pmtu", json!("big"), "256, 512"),
            ("mp_reorder_threshold", json!(0), "1..=64"),
            ("mp_reorder_threshold", json!(65), "1..=64"),
            ("mp_rto_min", json!(9), "10..=10000 µs"),
            ("mp_rto_min", json!(true), "10..=10000 µs"),
            ("mp_ack_prompt_max", json!(51), "1..=50 µs"),
            ("mp_cwnd_max", json!(255), "256..=67108864 bytes"),
            ("mp_cwnd_max", json!(67_108_865), "256..=67108864 bytes"),
            ("max_rd_atomic", json!(0), "1..=255"),
            ("max_dest_rd_atomic", json!(256), "1..=255"),
        ] {
            let mut m = Map::new();
            m.insert(key.to_owned(), v.clone());
            let e = Declared::from_profile(&m).unwrap_err();
            assert!(e.starts_with(&format!("{key}: {v}")), "{e}");
            assert!(e.contains(range), "{e}");
        }
    }
}
