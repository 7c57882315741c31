//! Errors returned by the verbs API.
//!
//! Wire input never produces these: bad packets are dropped, NAKed or turn
//! into completion statuses as SPEC §9.2 prescribes. These are the
//! synchronous rejections of API calls (MR-ROB-8, MR-QP-2, MR-PICS-4).

use crate::qp::QpState;
use core::fmt;

/// Why a verbs call was rejected. The device is unchanged after a rejection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerbsError {
    /// No QP with this number.
    UnknownQp(u32),
    /// No CQ with this handle.
    UnknownCq(u32),
    /// No protection domain with this handle.
    UnknownPd(u32),
    /// No memory region with this key.
    UnknownKey(u32),
    /// The transition is not in the table of SPEC §6.2 for this QP type.
    InvalidTransition {
        /// State the QP is in.
        from: QpState,
        /// State asked for.
        to: QpState,
    },
    /// An attribute the transition requires is missing (MR-QP-2).
    MissingAttribute(&'static str),
    /// An attribute the transition does not accept was given (MR-PICS-4).
    UnexpectedAttribute(&'static str),
    /// An attribute value is outside the range of SPEC §10 (MR-PICS-4).
    OutOfRange(&'static str),
    /// The QP state does not accept this call (SPEC §6.2 behaviour table).
    WrongState(QpState),
    /// The work request does not fit the QP type (e.g. RDMA READ on UD).
    UnsupportedOperation(&'static str),
    /// A UD send without a destination, or an RC send with one.
    BadDestination,
    /// A byte range outside the memory region.
    OutOfBounds {
        /// First address asked for.
        addr: u64,
        /// Length asked for.
        len: u64,
    },
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerbsError::UnknownQp(q) => write!(f, "no QP {q:#x}"),
            VerbsError::UnknownCq(c) => write!(f, "no CQ {c}"),
            VerbsError::UnknownPd(p) => write!(f, "no protection domain {p}"),
            VerbsError::UnknownKey(k) => write!(f, "no memory region with key {k:#010x}"),
            VerbsError::InvalidTransition { from, to } => {
                write!(f, "transition {from:?} -> {to:?} is not allowed")
            }
            VerbsError::MissingAttribute(a) => write!(f, "attribute {a} is required"),
            VerbsError::UnexpectedAttribute(a) => write!(f, "attribute {a} is not accepted here"),
            VerbsError::OutOfRange(a) => write!(f, "attribute {a} is out of range"),
            VerbsError::WrongState(s) => write!(f, "the QP state {s:?} does not accept this"),
            VerbsError::UnsupportedOperation(o) => write!(f, "unsupported operation: {o}"),
            VerbsError::BadDestination => write!(f, "destination does not fit the QP type"),
            VerbsError::OutOfBounds { addr, len } => {
                write!(f, "range {addr:#x}+{len} is outside the region")
            }
        }
    }
}

impl std::error::Error for VerbsError {}
