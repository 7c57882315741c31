//! `metaroce decode` and the decoders against their oracles, in one test
//! binary (one link of the crate): the command (`decode_cli`), tshark
//! (`oracle_tshark`, `oracle_tshark_cm`), scapy on the encapsulations
//! (`oracle_encap`) and the Wireshark dissector (`wireshark_dissector`).
//! Each module was a test binary of its own; insta names a snapshot
//! `decode__MODULE__NAME.snap` (`snapshots/`).

#[path = "../common/mod.rs"]
mod common;

mod decode_cli;
mod oracle_encap;
mod oracle_tshark;
mod oracle_tshark_cm;
mod wireshark_dissector;
