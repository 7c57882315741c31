//! Tests of the MP capture judge ([`MpJudge`]): each names the
//! requirement it checks.

use super::*;
use crate::model::mp::testutil::*;
use metaroce_codec::ext::{MpethRepr, SackethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, PacketBuilder};

fn cfg() -> MpConfig {
    MpConfig {
        pmtu: 256,
        entropy_set: vec![1, 2, 3],
        // Written for K = 3, the §10.3 default until 2026-12-01.
        reorder_threshold: 3,
        ..MpConfig::default()
    }
}

fn data(psn: u32, retx: bool) -> Wire {
    wire(
        req(Opcode::MP_SEND, psn, 0, psn * 256, 8192, &[0; 256])
            .ack_req(retx)
            .ext(|e| e.mpeth.as_mut().unwrap().retransmission = retx),
    )
}

/// [`data`] stamped `ts` (MPETH timestamp, MR-MPH-5). [`data`]'s stamp
/// is its PSN plus 1000: sent at `i` ns, PSN `i`'s clock reads `1000 + i`.
fn stamped(psn: u32, retx: bool, ts: u32) -> Wire {
    wire(
        req(Opcode::MP_SEND, psn, 0, psn * 256, 8192, &[0; 256])
            .ack_req(retx)
            .ext(|e| {
                let m = e.mpeth.as_mut().unwrap();
                m.retransmission = retx;
                m.timestamp = ts;
            }),
    )
}

fn ids(f: &[Finding]) -> Vec<&'static str> {
    f.iter().map(|x| x.id).collect()
}

#[test]
fn coverage_before_repeat_mr_mps_3() {
    let mut j = MpJudge::new(cfg(), CapturePoint::Requester);
    // Mid-conversation: 3 2 | 1 3 2 | 1 ... conforming.
    for (i, ev) in [3u16, 2, 1, 3, 2, 1, 2, 3].into_iter().enumerate() {
        j = j.request(&data(i as u32, false).roce(), ev, i as u64);
    }
    assert!(j.findings.is_empty(), "{:?}", j.findings);
    // 1 2 1 2 1: the round holding the second 1 lies between the first
    // and the last 1 and never holds 3.
    let mut j = MpJudge::new(cfg(), CapturePoint::Requester);
    for (i, ev) in [1u16, 2, 1, 2, 1].into_iter().enumerate() {
        j = j.request(&data(i as u32, false).roce(), ev, i as u64);
    }
    assert_eq!(ids(&j.findings), vec!["MR-MPS-3"]);
    let j = j.request(&data(9, false).roce(), 0x77, 10);
    assert!(ids(&j.findings).contains(&"MR-MPS-1"));
}

#[test]
fn retransmission_checks_mr_mpl_4_mr_mpl_6_mr_mpl_7() {
    let mut j = MpJudge::new(cfg(), CapturePoint::Requester);
    for i in 0..5u32 {
        j = j.request(&data(i, false).roce(), (i % 3 + 1) as u16, u64::from(i));
    }
    // Early retransmission of PSN 0: MR-MPL-4; without R: MR-MPL-7.
    let early = j.request(&data(0, false).roce(), 2, 10);
    assert_eq!(ids(&early.findings), vec!["MR-MPL-4", "MR-MPL-7"]);
    // After PSNs 1..3 are SACKed, retransmitting 0 with R is fine; 1 is not.
    let s = SackethRepr {
        syndrome: Syndrome(0x1F),
        msn: Msn::new(0xFF_FFFF),
        sack_base_psn: Psn::new(0),
        sack_bitmap: 0b0111 << 60,
        echoed_entropy: 1,
        echoed_timestamp: 1003,
        ..SackethRepr::default()
    };
    let a = wire(ack(0xFF_FFFF, s));
    let j = j.ack(&a.roce(), 20);
    assert!(j.findings.is_empty(), "{:?}", j.findings);
    let ok = j.request(&data(0, true).roce(), 2, 30);
    assert!(ok.findings.is_empty(), "{:?}", ok.findings);
    let bad = j.request(&stamped(1, true, 1030).roce(), 2, 30);
    assert_eq!(ids(&bad.findings), vec!["MR-MPL-6"]);
}

/// A requester-side judge that has seen data PSNs 10..=13 sent, PSN `i`
/// on UDP source port `i % 3 + 1` at `i` ns.
fn sent_10_to_13() -> MpJudge {
    let mut j = MpJudge::new(cfg(), CapturePoint::Requester);
    for i in 10..14u32 {
        j = j.request(&data(i, false).roce(), (i % 3 + 1) as u16, u64::from(i));
    }
    j
}

/// An ACK's SACKETH with base PSN `base`, echoing PSN 11's port and
/// timestamp (as [`sent_10_to_13`] sent it), bitmap empty.
fn echoing_psn_11(base: u32) -> SackethRepr {
    SackethRepr {
        syndrome: Syndrome(0x1F),
        sack_base_psn: Psn::new(base),
        echoed_entropy: 3,
        echoed_timestamp: 1011,
        ..SackethRepr::default()
    }
}

