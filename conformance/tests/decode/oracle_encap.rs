//! The encapsulations captures hold, against two independent oracles:
//! scapy builds a RoCE frame inside each (ERSPAN I/II/III, GRE transparent
//! Ethernet bridging, VXLAN, QinQ, a lone 802.1ad service tag, Linux cooked
//! capture SLL and SLL2, raw IP link types 101/228/229, RoCE v1;
//! `tests/oracles/encap_oracle.py`),
//! `metaroce decode`'s view must show the fields scapy was told to build,
//! and tshark, decoding the same files, must agree field by field. The
//! ConnectX RoCE v1 capture of ../shared (or `$METAROCE_SHARED`) is
//! decoded frame by frame against tshark too.
//!
//! Needs Python with scapy (`$METAROCE_PYTHON`, else `.venv/bin/python` at
//! the workspace top) and tshark; without them the tests print `SKIP: ...`
//! (with `CI=true` they fail).

use metaroce_codec::ParseOptions;
use metaroce_conformance::capture::CaptureReader;
use metaroce_conformance::decode::{Decoded, frame_json};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

fn skip(what: &str, why: &str) {
    assert!(!ci(), "{what} unavailable and CI=true: {why}");
    eprintln!("SKIP: {what}: {why}");
}

fn python() -> Option<PathBuf> {
    let python = std::env::var_os("METAROCE_PYTHON").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"),
        PathBuf::from,
    );
    match Command::new(&python)
        .args(["-c", "import scapy.contrib.roce, scapy.contrib.erspan"])
        .output()
    {
        Ok(o) if o.status.success() => Some(python),
        Ok(o) => {
            skip("scapy oracle", &String::from_utf8_lossy(&o.stderr));
            None
        }
        Err(e) => {
            skip(
                "scapy oracle",
                &format!("cannot run {}: {e}", python.display()),
            );
            None
        }
    }
}

fn tshark() -> bool {
    match Command::new("tshark").arg("--version").output() {
        Ok(o) if o.status.success() => true,
        _ => {
            skip("tshark oracle", "tshark not runnable");
            false
        }
    }
}

/// Our `decode --format jsonl` view of every frame of `path`.
fn decode(path: &Path) -> Vec<Value> {
    let options = ParseOptions::capture();
    let mut reader = CaptureReader::open(path).expect("opens");
    let mut out = Vec::new();
    while let Some(f) = reader.next_frame().expect("reads") {
        let d = Decoded::new(f.number, f.timestamp_ns, f.linktype, f.data, &options)
            .with_orig_len(f.orig_len);
        out.push(frame_json(&d));
    }
    out
}

