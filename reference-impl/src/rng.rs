//! The device's random source: ChaCha20 seeded by the caller.
//!
//! SPEC §8 asks for initial PSNs, R_Keys and QP numbers drawn from a
//! cryptographically secure generator (MR-SEC-1, MR-SEC-2, MR-SEC-3) and
//! seeded afresh per device (MR-SEC-11). The core is sans-IO, so it never
//! reads OS entropy itself: the caller passes a 32-byte seed (a driver takes
//! it from the OS; the simulator from its scenario seed, for determinism).

use chacha20::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};

/// A seeded ChaCha20 stream.
pub(crate) struct DeviceRng(ChaCha20Rng);

impl DeviceRng {
    /// A generator from a caller-provided seed.
    pub(crate) fn new(seed: [u8; 32]) -> Self {
        DeviceRng(ChaCha20Rng::from_seed(seed))
    }

    /// A uniformly drawn 32-bit value.
    pub(crate) fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }

    /// A uniformly drawn 24-bit value (a PSN or QPN).
    pub(crate) fn next_u24(&mut self) -> u32 {
        self.0.next_u32() & 0x00FF_FFFF
    }
}

impl core::fmt::Debug for DeviceRng {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("DeviceRng(..)")
    }
}