#[test]
fn sack_consistency_mr_mpa_3_mr_mpa_4_mr_mpa_5_mr_mpa_8() {
    let j = sent_10_to_13();
    let base = echoing_psn_11(11);
    let a = wire(ack(
        10,
        SackethRepr {
            sack_bitmap: 0b01 << 62,
            ..base
        },
    ));
    let j = j.ack(&a.roce(), 20);
    assert!(j.findings.is_empty(), "{:?}", j.findings);
    // 12 was reported; now missing: MR-MPA-5. Cum back to 9: MR-MPA-3. Syndrome 0: MR-MPA-8.
    let b = wire(ack(
        9,
        SackethRepr {
            syndrome: Syndrome(0),
            sack_base_psn: Psn::new(10),
            sack_bitmap: 0,
            echoed_entropy: 9,
            ..base
        },
    ));
    let k = j.ack(&b.roce(), 21);
    assert_eq!(ids(&k.findings), vec!["MR-MPA-3", "MR-MPA-8", "MR-MPA-5"]);
    // Bit for a PSN never sent (MR-MPA-4) and a wrong base (MR-MPA-4).
    let c = wire(ack(
        10,
        SackethRepr {
            sack_base_psn: Psn::new(12),
            sack_bitmap: 0b1001 << 60,
            ..base
        },
    ));
    assert_eq!(
        ids(&j.ack(&c.roce(), 22).findings),
        vec!["MR-MPA-4", "MR-MPA-4"]
    );
}

/// A PSN deemed lost by rule (a) (K later PSNs reported received)
/// retires its value (MR-MPF-1) even when a later ACK acknowledges it
/// before it is resent: the next round may skip that value (MR-MPS-3).
/// Found by the differential fuzz target (`crash-mp-loss-then-late-ack`):
/// the judge noted losses only when a request was sent, by which time
/// the PSN was acknowledged and forgotten.
#[test]
fn value_retired_by_a_loss_a_later_ack_covers_mr_mps_3() {
    let c = MpConfig {
        reorder_threshold: 2,
        ..cfg()
    };
    let mut j = MpJudge::new(c, CapturePoint::Requester);
    for (psn, ev) in [(0u32, 1u16), (1, 2), (2, 3)] {
        j = j.request(&data(psn, false).roce(), ev, u64::from(psn));
    }
    let s = SackethRepr {
        syndrome: Syndrome(0x1F),
        msn: Msn::new(0xFF_FFFF),
        sack_base_psn: Psn::new(0),
        sack_bitmap: 0b011 << 61, // PSNs 1 and 2: PSN 0 deemed lost (K = 2)
        echoed_entropy: 0x77,
        ..SackethRepr::default()
    };
    j = j.ack(&wire(ack(0xFF_FFFF, s)).roce(), 10);
    // PSN 0 arrives late: everything acknowledged before A resends it.
    let all = SackethRepr {
        sack_base_psn: Psn::new(3),
        sack_bitmap: 0,
        ..s
    };
    j = j.ack(&wire(ack(2, all)).roce(), 11);
    assert!(j.findings.is_empty(), "{:?}", j.findings);
    // Value 1 is retired: the round 2 3 2 skips it.
    for (psn, ev) in [(3u32, 2u16), (4, 3), (5, 2)] {
        j = j.request(&data(psn, false).roce(), ev, 20 + u64::from(psn));
    }
    assert!(j.findings.is_empty(), "{:?}", j.findings);
}

/// An older MP ACK the network delivers after a newer one (multipath
/// reorders ACKs too): its bitmap reports PSNs the newer ACK already
/// acknowledged cumulatively, which the judge has forgotten. They were
/// sent, so no MR-MPA-4; and on one path (both ACKs from UDP source port
/// 0 here) the cumulative PSN moved back, MR-MPA-3.
#[test]
fn reordered_ack_bits_below_latest_cum_mr_mpa_4() {
    let j = sent_10_to_13();
    let base = echoing_psn_11(10);
    // The newer ACK first: 10..=12 cumulatively (forgotten by the judge).
    let newer = wire(ack(
        12,
        SackethRepr {
            sack_base_psn: Psn::new(13),
            ..base
        },
    ));
    let j = j.ack(&newer.roce(), 20);
    assert!(j.findings.is_empty(), "{:?}", j.findings);
    // The older one: nothing cumulative, 11 and 12 in the bitmap.
    let older = wire(ack(
        9,
        SackethRepr {
            sack_bitmap: 0b011 << 61,
            ..base
        },
    ));
    let k = j.ack(&older.roce(), 21);
    assert_eq!(ids(&k.findings), vec!["MR-MPA-3"]);
    // A bit for a PSN never sent is still reported in such an ACK.
    let never = wire(ack(
        9,
        SackethRepr {
            sack_bitmap: 0b011 << 61 | 1 << 58,
            ..base
        },
    ));
    assert_eq!(
        ids(&j.ack(&never.roce(), 21).findings),
        vec!["MR-MPA-3", "MR-MPA-4"]
    );
}

