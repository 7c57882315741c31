//! `serve`: running the agent. Kept free of any argument library: the
//! `metaroce-ref serve` subcommand parses its command line (clap) into a
//! [`ServeArgs`] and calls [`serve`], which opens the data plane the
//! arguments name — the raw socket of `--iface` (feature `raw`), else the
//! null link — and runs the server. A program with its own data-plane
//! driver calls [`serve_with`].

use super::dataplane::{DataPlane, NullLink};
use super::dispatch::{Agent, AgentConfig};
use super::profile::MpLocal;
use super::server::{Server, ServerConfig};
use crate::DeviceConfig;
use core::net::Ipv4Addr;
use std::io;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Default listening address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7471";
/// Default data-plane MAC when no interface gives one.
pub const DEFAULT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
/// Default data-plane IPv4.
pub const DEFAULT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// Default pump slice.
pub const DEFAULT_SLICE: Duration = Duration::from_millis(1);

/// What `serve` runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeArgs {
    /// Listening address of the control plane (JSON lines over TCP).
    pub listen: String,
    /// Interface of the data plane (an AF_PACKET socket, feature `raw`);
    /// `None`: the null link (frames sent are discarded).
    pub iface: Option<String>,
    /// Data-plane MAC; `None`: the interface's MAC, or [`DEFAULT_MAC`]
    /// without an interface.
    pub mac: Option<[u8; 6]>,
    /// Data-plane IPv4 (the device's; it need not be configured on the
    /// interface, and should not be: the kernel would answer RoCE frames
    /// with ICMP port unreachable).
    pub ip: Ipv4Addr,
    /// Seed; `None` reads 32 bytes from `/dev/urandom`.
    pub seed: Option<[u8; 32]>,
    /// Pump slice: the longest data-plane pump between two looks at the
    /// requests.
    pub slice: Duration,
    /// The MP local constants the MP QPs use and `hello` declares
    /// (`--mp-timers`; default the §10.3 defaults).
    pub mp_local: MpLocal,
    /// The bug-zoo mutant the device runs (feature `zoo`, `ZOO.md`).
    #[cfg(feature = "zoo")]
    pub mutant: Option<crate::zoo::Mutant>,
}

impl Default for ServeArgs {
    fn default() -> Self {
        ServeArgs {
            listen: DEFAULT_LISTEN.into(),
            iface: None,
            mac: None,
            ip: DEFAULT_IP,
            seed: None,
            slice: DEFAULT_SLICE,
            mp_local: MpLocal::default(),
            #[cfg(feature = "zoo")]
            mutant: None,
        }
    }
}

fn os_seed() -> io::Result<[u8; 32]> {
    use std::io::Read;
    let mut seed = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut seed)?;
    Ok(seed)
}

/// Runs the agent with `data_plane` until the process ends. The device's
/// MAC is `args.mac`, else [`DEFAULT_MAC`].
pub fn serve_with(args: &ServeArgs, data_plane: Box<dyn DataPlane>) -> io::Result<()> {
    let seed = match args.seed {
        Some(s) => s,
        None => os_seed()?,
    };
    let device = DeviceConfig {
        #[cfg(feature = "zoo")]
        mutant: args.mutant,
        ..DeviceConfig::new(args.mac.unwrap_or(DEFAULT_MAC), args.ip)
    };
    let agent = Agent::new(AgentConfig::reference_with(device, seed, args.mp_local));
    let server = Server::bind(
        args.listen.as_str(),
        agent,
        data_plane,
        ServerConfig { slice: args.slice },
    )?;
    eprintln!("metaroce agent listening on {}", server.local_addr()?);
    server.run(&AtomicBool::new(false))
}

/// Opens the data plane `args` names: the raw socket of `args.iface`, else
/// the null link. Returns it with `args` completed (the MAC resolved).
pub fn open_data_plane(args: &ServeArgs) -> io::Result<(ServeArgs, Box<dyn DataPlane>)> {
    let Some(iface) = args.iface.as_deref() else {
        return Ok((args.clone(), Box::new(NullLink::default())));
    };
    open_raw(args, iface)
}

#[cfg(feature = "raw")]
fn open_raw(args: &ServeArgs, iface: &str) -> io::Result<(ServeArgs, Box<dyn DataPlane>)> {
    use super::encoding::format_mac;
    use crate::drivers::raw::{RawConfig, RawPort, interface_mac};
    use std::time::Duration;
    let own = interface_mac(iface).map_err(io::Error::other)?;
    let mac = args.mac.unwrap_or(own);
    let port = RawPort::open(
        iface,
        RawConfig {
            // Only a foreign MAC needs the interface to accept every frame.
            promiscuous: mac != own,
            // Frames that arrived while the agent served a request reach
            // the device before a due timer fires (an acknowledgement must
            // not lose the race against the retransmission it stops). Only
            // then: the gap rule of the programs that move data
            // (`CATCH_UP_AFTER`) is not used here, as the agent's one slice
            // of waiting already hands frames over as they come.
            catch_up_after: Some(Duration::from_nanos(u64::MAX)),
            ..RawConfig::default()
        },
    )
    .map_err(io::Error::other)?;
    eprintln!(
        "metaroce agent data plane: AF_PACKET on {iface}, MAC {}{}, socket receive buffer {}",
        format_mac(mac),
        if mac == own { "" } else { " (promiscuous)" },
        port.socket_rx_buffer()
            .map_or_else(|| "default".into(), |n| format!("{n} bytes")),
    );
    let args = ServeArgs {
        mac: Some(mac),
        ..args.clone()
    };
    Ok((args, Box::new(port)))
}

#[cfg(not(feature = "raw"))]
fn open_raw(_: &ServeArgs, iface: &str) -> io::Result<(ServeArgs, Box<dyn DataPlane>)> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("--iface {iface}: built without the `raw` feature"),
    ))
}

/// Opens the data plane and serves; the exit code for `main`: 2 when the
/// data plane cannot be opened or the server fails.
pub fn serve(args: &ServeArgs) -> ExitCode {
    let result = open_data_plane(args).and_then(|(args, data_plane)| serve_with(&args, data_plane));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_an_interface_the_null_link_and_the_default_mac() {
        let (args, _) = open_data_plane(&ServeArgs::default()).unwrap();
        assert_eq!(args, ServeArgs::default());
        let bad = ServeArgs {
            iface: Some("mr-no-such-if".into()),
            ..ServeArgs::default()
        };
        let err = open_data_plane(&bad).err().unwrap();
        assert!(err.to_string().contains("mr-no-such-if"), "{err}");
    }
}
