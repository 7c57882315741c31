//! Work requests: what `post_send` and `post_recv` take.

use crate::cq::{WcOpcode, WcStatus, WorkCompletion};
use core::net::Ipv4Addr;

/// One scatter/gather element: `len` bytes at `addr` of the region `lkey`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sge {
    /// Virtual address inside the region.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// Local key of the region.
    pub lkey: u32,
}

/// A remote buffer: virtual address and R_Key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RemoteAddr {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
}

/// The operation of a send work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WrOp {
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendImm(u32),
    /// SEND with Invalidate of the given R_Key (RC only).
    SendInv(u32),
    /// RDMA WRITE.
    Write(RemoteAddr),
    /// RDMA WRITE with immediate data.
    WriteImm(RemoteAddr, u32),
    /// RDMA READ into the local SGEs.
    Read(RemoteAddr),
    /// Compare-and-swap on 8 remote bytes; the original lands in the local SGE.
    CompareSwap {
        /// Target (8-byte aligned).
        remote: RemoteAddr,
        /// Value compared with the target.
        compare: u64,
        /// Value written when equal.
        swap: u64,
    },
    /// Fetch-and-add on 8 remote bytes; the original lands in the local SGE.
    FetchAdd {
        /// Target (8-byte aligned).
        remote: RemoteAddr,
        /// Value added modulo 2^64.
        add: u64,
    },
}

impl WrOp {
    /// READ or atomic: an RDMA-resource operation counted by `max_rd_atomic`.
    pub const fn is_rd_atomic(&self) -> bool {
        matches!(
            self,
            WrOp::Read(_) | WrOp::CompareSwap { .. } | WrOp::FetchAdd { .. }
        )
    }

    /// Compare-and-swap or fetch-and-add.
    pub const fn is_atomic(&self) -> bool {
        matches!(self, WrOp::CompareSwap { .. } | WrOp::FetchAdd { .. })
    }

    /// The opcode of its work completion.
    pub(crate) const fn wc_opcode(&self) -> WcOpcode {
        match self {
            WrOp::Send | WrOp::SendImm(_) | WrOp::SendInv(_) => WcOpcode::Send,
            WrOp::Write(_) | WrOp::WriteImm(..) => WcOpcode::RdmaWrite,
            WrOp::Read(_) => WcOpcode::RdmaRead,
            WrOp::CompareSwap { .. } => WcOpcode::CompareSwap,
            WrOp::FetchAdd { .. } => WcOpcode::FetchAdd,
        }
    }
}

/// The destination of a UD send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UdDest {
    /// Destination IPv4 address.
    pub ip: Ipv4Addr,
    /// Destination MAC address.
    pub mac: [u8; 6],
    /// Destination QP number.
    pub qpn: u32,
    /// Q_Key to put in DETH.
    pub qkey: u32,
}

/// A send work request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendWr {
    /// Identifier echoed in the completion.
    pub wr_id: u64,
    /// Operation.
    pub op: WrOp,
    /// Local buffers: gathered for SEND and WRITE, scattered for READ, and
    /// one 8-byte buffer for the original value of an atomic.
    pub sg_list: Vec<Sge>,
    /// Ask for a completion on success (errors always complete, MR-REQ-2).
    pub signaled: bool,
    /// Ask for a solicited event (SE bit, MR-BTH-7).
    pub solicited: bool,
    /// Wait for earlier READs and atomics to complete (MR-REQ-8).
    pub fence: bool,
    /// UD destination (UD QPs only).
    pub ud: Option<UdDest>,
}

impl SendWr {
    /// A signaled work request without fence or solicited event.
    pub fn new(wr_id: u64, op: WrOp, sg_list: Vec<Sge>) -> Self {
        SendWr {
            wr_id,
            op,
            sg_list,
            signaled: true,
            solicited: false,
            fence: false,
            ud: None,
        }
    }

    /// Total bytes of the local buffers.
    pub fn total_len(&self) -> u64 {
        self.sg_list.iter().map(|s| u64::from(s.len)).sum()
    }

    /// Its work completion with `status`: the RC and MP requesters' one
    /// mapping (`byte_len` is `len` on success, 0 on an error).
    pub(crate) fn completion(&self, len: u64, status: WcStatus) -> WorkCompletion {
        WorkCompletion {
            wr_id: self.wr_id,
            status,
            opcode: self.op.wc_opcode(),
            qpn: 0,
            byte_len: if status == WcStatus::Success {
                len as u32
            } else {
                0
            },
            imm: None,
            invalidated_rkey: None,
            src_qp: None,
        }
    }
}

/// A receive work request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvWr {
    /// Identifier echoed in the completion.
    pub wr_id: u64,
    /// Buffers the received bytes are scattered into, in order.
    pub sg_list: Vec<Sge>,
}