#[test]
fn ack_deadline_at_responder_mr_mpa_1() {
    let j = MpJudge::new(cfg(), CapturePoint::Responder);
    let j = j.request(&data(0, true).roce(), 1, 0);
    assert_eq!(ids(&j.finish(4_000)), Vec::<&str>::new());
    assert_eq!(ids(&j.finish(4_001)), vec!["MR-MPA-1"]);
    let s = SackethRepr {
        syndrome: Syndrome(0x1F),
        retransmission: true,
        sack_base_psn: Psn::new(1),
        echoed_entropy: 1,
        echoed_timestamp: 1000,
        ..SackethRepr::default()
    };
    let a = wire(ack(0, s));
    let j = j.ack(&a.roce(), 100);
    assert!(j.finish(1_000_000).is_empty(), "{:?}", j.finish(1_000_000));
}

#[test]
fn bytes_in_flight_bound_mr_mpc_1() {
    let c = MpConfig {
        pmtu: 256,
        cwnd_max: 1024,
        entropy_set: vec![],
        ..MpConfig::default()
    };
    let mut j = MpJudge::new(c, CapturePoint::Requester);
    for i in 0..4u32 {
        j = j.request(&data(i, false).roce(), 1, u64::from(i));
    }
    assert!(j.findings.is_empty());
    let j = j.request(&data(4, false).roce(), 1, 5);
    assert_eq!(ids(&j.findings), vec!["MR-MPC-1"]);
}

/// A NAK 0x65 naming `q`.
fn trim_nak(q: u32) -> Wire {
    wire(ack(
        0xFF_FFFF,
        SackethRepr {
            syndrome: Syndrome(0x65),
            trimmed: true,
            sack_base_psn: Psn::new(q),
            ..SackethRepr::default()
        },
    ))
}

#[test]
fn exemptions_from_cwnd_mr_mpc_10() {
    let c = MpConfig {
        pmtu: 256,
        cwnd_max: 1024,
        entropy_set: vec![],
        ..MpConfig::default()
    };
    let mut j = MpJudge::new(c, CapturePoint::Requester);
    for i in 0..4u32 {
        j = j.request(&data(i, false).roce(), 1, u64::from(i));
    }
    // PSN 0 trimmed: out of flight; PSN 4 fills mp_cwnd_max again.
    j = j.ack(&trim_nak(0).roce(), 10);
    j = j.request(&data(4, false).roce(), 1, 11);
    assert!(j.findings.is_empty(), "{:?}", j.findings);
    // A lost PSN other than the oldest: not exempt.
    let k = j.ack(&trim_nak(2).roce(), 12);
    let k = k.request(&data(5, false).roce(), 1, 12);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
    let k = k.request(&data(2, true).roce(), 2, 13);
    assert_eq!(ids(&k.findings), vec!["MR-MPC-1"], "only the oldest PSN");
    // The oldest unacknowledged PSN, deemed lost, resent beyond: allowed.
    let j = j.request(&data(0, true).roce(), 2, 12);
    assert!(j.findings.is_empty(), "MR-MPC-10: {:?}", j.findings);
    // A READ re-request beyond: allowed (adds no bytes).
    let rr = wire(read(20, 3, 512, 2048, 0x5000, 9, 256));
    let j = j.request(&rr.roce(), 3, 13);
    assert!(j.findings.is_empty(), "MR-MPC-10: {:?}", j.findings);
    // A second copy of PSN 0 before it can be deemed lost again: reported.
    let k = j.request(&data(0, true).roce(), 3, 14);
    assert_eq!(
        ids(&k.findings),
        vec!["MR-MPL-4", "MR-MPC-1"],
        "MR-MPC-10: once per loss"
    );
    // A new packet beyond: reported.
    let k = j.request(&data(5, false).roce(), 3, 14);
    assert_eq!(ids(&k.findings), vec!["MR-MPC-1"]);
}

/// A cumulative MP ACK up to `cum`, echoing nothing the judge knows.
fn cum_ack(cum: u32) -> Wire {
    wire(ack(
        cum,
        SackethRepr {
            syndrome: Syndrome(0x1F),
            sack_base_psn: Psn::new(cum + 1),
            ..SackethRepr::default()
        },
    ))
}

