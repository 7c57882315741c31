//! Done-when test of the real-captures work: default `metaroce check` (no
//! flags) on every capture in `../shared/captures/real/`, its findings
//! pinned per capture (counts per severity and requirement, the frames of
//! every MUST finding, and the capture notes). `docs/real-captures.md`
//! explains each remaining MUST finding and note.
//!
//! Without `../shared` (and `METAROCE_REAL_CAPTURES` unset) the test prints
//! `SKIP: ../shared/captures/real absent`; with `CI=true` that fails.

use crate::common;

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

#[test]
fn default_check_on_every_real_capture() {
    let Some(dir) = common::real_captures() else {
        return;
    };
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("reads the directory")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".pcap") || n.ends_with(".pcapng"))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no capture in {}", dir.display());
    for name in names {
        let file = dir.join(&name);
        let jsonl = common::metaroce(&["check", "--format", "jsonl"], &file);
        let text = common::metaroce(&["check"], &file);
        let mut counts: BTreeMap<(String, String), u64> = BTreeMap::new();
        let mut must_frames: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for line in common::stdout(&jsonl).lines() {
            let v: Value = serde_json::from_str(line).expect("JSON line");
            let sev = v["severity"].as_str().unwrap_or("?").to_string();
            let id = v["id"].as_str().unwrap_or("?").to_string();
            if sev == "must" {
                let f = must_frames.entry(id.clone()).or_default();
                if f.len() < 12 {
                    f.push(v["frame"].as_u64().unwrap_or(0));
                }
            }
            *counts.entry((sev, id)).or_default() += 1;
        }
        let mut pinned = String::new();
        for ((sev, id), n) in &counts {
            let _ = writeln!(pinned, "{sev:<6} {id:<10} {n}");
        }
        for (id, frames) in &must_frames {
            let _ = writeln!(pinned, "must frames {id}: {frames:?}");
        }
        for note in common::stdout(&text)
            .lines()
            .filter(|l| l.trim_start().starts_with("capture note:"))
        {
            let _ = writeln!(pinned, "{}", note.trim());
        }
        insta::assert_snapshot!(name.replace('.', "_"), pinned);
    }
}
