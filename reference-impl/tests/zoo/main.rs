//! The bug zoo (feature `zoo`): for every mutant a short deterministic
//! scenario in which the correct transport behaves as SPEC.md requires and
//! the mutant visibly deviates (`fixture::check` asserts both), plus the
//! checks that every mutant has exactly one scenario, that the requirement
//! IDs each mutant names exist in SPEC.md, that ZOO.md lists every mutant as
//! the code does, and that the agent keeps a mutant across `reset`.
//!
//! `cargo test -p metaroce-ref --features zoo --test zoo`

#[path = "../common/mod.rs"]
mod common;

mod base_requester;
mod base_responder;
mod fixture;
mod mp;

use metaroce_ref::zoo::{Mutant, Profile, Role};
use std::collections::BTreeSet;
use std::path::Path;

/// Declares the scenario table and one `#[test]` per scenario.
macro_rules! scenarios {
    ($($mutant:ident => $module:ident :: $scenario:ident,)*) => {
        /// Every mutant's scenario.
        const SCENARIOS: &[(Mutant, fn())] = &[$((Mutant::$mutant, $module::$scenario),)*];

        mod scenario {
            $(
                #[test]
                fn $scenario() {
                    super::$module::$scenario()
                }
            )*
        }
    };
}

scenarios! {
    MsnOffByOne => base_responder::msn_off_by_one,
    AckPsnOffByOne => base_responder::ack_psn_off_by_one,
    SeqNakEveryPacket => base_responder::seq_nak_every_packet,
    DupReadIgnored => base_responder::dup_read_ignored,
    AtomicReplayReexecutes => base_responder::atomic_replay_reexecutes,
    RkeyBoundsOffByOne => base_responder::rkey_bounds_off_by_one,
    ReadLeak => base_responder::read_leak,
    WriteAccessUnchecked => base_responder::write_access_unchecked,
    RnrTimerCodeZero => base_responder::rnr_timer_code_zero,
    CreditCodeZero => base_responder::credit_code_zero,
    SendInvIgnored => base_responder::send_inv_ignored,
    IcrcNotChecked => base_responder::icrc_not_checked,
    PkeyNotChecked => base_responder::pkey_not_checked,
    QpnLowBits => base_responder::qpn_low_bits,
    QkeyNotChecked => base_responder::qkey_not_checked,
    CnpNeverSent => base_responder::cnp_never_sent,
    CnpNotPaced => base_responder::cnp_not_paced,
    WedgeOnBadPadcnt => base_responder::wedge_on_bad_padcnt,
    WedgeOnUnknownOpcode => base_responder::wedge_on_unknown_opcode,
    PadcntZero => base_requester::padcnt_zero,
    AckReqNeverOnLast => base_requester::ackreq_never_on_last,
    RnrWaitIgnored => base_requester::rnr_wait_ignored,
    RetryForever => base_requester::retry_forever,
    MpReplaceAfterComplete => mp::mp_replace_after_complete,
    MpSackOffByOne => mp::mp_sack_off_by_one,
    MpWindowNotEnforced => mp::mp_window_not_enforced,
    MpAckEchoWrong => mp::mp_ack_echo_wrong,
    MpProbeUnanswered => mp::mp_probe_unanswered,
    MpGoBackN => mp::mp_go_back_n,
    MpSingleEntropy => mp::mp_single_entropy,
    MpCwndIgnored => mp::mp_cwnd_ignored,
}

#[test]
fn every_mutant_has_exactly_one_scenario() {
    for m in Mutant::ALL {
        let n = SCENARIOS.iter().filter(|(s, _)| s == m).count();
        assert_eq!(n, 1, "mutant {m} has {n} scenarios in tests/zoo/main.rs");
    }
    assert_eq!(SCENARIOS.len(), Mutant::ALL.len());
}

