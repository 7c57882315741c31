//! # metaroce-conformance
//!
//! The MetaRoCE conformance suite and capture tools, and the `metaroce`
//! command:
//!
//! - [`capture`]: reading and writing captures (pcap, pcapng, live);
//! - [`decode`]: the frame views of `metaroce decode`;
//! - [`check`]: the capture checker of `metaroce check` (per packet and
//!   per conversation, against the spec model's judges);
//! - [`vector`]: the vector format, its loader and its JSON Schema;
//! - [`run`]: the vector runner of `metaroce run` against an implementation
//!   under test (built in, raw socket, pcap, or an agent);
//! - [`report`]: the run's reports (terminal, JUnit, JSON, HTML, pcapng);
//! - [`interop`]: the interop matrix between two agents;
//! - [`live_fuzz`]: the live network fuzzer of `metaroce fuzz`;
//! - [`trace`]: requirement traceability;
//! - [`exit`]: the exit codes every command shares;
//! - [`cli`]: the command line.

pub mod capture;
pub mod check;
pub mod cli;
pub mod decode;
pub mod exit;
pub mod interop;
pub mod live_fuzz;
pub mod report;
pub mod run;
pub mod spec_site;
pub mod trace;
pub mod vector;
