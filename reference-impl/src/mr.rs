//! Protection domains and memory regions: byte buffers owned by the device,
//! their keys, access rights and the checks made before any byte is placed
//! (SPEC §8, MR-SEC-4/5/7/8).

use crate::error::VerbsError;
use crate::rng::DeviceRng;
use crate::wr::Sge;
use std::collections::HashMap;

/// A protection domain handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PdHandle(pub u32);

/// Access rights of a memory region or a QP (SPEC §6.3 `access`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Access(pub u8);

impl Access {
    /// No access beyond local read.
    pub const NONE: Access = Access(0);
    /// Local write (receive buffers, READ and atomic results).
    pub const LOCAL_WRITE: Access = Access(1);
    /// Remote read.
    pub const REMOTE_READ: Access = Access(2);
    /// Remote write.
    pub const REMOTE_WRITE: Access = Access(4);
    /// Remote atomic.
    pub const REMOTE_ATOMIC: Access = Access(8);
    /// Every right.
    pub const ALL: Access = Access(15);

    /// Whether every right of `other` is in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

/// What `reg_mr` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MrInfo {
    /// Virtual address of the first byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Local key.
    pub lkey: u32,
    /// Remote key (24 of its 32 bits at least are random, MR-SEC-2: all 32 are).
    pub rkey: u32,
}

#[derive(Debug)]
struct Region {
    pd: PdHandle,
    info: MrInfo,
    access: Access,
    /// False after invalidation (MR-SEC-8).
    valid: bool,
    bytes: Vec<u8>,
    /// Canary bytes just before and just after the region (the agent's
    /// `canary_len`): memory that is not the region's, which no remote
    /// access may touch (MR-SEC-4). Empty unless asked for.
    before: Vec<u8>,
    after: Vec<u8>,
}

/// Why a memory check failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemFault {
    /// No valid region has this key in this protection domain.
    Key,
    /// The region lacks the access right.
    Access,
    /// The range is not wholly inside the region.
    Range,
}

/// All protection domains and regions of a device.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    pds: u32,
    regions: Vec<Option<Region>>,
    by_lkey: HashMap<u32, usize>,
    by_rkey: HashMap<u32, usize>,
    next_va: u64,
}

impl Memory {
    pub(crate) fn alloc_pd(&mut self) -> PdHandle {
        self.pds += 1;
        PdHandle(self.pds - 1)
    }

    pub(crate) fn pd_exists(&self, pd: PdHandle) -> bool {
        pd.0 < self.pds
    }

    /// Registers `len` zeroed bytes with unpredictable keys (MR-SEC-2).
    pub(crate) fn register(
        &mut self,
        rng: &mut DeviceRng,
        pd: PdHandle,
        len: usize,
        access: Access,
    ) -> Result<MrInfo, VerbsError> {
        if !self.pd_exists(pd) {
            return Err(VerbsError::UnknownPd(pd.0));
        }
        let lkey = self.fresh_key(rng);
        let mut rkey = self.fresh_key(rng);
        while rkey == lkey || self.by_lkey.contains_key(&rkey) {
            rkey = self.fresh_key(rng);
        }
        if self.next_va == 0 {
            self.next_va = 0x7f00_0000_0000;
        }
        let addr = self.next_va;
        // Regions are 4 KiB aligned with one unmapped page between them.
        self.next_va = addr.saturating_add(((len as u64 + 4095) & !4095) + 4096);
        let info = MrInfo {
            addr,
            len: len as u64,
            lkey,
            rkey,
        };
        let index = self.regions.len();
        self.regions.push(Some(Region {
            pd,
            info,
            access,
            valid: true,
            bytes: vec![0; len],
            before: Vec::new(),
            after: Vec::new(),
        }));
        self.by_lkey.insert(lkey, index);
        self.by_rkey.insert(rkey, index);
        Ok(info)
    }

    fn fresh_key(&self, rng: &mut DeviceRng) -> u32 {
        loop {
            let key = rng.next_u32();
            if key != 0 && !self.by_lkey.contains_key(&key) && !self.by_rkey.contains_key(&key) {
                return key;
            }
        }
    }

    /// Deregisters the region with this L_Key.
    pub(crate) fn deregister(&mut self, lkey: u32) -> Result<(), VerbsError> {
        let index = self
            .by_lkey
            .remove(&lkey)
            .ok_or(VerbsError::UnknownKey(lkey))?;
        if let Some(region) = self.regions.get_mut(index).and_then(Option::take) {
            self.by_rkey.remove(&region.info.rkey);
        }
        Ok(())
    }

