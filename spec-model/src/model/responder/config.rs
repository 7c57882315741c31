//! The QP attributes and declared features a responder works with.

use super::memory::AccessFlags;
use crate::model::Knowledge;

/// QP attributes the responder uses (SPEC.md §6.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QpAttributes {
    /// Path MTU in payload bytes (256 … 4096); for UD, the port's PMTU.
    pub pmtu: u32,
    /// Remote access flags of the QP.
    pub access: Knowledge<AccessFlags>,
    /// Responder resources (`max_dest_rd_atomic`).
    pub max_dest_rd_atomic: Knowledge<u8>,
    /// Timer code the responder puts in RNR NAKs.
    pub min_rnr_timer: Knowledge<u8>,
    /// The peer QPN (`dest_qpn`; RC and UC).
    pub dest_qpn: Knowledge<u32>,
    /// The QP's P_Key.
    pub p_key: u16,
    /// The QP's protection domain (the model's own numbering).
    pub pd: u32,
    /// The QP's Q_Key (UD).
    pub q_key: Knowledge<u32>,
}

impl QpAttributes {
    /// SPEC.md §10 defaults with everything the model needs known: PMTU 1024,
    /// every access flag, 16 responder resources, `min_rnr_timer` 12, peer
    /// QPN 0x12, P_Key 0xFFFF, PD 1, Q_Key 0x11111111.
    pub fn defaults() -> Self {
        QpAttributes {
            pmtu: 1024,
            access: Knowledge::Known(AccessFlags::ALL),
            max_dest_rd_atomic: Knowledge::Known(16),
            min_rnr_timer: Knowledge::Known(12),
            dest_qpn: Knowledge::Known(0x12),
            p_key: 0xFFFF,
            pd: 1,
            q_key: Knowledge::Known(0x1111_1111),
        }
    }

    /// What an observer of a capture knows: the PMTU and P_Key (from the
    /// packets), and nothing else.
    pub fn unknown(pmtu: u32, p_key: u16) -> Self {
        QpAttributes {
            pmtu,
            access: Knowledge::Unknown,
            max_dest_rd_atomic: Knowledge::Unknown,
            min_rnr_timer: Knowledge::Unknown,
            dest_qpn: Knowledge::Unknown,
            p_key,
            pd: 0,
            q_key: Knowledge::Unknown,
        }
    }
}

/// The optional features the responder's capability profile declares (SPEC.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Features {
    /// `atomics`.
    pub atomics: bool,
    /// `flush`.
    pub flush: bool,
    /// `atomic_write`.
    pub atomic_write: bool,
    /// `send_with_invalidate`.
    pub send_with_invalidate: bool,
    /// `invalidate_reg_mr`: a SEND with Invalidate can invalidate a region
    /// registered with `reg_mr` (MR-RSP-10; the model's regions are all of
    /// that kind).
    pub invalidate_reg_mr: bool,
    /// `immediate`.
    pub immediate: bool,
    /// `credits`.
    pub credits: bool,
}

impl Features {
    /// Every optional responder feature declared, credits not.
    pub const ALL: Features = Features {
        atomics: true,
        flush: true,
        atomic_write: true,
        send_with_invalidate: true,
        invalidate_reg_mr: true,
        immediate: true,
        credits: false,
    };

    /// The defaults of SPEC.md §2: only `immediate`.
    pub const DEFAULT: Features = Features {
        atomics: false,
        flush: false,
        atomic_write: false,
        send_with_invalidate: false,
        invalidate_reg_mr: false,
        immediate: true,
        credits: false,
    };
}

impl Default for Features {
    fn default() -> Self {
        Features::DEFAULT
    }
}
