//! The requester's local buffers: memory regions named by L_Key, from which
//! SEND, WRITE and ATOMIC WRITE data is gathered (MR-PKT-9) and into which
//! READ data and atomic results are written (MR-REQ-12).

use super::WrOp;
use crate::model::Knowledge;

/// A local memory region the application's work requests may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocalRegion {
    /// L_Key.
    pub lkey: u32,
    /// Bytes: offsets 0 to `len` − 1 of the region are valid.
    pub len: u64,
    /// Registered with local write access (needed for READ data and atomic results).
    pub local_write: bool,
}

impl LocalRegion {
    /// A region of `len` bytes with local write access.
    pub const fn new(lkey: u32, len: u64) -> Self {
        LocalRegion {
            lkey,
            len,
            local_write: true,
        }
    }

    /// A region of `len` bytes without local write access.
    pub const fn read_only(lkey: u32, len: u64) -> Self {
        LocalRegion {
            lkey,
            len,
            local_write: false,
        }
    }
}

/// Whether `[offset, offset + len)` of the region named `lkey` can be read
/// (`write` false) or written (`write` true). Zero bytes always can. When
/// the regions are [`Knowledge::Unknown`] the model cannot tell, and takes
/// the buffers the application named as valid.
pub(super) fn accessible(
    regions: &Knowledge<Vec<LocalRegion>>,
    lkey: u32,
    offset: u64,
    len: u64,
    write: bool,
) -> bool {
    let Some(regions) = regions.known() else {
        return true;
    };
    len == 0
        || regions.iter().any(|r| {
            r.lkey == lkey
                && offset.checked_add(len).is_some_and(|end| end <= r.len)
                && (r.local_write || !write)
        })
}

/// Whether the operation gathers its data from the local buffer: SEND,
/// WRITE (with or without immediate, invalidate) and ATOMIC WRITE.
pub(super) const fn gathers(op: WrOp) -> bool {
    op.is_send() || op.is_write() || matches!(op, WrOp::AtomicWrite { .. })
}
