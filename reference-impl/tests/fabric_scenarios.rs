//! The fabric simulator (src/sim/fabric): every built-in scenario at its
//! small size on 8 hosts (2 leaves, 4 spines), Base and MP side by side.
//! Every message is delivered exactly once in every run, a second run with
//! the same seed gives the same summary, and the table is pinned with
//! insta (a change of the transport or of the simulator that moves a
//! figure shows up as a snapshot diff).

use metaroce_ref::sim::fabric::run::Profile;
use metaroce_ref::sim::fabric::scenario::{NAMES, Size, Summary, builtin, run_profile, table};

const HOSTS: usize = 8;
const SEED: u64 = 1;

fn run(name: &str, profile: Profile) -> Summary {
    let s = builtin(name, HOSTS, 1.0, SEED, Size::Small).expect("a built-in scenario");
    run_profile(&s, profile, SEED).0
}

#[test]
fn scenarios_table() {
    let mut rows = Vec::new();
    for name in NAMES {
        for profile in [Profile::Base, Profile::Mp] {
            let r = run(name, profile);
            assert_eq!(
                (r.messages_lost, r.duplicated),
                (0, 0),
                "{name} {}: exactly once",
                r.profile
            );
            assert!(
                r.goodput_fraction > 0.0 && r.goodput_fraction <= 1.0,
                "{name} {}: goodput fraction {}",
                r.profile,
                r.goodput_fraction
            );
            rows.push(r);
        }
    }
    let t = table(&rows);
    println!("{t}");
    insta::assert_snapshot!(t);
}

#[test]
fn same_seed_same_summary() {
    for (name, profile) in [("link-failure", Profile::Mp), ("incast", Profile::Base)] {
        assert_eq!(run(name, profile), run(name, profile), "{name}");
    }
}
