//! What a capability profile (the YAML file `metaroce run --profile` takes,
//! SPEC §2 keys) declares that `metaroce check --profile` judges against,
//! instead of learning it from the traffic.

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
}

impl Declared {
    /// Reads the keys of a capability profile that the checker uses; a key
    /// of the wrong type is an error naming it. Keys it does not use are
    /// ignored (the file is the one `metaroce run` takes).
    ///
    /// # Errors
    /// A key the checker uses is not `true` or `false`.
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
        let credits = flag("credits")?;
        features.credits = credits.unwrap_or(false);
        Ok(Declared {
            credits,
            cnp_generation: flag("cnp_generation")?,
            mp: flag("mp")?,
            features: any.then_some(features),
        })
    }
}
