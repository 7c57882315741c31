//! Requester tests: per requirement (conforming and violating), reordering
//! with K = 3, RTO, a black-holed entropy value, trimming, READ re-request,
//! PSN wrap.

use super::*;
use crate::Finding;
use crate::model::mp::ArrivalInfo;
use crate::model::mp::testutil::*;
use crate::model::{Effect, Field, PacketSpec};
use metaroce_codec::ext::{MpethRepr, RethRepr, SackethRepr, Syndrome};
use metaroce_codec::{Msn, PacketBuilder};

pub(crate) fn cfg() -> MpConfig {
    MpConfig {
        pmtu: 256,
        entropy_set: vec![0xC000, 0xC001, 0xC002, 0xC003],
        window: 64,
        // The tests were written for K = 3 (the §10.3 default until
        // 2026-12-01); rule (a) is the same for every K.
        reorder_threshold: 3,
        ..MpConfig::default()
    }
}

fn exact<T: Clone>(f: &Field<T>) -> Option<T> {
    match f {
        Field::Exact(v) => Some(v.clone()),
        _ => None,
    }
}

/// Builds the packet a spec describes for requester `r`, from entropy `ev`.
pub(crate) fn build(r: &MpRequester, spec: &PacketSpec, ts: u32) -> PacketBuilder {
    let op = exact(&spec.opcode).unwrap();
    let msn = exact(&spec.mpeth.msn).unwrap_or(Msn::new(0));
    let offset = exact(&spec.mpeth.offset).unwrap_or(0);
    let msg_len = exact(&spec.mpeth.msg_len).unwrap_or(0);
    let w = r
        .wrs
        .values()
        .find(|w| w.msn == msn && w.wr.op.opcode() == op);
    let payload_len = match w.map(|w| &w.wr.op) {
        Some(WrOp::Send { .. } | WrOp::Write { .. }) => {
            msg_len.saturating_sub(offset).min(r.cfg.pmtu)
        }
        _ => 0,
    };
    let mut b = PacketBuilder::new(op)
        .psn(exact(&spec.psn).unwrap().value())
        .dest_qp(r.remote_qpn)
        .ack_req(exact(&spec.headers.ack_req).unwrap_or(false))
        .payload(vec![0xAB; payload_len as usize])
        .ext(|e| {
            e.mpeth = Some(MpethRepr {
                first: exact(&spec.mpeth.first).unwrap_or(false),
                last: exact(&spec.mpeth.last).unwrap_or(false),
                retransmission: exact(&spec.mpeth.retransmission).unwrap_or(false),
                ordered: exact(&spec.mpeth.ordered).unwrap_or(false),
                msn,
                offset,
                msg_len,
                timestamp: ts,
                ..MpethRepr::default()
            });
        });
    if let Some(WrOp::Write { va, rkey, len, .. } | WrOp::Read { va, rkey, len }) =
        w.map(|w| w.wr.op.clone())
    {
        let dma_len = exact(&spec.mpeth.dma_len).unwrap_or(len);
        b = b.ext(|e| e.reth = Some(RethRepr { va, rkey, dma_len }));
    }
    b
}

/// Sends the first packet the model lists (required first), from the
/// smallest allowed entropy value, at `now`.
pub(crate) fn send_next(r: &MpRequester, now: u64) -> (MpRequester, Vec<Finding>, u16) {
    let out = r.next_packets(now);
    let spec = out
        .required
        .iter()
        .chain(out.optional.iter())
        .find_map(|c| match &c.value {
            Effect::Send(s) if s.opcode != Field::Exact(Opcode::MP_PROBE) => Some(s.clone()),
            _ => None,
        })
        .expect("something to send");
    let ev = match &spec.udp_src_port {
        Field::OneOf(v) => v[0],
        Field::Exact(v) => *v,
        Field::Any => 0xC000,
    };
    let w = wire(build(r, &spec, now as u32));
    let (n, f) = r.on_transmit(&w.roce(), ev, now);
    (n, f, ev)
}

