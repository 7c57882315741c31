//! Classifying a request PSN against the expected PSN (SPEC.md §6.4).

use metaroce_codec::Psn;

/// Where a request PSN lies relative to the expected PSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PsnClass {
    /// `(p - e) mod 2^24 = 0`.
    Expected,
    /// `(p - e) mod 2^24` in `1 … 2^23 − 1`: out of sequence.
    Ahead,
    /// `(p - e) mod 2^24` in `2^23 … 2^24 − 1`.
    Duplicate,
}

/// Classifies `psn` against the expected PSN `epsn` by the half-space rule
/// (MR-PSN-1, MR-PSN-2).
pub fn classify(epsn: Psn, psn: Psn) -> PsnClass {
    // "MR-PSN-2"
    match psn.distance(epsn) {
        0 => PsnClass::Expected,
        d if d < 1 << 23 => PsnClass::Ahead,
        _ => PsnClass::Duplicate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_space_classes_across_the_wrap_mr_psn_1_mr_psn_2() {
        let e = Psn::new(0xFF_FFFE);
        assert_eq!(classify(e, e), PsnClass::Expected);
        assert_eq!(classify(e, Psn::new(0)), PsnClass::Ahead, "MR-PSN-1 wrap");
        assert_eq!(classify(e, e.add((1 << 23) - 1)), PsnClass::Ahead);
        assert_eq!(classify(e, e.add(1 << 23)), PsnClass::Duplicate);
        assert_eq!(
            classify(Psn::new(1), Psn::new(0xFF_FFFF)),
            PsnClass::Duplicate
        );
    }
}
