//! The only unsafe code of the crate: the C shim over libibverbs
//! (`csrc/shim.c`) and safe owners of its objects.
//!
//! Contract: every object (`Context`, `Pd`, `Mr`, `Cq`, `Qp`, `Ah`) owns one
//! verbs object and releases it on drop. The owner of the agent state
//! (`crate::agent::VerbsAgent`) drops them in dependency order (QPs and AHs,
//! then CQs, MRs, PDs, last the context) — `reset` and `Drop` do that.
//! Raw pointers never leave this module. Every shim call returns 0 or a
//! positive errno, turned into [`Errno`].
#![allow(unsafe_code)]

use core::ffi::{c_char, c_int, c_void};
use std::ffi::CString;

/// An errno from a verbs call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

impl core::fmt::Display for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let name = match self.0 {
            1 => "EPERM",
            5 => "EIO",
            12 => "ENOMEM",
            13 => "EACCES",
            14 => "EFAULT",
            16 => "EBUSY",
            19 => "ENODEV",
            22 => "EINVAL",
            28 => "ENOSPC",
            38 => "ENOSYS",
            95 => "EOPNOTSUPP",
            _ => "errno",
        };
        write!(f, "{name} ({})", self.0)
    }
}

fn check(rc: c_int) -> Result<(), Errno> {
    if rc == 0 { Ok(()) } else { Err(Errno(rc)) }
}

#[repr(C)]
struct RawContext(c_void);
#[repr(C)]
struct RawPd(c_void);
#[repr(C)]
struct RawMr(c_void);
#[repr(C)]
struct RawCq(c_void);
#[repr(C)]
struct RawQp(c_void);
#[repr(C)]
struct RawAh(c_void);

/// Device and port attributes (`struct mrv_dev_info`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DevInfo {
    /// `max_mr_size`.
    pub max_mr_size: u64,
    /// The port's `max_msg_sz`.
    pub max_msg_sz: u32,
    /// The port's `active_mtu` in bytes.
    pub active_mtu: u32,
    /// `max_qp_rd_atom`.
    pub max_qp_rd_atom: u32,
    /// `max_qp_init_rd_atom`.
    pub max_qp_init_rd_atom: u32,
    /// `atomic_cap` (0 = none).
    pub atomic_cap: u32,
    /// `max_qp_wr`.
    pub max_qp_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `max_cqe`.
    pub max_cqe: u32,
    /// The port's state (4 = ACTIVE).
    pub port_state: u32,
}

/// Queue capacities (`struct mrv_caps`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caps {
    /// `max_send_wr`.
    pub max_send_wr: u32,
    /// `max_recv_wr`.
    pub max_recv_wr: u32,
    /// `max_send_sge`.
    pub max_send_sge: u32,
    /// `max_recv_sge`.
    pub max_recv_sge: u32,
}

/// `ibv_modify_qp` attributes (`struct mrv_qp_attr`); `mask` holds the
/// `IBV_QP_*` bits of those set.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)] // the ibv_qp_attr fields of the same names
pub struct QpAttr {
    pub mask: c_int,
    pub state: u32,
    pub access: u32,
    pub pkey_index: u16,
    pub qkey: u32,
    pub dest_qpn: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub path_mtu: u32,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub dgid: [u8; 16],
    pub sgid_index: u8,
    pub traffic_class: u8,
    pub hop_limit: u8,
    pub port_num: u8,
}

/// One scatter/gather element (`struct mrv_sge`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Sge {
    /// Virtual address.
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// L_Key.
    pub lkey: u32,
}

#[repr(C)]
struct RawSend {
    wr_id: u64,
    opcode: u32,
    flags: u32,
    remote_addr: u64,
    rkey: u32,
    imm_be: u32,
    invalidate_rkey: u32,
    compare_add: u64,
    swap: u64,
    ah: *mut RawAh,
    remote_qpn: u32,
    remote_qkey: u32,
}

