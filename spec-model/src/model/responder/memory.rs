//! Memory regions as the responder sees them: keys, protection domains,
//! bounds, access rights and (when known) contents (SPEC.md §6.6, §8).

use crate::model::{Field, Knowledge};

/// Access rights of a QP or a memory region (SPEC.md §6.3 `access`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AccessFlags {
    /// Remote read.
    pub remote_read: bool,
    /// Remote write.
    pub remote_write: bool,
    /// Remote atomic.
    pub remote_atomic: bool,
    /// Flush to global visibility.
    pub flush_global: bool,
    /// Flush to persistence.
    pub flush_persistent: bool,
}

impl AccessFlags {
    /// No remote access.
    pub const NONE: AccessFlags = AccessFlags {
        remote_read: false,
        remote_write: false,
        remote_atomic: false,
        flush_global: false,
        flush_persistent: false,
    };
    /// Every remote access.
    pub const ALL: AccessFlags = AccessFlags {
        remote_read: true,
        remote_write: true,
        remote_atomic: true,
        flush_global: true,
        flush_persistent: true,
    };
    /// Remote read only.
    pub const READ: AccessFlags = AccessFlags {
        remote_read: true,
        ..AccessFlags::NONE
    };
    /// Remote write only.
    pub const WRITE: AccessFlags = AccessFlags {
        remote_write: true,
        ..AccessFlags::NONE
    };
    /// Remote atomic only.
    pub const ATOMIC: AccessFlags = AccessFlags {
        remote_atomic: true,
        ..AccessFlags::NONE
    };

    /// The flush access a FLUSH placement type needs (bit 0x1 global, 0x2 persistent).
    pub const fn for_placement(placement_type: u8) -> AccessFlags {
        AccessFlags {
            flush_global: placement_type & 0x1 != 0,
            flush_persistent: placement_type & 0x2 != 0,
            ..AccessFlags::NONE
        }
    }

    /// Whether `self` grants every right in `need`.
    pub const fn grants(self, need: AccessFlags) -> bool {
        (self.remote_read || !need.remote_read)
            && (self.remote_write || !need.remote_write)
            && (self.remote_atomic || !need.remote_atomic)
            && (self.flush_global || !need.flush_global)
            && (self.flush_persistent || !need.flush_persistent)
    }
}

/// A registered memory region (or window) the responder's QP may be asked to access.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryRegion {
    /// R_Key.
    pub rkey: u32,
    /// Protection domain (the model's own numbering).
    pub pd: u32,
    /// First virtual address.
    pub va: u64,
    /// Length in bytes.
    pub len: u64,
    /// Remote access rights.
    pub access: AccessFlags,
    /// A memory window is bound to the region, so it cannot be invalidated (MR-RSP-10).
    pub bound: bool,
    /// The bytes of the region, when known (`len` of them).
    pub contents: Knowledge<Vec<u8>>,
}

impl MemoryRegion {
    /// A region of unknown contents.
    pub fn new(rkey: u32, pd: u32, va: u64, len: u64, access: AccessFlags) -> Self {
        MemoryRegion {
            rkey,
            pd,
            va,
            len,
            access,
            bound: false,
            contents: Knowledge::Unknown,
        }
    }

    /// A region holding `bytes` (its length is theirs).
    pub fn with_contents(rkey: u32, pd: u32, va: u64, access: AccessFlags, bytes: Vec<u8>) -> Self {
        MemoryRegion {
            len: bytes.len() as u64,
            contents: Knowledge::Known(bytes),
            ..MemoryRegion::new(rkey, pd, va, 0, access)
        }
    }

    /// Whether `[va, va + len)` lies wholly inside the region (no overflow possible).
    pub fn covers(&self, va: u64, len: u64) -> bool {
        let (start, end) = (
            u128::from(self.va),
            u128::from(self.va) + u128::from(self.len),
        );
        let (lo, hi) = (u128::from(va), u128::from(va) + u128::from(len));
        lo >= start && hi <= end
    }

    /// Offset of `va` from the region's start (callers have checked [`Self::covers`]).
    pub const fn offset(&self, va: u64) -> u64 {
        va.wrapping_sub(self.va)
    }

    /// The bytes of `[va, va + len)`: exact when contents are known, else any.
    pub fn read(&self, va: u64, len: u64) -> Field<Vec<u8>> {
        match (&self.contents, self.range(va, len)) {
            (Knowledge::Known(bytes), Some(r)) => bytes
                .get(r)
                .map_or(Field::Any, |b| Field::Exact(b.to_vec())),
            _ => Field::Any,
        }
    }

    /// Writes `bytes` at `va` into known contents; unknown contents stay unknown.
    pub fn write(&mut self, va: u64, bytes: &[u8]) {
        let Some(r) = self.range(va, bytes.len() as u64) else {
            return;
        };
        if let Some(dst) = self.contents.known_mut().and_then(|c| c.get_mut(r)) {
            dst.copy_from_slice(bytes);
        }
    }

    /// The 64-bit value at `va`, in the responder host's byte order (the model
    /// assumes a little-endian host), when known.
    pub fn read_u64(&self, va: u64) -> Option<u64> {
        match self.read(va, 8) {
            Field::Exact(b) => b.try_into().ok().map(u64::from_le_bytes),
            _ => None,
        }
    }

