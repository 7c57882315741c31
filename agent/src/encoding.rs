//! Text encodings of the agent protocol: hex and base64 bytes, MAC
//! addresses. Strict: anything malformed is an error, never a guess.

use super::protocol::{AgentError, ErrorCode, MAX_DATA};

/// Lower-case hex, two digits per byte.
pub fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// Hex of either case, even length, no separators.
pub fn hex_decode(s: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", s.len()));
    }
    s.as_bytes()
        .chunks(2)
        .enumerate()
        .map(|(i, pair)| {
            let digit = |c: u8| (c as char).to_digit(16);
            match (digit(pair[0]), digit(pair[1])) {
                (Some(h), Some(l)) => Ok((h * 16 + l) as u8),
                _ => Err(format!("not a hex digit at position {}", i * 2)),
            }
        })
        .collect()
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (RFC 4648 §4).
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// Standard base64 with padding; rejects other alphabets, missing padding
/// and non-zero trailing bits.
pub fn base64_decode(s: &str) -> Result<Vec<u8>, String> {
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return Err(format!(
            "length {} is not a multiple of 4 (padding required)",
            bytes.len()
        ));
    }
    let value = |c: u8| B64.iter().position(|&x| x == c).map(|p| p as u32);
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let quads = bytes.len() / 4;
    for (q, quad) in bytes.chunks(4).enumerate() {
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && q + 1 != quads) {
            return Err(format!("misplaced padding in group {q}"));
        }
        let mut n = 0u32;
        for (i, &c) in quad[..4 - pad].iter().enumerate() {
            let v = value(c).ok_or_else(|| format!("not a base64 character at {}", q * 4 + i))?;
            n |= v << (18 - 6 * i);
        }
        let got = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        let keep = 3 - pad;
        if got[keep..].iter().any(|&b| b != 0) {
            return Err("non-zero trailing bits".into());
        }
        out.extend_from_slice(&got[..keep]);
    }
    Ok(out)
}

/// `aa:bb:cc:dd:ee:ff` (either case; `-` also accepted as separator).
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split([':', '-']).collect();
    if parts.len() != 6 {
        return Err(format!("{s:?} is not a MAC address (aa:bb:cc:dd:ee:ff)"));
    }
    let mut mac = [0u8; 6];
    for (slot, part) in mac.iter_mut().zip(parts) {
        if part.len() != 2 {
            return Err(format!("{s:?} is not a MAC address (aa:bb:cc:dd:ee:ff)"));
        }
        *slot = u8::from_str_radix(part, 16)
            .map_err(|_| format!("{s:?} is not a MAC address (aa:bb:cc:dd:ee:ff)"))?;
    }
    Ok(mac)
}

/// `aa:bb:cc:dd:ee:ff`, lower case.
pub fn format_mac(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Decodes a request's `hex` or `base64` field (exactly one), bounded by
/// [`MAX_DATA`]; returns which field it was and the bytes. Shared by every
/// agent (the reference's and metaroce-agent-verbs).
pub fn bytes_field(
    hex: Option<&str>,
    b64: Option<&str>,
    required: bool,
) -> Result<Option<(&'static str, Vec<u8>)>, AgentError> {
    let (field, text) = match (hex, b64) {
        (Some(_), Some(_)) => {
            return Err(AgentError::field(
                ErrorCode::BadValue,
                "base64",
                "give hex or base64, not both",
            ));
        }
        (Some(h), None) => ("hex", h),
        (None, Some(b)) => ("base64", b),
        (None, None) if required => {
            return Err(AgentError::field(
                ErrorCode::MissingField,
                "hex",
                "give hex or base64",
            ));
        }
        (None, None) => return Ok(None),
    };
    // 2 hex digits or 4/3 base64 characters per byte.
    if text.len() as u64 > MAX_DATA * 2 {
        return Err(AgentError::field(
            ErrorCode::OutOfRange,
            field,
            format!("at most {MAX_DATA} bytes per request"),
        ));
    }
    let data = if field == "hex" {
        hex_decode(text)
    } else {
        base64_decode(text)
    }
    .map_err(|e| AgentError::field(ErrorCode::BadValue, field, e))?;
    if data.len() as u64 > MAX_DATA {
        return Err(AgentError::field(
            ErrorCode::OutOfRange,
            field,
            format!("at most {MAX_DATA} bytes per request"),
        ));
    }
    Ok(Some((field, data)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_errors() {
        let data: Vec<u8> = (0..=255).collect();
        assert_eq!(hex_decode(&hex_encode(&data)).unwrap(), data);
        assert_eq!(hex_decode("0A0b").unwrap(), vec![10, 11]);
        assert!(hex_decode("abc").is_err());
        assert!(hex_decode("zz").is_err());
        assert!(hex_decode("é1").is_err());
    }

    #[test]
    fn base64_known_values_and_errors() {
        for (raw, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(raw.as_bytes()), enc);
            assert_eq!(base64_decode(enc).unwrap(), raw.as_bytes());
        }
        let data: Vec<u8> = (0..=255).collect();
        assert_eq!(base64_decode(&base64_encode(&data)).unwrap(), data);
        for bad in ["Zg", "Zg=a", "Z===", "Zh==", "Zm9v-A==", "Zg==Zg=="] {
            assert!(base64_decode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn mac_parse_and_format() {
        let mac = parse_mac("02:00:0A:ff:00:01").unwrap();
        assert_eq!(mac, [2, 0, 10, 255, 0, 1]);
        assert_eq!(format_mac(mac), "02:00:0a:ff:00:01");
        for bad in [
            "02:00:0a:ff:00",
            "02:00:0a:ff:00:1",
            "02:00:0a:ff:00:0g",
            "",
        ] {
            assert!(parse_mac(bad).is_err(), "{bad}");
        }
    }
}
