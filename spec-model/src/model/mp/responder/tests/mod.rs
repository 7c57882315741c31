//! Responder tests: one or more per requirement, conforming and violating.

use super::*;
use crate::model::mp::memory::{Access, MemoryRegion, RecvQueue, RecvWr};
use crate::model::mp::spec_allows;
use crate::model::mp::testutil::*;
use crate::model::{Field, SyndromeSpec, WcStatus};
use metaroce_codec::ext::{SackethRepr, Syndrome};

const RKEY: u32 = 0x1234;
const VA: u64 = 0x10_0000;
const BUF: u32 = 0x77;

fn cfg() -> MpConfig {
    MpConfig {
        pmtu: 256,
        window: 64,
        ..MpConfig::default()
    }
}

fn responder() -> MpResponder {
    let data: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
    MpResponder::new(cfg(), 0x22, psn(100))
        .with_region(MemoryRegion::known(RKEY, VA, &data, Access::ALL))
        .with_region(MemoryRegion::unknown(BUF, 0, 8192, Access::default()))
        .with_recv_queue(RecvQueue::Known(vec![
            RecvWr {
                wr: 0,
                key: BUF,
                offset: 0,
                len: 4096,
            },
            RecvWr {
                wr: 1,
                key: BUF,
                offset: 4096,
                len: 4096,
            },
        ]))
}

fn step(r: &MpResponder, b: metaroce_codec::PacketBuilder, now: u64) -> (MpResponder, Outcomes) {
    let w = wire(b);
    r.on_packet(&w.roce(), &at(now, 0xC100))
}

fn completions(o: &Outcomes) -> Vec<u64> {
    o.required
        .iter()
        .filter_map(|c| match &c.value {
            Effect::Complete(c) => Some(c.wr),
            _ => None,
        })
        .collect()
}

#[test]
fn write_placed_on_arrival_mr_mpp_1() {
    let r = responder();
    // Second packet of a two-packet WRITE arrives first: placed at VA + 256.
    let (r, o) = step(&r, write(101, 0, 256, 512, VA, RKEY, &[7; 256]), 0);
    assert_eq!(writes(&o), vec![(RKEY, 256, vec![7; 256])], "MR-MPP-1");
    assert_eq!(
        r.completed, 0,
        "MR-MPP-6: not complete until every byte is placed"
    );
    let (r, o) = step(&r, write(100, 0, 0, 512, VA, RKEY, &[9; 256]), 10);
    assert_eq!(writes(&o), vec![(RKEY, 0, vec![9; 256])]);
    assert_eq!(r.completed, 1);
    assert_eq!(r.ack_msn(), Msn::new(0), "MR-MPA-7");
}

#[test]
fn in_order_completion_with_out_of_order_placement_mr_mpp_6() {
    let r = responder();
    // msn 0: SEND of 2 packets (PSN 100, 101); msn 1: SEND of 1 packet (PSN 102).
    let (r, o) = step(&r, req(Opcode::MP_SEND, 101, 0, 256, 300, &[2; 44]), 0);
    assert_eq!(
        writes(&o),
        vec![(BUF, 256, vec![2; 44])],
        "MR-MPP-4: at MPETH offset in WR 0"
    );
    let (r, o) = step(&r, req(Opcode::MP_SEND, 102, 1, 0, 3, &[3; 3]), 1);
    assert_eq!(
        writes(&o),
        vec![(BUF, 4096, vec![3; 3])],
        "second receive WR"
    );
    assert!(
        completions(&o).is_empty(),
        "MR-MPP-6: msn 1 waits for msn 0"
    );
    let (r, o) = step(&r, req(Opcode::MP_SEND, 100, 0, 0, 300, &[1; 256]), 2);
    assert_eq!(
        completions(&o),
        vec![0, 1],
        "MR-MPP-6: completions in MSN order"
    );
    assert_eq!(r.completed, 2);
    assert_eq!(r.received.cum, psn(102));
}

