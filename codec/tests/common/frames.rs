//! A set of frames covering every opcode the codec knows, built with the builder.

use metaroce_codec::ext::{AethRepr, MpethRepr, RethRepr, SackethRepr, Syndrome};
use metaroce_codec::{Dialect, Msn, Opcode, PacketBuilder, Psn, VlanTag};

/// Every opcode with a layout in the MetaRoCE dialect.
pub fn known_opcodes() -> Vec<Opcode> {
    (0..=255u8)
        .map(Opcode)
        .filter(|op| op.layout(Dialect::MetaRoce).is_some())
        .collect()
}

/// One builder per known opcode, with non-trivial field values, cycling
/// through IPv4/IPv6, 0–2 VLAN tags and payload sizes with every pad count.
pub fn sample_builders() -> Vec<(String, PacketBuilder)> {
    let mut out = Vec::new();
    for (i, op) in known_opcodes().into_iter().enumerate() {
        let payload_len = match op.layout(Dialect::MetaRoce).map(|l| l.payload) {
            Some(metaroce_codec::opcode::PayloadRule::Data) => {
                [0usize, 1, 2, 3, 5, 256, 1023][i % 7]
            }
            _ => 0,
        };
        let payload: Vec<u8> = (0..payload_len).map(|b| (b * 7 + i) as u8).collect();
        let mut b = PacketBuilder::new(op)
            .dest_qp(0x12_3456 ^ i as u32)
            .psn(0xFF_FFF0u32.wrapping_add(i as u32))
            .ack_req(i % 2 == 0)
            .udp_src_port(0xC000 | i as u16)
            .payload(payload)
            .ext(|e| {
                if let Some(r) = &mut e.reth {
                    *r = RethRepr {
                        va: 0x1122_3344_5566_7788,
                        rkey: 0xDEAD_BEEF,
                        dma_len: 4096,
                    };
                }
                if let Some(a) = &mut e.aeth {
                    *a = AethRepr {
                        syndrome: Syndrome(0x1F),
                        msn: Msn::new(0xABCDEF),
                    };
                }
                if let Some(m) = &mut e.mpeth {
                    *m = MpethRepr {
                        first: true,
                        last: i % 3 == 0,
                        msn: Msn::new(7),
                        offset: 8192,
                        msg_len: 65536,
                        timestamp: 0x0102_0304,
                        ..MpethRepr::default()
                    };
                }
                if let Some(s) = &mut e.sacketh {
                    *s = SackethRepr {
                        syndrome: Syndrome::ACK_UNLIMITED,
                        msn: Msn::new(3),
                        ecn_ce: true,
                        sack_base_psn: Psn::new(100),
                        sack_bitmap: 0xF0F0_0000_0000_0001,
                        echoed_entropy: 0xC123,
                        echoed_timestamp: 0x0A0B_0C0D,
                        ..SackethRepr::default()
                    };
                }
                if let Some(d) = &mut e.deth {
                    d.src_qp = 0x000042;
                }
            });
        if i % 3 == 1 {
            b = b
                .ipv6(
                    "2001:db8::1".parse().unwrap(),
                    "2001:db8::2".parse().unwrap(),
                )
                .flow_label(0x12345);
        }
        for _ in 0..(i % 3) {
            b = b.vlan(VlanTag::dot1q(3, 100 + i as u16));
        }
        out.push((format!("{:#04x}", op.0), b));
    }
    out
}
