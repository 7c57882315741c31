//! `metaroce-ref pingpong`: the client side of rdma-core's `ibv_rc_pingpong`
//! on a Base RC QP, for interoperating with another RoCEv2 implementation
//! (Linux soft-RoCE, `rdma_rxe`, in `lab/rxe/interop.sh`).
//!
//! Connection setup is `ibv_rc_pingpong`'s TCP exchange (port 18515 by
//! default): the client connects, writes its `"LID:QPN:PSN:GID"` string
//! (`"%04x:%06x:%06x:%s"`, the GID as 32 hex digits, 52 bytes with the
//! NUL), reads the server's, and writes `"done"`. The server has moved its
//! QP to RTR before it answers, so the first SEND may follow at once.
//!
//! The exchange, `iters` times: the client SENDs `size` bytes, the server's
//! receive completes and the server SENDs its buffer back. `ibv_rc_pingpong`
//! receives into and sends from the same buffer, so each of its SENDs
//! carries the bytes of the message it has just received: the client checks
//! that every message it receives has length `size` and is byte for byte the
//! message it sent in that iteration (`--no-echo-check` only checks the
//! length). Every SEND of ours must complete successfully (ACKed by the
//! peer). Like `ibv_rc_pingpong`, the client posts the next SEND only when
//! its previous SEND and the answer to it have completed.
//!
//! The device's address is `--ip`; the kernel usually owns it as well (it
//! carries the TCP exchange), so the program binds UDP port 4791 on it to
//! keep the kernel from answering RoCE frames with ICMP port unreachable.
//!
//! Output: `ibv_rc_pingpong`'s two result lines, then one JSON summary line.
//! Exit status 0 when every check passed, 1 otherwise.

use crate::endpoint::{
    Connection, DeviceOptions, connect_rc, create_rc_qp, device_summary, e, linger, open_device,
    post_recv_slot,
};
use crate::peer::{parse_mac, parse_seed};
use clap::Args;
use core::net::Ipv4Addr;
use metaroce_ref::drivers::raw::RunOutcome;
use metaroce_ref::{Access, Device, MrInfo, SendWr, Sge, WcOpcode, WcStatus, WrOp};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Receive buffers kept posted.
const RECV_SLOTS: u64 = 16;
/// Length of the exchange string, NUL included (`sizeof msg` in
/// `ibv_rc_pingpong`).
const MSG_LEN: usize = 52;
/// wr_id of our SENDs (receives use their slot index).
const SEND_WRID: u64 = 1 << 32;

/// Arguments of `metaroce-ref pingpong`.
#[derive(Debug, Args)]
pub struct PingpongArgs {
    /// Interface to open (AF_PACKET; needs root or CAP_NET_RAW).
    #[arg(long)]
    iface: String,
    /// Local MAC address (default: the interface's).
    #[arg(long, value_parser = parse_mac)]
    mac: Option<[u8; 6]>,
    /// Local IPv4 address of the device (the GID sent is its IPv4-mapped
    /// form).
    #[arg(long)]
    ip: Ipv4Addr,
    /// The peer's IPv4 address (its GID is the IPv4-mapped form).
    #[arg(long)]
    peer_ip: Ipv4Addr,
    /// The peer's MAC address (static neighbour; no ARP).
    #[arg(long, value_parser = parse_mac)]
    peer_mac: [u8; 6],
    /// Client role: the `ibv_rc_pingpong` server to connect to (default:
    /// --peer-ip). Only the client role is implemented.
    #[arg(long)]
    connect: Option<Ipv4Addr>,
    /// TCP port of the exchange.
    #[arg(long, default_value_t = 18515)]
    port: u16,
    /// Message size (`-s` of ibv_rc_pingpong; both ends must agree).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=(1 << 24)))]
    size: u32,
    /// Iterations (`-n` of ibv_rc_pingpong; both ends must agree).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    iters: u32,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 (rxe on a 1500 link: 1024).
    #[arg(long, default_value_t = 1024)]
    pmtu: u32,
    /// Only check the length of received messages, not that they echo ours.
    #[arg(long)]
    no_echo_check: bool,
    /// Time limit for the whole run, including waiting for the server.
    #[arg(long, default_value_t = 60)]
    timeout_secs: u64,
    /// Local ACK timeout exponent (4.096 µs × 2^n).
    #[arg(long, default_value_t = 16)]
    ack_timeout: u8,
    /// Quiet period after the last message before exiting (a lost ACK of
    /// the server's last SEND can still be repeated).
    #[arg(long, default_value_t = 500)]
    linger_ms: u64,
    /// 64 hex digits seeding PSNs, keys and QPNs (default: /dev/urandom).
    #[arg(long, value_parser = parse_seed)]
    seed: Option<[u8; 32]>,
}

