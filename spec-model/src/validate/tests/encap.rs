//! Encapsulation: MR-ENC-1, 4, 6, 7, 11, 13, 16, 21, 23.

use super::{Context, assert_clean, assert_only, ctx, data, judge, mp_send, send_only, with_pmtu};
use crate::validate::encap::udp_checksum_of;
use metaroce_codec::ethernet::TPID_8021AD;
use metaroce_codec::{Frame, Opcode, PacketBuilder, ParseOptions, VlanTag};

fn v6(b: PacketBuilder) -> PacketBuilder {
    b.ipv6(
        "2001:db8::1".parse().unwrap(),
        "2001:db8::2".parse().unwrap(),
    )
}

#[test]
fn mr_enc_1_at_most_one_8021q_tag() {
    assert_clean(&send_only().vlan(VlanTag::dot1q(3, 100)), &ctx());
    let two = send_only()
        .vlan(VlanTag::dot1q(3, 100))
        .vlan(VlanTag::dot1q(0, 200));
    assert_only(&two, &ctx(), "MR-ENC-1");
    let qinq = send_only().vlan(VlanTag {
        tpid: TPID_8021AD,
        tci: 100,
    });
    assert_only(&qinq, &ctx(), "MR-ENC-1");
}

#[test]
fn mr_enc_4_no_ipv4_options() {
    let options = send_only().ipv4_options([1, 1, 1, 1]);
    let f = assert_only(&options, &ctx(), "MR-ENC-4");
    assert!(f[0].message.contains("IHL 6"), "{f:?}");
}

#[test]
fn mr_enc_6_dont_fragment_should_be_set() {
    assert_only(&send_only().ipv4_flags_frag(0), &ctx(), "MR-ENC-6");
}

#[test]
fn mr_enc_6_a_first_fragment_on_the_roce_port_is_judged() {
    // MF set: the codec does not decode UDP, but the IPv4 header is judged.
    let fragment = send_only().ipv4_flags_frag(0x2000);
    assert_only(&fragment, &ctx(), "MR-ENC-6");
    let other_port = fragment.udp_dst_port(53);
    assert_clean(&other_port, &ctx());
}

#[test]
fn mr_enc_7_ipv4_checksum_and_lengths() {
    assert_only(&send_only().ipv4_checksum(0x1234), &ctx(), "MR-ENC-7");
    // IP length 4 bytes longer than UDP's (the 4 bytes are in the datagram).
    let len = 20 + 8 + 12 + 16 + 4;
    let longer = send_only().ip_length(len + 4).trailer([0; 4]);
    let f = assert_only(&longer, &ctx(), "MR-ENC-7");
    assert!(f[0].message.contains("needs 60"), "{f:?}");
    let v6_longer = v6(send_only())
        .ip_length(8 + 12 + 16 + 4 + 4)
        .trailer([0; 4]);
    assert_only(&v6_longer, &ctx(), "MR-ENC-7");
    assert_clean(&v6(send_only()), &ctx());
}

#[test]
fn mr_enc_11_destination_port_4791() {
    let ports = Context {
        roce_ports: vec![4791, 4792],
        ..Context::default()
    };
    assert_clean(&send_only(), &ports);
    assert_only(&send_only().udp_dst_port(4792), &ports, "MR-ENC-11");
}

#[test]
fn mr_enc_13_any_source_port() {
    // v1.1: a MAY; Huawei uses the QPN, a ConnectX CNP port 0.
    assert_clean(&send_only().udp_src_port(0x1234), &ctx());
    assert_clean(&send_only().udp_src_port(0xFFFF), &ctx());
    assert_clean(&PacketBuilder::new(Opcode::CNP).udp_src_port(0), &ctx());
    // MP packets are judged by MR-MPS-1 instead.
    assert_only(&mp_send(0, 13, 13).udp_src_port(0x1234), &ctx(), "MR-MPS-1");
}

/// The UDP checksum of the builder's frame.
fn right_checksum(b: &PacketBuilder) -> u16 {
    let bytes = b.build();
    let frame = Frame::parse(&bytes, &ParseOptions::default()).unwrap();
    udp_checksum_of(
        frame.ip.as_ref().unwrap(),
        frame.udp.as_ref().unwrap(),
        frame.roce.as_ref().unwrap(),
    )
}

#[test]
fn mr_enc_16_udp_checksum_zero_or_correct() {
    for b in [send_only(), v6(send_only())] {
        let right = right_checksum(&b);
        assert_clean(&b.clone().udp_checksum(right), &ctx());
        assert_only(&b.udp_checksum(right ^ 0x0100), &ctx(), "MR-ENC-16");
    }
}

#[test]
fn mr_enc_16_checksum_agrees_with_spec_vector_v2() {
    // SPEC.md §5.4 V2 (from scapy): UDP checksum 0xaca2, ICRC valid. Its
    // BTH has M = 1, which MR-BTH-2 forbids; nothing else is wrong.
    let hex = "45010040047840004011b4d5c0a80007c0a80007c00012b7002caca2\
               2460ffff000000d300cf1710\
               4630818be28935d90e9a95505401be885e500000\
               78f353f3";
    let mut bytes = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    bytes.extend(
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()),
    );
    let frame = Frame::parse(&bytes, &ParseOptions::default()).unwrap();
    let icrc = metaroce_codec::icrc::verify(&frame);
    let findings = crate::validate::validate_frame(&frame, icrc, &ctx());
    // V2 has M = 1: allowed since v1.1 (MR-BTH-2).
    assert_eq!(super::ids(&findings), [] as [&str; 0], "{findings:#?}");
}

#[test]
fn mr_enc_21_no_ce_at_the_sender() {
    let ce = send_only().traffic_class(0x03);
    assert_clean(&ce, &ctx()); // a switch may have marked it
    let at_sender = Context {
        at_sender: true,
        ..Context::default()
    };
    assert_only(&ce, &at_sender, "MR-ENC-21");
    assert_clean(&send_only().traffic_class(0x02), &at_sender);
}

#[test]
fn mr_enc_23_payload_at_most_the_pmtu() {
    let only = |len| {
        PacketBuilder::new(Opcode::RC_SEND_ONLY)
            .ack_req(true)
            .payload(data(len))
    };
    assert_clean(&only(1024), &with_pmtu(1024));
    assert_only(&only(1025), &with_pmtu(1024), "MR-ENC-23");
    assert_clean(&only(4096), &ctx());
    assert_only(&only(4097), &ctx(), "MR-ENC-23");
    let f = judge(&only(1025), &with_pmtu(1024));
    assert!(f[0].message.contains("1025"), "{f:?}");
}
