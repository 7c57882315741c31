//! # metaroce-conformance
//!
//! The MetaRoCE conformance suite and capture tools, and the `metaroce`
//! command. Today it holds capture reading and writing ([`capture`]), the
//! frame views of `metaroce decode` ([`decode`]), the per-packet capture
//! checker of `metaroce check` ([`check`]), requirement traceability
//! ([`trace`]) and the command line ([`cli`]); the vector runner,
//! conversation checker and network fuzzer follow.

pub mod capture;
pub mod check;
pub mod cli;
pub mod decode;
pub mod exit;
pub mod fuzz;
pub mod interop;
pub mod report;
pub mod run;
pub mod spec_site;
pub mod trace;
pub mod vector;
