//! insta snapshots of decoded packets: a change in how any field decodes shows
//! up as a reviewed diff.

mod common;
use common::{ethernet, hex};
use metaroce_codec::ext::{MpethRepr, SackethRepr, Syndrome};
use metaroce_codec::{Frame, Msn, Opcode, PacketBuilder, ParseOptions, Psn, VlanTag};

fn decoded(bytes: &[u8]) -> Frame<'_> {
    Frame::parse(bytes, &ParseOptions::default()).unwrap()
}

#[test]
fn hardware_cnp() {
    let bytes = hex(
        "e41d2dab2bc27cfe90643b320800 45c2003c718c400040119161 0a001101 0a001201
         000012b700280000 8100ffff4000011800000000 00000000000000000000000000000000 82fd002a",
    );
    insta::assert_debug_snapshot!(decoded(&bytes));
}

#[test]
fn ipv6_rc_send_only_with_pad() {
    let bytes = ethernet(&hex(
        "668123450020114020010db8000000000000000000000001 20010db8000000000000000000000002
         c12312b700200000 0430ffff00000011 80000001 0102030405 000000 f8e9f089",
    ));
    insta::assert_debug_snapshot!(decoded(&bytes));
}

#[test]
fn vlan_rc_atomic_ack() {
    let bytes = PacketBuilder::new(Opcode::RC_ATOMIC_ACK)
        .vlan(VlanTag::dot1q(3, 100))
        .psn(0x00_1234)
        .ext(|e| {
            e.atomic_ack_eth.as_mut().unwrap().orig = 0x1122_3344_5566_7788;
            e.aeth.as_mut().unwrap().msn = Msn::new(42);
        })
        .build();
    insta::assert_debug_snapshot!(decoded(&bytes));
}

#[test]
fn mp_write_packet() {
    let bytes = PacketBuilder::new(Opcode::MP_WRITE)
        .udp_src_port(0xC0FE)
        .psn(77)
        .payload(vec![0xAB; 6])
        .ext(|e| {
            *e.mpeth.as_mut().unwrap() = MpethRepr {
                first: false,
                last: true,
                retransmission: true,
                msn: Msn::new(5),
                offset: 4096,
                msg_len: 4102,
                timestamp: 123_456_789,
                ..MpethRepr::default()
            };
            let reth = e.reth.as_mut().unwrap();
            reth.va = 0x7f00_0000_1000;
            reth.rkey = 0x0102_0304;
            reth.dma_len = 4102;
        })
        .build();
    insta::assert_debug_snapshot!(decoded(&bytes));
}

#[test]
fn mp_ack_with_sack() {
    let bytes = PacketBuilder::new(Opcode::MP_ACK)
        .psn(99)
        .ext(|e| {
            *e.sacketh.as_mut().unwrap() = SackethRepr {
                syndrome: Syndrome::ACK_UNLIMITED,
                msn: Msn::new(4),
                ecn_ce: true,
                sack_base_psn: Psn::new(101),
                sack_bitmap: 0xA000_0000_0000_0000,
                echoed_entropy: 0xC0FE,
                echoed_timestamp: 123_456_789,
                ..SackethRepr::default()
            };
        })
        .build();
    insta::assert_debug_snapshot!(decoded(&bytes));
}

#[test]
fn unknown_vendor_opcode_keeps_bytes_as_payload() {
    let bytes = PacketBuilder::new(Opcode(0xE5))
        .payload(vec![1, 2, 3, 4, 5, 6])
        .build();
    let base = ParseOptions {
        dialect: metaroce_codec::Dialect::Base,
        ..ParseOptions::default()
    };
    insta::assert_debug_snapshot!(Frame::parse(&bytes, &base).unwrap());
}
