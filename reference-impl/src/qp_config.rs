//! A QP's configuration and what its handlers may touch: the types the
//! transports (`rc`, `mp`, `ud`) take from the QP, in a module of their own
//! so that the transports import them without importing the dispatcher
//! ([`crate::qp`]) that holds them.

use crate::counters::Counters;
use crate::cq::{CqHandle, CqTable, WcStatus, WorkCompletion};
use crate::mr::Access;
use crate::mr::{Memory, PdHandle};
use crate::wire::Path;
use core::net::Ipv4Addr;
use metaroce_agent::qp_state::QpType;
use std::collections::VecDeque;

/// The path of an RC QP (SPEC §6.3 path attributes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressVector {
    /// Peer IPv4 address.
    pub dest_ip: Ipv4Addr,
    /// Next-hop MAC address.
    pub dest_mac: [u8; 6],
    /// DSCP in the upper 6 bits (default 0).
    pub traffic_class: u8,
    /// IPv4 TTL (default 64).
    pub hop_limit: u8,
}

/// A QP's effective configuration.
#[derive(Clone, Debug)]
pub(crate) struct QpConfig {
    pub qpn: u32,
    pub qp_type: QpType,
    pub pd: PdHandle,
    pub send_cq: CqHandle,
    pub recv_cq: CqHandle,
    pub sq_sig_all: bool,
    pub access: Access,
    pub pkey: u16,
    pub qkey: u32,
    pub dest_qpn: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub pmtu: u32,
    pub av: Option<AddressVector>,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub max_rd_atomic: u8,
    pub udp_src_port: u16,
    pub local_mac: [u8; 6],
    pub local_ip: Ipv4Addr,
    /// Largest span of outstanding PSNs (MR-PSN-4: far below 2^23).
    pub window: u32,
    pub max_msg_size: u64,
    /// The device's bug-zoo mutant (feature `zoo`).
    #[cfg(feature = "zoo")]
    pub mutant: Option<crate::zoo::Mutant>,
}

impl QpConfig {
    /// The path of an RC QP (set on entering RTR).
    pub(crate) fn path(&self) -> Option<Path> {
        let av = self.av?;
        Some(Path {
            src_mac: self.local_mac,
            dst_mac: av.dest_mac,
            src_ip: self.local_ip,
            dst_ip: av.dest_ip,
            udp_src_port: self.udp_src_port,
            traffic_class: av.traffic_class,
            hop_limit: av.hop_limit,
            pkey: self.pkey,
            dest_qp: self.dest_qpn,
        })
    }

    /// Emits a completion on the send CQ.
    pub(crate) fn complete_send(&self, env: &mut Env<'_>, mut wc: WorkCompletion) {
        wc.qpn = self.qpn;
        env.cqs.push(self.send_cq, wc);
    }

    /// Emits a completion on the receive CQ.
    pub(crate) fn complete_recv(&self, env: &mut Env<'_>, mut wc: WorkCompletion) {
        wc.qpn = self.qpn;
        env.cqs.push(self.recv_cq, wc);
    }
}

/// What a QP's handlers may touch outside the QP.
pub(crate) struct Env<'a> {
    pub mem: &'a mut Memory,
    pub cqs: &'a mut CqTable,
    pub counters: &'a mut Counters,
    pub now: u64,
    /// Frames that must leave before the QP changes state (the last
    /// responses and the fatal NAK before ERR, MR-RSP-11).
    pub urgent: &'a mut VecDeque<Vec<u8>>,
    /// Set by a handler that hit a fatal error: the QP enters ERR.
    pub enter_err: bool,
}

/// Sizes of a QP's queues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueDepths {
    /// Send work requests not yet completed.
    pub send: usize,
    /// Receive work requests not yet consumed.
    pub recv: usize,
    /// Responses queued by the responder, not yet sent.
    pub responses: usize,
    /// Requester state awaiting acknowledgement: for Base RC the PSNs sent
    /// and not acknowledged (a READ counts its block), for MP the units of
    /// its flight (data packets, READ requests, atomics) not yet
    /// acknowledged, 0 for UD.
    pub unacked: usize,
    /// Responder state of messages begun and not completed: for MP the
    /// messages it tracks (placed in part, staged, or waiting to execute),
    /// for Base RC the multi-packet message in progress (0 or 1).
    pub incomplete: usize,
}

/// A receive work request flushed by ERR (MR-QP-6).
pub(crate) fn flushed_recv(wr_id: u64) -> WorkCompletion {
    WorkCompletion {
        wr_id,
        status: WcStatus::WrFlushErr,
        opcode: crate::cq::WcOpcode::Recv,
        qpn: 0,
        byte_len: 0,
        imm: None,
        invalidated_rkey: None,
        src_qp: None,
    }
}
