//! Extension headers: MR-EXT-1, MR-NAK-4, MR-READ-3, MR-ATOM-4.

use super::{assert_clean, assert_only, ctx, data, mp_send};
use metaroce_codec::ext::{AethRepr, DethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, PacketBuilder};

fn flush() -> PacketBuilder {
    PacketBuilder::new(Opcode::RC_FLUSH)
        .ack_req(true)
        .ext(|e| e.feth.as_mut().unwrap().placement_type = 1)
}

fn ack(syndrome: u8) -> PacketBuilder {
    PacketBuilder::new(Opcode::RC_ACK).aeth(AethRepr {
        syndrome: Syndrome(syndrome),
        msn: Msn::new(3),
    })
}

#[test]
fn mr_ext_1_reserved_extension_header_fields_are_zero() {
    let ud = PacketBuilder::new(Opcode::UD_SEND_ONLY).payload(data(4));
    let deth = ud.deth(DethRepr {
        qkey: 1,
        reserved: 0x80,
        src_qp: 5,
    });
    assert_clean(&flush(), &ctx());
    let cases = [
        deth,
        flush().ext(|e| e.feth.as_mut().unwrap().reserved = 1),
        flush().ext(|e| e.feth.as_mut().unwrap().selectivity_level = 2),
        flush().ext(|e| e.feth.as_mut().unwrap().placement_type = 0x5),
        mp_send(0, 13, 13).ext(|e| e.mpeth.as_mut().unwrap().reserved = 0x01),
        PacketBuilder::new(Opcode::MP_ACK).ext(|e| e.sacketh.as_mut().unwrap().reserved_flags = 1),
        PacketBuilder::new(Opcode::MP_ACK).ext(|e| e.sacketh.as_mut().unwrap().reserved = 1),
        PacketBuilder::new(Opcode::MP_ACK)
            .ext(|e| e.sacketh.as_mut().unwrap().syndrome = Syndrome(0x9F)),
        ack(0x40),
        ack(0x9F),
    ];
    for b in &cases {
        let f = assert_only(b, &ctx(), "MR-EXT-1");
        assert_eq!(f.len(), 1, "{f:?}");
    }
}

#[test]
fn mr_nak_4_base_sends_nak_codes_0_to_3_only() {
    for ok in [0x00, 0x1F, 0x2E, 0x60, 0x63] {
        assert_clean(&ack(ok), &ctx());
    }
    assert_only(&ack(0x64), &ctx(), "MR-NAK-4");
    assert_only(&ack(0x7F), &ctx(), "MR-NAK-4");
}

#[test]
fn mr_read_3_read_responses_carry_an_ack_syndrome() {
    let resp = PacketBuilder::new(Opcode::RC_READ_RESPONSE_ONLY)
        .payload(data(4))
        .aeth(AethRepr {
            syndrome: Syndrome(0x60),
            msn: Msn::new(1),
        });
    assert_only(&resp, &ctx(), "MR-READ-3");
}

#[test]
fn mr_atom_4_atomic_acknowledge_carries_an_ack_syndrome() {
    let atomic_ack = PacketBuilder::new(Opcode::RC_ATOMIC_ACK).aeth(AethRepr {
        syndrome: Syndrome(0x2C),
        msn: Msn::new(1),
    });
    assert_only(&atomic_ack, &ctx(), "MR-ATOM-4");
}
