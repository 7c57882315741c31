//! `metaroce check`'s outputs and filters, run as a user runs them: JUnit
//! XML, the annotated capture (read back, and by tshark when installed: CI
//! has it), `--qp`, `--only`, `--profile FILE`, `--from`/`--to`, and bad
//! filter values.

use crate::common::*;
use metaroce_codec::{Opcode, PacketBuilder};
use metaroce_conformance::capture::{CaptureReader, PcapNgWriter};
use std::path::PathBuf;
use std::process::Command;

/// Three RC SENDs 1 µs apart; the third has a wrong ICRC (MR-ICRC-1).
fn timed_capture(name: &str) -> PathBuf {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    for i in 0..3u32 {
        let mut b = PacketBuilder::new(Opcode::RC_SEND_ONLY)
            .psn(i)
            .ack_req(true)
            .payload(vec![7; 8]);
        if i == 2 {
            b = b.corrupt_icrc();
        }
        let f = b.build();
        w.write_packet(1_000 * u64::from(i + 1), &f, f.len() as u32, None)
            .unwrap();
    }
    let path = temp_path(name);
    std::fs::write(&path, w.into_inner()).unwrap();
    path
}

fn ids_in(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("frame "))
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("MR-")))
        .map(str::to_string)
        .collect()
}

#[test]
fn junit_lists_failed_requirements_and_connections() {
    let out = metaroce(&["check", "--format", "junit"], &sample());
    assert_eq!(out.status.code(), Some(1));
    let xml = stdout(&out);
    assert!(xml.starts_with("<?xml"), "{xml}");
    for needle in [
        r#"<testsuite name="requirements""#,
        r#"<testcase name="MR-ICRC-1" classname="requirements">"#,
        r#"<failure message="1 finding(s) (1 must, 0 should, 0 info), first at frame 23" type="must">"#,
        r#"<testsuite name="connections""#,
    ] {
        assert!(xml.contains(needle), "{needle} missing from\n{xml}");
    }
    // --junit FILE writes the same report beside the text output.
    let file = temp_path("junit.xml");
    let text = metaroce(&["check", "--junit", file.to_str().unwrap()], &sample());
    assert_eq!(text.status.code(), Some(1));
    assert!(stdout(&text).contains("Summary"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), xml);
    // A clean capture: one passing test case.
    let clean = timed_capture("junit-clean.pcapng");
    let out = metaroce(&["check", "--format", "junit", "--to", "0.000001"], &clean);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).contains(r#"<testcase name="conforms""#),
        "{}",
        stdout(&out)
    );
}

#[test]
fn annotate_writes_each_finding_as_a_comment_on_its_frames() {
    let out_path = temp_path("annotated.pcapng");
    let out = metaroce(
        &["check", "--annotate", out_path.to_str().unwrap()],
        &sample(),
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut reader = CaptureReader::open(&out_path).unwrap();
    let mut ours = Vec::new();
    let mut frames = 0;
    while let Some(f) = reader.next_frame().unwrap() {
        frames += 1;
        for c in f.comments().filter(|c| c.starts_with("metaroce: ")) {
            ours.push((f.number, c.split_whitespace().nth(1).unwrap().to_string()));
        }
    }
    assert_eq!(frames, 24, "every frame is written back");
    assert_eq!(
        ours,
        vec![
            (14, "MR-PSN-3".to_string()),
            (23, "MR-NAK-5".to_string()),
            (23, "MR-ICRC-1".to_string()),
            (24, "MR-PKT-4".to_string()),
        ]
    );
    // Wireshark shows them as frame.comment (CI installs tshark).
    match Command::new("tshark")
        .args([
            "-r",
            out_path.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            "frame.comment",
        ])
        .output()
    {
        Ok(t) if t.status.success() => {
            let shown = String::from_utf8_lossy(&t.stdout);
            let line23 = shown.lines().nth(22).unwrap_or_default();
            assert!(
                line23.contains("metaroce: MR-ICRC-1 [must]"),
                "tshark frame 23: {line23}"
            );
            assert!(line23.contains("metaroce: MR-NAK-5 [must]"), "{line23}");
        }
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "tshark is installed in CI"
            );
            eprintln!("SKIP: tshark check of the annotated capture: tshark not installed");
        }
    }
}