/// Found by the differential fuzz target on the reference transport: a
/// READ whose responses were lost is re-requested (R set, MR-MPR-7)
/// with a PSN the responder acknowledged when it accepted the READ
/// (MR-MPR-2); that is no retransmission of an acknowledged PSN.
#[test]
fn read_re_request_of_an_acknowledged_read_is_no_mr_mpl_6() {
    let mut j = MpJudge::new(cfg(), CapturePoint::Requester);
    j = j.request(&wire(read(10, 0, 0, 512, 0x5000, 9, 512)).roce(), 1, 0);
    j = j.ack(&cum_ack(11).roce(), 10);
    // All responses lost: re-request from offset 0, after the RTO.
    let rr = wire(read(10, 0, 0, 512, 0x5000, 9, 512).ext(|e| {
        e.mpeth.as_mut().unwrap().retransmission = true;
    }));
    let k = j.request(&rr.roce(), 2, 1_000_000);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
    // A data packet with that PSN would be one.
    let k = j.request(&stamped(10, true, 1_001_010).roce(), 2, 1_000_000);
    assert_eq!(ids(&k.findings), vec!["MR-MPL-6"]);
}

/// MR-MPP-14: an atomic whose PSN an MP ACK reported but whose MP
/// Atomic Acknowledge did not arrive is retransmitted after the RTO.
#[test]
fn atomic_retransmission_after_an_mp_ack_is_no_mr_mpl_6() {
    let mut j = MpJudge::new(cfg(), CapturePoint::Requester);
    j = j.request(&wire(fetch_add(20, 0, 0x5000, 9, 1)).roce(), 1, 0);
    j = j.ack(&cum_ack(20).roce(), 10);
    let again = wire(fetch_add(20, 0, 0x5000, 9, 1).ack_req(true).ext(|e| {
        e.mpeth.as_mut().unwrap().retransmission = true;
    }));
    let k = j.request(&again.roce(), 2, 1_000_000);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
}

/// Found by the differential fuzz target on the reference transport:
/// the RTO deems every PSN in flight lost at once, retiring their
/// values (MR-MPF-1) before the capture shows most retransmissions; the
/// requester then goes round the values left. Sending from one value
/// with the others eligible stays a finding (MR-MPS-3).
#[test]
fn values_retired_by_the_rto_are_doubtful_for_mr_mps_3() {
    let c = MpConfig {
        pmtu: 256,
        entropy_set: vec![1, 2, 3, 4, 5, 6],
        ..MpConfig::default()
    };
    let mut j = MpJudge::new(c.clone(), CapturePoint::Requester);
    // PSNs 0..4 on values 1..4; 5 and 6 are left in the round.
    for i in 0..4u32 {
        j = j.request(&data(i, false).roce(), (i + 1) as u16, u64::from(i));
    }
    // The RTO: 1..4 retired; the retransmissions and the next new PSN
    // go round 5, 6 (value 1 was retired before the round of the
    // second 6 began, and is seen retransmitted before it).
    let rto = 1_000_000;
    for (n, (psn, ev)) in [(0u32, 5u16), (1, 6), (2, 6), (3, 5), (4, 6)]
        .into_iter()
        .enumerate()
    {
        j = j.request(&data(psn, psn < 4).roce(), ev, rto + n as u64);
        assert!(j.findings.is_empty(), "PSN {psn}: {:?}", j.findings);
    }
    // One value for everything, nothing lost: reported.
    let mut j = MpJudge::new(c, CapturePoint::Requester);
    for i in 0..3u32 {
        j = j.request(&data(i, false).roce(), 1, u64::from(i));
    }
    assert_eq!(ids(&j.findings), vec!["MR-MPS-3"]);
}

