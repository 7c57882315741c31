//! Receive work requests and the credit code they give (SPEC.md §6.10).

/// A posted receive work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecvWr {
    /// The model's number for it (posting order).
    pub id: u64,
    /// Total bytes of its scatter buffers.
    pub capacity: u32,
    /// Its buffers can be written (valid L_Key and range); false models MR-RSP-9.
    pub writable: bool,
}

impl RecvWr {
    /// A work request with writable buffers of `capacity` bytes.
    pub const fn new(id: u64, capacity: u32) -> Self {
        RecvWr {
            id,
            capacity,
            writable: true,
        }
    }
}

/// The credits each code 0–30 stands for (SPEC.md §6.10); code 31 is "no limit".
pub const CREDITS: [u32; 31] = [
    0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

/// The code of the largest table value not above `posted` (MR-CRD-2).
pub fn credit_code(posted: usize) -> u8 {
    let posted = u32::try_from(posted).unwrap_or(u32::MAX);
    // CREDITS[0] is 0, so some code always fits; the index is below 31.
    CREDITS.iter().rposition(|&c| c <= posted).unwrap_or(0) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_codes_mr_crd_2() {
        assert_eq!(credit_code(0), 0);
        assert_eq!(credit_code(5), 4, "5 receive WRs: 4 credits (code 4)");
        assert_eq!(credit_code(6), 5);
        assert_eq!(credit_code(32768), 30);
        assert_eq!(credit_code(usize::MAX), 30);
    }
}