/// Byte `j` of the message of iteration `i`.
fn pattern(i: u32, j: usize) -> u8 {
    (j as u8) ^ (i as u8).wrapping_mul(37) ^ ((j >> 8) as u8).wrapping_mul(13) ^ 0x5a
}

/// The IPv4-mapped GID (`::ffff:a.b.c.d`).
fn mapped_gid(ip: Ipv4Addr) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&ip.octets());
    g
}

/// `ibv_rc_pingpong`'s exchange string for these parameters (without NUL).
fn wire_msg(lid: u16, qpn: u32, psn: u32, gid: &[u8; 16]) -> String {
    let hex: String = gid.iter().map(|b| format!("{b:02x}")).collect();
    format!("{lid:04x}:{qpn:06x}:{psn:06x}:{hex}")
}

/// The server's parameters, parsed from its exchange string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Dest {
    lid: u16,
    qpn: u32,
    psn: u32,
    gid: [u8; 16],
}

fn parse_wire(buf: &[u8]) -> Result<Dest, String> {
    let text = buf.split(|&b| b == 0).next().unwrap_or_default();
    let text = std::str::from_utf8(text).map_err(|_| format!("not ASCII: {buf:02x?}"))?;
    let bad = || format!("bad exchange string {text:?}");
    let mut parts = text.split(':');
    let mut field = || parts.next().ok_or_else(bad);
    let lid = u16::from_str_radix(field()?, 16).map_err(|_| bad())?;
    let qpn = u32::from_str_radix(field()?, 16).map_err(|_| bad())?;
    let psn = u32::from_str_radix(field()?, 16).map_err(|_| bad())?;
    let g = field()?;
    if g.len() != 32 || !g.is_ascii() || qpn >= 1 << 24 || psn >= 1 << 24 {
        return Err(bad());
    }
    let mut gid = [0u8; 16];
    for (k, b) in gid.iter_mut().enumerate() {
        *b = u8::from_str_radix(&g[2 * k..2 * k + 2], 16).map_err(|_| bad())?;
    }
    Ok(Dest { lid, qpn, psn, gid })
}

/// Runs `metaroce-ref pingpong`.
pub fn main(args: &PingpongArgs) -> ExitCode {
    let start = Instant::now();
    let mut summary = json!({
        "mode": "pingpong-client",
        "size": args.size,
        "iters": args.iters,
        "pmtu": args.pmtu,
    });
    let result = run(args, &mut summary);
    crate::endpoint::finish("metaroce-ref pingpong", start, result, summary)
}

/// Receive `k` goes to slot 1 + k mod RECV_SLOTS (slot 0 is the send buffer).
fn post_recv(dev: &mut Device, qpn: u32, mr: &MrInfo, size: u32, k: u64) -> Result<(), String> {
    post_recv_slot(dev, qpn, mr, (1, RECV_SLOTS), size, k)
}

