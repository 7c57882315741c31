//! QP types, states and transitions (SPEC.md §6.2).
//!
//! The transition table is declared once, in [`TRANSITIONS`]; the behaviour of
//! each state (which packets are processed, which posts are accepted) once, in
//! [`BEHAVIOUR`]. [`on_event`] is the pure state machine built from both:
//! `(config, state, event) -> (state, result)`.

use core::fmt;

/// The transport service of a QP (SPEC.md §6.3 `qp_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum QpType {
    /// Reliable Connected.
    #[default]
    Rc,
    /// Unreliable Connected.
    Uc,
    /// Unreliable Datagram.
    Ud,
}

/// A QP state (SPEC.md §6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Reset: the state of a new QP.
    Reset,
    /// Initialised.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Send queue drain (optional, `sqd`).
    Sqd,
    /// Send queue error (UC and UD only).
    Sqe,
    /// Error.
    Err,
}

impl QpState {
    /// Every state, in the order of SPEC.md §6.2.
    pub const ALL: [QpState; 7] = [
        QpState::Reset,
        QpState::Init,
        QpState::Rtr,
        QpState::Rts,
        QpState::Sqd,
        QpState::Sqe,
        QpState::Err,
    ];

    /// The state a newly created QP is in (MR-QP-1).
    pub const CREATED: QpState = QpState::Reset; // "MR-QP-1"

    /// The name SPEC.md uses.
    pub const fn name(self) -> &'static str {
        match self {
            QpState::Reset => "RESET",
            QpState::Init => "INIT",
            QpState::Rtr => "RTR",
            QpState::Rts => "RTS",
            QpState::Sqd => "SQD",
            QpState::Sqe => "SQE",
            QpState::Err => "ERR",
        }
    }
}

impl fmt::Display for QpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of QP attributes supplied with a modify request (SPEC.md §6.3).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Attrs(u32);

impl Attrs {
    /// No attribute.
    pub const NONE: Attrs = Attrs(0);
    /// P_Key index.
    pub const P_KEY_INDEX: Attrs = Attrs(1 << 0);
    /// Port.
    pub const PORT: Attrs = Attrs(1 << 1);
    /// Access flags.
    pub const ACCESS: Attrs = Attrs(1 << 2);
    /// `dest_qpn`.
    pub const DEST_QPN: Attrs = Attrs(1 << 3);
    /// `rq_psn`.
    pub const RQ_PSN: Attrs = Attrs(1 << 4);
    /// `pmtu`.
    pub const PMTU: Attrs = Attrs(1 << 5);
    /// Path: addresses, `traffic_class`, `hop_limit`.
    pub const PATH: Attrs = Attrs(1 << 6);
    /// `max_dest_rd_atomic`.
    pub const MAX_DEST_RD_ATOMIC: Attrs = Attrs(1 << 7);
    /// `min_rnr_timer`.
    pub const MIN_RNR_TIMER: Attrs = Attrs(1 << 8);
    /// The MP parameters of §7.1 (MP QPs only).
    pub const MP_PARAMS: Attrs = Attrs(1 << 9);
    /// `sq_psn`.
    pub const SQ_PSN: Attrs = Attrs(1 << 10);
    /// `timeout`.
    pub const TIMEOUT: Attrs = Attrs(1 << 11);
    /// `retry_cnt`.
    pub const RETRY_CNT: Attrs = Attrs(1 << 12);
    /// `rnr_retry`.
    pub const RNR_RETRY: Attrs = Attrs(1 << 13);
    /// `max_rd_atomic`.
    pub const MAX_RD_ATOMIC: Attrs = Attrs(1 << 14);
    /// Every attribute.
    pub const ALL: Attrs = Attrs((1 << 15) - 1);

