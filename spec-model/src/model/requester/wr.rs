//! Send work requests as the application posts them.

/// The operation of a send work request, with its remote operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WrOp {
    /// SEND.
    Send,
    /// SEND with Immediate.
    SendImm {
        /// Immediate data.
        imm: u32,
    },
    /// SEND with Invalidate.
    SendInv {
        /// R_Key the responder invalidates.
        rkey: u32,
    },
    /// RDMA WRITE.
    Write {
        /// Remote virtual address.
        va: u64,
        /// Remote key.
        rkey: u32,
    },
    /// RDMA WRITE with Immediate.
    WriteImm {
        /// Remote virtual address.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data.
        imm: u32,
    },
    /// RDMA READ.
    Read {
        /// Remote virtual address.
        va: u64,
        /// Remote key.
        rkey: u32,
    },
    /// Compare-Swap (8 bytes).
    CmpSwap {
        /// Remote virtual address.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// Compare operand.
        compare: u64,
        /// Swap operand.
        swap: u64,
    },
    /// Fetch-Add (8 bytes).
    FetchAdd {
        /// Remote virtual address.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// Add operand.
        add: u64,
    },
    /// FLUSH of `[va, va + length)` (selectivity 0) or of the whole region.
    Flush {
        /// Remote virtual address.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// FETH selectivity level.
        selectivity: u8,
        /// FETH placement type.
        placement: u8,
    },
    /// ATOMIC WRITE of 8 bytes.
    AtomicWrite {
        /// Remote virtual address.
        va: u64,
        /// Remote key.
        rkey: u32,
    },
}

impl WrOp {
    /// SEND, SEND with Immediate or SEND with Invalidate.
    pub const fn is_send(self) -> bool {
        matches!(
            self,
            WrOp::Send | WrOp::SendImm { .. } | WrOp::SendInv { .. }
        )
    }

    /// RDMA WRITE with or without Immediate.
    pub const fn is_write(self) -> bool {
        matches!(self, WrOp::Write { .. } | WrOp::WriteImm { .. })
    }

    /// Compare-Swap or Fetch-Add.
    pub const fn is_atomic(self) -> bool {
        matches!(self, WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. })
    }

    /// An RDMA-resource operation (SPEC.md §1.3): READ, atomics, FLUSH, ATOMIC WRITE.
    pub const fn is_rdma_resource(self) -> bool {
        matches!(
            self,
            WrOp::Read { .. }
                | WrOp::CmpSwap { .. }
                | WrOp::FetchAdd { .. }
                | WrOp::Flush { .. }
                | WrOp::AtomicWrite { .. }
        )
    }

    /// A receive-consuming message (SPEC.md §1.3): every SEND and WRITE with Immediate.
    pub const fn is_receive_consuming(self) -> bool {
        self.is_send() || matches!(self, WrOp::WriteImm { .. })
    }

    /// Message length implied by the operation (atomics and ATOMIC WRITE: 8).
    pub const fn fixed_length(self) -> Option<u64> {
        match self {
            WrOp::CmpSwap { .. } | WrOp::FetchAdd { .. } | WrOp::AtomicWrite { .. } => Some(8),
            _ => None,
        }
    }
}

/// The destination of a UD work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UdDest {
    /// Destination QPN.
    pub qpn: u32,
    /// Q_Key of the destination.
    pub qkey: u32,
}

/// One send work request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkRequest {
    /// Operation and remote operands.
    pub op: WrOp,
    /// Message length in bytes (READ: bytes to read; FLUSH: RETH length).
    /// Atomics and ATOMIC WRITE are 8 whatever this says.
    pub length: u64,
    /// The application asked for a completion.
    pub signaled: bool,
    /// Solicited event (SE) requested.
    pub solicited: bool,
    /// Fence flag (MR-REQ-8).
    pub fence: bool,
    /// L_Key of the local buffer (READ data and atomic results are written there).
    pub lkey: u32,
    /// Offset of the local buffer in its region.
    pub local_offset: u64,
    /// UD destination (UD QPs only).
    pub ud: Option<UdDest>,
}

impl WorkRequest {
    /// A signaled work request of `op` and `length` bytes, local buffer at key 0 offset 0.
    pub fn new(op: WrOp, length: u64) -> Self {
        WorkRequest {
            op,
            length: op.fixed_length().unwrap_or(length),
            signaled: true,
            solicited: false,
            fence: false,
            lkey: 0,
            local_offset: 0,
            ud: None,
        }
    }

    /// A signaled SEND.
    pub fn send(length: u64) -> Self {
        Self::new(WrOp::Send, length)
    }

    /// A signaled RDMA WRITE.
    pub fn write(length: u64, va: u64, rkey: u32) -> Self {
        Self::new(WrOp::Write { va, rkey }, length)
    }

    /// A signaled RDMA READ.
    pub fn read(length: u64, va: u64, rkey: u32) -> Self {
        Self::new(WrOp::Read { va, rkey }, length)
    }

    /// Not signaled.
    #[must_use]
    pub fn unsignaled(mut self) -> Self {
        self.signaled = false;
        self
    }

    /// With the solicited-event flag.
    #[must_use]
    pub fn solicited(mut self) -> Self {
        self.solicited = true;
        self
    }

    /// With the fence flag.
    #[must_use]
    pub fn fenced(mut self) -> Self {
        self.fence = true;
        self
    }

    /// With a UD destination.
    #[must_use]
    pub fn to_ud(mut self, qpn: u32, qkey: u32) -> Self {
        self.ud = Some(UdDest { qpn, qkey });
        self
    }

    /// With a local buffer.
    #[must_use]
    pub fn local(mut self, lkey: u32, offset: u64) -> Self {
        self.lkey = lkey;
        self.local_offset = offset;
        self
    }
}