fn sack(cum: u32, base: u32, bitmap: u64, ev: u16, ts: u32) -> SackethRepr {
    SackethRepr {
        syndrome: Syndrome(0x1F),
        sack_base_psn: psn(base),
        sack_bitmap: bitmap,
        echoed_entropy: ev,
        echoed_timestamp: ts,
        msn: Msn::new(cum),
        ..SackethRepr::default()
    }
}

fn ack_at(r: &MpRequester, cum: u32, s: SackethRepr, now: u64) -> (MpRequester, Outcomes) {
    let w = wire(ack(cum, s));
    r.on_ack(
        &w.roce(),
        &ArrivalInfo {
            now_ns: now,
            ..ArrivalInfo::default()
        },
    )
}

fn write_wr(wr: u64, len: u32) -> SendWr {
    SendWr {
        wr,
        op: WrOp::Write {
            va: 0x1000,
            rkey: 7,
            len,
            imm: None,
        },
        fence: false,
        signaled: true,
    }
}

fn ids(f: &[Finding]) -> Vec<&'static str> {
    f.iter().map(|x| x.id).collect()
}

fn required_psns(o: &Outcomes) -> Vec<u32> {
    required_sends(o)
        .iter()
        .filter_map(|s| exact(&s.psn).map(|p| p.value()))
        .collect()
}

/// Posts one WRITE of `n` packets and sends them all at t = 0, 1, ...
fn sent_write(n: u32) -> (MpRequester, Vec<u16>) {
    let r = MpRequester::new(cfg(), 0x22, psn(0));
    let (mut r, _) = r.post_send(write_wr(1, 256 * n));
    let mut evs = Vec::new();
    for t in 0..n {
        let (n2, f, ev) = send_next(&r, u64::from(t));
        assert!(f.is_empty(), "{f:?}");
        evs.push(ev);
        r = n2;
    }
    (r, evs)
}

#[test]
fn first_transmissions_conform_mr_mph_2_mr_mph_3_mr_mph_10_mr_mps_3() {
    let (r, evs) = sent_write(8);
    // Each run of N = 4 from a round start uses every value once (MR-MPS-3).
    let mut a = evs[..4].to_vec();
    a.sort();
    assert_eq!(a, cfg().entropy_set, "MR-MPS-3");
    assert_eq!(r.last_sent_idx, Some(7));
    // A violating sender: reuse a value before the round ends.
    let r = MpRequester::new(cfg(), 0x22, psn(0));
    let (r, _) = r.post_send(write_wr(1, 1024));
    let (r, _, ev) = send_next(&r, 0);
    let spec = r.next_packets(1).optional[0].value.clone();
    let Effect::Send(spec) = spec else { panic!() };
    let w = wire(build(&r, &spec, 1));
    let (_, f) = r.on_transmit(&w.roce(), ev, 1);
    assert_eq!(ids(&f), vec!["MR-MPS-3"]);
    // Wrong MSN on a first transmission (MR-MPH-3), R set on a first transmission (MR-MPH-2).
    let w = wire(build(&r, &spec, 1).ext(|e| e.mpeth.as_mut().unwrap().msn = Msn::new(5)));
    assert_eq!(
        ids(&r.on_transmit(&w.roce(), 0xC001, 1).1),
        vec!["MR-MPH-3"]
    );
    let w = wire(build(&r, &spec, 1).ext(|e| e.mpeth.as_mut().unwrap().retransmission = true));
    assert_eq!(
        ids(&r.on_transmit(&w.roce(), 0xC001, 1).1),
        vec!["MR-MPH-2"]
    );
}

