//! Tests of the QP state machine: every event in every state, snapshotted.

use super::*;
use core::fmt::Write as _;

fn events() -> Vec<(String, QpEvent)> {
    let mut events = Vec::new();
    for to in QpState::ALL {
        events.push((
            format!("modify->{to} (all attrs)"),
            QpEvent::Modify {
                to,
                provided: Attrs::ALL,
            },
        ));
        events.push((
            format!("modify->{to} (no attrs)"),
            QpEvent::Modify {
                to,
                provided: Attrs::NONE,
            },
        ));
    }
    for (name, e) in [
        ("request arrives", QpEvent::Request),
        ("response arrives", QpEvent::Response),
        ("post send", QpEvent::PostSend),
        ("post recv", QpEvent::PostRecv),
        ("send WR error", QpEvent::SendWrError),
        ("fatal error", QpEvent::FatalError),
    ] {
        events.push((name.to_string(), e));
    }
    events
}

fn render(result: QpEventResult) -> String {
    match result {
        QpEventResult::Moved => "moved".into(),
        QpEventResult::Rejected(Rejection::NoSuchTransition { .. }) => "REJECT not in table".into(),
        QpEventResult::Rejected(Rejection::NotApplicable { condition, .. }) => {
            format!("REJECT {condition:?}")
        }
        QpEventResult::Rejected(Rejection::MissingAttributes { missing }) => {
            format!("REJECT missing {missing:?}")
        }
        QpEventResult::NoTransition => "no transition".into(),
        QpEventResult::Packet(p) => format!("{p:?}"),
        QpEventResult::Post(p) => format!("{p:?}"),
    }
}

fn matrix(config: &QpConfig) -> String {
    let mut out = String::new();
    for state in QpState::ALL {
        writeln!(out, "[{state}]").unwrap();
        for (name, event) in events() {
            let (next, result) = on_event(config, state, event);
            writeln!(out, "  {name:<28} -> {next:<5} {}", render(result)).unwrap();
        }
    }
    out
}

/// MR-QP-2 … MR-QP-6, MR-QP-10: every event in every state, for each QP type.
#[test]
fn every_event_in_every_state_rc() {
    insta::assert_snapshot!(matrix(&QpConfig::new(QpType::Rc)));
}

/// MR-QP-2: the SQE and SQD rows for UD with `sqd` declared.
#[test]
fn every_event_in_every_state_ud_with_sqd() {
    let config = QpConfig {
        sqd: true,
        ..QpConfig::new(QpType::Ud)
    };
    insta::assert_snapshot!(matrix(&config));
}

#[test]
fn new_qp_is_in_reset_mr_qp_1() {
    assert_eq!(QpState::CREATED, QpState::Reset, "MR-QP-1");
    assert!(
        TRANSITIONS
            .iter()
            .any(|t| t.from == FromState::Created && t.to == QpState::Reset)
    );
}

#[test]
fn modify_rejects_missing_attributes_mr_qp_2() {
    let rc = QpConfig::new(QpType::Rc);
    let need = Attrs::P_KEY_INDEX.union(Attrs::PORT).union(Attrs::ACCESS);
    assert_eq!(
        modify(&rc, QpState::Reset, QpState::Init, need),
        Ok(QpState::Init)
    );
    assert_eq!(
        modify(
            &rc,
            QpState::Reset,
            QpState::Init,
            Attrs::PORT.union(Attrs::ACCESS)
        ),
        Err(Rejection::MissingAttributes {
            missing: Attrs::P_KEY_INDEX
        }),
        "MR-QP-2"
    );
    // Not in the table: RESET -> RTS.
    assert_eq!(
        modify(&rc, QpState::Reset, QpState::Rts, Attrs::ALL),
        Err(Rejection::NoSuchTransition {
            from: QpState::Reset,
            to: QpState::Rts
        }),
        "MR-QP-2"
    );
    // RTS -> SQD only with `sqd`.
    assert!(matches!(
        modify(&rc, QpState::Rts, QpState::Sqd, Attrs::ALL),
        Err(Rejection::NotApplicable { .. })
    ));
}

