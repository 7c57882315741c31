//! Connecting the RC QP pair between the two agents: `reset`, a PD, a CQ,
//! two MRs with canaries (a local buffer and a remotely accessible one), a
//! QP on each side, and INIT → RTR → RTS with the other side's QPN, PSN,
//! IP and MAC (the GID is the IPv4-mapped address of the IP).

use super::endpoint::{CallError, Endpoint, Mr};
use metaroce_agent::protocol::{
    AccessFlag, Attrs, CreateQp, Empty, ModifyQp, Op, PathAttr, QpCaps, QpTypeName, StateName,
};

/// What the run asks of the connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// Bytes of each MR.
    pub mr_len: u64,
    /// Path MTU.
    pub pmtu: u32,
    /// Both QPs are MP QPs (SPEC §7.1).
    pub mp: bool,
    /// Canary bytes on each side of each MR (0: none).
    pub canary: u64,
    /// Remote-atomic access on the remote MR and the QP.
    pub atomics: bool,
}

/// One side's objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Side {
    /// The CQ of both queues.
    pub cq: u32,
    /// The QP.
    pub qpn: u32,
    /// Local buffer: SEND and WRITE source, READ and atomic result sink.
    pub local: Mr,
    /// Remote-access region: SEND receive buffer, WRITE target, READ
    /// source, atomic target.
    pub remote: Mr,
}

/// Resets both agents and connects a QP pair; the PSNs come from `seed`.
pub fn connect(
    a: &mut Endpoint,
    b: &mut Endpoint,
    p: &Params,
    seed: u64,
) -> Result<(Side, Side), CallError> {
    let sa = objects(a, p)?;
    let sb = objects(b, p)?;
    let psn_a = (super::data::mix(seed, 0xA) & 0xFF_FFFF) as u32;
    let psn_b = (super::data::mix(seed, 0xB) & 0xFF_FFFF) as u32;
    // Attributes each side needs of the other.
    let rd_a = rd_atomic(a, b);
    let rd_b = rd_atomic(b, a);
    let (qa, qb) = (sa.qpn, sb.qpn);
    let (ip_a, mac_a, ip_b, mac_b) = (a.ip.clone(), a.mac.clone(), b.ip.clone(), b.mac.clone());
    to_rts(a, qa, p, (qb, &ip_b, &mac_b), (psn_a, psn_b), rd_a)?;
    to_rts(b, qb, p, (qa, &ip_a, &mac_a), (psn_b, psn_a), rd_b)?;
    Ok((sa, sb))
}

/// `(max_rd_atomic of me, max_dest_rd_atomic of me)`, bounded by what the
/// other side accepts and by 16.
fn rd_atomic(me: &Endpoint, other: &Endpoint) -> (u8, u8) {
    let get = |e: &Endpoint, k: &str| e.number(k).unwrap_or(1);
    let init = get(me, "max_rd_atomic")
        .min(get(other, "max_dest_rd_atomic"))
        .clamp(1, 16);
    let dest = get(me, "max_dest_rd_atomic")
        .min(get(other, "max_rd_atomic"))
        .clamp(1, 16);
    (init as u8, dest as u8)
}

fn objects(ep: &mut Endpoint, p: &Params) -> Result<Side, CallError> {
    ep.call(Op::Reset(Empty {}), "reset")?;
    let r = ep.call(Op::AllocPd(Empty {}), "alloc_pd")?;
    let pd = ep.field32(&r, "pd", "alloc_pd")?;
    let r = ep.call(Op::CreateCq(Empty {}), "create_cq")?;
    let cq = ep.field32(&r, "cq", "create_cq")?;
    let local = ep.reg_mr(pd, p.mr_len, &[AccessFlag::LocalWrite], p.canary)?;
    let mut access = vec![
        AccessFlag::LocalWrite,
        AccessFlag::RemoteWrite,
        AccessFlag::RemoteRead,
    ];
    if p.atomics {
        access.push(AccessFlag::RemoteAtomic);
    }
    let remote = ep.reg_mr(pd, p.mr_len, &access, p.canary)?;
    let qp = CreateQp {
        pd,
        qp_type: QpTypeName::Rc,
        send_cq: cq,
        recv_cq: cq,
        sq_sig_all: false,
        caps: QpCaps {
            max_send_wr: 64,
            max_recv_wr: 64,
            max_send_sge: 1,
            max_recv_sge: 1,
        },
    };
    let r = ep.call(Op::CreateQp(qp), "create_qp")?;
    let qpn = ep.field(&r, "qpn", "create_qp")?;
    let qpn = u32::try_from(qpn)
        .ok()
        .filter(|q| *q < 1 << 24)
        .ok_or_else(|| {
            CallError::Broken(format!(
                "agent {}: create_qp: QPN {qpn} exceeds 24 bits",
                ep.name
            ))
        })?;
    Ok(Side {
        cq,
        qpn,
        local,
        remote,
    })
}

fn to_rts(
    ep: &mut Endpoint,
    qpn: u32,
    p: &Params,
    (peer_qpn, peer_ip, peer_mac): (u32, &str, &str),
    (my_psn, peer_psn): (u32, u32),
    (max_rd_atomic, max_dest_rd_atomic): (u8, u8),
) -> Result<(), CallError> {
    let mut access = vec![AccessFlag::RemoteWrite, AccessFlag::RemoteRead];
    if p.atomics {
        access.push(AccessFlag::RemoteAtomic);
    }
    let modify = |state, attrs| Op::ModifyQp(ModifyQp { qpn, state, attrs });
    let init = Attrs {
        access: Some(access),
        ..Attrs::default()
    };
    ep.call(modify(StateName::Init, init), "modify_qp to INIT")?;
    let mut rtr = Attrs {
        dest_qpn: Some(peer_qpn),
        rq_psn: Some(peer_psn),
        pmtu: Some(p.pmtu),
        max_dest_rd_atomic: Some(max_dest_rd_atomic),
        min_rnr_timer: Some(12),
        path: Some(PathAttr {
            dest_mac: peer_mac.to_string(),
            dest_ip: peer_ip.to_string(),
            traffic_class: 0,
            hop_limit: 64,
        }),
        ..Attrs::default()
    };
    if p.mp {
        rtr.mp = Some(true);
        rtr.mp_entropy_set_size = Some(8);
        rtr.mp_window = Some(1024);
    }
    ep.call(modify(StateName::Rtr, rtr), "modify_qp to RTR")?;
    let rts = Attrs {
        sq_psn: Some(my_psn),
        timeout: Some(14),
        retry_cnt: Some(7),
        rnr_retry: Some(7),
        max_rd_atomic: Some(max_rd_atomic),
        ..Attrs::default()
    };
    ep.call(modify(StateName::Rts, rts), "modify_qp to RTS")?;
    Ok(())
}
