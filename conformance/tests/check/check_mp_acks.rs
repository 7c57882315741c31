//! `metaroce check` on MP ACKs as a capture shows them: ACKs the network
//! reordered across paths (UDP source ports) are no MR-MPA-3, while a
//! cumulative PSN that moves back on one path still is; and an MP ACK its
//! receiver drops (a bad IPv4 header checksum) acknowledges nothing, so a
//! later retransmission of a PSN it covered is no MR-MPL-6, while the
//! per-packet finding for the checksum stays.

use crate::common::*;
use std::path::PathBuf;

use metaroce_codec::ext::{MpethRepr, SackethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, PacketBuilder, Psn};
use metaroce_conformance::capture::PcapNgWriter;

/// Writes `(capture time in ns, frame)` as a pcapng file.
pub(crate) fn capture(name: &str, frames: &[(u64, Vec<u8>)]) -> PathBuf {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    for (t, f) in frames {
        w.write_packet(*t, f, f.len() as u32, None).unwrap();
    }
    let path = temp_path(name);
    std::fs::write(&path, w.into_inner()).unwrap();
    path
}

/// An MP SEND of one 64-byte packet (message `psn`, MSN `psn`) at PSN
/// `psn`, 10.0.0.1 → 10.0.0.2 QPN 0x12, from UDP source port 0xC000 + `psn`,
/// MPETH timestamp `ts`.
pub(crate) fn send(psn: u32, ts: u32, retx: bool) -> Vec<u8> {
    PacketBuilder::new(Opcode::MP_SEND)
        .ipv4([10, 0, 0, 1].into(), [10, 0, 0, 2].into())
        .psn(psn)
        .dest_qp(0x12)
        .ack_req(true)
        .udp_src_port(0xC000 + psn as u16)
        .payload(vec![7; 64])
        .ext(|e| {
            e.mpeth = Some(MpethRepr {
                first: true,
                last: true,
                retransmission: retx,
                msn: Msn::new(psn),
                msg_len: 64,
                timestamp: ts,
                ..MpethRepr::default()
            })
        })
        .build()
}

/// The MP ACK 10.0.0.2 → 10.0.0.1 QPN 0x22 of every PSN up to `cum`,
/// sent from UDP source port `port`, echoing the request at PSN `cum`
/// (source port 0xC000 + `cum`, timestamp `ts`).
pub(crate) fn ack(cum: u32, ts: u32, port: u16) -> PacketBuilder {
    PacketBuilder::new(Opcode::MP_ACK)
        .ipv4([10, 0, 0, 2].into(), [10, 0, 0, 1].into())
        .psn(cum)
        .dest_qp(0x22)
        .udp_src_port(port)
        .ext(|e| {
            e.sacketh = Some(SackethRepr {
                syndrome: Syndrome(0x1F),
                msn: Msn::new(cum),
                sack_base_psn: Psn::new(cum + 1),
                echoed_entropy: 0xC000 + cum as u16,
                echoed_timestamp: ts,
                ..SackethRepr::default()
            })
        })
}

/// PSNs 0..=3 sent 1 µs apart, then the ACK of 0..=3 (triggered by PSN 3)
/// from `newer_port` and the ACK of 0..=1 (triggered by PSN 1, so sent
/// before it) from `older_port`, captured in that order.
fn swapped_acks(newer_port: u16, older_port: u16) -> Vec<(u64, Vec<u8>)> {
    let mut frames: Vec<(u64, Vec<u8>)> = (0..4u32)
        .map(|psn| (u64::from(psn) * 1_000, send(psn, 5_000 + psn, false)))
        .collect();
    frames.push((10_000, ack(3, 5_003, newer_port).build()));
    frames.push((11_000, ack(1, 5_001, older_port).build()));
    frames
}

/// The findings of `metaroce check` on `frames` as (frame, ID), and its exit code.
fn check(name: &str, frames: &[(u64, Vec<u8>)]) -> (Vec<(u64, String)>, Option<i32>, String) {
    let path = capture(name, frames);
    let out = metaroce(&["check", "--format", "jsonl"], &path);
    std::fs::remove_file(path).unwrap();
    let text = stdout(&out);
    let found = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|l| Some((l["frame"].as_u64()?, l["id"].as_str()?.to_owned())))
        .collect();
    (found, out.status.code(), text)
}

#[test]
fn mp_acks_reordered_across_paths_check_clean() {
    let (found, code, text) = check("mp-acks-swapped.pcapng", &swapped_acks(0xD002, 0xD001));
    assert_eq!(found, [], "{text}");
    assert_eq!(code, Some(0), "{text}");
}

#[test]
fn a_cumulative_psn_moving_back_on_one_path_is_mr_mpa_3() {
    let (found, code, text) = check("mp-acks-one-path.pcapng", &swapped_acks(0xD001, 0xD001));
    assert_eq!(found, [(6, "MR-MPA-3".to_owned())], "{text}");
    assert_eq!(code, Some(1), "{text}");
}

#[test]
fn an_mp_ack_with_a_bad_ipv4_checksum_acknowledges_nothing() {
    // PSNs 0..=3; the ACK of all four arrives with a bad IPv4 header
    // checksum (the requester drops it: SPEC §9.2 row 3); after the RTO
    // (mp_rto_min, 100 µs) the requester resends PSN 2 with R and AckReq.
    let mut frames: Vec<(u64, Vec<u8>)> = (0..4u32)
        .map(|psn| (u64::from(psn) * 1_000, send(psn, 5_000 + psn, false)))
        .collect();
    frames.push((10_000, ack(3, 5_003, 0xD001).ipv4_checksum(0xBAD).build()));
    frames.push((200_000, send(2, 205_000, true)));
    let (found, code, text) = check("mp-ack-bad-ip-checksum.pcapng", &frames);
    assert_eq!(found, [(5, "MR-ENC-7".to_owned())], "{text}");
    assert_eq!(code, Some(1), "{text}");
    // The same ACK intact: PSN 2 was acknowledged, its resend is MR-MPL-6.
    frames[4].1 = ack(3, 5_003, 0xD001).build();
    let (found, _, text) = check("mp-ack-good-ip-checksum.pcapng", &frames);
    assert_eq!(found, [(6, "MR-MPL-6".to_owned())], "{text}");
}
