//! The agent: the control plane through which the conformance harness
//! drives an implementation under test (SPEC §1.6). The
//! protocol — JSON lines over TCP, version 1 — is specified in
//! `reference-impl/AGENT.md` so that a NIC vendor can implement it over
//! libibverbs; this module is the reference transport's implementation.
//!
//! - [`protocol`], [`encoding`]: requests, results, error codes, the line
//!   parser, from the protocol's own crate `metaroce-agent`;
//! - [`profile`]: the reference transport's capability profile;
//! - [`dispatch`]: [`Agent`], a pure request → reply function over a
//!   [`crate::Device`] (no socket, no clock); `mp`: the MP attributes of
//!   `modify_qp` (AGENT.md §6.9);
//! - [`dataplane`]: the [`DataPlane`] trait frame drivers implement so the
//!   server keeps frames moving while it serves requests, the [`Clock`],
//!   and the in-memory [`ChannelLink`] and [`NullLink`];
//! - [`server`]: the TCP server (std threads);
//! - [`cli`]: the `serve` command.

pub mod cli;
pub mod dataplane;
pub mod dispatch;
mod mp;
pub mod profile;
pub mod server;

pub use dataplane::{ChannelLink, Clock, DataPlane, NullLink};
pub use dispatch::{Action, Agent, AgentConfig, PendingPoll};
pub use metaroce_agent::{CapabilityProfile, encoding, protocol};
pub use profile::{MpLocal, reference_profile, reference_profile_with};
pub use protocol::{AgentError, ErrorCode, Reply, Request};
pub use server::{Server, ServerConfig, ServerHandle};
