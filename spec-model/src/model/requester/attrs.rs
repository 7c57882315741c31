//! QP attributes the requester uses (SPEC.md §6.3) and its coarse QP status.

use metaroce_codec::Psn;

pub use crate::model::qp::QpType;

/// The requester-side attributes of a QP in RTS.
///
/// Defaults follow SPEC.md §10.1: PMTU 1024, `timeout` 14, `retry_cnt` 7,
/// `rnr_retry` 7, `max_rd_atomic` 16, credits off, P_Key 0xFFFF,
/// `max_msg_size` 2^31.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequesterAttrs {
    /// Service type.
    pub qp_type: QpType,
    /// Path MTU in bytes: 256, 512, 1024, 2048 or 4096.
    pub pmtu: u32,
    /// PSN of the first request packet.
    pub sq_psn: Psn,
    /// Local ACK timeout exponent (0 disables the timer).
    pub timeout: u8,
    /// Transport retries (0–7; 7 is seven retries).
    pub retry_cnt: u8,
    /// RNR retries (0–7; 7 is unlimited).
    pub rnr_retry: u8,
    /// Outstanding RDMA-resource operations allowed.
    pub max_rd_atomic: u8,
    /// The requester honours end-to-end credits (capability `credits`).
    pub credits: bool,
    /// Peer QPN (RC and UC).
    pub dest_qpn: u32,
    /// This QP's own QPN (the DETH source QP of UD packets).
    pub own_qpn: u32,
    /// Partition key.
    pub p_key: u16,
    /// Largest message (capability `max_msg_size`).
    pub max_msg_size: u64,
    /// Every work request produces a completion, signaled or not.
    pub sq_sig_all: bool,
    /// On a gap in READ responses, re-request at once (MR-READ-8, a SHOULD)
    /// instead of waiting for the local ACK timeout.
    pub reread_on_gap: bool,
}

impl Default for RequesterAttrs {
    fn default() -> Self {
        RequesterAttrs {
            qp_type: QpType::Rc,
            pmtu: 1024,
            sq_psn: Psn::new(0),
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 16,
            credits: false,
            dest_qpn: 0x11,
            own_qpn: 0x12,
            p_key: 0xFFFF,
            max_msg_size: 1 << 31,
            sq_sig_all: false,
            reread_on_gap: true,
        }
    }
}

/// Where the send side of the QP stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum QpStatus {
    /// RTS: sends and processes responses.
    #[default]
    Rts,
    /// ERR: sends nothing, drops responses, flushes work requests.
    Error,
}