/// tshark's value of each of `fields` in every frame of `path` (first
/// occurrence; empty when absent).
fn tshark_fields(path: &Path, fields: &[&str]) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r")
        .arg(path)
        .args(["-T", "fields", "-E", "occurrence=f"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("runs tshark");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

/// A tshark number: decimal, or hexadecimal with 0x.
fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Our field (in the outer layer's JSON) for each tshark field of a case.
fn tshark_map(name: &str) -> &'static [(&'static str, &'static str)] {
    match name {
        "erspan-ii" => &[
            ("erspan.spanid", "session"),
            ("erspan.vlan", "vlan"),
            ("erspan.cos", "cos"),
            ("erspan.index", "index"),
            ("gre.proto", "gre_protocol"),
        ],
        "erspan-iii" => &[
            ("erspan.spanid", "session"),
            ("erspan.vlan", "vlan"),
            ("erspan.cos", "cos"),
            ("erspan.hw", "hw_id"),
            ("erspan.timestamp", "timestamp"),
            ("gre.proto", "gre_protocol"),
        ],
        "erspan-i" => &[("gre.proto", "gre_protocol")],
        "gre" => &[("gre.proto", "gre_protocol"), ("gre.key", "gre_key")],
        "vxlan" => &[("vxlan.vni", "vni")],
        "qinq" | "s-tag" => &[("ieee8021ad.id", "vid")],
        "sll" => &[
            ("sll.pkttype", "packet_type"),
            ("sll.hatype", "hatype"),
            ("sll.etype", "protocol"),
        ],
        "sll2" => &[
            ("sll.pkttype", "packet_type"),
            ("sll.hatype", "hatype"),
            ("sll.etype", "protocol"),
            ("sll.ifindex", "ifindex"),
        ],
        _ => &[],
    }
}

const BTH_FIELDS: [(&str, &str); 3] = [
    ("infiniband.bth.opcode", "opcode"),
    ("infiniband.bth.destqp", "dest_qp"),
    ("infiniband.bth.psn", "psn"),
];

#[test]
fn every_encapsulation_decodes_as_scapy_built_it_and_tshark_reads_it() {
    let Some(python) = python() else {
        return;
    };
    let with_tshark = tshark();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("metaroce-encap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracles/encap_oracle.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(&dir)
        .output()
        .expect("runs the oracle");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cases: Vec<Value> = serde_json::from_slice(&out.stdout).expect("JSON cases");
    assert_eq!(cases.len(), 13, "one case per encapsulation");
    for case in &cases {
        let name = case["name"].as_str().expect("name");
        let path = PathBuf::from(case["file"].as_str().expect("file"));
        let ours = decode(&path);
        assert_eq!(ours.len(), 1, "{name}: one frame");
        let ours = &ours[0];
        assert!(ours["error"].is_null(), "{name}: {ours}");
        assert_eq!(ours["roce"], true, "{name}: {ours}");
        // The inner BTH, as scapy built it.
        for key in ["opcode", "dest_qp", "psn"] {
            assert_eq!(
                ours["bth"][key], case["bth"][key],
                "{name}: bth.{key}: {ours}"
            );
        }
        // The layer taken off, as scapy built it.
        let layer = &ours["encapsulation"][0];
        match case["outer"].as_object() {
            Some(outer) => {
                assert_eq!(
                    ours["encapsulation"].as_array().map(Vec::len),
                    Some(1),
                    "{name}"
                );
                for (key, want) in outer {
                    assert_eq!(&layer[key], want, "{name}: {key}: {ours}");
                }
            }
            None => {
                // RoCE v1: nothing taken off, the GRH decoded.
                assert!(ours.get("encapsulation").is_none(), "{name}: {ours}");
                assert_eq!(ours["grh"]["next_header"], 0x1B, "{name}: {ours}");
                assert_eq!(ours["icrc_valid"], false, "{name}: scapy wrote a zero ICRC");
            }
        }
        if !with_tshark {
            continue;
        }
        let outer_name = layer["name"].as_str().unwrap_or("");
        let map = tshark_map(outer_name);
        let fields: Vec<&str> = BTH_FIELDS
            .iter()
            .chain(map.iter())
            .map(|(t, _)| *t)
            .collect();
        let rows = tshark_fields(&path, &fields);
        assert_eq!(rows.len(), 1, "{name}: tshark sees one frame");
        let row = &rows[0];
        for (i, (field, key)) in BTH_FIELDS.iter().chain(map.iter()).enumerate() {
            let theirs = row.get(i).and_then(|s| number(s));
            let ours_value = if i < BTH_FIELDS.len() {
                ours["bth"][key].as_u64()
            } else {
                layer[key].as_u64()
            };
            assert!(theirs.is_some(), "{name}: tshark has no {field}: {row:?}");
            assert_eq!(ours_value, theirs, "{name}: {key} vs tshark {field}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn connectx_roce_v1_capture_decodes_frame_by_frame_as_tshark_does() {
    // ../shared beside the workspace, or $METAROCE_SHARED.
    let shared = std::env::var_os("METAROCE_SHARED").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
        PathBuf::from,
    );
    let path = shared.join("captures/real/magnate3_linux-riscv-dev__rocev1.pcap");
    if !path.exists() {
        skip(
            "real RoCE v1 capture",
            &format!("{} is absent", path.display()),
        );
        return;
    }
    if !tshark() {
        return;
    }
    let ours = decode(&path);
    let theirs = tshark_fields(&path, &BTH_FIELDS.map(|(t, _)| t));
    assert_eq!(ours.len(), 2468, "the capture's frames");
    assert_eq!(theirs.len(), ours.len());
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(o["roce"], true, "frame {}: {o}", i + 1);
        // The ConnectX trailer is the RoCE v1 ICRC (IBA A16).
        assert_eq!(o["icrc_valid"], true, "frame {}: {o}", i + 1);
        for (j, (field, key)) in BTH_FIELDS.iter().enumerate() {
            let want = t.get(j).and_then(|s| number(s));
            assert_eq!(o["bth"][key].as_u64(), want, "frame {}: {field}", i + 1);
        }
    }
}
