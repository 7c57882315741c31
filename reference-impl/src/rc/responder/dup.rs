//! Responder resources and duplicate requests (SPEC §6.9).
//!
//! A ring of `max_dest_rd_atomic` slots keeps the last READs and atomics
//! accepted (MR-DUP-3). A duplicate READ is re-executed from the kept
//! description (MR-DUP-4); a duplicate atomic replays the kept original value
//! without executing again (MR-DUP-5); anything unmatched is dropped (MR-DUP-6).

use metaroce_codec::Psn;
use std::collections::VecDeque;

/// One responder resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// An accepted READ: PSN block [first, first + n).
    Read {
        first: Psn,
        n: u32,
        va: u64,
        rkey: u32,
        len: u32,
    },
    /// An executed atomic and the original value it returned.
    Atomic { psn: Psn, orig: u64 },
}

/// The ring.
#[derive(Debug, Default)]
pub(crate) struct Resources {
    slots: VecDeque<Slot>,
    capacity: usize,
}

/// What to do with a duplicate READ or atomic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DupAction {
    /// Re-read [va, va + len) and answer from PSN `psn`.
    ReRead {
        psn: Psn,
        va: u64,
        rkey: u32,
        len: u32,
        /// The kept READ's PSN block.
        block: (Psn, u32),
    },
    /// Answer with the kept original value.
    Replay { psn: Psn, orig: u64 },
    /// Drop silently.
    Drop,
}

impl Resources {
    pub(crate) fn new(capacity: u8) -> Self {
        Resources {
            slots: VecDeque::new(),
            capacity: usize::from(capacity),
        }
    }

    /// Keeps a new slot, overwriting the oldest when full (MR-DUP-3).
    pub(crate) fn push(&mut self, slot: Slot) {
        if self.capacity == 0 {
            return;
        }
        if self.slots.len() == self.capacity {
            self.slots.pop_front();
        }
        self.slots.push_back(slot);
    }

    /// Matches a duplicate READ request (MR-DUP-4, MR-DUP-6).
    pub(crate) fn match_read(
        &self,
        psn: Psn,
        va: u64,
        rkey: u32,
        len: u32,
        pmtu: u32,
    ) -> DupAction {
        for slot in self.slots.iter().rev() {
            if let Slot::Read {
                first,
                n,
                va: kept_va,
                rkey: kept_rkey,
                len: kept_len,
            } = *slot
            {
                let k = psn.distance(first);
                if k >= n {
                    continue;
                }
                let skipped = u64::from(k) * u64::from(pmtu);
                let rest = u64::from(kept_len).saturating_sub(skipped);
                let consistent = rkey == kept_rkey
                    && Some(va) == kept_va.checked_add(skipped)
                    && u64::from(len) <= rest;
                return if consistent {
                    DupAction::ReRead {
                        psn,
                        va,
                        rkey,
                        len,
                        block: (first, n),
                    }
                } else {
                    DupAction::Drop
                };
            }
        }
        DupAction::Drop
    }

    /// Matches a duplicate atomic request by PSN (MR-DUP-5, MR-DUP-6).
    pub(crate) fn match_atomic(&self, psn: Psn) -> DupAction {
        self.slots
            .iter()
            .rev()
            .find_map(|slot| match *slot {
                Slot::Atomic { psn: p, orig } if p == psn => Some(DupAction::Replay { psn, orig }),
                _ => None,
            })
            .unwrap_or(DupAction::Drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_match_needs_consistent_va_and_length() {
        let mut r = Resources::new(2);
        r.push(Slot::Read {
            first: Psn::new(0xFF_FFFF),
            n: 3,
            va: 0x1000,
            rkey: 7,
            len: 2500,
        });
        // Second packet of the READ, across the PSN wrap.
        assert_eq!(
            r.match_read(Psn::new(0), 0x1000 + 1024, 7, 1476, 1024),
            DupAction::ReRead {
                psn: Psn::new(0),
                va: 0x1400,
                rkey: 7,
                len: 1476,
                block: (Psn::new(0xFF_FFFF), 3),
            }
        );
        assert_eq!(
            r.match_read(Psn::new(0), 0x1000, 7, 1476, 1024),
            DupAction::Drop
        );
        assert_eq!(
            r.match_read(Psn::new(0), 0x1400, 8, 1476, 1024),
            DupAction::Drop
        );
        assert_eq!(
            r.match_read(Psn::new(0), 0x1400, 7, 1477, 1024),
            DupAction::Drop
        );
        assert_eq!(
            r.match_read(Psn::new(2), 0x1000, 7, 1, 1024),
            DupAction::Drop
        );
    }

    #[test]
    fn oldest_slot_is_reused() {
        let mut r = Resources::new(2);
        for p in 0..3 {
            r.push(Slot::Atomic {
                psn: Psn::new(p),
                orig: u64::from(p),
            });
        }
        assert_eq!(r.match_atomic(Psn::new(0)), DupAction::Drop);
        assert_eq!(
            r.match_atomic(Psn::new(2)),
            DupAction::Replay {
                psn: Psn::new(2),
                orig: 2
            }
        );
    }
}
