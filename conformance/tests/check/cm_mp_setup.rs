//! `metaroce check` on RDMA-CM exchanges whose REQ and REP carry the
//! MetaRoCE MP setup block (SPEC.md §7.1.1): each rule (MR-MPN-7 …
//! MR-MPN-11, MR-CM-6) fires on an exchange that breaks it, naming the CM
//! and data frames, and a correct exchange passes; a capture that shows only
//! part of an exchange gives no finding.
//!
//! The MADs are laid out here byte by byte from IBA vol 1 §12.6 (REQ
//! Table 99, REP Table 103, REJ Table 101, RTU Table 104; the offsets of
//! Linux `cm_msgs.h`), not with the codec, which has no CM emitter; the
//! setup block likewise from the table of §7.1.1. scapy has no CM layer
//! (its `contrib/roce.py` stops at BTH and AETH), so it is no oracle here;
//! the CM fields themselves are checked against tshark in
//! `tests/decode/oracle_tshark_cm.rs`, and where the blocks sit in the
//! private data by tshark's RDMA-CM dissector here
//! (`tshark_finds_the_blocks_where_the_judge_reads_them`). The UD, RC and
//! MP packets around
//! them are built with [`PacketBuilder`].

use crate::check_mp_acks::{ack, send};
use crate::common::*;
use metaroce_codec::ext::{AethRepr, DethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, PacketBuilder};
use metaroce_conformance::capture::PcapNgWriter;
use serde_json::Value;
use std::net::Ipv4Addr;
use std::path::PathBuf;

/// The active side (REQ sender) and its QPN; the passive side and its QPN
/// (the addresses and QPNs of `check_mp_acks::send` and `ack`).
const ACTIVE: [u8; 4] = [10, 0, 0, 1];
const ACTIVE_QPN: u32 = 0x22;
const PASSIVE: [u8; 4] = [10, 0, 0, 2];
const PASSIVE_QPN: u32 = 0x12;
const ACTIVE_COMM: u32 = 0xac66_08b9;
const PASSIVE_COMM: u32 = 0x1234_5678;

/// A setup block of §7.1.1: flags, trim DSCP byte, window, entropy set
/// size; planes 1, ACK 8 µs / 4 µs, staging 64 KiB, reserved 0.
fn block(flags: u8, trim: u8, window: u16, n: u16) -> Vec<u8> {
    let mut b = vec![0u8; 24];
    b[..4].copy_from_slice(&[b'M', b'R', 1, 24]);
    b[4] = flags;
    b[5] = trim;
    b[6..8].copy_from_slice(&window.to_be_bytes());
    b[8..10].copy_from_slice(&n.to_be_bytes());
    b[10] = 1;
    b[11] = 8;
    b[12] = 4;
    b[16..20].copy_from_slice(&65_536u32.to_be_bytes());
    b
}

const M: u8 = 0x80;
const T: u8 = 0x40;
const O: u8 = 0x10;
const RN: u8 = 0x08;

