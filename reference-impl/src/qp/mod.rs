//! Queue pairs: attributes, state transitions, and the per-QP transport
//! strategy (Base RC, MP beside it, or UD), sharing this state machine,
//! memory checks and encapsulation. A QP's configuration and what its
//! handlers may touch are in [`crate::qp_config`], which the transports
//! import without importing this dispatcher.

/// QP states and the transition table of SPEC §6.2 (one home: the agent
/// protocol's crate, whose `modify_qp` follows it).
pub use metaroce_agent::qp_state as state;

use crate::cq::CqHandle;
use crate::error::VerbsError;
use crate::mp::MpTransport;
use crate::mp::config::MpConfig;
use crate::mr::{Access, PdHandle};
use crate::rc::RcTransport;
use crate::rx::RxPacket;
use crate::ud::UdTransport;
use crate::wr::{RecvWr, SendWr};

pub use crate::qp_config::{AddressVector, QueueDepths};
pub(crate) use crate::qp_config::{Env, QpConfig, flushed_recv};

use state::attr;
pub use state::{QpState, QpType};

/// Attributes for `modify_qp`; `None` means "not given". Which ones a
/// transition needs or accepts is the table of [`state::TABLE`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpAttrs {
    /// Remote access rights granted by the QP.
    pub access: Option<Access>,
    /// Partition key (default 0xFFFF).
    pub pkey: Option<u16>,
    /// Q_Key (UD).
    pub qkey: Option<u32>,
    /// Peer QPN.
    pub dest_qpn: Option<u32>,
    /// First expected PSN at the responder.
    pub rq_psn: Option<u32>,
    /// Path MTU in bytes: 256, 512, 1024, 2048 or 4096.
    pub pmtu: Option<u32>,
    /// Path to the peer.
    pub path: Option<AddressVector>,
    /// Responder resources.
    pub max_dest_rd_atomic: Option<u8>,
    /// RNR timer code put in RNR NAKs.
    pub min_rnr_timer: Option<u8>,
    /// PSN of the first request packet.
    pub sq_psn: Option<u32>,
    /// Local ACK timeout exponent (0 disables).
    pub timeout: Option<u8>,
    /// Transport retries (7 means seven).
    pub retry_cnt: Option<u8>,
    /// RNR retries (7 means unlimited).
    pub rnr_retry: Option<u8>,
    /// Outstanding RDMA-resource operations as requester.
    pub max_rd_atomic: Option<u8>,
}

impl QpAttrs {
    fn mask(&self) -> u32 {
        let bits = [
            (self.access.is_some(), attr::ACCESS),
            (self.pkey.is_some(), attr::PKEY),
            (self.qkey.is_some(), attr::QKEY),
            (self.dest_qpn.is_some(), attr::DEST_QPN),
            (self.rq_psn.is_some(), attr::RQ_PSN),
            (self.pmtu.is_some(), attr::PMTU),
            (self.path.is_some(), attr::PATH),
            (self.max_dest_rd_atomic.is_some(), attr::MAX_DEST_RD_ATOMIC),
            (self.min_rnr_timer.is_some(), attr::MIN_RNR_TIMER),
            (self.sq_psn.is_some(), attr::SQ_PSN),
            (self.timeout.is_some(), attr::TIMEOUT),
            (self.retry_cnt.is_some(), attr::RETRY_CNT),
            (self.rnr_retry.is_some(), attr::RNR_RETRY),
            (self.max_rd_atomic.is_some(), attr::MAX_RD_ATOMIC),
        ];
        bits.iter().filter(|(on, _)| *on).fold(0, |m, (_, b)| m | b)
    }

