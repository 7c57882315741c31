//! The unpredictability test of SPEC.md §8.1, as a pure function over a
//! sample of values.
//!
//! "MR-SEC-1" (initial PSNs, all 24 bits), "MR-SEC-2" (R_Keys: a key part of
//! at least 8 bits) and "MR-SEC-12" (R_Keys, 24 of 32 bits): the harness collects N = 1024 values one after another
//! from the implementation and hands them here with the mask of the bits
//! that must be random; the requirement fails when any criterion holds.
//! Whether a value came from a cryptographically secure generator cannot be
//! observed; this test is what SPEC.md makes of "unpredictable".

/// Sample size the suite collects (§10.4).
pub const SAMPLE_SIZE: usize = 1024;

/// Largest chi-square statistic of the top 4 random bits over 16 buckets
/// (15 degrees of freedom, p < 0.001).
pub const CHI_SQUARE_LIMIT: f64 = 37.7;

/// One failed criterion of §8.1.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// Fewer values than the sample size.
    TooFewValues(usize),
    /// Criterion 1: more than two pairs of equal values.
    EqualPairs(usize),
    /// Criterion 2: a random bit is 1 in fewer than 40 % or more than 60 %.
    BiasedBit {
        /// Bit position (0 = least significant).
        bit: u32,
        /// Values with the bit set.
        ones: usize,
    },
    /// Criterion 3: fewer than min(1000, 3 × 2^b / 4) distinct consecutive
    /// differences of the b random bits.
    FewDifferences(usize),
    /// Criterion 4: the chi-square statistic of the top 4 random bits.
    ChiSquare(f64),
}

/// The random bits of `value` under `mask`, packed (bit order kept).
fn extract(value: u64, mask: u64) -> u64 {
    let mut out = 0;
    let mut at = 0;
    for bit in 0..64 {
        if mask & (1 << bit) != 0 {
            out |= ((value >> bit) & 1) << at;
            at += 1;
        }
    }
    out
}