/// One send work request, in verbs terms.
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)] // the ibv_send_wr fields of the same names
pub struct SendWr {
    pub wr_id: u64,
    /// `enum ibv_wr_opcode`.
    pub opcode: u32,
    /// `IBV_SEND_*` bits.
    pub flags: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    /// The immediate as carried on the wire (converted to network order here).
    pub imm: u32,
    pub invalidate_rkey: u32,
    pub compare_add: u64,
    pub swap: u64,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// One completion (`struct mrv_wc`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)] // the ibv_wc fields of the same names
pub struct Wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub qp_num: u32,
    pub byte_len: u32,
    pub wc_flags: u32,
    /// `imm_data` (network order) or `invalidated_rkey`, by `wc_flags`.
    pub imm_or_inv: u32,
    pub src_qp: u32,
    pub vendor_err: u32,
}

unsafe extern "C" {
    fn mrv_open(name: *const c_char, err: *mut c_int) -> *mut RawContext;
    fn mrv_close(ctx: *mut RawContext) -> c_int;
    fn mrv_query(ctx: *mut RawContext, port: u8, out: *mut DevInfo) -> c_int;
    fn mrv_alloc_pd(ctx: *mut RawContext, err: *mut c_int) -> *mut RawPd;
    fn mrv_dealloc_pd(pd: *mut RawPd) -> c_int;
    fn mrv_reg_mr(
        pd: *mut RawPd,
        addr: *mut c_void,
        len: usize,
        access: c_int,
        lkey: *mut u32,
        rkey: *mut u32,
        err: *mut c_int,
    ) -> *mut RawMr;
    fn mrv_dereg_mr(mr: *mut RawMr) -> c_int;
    fn mrv_create_cq(ctx: *mut RawContext, cqe: c_int, err: *mut c_int) -> *mut RawCq;
    fn mrv_destroy_cq(cq: *mut RawCq) -> c_int;
    fn mrv_create_qp(
        pd: *mut RawPd,
        qp_type: c_int,
        scq: *mut RawCq,
        rcq: *mut RawCq,
        sq_sig_all: c_int,
        caps: *mut Caps,
        qpn: *mut u32,
        err: *mut c_int,
    ) -> *mut RawQp;
    fn mrv_destroy_qp(qp: *mut RawQp) -> c_int;
    fn mrv_modify_qp(qp: *mut RawQp, attr: *const QpAttr) -> c_int;
    fn mrv_query_qp_state(qp: *mut RawQp, state: *mut u32) -> c_int;
    fn mrv_create_ah(
        pd: *mut RawPd,
        dgid: *const u8,
        sgid_index: u8,
        port: u8,
        err: *mut c_int,
    ) -> *mut RawAh;
    fn mrv_destroy_ah(ah: *mut RawAh) -> c_int;
    fn mrv_post_send(qp: *mut RawQp, s: *const RawSend, sg: *const Sge, nsge: c_int) -> c_int;
    fn mrv_post_recv(qp: *mut RawQp, wr_id: u64, sg: *const Sge, nsge: c_int) -> c_int;
    fn mrv_poll_cq(cq: *mut RawCq, max: c_int, out: *mut Wc) -> c_int;
}

/// Most SGEs the shim passes (its stack array).
pub const SHIM_MAX_SGE: usize = 16;
/// Most completions one shim poll returns.
pub const SHIM_MAX_POLL: usize = 64;

/// An open device (`ibv_context`).
#[derive(Debug)]
pub struct Context(*mut RawContext);

// SAFETY: libibverbs contexts, and every object made from them, may be used
// from any thread (rdma-core documents verbs as thread-safe); the agent
// serialises all calls behind one Mutex anyway.
unsafe impl Send for Context {}

impl Context {
    /// Opens the device named `name` (or the first one when empty).
    pub fn open(name: &str) -> Result<Context, Errno> {
        let cname = CString::new(name).map_err(|_| Errno(22))?;
        let mut err: c_int = 0;
        // SAFETY: `cname` is a valid NUL-terminated string for the call;
        // `err` is a valid out-pointer.
        let ctx = unsafe { mrv_open(cname.as_ptr(), &mut err) };
        if ctx.is_null() {
            Err(Errno(if err == 0 { 19 } else { err }))
        } else {
            Ok(Context(ctx))
        }
    }