/// Found by the differential fuzz target on the reference transport:
/// two packets sent at one instant on one entropy value (a retransmission
/// and a new packet) echo alike; an ACK echoing them may answer either.
#[test]
fn an_echo_that_names_two_packets_judges_neither_mr_mpa_6() {
    let c = MpConfig {
        pmtu: 256,
        entropy_set: vec![],
        ..MpConfig::default()
    };
    let mut j = MpJudge::new(c, CapturePoint::Requester);
    // PSN 0 at time 0; at time 1_000_000 its retransmission and PSN 1,
    // both on value 7 with timestamp 1000.
    j = j.request(&data(0, false).roce(), 3, 0);
    let retx = wire(
        req(Opcode::MP_SEND, 0, 0, 0, 8192, &[0; 256])
            .ack_req(true)
            .ext(|e| {
                let m = e.mpeth.as_mut().unwrap();
                m.retransmission = true;
                m.timestamp = 1000;
            }),
    );
    let new = wire(req(Opcode::MP_SEND, 1, 0, 256, 8192, &[0; 256]).ext(|e| {
        e.mpeth.as_mut().unwrap().timestamp = 1000;
    }));
    j = j.request(&retx.roce(), 7, 1_000_000);
    j = j.request(&new.roce(), 7, 1_000_000);
    assert!(j.findings.is_empty(), "{:?}", j.findings);
    // The ACK of PSN 1 (R clear): the echo names both packets.
    let a = wire(ack(
        0xFF_FFFF,
        SackethRepr {
            syndrome: Syndrome(0x1F),
            sack_base_psn: Psn::new(0),
            sack_bitmap: 1 << 62,
            echoed_entropy: 7,
            echoed_timestamp: 1000,
            ..SackethRepr::default()
        },
    ));
    let k = j.ack(&a.roce(), 1_000_010);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
    // PSN 0 acknowledged (forgotten), then an ACK echoing its
    // retransmission (R set): PSN 1 alone is kept with that echo.
    let j = j.ack(&cum_ack(0).roce(), 1_000_020);
    let b = wire(ack(
        0,
        SackethRepr {
            syndrome: Syndrome(0x1F),
            retransmission: true,
            sack_base_psn: Psn::new(1),
            echoed_entropy: 7,
            echoed_timestamp: 1000,
            ..SackethRepr::default()
        },
    ));
    let k = j.ack(&b.roce(), 1_000_030);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
    // A probe sent beside a retransmission, on its value at its instant:
    // the probe's ACK (R clear) echoes both.
    let mut j = MpJudge::new(cfg(), CapturePoint::Requester);
    j = j.request(&data(5, false).roce(), 2, 0);
    let retx = wire(
        req(Opcode::MP_SEND, 5, 0, 5 * 256, 8192, &[0; 256])
            .ack_req(true)
            .ext(|e| {
                let m = e.mpeth.as_mut().unwrap();
                m.retransmission = true;
                m.timestamp = 2000;
            }),
    );
    let probe = wire(
        PacketBuilder::new(Opcode::MP_PROBE)
            .psn(5)
            .dest_qp(0x22)
            .ack_req(true)
            .ext(|e| {
                e.mpeth = Some(MpethRepr {
                    timestamp: 2000,
                    ..MpethRepr::default()
                })
            }),
    );
    j = j.request(&retx.roce(), 1, 1_000_000);
    j = j.request(&probe.roce(), 1, 1_000_000);
    let c = wire(ack(
        4,
        SackethRepr {
            syndrome: Syndrome(0x1F),
            sack_base_psn: Psn::new(5),
            echoed_entropy: 1,
            echoed_timestamp: 2000,
            ..SackethRepr::default()
        },
    ));
    let k = j.ack(&c.roce(), 1_000_010);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
}

/// Found by the differential fuzz target on the reference transport: the
/// responder reports every PSN an MP READ reserves once it accepted it
/// (MR-MPR-2), which the capture shows only as the request's PSN.
#[test]
fn a_read_s_reserved_psns_count_as_sent_mr_mpa_4() {
    let mut j = MpJudge::new(cfg(), CapturePoint::Requester);
    j = j.request(&data(25, false).roce(), 1, 0);
    // A READ of 768 bytes at PMTU 256 at PSN 27 takes 27, 28 and 29.
    j = j.request(&wire(read(27, 1, 0, 768, 0x5000, 9, 768)).roce(), 2, 1);
    let a = wire(ack(
        25,
        SackethRepr {
            syndrome: Syndrome(0x1F),
            sack_base_psn: Psn::new(26),
            sack_bitmap: 0b0111 << 60,
            echoed_entropy: 2,
            echoed_timestamp: 1027,
            ..SackethRepr::default()
        },
    ));
    let k = j.ack(&a.roce(), 10);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
    // PSN 30 was not sent.
    let b = wire(ack(
        25,
        SackethRepr {
            syndrome: Syndrome(0x1F),
            sack_base_psn: Psn::new(26),
            sack_bitmap: 0b01111 << 59,
            echoed_entropy: 2,
            echoed_timestamp: 1027,
            ..SackethRepr::default()
        },
    ));
    assert_eq!(ids(&j.ack(&b.roce(), 10).findings), vec!["MR-MPA-4"]);
}

/// Requests PSN 10..=13 at capture times 10..=13 on values 1, 2, 3, 1,
/// and the MP ACKs `older` (cumulative 11, triggered by PSN 11, SACKs
/// 13) and `newer` (cumulative 13, triggered by PSN 13).
fn two_acks() -> (MpJudge, Wire, Wire) {
    let j = sent_10_to_13();
    let s = SackethRepr {
        syndrome: Syndrome(0x1F),
        msn: Msn::new(0xFF_FFFF),
        ..SackethRepr::default()
    };
    let older = wire(ack(
        11,
        SackethRepr {
            sack_base_psn: Psn::new(12),
            sack_bitmap: 0b01 << 62,
            echoed_entropy: 3,
            echoed_timestamp: 1011,
            ..s
        },
    ));
    let newer = wire(ack(
        13,
        SackethRepr {
            sack_base_psn: Psn::new(14),
            echoed_entropy: 2,
            echoed_timestamp: 1013,
            ..s
        },
    ));
    (j, older, newer)
}