#[test]
fn reordering_with_k_3_mr_mpl_3_mr_mpl_4_mr_mpf_1() {
    let (r, evs) = sent_write(8);
    // PSN 0 missing; PSNs 1, 2 SACKed: only 2 later PSNs, not lost yet (MR-MPL-4).
    let (r, o) = ack_at(
        &r,
        0xFF_FFFF,
        sack(0xFF_FFFF, 0, 0b011 << 61, evs[2], 2),
        1000,
    );
    assert!(required_sends(&o).is_empty(), "MR-MPL-4");
    let early = wire(build(&r, &r.packet_spec(&r.wrs[&1], 0, true, 1000), 1000));
    assert_eq!(
        ids(&r.on_transmit(&early.roce(), 0xC001, 1000).1),
        vec!["MR-MPL-4"]
    );
    // PSN 3 SACKed: K = 3 → PSN 0 lost (MR-MPL-3), its value retired (MR-MPF-1).
    let (r, o) = ack_at(
        &r,
        0xFF_FFFF,
        sack(0xFF_FFFF, 0, 0b0111 << 60, evs[3], 3),
        1001,
    );
    assert_eq!(required_psns(&o), vec![0], "MR-MPL-3");
    assert!(r.entropy.retired.contains_key(&evs[0]), "MR-MPF-1");
    assert_eq!(r.counters.mp_entropy_retired, 1);
    let spec = required_sends(&o)[0].clone();
    assert_eq!(spec.mpeth.retransmission, Field::Exact(true), "MR-MPL-7");
    let Field::OneOf(allowed) = &spec.udp_src_port else {
        panic!()
    };
    assert!(
        !allowed.contains(&evs[0]),
        "MR-MPF-2: not on the retired value"
    );
    // Conforming retransmission: R, AckReq, other value.
    let good = wire(build(&r, &spec, 1002));
    let (r2, f) = r.on_transmit(&good.roce(), allowed[0], 1002);
    assert!(f.is_empty(), "{f:?}");
    assert_eq!(r2.counters.mp_retx_reorder, 1);
    // Violations: R clear (MR-MPL-7); on the retired value (MR-MPF-2); an acknowledged PSN (MR-MPL-6).
    let no_r =
        wire(build(&r, &spec, 1002).ext(|e| e.mpeth.as_mut().unwrap().retransmission = false));
    assert!(ids(&r.on_transmit(&no_r.roce(), allowed[0], 1002).1).contains(&"MR-MPL-7"));
    assert!(ids(&r.on_transmit(&good.roce(), evs[0], 1002).1).contains(&"MR-MPF-2"));
    let acked = wire(build(&r, &r.packet_spec(&r.wrs[&1], 256, true, 1002), 1002));
    assert!(ids(&r.on_transmit(&acked.roce(), allowed[0], 1002).1).contains(&"MR-MPL-6"));
}

#[test]
fn rto_loss_and_backoff_mr_mpl_5_mr_mpl_2() {
    let (r, _) = sent_write(1);
    let rto = r.rtt.rto(&r.cfg);
    let (_, o) = r.on_timer(rto - 1);
    assert!(
        required_sends(&o).is_empty(),
        "MR-MPL-4: not before the RTO"
    );
    let (r, o) = r.on_timer(rto);
    assert_eq!(required_psns(&o), vec![0], "MR-MPL-5");
    assert_eq!(r.rtt.rto(&r.cfg), 2 * rto, "MR-MPL-2: doubled");
}

#[test]
fn an_expiry_sweeps_every_unit_older_than_the_undoubled_rto_mr_mpl_5() {
    // PSN 0 at t = 0 and PSN 1 at t = 1; the first expiry (t = R) deems
    // PSN 0 lost and doubles the RTO. PSN 0 is resent at R. The next expiry
    // is PSN 1's, at 1 + 2R: it deems lost every unit older than R, the
    // resent PSN 0 too (§7.8 rule (b), changed 2026-12-01, issue 20).
    let (r, _) = sent_write(2);
    let rto = r.rtt.rto(&r.cfg);
    let (r, o) = r.on_timer(rto);
    assert_eq!(required_psns(&o), vec![0], "MR-MPL-5");
    let (r, f, _) = send_next(&r, rto);
    assert!(f.is_empty(), "{f:?}");
    let (_, o) = r.on_timer(2 * rto);
    assert!(required_psns(&o).is_empty(), "MR-MPL-4: not before 1 + 2R");
    let (r, o) = r.on_timer(1 + 2 * rto);
    let mut lost = required_psns(&o);
    lost.sort_unstable();
    assert_eq!(lost, vec![0, 1], "MR-MPL-5: the sweep");
    assert_eq!(r.rtt.rto(&r.cfg), 4 * rto, "MR-MPL-2: doubled once more");
}