#[test]
fn send_waits_for_receive_determination_mr_mpp_4_mr_mpp_5() {
    let r = responder();
    // msn 1 arrives while msn 0 is unknown: no staging → not placed, not received.
    let (r, o) = step(&r, req(Opcode::MP_SEND, 101, 1, 0, 3, &[3; 3]), 0);
    assert!(writes(&o).is_empty(), "MR-MPP-4");
    assert!(
        !r.received.is_received(psn(101)),
        "MR-MPP-5: not reported received"
    );
    for a in optional_sends(&o) {
        assert_eq!(a.sacketh.sack_bitmap, Field::Exact(0), "MR-MPP-5");
    }
    // With staging, the packet is staged, reported, and placed later.
    let mut r2 = responder();
    r2.cfg.max_staged_bytes = 1024;
    let (r2, o) = step(&r2, req(Opcode::MP_SEND, 101, 1, 0, 3, &[3; 3]), 0);
    assert!(writes(&o).is_empty());
    assert!(r2.received.is_received(psn(101)));
    let (_, o) = step(&r2, req(Opcode::MP_SEND, 100, 0, 0, 1, &[1]), 1);
    assert_eq!(writes(&o), vec![(BUF, 0, vec![1]), (BUF, 4096, vec![3; 3])]);
    assert_eq!(completions(&o), vec![0, 1]);
}

#[test]
fn header_checks_nak_0x61_mr_mpp_3() {
    // Conforming first packet accepted; a packet whose offset is not a multiple of PMTU → NAK 0x61.
    let r = responder();
    let (_, ok) = step(&r, write(100, 0, 0, 512, VA, RKEY, &[0; 256]), 0);
    assert!(!ok.required.iter().any(|c| c.value == Effect::EnterError));
    let (r2, o) = step(&r, write(101, 0, 100, 512, VA, RKEY, &[0; 256]), 0);
    let s = required_sends(&o);
    assert_eq!(
        s[0].syndrome,
        Some(SyndromeSpec::Exact(Syndrome::NAK_INVALID_REQUEST)),
        "MR-MPP-3"
    );
    assert_eq!(
        s[0].sacketh.sack_base_psn,
        Field::Exact(psn(101)),
        "MR-MPP-15: base = offending PSN"
    );
    assert!(
        o.required.iter().any(|c| c.value == Effect::EnterError),
        "MR-MPP-15"
    );
    assert!(writes(&o).is_empty());
    assert!(r2.error);
    // RETH that differs from an earlier packet of the same MSN.
    let (r, _) = step(&r, write(100, 0, 0, 512, VA, RKEY, &[0; 256]), 0);
    let (_, o) = step(&r, write(101, 0, 256, 512, VA + 8, RKEY, &[0; 256]), 0);
    assert_eq!(
        required_sends(&o)[0].syndrome,
        Some(SyndromeSpec::Exact(Syndrome::NAK_INVALID_REQUEST)),
        "MR-MPP-3"
    );
    // L clear with a short payload.
    let (_, o) = step(
        &responder(),
        write(100, 0, 0, 512, VA, RKEY, &[0; 100]).ext(|e| e.mpeth.as_mut().unwrap().last = false),
        0,
    );
    assert_eq!(
        required_sends(&o)[0].syndrome,
        Some(SyndromeSpec::Exact(Syndrome::NAK_INVALID_REQUEST)),
        "MR-MPP-3"
    );
}

#[test]
fn key_check_before_placement_mr_mpp_2() {
    let r = responder();
    let (_, o) = step(&r, write(100, 0, 0, 256, VA, RKEY ^ 1, &[0; 256]), 0);
    assert!(writes(&o).is_empty(), "MR-MPP-2: nothing placed");
    assert_eq!(
        required_sends(&o)[0].syndrome,
        Some(SyndromeSpec::Exact(Syndrome::NAK_REMOTE_ACCESS)),
        "MR-MPP-2"
    );
    // Range past the region's end, even for a packet inside it (MR-SEC-5).
    let (_, o) = step(
        &r,
        write(100, 0, 0, 8192, VA, RKEY, &[0; 256]).ext(|e| e.mpeth.as_mut().unwrap().last = false),
        0,
    );
    assert!(writes(&o).is_empty(), "MR-SEC-5");
}

#[test]
fn window_drop_and_counter_mr_mpw_1() {
    let r = responder();
    // c = 99, W = 64: PSN 163 is in, 164 is out.
    let (r, o) = step(&r, write(164, 0, 0, 1, VA, RKEY, &[1]), 0);
    assert_eq!(
        o.required[0].value,
        Effect::Drop {
            counter: Some("mp_out_of_window")
        },
        "MR-MPW-1"
    );
    assert_eq!(r.counters.mp_out_of_window, 1);
    let (_, o) = step(&r, write(163, 0, 0, 1, VA, RKEY, &[1]), 0);
    assert_eq!(writes(&o).len(), 1, "MR-MPW-1: at W is inside");
}