    const NAMES: [&'static str; 15] = [
        "p_key_index",
        "port",
        "access",
        "dest_qpn",
        "rq_psn",
        "pmtu",
        "path",
        "max_dest_rd_atomic",
        "min_rnr_timer",
        "mp_params",
        "sq_psn",
        "timeout",
        "retry_cnt",
        "rnr_retry",
        "max_rd_atomic",
    ];

    /// Both sets.
    #[must_use]
    pub const fn union(self, other: Attrs) -> Attrs {
        Attrs(self.0 | other.0)
    }

    /// The attributes of `self` that are not in `other`.
    #[must_use]
    pub const fn without(self, other: Attrs) -> Attrs {
        Attrs(self.0 & !other.0)
    }

    /// Whether every attribute of `other` is in `self`.
    pub const fn contains(self, other: Attrs) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The names of the attributes in the set, as SPEC.md §6.3 writes them.
    pub fn names(self) -> Vec<&'static str> {
        (0..Self::NAMES.len())
            .filter(|i| self.0 & (1 << i) != 0)
            .map(|i| Self::NAMES[i])
            .collect()
    }
}

impl fmt::Debug for Attrs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{}}}", self.names().join(", "))
    }
}

/// What a QP is, as far as its transitions depend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QpConfig {
    /// Service type.
    pub qp_type: QpType,
    /// The QP is an MP QP (RC only).
    pub mp: bool,
    /// The implementation declares `sqd`.
    pub sqd: bool,
}

impl QpConfig {
    /// A Base QP of `qp_type` on an implementation without `sqd`.
    pub const fn new(qp_type: QpType) -> Self {
        QpConfig {
            qp_type,
            mp: false,
            sqd: false,
        }
    }
}

/// Where a transition starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FromState {
    /// QP creation.
    Created,
    /// One state.
    State(QpState),
    /// Every state.
    Any,
}

/// What makes a transition happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// Creating the QP.
    Create,
    /// A modify request from the application (agent).
    Modify,
    /// A send work request completed in error (UC and UD: RTS → SQE).
    SendWrError,
    /// A fatal error (§6.6, §6.13).
    FatalError,
}

/// When a transition exists at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Condition {
    /// Always.
    Always,
    /// Only on an implementation that declares `sqd`.
    SqdDeclared,
    /// Only for UC and UD QPs.
    UcUdOnly,
}

/// One row of the transition table of SPEC.md §6.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// Start.
    pub from: FromState,
    /// End.
    pub to: QpState,
    /// Cause.
    pub cause: Cause,
    /// Attributes the modify request must supply (at least).
    pub needs: Attrs,
    /// When the row applies.
    pub condition: Condition,
}

const fn row(
    from: FromState,
    to: QpState,
    cause: Cause,
    needs: Attrs,
    condition: Condition,
) -> Transition {
    Transition {
        from,
        to,
        cause,
        needs,
        condition,
    }
}

use QpState::{
    Err as ERR, Init as INIT, Reset as RESET, Rtr as RTR, Rts as RTS, Sqd as SQD, Sqe as SQE,
};

