//! Independent oracle for the CM MADs on QP1: Wireshark's `tshark` and
//! `metaroce decode --format jsonl` must agree on every CM field both show.
//!
//! Two sources: synthetic MADs (REQ, REP, RTU, REJ, DREQ, DREP with field
//! values drawn from a seeded splitmix64, built with [`PacketBuilder`]) and
//! the real captures with RDMA-CM in `../shared/captures/real/`. Values are
//! compared as numbers (tshark prints some in hex, some in decimal).
//!
//! Without tshark the test prints `SKIP: ...` and passes unless `CI=true`;
//! the real captures are skipped the same way when `../shared` is absent.

use crate::common;

use metaroce_codec::ext::DethRepr;
use metaroce_codec::{Opcode, PacketBuilder};
use metaroce_conformance::capture::PcapNgWriter;
use serde_json::Value;
use std::path::{Path, PathBuf};

use std::process::Command;

/// (tshark field, message, key in the `cm.fields` object of `decode`).
const ROWS: &[(&str, &str, &str)] = &[
    ("infiniband.cm.req.localqpn", "REQ", "local_qpn"),
    (
        "infiniband.cm.req.responderres",
        "REQ",
        "responder_resources",
    ),
    ("infiniband.cm.req.initdepth", "REQ", "initiator_depth"),
    ("infiniband.cm.req.transpsvctype", "REQ", "transport_type"),
    (
        "infiniband.cm.req.e2eflowctrl",
        "REQ",
        "end_to_end_flow_control",
    ),
    ("infiniband.cm.req.startpsn", "REQ", "starting_psn"),
    ("infiniband.cm.req.retrcount", "REQ", "retry_count"),
    ("infiniband.cm.req.pkey", "REQ", "pkey"),
    ("infiniband.cm.req.pppmtu", "REQ", "path_mtu"),
    ("infiniband.cm.req.rnrretrcount", "REQ", "rnr_retry_count"),
    ("infiniband.cm.req.srq", "REQ", "srq"),
    (
        "infiniband.cm.req.prim_localacktout",
        "REQ",
        "primary_local_ack_timeout",
    ),
    ("infiniband.cm.rep.remotecommid", "REP", "remote_comm_id"),
    ("infiniband.cm.rep.localqpn", "REP", "local_qpn"),
    ("infiniband.cm.rep.startpsn", "REP", "starting_psn"),
    ("infiniband.cm.rep.respres", "REP", "responder_resources"),
    ("infiniband.cm.rep.initdepth", "REP", "initiator_depth"),
    ("infiniband.cm.rep.tgtackdelay", "REP", "target_ack_delay"),
    (
        "infiniband.cm.rep.e2eflowctrl",
        "REP",
        "end_to_end_flow_control",
    ),
    ("infiniband.cm.rep.rnrretrcount", "REP", "rnr_retry_count"),
    ("infiniband.cm.rep.srq", "REP", "srq"),
    ("infiniband.cm.rtu.localcommid", "RTU", "local_comm_id"),
    ("infiniband.cm.rtu.remotecommid", "RTU", "remote_comm_id"),
    ("infiniband.cm.rej.localcommid", "REJ", "local_comm_id"),
    ("infiniband.cm.rej.remotecommid", "REJ", "remote_comm_id"),
    ("infiniband.cm.rej.msgrej", "REJ", "message_rejected"),
    ("infiniband.cm.rej.reason", "REJ", "reason"),
    ("infiniband.cm.drsp.localcommid", "DREP", "local_comm_id"),
    ("infiniband.cm.drsp.remotecommid", "DREP", "remote_comm_id"),
];

/// MAD header fields: (tshark field, key in the `cm` object).
const HEADER_ROWS: &[(&str, &str)] = &[
    ("infiniband.mad.baseversion", "base_version"),
    ("infiniband.mad.mgmtclass", "mgmt_class"),
    ("infiniband.mad.classversion", "class_version"),
    ("infiniband.mad.method", "method"),
    ("infiniband.mad.transactionid", "transaction_id"),
    ("infiniband.mad.attributeid", "attribute_id"),
];

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

fn skip(why: &str) {
    assert!(!ci(), "{why} (CI=true: a missing oracle fails)");
    println!("SKIP: {why}");
}

fn tshark_ok() -> bool {
    Command::new("tshark")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success())
}

struct Rng(metaroce_agent::rng::SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn bytes(&mut self, out: &mut [u8]) {
        for b in out {
            *b = self.next() as u8;
        }
    }
}

/// A 256-byte CM MAD of attribute `attr` with random message bytes.
fn mad(rng: &mut Rng, attr: u16) -> Vec<u8> {
    let mut m = vec![0u8; 256];
    rng.bytes(&mut m[24..]);
    m[..4].copy_from_slice(&[1, 0x07, 2, 0x03]);
    rng.bytes(&mut m[8..16]);
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m
}

