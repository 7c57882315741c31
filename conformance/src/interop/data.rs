//! Seeded data: every case writes bytes no other case writes, so a byte
//! left over from an earlier case (or from the other direction) shows.

use metaroce_agent::rng::SplitMix64;

/// SplitMix64 of `seed` and `salt`: one well-mixed 64-bit value.
pub fn mix(seed: u64, salt: u64) -> u64 {
    SplitMix64::mix(seed ^ salt.wrapping_mul(SplitMix64::GAMMA))
}

/// `len` pseudo-random bytes of stream `salt` under `seed`.
pub fn bytes(seed: u64, salt: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let base = mix(seed, salt);
    let mut i = 0u64;
    while out.len() < len {
        out.extend_from_slice(&mix(base, i).to_le_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

/// The first offset at which `got` and `want` differ, with both bytes, or
/// the lengths when one is a prefix of the other.
pub fn first_difference(got: &[u8], want: &[u8]) -> Option<String> {
    if let Some(i) = got.iter().zip(want).position(|(g, w)| g != w) {
        let diff = got.iter().zip(want).filter(|(g, w)| g != w).count();
        return Some(format!(
            "byte {i} is {:#04x}, expected {:#04x} ({diff} bytes differ)",
            got[i], want[i]
        ));
    }
    (got.len() != want.len()).then(|| format!("{} bytes, expected {}", got.len(), want.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_differ_and_repeat() {
        assert_eq!(bytes(1, 2, 100), bytes(1, 2, 100));
        assert_ne!(bytes(1, 2, 100), bytes(1, 3, 100));
        assert_ne!(bytes(1, 2, 100), bytes(2, 2, 100));
        assert_eq!(bytes(1, 2, 13).len(), 13);
        assert_eq!(&bytes(1, 2, 100)[..13], &bytes(1, 2, 13)[..]);
    }

    #[test]
    fn differences_are_located() {
        assert_eq!(first_difference(b"abc", b"abc"), None);
        assert_eq!(
            first_difference(b"abd", b"abc").unwrap(),
            "byte 2 is 0x64, expected 0x63 (1 bytes differ)"
        );
        assert_eq!(
            first_difference(b"ab", b"abc").unwrap(),
            "2 bytes, expected 3"
        );
    }
}