    /// Device and port attributes.
    pub fn query(&self, port: u8) -> Result<DevInfo, Errno> {
        let mut out = DevInfo::default();
        // SAFETY: self.0 is an open context; `out` is a valid #[repr(C)]
        // struct matching `struct mrv_dev_info`.
        check(unsafe { mrv_query(self.0, port, &mut out) })?;
        Ok(out)
    }

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&self) -> Result<Pd, Errno> {
        let mut err = 0;
        // SAFETY: self.0 is an open context; `err` a valid out-pointer.
        let p = unsafe { mrv_alloc_pd(self.0, &mut err) };
        if p.is_null() {
            Err(Errno(err))
        } else {
            Ok(Pd(p))
        }
    }

    /// `ibv_create_cq` with `cqe` entries.
    pub fn create_cq(&self, cqe: i32) -> Result<Cq, Errno> {
        let mut err = 0;
        // SAFETY: self.0 is an open context; `err` a valid out-pointer.
        let p = unsafe { mrv_create_cq(self.0, cqe, &mut err) };
        if p.is_null() {
            Err(Errno(err))
        } else {
            Ok(Cq(p))
        }
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: self.0 is open and every object made from it was dropped
        // before (module contract).
        unsafe { mrv_close(self.0) };
    }
}

/// A protection domain.
#[derive(Debug)]
pub struct Pd(*mut RawPd);
// SAFETY: see `Context`.
unsafe impl Send for Pd {}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: self.0 came from ibv_alloc_pd; its MRs, QPs and AHs are
        // dropped first (module contract).
        unsafe { mrv_dealloc_pd(self.0) };
    }
}

impl Pd {
    /// Registers a fresh zeroed buffer of `canary + len + canary` bytes,
    /// the middle `len` bytes only, with `access` (`IBV_ACCESS_*` bits).
    pub fn reg_mr(&self, len: usize, canary: usize, access: i32) -> Result<Mr, Errno> {
        let total = len
            .checked_add(canary.checked_mul(2).ok_or(Errno(12))?)
            .ok_or(Errno(12))?
            .max(1);
        let buf: Box<[u8]> = vec![0u8; total].into_boxed_slice();
        let base = Box::into_raw(buf) as *mut u8;
        let mut mr = Mr {
            mr: core::ptr::null_mut(),
            base,
            total,
            canary,
            len,
            lkey: 0,
            rkey: 0,
        };
        let mut err = 0;
        // SAFETY: base..base+total is a live allocation owned by `mr` (freed
        // only in its Drop, after deregistration); base+canary stays inside
        // it because canary <= total; pd is live; the out-pointers are valid.
        let p = unsafe {
            mrv_reg_mr(
                self.0,
                base.add(canary) as *mut c_void,
                len,
                access,
                &mut mr.lkey,
                &mut mr.rkey,
                &mut err,
            )
        };
        if p.is_null() {
            return Err(Errno(if err == 0 { 22 } else { err }));
        }
        mr.mr = p;
        Ok(mr)
    }

    /// `ibv_create_qp`; `caps` comes back with the effective values.
    pub fn create_qp(
        &self,
        qp_type: i32,
        send_cq: &Cq,
        recv_cq: &Cq,
        sq_sig_all: bool,
        caps: &mut Caps,
    ) -> Result<Qp, Errno> {
        let mut err = 0;
        let mut qpn = 0;
        // SAFETY: pd and both CQs are live; `caps`, `qpn` and `err` are valid
        // out-pointers for the call.
        let p = unsafe {
            mrv_create_qp(
                self.0,
                qp_type,
                send_cq.0,
                recv_cq.0,
                c_int::from(sq_sig_all),
                caps,
                &mut qpn,
                &mut err,
            )
        };
        if p.is_null() {
            Err(Errno(err))
        } else {
            Ok(Qp { qp: p, qpn })
        }
    }

