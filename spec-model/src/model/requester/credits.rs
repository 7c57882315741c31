//! End-to-end credits (SPEC.md §6.10).

use super::RequesterState;
use metaroce_codec::ext::{AethRepr, SyndromeKind};

/// Receive work requests a credit code stands for; `None` for code 31 (no limit).
pub fn credit_count(code: u8) -> Option<u32> {
    const TABLE: [u32; 31] = [
        0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
        2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
    ];
    TABLE.get(usize::from(code & 0x1F)).copied()
}

impl RequesterState {
    /// Takes the credit limit (MSN + credits) from the newest ACK syndrome.
    ///
    /// A requester without `credits` accepts any credit code as a plain
    /// acknowledgement and keeps no limit ("MR-CRD-5"); code 31 lifts the
    /// limit ("MR-CRD-4").
    pub(super) fn update_credits(&mut self, aeth: Option<AethRepr>) {
        let Some(aeth) = aeth else { return };
        let SyndromeKind::Ack { credit_code } = aeth.syndrome.kind() else {
            return;
        };
        if !self.attrs.credits {
            return; // "MR-CRD-5"
        }
        self.credit_limit = credit_count(credit_code).map(|c| aeth.msn.add(c)); // "MR-CRD-4"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_ends() {
        assert_eq!(credit_count(0), Some(0));
        assert_eq!(credit_count(5), Some(6));
        assert_eq!(credit_count(30), Some(32768));
        assert_eq!(credit_count(31), None);
    }
}
