//! `metaroce-ref`: command-line entry points of the MetaRoCE reference
//! transport.
//!
//! - `peer`: one endpoint of a Base RC connection on a real Ethernet
//!   interface (AF_PACKET, needs root), which runs a fixed traffic
//!   programme (SEND, WRITE, WRITE with immediate, READ) against another
//!   `peer` and verifies every byte. Used by the veth end-to-end test.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod peer;

/// The MetaRoCE reference transport.
#[derive(Debug, Parser)]
#[command(name = "metaroce-ref", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs one endpoint of a verified Base RC exchange on an interface.
    Peer(peer::PeerArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Peer(args) => peer::main(&args),
    }
}
