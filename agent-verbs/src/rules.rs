//! Pure mappings between the agent protocol (AGENT.md) and libibverbs
//! numbers: QP states, MTUs, access flags, work-request and completion
//! opcodes, completion statuses, and the SPEC §6.2 transition check
//! (MR-QP-2) done before `ibv_modify_qp`, whose EINVAL says nothing about
//! which rule was broken. No C library needed: tested in every build.

use metaroce_agent::protocol::{AccessFlag, SendOpcode, StateName};
use metaroce_agent::qp_state::{QpState, QpType, attr, lookup};

/// `enum ibv_qp_state` of a protocol state name.
pub fn ibv_state(s: StateName) -> u32 {
    match s {
        StateName::Reset => 0,
        StateName::Init => 1,
        StateName::Rtr => 2,
        StateName::Rts => 3,
        StateName::Sqd => 4,
        StateName::Sqe => 5,
        StateName::Err => 6,
    }
}

/// The protocol name and table state of an `enum ibv_qp_state`.
pub fn state_from_ibv(s: u32) -> Option<(&'static str, QpState)> {
    Some(match s {
        0 => ("reset", QpState::Reset),
        1 => ("init", QpState::Init),
        2 => ("rtr", QpState::Rtr),
        3 => ("rts", QpState::Rts),
        4 => ("sqd", QpState::Sqd),
        5 => ("sqe", QpState::Sqe),
        6 => ("err", QpState::Err),
        _ => return None,
    })
}

/// The table state of a protocol state name.
pub fn table_state(s: StateName) -> QpState {
    match s {
        StateName::Reset => QpState::Reset,
        StateName::Init => QpState::Init,
        StateName::Rtr => QpState::Rtr,
        StateName::Rts => QpState::Rts,
        StateName::Sqd => QpState::Sqd,
        StateName::Sqe => QpState::Sqe,
        StateName::Err => QpState::Err,
    }
}

/// `enum ibv_mtu` of a PMTU in bytes (SPEC §10.1), or None.
pub fn ibv_mtu(bytes: u32) -> Option<u32> {
    match bytes {
        256 => Some(1),
        512 => Some(2),
        1024 => Some(3),
        2048 => Some(4),
        4096 => Some(5),
        _ => None,
    }
}

/// `IBV_ACCESS_*` bit of an access flag; None for the FLUSH flags, which
/// this agent's profile declares absent.
pub fn ibv_access(f: AccessFlag) -> Option<u32> {
    match f {
        AccessFlag::LocalWrite => Some(1),
        AccessFlag::RemoteWrite => Some(2),
        AccessFlag::RemoteRead => Some(4),
        AccessFlag::RemoteAtomic => Some(8),
        _ => None,
    }
}

/// `IBV_QP_*` mask bits.
pub mod mask {
    #![allow(missing_docs)]
    pub const STATE: i32 = 1 << 0;
    pub const ACCESS_FLAGS: i32 = 1 << 3;
    pub const PKEY_INDEX: i32 = 1 << 4;
    pub const PORT: i32 = 1 << 5;
    pub const QKEY: i32 = 1 << 6;
    pub const AV: i32 = 1 << 7;
    pub const PATH_MTU: i32 = 1 << 8;
    pub const TIMEOUT: i32 = 1 << 9;
    pub const RETRY_CNT: i32 = 1 << 10;
    pub const RNR_RETRY: i32 = 1 << 11;
    pub const RQ_PSN: i32 = 1 << 12;
    pub const MAX_QP_RD_ATOMIC: i32 = 1 << 13;
    pub const MIN_RNR_TIMER: i32 = 1 << 15;
    pub const SQ_PSN: i32 = 1 << 16;
    pub const MAX_DEST_RD_ATOMIC: i32 = 1 << 17;
    pub const DEST_QPN: i32 = 1 << 20;
}

/// `enum ibv_wr_opcode` of a protocol opcode.
pub fn ibv_wr_opcode(o: SendOpcode) -> u32 {
    match o {
        SendOpcode::RdmaWrite => 0,
        SendOpcode::RdmaWriteWithImm => 1,
        SendOpcode::Send => 2,
        SendOpcode::SendWithImm => 3,
        SendOpcode::RdmaRead => 4,
        SendOpcode::AtomicCmpAndSwp => 5,
        SendOpcode::AtomicFetchAndAdd => 6,
        SendOpcode::SendWithInv => 9,
    }
}

/// The AGENT.md §6.14 name of an `enum ibv_wc_opcode`.
pub fn wc_opcode_name(o: u32) -> &'static str {
    match o {
        0 => "send",
        1 => "rdma_write",
        2 => "rdma_read",
        3 => "comp_swap",
        4 => "fetch_add",
        5 => "bind_mw",
        6 => "local_inv",
        128 => "recv",
        129 => "recv_rdma_with_imm",
        _ => "unknown",
    }
}

/// The SPEC §6.13 name of a completion status (the verbs numbers).
pub fn status_name(s: u32) -> &'static str {
    const NAMES: [&str; 22] = [
        "SUCCESS",
        "LOC_LEN_ERR",
        "LOC_QP_OP_ERR",
        "LOC_EEC_OP_ERR",
        "LOC_PROT_ERR",
        "WR_FLUSH_ERR",
        "MW_BIND_ERR",
        "BAD_RESP_ERR",
        "LOC_ACCESS_ERR",
        "REM_INV_REQ_ERR",
        "REM_ACCESS_ERR",
        "REM_OP_ERR",
        "RETRY_EXC_ERR",
        "RNR_RETRY_EXC_ERR",
        "LOC_RDD_VIOL_ERR",
        "REM_INV_RD_REQ_ERR",
        "REM_ABORT_ERR",
        "INV_EECN_ERR",
        "INV_EEC_STATE_ERR",
        "FATAL_ERR",
        "RESP_TIMEOUT_ERR",
        "GENERAL_ERR",
    ];
    NAMES.get(s as usize).copied().unwrap_or("GENERAL_ERR")
}

