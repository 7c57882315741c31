//! The responder's registered memory and receive queue, as the model sees
//! them: contents may be unknown (a capture tells nothing about memory).

/// Remote access rights of a region (§6.6, §6.16).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// Remote write.
    pub write: bool,
    /// Remote read.
    pub read: bool,
    /// Remote atomic.
    pub atomic: bool,
}

impl Access {
    /// Every remote right.
    pub const ALL: Access = Access {
        write: true,
        read: true,
        atomic: true,
    };
}

/// A registered memory region. `bytes[i]` is the byte at `va + i`, `None`
/// when unknown to the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryRegion {
    /// R_Key (also used as the key of [`crate::model::Effect::Write`]).
    pub key: u32,
    /// Virtual address of the first byte.
    pub va: u64,
    /// Remote access rights.
    pub access: Access,
    /// Contents; the length of the region is `bytes.len()`.
    pub bytes: Vec<Option<u8>>,
    /// Invalidated (by SEND with Invalidate) or deregistered.
    pub invalid: bool,
}

impl MemoryRegion {
    /// A region of `len` bytes of unknown content.
    pub fn unknown(key: u32, va: u64, len: usize, access: Access) -> Self {
        MemoryRegion {
            key,
            va,
            access,
            bytes: vec![None; len],
            invalid: false,
        }
    }

    /// A region with known contents.
    pub fn known(key: u32, va: u64, bytes: &[u8], access: Access) -> Self {
        MemoryRegion {
            key,
            va,
            access,
            bytes: bytes.iter().map(|&b| Some(b)).collect(),
            invalid: false,
        }
    }

    /// Offset of `[va, va + len)` inside the region, when it lies inside.
    pub fn offset_of(&self, va: u64, len: u64) -> Option<usize> {
        let off = va.checked_sub(self.va)?;
        let end = off.checked_add(len)?;
        if end <= self.bytes.len() as u64 {
            usize::try_from(off).ok()
        } else {
            None
        }
    }

    /// The bytes of `[offset, offset + len)`, or `None` if any is unknown.
    pub fn read(&self, offset: usize, len: usize) -> Option<Vec<u8>> {
        self.bytes
            .get(offset..offset.checked_add(len)?)?
            .iter()
            .copied()
            .collect()
    }

    /// Stores `data` at `offset` (the caller has checked the bounds).
    pub fn write(&mut self, offset: usize, data: &[u8]) {
        for (i, b) in data.iter().enumerate() {
            if let Some(slot) = self.bytes.get_mut(offset + i) {
                *slot = Some(*b);
            }
        }
    }
}

/// A posted receive work request: one buffer in a region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvWr {
    /// Work-request number (the model's numbering, in posting order).
    pub wr: u64,
    /// Key of the region holding the buffer.
    pub key: u32,
    /// Offset of the buffer in that region.
    pub offset: u64,
    /// Buffer length.
    pub len: u64,
}

/// The responder's receive queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecvQueue {
    /// Unknown to the model (judging a capture): receives are assumed posted,
    /// and placement of SEND data is not described.
    Unknown,
    /// The posted receive work requests not yet consumed, in posting order.
    Known(Vec<RecvWr>),
}