#[test]
fn duplicate_acked_not_placed_mr_mpw_3() {
    let r = responder();
    let (r, _) = step(&r, write(100, 0, 0, 1, VA, RKEY, &[1]), 0);
    let (r, o) = step(
        &r,
        write(100, 0, 0, 1, VA, RKEY, &[1])
            .ext(|e| e.mpeth.as_mut().unwrap().retransmission = true),
        5,
    );
    assert!(writes(&o).is_empty(), "MR-MPP-8");
    let a = required_sends(&o);
    assert_eq!(a.len(), 1, "MR-MPW-3");
    assert_eq!(a[0].psn, Field::Exact(psn(100)));
    assert_eq!(a[0].sacketh.retransmission, Field::Exact(true), "MR-MPA-6");
    assert_eq!(r.counters.duplicate_requests, 1);
}

#[test]
fn ack_policy_coalescing_mr_mpa_1_mr_mpa_2() {
    let mut c = cfg();
    c.ack_coalesce_count = 4;
    c.window = 1024;
    let mut r = MpResponder::new(c, 0x22, psn(0)).with_region(MemoryRegion::unknown(
        RKEY,
        VA,
        1 << 20,
        Access::ALL,
    ));
    // In-order middle packets without AckReq: ACK allowed, not required, until the count.
    for i in 0..3u32 {
        let (n, o) = step(
            &r,
            write(i, 0, i * 256, 8192, VA, RKEY, &[0; 256]),
            u64::from(i),
        );
        assert!(required_sends(&o).is_empty(), "MR-MPA-2 allows coalescing");
        assert_eq!(optional_sends(&o).len(), 1);
        r = n;
    }
    let (r, o) = step(&r, write(3, 0, 768, 8192, VA, RKEY, &[0; 256]), 3);
    assert_eq!(required_sends(&o).len(), 1, "MR-MPA-2: count reached");
    // Time limit: one uncovered packet, timer at 8 µs.
    let (r, _) = step(&r, write(4, 0, 1024, 8192, VA, RKEY, &[0; 256]), 10);
    let (_, o) = r.on_timer(10 + 7_999);
    assert!(required_sends(&o).is_empty());
    let (r, o) = r.on_timer(10 + 8_000);
    assert_eq!(required_sends(&o).len(), 1, "MR-MPA-2: coalesce time");
    // Opening a gap requires an ACK (MR-MPA-1) with base c + 1 and the bit set.
    let (r, o) = step(&r, write(7, 0, 7 * 256, 8192, VA, RKEY, &[0; 256]), 20_000);
    let a = required_sends(&o);
    assert_eq!(a.len(), 1, "MR-MPA-1: opens a gap");
    assert_eq!(a[0].sacketh.sack_base_psn, Field::Exact(psn(5)));
    assert_eq!(
        a[0].sacketh.sack_bitmap,
        Field::Exact(1u64 << (63 - 2)),
        "MR-MPA-4"
    );
    // Filling it requires one too.
    let (_, o) = step(&r, write(5, 0, 5 * 256, 8192, VA, RKEY, &[0; 256]), 20_001);
    assert_eq!(required_sends(&o).len(), 1, "MR-MPA-1: fills a gap");
    // CE also requires one (MR-MPA-1) and sets E (MR-MPA-6).
    let w = wire(write(6, 0, 6 * 256, 8192, VA, RKEY, &[0; 256]));
    let (_, o) = r.on_packet(
        &w.roce(),
        &ArrivalInfo {
            ecn_ce: true,
            ..at(20_002, 0xC005)
        },
    );
    let a = required_sends(&o);
    assert_eq!(a[0].sacketh.ecn_ce, Field::Exact(true), "MR-MPA-6");
    assert_eq!(
        a[0].sacketh.echoed_entropy,
        Field::Exact(0xC005),
        "MR-MPA-6"
    );
    assert_eq!(
        a[0].sacketh.echoed_timestamp,
        Field::Exact(1006),
        "MR-MPA-6"
    );
}