/// Two MP ACKs from different UDP source ports (paths), the newer one
/// captured first: the network reordered them, the responder did
/// nothing wrong. No MR-MPA-3 (cumulative 13 then 11) and no MR-MPA-5
/// (the older ACK's window shows PSN 12 missing, which the newer one
/// covered) in a capture; in the order the responder sent them, both.
#[test]
fn acks_reordered_across_paths_are_no_mr_mpa_3_or_5() {
    let (j, older, newer) = two_acks();
    let k = j.ack_on(&newer.roce(), 0xD001, 20);
    let k = k.ack_on(&older.roce(), 0xD002, 21);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
    // A harness that sees the responder's output (AsSent) reports them.
    let mut strict = j.clone();
    strict.ack_order = AckOrder::AsSent;
    let k = strict.ack_on(&newer.roce(), 0xD001, 20);
    let k = k.ack_on(&older.roce(), 0xD002, 21);
    assert_eq!(ids(&k.findings), vec!["MR-MPA-3"]);
    // In sending order on two paths: clean either way.
    let k = j.ack_on(&older.roce(), 0xD002, 20);
    let k = k.ack_on(&newer.roce(), 0xD001, 21);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
    // MR-MPA-5: the newer ACK (triggered by PSN 13) SACKs PSN 13; the
    // older one (by PSN 11), captured after it on another path, shows
    // 13 missing. Clean in a capture, MR-MPA-5 as sent.
    let sack = |bitmap: u64, ev: u16, ts: u32| {
        wire(ack(
            11,
            SackethRepr {
                syndrome: Syndrome(0x1F),
                msn: Msn::new(0xFF_FFFF),
                sack_base_psn: Psn::new(12),
                sack_bitmap: bitmap,
                echoed_entropy: ev,
                echoed_timestamp: ts,
                ..SackethRepr::default()
            },
        ))
    };
    let (sacks_13, not_yet) = (sack(0b01 << 62, 2, 1013), sack(0, 3, 1011));
    let k = j.ack_on(&sacks_13.roce(), 0xD001, 20);
    let k = k.ack_on(&not_yet.roce(), 0xD002, 21);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
    let k = strict.ack_on(&sacks_13.roce(), 0xD001, 20);
    let k = k.ack_on(&not_yet.roce(), 0xD002, 21);
    assert_eq!(ids(&k.findings), vec!["MR-MPA-5"]);
}

/// On one path (same UDP source port) MP ACKs arrive in the order they
/// were sent: a cumulative PSN that moves back there is MR-MPA-3, and a
/// PSN reported received, then missing, MR-MPA-5.
#[test]
fn cum_moving_back_on_one_path_is_mr_mpa_3() {
    let (j, _, newer) = two_acks();
    let k = j.ack_on(&newer.roce(), 0xD001, 20);
    let back = wire(ack(
        11,
        SackethRepr {
            syndrome: Syndrome(0x1F),
            msn: Msn::new(0xFF_FFFF),
            sack_base_psn: Psn::new(12),
            echoed_entropy: 3,
            echoed_timestamp: 1011,
            ..SackethRepr::default()
        },
    ));
    let k = k.ack_on(&back.roce(), 0xD001, 21);
    assert_eq!(ids(&k.findings), vec!["MR-MPA-3"]);
    // PSN 13 SACKed on a path, then shown missing there: MR-MPA-5.
    let (j, older, _) = two_acks();
    let k = j.ack_on(&older.roce(), 0xD002, 20);
    let missing = wire(ack(
        11,
        SackethRepr {
            syndrome: Syndrome(0x1F),
            msn: Msn::new(0xFF_FFFF),
            sack_base_psn: Psn::new(12),
            echoed_entropy: 2,
            echoed_timestamp: 1013,
            ..SackethRepr::default()
        },
    ));
    let k2 = k.ack_on(&missing.roce(), 0xD002, 21);
    assert_eq!(ids(&k2.findings), vec!["MR-MPA-5"]);
    // The same ACK on another path is not proven later: no finding.
    let k3 = k.ack_on(&missing.roce(), 0xD003, 21);
    assert!(k3.findings.is_empty(), "{:?}", k3.findings);
}

/// An ACK on another path whose triggering packet was captured after
/// an earlier ACK was: the earlier ACK left the responder before the
/// trigger reached it, so before this ACK was sent. A cumulative PSN
/// moving back across paths is then MR-MPA-3, a PSN un-reported
/// MR-MPA-5; within the timestamp tolerance it is not proven.
#[test]
fn an_ack_triggered_after_another_was_captured_is_judged_against_it() {
    let (j, older, _) = two_acks();
    // PSN 13 SACKed at time 20, everything up to 13 at 21, on path 0xD002.
    let j = j.ack_on(&older.roce(), 0xD002, 20);
    let j = j.ack_on(&cum_ack(13).roce(), 0xD002, 21);
    // PSN 14 sent at 30 on value 2, timestamp 1014; its ACK on another
    // path says cumulative 11.
    let j = j.request(&data(14, false).roce(), 2, 30);
    let late = wire(ack(
        11,
        SackethRepr {
            syndrome: Syndrome(0x1F),
            msn: Msn::new(0xFF_FFFF),
            sack_base_psn: Psn::new(12),
            sack_bitmap: 0b001 << 61,
            echoed_entropy: 2,
            echoed_timestamp: 1014,
            ..SackethRepr::default()
        },
    ));
    let k = j.ack_on(&late.roce(), 0xD001, 40);
    assert_eq!(ids(&k.findings), vec!["MR-MPA-3"]);
    // Cumulative 12 and PSN 13 missing: MR-MPA-5 only.
    let unreport = wire(ack(
        12,
        SackethRepr {
            syndrome: Syndrome(0x1F),
            msn: Msn::new(0xFF_FFFF),
            sack_base_psn: Psn::new(13),
            sack_bitmap: 0b01 << 62,
            echoed_entropy: 2,
            echoed_timestamp: 1014,
            ..SackethRepr::default()
        },
    ));
    let mut before_cum = two_acks().0.ack_on(&older.roce(), 0xD002, 20);
    before_cum = before_cum.request(&data(14, false).roce(), 2, 30);
    let k = before_cum.ack_on(&unreport.roce(), 0xD001, 40);
    assert_eq!(ids(&k.findings), vec!["MR-MPA-5"]);
    // With 10 ns of tolerance the trigger (30) is not proven after the
    // ACKs (20, 21): nothing.
    let mut tolerant = j.clone();
    tolerant.tolerance_ns = 10;
    let k = tolerant.ack_on(&late.roce(), 0xD001, 40);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
}

