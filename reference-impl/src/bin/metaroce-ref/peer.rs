//! `metaroce-ref peer`: one endpoint of a Base RC connection over the
//! AF_PACKET driver, running a fixed, verifiable traffic programme.
//!
//! Connection setup is out of band: each side writes its QPN, first PSN,
//! R_Key and buffer addresses as one JSON object to `--info-out` (written to
//! a temporary name, then renamed) and waits for the peer's at `--info-in`.
//!
//! The programme, message `i` of `0..messages` (the client is the
//! requester, the server the responder):
//!
//! | `i % 4` | operation | verified by |
//! |---|---|---|
//! | 0 | SEND | server: RECV completion, length and bytes |
//! | 1 | WRITE with immediate `i` into server slot `i % 32` | server: completion, immediate, bytes in the slot |
//! | 2 | plain WRITE into server slot `i % 32` | client: the next READ; server: final slot contents |
//! | 3 | READ back the slot written by message `i - 1` | client: bytes read |
//!
//! Sizes are a deterministic mix of edge sizes (1, PMTU ± 1, 4 KiB ± 1,
//! the maximum...) and pseudo-random sizes up to `--size`. Byte `j` of
//! message `i` is a function of `(i, j)` only, so both sides know it. A
//! final 8-byte SEND (index `messages`) tells the server that everything
//! before it has landed (RC ordering); the server then checks every write
//! slot and lingers until the link is quiet, so a lost ACK can still be
//! answered.
//!
//! Exit status: 0 when every check passed, 1 on a failed check, an error
//! completion, a setup error or the time limit; 2 on bad arguments. The last
//! line on stdout is a JSON summary with the driver's and the device's
//! counters.

use crate::endpoint::{
    Connection, DeviceOptions, connect_rc, create_rc_qp, device_summary, e, linger, open_device,
    post_recv_slot,
};
use clap::{Args, ValueEnum};
use core::net::Ipv4Addr;
use metaroce_ref::drivers::raw::{RawDriver, RunOutcome};
use metaroce_ref::{
    Access, CqHandle, Device, MrInfo, RemoteAddr, SendWr, Sge, WcOpcode, WcStatus, WrOp,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Receive buffers the server keeps posted.
const RECV_SLOTS: u32 = 32;
/// Server buffers that WRITEs land in.
const WRITE_SLOTS: u32 = 32;
/// Length of the final SEND.
const FIN_LEN: u32 = 8;

/// Which end of the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Role {
    /// Responder: posts receives, exposes memory, verifies what lands.
    Server,
    /// Requester: posts the SEND/WRITE/READ programme, verifies READs.
    Client,
}

/// Conformance profile of the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Profile {
    /// RoCEv2 RC with go-back-N.
    Base,
}

