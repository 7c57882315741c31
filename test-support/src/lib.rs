//! # metaroce-test-support: helpers the crates' tests share
//!
//! A dev-dependency only, never a dependency of a library or binary:
//!
//! - [`netns`]: the SKIP/CI rule of the live tests, shell commands, and
//!   [`netns::Lab`], two network namespaces joined by a veth pair, deleted
//!   on drop (used by `reference-impl/tests/veth_e2e.rs`,
//!   `reference-impl/tests/agent_veth_e2e.rs` and, through
//!   `conformance/tests/common/twohosts.rs`, the conformance live tests).
#![forbid(unsafe_code)]

pub mod netns;
