//! Seeded impairment settings and the random source of a link.

use chacha20::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

/// What a link does to the frames it carries. Probabilities are in [0, 1].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Impairments {
    /// Link rate in bits per nanosecond (100 Gb/s = 100.0).
    pub rate_gbps: f64,
    /// Fixed one-way delay.
    pub delay_ns: u64,
    /// Uniform extra delay in [0, jitter_ns]; may reorder frames.
    pub jitter_ns: u64,
    /// Probability a frame is lost.
    pub drop: f64,
    /// Probability a frame is delivered twice.
    pub duplicate: f64,
    /// Probability a frame is held back behind 1..=`reorder_depth` later frames.
    pub reorder: f64,
    /// Largest number of frames that overtake a held frame.
    pub reorder_depth: u32,
    /// Probability one byte of the IP packet is changed.
    pub corrupt: f64,
    /// Probability an ECN-capable frame is marked CE.
    pub ecn_mark: f64,
}

impl Impairments {
    /// A clean 100 Gb/s link with 1 µs of delay.
    pub const fn clean() -> Self {
        Impairments {
            rate_gbps: 100.0,
            delay_ns: 1_000,
            jitter_ns: 0,
            drop: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_depth: 0,
            corrupt: 0.0,
            ecn_mark: 0.0,
        }
    }
}

/// The deterministic random source of a link (not security-relevant).
#[derive(Debug)]
pub struct SimRng(ChaCha8Rng);

impl SimRng {
    /// A generator from a 64-bit seed.
    pub fn new(seed: u64) -> Self {
        SimRng(ChaCha8Rng::seed_from_u64(seed))
    }

    /// A uniform value in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }

    /// A uniform value in [0, n) (0 when n is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.0.next_u64() % n }
    }

    /// 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
}
