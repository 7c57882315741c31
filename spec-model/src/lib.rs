//! # metaroce-spec
//!
//! `SPEC.md` (the normative text of MetaRoCE v1) and its executable model: the
//! oracle that judges what an implementation puts on the wire and reports
//! through its agent. Written for clarity, not speed; it knows no I/O.
//!
//! - [`requirements`]: the registry of SPEC.md's requirements, parsed from the
//!   document itself.
//! - [`finding`]: what a validator or model reports: a requirement ID, a
//!   severity from its keyword, and a one-line message.
//! - [`validate`]: the static per-packet validators: the sender's obligations
//!   that one packet shows.
//!
//! Code that implements a requirement cites its ID (`MR-<AREA>-<n>`) in a
//! string or comment next to the check; the traceability check
//! (`metaroce spec coverage`) counts those citations.
#![forbid(unsafe_code)]

pub mod finding;
pub mod judge;
pub mod model;
pub mod requirements;
pub mod validate;

pub use finding::Finding;
pub use requirements::{Keyword, Observation, Requirement, Severity};
pub use validate::{Context, validate_decode_error, validate_frame, validate_undecodable};

/// A conformance profile (SPEC.md §1.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Profile {
    /// RoCEv2 as deployed.
    #[default]
    Base,
    /// Multipath (negotiated per QP).
    Mp,
}