#[test]
fn retry_exhaustion_mr_mpl_8() {
    let (mut r, _) = sent_write(1);
    let mut now = 0;
    for i in 0..=r.cfg.retry_cnt {
        now += r.rtt.rto(&r.cfg);
        let (n, o) = r.on_timer(now);
        r = n;
        if i < r.cfg.retry_cnt {
            assert!(!r.error);
            let (n, f, _) = send_next(&r, now);
            assert!(f.is_empty(), "{f:?}");
            r = n;
        } else {
            assert!(
                o.required.iter().any(|c| c.value == Effect::EnterError),
                "MR-MPL-8"
            );
        }
    }
    assert!(r.error, "MR-MPL-8: 7 means seven");
}

#[test]
fn black_holed_entropy_retire_probe_return_mr_mpf_1_to_mr_mpf_7() {
    let (r, evs) = sent_write(4);
    let dead = evs[0];
    let (r, _) = ack_at(
        &r,
        0xFF_FFFF,
        sack(0xFF_FFFF, 0, 0b0111 << 60, evs[3], 3),
        100,
    );
    assert!(r.entropy.retired.contains_key(&dead), "MR-MPF-1");
    let hold = r.cfg.retire_hold;
    let probe_allowed = |r: &MpRequester, now| {
        r.next_packets(now)
            .optional
            .iter()
            .any(|c| matches!(&c.value, Effect::Send(s) if s.opcode == Field::Exact(Opcode::MP_PROBE) && s.udp_src_port == Field::Exact(dead)))
    };
    assert!(!probe_allowed(&r, 100 + hold - 1), "MR-MPF-3");
    assert!(probe_allowed(&r, 100 + hold), "MR-MPF-3");
    // A probe sent too early is a finding.
    let probe = wire(build(&r, &r.probe_spec(dead), 7777));
    assert_eq!(
        ids(&r.on_transmit(&probe.roce(), dead, 100 + hold - 1).1),
        vec!["MR-MPF-3"]
    );
    let (r, f) = r.on_transmit(&probe.roce(), dead, 100 + hold);
    assert!(f.is_empty(), "MR-MPF-4: {f:?}");
    assert_eq!(r.counters.mp_probes_sent, 1);
    // An ACK echoing the value with another timestamp does not return it.
    let (r, _) = ack_at(&r, 3, sack(3, 4, 0, dead, 1), 100 + hold + 10);
    assert!(r.entropy.retired.contains_key(&dead), "MR-MPF-2");
    let (r, _) = ack_at(&r, 3, sack(3, 4, 0, dead, 7777), 100 + hold + 20);
    assert!(!r.entropy.retired.contains_key(&dead), "MR-MPF-7");
}

#[test]
fn ecn_echo_skips_value_mr_mps_5() {
    let (r, evs) = sent_write(2);
    let mut s = sack(0, 1, 0, evs[0], 0);
    s.ecn_ce = true;
    let (r, _) = ack_at(&r, 0, s, 10_000);
    assert!(
        !r.entropy.allowed_next(10_001).contains(&evs[0]),
        "MR-MPS-5"
    );
    let srtt = r.rtt.srtt.unwrap();
    assert!(
        r.entropy.eligible(10_000 + srtt).contains(&evs[0]),
        "skip lasts srtt"
    );
}

#[test]
fn cwnd_limits_sending_mr_mpc_1() {
    let mut c = cfg();
    c.cwnd_init = 512;
    let r = MpRequester::new(c, 0x22, psn(0));
    let (r, _) = r.post_send(write_wr(1, 1024));
    let (r, _, _) = send_next(&r, 0);
    let (r, _, _) = send_next(&r, 1);
    assert_eq!(r.bytes_in_flight(), 512);
    assert!(r.next_packets(2).optional.is_empty(), "MR-MPC-1");
    let spec = r.packet_spec(&r.wrs[&1], 512, false, 2);
    let w = wire(build(&r, &spec, 2));
    assert!(ids(&r.on_transmit(&w.roce(), 0xC002, 2).1).contains(&"MR-MPC-1"));
}