/// Arguments of `metaroce-ref peer`.
#[derive(Debug, Args)]
pub struct PeerArgs {
    /// Interface to open (AF_PACKET; needs root or CAP_NET_RAW).
    #[arg(long)]
    iface: String,
    /// Local MAC address (default: the interface's).
    #[arg(long, value_parser = parse_mac)]
    mac: Option<[u8; 6]>,
    /// Local IPv4 address of the device (it need not be configured on the
    /// interface).
    #[arg(long)]
    ip: Ipv4Addr,
    /// The peer's MAC address (static neighbour; no ARP).
    #[arg(long, value_parser = parse_mac)]
    peer_mac: [u8; 6],
    /// The peer's IPv4 address.
    #[arg(long)]
    peer_ip: Ipv4Addr,
    /// Server (responder) or client (requester).
    #[arg(long, value_enum)]
    role: Role,
    /// File this end writes its connection parameters to (JSON).
    #[arg(long)]
    info_out: PathBuf,
    /// File the peer writes its connection parameters to (waited for).
    #[arg(long)]
    info_in: PathBuf,
    /// Messages in the programme (both ends must agree).
    #[arg(long, default_value_t = 200)]
    messages: u32,
    /// Largest message in bytes (both ends must agree).
    #[arg(long, default_value_t = 65536, value_parser = clap::value_parser!(u32).range(1..=(1 << 24)))]
    size: u32,
    /// Profile.
    #[arg(long, value_enum, default_value_t = Profile::Base)]
    profile: Profile,
    /// Time limit for the whole run, including waiting for the peer.
    #[arg(long, default_value_t = 30)]
    timeout_secs: u64,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 (frames must fit the link MTU).
    #[arg(long, default_value_t = 1024)]
    pmtu: u32,
    /// Local ACK timeout exponent (4.096 µs × 2^n).
    #[arg(long, default_value_t = 14)]
    ack_timeout: u8,
    /// Largest span of unacknowledged PSNs per QP (the device's
    /// `max_outstanding_psns`): bounds a burst, which must fit the peer's
    /// socket receive buffer (the default 212 KiB holds about 90 frames of
    /// a 1 KiB PMTU: a window of 128 overflows it on a veth).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=(1 << 23) - 1))]
    window: u32,
    /// Work requests the client keeps outstanding.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    depth: u32,
    /// Server: quiet period after the last message before exiting.
    #[arg(long, default_value_t = 500)]
    linger_ms: u64,
    /// Driver tick in milliseconds (timer resolution; 0 busy-polls).
    #[arg(long, default_value_t = 1)]
    tick_ms: u64,
    /// 64 hex digits seeding PSNs, keys and QPNs (default: /dev/urandom).
    #[arg(long, value_parser = parse_seed)]
    seed: Option<[u8; 32]>,
}

/// The one MAC parser (`aa:bb:cc:dd:ee:ff`), the agent protocol's.
pub(crate) use metaroce_ref::agent::encoding::parse_mac;

pub(crate) fn parse_seed(s: &str) -> Result<[u8; 32], String> {
    let mut seed = [0u8; 32];
    if s.len() != 64 || !s.is_ascii() {
        return Err("a seed is 64 hex digits".into());
    }
    for (i, b) in seed.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
    }
    Ok(seed)
}

pub(crate) fn fresh_seed() -> Result<[u8; 32], String> {
    use std::io::Read;
    let mut seed = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut seed))
        .map_err(|e| format!("seed from /dev/urandom: {e}"))?;
    Ok(seed)
}

// ---- The programme: sizes, operations, data pattern -------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Send,
    WriteImm,
    Write,
    Read,
}

fn kind(i: u32, messages: u32) -> Kind {
    if i >= messages {
        return Kind::Send; // the final SEND
    }
    match i % 4 {
        0 => Kind::Send,
        1 => Kind::WriteImm,
        2 => Kind::Write,
        _ => Kind::Read,
    }
}

fn mix(x: u64) -> u64 {
    metaroce_agent::rng::SplitMix64::mix(x)
}

/// Size of the data of message `i` (for a READ: of the write it reads back).
fn msg_len(i: u32, messages: u32, max: u32, pmtu: u32) -> u32 {
    if i >= messages {
        return FIN_LEN.min(max);
    }
    let i = if kind(i, messages) == Kind::Read {
        i - 1
    } else {
        i
    };
    let h = mix(u64::from(i));
    let edges = [
        1,
        2,
        pmtu - 1,
        pmtu,
        pmtu + 1,
        4095,
        4096,
        4097,
        16384,
        max - 1,
        max,
    ];
    let len = if i % 3 == 0 {
        edges[(h >> 8) as usize % edges.len()]
    } else {
        1 + (h % u64::from(max)) as u32
    };
    len.clamp(1, max)
}

/// The pattern byte `j` of message `i`.
fn pattern(i: u32, j: usize) -> u8 {
    let b = mix(u64::from(i) ^ 0xD1B5_4A32_D192_ED03);
    (b >> ((j % 8) * 8)) as u8 ^ (j as u8) ^ ((j >> 8) as u8).wrapping_mul(31)
}

