//! Connecting the RC QP pair between the two agents: `reset`, a PD, a CQ,
//! two MRs with canaries (a local buffer and a remotely accessible one), a
//! QP on each side, and INIT → RTR → RTS with the other side's QPN, PSN,
//! IP and MAC (the GID is the IPv4-mapped address of the IP).

use super::endpoint::{CallError, Endpoint, Mr};
use serde_json::{Value, json};

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
    pub cq: u64,
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
fn rd_atomic(me: &Endpoint, other: &Endpoint) -> (u64, u64) {
    let get = |e: &Endpoint, k: &str| e.number(k).unwrap_or(1);
    let init = get(me, "max_rd_atomic")
        .min(get(other, "max_dest_rd_atomic"))
        .clamp(1, 16);
    let dest = get(me, "max_dest_rd_atomic")
        .min(get(other, "max_rd_atomic"))
        .clamp(1, 16);
    (init, dest)
}

fn objects(ep: &mut Endpoint, p: &Params) -> Result<Side, CallError> {
    ep.call(json!({"op": "reset"}), "reset")?;
    let r = ep.call(json!({"op": "alloc_pd"}), "alloc_pd")?;
    let pd = ep.field(&r, "pd", "alloc_pd")?;
    let r = ep.call(json!({"op": "create_cq"}), "create_cq")?;
    let cq = ep.field(&r, "cq", "create_cq")?;
    let local = ep.reg_mr(pd, p.mr_len, &["local_write"], p.canary)?;
    let mut access = vec!["local_write", "remote_write", "remote_read"];
    if p.atomics {
        access.push("remote_atomic");
    }
    let remote = ep.reg_mr(pd, p.mr_len, &access, p.canary)?;
    let r = ep.call(
        json!({"op": "create_qp", "pd": pd, "qp_type": "rc", "send_cq": cq, "recv_cq": cq,
               "caps": {"max_send_wr": 64, "max_recv_wr": 64, "max_send_sge": 1, "max_recv_sge": 1}}),
        "create_qp",
    )?;
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
    (max_rd_atomic, max_dest_rd_atomic): (u64, u64),
) -> Result<(), CallError> {
    let mut access = vec!["remote_write", "remote_read"];
    if p.atomics {
        access.push("remote_atomic");
    }
    ep.call(
        json!({"op": "modify_qp", "qpn": qpn, "state": "init", "attrs": {"access": access}}),
        "modify_qp to INIT",
    )?;
    let mut rtr = json!({"dest_qpn": peer_qpn, "rq_psn": peer_psn, "pmtu": p.pmtu,
        "max_dest_rd_atomic": max_dest_rd_atomic, "min_rnr_timer": 12,
        "path": {"dest_mac": peer_mac, "dest_ip": peer_ip}});
    if p.mp {
        rtr["mp"] = Value::Bool(true);
        rtr["mp_entropy_set_size"] = 8.into();
        rtr["mp_window"] = 1024.into();
    }
    ep.call(
        json!({"op": "modify_qp", "qpn": qpn, "state": "rtr", "attrs": rtr}),
        "modify_qp to RTR",
    )?;
    ep.call(
        json!({"op": "modify_qp", "qpn": qpn, "state": "rts", "attrs": {"sq_psn": my_psn,
            "timeout": 14, "retry_cnt": 7, "rnr_retry": 7, "max_rd_atomic": max_rd_atomic}}),
        "modify_qp to RTS",
    )?;
    Ok(())
}
