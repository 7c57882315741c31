//! Completion queues and work completions (SPEC §6.13 status values).

use std::collections::VecDeque;

/// A completion queue handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CqHandle(pub u32);

/// Completion status, numbered as the verbs API (SPEC §6.13).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcStatus {
    /// The work request completed.
    Success = 0,
    /// Message too long (`max_msg_size`, UD PMTU or UD receive buffer).
    LocLenErr = 1,
    /// An operation the QP cannot perform.
    LocQpOpErr = 2,
    /// Local key or range fault.
    LocProtErr = 4,
    /// Flushed because the QP is in ERR.
    WrFlushErr = 5,
    /// A response that does not fit the outstanding request.
    BadRespErr = 7,
    /// NAK 0x61 received.
    RemInvReqErr = 9,
    /// NAK 0x62 received.
    RemAccessErr = 10,
    /// NAK 0x63 or NAK codes 4–31 received.
    RemOpErr = 11,
    /// Transport retries exhausted.
    RetryExcErr = 12,
    /// RNR retries exhausted.
    RnrRetryExcErr = 13,
    /// Device-level failure.
    FatalErr = 19,
    /// Any other failure.
    GeneralErr = 21,
}

impl WcStatus {
    /// The numeric value of SPEC §6.13.
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// The status a requester completes with on a NAK with `code` (the
    /// syndrome's low five bits): 1 invalid request, 2 remote access error,
    /// any other remote operational error (RC MR-NAK-6, MP MR-MPP-16).
    pub(crate) const fn for_nak_code(code: u8) -> WcStatus {
        match code {
            1 => WcStatus::RemInvReqErr,
            2 => WcStatus::RemAccessErr,
            _ => WcStatus::RemOpErr,
        }
    }
}

/// What the completed work request was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    /// SEND (any variant).
    Send,
    /// RDMA WRITE (with or without immediate).
    RdmaWrite,
    /// RDMA READ.
    RdmaRead,
    /// Compare-and-swap.
    CompareSwap,
    /// Fetch-and-add.
    FetchAdd,
    /// A receive consumed by a SEND.
    Recv,
    /// A receive consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm,
}

/// One completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WorkCompletion {
    /// The work request's identifier.
    pub wr_id: u64,
    /// Status (SPEC §6.13).
    pub status: WcStatus,
    /// Operation.
    pub opcode: WcOpcode,
    /// QP the work request was posted on.
    pub qpn: u32,
    /// Bytes received (receives) or transferred.
    pub byte_len: u32,
    /// Immediate data, in the byte order received (MR-EXT-4).
    pub imm: Option<u32>,
    /// R_Key invalidated by a SEND with Invalidate (MR-RSP-10).
    pub invalidated_rkey: Option<u32>,
    /// Source QP of a UD receive (MR-UD-6).
    pub src_qp: Option<u32>,
}

/// A FIFO of completions.
#[derive(Debug, Default)]
pub(crate) struct CompletionQueue {
    entries: VecDeque<WorkCompletion>,
}

/// All completion queues of a device.
#[derive(Debug, Default)]
pub(crate) struct CqTable {
    cqs: Vec<CompletionQueue>,
}

impl CqTable {
    pub(crate) fn create(&mut self) -> CqHandle {
        self.cqs.push(CompletionQueue::default());
        CqHandle((self.cqs.len() - 1) as u32)
    }

    pub(crate) fn exists(&self, cq: CqHandle) -> bool {
        (cq.0 as usize) < self.cqs.len()
    }

    pub(crate) fn push(&mut self, cq: CqHandle, wc: WorkCompletion) {
        if let Some(q) = self.cqs.get_mut(cq.0 as usize) {
            q.entries.push_back(wc);
        }
    }

    pub(crate) fn poll(&mut self, cq: CqHandle, max: usize) -> Option<Vec<WorkCompletion>> {
        let q = self.cqs.get_mut(cq.0 as usize)?;
        let n = max.min(q.entries.len());
        Some(q.entries.drain(..n).collect())
    }
}
