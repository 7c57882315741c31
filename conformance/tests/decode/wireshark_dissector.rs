//! The Wireshark dissector `tools/wireshark/metaroce.lua` against
//! `metaroce decode`: tshark with the plugin reads the traffic that
//! `metaroce run -k mp -k cnp --pcapng` writes (the MP suite and the CNP
//! vectors, 2,000-odd frames), and every field it shows under `metaroce.*`
//! must equal the value of the same key in `metaroce decode --format jsonl`
//! (`metaroce.mpeth.msn` = `mpeth.msn`, `metaroce.payload_len` =
//! `payload_len`, ...), for every MP and CNP frame; no frame may be left as
//! "Unknown OpCode". A field the plugin prints that decode has no key for
//! is a disagreement too, unless it is in [`EXTRA_FIELDS`].
//!
//! A second test builds one packet per expert-info rule twice, once with the
//! fault and once without, and checks the rule fires on the first only; a
//! third, that no frame the reference transport sent (a correct
//! implementation) gets a MetaRoCE expert warning.
//!
//! Without tshark the tests print `SKIP: wireshark dissector: ...` and pass,
//! unless `CI=true`, where a missing tshark is a failure.

// traceability: ignore-file (the requirement IDs here name the dissector's expert
// rules; this file tests the Wireshark plugin, not an implementation)

use crate::common::temp_path;

use metaroce_codec::ext::{MpethRepr, SackethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, PacketBuilder, Psn};
use metaroce_conformance::capture::PcapNgWriter;
use serde_json::Value as Json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Fields the plugin adds that `metaroce decode` has no key for: the
/// bitmap's PSNs spelled out, and raw bytes (decode gives their length or a
/// summary).
const EXTRA_FIELDS: &[&str] = &[
    "metaroce.sacketh.sacked",
    "metaroce.cnp.reserved",
    "metaroce.payload",
    "metaroce.pad",
];

/// The headers decode prints as objects whose keys become `metaroce.HEADER.KEY`.
const HEADERS: &[&str] = &[
    "bth",
    "mpeth",
    "sacketh",
    "reth",
    "immdt",
    "atomic_eth",
    "atomic_ack_eth",
    "ieth",
    "cnp",
];

/// Top-level decode keys the plugin shows as `metaroce.KEY`.
const TOP_KEYS: &[&str] = &["payload_len", "pad_len", "icrc"];

/// Heuristic sub-dissectors of InfiniBand payloads that would claim random
/// payload bytes of Base packets (as in `oracle_tshark.rs`).
const DISABLED: &[&str] = &[
    "rpcordma",
    "infiniband.eoib",
    "infiniband_sdp",
    "smc",
    "smb_direct",
    "nvme-rdma",
    "lnet",
    "iser",
    "fcoib",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn plugin() -> PathBuf {
    repo().join("tools/wireshark/metaroce.lua")
}

/// `true` if tshark runs; otherwise SKIP (or panic when `CI=true`).
fn tshark_available() -> bool {
    let why = match Command::new("tshark").arg("--version").output() {
        Ok(out) if out.status.success() => return true,
        Ok(out) => format!("`tshark --version` failed ({})", out.status),
        Err(e) => format!("tshark not runnable: {e}"),
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("wireshark dissector: {why}; CI=true requires it (apt-get install tshark)");
    }
    eprintln!("SKIP: wireshark dissector: {why}");
    false
}

/// Runs tshark with the plugin on `file`; `args` after the common ones.
fn tshark(file: &Path, args: &[&str]) -> String {
    let mut cmd = Command::new("tshark");
    cmd.arg("-X")
        .arg(format!("lua_script:{}", plugin().display()))
        .arg("-r")
        .arg(file)
        .arg("-n");
    for p in DISABLED {
        cmd.args(["--disable-protocol", p]);
    }
    let out = cmd.args(args).output().expect("runs tshark");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "tshark failed ({}): {stderr}",
        out.status
    );
    assert!(
        !stderr.contains("Lua") && !stderr.contains("lua"),
        "tshark reports a Lua problem: {stderr}"
    );
    String::from_utf8(out.stdout).expect("tshark prints UTF-8")
}