/// The transition table of SPEC.md §6.2, row by row.
pub const TRANSITIONS: [Transition; 14] = [
    row(
        FromState::Created,
        RESET,
        Cause::Create,
        Attrs::NONE,
        Condition::Always,
    ),
    row(
        FromState::State(RESET),
        INIT,
        Cause::Modify,
        Attrs::P_KEY_INDEX.union(Attrs::PORT).union(Attrs::ACCESS),
        Condition::Always,
    ),
    row(
        FromState::State(INIT),
        INIT,
        Cause::Modify,
        Attrs::ACCESS,
        Condition::Always,
    ),
    row(
        FromState::State(INIT),
        RTR,
        Cause::Modify,
        Attrs::DEST_QPN
            .union(Attrs::RQ_PSN)
            .union(Attrs::PMTU)
            .union(Attrs::PATH)
            .union(Attrs::MAX_DEST_RD_ATOMIC)
            .union(Attrs::MIN_RNR_TIMER)
            .union(Attrs::MP_PARAMS),
        Condition::Always,
    ),
    row(
        FromState::State(RTR),
        RTS,
        Cause::Modify,
        Attrs::SQ_PSN
            .union(Attrs::TIMEOUT)
            .union(Attrs::RETRY_CNT)
            .union(Attrs::RNR_RETRY)
            .union(Attrs::MAX_RD_ATOMIC),
        Condition::Always,
    ),
    row(
        FromState::State(RTS),
        RTS,
        Cause::Modify,
        Attrs::TIMEOUT
            .union(Attrs::RETRY_CNT)
            .union(Attrs::RNR_RETRY)
            .union(Attrs::MIN_RNR_TIMER)
            .union(Attrs::ACCESS),
        Condition::Always,
    ),
    row(
        FromState::State(RTS),
        SQD,
        Cause::Modify,
        Attrs::NONE,
        Condition::SqdDeclared,
    ),
    row(
        FromState::State(SQD),
        SQD,
        Cause::Modify,
        Attrs::NONE,
        Condition::SqdDeclared,
    ),
    row(
        FromState::State(SQD),
        RTS,
        Cause::Modify,
        Attrs::NONE,
        Condition::SqdDeclared,
    ),
    row(
        FromState::State(RTS),
        SQE,
        Cause::SendWrError,
        Attrs::NONE,
        Condition::UcUdOnly,
    ),
    row(
        FromState::State(SQE),
        RTS,
        Cause::Modify,
        Attrs::NONE,
        Condition::UcUdOnly,
    ),
    row(
        FromState::Any,
        RESET,
        Cause::Modify,
        Attrs::NONE,
        Condition::Always,
    ),
    row(
        FromState::Any,
        ERR,
        Cause::Modify,
        Attrs::NONE,
        Condition::Always,
    ),
    row(
        FromState::Any,
        ERR,
        Cause::FatalError,
        Attrs::NONE,
        Condition::Always,
    ),
];

/// Why a modify request is rejected (MR-QP-2). The QP keeps its state and attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The transition is not in the table of §6.2.
    NoSuchTransition {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
    },
    /// The transition exists only with a feature or QP type this QP lacks.
    NotApplicable {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
        /// The condition that fails.
        condition: Condition,
    },
    /// Attributes the table requires are missing.
    MissingAttributes {
        /// The missing attributes.
        missing: Attrs,
    },
}

impl Condition {
    const fn holds(self, config: &QpConfig) -> bool {
        match self {
            Condition::Always => true,
            Condition::SqdDeclared => config.sqd,
            Condition::UcUdOnly => matches!(config.qp_type, QpType::Uc | QpType::Ud),
        }
    }
}

impl FromState {
    const fn matches(self, state: QpState) -> bool {
        match self {
            FromState::Created => false,
            FromState::State(s) => s as u8 == state as u8,
            FromState::Any => true,
        }
    }
}

/// The attributes a row requires of this QP (§6.2, after verbs'
/// `qp_state_table`): MP parameters only for MP QPs; UC needs none of the
/// RDMA-resource, RNR, timeout and retry attributes; UD no access flags, no
/// path attributes for INIT → RTR and only `sq_psn` for RTR → RTS.
fn needed(t: &Transition, config: &QpConfig) -> Attrs {
    let mut needs = t.needs;
    if !config.mp {
        needs = needs.without(Attrs::MP_PARAMS);
    }
    let rc_only = Attrs::MAX_DEST_RD_ATOMIC
        .union(Attrs::MIN_RNR_TIMER)
        .union(Attrs::TIMEOUT)
        .union(Attrs::RETRY_CNT)
        .union(Attrs::RNR_RETRY)
        .union(Attrs::MAX_RD_ATOMIC);
    match config.qp_type {
        QpType::Rc => {}
        QpType::Uc => needs = needs.without(rc_only),
        QpType::Ud => {
            needs = needs.without(
                rc_only
                    .union(Attrs::DEST_QPN)
                    .union(Attrs::RQ_PSN)
                    .union(Attrs::PMTU)
                    .union(Attrs::PATH)
                    .union(Attrs::ACCESS),
            );
        }
    }
    needs
}