#[test]
fn mp_parameters_needed_only_for_mp_qps_and_dest_qpn_not_for_ud() {
    let rtr = Attrs::DEST_QPN
        .union(Attrs::RQ_PSN)
        .union(Attrs::PMTU)
        .union(Attrs::PATH)
        .union(Attrs::MAX_DEST_RD_ATOMIC)
        .union(Attrs::MIN_RNR_TIMER);
    let rc = QpConfig::new(QpType::Rc);
    assert_eq!(
        modify(&rc, QpState::Init, QpState::Rtr, rtr),
        Ok(QpState::Rtr)
    );
    let mp = QpConfig { mp: true, ..rc };
    assert_eq!(
        modify(&mp, QpState::Init, QpState::Rtr, rtr),
        Err(Rejection::MissingAttributes {
            missing: Attrs::MP_PARAMS
        })
    );
    let ud = QpConfig::new(QpType::Ud);
    assert_eq!(
        modify(
            &ud,
            QpState::Init,
            QpState::Rtr,
            rtr.without(Attrs::DEST_QPN)
        ),
        Ok(QpState::Rtr)
    );
    // SPEC v1.1 §6.2 (verbs `qp_state_table`): UD needs nothing for
    // INIT → RTR, only `sq_psn` for RTR → RTS, no access flags for
    // RESET → INIT; UC needs no RDMA-resource, RNR, timeout or retry ones.
    assert_eq!(
        modify(&ud, QpState::Init, QpState::Rtr, Attrs::NONE),
        Ok(QpState::Rtr)
    );
    assert_eq!(
        modify(&ud, QpState::Rtr, QpState::Rts, Attrs::SQ_PSN),
        Ok(QpState::Rts)
    );
    assert_eq!(
        modify(
            &ud,
            QpState::Reset,
            QpState::Init,
            Attrs::P_KEY_INDEX.union(Attrs::PORT)
        ),
        Ok(QpState::Init)
    );
    let uc = QpConfig::new(QpType::Uc);
    let uc_rtr = Attrs::DEST_QPN
        .union(Attrs::RQ_PSN)
        .union(Attrs::PMTU)
        .union(Attrs::PATH);
    assert_eq!(
        modify(&uc, QpState::Init, QpState::Rtr, uc_rtr),
        Ok(QpState::Rtr)
    );
    assert_eq!(
        modify(&uc, QpState::Rtr, QpState::Rts, Attrs::SQ_PSN),
        Ok(QpState::Rts)
    );
    assert_eq!(
        modify(&uc, QpState::Init, QpState::Rtr, Attrs::DEST_QPN),
        Err(Rejection::MissingAttributes {
            missing: Attrs::RQ_PSN.union(Attrs::PMTU).union(Attrs::PATH)
        })
    );
}

#[test]
fn behaviour_table_is_in_state_order() {
    for (i, state) in QpState::ALL.into_iter().enumerate() {
        assert_eq!(BEHAVIOUR[i].state, state);
        assert_eq!(behaviour(state).state, state);
    }
}

#[test]
fn per_state_packet_handling_mr_qp_3_4_5() {
    use Packets::*;
    for s in [QpState::Reset, QpState::Init] {
        assert_eq!(
            (behaviour(s).requests, behaviour(s).responses),
            (Dropped, Dropped),
            "MR-QP-3"
        );
    }
    assert_eq!(behaviour(QpState::Rtr).requests, Processed, "MR-QP-4");
    assert_eq!(behaviour(QpState::Rtr).responses, Dropped, "MR-QP-4");
    assert_eq!(behaviour(QpState::Err).requests, Dropped, "MR-QP-5");
    assert_eq!(behaviour(QpState::Err).responses, Dropped, "MR-QP-5");
    assert_eq!(behaviour(QpState::Err).post_send, Posts::Flushed, "MR-QP-6");
    assert_eq!(behaviour(QpState::Err).post_recv, Posts::Flushed, "MR-QP-6");
}

#[test]
fn fatal_error_moves_every_state_to_err() {
    let rc = QpConfig::new(QpType::Rc);
    for s in QpState::ALL {
        assert_eq!(automatic(&rc, s, Cause::FatalError), Some(QpState::Err));
    }
    assert_eq!(automatic(&rc, QpState::Rts, Cause::SendWrError), None);
    let uc = QpConfig::new(QpType::Uc);
    assert_eq!(
        automatic(&uc, QpState::Rts, Cause::SendWrError),
        Some(QpState::Sqe)
    );
}