#[test]
fn trim_nak_retransmits_without_retiring_mr_mpt_6_mr_mpt_7() {
    let (r, evs) = sent_write(2);
    let mut s = sack(0xFF_FFFF, 1, 0, evs[1], 1);
    s.syndrome = Syndrome::NAK_TRIMMED;
    s.trimmed = true;
    let (r, o) = ack_at(&r, 0xFF_FFFF, s, 500);
    assert_eq!(required_psns(&o), vec![1], "MR-MPT-6");
    assert!(r.entropy.retired.is_empty(), "MR-MPT-7");
    let (r, f, _) = send_next(&r, 501);
    assert!(f.is_empty());
    assert_eq!(r.counters.mp_retx_trim, 1);
    assert_eq!(r.retries, 0, "MR-MPT-7: not counted against retry_cnt");
}

#[test]
fn trim_nak_with_timestamp_0_gives_no_sample_mr_mpt_10() {
    let (r, evs) = sent_write(2);
    let nak = |ts: u32| {
        let mut s = sack(0xFF_FFFF, 1, 0, evs[1], ts);
        s.syndrome = Syndrome::NAK_TRIMMED;
        s.trimmed = true;
        s
    };
    let (cut, _) = ack_at(&r, 0xFF_FFFF, nak(0), 5_000_000);
    assert_eq!(cut.rtt.srtt, None, "MR-MPT-10: echoed timestamp 0");
    let (kept, _) = ack_at(&r, 0xFF_FFFF, nak(1), 5_000_000);
    assert!(kept.rtt.srtt.is_some(), "a NAK 0x65 with MPETH is a sample");
}

#[test]
fn read_rerequest_nonzero_offset_mr_mpr_6_mr_mpr_7_mr_mpr_8() {
    let r = MpRequester::new(cfg(), 0x22, psn(10));
    let (r, _) = r.post_send(SendWr {
        wr: 1,
        op: WrOp::Read {
            va: 0x5000,
            rkey: 9,
            len: 1280,
        },
        fence: false,
        signaled: true,
    });
    let (mut r, f, _) = send_next(&r, 0);
    assert!(f.is_empty(), "{f:?}");
    assert_eq!(r.next_idx, 5, "MR-PSN-3: the READ reserves 5 PSNs");
    let resp = |i: u32, r: &MpRequester, now| {
        let w = wire(
            req(
                Opcode::MP_READ_RESPONSE,
                10 + i,
                0,
                i * 256,
                1280,
                &[0; 256],
            )
            .ext(|e| e.mpeth.as_mut().unwrap().timestamp = 0),
        );
        r.on_ack(
            &w.roce(),
            &ArrivalInfo {
                now_ns: now,
                ..ArrivalInfo::default()
            },
        )
    };
    for (t, i) in [0u32, 2, 3].into_iter().enumerate() {
        let (n, o) = resp(i, &r, 1000 + t as u64);
        assert!(
            required_sends(&o).is_empty(),
            "MR-MPR-6: fewer than K later"
        );
        r = n;
    }
    let (r, o) = resp(4, &r, 1003);
    let s = required_sends(&o);
    assert_eq!(s.len(), 1, "MR-MPR-6: K later responses");
    assert_eq!(s[0].mpeth.offset, Field::Exact(256), "MR-MPR-7");
    assert_eq!(s[0].mpeth.dma_len, Field::Exact(256), "MR-MPR-7");
    assert_eq!(s[0].psn, Field::Exact(psn(11)), "MR-MPR-7");
    assert_eq!(s[0].mpeth.retransmission, Field::Exact(true), "MR-MPR-7");
    // A re-request of a range already received breaks MR-MPR-8.
    let bad = wire(build(
        &r,
        &r.rerequest_spec(&r.wrs[&1], 512, 256, 1004),
        1004,
    ));
    assert!(ids(&r.on_transmit(&bad.roce(), 0xC001, 1004).1).contains(&"MR-MPR-8"));
    let good = wire(build(&r, s[0], 1004));
    let (r, f) = r.on_transmit(&good.roce(), 0xC001, 1004);
    assert!(f.is_empty(), "{f:?}");
    let (r, o) = resp(1, &r, 1010);
    assert!(
        o.required
            .iter()
            .any(|c| matches!(&c.value, Effect::Complete(c) if c.wr == 1)),
        "MR-MPR-5: complete once every byte arrived"
    );
    assert!(r.wrs.is_empty());
}

