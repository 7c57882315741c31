//! `metaroce-ref`: command-line entry points of the MetaRoCE reference
//! transport.
//!
//! - `peer`: one endpoint of a Base RC connection on a real Ethernet
//!   interface (AF_PACKET, needs root), which runs a fixed traffic
//!   programme (SEND, WRITE, WRITE with immediate, READ) against another
//!   `peer` and verifies every byte. Used by the veth end-to-end test.
//! - `serve`: the agent (AGENT.md), driven over TCP by the conformance
//!   harness, with its data plane on an interface (`--iface`, AF_PACKET) or
//!   on the null link.
//! - `perf`: goodput of one Base RC connection (WRITE, READ or SEND, like
//!   `ib_write_bw`), or with `--blast` the raw-frame ceiling of the link.
//! - `pingpong`: the client of rdma-core's `ibv_rc_pingpong` (its TCP
//!   exchange, then SENDs both ways, echoes verified), for interoperating
//!   with another RoCEv2 implementation such as Linux soft-RoCE.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod endpoint;
mod fabric;
mod peer;
mod perf;
mod pingpong;
mod serve;

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
    /// Runs the agent (AGENT.md): JSON lines over TCP, data plane on
    /// --iface.
    Serve(serve::ServeCmd),
    /// Measures goodput of one Base RC connection (WRITE, READ, SEND), or
    /// with --blast the raw-frame ceiling of the link.
    Perf(perf::PerfArgs),
    /// Runs the client side of ibv_rc_pingpong (TCP exchange, then SENDs
    /// both ways) against an ibv_rc_pingpong server, e.g. on rdma_rxe.
    Pingpong(pingpong::PingpongArgs),
    /// Runs the fabric simulator's scenarios, Base and MP side by side.
    Fabric(fabric::FabricArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Peer(args) => peer::main(&args),
        Command::Serve(cmd) => serve::main(&cmd),
        Command::Perf(args) => perf::main(&args),
        Command::Pingpong(args) => pingpong::main(&args),
        Command::Fabric(args) => fabric::main(&args),
    }
}