/// The `layers` object of every packet, from `tshark -T json`.
fn tshark_layers(file: &Path) -> Vec<Json> {
    let text = tshark(file, &["-T", "json", "--no-duplicate-keys"]);
    let json: Json = serde_json::from_str(&text).expect("tshark -T json prints JSON");
    json.as_array()
        .expect("a JSON array of packets")
        .iter()
        .map(|p| p["_source"]["layers"].clone())
        .collect()
}

/// Every `metaroce.*` leaf under `value` as (name, shown string); expert
/// info and subtree containers are walked, not returned.
fn metaroce_fields(name: &str, value: &Json, out: &mut Vec<(String, String)>) {
    match value {
        Json::String(s) if name.starts_with("metaroce.") => out.push((name.to_owned(), s.clone())),
        Json::Array(items) => items.iter().for_each(|v| metaroce_fields(name, v, out)),
        Json::Object(map) if name != "_ws.expert" => {
            map.iter().for_each(|(k, v)| metaroce_fields(k, v, out))
        }
        _ => {}
    }
}

/// Expert messages under `value`.
fn expert_messages(value: &Json, out: &mut Vec<String>) {
    match value {
        Json::Array(items) => items.iter().for_each(|v| expert_messages(v, out)),
        Json::Object(map) => {
            for (k, v) in map {
                if k == "_ws.expert.message" {
                    if let Some(s) = v.as_str() {
                        out.push(s.to_owned());
                    }
                } else {
                    expert_messages(v, out);
                }
            }
        }
        _ => {}
    }
}

/// Whether tshark's shown value `shown` equals decode's `value`: numbers
/// in decimal or 0x-hex, booleans as 0/1, strings as they are.
fn same(shown: &str, value: &Json) -> bool {
    match value {
        Json::Bool(b) => shown == if *b { "1" } else { "0" },
        Json::Number(n) => {
            let parsed = match shown.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => shown.parse::<u64>().ok(),
            };
            parsed.is_some() && parsed == n.as_u64()
        }
        Json::String(s) => shown == s,
        _ => false,
    }
}

/// decode's (tshark field name, value) pairs of one frame.
fn decode_fields(frame: &Json) -> Vec<(String, Json)> {
    let mut fields = Vec::new();
    for header in HEADERS {
        if let Some(obj) = frame.get(*header).and_then(Json::as_object) {
            for (key, value) in obj {
                fields.push((format!("metaroce.{header}.{key}"), value.clone()));
            }
        }
    }
    for key in TOP_KEYS {
        if let Some(value) = frame.get(*key) {
            fields.push((format!("metaroce.{key}"), value.clone()));
        }
    }
    fields
}

