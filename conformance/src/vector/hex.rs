//! Hex text in vectors: two digits per byte, whitespace allowed anywhere.

/// Decodes hex text, ignoring whitespace.
pub fn decode(text: &str) -> Result<Vec<u8>, String> {
    let digits: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    hex::decode(&digits).map_err(|e| format!("bad hex: {e}"))
}

/// Lower-case hex of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    hex::encode(bytes)
}
