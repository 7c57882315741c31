//! `metaroce-ref perf`: throughput of one RC connection, Base or MP
//! (`--profile mp`, SPEC §7, negotiated on INIT→RTR), over the AF_PACKET
//! driver, in the manner of `ib_write_bw` / `ib_read_bw` /
//! `ib_send_bw`, and `--blast`, the ceiling of the link for frames of the
//! same size.
//!
//! Base or MP (`--op write|read|send`): the client keeps `--depth` work requests
//! of `--size` bytes outstanding until `--messages` have completed or
//! `--duration` seconds have passed, then sends a final SEND with
//! immediate; the server exposes memory (WRITE, READ) or keeps receives
//! posted (SEND), and exits after the final SEND once the link is quiet.
//! Setup is out of band, as in `peer`: each side writes its QPN, PSN, R_Key
//! and buffer address as JSON to `--info-out` and waits for the peer's at
//! `--info-in`. Data is not verified (that is `peer`'s job). The client's
//! timing, from the first post to the last completion, gives the goodput
//! (message bytes only); both sides print a final JSON line.
//!
//! Blast (`--blast`): the client sends one RoCE RC SEND-middle frame with a
//! payload of `min(--size, --pmtu)` bytes, built by the codec, as fast as
//! the socket takes it for `--duration` seconds: no device, no
//! reliability. The server counts the frames addressed to it and reports
//! the payload rate between the first and the last: what the link and the
//! socket path deliver, the ceiling for Base and MP. Both ends use the
//! transport's own port (`RawPort`): the same socket, receive buffer,
//! batched `sendmmsg` ([`SEND_BATCH`] frames a call) and receive path
//! (one `recv` a frame, `poll` only when the socket is empty), so the
//! ratio measures the transport, not a difference of socket handling.
//!
//! Exit status: 0 on success, 1 on an error completion, a setup error or
//! the time limit; 2 on bad arguments.

use crate::endpoint::{
    Connection, DeviceOptions, connect_rc, create_rc_qp, e, linger, open_device, post_recv_slot,
};
use crate::peer::{Role, parse_mac, parse_seed, write_info};
use clap::{Args, ValueEnum};
use core::net::Ipv4Addr;
use metaroce_codec::{Opcode, PacketBuilder};
use metaroce_ref::drivers::raw::{RawConfig, RawDriver, RawPort, SEND_BATCH, interface_mac};
use metaroce_ref::{
    Access, CqHandle, Device, MpAttrs, MpTuning, MrInfo, RemoteAddr, SendWr, Sge, WcOpcode,
    WcStatus, WrOp,
};
use serde_json::{Value, json};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Immediate of the client's final SEND.
const FIN_IMM: u32 = 0xF1F1_F1F1;
/// Length of the final SEND.
const FIN_LEN: u32 = 8;
/// Receives the server keeps posted in SEND mode, at least.
const MIN_RECVS: u32 = 64;
/// The blast receiver stops after this long without a frame (once some
/// arrived).
const BLAST_IDLE: Duration = Duration::from_secs(1);
/// The blast receiver's longest wait for one frame.
const BLAST_WAIT: Duration = Duration::from_millis(10);
/// Interval of the progress line.
const PROGRESS: Duration = Duration::from_secs(1);

/// The operation measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Op {
    /// RDMA WRITE into the server's memory.
    Write,
    /// RDMA READ from the server's memory.
    Read,
    /// SEND into the server's posted receives.
    Send,
}

/// The transport profile of the connection measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Profile {
    /// RoCEv2 RC with go-back-N.
    Base,
    /// MP (SPEC §7): sprayed over an entropy set, selective
    /// acknowledgement and retransmission, congestion control.
    Mp,
}

