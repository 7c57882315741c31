//! What `peer`, `perf` and `pingpong` share: a device opened on an
//! interface, one RC QP brought to INIT, its connection to RTS, and receive
//! work requests posted into fixed-size buffer slots.

use crate::peer::fresh_seed;
use core::net::Ipv4Addr;
use metaroce_ref::drivers::raw::{CATCH_UP_AFTER, RawConfig, RawDriver, Service, interface_mac};
use metaroce_ref::{
    Access, AddressVector, CqHandle, Device, DeviceConfig, MpAttrs, MrInfo, PdHandle, QpAttrs,
    QpInit, QpState, QpType, RecvWr, Sge,
};
use std::time::{Duration, Instant};

/// Ends a command's run: the elapsed time, `ok` (and `error`) into its JSON
/// summary, the summary on standard output, the error on standard error
/// after `who` (`metaroce-ref perf (Client)`), and the exit code.
pub(crate) fn finish(
    who: &str,
    start: std::time::Instant,
    result: Result<(), String>,
    mut summary: serde_json::Value,
) -> std::process::ExitCode {
    use serde_json::json;
    summary["elapsed_ms"] = json!(start.elapsed().as_millis() as u64);
    let code = match result {
        Ok(()) => {
            summary["ok"] = json!(true);
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{who}: {e}");
            summary["ok"] = json!(false);
            summary["error"] = json!(e);
            std::process::ExitCode::FAILURE
        }
    };
    println!("{summary}");
    code
}

/// Maps an error to `"what: error"`.
pub(crate) fn e<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |err| format!("{what}: {err}")
}

/// How to open the device.
pub(crate) struct DeviceOptions<'a> {
    /// Interface for AF_PACKET.
    pub iface: &'a str,
    /// The device's MAC; `None` takes the interface's.
    pub mac: Option<[u8; 6]>,
    /// The device's IPv4 address.
    pub ip: Ipv4Addr,
    /// Seed of keys and PSNs; `None` draws a fresh one.
    pub seed: Option<[u8; 32]>,
    /// Most PSNs outstanding (the device's default when `None`).
    pub window: Option<u32>,
    /// Driver tick (the driver's default when `None`).
    pub tick_ms: Option<u64>,
    /// Service the device after every received frame instead of once per
    /// receive batch (`RawConfig::service`; `perf --service-per-frame`,
    /// for comparisons).
    pub per_frame: bool,
}

/// Opens a device on an interface behind the raw-socket driver.
pub(crate) fn open_device(o: &DeviceOptions<'_>) -> Result<RawDriver, String> {
    let mac = match o.mac {
        Some(m) => m,
        None => interface_mac(o.iface).map_err(|e| e.to_string())?,
    };
    let seed = match o.seed {
        Some(s) => s,
        None => fresh_seed()?,
    };
    let mut config = DeviceConfig::new(mac, o.ip);
    if let Some(window) = o.window {
        config.max_outstanding_psns = window;
    }
    let mut raw = RawConfig {
        // Data movers: no copy of every sent frame back to the socket.
        ipv4_only: true,
        // Frames that waited while the process was off the CPU before
        // timers (a spurious retransmission timeout otherwise).
        catch_up_after: Some(CATCH_UP_AFTER),
        // One acknowledgement per receive batch rather than one per
        // coalescing interval of the time the batch takes to read, all
        // leaving together at its end.
        service: if o.per_frame {
            Service::PerFrame
        } else {
            Service::PerBatch
        },
        ..RawConfig::default()
    };
    if let Some(ms) = o.tick_ms {
        raw.tick = Duration::from_millis(ms);
    }
    RawDriver::open(o.iface, Device::new(config, seed), raw).map_err(|e| e.to_string())
}

/// One RC QP in INIT, with its PD, CQ (send and receive) and first PSN.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RcQp {
    pub pd: PdHandle,
    pub cq: CqHandle,
    pub qpn: u32,
    pub psn: u32,
}

/// Creates a PD, a CQ and an RC QP, draws its first PSN and moves it to INIT
/// with every remote access.
pub(crate) fn create_rc_qp(dev: &mut Device, sq_sig_all: bool) -> Result<RcQp, String> {
    let pd = dev.alloc_pd();
    let cq = dev.create_cq();
    let qpn = dev
        .create_qp(QpInit {
            qp_type: QpType::Rc,
            pd,
            send_cq: cq,
            recv_cq: cq,
            sq_sig_all,
        })
        .map_err(e("create_qp"))?;
    let psn = dev.random_psn();
    dev.modify_qp(
        qpn,
        QpState::Init,
        &QpAttrs {
            access: Some(Access::ALL),
            ..Default::default()
        },
    )
    .map_err(e("modify_qp INIT"))?;
    Ok(RcQp { pd, cq, qpn, psn })
}