/// Runs `metaroce ARGS` and returns its standard output.
fn metaroce(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_metaroce"))
        .args(args)
        .output()
        .expect("runs metaroce");
    assert!(
        out.status.success(),
        "metaroce {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("metaroce prints UTF-8")
}

/// A temporary file, removed on drop.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The traffic of the MP suite and the CNP vectors, as `metaroce run` writes it.
fn suite_traffic(name: &str) -> TempFile {
    let file = TempFile(temp_path(name));
    let vectors = repo().join("vectors");
    let path = file.0.to_str().expect("UTF-8 path");
    let vectors = vectors.to_str().expect("UTF-8 path");
    metaroce(&[
        "run",
        "--vectors",
        vectors,
        "-k",
        "mp",
        "-k",
        "cnp",
        "--pcapng",
        path,
    ]);
    file
}

fn decode(file: &Path) -> Vec<Json> {
    metaroce(&[
        "decode",
        "--format",
        "jsonl",
        file.to_str().expect("UTF-8 path"),
    ])
    .lines()
    .map(|l| serde_json::from_str(l).expect("decode prints JSON lines"))
    .collect()
}

/// Whether the plugin dissects this opcode (rather than Wireshark's InfiniBand dissector).
fn plugin_opcode(opcode: u8) -> bool {
    let op = Opcode(opcode);
    op == Opcode::CNP || op.in_mp_range()
}

#[test]
fn tshark_with_the_plugin_shows_every_mp_and_cnp_field_as_decode_does() {
    if !tshark_available() {
        return;
    }
    let file = suite_traffic("wireshark-suite.pcapng");
    let decoded = decode(&file.0);
    let packets = tshark_layers(&file.0);
    assert_eq!(
        packets.len(),
        decoded.len(),
        "tshark and decode frame counts"
    );

    let mut disagreements = Vec::new();
    let mut opcodes = BTreeSet::new();
    let mut compared = 0usize;
    for (frame, (d, layers)) in decoded.iter().zip(&packets).enumerate() {
        let number = frame + 1;
        let Some(opcode) = d["bth"]["opcode"].as_u64() else {
            continue;
        };
        let opcode = u8::try_from(opcode).expect("opcode is a byte");
        let mut shown = Vec::new();
        if let Some(layer) = layers.get("metaroce") {
            metaroce_fields("metaroce", layer, &mut shown);
        }
        if !plugin_opcode(opcode) {
            if !shown.is_empty() {
                disagreements.push(format!(
                    "frame {number}: opcode {opcode:#04x} is Wireshark's, the plugin showed {shown:?}"
                ));
            }
            continue;
        }
        if !d["error"].is_null() {
            continue;
        }
        opcodes.insert(opcode);
        compared += 1;
        let expected = decode_fields(d);
        for (name, value) in &expected {
            let got: Vec<&str> = shown
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
                .collect();
            let ok = match (name.as_str(), value) {
                // An opcode reserved for MP has no name in the codec's table;
                // the plugin names it as reserved.
                ("metaroce.bth.opcode_name", Json::Null) => {
                    got.len() == 1 && got[0].starts_with("MP reserved opcode")
                }
                _ => got.len() == 1 && same(got[0], value),
            };
            if !ok {
                disagreements.push(format!(
                    "frame {number} ({opcode:#04x}): {name}: decode {value}, tshark {got:?}"
                ));
            }
        }
        for (name, _) in &shown {
            if !EXTRA_FIELDS.contains(&name.as_str()) && !expected.iter().any(|(n, _)| n == name) {
                disagreements.push(format!(
                    "frame {number} ({opcode:#04x}): tshark shows {name}, decode has no such key"
                ));
            }
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreements between the plugin and decode, the first:\n{}",
        disagreements.len(),
        disagreements[..disagreements.len().min(20)].join("\n")
    );
    // The suite's traffic covers every MP opcode with a layout and the CNP.
    let untested = [Opcode::MP_WRITE_IMM, Opcode::MP_SEND_INV];
    for op in (0..=u8::MAX).map(Opcode) {
        if !(op.is_mp() || op == Opcode::CNP) || untested.contains(&op) {
            // MP WRITE with Immediate and SEND with Invalidate: no vector sends
            // them yet; they are compared when one does.
            continue;
        }
        assert!(
            opcodes.contains(&op.0),
            "no frame with opcode {op} compared (compared {opcodes:x?})"
        );
    }
    assert!(compared > 1000, "only {compared} MP/CNP frames compared");

    // No frame is left undecoded: the summary lines name every opcode.
    let summary = tshark(&file.0, &[]);
    let unknown: Vec<&str> = summary
        .lines()
        .filter(|l| l.contains("Unknown OpCode"))
        .take(5)
        .collect();
    assert!(
        unknown.is_empty(),
        "frames tshark does not name: {unknown:#?}"
    );
}

#[test]
fn no_expert_warning_on_a_frame_the_reference_transport_sent() {
    if !tshark_available() {
        return;
    }
    let file = suite_traffic("wireshark-experts.pcapng");
    let decoded = decode(&file.0);
    let packets = tshark_layers(&file.0);
    assert_eq!(
        packets.len(),
        decoded.len(),
        "tshark and decode frame counts"
    );
    let mut checked = 0usize;
    let mut flagged = Vec::new();
    for (frame, (d, layers)) in decoded.iter().zip(&packets).enumerate() {
        // The runner's comment names the direction of each frame.
        let from_iut = d["comments"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c.as_str().is_some_and(|c| c.contains("IUT →")))
        });
        let Some(layer) = layers.get("metaroce") else {
            continue;
        };
        if !from_iut {
            continue;
        }
        checked += 1;
        let mut messages = Vec::new();
        expert_messages(layer, &mut messages);
        if !messages.is_empty() {
            flagged.push(format!("frame {}: {messages:?}", frame + 1));
        }
    }
    assert!(
        checked > 100,
        "only {checked} frames from the reference checked"
    );
    assert!(
        flagged.is_empty(),
        "expert info on correct frames: {flagged:#?}"
    );
}