/// A capture-judge helper: PSNs 0..5 sent at `t0 + i` ns stamped
/// `ts0 + i` (wrapping), and an ACK at `t0 + 20` that SACKs PSNs 1..=4.
fn sacked_1_to_4(t0: u64, ts0: u32) -> MpJudge {
    let mut j = MpJudge::new(cfg(), CapturePoint::Requester);
    for i in 0..5u32 {
        let w = stamped(i, false, ts0.wrapping_add(i));
        j = j.request(&w.roce(), (i % 3 + 1) as u16, t0 + u64::from(i));
    }
    let s = SackethRepr {
        syndrome: Syndrome(0x1F),
        msn: Msn::new(0xFF_FFFF),
        sack_base_psn: Psn::new(0),
        sack_bitmap: 0b1111 << 59,
        echoed_entropy: 2,
        echoed_timestamp: ts0.wrapping_add(4),
        ..SackethRepr::default()
    };
    let j = j.ack(&wire(ack(0xFF_FFFF, s)).roce(), t0 + 20);
    assert!(j.findings.is_empty(), "{:?}", j.findings);
    j
}

/// MR-MPL-6 counts only acknowledgements the requester processed before
/// the copy left: a copy of PSN 2 stamped 5 ns after the original burst
/// (before the ACK was captured at 20 ns) but captured at 500 ns, after
/// the ACK, left a loaded host late. No finding.
#[test]
fn copy_built_before_the_ack_but_captured_after_is_no_mr_mpl_6() {
    let j = sacked_1_to_4(0, 1000);
    let k = j.request(&stamped(2, true, 1005).roce(), 2, 500);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
    // Within the tolerance of the ACK's capture time: no finding either.
    let mut t = j.clone();
    t.tolerance_ns = 100;
    let k = t.request(&stamped(2, true, 1000 + 110).roce(), 2, 500);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
    // Stamp 0 (no estimate possible): no finding.
    let k = j.request(&stamped(2, true, 0).roce(), 2, 500);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
}

/// The real fault stays caught: a copy stamped well after the ACK's
/// capture time (the requester had the ACK) is MR-MPL-6, naming the copy
/// (frame 0 in this harness), the ACK and the original.
#[test]
fn copy_built_after_the_ack_is_mr_mpl_6() {
    let mut j = sacked_1_to_4(0, 1000);
    j.tolerance_ns = 100;
    let k = j.request(&stamped(2, true, 1000 + 400).roce(), 2, 500);
    assert_eq!(ids(&k.findings), vec!["MR-MPL-6"]);
    let mut k = j.clone();
    let w = stamped(2, true, 1000 + 400);
    k.on_request(9, &w.roce(), 2, 500);
    let f = k.take_findings();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].1, vec![9, 0, 0]);
    // Without an earlier stamped packet there is no estimate: no finding.
    let mut fresh = MpJudge::new(cfg(), CapturePoint::Requester);
    let s = SackethRepr {
        syndrome: Syndrome(0x1F),
        msn: Msn::new(0xFF_FFFF),
        sack_base_psn: Psn::new(3),
        ..SackethRepr::default()
    };
    fresh = fresh.ack(&wire(ack(2, s)).roce(), 10);
    let k = fresh.request(&stamped(1, true, 5000).roce(), 2, 500);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
}

