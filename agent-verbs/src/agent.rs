//! The agent over libibverbs: each request of AGENT.md §6 mapped to verbs
//! as §9 says. Requests are checked here first (handles, ranges, the SPEC
//! §6.2 table, opcode fields, the profile) so that a rejected request
//! changes nothing; what verbs still refuses becomes an error reply naming
//! the call and the errno. Nothing here panics on a request.

use crate::ffi::{self, Ah, Caps, Context, Cq, DevInfo, Errno, Mr, Pd, Qp, QpAttr, SendWr, Sge};
use crate::rules::{self, TransitionError, mask};
use crate::server::{Handler, Step};
use crate::sysfs::{self, RoceGid};
use metaroce_agent::CapabilityProfile;
use metaroce_agent::check::{bad, check_poll, ipv4, obj, qpn24, room, unknown};
use metaroce_agent::encoding::{base64_encode, bytes_field, format_mac, hex_encode, parse_mac};
use metaroce_agent::protocol::*;
use metaroce_agent::qp_state::{QpState, QpType, attr, lookup};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

type Res<T> = Result<T, AgentError>;

/// A verbs call that failed: `unsupported` (the device refused what the
/// agent found valid), `resource_exhausted` on ENOMEM/ENOSPC.
fn refused(call: &str, field: &str, e: Errno) -> AgentError {
    let code = match e.0 {
        12 | 28 => ErrorCode::ResourceExhausted,
        _ => ErrorCode::Unsupported,
    };
    bad(code, field, format!("{call} failed: {e}"))
}

/// What the agent found out about its device at start.
#[derive(Clone, Debug)]
pub struct DeviceSetup {
    /// Device name (`rxe0`).
    pub name: String,
    /// Port number.
    pub port: u8,
    /// The RoCEv2 GID of the data-plane address.
    pub gid: RoceGid,
    /// The netdev's MAC.
    pub mac: String,
    /// Device and port attributes.
    pub info: DevInfo,
    /// Report each QP's UDP source port by Linux's `rdma_get_udp_sport()`
    /// rule ([`rules::kernel_udp_sport`]); otherwise `query_qp` omits it.
    pub kernel_udp_sport: bool,
}

/// The capability profile this agent declares for a plain RoCEv2 NIC
/// (AGENT.md §9): limits from the device, features this agent implements,
/// no CNP, no DCQCN, no credits, no MP. A lab's profile YAML may override
/// it (`metaroce run --profile`).
pub fn profile(info: &DevInfo) -> CapabilityProfile {
    CapabilityProfile {
        rc: true,
        uc: true,
        ud: true,
        atomics: info.atomic_cap != 0,
        flush: false,
        atomic_write: false,
        send_with_invalidate: true,
        // mlx5 and rxe invalidate only fast-registered regions and type-2
        // windows (`rxe_invalidate_mr`), which this agent does not create;
        // an rdmavt device could declare true (`rvt_invalidate_rkey`).
        invalidate_reg_mr: false,
        immediate: true,
        ipv4: true,
        ipv6: false,
        vlan: false,
        sqd: false,
        max_pmtu: info.active_mtu.clamp(256, 4096),
        max_msg_size: u64::from(info.max_msg_sz).clamp(1, 1 << 31),
        max_rd_atomic: info.max_qp_rd_atom.clamp(1, 255) as u8,
        max_dest_rd_atomic: info.max_qp_init_rd_atom.clamp(1, 255) as u8,
        credits: false,
        cnp_generation: false,
        cnp_pacing_scope: "qp".into(),
        dcqcn_reaction: false,
        udp_checksum_tx: "zero".into(),
        counters: false,
        implementation_chosen_psn: false,
        mp: false,
        mp_entropy_set_max: 256,
        mp_window_max: 1024,
        mp_trimming: false,
        mp_flow_label_entropy: false,
        mp_max_staged_bytes: 0,
        mp_resource_nak: false,
        mp_ordered_write: false,
        cm: false,
        host_big_endian: cfg!(target_endian = "big"),
        // No MP: no MP local constants to declare.
        mp_reorder_threshold: None,
        mp_ack_coalesce_time: None,
        mp_ack_prompt_max: None,
        mp_rto_init: None,
        mp_rto_min: None,
        mp_rto_max: None,
        mp_retire_hold: None,
        mp_retire_hold_max: None,
        mp_cwnd_max: None,
    }
}

struct MrEntry {
    mr: Mr,
}

struct QpEntry {
    qp: Qp,
    /// The row type of the SPEC §6.2 table (UC QPs use the RC rows).
    ty: QpType,
    /// An unreliable connected QP.
    uc: bool,
    pd: u32,
    send_cq: u32,
    recv_cq: u32,
    sq_sig_all: bool,
    caps: Caps,
    /// The attributes set so far, as `query_qp` reports them.
    attrs: Map<String, Value>,
    sends: u64,
    recvs: u64,
    /// The UDP source port, once known (MR-ENC-12).
    udp_sport: Option<u16>,
}