fn mp_write(mpeth: MpethRepr, payload: usize, ack_req: bool) -> Vec<u8> {
    PacketBuilder::new(Opcode::MP_WRITE)
        .psn(7)
        .ack_req(ack_req)
        .ext(|e| e.mpeth = Some(mpeth))
        .payload(vec![0xAB; payload])
        .build()
}

fn mp_ack(cum: u32, sacketh: SackethRepr) -> Vec<u8> {
    PacketBuilder::new(Opcode::MP_ACK)
        .psn(cum)
        .ext(|e| e.sacketh = Some(sacketh))
        .build()
}

#[test]
fn each_expert_rule_fires_on_its_fault_and_not_without_it() {
    if !tshark_available() {
        return;
    }
    let single = MpethRepr {
        first: true,
        last: true,
        msn: Msn::new(3),
        msg_len: 64,
        ..MpethRepr::default()
    };
    let ack = SackethRepr {
        syndrome: Syndrome(0x1F),
        msn: Msn::new(2),
        sack_base_psn: Psn::new(101),
        sack_bitmap: 0x4000_0000_0000_0000, // PSN 102 received, 101 missing
        ..SackethRepr::default()
    };
    // (what, good frame, faulty frame, expected text in the expert message)
    let cases: Vec<(&str, Vec<u8>, Vec<u8>, &str)> = vec![
        (
            "MPETH reserved bits",
            mp_write(single, 64, true),
            mp_write(
                MpethRepr {
                    reserved: 0x01,
                    ..single
                },
                64,
                true,
            ),
            "Reserved bits set",
        ),
        (
            "F/L against offset and length",
            mp_write(single, 64, true),
            mp_write(
                MpethRepr {
                    last: false,
                    ..single
                },
                64,
                true,
            ),
            "MR-MPH-2",
        ),
        (
            "AckReq with L",
            mp_write(single, 64, true),
            mp_write(single, 64, false),
            "MR-MPH-9",
        ),
        (
            "SACK base at the cumulative ACK PSN",
            mp_ack(100, ack),
            mp_ack(
                100,
                SackethRepr {
                    sack_base_psn: Psn::new(100),
                    ..ack
                },
            ),
            "not later than the cumulative ACK PSN",
        ),
        (
            "SACK bitmap bit 0 at base c + 1",
            mp_ack(100, ack),
            mp_ack(
                100,
                SackethRepr {
                    sack_bitmap: 0xC000_0000_0000_0000,
                    ..ack
                },
            ),
            "Bitmap bit 0 marks PSN 101 received",
        ),
        (
            "SACKETH reserved bytes",
            mp_ack(100, ack),
            mp_ack(
                100,
                SackethRepr {
                    reserved: 0x8000,
                    ..ack
                },
            ),
            "Reserved bits set",
        ),
        (
            "MP ACK syndrome below 0x1F",
            mp_ack(100, ack),
            mp_ack(
                100,
                SackethRepr {
                    syndrome: Syndrome(0x00),
                    ..ack
                },
            ),
            "MR-MPA-8",
        ),
    ];
    let mut writer = PcapNgWriter::new(Vec::new()).expect("pcapng header");
    for (i, (_, good, bad, _)) in cases.iter().enumerate() {
        for (j, bytes) in [good, bad].into_iter().enumerate() {
            let len = u32::try_from(bytes.len()).expect("frame length");
            writer
                .write_packet((i * 2 + j) as u64 * 1000, bytes, len, None)
                .expect("writes the frame");
        }
    }
    let file = TempFile(temp_path("wireshark-expert-cases.pcapng"));
    std::fs::write(&file.0, writer.into_inner()).expect("writes the capture");
    let packets = tshark_layers(&file.0);
    assert_eq!(packets.len(), cases.len() * 2);
    for (i, (what, _, _, text)) in cases.iter().enumerate() {
        let messages = |p: &Json| {
            let mut out = Vec::new();
            expert_messages(&p["metaroce"], &mut out);
            out
        };
        let good = messages(&packets[i * 2]);
        let bad = messages(&packets[i * 2 + 1]);
        assert!(good.is_empty(), "{what}: the good frame got {good:?}");
        assert!(
            bad.iter().any(|m| m.contains(text)),
            "{what}: the faulty frame got {bad:?}, not {text:?}"
        );
    }
}