/// Judges `values` (each within `mask`'s value range) by §8.1; `mask` marks
/// the bits that must be random (for PSNs 0xFFFFFF; for R_Keys the
/// implementation's key part: at least 8 bits for MR-SEC-2, 24 for MR-SEC-12). Returns every
/// criterion that fails; empty means the sample passes.
pub fn judge(values: &[u64], mask: u64) -> Vec<Failure> {
    let mut out = Vec::new();
    if values.len() < SAMPLE_SIZE {
        out.push(Failure::TooFewValues(values.len()));
        return out;
    }
    let bits = mask.count_ones();
    let random: Vec<u64> = values.iter().map(|&v| extract(v, mask)).collect();
    // 1. equal pairs (over the whole values).
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let mut pairs = 0usize;
    let mut run = 1usize;
    for w in sorted.windows(2) {
        if w[0] == w[1] {
            run += 1;
        } else {
            pairs += run * (run - 1) / 2;
            run = 1;
        }
    }
    pairs += run * (run - 1) / 2;
    if pairs > 2 {
        out.push(Failure::EqualPairs(pairs));
    }
    // 2. per-bit balance.
    let n = random.len();
    for bit in 0..bits {
        let ones = random.iter().filter(|&&v| v >> bit & 1 == 1).count();
        if ones * 10 < n * 4 || ones * 10 > n * 6 {
            out.push(Failure::BiasedBit { bit, ones });
        }
    }
    // 3. distinct consecutive differences modulo the range of the random bits.
    let range_mask = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let mut diffs: Vec<u64> = random
        .windows(2)
        .map(|w| w[1].wrapping_sub(w[0]) & range_mask)
        .collect();
    diffs.sort_unstable();
    diffs.dedup();
    // A good generator over b bits gives about 2^b (1 − e^−4) distinct
    // differences among 1023 when 2^b is small: 3/4 of the range keeps the
    // false-failure rate negligible while a counter (one difference) fails.
    let min_diffs = range_mask.saturating_add(1).saturating_mul(3) / 4;
    if (diffs.len() as u64) < min_diffs.min(1000) {
        out.push(Failure::FewDifferences(diffs.len()));
    }
    // 4. chi-square of the top 4 random bits.
    if bits >= 4 {
        let mut buckets = [0usize; 16];
        for &v in &random {
            buckets[((v >> (bits - 4)) & 0xF) as usize] += 1;
        }
        let expected = n as f64 / 16.0;
        let chi: f64 = buckets
            .iter()
            .map(|&c| {
                let d = c as f64 - expected;
                d * d / expected
            })
            .sum();
        if chi > CHI_SQUARE_LIMIT {
            out.push(Failure::ChiSquare(chi));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic, well-mixed sequence (SplitMix64) standing in for a
    /// good generator.
    fn splitmix(seed: u64, n: usize) -> Vec<u64> {
        let mut rng = metaroce_agent::rng::SplitMix64::new(seed);
        (0..n).map(|_| rng.next_u64()).collect()
    }

    #[test]
    fn good_psns_pass() {
        // MR-SEC-1: 24-bit PSNs from a good generator pass.
        for seed in 1..5 {
            let psns: Vec<u64> = splitmix(seed, SAMPLE_SIZE)
                .iter()
                .map(|v| v & 0xFF_FFFF)
                .collect();
            assert_eq!(judge(&psns, 0xFF_FFFF), vec![], "MR-SEC-1 seed {seed}");
        }
    }

    #[test]
    fn predictable_psns_fail() {
        // MR-SEC-1: sequential, constant and 8-bit-random PSNs fail.
        let seq: Vec<u64> = (0..SAMPLE_SIZE as u64).map(|i| i * 7 + 100).collect();
        let f = judge(&seq, 0xFF_FFFF);
        assert!(
            f.iter().any(|x| matches!(x, Failure::FewDifferences(1))),
            "MR-SEC-1: {f:?}"
        );
        let constant = vec![42u64; SAMPLE_SIZE];
        assert!(
            judge(&constant, 0xFF_FFFF)
                .iter()
                .any(|x| matches!(x, Failure::EqualPairs(_)))
        );
        let narrow: Vec<u64> = splitmix(9, SAMPLE_SIZE).iter().map(|v| v & 0xFF).collect();
        let f = judge(&narrow, 0xFF_FFFF);
        assert!(
            f.iter()
                .any(|x| matches!(x, Failure::BiasedBit { bit: 23, .. })),
            "MR-SEC-1"
        );
        assert_eq!(
            judge(&seq[..10], 0xFF_FFFF),
            vec![Failure::TooFewValues(10)]
        );
    }

    #[test]
    fn rkeys_with_8_random_key_bits_pass_mr_sec_2_and_a_counter_fails() {
        // MR-SEC-2: rxe's table index plus 8 random key bits passes on the key
        // byte; mlx5's index plus a device-wide counting key byte
        // (`assign_mkey_variant`) fails criterion 3.
        let rxe: Vec<u64> = splitmix(4, SAMPLE_SIZE)
            .iter()
            .enumerate()
            .map(|(i, v)| ((i as u64 + 16) << 8) | (v & 0xFF))
            .collect();
        assert_eq!(judge(&rxe, 0xFF), vec![], "MR-SEC-2");
        let counting: Vec<u64> = (0..SAMPLE_SIZE as u64)
            .map(|i| ((i + 16) << 8) | ((i + 1) & 0xFF))
            .collect();
        let f = judge(&counting, 0xFF);
        assert!(
            f.iter().any(|x| matches!(x, Failure::FewDifferences(1))),
            "MR-SEC-2: {f:?}"
        );
    }

    #[test]
    fn rkeys_with_24_random_bits_pass_and_8_fail() {
        // MR-SEC-12: an R_Key of an index byte and 24 random bits passes on
        // those bits; rxe's table index plus 8 random bits fails.
        let good: Vec<u64> = splitmix(3, SAMPLE_SIZE)
            .iter()
            .enumerate()
            .map(|(i, v)| (v & 0xFF_FF_FF) << 8 | (i as u64 & 0xFF))
            .collect();
        assert_eq!(judge(&good, 0xFFFF_FF00), vec![], "MR-SEC-12");
        let rxe: Vec<u64> = splitmix(4, SAMPLE_SIZE)
            .iter()
            .enumerate()
            .map(|(i, v)| ((i as u64 + 16) << 8) | (v & 0xFF))
            .collect();
        assert!(!judge(&rxe, 0xFFFF_FF00).is_empty(), "MR-SEC-12");
    }

    #[test]
    fn a_skewed_top_nibble_fails_chi_square() {
        // MR-SEC-1 criterion 4: top 4 bits never 0xF.
        let skewed: Vec<u64> = splitmix(5, SAMPLE_SIZE)
            .iter()
            .map(|v| {
                let p = v & 0xFF_FFFF;
                if p >> 20 == 0xF { p ^ 0x80_0000 } else { p }
            })
            .collect();
        assert!(
            judge(&skewed, 0xFF_FFFF)
                .iter()
                .any(|x| matches!(x, Failure::ChiSquare(_))),
            "MR-SEC-1"
        );
    }
}
