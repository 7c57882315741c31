//! Packetization: MR-PKT-1, 3, 4, 5, 6, MR-READ-2, MR-ACK-6, MR-UC-1,
//! MR-UD-1, MR-UD-4, MR-FLUSH-7, MR-EXT-5.

use super::{assert_clean, assert_only, ctx, data, judge, send_only, with_pmtu};
use metaroce_codec::ext::RethRepr;
use metaroce_codec::{Opcode, PacketBuilder};

fn reth(dma_len: u32) -> impl FnOnce(&mut metaroce_codec::ExtHeaders) {
    move |e| {
        e.reth = Some(RethRepr {
            va: 0x1000,
            rkey: 0x77,
            dma_len,
        })
    }
}

#[test]
fn mr_pkt_4_padcnt_is_minus_payload_mod_4_and_pad_bytes_are_zero() {
    let eight = PacketBuilder::new(Opcode::RC_SEND_ONLY)
        .ack_req(true)
        .payload(data(8));
    assert_clean(&eight, &ctx());
    let f = assert_only(&eight.clone().pad_count(1), &ctx(), "MR-PKT-4");
    assert_eq!(f[0].message, "PadCnt 1 but payload 8 bytes needs 0");
    assert_only(&send_only().pad_bytes([0, 1, 0]), &ctx(), "MR-PKT-4");
}

#[test]
fn mr_pkt_5_padcnt_zero_without_payload() {
    let read = PacketBuilder::new(Opcode::RC_READ_REQUEST).ext(reth(100));
    assert_clean(&read, &ctx());
    assert_only(&read.pad_count(2), &ctx(), "MR-PKT-5");
    let ack = PacketBuilder::new(Opcode::RC_ACK).pad_count(1);
    assert_only(&ack, &ctx(), "MR-PKT-5");
}

#[test]
fn mr_pkt_1_first_and_middle_carry_exactly_the_pmtu_last_at_least_one_byte() {
    let first = |len| PacketBuilder::new(Opcode::RC_SEND_FIRST).payload(data(len));
    assert_clean(&first(512), &ctx());
    assert_only(&first(300), &ctx(), "MR-PKT-1");
    assert_clean(&first(1024), &with_pmtu(1024));
    assert_only(&first(512), &with_pmtu(1024), "MR-PKT-1");
    let middle = PacketBuilder::new(Opcode(0x21)).payload(data(100));
    assert_only(&middle, &ctx(), "MR-PKT-1");
    let empty_last = PacketBuilder::new(Opcode::RC_SEND_LAST).ack_req(true);
    assert_only(&empty_last, &ctx(), "MR-PKT-1");
}

#[test]
fn mr_read_2_read_responses_are_packetized_by_the_pmtu() {
    let middle = PacketBuilder::new(Opcode::RC_READ_RESPONSE_MIDDLE).payload(data(100));
    assert_only(&middle, &with_pmtu(256), "MR-READ-2");
    let empty_last = PacketBuilder::new(Opcode::RC_READ_RESPONSE_LAST);
    assert_only(&empty_last, &ctx(), "MR-READ-2");
    assert_clean(&PacketBuilder::new(Opcode::RC_READ_RESPONSE_ONLY), &ctx());
}

#[test]
fn mr_pkt_3_reth_dma_length_is_the_message_length() {
    let only = PacketBuilder::new(Opcode::RC_WRITE_ONLY)
        .ack_req(true)
        .payload(data(40));
    assert_clean(&only.clone().ext(reth(40)), &ctx());
    assert_only(&only.ext(reth(41)), &ctx(), "MR-PKT-3");
    let first = PacketBuilder::new(Opcode::RC_WRITE_FIRST).payload(data(256));
    assert_clean(&first.clone().ext(reth(600)), &ctx());
    assert_only(&first.ext(reth(256)), &ctx(), "MR-PKT-3");
}

#[test]
fn mr_ext_5_reth_dma_length_at_most_2_pow_31() {
    let read = |len| PacketBuilder::new(Opcode::RC_READ_REQUEST).ext(reth(len));
    assert_clean(&read(0x8000_0000), &ctx());
    assert_only(&read(0x8000_0001), &ctx(), "MR-EXT-5");
}

#[test]
fn mr_pkt_6_ack_req_on_last_only_atomic_flush_and_atomic_write() {
    let send = PacketBuilder::new(Opcode::RC_SEND_ONLY).payload(data(4));
    assert_only(&send, &ctx(), "MR-PKT-6");
    assert_only(
        &PacketBuilder::new(Opcode::RC_FETCH_ADD),
        &ctx(),
        "MR-PKT-6",
    );
    assert_clean(
        &PacketBuilder::new(Opcode::RC_FETCH_ADD).ack_req(true),
        &ctx(),
    );
    // Not required on a First packet or a READ request.
    assert_clean(
        &PacketBuilder::new(Opcode::RC_SEND_FIRST).payload(data(256)),
        &ctx(),
    );
}

#[test]
fn mr_ack_6_responses_carry_se_0_and_ack_req_0() {
    assert_clean(&PacketBuilder::new(Opcode::RC_ACK), &ctx());
    assert_only(
        &PacketBuilder::new(Opcode::RC_ACK).ack_req(true),
        &ctx(),
        "MR-ACK-6",
    );
    let se = PacketBuilder::new(Opcode::RC_READ_RESPONSE_ONLY)
        .payload(data(4))
        .bth(|b| b.se = true);
    assert_only(&se, &ctx(), "MR-ACK-6");
}

#[test]
fn mr_uc_4_uc_packets_should_carry_ack_req_0() {
    let uc = PacketBuilder::new(Opcode::UC_SEND_ONLY).payload(data(4));
    assert_clean(&uc, &ctx());
    assert_only(&uc.ack_req(true), &ctx(), "MR-UC-4");
}

#[test]
fn mr_ud_10_ud_packets_should_carry_ack_req_0_and_qp1_is_not_ud_data() {
    let ud = PacketBuilder::new(Opcode::UD_SEND_ONLY).payload(data(4));
    assert_clean(&ud, &ctx());
    assert_only(&ud.clone().ack_req(true), &ctx(), "MR-UD-10");
    // A CM datagram for QP 1 (rxe sets AckReq on it) is judged by §6.22
    // (MR-CM-1), not as UD data.
    assert_clean(&ud.ack_req(true).bth(|b| b.dest_qp = 1), &ctx());
}

#[test]
fn mr_ud_4_no_ud_message_longer_than_the_pmtu() {
    let ud = PacketBuilder::new(Opcode::UD_SEND_ONLY).payload(data(2000));
    assert_clean(&ud, &with_pmtu(2048));
    let mut ids = super::ids(&judge(&ud, &with_pmtu(1024)));
    ids.sort_unstable();
    assert_eq!(ids, ["MR-ENC-23", "MR-UD-4"]);
}

#[test]
fn mr_flush_7_atomic_write_is_8_bytes_with_dma_length_8() {
    let aw = |len, dma| {
        PacketBuilder::new(Opcode::RC_ATOMIC_WRITE)
            .ack_req(true)
            .payload(data(len))
            .ext(reth(dma))
    };
    assert_clean(&aw(8, 8), &ctx());
    assert_only(&aw(4, 8), &ctx(), "MR-FLUSH-7");
    assert_only(&aw(8, 16), &ctx(), "MR-FLUSH-7");
}