    /// Range checks of SPEC §10.1 (MR-PICS-4, MR-ENC-24).
    fn check_ranges(&self, max_pmtu: u32, max_rd: u8, max_dest_rd: u8) -> Result<(), VerbsError> {
        let bad = |ok: bool, name| {
            if ok {
                Ok(())
            } else {
                Err(VerbsError::OutOfRange(name))
            }
        };
        if let Some(p) = self.pmtu {
            bad(
                matches!(p, 256 | 512 | 1024 | 2048 | 4096) && p <= max_pmtu,
                "pmtu",
            )?;
        }
        if let Some(k) = self.pkey {
            bad(k & 0x7FFF != 0, "p_key")?;
        }
        for (v, name) in [
            (self.dest_qpn, "dest_qpn"),
            (self.rq_psn, "rq_psn"),
            (self.sq_psn, "sq_psn"),
        ] {
            bad(v.is_none_or(|v| v <= 0xFF_FFFF), name)?;
        }
        bad(self.timeout.is_none_or(|v| v <= 31), "timeout")?;
        bad(self.min_rnr_timer.is_none_or(|v| v <= 31), "min_rnr_timer")?;
        bad(self.retry_cnt.is_none_or(|v| v <= 7), "retry_cnt")?;
        bad(self.rnr_retry.is_none_or(|v| v <= 7), "rnr_retry")?;
        bad(
            self.max_rd_atomic.is_none_or(|v| (1..=max_rd).contains(&v)),
            "max_rd_atomic",
        )?;
        bad(
            self.max_dest_rd_atomic.is_none_or(|v| v <= max_dest_rd),
            "max_dest_rd_atomic",
        )?;
        bad(self.path.is_none_or(|p| p.hop_limit >= 1), "hop_limit")?;
        Ok(())
    }
}

/// What `create_qp` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpInit {
    /// RC or UD.
    pub qp_type: QpType,
    /// Protection domain of the QP.
    pub pd: PdHandle,
    /// CQ for send completions.
    pub send_cq: CqHandle,
    /// CQ for receive completions.
    pub recv_cq: CqHandle,
    /// Complete every send work request, signaled or not.
    pub sq_sig_all: bool,
}

/// Effective values of a QP (MR-PICS-5), as `query_qp` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpInfo {
    /// QP number.
    pub qpn: u32,
    /// Type.
    pub qp_type: QpType,
    /// Current state.
    pub state: QpState,
    /// The attributes in force (all `Some`, except the path of a UD QP).
    pub attrs: QpAttrs,
    /// The constant UDP source port of the QP.
    pub udp_src_port: u16,
}

/// The transport strategy of a QP.
#[derive(Debug)]
pub(crate) enum Transport {
    /// Base RC: go-back-N requester and in-order responder (SPEC §6).
    Rc(Box<RcTransport>),
    /// UD (SPEC §6.20).
    Ud(UdTransport),
    /// MP (SPEC §7), negotiated at INIT to RTR.
    Mp(Box<MpTransport>),
}

/// One queue pair.
#[derive(Debug)]
pub(crate) struct Qp {
    pub cfg: QpConfig,
    pub state: QpState,
    pub transport: Transport,
}

impl Qp {
    pub(crate) fn new(cfg: QpConfig) -> Self {
        let transport = Self::fresh_transport(&cfg);
        Qp {
            cfg,
            state: QpState::Reset, // MR-QP-1
            transport,
        }
    }

    fn fresh_transport(cfg: &QpConfig) -> Transport {
        match cfg.qp_type {
            QpType::Rc => Transport::Rc(Box::new(RcTransport::new(cfg))),
            QpType::Ud => Transport::Ud(UdTransport::new(cfg)),
        }
    }

    /// `modify_qp`: one table lookup, then all-or-nothing (MR-QP-2).
    pub(crate) fn modify(
        &mut self,
        to: QpState,
        attrs: &QpAttrs,
        caps: (u32, u8, u8),
        env: &mut Env<'_>,
    ) -> Result<(), VerbsError> {
        let row = state::lookup(self.cfg.qp_type, self.state, to).ok_or(
            VerbsError::InvalidTransition {
                from: self.state,
                to,
            },
        )?;
        let given = attrs.mask();
        let missing = row.required & !given;
        if missing != 0 {
            return Err(VerbsError::MissingAttribute(attr::first_name(missing)));
        }
        let extra = given & !(row.required | row.optional);
        if extra != 0 {
            return Err(VerbsError::UnexpectedAttribute(attr::first_name(extra)));
        }
        attrs.check_ranges(caps.0, caps.1, caps.2)?;
        self.apply(attrs);
        let from = self.state;
        self.state = to;
        match to {
            QpState::Reset => {
                // MR-QP-8: discard everything, no completions.
                self.transport = Self::fresh_transport(&self.cfg);
            }
            QpState::Err if from != QpState::Err => self.flush(env),
            QpState::Rtr if from == QpState::Init => self.on_rtr(),
            QpState::Rts if from == QpState::Rtr => self.on_rts(),
            _ => {}
        }
        Ok(())
    }

