//! The executable model: QP states and the requester and responder state
//! machines, as pure functions of (state, event).

pub mod congestion;
pub mod invariants;
pub(crate) mod kept_ext;
pub mod knowledge;
pub mod mp;
pub mod negotiation;
pub mod outcome;
pub mod qp;
pub mod receiver;
pub mod requester;
pub mod responder;
pub mod unpredictability;

pub use knowledge::Knowledge;
pub use outcome::{
    Cited, CompletionSpec, Effect, Field, MpethSpec, OutOfLine, Outcomes, PacketSpec, SackethSpec,
    SyndromeSpec, Unconstrained, WcStatus,
};