/// Arguments of `metaroce-ref perf`.
#[derive(Debug, Args)]
pub struct PerfArgs {
    /// Interface to open (AF_PACKET; needs root or CAP_NET_RAW).
    #[arg(long)]
    iface: String,
    /// Server (responder, or blast receiver) or client (requester, or blast
    /// sender).
    #[arg(long, value_enum)]
    role: Role,
    /// Raw frames without the transport: the link's ceiling.
    #[arg(long)]
    blast: bool,
    /// Operation (both ends must agree).
    #[arg(long, value_enum, default_value_t = Op::Write)]
    op: Op,
    /// Transport profile (both ends must agree): Base, or MP negotiated on
    /// INIT→RTR with `--mp-window` and the SPEC §10.3 constants.
    #[arg(long, value_enum, default_value_t = Profile::Base)]
    profile: Profile,
    /// MP: `mp_window` W in PSNs (64–16384).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(64..=16384))]
    mp_window: u32,
    /// MP: `mp_rto_min` in µs (10–10000; SPEC §10.3 default 100). A
    /// shared machine's scheduling delays exceed 100 µs often; each is a
    /// spurious RTO (a retransmission, a retired entropy value, a
    /// decrease), as `--ack-timeout` is for Base.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(10..=10_000))]
    mp_rto_min_us: u64,
    /// MP: `mp_reorder_threshold` K (1–64; SPEC §10.3 default 32 since
    /// 2026-12-01; this command keeps 3, the value docs/speed.md was
    /// measured with). A veth reorders when the sending process moves to
    /// the other core between two batches (each core's backlog is
    /// processed apart).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..=64))]
    mp_reorder_threshold: u8,
    /// MP: `mp_ack_coalesce_time` in µs (1–64; SPEC §10.3 default 8). The
    /// responder acknowledges at the latest this long after the first
    /// packet not yet acknowledged (MR-MPA-2): shorter than the gap between
    /// two frames on a link slower than the fabric §10.3 has in mind, it
    /// makes an ACK of nearly every packet.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=64))]
    mp_ack_coalesce_us: u64,
    /// MP: `mp_target_qdelay` in µs (1–1000; SPEC §10.3 default 10): an
    /// RTT sample more than this above the smallest one is a late signal
    /// (no increase of cwnd, congestion evidence for a loss, §7.12).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1000))]
    mp_target_qdelay_us: u64,
    /// Message size in bytes (blast: frames carry min(size, pmtu)).
    #[arg(long, default_value_t = 65536, value_parser = clap::value_parser!(u32).range(1..=(1 << 24)))]
    size: u32,
    /// Messages to complete (Base client); ignored with --duration.
    #[arg(long, default_value_t = 10000)]
    messages: u64,
    /// Seconds to run instead of a message count (Base client, blast
    /// sender).
    #[arg(long)]
    duration: Option<f64>,
    /// Work requests the client keeps outstanding.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    depth: u32,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 (frames must fit the link MTU).
    #[arg(long, default_value_t = 1024)]
    pmtu: u32,
    /// Largest span of unacknowledged PSNs per QP.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=(1 << 23) - 1))]
    window: u32,
    /// Local ACK timeout exponent (4.096 µs × 2^n; 14 is 67 ms: on a
    /// loaded 2-core machine 12, 17 ms, fired spuriously).
    #[arg(long, default_value_t = 14)]
    ack_timeout: u8,
    /// Local MAC address (default: the interface's).
    #[arg(long, value_parser = parse_mac)]
    mac: Option<[u8; 6]>,
    /// Local IPv4 address of the device (not configured on the interface).
    #[arg(long, default_value = "10.99.0.1")]
    ip: Ipv4Addr,
    /// The peer's MAC address (static neighbour; no ARP).
    #[arg(long, value_parser = parse_mac)]
    peer_mac: [u8; 6],
    /// The peer's IPv4 address.
    #[arg(long, default_value = "10.99.0.2")]
    peer_ip: Ipv4Addr,
    /// File this end writes its connection parameters to (JSON). Blast:
    /// the receiver writes it when ready.
    #[arg(long)]
    info_out: Option<PathBuf>,
    /// File the peer writes its parameters to (waited for). Blast: the
    /// sender waits for it before sending.
    #[arg(long)]
    info_in: Option<PathBuf>,
    /// Time limit for the whole run, including waiting for the peer.
    #[arg(long, default_value_t = 60)]
    timeout_secs: u64,
    /// Server: quiet period after the final SEND before exiting.
    #[arg(long, default_value_t = 300)]
    linger_ms: u64,
    /// Driver tick in milliseconds (longest wait for a frame; 0 busy-polls).
    #[arg(long, default_value_t = 1)]
    tick_ms: u64,
    /// Service the device after every received frame (timers, then what it
    /// queued) rather than once per receive batch (the default), as the
    /// agent does: for comparing the two (`RawConfig::service`).
    #[arg(long)]
    service_per_frame: bool,
    /// 64 hex digits seeding PSNs, keys and QPNs (default: /dev/urandom).
    #[arg(long, value_parser = parse_seed)]
    seed: Option<[u8; 32]>,
}

