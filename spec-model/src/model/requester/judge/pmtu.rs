//! What the judge knows of the PMTU: the set of values consistent with the
//! packets seen so far.

/// The five PMTU values of SPEC.md §10.1.
pub const PMTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];

/// A set of PMTU candidates (a bit per entry of [`PMTUS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmtuSet(u8);

impl PmtuSet {
    /// Every value (PMTU unknown).
    pub const ALL: PmtuSet = PmtuSet(0b1_1111);

    /// Exactly `pmtu` (an invalid value leaves every candidate).
    pub fn known(pmtu: u32) -> Self {
        PMTUS
            .iter()
            .position(|&p| p == pmtu)
            .map_or(Self::ALL, |i| PmtuSet(1 << i))
    }

    /// The candidates.
    pub fn values(self) -> impl Iterator<Item = u32> {
        PMTUS
            .into_iter()
            .enumerate()
            .filter(move |(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, p)| p)
    }

    /// The PMTU when exactly one candidate is left.
    pub fn single(self) -> Option<u32> {
        (self.0.count_ones() == 1)
            .then(|| self.values().next())
            .flatten()
    }

    /// The largest candidate.
    pub fn largest(self) -> u32 {
        self.values().last().unwrap_or(4096)
    }

    /// Keeps the candidates for which `fits` holds; when none would be left,
    /// changes nothing and returns false (the packet breaks a rule for every
    /// candidate).
    pub fn narrow(&mut self, fits: impl Fn(u32) -> bool) -> bool {
        let mut keep = 0;
        for (i, p) in PMTUS.into_iter().enumerate() {
            if self.0 & (1 << i) != 0 && fits(p) {
                keep |= 1 << i;
            }
        }
        if keep == 0 {
            return false;
        }
        self.0 = keep;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrowing() {
        let mut s = PmtuSet::ALL;
        assert!(s.narrow(|p| p >= 1000));
        assert_eq!(s.values().collect::<Vec<_>>(), vec![1024, 2048, 4096]);
        assert!(!s.narrow(|p| p == 256));
        assert!(s.narrow(|p| p == 1024));
        assert_eq!(s.single(), Some(1024));
        assert_eq!(PmtuSet::known(2048).single(), Some(2048));
    }
}