/// The stamp is 32 bits of nanoseconds (wraps every ~4.3 s) and capture
/// times are 64 bits: the offset and the build time are taken modulo
/// 2^32, so a burst whose stamps wrap (and capture times past 2^32) is
/// judged as any other.
#[test]
fn stamps_wrapping_across_2_32_are_judged_the_same() {
    let t0 = (5u64 << 32) + u64::from(u32::MAX) - 2;
    let ts0 = u32::MAX - 1;
    let j = sacked_1_to_4(t0, ts0);
    // Built before the ACK (stamp ts0 + 5 wraps to 3), captured after.
    let k = j.request(&stamped(2, true, ts0.wrapping_add(5)).roce(), 2, t0 + 500);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
    // Built after the ACK (stamp ts0 + 400).
    let k = j.request(&stamped(2, true, ts0.wrapping_add(400)).roce(), 2, t0 + 500);
    assert_eq!(ids(&k.findings), vec!["MR-MPL-6"]);
}

/// [`SenderClock::Capture`] (a harness whose capture times are the
/// requester's own time): the stamp is compared with the ACK's time
/// directly, without the tolerance that widens capture times.
#[test]
fn sender_clock_capture_compares_stamps_directly() {
    let mut j = MpJudge::new(cfg(), CapturePoint::Requester);
    j.sender_clock = SenderClock::Capture;
    j.tolerance_ns = 1_000_000;
    for i in 0..5u32 {
        j = j.request(
            &stamped(i, false, i).roce(),
            (i % 3 + 1) as u16,
            u64::from(i),
        );
    }
    let s = SackethRepr {
        syndrome: Syndrome(0x1F),
        msn: Msn::new(0xFF_FFFF),
        sack_base_psn: Psn::new(0),
        sack_bitmap: 0b1111 << 59,
        ..SackethRepr::default()
    };
    let j = j.ack(&wire(ack(0xFF_FFFF, s)).roce(), 20);
    // Captured (say, at the start of a time step) before its stamp.
    let k = j.request(&stamped(2, true, 400).roce(), 2, 30);
    assert_eq!(ids(&k.findings), vec!["MR-MPL-6"]);
    let k = j.request(&stamped(2, true, 15).roce(), 2, 30);
    assert!(k.findings.is_empty(), "{:?}", k.findings);
}

/// A resource NAK 0x66 naming `q`.
fn resource_nak(q: u32) -> Wire {
    wire(ack(
        0xFF_FFFF,
        SackethRepr {
            syndrome: Syndrome::NAK_RESOURCE,
            sack_base_psn: Psn::new(q),
            ..SackethRepr::default()
        },
    ))
}

#[test]
fn resource_nak_toward_requester_without_rn_mr_mpp_23() {
    // Not known whether the requester announced RN (a capture): nothing.
    let j = MpJudge::new(cfg(), CapturePoint::Requester);
    let j = j.request(&data(0, false).roce(), 1, 0);
    assert!(j.ack(&resource_nak(0).roce(), 5).findings.is_empty());
    // It announced RN: nothing; it did not: MR-MPP-23.
    for (rn, want) in [(Some(true), vec![]), (Some(false), vec!["MR-MPP-23"])] {
        let c = MpConfig {
            resource_nak: rn,
            ..cfg()
        };
        let j = MpJudge::new(c, CapturePoint::Requester).request(&data(0, false).roce(), 1, 0);
        assert_eq!(ids(&j.ack(&resource_nak(0).roce(), 5).findings), want);
    }
}

#[test]
fn resend_after_resource_nak_is_no_early_retransmission_mr_mpp_25() {
    let mut j = MpJudge::new(cfg(), CapturePoint::Requester);
    for i in 0..3u32 {
        j = j.request(&data(i, false).roce(), (i % 3 + 1) as u16, u64::from(i));
    }
    // PSN 1 resent 10 ns later, before it could be deemed lost: MR-MPL-4 ...
    let early = j.request(&data(1, true).roce(), 3, 10);
    assert_eq!(ids(&early.findings), vec!["MR-MPL-4"]);
    // ... unless a resource NAK named it (MR-MPP-25): no finding, and its
    // value is not taken as retired (MR-MPF-11).
    let j = j.ack(&resource_nak(1).roce(), 8);
    let j = j.request(&data(1, true).roce(), 3, 10);
    assert!(j.findings.is_empty(), "{:?}", j.findings);
    assert!(!j.retired.contains(&2), "MR-MPF-11");
}

#[test]
fn o_alike_in_every_packet_of_a_message_mr_mpp_21() {
    let o = |psn: u32, ordered: bool| {
        wire(
            req(Opcode::MP_SEND, psn, 0, psn * 256, 8192, &[0; 256])
                .ext(|e| e.mpeth.as_mut().unwrap().ordered = ordered),
        )
    };
    // O in every packet: no finding (whether the peer announced O is not
    // in the capture).
    let mut j = MpJudge::new(cfg(), CapturePoint::Requester);
    for (i, ev) in [1u16, 2, 3].into_iter().enumerate() {
        j = j.request(&o(i as u32, true).roce(), ev, i as u64);
    }
    assert!(j.findings.is_empty(), "{:?}", j.findings);
    // O in the first two packets only.
    let j = j.request(&o(3, false).roce(), 1, 3);
    assert_eq!(ids(&j.findings), vec!["MR-MPP-21"]);
}