/// Connects to the server, retrying until it listens or the deadline.
fn connect(addr: SocketAddr, deadline: Instant) -> Result<TcpStream, String> {
    loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(s) => return Ok(s),
            Err(err) => {
                if Instant::now() + Duration::from_secs(1) >= deadline {
                    return Err(format!("connecting to {addr}: {err}"));
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
}

fn run(args: &PingpongArgs, summary: &mut Value) -> Result<(), String> {
    if !matches!(args.pmtu, 256 | 512 | 1024 | 2048 | 4096) {
        return Err(format!("--pmtu {}: not a valid path MTU", args.pmtu));
    }
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    // Absorb RoCE frames in the kernel (no ICMP port unreachable).
    let _udp = match UdpSocket::bind((args.ip, 4791)) {
        Ok(s) => Some(s),
        Err(err) => {
            eprintln!("note: cannot bind UDP {}:4791 ({err}); continuing", args.ip);
            None
        }
    };
    let mut driver = open_device(&DeviceOptions {
        iface: &args.iface,
        mac: args.mac,
        ip: args.ip,
        seed: args.seed,
        window: None,
        tick_ms: None,
        per_frame: false,
    })?;
    let dev = driver.device_mut();
    let qp = create_rc_qp(dev, true)?;
    let (pd, cq, qpn, psn) = (qp.pd, qp.cq, qp.qpn, qp.psn);
    let size = args.size;
    // slot 0: the send buffer; slots 1..=RECV_SLOTS: receive buffers
    let len = usize::try_from((1 + RECV_SLOTS) * u64::from(size))
        .map_err(|_| "buffer too large".to_string())?;
    let mr = dev
        .reg_mr(pd, len, Access::LOCAL_WRITE)
        .map_err(e("reg_mr"))?;
    for k in 0..RECV_SLOTS {
        post_recv(dev, qpn, &mr, size, k)?;
    }

    // ibv_rc_pingpong's exchange, client side.
    let server = SocketAddr::from((args.connect.unwrap_or(args.peer_ip), args.port));
    let mut tcp = connect(server, deadline)?;
    tcp.set_read_timeout(Some(Duration::from_secs(args.timeout_secs)))
        .map_err(e("TCP"))?;
    let mine = wire_msg(0, qpn, psn, &mapped_gid(args.ip));
    let mut out = mine.clone().into_bytes();
    out.push(0);
    tcp.write_all(&out).map_err(e("TCP write"))?;
    let mut buf = [0u8; MSG_LEN];
    tcp.read_exact(&mut buf).map_err(e("TCP read"))?;
    let peer = parse_wire(&buf)?;
    eprintln!("  local address:  {mine}");
    eprintln!(
        "  remote address: LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        peer.lid,
        peer.qpn,
        peer.psn,
        core::net::Ipv6Addr::from(peer.gid)
    );
    summary["local"] = json!({"qpn": qpn, "psn": psn});
    summary["remote"] = json!({"qpn": peer.qpn, "psn": peer.psn,
        "gid": core::net::Ipv6Addr::from(peer.gid).to_string()});
    if peer.gid != mapped_gid(args.peer_ip) {
        eprintln!(
            "note: the server's GID is not ::ffff:{} (its -g index?); using --peer-ip",
            args.peer_ip
        );
    }
    let dev = driver.device_mut();
    connect_rc(
        dev,
        &qp,
        &Connection {
            peer_qpn: peer.qpn,
            peer_psn: peer.psn,
            peer_ip: args.peer_ip,
            peer_mac: args.peer_mac,
            pmtu: args.pmtu,
            ack_timeout: args.ack_timeout,
            rd_atomic: 1,
            min_rnr_timer: 12,
            mp: None,
        },
    )?;
    tcp.write_all(b"done\0").map_err(e("TCP write"))?;
    // Work is posted inside `run_until`, after each turn has given the device
    // the current time (`dataplane::service`), so the seconds spent in the TCP
    // exchange do not leave its timers in the past.

    // The pingpong.
    let t0 = Instant::now();
    let (mut sent, mut acked, mut received) = (0u32, 0u32, 0u32);
    let mut next_recv = RECV_SLOTS;
    let mut failure: Option<String> = None;
    let iters = args.iters;
    let outcome = driver
        .run_until(deadline, |dev| {
            let wcs = match dev.poll_cq(cq, 16) {
                Ok(w) => w,
                Err(err) => {
                    failure = Some(format!("poll_cq: {err}"));
                    return true;
                }
            };
            for wc in wcs {
                if wc.status != WcStatus::Success {
                    failure = Some(format!("error completion {wc:?}"));
                    return true;
                }
                match wc.opcode {
                    WcOpcode::Send if wc.wr_id == SEND_WRID + u64::from(acked) => acked += 1,
                    WcOpcode::Recv => {
                        let i = received;
                        if i >= sent {
                            failure = Some(format!("message {i} received before ours was sent"));
                            return true;
                        }
                        if wc.byte_len != size {
                            failure = Some(format!(
                                "iteration {i}: received {} bytes, expected {size}",
                                wc.byte_len
                            ));
                            return true;
                        }
                        let va = mr.addr + (1 + wc.wr_id % RECV_SLOTS) * u64::from(size);
                        if !args.no_echo_check {
                            match dev.read_mr(mr.lkey, va, u64::from(size)) {
                                Ok(got) => {
                                    if let Some(j) =
                                        got.iter().enumerate().position(|(j, &b)| b != pattern(i, j))
                                    {
                                        failure = Some(format!(
                                            "iteration {i}: byte {j} is 0x{:02x}, our message had 0x{:02x}",
                                            got[j],
                                            pattern(i, j)
                                        ));
                                        return true;
                                    }
                                }
                                Err(err) => {
                                    failure = Some(format!("read_mr: {err}"));
                                    return true;
                                }
                            }
                        }
                        if let Err(err) = post_recv(dev, qpn, &mr, size, next_recv) {
                            failure = Some(err);
                            return true;
                        }
                        next_recv += 1;
                        received += 1;
                    }
                    _ => {
                        failure = Some(format!("unexpected completion {wc:?}"));
                        return true;
                    }
                }
            }
            if sent < iters && acked == sent && received == sent {
                let data: Vec<u8> = (0..size as usize).map(|j| pattern(sent, j)).collect();
                if let Err(err) = dev.write_mr(mr.lkey, mr.addr, &data) {
                    failure = Some(format!("write_mr: {err}"));
                    return true;
                }
                let wr = SendWr::new(
                    SEND_WRID + u64::from(sent),
                    WrOp::Send,
                    vec![Sge {
                        addr: mr.addr,
                        len: size,
                        lkey: mr.lkey,
                    }],
                );
                if let Err(err) = dev.post_send(qpn, wr) {
                    failure = Some(format!("post_send {sent}: {err}"));
                    return true;
                }
                sent += 1;
            }
            acked == iters && received == iters
        })
        .map_err(|e| e.to_string())?;
    let secs = t0.elapsed().as_secs_f64();
    summary["sends_completed"] = json!(acked);
    summary["receives_verified"] = json!(received);
    summary["echo_checked"] = json!(!args.no_echo_check);
    let outcome_result = if let Some(f) = failure {
        Err(f)
    } else if outcome == RunOutcome::Deadline {
        Err(format!(
            "time limit: {acked} of {iters} SENDs completed, {received} of {iters} messages received"
        ))
    } else {
        let bytes = u64::from(size) * u64::from(iters) * 2;
        println!(
            "{bytes} bytes in {secs:.2} seconds = {:.2} Mbit/sec",
            bytes as f64 * 8.0 / secs / 1e6
        );
        println!(
            "{iters} iters in {secs:.2} seconds = {:.2} usec/iter",
            secs * 1e6 / f64::from(iters)
        );
        // Linger until quiet: the server's last SEND may need our ACK again.
        let end = (Instant::now() + Duration::from_secs(5)).min(deadline);
        linger(&mut driver, end, Duration::from_millis(args.linger_ms))
    };
    let s = driver.stats();
    summary["driver"] = json!({
        "frames_in": s.frames_in, "frames_out": s.frames_out,
        "frames_filtered": s.frames_filtered, "rx_oversize": s.rx_oversize,
        "rx_errors": s.rx_errors, "tx_errors": s.tx_errors,
    });
    summary["device"] = device_summary(driver.device());
    outcome_result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exchange_string_round_trips() {
        let gid = mapped_gid(Ipv4Addr::new(10, 77, 0, 100));
        let s = wire_msg(0, 0x1234, 0xabcdef, &gid);
        assert_eq!(s, "0000:001234:abcdef:00000000000000000000ffff0a4d0064");
        assert_eq!(s.len() + 1, MSG_LEN);
        let mut buf = s.into_bytes();
        buf.push(0);
        assert_eq!(
            parse_wire(&buf),
            Ok(Dest {
                lid: 0,
                qpn: 0x1234,
                psn: 0xabcdef,
                gid
            })
        );
        assert!(parse_wire(b"0000:zz:000000:00\0").is_err());
        assert!(parse_wire(b"\0").is_err());
    }

    #[test]
    fn patterns_differ_between_iterations() {
        assert!((0..4096).any(|j| pattern(0, j) != pattern(1, j)));
    }
}
