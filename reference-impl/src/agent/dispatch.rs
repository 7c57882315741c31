//! The dispatcher: one request in, one reply out, over a [`Device`]. No
//! sockets, no clock: the server advances the device's time and moves its
//! frames; this module only turns requests into verbs calls.
//!
//! Every request is checked completely before the device is touched, so a
//! rejected request leaves the device and the agent's tables unchanged.

use super::mp::negotiate;
use super::profile::{MpLocal, reference_profile_with};
use crate::{
    Access, AddressVector, CqHandle, Device, DeviceConfig, MpAttrs, MpEntropy, MrInfo, PdHandle,
    QpAttrs, QpInit, QpState, QpType, RecvWr, RemoteAddr, SendWr, Sge, UdDest, VerbsError,
    WcOpcode, WcStatus, WorkCompletion, WrOp,
};
use metaroce_agent::CapabilityProfile;
use metaroce_agent::check::{check_poll, ipv4, obj, qpn24, room, unknown};
use metaroce_agent::encoding::{base64_encode, bytes_field, format_mac, hex_encode, parse_mac};
use metaroce_agent::protocol::*;
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// What the agent is and what it declares.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// Addresses and limits of the device.
    pub device: DeviceConfig,
    /// Seed of the device's generator; `reset` derives a fresh one from it.
    pub seed: [u8; 32],
    /// Implementation name reported by `hello`.
    pub implementation: String,
    /// Implementation version reported by `hello`.
    pub version: String,
    /// Capability profile reported by `hello` and enforced by the agent.
    pub profile: CapabilityProfile,
    /// The MP local constants of every MP QP (the profile declares them:
    /// [`AgentConfig::reference_with`] builds both from one value).
    pub mp_local: MpLocal,
}

impl AgentConfig {
    /// The reference transport's agent for a device with this configuration.
    /// A device built with a bug-zoo mutant (feature `zoo`) keeps it
    /// across `reset`, and `hello` names it in the implementation name.
    pub fn reference(device: DeviceConfig, seed: [u8; 32]) -> Self {
        Self::reference_with(device, seed, MpLocal::default())
    }

    /// [`AgentConfig::reference`] whose MP QPs use, and whose profile
    /// declares, the MP local constants `mp_local` (`serve --mp-timers`).
    pub fn reference_with(device: DeviceConfig, seed: [u8; 32], mp_local: MpLocal) -> Self {
        #[cfg(feature = "zoo")]
        let implementation = match device.mutant {
            Some(m) => format!("metaroce-ref (mutant {m})"),
            None => "metaroce-ref".into(),
        };
        #[cfg(not(feature = "zoo"))]
        let implementation = "metaroce-ref".into();
        AgentConfig {
            device,
            seed,
            implementation,
            version: env!("CARGO_PKG_VERSION").into(),
            profile: reference_profile_with(&device, &mp_local),
            mp_local,
        }
    }
}

/// What the server does with a request.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Send this reply.
    Reply(Reply),
    /// A `poll_cq` that found nothing and may wait: call
    /// [`Agent::try_poll`] as the data plane moves, and
    /// [`Agent::finish_poll`] once `wait_ms` has passed.
    Wait(PendingPoll),
    /// Send this reply, then close the connection (`bye`).
    Close(Reply),
}

impl Action {
    /// The reply, unless the request waits.
    pub fn reply(&self) -> Option<&Reply> {
        match self {
            Action::Reply(r) | Action::Close(r) => Some(r),
            Action::Wait(_) => None,
        }
    }
}

/// A waiting `poll_cq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingPoll {
    /// Request id.
    pub id: u64,
    /// The CQ.
    pub cq: u32,
    /// Most completions to return.
    pub max: u32,
    /// How long it may wait.
    pub wait_ms: u64,
}

#[derive(Clone, Copy, Debug)]
struct QpEntry {
    pd: u32,
    send_cq: u32,
    recv_cq: u32,
    sq_sig_all: bool,
    caps: QpCaps,
    /// `mp_flow_label_entropy` as accepted at INIT to RTR (the device,
    /// IPv4 only, has no flow label to put it in).
    mp_flow_label: bool,
}

/// The agent's state: the device and the handles it has given out.
#[derive(Debug)]
pub struct Agent {
    config: AgentConfig,
    device: Device,
    generation: u64,
    pds: BTreeSet<u32>,
    cqs: BTreeSet<u32>,
    mrs: BTreeMap<u32, MrInfo>,
    next_mr: u32,
    mr_bytes: u64,
    qps: BTreeMap<u32, QpEntry>,
}

type Res<T> = Result<T, AgentError>;

pub(super) use metaroce_agent::check::bad;

