//! PSN helpers of the requester: packet counts and windows (SPEC.md §6.4).

use metaroce_codec::Psn;

/// Half the PSN space (2^23): the outstanding span limit of MR-PSN-4.
pub const HALF_SPACE: u32 = 1 << 23;

/// Packets (and PSNs) of a message of `len` bytes at PMTU `pmtu`:
/// `max(1, ceil(len / pmtu))` (SPEC.md §6.5; a READ reserves as many, MR-PSN-3).
pub fn packet_count(len: u64, pmtu: u32) -> u32 {
    let pmtu = u64::from(pmtu.max(1));
    let n = len.div_ceil(pmtu).max(1);
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `psn` lies in the block of `count` PSNs starting at `first`.
pub fn in_block(psn: Psn, first: Psn, count: u32) -> bool {
    psn.distance(first) < count
}

/// The last PSN of the block of `count` PSNs starting at `first`.
pub fn block_last(first: Psn, count: u32) -> Psn {
    first.add(count.max(1) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_blocks_across_the_wrap() {
        assert_eq!(packet_count(0, 1024), 1);
        assert_eq!(packet_count(1024, 1024), 1);
        assert_eq!(packet_count(1025, 1024), 2);
        assert_eq!(packet_count(2500, 1024), 3);
        let first = Psn::new(0xFF_FFFE);
        assert!(in_block(Psn::new(0), first, 3));
        assert!(!in_block(Psn::new(1), first, 3));
        assert_eq!(block_last(first, 3), Psn::new(0));
    }
}