/// A 256-byte CM MAD of attribute `attr` (MAD header of IBA 13.4.3).
fn mad(attr: u16) -> Vec<u8> {
    let mut m = vec![0u8; 256];
    m[..4].copy_from_slice(&[1, 0x07, 2, 0x03]);
    m[8..16].copy_from_slice(&7u64.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m
}

/// A REQ from the active side: RC, PSN 0, PMTU 1024, private data (at
/// message byte 140) = RDMA-CM's 36-byte header, then `private`.
pub(crate) fn req(private: &[u8]) -> Vec<u8> {
    let mut m = mad(0x0010);
    let d = 24;
    m[d..d + 4].copy_from_slice(&ACTIVE_COMM.to_be_bytes());
    m[d + 8..d + 16].copy_from_slice(&0x0106_4d52u64.to_be_bytes());
    m[d + 32..d + 36].copy_from_slice(&[0, 0, ACTIVE_QPN as u8, 4]);
    m[d + 39] = 4;
    m[d + 43] = 0xa0; // CM response timeout, RC, no end-to-end credits
    m[d + 44..d + 48].copy_from_slice(&[0, 0, 0, 0x07]);
    m[d + 48..d + 50].copy_from_slice(&0xffffu16.to_be_bytes());
    m[d + 50] = 0x37; // PMTU 1024, RNR retry 7
    let p = d + 140;
    m[p + 1] = 0x40; // RDMA-CM header: IPv4
    m[p + 36..p + 36 + private.len()].copy_from_slice(private);
    m
}

/// The passive side's REP: PSN 0, private data (message byte 36) `private`.
pub(crate) fn rep(private: &[u8]) -> Vec<u8> {
    let mut m = mad(0x0013);
    let d = 24;
    m[d..d + 4].copy_from_slice(&PASSIVE_COMM.to_be_bytes());
    m[d + 4..d + 8].copy_from_slice(&ACTIVE_COMM.to_be_bytes());
    m[d + 12..d + 15].copy_from_slice(&[0, 0, PASSIVE_QPN as u8]);
    m[d + 24] = 4;
    m[d + 25] = 4;
    m[d + 27] = 0xe0;
    m[d + 36..d + 36 + private.len()].copy_from_slice(private);
    m
}

/// A REJ of `reason`: of the REQ from the passive side (`of_rep` false),
/// of the REP from the active side (true).
fn rej(of_rep: bool, reason: u16) -> Vec<u8> {
    let mut m = mad(0x0012);
    let d = 24;
    let (local, remote) = if of_rep {
        (ACTIVE_COMM, PASSIVE_COMM)
    } else {
        (PASSIVE_COMM, ACTIVE_COMM)
    };
    m[d..d + 4].copy_from_slice(&local.to_be_bytes());
    m[d + 4..d + 8].copy_from_slice(&remote.to_be_bytes());
    m[d + 8] = u8::from(of_rep) << 6;
    m[d + 10..d + 12].copy_from_slice(&reason.to_be_bytes());
    m
}

/// The active side's RTU.
fn rtu() -> Vec<u8> {
    let mut m = mad(0x0014);
    m[24..28].copy_from_slice(&ACTIVE_COMM.to_be_bytes());
    m[28..32].copy_from_slice(&PASSIVE_COMM.to_be_bytes());
    m
}

/// A MAD as a UD SEND Only to QP1 from `src` to `dst`.
fn on_qp1(src: [u8; 4], dst: [u8; 4], payload: Vec<u8>) -> Vec<u8> {
    PacketBuilder::new(Opcode::UD_SEND_ONLY)
        .dest_qp(1)
        .deth(DethRepr {
            qkey: 0x8001_0000,
            reserved: 0,
            src_qp: 1,
        })
        .payload(payload)
        .ipv4(Ipv4Addr::from(src), Ipv4Addr::from(dst))
        .build()
}

/// A MAD from the active side to the passive side.
pub(crate) fn from_active(m: Vec<u8>) -> Vec<u8> {
    on_qp1(ACTIVE, PASSIVE, m)
}

/// A MAD from the passive side to the active side.
pub(crate) fn from_passive(m: Vec<u8>) -> Vec<u8> {
    on_qp1(PASSIVE, ACTIVE, m)
}

/// An RC SEND Only with AckReq from the active side at PSN `psn`.
fn rc_send(psn: u32) -> Vec<u8> {
    PacketBuilder::new(Opcode::RC_SEND_ONLY)
        .ipv4(Ipv4Addr::from(ACTIVE), Ipv4Addr::from(PASSIVE))
        .dest_qp(PASSIVE_QPN)
        .psn(psn)
        .ack_req(true)
        .payload(vec![5; 64])
        .build()
}

/// The passive side's RC Acknowledge of PSN `psn` (MSN `psn` + 1).
fn rc_ack(psn: u32) -> Vec<u8> {
    PacketBuilder::new(Opcode::RC_ACK)
        .ipv4(Ipv4Addr::from(PASSIVE), Ipv4Addr::from(ACTIVE))
        .dest_qp(ACTIVE_QPN)
        .psn(psn)
        .aeth(AethRepr {
            syndrome: Syndrome::ACK_UNLIMITED,
            msn: Msn::new(psn + 1),
        })
        .build()
}

/// Writes `frames` 10 µs apart; `cut`: (frame index, bytes kept).
fn write(name: &str, frames: &[Vec<u8>], cut: Option<(usize, usize)>) -> PathBuf {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        let kept = match cut {
            Some((at, n)) if at == i => &f[..n],
            _ => &f[..],
        };
        w.write_packet(i as u64 * 10_000, kept, f.len() as u32, None)
            .unwrap();
    }
    temp_file(name, &w.into_inner())
}

