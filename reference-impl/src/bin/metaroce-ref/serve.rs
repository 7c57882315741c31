//! `metaroce-ref serve`: the agent (reference-impl/AGENT.md) — JSON lines
//! over TCP on the control plane, and on the data plane the AF_PACKET
//! socket of `--iface` (needs root), or without it the null link.
//!
//! The arguments become an [`agent::cli::ServeArgs`]; everything else is
//! [`agent::cli::serve`].

use clap::Args;
use core::net::Ipv4Addr;
use metaroce_ref::agent;
use metaroce_ref::agent::cli::{DEFAULT_IP, DEFAULT_LISTEN, ServeArgs};
use metaroce_ref::agent::encoding::{hex_decode, parse_mac};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `metaroce-ref serve`.
#[derive(Debug, Args)]
pub struct ServeCmd {
    /// Where the agent listens (TCP, JSON lines).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: String,
    /// Data-plane interface (AF_PACKET; needs root or CAP_NET_RAW). Without
    /// it, frames the device sends are discarded (null link).
    #[arg(long)]
    iface: Option<String>,
    /// The device's MAC (default: the interface's; without --iface
    /// 02:00:00:00:00:01). Another MAC than the interface's puts it in
    /// promiscuous mode.
    #[arg(long, value_parser = parse_mac)]
    mac: Option<[u8; 6]>,
    /// The device's IPv4 address. Do not configure it on the interface: the
    /// kernel would answer RoCE frames with ICMP port unreachable.
    #[arg(long, default_value_t = DEFAULT_IP)]
    ip: Ipv4Addr,
    /// 64 hex digits seeding keys, PSNs and QPNs (default: /dev/urandom).
    #[arg(long, value_parser = parse_seed)]
    seed: Option<[u8; 32]>,
    /// Longest data-plane pump between two looks at the requests, in µs.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    slice_us: u64,
    /// Run a mutant of the bug zoo (reference-impl/ZOO.md) instead of the
    /// correct transport, for testing a conformance harness.
    #[cfg(feature = "zoo")]
    #[arg(long)]
    mutant: Option<metaroce_ref::zoo::Mutant>,
}

fn parse_seed(s: &str) -> Result<[u8; 32], String> {
    hex_decode(s)?
        .try_into()
        .map_err(|_| "a seed is 64 hex digits".to_string())
}

impl ServeCmd {
    fn to_args(&self) -> ServeArgs {
        ServeArgs {
            listen: self.listen.clone(),
            iface: self.iface.clone(),
            mac: self.mac,
            ip: self.ip,
            seed: self.seed,
            slice: Duration::from_micros(self.slice_us),
            #[cfg(feature = "zoo")]
            mutant: self.mutant,
        }
    }
}

/// Runs `metaroce-ref serve` until the process is killed.
pub fn main(cmd: &ServeCmd) -> ExitCode {
    agent::cli::serve(&cmd.to_args())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(flatten)]
        serve: ServeCmd,
    }

    fn parse(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        T::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
            .map(|t| t.serve.to_args())
    }

    #[test]
    fn arguments_parse() {
        let seed = "ab".repeat(32);
        let a = parse(&[
            "--listen",
            "127.0.0.1:0",
            "--iface",
            "veth0",
            "--mac",
            "02:00:00:00:00:0b",
            "--ip",
            "10.0.0.2",
            "--seed",
            &seed,
            "--slice-us",
            "250",
        ])
        .unwrap();
        assert_eq!(a.listen, "127.0.0.1:0");
        assert_eq!(a.iface.as_deref(), Some("veth0"));
        assert_eq!(a.mac, Some([2, 0, 0, 0, 0, 0xb]));
        assert_eq!(a.ip, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(a.seed, Some([0xab; 32]));
        assert_eq!(a.slice, Duration::from_micros(250));
        assert_eq!(parse(&[]).unwrap(), ServeArgs::default());
        #[cfg(feature = "zoo")]
        {
            let m = parse(&["--mutant", "icrc-not-checked"]).unwrap();
            assert_eq!(m.mutant, Some(metaroce_ref::zoo::Mutant::IcrcNotChecked));
            let e = parse(&["--mutant", "nope"]).unwrap_err().to_string();
            assert!(e.contains("valid names: msn-off-by-one"), "{e}");
        }
        for bad in [
            &["--mac", "zz"][..],
            &["--seed", "abcd"],
            &["--ip"],
            &["--slice-us", "0"],
            &["--bogus"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
