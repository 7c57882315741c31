//! `metaroce fuzz` against the built-in IUT and its bug zoo (reference-impl/ZOO.md):
//! the memory mutants give MEMORY findings (MR-SEC-4, MR-SEC-6) and the liveness
//! mutants HANG findings (MR-ROB-7) within a bounded number of packets; the
//! unmutated transport gives none for the same budget; an exported
//! reproducer FAILs on the mutant and PASSes on the unmutated transport.
//! Only the builtin IUT: no network, no privileges.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Stimuli each run may spend (the counts measured with `--seed 1` are in
/// conformance/FUZZ.md: every mutant is found well within it).
const BUDGET: &str = "3000";

fn metaroce(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_metaroce"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("metaroce runs")
}

fn out_dir(name: &str) -> PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("metaroce-fuzz-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Runs the fuzzer until its first finding; returns its exit code, stdout
/// and the finding folders.
fn fuzz(iut: &str, out: &Path) -> (Option<i32>, String, Vec<PathBuf>) {
    let o = metaroce(&[
        "fuzz",
        "--iut",
        iut,
        "--packets",
        BUDGET,
        "--duration",
        "120",
        "--seed",
        "1",
        "--max-findings",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.code() != Some(2),
        "{iut}: the fuzzer failed: {stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut findings: Vec<PathBuf> = std::fs::read_dir(out)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    findings.sort();
    (o.status.code(), stdout, findings)
}

fn finding_json(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("finding.json")).expect("finding.json");
    serde_json::from_str(&text).expect("finding.json is JSON")
}

/// The mutant gives one finding of `kind`; its exported reproducer FAILs
/// on the mutant and PASSes on the unmutated transport.
fn finds(mutant: &str, kind: &str, requirement: &str) {
    let out = out_dir(mutant);
    let iut = format!("builtin:mutant={mutant}");
    let (code, stdout, findings) = fuzz(&iut, &out);
    assert_eq!(
        code,
        Some(1),
        "{requirement}: {mutant} must give a finding: {stdout}"
    );
    assert_eq!(findings.len(), 1, "{stdout}");
    let f = finding_json(&findings[0]);
    assert_eq!(f["kind"], kind, "{requirement}: {mutant}: {f}");
    assert_eq!(
        f["reproduced"], true,
        "{mutant}: the reproducer must FAIL again: {f}"
    );
    assert!(
        f["reproducer_stimuli"].as_u64().unwrap() <= f["batch_stimuli"].as_u64().unwrap(),
        "minimising never grows a batch"
    );
    for pcap in ["batch.pcapng", "reproducer.pcapng"] {
        let len = std::fs::metadata(findings[0].join(pcap)).map(|m| m.len());
        assert!(len.unwrap_or(0) > 100, "{pcap} holds the batch's packets");
    }
    println!("{mutant}: {kind} after {} packets", f["after_packets"]);

    // `metaroce fuzz export` → a suite vector.
    let vectors = out.join("vectors");
    let o = metaroce(&[
        "fuzz",
        "export",
        findings[0].to_str().unwrap(),
        "--to",
        vectors.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let file = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(
        Path::new(&file).is_file(),
        "export prints the file it wrote: {file}"
    );

    let run = |iut: &str| {
        metaroce(&["run", "--vectors", &file, "--iut", iut])
            .status
            .code()
    };
    assert_eq!(
        run(&iut),
        Some(1),
        "{requirement}: the reproducer FAILs on {mutant}"
    );
    assert_eq!(
        run("builtin"),
        Some(0),
        "the reproducer PASSes on the unmutated transport"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn rkey_bounds_off_by_one_is_a_memory_finding() {
    finds("rkey-bounds-off-by-one", "MEMORY", "MR-SEC-4");
}

#[test]
fn wedge_on_bad_padcnt_is_a_hang_finding() {
    finds("wedge-on-bad-padcnt", "HANG", "MR-ROB-7");
}

#[test]
fn wedge_on_unknown_opcode_is_a_hang_finding() {
    finds("wedge-on-unknown-opcode", "HANG", "MR-ROB-7");
}

#[test]
fn the_unmutated_transport_gives_no_finding() {
    let out = out_dir("clean");
    let (code, stdout, findings) = fuzz("builtin", &out);
    assert_eq!(
        code,
        Some(0),
        "MR-ROB-7, MR-SEC-4: no finding on the reference transport: {stdout}"
    );
    assert!(findings.is_empty());
    assert!(
        stdout.contains(&format!("{BUDGET} packets")),
        "the run spends its whole budget and says so: {stdout}"
    );
    assert!(
        stdout.contains("findings: HANG 0, MEMORY 0, COMPLETION 0"),
        "{stdout}"
    );
}

#[test]
fn export_refuses_what_is_not_a_vector() {
    let out = out_dir("bad-export");
    std::fs::create_dir_all(&out).unwrap();
    let bad = out.join("reproducer.yaml");
    std::fs::write(&bad, "id: [unclosed\n").unwrap();
    let o = metaroce(&[
        "fuzz",
        "export",
        out.to_str().unwrap(),
        "--to",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(4));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("reproducer.yaml"),
        "the error names the file: {err}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn read_leak_is_a_memory_finding() {
    finds("read-leak", "MEMORY", "MR-SEC-6");
}

#[test]
fn write_access_unchecked_is_a_memory_finding() {
    finds("write-access-unchecked", "MEMORY", "MR-SEC-4");
}
