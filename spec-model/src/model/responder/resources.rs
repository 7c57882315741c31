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

/// The ring of the last `max_dest_rd_atomic` resources, oldest first.
///
/// With an unknown `max_dest_rd_atomic` the ring keeps up to 255 (the largest
/// allowed value); whether an older slot would still be kept is then unknown.
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

impl ResourceRing {
    /// Adds a resource, evicting the oldest when `capacity` slots are in use
    /// (MR-DUP-3: reuse rather than NAK).
    pub fn push(&mut self, resource: Resource, capacity: Knowledge<u8>) {
        let cap = usize::from(capacity.get().unwrap_or(u8::MAX)).max(1);
        while self.slots.len() >= cap {
            self.slots.pop_front(); // "MR-DUP-3"
        }
        self.slots.push_back(resource);
    }

    /// The newest resource that `pred` accepts, and whether it is still kept:
    /// known yes for a slot the known capacity keeps (and always for the newest),
    /// unknown when the capacity is unknown.
    pub fn find(
        &self,
        capacity: Knowledge<u8>,
        pred: impl Fn(&Resource) -> bool,
    ) -> Option<(&Resource, Knowledge<bool>)> {
        let (age, r) = self.slots.iter().rev().enumerate().find(|(_, r)| pred(r))?;
        let kept = match capacity.get() {
            _ if age == 0 => Knowledge::Known(true),
            Some(cap) => Knowledge::Known(age < usize::from(cap)),
            None => Knowledge::Unknown,
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
