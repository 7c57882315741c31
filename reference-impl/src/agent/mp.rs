//! MP negotiation through the agent (AGENT.md §6.9, SPEC §7.1): which
//! `modify_qp` requests may carry the MP attributes, their ranges against
//! the capability profile, and the [`MpAttrs`] the device gets. Pure: the
//! dispatcher passes the QP as it is now; nothing here touches the device.

use super::dispatch::{bad, state_name, verbs};
use crate::mp::config::{ENTROPY_SET_MAX, WINDOW_MAX};
use crate::qp::state::lookup;
use crate::{MpAttrs, MpEntropy, MpTuning, QpInfo, QpState, QpType, VerbsError};
use metaroce_agent::CapabilityProfile;
use metaroce_agent::protocol::{AgentError, Attrs, ErrorCode};

/// The MP attributes `a` of a `modify_qp` to `to` on the QP `info`
/// (AGENT.md §6.9, SPEC §7.1), under the profile `p`: `None` for a Base
/// transition, the checked parameters for INIT to RTR with `mp: true`, or
/// the rejection. Nothing is clamped (MR-PICS-4). `seed` derives the set
/// when the request gives only its size; `base` is the agent's tuning (the
/// constants its profile declares), which the request may refine.
pub(super) fn negotiate(
    p: &CapabilityProfile,
    base: MpTuning,
    info: &QpInfo,
    to: QpState,
    a: &Attrs,
    seed: u64,
) -> Result<Option<MpAttrs>, AgentError> {
    let given = a.mp_given();
    let Some(&first) = given.first() else {
        return Ok(None);
    };
    let field = |name: &str| format!("attrs.{name}");
    if !p.mp {
        // MR-MPN-6: `mp: true`, or any MP parameter, needs the feature;
        // `mp: false` alone states what every QP is.
        let name = if a.mp == Some(true) {
            Some("mp")
        } else {
            given.iter().copied().find(|&n| n != "mp")
        };
        if let Some(name) = name {
            return Err(bad(
                ErrorCode::Unsupported,
                &field(name),
                "MP QPs are not supported (profile mp: false, MR-MPN-6)",
            ));
        }
    }
    if info.state != QpState::Init || to != QpState::Rtr {
        if lookup(info.qp_type, info.state, to).is_none() {
            return Err(verbs(
                VerbsError::InvalidTransition {
                    from: info.state,
                    to,
                },
                "state",
            ));
        }
        // MR-MPN-1: set once, on INIT to RTR; never changed later.
        return Err(bad(
            ErrorCode::UnexpectedAttribute,
            &field(first),
            format!(
                "MP attributes are accepted only on init -> rtr, not {} -> {} \
                 (MR-MPN-1: mp, mp_window and mp_trim_dscp cannot change later)",
                state_name(info.state),
                state_name(to)
            ),
        ));
    }
    if info.qp_type != QpType::Rc {
        return Err(bad(
            ErrorCode::UnexpectedAttribute,
            &field(first),
            "MP is a mode of RC QPs (SPEC §1.4)",
        ));
    }
    if a.mp != Some(true) {
        return match given.iter().find(|&&n| n != "mp") {
            Some(name) => Err(bad(
                ErrorCode::UnexpectedAttribute,
                &field(name),
                "an MP parameter needs mp: true in the same request",
            )),
            None => Ok(None), // mp: false: a Base QP (MR-MPN-2)
        };
    }
    let max_n = p.mp_entropy_set_max.clamp(1, ENTROPY_SET_MAX as u32);
    let n_range = |n: u64, name: &str| {
        if (1..=u64::from(max_n)).contains(&n) {
            Ok(())
        } else {
            Err(bad(
                ErrorCode::OutOfRange,
                &field(name),
                format!("{n} values; an entropy set has 1..={max_n} (MR-MPS-2)"),
            ))
        }
    };
    if let Some(n) = a.mp_entropy_set_size {
        n_range(u64::from(n), "mp_entropy_set_size")?;
    }
    let entropy = match &a.mp_entropy_set {
        Some(values) => {
            n_range(values.len() as u64, "mp_entropy_set")?;
            for (i, &v) in values.iter().enumerate() {
                let here = field(&format!("mp_entropy_set[{i}]"));
                if v < 0xC000 {
                    return Err(bad(
                        ErrorCode::OutOfRange,
                        &here,
                        format!("{v:#06x} is outside 0xc000..=0xffff (MR-MPS-2)"),
                    ));
                }
                if let Some(j) = values[..i].iter().position(|&u| u == v) {
                    return Err(bad(
                        ErrorCode::BadValue,
                        &here,
                        format!(
                            "{v:#06x} repeats mp_entropy_set[{j}]; values are distinct (MR-MPS-2)"
                        ),
                    ));
                }
            }
            if let Some(n) = a.mp_entropy_set_size
                && n as usize != values.len()
            {
                return Err(bad(
                    ErrorCode::BadValue,
                    &field("mp_entropy_set_size"),
                    format!(
                        "{n} disagrees with the {} values of mp_entropy_set",
                        values.len()
                    ),
                ));
            }
            MpEntropy::Values(values.clone())
        }
        None => MpEntropy::Seeded {
            // SPEC §7.1 default N = 128, within the declared maximum.
            n: a.mp_entropy_set_size.unwrap_or(128).min(max_n) as u16,
            seed,
        },
    };
    let max_w = p.mp_window_max.min(WINDOW_MAX);
    let window = a.mp_window.unwrap_or(1024.min(max_w));
    if !(64..=max_w).contains(&window) {
        // MR-MPW-4.
        return Err(bad(
            ErrorCode::OutOfRange,
            &field("mp_window"),
            format!("{window} is outside 64..={max_w} (mp_window_max, MR-MPW-4)"),
        ));
    }
    if let Some(d) = a.mp_trim_dscp {
        if d > 63 {
            return Err(bad(
                ErrorCode::OutOfRange,
                &field("mp_trim_dscp"),
                format!("{d} is not a DSCP (0..=63)"),
            ));
        }
        // MR-MPT-9 forbids sending with the trimming DSCP: a path that
        // asks for it could only be honoured by using another DSCP.
        if let Some(path) = &a.path
            && path.traffic_class >> 2 == d
        {
            return Err(bad(
                ErrorCode::BadValue,
                &field("mp_trim_dscp"),
                format!(
                    "{d} is the DSCP of attrs.path.traffic_class, which an MP sender \
                     never uses with trimming on (MR-MPT-9)"
                ),
            ));
        }
    }
    if let Some(d) = a.mp_ack_dscp {
        if d > 63 {
            return Err(bad(
                ErrorCode::OutOfRange,
                &field("mp_ack_dscp"),
                format!("{d} is not a DSCP (0..=63)"),
            ));
        }
        // MR-MPT-9: ACKs and probes never carry the trimming DSCP.
        if a.mp_trim_dscp == Some(d) {
            return Err(bad(
                ErrorCode::BadValue,
                &field("mp_ack_dscp"),
                format!("{d} is attrs.mp_trim_dscp, which an MP sender never uses (MR-MPT-9)"),
            ));
        }
    }
    if a.mp_flow_label_entropy == Some(true) && !(p.ipv6 && p.mp_flow_label_entropy) {
        return Err(bad(
            ErrorCode::Unsupported,
            &field("mp_flow_label_entropy"),
            "flow-label entropy needs IPv6 (profile ipv6 and mp_flow_label_entropy: false)",
        ));
    }
    let mut tuning = base;
    if let Some(k) = a.mp_reorder_threshold {
        if !(1..=64).contains(&k) {
            return Err(bad(
                ErrorCode::OutOfRange,
                &field("mp_reorder_threshold"),
                format!("{k} is outside 1..=64 (SPEC §10.3)"),
            ));
        }
        tuning.reorder_threshold = k;
    }
    // A local limit below the declared one (SPEC §2 `mp_max_staged_bytes`).
    let max_staged_bytes = match a.mp_max_staged_bytes {
        Some(b) if b > p.mp_max_staged_bytes => {
            return Err(bad(
                ErrorCode::OutOfRange,
                &field("mp_max_staged_bytes"),
                format!(
                    "{b} is above the declared mp_max_staged_bytes {}",
                    p.mp_max_staged_bytes
                ),
            ));
        }
        Some(b) => b,
        None => u64::MAX,
    };
    Ok(Some(MpAttrs {
        entropy,
        window,
        trim_dscp: a.mp_trim_dscp,
        ack_dscp: a.mp_ack_dscp,
        peer_ordered: a.mp_peer_ordered.unwrap_or(false),
        tuning,
        // SPEC §7.1, §7.16: what the peer announced (RN) out of band.
        peer_resource_nak: a.mp_peer_resource_nak == Some(true),
        max_staged_bytes,
    }))
}
