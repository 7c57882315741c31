//! # metaroce-ref: the MetaRoCE reference transport
//!
//! A sans-IO implementation of the Base profile of `spec-model/SPEC.md`
//! (RC with go-back-N, and UD) behind a verbs-like API, plus a deterministic
//! simulator ([`sim`]) that runs devices over impaired links on virtual time.
//!
//! ## Architecture
//!
//! - [`Device`] is one endpoint: addresses, protection domains, memory
//!   regions (byte buffers it owns, [`mr`]), completion queues ([`cq`]) and
//!   QPs. Verbs calls (`create_qp`, `modify_qp`, `post_send`, `post_recv`,
//!   `poll_cq`, `read_mr`/`write_mr`) act immediately.
//! - Each QP holds its configuration, its state (the one transition table
//!   of [`qp::state`]) and a transport strategy: Base RC (requester +
//!   responder, `rc/`), MP (SPEC §7, `mp/`, chosen per QP by
//!   [`Device::modify_qp_mp`]) or UD.
//! - Every frame is parsed and emitted with `metaroce-codec`; the receive
//!   path applies the checks of SPEC §9.2 in table order before any QP sees
//!   a packet.
//! - Randomness (QPNs, keys, PSNs on request) comes from a ChaCha20 stream
//!   seeded by the caller. There is no clock, socket or thread inside.
//!
//! ## Polling order (contract)
//!
//! The core is driven from outside, like quinn-proto:
//!
//! 1. `handle_frame(now, bytes)` for every frame received, and
//!    `handle_timeout(now)` once `now` reaches `poll_timeout()`;
//! 2. verbs calls (`post_send`, `post_recv`, ...) at any time; they act at
//!    the latest `now` the device was given;
//! 3. then drain `poll_transmit()` until it returns `None` and send each
//!    frame; then read `poll_timeout()` again, because every call above may
//!    move it; finally `poll_cq`.
//!
//! Time is a `u64` of nanoseconds and must not go backwards (a smaller value
//! is treated as the latest one seen). Nothing panics on any input from the
//! wire or the API: bad input becomes a drop, a NAK, an error completion or a
//! [`VerbsError`].
//!
//! ## Feature `zoo`
//!
//! Off by default. It adds `zoo::Mutant` and the field
//! `DeviceConfig::mutant`: a device built with a mutant is broken in exactly
//! one way, for testing the conformance suite and the fuzzers (see
//! `ZOO.md`). Without the feature no mutant code is compiled.
#![forbid(unsafe_code)]

#[macro_use]
mod zoo_hook;

pub mod agent;
mod counters;
pub mod cq;
mod device;
pub mod drivers;
mod error;
mod mp;
pub mod mr;
pub mod qp;
mod qp_config;
mod rc;
mod rng;
mod rx;
pub mod sim;
pub mod timing;
mod ud;
mod wire;
pub mod wr;
#[cfg(feature = "zoo")]
pub mod zoo;

pub use counters::Counters;
pub use cq::{CqHandle, WcOpcode, WcStatus, WorkCompletion};
pub use device::{Device, DeviceConfig};
pub use error::VerbsError;
pub use mp::config::{MpAttrs, MpEntropy, MpTuning};
pub use mr::{Access, MrInfo, PdHandle};
pub use qp::{AddressVector, QpAttrs, QpInfo, QpInit, QpState, QpType, QueueDepths};
pub use ud::UD_HEADER_SPACE;
pub use wr::{RecvWr, RemoteAddr, SendWr, Sge, UdDest, WrOp};
