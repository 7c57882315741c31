//! Which QP attributes and MP parameters an implementation must accept or
//! reject (SPEC.md §3.7, §7.1, §7.4, §7.11), as pure functions of its
//! declarations (§2) and the request.

use crate::model::qp::QpState;
use crate::validate::PMTU_VALUES;
use metaroce_codec::mp_setup::MpSetupBlock;

/// The declarations of §2 these checks depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Declared {
    /// `max_pmtu`.
    pub max_pmtu: u32,
    /// `mp`.
    pub mp: bool,
    /// `mp_entropy_set_max`.
    pub mp_entropy_set_max: u32,
    /// `mp_window_max`.
    pub mp_window_max: u32,
}

impl Default for Declared {
    /// The §2 defaults.
    fn default() -> Self {
        Declared {
            max_pmtu: 4096,
            mp: false,
            mp_entropy_set_max: 256,
            mp_window_max: 1024,
        }
    }
}

/// What a request asks for, in the attributes these checks concern.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MpRequest {
    /// `mp`.
    pub mp: bool,
    /// `mp_entropy_set`.
    pub entropy_set: Vec<u16>,
    /// `mp_window`.
    pub window: u32,
    /// `mp_trim_dscp`.
    pub trim_dscp: Option<u8>,
}

/// Why a request is rejected (the requirement that demands the rejection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejected {
    /// The requirement.
    pub req: &'static str,
    /// What is wrong.
    pub why: &'static str,
}

const fn reject(req: &'static str, why: &'static str) -> Result<(), Rejected> {
    Err(Rejected { req, why })
}

/// "MR-ENC-24": a PMTU is accepted exactly when it is one of the five values
/// of §3.7 and at most the declared `max_pmtu`.
pub fn check_pmtu(d: &Declared, pmtu: u32) -> Result<(), Rejected> {
    if !PMTU_VALUES.contains(&pmtu) {
        return reject("MR-ENC-24", "not one of 256, 512, 1024, 2048, 4096");
    }
    if pmtu > d.max_pmtu {
        return reject("MR-ENC-24", "above the declared max_pmtu");
    }
    Ok(())
}

/// "MR-MPW-4": every `mp_window` from 64 to the declared `mp_window_max` is
/// accepted; values outside 64–16384 are rejected. (A value above
/// `mp_window_max` but within 64–16384 may be rejected too.)
pub fn check_window(d: &Declared, window: u32) -> Result<(), Rejected> {
    if !u16::try_from(window).is_ok_and(|w| MpSetupBlock::WINDOW_RANGE.contains(&w)) {
        return reject("MR-MPW-4", "mp_window outside 64–16384");
    }
    if window > d.mp_window_max {
        return reject("MR-MPW-4", "mp_window above the declared mp_window_max");
    }
    Ok(())
}

/// "MR-MPS-2": the entropy set must hold 1 to min(256, `mp_entropy_set_max`)
/// distinct values, each in 0xC000–0xFFFF.
pub fn check_entropy_set(d: &Declared, set: &[u16]) -> Result<(), Rejected> {
    let max = d.mp_entropy_set_max.min(256) as usize;
    if set.is_empty() || set.len() > max {
        return reject(
            "MR-MPS-2",
            "entropy set size outside 1–min(256, mp_entropy_set_max)",
        );
    }
    if set.iter().any(|&v| v < 0xC000) {
        return reject("MR-MPS-2", "entropy value outside 0xC000–0xFFFF");
    }
    let mut sorted = set.to_vec();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return reject("MR-MPS-2", "entropy values not distinct");
    }
    Ok(())
}

/// The MP part of an INIT → RTR modify request ("MR-MPN-1": an
/// implementation that declares `mp` accepts `mp` and valid MP parameters
/// there; "MR-MPN-6": one that does not declares `mp` rejects `mp` set).
pub fn check_mp_at_rtr(d: &Declared, req: &MpRequest) -> Result<(), Rejected> {
    if !req.mp {
        return Ok(());
    }
    if !d.mp {
        return reject(
            "MR-MPN-6",
            "mp set on an implementation that does not declare mp",
        );
    }
    check_entropy_set(d, &req.entropy_set)?;
    check_window(d, req.window)?;
    if req.trim_dscp.is_some_and(|dscp| dscp > 63) {
        return reject("MR-MPN-1", "mp_trim_dscp outside 0–63");
    }
    Ok(())
}

