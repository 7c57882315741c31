//! [`Device`]: one endpoint with its QPs, memory and CQs, and the sans-IO
//! surface (`handle_frame`, `handle_timeout`, `poll_transmit`,
//! `poll_timeout`).

use crate::counters::Counters;
use crate::cq::{CqHandle, CqTable, WorkCompletion};
use crate::error::VerbsError;
use crate::mp::config::{MpAttrs, MpEntropy};
use crate::mp::{is_mp_opcode, is_mp_response};
use crate::mr::{Access, Memory, MrInfo, PdHandle};
use crate::qp::{Env, Qp, QpAttrs, QpConfig, QpInfo, QpInit, QpState, QpType, QueueDepths};
use crate::rc::is_response;
use crate::rng::DeviceRng;
use crate::rx::{Decoded, RxPacket, decode};
use crate::wire::{ECN_CE, Out, Path};
use crate::wr::{RecvWr, SendWr};
use core::net::Ipv4Addr;
use metaroce_codec::opcode::PayloadRule;
use metaroce_codec::{Dialect, Opcode, ParseOptions, ServiceClass};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// Device-wide configuration and declared capabilities (SPEC §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceConfig {
    /// Local MAC address.
    pub mac: [u8; 6],
    /// Local IPv4 address.
    pub ip: Ipv4Addr,
    /// `max_pmtu`, also the PMTU of UD QPs.
    pub max_pmtu: u32,
    /// Declared `max_rd_atomic`.
    pub max_rd_atomic: u8,
    /// Declared `max_dest_rd_atomic`.
    pub max_dest_rd_atomic: u8,
    /// `max_msg_size` (at most 2^31).
    pub max_msg_size: u64,
    /// Largest span of unacknowledged PSNs a requester keeps (MR-PSN-4
    /// requires < 2^23; a small window bounds go-back-N work and memory).
    pub max_outstanding_psns: u32,
    /// Generate CNPs for CE-marked packets (§6.17).
    pub cnp_generation: bool,
    /// `cnp_interval` in ns (per destination QP, scope `qp`).
    pub cnp_interval_ns: u64,
    /// The bug-zoo mutant this device runs (feature `zoo`; `None`: the
    /// correct transport). See `ZOO.md`.
    #[cfg(feature = "zoo")]
    pub mutant: Option<crate::zoo::Mutant>,
}

impl DeviceConfig {
    /// Defaults of SPEC §10 for a device with these addresses.
    pub fn new(mac: [u8; 6], ip: Ipv4Addr) -> Self {
        DeviceConfig {
            mac,
            ip,
            max_pmtu: 4096,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            max_msg_size: 1 << 31,
            max_outstanding_psns: 128,
            cnp_generation: true,
            cnp_interval_ns: 50_000,
            #[cfg(feature = "zoo")]
            mutant: None,
        }
    }
}

/// One MetaRoCE endpoint. See the crate documentation for the polling order.
#[derive(Debug)]
pub struct Device {
    config: DeviceConfig,
    rng: DeviceRng,
    mem: Memory,
    cqs: CqTable,
    qps: BTreeMap<u32, Qp>,
    /// Every QP's next deadline (its `poll_timeout`) as (time, QPN), kept
    /// up to date after each call into a QP, so that `poll_timeout` and
    /// `handle_timeout` cost no more with more QPs.
    timers: BTreeSet<(u64, u32)>,
    /// The deadline of each QP that has one (its entry in `timers`).
    timer_of: HashMap<u32, u64>,
    counters: Counters,
    now: u64,
    urgent: VecDeque<Vec<u8>>,
    rr: u32,
    cnp_last: HashMap<u32, u64>,
    parse: ParseOptions,
    /// zoo: wedge-on-bad-padcnt (the device) and wedge-on-unknown-opcode
    /// (these QPs) stopped taking packets.
    #[cfg(feature = "zoo")]
    wedged: (bool, std::collections::BTreeSet<u32>),
}

