//! MP: MR-MPS-1, MR-MPT-9, MR-MPH-2, 6, 9, 10, 11, 12, 13, MR-MPR-1,
//! MR-MPR-7, MR-MPF-4, MR-MPA-8, MR-MPL-9, MR-MPT-5, MR-MPP-13.

use super::{Context, assert_clean, assert_only, ctx, data, mp_send, mpeth, with_pmtu};
use metaroce_codec::ext::{RethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, PacketBuilder};

fn mp_write(offset: u32, msg_len: u32, len: usize, dma_len: u32) -> PacketBuilder {
    let last = offset as usize + len == msg_len as usize;
    PacketBuilder::new(Opcode::MP_WRITE)
        .ack_req(last)
        .ext(|e| {
            e.mpeth = Some(mpeth(offset, msg_len, last));
            e.reth = Some(RethRepr {
                va: 0x8000,
                rkey: 0x12,
                dma_len,
            });
        })
        .payload(data(len))
}

fn read_request(m: metaroce_codec::ext::MpethRepr, dma_len: u32) -> PacketBuilder {
    PacketBuilder::new(Opcode::MP_READ_REQUEST)
        .ack_req(true)
        .ext(|e| {
            e.mpeth = Some(m);
            e.reth = Some(RethRepr {
                va: 0x8000,
                rkey: 0x12,
                dma_len,
            });
        })
}

fn probe() -> PacketBuilder {
    PacketBuilder::new(Opcode::MP_PROBE).ack_req(true)
}

fn mp_ack() -> PacketBuilder {
    PacketBuilder::new(Opcode::MP_ACK)
}

fn atomic_ack(bitmap: u64, syndrome: u8) -> PacketBuilder {
    PacketBuilder::new(Opcode::MP_ATOMIC_ACK).ext(|e| {
        let s = e.sacketh.as_mut().unwrap();
        s.sack_bitmap = bitmap;
        s.syndrome = Syndrome(syndrome);
    })
}

#[test]
fn mr_mps_1_source_port_is_an_entropy_value() {
    assert_clean(&mp_send(0, 13, 13).udp_src_port(0xFFFF), &ctx());
    assert_only(&mp_send(0, 13, 13).udp_src_port(0xBFFF), &ctx(), "MR-MPS-1");
    assert_only(&mp_ack().udp_src_port(7), &ctx(), "MR-MPS-1");
}

#[test]
fn mr_mpt_9_no_trimming_dscp_on_a_complete_packet() {
    let trim = Context {
        trim_dscp: Some(10),
        ..Context::default()
    };
    let marked = mp_send(0, 1024, 1024).traffic_class(10 << 2);
    assert_only(&marked, &trim, "MR-MPT-9");
    assert_clean(&mp_send(0, 1024, 1024).traffic_class(9 << 2), &trim);
    // Trimmed by a switch: payload cut, DSCP rewritten, ICRC no longer right.
    // Neither ICRC nor lengths are the sender's: no finding.
    let trimmed = mp_send(0, 1024, 0)
        .ack_req(true)
        .ext(|e| e.mpeth.as_mut().unwrap().last = true)
        .traffic_class(10 << 2)
        .corrupt_icrc();
    assert_clean(&trimmed, &trim);
}

#[test]
fn mr_mph_2_f_and_l_flags_follow_offset_and_length() {
    assert_clean(&mp_send(0, 13, 13), &ctx());
    let no_f = mp_send(0, 13, 13).ext(|e| e.mpeth.as_mut().unwrap().first = false);
    assert_only(&no_f, &ctx(), "MR-MPH-2");
    let f_late = mp_send(256, 269, 13).ext(|e| e.mpeth.as_mut().unwrap().first = true);
    assert_only(&f_late, &ctx(), "MR-MPH-2");
    let no_l = mp_send(0, 13, 13).ext(|e| e.mpeth.as_mut().unwrap().last = false);
    assert_only(&no_l, &ctx(), "MR-MPH-2");
    let early_l = mp_send(0, 1000, 256)
        .ack_req(true)
        .ext(|e| e.mpeth.as_mut().unwrap().last = true);
    assert_only(&early_l, &ctx(), "MR-MPH-2");
}

