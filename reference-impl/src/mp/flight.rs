//! The MP requester's flight as two queues rather than two B-trees: the
//! units sent and not acknowledged, by first PSN index ([`UnitMap`]), and
//! the transmissions in the order they left ([`TxOrder`]).
//!
//! Units are created in PSN order (a unit's first PSN index is above every
//! earlier one's) and transmissions are numbered in the order they leave,
//! so both are sorted queues: a new entry goes to the back, and the front
//! is where acknowledgements and timers mostly work. A unit acknowledged
//! out of order leaves a tombstone until everything before it is gone. A
//! lookup by PSN index is one comparison when no READ (a unit of several
//! PSNs) lies between the front and the index, and a binary search
//! otherwise. Memory is one entry per unit sent since the oldest one not
//! acknowledged, never one per PSN (a READ may reserve millions).

use super::loss::Unit;
use std::collections::VecDeque;

/// Units sent and not acknowledged, by first PSN index (see the module
/// documentation). The front entry, when there is one, is a live unit.
#[derive(Clone, Debug, Default)]
pub(crate) struct UnitMap {
    /// Ascending first PSN indices; `None` is a unit removed while an
    /// earlier one remains.
    slots: VecDeque<(u64, Option<Unit>)>,
    len: usize,
}

impl UnitMap {
    /// Units held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Forgets every unit.
    pub(crate) fn clear(&mut self) {
        self.slots.clear();
        self.len = 0;
    }

    /// Position of the entry of `key`, live or not.
    fn pos(&self, key: u64) -> Option<usize> {
        let front = self.slots.front()?.0;
        // One PSN per unit from the front to `key`: the entry is at the
        // offset.
        if let Ok(guess) = usize::try_from(key.checked_sub(front)?)
            && self.slots.get(guess).is_some_and(|s| s.0 == key)
        {
            return Some(guess);
        }
        self.slots.binary_search_by_key(&key, |s| s.0).ok()
    }

    /// The unit whose first PSN index is `key`.
    pub(crate) fn get(&self, key: u64) -> Option<&Unit> {
        self.slots.get(self.pos(key)?)?.1.as_ref()
    }

    /// The unit whose first PSN index is `key`, to change it.
    pub(crate) fn get_mut(&mut self, key: u64) -> Option<&mut Unit> {
        let p = self.pos(key)?;
        self.slots.get_mut(p)?.1.as_mut()
    }

    /// Whether a unit starts at `key`.
    pub(crate) fn contains_key(&self, key: u64) -> bool {
        self.get(key).is_some()
    }

    /// Adds (or replaces) the unit starting at `key`; returns the one it
    /// replaced. A key above every other one is appended.
    pub(crate) fn insert(&mut self, key: u64, unit: Unit) -> Option<Unit> {
        if self.len == 0 {
            self.slots.clear();
        }
        if self.slots.back().is_none_or(|s| s.0 < key) {
            self.slots.push_back((key, Some(unit)));
            self.len += 1;
            return None;
        }
        match self.slots.binary_search_by_key(&key, |s| s.0) {
            Ok(p) => {
                let old = self.slots[p].1.replace(unit);
                if old.is_none() {
                    self.len += 1;
                }
                old
            }
            Err(p) => {
                self.slots.insert(p, (key, Some(unit)));
                self.len += 1;
                None
            }
        }
    }

    /// Removes the unit starting at `key`, and the tombstones that then
    /// lead the queue.
    pub(crate) fn remove(&mut self, key: u64) -> Option<Unit> {
        let p = self.pos(key)?;
        let unit = self.slots.get_mut(p)?.1.take()?;
        self.len -= 1;
        while self.slots.front().is_some_and(|s| s.1.is_none()) {
            self.slots.pop_front();
        }
        Some(unit)
    }

    /// The lowest first PSN index held.
    pub(crate) fn first_key(&self) -> Option<u64> {
        self.slots.front().map(|s| s.0)
    }

    /// The units whose first PSN index lies in `[lo, hi)`, ascending.
    pub(crate) fn range(&self, lo: u64, hi: u64) -> impl Iterator<Item = (u64, &Unit)> {
        // Mostly from the front (acknowledgements in PSN order).
        let start = if self.slots.front().is_none_or(|s| s.0 >= lo) {
            0
        } else {
            self.slots.partition_point(|s| s.0 < lo)
        };
        self.slots
            .range(start..)
            .take_while(move |s| s.0 < hi)
            .filter_map(|(k, u)| u.as_ref().map(|u| (*k, u)))
    }

    /// The first unit whose first PSN index lies in `[lo, hi)`.
    pub(crate) fn first_in(&self, lo: u64, hi: u64) -> Option<u64> {
        self.range(lo, hi).next().map(|(k, _)| k)
    }

    /// The last unit whose first PSN index is below `key`.
    pub(crate) fn last_before(&self, key: u64) -> Option<(u64, &Unit)> {
        let end = self.slots.partition_point(|s| s.0 < key);
        self.slots
            .range(..end)
            .rev()
            .find_map(|(k, u)| u.as_ref().map(|u| (*k, u)))
    }

    /// Every unit, ascending.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &Unit)> {
        self.slots
            .iter()
            .filter_map(|(k, u)| u.as_ref().map(|u| (*k, u)))
    }

    /// Every unit, ascending by first PSN index.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Unit> {
        self.iter().map(|(_, u)| u)
    }
}

