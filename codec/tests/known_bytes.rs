//! Known bytes: the worked ICRC examples of SPEC §5.4 and a real
//! ConnectX-4 Lx CNP, parsed field by field, verified, and emitted back.

mod common;
use common::{ethernet, hex};
use metaroce_codec::ext::SyndromeKind;
use metaroce_codec::{Frame, IcrcStatus, IpRepr, Opcode, ParseOptions, icrc};

fn parse(bytes: &[u8]) -> Frame<'_> {
    Frame::parse(bytes, &ParseOptions::default()).expect("parses")
}

/// Ex 1: the real hardware CNP, Ethernet header included.
const CNP: &str = "e41d2dab2bc2 7cfe90643b32 0800
    45c2 003c 718c 4000 4011 9161 0a001101 0a001201
    0000 12b7 0028 0000
    81 00 ffff 40 000118 00 000000
    00000000000000000000000000000000
    82fd002a";

#[test]
fn ex1_hardware_cnp() {
    let bytes = hex(CNP);
    let frame = parse(&bytes);
    let Some(IpRepr::V4(ip)) = frame.ip else {
        panic!("ipv4")
    };
    assert_eq!(
        (ip.tos, ip.ident, ip.ttl, ip.checksum),
        (0xC2, 0x718C, 64, 0x9161)
    );
    assert_eq!(
        ip.compute_checksum(),
        0x9161,
        "IPv4 checksum of real hardware"
    );
    let udp = frame.udp.unwrap();
    assert_eq!(
        (udp.src_port, udp.dst_port, udp.length, udp.checksum),
        (0, 4791, 40, 0)
    );
    let roce = frame.roce.unwrap();
    assert_eq!(roce.bth.opcode, Opcode::CNP);
    assert!(roce.bth.becn && !roce.bth.fecn);
    assert_eq!(
        (roce.bth.pkey, roce.bth.dest_qp, roce.bth.psn.value()),
        (0xFFFF, 0x118, 0)
    );
    assert_eq!(roce.ext.cnp.unwrap().reserved, [0; 16]);
    assert!(roce.payload.is_empty() && roce.pad.is_empty());
    assert_eq!(roce.icrc_value(), 0x2A00_FD82);
    assert_eq!(icrc::verify(&frame), IcrcStatus::Valid);
    assert_eq!(frame.to_bytes(), bytes);
}

#[test]
fn ex2_scapy_uc_send_only_with_pad() {
    let bytes = ethernet(&hex(
        "45010040047840004011b4d5 c0a80007 c0a80007 c00012b7002caca2
         2460ffff000000d300cf1710
         4630818be28935d90e9a95505401be885e50 0000 78f353f3",
    ));
    let frame = parse(&bytes);
    let Some(IpRepr::V4(ip)) = frame.ip else {
        panic!("ipv4")
    };
    assert_eq!(ip.compute_checksum(), 0xB4D5);
    let roce = frame.roce.unwrap();
    assert_eq!(roce.bth.opcode, Opcode::UC_SEND_ONLY);
    assert!(roce.bth.migreq);
    assert_eq!(roce.bth.pad_count, 2);
    assert_eq!((roce.bth.dest_qp, roce.bth.psn.value()), (211, 0xCF1710));
    assert_eq!(roce.payload.len(), 18);
    assert_eq!(roce.pad, [0, 0]);
    assert_eq!(roce.icrc, [0x78, 0xf3, 0x53, 0xf3]);
    assert_eq!(icrc::verify(&frame), IcrcStatus::Valid);
    assert_eq!(frame.to_bytes(), bytes);
}