impl Device {
    /// A device; `seed` feeds the ChaCha20 generator of PSNs, keys and QPNs
    /// and must be fresh per device (MR-SEC-11).
    pub fn new(config: DeviceConfig, seed: [u8; 32]) -> Self {
        Device {
            config,
            rng: DeviceRng::new(seed),
            mem: Memory::default(),
            cqs: CqTable::default(),
            qps: BTreeMap::new(),
            timers: BTreeSet::new(),
            timer_of: HashMap::new(),
            counters: Counters::default(),
            now: 0,
            urgent: VecDeque::new(),
            rr: 0,
            cnp_last: HashMap::new(),
            parse: ParseOptions::default(),
            #[cfg(feature = "zoo")]
            wedged: Default::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &DeviceConfig {
        &self.config
    }

    /// Counters of SPEC §9.3.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The latest time given to `handle_*`.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// A uniformly drawn 24-bit PSN for `sq_psn` / `rq_psn` (MR-SEC-1).
    pub fn random_psn(&mut self) -> u32 {
        self.rng.next_u24()
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&mut self) -> PdHandle {
        self.mem.alloc_pd()
    }

    /// Registers `len` zeroed bytes with random L_Key and R_Key (MR-SEC-2).
    pub fn reg_mr(
        &mut self,
        pd: PdHandle,
        len: usize,
        access: Access,
    ) -> Result<MrInfo, VerbsError> {
        self.mem.register(&mut self.rng, pd, len, access)
    }

    /// Deregisters a region; its R_Key is NAKed from now on (MR-SEC-8).
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<(), VerbsError> {
        self.mem.deregister(lkey)
    }

    /// Reads bytes of a region (application or agent access).
    pub fn read_mr(&self, lkey: u32, addr: u64, len: u64) -> Result<&[u8], VerbsError> {
        self.mem.read(lkey, addr, len)
    }

    /// Surrounds a region with `len` canary bytes of value `fill` on each
    /// side: memory outside the region that the harness checks is never
    /// touched (MR-SEC-4; the agent's `canary_len`).
    pub fn set_mr_canary(&mut self, lkey: u32, len: usize, fill: u8) -> Result<(), VerbsError> {
        self.mem.set_canary(lkey, len, fill)
    }

    /// The canary bytes before and after a region.
    pub fn mr_canary(&self, lkey: u32) -> Result<(&[u8], &[u8]), VerbsError> {
        self.mem.canary(lkey)
    }

    /// Writes bytes of a region (application or agent access).
    pub fn write_mr(&mut self, lkey: u32, addr: u64, data: &[u8]) -> Result<(), VerbsError> {
        self.mem.write(lkey, addr, data)
    }

    /// Creates a completion queue.
    pub fn create_cq(&mut self) -> CqHandle {
        self.cqs.create()
    }

    /// Takes up to `max` completions, oldest first.
    pub fn poll_cq(&mut self, cq: CqHandle, max: usize) -> Result<Vec<WorkCompletion>, VerbsError> {
        self.cqs.poll(cq, max).ok_or(VerbsError::UnknownCq(cq.0))
    }

    /// Creates a QP in RESET (MR-QP-1) with a random QPN (MR-SEC-3).
    pub fn create_qp(&mut self, init: QpInit) -> Result<u32, VerbsError> {
        if !self.mem.pd_exists(init.pd) {
            return Err(VerbsError::UnknownPd(init.pd.0));
        }
        for cq in [init.send_cq, init.recv_cq] {
            if !self.cqs.exists(cq) {
                return Err(VerbsError::UnknownCq(cq.0));
            }
        }
        let qpn = loop {
            let q = self.rng.next_u24();
            if q > 1 && q != 0xFF_FFFF && !self.qps.contains_key(&q) {
                break q;
            }
        };
        let cfg = QpConfig {
            qpn,
            qp_type: init.qp_type,
            pd: init.pd,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            sq_sig_all: init.sq_sig_all,
            access: Access::NONE,
            pkey: 0xFFFF,
            qkey: 0,
            dest_qpn: 0,
            rq_psn: 0,
            sq_psn: 0,
            pmtu: if init.qp_type == QpType::Ud {
                self.config.max_pmtu
            } else {
                1024
            },
            av: None,
            max_dest_rd_atomic: 16.min(self.config.max_dest_rd_atomic),
            min_rnr_timer: 12,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 16.min(self.config.max_rd_atomic),
            udp_src_port: 0xC000 | (qpn as u16 & 0x3FFF),
            local_mac: self.config.mac,
            local_ip: self.config.ip,
            window: self.config.max_outstanding_psns.clamp(1, (1 << 23) - 1),
            max_msg_size: self.config.max_msg_size.min(1 << 31),
            #[cfg(feature = "zoo")]
            mutant: self.config.mutant,
        };
        self.qps.insert(qpn, Qp::new(cfg));
        Ok(qpn)
    }

    /// Destroys a QP without completions.
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), VerbsError> {
        self.qps.remove(&qpn).ok_or(VerbsError::UnknownQp(qpn))?;
        self.rearm(qpn);
        Ok(())
    }

    /// Moves a QP to `to` with `attrs`, per the table of SPEC §6.2.
    pub fn modify_qp(&mut self, qpn: u32, to: QpState, attrs: &QpAttrs) -> Result<(), VerbsError> {
        let caps = (
            self.config.max_pmtu,
            self.config.max_rd_atomic,
            self.config.max_dest_rd_atomic,
        );
        self.with_qp(qpn, |qp, env| qp.modify(to, attrs, caps, env))?
    }

    /// INIT to RTR of an MP QP (SPEC §7.1, MR-MPN-1): the attributes of
    /// `modify_qp` plus the MP parameters, checked all-or-nothing
    /// (MR-MPS-2, MR-MPW-4). The QP then runs the MP strategy until RESET;
    /// nothing can change `mp`, `mp_window` or `mp_trim_dscp` afterwards.
    pub fn modify_qp_mp(
        &mut self,
        qpn: u32,
        attrs: &QpAttrs,
        mp: &MpAttrs,
    ) -> Result<(), VerbsError> {
        let caps = (
            self.config.max_pmtu,
            self.config.max_rd_atomic,
            self.config.max_dest_rd_atomic,
        );
        let pmtu = match (attrs.pmtu, self.qps.get(&qpn)) {
            (Some(p), _) => p,
            (None, Some(qp)) => qp.cfg.pmtu,
            (None, None) => return Err(VerbsError::UnknownQp(qpn)),
        };
        let mp = mp.check(pmtu)?;
        let seed = u64::from(self.rng.next_u32()) << 32 | u64::from(self.rng.next_u32());
        self.with_qp(qpn, |qp, env| qp.modify_mp(attrs, caps, mp, seed, env))?
    }

    /// A one-line summary of an MP QP's state (diagnostics).
    #[doc(hidden)]
    pub fn mp_summary(&self, qpn: u32) -> String {
        match self.qps.get(&qpn).map(|q| &q.transport) {
            Some(crate::qp::Transport::Mp(mp)) => mp.summary(),
            _ => String::new(),
        }
    }

    /// Whether a QP runs the MP strategy.
    pub fn is_mp(&self, qpn: u32) -> Result<bool, VerbsError> {
        self.qps
            .get(&qpn)
            .map(Qp::is_mp)
            .ok_or(VerbsError::UnknownQp(qpn))
    }

    /// The effective MP parameters of an MP QP (MR-PICS-5, SPEC §7.1):
    /// the entropy set actually used (seeded sets expanded to their
    /// values), the window, the trimming DSCP and the local constants;
    /// `None` for a QP that is not (or no longer, after RESET) an MP QP.
    pub fn query_mp(&self, qpn: u32) -> Result<Option<MpAttrs>, VerbsError> {
        let qp = self.qps.get(&qpn).ok_or(VerbsError::UnknownQp(qpn))?;
        Ok(match &qp.transport {
            crate::qp::Transport::Mp(mp) => Some(MpAttrs {
                entropy: MpEntropy::Values(mp.cfg.values.clone()),
                window: mp.cfg.window,
                trim_dscp: mp.cfg.trim_dscp,
                ack_dscp: mp.cfg.ack_dscp,
                peer_ordered: mp.cfg.peer_ordered,
                tuning: mp.cfg.tuning,
                peer_resource_nak: mp.cfg.peer_resource_nak,
                max_staged_bytes: mp.cfg.max_staged_bytes,
            }),
            _ => None,
        })
    }

    /// The QP's state and effective attributes (MR-PICS-5).
    pub fn query_qp(&self, qpn: u32) -> Result<QpInfo, VerbsError> {
        self.qps
            .get(&qpn)
            .map(Qp::info)
            .ok_or(VerbsError::UnknownQp(qpn))
    }

    /// Queue sizes of a QP (for memory-bound checks).
    pub fn queue_depths(&self, qpn: u32) -> Result<QueueDepths, VerbsError> {
        self.qps
            .get(&qpn)
            .map(Qp::queue_depths)
            .ok_or(VerbsError::UnknownQp(qpn))
    }

    /// Posts a send work request. Packets leave through `poll_transmit`.
    pub fn post_send(&mut self, qpn: u32, wr: SendWr) -> Result<(), VerbsError> {
        self.with_qp(qpn, |qp, env| qp.post_send(wr, env))?
    }

    /// Posts a receive work request.
    pub fn post_recv(&mut self, qpn: u32, wr: RecvWr) -> Result<(), VerbsError> {
        self.with_qp(qpn, |qp, env| qp.post_recv(wr, env))?
    }

    fn with_qp<R>(
        &mut self,
        qpn: u32,
        f: impl FnOnce(&mut Qp, &mut Env<'_>) -> R,
    ) -> Result<R, VerbsError> {
        let qp = self.qps.get_mut(&qpn).ok_or(VerbsError::UnknownQp(qpn))?;
        let mut env = Env {
            mem: &mut self.mem,
            cqs: &mut self.cqs,
            counters: &mut self.counters,
            now: self.now,
            urgent: &mut self.urgent,
            enter_err: false,
        };
        let r = f(qp, &mut env);
        self.rearm(qpn);
        Ok(r)
    }

    /// Brings QP `qpn`'s entry in the timer set up to date (a QP's
    /// deadline depends only on its own state, which changes only in
    /// `with_qp`; a destroyed QP has none).
    fn rearm(&mut self, qpn: u32) {
        let t = self.qps.get(&qpn).and_then(Qp::poll_timeout);
        let old = self.timer_of.get(&qpn).copied();
        if old == t {
            return;
        }
        if let Some(o) = old {
            self.timers.remove(&(o, qpn));
        }
        match t {
            Some(t) => {
                self.timers.insert((t, qpn));
                self.timer_of.insert(qpn, t);
            }
            None => {
                self.timer_of.remove(&qpn);
            }
        }
    }

    /// Processes one received Ethernet frame at time `now_ns`. Never panics;
    /// every input gets the outcome of SPEC §9.2.
    pub fn handle_frame(&mut self, now_ns: u64, frame: &[u8]) {
        self.now = self.now.max(now_ns);
        self.counters.frames_received += 1;
        // zoo: wedge-on-bad-padcnt — a wedged device takes nothing more.
        zoo!(self.config.mutant, WedgeOnBadPadcnt => if self.wedged.0 { return });
        let pkt = match decode(frame, &self.parse) {
            Decoded::NotRoce => return,
            Decoded::Malformed => {
                self.counters.malformed_drops += 1;
                // zoo: wedge-on-bad-padcnt — the device wedges.
                zoo!(self.config.mutant, WedgeOnBadPadcnt
                    => self.wedged.0 |= crate::zoo::pad_overrun(frame, &self.parse));
                return;
            }
            Decoded::Packet(p) => p,
        };
        self.dispatch(&pkt);
    }

    /// Rows 10–21 of §9.2, then the QP.
    fn dispatch(&mut self, pkt: &RxPacket<'_>) {
        // zoo: qpn-low-bits — the QP is looked up by 16 of the 24 bits.
        let dest = zoo!(self.config.mutant, QpnLowBits => self.qps.keys().copied()
            .find(|q| q & 0xFFFF == pkt.bth.dest_qp & 0xFFFF)
            .unwrap_or(pkt.bth.dest_qp), else pkt.bth.dest_qp);
        let c = &mut self.counters;
        let Some(qp) = self
            .qps
            .get_mut(&dest)
            .filter(|_| !matches!(dest, 0 | 1 | 0xFF_FFFF))
        else {
            c.unknown_qp_drops += 1; // row 10, MR-BTH-6
            return;
        };
        // zoo: wedge-on-unknown-opcode — a wedged QP takes nothing more.
        zoo!(self.config.mutant, WedgeOnUnknownOpcode
            => if self.wedged.1.contains(&dest) { return });
        let op = pkt.bth.opcode;
        let Some(layout) = op.layout(Dialect::MetaRoce) else {
            c.malformed_drops += 1; // rows 11, 13 (MR-OPC-2, MR-OPC-4)
            // zoo: wedge-on-unknown-opcode — the QP wedges.
            zoo!(self.config.mutant, WedgeOnUnknownOpcode => self.wedged.1.insert(dest));
            return;
        };
        let cnp = op == Opcode::CNP;
        // Rows 12, 15: class must match the QP type; FLUSH and ATOMIC WRITE
        // are declared absent (MR-PICS-3). A CNP is the reaction point's,
        // whatever the QP type (§6.17), and goes through the same rows as
        // any packet before it counts (MR-DCQCN-8).
        let class_ok = cnp
            || match qp.cfg.qp_type {
                // MR-MPN-2: an MP QP takes MP opcodes only; a Base QP never.
                QpType::Rc if qp.is_mp() => is_mp_opcode(op.0),
                QpType::Rc => {
                    op.class() == ServiceClass::Rc
                        && op != Opcode::RC_FLUSH
                        && op != Opcode::RC_ATOMIC_WRITE
                }
                QpType::Ud => op.class() == ServiceClass::Ud,
            };
        if !class_ok {
            c.malformed_drops += 1;
            return;
        }
        // Row 16: the state must accept the packet kind (MR-QP-3/4/5); a
        // CNP, neither request nor response, is dropped where both are.
        let state_ok = match qp.cfg.qp_type {
            _ if cnp => qp.state.accepts_requests() || qp.state.accepts_responses(),
            QpType::Rc if qp.is_mp() && is_mp_response(op.0) => qp.state.accepts_responses(),
            QpType::Rc if qp.is_mp() => qp.state.accepts_requests(),
            QpType::Rc if is_response(op.0) => qp.state.accepts_responses(),
            _ => qp.state.accepts_requests(),
        };
        if !state_ok {
            c.malformed_drops += 1;
            return;
        }
        // Row 17: addresses of a connected QP (MR-SEC-9).
        if qp.cfg.qp_type == QpType::Rc
            && (qp.cfg.av.is_none_or(|av| av.dest_ip != pkt.src_ip) || pkt.dst_ip != self.config.ip)
        {
            c.malformed_drops += 1;
            return;
        }
        // Row 18 (MR-BTH-5): equal low 15 bits, not zero, one full member.
        // zoo: pkey-not-checked
        if !metaroce_codec::bth::pkey_matches(pkt.bth.pkey, qp.cfg.pkey)
            && !zoo!(self.config.mutant, PkeyNotChecked)
        {
            c.pkey_violations += 1;
            return;
        }
        // Row 19 (MR-UD-2); a CNP carries no DETH.
        // zoo: qkey-not-checked
        if qp.cfg.qp_type == QpType::Ud
            && !cnp
            && pkt.ext.deth.is_none_or(|d| d.qkey != qp.cfg.qkey)
            && !zoo!(self.config.mutant, QkeyNotChecked)
        {
            c.qkey_violations += 1;
            return;
        }
        // Row 20 (MR-ROB-4).
        if pkt.pad_too_large
            || (layout.payload == PayloadRule::None
                && (pkt.bth.pad_count != 0 || !pkt.payload.is_empty()))
        {
            c.malformed_drops += 1;
            // zoo: wedge-on-bad-padcnt — the device wedges.
            zoo!(self.config.mutant, WedgeOnBadPadcnt => self.wedged.0 |= pkt.bth.pad_count != 0);
            return;
        }
        // Row 21 (MR-ICRC-3, MR-ICRC-4, MR-ICRC-6): before any effect.
        // zoo: icrc-not-checked
        if !pkt.icrc_ok && !zoo!(self.config.mutant, IcrcNotChecked) {
            c.icrc_errors += 1;
            return;
        }
        let qp_is_mp = qp.is_mp();
        if cnp {
            // MR-CNP-5: no response and no state change (DCQCN is not in
            // this slice); counted once it passed every row (MR-DCQCN-8),
            // on an MP QP too (where it has no effect, MR-MPN-5).
            if pkt.ecn == ECN_CE {
                c.ecn_ce_received += 1;
            }
            c.cnp_received += 1;
            return;
        }
        if pkt.ecn == ECN_CE {
            c.ecn_ce_received += 1;
            // MR-MPN-3: an MP QP sends no CNP.
            if op != Opcode::RC_ACK && op != Opcode::RC_ATOMIC_ACK && !qp_is_mp {
                self.maybe_cnp(dest, pkt);
            }
        }
        let _ = self.with_qp(dest, |qp, env| qp.handle_packet(pkt, env));
    }

    /// CNP generation (§6.17, MR-CNP-1..4), paced per destination QP.
    fn maybe_cnp(&mut self, qpn: u32, pkt: &RxPacket<'_>) {
        // zoo: cnp-never-sent
        if !self.config.cnp_generation || zoo!(self.config.mutant, CnpNeverSent) {
            return;
        }
        let Some(qp) = self.qps.get(&qpn) else { return };
        // MR-CNP-4: to the QP that sent the marked packet — the connected
        // QP for RC, the DETH source QP (at the frame's source MAC) for UD.
        let (target, mac) = match (qp.cfg.qp_type, qp.cfg.av, pkt.ext.deth) {
            (QpType::Rc, Some(av), _) => (qp.cfg.dest_qpn, av.dest_mac),
            (QpType::Ud, _, Some(deth)) => (deth.src_qp, pkt.src_mac),
            _ => return,
        };
        let last = self.cnp_last.get(&target).copied();
        // zoo: cnp-not-paced
        if last.is_some_and(|t| self.now.saturating_sub(t) < self.config.cnp_interval_ns)
            && !zoo!(self.config.mutant, CnpNotPaced)
        {
            return; // MR-CNP-2
        }
        self.cnp_last.insert(target, self.now);
        let path = Path {
            src_mac: self.config.mac,
            dst_mac: mac,
            src_ip: pkt.dst_ip,
            dst_ip: pkt.src_ip,
            udp_src_port: qp.cfg.udp_src_port,
            traffic_class: 48 << 2, // cnp_dscp
            hop_limit: 64,
            pkey: qp.cfg.pkey,
            dest_qp: target,
        };
        let mut out = Out::new(Opcode::CNP, 0);
        out.ext.cnp = Some(Default::default());
        self.urgent.push_back(path.build(out));
        self.counters.cnp_sent += 1;
    }

    /// Fires every timer due at `now_ns` (local ACK timeouts, RNR waits).
    pub fn handle_timeout(&mut self, now_ns: u64) {
        self.now = self.now.max(now_ns);
        let mut due: Vec<u32> = (self.timers.iter())
            .take_while(|&&(t, _)| t <= self.now)
            .map(|&(_, q)| q)
            .collect();
        // In QPN order, as QPs are served everywhere else.
        due.sort_unstable();
        for qpn in due {
            let _ = self.with_qp(qpn, |qp, env| qp.handle_timeout(env));
        }
    }

    /// The next frame to put on the wire, if any. QPs are served round-robin.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        if let Some(frame) = self.urgent.pop_front() {
            self.counters.frames_sent += 1;
            return Some(frame);
        }
        // Every QP once, starting after the last one served (no list is
        // built: this runs for every frame sent).
        let mut cursor = self.rr;
        for _ in 0..self.qps.len() {
            let Some(qpn) = self
                .qps
                .range(cursor.saturating_add(1)..)
                .next()
                .or_else(|| self.qps.range(..=cursor).next())
                .map(|(&q, _)| q)
            else {
                break;
            };
            cursor = qpn;
            let frame = self
                .with_qp(qpn, |qp, env| qp.poll_transmit(env))
                .ok()
                .flatten();
            if let Some(frame) = frame {
                self.rr = qpn;
                self.counters.frames_sent += 1;
                return Some(frame);
            }
            if let Some(frame) = self.urgent.pop_front() {
                self.counters.frames_sent += 1;
                return Some(frame);
            }
        }
        None
    }

    /// The earliest time at which `handle_timeout` has work, if any.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<u64> {
        let next = self.timers.first().map(|&(t, _)| t);
        debug_assert_eq!(next, self.qps.values().filter_map(Qp::poll_timeout).min());
        next
    }
}