#[test]
fn ack_content_mr_mpa_3_mr_mpa_7_mr_mpa_8_mr_mph_6() {
    let r = responder();
    let w = wire(write(101, 0, 256, 512, VA, RKEY, &[0; 256]));
    let (_, o) = r.on_packet(&w.roce(), &at(0, 0xC100));
    let a = required_sends(&o)[0].clone();
    assert_eq!(a.psn, Field::Exact(psn(99)), "MR-MPA-3: BTH PSN = c");
    assert_eq!(a.msn, Field::Exact(Msn::new(0xFF_FFFF)), "MR-MPA-7");
    assert_eq!(
        a.syndrome,
        Some(SyndromeSpec::Exact(Syndrome(0x1F))),
        "MR-MPA-8"
    );
    assert_eq!(a.headers.ack_req, Field::Exact(false), "MR-MPH-6");
    // A conforming ACK matches; one with syndrome 0x00 or a wrong bitmap does not.
    let good = SackethRepr {
        syndrome: Syndrome(0x1F),
        msn: Msn::new(0xFF_FFFF),
        sack_base_psn: psn(100),
        sack_bitmap: 1 << 62,
        echoed_entropy: 0xC100,
        echoed_timestamp: 1101,
        ..SackethRepr::default()
    };
    let ok = wire(ack(99, good));
    assert!(spec_allows(&a, &ok.roce(), 0xC000), "MR-MPA-4");
    let bad = wire(ack(
        99,
        SackethRepr {
            sack_bitmap: 3 << 62,
            ..good
        },
    ));
    assert!(
        !spec_allows(&a, &bad.roce(), 0xC000),
        "MR-MPA-4 violated: PSN 100 not received"
    );
    let bad = wire(ack(
        99,
        SackethRepr {
            syndrome: Syndrome(0),
            ..good
        },
    ));
    assert!(!spec_allows(&a, &bad.roce(), 0xC000), "MR-MPA-8 violated");
    assert!(
        !spec_allows(&a, &ok.roce(), 0x1234),
        "MR-MPS-1 violated: port outside the set"
    );
}

#[test]
fn ack_dscp_mr_mpa_12() {
    use crate::model::mp::spec_allows_dscp;
    let w = wire(write(101, 0, 256, 512, VA, RKEY, &[0; 256]));
    // Without mp_ack_dscp: the traffic class's DSCP.
    let mut r = responder();
    r.cfg.dscp = 10;
    let (_, o) = r.on_packet(&w.roce(), &at(0, 0xC100));
    let a = required_sends(&o)[0].clone();
    assert!(spec_allows_dscp(&a, 10) && !spec_allows_dscp(&a, 46));
    // With it: that DSCP, not the data DSCP.
    r.cfg.ack_dscp = Some(46);
    let (_, o) = r.on_packet(&w.roce(), &at(0, 0xC100));
    let a = required_sends(&o)[0].clone();
    assert!(spec_allows_dscp(&a, 46), "MR-MPA-12");
    assert!(!spec_allows_dscp(&a, 10), "MR-MPA-12 violated: data DSCP");
}

#[test]
fn trimmed_packet_mr_mpt_1_mr_mpt_2_mr_mpt_5() {
    let mut r = responder();
    r.cfg.trim_dscp = Some(7);
    r.cfg.trimming = true;
    let w = wire(write(100, 0, 0, 256, VA, RKEY, &[5; 256]));
    let roce = w.roce();
    let header = roce.header_len();
    let trimmed = ArrivalInfo {
        dscp: 7,
        ip_roce_len: Some(header),
        ..at(0, 0xC0AA)
    };
    let (r2, o) = r.on_packet(&roce, &trimmed);
    assert!(writes(&o).is_empty(), "MR-MPT-2");
    assert!(!r2.received.is_received(psn(100)), "MR-MPT-2");
    let a = required_sends(&o);
    assert_eq!(
        a[0].syndrome,
        Some(SyndromeSpec::Exact(Syndrome::NAK_TRIMMED)),
        "MR-MPT-5"
    );
    assert_eq!(a[0].sacketh.trimmed, Field::Exact(true), "MR-MPT-5");
    assert_eq!(
        a[0].sacketh.sack_base_psn,
        Field::Exact(psn(100)),
        "MR-MPT-5"
    );
    assert_eq!(a[0].sacketh.echoed_entropy, Field::Exact(0xC0AA));
    assert_eq!(r2.counters.mp_trimmed_received, 1);
    // Same DSCP, complete length: an ordinary packet (MR-MPT-1).
    let full = ArrivalInfo {
        dscp: 7,
        ..at(0, 0xC0AA)
    };
    let (_, o) = r.on_packet(&roce, &full);
    assert_eq!(writes(&o).len(), 1, "MR-MPT-1");
    // Headers only, via the trimmed view. SPEC v1.2 MR-MPT-4: cut inside the
    // extension headers, the BTH still suffices for a NAK 0x65; cut inside
    // the BTH, no view (dropped).
    let udp_payload = &w.0[14 + 20 + 8..14 + 20 + 8 + header];
    assert!(trim::trimmed_view(udp_payload).is_some());
    // 12 bytes of BTH and 10 of MPETH, as a 64-byte trim over IPv4 leaves.
    let cut = trim::trimmed_view(&udp_payload[..22]).expect("BTH complete");
    assert!(cut.ext.mpeth.is_none() && !trim::headers_complete(&cut));
    let cut_arrival = ArrivalInfo {
        dscp: 7,
        ip_roce_len: Some(22),
        ..at(0, 0xC0AB)
    };
    let (r3, o) = r.on_packet(&cut, &cut_arrival);
    assert!(writes(&o).is_empty(), "MR-MPT-2");
    let a = required_sends(&o);
    assert_eq!(
        a[0].syndrome,
        Some(SyndromeSpec::Exact(Syndrome::NAK_TRIMMED)),
        "MR-MPT-4"
    );
    assert_eq!(a[0].sacketh.echoed_timestamp, Field::Exact(0), "MR-MPT-4");
    assert_eq!(a[0].sacketh.sack_base_psn, Field::Exact(psn(100)));
    assert_eq!(r3.counters.mp_trimmed_received, 1);
    assert!(
        trim::trimmed_view(&udp_payload[..11]).is_none(),
        "MR-MPT-4: no BTH, dropped"
    );
}

