//! Congestion control of the MP requester: the causes of a multiplicative
//! decrease and their congestion evidence (MR-MPC-7, §7.12), the bound on increases (MR-MPC-8) and the queuing
//! delay's base (MR-MPC-9).

use super::*;

/// PMTU 1024, cwnd 8 packets, additive increase `ai` bytes per srtt.
fn cc_cfg(ai: u64) -> MpConfig {
    MpConfig {
        pmtu: 1024,
        window: 1024,
        cwnd_init: 8192,
        ai_bytes: ai,
        ..cfg()
    }
}

/// A WRITE of `n` packets of which the first `sent` are sent at t = 0, 1, ….
fn sent_packets(c: MpConfig, n: u32, sent: u32) -> MpRequester {
    let r = MpRequester::new(c, 0x22, psn(0));
    let (mut r, _) = r.post_send(write_wr(1, 1024 * n));
    for t in 0..sent {
        let (n2, f, _) = send_next(&r, u64::from(t));
        assert!(f.is_empty(), "{f:?}");
        r = n2;
    }
    r
}

/// A first transmission of the next new packet, from an allowed value.
fn send_new(r: &MpRequester, now: u64) -> Vec<&'static str> {
    let (w, off) = r.next_new().map(|(w, o)| (w.clone(), o)).unwrap();
    let spec = r.packet_spec(&w, off, false, now);
    let Field::OneOf(evs) = &spec.udp_src_port else {
        panic!("entropy set")
    };
    let p = wire(build(r, &spec, now as u32));
    ids(&r.on_transmit(&p.roce(), evs[0], now).1)
}

#[test]
fn decrease_on_reorder_loss_mr_mpc_7() {
    // No additive increase (ai 0), so only the decrease changes cwnd.
    let r = sent_packets(cc_cfg(0), 16, 8);
    assert_eq!(r.cc.cwnd, 8192);
    // PSNs 1, 2, 3 SACKed by an ACK with E: PSN 0 deemed lost (K = 3),
    // with congestion evidence (a marked signal, §7.12 case 1).
    let mut s = sack(0xFF_FFFF, 0, 0b0111 << 60, 0xC003, 3);
    s.ecn_ce = true;
    let (r, o) = ack_at(&r, 0xFF_FFFF, s, 1000);
    assert_eq!(required_psns(&o), vec![0]);
    assert_eq!(r.cc.cwnd, 8192 * 700 / 1000, "MR-MPC-7: lost PSN");
    assert_eq!(r.cc.last_md, Some(1000));
    // Conforming: the retransmission fits the smaller window (4096 + 1024 ≤ 5734).
    let spec = required_sends(&o)[0].clone();
    let Field::OneOf(evs) = &spec.udp_src_port else {
        panic!()
    };
    let p = wire(build(&r, &spec, 1001));
    let (r, f) = r.on_transmit(&p.roce(), evs[0], 1001);
    assert!(f.is_empty(), "{f:?}");
    // Violating: a requester that kept cwnd 8192 sends PSN 8 as well.
    assert!(
        r.next_packets(1002).optional.is_empty(),
        "MR-MPC-7: no room for PSN 8"
    );
    assert!(send_new(&r, 1002).contains(&"MR-MPC-1"));
}

#[test]
fn no_decrease_on_loss_without_evidence_mr_mpc_7() {
    let r = sent_packets(cc_cfg(0), 16, 8);
    // The same loss, revealed by an unmarked ACK whose sample is the first
    // (q = 0): no congestion evidence, cwnd unchanged.
    let (r, o) = ack_at(
        &r,
        0xFF_FFFF,
        sack(0xFF_FFFF, 0, 0b0111 << 60, 0xC003, 3),
        1000,
    );
    assert_eq!(r.cc.cwnd, 8192, "MR-MPC-7: no evidence, no decrease");
    assert_eq!(r.cc.last_md, None);
    // 4 KiB in flight (PSNs 4–7): with the retransmission of PSN 0 (5 KiB)
    // cwnd still has room for PSN 8; a requester that decreased (to 5734)
    // would have none.
    assert_eq!(r.bytes_in_flight(), 4 * 1024);
    assert_eq!(required_psns(&o), vec![0]);
    assert!(
        optional_sends(&o).iter().any(|s| s.psn == Field::Exact(psn(8))
            && s.mpeth.retransmission == Field::Exact(false)),
        "MR-MPC-7: room for PSN 8"
    );
}