    /// Invalidates the region whose R_Key is `rkey` in `pd` (MR-RSP-10).
    pub(crate) fn invalidate(&mut self, pd: PdHandle, rkey: u32) -> Result<(), MemFault> {
        let region = self
            .by_rkey
            .get(&rkey)
            .and_then(|&i| self.regions.get_mut(i))
            .and_then(Option::as_mut)
            .ok_or(MemFault::Key)?;
        if region.pd != pd || !region.valid {
            return Err(MemFault::Key);
        }
        region.valid = false;
        Ok(())
    }

    fn range_of(info: &MrInfo, addr: u64, len: u64) -> Option<core::ops::Range<usize>> {
        let start = addr.checked_sub(info.addr)?;
        let end = start.checked_add(len)?;
        if end > info.len {
            return None;
        }
        Some(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
    }

    fn remote_region(
        &self,
        pd: PdHandle,
        rkey: u32,
        need: Access,
    ) -> Result<(usize, &Region), MemFault> {
        let index = *self.by_rkey.get(&rkey).ok_or(MemFault::Key)?;
        let region = self
            .regions
            .get(index)
            .and_then(Option::as_ref)
            .ok_or(MemFault::Key)?;
        if region.pd != pd || !region.valid {
            return Err(MemFault::Key); // MR-SEC-7, MR-SEC-8
        }
        if !region.access.contains(need) {
            return Err(MemFault::Access);
        }
        Ok((index, region))
    }

    /// Checks key, protection domain, access and the whole range
    /// [va, va + len) before anything is touched (MR-RSP-6, MR-SEC-5).
    pub(crate) fn check_remote(
        &self,
        pd: PdHandle,
        rkey: u32,
        va: u64,
        len: u64,
        need: Access,
    ) -> Result<(), MemFault> {
        let (_, region) = self.remote_region(pd, rkey, need)?;
        Self::range_of(&region.info, va, len).ok_or(MemFault::Range)?;
        Ok(())
    }

    /// Reads remote bytes after the checks of [`Self::check_remote`].
    pub(crate) fn remote_read(
        &self,
        pd: PdHandle,
        rkey: u32,
        va: u64,
        len: u64,
    ) -> Result<Vec<u8>, MemFault> {
        let (_, region) = self.remote_region(pd, rkey, Access::REMOTE_READ)?;
        let range = Self::range_of(&region.info, va, len).ok_or(MemFault::Range)?;
        Ok(region.bytes[range].to_vec())
    }

    /// Writes remote bytes after the checks of [`Self::check_remote`].
    pub(crate) fn remote_write(
        &mut self,
        pd: PdHandle,
        rkey: u32,
        va: u64,
        data: &[u8],
    ) -> Result<(), MemFault> {
        let (index, region) = self.remote_region(pd, rkey, Access::REMOTE_WRITE)?;
        let range = Self::range_of(&region.info, va, data.len() as u64).ok_or(MemFault::Range)?;
        if let Some(Some(region)) = self.regions.get_mut(index) {
            region.bytes[range].copy_from_slice(data);
        }
        Ok(())
    }

    /// Executes an atomic on 8 bytes in host byte order and returns the
    /// original value (SPEC §6.16). The device is single-threaded, so no
    /// other atomic can interleave (MR-ATOM-5).
    pub(crate) fn remote_atomic(
        &mut self,
        pd: PdHandle,
        rkey: u32,
        va: u64,
        apply: impl FnOnce(u64) -> u64,
    ) -> Result<u64, MemFault> {
        let (index, region) = self.remote_region(pd, rkey, Access::REMOTE_ATOMIC)?;
        let range = Self::range_of(&region.info, va, 8).ok_or(MemFault::Range)?;
        let Some(Some(region)) = self.regions.get_mut(index) else {
            return Err(MemFault::Key);
        };
        let slot = &mut region.bytes[range];
        let mut old = [0u8; 8];
        old.copy_from_slice(slot);
        let old = u64::from_ne_bytes(old);
        slot.copy_from_slice(&apply(old).to_ne_bytes());
        Ok(old)
    }

    fn local_region(&self, pd: PdHandle, sge: &Sge, write: bool) -> Result<usize, MemFault> {
        let index = *self.by_lkey.get(&sge.lkey).ok_or(MemFault::Key)?;
        let region = self
            .regions
            .get(index)
            .and_then(Option::as_ref)
            .ok_or(MemFault::Key)?;
        if region.pd != pd || !region.valid {
            return Err(MemFault::Key);
        }
        if write && !region.access.contains(Access::LOCAL_WRITE) {
            return Err(MemFault::Access);
        }
        Self::range_of(&region.info, sge.addr, u64::from(sge.len)).ok_or(MemFault::Range)?;
        Ok(index)
    }

    /// Checks every SGE of a list for local access.
    pub(crate) fn check_local(
        &self,
        pd: PdHandle,
        sges: &[Sge],
        write: bool,
    ) -> Result<(), MemFault> {
        for sge in sges {
            self.local_region(pd, sge, write)?;
        }
        Ok(())
    }

    /// Copies `len` bytes starting `offset` bytes into the gather list.
    pub(crate) fn gather(
        &self,
        pd: PdHandle,
        sges: &[Sge],
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>, MemFault> {
        let mut out = Vec::with_capacity(len);
        self.gather_into(pd, sges, offset, len, &mut out)?;
        Ok(out)
    }

    /// [`Self::gather`], appending the bytes to `out` (a frame being built);
    /// on an error `out` may hold part of them.
    pub(crate) fn gather_into(
        &self,
        pd: PdHandle,
        sges: &[Sge],
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), MemFault> {
        self.walk_gather(pd, sges, offset, len, |bytes| out.extend_from_slice(bytes))
    }

    /// Whether [`Self::gather`] of these bytes would succeed, without copying.
    pub(crate) fn check_gather(
        &self,
        pd: PdHandle,
        sges: &[Sge],
        offset: u64,
        len: usize,
    ) -> Result<(), MemFault> {
        self.walk_gather(pd, sges, offset, len, |_| {})
    }

    /// Hands `visit` the region slices that make up `len` bytes starting
    /// `offset` bytes into the gather list, in order.
    fn walk_gather(
        &self,
        pd: PdHandle,
        sges: &[Sge],
        offset: u64,
        len: usize,
        mut visit: impl FnMut(&[u8]),
    ) -> Result<(), MemFault> {
        let mut done = 0usize;
        let mut skip = offset;
        for sge in sges {
            if done == len {
                break;
            }
            let sge_len = u64::from(sge.len);
            if skip >= sge_len {
                skip -= sge_len;
                continue;
            }
            let index = self.local_region(pd, sge, false)?;
            let Some(Some(region)) = self.regions.get(index) else {
                return Err(MemFault::Key);
            };
            let take = (sge_len - skip).min((len - done) as u64);
            let range =
                Self::range_of(&region.info, sge.addr + skip, take).ok_or(MemFault::Range)?;
            visit(&region.bytes[range]);
            done += take as usize;
            skip = 0;
        }
        if done == len {
            Ok(())
        } else {
            Err(MemFault::Range)
        }
    }

    /// Writes `data` starting `offset` bytes into the scatter list.
    pub(crate) fn scatter(
        &mut self,
        pd: PdHandle,
        sges: &[Sge],
        offset: u64,
        data: &[u8],
    ) -> Result<(), MemFault> {
        let mut skip = offset;
        let mut done = 0usize;
        for sge in sges {
            if done == data.len() {
                break;
            }
            let sge_len = u64::from(sge.len);
            if skip >= sge_len {
                skip -= sge_len;
                continue;
            }
            let index = self.local_region(pd, sge, true)?;
            let take = (sge_len - skip).min((data.len() - done) as u64) as usize;
            let Some(Some(region)) = self.regions.get_mut(index) else {
                return Err(MemFault::Key);
            };
            let range = Self::range_of(&region.info, sge.addr + skip, take as u64)
                .ok_or(MemFault::Range)?;
            region.bytes[range].copy_from_slice(&data[done..done + take]);
            done += take;
            skip = 0;
        }
        if done == data.len() {
            Ok(())
        } else {
            Err(MemFault::Range)
        }
    }

    /// Application access to a region's bytes by L_Key.
    pub(crate) fn read(&self, lkey: u32, addr: u64, len: u64) -> Result<&[u8], VerbsError> {
        let region = self
            .by_lkey
            .get(&lkey)
            .and_then(|&i| self.regions.get(i))
            .and_then(Option::as_ref)
            .ok_or(VerbsError::UnknownKey(lkey))?;
        let range =
            Self::range_of(&region.info, addr, len).ok_or(VerbsError::OutOfBounds { addr, len })?;
        Ok(&region.bytes[range])
    }

    /// Application write into a region's bytes by L_Key.
    pub(crate) fn write(&mut self, lkey: u32, addr: u64, data: &[u8]) -> Result<(), VerbsError> {
        let region = self
            .by_lkey
            .get(&lkey)
            .copied()
            .and_then(|i| self.regions.get_mut(i))
            .and_then(Option::as_mut)
            .ok_or(VerbsError::UnknownKey(lkey))?;
        let len = data.len() as u64;
        let range =
            Self::range_of(&region.info, addr, len).ok_or(VerbsError::OutOfBounds { addr, len })?;
        region.bytes[range].copy_from_slice(data);
        Ok(())
    }
}

impl Memory {
    /// Surrounds the region of `lkey` with `len` canary bytes of value
    /// `fill` on each side (replacing earlier ones).
    pub(crate) fn set_canary(&mut self, lkey: u32, len: usize, fill: u8) -> Result<(), VerbsError> {
        let index = *self
            .by_lkey
            .get(&lkey)
            .ok_or(VerbsError::UnknownKey(lkey))?;
        let region = self
            .regions
            .get_mut(index)
            .and_then(Option::as_mut)
            .ok_or(VerbsError::UnknownKey(lkey))?;
        region.before = vec![fill; len];
        region.after = vec![fill; len];
        Ok(())
    }

    /// The canary bytes before and after the region of `lkey`.
    pub(crate) fn canary(&self, lkey: u32) -> Result<(&[u8], &[u8]), VerbsError> {
        let index = *self
            .by_lkey
            .get(&lkey)
            .ok_or(VerbsError::UnknownKey(lkey))?;
        let region = self
            .regions
            .get(index)
            .and_then(Option::as_ref)
            .ok_or(VerbsError::UnknownKey(lkey))?;
        Ok((&region.before, &region.after))
    }
}

/// Weakened remote access for the bug zoo (`rkey-bounds-off-by-one`,
/// `write-access-unchecked`, `read-leak`). A range may run `slack` bytes
/// past the region's end; those bytes are the *adjacent memory*: the
/// region's trailing canary (if the agent set one), then the regions
/// registered after this one, in registration order, end to end
/// (this model keeps no other memory; a real device would touch whatever
/// follows the buffer). Past the last region, writes are lost and reads
/// give zeros.
#[cfg(feature = "zoo")]
impl Memory {
    /// A remote write checked for key, protection domain, the right `need`
    /// and a range ending at most `slack` bytes past the region.
    pub(crate) fn zoo_remote_write(
        &mut self,
        pd: PdHandle,
        rkey: u32,
        va: u64,
        data: &[u8],
        need: Access,
        slack: u64,
    ) -> Result<(), MemFault> {
        let (index, region) = self.remote_region(pd, rkey, need)?;
        let (start, inside, mut skip) = zoo_split(&region.info, va, data.len() as u64, slack)?;
        let (head, mut spill) = data.split_at(inside);
        if let Some(Some(region)) = self.regions.get_mut(index) {
            region.bytes[start..start + inside].copy_from_slice(head);
        }
        // First the region's own trailing canary, then the regions after it.
        let (own, following) = self.regions.split_at_mut(index + 1);
        let own_after = own
            .last_mut()
            .and_then(Option::as_mut)
            .map(|r| &mut r.after);
        let following = following.iter_mut().flatten().map(|r| &mut r.bytes);
        for bytes in own_after.into_iter().chain(following) {
            if spill.is_empty() {
                break;
            }
            if skip >= bytes.len() {
                skip -= bytes.len();
                continue;
            }
            let take = (bytes.len() - skip).min(spill.len());
            bytes[skip..skip + take].copy_from_slice(&spill[..take]);
            spill = &spill[take..];
            skip = 0;
        }
        Ok(())
    }

    /// A remote read checked for key, protection domain, remote read and a
    /// range ending at most `slack` bytes past the region.
    pub(crate) fn zoo_remote_read(
        &self,
        pd: PdHandle,
        rkey: u32,
        va: u64,
        len: u64,
        slack: u64,
    ) -> Result<Vec<u8>, MemFault> {
        let (index, region) = self.remote_region(pd, rkey, Access::REMOTE_READ)?;
        let (start, inside, mut skip) = zoo_split(&region.info, va, len, slack)?;
        let mut out = region.bytes[start..start + inside].to_vec();
        let want = usize::try_from(len).map_err(|_| MemFault::Range)?;
        let following = self
            .regions
            .iter()
            .skip(index + 1)
            .flatten()
            .map(|r| &r.bytes);
        for next in std::iter::once(&region.after).chain(following) {
            if out.len() == want {
                break;
            }
            if skip >= next.len() {
                skip -= next.len();
                continue;
            }
            let take = (next.len() - skip).min(want - out.len());
            out.extend_from_slice(&next[skip..skip + take]);
            skip = 0;
        }
        out.resize(want, 0);
        Ok(out)
    }
}

/// `[va, va + len)` against a region with `slack` bytes of tolerance: the
/// offset of the first byte inside the region, how many bytes lie inside,
/// and the offset into the adjacent memory of the first byte past the end.
#[cfg(feature = "zoo")]
fn zoo_split(
    info: &MrInfo,
    va: u64,
    len: u64,
    slack: u64,
) -> Result<(usize, usize, usize), MemFault> {
    let start = va.checked_sub(info.addr).ok_or(MemFault::Range)?;
    let end = start.checked_add(len).ok_or(MemFault::Range)?;
    if end > info.len.saturating_add(slack) {
        return Err(MemFault::Range);
    }
    let inside = end.min(info.len).saturating_sub(start);
    let skip = start.saturating_sub(info.len);
    let to_usize = |v: u64| usize::try_from(v).map_err(|_| MemFault::Range);
    Ok((
        to_usize(start.min(info.len))?,
        to_usize(inside)?,
        to_usize(skip)?,
    ))
}
