//! Frames that do not decode: MR-PKT-4, MR-ICRC-1, MR-EXT-3.

use super::{ctx, data, judge, send_only};
use metaroce_codec::{Opcode, PacketBuilder};

#[test]
fn mr_pkt_4_padcnt_beyond_the_bytes_after_the_headers() {
    let b = PacketBuilder::new(Opcode::RC_SEND_ONLY)
        .ack_req(true)
        .payload(*b"xy")
        .pad_count(3)
        .pad_bytes(vec![]);
    assert_eq!(super::ids(&judge(&b, &ctx())), ["MR-PKT-4"]);
}

#[test]
fn mr_icrc_1_no_room_for_the_icrc() {
    // UDP length leaves 2 bytes after BTH, then 10 bytes: BTH itself cut.
    let short = PacketBuilder::new(Opcode::RC_SEND_ONLY)
        .ack_req(true)
        .udp_length(8 + 12 + 2);
    assert_eq!(super::ids(&judge(&short, &ctx())), ["MR-ICRC-1"]);
    let shorter = send_only().udp_length(8 + 10);
    assert_eq!(super::ids(&judge(&shorter, &ctx())), ["MR-ICRC-1"]);
}

#[test]
fn mr_ext_3_headers_of_the_opcode_are_complete() {
    let no_reth = PacketBuilder::new(Opcode::RC_WRITE_ONLY)
        .ack_req(true)
        .without(metaroce_codec::ExtKind::Reth)
        .payload(data(4));
    assert_eq!(super::ids(&judge(&no_reth, &ctx())), ["MR-EXT-3"]);
}

#[test]
fn errors_before_the_roce_packet_give_no_finding() {
    // The frame is cut inside IPv4: not known to be MetaRoCE.
    assert!(judge(&send_only().truncate(30), &ctx()).is_empty());
}
