//! Time constants: the local ACK timeout (SPEC §6.14) and the RNR timer
//! table (SPEC §6.11). All times are nanoseconds.

/// The local ACK timeout T = 4.096 µs × 2^`timeout` in ns, or `None` when
/// `timeout` is 0 (timer disabled, MR-TMR-4).
pub fn local_ack_timeout_ns(timeout: u8) -> Option<u64> {
    match timeout & 0x1F {
        0 => None,
        n => Some(4096u64 << n),
    }
}

/// RNR timer codes 0–31 in microseconds × 100 (SPEC §6.11 table).
const RNR_TABLE_10NS: [u64; 32] = [
    65_536_000, 1_000, 2_000, 3_000, 4_000, 6_000, 8_000, 12_000, 16_000, 24_000, 32_000, 48_000,
    64_000, 96_000, 128_000, 192_000, 256_000, 384_000, 512_000, 768_000, 1_024_000, 1_536_000,
    2_048_000, 3_072_000, 4_096_000, 6_144_000, 8_192_000, 12_288_000, 16_384_000, 24_576_000,
    32_768_000, 49_152_000,
];

/// The RNR wait for a 5-bit timer code, in ns (SPEC §6.11).
pub fn rnr_timer_ns(code: u8) -> u64 {
    RNR_TABLE_10NS[usize::from(code & 0x1F)] * 10
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_values() {
        assert_eq!(local_ack_timeout_ns(0), None);
        assert_eq!(local_ack_timeout_ns(14), Some(67_108_864));
        assert_eq!(rnr_timer_ns(0), 655_360_000);
        assert_eq!(rnr_timer_ns(1), 10_000);
        assert_eq!(rnr_timer_ns(12), 640_000);
        assert_eq!(rnr_timer_ns(31), 491_520_000);
    }
}