/// The row of [`TRANSITIONS`] for `cause` from `from` to `to`, if any.
fn find(from: QpState, to: QpState, cause: Cause) -> Option<&'static Transition> {
    TRANSITIONS
        .iter()
        .find(|t| t.cause == cause && t.to == to && t.from.matches(from))
}

/// A modify request: the new state, or why it is rejected (MR-QP-2).
///
/// `provided` are the attributes the request supplies. A rejected request
/// leaves the QP as it was; the caller keeps its state.
pub fn modify(
    config: &QpConfig,
    from: QpState,
    to: QpState,
    provided: Attrs,
) -> Result<QpState, Rejection> {
    let Some(t) = find(from, to, Cause::Modify) else {
        return Err(Rejection::NoSuchTransition { from, to }); // "MR-QP-2"
    };
    if !t.condition.holds(config) {
        return Err(Rejection::NotApplicable {
            from,
            to,
            condition: t.condition,
        }); // "MR-QP-2"
    }
    let missing = needed(t, config).without(provided);
    if !missing.is_empty() {
        return Err(Rejection::MissingAttributes { missing }); // "MR-QP-2"
    }
    Ok(to)
}

/// An automatic transition (`cause` is [`Cause::SendWrError`] or
/// [`Cause::FatalError`]): the new state, or `None` if the table has none.
pub fn automatic(config: &QpConfig, from: QpState, cause: Cause) -> Option<QpState> {
    QpState::ALL.into_iter().find(|&to| {
        find(from, to, cause).is_some_and(|t| t.condition.holds(config) && cause != Cause::Modify)
    })
}

/// What a state does with arriving packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packets {
    /// Processed.
    Processed,
    /// Dropped (with nothing sent).
    Dropped,
    /// Does not arise (SQE exists only on UC and UD QPs, which receive no responses).
    NotApplicable,
}

/// What a state sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sends {
    /// Nothing.
    Nothing,
    /// Responses only.
    ResponsesOnly,
    /// Everything.
    All,
    /// Responses, and packets of messages already started.
    ResponsesAndStarted,
    /// Nothing from the send queue.
    NothingFromSendQueue,
}

/// What a state does with a posted work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Posts {
    /// Accepted.
    Accepted,
    /// Rejected by the post call.
    Rejected,
    /// Accepted and completed with WR_FLUSH_ERR (MR-QP-6).
    Flushed,
    /// Accepted but not started until the QP returns to RTS (SQD, MR-QP-10).
    AcceptedNotStarted,
}

/// One row of the behaviour table of SPEC.md §6.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateBehaviour {
    /// The state.
    pub state: QpState,
    /// Received request packets.
    pub requests: Packets,
    /// Received response packets.
    pub responses: Packets,
    /// Packets sent.
    pub sends: Sends,
    /// Post receive.
    pub post_recv: Posts,
    /// Post send.
    pub post_send: Posts,
    /// The requirements that demand this row.
    pub reqs: &'static [&'static str],
}

