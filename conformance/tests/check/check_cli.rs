//! `metaroce check`, run as a user runs it: a clean capture passes, broken
//! packets are named by frame and requirement ID, bad input exits 4, and the
//! committed sample capture gives its broken frames' findings (23: ICRC,
//! 24: PadCnt) and those of the packets it sends without AckReq, and the
//! conversation judge's for its PSN gap (frames 14 and 23).

use crate::common::*;
use std::path::PathBuf;

use metaroce_codec::ext::{AethRepr, MpethRepr, RethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, PacketBuilder};
use metaroce_conformance::capture::PcapNgWriter;

/// Writes the frames as a pcapng file.
fn capture(name: &str, frames: &[Vec<u8>]) -> PathBuf {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(1_000 * i as u64, f, f.len() as u32, None)
            .unwrap();
    }
    let path = temp_path(name);
    std::fs::write(&path, w.into_inner()).unwrap();
    path
}

fn send_only(psn: u32) -> PacketBuilder {
    PacketBuilder::new(Opcode::RC_SEND_ONLY)
        .psn(psn)
        .ack_req(true)
        .payload(*b"thirteen byte")
}

fn clean_frames() -> Vec<Vec<u8>> {
    vec![
        send_only(1).build(),
        PacketBuilder::new(Opcode::RC_ACK)
            .psn(1)
            .aeth(AethRepr {
                syndrome: Syndrome::ACK_UNLIMITED,
                msn: Msn::new(1),
            })
            .build(),
        PacketBuilder::new(Opcode::RC_WRITE_FIRST)
            .psn(2)
            .ext(|e| {
                e.reth = Some(RethRepr {
                    va: 0x1000,
                    rkey: 7,
                    dma_len: 1500,
                })
            })
            .payload(vec![1; 1024])
            .build(),
        PacketBuilder::new(Opcode::CNP).udp_src_port(0).build(),
        PacketBuilder::new(Opcode::MP_SEND)
            .ack_req(true)
            .udp_src_port(0xC123)
            .ext(|e| {
                e.mpeth = Some(MpethRepr {
                    first: true,
                    last: true,
                    msg_len: 3,
                    ..MpethRepr::default()
                })
            })
            .payload([1, 2, 3])
            .build(),
    ]
}

#[test]
fn a_clean_capture_exits_0() {
    let path = capture("clean.pcapng", &clean_frames());
    let out = metaroce(&["check", "--pmtu", "1024"], &path);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    assert!(text.contains("  frames: 5\n"), "{text}");
    assert!(text.contains("  RoCE frames: 5\n"), "{text}");
    assert!(
        text.contains("  findings: 0 (must 0, should 0, info 0)"),
        "{text}"
    );
    std::fs::remove_file(path).unwrap();
}

/// Frame 2: bad PadCnt (MR-PKT-4); 3: bad ICRC (MR-ICRC-1); 4: TVer 1
/// (MR-BTH-2); 5: Resv7 set (MR-BTH-9, a SHOULD since SPEC v1.1).
fn bad_frames() -> Vec<Vec<u8>> {
    vec![
        send_only(1).build(),
        send_only(2).pad_count(1).build(),
        send_only(3).corrupt_icrc().build(),
        send_only(4).bth(|b| b.tver = 1).build(),
        send_only(5).bth(|b| b.resv7 = 0x01).build(),
    ]
}

#[test]
fn broken_packets_exit_1_and_are_named_by_frame_and_id() {
    let path = capture("bad.pcapng", &bad_frames());
    let out = metaroce(&["check"], &path);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    for expected in [
        "frame 2: MR-PKT-4 [must] PadCnt 1 but payload 13 bytes needs 3",
        "frame 3: MR-ICRC-1 [must]",
        "frame 4: MR-BTH-2 [must] TVer 1 instead of 0",
        "frame 5: MR-BTH-9 [should] Resv7 0x01 instead of 0",
        "  findings: 4 (must 3, should 1, info 0)",
        "    MR-ICRC-1         1  must   first at frame 3",
    ] {
        assert!(text.contains(expected), "no {expected:?} in\n{text}");
    }
    assert!(!text.contains("frame 1:"), "{text}");
    std::fs::remove_file(path).unwrap();
}

#[test]
fn only_should_findings_exit_0() {
    // MR-ENC-6 (Don't Fragment) is a SHOULD: reported, not failed.
    let path = capture("should.pcapng", &[send_only(1).ipv4_flags_frag(0).build()]);
    let out = metaroce(&["check"], &path);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("frame 1: MR-ENC-6 [should]"));
    std::fs::remove_file(path).unwrap();
}

