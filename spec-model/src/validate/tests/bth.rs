//! BTH: MR-BTH-2, MR-BTH-4, MR-BTH-7, MR-BTH-9.

use super::{Context, assert_clean, assert_only, ctx, data, mp_send, send_only};
use metaroce_codec::{Opcode, PacketBuilder};

#[test]
fn mr_bth_2_tver_zero_and_m_either_value() {
    assert_only(&send_only().bth(|b| b.tver = 1), &ctx(), "MR-BTH-2");
    // v1.1: M (MigReq) 1 is what IBA sends for a QP in the Migrated state.
    assert_clean(&send_only().bth(|b| b.migreq = true), &ctx());
}

#[test]
fn mr_bth_9_reserved_and_congestion_bits_should_be_zero() {
    let cases = [
        send_only().bth(|b| b.fecn = true),
        send_only().bth(|b| b.becn = true),
        send_only().bth(|b| b.resv6a = 0x01),
        send_only().bth(|b| b.resv7 = 0x40),
    ];
    for b in &cases {
        assert_only(b, &ctx(), "MR-BTH-9");
    }
}

#[test]
fn mr_bth_4_p_key() {
    assert_only(&send_only().bth(|b| b.pkey = 0), &ctx(), "MR-BTH-4");
    // 0x8000: low 15 bits zero, invalid (IBA 10.9).
    assert_only(&send_only().bth(|b| b.pkey = 0x8000), &ctx(), "MR-BTH-4");
    let qp = Context {
        pkey: Some(0x8001),
        ..Context::default()
    };
    assert_only(&send_only(), &qp, "MR-BTH-4");
    assert_clean(&send_only().bth(|b| b.pkey = 0x8001), &qp);
}

#[test]
fn mr_bth_7_se_only_on_the_last_packet_of_send_or_write_with_immediate() {
    assert_clean(&send_only().bth(|b| b.se = true), &ctx());
    let first = PacketBuilder::new(Opcode::RC_SEND_FIRST)
        .payload(data(256))
        .bth(|b| b.se = true);
    assert_only(&first, &ctx(), "MR-BTH-7");
    let write_last = PacketBuilder::new(Opcode::RC_WRITE_LAST)
        .ack_req(true)
        .payload(data(5))
        .bth(|b| b.se = true);
    assert_only(&write_last, &ctx(), "MR-BTH-7");
    let mp_last = mp_send(256, 269, 13).bth(|b| b.se = true);
    assert_clean(&mp_last, &ctx());
    let mp_first = mp_send(0, 269, 256).bth(|b| b.se = true);
    assert_only(&mp_first, &ctx(), "MR-BTH-7");
}