/// `check --format jsonl` lines of `frames`.
fn check(name: &str, frames: &[Vec<u8>], cut: Option<(usize, usize)>) -> Vec<Value> {
    let path = write(name, frames, cut);
    let out = metaroce(&["check", "--format", "jsonl"], &path);
    stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

/// The frames a finding line names, in its order.
fn frames_of(line: &Value) -> Vec<u64> {
    line["frames"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

/// The setup findings (MR-MPN-7 … 11, MR-CM-6) as (id, severity, frames).
fn setup_findings(lines: &[Value]) -> Vec<(String, String, Vec<u64>)> {
    lines
        .iter()
        .filter(|l| {
            l["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("MR-MPN-") || id == "MR-CM-6")
        })
        .map(|l| {
            (
                l["id"].as_str().unwrap().to_string(),
                l["severity"].as_str().unwrap_or("").to_string(),
                frames_of(l),
            )
        })
        .collect()
}

fn musts(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|l| l["severity"] == "must").collect()
}

/// Asserts exactly one setup finding, of `id` and severity MUST, naming
/// (as a set) `frames`.
fn fires(lines: &[Value], id: &str, frames: &[u64]) {
    let f = setup_findings(lines);
    assert_eq!(f.len(), 1, "{f:?}");
    let (got, severity, mut got_frames) = f[0].clone();
    assert_eq!(
        (got.as_str(), severity.as_str()),
        (id, "must"),
        "{lines:#?}"
    );
    got_frames.sort_unstable();
    assert_eq!(got_frames, frames, "{lines:#?}");
}

fn req_mp() -> Vec<u8> {
    block(M | T | O, 46, 4096, 128)
}

fn rep_mp() -> Vec<u8> {
    block(M | T | RN, 46, 1024, 64)
}

#[test]
fn a_correct_mp_exchange_passes_and_shows_what_it_agreed() {
    let frames = [
        from_active(req(&req_mp())),
        from_passive(rep(&rep_mp())),
        from_active(rtu()),
        send(0, 100, false),
        ack(0, 100, 0xC100).build(),
    ];
    let lines = check("cm-mp-good.pcapng", &frames, None);
    assert_eq!(setup_findings(&lines), vec![], "{lines:#?}");
    assert!(musts(&lines).is_empty(), "{lines:#?}");
    let path = write("cm-mp-good-text.pcapng", &frames, None);
    // The connection lines (every connection's in JUnit, not only flagged
    // ones as in text).
    let text = stdout(&metaroce(&["check", "--format", "junit"], &path));
    // The MP data flows active → passive: the responder's O is the REP's
    // (clear), the requester's RN the REQ's (clear).
    assert!(
        text.contains(
            "MP set up by the CM: W 1024, trim DSCP 46, responder ignores the O flag, requester does not understand NAK 0x66"
        ),
        "{text}"
    );
}

#[test]
fn mr_mpn_7_reserved_bits_in_a_version_1_req_block() {
    let mut b = req_mp();
    b[4] |= 0x01;
    b[21] = 9;
    let lines = check(
        "cm-mpn7.pcapng",
        &[from_active(req(&b)), from_passive(rep(&rep_mp()))],
        None,
    );
    fires(&lines, "MR-MPN-7", &[1]);
}

#[test]
fn mr_mpn_7_a_later_version_is_not_judged_as_a_version_1_sender() {
    let mut b = req_mp();
    b[2] = 2;
    b[3] = 28;
    b[4] |= 0x01;
    b.extend_from_slice(&[1, 2, 3, 4]);
    let lines = check(
        "cm-mpn7-v2.pcapng",
        &[
            from_active(req(&b)),
            from_passive(rep(&rep_mp())),
            from_active(rtu()),
        ],
        None,
    );
    assert_eq!(setup_findings(&lines), vec![], "{lines:#?}");
}

#[test]
fn mr_mpn_8_a_rep_block_with_m_clear() {
    let lines = check(
        "cm-mpn8.pcapng",
        &[
            from_active(req(&req_mp())),
            from_passive(rep(&block(T, 46, 1024, 64))),
        ],
        None,
    );
    fires(&lines, "MR-MPN-8", &[1, 2]);
}

#[test]
fn mr_mpn_8_the_passive_side_sends_mp_after_declining() {
    let lines = check(
        "cm-mpn8-data.pcapng",
        &[
            from_active(req(&req_mp())),
            from_passive(rep(&[])),
            from_active(rtu()),
            ack(0, 100, 0xC100).build(),
        ],
        None,
    );
    fires(&lines, "MR-MPN-8", &[1, 2, 4]);
}

#[test]
fn mr_mpn_8_and_10_a_declined_exchange_that_runs_base_passes() {
    // The REP carries no block: Base (the active side's mp_fallback).
    let lines = check(
        "cm-declined-base.pcapng",
        &[
            from_active(req(&req_mp())),
            from_passive(rep(&[])),
            from_active(rtu()),
            rc_send(0),
            rc_ack(0),
        ],
        None,
    );
    assert_eq!(setup_findings(&lines), vec![], "{lines:#?}");
    assert!(musts(&lines).is_empty(), "{lines:#?}");
}

#[test]
fn mr_mpn_9_a_rep_with_another_trim_dscp() {
    let lines = check(
        "cm-mpn9.pcapng",
        &[
            from_active(req(&req_mp())),
            from_passive(rep(&block(M, 0, 1024, 64))),
        ],
        None,
    );
    fires(&lines, "MR-MPN-9", &[1, 2]);
}

#[test]
fn mr_mpn_10_the_active_side_sends_mp_after_a_rep_without_block() {
    let lines = check(
        "cm-mpn10.pcapng",
        &[
            from_active(req(&req_mp())),
            from_passive(rep(&[])),
            from_active(rtu()),
            send(0, 100, false),
        ],
        None,
    );
    fires(&lines, "MR-MPN-10", &[1, 2, 4]);
}

#[test]
fn mr_mpn_10_a_rej_28_after_a_declined_rep_passes() {
    let lines = check(
        "cm-mpn10-rej.pcapng",
        &[
            from_active(req(&req_mp())),
            from_passive(rep(&[])),
            from_active(rej(true, 28)),
        ],
        None,
    );
    assert_eq!(setup_findings(&lines), vec![], "{lines:#?}");
}

#[test]
fn mr_mpn_11_a_rep_answers_a_malformed_req() {
    // Window 32 is out of range: the sender breaks MR-MPN-7, the passive
    // side that answers with a REP breaks MR-MPN-11.
    let lines = check(
        "cm-mpn11-req.pcapng",
        &[
            from_active(req(&block(M, 0, 32, 128))),
            from_passive(rep(&rep_mp())),
        ],
        None,
    );
    let f = setup_findings(&lines);
    let ids: Vec<&str> = f.iter().map(|x| x.0.as_str()).collect();
    assert_eq!(ids, ["MR-MPN-7", "MR-MPN-11"], "{f:?}");
    let mut frames = f[1].2.clone();
    frames.sort_unstable();
    assert_eq!(frames, [1, 2]);
}

#[test]
fn mr_mpn_11_a_malformed_req_answered_with_rej_28_passes() {
    let lines = check(
        "cm-mpn11-req-rej.pcapng",
        &[
            from_active(req(&block(M, 0, 32, 128))),
            from_passive(rej(false, 28)),
        ],
        None,
    );
    // Only the sender's own fault remains.
    let ids: Vec<String> = setup_findings(&lines).into_iter().map(|x| x.0).collect();
    assert_eq!(ids, ["MR-MPN-7"]);
}

#[test]
fn mr_mpn_11_the_active_side_accepts_a_malformed_rep() {
    let mut short = rep_mp();
    short[3] = 20;
    let frames = [
        from_active(req(&req_mp())),
        from_passive(rep(&short)),
        from_active(rtu()),
    ];
    let lines = check("cm-mpn11-rep.pcapng", &frames, None);
    let f = setup_findings(&lines);
    let ids: Vec<&str> = f.iter().map(|x| x.0.as_str()).collect();
    // The REP's sender breaks MR-MPN-8, the active side MR-MPN-11.
    assert_eq!(ids, ["MR-MPN-8", "MR-MPN-11"], "{f:?}");
    let mut frames = f[1].2.clone();
    frames.sort_unstable();
    assert_eq!(frames, [1, 2, 3]);
    // Answered with REJ 28 instead: only the REP's sender is at fault.
    let lines = check(
        "cm-mpn11-rep-rej.pcapng",
        &[
            from_active(req(&req_mp())),
            from_passive(rep(&short)),
            from_active(rej(true, 28)),
        ],
        None,
    );
    let ids: Vec<String> = setup_findings(&lines).into_iter().map(|x| x.0).collect();
    assert_eq!(ids, ["MR-MPN-8"]);
}

#[test]
fn mr_cm_6_an_agreed_mp_connection_that_runs_base() {
    let lines = check(
        "cm-cm6-base.pcapng",
        &[
            from_active(req(&req_mp())),
            from_passive(rep(&rep_mp())),
            from_active(rtu()),
            rc_send(0),
            rc_ack(0),
        ],
        None,
    );
    // The active side's RC SEND is reported; the passive side's RC ACK
    // answers it (reported too: its REP announced an MP QP).
    let f = setup_findings(&lines);
    let ids: Vec<&str> = f.iter().map(|x| x.0.as_str()).collect();
    assert_eq!(ids, ["MR-CM-6", "MR-CM-6"], "{f:?}");
    let mut first = f[0].2.clone();
    first.sort_unstable();
    assert_eq!(first, [1, 2, 4]);
}

#[test]
fn mr_cm_6_a_rep_block_for_a_req_that_asked_for_base() {
    let lines = check(
        "cm-cm6-rep.pcapng",
        &[from_active(req(&[])), from_passive(rep(&rep_mp()))],
        None,
    );
    fires(&lines, "MR-CM-6", &[1, 2]);
    let lines = check(
        "cm-cm6-base-ok.pcapng",
        &[
            from_active(req(&[])),
            from_passive(rep(&[])),
            from_active(rtu()),
            rc_send(0),
            rc_ack(0),
        ],
        None,
    );
    assert_eq!(setup_findings(&lines), vec![], "{lines:#?}");
}

#[test]
fn a_partial_exchange_gives_no_finding() {
    // A malformed REQ with no answer in the capture: the REJ may be there.
    let lines = check(
        "cm-partial-req.pcapng",
        &[from_active(req(&block(M, 0, 16, 128)))],
        None,
    );
    let ids: Vec<String> = setup_findings(&lines).into_iter().map(|x| x.0).collect();
    assert_eq!(ids, ["MR-MPN-7"], "the sender's own block only");
    // A REP without its REQ, then MP data: nothing to judge it against.
    let lines = check(
        "cm-partial-rep.pcapng",
        &[from_passive(rep(&[])), send(0, 100, false)],
        None,
    );
    assert_eq!(setup_findings(&lines), vec![], "{lines:#?}");
    // A REQ cut before its block (snap length): a note, no finding, even
    // when MP data follows a REP without block.
    let frames = [
        from_active(req(&req_mp())),
        from_passive(rep(&[])),
        send(0, 100, false),
    ];
    let lines = check("cm-partial-cut.pcapng", &frames, Some((0, 200)));
    assert_eq!(setup_findings(&lines), vec![], "{lines:#?}");
    let path = write("cm-partial-cut-text.pcapng", &frames, Some((0, 200)));
    let text = stdout(&metaroce(&["check"], &path));
    assert!(
        text.contains("cut by the capture before their MP setup block: 1 (frames 1)"),
        "{text}"
    );
}

/// Wireshark as the oracle of where the block sits: tshark's RDMA-CM
/// dissector must show the REQ's block at the start of the consumer's
/// private data after the IP CM header (`infiniband.cm.req.ip_cm.private`)
/// and the REP's at the start of its private data. Without tshark: SKIP
/// (a failure with `CI=true`).
#[test]
fn tshark_finds_the_blocks_where_the_judge_reads_them() {
    let runs = std::process::Command::new("tshark")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "tshark absent (CI=true: the oracle must be there)"
        );
        println!("SKIP: tshark not runnable");
        return;
    }
    let path = write(
        "cm-mp-tshark.pcapng",
        &[from_active(req(&req_mp())), from_passive(rep(&rep_mp()))],
        None,
    );
    let out = std::process::Command::new("tshark")
        .args(["-r"])
        .arg(&path)
        .args([
            "-n",
            "-Y",
            "infiniband.mad",
            "-T",
            "fields",
            "-e",
            "infiniband.cm.req.ip_cm.private",
            "-e",
            "infiniband.cm.rep.private",
        ])
        .output()
        .expect("runs tshark");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let req_private = lines[0].split('\t').next().unwrap_or("");
    let rep_private = lines[1].split('\t').nth(1).unwrap_or("");
    assert!(req_private.starts_with(&hex(&req_mp())), "{text}");
    assert!(rep_private.starts_with(&hex(&rep_mp())), "{text}");
}

/// `decode` shows the blocks (jsonl `cm.fields.mp_setup`), and nothing for
/// a REQ without one.
#[test]
fn decode_shows_the_blocks() {
    let path = write(
        "cm-mp-decode.pcapng",
        &[
            from_active(req(&req_mp())),
            from_passive(rep(&rep_mp())),
            from_active(req(&[])),
        ],
        None,
    );
    let out = metaroce(&["decode", "--format", "jsonl"], &path);
    let frames: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let setup = |i: usize| frames[i]["cm"]["fields"]["mp_setup"].clone();
    assert_eq!(setup(0)["window"], 4096);
    assert_eq!(setup(0)["trim_dscp"], 46);
    assert_eq!(setup(0)["ordered"], true);
    assert_eq!(setup(1)["window"], 1024);
    assert_eq!(setup(1)["resource_nak"], true);
    assert_eq!(setup(2), Value::Null);
}

// The agreed values feed the MP judge of each direction (SPEC.md §7.1.1):
// W (MR-MPW-2), the responder's O (MR-MPP-21) and the requester's RN
// (MR-MPP-23). The MP data flows active → passive (`send`, `ack`).

/// (frames, sorted) of the findings of `id`.
fn found(lines: &[Value], id: &str) -> Vec<Vec<u64>> {
    lines
        .iter()
        .filter(|l| l["id"] == id)
        .map(|l| {
            let mut f = frames_of(l);
            f.sort_unstable();
            f
        })
        .collect()
}

/// Asserts that no finding of `id` is in `lines`.
fn none(lines: &[Value], id: &str) {
    assert_eq!(found(lines, id), Vec::<Vec<u64>>::new(), "{lines:#?}");
}

/// The REQ, REP (blocks `q`, `p`) and RTU, then `data`; without the CM
/// exchange when `cm` is false.
fn with_cm(cm: bool, q: &[u8], p: &[u8], data: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut frames = if cm {
        vec![
            from_active(req(q)),
            from_passive(rep(p)),
            from_active(rtu()),
        ]
    } else {
        Vec::new()
    };
    frames.extend(data);
    frames
}

/// `send` with MPETH O set.
fn send_ordered(psn: u32, ts: u32) -> Vec<u8> {
    PacketBuilder::new(Opcode::MP_SEND)
        .ipv4(Ipv4Addr::from(ACTIVE), Ipv4Addr::from(PASSIVE))
        .psn(psn)
        .dest_qp(PASSIVE_QPN)
        .ack_req(true)
        .udp_src_port(0xC000 + psn as u16)
        .payload(vec![7; 64])
        .ext(|e| {
            e.mpeth = Some(metaroce_codec::ext::MpethRepr {
                first: true,
                last: true,
                ordered: true,
                msn: Msn::new(psn),
                msg_len: 64,
                timestamp: ts,
                ..Default::default()
            })
        })
        .build()
}

#[test]
fn mr_mpp_21_o_toward_a_peer_whose_block_had_o_clear() {
    // The REP's block (frame 2) has O clear: the data frame 4 with O set.
    let data = || vec![send_ordered(0, 100), ack(0, 100, 0xC100).build()];
    let lines = check(
        "cm-mpp21.pcapng",
        &with_cm(true, &req_mp(), &rep_mp(), data()),
        None,
    );
    assert_eq!(found(&lines, "MR-MPP-21"), vec![vec![2, 4]], "{lines:#?}");
    // Without the CM exchange, the capture does not show what the peer
    // announced; with O in the REP's block, O is allowed.
    let lines = check(
        "cm-mpp21-nocm.pcapng",
        &with_cm(false, &[], &[], data()),
        None,
    );
    none(&lines, "MR-MPP-21");
    let lines = check(
        "cm-mpp21-o.pcapng",
        &with_cm(
            true,
            &req_mp(),
            &block(M | T | O | RN, 46, 1024, 64),
            data(),
        ),
        None,
    );
    none(&lines, "MR-MPP-21");
    assert!(musts(&lines).is_empty(), "{lines:#?}");
}

/// PSNs 0 and 1, then the resource NAK 0x66 of PSN 1 (cumulative PSN 0).
fn resource_nak() -> Vec<Vec<u8>> {
    let nak = ack(0, 100, 0xC100)
        .ext(|e| {
            if let Some(s) = e.sacketh.as_mut() {
                s.syndrome = Syndrome::NAK_RESOURCE;
                s.sack_base_psn = metaroce_codec::Psn::new(1);
                s.echoed_entropy = 0xC001;
                s.echoed_timestamp = 101;
            }
        })
        .build();
    vec![send(0, 100, false), send(1, 101, false), nak]
}

#[test]
fn mr_mpp_23_nak_0x66_toward_a_requester_whose_block_had_rn_clear() {
    // The REQ's block (frame 1) has RN clear: the NAK (frame 6).
    let lines = check(
        "cm-mpp23.pcapng",
        &with_cm(true, &req_mp(), &rep_mp(), resource_nak()),
        None,
    );
    assert_eq!(found(&lines, "MR-MPP-23"), vec![vec![1, 6]], "{lines:#?}");
    let lines = check(
        "cm-mpp23-nocm.pcapng",
        &with_cm(false, &[], &[], resource_nak()),
        None,
    );
    none(&lines, "MR-MPP-23");
    let lines = check(
        "cm-mpp23-rn.pcapng",
        &with_cm(
            true,
            &block(M | T | O | RN, 46, 4096, 128),
            &rep_mp(),
            resource_nak(),
        ),
        None,
    );
    none(&lines, "MR-MPP-23");
}

/// PSN 0 and its ACK; PSN 70 (70 after the cumulative PSN 0); PSN 1,
/// stamped after PSN 70, and its ACK (cumulative PSN `cum`).
fn beyond_window(cum: u32) -> Vec<Vec<u8>> {
    vec![
        send(0, 100, false),
        ack(0, 100, 0xC100).build(),
        send(70, 200, false),
        send(1, 300, false),
        ack(cum, 300, 0xC101)
            .ext(|e| {
                if let Some(s) = e.sacketh.as_mut() {
                    s.echoed_entropy = 0xC001;
                }
            })
            .build(),
    ]
}

#[test]
fn mr_mpw_2_a_packet_beyond_the_agreed_window() {
    // Both blocks announce W 64: PSN 70 (frame 6) is beyond it, and the ACK
    // (frame 8) triggered by the later PSN 1 still stops at PSN 1.
    let w64 = |f| block(f, 46, 64, 64);
    let lines = check(
        "cm-mpw2.pcapng",
        &with_cm(true, &w64(M | T), &w64(M | T | RN), beyond_window(1)),
        None,
    );
    assert_eq!(found(&lines, "MR-MPW-2"), vec![vec![1, 6, 8]], "{lines:#?}");
    // Without the CM exchange (default W 1024), with a window of 1024, or
    // when the later ACK reaches PSN 70 − 64 (the requester may have had
    // an ACK the capture lacks): nothing.
    for (name, frames) in [
        (
            "cm-mpw2-nocm.pcapng",
            with_cm(false, &[], &[], beyond_window(1)),
        ),
        (
            "cm-mpw2-1024.pcapng",
            with_cm(true, &req_mp(), &rep_mp(), beyond_window(1)),
        ),
        (
            "cm-mpw2-reached.pcapng",
            with_cm(true, &w64(M | T), &w64(M | T | RN), beyond_window(6)),
        ),
        (
            // The ACK after PSN 70 answers PSN 0 (stamped before PSN 70):
            // it may have left before an ACK the capture lacks.
            "cm-mpw2-older-trigger.pcapng",
            with_cm(true, &w64(M | T), &w64(M | T | RN), {
                let mut f = beyond_window(1);
                f[4] = ack(1, 100, 0xC101)
                    .ext(|e| {
                        if let Some(s) = e.sacketh.as_mut() {
                            s.echoed_entropy = 0xC000;
                        }
                    })
                    .build();
                f
            }),
        ),
    ] {
        let lines = check(name, &frames, None);
        assert_eq!(
            found(&lines, "MR-MPW-2"),
            Vec::<Vec<u64>>::new(),
            "{name}: {lines:#?}"
        );
    }
}

/// `frame` with IPv4 DSCP `dscp` (header checksum recomputed; the ICRC
/// masks the DSCP, so it still verifies).
fn with_dscp(mut frame: Vec<u8>, dscp: u8) -> Vec<u8> {
    frame[15] = (dscp << 2) | (frame[15] & 0x03);
    ipv4_checksum(&mut frame);
    frame
}

/// The IPv4 header checksum of an Ethernet frame, recomputed (the codec's
/// Internet checksum).
fn ipv4_checksum(frame: &mut [u8]) {
    frame[24..26].copy_from_slice(&[0, 0]);
    let sum = metaroce_codec::ipv4::internet_checksum(&frame[14..34]);
    frame[24..26].copy_from_slice(&sum.to_be_bytes());
}

/// `frame` as a switch trims it (§7.10): cut 4 bytes after BTH and MPETH
/// (Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + MPETH 16 + 4 bytes, which the
/// codec then reads as an ICRC that fails), DSCP rewritten to `dscp`, IP
/// and UDP lengths adjusted. (Cut right after MPETH, the frame is no RoCE
/// packet to the codec: no room for an ICRC.)
fn trimmed(frame: &[u8], dscp: u8) -> Vec<u8> {
    let mut t = frame[..74].to_vec();
    t[16..18].copy_from_slice(&60u16.to_be_bytes());
    t[38..40].copy_from_slice(&40u16.to_be_bytes());
    with_dscp(t, dscp)
}

/// The MR-MPT-9 findings as (frames, message).
fn trim_dscp_findings(lines: &[Value]) -> Vec<(Vec<u64>, String)> {
    lines
        .iter()
        .filter(|l| l["id"] == "MR-MPT-9")
        .map(|l| {
            (
                frames_of(l),
                l["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn mr_mpt_9_a_complete_packet_with_the_agreed_trim_dscp() {
    let cm = [
        from_active(req(&req_mp())),
        from_passive(rep(&rep_mp())),
        from_active(rtu()),
    ];
    // The requester's SEND carries DSCP 46, the trim DSCP the REQ set.
    let mut frames = cm.to_vec();
    frames.extend([
        with_dscp(send(0, 100, false), 46),
        ack(0, 100, 0xC100).build(),
    ]);
    let lines = check("cm-mpt9-req.pcapng", &frames, None);
    let f = trim_dscp_findings(&lines);
    assert_eq!(f.len(), 1, "{lines:#?}");
    assert_eq!(f[0].0, [4, 1], "the SEND and the REQ whose block agreed it");
    assert!(f[0].1.contains("the requester sent"), "{f:?}");
    // The responder's MP ACK with it.
    let mut frames = cm.to_vec();
    frames.extend([
        send(0, 100, false),
        ack(0, 100, 0xC100).traffic_class(46 << 2).build(),
    ]);
    let lines = check("cm-mpt9-ack.pcapng", &frames, None);
    let f = trim_dscp_findings(&lines);
    assert_eq!(f.len(), 1, "{lines:#?}");
    assert_eq!(f[0].0, [5, 1]);
    assert!(f[0].1.contains("the responder sent"), "{f:?}");
}

#[test]
fn mr_mpt_9_not_on_a_trimmed_packet_nor_without_trimming() {
    // A SEND trimmed by a switch (captured after it) carries DSCP 46
    // legitimately: no ICRC verifies, so it is no sender's act.
    let whole = send(1, 101, false);
    let frames = [
        from_active(req(&req_mp())),
        from_passive(rep(&rep_mp())),
        from_active(rtu()),
        send(0, 100, false),
        trimmed(&whole, 46),
        ack(0, 100, 0xC100).build(),
    ];
    let lines = check("cm-mpt9-trimmed.pcapng", &frames, None);
    assert_eq!(trim_dscp_findings(&lines), vec![], "{lines:#?}");
    // Nor is its cut ICRC or payload its sender's (MR-MPT-3, §7.10): the
    // trim DSCP the REQ agreed makes it a trimmed packet, not a SEND whose
    // ICRC fails and whose payload is short.
    let names_5 = |l: &&Value| l["frame"] == 5 || frames_of(l).contains(&5);
    let on_it: Vec<&Value> = lines.iter().filter(names_5).collect();
    assert!(on_it.is_empty(), "{on_it:#?}");
    // The same frame with another DSCP is a damaged SEND.
    let mut other = frames.to_vec();
    other[4] = trimmed(&whole, 45);
    let lines = check("cm-mpt9-trimmed-45.pcapng", &other, None);
    assert!(
        lines
            .iter()
            .any(|l| l["id"] == "MR-ICRC-1" && l["frame"] == 5),
        "{lines:#?}"
    );
    // Trimming off (T clear in the REQ): DSCP 46 is any DSCP.
    let frames = [
        from_active(req(&block(M | O, 0, 4096, 128))),
        from_passive(rep(&block(M | RN, 0, 1024, 64))),
        from_active(rtu()),
        with_dscp(send(0, 100, false), 46),
        ack(0, 100, 0xC100).build(),
    ];
    let lines = check("cm-mpt9-off.pcapng", &frames, None);
    assert_eq!(trim_dscp_findings(&lines), vec![], "{lines:#?}");
    // Without the CM exchange nothing says which DSCP marks trimming.
    let lines = check(
        "cm-mpt9-no-cm.pcapng",
        &[
            with_dscp(send(0, 100, false), 46),
            ack(0, 100, 0xC100).build(),
        ],
        None,
    );
    assert_eq!(trim_dscp_findings(&lines), vec![], "{lines:#?}");
}

/// `frame` cut by a switch to its first `n` bytes (the IPv4 and UDP
/// lengths adjusted), with DSCP `dscp`. At 70 bytes (Ethernet 14 + IPv4
/// 20 + UDP 8 + BTH 12 + MPETH 16) nothing follows the headers of an MP
/// SEND: no room for an ICRC; below 70 MPETH is cut. Neither decodes as a
/// RoCE packet.
fn cut_to(frame: &[u8], n: u16, dscp: u8) -> Vec<u8> {
    let mut t = frame[..usize::from(n)].to_vec();
    t[16..18].copy_from_slice(&(n - 14).to_be_bytes());
    t[38..40].copy_from_slice(&(n - 34).to_be_bytes());
    with_dscp(t, dscp)
}

/// The lines naming frame `n` (as its frame or among its frames).
fn naming(lines: &[Value], n: u64) -> Vec<&Value> {
    lines
        .iter()
        .filter(|l| l["frame"] == n || frames_of(l).contains(&n))
        .collect()
}

/// The frames of the per-packet findings of `id`.
fn on_frames(lines: &[Value], id: &str) -> Vec<u64> {
    lines
        .iter()
        .filter(|l| l["id"] == id)
        .filter_map(|l| l["frame"].as_u64())
        .collect()
}

/// The CM exchange (when `cm`), a SEND, then a copy of the next SEND cut
/// right after MPETH and one cut inside MPETH (the 64 bytes a switch keeps
/// of a 64-byte trim), both with DSCP `dscp`, then the ACK. The cut frames
/// are the 2nd and 3rd after the SEND.
fn cut_frames(cm: bool, dscp: u8) -> Vec<Vec<u8>> {
    let whole = send(1, 101, false);
    with_cm(
        cm,
        &req_mp(),
        &rep_mp(),
        vec![
            send(0, 100, false),
            cut_to(&whole, 70, dscp),
            cut_to(&whole, 64, dscp),
            ack(0, 100, 0xC100).build(),
        ],
    )
}

#[test]
fn mr_mpt_4_a_packet_trimmed_to_its_headers_or_inside_mpeth_is_trimmed() {
    // On the connection whose REQ agreed trim DSCP 46, both cut SENDs with
    // DSCP 46 are trimmed packets (§7.10, MR-MPT-4): no finding names them.
    let lines = check("cm-mpt4-cut.pcapng", &cut_frames(true, 46), None);
    for n in [5, 6] {
        let on_it = naming(&lines, n);
        assert!(on_it.is_empty(), "frame {n}: {on_it:#?}");
    }
    // With another DSCP they are damaged SENDs: no room for the ICRC
    // (MR-ICRC-1), MPETH cut (MR-EXT-3).
    let lines = check("cm-mpt4-cut-45.pcapng", &cut_frames(true, 45), None);
    assert_eq!(on_frames(&lines, "MR-ICRC-1"), [5], "{lines:#?}");
    assert_eq!(on_frames(&lines, "MR-EXT-3"), [6], "{lines:#?}");
    // Without the CM exchange nothing says which DSCP marks trimming.
    let lines = check("cm-mpt4-cut-no-cm.pcapng", &cut_frames(false, 46), None);
    assert_eq!(on_frames(&lines, "MR-ICRC-1"), [2], "{lines:#?}");
    assert_eq!(on_frames(&lines, "MR-EXT-3"), [3], "{lines:#?}");
    // Trimming off (T clear in both blocks): DSCP 46 is any DSCP.
    let whole = send(1, 101, false);
    let frames = with_cm(
        true,
        &block(M | O, 46, 4096, 128),
        &block(M | RN, 46, 1024, 64),
        vec![
            send(0, 100, false),
            cut_to(&whole, 70, 46),
            cut_to(&whole, 64, 46),
            ack(0, 100, 0xC100).build(),
        ],
    );
    let lines = check("cm-mpt4-cut-off.pcapng", &frames, None);
    assert_eq!(on_frames(&lines, "MR-ICRC-1"), [5], "{lines:#?}");
    assert_eq!(on_frames(&lines, "MR-EXT-3"), [6], "{lines:#?}");
    // A packet cut inside its BTH names no connection: it keeps its
    // finding (MR-ICRC-1: no room for the BTH and the ICRC).
    let mut frames = cut_frames(true, 46);
    frames[5] = cut_to(&whole, 50, 46);
    let lines = check("cm-mpt4-cut-bth.pcapng", &frames, None);
    assert!(naming(&lines, 5).is_empty(), "{lines:#?}");
    assert_eq!(on_frames(&lines, "MR-ICRC-1"), [6], "{lines:#?}");
}

#[test]
fn trimmed_to_its_headers_the_summary_notes_it_and_threads_change_nothing() {
    // The cut SENDs again and again, past the parallel pipeline's first
    // batches (256 frames).
    let whole = send(1, 101, false);
    let mut data = vec![send(0, 100, false)];
    for _ in 0..300 {
        data.push(cut_to(&whole, 70, 46));
        data.push(cut_to(&whole, 64, 46));
    }
    data.push(ack(0, 100, 0xC100).build());
    let frames = with_cm(true, &req_mp(), &rep_mp(), data);
    let path = write("cm-mpt4-cut-many.pcapng", &frames, None);
    for format in ["text", "jsonl"] {
        let run = |threads: &str| {
            let out = metaroce(
                &[
                    "check",
                    "--no-progress",
                    "--format",
                    format,
                    "--threads",
                    threads,
                ],
                &path,
            );
            (out.status.code(), stdout(&out))
        };
        let one = run("1");
        assert_eq!(one, run("2"), "{format}");
        assert!(!one.1.contains("MR-ICRC-1"), "{}", one.1);
        assert!(!one.1.contains("MR-EXT-3"), "{}", one.1);
        if format == "text" {
            assert!(
                one.1.contains("trimmed by a switch too short to decode")
                    && one.1.contains("600 frame(s), first at frame 5"),
                "{}",
                one.1
            );
        }
    }
}