#[test]
fn read_rerequest_from_offset_zero_mr_mpr_7() {
    // The first response of a READ goes missing: MR-MPR-7 re-requests from
    // the first missing byte, offset 0, with R set. The requester's own
    // judge must take that packet as the re-request it asked for, not as a
    // retransmission or a new message (found by the model_stateful fuzz
    // target: next_packets offered it, on_transmit refused it).
    let r = MpRequester::new(cfg(), 0x22, psn(10));
    let (r, _) = r.post_send(SendWr {
        wr: 1,
        op: WrOp::Read {
            va: 0x5000,
            rkey: 9,
            len: 1280,
        },
        fence: false,
        signaled: true,
    });
    let (mut r, f, _) = send_next(&r, 0);
    assert!(f.is_empty(), "{f:?}");
    for i in 1..5u32 {
        let w = wire(
            req(
                Opcode::MP_READ_RESPONSE,
                10 + i,
                0,
                i * 256,
                1280,
                &[0; 256],
            )
            .ext(|e| e.mpeth.as_mut().unwrap().timestamp = 0),
        );
        let at = ArrivalInfo {
            now_ns: 1000 + u64::from(i),
            ..ArrivalInfo::default()
        };
        r = r.on_ack(&w.roce(), &at).0;
    }
    let o = r.next_packets(1010);
    let s = required_sends(&o);
    assert_eq!(s.len(), 1, "MR-MPR-6: response 0 is missing");
    assert_eq!(s[0].mpeth.offset, Field::Exact(0), "MR-MPR-7");
    assert_eq!(s[0].mpeth.retransmission, Field::Exact(true), "MR-MPR-7");
    let w = wire(build(&r, s[0], 1010));
    let (_, f) = r.on_transmit(&w.roce(), 0xC001, 1010);
    assert!(f.is_empty(), "MR-MPR-7: the re-request it asked for: {f:?}");
}

#[test]
fn trimmed_read_response_rerequested_mr_mpt_8() {
    let mut c = cfg();
    c.trim_dscp = Some(9);
    c.trimming = true;
    let r = MpRequester::new(c, 0x22, psn(0));
    let (r, _) = r.post_send(SendWr {
        wr: 1,
        op: WrOp::Read {
            va: 0,
            rkey: 9,
            len: 512,
        },
        fence: false,
        signaled: true,
    });
    let (r, _, _) = send_next(&r, 0);
    let w = wire(req(Opcode::MP_READ_RESPONSE, 1, 0, 256, 512, &[0; 256]));
    let roce = w.roce();
    let arrival = ArrivalInfo {
        dscp: 9,
        ip_roce_len: Some(roce.header_len()),
        now_ns: 50,
        ..ArrivalInfo::default()
    };
    let (r, o) = r.on_ack(&roce, &arrival);
    let s = required_sends(&o);
    assert_eq!(s[0].mpeth.offset, Field::Exact(256), "MR-MPT-8");
    assert!(r.entropy.retired.is_empty(), "MR-MPT-8: no retirement");
}

#[test]
fn psn_wrap_mr_psn_5() {
    let r = MpRequester::new(cfg(), 0x22, psn(0xFF_FFFE));
    let (mut r, _) = r.post_send(write_wr(1, 1024));
    for t in 0..4 {
        let (n, f, _) = send_next(&r, t);
        assert!(f.is_empty(), "{f:?}");
        r = n;
    }
    assert_eq!(r.psn(3), psn(1));
    // Cumulative ACK PSN 1 (after the wrap) acknowledges all four.
    let (r, o) = ack_at(&r, 1, sack(1, 2, 0, 0xC000, 0), 100);
    assert!(
        o.required
            .iter()
            .any(|c| matches!(&c.value, Effect::Complete(c) if c.wr == 1)),
        "MR-MPP-10"
    );
    assert!(r.wrs.is_empty());
}