/// The agent state. Field order is drop order: QPs and AHs before CQs,
/// MRs and PDs, the context last (ffi module contract).
pub struct VerbsAgent {
    qps: BTreeMap<u32, QpEntry>,
    ahs: BTreeMap<(u32, Ipv4Addr), Ah>,
    cqs: BTreeMap<u32, Cq>,
    mrs: BTreeMap<u32, MrEntry>,
    pds: BTreeMap<u32, Pd>,
    ctx: Context,
    setup: DeviceSetup,
    profile: CapabilityProfile,
    next_handle: u32,
    mr_bytes: u64,
}

impl VerbsAgent {
    /// An agent over an open device.
    pub fn new(ctx: Context, setup: DeviceSetup) -> Self {
        let profile = profile(&setup.info);
        VerbsAgent {
            qps: BTreeMap::new(),
            ahs: BTreeMap::new(),
            cqs: BTreeMap::new(),
            mrs: BTreeMap::new(),
            pds: BTreeMap::new(),
            ctx,
            setup,
            profile,
            next_handle: 0,
            mr_bytes: 0,
        }
    }

    fn handle_id(&mut self) -> u32 {
        self.next_handle = self.next_handle.wrapping_add(1);
        self.next_handle
    }

    fn reset(&mut self) {
        self.qps.clear();
        self.ahs.clear();
        self.cqs.clear();
        self.mrs.clear();
        self.pds.clear();
        self.mr_bytes = 0;
    }

