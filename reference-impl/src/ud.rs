//! The UD transport (SPEC §6.20): one packet per message, no ACKs, no PSN
//! checks at the receiver, Q_Key-protected, 40 bytes of header space in
//! every receive buffer.

use crate::cq::{WcOpcode, WcStatus, WorkCompletion};
use crate::error::VerbsError;
use crate::qp_config::{Env, QpConfig, QueueDepths, flushed_recv};
use crate::rx::RxPacket;
use crate::wire::{Out, Path};
use crate::wr::{RecvWr, SendWr, WrOp};
use metaroce_agent::qp_state::QpState;
use metaroce_codec::ext::{DethRepr, ImmDtRepr};
use metaroce_codec::{Opcode, Psn};
use std::collections::VecDeque;

/// Bytes left for the network header at the start of a UD receive (MR-UD-6).
pub const UD_HEADER_SPACE: u64 = 40;

/// UD state of one QP.
#[derive(Debug, Default)]
pub(crate) struct UdTransport {
    sq: VecDeque<SendWr>,
    rq: VecDeque<RecvWr>,
    next_psn: Psn,
}

fn send_wc(wr: &SendWr, status: WcStatus, len: u32) -> WorkCompletion {
    WorkCompletion {
        wr_id: wr.wr_id,
        status,
        opcode: WcOpcode::Send,
        qpn: 0,
        byte_len: len,
        imm: None,
        invalidated_rkey: None,
        src_qp: None,
    }
}

impl UdTransport {
    pub(crate) fn new(_cfg: &QpConfig) -> Self {
        UdTransport::default()
    }

    pub(crate) fn start(&mut self, cfg: &QpConfig) {
        self.next_psn = Psn::new(cfg.sq_psn);
    }

    pub(crate) fn queue_depths(&self) -> QueueDepths {
        QueueDepths {
            send: self.sq.len(),
            recv: self.rq.len(),
            responses: 0,
            unacked: 0,
            incomplete: 0,
        }
    }

    pub(crate) fn post_send(
        &mut self,
        cfg: &QpConfig,
        wr: SendWr,
        flushed: bool,
        env: &mut Env<'_>,
    ) -> Result<(), VerbsError> {
        if wr.ud.is_none() {
            return Err(VerbsError::BadDestination);
        }
        if !matches!(wr.op, WrOp::Send | WrOp::SendImm(_)) {
            return Err(VerbsError::UnsupportedOperation("UD carries SEND only"));
        }
        if flushed {
            cfg.complete_send(env, send_wc(&wr, WcStatus::WrFlushErr, 0));
        } else {
            self.sq.push_back(wr);
        }
        Ok(())
    }

    pub(crate) fn post_recv(&mut self, wr: RecvWr) {
        self.rq.push_back(wr);
    }

    pub(crate) fn flush_sq(&mut self, cfg: &QpConfig, env: &mut Env<'_>) {
        while let Some(wr) = self.sq.pop_front() {
            cfg.complete_send(env, send_wc(&wr, WcStatus::WrFlushErr, 0));
        }
    }

    pub(crate) fn flush(&mut self, cfg: &QpConfig, env: &mut Env<'_>) {
        self.flush_sq(cfg, env);
        while let Some(wr) = self.rq.pop_front() {
            cfg.complete_recv(env, flushed_recv(wr.wr_id));
        }
    }

    pub(crate) fn poll_transmit(
        &mut self,
        cfg: &QpConfig,
        state: QpState,
        env: &mut Env<'_>,
    ) -> Option<Vec<u8>> {
        if state != QpState::Rts {
            return None;
        }
        while let Some(wr) = self.sq.pop_front() {
            let Some(dest) = wr.ud else { continue };
            let len = wr.total_len();
            if len > u64::from(cfg.pmtu) {
                // MR-UD-4, MR-UD-5 (SPEC v1.1): not sent, LOC_LEN_ERR, and
                // the completion in error moves the QP to SQE (IBA).
                cfg.complete_send(env, send_wc(&wr, WcStatus::LocLenErr, 0));
                env.enter_err = true; // the QP moves to SQE
                return None;
            }
            let Ok(payload) = env.mem.gather(cfg.pd, &wr.sg_list, 0, len as usize) else {
                cfg.complete_send(env, send_wc(&wr, WcStatus::LocProtErr, 0));
                env.enter_err = true; // the QP moves to SQE
                return None;
            };
            let imm = match wr.op {
                WrOp::SendImm(i) => Some(i),
                _ => None,
            };
            let opcode = if imm.is_some() {
                Opcode::UD_SEND_ONLY_IMM
            } else {
                Opcode::UD_SEND_ONLY
            };
            let mut out = Out::new(opcode, self.next_psn.value());
            self.next_psn = self.next_psn.add(1); // MR-UD-1
            out.ext.deth = Some(DethRepr {
                qkey: dest.qkey,
                reserved: 0,
                src_qp: cfg.qpn,
            });
            out.ext.immdt = imm.map(|value| ImmDtRepr { value });
            out.se = wr.solicited;
            out.payload = payload;
            out.ect = true;
            let path = Path {
                src_mac: cfg.local_mac,
                dst_mac: dest.mac,
                src_ip: cfg.local_ip,
                dst_ip: dest.ip,
                udp_src_port: cfg.udp_src_port,
                traffic_class: 0,
                hop_limit: 64,
                pkey: cfg.pkey,
                dest_qp: dest.qpn,
            };
            if wr.signaled || cfg.sq_sig_all {
                cfg.complete_send(env, send_wc(&wr, WcStatus::Success, len as u32));
            }
            return Some(path.build(out));
        }
        None
    }

    /// A UD packet that passed the Q_Key check (MR-UD-2, MR-UD-3).
    pub(crate) fn handle_packet(&mut self, cfg: &QpConfig, pkt: &RxPacket<'_>, env: &mut Env<'_>) {
        if pkt.payload.len() > cfg.pmtu as usize {
            return; // MR-UD-9
        }
        let Some(wr) = self.rq.front() else {
            return; // MR-UD-7: no RNR for UD
        };
        let capacity: u64 = wr.sg_list.iter().map(|s| u64::from(s.len)).sum();
        let need = UD_HEADER_SPACE + pkt.payload.len() as u64;
        let Some(wr) = self.rq.pop_front() else {
            return;
        };
        let mut wc = WorkCompletion {
            wr_id: wr.wr_id,
            status: WcStatus::Success,
            opcode: WcOpcode::Recv,
            qpn: cfg.qpn,
            byte_len: need as u32,
            imm: pkt.ext.immdt.map(|i| i.value),
            invalidated_rkey: None,
            src_qp: pkt.ext.deth.map(|d| d.src_qp),
        };
        if capacity < need {
            wc.status = WcStatus::LocLenErr; // MR-UD-8
            wc.byte_len = 0;
        } else if env
            .mem
            .scatter(cfg.pd, &wr.sg_list, UD_HEADER_SPACE, pkt.payload)
            .is_err()
        {
            wc.status = WcStatus::LocProtErr;
            wc.byte_len = 0;
        }
        cfg.complete_recv(env, wc);
    }
}