#[test]
fn decrease_on_loss_after_late_signal_mr_mpc_7() {
    // An unmarked ACK of PSN 0 at 20 µs sets base_rtt = 20 µs.
    let r = sent_packets(cc_cfg(0), 16, 8);
    let (r, _) = ack_at(&r, 0, sack(0, 1, 0, 0xC000, 0), 20_000);
    assert_eq!(r.cc.cwnd, 8192);
    // 40 µs later an unmarked ACK SACKs PSNs 2–4 with a 50 µs sample: late
    // (q = 30 µs ≥ 10 µs) but unmarked, so the table leaves cwnd alone; the
    // loss of PSN 1 it reveals has evidence (case 1) and decreases it.
    let (r2, _) = ack_at(&r, 0, sack(0, 1, 0b0111 << 60, 0xC002, 10_000), 60_000);
    assert_eq!(r2.cc.cwnd, 8192 * 700 / 1000, "MR-MPC-7: late signal");
    // The same loss revealed by an in-time ACK within one srtt of the late
    // one still has evidence; more than one srtt later, it has none.
    let (r3, _) = ack_at(&r, 0, sack(0, 1, 0b0100 << 60, 0xC002, 10_000), 60_000);
    assert_eq!(r3.cc.cwnd, 8192, "MR-MPC-2: late, unmarked");
    let srtt = r3.rtt.srtt_or(&r3.cfg);
    let (r4, _) = ack_at(
        &r3,
        0,
        sack(0, 1, 0b0111 << 60, 0xC003, 60_000),
        60_000 + srtt,
    );
    assert_eq!(r4.cc.cwnd, 8192 * 700 / 1000, "MR-MPC-7: within one srtt");
    let (r5, _) = ack_at(
        &r3,
        0,
        sack(0, 1, 0b0111 << 60, 0xC003, (60_001 + srtt - 20_000) as u32),
        60_001 + srtt,
    );
    assert_eq!(r5.cc.cwnd, 8192, "MR-MPC-7: evidence older than srtt");
}

#[test]
fn rto_loss_evidence_mr_mpc_7() {
    // Nothing acknowledged since PSNs 0–7 left: their RTO (mp_rto_init)
    // deems them lost with evidence (§7.12 case 3).
    let r = sent_packets(cc_cfg(0), 16, 8);
    let rto = r.rtt.rto(&r.cfg);
    let (r1, _) = r.on_timer(rto + 7);
    assert_eq!(r1.cc.cwnd, 8192 * 700 / 1000, "MR-MPC-7: RTO, no signal");
    // An unmarked, in-time ACK of PSN 7 after they left: the RTO of PSNs
    // 0–6 is a loss without evidence.
    let (r, _) = ack_at(&r, 0xFF_FFFF, sack(0xFF_FFFF, 0, 1 << 56, 0xC003, 7), 1000);
    let rto = r.rtt.rto(&r.cfg);
    let (r2, _) = r.on_timer(rto + 7);
    assert!(r2.segs.values().any(|s| s.lost.is_some()));
    assert_eq!(r2.cc.cwnd, 8192, "MR-MPC-7: RTO after a signal");
}