    fn apply(&mut self, a: &QpAttrs) {
        let c = &mut self.cfg;
        if let Some(v) = a.access {
            c.access = v;
        }
        if let Some(v) = a.pkey {
            c.pkey = v;
        }
        if let Some(v) = a.qkey {
            c.qkey = v;
        }
        if let Some(v) = a.dest_qpn {
            c.dest_qpn = v;
        }
        if let Some(v) = a.rq_psn {
            c.rq_psn = v;
        }
        if let Some(v) = a.pmtu {
            c.pmtu = v;
        }
        if let Some(v) = a.path {
            c.av = Some(v);
        }
        if let Some(v) = a.max_dest_rd_atomic {
            c.max_dest_rd_atomic = v;
        }
        if let Some(v) = a.min_rnr_timer {
            c.min_rnr_timer = v;
        }
        if let Some(v) = a.sq_psn {
            c.sq_psn = v;
        }
        if let Some(v) = a.timeout {
            c.timeout = v;
        }
        if let Some(v) = a.retry_cnt {
            c.retry_cnt = v;
        }
        if let Some(v) = a.rnr_retry {
            c.rnr_retry = v;
        }
        if let Some(v) = a.max_rd_atomic {
            c.max_rd_atomic = v;
        }
    }

    /// INIT to RTR with the MP attributes (MR-MPN-1): the transition of
    /// `modify`, then the MP strategy replaces Base RC.
    pub(crate) fn modify_mp(
        &mut self,
        attrs: &QpAttrs,
        caps: (u32, u8, u8),
        mp: MpConfig,
        seed: u64,
        env: &mut Env<'_>,
    ) -> Result<(), VerbsError> {
        if self.cfg.qp_type != QpType::Rc || self.state != QpState::Init {
            return Err(VerbsError::InvalidTransition {
                from: self.state,
                to: QpState::Rtr,
            });
        }
        self.modify(QpState::Rtr, attrs, caps, env)?;
        // Receive work requests posted in INIT carry over, in order.
        let posted = match &mut self.transport {
            Transport::Rc(rc) => rc.rsp.take_posted(),
            Transport::Ud(_) | Transport::Mp(_) => Default::default(),
        };
        let mut transport = Box::new(MpTransport::new(&self.cfg, mp, seed));
        for wr in posted {
            transport.rsp.post_recv(&self.cfg, wr, env);
        }
        self.transport = Transport::Mp(transport);
        Ok(())
    }

    /// Whether the QP runs the MP strategy.
    pub(crate) fn is_mp(&self) -> bool {
        matches!(self.transport, Transport::Mp(_))
    }

    /// MR-QP-9: expected PSN = rq_psn, MSN = 0.
    fn on_rtr(&mut self) {
        if let Transport::Rc(rc) = &mut self.transport {
            rc.rsp.start(&self.cfg);
        }
    }

    /// MR-QP-9: the first request packet carries sq_psn.
    fn on_rts(&mut self) {
        match &mut self.transport {
            Transport::Rc(rc) => rc.req.start(&self.cfg),
            Transport::Ud(ud) => ud.start(&self.cfg),
            Transport::Mp(mp) => mp.start_requester(&self.cfg),
        }
    }

    /// Enters ERR and flushes every queued work request (MR-QP-6).
    pub(crate) fn flush(&mut self, env: &mut Env<'_>) {
        self.state = QpState::Err;
        match &mut self.transport {
            Transport::Rc(rc) => rc.flush(&self.cfg, env),
            Transport::Ud(ud) => ud.flush(&self.cfg, env),
            Transport::Mp(mp) => mp.flush(&self.cfg, env),
        }
    }

    /// Applies a handler's request to enter ERR.
    fn settle(&mut self, env: &mut Env<'_>) {
        if env.enter_err {
            env.enter_err = false;
            if self.state != QpState::Err {
                self.flush(env);
            }
        }
    }

    pub(crate) fn post_send(&mut self, wr: SendWr, env: &mut Env<'_>) -> Result<(), VerbsError> {
        if !self.state.accepts_send() {
            return Err(VerbsError::WrongState(self.state));
        }
        let flushed = matches!(self.state, QpState::Err | QpState::Sqe);
        match &mut self.transport {
            Transport::Rc(rc) => rc.req.post(&self.cfg, wr, flushed, env)?,
            Transport::Ud(ud) => ud.post_send(&self.cfg, wr, flushed, env)?,
            Transport::Mp(mp) => mp.req.post(&self.cfg, wr, flushed, env)?,
        }
        self.settle(env);
        Ok(())
    }