/// Synthetic CM MADs on QP1, as a pcapng file.
fn synthetic() -> PathBuf {
    let mut rng = Rng(metaroce_agent::rng::SplitMix64::new(0x0c0f_fee0));
    let mut w = PcapNgWriter::new(Vec::new()).expect("pcapng header");
    let attrs = [0x0010u16, 0x0013, 0x0014, 0x0012, 0x0015, 0x0016];
    for i in 0..60u32 {
        let payload = mad(&mut rng, attrs[i as usize % attrs.len()]);
        let frame = PacketBuilder::new(Opcode::UD_SEND_ONLY)
            .dest_qp(1)
            .psn(i)
            .deth(DethRepr {
                qkey: 0x8001_0000,
                reserved: 0,
                src_qp: 1,
            })
            .payload(payload)
            .ipv4("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
            .build();
        let len = u32::try_from(frame.len()).expect("length");
        w.write_packet(u64::from(i) * 1000, &frame, len, None)
            .expect("writes a frame");
    }
    common::temp_file("cm-oracle.pcapng", &w.into_inner())
}

/// A tshark or JSON value as a number.
fn number(v: &str) -> Option<u64> {
    let v = v.trim();
    match v {
        "True" | "true" => Some(1),
        "False" | "false" => Some(0),
        _ => v
            .strip_prefix("0x")
            .map_or_else(|| v.parse().ok(), |h| u64::from_str_radix(h, 16).ok()),
    }
}

fn json_number(v: &Value) -> Option<u64> {
    match v {
        Value::Bool(b) => Some(u64::from(*b)),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

/// Compares tshark and `decode` on every CM frame of `file`; returns the
/// number of field values compared.
fn compare(file: &Path) -> usize {
    let fields: Vec<&str> = HEADER_ROWS
        .iter()
        .map(|r| r.0)
        .chain(ROWS.iter().map(|r| r.0))
        .collect();
    let mut args = vec!["-r".to_string(), file.display().to_string(), "-n".into()];
    args.extend(["-Y", "infiniband.mad", "-T", "fields", "-e", "frame.number"].map(String::from));
    for f in &fields {
        args.extend(["-e".to_string(), (*f).to_string()]);
    }
    let out = Command::new("tshark")
        .args(&args)
        .output()
        .expect("runs tshark");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shark = String::from_utf8(out.stdout).expect("utf-8");
    let ours = common::metaroce(&["decode", "--format", "jsonl"], file);
    assert!(ours.status.success(), "decode failed");
    let frames: Vec<Value> = common::stdout(&ours)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let mut compared = 0;
    let mut wrong = Vec::new();
    for line in shark.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        let n: usize = cols[0].parse().expect("frame number");
        let cm = &frames[n - 1]["cm"];
        assert!(
            cm.is_object(),
            "{}: frame {n}: tshark shows a MAD, decode no cm",
            file.display()
        );
        for (i, name) in fields.iter().enumerate() {
            let Some(v) = cols.get(i + 1).filter(|v| !v.is_empty()) else {
                continue;
            };
            let got = match HEADER_ROWS.iter().find(|r| r.0 == *name) {
                Some((_, key)) => &cm[*key],
                None => {
                    let (_, msg, key) = ROWS.iter().find(|r| r.0 == *name).expect("row");
                    assert_eq!(cm["message"], *msg, "frame {n}: {name}");
                    &cm["fields"][*key]
                }
            };
            compared += 1;
            if number(v) != json_number(got) {
                wrong.push(format!("frame {n} {name}: tshark {v}, decode {got}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}: {}", file.display(), wrong.join("\n"));
    compared
}

#[test]
fn synthetic_cm_mads_agree_with_tshark() {
    if !tshark_ok() {
        return skip("tshark oracle: tshark not found");
    }
    let file = synthetic();
    let n = compare(&file);
    let _ = std::fs::remove_file(&file);
    // 10 REQ, REP, RTU, REJ, DREP frames each: 6 header values, 12 + 9 + 2 + 4 + 2.
    assert_eq!(n, 60 * 6 + 10 * (12 + 9 + 2 + 4 + 2));
}

#[test]
fn real_cm_mads_agree_with_tshark() {
    if !tshark_ok() {
        return skip("tshark oracle: tshark not found");
    }
    let Some(dir) = common::real_captures() else {
        return;
    };
    let mut total = 0;
    for name in [
        "montybeatnik_rdma-roce-lab__test.pcap",
        "magnate3_linux-riscv-dev__write.pcap",
        "magnate3_linux-riscv-dev__read2.pcap",
        "magnate3_linux-riscv-dev__nvme-discover.pcap",
    ] {
        total += compare(&dir.join(name));
    }
    assert!(total > 100, "only {total} CM values compared");
}