#[test]
fn decrease_on_trim_nak_mr_mpc_7() {
    let r = sent_packets(cc_cfg(0), 16, 8);
    let mut s = sack(0xFF_FFFF, 1, 0, 0xC001, 1);
    s.syndrome = Syndrome::NAK_TRIMMED;
    s.trimmed = true;
    let (r, _) = ack_at(&r, 0xFF_FFFF, s, 1000);
    assert_eq!(r.cc.cwnd, 8192 * 700 / 1000, "MR-MPC-7: NAK 0x65");
    // Once per srtt (MR-MPC-3): a second NAK right after does not decrease again.
    let mut s = sack(0xFF_FFFF, 2, 0, 0xC002, 2);
    s.syndrome = Syndrome::NAK_TRIMMED;
    let (r, _) = ack_at(&r, 0xFF_FFFF, s, 1001);
    assert_eq!(r.cc.cwnd, 8192 * 700 / 1000, "MR-MPC-7 subject to MR-MPC-3");
}

/// An MP requester (cwnd 8 KiB) with work request 1, a READ of 5 × 1 KiB
/// responses, posted and not yet sent.
fn read_of_five_posted() -> MpRequester {
    let r = MpRequester::new(cc_cfg(0), 0x22, psn(0));
    r.post_send(SendWr {
        wr: 1,
        op: WrOp::Read {
            va: 0x5000,
            rkey: 9,
            len: 5 * 1024,
        },
        fence: false,
        signaled: true,
    })
    .0
}

#[test]
fn decrease_on_missing_read_response_mr_mpc_7() {
    let r = read_of_five_posted();
    let (mut r, f, _) = send_next(&r, 0);
    assert!(f.is_empty(), "{f:?}");
    let resp = |i: u32, r: &MpRequester, now| {
        let w = wire(req(
            Opcode::MP_READ_RESPONSE,
            i,
            0,
            i * 1024,
            5 * 1024,
            &[0; 1024],
        ));
        r.on_ack(
            &w.roce(),
            &ArrivalInfo {
                now_ns: now,
                ..ArrivalInfo::default()
            },
        )
    };
    // Responses 0, 2, 3: response 1 is not missing yet, no decrease.
    for (t, i) in [0u32, 2, 3].into_iter().enumerate() {
        r = resp(i, &r, 5000 + t as u64).0;
    }
    assert_eq!(r.cc.cwnd, 8192, "MR-MPC-7: nothing missing yet");
    // Response 4: K = 3 later responses, response 1 deemed missing; the
    // responses are unmarked and in time: no evidence, no decrease.
    let (r0, o) = resp(4, &r, 5003);
    assert_eq!(required_sends(&o).len(), 1, "re-request of response 1");
    assert_eq!(r0.cc.cwnd, 8192, "MR-MPC-7: missing, no evidence");
    // Response 4 arriving with CE (marked, §7.12 case 1): a decrease.
    let w = wire(req(
        Opcode::MP_READ_RESPONSE,
        4,
        0,
        4 * 1024,
        5 * 1024,
        &[0; 1024],
    ));
    let (r, o) = r.on_ack(
        &w.roce(),
        &ArrivalInfo {
            now_ns: 5003,
            ecn_ce: true,
            ..ArrivalInfo::default()
        },
    );
    assert_eq!(required_sends(&o).len(), 1, "re-request of response 1");
    assert_eq!(
        r.cc.cwnd,
        8192 * 700 / 1000,
        "MR-MPC-7: missing READ response"
    );
}