#[test]
fn completion_only_when_all_acked_mr_mpp_10() {
    let (r, _) = sent_write(2);
    let (r, o) = ack_at(&r, 0, sack(0, 1, 0, 0xC000, 0), 100);
    assert!(
        !o.required
            .iter()
            .any(|c| matches!(c.value, Effect::Complete(_))),
        "MR-MPP-10"
    );
    let (_, o) = ack_at(&r, 0, sack(0, 1, 1 << 63, 0xC000, 0), 101);
    assert!(
        o.required
            .iter()
            .any(|c| matches!(c.value, Effect::Complete(_))),
        "MR-MPP-10: SACK counts"
    );
}

#[test]
fn bitmap_naming_unsent_psn_dropped_mr_mpa_10() {
    // PSNs 0 and 1 sent: a bitmap naming 0, 1 and 2 is ignored as a whole.
    let (r, evs) = sent_write(2);
    let (r2, o) = ack_at(&r, 0xFF_FFFF, sack(0xFF_FFFF, 0, 0xE << 60, evs[0], 0), 100);
    assert_eq!(o.required[0].reqs, &["MR-MPA-10"]);
    assert!(
        r2.segs.values().all(|x| !x.acked),
        "MR-MPA-10: nothing acked"
    );
    let (r2, _) = ack_at(&r, 0xFF_FFFF, sack(0xFF_FFFF, 0, 0xC << 60, evs[0], 0), 100);
    assert!(r2.segs.values().all(|x| x.acked), "PSNs sent: accepted");
    // A READ's reserved PSNs count as sent: a READ of 1024 bytes at PSN 0
    // reserves 0–3, and a bitmap naming PSN 3 is accepted.
    let r = MpRequester::new(cfg(), 0x22, psn(0));
    let (r, _) = r.post_send(SendWr {
        wr: 1,
        op: WrOp::Read {
            va: 0x5000,
            rkey: 9,
            len: 1024,
        },
        fence: false,
        signaled: true,
    });
    let (r, _, ev) = send_next(&r, 0);
    let (r2, o) = ack_at(&r, 0xFF_FFFF, sack(0xFF_FFFF, 3, 1 << 63, ev, 0), 100);
    assert!(
        !o.required.iter().any(|c| c.reqs == ["MR-MPA-10"]),
        "MR-MPA-10: reserved PSNs count as sent"
    );
    assert!(r2.segs.values().all(|x| x.acked));
}

#[test]
fn ack_drops_mr_mpa_10_mr_mpp_19_mr_mpl_9() {
    let (r, _) = sent_write(2);
    let (_, o) = ack_at(&r, 5, sack(5, 6, 0, 0xC000, 0), 100);
    assert_eq!(
        o.required[0].value,
        Effect::Drop { counter: None },
        "MR-MPA-10"
    );
    let mut s = sack(0, 1, 0, 0xC000, 0);
    s.syndrome = Syndrome(0x45);
    let (r2, o) = ack_at(&r, 0, s, 100);
    assert_eq!(o.required[0].reqs, &["MR-MPP-19"]);
    assert_eq!(r2.cum_idx, -1);
    s.syndrome = Syndrome(0x60);
    let (_, o) = ack_at(&r, 0, s, 100);
    assert_eq!(o.required[0].reqs, &["MR-MPL-9"]);
}