fn fill(i: u32, len: u32) -> Vec<u8> {
    (0..len as usize).map(|j| pattern(i, j)).collect()
}

/// `None` when `got` is the pattern of message `i`, else where it differs.
fn mismatch(i: u32, got: &[u8]) -> Option<usize> {
    got.iter()
        .enumerate()
        .position(|(j, &b)| b != pattern(i, j))
}

fn write_slot(i: u32) -> u32 {
    i % WRITE_SLOTS
}

// ---- Out-of-band connection parameters --------------------------------

#[derive(Clone, Copy, Debug)]
struct Info {
    qpn: u32,
    psn: u32,
    rkey: u32,
    write_va: u64,
    messages: u32,
    size: u32,
    pmtu: u32,
}

impl Info {
    fn to_json(self, role: Role) -> Value {
        json!({
            "role": format!("{role:?}").to_lowercase(),
            "qpn": self.qpn,
            "psn": self.psn,
            "rkey": self.rkey,
            "write_va": self.write_va,
            "messages": self.messages,
            "size": self.size,
            "pmtu": self.pmtu,
        })
    }

    fn from_json(v: &Value) -> Option<Info> {
        let u = |k: &str| v.get(k).and_then(Value::as_u64);
        let u32_ = |k: &str| u(k).and_then(|x| u32::try_from(x).ok());
        Some(Info {
            qpn: u32_("qpn")?,
            psn: u32_("psn")?,
            rkey: u32_("rkey")?,
            write_va: u("write_va")?,
            messages: u32_("messages")?,
            size: u32_("size")?,
            pmtu: u32_("pmtu")?,
        })
    }
}

pub(crate) fn write_info(path: &Path, v: &Value) -> Result<(), String> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, format!("{v}\n"))
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

