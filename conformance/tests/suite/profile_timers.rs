//! Windows that follow the IUT's declared MP local constants (SPEC §2,
//! §10.3; vectors/README.md `${profile.KEY}`), and the profile file's key
//! check.

use metaroce_conformance::run::capability::load_profile;
use metaroce_conformance::run::iut::builtin::Builtin;
use metaroce_conformance::run::profile_keys;
use metaroce_conformance::run::verdict::Verdict;
use metaroce_conformance::run::{RunOptions, max_margin_us, run_suite};
use metaroce_conformance::vector::expr;
use metaroce_conformance::vector::load::load_vector;
use metaroce_conformance::vector::model::{Num, Step};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../vectors")
}

/// The windows (µs) of a vector's steps, for the profile `map`.
fn windows(file: &str, map: &Map<String, Value>) -> Vec<u64> {
    let v = load_vector(&vectors().join(file)).unwrap().vector;
    let b = profile_keys::bindings(map).unwrap();
    v.steps
        .iter()
        .filter_map(|s| match s {
            Step::Expect(e) => Some(&e.within_us),
            Step::ExpectNone(e) => Some(&e.within_us),
            Step::Wait(w) => Some(&w.within_us),
            Step::ExpectNoCompletion(w) => Some(&w.within_us),
            Step::ExpectCompletion(c) => Some(&c.within_us),
            _ => None,
        })
        .map(|n| match n {
            Num::Int(us) => *us,
            Num::Expr(t) => expr::eval(t, &b).unwrap(),
        })
        .collect()
}

/// The `late.after_us` bounds (µs) of a vector's `expect` steps.
fn late(file: &str, map: &Map<String, Value>) -> Vec<u64> {
    let v = load_vector(&vectors().join(file)).unwrap().vector;
    let b = profile_keys::bindings(map).unwrap();
    v.steps
        .iter()
        .filter_map(|s| match s {
            Step::Expect(e) => e.late.as_ref(),
            _ => None,
        })
        .map(|l| match &l.after_us {
            Num::Int(us) => *us,
            Num::Expr(t) => expr::eval(t, &b).unwrap(),
        })
        .collect()
}

fn profile(pairs: &[(&str, u64)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(*v)))
        .collect()
}

#[test]
fn declared_timers_make_the_windows_larger() {
    // The windows follow the declared timers.
    // Since 2026-12-02 (SPEC §7.7 timer accuracy) the windows after an
    // expiry are its MUST bound (one timer) and the `late` bounds its SHOULD
    // (an eighth of the timer, MR-MPL-11).
    let d = windows("mp/loss/rto_doubling.yaml", &Map::new());
    assert_eq!(d, vec![2000, 2000, 1990, 2010]);
    assert_eq!(late("mp/loss/rto_doubling.yaml", &Map::new()), [1155, 260]);
    let slow = profile(&[("mp_rto_init", 20_000), ("mp_rto_max", 30_000)]);
    // Twice the RTO, capped by mp_rto_max, less 10 µs.
    assert_eq!(
        windows("mp/loss/rto_doubling.yaml", &slow),
        vec![2000, 40_000, 29_990, 30_010]
    );
    assert_eq!(late("mp/loss/rto_doubling.yaml", &slow), [22_530, 3_760]);
    let v = load_vector(&vectors().join("mp/loss/rto_doubling.yaml"))
        .unwrap()
        .vector;
    let at = |map: &Map<String, Value>| {
        max_margin_us(&v, &profile_keys::bindings(map).unwrap()).unwrap()
    };
    assert_eq!(at(&Map::new()), Some(100));
    // A 20 ms RTO can be raced by a live bed's 5 ms margin floor.
    assert!(at(&slow).unwrap() * 1_000 >= 2_000_000);
    assert_eq!(
        windows(
            "mp/path/probe_backoff.yaml",
            &profile(&[("mp_retire_hold", 5_000)])
        )[3..],
        [5_625, 9_990, 30_000]
    );
}

#[test]
fn the_builtin_iut_fails_a_window_its_declared_rto_does_not_meet() {
    // The built-in transport retransmits after 1000 µs (its true
    // mp_rto_init). Told it declares 3000 µs, the vector waits 2990 µs and
    // sees the retransmission too early: the window follows the profile.
    let file = vectors().join("mp/loss/rto_initial.yaml");
    let set = metaroce_conformance::vector::load_dir(&file).unwrap();
    let run = |map: Map<String, Value>| {
        let mut iut = Builtin::new(3, None).unwrap();
        let options = RunOptions {
            profile_override: map,
            ..RunOptions::default()
        };
        let r = run_suite(&set, &file, &mut iut, &options, &mut |_, _, _| {}).unwrap();
        let t = &r.tests[0];
        (t.verdict, t.reason.clone().unwrap_or_default())
    };
    assert_eq!(run(Map::new()).0, Verdict::Pass);
    assert_eq!(run(profile(&[("mp_rto_init", 1000)])).0, Verdict::Pass);
    let (verdict, reason) = run(profile(&[("mp_rto_init", 3000)]));
    assert_eq!(verdict, Verdict::Fail, "{reason}");
    assert!(reason.contains("within 2990 µs"), "{reason}");
}

#[test]
fn an_unknown_profile_key_is_rejected_naming_key_and_file() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("metaroce-profile-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("nic.yaml");
    std::fs::write(&file, "mp: true\nmp_rto_init: 5000\nmp_rto_initial: 5000\n").unwrap();
    let e = load_profile(&file).unwrap_err().to_string();
    assert!(e.contains("nic.yaml"), "{e}");
    assert!(
        e.contains("`mp_rto_initial` is not a capability-profile key of SPEC §2"),
        "{e}"
    );
    // The declared keys load; a value outside §10.3 is named too.
    std::fs::write(&file, "mp: true\nmp_rto_init: 5000\nmp_retire_hold: 2000\n").unwrap();
    let map = load_profile(&file).unwrap();
    assert_eq!(map["mp_rto_init"], 5000);
    std::fs::write(&file, "mp_rto_max: 999\n").unwrap();
    let e = load_profile(&file).unwrap_err().to_string();
    assert!(
        e.contains("nic.yaml") && e.contains("mp_rto_max: 999 is outside"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