#[test]
fn read_waits_for_earlier_writes_then_answers_mr_mpp_7_mr_mpr_1_mr_mpr_2() {
    let r = responder();
    // msn 0: WRITE of 1 packet at PSN 100 (lost for now); msn 1: READ of 600 bytes at PSN 101 (3 PSNs).
    let (r, o) = step(&r, read(101, 1, 0, 600, VA, RKEY, 600), 0);
    assert!(
        !required_sends(&o)
            .iter()
            .any(|s| s.opcode == Field::Exact(Opcode::MP_READ_RESPONSE)),
        "MR-MPP-7"
    );
    for p in 101..104 {
        assert!(r.received.is_received(psn(p)), "MR-MPR-2");
    }
    let (r, o) = step(&r, write(100, 0, 0, 4, VA, RKEY, &[0xAA; 4]), 1);
    let resp: Vec<_> = required_sends(&o)
        .into_iter()
        .filter(|s| s.opcode == Field::Exact(Opcode::MP_READ_RESPONSE))
        .cloned()
        .collect();
    assert_eq!(resp.len(), 3, "MR-MPR-1");
    assert_eq!(resp[0].psn, Field::Exact(psn(101)));
    assert_eq!(resp[2].psn, Field::Exact(psn(103)));
    assert_eq!(resp[2].mpeth.offset, Field::Exact(512));
    assert_eq!(resp[2].mpeth.last, Field::Exact(true));
    assert_eq!(resp[0].mpeth.first, Field::Exact(true));
    // MR-MPR-14 (SPEC v1.2): the request's timestamp plus a residence time
    // between 0 and the real one, which the model leaves open.
    assert_eq!(resp[0].mpeth.timestamp, Field::Any, "MR-MPR-14");
    let mut expect: Vec<u8> = vec![0xAA; 4];
    expect.extend((4..256u32).map(|i| i as u8));
    assert_eq!(
        resp[0].payload,
        Field::Exact(expect),
        "MR-MPP-7: the READ sees the WRITE"
    );
    assert_eq!(r.received.cum, psn(103));
    assert_eq!(r.completed, 2);
}

#[test]
fn read_rerequest_nonzero_offset_mr_mpr_9() {
    let r = responder();
    let (r, _) = step(&r, read(100, 0, 0, 1000, VA, RKEY, 1000), 0);
    // Re-request from offset 512 (PSN 102), 488 bytes.
    let (r2, o) = step(&r, read(102, 0, 512, 1000, VA, RKEY, 488), 1);
    let resp: Vec<_> = required_sends(&o)
        .into_iter()
        .filter(|s| s.opcode == Field::Exact(Opcode::MP_READ_RESPONSE))
        .cloned()
        .collect();
    assert_eq!(resp.len(), 2, "MR-MPR-9: the requested range only");
    assert_eq!(resp[0].psn, Field::Exact(psn(102)));
    assert_eq!(resp[0].mpeth.offset, Field::Exact(512));
    assert_eq!(resp[0].mpeth.retransmission, Field::Exact(true), "MR-MPH-2");
    assert_eq!(resp[1].mpeth.last, Field::Exact(true));
    assert_eq!(
        resp[1].payload,
        Field::Exact((768..1000u32).map(|i| i as u8).collect())
    );
    assert_eq!(r2.counters.duplicate_requests, 1);
    // A re-request with another R_Key matches no kept READ: dropped.
    let (_, o) = step(&r, read(102, 0, 512, 1000, VA, RKEY + 1, 488), 1);
    assert_eq!(
        o.required[0].value,
        Effect::Drop { counter: None },
        "MR-MPR-9"
    );
}

