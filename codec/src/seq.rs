//! 24-bit sequence numbers: [`Psn`] and [`Msn`].
//!
//! Both live in a modulo-2^24 space. Comparison follows the half-space rule of
//! RoCEv2 (SPEC §6.4): `a` is *after* `b` when `(a - b) mod 2^24` lies in
//! `1 ..= 2^23 - 1`. That relation is not a total order, so neither type
//! implements `Ord`; use [`Psn::distance`] and the named predicates. Nothing
//! here can panic on any value a peer sends.

use core::fmt;

const MASK: u32 = 0x00FF_FFFF;
const HALF: u32 = 0x0080_0000;

macro_rules! seq24 {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
        pub struct $name(u32);

        /// Draws only 24-bit values, keeping the type's invariant.
        #[cfg(feature = "arbitrary")]
        impl<'a> arbitrary::Arbitrary<'a> for $name {
            fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
                Ok(Self::new(u32::arbitrary(u)?))
            }
        }

        impl $name {
            /// Largest value (2^24 - 1).
            pub const MAX: Self = Self(MASK);

            /// Wraps `value` into 24 bits.
            pub const fn new(value: u32) -> Self {
                Self(value & MASK)
            }

            /// The 24-bit value.
            pub const fn value(self) -> u32 {
                self.0
            }

            /// `self + n` modulo 2^24.
            #[must_use]
            pub const fn add(self, n: u32) -> Self {
                Self(self.0.wrapping_add(n) & MASK)
            }

            /// `self - n` modulo 2^24.
            #[must_use]
            pub const fn sub(self, n: u32) -> Self {
                Self(self.0.wrapping_sub(n) & MASK)
            }

            /// `(self - other) mod 2^24`, in `0 ..= 2^24 - 1`.
            pub const fn distance(self, other: Self) -> u32 {
                self.0.wrapping_sub(other.0) & MASK
            }

            /// `self` is strictly after `other` (within half the space).
            pub const fn is_after(self, other: Self) -> bool {
                let d = self.distance(other);
                d != 0 && d < HALF
            }

            /// `self` is strictly before `other`: `(self - other) mod 2^24` is in
            /// `2^23 ..= 2^24 - 1`. Exactly half the space apart counts as
            /// before, as the sign of rxe's `(a - b) << 8` has it.
            pub const fn is_before(self, other: Self) -> bool {
                self.distance(other) >= HALF
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:#08x})", stringify!($name), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

seq24!(
    /// A 24-bit packet sequence number.
    Psn
);
seq24!(
    /// A 24-bit message sequence number.
    Msn
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_and_compares_across_zero() {
        let a = Psn::new(0xFF_FFFF);
        let b = a.add(1);
        assert_eq!(b.value(), 0);
        assert!(b.is_after(a));
        assert!(a.is_before(b));
        assert_eq!(b.distance(a), 1);
        assert_eq!(a.distance(b), 0xFF_FFFF);
        assert_eq!(b.sub(1), a);
    }

    #[test]
    fn exactly_half_the_space_apart_counts_as_before() {
        let a = Psn::new(0);
        let far = a.add(HALF);
        assert!(!far.is_after(a), "2^23 ahead counts as behind");
        assert!(far.is_before(a));
        assert!(a.is_before(far), "and the other way round too");
        assert!(a.add(HALF - 1).is_after(a));
        assert!(!a.is_after(a) && !a.is_before(a));
    }

    #[test]
    fn new_masks_to_24_bits() {
        assert_eq!(Msn::new(0x1234_5678).value(), 0x34_5678);
        assert_eq!(Psn::new(u32::MAX), Psn::MAX);
    }
}
