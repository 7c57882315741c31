//! QP states and the one transition table of SPEC §6.2 (MR-QP-2).

/// QP states (SPEC §6.2). SQD is not supported (`sqd: false`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QpState {
    /// Created; drops everything.
    Reset,
    /// Initialised; accepts receives, drops packets.
    Init,
    /// Ready to receive: responder only.
    Rtr,
    /// Ready to send.
    Rts,
    /// Send queue drain (not supported: `sqd` is false).
    Sqd,
    /// Send queue error (UD only here).
    Sqe,
    /// Error: flushes work requests, drops packets.
    Err,
}

impl QpState {
    /// Every state, for exhaustive tests.
    pub const ALL: [QpState; 7] = [
        QpState::Reset,
        QpState::Init,
        QpState::Rtr,
        QpState::Rts,
        QpState::Sqd,
        QpState::Sqe,
        QpState::Err,
    ];

    /// Request packets are processed (SPEC §6.2 behaviour table).
    pub const fn accepts_requests(self) -> bool {
        matches!(self, QpState::Rtr | QpState::Rts | QpState::Sqe)
    }

    /// Response packets are processed.
    pub const fn accepts_responses(self) -> bool {
        matches!(self, QpState::Rts)
    }

    /// `post_recv` is accepted.
    pub const fn accepts_recv(self) -> bool {
        !matches!(self, QpState::Reset)
    }

    /// `post_send` is accepted.
    pub const fn accepts_send(self) -> bool {
        matches!(self, QpState::Rts | QpState::Sqe | QpState::Err)
    }
}

/// QP service type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected (Base RC; MP will be a transport of an RC QP).
    Rc,
    /// Unreliable datagram.
    Ud,
}

/// Attribute bits, one per attribute of SPEC §6.3 that `modify_qp` takes.
pub mod attr {
    /// `access`.
    pub const ACCESS: u32 = 1 << 0;
    /// `p_key`.
    pub const PKEY: u32 = 1 << 1;
    /// `q_key` (UD).
    pub const QKEY: u32 = 1 << 2;
    /// `dest_qpn`.
    pub const DEST_QPN: u32 = 1 << 3;
    /// `rq_psn`.
    pub const RQ_PSN: u32 = 1 << 4;
    /// `pmtu`.
    pub const PMTU: u32 = 1 << 5;
    /// The path: addresses, `traffic_class`, `hop_limit`.
    pub const PATH: u32 = 1 << 6;
    /// `max_dest_rd_atomic`.
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 7;
    /// `min_rnr_timer`.
    pub const MIN_RNR_TIMER: u32 = 1 << 8;
    /// `sq_psn`.
    pub const SQ_PSN: u32 = 1 << 9;
    /// `timeout`.
    pub const TIMEOUT: u32 = 1 << 10;
    /// `retry_cnt`.
    pub const RETRY_CNT: u32 = 1 << 11;
    /// `rnr_retry`.
    pub const RNR_RETRY: u32 = 1 << 12;
    /// `max_rd_atomic`.
    pub const MAX_RD_ATOMIC: u32 = 1 << 13;

    /// Names, by bit position, for error messages.
    pub const NAMES: [&str; 14] = [
        "access",
        "p_key",
        "q_key",
        "dest_qpn",
        "rq_psn",
        "pmtu",
        "path",
        "max_dest_rd_atomic",
        "min_rnr_timer",
        "sq_psn",
        "timeout",
        "retry_cnt",
        "rnr_retry",
        "max_rd_atomic",
    ];

    /// The name of the lowest bit set in `mask`.
    pub fn first_name(mask: u32) -> &'static str {
        NAMES
            .get(mask.trailing_zeros() as usize)
            .copied()
            .unwrap_or("?")
    }
}

use attr::*;

/// `from` of a row: one state or any state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FromState {
    /// Exactly this state.
    State(QpState),
    /// Every state.
    Any,
}

/// One row of the transition table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// Source state.
    pub from: FromState,
    /// Target state.
    pub to: QpState,
    /// The row applies to RC QPs.
    pub rc: bool,
    /// The row applies to UD QPs.
    pub ud: bool,
    /// Attributes that must be given.
    pub required: u32,
    /// Attributes that may be given.
    pub optional: u32,
}

const fn row(
    from: FromState,
    to: QpState,
    rc: bool,
    ud: bool,
    required: u32,
    optional: u32,
) -> Transition {
    Transition {
        from,
        to,
        rc,
        ud,
        required,
        optional,
    }
}

use FromState::{Any, State};
use QpState::*;

/// The transition table of SPEC §6.2, per QP type. Modify calls not listed
/// are rejected (MR-QP-2). RTS→SQD and SQD rows are absent: `sqd` is false.
/// RTS→SQE is automatic (UD), so only SQE→RTS is a modify row.
pub const TABLE: &[Transition] = &[
    row(State(Reset), Init, true, false, ACCESS, PKEY),
    row(State(Reset), Init, false, true, QKEY, PKEY),
    row(State(Init), Init, true, false, 0, ACCESS | PKEY),
    row(State(Init), Init, false, true, 0, QKEY | PKEY),
    row(
        State(Init),
        Rtr,
        true,
        false,
        DEST_QPN | RQ_PSN | PMTU | PATH | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER,
        ACCESS | PKEY,
    ),
    row(State(Init), Rtr, false, true, 0, QKEY | PKEY),
    row(
        State(Rtr),
        Rts,
        true,
        false,
        SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_RD_ATOMIC,
        ACCESS | MIN_RNR_TIMER,
    ),
    row(State(Rtr), Rts, false, true, SQ_PSN, QKEY),
    row(
        State(Rts),
        Rts,
        true,
        false,
        0,
        TIMEOUT | RETRY_CNT | RNR_RETRY | MIN_RNR_TIMER | ACCESS,
    ),
    row(State(Rts), Rts, false, true, 0, QKEY),
    row(State(Sqe), Rts, false, true, 0, QKEY),
    row(Any, Reset, true, true, 0, 0),
    row(Any, Err, true, true, 0, 0),
];

/// The row for a modify from `from` to `to` on a QP of type `ty`, if any.
pub fn lookup(ty: QpType, from: QpState, to: QpState) -> Option<&'static Transition> {
    TABLE.iter().find(|t| {
        t.to == to
            && (t.from == Any || t.from == State(from))
            && match ty {
                QpType::Rc => t.rc,
                QpType::Ud => t.ud,
            }
    })
}