#[test]
fn read_response_missing_by_time_evidence_mr_mpc_7() {
    // A READ of 5 responses (PSNs 0–4) at t = 0; response 0 and an ACK of
    // the READ's PSNs arrive at 5 µs (unmarked, in time).
    let r = read_of_five_posted();
    let (r, f, _) = send_next(&r, 0);
    assert!(f.is_empty(), "{f:?}");
    let w = wire(req(Opcode::MP_READ_RESPONSE, 0, 0, 0, 5 * 1024, &[0; 1024]));
    let (r, _) = r.on_ack(&w.roce(), &at(5000, 0xC000));
    let (r, _) = ack_at(&r, 4, sack(4, 5, 0, 0xC000, 0), 5000);
    // Nothing else arrives: at the RTO responses 1–4 are missing by time,
    // with no signal since the READ's timer started (§7.12 case 3).
    let rto = r.rtt.rto(&r.cfg);
    let (r1, _) = r.on_timer(5000 + rto);
    assert!(!r1.wrs[&1].read.as_ref().unwrap().missing.is_empty());
    assert_eq!(r1.cc.cwnd, 8192 * 700 / 1000, "MR-MPC-7: RTO, no signal");
    // A WRITE (PSN 5) sent at 5.5 µs and acknowledged at 6 µs: a signal
    // after the READ's timer started, so the same expiry has no evidence.
    let (r, _) = r.post_send(write_wr(2, 1024));
    let (r, f, _) = send_next(&r, 5500);
    assert!(f.is_empty(), "{f:?}");
    let (r, _) = ack_at(&r, 5, sack(5, 6, 0, 0xC001, 5500), 6000);
    let rto = r.rtt.rto(&r.cfg);
    let (r2, _) = r.on_timer(5000 + rto);
    assert!(!r2.wrs[&1].read.as_ref().unwrap().missing.is_empty());
    assert_eq!(r2.cc.cwnd, 8192, "MR-MPC-7: RTO after a signal");
}

#[test]
fn increase_bounded_per_srtt_mr_mpc_8() {
    let c = MpConfig {
        cwnd_init: 16_384,
        ..cc_cfg(16_384)
    };
    let srtt = 100_000;
    let mut cc = CcState::new(&c);
    // Ten signals within one srtt, each acknowledging a whole cwnd: the
    // table of §7.12 alone would add mp_ai_bytes each time.
    for i in 0..10 {
        let before = cc.cwnd;
        cc.signal(&c, 1000 + i * 1000, srtt, before, false, 0);
    }
    assert_eq!(
        cc.cwnd,
        16_384 + c.ai_bytes + u64::from(c.pmtu),
        "MR-MPC-8: at most mp_ai_bytes + PMTU within one srtt"
    );
    // A conforming requester at that cwnd; one that took the ten full
    // increases sends beyond it.
    assert!(cc.cwnd < 16_384 + 10 * c.ai_bytes, "MR-MPC-8");
    // One srtt after the first increase, the budget returns.
    let before = cc.cwnd;
    cc.signal(&c, 1000 + srtt, srtt, before, false, 0);
    assert!(cc.cwnd > before, "MR-MPC-8: a new srtt interval");
    assert!(cc.cwnd - before <= c.ai_bytes + u64::from(c.pmtu));
}

#[test]
fn queuing_delay_from_smallest_sample_mr_mpc_9() {
    let c = cc_cfg(1024);
    let r = sent_packets(c.clone(), 16, 8);
    assert_eq!(
        r.rtt.base_rtt(&c),
        c.base_rtt,
        "MR-MPC-9: mp_base_rtt before any sample"
    );
    // Samples 50 µs, then 30 µs (the smallest), both unmarked: increases.
    let (r, _) = ack_at(&r, 0, sack(0, 1, 0, 0xC000, 0), 50_000);
    let (r, _) = ack_at(&r, 1, sack(1, 2, 0, 0xC001, 30_001), 60_001);
    assert_eq!(r.rtt.base_rtt(&c), 30_000, "MR-MPC-9");
    let before = r.cc.cwnd;
    // A 42 µs sample with E: q = 42 − 30 = 12 µs ≥ target 10 µs, marked and
    // late: a decrease. (Measured from srtt ≈ 47.5 µs it would not be late.)
    let mut s = sack(2, 3, 0, 0xC002, 60_002);
    s.ecn_ce = true;
    let (r, _) = ack_at(&r, 2, s, 102_002);
    assert!(r.rtt.srtt.unwrap() > 42_000);
    assert_eq!(
        r.cc.cwnd,
        before * 700 / 1000,
        "MR-MPC-9: q from the smallest sample"
    );
    // Violating: a requester that measured q from srtt kept cwnd and sends
    // a sixth packet beyond the decreased window.
    let mut r = r;
    let mut now = 102_010;
    while r.bytes_in_flight() + 1024 <= r.cc.cwnd {
        r = send_next(&r, now).0;
        now += 1;
    }
    assert!(r.bytes_in_flight() + 1024 <= before);
    assert!(send_new(&r, now).contains(&"MR-MPC-1"), "MR-MPC-9");
}

