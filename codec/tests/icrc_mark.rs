//! `icrc::verify_wire_marked`: the same verdict as `verify_wire`, and a
//! payload mark that recognises the packet's payload (and no other) from the
//! CRC states taken on the way.

use metaroce_codec::ext::RethRepr;
use metaroce_codec::icrc::{self, IcrcStatus};
use metaroce_codec::{Frame, Opcode, PacketBuilder, ParseOptions};
use std::net::Ipv4Addr;

fn frames() -> Vec<Vec<u8>> {
    let a = Ipv4Addr::new(10, 0, 0, 1);
    let b = Ipv4Addr::new(10, 0, 0, 2);
    let payload = |n: usize| (0..n).map(|i| (i * 7 + 3) as u8).collect::<Vec<u8>>();
    vec![
        PacketBuilder::new(Opcode::RC_SEND_ONLY)
            .payload(payload(256))
            .ipv4(a, b)
            .build(),
        // Pad bytes after a 5-byte payload, and a RETH before it.
        PacketBuilder::new(Opcode::RC_WRITE_ONLY)
            .ext(|e| {
                e.reth = Some(RethRepr {
                    va: 0x1000,
                    rkey: 7,
                    dma_len: 5,
                });
            })
            .payload(payload(5))
            .ipv4_ident(99)
            .ipv4(a, b)
            .build(),
        PacketBuilder::new(Opcode::RC_WRITE_MIDDLE)
            .payload(payload(4096))
            .ipv6("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap())
            .build(),
        // No payload at all.
        PacketBuilder::new(Opcode::RC_ACK).ipv4(b, a).build(),
    ]
}

#[test]
fn the_mark_recognises_the_payload_and_the_verdict_is_unchanged() {
    for bytes in frames() {
        let frame = Frame::parse(&bytes, &ParseOptions::default()).expect("parses");
        let (status, mark) = icrc::verify_wire_marked(&frame, &bytes);
        assert_eq!(status, icrc::verify_wire(&frame, &bytes));
        assert_eq!(status, IcrcStatus::Valid);
        let roce = frame.roce.as_ref().expect("RoCE");
        let mark = mark.expect("a RoCE frame is marked");
        assert_eq!(mark.len as usize, roce.payload.len());
        assert_eq!(mark.payload_crc(), crc32fast::hash(roce.payload));
        assert!(mark.matches(roce.payload));
        // One bit flipped, or one byte fewer: not the payload marked.
        if let Some((&first, rest)) = roce.payload.split_first() {
            let mut other = roce.payload.to_vec();
            other[0] = first ^ 0x01;
            assert!(!mark.matches(&other));
            assert!(!mark.matches(rest));
        }
    }
}

#[test]
fn a_corrupted_frame_is_marked_by_its_bytes() {
    // The mark describes the bytes on the wire, whatever the trailer says.
    let mut bytes = frames().swap_remove(0);
    let at = bytes.len() - 10;
    bytes[at] ^= 0xFF; // in the payload
    let frame = Frame::parse(&bytes, &ParseOptions::default()).expect("parses");
    let (status, mark) = icrc::verify_wire_marked(&frame, &bytes);
    assert!(matches!(status, IcrcStatus::Invalid { .. }));
    let roce = frame.roce.as_ref().expect("RoCE");
    assert!(mark.expect("marked").matches(roce.payload));
}

#[test]
fn a_frame_that_is_not_roce_has_no_mark() {
    let bytes = frames().swap_remove(0);
    let frame = Frame::parse(&bytes, &ParseOptions::default()).expect("parses");
    // Bytes other than the frame's: the frame's own values are used, unmarked.
    let (status, mark) = icrc::verify_wire_marked(&frame, &bytes[..bytes.len() - 1]);
    assert_eq!(status, icrc::verify(&frame));
    assert_eq!(mark, None);
}
