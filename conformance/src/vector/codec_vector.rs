//! Static codec vectors (vectors/README.md): bytes ↔ fields ↔ verdict, no IUT.
//! They live under `vectors/codec/` and are judged by the codec and the
//! spec model's per-packet validators alone.

use super::model::Matcher;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One frame, what it decodes to, and the findings it must (not) raise.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CodecVector {
    /// Unique id.
    pub id: String,
    /// One line saying what the frame shows.
    pub title: String,
    /// Requirements checked.
    pub requirements: Vec<String>,
    /// The frame, hex (spaces and newlines allowed).
    pub frame: String,
    /// Decode as a Base-only implementation (MP opcodes unknown).
    #[serde(default)]
    pub base_only: bool,
    /// Field matchers against `metaroce decode --format jsonl` of the frame
    /// (as in `expect`), plus `error` (the decode error text, or null).
    #[serde(default)]
    pub fields: BTreeMap<String, Matcher>,
    /// Requirement IDs the per-packet validators must report for this frame
    /// (empty: the frame is conforming).
    #[serde(default)]
    pub findings: Vec<String>,
}