/// Transmissions in the order they left: (order, first PSN index of the
/// unit). An entry stands for a unit in flight (or an atomic awaiting its
/// acknowledgement) only while that unit's latest transmission has that
/// order and it is not deemed lost: the requester checks that with
/// [`UnitMap`] (`live`), and entries that fail it are dropped when they
/// reach the front ([`TxOrder::prune`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct TxOrder {
    q: VecDeque<(u64, u64)>,
}

impl TxOrder {
    /// Forgets every entry.
    pub(crate) fn clear(&mut self) {
        self.q.clear();
    }

    /// Records that unit `key` was (or is again) in flight with
    /// transmission order `seq`; an entry of that order already present is
    /// kept.
    pub(crate) fn insert(&mut self, seq: u64, key: u64) {
        if self.q.back().is_none_or(|e| e.0 < seq) {
            return self.q.push_back((seq, key));
        }
        if let Err(p) = self.q.binary_search_by_key(&seq, |e| e.0) {
            self.q.insert(p, (seq, key));
        }
    }

    /// Entries, ascending by transmission order (live or not).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.q.iter().copied()
    }

    /// Drops the entries at the front for which `live` is false.
    pub(crate) fn prune(&mut self, mut live: impl FnMut(u64, u64) -> bool) {
        while let Some(&(seq, key)) = self.q.front() {
            if live(seq, key) {
                break;
            }
            self.q.pop_front();
        }
    }

    /// Entries held (live or not).
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.q.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mp::loss::UnitState;
    use std::collections::BTreeMap;

    fn unit(span: u32, tx_seq: u64) -> Unit {
        Unit {
            msn: 0,
            span,
            bytes: 4096,
            tx_time: 0,
            tx_seq,
            entropy: 0,
            state: UnitState::InFlight,
            sends: 1,
            atomic: false,
            psn_acked: false,
            lost_by: None,
        }
    }

    /// The map agrees with a `BTreeMap` over a fixed pseudo-random mix of
    /// inserts (ascending, with READ-like spans), removals in any order and
    /// out-of-order inserts, after every step.
    #[test]
    fn unit_map_agrees_with_a_btree() {
        let mut m = UnitMap::default();
        let mut b: BTreeMap<u64, Unit> = BTreeMap::new();
        let mut next = 5u64;
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for step in 0..3000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 7 {
                0..=2 => {
                    let span = if x.is_multiple_of(11) {
                        1 + (x >> 8) % 40
                    } else {
                        1
                    };
                    m.insert(next, unit(span as u32, step));
                    b.insert(next, unit(span as u32, step));
                    next += span;
                }
                3 | 4 => {
                    // The oldest, or one at random.
                    let key = if x.is_multiple_of(2) {
                        b.keys().next().copied()
                    } else {
                        b.keys().nth((x >> 5) as usize % b.len().max(1)).copied()
                    };
                    if let Some(k) = key {
                        assert_eq!(
                            m.remove(k).map(|u| u.tx_seq),
                            b.remove(&k).map(|u| u.tx_seq)
                        );
                    }
                    assert!(m.remove(next + 1).is_none());
                }
                5 => {
                    // Re-insert below the back (a key in use or a gap).
                    let k = next.saturating_sub(1 + (x >> 9) % 30);
                    assert_eq!(
                        m.insert(k, unit(1, step)).map(|u| u.tx_seq),
                        b.insert(k, unit(1, step)).map(|u| u.tx_seq)
                    );
                }
                _ => {
                    if let Some(u) = m.get_mut(next.saturating_sub(3)) {
                        u.sends += 1;
                    }
                    if let Some(u) = b.get_mut(&next.saturating_sub(3)) {
                        u.sends += 1;
                    }
                }
            }
            assert_eq!(m.len(), b.len());
            assert_eq!(m.first_key(), b.keys().next().copied());
            let lo = next.saturating_sub((x >> 3) % 50);
            let hi = lo + (x >> 12) % 60;
            let got: Vec<(u64, u32)> = m.range(lo, hi).map(|(k, u)| (k, u.sends)).collect();
            let want: Vec<(u64, u32)> = b.range(lo..hi).map(|(&k, u)| (k, u.sends)).collect();
            assert_eq!(got, want, "step {step}");
            assert_eq!(
                m.last_before(lo).map(|(k, _)| k),
                b.range(..lo).next_back().map(|(&k, _)| k)
            );
            assert_eq!(m.contains_key(lo), b.contains_key(&lo));
            let all: Vec<u64> = m.iter().map(|(k, _)| k).collect();
            assert_eq!(all, b.keys().copied().collect::<Vec<_>>());
        }
    }

    #[test]
    fn tx_order_keeps_order_and_prunes_the_front() {
        let mut t = TxOrder::default();
        for seq in [1, 2, 3, 5] {
            t.insert(seq, seq * 10);
        }
        t.insert(4, 40); // re-inserted below the back
        t.insert(2, 20); // present: kept once
        let seqs: Vec<u64> = t.iter().map(|e| e.0).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
        t.prune(|seq, _| seq >= 3);
        assert_eq!(t.held(), 3);
        t.prune(|_, key| key != 30);
        assert_eq!(t.iter().next(), Some((4, 40)));
        t.clear();
        assert_eq!(t.held(), 0);
    }
}