impl Agent {
    /// An agent with a fresh device.
    pub fn new(config: AgentConfig) -> Self {
        let device = Device::new(config.device, config.seed);
        Agent {
            config,
            device,
            generation: 0,
            pds: BTreeSet::new(),
            cqs: BTreeSet::new(),
            mrs: BTreeMap::new(),
            next_mr: 1,
            mr_bytes: 0,
            qps: BTreeMap::new(),
        }
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The device, for the data-plane driver.
    pub fn device_mut(&mut self) -> &mut Device {
        &mut self.device
    }

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// Parses and handles one line (without its newline).
    pub fn handle_line(&mut self, line: &[u8]) -> Action {
        match parse_request(line) {
            Ok(req) => self.handle(req),
            Err((id, e)) => Action::Reply(Reply::err(id, e)),
        }
    }

    /// Handles one request. A `poll_cq` with `wait_ms > 0` that finds
    /// nothing becomes [`Action::Wait`].
    pub fn handle(&mut self, req: Request) -> Action {
        let id = Some(req.id);
        let result = match req.op {
            Op::Hello(_) => Ok(self.hello()),
            Op::AllocPd(_) => self.alloc_pd(),
            Op::RegMr(r) => self.reg_mr(&r),
            Op::DeregMr(r) => self.dereg_mr(&r),
            Op::ReadMr(r) => self.read_mr(&r),
            Op::WriteMr(r) => self.write_mr(&r),
            Op::ReadCanary(r) => self.read_canary(r.mr),
            Op::CreateCq(_) => self.create_cq(),
            Op::CreateQp(r) => self.create_qp(&r),
            Op::ModifyQp(r) => self.modify_qp(&r),
            Op::QueryQp(r) => self.query_qp(r.qpn),
            Op::DestroyQp(r) => self.destroy_qp(r.qpn),
            Op::PostSend(r) => self.post_send(&r),
            Op::PostRecv(r) => self.post_recv(&r),
            Op::PollCq(r) => match check_poll(&r, self.cqs.contains(&r.cq)) {
                Err(e) => Err(e),
                Ok(()) => {
                    let pending = PendingPoll {
                        id: req.id,
                        cq: r.cq,
                        max: r.max,
                        wait_ms: r.wait_ms,
                    };
                    match self.try_poll(&pending) {
                        Some(reply) => return Action::Reply(reply),
                        None if r.wait_ms > 0 => return Action::Wait(pending),
                        None => return Action::Reply(self.finish_poll(&pending)),
                    }
                }
            },
            Op::Counters(_) => Ok(self.counters()),
            Op::Reset(_) => {
                self.reset();
                Ok(Map::new())
            }
            Op::Bye(_) => return Action::Close(Reply::ok(id, &Map::new())),
        };
        Action::Reply(match result {
            Ok(map) => Reply {
                id,
                result: Ok(map),
            },
            Err(e) => Reply::err(id, e),
        })
    }

    /// The reply to a waiting poll if its CQ has completions (or is gone).
    pub fn try_poll(&mut self, p: &PendingPoll) -> Option<Reply> {
        if !self.cqs.contains(&p.cq) {
            return Some(Reply::err(Some(p.id), unknown("cq", p.cq)));
        }
        match self.device.poll_cq(CqHandle(p.cq), p.max as usize) {
            Ok(wcs) if wcs.is_empty() => None,
            Ok(wcs) => Some(completions_reply(p.id, &wcs)),
            Err(e) => Some(Reply::err(Some(p.id), verbs(e, "cq"))),
        }
    }

    /// The reply to a waiting poll whose time is up: whatever is there,
    /// possibly nothing.
    pub fn finish_poll(&mut self, p: &PendingPoll) -> Reply {
        self.try_poll(p)
            .unwrap_or_else(|| completions_reply(p.id, &[]))
    }

    /// Destroys everything: a fresh device (new seed), no handles.
    pub fn reset(&mut self) {
        self.generation += 1;
        let mut seed = self.config.seed;
        for (s, g) in seed[24..].iter_mut().zip(self.generation.to_le_bytes()) {
            *s ^= g;
        }
        let now = self.device.now();
        self.device = Device::new(self.config.device, seed);
        self.device.handle_timeout(now); // time does not go back
        self.pds.clear();
        self.cqs.clear();
        self.mrs.clear();
        self.mr_bytes = 0;
        self.qps.clear();
    }

    fn hello(&self) -> Map<String, Value> {
        let c = &self.config;
        obj(json!({
            "v": PROTOCOL_VERSION,
            "implementation": {"name": c.implementation, "version": c.version},
            "profile": c.profile,
            "addresses": {
                "mac": format_mac(c.device.mac),
                "ipv4": c.device.ip.to_string(),
                "ipv6": null,
            },
            "limits": {
                "max_line": MAX_LINE,
                "max_data": MAX_DATA,
                "max_sge": MAX_SGE,
                "max_poll": MAX_POLL,
                "max_wait_ms": MAX_WAIT_MS,
                "max_mr_len": MAX_MR_LEN,
                "max_total_mr_bytes": MAX_TOTAL_MR_BYTES,
                "max_objects": MAX_OBJECTS,
                "max_queue_depth": MAX_QUEUE_DEPTH,
            },
            "ops": OPS,
        }))
    }

    fn alloc_pd(&mut self) -> Res<Map<String, Value>> {
        room(self.pds.len(), "protection domains")?;
        let pd = self.device.alloc_pd();
        self.pds.insert(pd.0);
        Ok(obj(json!({ "pd": pd.0 })))
    }

    fn access(&self, flags: &[AccessFlag], field: &str) -> Res<Access> {
        let mut a = Access::NONE;
        for (i, f) in flags.iter().enumerate() {
            a = a | match f {
                AccessFlag::LocalWrite => Access::LOCAL_WRITE,
                AccessFlag::RemoteRead => Access::REMOTE_READ,
                AccessFlag::RemoteWrite => Access::REMOTE_WRITE,
                AccessFlag::RemoteAtomic => Access::REMOTE_ATOMIC,
                AccessFlag::FlushGlobal | AccessFlag::FlushPersistent => {
                    return Err(bad(
                        ErrorCode::Unsupported,
                        &format!("{field}[{i}]"),
                        "FLUSH is not supported (profile flush: false)",
                    ));
                }
            };
        }
        Ok(a)
    }

    fn reg_mr(&mut self, r: &RegMr) -> Res<Map<String, Value>> {
        self.pd(r.pd, "pd")?;
        if r.length > MAX_MR_LEN {
            return Err(bad(
                ErrorCode::OutOfRange,
                "length",
                format!("{} exceeds the largest region, {MAX_MR_LEN}", r.length),
            ));
        }
        room(self.mrs.len(), "memory regions")?;
        if self.mr_bytes + r.length > MAX_TOTAL_MR_BYTES {
            return Err(bad(
                ErrorCode::ResourceExhausted,
                "length",
                format!("{MAX_TOTAL_MR_BYTES} bytes registered at most"),
            ));
        }
        let access = self.access(&r.access, "access")?;
        let data = bytes_field(r.hex.as_deref(), r.base64.as_deref(), false)?;
        if let Some((field, d)) = &data
            && d.len() as u64 > r.length
        {
            return Err(bad(
                ErrorCode::OutOfBounds,
                field,
                format!("{} bytes do not fit a region of {}", d.len(), r.length),
            ));
        }
        let canary = r.canary_len.unwrap_or(0);
        if canary > MAX_CANARY {
            return Err(bad(
                ErrorCode::OutOfRange,
                "canary_len",
                format!("{canary} exceeds {MAX_CANARY}"),
            ));
        }
        let info = self
            .device
            .reg_mr(PdHandle(r.pd), r.length as usize, access)
            .map_err(|e| verbs(e, "pd"))?;
        if canary > 0 {
            let _ = self.device.set_mr_canary(
                info.lkey,
                canary as usize,
                r.canary_fill.unwrap_or(0xA5),
            );
        }
        if let Some(fill) = r.fill.filter(|&f| f != 0) {
            let _ = self
                .device
                .write_mr(info.lkey, info.addr, &vec![fill; r.length as usize]);
        }
        if let Some((_, d)) = data {
            let _ = self.device.write_mr(info.lkey, info.addr, &d);
        }
        let handle = self.next_mr;
        self.next_mr = self.next_mr.wrapping_add(1).max(1);
        self.mrs.insert(handle, info);
        self.mr_bytes += r.length;
        Ok(obj(json!({
            "mr": handle,
            "addr": info.addr,
            "length": info.len,
            "lkey": info.lkey,
            "rkey": info.rkey,
        })))
    }

    fn mr(&self, handle: u32) -> Res<MrInfo> {
        self.mrs
            .get(&handle)
            .copied()
            .ok_or_else(|| unknown("mr", handle))
    }

    fn dereg_mr(&mut self, r: &MrRef) -> Res<Map<String, Value>> {
        let info = self.mr(r.mr)?;
        self.device
            .dereg_mr(info.lkey)
            .map_err(|e| verbs(e, "mr"))?;
        self.mrs.remove(&r.mr);
        self.mr_bytes -= info.len;
        Ok(Map::new())
    }

    fn range(info: &MrInfo, offset: u64, len: u64, field: &str) -> Res<u64> {
        match offset.checked_add(len) {
            Some(end) if end <= info.len => Ok(info.addr + offset),
            _ => Err(bad(
                ErrorCode::OutOfBounds,
                field,
                format!(
                    "offset {offset} + length {len} exceeds the region's {} bytes",
                    info.len
                ),
            )),
        }
    }

    fn read_mr(&mut self, r: &ReadMr) -> Res<Map<String, Value>> {
        let info = self.mr(r.mr)?;
        if r.length > MAX_DATA {
            return Err(bad(
                ErrorCode::OutOfRange,
                "length",
                format!("at most {MAX_DATA} bytes per read"),
            ));
        }
        let addr = Self::range(&info, r.offset, r.length, "length")?;
        let bytes = self
            .device
            .read_mr(info.lkey, addr, r.length)
            .map_err(|e| verbs(e, "mr"))?;
        let mut m = obj(json!({"mr": r.mr, "offset": r.offset, "length": r.length}));
        let (k, v) = match r.encoding {
            Encoding::Hex => ("hex", hex_encode(bytes)),
            Encoding::Base64 => ("base64", base64_encode(bytes)),
        };
        m.insert(k.into(), Value::String(v));
        Ok(m)
    }

    fn read_canary(&mut self, mr: u32) -> Res<Map<String, Value>> {
        let info = self.mr(mr)?;
        let (before, after) = self
            .device
            .mr_canary(info.lkey)
            .map_err(|e| verbs(e, "mr"))?;
        Ok(obj(json!({
            "mr": mr,
            "before": hex_encode(before),
            "after": hex_encode(after),
        })))
    }

    fn write_mr(&mut self, r: &WriteMr) -> Res<Map<String, Value>> {
        let info = self.mr(r.mr)?;
        let Some((field, data)) = bytes_field(r.hex.as_deref(), r.base64.as_deref(), true)? else {
            return Err(bad(ErrorCode::MissingField, "hex", "give hex or base64"));
        };
        let addr = Self::range(&info, r.offset, data.len() as u64, field)?;
        self.device
            .write_mr(info.lkey, addr, &data)
            .map_err(|e| verbs(e, "mr"))?;
        Ok(obj(
            json!({"mr": r.mr, "offset": r.offset, "length": data.len()}),
        ))
    }

    fn create_cq(&mut self) -> Res<Map<String, Value>> {
        room(self.cqs.len(), "completion queues")?;
        let cq = self.device.create_cq();
        self.cqs.insert(cq.0);
        Ok(obj(json!({ "cq": cq.0 })))
    }

    fn pd(&self, pd: u32, field: &str) -> Res<()> {
        if self.pds.contains(&pd) {
            Ok(())
        } else {
            Err(unknown(field, pd))
        }
    }

    fn cq(&self, cq: u32, field: &str) -> Res<()> {
        if self.cqs.contains(&cq) {
            Ok(())
        } else {
            Err(unknown(field, cq))
        }
    }

    fn create_qp(&mut self, r: &CreateQp) -> Res<Map<String, Value>> {
        self.pd(r.pd, "pd")?;
        self.cq(r.send_cq, "send_cq")?;
        self.cq(r.recv_cq, "recv_cq")?;
        let p = &self.config.profile;
        let qp_type = match r.qp_type {
            QpTypeName::Rc if p.rc => QpType::Rc,
            QpTypeName::Ud if p.ud => QpType::Ud,
            other => {
                return Err(bad(
                    ErrorCode::Unsupported,
                    "qp_type",
                    format!("{other:?} QPs are not supported by this implementation"),
                ));
            }
        };
        let c = r.caps;
        for (v, max, name) in [
            (c.max_send_wr, MAX_QUEUE_DEPTH, "caps.max_send_wr"),
            (c.max_recv_wr, MAX_QUEUE_DEPTH, "caps.max_recv_wr"),
            (c.max_send_sge, MAX_SGE as u32, "caps.max_send_sge"),
            (c.max_recv_sge, MAX_SGE as u32, "caps.max_recv_sge"),
        ] {
            if !(1..=max).contains(&v) {
                return Err(bad(
                    ErrorCode::OutOfRange,
                    name,
                    format!("{v} is outside 1..={max}"),
                ));
            }
        }
        room(self.qps.len(), "QPs")?;
        let qpn = self
            .device
            .create_qp(QpInit {
                qp_type,
                pd: PdHandle(r.pd),
                send_cq: CqHandle(r.send_cq),
                recv_cq: CqHandle(r.recv_cq),
                sq_sig_all: r.sq_sig_all,
            })
            .map_err(|e| verbs(e, "pd"))?;
        self.qps.insert(
            qpn,
            QpEntry {
                pd: r.pd,
                send_cq: r.send_cq,
                recv_cq: r.recv_cq,
                sq_sig_all: r.sq_sig_all,
                caps: c,
                mp_flow_label: false,
            },
        );
        Ok(obj(json!({
            "qpn": qpn,
            "qp_type": r.qp_type,
            "state": "reset",
            "caps": c,
        })))
    }

    fn qp(&self, qpn: u32) -> Res<QpEntry> {
        self.qps
            .get(&qpn)
            .copied()
            .ok_or_else(|| unknown("qpn", qpn))
    }

    fn attrs(&self, a: &Attrs) -> Res<QpAttrs> {
        let access = match &a.access {
            Some(flags) => Some(self.access(flags, "attrs.access")?),
            None => None,
        };
        let path = match &a.path {
            None => None,
            Some(p) => {
                let dest_mac = parse_mac(&p.dest_mac)
                    .map_err(|e| bad(ErrorCode::BadValue, "attrs.path.dest_mac", e))?;
                let dest_ip = ipv4(&p.dest_ip, "attrs.path.dest_ip")?;
                Some(AddressVector {
                    dest_ip,
                    dest_mac,
                    traffic_class: p.traffic_class,
                    hop_limit: p.hop_limit,
                })
            }
        };
        Ok(QpAttrs {
            access,
            pkey: a.p_key,
            qkey: a.q_key,
            dest_qpn: a.dest_qpn,
            rq_psn: a.rq_psn,
            pmtu: a.pmtu,
            path,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            sq_psn: a.sq_psn,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            max_rd_atomic: a.max_rd_atomic,
        })
    }

    fn modify_qp(&mut self, r: &ModifyQp) -> Res<Map<String, Value>> {
        self.qp(r.qpn)?;
        let to = match r.state {
            StateName::Reset => QpState::Reset,
            StateName::Init => QpState::Init,
            StateName::Rtr => QpState::Rtr,
            StateName::Rts => QpState::Rts,
            StateName::Sqd if !self.config.profile.sqd => {
                return Err(bad(
                    ErrorCode::Unsupported,
                    "state",
                    "SQD is not supported (profile sqd: false)",
                ));
            }
            StateName::Sqd => QpState::Sqd,
            StateName::Sqe => QpState::Sqe,
            StateName::Err => QpState::Err,
        };
        let attrs = self.attrs(&r.attrs)?;
        let mp = self.mp_attrs(r.qpn, to, &r.attrs)?;
        match &mp {
            Some(mp) => self.device.modify_qp_mp(r.qpn, &attrs, mp),
            None => self.device.modify_qp(r.qpn, to, &attrs),
        }
        .map_err(|e| verbs(e, "state"))?;
        if mp.is_some()
            && let Some(e) = self.qps.get_mut(&r.qpn)
        {
            e.mp_flow_label = r.attrs.mp_flow_label_entropy == Some(true);
        }
        Ok(obj(json!({"qpn": r.qpn, "state": r.state})))
    }

    /// The MP attributes of a `modify_qp`, checked against the QP as it
    /// is now and the profile (`super::mp::negotiate`).
    fn mp_attrs(&self, qpn: u32, to: QpState, a: &Attrs) -> Res<Option<MpAttrs>> {
        if a.mp_given().is_empty() {
            return Ok(None);
        }
        let info = self.device.query_qp(qpn).map_err(|e| verbs(e, "qpn"))?;
        // The seed of a set the agent chooses: a function of the agent's
        // seed, its reset generation and the QPN (the values are ports, not
        // secrets; `query_qp` reports them).
        let mut s = [0u8; 8];
        s.copy_from_slice(&self.config.seed[..8]);
        let seed = u64::from_le_bytes(s) ^ self.generation.rotate_left(32) ^ u64::from(qpn);
        negotiate(
            &self.config.profile,
            self.config.mp_local.tuning,
            &info,
            to,
            a,
            seed,
        )
    }

    fn query_qp(&self, qpn: u32) -> Res<Map<String, Value>> {
        let e = self.qp(qpn)?;
        let info = self.device.query_qp(qpn).map_err(|e| verbs(e, "qpn"))?;
        let depths = self.device.queue_depths(qpn).map_err(|e| verbs(e, "qpn"))?;
        let a = info.attrs;
        let access = a.access.map(access_names);
        let attrs = Attrs {
            access,
            p_key: a.pkey,
            q_key: a.qkey,
            dest_qpn: a.dest_qpn,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            pmtu: a.pmtu,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            min_rnr_timer: a.min_rnr_timer,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            path: a.path.map(|p| PathAttr {
                dest_mac: format_mac(p.dest_mac),
                dest_ip: p.dest_ip.to_string(),
                traffic_class: p.traffic_class,
                hop_limit: p.hop_limit,
            }),
            mp: Some(false),
            ..Attrs::default()
        };
        let mp = self.device.query_mp(qpn).map_err(|e| verbs(e, "qpn"))?;
        let mut attrs = obj(json!(attrs));
        if let Some(mp) = &mp {
            // MR-PICS-5: the MP parameters in force, the set as used.
            let values = match &mp.entropy {
                MpEntropy::Values(v) => v.clone(),
                MpEntropy::Seeded { .. } => Vec::new(), // query_mp expands seeds
            };
            for (k, v) in [
                ("mp", json!(true)),
                ("mp_entropy_set_size", json!(values.len())),
                ("mp_entropy_set", json!(values)),
                ("mp_window", json!(mp.window)),
                ("mp_trim_dscp", json!(mp.trim_dscp)),
                ("mp_ack_dscp", json!(mp.ack_dscp)),
                ("mp_flow_label_entropy", json!(e.mp_flow_label)),
                ("mp_peer_resource_nak", json!(mp.peer_resource_nak)),
                ("mp_peer_ordered", json!(mp.peer_ordered)),
                // The effective staging limit: the value given, else the
                // declared one (AGENT.md §6.10).
                (
                    "mp_max_staged_bytes",
                    json!(
                        mp.max_staged_bytes
                            .min(self.config.profile.mp_max_staged_bytes)
                    ),
                ),
            ] {
                attrs.insert(k.into(), v);
            }
        }
        let mut out = obj(json!({
            "qpn": info.qpn,
            "qp_type": type_name(info.qp_type),
            "state": state_name(info.state),
            "attrs": attrs,
            "pd": e.pd,
            "send_cq": e.send_cq,
            "recv_cq": e.recv_cq,
            "sq_sig_all": e.sq_sig_all,
            "caps": e.caps,
            "outstanding": {"send": depths.send, "recv": depths.recv},
        }));
        // An MP QP has no constant source port: it sends from its entropy
        // set (MR-MPS-1), so the field is absent (AGENT.md §6.10).
        if mp.is_none() {
            out.insert("udp_src_port".into(), json!(info.udp_src_port));
        }
        Ok(out)
    }

    fn destroy_qp(&mut self, qpn: u32) -> Res<Map<String, Value>> {
        self.qp(qpn)?;
        self.device.destroy_qp(qpn).map_err(|e| verbs(e, "qpn"))?;
        self.qps.remove(&qpn);
        Ok(Map::new())
    }

    fn post_send(&mut self, r: &PostSend) -> Res<Map<String, Value>> {
        let e = self.qp(r.qpn)?;
        let sg_list = sges(&r.sg_list, e.caps.max_send_sge)?;
        let p = &self.config.profile;
        use SendOpcode as O;
        let need = |v: Option<u64>, name: &str| {
            v.ok_or_else(|| {
                bad(
                    ErrorCode::MissingField,
                    name,
                    format!("required by opcode {:?}", r.opcode),
                )
            })
        };
        let remote = || -> Res<RemoteAddr> {
            Ok(RemoteAddr {
                va: need(r.remote_addr, "remote_addr")?,
                rkey: need(r.rkey.map(u64::from), "rkey")? as u32,
            })
        };
        let imm = || need(r.imm.map(u64::from), "imm").map(|v| v as u32);
        let (op, uses): (WrOp, &[&str]) = match r.opcode {
            O::Send => (WrOp::Send, &[]),
            O::SendWithImm => (WrOp::SendImm(imm()?), &["imm"]),
            O::SendWithInv => (
                WrOp::SendInv(need(r.invalidate_rkey.map(u64::from), "invalidate_rkey")? as u32),
                &["invalidate_rkey"],
            ),
            O::RdmaWrite => (WrOp::Write(remote()?), &["remote_addr", "rkey"]),
            O::RdmaWriteWithImm => (
                WrOp::WriteImm(remote()?, imm()?),
                &["remote_addr", "rkey", "imm"],
            ),
            O::RdmaRead => (WrOp::Read(remote()?), &["remote_addr", "rkey"]),
            O::AtomicCmpAndSwp => (
                WrOp::CompareSwap {
                    remote: remote()?,
                    compare: need(r.compare, "compare")?,
                    swap: need(r.swap, "swap")?,
                },
                &["remote_addr", "rkey", "compare", "swap"],
            ),
            O::AtomicFetchAndAdd => (
                WrOp::FetchAdd {
                    remote: remote()?,
                    add: need(r.add, "add")?,
                },
                &["remote_addr", "rkey", "add"],
            ),
        };
        let given = [
            ("remote_addr", r.remote_addr.is_some()),
            ("rkey", r.rkey.is_some()),
            ("imm", r.imm.is_some()),
            ("invalidate_rkey", r.invalidate_rkey.is_some()),
            ("compare", r.compare.is_some()),
            ("swap", r.swap.is_some()),
            ("add", r.add.is_some()),
        ];
        if let Some((name, _)) = given.iter().find(|(n, on)| *on && !uses.contains(n)) {
            return Err(bad(
                ErrorCode::UnknownField,
                name,
                format!("not used by opcode {:?}", r.opcode),
            ));
        }
        let unsupported = match r.opcode {
            O::AtomicCmpAndSwp | O::AtomicFetchAndAdd => (!p.atomics).then_some("atomics"),
            O::SendWithInv => (!p.send_with_invalidate).then_some("send_with_invalidate"),
            O::SendWithImm | O::RdmaWriteWithImm => (!p.immediate).then_some("immediate"),
            _ => None,
        };
        if let Some(key) = unsupported {
            return Err(bad(
                ErrorCode::Unsupported,
                "opcode",
                format!("profile {key}: false"),
            ));
        }
        let ud = match &r.ud {
            None => None,
            Some(u) => Some(UdDest {
                ip: ipv4(&u.ip, "ud.ip")?,
                mac: parse_mac(&u.mac).map_err(|e| bad(ErrorCode::BadValue, "ud.mac", e))?,
                qpn: qpn24(u.qpn, "ud.qpn")?,
                qkey: u.qkey,
            }),
        };
        self.queue_room(r.qpn, true, e.caps.max_send_wr)?;
        let wr = SendWr {
            wr_id: r.wr_id,
            op,
            sg_list,
            signaled: r.signaled,
            solicited: r.solicited,
            fence: r.fence,
            ud,
        };
        self.device
            .post_send(r.qpn, wr)
            .map_err(|e| verbs(e, "qpn"))?;
        Ok(Map::new())
    }

    fn queue_room(&self, qpn: u32, send: bool, max: u32) -> Res<()> {
        let d = self.device.queue_depths(qpn).map_err(|e| verbs(e, "qpn"))?;
        let (n, name) = if send {
            (d.send, "caps.max_send_wr")
        } else {
            (d.recv, "caps.max_recv_wr")
        };
        if n >= max as usize {
            return Err(bad(
                ErrorCode::ResourceExhausted,
                "qpn",
                format!("{n} work requests outstanding ({name} = {max})"),
            ));
        }
        Ok(())
    }

    fn post_recv(&mut self, r: &PostRecv) -> Res<Map<String, Value>> {
        let e = self.qp(r.qpn)?;
        let sg_list = sges(&r.sg_list, e.caps.max_recv_sge)?;
        self.queue_room(r.qpn, false, e.caps.max_recv_wr)?;
        self.device
            .post_recv(
                r.qpn,
                RecvWr {
                    wr_id: r.wr_id,
                    sg_list,
                },
            )
            .map_err(|e| verbs(e, "qpn"))?;
        Ok(Map::new())
    }

    fn counters(&self) -> Map<String, Value> {
        let c = self.device.counters();
        obj(json!({
            "counters": {
                "icrc_errors": c.icrc_errors,
                "malformed_drops": c.malformed_drops,
                "unknown_qp_drops": c.unknown_qp_drops,
                "pkey_violations": c.pkey_violations,
                "qkey_violations": c.qkey_violations,
                "seq_naks_sent": c.seq_naks_sent,
                "rnr_naks_sent": c.rnr_naks_sent,
                "duplicate_requests": c.duplicate_requests,
                "local_ack_timeouts": c.local_ack_timeouts,
                "retransmitted_packets": c.retransmitted_packets,
                "cnp_sent": c.cnp_sent,
                "cnp_received": c.cnp_received,
                "ecn_ce_received": c.ecn_ce_received,
                "mp_out_of_window": c.mp_out_of_window,
                "mp_trimmed_received": c.mp_trimmed_received,
                "mp_retx_reorder": c.mp_retx_reorder,
                "mp_retx_timeout": c.mp_retx_timeout,
                "mp_retx_trim": c.mp_retx_trim,
                "mp_probes_sent": c.mp_probes_sent,
                "mp_entropy_retired": c.mp_entropy_retired,
            },
            "extra": {
                "frames_sent": c.frames_sent,
                "frames_received": c.frames_received,
            },
        }))
    }
}

fn sges(list: &[SgeJson], max: u32) -> Res<Vec<Sge>> {
    metaroce_agent::check::sges(list, max, |s| Sge {
        addr: s.addr,
        len: s.length,
        lkey: s.lkey,
    })
}

/// Maps a verbs rejection to a stable code; `field` is the request field
/// to blame when the error itself names none.
pub(super) fn verbs(e: VerbsError, field: &str) -> AgentError {
    let attr = |name: &str| match name {
        "hop_limit" => "attrs.path.hop_limit".to_string(),
        n => format!("attrs.{n}"),
    };
    match e {
        VerbsError::UnknownQp(_) => bad(ErrorCode::UnknownHandle, "qpn", e),
        VerbsError::UnknownCq(_) => bad(ErrorCode::UnknownHandle, field, e),
        VerbsError::UnknownPd(_) => bad(ErrorCode::UnknownHandle, "pd", e),
        VerbsError::UnknownKey(_) => bad(ErrorCode::UnknownHandle, field, e),
        VerbsError::InvalidTransition { from, to } => bad(
            ErrorCode::InvalidTransition,
            "state",
            format!(
                "transition {} -> {} is not allowed",
                state_name(from),
                state_name(to)
            ),
        ),
        VerbsError::MissingAttribute(n) => bad(ErrorCode::MissingAttribute, &attr(n), e),
        VerbsError::UnexpectedAttribute(n) => bad(ErrorCode::UnexpectedAttribute, &attr(n), e),
        VerbsError::OutOfRange(n) => bad(ErrorCode::OutOfRange, &attr(n), e),
        VerbsError::WrongState(s) => bad(
            ErrorCode::WrongState,
            "qpn",
            format!("the QP state {} does not accept this", state_name(s)),
        ),
        VerbsError::UnsupportedOperation(_) => bad(ErrorCode::Unsupported, "opcode", e),
        VerbsError::BadDestination => bad(ErrorCode::BadDestination, "ud", e),
        VerbsError::OutOfBounds { .. } => bad(ErrorCode::OutOfBounds, field, e),
    }
}

/// The wire name of a state.
pub fn state_name(s: QpState) -> &'static str {
    match s {
        QpState::Reset => "reset",
        QpState::Init => "init",
        QpState::Rtr => "rtr",
        QpState::Rts => "rts",
        QpState::Sqd => "sqd",
        QpState::Sqe => "sqe",
        QpState::Err => "err",
    }
}