/// Sends `spec` at `now` from an allowed value other than `avoid` (MR-MPS-7).
fn send_spec(
    r: &MpRequester,
    spec: &PacketSpec,
    now: u64,
    avoid: u16,
) -> (MpRequester, Vec<&'static str>) {
    let Field::OneOf(evs) = &spec.udp_src_port else {
        panic!("entropy set")
    };
    let ev = evs.iter().copied().find(|&v| v != avoid).unwrap();
    let p = wire(build(r, spec, now as u32));
    let (n, f) = r.on_transmit(&p.roce(), ev, now);
    (n, ids(&f))
}

fn trim_nak(r: &MpRequester, q: u32, ev: u16, now: u64) -> (MpRequester, Outcomes) {
    let mut s = sack(0xFF_FFFF, q, 0, ev, 1);
    s.syndrome = Syndrome::NAK_TRIMMED;
    s.trimmed = true;
    ack_at(r, 0xFF_FFFF, s, now)
}

#[test]
fn oldest_psn_retransmission_beyond_cwnd_mr_mpc_10() {
    // cwnd 8192 full with PSNs 0–7; a NAK 0x65 on PSN 0 decreases cwnd to
    // 5734 while 7168 bytes stay in flight.
    let r = sent_packets(cc_cfg(0), 16, 8);
    let ev0 = r.segs[&0].entropy;
    let (r, o) = trim_nak(&r, 0, ev0, 1000);
    assert_eq!(r.cc.cwnd, 8192 * 700 / 1000);
    assert_eq!(r.bytes_in_flight(), 7 * 1024);
    // Not required (cwnd is full), but allowed: PSN 0 is the oldest
    // unacknowledged PSN and deemed lost (MR-MPC-10).
    assert!(required_psns(&o).is_empty(), "MR-MPC-1: not required");
    let opt: Vec<_> = o
        .optional
        .iter()
        .filter(|c| c.reqs.contains(&"MR-MPC-10"))
        .filter_map(|c| match &c.value {
            Effect::Send(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(opt.len(), 1, "MR-MPC-10: the oldest PSN only");
    assert_eq!(opt[0].psn, Field::Exact(psn(0)));
    assert!(
        !optional_sends(&o)
            .iter()
            .any(|s| s.mpeth.retransmission == Field::Exact(false)),
        "MR-MPC-1: no new packet beyond cwnd"
    );
    let (r, f) = send_spec(&r, &opt[0], 1001, ev0);
    assert!(f.is_empty(), "MR-MPC-10: conforming: {f:?}");
    assert_eq!(r.bytes_in_flight(), 8 * 1024);
    // A new packet beyond cwnd is still reported.
    assert!(send_new(&r, 1002).contains(&"MR-MPC-1"), "MR-MPC-1");
    // A second copy of PSN 0 before it is deemed lost again is outside the
    // bound (one per loss): MR-MPC-1 (and MR-MPL-4).
    assert!(r.next_packets(1002).required.is_empty());
    assert!(
        r.next_packets(1002)
            .optional
            .iter()
            .all(|c| { !matches!(&c.value, Effect::Send(s) if s.psn == Field::Exact(psn(0))) })
    );
    let again = r.packet_spec(&r.wrs[&1], 0, true, 1002);
    let (_, f) = send_spec(&r, &again, 1002, r.segs[&0].entropy);
    assert_eq!(f, vec!["MR-MPL-4", "MR-MPC-1"], "MR-MPC-10: once per loss");
    // A lost PSN that is not the oldest gets no exemption.
    let ev1 = r.segs[&1].entropy;
    let (r1, o) = trim_nak(&r, 1, ev1, 1003);
    assert!(o.required.is_empty() && o.optional.iter().all(|c| !c.reqs.contains(&"MR-MPC-10")));
    let spec1 = r1.packet_spec(&r1.wrs[&1], 1024, true, 1004);
    let (_, f) = send_spec(&r1, &spec1, 1004, ev1);
    assert_eq!(f, vec!["MR-MPC-1"], "MR-MPC-10: only the oldest PSN");
    // Deemed lost again (a new loss event): one more copy is allowed.
    let (r, o) = trim_nak(&r, 0, r.segs[&0].entropy, 1005);
    let spec = optional_sends(&o)
        .into_iter()
        .find(|s| s.psn == Field::Exact(psn(0)))
        .cloned()
        .expect("MR-MPC-10: again after a new loss");
    let (_, f) = send_spec(&r, &spec, 1006, r.segs[&0].entropy);
    assert!(f.is_empty(), "MR-MPC-10: {f:?}");
}

#[test]
fn read_rerequest_beyond_cwnd_mr_mpc_10() {
    // A READ of 16 KiB with cwnd 8192 (β = 0.5) is requested in parts
    // (MR-MPR-11): the first request asks for 8 KiB with L clear.
    let c = MpConfig {
        md_factor_milli: 500,
        ..cc_cfg(0)
    };
    let r = MpRequester::new(c, 0x22, psn(0));
    let (r, o) = r.post_send(SendWr {
        wr: 1,
        op: WrOp::Read {
            va: 0x5000,
            rkey: 9,
            len: 16 * 1024,
        },
        fence: false,
        signaled: true,
    });
    let first = optional_sends(&o)
        .into_iter()
        .find(|s| s.opcode == Field::Exact(Opcode::MP_READ_REQUEST))
        .cloned()
        .expect("the first request");
    assert_eq!(first.mpeth.dma_len, Field::Exact(8192), "MR-MPR-11");
    assert_eq!(first.mpeth.last, Field::Exact(false), "MR-MPH-12");
    // The whole read in one request is a finding.
    let mut whole = first.clone();
    whole.mpeth.dma_len = Field::Exact(16 * 1024);
    whole.mpeth.last = Field::Exact(true);
    let (_, f) = send_spec(&r, &whole, 0, 0);
    assert_eq!(f, vec!["MR-MPR-11"], "MR-MPR-11: longer than cwnd");
    let (mut r, f, _) = send_next(&r, 0);
    assert!(f.is_empty(), "{f:?}");
    assert_eq!(r.bytes_in_flight(), 8192, "§7.12: the first part's bytes");
    // No further part before a response has arrived.
    assert!(
        !optional_sends(&r.next_packets(1))
            .iter()
            .any(|s| s.opcode == Field::Exact(Opcode::MP_READ_REQUEST)),
        "MR-MPR-11: not before a response"
    );
    // Responses 4, 5, 6 arrive (K = 3), the last with CE: 0–3 are deemed
    // missing and cwnd halves to 4096 while 5 KiB stay in flight.
    let mut o = Outcomes::none();
    for (t, i) in [4u32, 5, 6].into_iter().enumerate() {
        let w = wire(req(
            Opcode::MP_READ_RESPONSE,
            i,
            0,
            i * 1024,
            16 * 1024,
            &[0; 1024],
        ));
        let arrival = ArrivalInfo {
            ecn_ce: i == 6,
            ..at(5000 + t as u64, 0xC000)
        };
        (r, o) = r.on_ack(&w.roce(), &arrival);
    }
    assert_eq!(r.cc.cwnd, 4096, "MR-MPC-7");
    assert_eq!(
        r.bytes_in_flight(),
        5 * 1024,
        "§7.12: missing responses stay in flight, unrequested bytes are not"
    );
    assert!(required_sends(&o).is_empty(), "MR-MPC-1: not required");
    let s = optional_sends(&o)
        .into_iter()
        .find(|s| s.opcode == Field::Exact(Opcode::MP_READ_REQUEST))
        .cloned()
        .expect("MR-MPC-10: the re-request is allowed beyond cwnd");
    assert_eq!(s.mpeth.offset, Field::Exact(0), "MR-MPR-7");
    assert_eq!(s.mpeth.dma_len, Field::Exact(4 * 1024), "MR-MPR-7");
    let (r2, f) = send_spec(&r, &s, 5010, 0);
    assert!(f.is_empty(), "MR-MPC-10: conforming: {f:?}");
    assert_eq!(r2.bytes_in_flight(), 5 * 1024, "adds no bytes");
    // A re-request of a response requested and not deemed missing (7) is
    // not exempt; one of bytes never requested (8–15) breaks MR-MPR-7.
    let bad = r.rerequest_spec(&r.wrs[&1], 7 * 1024, 1024, 5010);
    let (_, f) = send_spec(&r, &bad, 5010, 0);
    assert_eq!(f, vec!["MR-MPC-1"], "MR-MPC-10: only missing responses");
    let bad = r.rerequest_spec(&r.wrs[&1], 8 * 1024, 8 * 1024, 5010);
    let (_, f) = send_spec(&r, &bad, 5010, 0);
    assert!(f.contains(&"MR-MPR-7"), "MR-MPR-7: never requested: {f:?}");
    // Nor is a further part, although a response has arrived.
    let part = r2.part_spec(&r2.wrs[&1], 8 * 1024, 4096, 5011);
    let (_, f) = send_spec(&r2, &part, 5011, 0);
    assert_eq!(f, vec!["MR-MPC-1"], "MR-MPC-1: a part costs its bytes");
    // Nor a new packet.
    let (r3, _) = r2.post_send(write_wr(2, 1024));
    assert!(
        !optional_sends(&r3.next_packets(5011))
            .iter()
            .any(|s| s.opcode == Field::Exact(Opcode::MP_WRITE)),
        "MR-MPC-1"
    );
    assert!(send_new(&r3, 5011).contains(&"MR-MPC-1"), "MR-MPC-1");
    // Responses 0–3 and 7 arrive: nothing in flight, so the further part
    // (offset 8 KiB, at most max(PMTU, cwnd), R clear) may leave.
    let mut r = r2;
    for (t, i) in [0u32, 1, 2, 3, 7].into_iter().enumerate() {
        let w = wire(req(
            Opcode::MP_READ_RESPONSE,
            i,
            0,
            i * 1024,
            16 * 1024,
            &[0; 1024],
        ));
        (r, _) = r.on_ack(&w.roce(), &at(5020 + t as u64, 0xC000));
    }
    assert_eq!(r.bytes_in_flight(), 0);
    let part = optional_sends(&r.next_packets(5030))
        .into_iter()
        .find(|s| s.opcode == Field::Exact(Opcode::MP_READ_REQUEST))
        .cloned()
        .expect("MR-MPR-11: the further part");
    assert_eq!(part.mpeth.offset, Field::Exact(8 * 1024), "MR-MPR-11");
    assert_eq!(part.mpeth.retransmission, Field::Exact(false), "MR-MPR-11");
    assert_eq!(part.psn, Field::Exact(psn(8)), "MR-MPR-11");
    let (r, f) = send_spec(&r, &part, 5030, 0);
    assert!(f.is_empty(), "MR-MPR-11: conforming part: {f:?}");
    assert!(r.bytes_in_flight() > 0, "§7.12: a part costs its bytes");
}