/// The behaviour table of SPEC.md §6.2, in the order of [`QpState::ALL`].
pub const BEHAVIOUR: [StateBehaviour; 7] = [
    StateBehaviour {
        state: RESET,
        requests: Packets::Dropped,
        responses: Packets::Dropped,
        sends: Sends::Nothing,
        post_recv: Posts::Rejected,
        post_send: Posts::Rejected,
        reqs: &["MR-QP-3"],
    },
    StateBehaviour {
        state: INIT,
        requests: Packets::Dropped,
        responses: Packets::Dropped,
        sends: Sends::Nothing,
        post_recv: Posts::Accepted,
        post_send: Posts::Rejected,
        reqs: &["MR-QP-3"],
    },
    StateBehaviour {
        state: RTR,
        requests: Packets::Processed,
        responses: Packets::Dropped,
        sends: Sends::ResponsesOnly,
        post_recv: Posts::Accepted,
        post_send: Posts::Rejected,
        reqs: &["MR-QP-4"],
    },
    StateBehaviour {
        state: RTS,
        requests: Packets::Processed,
        responses: Packets::Processed,
        sends: Sends::All,
        post_recv: Posts::Accepted,
        post_send: Posts::Accepted,
        reqs: &[],
    },
    StateBehaviour {
        state: SQD,
        requests: Packets::Processed,
        responses: Packets::Processed,
        sends: Sends::ResponsesAndStarted,
        post_recv: Posts::Accepted,
        post_send: Posts::AcceptedNotStarted,
        reqs: &["MR-QP-10"],
    },
    StateBehaviour {
        state: SQE,
        requests: Packets::Processed,
        responses: Packets::NotApplicable,
        sends: Sends::NothingFromSendQueue,
        post_recv: Posts::Accepted,
        post_send: Posts::Flushed,
        reqs: &[],
    },
    StateBehaviour {
        state: ERR,
        requests: Packets::Dropped,
        responses: Packets::Dropped,
        sends: Sends::Nothing,
        post_recv: Posts::Flushed,
        post_send: Posts::Flushed,
        reqs: &["MR-QP-5", "MR-QP-6"],
    },
];

/// The behaviour of `state` (SPEC.md §6.2, MR-QP-3 … MR-QP-6).
pub fn behaviour(state: QpState) -> &'static StateBehaviour {
    // BEHAVIOUR is in QpState::ALL order, and `state as usize` is that index.
    &BEHAVIOUR[state as usize]
}

/// An event that reaches a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpEvent {
    /// A modify request to `to`, supplying `provided`.
    Modify {
        /// Requested state.
        to: QpState,
        /// Attributes supplied.
        provided: Attrs,
    },
    /// A request packet arrives.
    Request,
    /// A response packet arrives.
    Response,
    /// The application posts a send work request.
    PostSend,
    /// The application posts a receive work request.
    PostRecv,
    /// A send work request completes in error.
    SendWrError,
    /// A fatal error.
    FatalError,
}

/// What an event did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpEventResult {
    /// A modify request was accepted, or an automatic transition happened.
    Moved,
    /// A modify request was rejected (MR-QP-2).
    Rejected(Rejection),
    /// An automatic cause that has no transition from this state.
    NoTransition,
    /// What the state does with the packet.
    Packet(Packets),
    /// What the state does with the post.
    Post(Posts),
}

/// The QP state machine: `(state, event) -> (state, result)`.
pub fn on_event(config: &QpConfig, state: QpState, event: QpEvent) -> (QpState, QpEventResult) {
    let b = behaviour(state);
    match event {
        QpEvent::Modify { to, provided } => match modify(config, state, to, provided) {
            Ok(next) => (next, QpEventResult::Moved),
            Err(why) => (state, QpEventResult::Rejected(why)),
        },
        QpEvent::Request => (state, QpEventResult::Packet(b.requests)),
        QpEvent::Response => (state, QpEventResult::Packet(b.responses)),
        QpEvent::PostSend => (state, QpEventResult::Post(b.post_send)),
        QpEvent::PostRecv => (state, QpEventResult::Post(b.post_recv)),
        QpEvent::SendWrError => match automatic(config, state, Cause::SendWrError) {
            Some(next) => (next, QpEventResult::Moved),
            None => (state, QpEventResult::NoTransition),
        },
        QpEvent::FatalError => match automatic(config, state, Cause::FatalError) {
            Some(next) => (next, QpEventResult::Moved),
            None => (state, QpEventResult::NoTransition),
        },
    }
}

#[cfg(test)]
mod tests;