    /// `ibv_create_ah` for a RoCEv2 destination GID.
    pub fn create_ah(&self, dgid: [u8; 16], sgid_index: u8, port: u8) -> Result<Ah, Errno> {
        let mut err = 0;
        // SAFETY: pd is live; dgid points at 16 readable bytes; err is valid.
        let p = unsafe { mrv_create_ah(self.0, dgid.as_ptr(), sgid_index, port, &mut err) };
        if p.is_null() {
            Err(Errno(err))
        } else {
            Ok(Ah(p))
        }
    }
}

/// A registered memory region with the buffer it owns (and canaries).
#[derive(Debug)]
pub struct Mr {
    mr: *mut RawMr,
    base: *mut u8,
    total: usize,
    canary: usize,
    len: usize,
    /// L_Key.
    pub lkey: u32,
    /// R_Key.
    pub rkey: u32,
}
// SAFETY: see `Context`; the buffer is only touched through &self/&mut self
// methods below and by the device.
unsafe impl Send for Mr {}

impl Mr {
    /// The virtual address of the region's first byte.
    pub fn addr(&self) -> u64 {
        self.base as u64 + self.canary as u64
    }

    /// Region length.
    pub fn region_len(&self) -> usize {
        self.len
    }

    /// Copies `out.len()` bytes from region offset `at` (whole buffer
    /// offset when `raw`). Out-of-range requests copy nothing and return
    /// false.
    fn copy_out(&self, at: usize, out: &mut [u8]) -> bool {
        let Some(end) = at.checked_add(out.len()) else {
            return false;
        };
        if end > self.total {
            return false;
        }
        // SAFETY: base..base+total is live (owned by self); at+len <= total
        // was checked. The device may write concurrently (RDMA); a byte copy
        // of the current contents is what the protocol asks for.
        unsafe { core::ptr::copy_nonoverlapping(self.base.add(at), out.as_mut_ptr(), out.len()) };
        true
    }

    /// Reads `out.len()` bytes of the region from `offset`; false if the
    /// range does not fit the region.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> bool {
        match offset.checked_add(out.len()) {
            Some(end) if end <= self.len => self.copy_out(self.canary + offset, out),
            _ => false,
        }
    }

    /// Writes `data` into the region at `offset`; false if it does not fit.
    pub fn write(&mut self, offset: usize, data: &[u8]) -> bool {
        match offset.checked_add(data.len()) {
            Some(end) if end <= self.len => {
                // SAFETY: canary+offset+len <= canary+self.len <= total, inside
                // the live allocation owned by self.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        data.as_ptr(),
                        self.base.add(self.canary + offset),
                        data.len(),
                    )
                };
                true
            }
            _ => false,
        }
    }

    /// Sets every canary byte to `fill`.
    pub fn fill_canaries(&mut self, fill: u8) {
        let after = self.canary + self.len;
        // SAFETY: [0, canary) and [canary+len, canary+len+canary) lie inside
        // the live allocation of `total` bytes (total = len + 2*canary, or 1
        // when that is 0, in which case canary is 0 and nothing is written).
        unsafe {
            core::ptr::write_bytes(self.base, fill, self.canary);
            core::ptr::write_bytes(self.base.add(after), fill, self.canary);
        }
    }

    /// The canaries before and after the region, as they are now.
    pub fn canaries(&self) -> (Vec<u8>, Vec<u8>) {
        let mut before = vec![0; self.canary];
        let mut after = vec![0; self.canary];
        self.copy_out(0, &mut before);
        self.copy_out(self.canary + self.len, &mut after);
        (before, after)
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: self.mr came from ibv_reg_mr (non-null once constructed
        // by reg_mr; a failed registration returns before it is set and
        // skips the dereg); `base`/`total` are exactly the Box<[u8]> leaked
        // in reg_mr, freed once here after the device stops using it.
        unsafe {
            if !self.mr.is_null() {
                mrv_dereg_mr(self.mr);
            }
            drop(Box::from_raw(core::ptr::slice_from_raw_parts_mut(
                self.base, self.total,
            )));
        }
    }
}

