//! # metaroce-conformance
//!
//! The MetaRoCE conformance suite and capture tools, and the `metaroce`
//! command. Today it holds capture reading and writing ([`capture`]), the
//! frame views of `metaroce decode` ([`decode`]), requirement
//! traceability ([`trace`]) and the command line ([`cli`]); the vector runner, capture checker and network fuzzer follow.

pub mod capture;
pub mod cli;
pub mod decode;
pub mod exit;
pub mod trace;
