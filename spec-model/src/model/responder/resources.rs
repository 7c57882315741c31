//! The responder resources ring (SPEC.md §6.9).

use crate::model::Knowledge;
use metaroce_codec::Psn;
use std::collections::VecDeque;

/// The operation a responder resource records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResourceKind {
    /// RDMA READ.
    Read,
    /// Compare-Swap.
    CompareSwap,
    /// Fetch-Add.
    FetchAdd,
    /// FLUSH.
    Flush,
    /// ATOMIC WRITE.
    AtomicWrite,
}

/// One responder resource: an accepted RDMA-resource operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    /// The operation.
    pub kind: ResourceKind,
    /// Its (first) PSN.
    pub psn: Psn,
    /// PSNs it occupies (n for a READ, else 1).
    pub npsn: u32,
    /// Virtual address.
    pub va: u64,
    /// R_Key.
    pub rkey: u32,
    /// Length in bytes.
    pub len: u32,
    /// For atomics: the original value returned.
    pub atomic_orig: Knowledge<u64>,
}

impl Resource {
    /// Whether `psn` lies in this resource's PSN range.
    pub fn contains(&self, psn: Psn) -> bool {
        psn.distance(self.psn) < self.npsn
    }
}

/// The resources, oldest first: the last `max_dest_rd_atomic` are kept for
/// certain, older ones (up to [`remembered`]) perhaps (MR-DUP-3: an
/// implementation keeps at least `max_dest_rd_atomic` and MAY keep more, as
/// rdmavt's device-wide ack queue, 16 and more, does).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ResourceRing {
    slots: VecDeque<Resource>,
}

impl Clone for ResourceRing {
    /// The same resources; an empty ring (a SEND or WRITE stream's) without
    /// going through `VecDeque`'s generic clone, which the judge would pay
    /// for on every state it copies.
    fn clone(&self) -> Self {
        if self.slots.is_empty() {
            return ResourceRing::default();
        }
        ResourceRing {
            slots: self.slots.clone(),
        }
    }
}

/// How many resources the model remembers for a responder that keeps
/// `capacity`: twice that, at least 32 (more than rdmavt's device-wide
/// queue of 16 plus its extra entries), all 255 when the capacity is unknown.
/// A duplicate of an older one is judged as never kept.
pub fn remembered(capacity: Knowledge<u8>) -> usize {
    match capacity.get() {
        Some(c) => (2 * usize::from(c)).clamp(32, usize::from(u8::MAX)),
        None => usize::from(u8::MAX),
    }
}

impl ResourceRing {
    /// Adds a resource, forgetting the oldest beyond [`remembered`]
    /// (MR-DUP-3: the oldest slot is reused, not NAKed; whether an
    /// implementation still keeps one beyond `max_dest_rd_atomic` is its
    /// choice).
    pub fn push(&mut self, resource: Resource, capacity: Knowledge<u8>) {
        let keep = remembered(capacity);
        while self.slots.len() >= keep {
            self.slots.pop_front(); // "MR-DUP-3"
        }
        self.slots.push_back(resource);
    }

    /// The newest resource that `pred` accepts, and whether it is still kept:
    /// known yes for a slot within the last `capacity` (and always for the
    /// newest), unknown for an older one (MR-DUP-3: kept or not, as the
    /// implementation chooses) or when the capacity is unknown.
    pub fn find(
        &self,
        capacity: Knowledge<u8>,
        pred: impl Fn(&Resource) -> bool,
    ) -> Option<(&Resource, Knowledge<bool>)> {
        let (age, r) = self.slots.iter().rev().enumerate().find(|(_, r)| pred(r))?;
        let kept = match capacity.get() {
            _ if age == 0 => Knowledge::Known(true),
            Some(cap) if age < usize::from(cap) => Knowledge::Known(true),
            _ => Knowledge::Unknown,
        };
        Some((r, kept))
    }

    /// The resources, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Resource> {
        self.slots.iter()
    }

    /// Number of resources kept.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the ring is empty.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}
