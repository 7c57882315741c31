//! The executable model: QP states and the requester and responder state
//! machines, as pure functions of (state, event).

pub mod outcome;
pub mod requester;

pub use outcome::{
    Cited, CompletionSpec, Effect, Field, Outcomes, PacketSpec, SyndromeSpec, WcStatus,
};
