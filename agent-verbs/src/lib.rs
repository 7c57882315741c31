//! The MetaRoCE agent protocol (reference-impl/AGENT.md) over libibverbs.
//!
//! - [`rules`]: protocol ↔ verbs numbers and the SPEC §6.2 check (pure);
//! - [`sysfs`]: GID index, netdev, MAC, P_Key table, hw counters;
//! - [`server`]: TCP, bounded lines, replies in order, waiting polls;
//! - `ffi` and `agent` (feature `verbs`): the C shim's safe owners (the
//!   crate's only unsafe code) and the request → verbs mapping.

#[cfg(feature = "verbs")]
pub mod agent;
#[cfg(feature = "verbs")]
pub mod ffi;
pub mod rules;
pub mod server;
pub mod sysfs;