    pub(crate) fn post_recv(&mut self, wr: RecvWr, env: &mut Env<'_>) -> Result<(), VerbsError> {
        if !self.state.accepts_recv() {
            return Err(VerbsError::WrongState(self.state));
        }
        if self.state == QpState::Err {
            // MR-QP-6: posted while in ERR → flushed at once.
            self.cfg.complete_recv(env, flushed_recv(wr.wr_id));
            return Ok(());
        }
        match &mut self.transport {
            Transport::Rc(rc) => rc.rsp.post_recv(wr),
            Transport::Ud(ud) => ud.post_recv(wr),
            Transport::Mp(mp) => mp.rsp.post_recv(&self.cfg, wr, env),
        }
        self.settle(env);
        Ok(())
    }

    /// A packet addressed to this QP that passed the checks of §9.2 rows 1–21.
    pub(crate) fn handle_packet(&mut self, pkt: &RxPacket<'_>, env: &mut Env<'_>) {
        match &mut self.transport {
            Transport::Rc(rc) => rc.handle_packet(&self.cfg, self.state, pkt, env),
            Transport::Ud(ud) => ud.handle_packet(&self.cfg, pkt, env),
            Transport::Mp(mp) => mp.handle_packet(&self.cfg, self.state, pkt, env),
        }
        self.settle(env);
    }

    pub(crate) fn poll_transmit(&mut self, env: &mut Env<'_>) -> Option<Vec<u8>> {
        let built = match &mut self.transport {
            Transport::Rc(rc) => rc.poll_transmit(&self.cfg, self.state, env),
            Transport::Mp(mp) => mp.poll_transmit(&self.cfg, self.state, env),
            Transport::Ud(ud) => {
                let out = ud.poll_transmit(&self.cfg, self.state, env);
                if env.enter_err {
                    // A UD send error moves the QP to SQE, not ERR (§6.2).
                    env.enter_err = false;
                    self.state = QpState::Sqe;
                    ud.flush_sq(&self.cfg, env);
                }
                out
            }
        };
        // zoo: padcnt-zero — PadCnt 0 on every packet the QP sends.
        let frame =
            zoo!(self.cfg.mutant, PadcntZero => built.map(crate::zoo::zero_padcnt), else built);
        self.settle(env);
        frame
    }

    pub(crate) fn poll_timeout(&self) -> Option<u64> {
        match (&self.transport, self.state) {
            (Transport::Rc(rc), QpState::Rts) => rc.req.poll_timeout(),
            (Transport::Mp(mp), state) => mp.poll_timeout(state),
            _ => None,
        }
    }

    pub(crate) fn handle_timeout(&mut self, env: &mut Env<'_>) {
        match (&mut self.transport, self.state) {
            (Transport::Rc(rc), QpState::Rts) => rc.req.handle_timeout(&self.cfg, env),
            (Transport::Mp(mp), state) => mp.handle_timeout(&self.cfg, state, env),
            _ => {}
        }
        self.settle(env);
    }

    /// Effective attributes (MR-PICS-5).
    pub(crate) fn info(&self) -> QpInfo {
        let c = &self.cfg;
        QpInfo {
            qpn: c.qpn,
            qp_type: c.qp_type,
            state: self.state,
            attrs: QpAttrs {
                access: Some(c.access),
                pkey: Some(c.pkey),
                qkey: Some(c.qkey),
                dest_qpn: Some(c.dest_qpn),
                rq_psn: Some(c.rq_psn),
                pmtu: Some(c.pmtu),
                path: c.av,
                max_dest_rd_atomic: Some(c.max_dest_rd_atomic),
                min_rnr_timer: Some(c.min_rnr_timer),
                sq_psn: Some(c.sq_psn),
                timeout: Some(c.timeout),
                retry_cnt: Some(c.retry_cnt),
                rnr_retry: Some(c.rnr_retry),
                max_rd_atomic: Some(c.max_rd_atomic),
            },
            udp_src_port: c.udp_src_port,
        }
    }

    /// Work requests and responses held (for memory-bound checks).
    pub(crate) fn queue_depths(&self) -> QueueDepths {
        match &self.transport {
            Transport::Rc(rc) => rc.queue_depths(),
            Transport::Ud(ud) => ud.queue_depths(),
            Transport::Mp(mp) => mp.queue_depths(),
        }
    }
}
