//! `serve`: the command that runs the agent. Kept free of any argument
//! library so any binary can call it: `metaroce-ref serve ARGS...` passes
//! its arguments to [`serve`]; a binary that owns its own data-plane driver
//! calls [`serve_with`].

use super::dataplane::{DataPlane, NullLink};
use super::dispatch::{Agent, AgentConfig};
use super::encoding::{hex_decode, parse_mac};
use super::server::{Server, ServerConfig};
use crate::DeviceConfig;
use core::net::Ipv4Addr;
use std::io;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Usage text of `serve`.
pub const USAGE: &str = "\
usage: serve [--listen ADDR:PORT] [--mac MAC] [--ip IPV4] [--seed HEX64] [--slice-us N]

Runs the MetaRoCE agent (reference-impl/AGENT.md): JSON lines over TCP.
  --listen ADDR:PORT  where to listen (default 127.0.0.1:7471)
  --mac MAC           the device's data-plane MAC (default 02:00:00:00:00:01)
  --ip IPV4           the device's data-plane IPv4 (default 10.0.0.1)
  --seed HEX64        32-byte seed of keys, PSNs, QPNs (default: /dev/urandom)
  --slice-us N        longest data-plane pump between requests (default 1000)
Without a data-plane driver the agent discards the frames it sends (null link).";

/// Parsed arguments of `serve`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeArgs {
    /// Listening address.
    pub listen: String,
    /// Data-plane MAC.
    pub mac: [u8; 6],
    /// Data-plane IPv4.
    pub ip: Ipv4Addr,
    /// Seed; `None` reads 32 bytes from `/dev/urandom`.
    pub seed: Option<[u8; 32]>,
    /// Pump slice.
    pub slice: Duration,
}

impl Default for ServeArgs {
    fn default() -> Self {
        ServeArgs {
            listen: "127.0.0.1:7471".into(),
            mac: [2, 0, 0, 0, 0, 1],
            ip: Ipv4Addr::new(10, 0, 0, 1),
            seed: None,
            slice: Duration::from_millis(1),
        }
    }
}

impl ServeArgs {
    /// Parses `serve`'s arguments (without the program or subcommand name).
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<ServeArgs, String> {
        let mut out = ServeArgs::default();
        let mut it = args.into_iter();
        while let Some(flag) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--listen" => out.listen = value()?,
                "--mac" => out.mac = parse_mac(&value()?)?,
                "--ip" => {
                    out.ip = value()?
                        .parse()
                        .map_err(|_| "--ip needs an IPv4 address".to_string())?;
                }
                "--seed" => {
                    let bytes = hex_decode(&value()?)?;
                    out.seed = Some(
                        bytes
                            .try_into()
                            .map_err(|_| "--seed needs 64 hex digits".to_string())?,
                    );
                }
                "--slice-us" => {
                    let us: u64 = value()?
                        .parse()
                        .map_err(|_| "--slice-us needs a number".to_string())?;
                    if !(1..=100_000).contains(&us) {
                        return Err("--slice-us must be 1..=100000".into());
                    }
                    out.slice = Duration::from_micros(us);
                }
                "-h" | "--help" => return Err(USAGE.into()),
                other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
            }
        }
        Ok(out)
    }
}

fn os_seed() -> io::Result<[u8; 32]> {
    use std::io::Read;
    let mut seed = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut seed)?;
    Ok(seed)
}

/// Runs the agent with `data_plane` until the process ends.
pub fn serve_with(args: &ServeArgs, data_plane: Box<dyn DataPlane>) -> io::Result<()> {
    let seed = match args.seed {
        Some(s) => s,
        None => os_seed()?,
    };
    let agent = Agent::new(AgentConfig::reference(
        DeviceConfig::new(args.mac, args.ip),
        seed,
    ));
    let server = Server::bind(
        args.listen.as_str(),
        agent,
        data_plane,
        ServerConfig { slice: args.slice },
    )?;
    eprintln!("metaroce agent listening on {}", server.local_addr()?);
    server.run(&AtomicBool::new(false))
}

/// `serve ARGS...` with the null data plane; the exit code for `main`.
pub fn serve<I: IntoIterator<Item = String>>(args: I) -> ExitCode {
    let args = match ServeArgs::parse(args) {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(4);
        }
    };
    match serve_with(&args, Box::new(NullLink::default())) {
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
    fn parses_arguments() {
        let a = ServeArgs::parse(
            [
                "--listen",
                "127.0.0.1:0",
                "--mac",
                "02:00:00:00:00:0b",
                "--ip",
                "10.0.0.2",
                "--seed",
                &"ab".repeat(32),
                "--slice-us",
                "250",
            ]
            .map(String::from),
        )
        .unwrap();
        assert_eq!(a.listen, "127.0.0.1:0");
        assert_eq!(a.mac, [2, 0, 0, 0, 0, 0xb]);
        assert_eq!(a.ip, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(a.seed, Some([0xab; 32]));
        assert_eq!(a.slice, Duration::from_micros(250));
        assert_eq!(ServeArgs::parse(Vec::new()).unwrap(), ServeArgs::default());
        for bad in [
            &["--mac", "zz"][..],
            &["--seed", "abcd"],
            &["--ip"],
            &["--bogus"],
        ] {
            assert!(ServeArgs::parse(bad.iter().map(|s| s.to_string())).is_err());
        }
    }
}