    fn range(&self, va: u64, len: u64) -> Option<core::ops::Range<usize>> {
        if !self.covers(va, len) {
            return None;
        }
        let start = usize::try_from(self.offset(va)).ok()?;
        let len = usize::try_from(len).ok()?;
        Some(start..start.checked_add(len)?)
    }
}

/// Why an R_Key check fails (all answered with NAK 0x62).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyFault {
    /// No valid region has this R_Key (never registered, deregistered or invalidated).
    NoSuchKey,
    /// The region belongs to another protection domain.
    OtherPd,
    /// The region lacks the access the operation needs.
    Access,
    /// The range is not wholly inside the region.
    Range,
}

impl KeyFault {
    /// The requirements a fault of this kind breaks, besides the operation's own.
    pub const fn reqs(self) -> &'static [&'static str] {
        match self {
            KeyFault::NoSuchKey => &["MR-RSP-6", "MR-SEC-8"],
            KeyFault::OtherPd => &["MR-RSP-6", "MR-SEC-7"],
            KeyFault::Access => &["MR-RSP-6"],
            KeyFault::Range => &["MR-RSP-6", "MR-SEC-4"],
        }
    }
}

/// Checks R_Key, protection domain, access and bounds of `[va, va + len)`
/// (MR-RSP-6, MR-SEC-4, MR-SEC-7, MR-SEC-8). With `check_range` false only the
/// key, domain and access are checked (FLUSH of a whole region).
///
/// Unknown memory gives an unknown verdict; a known one gives the index of
/// the region or the fault.
pub fn check_key(
    memory: &Knowledge<Vec<MemoryRegion>>,
    pd: u32,
    rkey: u32,
    va: u64,
    len: u64,
    need: AccessFlags,
    check_range: bool,
) -> Knowledge<Result<usize, KeyFault>> {
    let Knowledge::Known(regions) = memory else {
        return Knowledge::Unknown;
    };
    let Some(i) = regions.iter().position(|r| r.rkey == rkey) else {
        return Knowledge::Known(Err(KeyFault::NoSuchKey)); // "MR-SEC-8"
    };
    let r = &regions[i];
    Knowledge::Known(if r.pd != pd {
        Err(KeyFault::OtherPd) // "MR-SEC-7"
    } else if !r.access.grants(need) {
        Err(KeyFault::Access) // "MR-RSP-6"
    } else if check_range && !r.covers(va, len) {
        Err(KeyFault::Range) // "MR-SEC-4"
    } else {
        Ok(i)
    })
}

/// The region with `rkey`, if memory is known and it exists.
pub fn region(memory: &Knowledge<Vec<MemoryRegion>>, rkey: u32) -> Option<&MemoryRegion> {
    memory.known()?.iter().find(|r| r.rkey == rkey)
}

/// The region with `rkey`, mutably.
pub fn region_mut(
    memory: &mut Knowledge<Vec<MemoryRegion>>,
    rkey: u32,
) -> Option<&mut MemoryRegion> {
    memory.known_mut()?.iter_mut().find(|r| r.rkey == rkey)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_never_overflow() {
        let r = MemoryRegion::new(1, 1, u64::MAX - 7, 8, AccessFlags::ALL);
        assert!(r.covers(u64::MAX - 7, 8));
        assert!(!r.covers(u64::MAX - 7, 9));
        assert!(!r.covers(u64::MAX, u64::MAX));
    }

    #[test]
    fn key_checks_mr_rsp_6_sec_4_sec_7() {
        let mem = Knowledge::Known(vec![MemoryRegion::new(
            7,
            1,
            0x1000,
            0x100,
            AccessFlags::READ,
        )]);
        let check = |pd, key, va, len, need| check_key(&mem, pd, key, va, len, need, true);
        assert_eq!(
            check(1, 7, 0x1000, 0x100, AccessFlags::READ),
            Knowledge::Known(Ok(0))
        );
        assert_eq!(
            check(1, 8, 0x1000, 1, AccessFlags::READ),
            Knowledge::Known(Err(KeyFault::NoSuchKey))
        );
        assert_eq!(
            check(2, 7, 0x1000, 1, AccessFlags::READ),
            Knowledge::Known(Err(KeyFault::OtherPd)),
            "MR-SEC-7"
        );
        assert_eq!(
            check(1, 7, 0x1000, 1, AccessFlags::WRITE),
            Knowledge::Known(Err(KeyFault::Access)),
            "MR-RSP-6"
        );
        assert_eq!(
            check(1, 7, 0x10FF, 2, AccessFlags::READ),
            Knowledge::Known(Err(KeyFault::Range)),
            "MR-SEC-4"
        );
        assert_eq!(
            check_key(&Knowledge::Unknown, 1, 7, 0, 1, AccessFlags::READ, true),
            Knowledge::Unknown
        );
    }

    #[test]
    fn contents_read_and_write() {
        let mut r = MemoryRegion::with_contents(1, 1, 0x10, AccessFlags::ALL, vec![0; 16]);
        r.write(0x18, &5u64.to_le_bytes());
        assert_eq!(r.read_u64(0x18), Some(5));
        assert_eq!(r.read(0x10, 2), Field::Exact(vec![0, 0]));
        assert_eq!(r.read(0x1F, 2), Field::Any);
    }
}
