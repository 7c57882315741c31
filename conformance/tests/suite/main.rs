//! The conformance suite and the tool around it, in one test binary (one
//! link of the crate): the runner against the built-in transport
//! (`runner`), the vector format (`vectors_format`), the bug zoo (`zoo`),
//! traceability (`traceability`), the spec site (`spec_site`), the binary as
//! installed (`install_cli`) and the interop harness in process (`interop`).
//! Each module was a test binary of its own.

mod install_cli;
mod interop;
mod profile_timers;
mod runner;
mod spec_site;
mod traceability;
mod vectors_format;
mod zoo;