#[test]
fn read_in_parts_mr_mph_12_mr_mpr_11_mr_mpr_12() {
    let r = responder();
    // First part: 512 of 1000 bytes (PMTU 256), F set, L clear, R clear.
    let first = read(100, 0, 0, 1000, VA, RKEY, 512).ext(|e| {
        if let Some(m) = &mut e.mpeth {
            m.last = false;
        }
    });
    let (r, o) = step(&r, first, 0);
    let resp: Vec<_> = required_sends(&o)
        .into_iter()
        .filter(|s| s.opcode == Field::Exact(Opcode::MP_READ_RESPONSE))
        .cloned()
        .collect();
    assert_eq!(resp.len(), 2, "MR-MPH-12: only the first part is answered");
    assert_eq!(resp[1].mpeth.offset, Field::Exact(256));
    assert_eq!(resp[1].mpeth.last, Field::Exact(false));
    for p in 100..104 {
        assert!(r.received.is_received(psn(p)), "MR-MPR-2: all n reserved");
    }
    // Further part: offset 512, 488 bytes, R clear (not a re-request).
    let part = read(102, 0, 512, 1000, VA, RKEY, 488).ext(|e| {
        if let Some(m) = &mut e.mpeth {
            m.first = false;
            m.retransmission = false;
        }
    });
    let (_, o) = step(&r, part, 1);
    let resp: Vec<_> = required_sends(&o)
        .into_iter()
        .filter(|s| s.opcode == Field::Exact(Opcode::MP_READ_RESPONSE))
        .cloned()
        .collect();
    assert_eq!(resp.len(), 2, "MR-MPR-12: the part's range");
    assert_eq!(resp[0].psn, Field::Exact(psn(102)));
    assert_eq!(
        resp[0].mpeth.retransmission,
        Field::Exact(false),
        "MR-MPH-2"
    );
    assert_eq!(resp[1].mpeth.last, Field::Exact(true));
    // A further part of DMA length 0 inside the read asks for no nonzero
    // multiple of PMTU: it matches no kept READ and is dropped (MR-MPR-9).
    let empty = read(102, 0, 512, 1000, VA, RKEY, 0).ext(|e| {
        if let Some(m) = &mut e.mpeth {
            m.first = false;
            m.retransmission = false;
        }
    });
    let (_, o) = step(&r, empty, 1);
    assert_eq!(
        o.required[0].value,
        Effect::Drop { counter: None },
        "MR-MPR-9: a zero-length follow-up"
    );
    assert!(required_sends(&o).is_empty(), "MR-MPR-12: not acknowledged");
    // A first part that is not a multiple of PMTU is still invalid.
    let bad = read(100, 0, 0, 1000, VA, RKEY, 500);
    let (_, o) = step(&responder(), bad, 0);
    assert!(
        o.required.iter().any(|c| c.value == Effect::EnterError),
        "MR-MPP-15"
    );
}

#[test]
fn read_zero_length_and_bad_key_mr_mpr_3_mr_mpr_4() {
    let r = responder();
    let (_, o) = step(&r, read(100, 0, 0, 0, 0xDEAD, 0xBAD, 0), 0);
    let resp = required_sends(&o);
    assert_eq!(
        resp[0].opcode,
        Field::Exact(Opcode::MP_READ_RESPONSE),
        "MR-MPR-3"
    );
    assert_eq!(resp[0].payload, Field::Exact(vec![]));
    let (_, o) = step(&r, read(100, 0, 0, 8, 0xDEAD, RKEY, 8), 0);
    assert_eq!(
        required_sends(&o)[0].syndrome,
        Some(SyndromeSpec::Exact(Syndrome::NAK_REMOTE_ACCESS)),
        "MR-MPR-4"
    );
}