#[test]
fn jsonl_has_one_object_per_finding() {
    let path = capture("bad-jsonl.pcapng", &bad_frames());
    let out = metaroce(&["check", "--format", "jsonl"], &path);
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let got: Vec<(u64, &str, &str)> = lines
        .iter()
        .map(|l| {
            assert!(l["message"].is_string());
            (
                l["frame"].as_u64().unwrap(),
                l["id"].as_str().unwrap(),
                l["severity"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (2, "MR-PKT-4", "must"),
            (3, "MR-ICRC-1", "must"),
            (4, "MR-BTH-2", "must"),
            (5, "MR-BTH-9", "should"),
        ]
    );
    std::fs::remove_file(path).unwrap();
}

#[test]
fn text_output_of_the_sample_capture() {
    let out = metaroce(&["check"], &sample());
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    for expected in [
        // The two frames broken on purpose.
        "frame 23: MR-ICRC-1 [must]",
        "frame 24: MR-PKT-4 [must] PadCnt 3 exceeds",
        // The conversation judge: the requester sends PSN 110 before 108
        // and 109 (frame 14), and its go-back-N after the NAK of frame 15
        // resends 108 only.
        "frame 14: MR-PSN-3 [must] new request PSN 110, expected 108",
        "frame 23: MR-NAK-5 [must] go-back-N after NAK 0x60 skipped",
        "  findings: 4 (must 4, should 0, info 0)\n",
        "  frames: 24\n",
        "  RoCE frames: 24\n",
        "  undecodable frames: 1\n",
    ] {
        assert!(text.contains(expected), "no {expected:?} in\n{text}");
    }
    insta::assert_snapshot!(text);
}

#[test]
fn base_flags_the_mp_frames_of_the_sample() {
    let out = metaroce(&["check", "--base", "--format", "jsonl"], &sample());
    let text = stdout(&out);
    let opc6: Vec<u64> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["id"] == "MR-OPC-6")
        .map(|l| l["frame"].as_u64().unwrap())
        .collect();
    assert_eq!(opc6, [20, 21, 22], "MR-OPC-6 on the MP frames");
}

#[test]
fn a_text_file_is_bad_input() {
    let path = temp_path("text.pcap");
    std::fs::write(&path, b"this is not a capture\n").unwrap();
    let out = metaroce(&["check"], &path);
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
fn a_truncated_capture_is_bad_input() {
    let bytes = std::fs::read(sample()).unwrap();
    let path = temp_path("cut.pcapng");
    std::fs::write(&path, &bytes[..bytes.len() - 50]).unwrap();
    let out = metaroce(&["check"], &path);
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("truncated") && err.contains("byte offset"),
        "{err}"
    );
    std::fs::remove_file(path).unwrap();
}

#[test]
fn a_pmtu_that_is_not_a_pmtu_is_bad_input() {
    let out = metaroce(&["check", "--pmtu", "1500"], &sample());
    assert_eq!(out.status.code(), Some(4));
}

/// An MP packet `op` at `psn` with MSN 3, `offset` of a 600-byte READ and
/// `n` bytes of payload, to QPN `qp`.
fn mp_read_packet(op: Opcode, psn: u32, offset: u32, n: usize, qp: u32) -> Vec<u8> {
    let (a, b) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
    let (src, dst) = if op == Opcode::MP_READ_REQUEST {
        (a, b)
    } else {
        (b, a)
    };
    PacketBuilder::new(op)
        .ipv4(src, dst)
        .psn(psn)
        .dest_qp(qp)
        .ack_req(op == Opcode::MP_READ_REQUEST)
        .udp_src_port(0xC123)
        .payload(vec![9; n])
        .ext(|e| {
            e.mpeth = Some(MpethRepr {
                first: offset == 0,
                last: op == Opcode::MP_READ_REQUEST || offset as usize + n == 600,
                msn: Msn::new(3),
                offset,
                msg_len: 600,
                ..MpethRepr::default()
            });
            if op == Opcode::MP_READ_REQUEST {
                e.reth = Some(RethRepr {
                    va: 0x1000,
                    rkey: 7,
                    dma_len: 600,
                });
            }
        })
        .build()
}

#[test]
fn a_wrong_mp_read_response_is_caught_with_its_requirement() {
    // A 600 B MP READ at PSN 10 (PMTU 256: responses at PSNs 10, 11, 12),
    // answered out of order; frame 3 carries offset 256 at PSN 12 (the
    // conversation judge needs the request to tell), frame 4 200 B at
    // offset 0 (one packet shows it).
    use Opcode as O;
    let frames = [
        mp_read_packet(O::MP_READ_REQUEST, 10, 0, 0, 0x12),
        mp_read_packet(O::MP_READ_RESPONSE, 12, 512, 88, 0x22),
        mp_read_packet(O::MP_READ_RESPONSE, 12, 256, 256, 0x22),
        mp_read_packet(O::MP_READ_RESPONSE, 10, 0, 200, 0x22),
    ];
    let path = capture("mp-read.pcapng", &frames);
    let out = metaroce(&["check", "--pmtu", "256", "--format", "jsonl"], &path);
    let mpr: Vec<(u64, String)> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["id"].as_str().is_some_and(|id| id.starts_with("MR-MPR")))
        .map(|l| {
            (
                l["frame"].as_u64().unwrap(),
                l["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        mpr,
        [(3, "MR-MPR-1".to_owned()), (4, "MR-MPR-1".to_owned())],
        "{}",
        stdout(&out)
    );
    assert_eq!(out.status.code(), Some(1));
    std::fs::remove_file(path).unwrap();
}