fn read_info(path: &Path, deadline: Instant) -> Result<Info, String> {
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
            return Info::from_json(&v)
                .ok_or_else(|| format!("{}: missing or bad fields: {v}", path.display()));
        }
        if Instant::now() >= deadline {
            return Err(format!("timed out waiting for {}", path.display()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---- The run -----------------------------------------------------------

/// Runs `metaroce-ref peer`.
pub fn main(args: &PeerArgs) -> ExitCode {
    let start = Instant::now();
    let mut summary = json!({
        "role": format!("{:?}", args.role).to_lowercase(),
        "profile": format!("{:?}", args.profile).to_lowercase(),
        "messages": args.messages,
    });
    let result = run(args, &mut summary);
    crate::endpoint::finish(
        &format!("metaroce-ref peer ({:?})", args.role),
        start,
        result,
        summary,
    )
}

struct Setup {
    driver: RawDriver,
    cq: CqHandle,
    qpn: u32,
    mr: MrInfo,
    peer: Info,
}

fn run(args: &PeerArgs, summary: &mut Value) -> Result<(), String> {
    if !matches!(args.pmtu, 256 | 512 | 1024 | 2048 | 4096) {
        return Err(format!("--pmtu {}: not a valid path MTU", args.pmtu));
    }
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    let mut setup = setup(args, deadline)?;
    let outcome = match args.role {
        Role::Client => client(args, &mut setup, deadline),
        Role::Server => server(args, &mut setup, deadline),
    };
    let s = setup.driver.stats();
    summary["driver"] = json!({
        "frames_in": s.frames_in, "frames_out": s.frames_out,
        "bytes_in": s.bytes_in, "bytes_out": s.bytes_out,
        "frames_filtered": s.frames_filtered, "rx_oversize": s.rx_oversize,
        "rx_errors": s.rx_errors, "tx_errors": s.tx_errors,
        "last_error": setup.driver.last_error(),
    });
    summary["device"] = device_summary(setup.driver.device());
    outcome
}

fn setup(args: &PeerArgs, deadline: Instant) -> Result<Setup, String> {
    let mut driver = open_device(&DeviceOptions {
        iface: &args.iface,
        mac: args.mac,
        ip: args.ip,
        seed: args.seed,
        window: Some(args.window),
        tick_ms: Some(args.tick_ms),
        per_frame: false,
    })?;
    let dev = driver.device_mut();
    let qp = create_rc_qp(dev, false)?;
    let (pd, cq, qpn, psn) = (qp.pd, qp.cq, qp.qpn, qp.psn);
    let size = u64::from(args.size);
    let (len, access) = match args.role {
        // source slots, then READ destination slots
        Role::Client => (2 * u64::from(args.depth) * size, Access::LOCAL_WRITE),
        // receive slots, then write slots
        Role::Server => (
            u64::from(RECV_SLOTS + WRITE_SLOTS) * size,
            Access(Access::LOCAL_WRITE.0 | Access::REMOTE_WRITE.0 | Access::REMOTE_READ.0),
        ),
    };
    let len = usize::try_from(len).map_err(|_| "buffer too large".to_string())?;
    let mr = dev.reg_mr(pd, len, access).map_err(e("reg_mr"))?;
    if args.role == Role::Server {
        for k in 0..RECV_SLOTS {
            post_recv(dev, qpn, &mr, size, u64::from(k))?;
        }
    }
    let me = Info {
        qpn,
        psn,
        rkey: mr.rkey,
        write_va: mr.addr + u64::from(RECV_SLOTS) * size,
        messages: args.messages,
        size: args.size,
        pmtu: args.pmtu,
    };
    write_info(&args.info_out, &me.to_json(args.role))?;
    let peer = read_info(&args.info_in, deadline)?;
    if (peer.messages, peer.size, peer.pmtu) != (me.messages, me.size, me.pmtu) {
        return Err(format!(
            "the peer runs another programme: messages/size/pmtu {}/{}/{} here, {}/{}/{} there",
            me.messages, me.size, me.pmtu, peer.messages, peer.size, peer.pmtu
        ));
    }
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
            rd_atomic: 16,
            min_rnr_timer: 1,
            mp: None,
        },
    )?;
    Ok(Setup {
        driver,
        cq,
        qpn,
        mr,
        peer,
    })
}

/// Prefixes an error with what failed.
fn post_recv(dev: &mut Device, qpn: u32, mr: &MrInfo, size: u64, wr_id: u64) -> Result<(), String> {
    let size = u32::try_from(size).map_err(|_| "message size too large".to_string())?;
    post_recv_slot(dev, qpn, mr, (0, u64::from(RECV_SLOTS)), size, wr_id)
}

fn client(args: &PeerArgs, s: &mut Setup, deadline: Instant) -> Result<(), String> {
    let (n, max, depth) = (args.messages, args.size, args.depth);
    let size = u64::from(max);
    let (mr, qpn, cq, peer) = (s.mr, s.qpn, s.cq, s.peer);
    let total = n + 1;
    let (mut posted, mut completed) = (0u32, 0u32);
    let mut failure: Option<String> = None;
    let outcome = s
        .driver
        .run_until(deadline, |dev| {
            let wcs = match dev.poll_cq(cq, 64) {
                Ok(w) => w,
                Err(e) => {
                    failure = Some(format!("poll_cq: {e}"));
                    return true;
                }
            };
            for wc in wcs {
                let i = completed;
                let k = kind(i, n);
                let want = match k {
                    Kind::Send => WcOpcode::Send,
                    Kind::Write | Kind::WriteImm => WcOpcode::RdmaWrite,
                    Kind::Read => WcOpcode::RdmaRead,
                };
                if wc.status != WcStatus::Success || wc.wr_id != u64::from(i) || wc.opcode != want {
                    failure = Some(format!("message {i} ({k:?}): completion {wc:?}"));
                    return true;
                }
                if k == Kind::Read {
                    let len = msg_len(i, n, max, args.pmtu);
                    let va = mr.addr + (u64::from(depth) + u64::from(i % depth)) * size;
                    match dev.read_mr(mr.lkey, va, u64::from(len)) {
                        Ok(got) => {
                            if let Some(j) = mismatch(i - 1, got) {
                                failure = Some(format!(
                                    "message {i} (READ of {len} bytes): byte {j} differs"
                                ));
                                return true;
                            }
                        }
                        Err(e) => {
                            failure = Some(format!("read_mr: {e}"));
                            return true;
                        }
                    }
                }
                completed += 1;
            }
            while posted < total && posted - completed < depth {
                if let Err(e) = post(dev, args, &mr, qpn, &peer, posted) {
                    failure = Some(e);
                    return true;
                }
                posted += 1;
            }
            completed == total
        })
        .map_err(|e| e.to_string())?;
    if let Some(f) = failure {
        return Err(f);
    }
    if outcome == RunOutcome::Deadline {
        return Err(format!(
            "time limit: {completed} of {total} work requests completed ({posted} posted)"
        ));
    }
    Ok(())
}

fn post(
    dev: &mut Device,
    args: &PeerArgs,
    mr: &MrInfo,
    qpn: u32,
    peer: &Info,
    i: u32,
) -> Result<(), String> {
    let (n, max, depth) = (args.messages, args.size, args.depth);
    let size = u64::from(max);
    let len = msg_len(i, n, max, args.pmtu);
    let k = kind(i, n);
    let slot_va = |slot: u32| peer.write_va + u64::from(slot) * size;
    let src = mr.addr + u64::from(i % depth) * size;
    let (op, addr) = match k {
        Kind::Send => (WrOp::Send, src),
        Kind::WriteImm => (
            WrOp::WriteImm(
                RemoteAddr {
                    va: slot_va(write_slot(i)),
                    rkey: peer.rkey,
                },
                i,
            ),
            src,
        ),
        Kind::Write => (
            WrOp::Write(RemoteAddr {
                va: slot_va(write_slot(i)),
                rkey: peer.rkey,
            }),
            src,
        ),
        Kind::Read => (
            WrOp::Read(RemoteAddr {
                va: slot_va(write_slot(i - 1)),
                rkey: peer.rkey,
            }),
            mr.addr + (u64::from(depth) + u64::from(i % depth)) * size,
        ),
    };
    if k != Kind::Read {
        dev.write_mr(mr.lkey, src, &fill(i, len))
            .map_err(|e| format!("write_mr: {e}"))?;
    }
    let wr = SendWr::new(
        u64::from(i),
        op,
        vec![Sge {
            addr,
            len,
            lkey: mr.lkey,
        }],
    );
    dev.post_send(qpn, wr)
        .map_err(|e| format!("post_send {i}: {e}"))
}

fn server(args: &PeerArgs, s: &mut Setup, deadline: Instant) -> Result<(), String> {
    let (n, max) = (args.messages, args.size);
    let size = u64::from(max);
    let (mr, cq, qpn) = (s.mr, s.cq, s.qpn);
    // Messages that consume a receive, in order, then the final SEND.
    let mut expected = (0..n)
        .filter(|&i| matches!(kind(i, n), Kind::Send | Kind::WriteImm))
        .chain(std::iter::once(n));
    let mut next_recv = 0u64;
    let mut finished = false;
    let mut failure: Option<String> = None;
    let write_va = mr.addr + u64::from(RECV_SLOTS) * size;
    let outcome = s
        .driver
        .run_until(deadline, |dev| {
            let wcs = match dev.poll_cq(cq, 64) {
                Ok(w) => w,
                Err(e) => {
                    failure = Some(format!("poll_cq: {e}"));
                    return true;
                }
            };
            for wc in wcs {
                let Some(i) = expected.next() else {
                    failure = Some(format!("unexpected completion {wc:?}"));
                    return true;
                };
                let len = msg_len(i, n, max, args.pmtu);
                let k = kind(i, n);
                if wc.status != WcStatus::Success || wc.wr_id != next_recv {
                    failure = Some(format!("message {i} ({k:?}): completion {wc:?}"));
                    return true;
                }
                let (va, ok) = match k {
                    Kind::Send => (
                        mr.addr + (next_recv % u64::from(RECV_SLOTS)) * size,
                        wc.opcode == WcOpcode::Recv && wc.byte_len == len,
                    ),
                    _ => (
                        write_va + u64::from(write_slot(i)) * size,
                        wc.opcode == WcOpcode::RecvRdmaWithImm && wc.imm == Some(i),
                    ),
                };
                if !ok {
                    failure = Some(format!("message {i} ({k:?}) of {len} bytes: {wc:?}"));
                    return true;
                }
                match dev.read_mr(mr.lkey, va, u64::from(len)) {
                    Ok(got) => {
                        if let Some(j) = mismatch(i, got) {
                            failure = Some(format!("message {i} ({k:?}): byte {j} differs"));
                            return true;
                        }
                    }
                    Err(e) => {
                        failure = Some(format!("read_mr: {e}"));
                        return true;
                    }
                }
                if let Err(e) = post_recv(dev, qpn, &mr, size, next_recv + u64::from(RECV_SLOTS)) {
                    failure = Some(e);
                    return true;
                }
                next_recv += 1;
                if i == n {
                    finished = true;
                    return true;
                }
            }
            false
        })
        .map_err(|e| e.to_string())?;
    if let Some(f) = failure {
        return Err(f);
    }
    if outcome == RunOutcome::Deadline || !finished {
        return Err(format!(
            "time limit: {next_recv} receives completed, final SEND not seen"
        ));
    }
    // Every slot holds the last write into it (RC: all landed before the
    // final SEND).
    let dev = s.driver.device();
    for slot in 0..WRITE_SLOTS {
        let last = (0..n)
            .rev()
            .find(|&i| matches!(kind(i, n), Kind::Write | Kind::WriteImm) && write_slot(i) == slot);
        if let Some(i) = last {
            let len = msg_len(i, n, max, args.pmtu);
            let got = dev
                .read_mr(mr.lkey, write_va + u64::from(slot) * size, u64::from(len))
                .map_err(|e| format!("read_mr: {e}"))?;
            if let Some(j) = mismatch(i, got) {
                return Err(format!(
                    "write slot {slot}: message {i} of {len} bytes, byte {j} differs"
                ));
            }
        }
    }
    // Linger until quiet, so a lost ACK of the final SEND can be repeated.
    linger(
        &mut s.driver,
        deadline,
        Duration::from_millis(args.linger_ms),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_stay_in_range_and_reads_mirror_writes() {
        for max in [1, 2, 100, 1024, 65536] {
            for i in 0..400 {
                let len = msg_len(i, 200, max, 1024);
                assert!((1..=max).contains(&len), "{i} {max} {len}");
                if kind(i, 200) == Kind::Read {
                    assert_eq!(len, msg_len(i - 1, 200, max, 1024));
                }
            }
        }
        assert_eq!(kind(200, 200), Kind::Send);
        assert_eq!(msg_len(200, 200, 65536, 1024), FIN_LEN);
    }

    #[test]
    fn patterns_differ_between_messages() {
        let a = fill(5, 4096);
        assert_eq!(mismatch(5, &a), None);
        assert!(mismatch(6, &a).is_some());
    }

    #[test]
    fn arguments_parse() {
        assert_eq!(parse_mac("02:99:00:00:00:0a"), Ok([2, 0x99, 0, 0, 0, 10]));
        assert!(parse_mac("02:99:00:00:00").is_err());
        assert!(parse_mac("02:99:00:00:00:zz").is_err());
        assert_eq!(parse_seed(&"ab".repeat(32)), Ok([0xab; 32]));
        assert!(parse_seed("ab").is_err());
        assert!(parse_seed(&"é".repeat(32)).is_err());
    }
}
