//! `metaroce-ref serve`: the agent (reference-impl/AGENT.md) — JSON lines
//! over TCP on the control plane, and on the data plane the AF_PACKET
//! socket of `--iface` (needs root), or without it the null link.
//!
//! The arguments become an [`agent::cli::ServeArgs`]; everything else is
//! [`agent::cli::serve`].

use clap::Args;
use core::net::Ipv4Addr;
use metaroce_ref::agent;
use metaroce_ref::agent::MpLocal;
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
    /// YAML file of MP local constants (SPEC §2 keys `mp_rto_init`,
    /// `mp_retire_hold`, …, in the §10.3 units): every MP QP uses them and
    /// `hello` declares them, so a slow test bed can certify with longer
    /// timers (docs/suite.md). Keys left out keep their §10.3 defaults.
    #[arg(long, value_name = "FILE", value_parser = parse_mp_timers)]
    mp_timers: Option<MpLocal>,
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

/// Largest `--mp-timers` file read: nine keys need a few hundred bytes.
const MP_TIMERS_MAX: u64 = 64 * 1024;

/// Reads the `--mp-timers` file `path`; an error names the file and, for a
/// bad value, the key.
fn parse_mp_timers(path: &str) -> Result<MpLocal, String> {
    use std::io::Read;
    let fail = |m: String| format!("{path}: {m}");
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MP_TIMERS_MAX + 1).read_to_string(&mut text))
        .map_err(|e| fail(e.to_string()))?;
    if text.len() as u64 > MP_TIMERS_MAX {
        return Err(fail(format!("larger than {MP_TIMERS_MAX} bytes")));
    }
    mp_timers_from_yaml(&text).map_err(fail)
}

/// The MP local constants of a YAML mapping of SPEC §2 keys.
fn mp_timers_from_yaml(text: &str) -> Result<MpLocal, String> {
    let mut options = serde_saphyr::Options::default();
    if let Some(budget) = options.budget.as_mut() {
        budget.max_depth = 4;
        budget.max_events = 1_000;
        budget.max_documents = 1;
    }
    let map: serde_json::Map<String, serde_json::Value> =
        serde_saphyr::from_str_with_options(text, options).map_err(|e| {
            let rendered = e.to_string();
            rendered
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid YAML")
                .trim()
                .to_string()
        })?;
    MpLocal::from_profile(&map)
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
            mp_local: self.mp_timers.unwrap_or_default(),
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
            &["--mp-timers", "/nonexistent/mr-timers.yaml"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn mp_timers_files_parse_and_bad_ones_are_named() {
        let m = mp_timers_from_yaml("mp_rto_init: 10000\nmp_retire_hold: 5000\n").unwrap();
        assert_eq!(m.tuning.rto_init_ns, 10_000_000);
        assert_eq!(m.tuning.retire_hold_ns, 5_000_000);
        // Not given: the §10.3 defaults.
        assert_eq!(m.tuning.rto_min_ns, MpLocal::default().tuning.rto_min_ns);
        assert_eq!(m.ack_prompt_max_us, 4);
        for (text, want) in [
            ("mp_rto_init: 5\n", "mp_rto_init: 5 is outside 10..=1000000"),
            ("mp_rto_init: fast\n", "mp_rto_init"),
            (
                "mp_ack_coalesce_time: 80\n",
                "mp_ack_coalesce_time: 80 is outside 1..=64",
            ),
            (
                "mp_rto_initial: 1000\n",
                "`mp_rto_initial` is not an MP local constant",
            ),
            (
                "mp_rto_min: 5000\nmp_rto_max: 2000\n",
                "mp_rto_min (5000) is above mp_rto_max",
            ),
            ("- 1\n", ""),
            ("mp_rto_init: [1\n", ""),
        ] {
            let e = mp_timers_from_yaml(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        // The file is named, and the value reaches the arguments.
        let dir = std::env::temp_dir().join(format!("mr-serve-timers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("t.yaml");
        std::fs::write(&file, "mp_rto_min: 2000\n").unwrap();
        let a = parse(&["--mp-timers", file.to_str().unwrap()]).unwrap();
        assert_eq!(a.mp_local.tuning.rto_min_ns, 2_000_000);
        // `mp_rto_init` (default 1000) follows to stay ≥ mp_rto_min.
        assert_eq!(a.mp_local.tuning.rto_init_ns, 2_000_000);
        std::fs::write(&file, "mp_rto_min: 0\n").unwrap();
        let e = parse(&["--mp-timers", file.to_str().unwrap()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("t.yaml: mp_rto_min: 0 is outside"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
