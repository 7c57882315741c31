//! # metaroce-agent: the agent protocol
//!
//! The control plane through which the conformance harness drives an
//! implementation under test (SPEC §1.6): JSON lines over TCP, version 1,
//! specified in `reference-impl/AGENT.md`. Both agents — the reference
//! transport's (`metaroce-ref`) and the libibverbs one
//! (`metaroce-agent-verbs`) — and the harness (`metaroce-conformance`) use
//! this crate, so the protocol has one home:
//!
//! - [`protocol`]: requests, results, error codes, limits, the line parser;
//! - [`encoding`]: hex, base64 and MAC text;
//! - [`profile`]: the capability profile of SPEC §2 as `hello` reports it;
//! - [`check`]: the request checks every agent makes the same way;
//! - [`qp_state`]: QP states and the transition table of SPEC §6.2 that
//!   `modify_qp` follows;
//! - [`line`]: bounded line framing;
//! - [`mp_local`]: the MP local constants of SPEC §10.3 a profile may
//!   declare, with their defaults and ranges;
//! - [`client`]: a typed client over TCP;
//! - [`rng`]: the seeded generator (SplitMix64) the reference transport and
//!   the harness share.
//!
//! No device, no transport: an agent maps these requests onto its own.
#![forbid(unsafe_code)]

pub mod check;
pub mod client;
pub mod encoding;
pub mod line;
pub mod mp_local;
pub mod profile;
pub mod protocol;
pub mod qp_state;
pub mod rng;

pub use client::{Client, ClientError};
pub use profile::CapabilityProfile;
pub use protocol::{AgentError, ErrorCode, Op, Reply, Request};