/// Runs `metaroce-ref perf`.
pub fn main(args: &PerfArgs) -> ExitCode {
    let start = Instant::now();
    let mut summary = json!({
        "mode": match (args.blast, args.profile) {
            (true, _) => "blast",
            (false, Profile::Base) => "base",
            (false, Profile::Mp) => "mp",
        },
        "role": format!("{:?}", args.role).to_lowercase(),
        "op": if args.blast { "blast".to_string() } else { format!("{:?}", args.op).to_lowercase() },
        "size": args.size,
        "pmtu": args.pmtu,
    });
    let result = if !matches!(args.pmtu, 256 | 512 | 1024 | 2048 | 4096) {
        Err(format!("--pmtu {}: not a valid path MTU", args.pmtu))
    } else if args.duration.is_some_and(|d| !(d > 0.0 && d <= 3600.0)) {
        Err("--duration: between 0 and 3600 seconds".to_string())
    } else {
        let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
        match (args.blast, args.role) {
            (true, Role::Client) => blast_send(args, deadline, &mut summary),
            (true, Role::Server) => blast_receive(args, deadline, &mut summary),
            (false, role) => base(args, role, deadline, &mut summary),
        }
    };
    if !args.blast {
        summary["service"] = json!(if args.service_per_frame {
            "per-frame"
        } else {
            "per-batch"
        });
    }
    summary["cpu"] = cpu_report();
    crate::endpoint::finish(
        &format!("metaroce-ref perf ({:?})", args.role),
        start,
        result,
        summary,
    )
}

// ---- Reporting ---------------------------------------------------------

/// The process's time on a CPU and waiting for one, from
/// `/proc/self/schedstat` (Linux, `CONFIG_SCHED_INFO`): `on_cpu_s`
/// includes the kernel's work done in the process's context (sending a
/// frame over a veth delivers it to the peer's socket in the sender's
/// softirq), `runqueue_wait_s` is time runnable but not running (the other
/// processes on the machine's cores). `null` where unavailable.
fn cpu_report() -> Value {
    let Ok(text) = std::fs::read_to_string("/proc/self/schedstat") else {
        return Value::Null;
    };
    let mut f = text.split_whitespace().map(str::parse::<u64>);
    match (f.next(), f.next(), f.next()) {
        (Some(Ok(run)), Some(Ok(wait)), Some(Ok(slices))) => json!({
            "on_cpu_s": round3(run as f64 / 1e9),
            "runqueue_wait_s": round3(wait as f64 / 1e9),
            "timeslices": slices,
        }),
        _ => Value::Null,
    }
}