#[test]
fn mr_mph_10_packetization_by_the_pmtu() {
    assert_clean(&mp_send(1024, 3000, 1024), &with_pmtu(1024));
    assert_only(&mp_send(512, 3000, 1024), &with_pmtu(1024), "MR-MPH-10");
    assert_only(&mp_send(1024, 3000, 512), &with_pmtu(1024), "MR-MPH-10");
    // PMTU unknown: a packet that does not end the message carries a PMTU.
    assert_only(&mp_send(0, 3000, 300), &ctx(), "MR-MPH-10");
    assert_only(&mp_send(100, 3000, 256), &ctx(), "MR-MPH-10");
    assert_clean(&mp_send(2048, 3000, 952), &ctx());
    // Beyond the message.
    let beyond = mp_send(0, 10, 13).ext(|e| e.mpeth.as_mut().unwrap().last = false);
    assert_only(&beyond, &ctx(), "MR-MPH-10");
}

#[test]
fn mr_mpr_1_read_responses_one_per_pmtu() {
    let resp = |offset, msg_len, len| {
        let last = offset as usize + len == msg_len as usize;
        PacketBuilder::new(Opcode::MP_READ_RESPONSE)
            .ext(move |e| e.mpeth = Some(mpeth(offset, msg_len, last)))
            .payload(data(len))
    };
    assert_clean(&resp(0, 600, 256), &with_pmtu(256));
    assert_only(&resp(0, 600, 100), &with_pmtu(256), "MR-MPR-1");
}

#[test]
fn mr_mph_11_mp_write_reth_covers_the_message() {
    assert_clean(&mp_write(0, 13, 13, 13), &ctx());
    assert_only(&mp_write(0, 13, 13, 12), &ctx(), "MR-MPH-11");
}

#[test]
fn mr_mph_12_read_request_offset_0_whole_length_or_a_first_part() {
    assert_clean(&read_request(mpeth(0, 5000, true), 5000), &ctx());
    // SPEC v1.2: a first part of a multiple of PMTU, L clear.
    assert_clean(&read_request(mpeth(0, 5000, false), 4096), &with_pmtu(1024));
    assert_only(
        &read_request(mpeth(0, 5000, false), 4000),
        &ctx(),
        "MR-MPH-12",
    );
    assert_only(&read_request(mpeth(0, 5000, false), 0), &ctx(), "MR-MPH-12");
    // L must say whether the request reaches the end of the read.
    assert_only(
        &read_request(mpeth(0, 5000, false), 5000),
        &ctx(),
        "MR-MPH-2",
    );
    assert_only(
        &read_request(mpeth(0, 5000, true), 4096),
        &ctx(),
        "MR-MPH-2",
    );
}

#[test]
fn mr_mpr_11_further_read_part_inside_the_read_at_a_pmtu_boundary() {
    // R clear, offset 1024: a further part (SPEC v1.2), no longer a fault.
    assert_clean(
        &read_request(mpeth(1024, 5000, true), 3976),
        &with_pmtu(1024),
    );
    assert_clean(
        &read_request(mpeth(1024, 5000, false), 2048),
        &with_pmtu(1024),
    );
    assert_only(
        &read_request(mpeth(1000, 5000, true), 4000),
        &with_pmtu(1024),
        "MR-MPR-11",
    );
    assert_only(
        &read_request(mpeth(1024, 5000, false), 4000),
        &with_pmtu(1024),
        "MR-MPR-11",
    );
}

#[test]
fn mr_mpr_7_read_re_request_inside_the_read_at_a_pmtu_boundary() {
    let rereq = |offset, dma| {
        let mut m = mpeth(offset, 5000, false);
        m.retransmission = true;
        read_request(m, dma)
    };
    assert_clean(&rereq(1024, 2048), &with_pmtu(1024));
    assert_only(&rereq(1024, 4000), &with_pmtu(1024), "MR-MPR-7");
    assert_only(&rereq(512, 1024), &with_pmtu(1024), "MR-MPR-7");
    assert_only(&rereq(100, 1024), &ctx(), "MR-MPR-7");
    // SPEC v1.2 §7.9: a range not a multiple of PMTU must end the read.
    assert_only(&rereq(1024, 1000), &with_pmtu(1024), "MR-MPR-7");
    assert_only(
        &read_request(mpeth(1024, 5000, false), 1000),
        &with_pmtu(1024),
        "MR-MPR-11",
    );
}

#[test]
fn mr_mph_13_atomic_offset_0_length_8_f_and_l() {
    let atomic = |msg_len| {
        PacketBuilder::new(Opcode::MP_FETCH_ADD)
            .ack_req(true)
            .ext(move |e| e.mpeth = Some(mpeth(0, msg_len, true)))
    };
    assert_clean(&atomic(8), &ctx());
    assert_only(&atomic(16), &ctx(), "MR-MPH-13");
}

