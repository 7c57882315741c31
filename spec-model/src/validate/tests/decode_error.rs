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

/// The frame of `b` (IPv6, no VLAN) with extension headers `ext` (each
/// `(type, bytes)`, bytes[0] rewritten to chain them) inserted before UDP.
fn with_extensions(b: PacketBuilder, ext: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let frame = b
        .ipv6("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap())
        .build();
    let ip = 14;
    let (head, udp) = frame.split_at(ip + 40);
    let mut out = head.to_vec();
    let mut chain: Vec<u8> = Vec::new();
    let mut next = 17u8;
    for (kind, bytes) in ext.iter().rev() {
        let mut h = bytes.clone();
        h[0] = next;
        h.extend(chain);
        chain = h;
        next = *kind;
    }
    out[ip + 6] = next;
    let len = u16::from_be_bytes([out[ip + 4], out[ip + 5]]) + chain.len() as u16;
    out[ip + 4..ip + 6].copy_from_slice(&len.to_be_bytes());
    out.extend(chain);
    out.extend_from_slice(udp);
    out
}

#[test]
fn mr_enc_8_no_ipv6_extension_header_before_a_metaroce_packet() {
    let hop_by_hop = (0u8, vec![0u8; 8]);
    let routing = (43u8, vec![0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let fragment = (44u8, vec![0, 0, 0, 0, 0, 0, 0, 9]);
    let destination = (60u8, vec![0u8; 8]);
    // Conforming: UDP directly after the fixed header.
    let plain = with_extensions(send_only(), &[]);
    assert!(super::judge_bytes(&plain, &ctx()).is_empty(), "MR-ENC-8");
    // Violating: one header, then all four, in front of UDP port 4791.
    let one = with_extensions(send_only(), std::slice::from_ref(&hop_by_hop));
    assert_eq!(super::ids(&super::judge_bytes(&one, &ctx())), ["MR-ENC-8"]);
    let all = with_extensions(send_only(), &[hop_by_hop, routing, fragment, destination]);
    let f = super::judge_bytes(&all, &ctx());
    assert_eq!(super::ids(&f), ["MR-ENC-8"]);
    assert!(f[0].message.contains("4 extension header(s)"), "{f:?}");
    // Not MetaRoCE: another UDP port behind the header gives no finding.
    let other = with_extensions(send_only().udp_dst_port(53), &[(60, vec![0u8; 8])]);
    assert!(super::judge_bytes(&other, &ctx()).is_empty());
    // Cut short inside the extension header: not known to be MetaRoCE.
    assert!(super::judge_bytes(&one[..14 + 40 + 4], &ctx()).is_empty());
}
