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

/// The HTML report of a small run: one `<figure data-plot=...>` with one
/// inline SVG per promised figure and scenario, each with a series per
/// profile, and nothing loaded from elsewhere.
#[cfg(feature = "html")]
#[test]
fn html_report_has_every_figure() {
    use metaroce_ref::sim::fabric::html::{FIGURES, Run, report};
    use metaroce_ref::sim::fabric::report::plots;
    let names = ["link-failure", "incast"];
    let mut rows = Vec::new();
    for name in names {
        let s = builtin(name, HOSTS, 1.0, SEED, Size::Small).expect("a built-in scenario");
        for profile in [Profile::Base, Profile::Mp] {
            let (summary, r) = run_profile(&s, profile, SEED);
            let p = plots(&s.fabric, &r);
            assert!(!p.goodput_gbps.is_empty() && p.completion_quantiles_us.len() == 201);
            // 2 leaves x 4 spines; the failed cable L0S0 carried little.
            assert_eq!(p.uplink_utilisation.len(), 2);
            rows.push((summary, p));
        }
    }
    let runs: Vec<Run> = (rows.iter())
        .map(|(summary, plots)| Run { summary, plots })
        .collect();
    let page = report("test", &runs).expect("plots drawn");
    assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
    for name in names {
        assert!(page.contains(&format!("<h2>{name}</h2>")), "{name}");
    }
    for figure in FIGURES {
        let n = page
            .matches(&format!("<figure data-plot=\"{figure}\">"))
            .count();
        assert_eq!(n, names.len(), "{figure}");
    }
    assert_eq!(page.matches("<svg").count(), names.len() * FIGURES.len());
    // Each figure has a legend entry per profile.
    assert_eq!(
        page.matches("\nBase\n</text>").count(),
        names.len() * FIGURES.len()
    );
    assert_eq!(
        page.matches("\nMP\n</text>").count(),
        names.len() * FIGURES.len()
    );
    assert!(!page.contains("<script") && !page.contains("src=\"http"));
}