fn type_name(t: QpType) -> &'static str {
    match t {
        QpType::Rc => "rc",
        QpType::Ud => "ud",
    }
}

fn access_names(a: Access) -> Vec<AccessFlag> {
    [
        (Access::LOCAL_WRITE, AccessFlag::LocalWrite),
        (Access::REMOTE_READ, AccessFlag::RemoteRead),
        (Access::REMOTE_WRITE, AccessFlag::RemoteWrite),
        (Access::REMOTE_ATOMIC, AccessFlag::RemoteAtomic),
    ]
    .into_iter()
    .filter(|(bit, _)| a.contains(*bit))
    .map(|(_, f)| f)
    .collect()
}

/// The SPEC §6.13 name of a status.
pub fn status_name(s: WcStatus) -> &'static str {
    match s {
        WcStatus::Success => "SUCCESS",
        WcStatus::LocLenErr => "LOC_LEN_ERR",
        WcStatus::LocQpOpErr => "LOC_QP_OP_ERR",
        WcStatus::LocProtErr => "LOC_PROT_ERR",
        WcStatus::WrFlushErr => "WR_FLUSH_ERR",
        WcStatus::BadRespErr => "BAD_RESP_ERR",
        WcStatus::RemInvReqErr => "REM_INV_REQ_ERR",
        WcStatus::RemAccessErr => "REM_ACCESS_ERR",
        WcStatus::RemOpErr => "REM_OP_ERR",
        WcStatus::RetryExcErr => "RETRY_EXC_ERR",
        WcStatus::RnrRetryExcErr => "RNR_RETRY_EXC_ERR",
        WcStatus::FatalErr => "FATAL_ERR",
        WcStatus::GeneralErr => "GENERAL_ERR",
    }
}