/// A modify request that sets MP attributes on a QP in `state` whose current
/// values are `current` ("MR-MPN-1": `mp`, `mp_window` and `mp_trim_dscp` can
/// be set only on the INIT → RTR transition; "MR-MPN-6": `mp` only where it is
/// declared, at QP creation as at any modify).
pub fn check_mp_modify(
    d: &Declared,
    state: QpState,
    to: QpState,
    current: &MpRequest,
    requested: &MpRequest,
) -> Result<(), Rejected> {
    if requested.mp && !d.mp {
        return reject(
            "MR-MPN-6",
            "mp set on an implementation that does not declare mp",
        );
    }
    if state == QpState::Init && to == QpState::Rtr {
        return check_mp_at_rtr(d, requested);
    }
    if to == QpState::Reset {
        return Ok(()); // a reset QP is configured afresh
    }
    let changed = requested.mp != current.mp
        || (current.mp
            && (requested.window != current.window || requested.trim_dscp != current.trim_dscp));
    if changed {
        return reject(
            "MR-MPN-1",
            "mp, mp_window and mp_trim_dscp are fixed after INIT → RTR",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mp_decl() -> Declared {
        Declared {
            mp: true,
            mp_window_max: 2048,
            mp_entropy_set_max: 64,
            max_pmtu: 2048,
        }
    }

    fn request() -> MpRequest {
        MpRequest {
            mp: true,
            entropy_set: (0xC000..0xC010).collect(),
            window: 1024,
            trim_dscp: Some(7),
        }
    }

    #[test]
    fn pmtu_values() {
        // MR-ENC-24
        let d = mp_decl();
        for ok in [256, 512, 1024, 2048] {
            assert_eq!(check_pmtu(&d, ok), Ok(()), "MR-ENC-24");
        }
        for bad in [0, 255, 1000, 1500, 4096, 8192] {
            assert!(check_pmtu(&d, bad).is_err(), "MR-ENC-24: {bad}");
        }
        assert_eq!(check_pmtu(&Declared::default(), 4096), Ok(()));
    }

    #[test]
    fn window_range() {
        // MR-MPW-4
        let d = mp_decl();
        for ok in [64, 65, 1024, 2048] {
            assert_eq!(check_window(&d, ok), Ok(()), "MR-MPW-4");
        }
        for bad in [0, 63, 16385, 100_000] {
            assert!(check_window(&d, bad).is_err(), "MR-MPW-4: {bad}");
        }
        assert!(check_window(&d, 4096).is_err(), "above mp_window_max");
    }

    #[test]
    fn entropy_sets() {
        // MR-MPS-2
        let d = mp_decl();
        assert_eq!(check_entropy_set(&d, &[0xC000]), Ok(()));
        assert_eq!(check_entropy_set(&d, &[0xFFFF, 0xC000]), Ok(()));
        assert!(check_entropy_set(&d, &[]).is_err(), "MR-MPS-2: empty");
        assert!(
            check_entropy_set(&d, &[0xC001, 0xC001]).is_err(),
            "MR-MPS-2: repeated"
        );
        assert!(check_entropy_set(&d, &[0xBFFF]).is_err(), "MR-MPS-2: range");
        let big: Vec<u16> = (0xC000..0xC000 + 65).collect();
        assert!(
            check_entropy_set(&d, &big).is_err(),
            "MR-MPS-2: above mp_entropy_set_max"
        );
        let wide = Declared {
            mp_entropy_set_max: 1000,
            ..d
        };
        let all: Vec<u16> = (0xC000..0xC000 + 257).collect();
        assert!(
            check_entropy_set(&wide, &all).is_err(),
            "MR-MPS-2: above 256"
        );
        assert_eq!(check_entropy_set(&wide, &all[..256]), Ok(()));
    }

    #[test]
    fn mp_accepted_at_rtr_and_fixed_after() {
        // MR-MPN-1
        let d = mp_decl();
        let r = request();
        let off = MpRequest::default();
        assert_eq!(
            check_mp_modify(&d, QpState::Init, QpState::Rtr, &off, &r),
            Ok(()),
            "MR-MPN-1"
        );
        for (from, to) in [(QpState::Rtr, QpState::Rts), (QpState::Rts, QpState::Rts)] {
            let wider = MpRequest {
                window: 2048,
                ..r.clone()
            };
            assert_eq!(
                check_mp_modify(&d, from, to, &r, &wider).map_err(|e| e.req),
                Err("MR-MPN-1")
            );
            let trim_off = MpRequest {
                trim_dscp: None,
                ..r.clone()
            };
            assert!(
                check_mp_modify(&d, from, to, &r, &trim_off).is_err(),
                "MR-MPN-1"
            );
            assert!(
                check_mp_modify(&d, from, to, &r, &off).is_err(),
                "MR-MPN-1: mp off"
            );
            assert_eq!(
                check_mp_modify(&d, from, to, &r, &r),
                Ok(()),
                "unchanged is fine"
            );
        }
        // Turning mp on after RTR is a change too.
        assert!(check_mp_modify(&d, QpState::Rtr, QpState::Rts, &off, &r).is_err());
        // Bad parameters at RTR are rejected with their own requirement.
        let bad = MpRequest {
            window: 10,
            ..r.clone()
        };
        assert_eq!(
            check_mp_at_rtr(&d, &bad).map_err(|e| e.req),
            Err("MR-MPW-4")
        );
        let bad_dscp = MpRequest {
            trim_dscp: Some(64),
            ..r
        };
        assert_eq!(
            check_mp_at_rtr(&d, &bad_dscp).map_err(|e| e.req),
            Err("MR-MPN-1")
        );
    }

    #[test]
    fn mp_rejected_without_the_declaration() {
        // MR-MPN-6
        let d = Declared::default();
        let r = request();
        let off = MpRequest::default();
        assert_eq!(check_mp_at_rtr(&d, &r).map_err(|e| e.req), Err("MR-MPN-6"));
        assert_eq!(
            check_mp_modify(&d, QpState::Rts, QpState::Rts, &off, &r).map_err(|e| e.req),
            Err("MR-MPN-6")
        );
        assert_eq!(check_mp_at_rtr(&d, &off), Ok(()), "Base QPs are fine");
    }
}
