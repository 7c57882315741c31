//! SHA-256 of what a run depended on: the vector set and the IUT's
//! capability profile, so a report names exactly what was certified.

use crate::vector::VectorSet;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Digests shown in every report.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Digests {
    /// SHA-256 over every vector file: for each, in path order, its path
    /// relative to the set's root, a NUL, its bytes, a NUL.
    pub vector_set_sha256: String,
    /// SHA-256 of the capability profile as canonical JSON (keys sorted).
    pub profile_sha256: String,
}

impl Digests {
    /// Computes both digests.
    pub fn compute(set: &VectorSet, root: &std::path::Path, profile: &Map<String, Value>) -> Self {
        let mut files: Vec<(String, &str)> = set
            .tests
            .iter()
            .map(|v| (&v.file, v.text.as_str()))
            .chain(set.codec.iter().map(|v| (&v.file, v.text.as_str())))
            .map(|(f, t)| {
                (
                    f.strip_prefix(root)
                        .unwrap_or(f)
                        .to_string_lossy()
                        .replace('\\', "/"),
                    t,
                )
            })
            .collect();
        files.sort();
        let mut h = Sha256::new();
        for (path, text) in files {
            h.update(path.as_bytes());
            h.update([0]);
            h.update(text.as_bytes());
            h.update([0]);
        }
        let sorted: std::collections::BTreeMap<_, _> = profile.iter().collect();
        let canonical = serde_json::to_string(&sorted).unwrap_or_default();
        Digests {
            vector_set_sha256: hex::encode(h.finalize()),
            profile_sha256: hex::encode(Sha256::digest(canonical.as_bytes())),
        }
    }
}
