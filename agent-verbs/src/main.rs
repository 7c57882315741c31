//! `metaroce-agent-verbs`: the MetaRoCE agent protocol (reference-impl/AGENT.md)
//! over libibverbs, so the conformance suite can drive any RDMA device —
//! Linux soft-RoCE (`rdma_rxe`) in the project's lab, a hardware NIC
//! elsewhere. Built without the `verbs` feature it links no C library and
//! only says so.
//!
//! Usage: `metaroce-agent-verbs [--device rxe0] [--port 1] [--ip IPV4]
//! [--listen 0.0.0.0:7471] [--udp-sport kernel|unknown]`. `--ip` picks the
//! RoCEv2 GID (default: the first IPv4-mapped RoCEv2 GID of the port).
//! `--udp-sport kernel`: the device picks each QP's UDP source port by
//! Linux's `rdma_get_udp_sport()` (rxe does), so `query_qp` can report it;
//! by default the port is unknown and omitted (AGENT.md §6.10).

#[cfg(feature = "verbs")]
use metaroce_agent_verbs::{agent, ffi, server, sysfs};

use std::process::ExitCode;

/// Command-line options.
#[derive(Debug, PartialEq)]
struct Options {
    device: String,
    port: u8,
    ip: Option<std::net::Ipv4Addr>,
    listen: String,
    kernel_udp_sport: bool,
}

const USAGE: &str = "usage: metaroce-agent-verbs [--device NAME] [--port N] [--ip IPV4] [--listen ADDR:PORT] [--udp-sport kernel|unknown]";

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        device: String::new(),
        port: 1,
        ip: None,
        listen: "127.0.0.1:7471".into(),
        kernel_udp_sport: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "--device" => o.device = val("--device")?,
            "--port" => {
                o.port = val("--port")?
                    .parse()
                    .map_err(|_| "--port: expected 1..=255".to_string())?
            }
            "--ip" => {
                o.ip = Some(
                    val("--ip")?
                        .parse()
                        .map_err(|_| "--ip: expected an IPv4 address".to_string())?,
                )
            }
            "--listen" => o.listen = val("--listen")?,
            "--udp-sport" => match val("--udp-sport")?.as_str() {
                "kernel" => o.kernel_udp_sport = true,
                "unknown" => o.kernel_udp_sport = false,
                v => return Err(format!("--udp-sport: `{v}`: expected kernel or unknown")),
            },
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument `{other}`\n{USAGE}")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match parse_args(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    run(opts)
}

#[cfg(not(feature = "verbs"))]
fn run(_: Options) -> ExitCode {
    eprintln!(
        "metaroce-agent-verbs was built without verbs: rebuild with \
         `cargo build -p metaroce-agent-verbs --features verbs` (needs libibverbs-dev)"
    );
    ExitCode::from(3)
}

#[cfg(feature = "verbs")]
fn run(o: Options) -> ExitCode {
    match start(o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("metaroce-agent-verbs: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "verbs")]
fn start(o: Options) -> Result<(), String> {
    let ctx = ffi::Context::open(&o.device)
        .map_err(|e| format!("cannot open RDMA device `{}`: {e}", o.device))?;
    let name = if o.device.is_empty() {
        first_device().ok_or("no RDMA device in /sys/class/infiniband")?
    } else {
        o.device.clone()
    };
    let info = ctx
        .query(o.port)
        .map_err(|e| format!("{name} port {}: query failed: {e}", o.port))?;
    let gid = sysfs::find_roce_gid(&name, o.port, o.ip).ok_or_else(|| {
        format!(
            "{name} port {}: no RoCEv2 GID with an IPv4 address{}",
            o.port,
            o.ip.map(|i| format!(" {i}")).unwrap_or_default()
        )
    })?;
    let mac = sysfs::netdev_mac(&gid.netdev)
        .ok_or_else(|| format!("netdev `{}`: no MAC address", gid.netdev))?;
    let listener = std::net::TcpListener::bind(&o.listen)
        .map_err(|e| format!("cannot listen on {}: {e}", o.listen))?;
    eprintln!(
        "metaroce-agent-verbs: {name} port {} (GID {} = {}, {} {mac}, active MTU {}), listening on {}",
        o.port, gid.index, gid.ip, gid.netdev, info.active_mtu, o.listen
    );
    let setup = agent::DeviceSetup {
        name,
        port: o.port,
        gid,
        mac,
        info,
        kernel_udp_sport: o.kernel_udp_sport,
    };
    server::serve(listener, agent::VerbsAgent::new(ctx, setup)).map_err(|e| e.to_string())
}

#[cfg(feature = "verbs")]
fn first_device() -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/infiniband")
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_options_and_rejects_bad_ones() {
        let a = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let o = parse_args(&a("--device rxe0 --ip 10.77.0.1 --listen 0.0.0.0:7471")).unwrap();
        assert_eq!(o.device, "rxe0");
        assert_eq!(o.ip, Some(std::net::Ipv4Addr::new(10, 77, 0, 1)));
        assert!(parse_args(&a("--port 300")).is_err());
        assert!(parse_args(&a("--ip")).is_err());
        assert!(parse_args(&a("--bogus")).is_err());
        assert!(
            parse_args(&a("--udp-sport kernel"))
                .unwrap()
                .kernel_udp_sport
        );
        assert!(parse_args(&a("--udp-sport maybe")).is_err());
    }
}