fn opcode_name(o: WcOpcode) -> &'static str {
    match o {
        WcOpcode::Send => "send",
        WcOpcode::RdmaWrite => "rdma_write",
        WcOpcode::RdmaRead => "rdma_read",
        WcOpcode::CompareSwap => "comp_swap",
        WcOpcode::FetchAdd => "fetch_add",
        WcOpcode::Recv => "recv",
        WcOpcode::RecvRdmaWithImm => "recv_rdma_with_imm",
    }
}

/// A completion as the protocol reports it.
pub fn completion_json(wc: &WorkCompletion) -> CompletionJson {
    CompletionJson {
        wr_id: wc.wr_id,
        status: wc.status.code(),
        status_name: status_name(wc.status).into(),
        opcode: opcode_name(wc.opcode).into(),
        qpn: wc.qpn,
        byte_len: wc.byte_len,
        imm: wc.imm,
        invalidated_rkey: wc.invalidated_rkey,
        src_qp: wc.src_qp,
    }
}

#[derive(Serialize)]
struct Completions {
    completions: Vec<CompletionJson>,
}

fn completions_reply(id: u64, wcs: &[WorkCompletion]) -> Reply {
    Reply::ok(
        Some(id),
        &Completions {
            completions: wcs.iter().map(completion_json).collect(),
        },
    )
}
