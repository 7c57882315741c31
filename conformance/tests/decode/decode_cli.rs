//! `metaroce decode`, run as a user runs it: output snapshots, the JSON keys
//! the jsonl format promises, and bad input (exit code 4, one line naming the
//! file and byte offset).

use crate::common::*;

#[test]
fn text_output_of_the_sample_capture() {
    let out = metaroce(&["decode"], &sample());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    insta::assert_snapshot!(stdout(&out));
}

#[test]
fn jsonl_output_of_the_sample_capture() {
    let out = metaroce(&["decode", "--format", "jsonl"], &sample());
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(lines.len(), 24);
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["frame"], i + 1);
        for key in ["len", "roce", "error", "icrc_valid"] {
            assert!(line.get(key).is_some(), "frame {}: no {key}", i + 1);
        }
        if line["error"].is_null() && line["roce"] == true {
            for key in [
                "opcode",
                "se",
                "m",
                "pad_count",
                "tver",
                "pkey",
                "fecn",
                "becn",
                "dest_qp",
                "ack_req",
                "psn",
            ] {
                assert!(
                    line["bth"].get(key).is_some(),
                    "frame {}: no bth.{key}",
                    i + 1
                );
            }
            assert!(line["payload_len"].is_u64());
        }
    }
    let keyed = |frame: usize, header: &str, keys: &[&str]| {
        for key in keys {
            assert!(
                lines[frame - 1][header].get(key).is_some(),
                "frame {frame}: no {header}.{key}"
            );
        }
    };
    keyed(3, "reth", &["va", "rkey", "dma_len"]);
    keyed(2, "aeth", &["syndrome", "msn"]);
    keyed(10, "atomic_eth", &["va", "rkey", "swap_add", "compare"]);
    keyed(11, "atomic_ack_eth", &["orig"]);
    keyed(18, "immdt", &["value"]);
    keyed(18, "deth", &["qkey", "src_qp"]);
    keyed(
        20,
        "mpeth",
        &[
            "first",
            "last",
            "retransmission",
            "msn",
            "offset",
            "msg_len",
            "timestamp",
        ],
    );
    keyed(
        22,
        "sacketh",
        &[
            "syndrome",
            "msn",
            "sack_base_psn",
            "sack_bitmap",
            "echoed_entropy",
        ],
    );
    assert_eq!(
        lines[22]["icrc_valid"], false,
        "frame 23 has a corrupted ICRC"
    );
    assert!(
        lines[23]["error"]
            .as_str()
            .unwrap()
            .starts_with("bth.pad_count at byte 43")
    );
    assert_eq!(
        lines[3]["reth"],
        serde_json::Value::Null,
        "WRITE Middle has no RETH"
    );
    insta::assert_snapshot!(text);
}

#[test]
fn base_dialect_leaves_mp_opcodes_unknown() {
    let out = metaroce(&["decode", "--base", "--format", "jsonl"], &sample());
    let text = stdout(&out);
    let frame20: serde_json::Value = serde_json::from_str(text.lines().nth(19).unwrap()).unwrap();
    assert_eq!(frame20["bth"]["opcode"], 0xC2);
    assert_eq!(frame20["bth"]["opcode_name"], serde_json::Value::Null);
    assert!(frame20.get("mpeth").is_none());
    assert_eq!(
        frame20["payload_len"],
        16 + 16 + 1024,
        "MPETH and RETH stay in the payload"
    );
}

#[test]
fn a_text_file_is_bad_input() {
    let path = temp_file("text.pcap", b"this is not a capture\n");
    let out = metaroce(&["decode"], &path);
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(path.to_str().unwrap()) && err.contains("byte offset 0"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    std::fs::remove_file(path).unwrap();
}

#[test]
fn an_empty_or_missing_file_is_bad_input() {
    let path = temp_file("empty.pcap", b"");
    assert_eq!(metaroce(&["decode"], &path).status.code(), Some(4));
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        metaroce(&["decode"], &path).status.code(),
        Some(4),
        "missing file"
    );
}

#[test]
fn a_truncated_capture_prints_what_it_can_then_fails() {
    let bytes = std::fs::read(sample()).unwrap();
    let path = temp_file("cut.pcapng", &bytes[..bytes.len() - 50]);
    let out = metaroce(&["decode", "--format", "jsonl"], &path);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(
        stdout(&out).lines().count(),
        23,
        "every complete frame before the cut"
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("truncated") && err.contains("byte offset"),
        "{err}"
    );
    std::fs::remove_file(path).unwrap();
}

#[test]
fn unknown_arguments_are_bad_input() {
    let out = metaroce(&["decode", "--no-such-flag"], &sample());
    assert_eq!(out.status.code(), Some(4));
}