    fn dispatch(&mut self, op: &Op) -> Res<Map<String, Value>> {
        match op {
            Op::Hello(_) => Ok(self.hello()),
            Op::AllocPd(_) => self.alloc_pd(),
            Op::RegMr(r) => self.reg_mr(r),
            Op::DeregMr(r) => self.dereg_mr(r.mr),
            Op::ReadMr(r) => self.read_mr(r),
            Op::WriteMr(r) => self.write_mr(r),
            Op::ReadCanary(r) => self.read_canary(r.mr),
            Op::CreateCq(_) => self.create_cq(),
            Op::CreateQp(r) => self.create_qp(r),
            Op::ModifyQp(r) => self.modify_qp(r),
            Op::QueryQp(r) => self.query_qp(r.qpn),
            Op::DestroyQp(r) => {
                self.qp(r.qpn)?;
                self.qps.remove(&r.qpn);
                Ok(Map::new())
            }
            Op::PostSend(r) => self.post_send(r),
            Op::PostRecv(r) => self.post_recv(r),
            Op::PollCq(_) | Op::Bye(_) => Ok(Map::new()), // handled by the caller
            Op::Counters(_) => Err(AgentError::general(
                ErrorCode::Unsupported,
                format!(
                    "counters: false — the device's hw_counters ({}) do not map onto SPEC §9.3",
                    sysfs::hw_counters(&self.setup.name, self.setup.port)
                        .iter()
                        .map(|(n, v)| format!("{n}={v}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            )),
            Op::Reset(_) => {
                self.reset();
                Ok(Map::new())
            }
        }
    }

    fn hello(&self) -> Map<String, Value> {
        obj(json!({
            "v": PROTOCOL_VERSION,
            "implementation": {
                "name": format!("metaroce-agent-verbs on {}", self.setup.name),
                "version": env!("CARGO_PKG_VERSION"),
            },
            "profile": self.profile,
            "addresses": {"mac": self.setup.mac, "ipv4": self.setup.gid.ip.to_string(), "ipv6": null},
            "limits": {
                "max_line": MAX_LINE, "max_data": MAX_DATA, "max_sge": ffi::SHIM_MAX_SGE,
                "max_poll": MAX_POLL, "max_wait_ms": MAX_WAIT_MS, "max_mr_len": MAX_MR_LEN,
                "max_total_mr_bytes": MAX_TOTAL_MR_BYTES, "max_objects": MAX_OBJECTS,
                "max_queue_depth": self.setup.info.max_qp_wr.min(MAX_QUEUE_DEPTH),
            },
            "ops": OPS,
        }))
    }

    fn alloc_pd(&mut self) -> Res<Map<String, Value>> {
        room(self.pds.len(), "PDs")?;
        let pd = self
            .ctx
            .alloc_pd()
            .map_err(|e| refused("ibv_alloc_pd", "(request)", e))?;
        let h = self.handle_id();
        self.pds.insert(h, pd);
        Ok(obj(json!({ "pd": h })))
    }

    fn access(&self, flags: &[AccessFlag], field: &str) -> Res<u32> {
        let mut bits = 0;
        for (i, f) in flags.iter().enumerate() {
            bits |= rules::ibv_access(*f).ok_or_else(|| {
                bad(
                    ErrorCode::Unsupported,
                    &format!("{field}[{i}]"),
                    "FLUSH access: profile flush: false",
                )
            })?;
        }
        Ok(bits)
    }

    fn reg_mr(&mut self, r: &RegMr) -> Res<Map<String, Value>> {
        let pd = self.pds.get(&r.pd).ok_or_else(|| unknown("pd", r.pd))?;
        room(self.mrs.len(), "MRs")?;
        if r.length > MAX_MR_LEN {
            return Err(bad(
                ErrorCode::OutOfRange,
                "length",
                format!("at most {MAX_MR_LEN}"),
            ));
        }
        if self.mr_bytes + r.length > MAX_TOTAL_MR_BYTES {
            return Err(bad(
                ErrorCode::ResourceExhausted,
                "length",
                format!("at most {MAX_TOTAL_MR_BYTES} bytes registered at once"),
            ));
        }
        let canary = r.canary_len.unwrap_or(0);
        if canary > 4096 {
            return Err(bad(ErrorCode::OutOfRange, "canary_len", "at most 4096"));
        }
        let access = self.access(&r.access, "access")?;
        let init = bytes_field(r.hex.as_deref(), r.base64.as_deref(), false)?;
        if let Some((field, data)) = &init
            && data.len() as u64 > r.length
        {
            return Err(bad(ErrorCode::OutOfBounds, field, "longer than the region"));
        }
        let mut mr = pd
            .reg_mr(r.length as usize, canary as usize, access as i32)
            .map_err(|e| match e.0 {
                22 => bad(
                    ErrorCode::BadValue,
                    "access",
                    format!("ibv_reg_mr refused these flags: {e} (verbs needs local_write with remote_write/remote_atomic)"),
                ),
                _ => refused("ibv_reg_mr", "length", e),
            })?;
        mr.fill_canaries(r.canary_fill.unwrap_or(0xA5));
        if let Some(fill) = r.fill.filter(|f| *f != 0) {
            mr.write(0, &vec![fill; r.length as usize]);
        }
        if let Some((_, data)) = &init {
            mr.write(0, data);
        }
        let out = json!({"addr": mr.addr(), "length": r.length, "lkey": mr.lkey, "rkey": mr.rkey});
        let h = self.handle_id();
        self.mr_bytes += r.length;
        self.mrs.insert(h, MrEntry { mr });
        let mut m = obj(out);
        m.insert("mr".into(), h.into());
        Ok(m)
    }

    fn mr(&self, h: u32) -> Res<&MrEntry> {
        self.mrs.get(&h).ok_or_else(|| unknown("mr", h))
    }

    fn dereg_mr(&mut self, h: u32) -> Res<Map<String, Value>> {
        let e = self.mrs.remove(&h).ok_or_else(|| unknown("mr", h))?;
        self.mr_bytes -= e.mr.region_len() as u64;
        Ok(Map::new())
    }

    fn read_mr(&self, r: &ReadMr) -> Res<Map<String, Value>> {
        let e = self.mr(r.mr)?;
        if r.length > MAX_DATA {
            return Err(bad(
                ErrorCode::OutOfRange,
                "length",
                format!("at most {MAX_DATA}"),
            ));
        }
        let mut buf = vec![0u8; r.length as usize];
        let offset = usize::try_from(r.offset).unwrap_or(usize::MAX);
        if !e.mr.read(offset, &mut buf) {
            return Err(bad(
                ErrorCode::OutOfBounds,
                "length",
                format!(
                    "offset {} + length {} > region length {}",
                    r.offset,
                    r.length,
                    e.mr.region_len()
                ),
            ));
        }
        let mut m = obj(json!({"mr": r.mr, "offset": r.offset, "length": r.length}));
        match r.encoding {
            Encoding::Hex => m.insert("hex".into(), hex_encode(&buf).into()),
            Encoding::Base64 => m.insert("base64".into(), base64_encode(&buf).into()),
        };
        Ok(m)
    }

    fn write_mr(&mut self, r: &WriteMr) -> Res<Map<String, Value>> {
        self.mr(r.mr)?;
        let (field, data) = bytes_field(r.hex.as_deref(), r.base64.as_deref(), true)?
            .ok_or_else(|| bad(ErrorCode::MissingField, "hex", "give hex or base64"))?;
        let e = self.mrs.get_mut(&r.mr).ok_or_else(|| unknown("mr", r.mr))?;
        let offset = usize::try_from(r.offset).unwrap_or(usize::MAX);
        if !e.mr.write(offset, &data) {
            return Err(bad(ErrorCode::OutOfBounds, field, "outside the region"));
        }
        Ok(obj(
            json!({"mr": r.mr, "offset": r.offset, "length": data.len()}),
        ))
    }

    fn read_canary(&self, h: u32) -> Res<Map<String, Value>> {
        let (before, after) = self.mr(h)?.mr.canaries();
        Ok(obj(
            json!({"mr": h, "before": hex_encode(&before), "after": hex_encode(&after)}),
        ))
    }

    fn create_cq(&mut self) -> Res<Map<String, Value>> {
        room(self.cqs.len(), "CQs")?;
        let depth = self.setup.info.max_cqe.clamp(1, 65_536) as i32;
        let cq = self
            .ctx
            .create_cq(depth)
            .map_err(|e| refused("ibv_create_cq", "(request)", e))?;
        let h = self.handle_id();
        self.cqs.insert(h, cq);
        Ok(obj(json!({ "cq": h })))
    }

    fn create_qp(&mut self, r: &CreateQp) -> Res<Map<String, Value>> {
        let pd = self.pds.get(&r.pd).ok_or_else(|| unknown("pd", r.pd))?;
        let scq = self
            .cqs
            .get(&r.send_cq)
            .ok_or_else(|| unknown("send_cq", r.send_cq))?;
        let rcq = self
            .cqs
            .get(&r.recv_cq)
            .ok_or_else(|| unknown("recv_cq", r.recv_cq))?;
        room(self.qps.len(), "QPs")?;
        let (ty, ibv_type, name) = match r.qp_type {
            QpTypeName::Rc => (QpType::Rc, 2, "rc"),
            QpTypeName::Ud => (QpType::Ud, 4, "ud"),
            QpTypeName::Uc => (QpType::Rc, 3, "uc"),
        };
        let c = &r.caps;
        for (v, max, field) in [
            (c.max_send_wr, MAX_QUEUE_DEPTH, "caps.max_send_wr"),
            (c.max_recv_wr, MAX_QUEUE_DEPTH, "caps.max_recv_wr"),
            (
                c.max_send_sge,
                ffi::SHIM_MAX_SGE as u32,
                "caps.max_send_sge",
            ),
            (
                c.max_recv_sge,
                ffi::SHIM_MAX_SGE as u32,
                "caps.max_recv_sge",
            ),
        ] {
            if !(1..=max).contains(&v) {
                return Err(bad(
                    ErrorCode::OutOfRange,
                    field,
                    format!("{v} is outside 1..={max}"),
                ));
            }
        }
        let mut caps = Caps {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge.min(self.setup.info.max_sge),
            max_recv_sge: c.max_recv_sge.min(self.setup.info.max_sge),
        };
        let qp = pd
            .create_qp(ibv_type, scq, rcq, r.sq_sig_all, &mut caps)
            .map_err(|e| refused("ibv_create_qp", "caps", e))?;
        let qpn = qp.qpn;
        let mut attrs = Map::new();
        attrs.insert("p_key".into(), 0xFFFF.into());
        attrs.insert("mp".into(), false.into());
        self.qps.insert(
            qpn,
            QpEntry {
                qp,
                ty,
                uc: name == "uc",
                pd: r.pd,
                send_cq: r.send_cq,
                recv_cq: r.recv_cq,
                sq_sig_all: r.sq_sig_all,
                caps,
                attrs,
                sends: 0,
                recvs: 0,
                udp_sport: None,
            },
        );
        Ok(obj(
            json!({"qpn": qpn, "qp_type": name, "state": "reset", "caps": caps_json(&caps)}),
        ))
    }

    fn qp(&self, qpn: u32) -> Res<&QpEntry> {
        self.qps.get(&qpn).ok_or_else(|| unknown("qpn", qpn))
    }

    fn state(&self, e: &QpEntry) -> Res<(&'static str, QpState)> {
        let s =
            e.qp.state()
                .map_err(|err| refused("ibv_query_qp", "qpn", err))?;
        rules::state_from_ibv(s).ok_or_else(|| {
            AgentError::general(
                ErrorCode::Internal,
                format!("ibv_query_qp: unknown state {s}"),
            )
        })
    }

    /// Points the kernel's neighbour entry for `ip` at `mac`, so the device
    /// sends to the MAC the harness asked for (AGENT.md §9, `path`).
    fn neighbour(&self, ip: Ipv4Addr, mac: &str, field: &str) -> Res<()> {
        let out = std::process::Command::new("ip")
            .args(["neigh", "replace", &ip.to_string(), "lladdr", mac, "dev"])
            .arg(&self.setup.gid.netdev)
            .args(["nud", "permanent"])
            .output()
            .map_err(|e| {
                bad(
                    ErrorCode::Unsupported,
                    field,
                    format!("cannot run `ip neigh`: {e}"),
                )
            })?;
        if !out.status.success() {
            return Err(bad(
                ErrorCode::Unsupported,
                field,
                format!(
                    "`ip neigh replace {ip} lladdr {mac}` failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            ));
        }
        Ok(())
    }

    fn mp_rules(&self, a: &Attrs, ty: QpType, from: QpState, to: QpState) -> Res<()> {
        let given = a.mp_given();
        let Some(first) = given.first() else {
            return Ok(());
        };
        // AGENT.md §6.9 rule 1 (profile mp: false, MR-MPN-6).
        if a.mp == Some(true) {
            return Err(bad(
                ErrorCode::Unsupported,
                "attrs.mp",
                "MP QPs: profile mp: false",
            ));
        }
        if let Some(p) = given.iter().find(|n| **n != "mp") {
            return Err(bad(
                ErrorCode::Unsupported,
                &format!("attrs.{p}"),
                "MP parameter: profile mp: false",
            ));
        }
        // Rules 2 and 3 for `mp: false` alone.
        if QpType::Ud == ty {
            return Err(bad(
                ErrorCode::UnexpectedAttribute,
                &format!("attrs.{first}"),
                "MP is a mode of RC QPs",
            ));
        }
        if !(from == QpState::Init && to == QpState::Rtr) {
            if lookup(ty, from, to).is_none() {
                return Err(bad(
                    ErrorCode::InvalidTransition,
                    "state",
                    "transition not in SPEC §6.2",
                ));
            }
            return Err(bad(
                ErrorCode::UnexpectedAttribute,
                &format!("attrs.{first}"),
                "MP attributes only on INIT->RTR",
            ));
        }
        Ok(())
    }

    fn modify_qp(&mut self, r: &ModifyQp) -> Res<Map<String, Value>> {
        let e = self.qp(r.qpn)?;
        if r.state == StateName::Sqd {
            return Err(bad(
                ErrorCode::Unsupported,
                "state",
                "SQD: profile sqd: false",
            ));
        }
        let (_, from) = self.state(e)?;
        let to = rules::table_state(r.state);
        let a = &r.attrs;
        self.mp_rules(a, e.ty, from, to)?;
        let mut given = 0;
        for (on, bit) in [
            (a.access.is_some(), attr::ACCESS),
            (a.p_key.is_some(), attr::PKEY),
            (a.q_key.is_some(), attr::QKEY),
            (a.dest_qpn.is_some(), attr::DEST_QPN),
            (a.rq_psn.is_some(), attr::RQ_PSN),
            (a.pmtu.is_some(), attr::PMTU),
            (a.path.is_some(), attr::PATH),
            (a.max_dest_rd_atomic.is_some(), attr::MAX_DEST_RD_ATOMIC),
            (a.min_rnr_timer.is_some(), attr::MIN_RNR_TIMER),
            (a.sq_psn.is_some(), attr::SQ_PSN),
            (a.timeout.is_some(), attr::TIMEOUT),
            (a.retry_cnt.is_some(), attr::RETRY_CNT),
            (a.rnr_retry.is_some(), attr::RNR_RETRY),
            (a.max_rd_atomic.is_some(), attr::MAX_RD_ATOMIC),
        ] {
            if on {
                given |= bit;
            }
        }
        rules::check_transition(e.ty, from, to, given).map_err(|t| match t {
            TransitionError::Invalid => bad(
                ErrorCode::InvalidTransition,
                "state",
                format!("{from:?} -> {to:?} is not in SPEC §6.2 for this QP type"),
            ),
            TransitionError::Missing(n) => bad(
                ErrorCode::MissingAttribute,
                &format!("attrs.{n}"),
                "required by this transition",
            ),
            TransitionError::Unexpected(n) => bad(
                ErrorCode::UnexpectedAttribute,
                &format!("attrs.{n}"),
                "not accepted by this transition",
            ),
        })?;
        let mut q = QpAttr {
            mask: mask::STATE,
            state: rules::ibv_state(r.state),
            port_num: self.setup.port,
            sgid_index: self.setup.gid.index,
            hop_limit: 64,
            ..QpAttr::default()
        };
        let mut eff = Map::new();
        let range = |v: u64, lo: u64, hi: u64, field: &str| -> Res<()> {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(bad(
                    ErrorCode::OutOfRange,
                    &format!("attrs.{field}"),
                    format!("{v} is outside {lo}..={hi}"),
                ))
            }
        };
        if let Some(f) = &a.access {
            q.access = self.access(f, "attrs.access")?;
            q.mask |= mask::ACCESS_FLAGS;
            eff.insert(
                "access".into(),
                serde_json::to_value(f).unwrap_or(Value::Null),
            );
        }
        if from == QpState::Reset && to == QpState::Init {
            q.mask |= mask::PKEY_INDEX | mask::PORT;
        }
        if let Some(p) = a.p_key {
            if p & 0x7FFF == 0 {
                return Err(bad(
                    ErrorCode::OutOfRange,
                    "attrs.p_key",
                    "the low 15 bits must not be 0",
                ));
            }
            q.pkey_index =
                sysfs::pkey_index(&self.setup.name, self.setup.port, p).ok_or_else(|| {
                    bad(
                        ErrorCode::Unsupported,
                        "attrs.p_key",
                        format!("0x{p:04X} is not in the device's P_Key table"),
                    )
                })?;
            q.mask |= mask::PKEY_INDEX;
            eff.insert("p_key".into(), p.into());
        }
        if let Some(v) = a.q_key {
            q.qkey = v;
            q.mask |= mask::QKEY;
            eff.insert("q_key".into(), v.into());
        }
        for (v, m, field) in [
            (a.dest_qpn, mask::DEST_QPN, "dest_qpn"),
            (a.rq_psn, mask::RQ_PSN, "rq_psn"),
            (a.sq_psn, mask::SQ_PSN, "sq_psn"),
        ] {
            if let Some(v) = v {
                range(u64::from(v), 0, 0xFF_FFFF, field)?;
                match field {
                    "dest_qpn" => q.dest_qpn = v,
                    "rq_psn" => q.rq_psn = v,
                    _ => q.sq_psn = v,
                }
                q.mask |= m;
                eff.insert(field.into(), v.into());
            }
        }
        if let Some(p) = a.pmtu {
            let m = rules::ibv_mtu(p)
                .filter(|_| p <= self.profile.max_pmtu)
                .ok_or_else(|| {
                    bad(
                        ErrorCode::OutOfRange,
                        "attrs.pmtu",
                        format!("{p}: 256..={} in powers of 2", self.profile.max_pmtu),
                    )
                })?;
            q.path_mtu = m;
            q.mask |= mask::PATH_MTU;
            eff.insert("pmtu".into(), p.into());
        }
        let rd = u64::from(self.profile.max_rd_atomic);
        let drd = u64::from(self.profile.max_dest_rd_atomic);
        for (v, lo, hi, m, field) in [
            (a.timeout, 0, 31, mask::TIMEOUT, "timeout"),
            (a.retry_cnt, 0, 7, mask::RETRY_CNT, "retry_cnt"),
            (a.rnr_retry, 0, 7, mask::RNR_RETRY, "rnr_retry"),
            (a.min_rnr_timer, 0, 31, mask::MIN_RNR_TIMER, "min_rnr_timer"),
            (
                a.max_rd_atomic,
                1,
                rd,
                mask::MAX_QP_RD_ATOMIC,
                "max_rd_atomic",
            ),
            (
                a.max_dest_rd_atomic,
                0,
                drd,
                mask::MAX_DEST_RD_ATOMIC,
                "max_dest_rd_atomic",
            ),
        ] {
            if let Some(v) = v {
                range(u64::from(v), lo, hi, field)?;
                match field {
                    "timeout" => q.timeout = v,
                    "retry_cnt" => q.retry_cnt = v,
                    "rnr_retry" => q.rnr_retry = v,
                    "min_rnr_timer" => q.min_rnr_timer = v,
                    "max_rd_atomic" => q.max_rd_atomic = v,
                    _ => q.max_dest_rd_atomic = v,
                }
                q.mask |= m;
                eff.insert(field.into(), v.into());
            }
        }
        if let Some(p) = &a.path {
            let mac = parse_mac(&p.dest_mac)
                .map_err(|e| bad(ErrorCode::BadValue, "attrs.path.dest_mac", e))?;
            let ip = ipv4(&p.dest_ip, "attrs.path.dest_ip")?;
            if p.hop_limit == 0 {
                return Err(bad(
                    ErrorCode::OutOfRange,
                    "attrs.path.hop_limit",
                    "1..=255",
                ));
            }
            q.dgid = rules::ipv4_gid(ip);
            q.traffic_class = p.traffic_class;
            q.hop_limit = p.hop_limit;
            q.mask |= mask::AV;
            let mac_text = format_mac(mac);
            self.neighbour(ip, &mac_text, "attrs.path.dest_mac")?;
            eff.insert(
                "path".into(),
                json!({"dest_mac": mac_text, "dest_ip": ip.to_string(), "traffic_class": p.traffic_class, "hop_limit": p.hop_limit}),
            );
        }
        if e.uc {
            // UC has no responder resources, RNR, retries or ACK timer:
            // SPEC §6.2 gives every connected QP the same attributes, verbs
            // refuses these on UC, and UC has no behaviour they could change.
            q.mask &= !(mask::MAX_DEST_RD_ATOMIC
                | mask::MIN_RNR_TIMER
                | mask::TIMEOUT
                | mask::RETRY_CNT
                | mask::RNR_RETRY
                | mask::MAX_QP_RD_ATOMIC);
        }
        e.qp.modify(&q)
            .map_err(|err| refused("ibv_modify_qp", "state", err))?;
        if let Some(e) = self.qps.get_mut(&r.qpn) {
            if to == QpState::Reset {
                e.attrs.retain(|k, _| k == "p_key" || k == "mp");
                e.sends = 0;
                e.recvs = 0;
                e.udp_sport = None;
            }
            if let Some(d) = a.dest_qpn
                && self.setup.kernel_udp_sport
            {
                e.udp_sport = Some(rules::kernel_udp_sport(r.qpn, d));
            }
            e.attrs.extend(eff);
        }
        Ok(obj(json!({"qpn": r.qpn, "state": r.state})))
    }

    fn query_qp(&self, qpn: u32) -> Res<Map<String, Value>> {
        let e = self.qp(qpn)?;
        let (state, _) = self.state(e)?;
        let ty = match (e.ty, e.uc) {
            (QpType::Ud, _) => "ud",
            (_, true) => "uc",
            _ => "rc",
        };
        let mut m = obj(json!({
            "qpn": qpn, "qp_type": ty, "state": state, "attrs": e.attrs,
            "pd": e.pd, "send_cq": e.send_cq, "recv_cq": e.recv_cq, "sq_sig_all": e.sq_sig_all,
            "caps": caps_json(&e.caps),
            "outstanding": {"send": e.sends, "recv": e.recvs},
        }));
        if let Some(p) = e.udp_sport {
            m.insert("udp_src_port".into(), p.into());
        }
        Ok(m)
    }

    fn post_send(&mut self, r: &PostSend) -> Res<Map<String, Value>> {
        let e = self.qp(r.qpn)?;
        let sg = sges(&r.sg_list, e.caps.max_send_sge)?;
        use SendOpcode as O;
        let uses: &[&str] = match r.opcode {
            O::Send => &[],
            O::SendWithImm => &["imm"],
            O::SendWithInv => &["invalidate_rkey"],
            O::RdmaWrite | O::RdmaRead => &["remote_addr", "rkey"],
            O::RdmaWriteWithImm => &["remote_addr", "rkey", "imm"],
            O::AtomicCmpAndSwp => &["remote_addr", "rkey", "compare", "swap"],
            O::AtomicFetchAndAdd => &["remote_addr", "rkey", "add"],
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
        if let Some((n, _)) = given.iter().find(|(n, on)| uses.contains(n) && !on) {
            return Err(bad(
                ErrorCode::MissingField,
                n,
                format!("required by opcode {:?}", r.opcode),
            ));
        }
        if let Some((n, _)) = given.iter().find(|(n, on)| *on && !uses.contains(n)) {
            return Err(bad(
                ErrorCode::UnknownField,
                n,
                format!("not used by opcode {:?}", r.opcode),
            ));
        }
        let p = &self.profile;
        let missing = match r.opcode {
            O::AtomicCmpAndSwp | O::AtomicFetchAndAdd => (!p.atomics).then_some("atomics"),
            O::SendWithInv => (!p.send_with_invalidate).then_some("send_with_invalidate"),
            O::SendWithImm | O::RdmaWriteWithImm => (!p.immediate).then_some("immediate"),
            _ => None,
        };
        if let Some(key) = missing {
            return Err(bad(
                ErrorCode::Unsupported,
                "opcode",
                format!("profile {key}: false"),
            ));
        }
        if e.ty == QpType::Ud && !matches!(r.opcode, O::Send | O::SendWithImm) {
            return Err(bad(
                ErrorCode::Unsupported,
                "opcode",
                "a UD QP carries SEND only",
            ));
        }
        if e.uc
            && !matches!(
                r.opcode,
                O::Send | O::SendWithImm | O::RdmaWrite | O::RdmaWriteWithImm
            )
        {
            return Err(bad(
                ErrorCode::Unsupported,
                "opcode",
                "a UC QP carries SEND and WRITE only",
            ));
        }
        match (e.ty, &r.ud) {
            (QpType::Ud, None) => {
                return Err(bad(ErrorCode::BadDestination, "ud", "a UD send needs `ud`"));
            }
            (QpType::Rc, Some(_)) => {
                return Err(bad(
                    ErrorCode::BadDestination,
                    "ud",
                    "an RC send takes no `ud`",
                ));
            }
            _ => {}
        }
        let (_, state) = self.state(e)?;
        if !state.accepts_send() {
            return Err(bad(
                ErrorCode::WrongState,
                "qpn",
                format!("the QP is in {state:?}"),
            ));
        }
        let mut wr = SendWr {
            wr_id: r.wr_id,
            opcode: rules::ibv_wr_opcode(r.opcode),
            flags: u32::from(r.signaled) << 1 | u32::from(r.solicited) << 2 | u32::from(r.fence),
            remote_addr: r.remote_addr.unwrap_or(0),
            rkey: r.rkey.unwrap_or(0),
            imm: r.imm.unwrap_or(0),
            invalidate_rkey: r.invalidate_rkey.unwrap_or(0),
            compare_add: r.compare.or(r.add).unwrap_or(0),
            swap: r.swap.unwrap_or(0),
            ..SendWr::default()
        };
        let pd = e.pd;
        let signaled = r.signaled || e.sq_sig_all;
        let ah_key = match &r.ud {
            None => None,
            Some(u) => {
                let ip = ipv4(&u.ip, "ud.ip")?;
                let mac =
                    parse_mac(&u.mac).map_err(|err| bad(ErrorCode::BadValue, "ud.mac", err))?;
                wr.remote_qpn = qpn24(u.qpn, "ud.qpn")?;
                wr.remote_qkey = u.qkey;
                self.neighbour(ip, &format_mac(mac), "ud.mac")?;
                if !self.ahs.contains_key(&(pd, ip)) {
                    let pdo = self.pds.get(&pd).ok_or_else(|| unknown("pd", pd))?;
                    let ah = pdo
                        .create_ah(rules::ipv4_gid(ip), self.setup.gid.index, self.setup.port)
                        .map_err(|err| refused("ibv_create_ah", "ud.ip", err))?;
                    self.ahs.insert((pd, ip), ah);
                }
                Some((pd, ip))
            }
        };
        let e = self.qp(r.qpn)?;
        let ah = ah_key.and_then(|k| self.ahs.get(&k));
        e.qp.post_send(&wr, ah, &sg).map_err(|err| match err.0 {
            12 => bad(
                ErrorCode::ResourceExhausted,
                "qpn",
                format!("ibv_post_send: {err} (send queue full)"),
            ),
            _ => refused("ibv_post_send", "qpn", err),
        })?;
        if signaled && let Some(e) = self.qps.get_mut(&r.qpn) {
            e.sends += 1;
        }
        Ok(Map::new())
    }

    fn post_recv(&mut self, r: &PostRecv) -> Res<Map<String, Value>> {
        let e = self.qp(r.qpn)?;
        let sg = sges(&r.sg_list, e.caps.max_recv_sge)?;
        let (_, state) = self.state(e)?;
        if !state.accepts_recv() {
            return Err(bad(ErrorCode::WrongState, "qpn", "the QP is in RESET"));
        }
        e.qp.post_recv(r.wr_id, &sg).map_err(|err| match err.0 {
            12 => bad(
                ErrorCode::ResourceExhausted,
                "qpn",
                format!("ibv_post_recv: {err} (receive queue full)"),
            ),
            _ => refused("ibv_post_recv", "qpn", err),
        })?;
        if let Some(e) = self.qps.get_mut(&r.qpn) {
            e.recvs += 1;
        }
        Ok(Map::new())
    }

    fn poll(&mut self, cq: u32, max: u32) -> Res<Vec<CompletionJson>> {
        let c = self.cqs.get(&cq).ok_or_else(|| unknown("cq", cq))?;
        let mut wcs = Vec::new();
        while wcs.len() < max as usize {
            let got = c
                .poll(max as usize - wcs.len())
                .map_err(|e| refused("ibv_poll_cq", "cq", e))?;
            let done = got.len() < ffi::SHIM_MAX_POLL;
            wcs.extend(got);
            if done {
                break;
            }
        }
        let mut out = Vec::with_capacity(wcs.len());
        for wc in wcs {
            let ud = self.qps.get(&wc.qp_num).is_some_and(|e| e.ty == QpType::Ud);
            if let Some(e) = self.qps.get_mut(&wc.qp_num) {
                if wc.opcode & 0x80 != 0 {
                    e.recvs = e.recvs.saturating_sub(1);
                } else {
                    e.sends = e.sends.saturating_sub(1);
                }
            }
            let recv = wc.opcode & 0x80 != 0;
            out.push(CompletionJson {
                wr_id: wc.wr_id,
                status: wc.status,
                status_name: rules::status_name(wc.status).into(),
                opcode: rules::wc_opcode_name(wc.opcode).into(),
                qpn: wc.qp_num,
                byte_len: wc.byte_len,
                imm: (wc.wc_flags & 2 != 0).then(|| u32::from_be(wc.imm_or_inv)),
                invalidated_rkey: (wc.wc_flags & 8 != 0).then_some(wc.imm_or_inv),
                src_qp: (ud && recv).then_some(wc.src_qp),
            });
        }
        Ok(out)
    }
}

impl Handler for VerbsAgent {
    fn handle(&mut self, req: Request) -> Step {
        let id = Some(req.id);
        match &req.op {
            Op::PollCq(p) => match check_poll(p, self.cqs.contains_key(&p.cq)) {
                Err(e) => Step::Reply(Reply::err(id, e)),
                Ok(()) if p.wait_ms == 0 => {
                    Step::Reply(self.try_poll(req.id, p.cq, p.max, true).unwrap_or_else(|| {
                        Reply::err(
                            id,
                            AgentError::general(ErrorCode::Internal, "poll gave nothing"),
                        )
                    }))
                }
                Ok(()) => Step::Wait {
                    id: req.id,
                    cq: p.cq,
                    max: p.max,
                    wait: Duration::from_millis(p.wait_ms),
                },
            },
            Op::Bye(_) => Step::Close(Reply::ok(id, &Map::new())),
            op => Step::Reply(match self.dispatch(op) {
                Ok(m) => Reply::ok(id, &m),
                Err(e) => Reply::err(id, e),
            }),
        }
    }

    fn try_poll(&mut self, id: u64, cq: u32, max: u32, last: bool) -> Option<Reply> {
        match self.poll(cq, max) {
            Err(e) => Some(Reply::err(Some(id), e)),
            Ok(c) if c.is_empty() && !last => None,
            Ok(c) => Some(Reply::ok(Some(id), &json!({ "completions": c }))),
        }
    }
}

fn caps_json(c: &Caps) -> Value {
    json!({"max_send_wr": c.max_send_wr, "max_recv_wr": c.max_recv_wr,
           "max_send_sge": c.max_send_sge, "max_recv_sge": c.max_recv_sge})
}

fn sges(list: &[SgeJson], max: u32) -> Res<Vec<Sge>> {
    metaroce_agent::check::sges(list, max, |s| Sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    })
}