#[test]
fn ex3_ipv6_rc_send_only() {
    let bytes = ethernet(&hex(
        "668123450020114020010db8000000000000000000000001 20010db8000000000000000000000002
         c12312b700200000 0430ffff00000011 80000001 0102030405 000000 f8e9f089",
    ));
    let frame = parse(&bytes);
    let Some(IpRepr::V6(ip)) = frame.ip else {
        panic!("ipv6")
    };
    assert_eq!(
        (
            ip.traffic_class,
            ip.flow_label,
            ip.payload_len,
            ip.hop_limit
        ),
        (0x68, 0x12345, 32, 64)
    );
    let roce = frame.roce.unwrap();
    assert_eq!(roce.bth.opcode, Opcode::RC_SEND_ONLY);
    assert!(roce.bth.ack_req);
    assert_eq!((roce.bth.pad_count, roce.bth.psn.value()), (3, 1));
    assert_eq!(roce.payload, [1, 2, 3, 4, 5]);
    assert_eq!(roce.icrc_value(), 0x89F0_E9F8);
    assert_eq!(icrc::verify(&frame), IcrcStatus::Valid);
    assert_eq!(frame.to_bytes(), bytes);
}

#[test]
fn ex4_rc_acknowledge() {
    let bytes = ethernet(&hex(
        "4502003000004000401126b9 0a000002 0a000001 c00112b7001c0000
         1100ffff00000012 00000010 1f000005 2254c865",
    ));
    let frame = parse(&bytes);
    let roce = frame.roce.unwrap();
    assert_eq!(roce.bth.opcode, Opcode::RC_ACK);
    let aeth = roce.ext.aeth.unwrap();
    assert_eq!(aeth.syndrome.kind(), SyndromeKind::Ack { credit_code: 31 });
    assert_eq!(aeth.msn.value(), 5);
    assert_eq!(roce.bth.psn.value(), 0x10);
    assert_eq!(icrc::verify(&frame), IcrcStatus::Valid);
    assert_eq!(frame.to_bytes(), bytes);
}

/// SPEC §5.4 test ideas: masked fields leave the ICRC alone; any other bit changes it.
#[test]
fn masked_fields_do_not_change_the_icrc_and_others_do() {
    let base = hex(CNP);
    let ip = 14;
    let udp = ip + 20;
    let bth = udp + 8;
    let masked = [ip + 1, ip + 8, ip + 10, ip + 11, udp + 6, udp + 7, bth + 4];
    for at in 0..base.len() - 4 {
        let mut bytes = base.clone();
        bytes[at] ^= 0x01;
        let Ok(frame) = Frame::parse(&bytes, &ParseOptions::default()) else {
            continue; // a flipped length field may make the frame undecodable
        };
        let status = icrc::verify(&frame);
        assert_eq!(
            icrc::verify_wire(&frame, &bytes),
            status,
            "byte {at}: fast path agrees"
        );
        if status == IcrcStatus::NotRoce {
            continue; // a flipped EtherType, protocol or port makes it another protocol
        }
        if at < ip {
            assert_eq!(
                status,
                IcrcStatus::Valid,
                "Ethernet byte {at} is not covered"
            );
        } else if masked.contains(&at) {
            assert_eq!(status, IcrcStatus::Valid, "masked byte {at}");
        } else {
            assert!(
                matches!(status, IcrcStatus::Invalid { .. }),
                "covered byte {at}"
            );
        }
    }
}

#[test]
fn ipv6_masked_fields() {
    let base = ethernet(&hex(
        "668123450020114020010db8000000000000000000000001 20010db8000000000000000000000002
         c12312b700200000 0430ffff00000011 80000001 0102030405 000000 f8e9f089",
    ));
    for (at, mask) in [
        (14, 0x0F),
        (15, 0xFF),
        (16, 0xFF),
        (17, 0xFF),
        (21, 0xFF),
        (60, 0xFF),
        (61, 0xFF),
        (66, 0xFF),
    ] {
        let mut bytes = base.clone();
        bytes[at] ^= mask;
        let frame = Frame::parse(&bytes, &ParseOptions::default()).unwrap();
        assert_eq!(icrc::verify(&frame), IcrcStatus::Valid, "byte {at}");
    }
    let mut bytes = base.clone();
    bytes[14] ^= 0x10; // version nibble is covered, but is also checked by the parser
    assert!(Frame::parse(&bytes, &ParseOptions::default()).is_err());
}