#[test]
fn atomic_once_mr_mpp_12_mr_mpp_13() {
    let r = responder();
    let (r, o) = step(&r, fetch_add(100, 0, VA, RKEY, 5), 0);
    let aa: Vec<_> = required_sends(&o)
        .into_iter()
        .filter(|s| s.opcode == Field::Exact(Opcode::MP_ATOMIC_ACK))
        .cloned()
        .collect();
    let orig = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(aa[0].atomic_orig, Field::Exact(orig), "MR-MPP-13");
    assert_eq!(
        aa[0].sacketh.sack_base_psn,
        Field::Exact(psn(100)),
        "MR-MPP-13"
    );
    assert_eq!(
        aa[0].sacketh.sack_bitmap,
        Field::Exact(1 << 63),
        "MR-MPP-13: bit 0 set"
    );
    let (r2, o) = step(
        &r,
        fetch_add(100, 0, VA, RKEY, 5).ext(|e| e.mpeth.as_mut().unwrap().retransmission = true),
        1,
    );
    let aa2: Vec<_> = required_sends(&o)
        .into_iter()
        .filter(|s| s.opcode == Field::Exact(Opcode::MP_ATOMIC_ACK))
        .cloned()
        .collect();
    assert_eq!(
        aa2[0].atomic_orig,
        Field::Exact(orig),
        "MR-MPP-12: kept value, not executed again"
    );
    assert_eq!(
        r2.memory[0].read(0, 8),
        Some((orig + 5).to_le_bytes().to_vec()),
        "MR-MPP-12: once"
    );
    // Misaligned: NAK 0x61.
    let (_, o) = step(&responder(), fetch_add(100, 0, VA + 4, RKEY, 5), 0);
    assert_eq!(
        required_sends(&o)[0].syndrome,
        Some(SyndromeSpec::Exact(Syndrome::NAK_INVALID_REQUEST)),
        "MR-ATOM-1"
    );
}

#[test]
fn probe_answered_without_state_change_mr_mpf_5_mr_mpf_6() {
    let r = responder();
    let probe = req(Opcode::MP_PROBE, 5000, 0, 0, 0, &[])
        .ack_req(true)
        .ext(|e| {
            let m = e.mpeth.as_mut().unwrap();
            m.first = false;
            m.last = false;
        });
    let (r2, o) = step(&r, probe, 0);
    assert_eq!(required_sends(&o).len(), 1, "MR-MPF-5: whatever the PSN");
    assert_eq!(r2.received, r.received, "MR-MPF-6");
    assert_eq!(r2.counters.mp_out_of_window, 0, "MR-MPW-1 exempts probes");
}

#[test]
fn reserved_mp_opcode_dropped_mr_mph_8() {
    let r = responder();
    let w = wire(metaroce_codec::PacketBuilder::new(Opcode(0xCC)).psn(100));
    let roce = w.roce();
    let (r2, o) = r.on_packet(&roce, &at(0, 0xC000));
    assert_eq!(
        o.required[0].value,
        Effect::Drop {
            counter: Some("malformed_drops")
        },
        "MR-MPH-8"
    );
    assert_eq!(r2.counters.malformed_drops, 1);
}

#[test]
fn rnr_when_no_receive_posted_mr_mpp_17() {
    let r = responder().with_recv_queue(RecvQueue::Known(vec![]));
    let (r, o) = step(&r, req(Opcode::MP_SEND, 100, 0, 0, 4, &[1; 4]), 0);
    let a = required_sends(&o);
    assert_eq!(
        a[0].syndrome,
        Some(SyndromeSpec::RnrNak { timer: 12 }),
        "MR-MPP-17"
    );
    assert_eq!(a[0].sacketh.sack_base_psn, Field::Exact(psn(100)));
    assert!(
        !r.received.is_received(psn(100)),
        "MR-MPP-17: not acknowledged"
    );
    // Again within the RNR period: nothing at all.
    let (r, o) = step(&r, req(Opcode::MP_SEND, 100, 0, 0, 4, &[1; 4]), 100);
    assert!(
        required_sends(&o).is_empty() && optional_sends(&o).is_empty(),
        "MR-MPP-17: at most one per period"
    );
    // After posting a receive, the message is accepted and completes.
    let (r, _) = r.post_recv(RecvWr {
        wr: 9,
        key: BUF,
        offset: 0,
        len: 64,
    });
    let (_, o) = step(&r, req(Opcode::MP_SEND, 100, 0, 0, 4, &[1; 4]), 200);
    assert_eq!(completions(&o), vec![9]);
}

#[test]
fn rnr_period_per_message_mr_mpp_17() {
    let r = responder().with_recv_queue(RecvQueue::Known(vec![]));
    let (r, o) = step(&r, req(Opcode::MP_SEND, 100, 0, 0, 4, &[1; 4]), 0);
    assert_eq!(required_sends(&o).len(), 1, "MR-MPP-17: first refusal");
    // A WRITE of a later message is accepted meanwhile: the refused
    // message's RNR period still runs (at most one NAK per period for it).
    let (r, _) = step(&r, write(101, 1, 0, 4, VA, RKEY, &[2; 4]), 10);
    let (r, o) = step(&r, req(Opcode::MP_SEND, 100, 0, 0, 4, &[1; 4]), 20);
    assert!(
        required_sends(&o).is_empty(),
        "MR-MPP-17: no NAK required inside the period"
    );
    // A WRITE with Immediate whose receive is known missing: refused before
    // any byte is placed, with its own first RNR NAK.
    let before = r.memory.clone();
    let imm = req(Opcode::MP_WRITE_IMM, 102, 2, 0, 4, &[3; 4]).ext(|e| {
        e.reth = Some(metaroce_codec::ext::RethRepr {
            va: VA,
            rkey: RKEY,
            dma_len: 4,
        });
        e.immdt = Some(metaroce_codec::ext::ImmDtRepr { value: 7 });
    });
    let (r2, o) = step(&r, imm, 30);
    let a = required_sends(&o);
    assert_eq!(a.len(), 1, "MR-MPP-17: the message's first refusal");
    assert_eq!(a[0].syndrome, Some(SyndromeSpec::RnrNak { timer: 12 }));
    assert_eq!(r2.memory, before, "MR-MPP-17: nothing placed");
}