/// A completion queue.
#[derive(Debug)]
pub struct Cq(*mut RawCq);
// SAFETY: see `Context`.
unsafe impl Send for Cq {}

impl Cq {
    /// Polls up to `max` (≤ 64) completions.
    pub fn poll(&self, max: usize) -> Result<Vec<Wc>, Errno> {
        let mut out = [Wc::default(); SHIM_MAX_POLL];
        let max = max.min(SHIM_MAX_POLL);
        // SAFETY: cq is live; `out` has room for `max` ≤ 64 entries.
        let n = unsafe { mrv_poll_cq(self.0, max as c_int, out.as_mut_ptr()) };
        if n < 0 {
            return Err(Errno(-n));
        }
        Ok(out[..n as usize].to_vec())
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: cq is live; the QPs using it were dropped first.
        unsafe { mrv_destroy_cq(self.0) };
    }
}

/// A queue pair.
#[derive(Debug)]
pub struct Qp {
    qp: *mut RawQp,
    /// Its number.
    pub qpn: u32,
}
// SAFETY: see `Context`.
unsafe impl Send for Qp {}

impl Qp {
    /// `ibv_modify_qp`.
    pub fn modify(&self, attr: &QpAttr) -> Result<(), Errno> {
        // SAFETY: qp is live; attr is a valid `struct mrv_qp_attr`.
        check(unsafe { mrv_modify_qp(self.qp, attr) })
    }

    /// The QP's current state (`enum ibv_qp_state`).
    pub fn state(&self) -> Result<u32, Errno> {
        let mut s = 0;
        // SAFETY: qp is live; `s` a valid out-pointer.
        check(unsafe { mrv_query_qp_state(self.qp, &mut s) })?;
        Ok(s)
    }

    /// `ibv_post_send` of one work request (UD: `ah` given).
    pub fn post_send(&self, wr: &SendWr, ah: Option<&Ah>, sg: &[Sge]) -> Result<(), Errno> {
        if sg.len() > SHIM_MAX_SGE {
            return Err(Errno(22));
        }
        let raw = RawSend {
            wr_id: wr.wr_id,
            opcode: wr.opcode,
            flags: wr.flags,
            remote_addr: wr.remote_addr,
            rkey: wr.rkey,
            imm_be: wr.imm.to_be(),
            invalidate_rkey: wr.invalidate_rkey,
            compare_add: wr.compare_add,
            swap: wr.swap,
            ah: ah.map_or(core::ptr::null_mut(), |a| a.0),
            remote_qpn: wr.remote_qpn,
            remote_qkey: wr.remote_qkey,
        };
        // SAFETY: qp (and ah, if any) are live; `raw` and `sg` (≤ 16
        // entries, checked) are valid for the call; the buffers the SGEs
        // name are the device's business (bad keys become completions).
        check(unsafe { mrv_post_send(self.qp, &raw, sg.as_ptr(), sg.len() as c_int) })
    }

    /// `ibv_post_recv` of one work request.
    pub fn post_recv(&self, wr_id: u64, sg: &[Sge]) -> Result<(), Errno> {
        if sg.len() > SHIM_MAX_SGE {
            return Err(Errno(22));
        }
        // SAFETY: qp is live; `sg` (≤ 16 entries) is valid for the call.
        check(unsafe { mrv_post_recv(self.qp, wr_id, sg.as_ptr(), sg.len() as c_int) })
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: qp is live and dropped once.
        unsafe { mrv_destroy_qp(self.qp) };
    }
}

/// An address handle (UD destinations).
#[derive(Debug)]
pub struct Ah(*mut RawAh);
// SAFETY: see `Context`.
unsafe impl Send for Ah {}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: ah is live and dropped once.
        unsafe { mrv_destroy_ah(self.0) };
    }
}
