//! Reports of a suite run: a terminal summary, JUnit XML,
//! JSON with a versioned schema, a self-contained HTML certification
//! report, and a pcapng of every test's traffic with per-packet comments.

pub mod digest;
pub mod html;
pub mod json;
pub mod junit;
pub mod pcapng;
pub mod terminal;

pub use digest::Digests;