#[test]
fn failed_invalidation_nak_names_last_psn_mr_mpp_15() {
    let inv = |psn: u32, off: u32, data: &[u8]| {
        req(Opcode::MP_SEND_INV, psn, 0, off, 300, data)
            .ext(|e| e.ieth = Some(metaroce_codec::ext::IethRepr { rkey: 0xBAD }))
    };
    let r = responder();
    let (r, _) = step(&r, inv(100, 0, &[1; 256]), 0);
    let (_, o) = step(&r, inv(101, 256, &[2; 44]), 1);
    // No region has the key: the receive completes SUCCESS or
    // REM_INV_REQ_ERR (MR-RSP-10), and a NAK 0x61 may name PSN 101.
    let c = o
        .required
        .iter()
        .find_map(|c| match &c.value {
            Effect::Complete(c) => Some(c.status.clone()),
            _ => None,
        })
        .expect("MR-MPP-9: the receive completes");
    assert!(c.allows(&WcStatus::RemInvReqErr) && c.allows(&WcStatus::Success));
    let naks: Vec<_> = optional_sends(&o)
        .into_iter()
        .filter(|s| s.syndrome == Some(SyndromeSpec::Exact(Syndrome::NAK_INVALID_REQUEST)))
        .collect();
    assert_eq!(naks.len(), 1, "MR-MPP-15");
    assert_eq!(
        naks[0].sacketh.sack_base_psn,
        Field::Exact(psn(101)),
        "MR-MPP-15: last PSN"
    );
}

#[test]
fn psn_and_msn_wrap_mr_psn_5() {
    let mut r = MpResponder::new(cfg(), 0x22, Psn::new(0xFF_FFFF))
        .with_region(MemoryRegion::unknown(RKEY, VA, 4096, Access::ALL));
    r.completed = 0xFF_FFFF; // the next message has MSN 0xFFFFFF
    // Two-packet WRITE with MSN 0xFFFFFF at PSNs 0xFFFFFF and 0, then MSN 0 at PSN 1.
    let (r, _) = step(&r, write(1, 0, 0, 1, VA, RKEY, &[1]), 0);
    let (r, _) = step(&r, write(0, 0xFF_FFFF, 256, 512, VA, RKEY, &[0; 256]), 1);
    assert_eq!(
        r.completed, 0xFF_FFFF,
        "MR-MPP-6: MSN 0 waits for MSN 0xFFFFFF"
    );
    let (r, o) = step(
        &r,
        write(0xFF_FFFF, 0xFF_FFFF, 0, 512, VA, RKEY, &[0; 256]),
        2,
    );
    assert_eq!(r.completed, 0x100_0001);
    assert_eq!(r.ack_msn(), Msn::new(0), "MSN wraps to 0");
    assert_eq!(r.received.cum, psn(1), "PSN wraps");
    assert_eq!(required_sends(&o)[0].psn, Field::Exact(psn(1)));
}

#[test]
fn write_with_immediate_completion_mr_mpp_9() {
    let r = responder();
    let b = req(Opcode::MP_WRITE_IMM, 100, 0, 0, 4, &[1; 4]).ext(|e| {
        e.reth = Some(metaroce_codec::ext::RethRepr {
            va: VA,
            rkey: RKEY,
            dma_len: 4,
        });
        e.immdt = Some(metaroce_codec::ext::ImmDtRepr { value: 0xCAFE });
    });
    let (_, o) = step(&r, b, 0);
    let c = o
        .required
        .iter()
        .find_map(|c| match &c.value {
            Effect::Complete(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(c.imm, Field::Exact(Some(0xCAFE)), "MR-MPP-9");
    assert_eq!(c.status, Field::Exact(WcStatus::Success));
}

mod ordered;
mod resources;
