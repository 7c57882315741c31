//! Base congestion notification (SPEC.md §6.17) and reaction (§6.18).
//!
//! - [`np`]: the notification point, which turns CE-marked packets into CNPs.
//! - [`dcqcn`]: the reaction point of one QP, which cuts and raises its rate.

pub mod dcqcn;
pub mod np;

pub use dcqcn::{DcqcnParams, ReactionPoint, RpChange, RpEvent};
pub use np::{CnpSpec, Marked, NotificationPoint, NpDecision, NpParams, PacingScope, ScopeKey};

#[cfg(test)]
mod tests;