/// Why a transition is refused (MR-QP-2), before verbs sees it.
#[derive(Debug, PartialEq, Eq)]
pub enum TransitionError {
    /// Not in the SPEC §6.2 table for this QP type.
    Invalid,
    /// A required attribute is missing (its protocol name).
    Missing(&'static str),
    /// An attribute the transition does not take.
    Unexpected(&'static str),
}

/// Checks a modify from `from` to `to` on a QP of type `ty` giving the
/// attributes in `given` (bits of `metaroce_agent::qp_state::attr`).
pub fn check_transition(
    ty: QpType,
    from: QpState,
    to: QpState,
    given: u32,
) -> Result<(), TransitionError> {
    let row = lookup(ty, from, to).ok_or(TransitionError::Invalid)?;
    let missing = row.required & !given;
    if missing != 0 {
        return Err(TransitionError::Missing(attr::first_name(missing)));
    }
    let extra = given & !(row.required | row.optional);
    if extra != 0 {
        return Err(TransitionError::Unexpected(attr::first_name(extra)));
    }
    Ok(())
}

/// The UDP source port Linux's `rdma_get_udp_sport()` (include/rdma/ib_verbs.h)
/// gives a RoCEv2 QP with flow label 0: the flow label is computed from the
/// local and remote QPNs (`rdma_calc_flow_label`) and folded into
/// 0xC000..=0xFFFF (`rdma_flow_label_to_udp_sport`). rxe (Linux 6.1) sets
/// its QP's port this way when the path is set; the agent reports it only
/// with `--udp-sport kernel` (AGENT.md §6.10: from the NIC, else omit).
pub fn kernel_udp_sport(local_qpn: u32, remote_qpn: u32) -> u16 {
    let mut v = u64::from(local_qpn) * u64::from(remote_qpn);
    v ^= v >> 20;
    v ^= v >> 40;
    let fl = (v & 0xF_FFFF) as u32;
    let low = (fl & 0x3FFF) ^ ((fl & 0xF_C000) >> 14);
    (low | 0xC000) as u16
}

/// The IPv4-mapped IPv6 GID of an IPv4 address (RoCEv2, SPEC §3.1).
pub fn ipv4_gid(ip: core::net::Ipv4Addr) -> [u8; 16] {
    ip.to_ipv6_mapped().octets()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rc_init_to_rtr_needs_the_path_and_refuses_sq_psn() {
        let base = attr::DEST_QPN | attr::RQ_PSN | attr::PMTU | attr::MAX_DEST_RD_ATOMIC;
        assert_eq!(
            check_transition(
                QpType::Rc,
                QpState::Init,
                QpState::Rtr,
                base | attr::MIN_RNR_TIMER
            ),
            Err(TransitionError::Missing("path")),
            "MR-QP-2: INIT->RTR without path is missing_attribute"
        );
        let all = base | attr::MIN_RNR_TIMER | attr::PATH;
        assert_eq!(
            check_transition(QpType::Rc, QpState::Init, QpState::Rtr, all),
            Ok(())
        );
        assert_eq!(
            check_transition(QpType::Rc, QpState::Init, QpState::Rtr, all | attr::SQ_PSN),
            Err(TransitionError::Unexpected("sq_psn")),
            "MR-QP-2: sq_psn belongs to RTR->RTS"
        );
        assert_eq!(
            check_transition(QpType::Rc, QpState::Reset, QpState::Rts, 0),
            Err(TransitionError::Invalid),
            "MR-QP-2: RESET->RTS is not in the table"
        );
    }

    #[test]
    fn kernel_udp_sport_matches_rxe_on_the_wire() {
        // (IUT QPN, harness QPN, UDP source port) from rxe's ACKs in the
        // lab's first certification run (MR-ACK-6 vectors).
        for (l, r, port) in [
            (20, 0x32_5550, 59972),
            (24, 0x36_3cb0, 61639),
            (25, 0x9e_8070, 51757),
        ] {
            assert_eq!(kernel_udp_sport(l, r), port, "QPN {l} -> {r:#x}");
        }
        assert!(kernel_udp_sport(0xFF_FFFF, 0xFF_FFFF) >= 0xC000);
    }

    #[test]
    fn numbers_round_trip() {
        for s in [
            StateName::Reset,
            StateName::Init,
            StateName::Rtr,
            StateName::Rts,
            StateName::Sqd,
            StateName::Sqe,
            StateName::Err,
        ] {
            let (_, t) = state_from_ibv(ibv_state(s)).expect("known state");
            assert_eq!(t, table_state(s));
        }
        assert_eq!(state_from_ibv(7), None);
        assert_eq!(ibv_mtu(1024), Some(3));
        assert_eq!(ibv_mtu(1000), None);
        assert_eq!(status_name(12), "RETRY_EXC_ERR");
        assert_eq!(status_name(99), "GENERAL_ERR");
        assert_eq!(wc_opcode_name(129), "recv_rdma_with_imm");
        assert_eq!(
            ipv4_gid(core::net::Ipv4Addr::new(10, 77, 0, 1))[10..],
            [0xff, 0xff, 10, 77, 0, 1]
        );
    }
}
