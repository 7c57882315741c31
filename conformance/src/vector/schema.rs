//! The JSON Schema of vector files, generated from the types with schemars
//! and committed as `vectors/schema.json` (a test fails when it is stale).

use super::codec_vector::CodecVector;
use super::model::Vector;
use schemars::JsonSchema;

/// A vector file: a conversation test, or (under `codec/`) a static codec vector.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code, clippy::large_enum_variant)] // only its schema is used
enum VectorFile {
    /// A test run against an implementation under test.
    Test(Vector),
    /// A frame and what it must decode to.
    Codec(CodecVector),
}

/// The schema as pretty JSON text, ending in a newline.
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(VectorFile);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}