/// The peer and the connection's attributes.
pub(crate) struct Connection {
    pub peer_qpn: u32,
    pub peer_psn: u32,
    pub peer_ip: Ipv4Addr,
    pub peer_mac: [u8; 6],
    pub pmtu: u32,
    /// Local ACK timeout exponent.
    pub ack_timeout: u8,
    /// Both `max_rd_atomic` and `max_dest_rd_atomic`.
    pub rd_atomic: u8,
    pub min_rnr_timer: u8,
    /// MP (SPEC §7) with these attributes, negotiated on INIT→RTR; `None`
    /// keeps the QP Base.
    pub mp: Option<MpAttrs>,
}

/// Moves `qp` through RTR (with the MP attributes, if any) to RTS towards
/// the peer (retry_cnt and rnr_retry 7).
pub(crate) fn connect_rc(dev: &mut Device, qp: &RcQp, c: &Connection) -> Result<(), String> {
    let rtr = QpAttrs {
        dest_qpn: Some(c.peer_qpn),
        rq_psn: Some(c.peer_psn),
        pmtu: Some(c.pmtu),
        path: Some(AddressVector {
            dest_ip: c.peer_ip,
            dest_mac: c.peer_mac,
            traffic_class: 0,
            hop_limit: 64,
        }),
        max_dest_rd_atomic: Some(c.rd_atomic),
        min_rnr_timer: Some(c.min_rnr_timer),
        ..Default::default()
    };
    match &c.mp {
        Some(mp) => dev.modify_qp_mp(qp.qpn, &rtr, mp),
        None => dev.modify_qp(qp.qpn, QpState::Rtr, &rtr),
    }
    .map_err(e("modify_qp RTR"))?;
    dev.modify_qp(
        qp.qpn,
        QpState::Rts,
        &QpAttrs {
            sq_psn: Some(qp.psn),
            timeout: Some(c.ack_timeout),
            retry_cnt: Some(7),
            rnr_retry: Some(7),
            max_rd_atomic: Some(c.rd_atomic),
            ..Default::default()
        },
    )
    .map_err(e("modify_qp RTS"))
}

/// Runs the device until no frame has arrived for `quiet` (or until
/// `deadline`), so that a lost acknowledgement of the last message can
/// still be repeated.
pub(crate) fn linger(
    driver: &mut RawDriver,
    deadline: Instant,
    quiet: Duration,
) -> Result<(), String> {
    let mut seen = driver.device().counters().frames_received;
    let mut since = Instant::now();
    driver
        .run_until(deadline, |dev| {
            let now_seen = dev.counters().frames_received;
            if now_seen != seen {
                seen = now_seen;
                since = Instant::now();
            }
            since.elapsed() >= quiet
        })
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The device counters of a Base run's JSON summary (`peer`, `pingpong`).
pub(crate) fn device_summary(dev: &Device) -> serde_json::Value {
    let c = dev.counters();
    serde_json::json!({
        "frames_received": c.frames_received, "frames_sent": c.frames_sent,
        "retransmitted_packets": c.retransmitted_packets,
        "local_ack_timeouts": c.local_ack_timeouts,
        "seq_naks_sent": c.seq_naks_sent, "rnr_naks_sent": c.rnr_naks_sent,
        "duplicate_requests": c.duplicate_requests,
        "icrc_errors": c.icrc_errors, "malformed_drops": c.malformed_drops,
        "unknown_qp_drops": c.unknown_qp_drops,
    })
}

/// Posts receive `wr_id` into slot `first_slot + wr_id % slots` of `mr`,
/// slots being `size` bytes each.
pub(crate) fn post_recv_slot(
    dev: &mut Device,
    qpn: u32,
    mr: &MrInfo,
    (first_slot, slots): (u64, u64),
    size: u32,
    wr_id: u64,
) -> Result<(), String> {
    let slot = first_slot + wr_id % slots.max(1);
    let wr = RecvWr {
        wr_id,
        sg_list: vec![Sge {
            addr: mr.addr + slot * u64::from(size),
            len: size,
            lkey: mr.lkey,
        }],
    };
    dev.post_recv(qpn, wr).map_err(e("post_recv"))
}