/// Goodput figures of `bytes` in `secs`.
fn rates(bytes: u64, messages: u64, secs: f64) -> Value {
    let secs = secs.max(1e-9);
    json!({
        "bytes": bytes,
        "seconds": (secs * 1e6).round() / 1e6,
        "gbps": round3(bytes as f64 * 8.0 / secs / 1e9),
        "mib_s": round3(bytes as f64 / secs / (1024.0 * 1024.0)),
        "msg_rate": round3(messages as f64 / secs),
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The progress line on stderr: rewritten in place on a terminal, one line
/// per interval otherwise.
struct Progress {
    start: Instant,
    last: Instant,
    last_bytes: u64,
    tty: bool,
    shown: bool,
}

impl Progress {
    fn new() -> Self {
        let now = Instant::now();
        Progress {
            start: now,
            last: now,
            last_bytes: 0,
            tty: std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    fn tick(&mut self, what: &str, bytes: u64, messages: u64, retrans: u64) {
        let now = Instant::now();
        let dt = now.duration_since(self.last);
        if dt < PROGRESS {
            return;
        }
        let gbps = (bytes - self.last_bytes) as f64 * 8.0 / dt.as_secs_f64() / 1e9;
        let line = format!(
            "{what}: {:5.1} s  {gbps:7.3} Gb/s  {messages} msgs  {retrans} retransmitted",
            now.duration_since(self.start).as_secs_f64()
        );
        let mut err = std::io::stderr().lock();
        let _ = if self.tty {
            write!(err, "\r{line}  ")
        } else {
            writeln!(err, "{line}")
        };
        self.last = now;
        self.last_bytes = bytes;
        self.shown = true;
    }

    fn finish(&self) {
        if self.tty && self.shown {
            eprintln!();
        }
    }
}

/// Gaps between two turns of the driver's loop: a turn waits at most one
/// tick for a frame, so a longer gap is time the process spent off the CPU
/// (or busy) while frames and timers waited. Diagnostics for spurious
/// retransmissions.
struct Stalls {
    last: Instant,
    /// Gaps of at least [`STALL`].
    count: u64,
    longest: Duration,
}

/// A gap between two turns of the loop counted as a stall.
const STALL: Duration = Duration::from_millis(5);

impl Stalls {
    fn new() -> Self {
        Stalls {
            last: Instant::now(),
            count: 0,
            longest: Duration::ZERO,
        }
    }

    fn turn(&mut self) {
        let now = Instant::now();
        let gap = now.duration_since(self.last);
        self.last = now;
        if gap >= STALL {
            self.count += 1;
        }
        self.longest = self.longest.max(gap);
    }

    fn report(&self) -> Value {
        json!({"over_5ms": self.count, "longest_ms": round3(self.longest.as_secs_f64() * 1e3)})
    }
}

// ---- Out-of-band parameters -------------------------------------------

fn read_json(path: &Path, deadline: Instant) -> Result<Value, String> {
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return serde_json::from_str(&text)
                .map_err(|e| format!("{}: not JSON: {e}", path.display()));
        }
        if Instant::now() >= deadline {
            return Err(format!("timed out waiting for {}", path.display()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn field(v: &Value, k: &str) -> Result<u64, String> {
    v.get(k)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("peer parameters: missing or bad {k:?}: {v}"))
}

fn u32_field(v: &Value, k: &str) -> Result<u32, String> {
    u32::try_from(field(v, k)?).map_err(|_| format!("peer parameters: {k:?} out of range"))
}

fn info_paths(args: &PerfArgs) -> Result<(&Path, &Path), String> {
    match (&args.info_out, &args.info_in) {
        (Some(o), Some(i)) => Ok((o, i)),
        _ => Err("--info-out and --info-in are required (out-of-band setup)".into()),
    }
}

// ---- Base --------------------------------------------------------------

struct Conn {
    driver: RawDriver,
    cq: CqHandle,
    qpn: u32,
    mr: MrInfo,
    /// Server: receives kept posted.
    recvs: u32,
    peer_rkey: u32,
    peer_va: u64,
}

fn base(args: &PerfArgs, role: Role, deadline: Instant, summary: &mut Value) -> Result<(), String> {
    let mut conn = connect(args, role, deadline)?;
    let outcome = match role {
        Role::Client => client(args, &mut conn, deadline, summary),
        Role::Server => server(args, &mut conn, deadline, summary),
    };
    let s = conn.driver.stats();
    let c = conn.driver.device().counters();
    summary["retransmitted_packets"] = json!(c.retransmitted_packets);
    summary["driver"] = json!({
        "frames_in": s.frames_in, "frames_out": s.frames_out,
        "bytes_in": s.bytes_in, "bytes_out": s.bytes_out,
        "rx_oversize": s.rx_oversize, "rx_errors": s.rx_errors, "tx_errors": s.tx_errors,
        "catch_ups": s.catch_ups,
        "socket_rx_buffer": conn.driver.port().socket_rx_buffer(),
    });
    summary["device"] = json!({
        "frames_received": c.frames_received, "frames_sent": c.frames_sent,
        "retransmitted_packets": c.retransmitted_packets,
        "local_ack_timeouts": c.local_ack_timeouts,
        "seq_naks_sent": c.seq_naks_sent, "rnr_naks_sent": c.rnr_naks_sent,
        "duplicate_requests": c.duplicate_requests,
        "mp_retx_reorder": c.mp_retx_reorder, "mp_retx_timeout": c.mp_retx_timeout,
        "mp_entropy_retired": c.mp_entropy_retired, "mp_probes_sent": c.mp_probes_sent,
    });
    if args.profile == Profile::Mp {
        // The MP QP's state at the end (cwnd, decreases, RTT): diagnostics.
        summary["mp_state"] = json!(conn.driver.device().mp_summary(conn.qpn));
    }
    outcome
}

fn connect(args: &PerfArgs, role: Role, deadline: Instant) -> Result<Conn, String> {
    let (info_out, info_in) = info_paths(args)?;
    let mut driver = open_device(&DeviceOptions {
        iface: &args.iface,
        mac: args.mac,
        ip: args.ip,
        seed: args.seed,
        window: Some(args.window),
        tick_ms: Some(args.tick_ms),
        per_frame: args.service_per_frame,
    })?;
    let dev = driver.device_mut();
    let qp = create_rc_qp(dev, false)?;
    let (pd, cq, qpn, psn) = (qp.pd, qp.cq, qp.qpn, qp.psn);
    let size = u64::from(args.size);
    let depth = u64::from(args.depth);
    // Server: receive slots, then the WRITE/READ region (depth slots).
    // Client: depth source/destination slots.
    let recvs = match args.op {
        Op::Send => MIN_RECVS.max(2 * args.depth),
        Op::Write | Op::Read => 4,
    };
    let (len, access) = match role {
        Role::Client => (depth * size, Access::LOCAL_WRITE),
        Role::Server => (
            (u64::from(recvs) + depth) * size,
            Access(Access::LOCAL_WRITE.0 | Access::REMOTE_WRITE.0 | Access::REMOTE_READ.0),
        ),
    };
    let len = usize::try_from(len).map_err(|_| "buffer too large".to_string())?;
    let mr = dev.reg_mr(pd, len, access).map_err(e("reg_mr"))?;
    // Something other than zeros to move.
    let pattern: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    dev.write_mr(mr.lkey, mr.addr, &pattern)
        .map_err(e("write_mr"))?;
    if role == Role::Server {
        for k in 0..u64::from(recvs) {
            post_recv(dev, qpn, &mr, size, recvs, k)?;
        }
    }
    let remote_base = mr.addr + u64::from(recvs) * size;
    let me = json!({
        "role": format!("{role:?}").to_lowercase(),
        "qpn": qpn, "psn": psn, "rkey": mr.rkey, "va": remote_base,
        "op": format!("{:?}", args.op).to_lowercase(),
        "profile": format!("{:?}", args.profile).to_lowercase(),
        "mp_window": args.mp_window, "mp_rto_min_us": args.mp_rto_min_us,
        "mp_reorder_threshold": args.mp_reorder_threshold,
        "mp_ack_coalesce_us": args.mp_ack_coalesce_us,
        "mp_target_qdelay_us": args.mp_target_qdelay_us,
        "size": args.size, "pmtu": args.pmtu, "depth": args.depth,
    });
    write_info(info_out, &me)?;
    let peer = read_json(info_in, deadline)?;
    for k in ["op", "profile", "mp_window", "size", "pmtu", "depth"] {
        if peer.get(k) != me.get(k) {
            return Err(format!(
                "the peer runs another test: {k} {} here, {} there",
                me[k],
                peer.get(k).unwrap_or(&Value::Null)
            ));
        }
    }
    connect_rc(
        dev,
        &qp,
        &Connection {
            peer_qpn: u32_field(&peer, "qpn")?,
            peer_psn: u32_field(&peer, "psn")?,
            peer_ip: args.peer_ip,
            peer_mac: args.peer_mac,
            pmtu: args.pmtu,
            ack_timeout: args.ack_timeout,
            rd_atomic: 16,
            min_rnr_timer: 1,
            mp: (args.profile == Profile::Mp).then(|| mp_attrs(args)),
        },
    )?;
    Ok(Conn {
        driver,
        cq,
        qpn,
        mr,
        recvs,
        peer_rkey: u32_field(&peer, "rkey")?,
        peer_va: field(&peer, "va")?,
    })
}

/// The MP attributes of `--profile mp`: the defaults (SPEC §10.3) but for
/// `mp_window`, `mp_rto_min` (and `mp_rto_init`, at least the minimum),
/// `mp_reorder_threshold`, `mp_ack_coalesce_time` and `mp_target_qdelay`.
fn mp_attrs(args: &PerfArgs) -> MpAttrs {
    let d = MpAttrs::default();
    let rto_min_ns = args.mp_rto_min_us * 1000;
    MpAttrs {
        window: args.mp_window,
        tuning: MpTuning {
            rto_min_ns,
            rto_init_ns: d.tuning.rto_init_ns.max(rto_min_ns),
            reorder_threshold: args.mp_reorder_threshold,
            ack_coalesce_time_ns: args.mp_ack_coalesce_us * 1000,
            target_qdelay_ns: args.mp_target_qdelay_us * 1000,
            ..d.tuning
        },
        ..d
    }
}

fn post_recv(
    dev: &mut Device,
    qpn: u32,
    mr: &MrInfo,
    size: u64,
    recvs: u32,
    wr_id: u64,
) -> Result<(), String> {
    let size = u32::try_from(size).map_err(|_| "message size too large".to_string())?;
    post_recv_slot(dev, qpn, mr, (0, u64::from(recvs)), size, wr_id)
}

fn client(
    args: &PerfArgs,
    c: &mut Conn,
    deadline: Instant,
    summary: &mut Value,
) -> Result<(), String> {
    let (size, depth) = (u64::from(args.size), u64::from(args.depth));
    let (mr, qpn, cq, rkey, peer_va) = (c.mr, c.qpn, c.cq, c.peer_rkey, c.peer_va);
    let op = args.op;
    let limit = match args.duration {
        Some(_) => u64::MAX,
        None => args.messages.max(1),
    };
    let stop_at = args
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    let (mut posted, mut completed) = (0u64, 0u64);
    let mut failure: Option<String> = None;
    let mut progress = Progress::new();
    let what = format!("{op:?} {size} B");
    let start = Instant::now();
    let mut end = start;
    let mut stalls = Stalls::new();
    let outcome = c
        .driver
        .run_until(deadline, |dev| {
            stalls.turn();
            let wcs = match dev.poll_cq(cq, 256) {
                Ok(w) => w,
                Err(err) => {
                    failure = Some(format!("poll_cq: {err}"));
                    return true;
                }
            };
            for wc in wcs {
                if wc.status != WcStatus::Success {
                    failure = Some(format!("message {completed}: completion {wc:?}"));
                    return true;
                }
                completed += 1;
            }
            let now = Instant::now();
            let stopping = stop_at.is_some_and(|t| now >= t);
            while !stopping && posted < limit && posted - completed < depth {
                let slot = posted % depth;
                let remote = RemoteAddr {
                    va: peer_va + slot * size,
                    rkey,
                };
                let wop = match op {
                    Op::Write => WrOp::Write(remote),
                    Op::Read => WrOp::Read(remote),
                    Op::Send => WrOp::Send,
                };
                let sge = Sge {
                    addr: mr.addr + slot * size,
                    len: args.size,
                    lkey: mr.lkey,
                };
                if let Err(err) = dev.post_send(qpn, SendWr::new(posted, wop, vec![sge])) {
                    failure = Some(format!("post_send {posted}: {err}"));
                    return true;
                }
                posted += 1;
            }
            let retrans = dev.counters().retransmitted_packets;
            progress.tick(&what, completed * size, completed, retrans);
            end = now;
            completed == posted && (completed >= limit || stopping)
        })
        .map_err(|err| err.to_string())?;
    progress.finish();
    let secs = end.duration_since(start).as_secs_f64();
    summary["posted"] = json!(posted);
    summary["completed"] = json!(completed);
    summary["depth"] = json!(args.depth);
    summary["window"] = json!(args.window);
    summary["goodput"] = rates(completed * size, completed, secs);
    summary["loop_stalls"] = stalls.report();
    if let Some(f) = failure {
        return Err(f);
    }
    if outcome != metaroce_ref::drivers::raw::RunOutcome::Done {
        return Err(format!(
            "time limit: {completed} of {posted} posted work requests completed"
        ));
    }
    // The final SEND tells the server to finish.
    let fin = SendWr::new(
        u64::MAX,
        WrOp::SendImm(FIN_IMM),
        vec![Sge {
            addr: mr.addr,
            len: FIN_LEN.min(args.size),
            lkey: mr.lkey,
        }],
    );
    c.driver
        .device_mut()
        .post_send(qpn, fin)
        .map_err(e("post_send (final)"))?;
    let mut done = false;
    c.driver
        .run_until(deadline, |dev| {
            match dev.poll_cq(cq, 16) {
                Ok(wcs) => {
                    for wc in wcs {
                        if wc.wr_id == u64::MAX {
                            done = true;
                            if wc.status != WcStatus::Success {
                                failure = Some(format!("final SEND: {wc:?}"));
                            }
                        }
                    }
                }
                Err(err) => failure = Some(format!("poll_cq: {err}")),
            }
            done || failure.is_some()
        })
        .map_err(|err| err.to_string())?;
    match failure {
        Some(f) => Err(f),
        None if !done => Err("time limit: the final SEND did not complete".into()),
        None => Ok(()),
    }
}

fn server(
    args: &PerfArgs,
    c: &mut Conn,
    deadline: Instant,
    summary: &mut Value,
) -> Result<(), String> {
    let size = u64::from(args.size);
    let (mr, qpn, cq, recvs) = (c.mr, c.qpn, c.cq, c.recvs);
    let mut next = u64::from(recvs);
    let (mut received, mut bytes) = (0u64, 0u64);
    let mut finished = false;
    let mut failure: Option<String> = None;
    let mut progress = Progress::new();
    let what = format!("server {:?} {size} B", args.op);
    let mut stalls = Stalls::new();
    let outcome = c
        .driver
        .run_until(deadline, |dev| {
            stalls.turn();
            let wcs = match dev.poll_cq(cq, 256) {
                Ok(w) => w,
                Err(err) => {
                    failure = Some(format!("poll_cq: {err}"));
                    return true;
                }
            };
            for wc in wcs {
                if wc.status != WcStatus::Success || wc.opcode != WcOpcode::Recv {
                    failure = Some(format!("completion {wc:?}"));
                    return true;
                }
                if wc.imm == Some(FIN_IMM) {
                    finished = true;
                    return true;
                }
                received += 1;
                bytes += u64::from(wc.byte_len);
                if let Err(err) = post_recv(dev, qpn, &mr, size, recvs, next) {
                    failure = Some(err);
                    return true;
                }
                next += 1;
            }
            // WRITE and READ leave no completion here: show frames instead.
            let shown = if args.op == Op::Send {
                bytes
            } else {
                dev.counters().frames_received
            };
            progress.tick(&what, shown, received, dev.counters().duplicate_requests);
            false
        })
        .map_err(|err| err.to_string())?;
    progress.finish();
    summary["received"] = json!(received);
    summary["received_bytes"] = json!(bytes);
    summary["loop_stalls"] = stalls.report();
    if let Some(f) = failure {
        return Err(f);
    }
    if outcome != metaroce_ref::drivers::raw::RunOutcome::Done || !finished {
        return Err("time limit: the final SEND was not seen".into());
    }
    // Linger until quiet, so a lost ACK of the final SEND can be repeated.
    linger(
        &mut c.driver,
        deadline,
        Duration::from_millis(args.linger_ms),
    )
}

// ---- Blast -------------------------------------------------------------

/// The blast frame: a RoCE RC SEND-middle of `min(size, pmtu)` payload
/// bytes, built by the codec.
fn blast_frame(args: &PerfArgs, mac: [u8; 6]) -> Vec<u8> {
    let payload = args.size.min(args.pmtu) as usize;
    PacketBuilder::new(Opcode::RC_SEND_MIDDLE)
        .macs(mac, args.peer_mac)
        .ipv4(args.ip, args.peer_ip)
        .dest_qp(0x000B_1A57)
        .psn(0)
        .payload((0..payload).map(|i| (i % 251) as u8).collect::<Vec<u8>>())
        .build()
}

/// The transport's own port, opened as `perf` opens the driver's
/// (`endpoint::open_device`): the same socket receive buffer, promiscuous,
/// IPv4 only.
fn open_port(iface: &str) -> Result<RawPort, String> {
    let config = RawConfig {
        ipv4_only: true,
        ..RawConfig::default()
    };
    RawPort::open(iface, config).map_err(|e| e.to_string())
}

fn blast_send(args: &PerfArgs, deadline: Instant, summary: &mut Value) -> Result<(), String> {
    let mac = match args.mac {
        Some(m) => m,
        None => interface_mac(&args.iface).map_err(|e| e.to_string())?,
    };
    let frame = blast_frame(args, mac);
    let batch = [frame.as_slice(); SEND_BATCH];
    let mut port = open_port(&args.iface)?;
    if let Some(ready) = &args.info_in {
        read_json(ready, deadline)?;
    }
    let duration = Duration::from_secs_f64(args.duration.unwrap_or(5.0));
    let payload = u64::from(args.size.min(args.pmtu));
    let (mut sent, mut errors) = (0u64, 0u64);
    let mut last_error = None;
    let mut progress = Progress::new();
    let start = Instant::now();
    let stop = (start + duration).min(deadline);
    loop {
        // One batch a system call, as the driver sends; the time is checked
        // every batch.
        let before = port.stats().tx_errors;
        sent += port.send_all(&batch) as u64;
        let failed = port.stats().tx_errors - before;
        if failed > 0 {
            errors += failed;
            last_error = port.last_error().map(str::to_string);
        }
        progress.tick("blast send", sent * payload, sent, 0);
        if Instant::now() >= stop {
            break;
        }
    }
    progress.finish();
    let secs = start.elapsed().as_secs_f64();
    summary["frame_len"] = json!(frame.len());
    summary["payload"] = json!(payload);
    summary["sent"] = json!(sent);
    summary["tx_errors"] = json!(errors);
    summary["last_error"] = json!(last_error);
    summary["goodput"] = rates(sent * payload, sent, secs);
    Ok(())
}

fn blast_receive(args: &PerfArgs, deadline: Instant, summary: &mut Value) -> Result<(), String> {
    let mac = match args.mac {
        Some(m) => m,
        None => interface_mac(&args.iface).map_err(|e| e.to_string())?,
    };
    let expect = blast_frame(args, args.peer_mac);
    let mut port = open_port(&args.iface)?;
    if let Some(ready) = &args.info_out {
        write_info(ready, &json!({"role": "server", "blast": true}))?;
    }
    let payload = u64::from(args.size.min(args.pmtu));
    let (mut frames, mut other) = (0u64, 0u64);
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    let mut progress = Progress::new();
    loop {
        let now = Instant::now();
        if now >= deadline || last.is_some_and(|l| now.duration_since(l) >= BLAST_IDLE) {
            break;
        }
        // The driver's receive path (addressed to us, not from us); then
        // ours: same length, RoCEv2 (UDP 4791).
        let ours = port
            .recv_with(mac, BLAST_WAIT, |f| {
                f.len() == expect.len() && f.get(36..38) == Some(&[0x12, 0xB7][..])
            })
            .map_err(|e| e.to_string())?;
        match ours {
            Some(true) => {
                let t = Instant::now();
                first.get_or_insert(t);
                last = Some(t);
                frames += 1;
            }
            Some(false) => other += 1,
            None => {}
        }
        progress.tick("blast receive", frames * payload, frames, 0);
    }
    progress.finish();
    summary["received"] = json!(frames);
    let stats = port.stats();
    summary["other_frames"] = json!(other + stats.frames_filtered);
    summary["rx_errors"] = json!(stats.rx_errors);
    let secs = match (first, last) {
        (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
        _ => 0.0,
    };
    summary["goodput"] = rates(frames * payload, frames, secs);
    if frames == 0 {
        return Err("no blast frame received".into());
    }
    Ok(())
}