#[test]
fn qp_filter_reports_the_findings_of_those_qps() {
    // The sample's RC connection is QPN 0x11 -> 0x12 (frames 14, 23); frame
    // 24 does not decode (no QP).
    // Frame 23's MR-ICRC-1 comes last: it is reported once the capture
    // shows its receiver did not take it (no ACK covers its PSN by the end).
    let all = stdout(&metaroce(&["check"], &sample()));
    assert_eq!(
        ids_in(&all),
        ["MR-PSN-3", "MR-NAK-5", "MR-PKT-4", "MR-ICRC-1"]
    );
    let by_qp = metaroce(&["check", "--qp", "0x12"], &sample());
    assert_eq!(
        ids_in(&stdout(&by_qp)),
        ["MR-PSN-3", "MR-NAK-5", "MR-ICRC-1"]
    );
    let other = metaroce(&["check", "--qp", "99"], &sample());
    assert_eq!(other.status.code(), Some(0), "no finding of QP 99");
    assert_eq!(ids_in(&stdout(&other)), Vec::<String>::new());
    let json = stdout(&metaroce(
        &["check", "--qp", "17", "--format", "jsonl"],
        &sample(),
    ));
    assert!(json.contains(r#""qpns":[18,17]"#), "{json}");
}

#[test]
fn profile_filter_judges_only_that_profile() {
    let mp = metaroce(&["check", "--only", "mp"], &sample());
    assert_eq!(mp.status.code(), Some(0));
    let text = stdout(&mp);
    assert!(text.contains("frames of the other profile: 21"), "{text}");
    // The one MP connection is clean: counted, not listed (jsonl lists all).
    assert!(
        text.contains("connections: 1 (0 with findings, 1 clean)"),
        "{text}"
    );
    let base = stdout(&metaroce(&["check", "--only", "base"], &sample()));
    assert_eq!(ids_in(&base), ["MR-PSN-3", "MR-NAK-5", "MR-ICRC-1"]);
    // The old name still works, with a note on stderr.
    let old = metaroce(&["check", "--profile", "base"], &sample());
    assert_eq!(ids_in(&stdout(&old)), ["MR-PSN-3", "MR-NAK-5", "MR-ICRC-1"]);
    let note = String::from_utf8_lossy(&old.stderr);
    assert!(note.contains("now --only"), "{note}");
}

#[test]
fn capability_profile_declares_what_is_judged() {
    // The sample's responder (10.0.0.2) sends code 31 (no credits) from its
    // first ACK (frame 2). Declared without credits: as learned, clean.
    let dir = std::env::temp_dir().join(format!("metaroce-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let no = dir.join("no-credits.yaml");
    std::fs::write(&no, "rc: true\ncredits: false\nmp: true\n").unwrap();
    let text = stdout(&metaroce(
        &["check", "--profile", no.to_str().unwrap()],
        &sample(),
    ));
    assert_eq!(
        ids_in(&text),
        ["MR-PSN-3", "MR-NAK-5", "MR-PKT-4", "MR-ICRC-1"]
    );
    assert!(
        text.contains("no credits declared, no credits seen (frame 2)"),
        "{text}"
    );
    // Declared with credits: the first ACK contradicts it (MR-CRD-2 names it).
    let yes = dir.join("credits.yaml");
    std::fs::write(&yes, "rc: true\ncredits: true\nmp: true\n").unwrap();
    let out = metaroce(
        &[
            "check",
            "--profile",
            yes.to_str().unwrap(),
            "--format",
            "jsonl",
        ],
        &sample(),
    );
    let json = stdout(&out);
    let crd: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["id"] == "MR-CRD-2")
        .collect();
    assert_eq!(
        crd.first().map(|c| c["frame"].clone()),
        Some(2.into()),
        "{json}"
    );
    // A declared key of the wrong type is bad input naming the key.
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "credits: 3\n").unwrap();
    let out = metaroce(&["check", "--profile", bad.to_str().unwrap()], &sample());
    assert_eq!(out.status.code(), Some(4));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("credits"),
        "{out:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn time_range_selects_the_frames_judged() {
    let path = timed_capture("timed.pcapng");
    assert_eq!(ids_in(&stdout(&metaroce(&["check"], &path))), ["MR-ICRC-1"]);
    // Frames at 1, 2 and 3 µs: up to 1 µs after the first leaves frame 3 out.
    let early = metaroce(&["check", "--to", "0.000001"], &path);
    assert_eq!(early.status.code(), Some(0));
    assert!(stdout(&early).contains("frames: 2"), "{}", stdout(&early));
    let late = stdout(&metaroce(&["check", "--from", "0.000002"], &path));
    assert_eq!(ids_in(&late), ["MR-ICRC-1"]);
    // Absolute: the frames were written at 1970-01-01 00:00:00.000001 on.
    let abs = metaroce(&["check", "--from", "@0.0000025"], &path);
    assert_eq!(ids_in(&stdout(&abs)), ["MR-ICRC-1"]);
    let none = metaroce(&["check", "--from", "@1"], &path);
    assert_eq!(none.status.code(), Some(0));
}

#[test]
fn bad_filter_values_are_bad_input() {
    for args in [
        ["check", "--qp", "0x1000000"],
        ["check", "--qp", "qp1"],
        ["check", "--from", "-1"],
        ["check", "--to", "1e3"],
        ["check", "--profile", "uc"],
        ["check", "--only", "uc"],
    ] {
        let out = metaroce(&args, &sample());
        assert_eq!(out.status.code(), Some(4), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?}");
    }
}
