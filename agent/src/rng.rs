//! The workspace's one seeded generator: SplitMix64 (Steele, Lea and Flood,
//! "Fast splittable pseudorandom number generators", OOPSLA 2014).
//!
//! Small, dependency-free and fully determined by its seed, so a seed
//! reproduces a run: the reference transport's MP entropy values and
//! per-round shuffles, the harness's own choices (harness QPNs, fuzz
//! mutations) and the generated inputs of tests. The output sequence is
//! part of what seeds mean: tests pin its first values; never change it.
//!
//! It lives here, not in the codec (which holds wire formats only), because
//! this is the lowest crate both the reference transport and the harness
//! depend on; the codec's and the spec model's tests take it as a
//! dev-dependency.

/// A SplitMix64 generator. Not for secrets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The golden-ratio increment of SplitMix64 (also a good multiplier
    /// for hashing a counter into a seed).
    pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

    /// A generator whose state starts at `seed`.
    pub const fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 bits of the stream.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(Self::GAMMA);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// One well-mixed value of `x`: the first output of a generator seeded
    /// with `x`.
    pub fn mix(x: u64) -> u64 {
        SplitMix64::new(x).next_u64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference values of SplitMix64 from seed 0 (as in the authors'
    /// and Vigna's `splitmix64.c`), then from seed 1234567.
    #[test]
    fn the_stream_is_pinned() {
        let mut rng = SplitMix64::new(0);
        let first: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        assert_eq!(
            first,
            [
                0xE220_A839_7B1D_CDAF,
                0x6E78_9E6A_A1B9_65F4,
                0x06C4_5D18_8009_454F
            ]
        );
        let mut rng = SplitMix64::new(1_234_567);
        let next: Vec<u64> = (0..2).map(|_| rng.next_u64()).collect();
        assert_eq!(next, [6_457_827_717_110_365_317, 3_203_168_211_198_807_973]);
        assert_eq!(SplitMix64::mix(0), 0xE220_A839_7B1D_CDAF);
    }
}