#[test]
fn fatal_nak_completes_and_errors_mr_mpp_16() {
    let r = MpRequester::new(cfg(), 0x22, psn(0));
    let (r, _) = r.post_send(write_wr(1, 256));
    let (r, _) = r.post_send(write_wr(2, 256));
    let (r, _, _) = send_next(&r, 0);
    let (r, _, _) = send_next(&r, 1);
    let mut s = sack(0, 1, 0, 0xC000, 0);
    s.syndrome = Syndrome::NAK_REMOTE_ACCESS;
    let (r, o) = ack_at(&r, 0, s, 10);
    let st: Vec<_> = o
        .required
        .iter()
        .filter_map(|c| match &c.value {
            Effect::Complete(c) => Some((c.wr, c.status.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        st,
        vec![
            (1, Field::Exact(WcStatus::Success)),
            (2, Field::Exact(WcStatus::RemAccessErr))
        ],
        "MR-MPP-16"
    );
    assert!(r.error);
}

#[test]
fn unsupported_operation_mr_mpn_4() {
    let r = MpRequester::new(cfg(), 0x22, psn(0));
    let (_, o) = r.post_send(SendWr {
        wr: 1,
        op: WrOp::Unsupported,
        fence: false,
        signaled: true,
    });
    assert!(
        required_sends(&o).is_empty() && optional_sends(&o).is_empty(),
        "MR-MPN-4"
    );
    assert!(
        matches!(&o.required[0].value, Effect::Complete(c) if c.status == Field::Exact(WcStatus::LocQpOpErr))
    );
}

#[test]
fn fence_and_window_mr_mpp_11_mr_mpw_2() {
    let r = MpRequester::new(cfg(), 0x22, psn(0));
    let (r, _) = r.post_send(write_wr(1, 256));
    let (r, _) = r.post_send(SendWr {
        fence: true,
        ..write_wr(2, 256)
    });
    let (r, _, _) = send_next(&r, 0);
    assert!(r.next_packets(1).optional.is_empty(), "MR-MPP-11");
    // Window: W = 64 PSNs beyond the cumulative ACK.
    let r = MpRequester::new(cfg(), 0x22, psn(0));
    let (mut r, _) = r.post_send(write_wr(1, 256 * 70));
    r.cc.cwnd = 1 << 30;
    for t in 0..64 {
        let (n, f, _) = send_next(&r, t);
        assert!(f.is_empty());
        r = n;
    }
    assert!(r.next_packets(64).optional.is_empty(), "MR-MPW-2");
}

fn all_psns(o: &Outcomes) -> Vec<u32> {
    o.required
        .iter()
        .chain(o.optional.iter())
        .filter_map(|c| match &c.value {
            Effect::Send(s) => exact(&s.psn).map(|p| p.value()),
            _ => None,
        })
        .collect()
}

#[test]
fn rnr_nak_holds_then_retransmits_mr_mpp_18() {
    let (r, evs) = sent_write(2);
    let (r, _) = r.post_send(write_wr(2, 256));
    let mut s = sack(0xFF_FFFF, 0, 0, evs[0], 1);
    s.syndrome = Syndrome(0x21); // RNR NAK, timer code 1: 10 µs
    let (r, _) = ack_at(&r, 0xFF_FFFF, s, 500);
    // During the RNR wait: no new message (PSN 2) and no RNR retransmission
    // of the refused message's first packet (a tail-loss probe of PSN 1,
    // MR-MPL-10, may still be offered).
    let during = all_psns(&r.next_packets(10_499));
    assert!(
        !during.contains(&2) && !during.contains(&0),
        "MR-MPP-18: {during:?}"
    );
    // After it: the refused message's unacknowledged packets again.
    let after = all_psns(&r.next_packets(10_500));
    assert!(
        after.contains(&0) && after.contains(&1),
        "MR-MPP-18: {after:?}"
    );
}

mod congestion;
mod headers_atomic;
mod ordered;
mod resource;

#[test]
fn probe_dscp_mr_mpa_12() {
    use crate::model::mp::spec_allows_dscp;
    let mut c = cfg();
    c.dscp = 10;
    let r = MpRequester::new(c.clone(), 0x22, psn(0));
    let p = r.probe_spec(0xC000);
    assert!(spec_allows_dscp(&p, 10) && !spec_allows_dscp(&p, 46));
    c.ack_dscp = Some(46);
    let r = MpRequester::new(c, 0x22, psn(0));
    let p = r.probe_spec(0xC000);
    assert!(spec_allows_dscp(&p, 46), "MR-MPA-12");
    assert!(!spec_allows_dscp(&p, 10), "MR-MPA-12 violated: data DSCP");
}