#[test]
fn the_zoo_is_large_and_covers_both_profiles_and_roles() {
    assert!(Mutant::ALL.len() >= 24, "{} mutants", Mutant::ALL.len());
    for profile in [Profile::Base, Profile::Mp] {
        for role in [Role::Responder, Role::Requester] {
            assert!(
                Mutant::ALL
                    .iter()
                    .any(|m| m.profile() == profile && m.role() == role),
                "no {profile:?} {role:?} mutant"
            );
        }
    }
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_requirement_a_mutant_names_exists_in_spec() {
    let spec = std::fs::read_to_string(root().join("../spec-model/SPEC.md")).unwrap();
    for m in Mutant::ALL {
        assert!(!m.requirements().is_empty(), "{m}");
        for id in m.requirements() {
            assert!(
                spec.contains(&format!("- **{id}** (")),
                "{m}: {id} is not a requirement of SPEC.md"
            );
        }
    }
}

/// ZOO.md's table: name | profile | role | what is broken | requirements | how it shows.
#[test]
fn zoo_md_lists_every_mutant_as_the_code_does() {
    let doc = std::fs::read_to_string(root().join("ZOO.md")).unwrap();
    let mut listed = BTreeSet::new();
    for line in doc.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        let name = cells[0].trim_matches('`');
        let m: Mutant = name.parse().unwrap_or_else(|e| panic!("ZOO.md: {e}"));
        let profile = match m.profile() {
            Profile::Base => "Base",
            Profile::Mp => "MP",
        };
        let role = match m.role() {
            Role::Responder => "responder",
            Role::Requester => "requester",
        };
        assert_eq!(cells[1], profile, "ZOO.md profile of {m}");
        assert_eq!(cells[2], role, "ZOO.md role of {m}");
        assert_eq!(cells[3], m.description(), "ZOO.md description of {m}");
        assert_eq!(
            cells[4],
            m.requirements().join(", "),
            "ZOO.md requirements of {m}"
        );
        assert_eq!(cells[5], m.symptom(), "ZOO.md symptom of {m}");
        assert!(listed.insert(m), "{m} listed twice in ZOO.md");
    }
    assert_eq!(listed.len(), Mutant::ALL.len(), "ZOO.md lists {listed:?}");
}

#[test]
fn an_agent_keeps_its_mutant_across_reset() {
    use metaroce_ref::agent::{Agent, AgentConfig};
    use metaroce_ref::*;
    let m = Mutant::IcrcNotChecked;
    let config = DeviceConfig {
        mutant: Some(m),
        ..DeviceConfig::new(common::MAC_B, common::IP_B)
    };
    let mut agent = Agent::new(AgentConfig::reference(config, [7; 32]));
    let hello = agent.handle_line(br#"{"id":1,"op":"hello"}"#);
    let text = hello.reply().unwrap().to_json();
    assert!(
        text.contains("metaroce-ref (mutant icrc-not-checked)"),
        "{text}"
    );
    agent.reset();
    assert_eq!(agent.device().config().mutant, Some(m));
    // And it still behaves as the mutant: a corrupted WRITE is placed.
    let mut a = fixture::device(common::MAC_A, common::IP_A, 1, None);
    let b = agent.device_mut();
    let ea = common::create_rc(&mut a, 100);
    let eb = common::create_rc(b, 200);
    common::connect(
        &mut a,
        ea,
        eb,
        common::IP_B,
        common::MAC_B,
        common::Params::default(),
    );
    common::connect(
        b,
        eb,
        ea,
        common::IP_A,
        common::MAC_A,
        common::Params::default(),
    );
    let dst = b.reg_mr(eb.pd, 16, Access::ALL).unwrap();
    fixture::post(
        &mut a,
        ea,
        1,
        WrOp::Write(fixture::remote(&dst, 0)),
        &[9; 16],
    );
    let mut f = common::drain(&mut a).remove(0);
    let n = f.len();
    f[n - 10] ^= 0xFF;
    b.handle_frame(0, &f);
    assert_eq!(b.counters().icrc_errors, 0);
    assert_ne!(b.read_mr(dst.lkey, dst.addr, 16).unwrap(), [0; 16]);
}