#[test]
fn mr_mph_9_ack_req_with_l_with_r_and_on_probes() {
    let no_ack_req = mp_send(0, 13, 13).ack_req(false);
    assert_only(&no_ack_req, &ctx(), "MR-MPH-9");
    let retransmission =
        mp_send(0, 1000, 256).ext(|e| e.mpeth.as_mut().unwrap().retransmission = true);
    assert_only(&retransmission, &ctx(), "MR-MPH-9");
    assert_clean(&retransmission.ack_req(true), &ctx());
    assert_only(&probe().ack_req(false), &ctx(), "MR-MPH-9");
}

#[test]
fn mr_mpf_4_probe_format() {
    assert_clean(&probe(), &ctx());
    let cases = [
        probe().ext(|e| e.mpeth.as_mut().unwrap().first = true),
        probe().ext(|e| e.mpeth.as_mut().unwrap().msn = Msn::new(3)),
        probe().ext(|e| e.mpeth.as_mut().unwrap().msg_len = 8),
        probe().payload([1, 2, 3, 4]),
        probe().pad_count(1),
    ];
    for b in &cases {
        let f = assert_only(b, &ctx(), "MR-MPF-4");
        assert_eq!(f.len(), 1, "{f:?}");
    }
}

#[test]
fn mr_mph_6_mp_acknowledgements_carry_ack_req_se_and_padcnt_0() {
    assert_clean(&mp_ack(), &ctx());
    for b in [
        mp_ack().ack_req(true),
        mp_ack().bth(|b| b.se = true),
        mp_ack().pad_count(3),
    ] {
        assert_only(&b, &ctx(), "MR-MPH-6");
    }
}

#[test]
fn mr_mpa_8_mp_acknowledges_with_syndrome_0x1f() {
    let credit = mp_ack().ext(|e| e.sacketh.as_mut().unwrap().syndrome = Syndrome(0x05));
    assert_only(&credit, &ctx(), "MR-MPA-8");
    for nak in [0x2C, 0x61] {
        let b = mp_ack().ext(move |e| e.sacketh.as_mut().unwrap().syndrome = Syndrome(nak));
        assert_clean(&b, &ctx());
    }
}

#[test]
fn mr_mpt_5_a_trimmed_nak_has_t_set() {
    let nak = |trimmed| {
        mp_ack().ext(move |e| {
            let s = e.sacketh.as_mut().unwrap();
            s.syndrome = Syndrome(0x65);
            s.trimmed = trimmed;
        })
    };
    assert_clean(&nak(true), &ctx());
    assert_only(&nak(false), &ctx(), "MR-MPT-5");
}

#[test]
fn mr_mpl_9_no_nak_code_0_from_an_mp_responder() {
    let seq = mp_ack().ext(|e| e.sacketh.as_mut().unwrap().syndrome = Syndrome(0x60));
    assert_only(&seq, &ctx(), "MR-MPL-9");
}

#[test]
fn mr_mpp_13_atomic_acknowledge_acknowledges_the_request_psn() {
    assert_clean(&atomic_ack(1 << 63, 0x1F), &ctx());
    assert_only(&atomic_ack(1, 0x1F), &ctx(), "MR-MPP-13");
    assert_only(&atomic_ack(1 << 63, 0x62), &ctx(), "MR-MPP-13");
}

#[test]
fn mr_mps_8_flow_label_is_the_entropy_value() {
    let declared = Context {
        mp_flow_label_entropy: true,
        ..Context::default()
    };
    let v6 = |b: PacketBuilder| b.ipv6("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap());
    // Conforming: flow label = source port, zero-extended, on requests and ACKs.
    assert_clean(
        &v6(mp_send(0, 13, 13))
            .udp_src_port(0xC123)
            .flow_label(0xC123),
        &declared,
    );
    assert_clean(
        &v6(mp_ack()).udp_src_port(0xFFFE).flow_label(0xFFFE),
        &declared,
    );
    // Violating: another label, or one with bits above the 16-bit value.
    assert_only(
        &v6(mp_send(0, 13, 13))
            .udp_src_port(0xC123)
            .flow_label(0xC124),
        &declared,
        "MR-MPS-8",
    );
    assert_only(
        &v6(probe()).udp_src_port(0xC123).flow_label(0x1_C123),
        &declared,
        "MR-MPS-8",
    );
    // Not declared: the label is not judged per packet; IPv4 has none.
    assert_clean(
        &v6(mp_send(0, 13, 13)).udp_src_port(0xC123).flow_label(7),
        &ctx(),
    );
    assert_clean(&mp_send(0, 13, 13).udp_src_port(0xC123), &declared);
}
