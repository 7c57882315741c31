//! Request PSN classification at a Base responder (SPEC §6.4, MR-PSN-2) and
//! the sequence-NAK state of one gap (MR-NAK-1, MR-NAK-2, MR-RNR-2).

use metaroce_codec::Psn;

/// Where a request PSN lies relative to the expected PSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PsnClass {
    /// Equal to the expected PSN.
    Expected,
    /// 1 … 2^23 − 1 later: out of sequence.
    Ahead,
    /// 2^23 … 2^24 − 1 later, i.e. earlier: a duplicate.
    Duplicate,
}

/// Classifies `psn` against the expected PSN `epsn` by the half-space rule
/// (MR-PSN-1, MR-PSN-2).
pub(crate) fn classify(psn: Psn, epsn: Psn) -> PsnClass {
    if psn == epsn {
        PsnClass::Expected
    } else if psn.is_after(epsn) {
        PsnClass::Ahead
    } else {
        PsnClass::Duplicate
    }
}

/// Whether a NAK was sent for the current gap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum GapState {
    /// No NAK outstanding: the next ahead packet is NAKed (MR-NAK-1).
    #[default]
    Open,
    /// A sequence NAK was sent; ahead packets are dropped (MR-NAK-2).
    SeqNakSent,
    /// An RNR NAK was sent; ahead packets are dropped silently (MR-RNR-2).
    RnrNakSent,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_wraps() {
        let e = Psn::new(0xFF_FFFE);
        assert_eq!(classify(e, e), PsnClass::Expected);
        assert_eq!(classify(Psn::new(0), e), PsnClass::Ahead);
        assert_eq!(classify(Psn::new(0xFF_FFFD), e), PsnClass::Duplicate);
        assert_eq!(classify(e.add(0x7F_FFFF), e), PsnClass::Ahead);
        assert_eq!(classify(e.add(0x80_0000), e), PsnClass::Duplicate);
    }
}
