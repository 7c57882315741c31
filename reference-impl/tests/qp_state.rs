//! Every modify in every state, for RC and UD QPs: the matrix of SPEC §6.2
//! as the transition table implements it, pinned with insta (MR-QP-2).

mod common;
use common::*;
use metaroce_ref::qp::state::{self, attr};
use metaroce_ref::*;

/// Attributes carrying exactly the bits in `mask`, with valid values.
fn attrs_for(mask: u32) -> QpAttrs {
    let on = |bit: u32| mask & bit != 0;
    QpAttrs {
        access: on(attr::ACCESS).then_some(Access::ALL),
        pkey: on(attr::PKEY).then_some(0xFFFF),
        qkey: on(attr::QKEY).then_some(0x11),
        dest_qpn: on(attr::DEST_QPN).then_some(0x22),
        rq_psn: on(attr::RQ_PSN).then_some(1),
        pmtu: on(attr::PMTU).then_some(1024),
        path: on(attr::PATH).then_some(AddressVector {
            dest_ip: IP_B,
            dest_mac: MAC_B,
            traffic_class: 0,
            hop_limit: 64,
        }),
        max_dest_rd_atomic: on(attr::MAX_DEST_RD_ATOMIC).then_some(4),
        min_rnr_timer: on(attr::MIN_RNR_TIMER).then_some(12),
        sq_psn: on(attr::SQ_PSN).then_some(2),
        timeout: on(attr::TIMEOUT).then_some(14),
        retry_cnt: on(attr::RETRY_CNT).then_some(7),
        rnr_retry: on(attr::RNR_RETRY).then_some(7),
        max_rd_atomic: on(attr::MAX_RD_ATOMIC).then_some(4),
    }
}

fn required(ty: QpType, from: QpState, to: QpState) -> u32 {
    state::lookup(ty, from, to).map_or(0, |row| row.required)
}

/// A fresh QP brought to `target` along the table, or `None` if unreachable.
fn reach(dev: &mut Device, ty: QpType, target: QpState) -> Option<u32> {
    let pd = dev.alloc_pd();
    let cq = dev.create_cq();
    let qpn = dev
        .create_qp(QpInit {
            qp_type: ty,
            pd,
            send_cq: cq,
            recv_cq: cq,
            sq_sig_all: false,
        })
        .ok()?;
    let path: &[QpState] = match target {
        QpState::Reset => &[],
        QpState::Init => &[QpState::Init],
        QpState::Rtr => &[QpState::Init, QpState::Rtr],
        QpState::Rts => &[QpState::Init, QpState::Rtr, QpState::Rts],
        QpState::Err => &[QpState::Err],
        QpState::Sqd | QpState::Sqe => return None,
    };
    let mut at = QpState::Reset;
    for &next in path {
        dev.modify_qp(qpn, next, &attrs_for(required(ty, at, next)))
            .ok()?;
        at = next;
    }
    Some(qpn)
}

#[test]
fn transition_matrix() {
    let mut out = String::new();
    for ty in [QpType::Rc, QpType::Ud] {
        out += &format!("{ty:?}: from \\ to | {:?}\n", QpState::ALL);
        for from in QpState::ALL {
            let mut cells = Vec::new();
            for to in QpState::ALL {
                let mut dev = device(MAC_A, IP_A, 9);
                let Some(qpn) = reach(&mut dev, ty, from) else {
                    cells.push("unreachable".to_string());
                    continue;
                };
                let cell = match dev.modify_qp(qpn, to, &attrs_for(required(ty, from, to))) {
                    Ok(()) => {
                        assert_eq!(dev.query_qp(qpn).unwrap().state, to);
                        "ok".to_string()
                    }
                    Err(e) => {
                        // MR-QP-2: rejected → state unchanged.
                        assert_eq!(dev.query_qp(qpn).unwrap().state, from);
                        match e {
                            VerbsError::InvalidTransition { .. } => "-".to_string(),
                            other => format!("{other:?}"),
                        }
                    }
                };
                cells.push(cell);
            }
            out += &format!("{from:?}: {}\n", cells.join(" | "));
        }
    }
    // A missing attribute is rejected and changes nothing.
    let mut dev = device(MAC_A, IP_A, 9);
    let qpn = reach(&mut dev, QpType::Rc, QpState::Init).unwrap();
    let mut partial = attrs_for(required(QpType::Rc, QpState::Init, QpState::Rtr));
    partial.pmtu = None;
    assert_eq!(
        dev.modify_qp(qpn, QpState::Rtr, &partial),
        Err(VerbsError::MissingAttribute("pmtu"))
    );
    partial.pmtu = Some(1000);
    assert_eq!(
        dev.modify_qp(qpn, QpState::Rtr, &partial),
        Err(VerbsError::OutOfRange("pmtu"))
    );
    assert_eq!(dev.query_qp(qpn).unwrap().state, QpState::Init);
    insta::assert_snapshot!(out);
}
