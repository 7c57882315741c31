//! MP (SPEC §7) behaviours, driving two devices frame by frame on virtual
//! time: regression tests for faults the 10,000-message simulator runs
//! found.

mod common;
use common::*;
use metaroce_codec::{Frame, Opcode, ParseOptions};
use metaroce_ref::*;

/// Two devices (A, B) with an RC QP each in RESET, not connected, and the
/// parameters (PMTU 4096) to connect them with.
fn unconnected_pair() -> (Device, Device, End, End, Params) {
    let p = Params {
        pmtu: 4096,
        ..Params::default()
    };
    let mut a = device(MAC_A, IP_A, 1);
    let mut b = device(MAC_B, IP_B, 2);
    let ea = create_rc(&mut a, 0xFF_FFF0);
    let eb = create_rc(&mut b, 0x12_3456);
    (a, b, ea, eb, p)
}

/// Two MP devices (A requester, B responder) with their ends.
fn mp_pair() -> (Device, Device, End, End) {
    let (mut a, mut b, ea, eb, p) = unconnected_pair();
    // Written for K = 3, the SPEC §10.3 default until 2026-12-01 (now 32).
    let mp = |seed| MpAttrs {
        entropy: MpEntropy::Seeded { n: 16, seed },
        tuning: MpTuning {
            reorder_threshold: 3,
            ..MpTuning::default()
        },
        ..MpAttrs::default()
    };
    connect_mp(&mut a, ea, eb, IP_B, MAC_B, p, &mp(9));
    connect_mp(&mut b, eb, ea, IP_A, MAC_A, p, &mp(10));
    (a, b, ea, eb)
}

/// BTH opcode and MPETH R flag of a frame.
fn kind(frame: &[u8]) -> (Opcode, bool) {
    let f = Frame::parse(frame, &ParseOptions::default()).expect("a valid frame");
    let roce = f.roce.expect("a RoCEv2 frame");
    (
        roce.bth.opcode,
        roce.ext.mpeth.is_some_and(|m| m.retransmission),
    )
}

/// Moves frames both ways and, while A has fewer than `want` completions,
/// fires the earliest timer of either device, from `now` on, for at most
/// `rounds` rounds; returns A's completions.
fn complete_with_timers(
    a: &mut Device,
    b: &mut Device,
    ea: End,
    mut now: u64,
    want: usize,
    rounds: usize,
) -> Vec<WorkCompletion> {
    let mut wcs = Vec::new();
    for _ in 0..rounds {
        shuttle(a, b, now);
        wcs.extend(a.poll_cq(ea.cq, 16).unwrap());
        if wcs.len() == want {
            break;
        }
        let t = [a.poll_timeout(), b.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .expect("a timer while work is outstanding");
        now = now.max(t);
        a.handle_timeout(now);
        b.handle_timeout(now);
    }
    wcs
}

#[test]
fn a_read_held_back_by_cwnd_is_not_re_requested_before_it_is_sent() {
    // MR-MPR-6, MR-MPR-7, MR-MPC-1, MR-MPA-10: a READ that has PSNs but
    // waits behind a full cwnd has had no transmission, so no RTO runs for
    // it. Before the fix its RTO ran from time 0: it was "re-requested"
    // from offset 0 outside cwnd, the responder took that as the READ and
    // acknowledged PSNs beyond the requester's last PSN sent, and the
    // requester ignored every later ACK until the QP failed with
    // RETRY_EXC_ERR (found by the 10,000-message MP run at 10 % loss).
    let (mut a, mut b, ea, eb) = mp_pair();
    let len = 1u64 << 20;
    let src = a.reg_mr(ea.pd, len as usize, Access::LOCAL_WRITE).unwrap();
    let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
    a.write_mr(src.lkey, src.addr, &bytes).unwrap();
    let wlen = len / 4;
    let rlen = len / 2;
    let land = a.reg_mr(ea.pd, rlen as usize, Access::LOCAL_WRITE).unwrap();
    let target = b.reg_mr(eb.pd, len as usize, Access::ALL).unwrap();
    let remote = remote(&target);
    let sge = |m: &MrInfo, len: u64| Sge {
        addr: m.addr,
        len: len as u32,
        lkey: m.lkey,
    };
    // A 256 KiB WRITE then a 512 KiB READ: the WRITE leaves at once (64
    // packets); the READ gets its PSNs but its response bytes (counted in
    // flight, §7.12) do not fit the 512 KiB initial cwnd beside it.
    a.post_send(
        ea.qpn,
        SendWr::new(1, WrOp::Write(remote), vec![sge(&src, wlen)]),
    )
    .unwrap();
    a.post_send(
        ea.qpn,
        SendWr::new(2, WrOp::Read(remote), vec![sge(&land, rlen)]),
    )
    .unwrap();
    // Nothing reaches B for 3 ms: A's RTO (1 ms before any sample) expires.
    let mut held: Vec<Vec<u8>> = drain(&mut a);
    let mut now = 0;
    while let Some(t) = a.poll_timeout().filter(|&t| t < 3_000_000) {
        now = t;
        a.handle_timeout(now);
        held.extend(drain(&mut a));
    }
    assert!(now >= 1_000_000, "the RTO expired at least once ({now} ns)");
    for f in &held {
        let (op, retx) = kind(f);
        assert!(
            op != Opcode::MP_READ_REQUEST || !retx,
            "MR-MPR-6: no re-request of a READ not yet sent"
        );
    }
    // Then everything is delivered: both complete, in order, byte-exact.
    for f in &held {
        b.handle_frame(now, f);
    }
    let wcs = complete_with_timers(&mut a, &mut b, ea, now, 2, 100_000);
    assert_eq!(
        ids_and_statuses(&wcs),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    let mut image = bytes[..wlen as usize].to_vec();
    image.resize(rlen as usize, 0);
    assert!(b.read_mr(target.lkey, target.addr, rlen).unwrap() == &image[..]);
    assert!(a.read_mr(land.lkey, land.addr, rlen).unwrap() == &image[..]);
}

#[test]
fn an_acknowledged_atomic_resent_after_the_rto_is_no_loss() {
    // MR-MPP-14, MR-MPC-7, MR-MPF-1: a WRITE's first packet is lost, so
    // the responder stores the atomic behind it without executing it
    // (MR-MPP-7) and acknowledges its PSN selectively. At the RTO the
    // requester resends both; the WRITE packet was deemed lost (its
    // entropy value retires), the atomic was not: its PSN is acknowledged
    // (§7.8), so its value stays in use. Before the fix the atomic's RTO
    // was a loss: a second retirement and a decrease (found analysing the
    // RTO stalls of the MP vs Base mixed run at 1 % loss).
    let (mut a, mut b, ea, eb) = mp_pair();
    let src = a.reg_mr(ea.pd, 8192, Access::LOCAL_WRITE).unwrap();
    a.write_mr(src.lkey, src.addr, &[0x5a; 8192]).unwrap();
    let result = a.reg_mr(ea.pd, 8, Access::LOCAL_WRITE).unwrap();
    let target = b.reg_mr(eb.pd, 8192, Access::ALL).unwrap();
    let word = b.reg_mr(eb.pd, 8, Access::ALL).unwrap();
    b.write_mr(word.lkey, word.addr, &100u64.to_ne_bytes())
        .unwrap();
    let sge = |m: &MrInfo, len: u32| Sge {
        addr: m.addr,
        len,
        lkey: m.lkey,
    };
    let write = WrOp::Write(remote(&target));
    let add = WrOp::FetchAdd {
        remote: remote(&word),
        add: 1,
    };
    a.post_send(ea.qpn, SendWr::new(1, write, vec![sge(&src, 8192)]))
        .unwrap();
    a.post_send(ea.qpn, SendWr::new(2, add, vec![sge(&result, 8)]))
        .unwrap();
    let first = drain(&mut a);
    assert_eq!(first.len(), 3, "two WRITE packets and the atomic");
    for f in &first[1..] {
        b.handle_frame(0, f); // the WRITE's first packet is lost
    }
    let wcs = complete_with_timers(&mut a, &mut b, ea, 0, 2, 10_000);
    assert_eq!(
        ids_and_statuses(&wcs),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(
        a.read_mr(result.lkey, result.addr, 8).unwrap(),
        &100u64.to_ne_bytes()
    );
    assert_eq!(
        b.read_mr(word.lkey, word.addr, 8).unwrap(),
        &101u64.to_ne_bytes(),
        "MR-MPP-12: executed once"
    );
    let c = a.counters();
    assert_eq!(c.mp_retx_timeout, 2, "both resent at the RTO");
    assert_eq!(
        c.mp_entropy_retired, 1,
        "MR-MPF-1: only the lost WRITE packet's value retires"
    );
}

#[test]
fn an_acknowledged_atomic_resent_twice_is_still_no_loss() {
    // MR-MPP-14, MR-MPF-1, MR-MPS-3: as above, but neither resend reaches
    // the responder, so a second RTO resends the atomic again. Its PSN is
    // still acknowledged (§7.8: not deemed lost), so the value its first
    // resend used must not retire either. Before the fix the first resend
    // made the atomic "in flight" again and the second RTO deemed it lost,
    // retiring a value with no loss attributable to it, which the
    // differential fuzz target's MpJudge reported as MR-MPS-3 (the next
    // round skipped that value; fuzz/artifacts-regressions/differential/
    // crash-mp-atomic-second-resend-retires).
    let (mut a, mut b, ea, eb) = mp_pair();
    let src = a.reg_mr(ea.pd, 4096, Access::LOCAL_WRITE).unwrap();
    let result = a.reg_mr(ea.pd, 8, Access::LOCAL_WRITE).unwrap();
    let target = b.reg_mr(eb.pd, 4096, Access::ALL).unwrap();
    let word = b.reg_mr(eb.pd, 8, Access::ALL).unwrap();
    let sge = |m: &MrInfo, len: u32| Sge {
        addr: m.addr,
        len,
        lkey: m.lkey,
    };
    let add = WrOp::FetchAdd {
        remote: remote(&word),
        add: 1,
    };
    let write = WrOp::Write(remote(&target));
    a.post_send(ea.qpn, SendWr::new(1, write, vec![sge(&src, 4096)]))
        .unwrap();
    a.post_send(ea.qpn, SendWr::new(2, add, vec![sge(&result, 8)]))
        .unwrap();
    let first = drain(&mut a);
    assert_eq!(first.len(), 2, "one WRITE packet and the atomic");
    b.handle_frame(0, &first[1]); // the WRITE packet is lost
    for f in drain(&mut b) {
        a.handle_frame(0, &f); // the atomic's PSN acknowledged selectively
    }
    // Two RTOs (probes may fire in between); nothing A sends arrives.
    let mut resent = Vec::new();
    for _ in 0..64 {
        if a.counters().mp_retx_timeout >= 4 {
            break;
        }
        let t = a.poll_timeout().expect("a timer runs");
        a.handle_timeout(t);
        resent.extend(drain(&mut a).into_iter().map(|f| kind(&f)));
    }
    let c = a.counters();
    assert_eq!(c.mp_retx_timeout, 4, "both resent at each RTO: {resent:?}");
    assert_eq!(
        c.mp_entropy_retired, 2,
        "MR-MPF-1: only the WRITE packet's values retire (one per RTO)"
    );
}

#[test]
fn later_reads_responses_reveal_a_lost_last_response() {
    // MR-MPR-6: a response is missing once responses with K distinct later
    // PSNs have arrived "on the QP", not only those of its own READ. The
    // last response of a READ is lost and the four of the next READ
    // arrive: the requester re-requests the lost one at once (K = 3),
    // without waiting for the RTO. Before the fix only responses of the
    // same READ counted, and a lost last response always waited for the
    // RTO (found analysing the RTO stalls of the mixed MP runs).
    let (mut a, mut b, ea, eb) = mp_pair();
    let remote_mr = b.reg_mr(eb.pd, 6 * 4096, Access::ALL).unwrap();
    let bytes: Vec<u8> = (0..6 * 4096u32).map(|i| (i % 253) as u8).collect();
    b.write_mr(remote_mr.lkey, remote_mr.addr, &bytes).unwrap();
    let land = a.reg_mr(ea.pd, 6 * 4096, Access::LOCAL_WRITE).unwrap();
    for (id, off, len) in [(1u64, 0u64, 2 * 4096u32), (2, 2 * 4096, 4 * 4096)] {
        let remote = RemoteAddr {
            va: remote_mr.addr + off,
            rkey: remote_mr.rkey,
        };
        let sge = Sge {
            addr: land.addr + off,
            len,
            lkey: land.lkey,
        };
        a.post_send(ea.qpn, SendWr::new(id, WrOp::Read(remote), vec![sge]))
            .unwrap();
    }
    for f in drain(&mut a) {
        b.handle_frame(0, &f);
    }
    let mut responses = 0;
    for f in drain(&mut b) {
        if kind(&f).0 == Opcode::MP_READ_RESPONSE {
            responses += 1;
            if responses == 2 {
                continue; // READ 1's last response is lost
            }
        }
        a.handle_frame(0, &f);
    }
    assert_eq!(responses, 6);
    let frames = drain(&mut a);
    let resent: Vec<(Opcode, bool)> = frames.iter().map(|f| kind(f)).collect();
    assert!(
        resent.contains(&(Opcode::MP_READ_REQUEST, true)),
        "MR-MPR-6, MR-MPR-7: re-requested before any timer ({resent:?})"
    );
    assert_eq!(a.counters().mp_retx_reorder, 1);
    for f in &frames {
        b.handle_frame(0, f);
    }
    shuttle(&mut a, &mut b, 0);
    let wcs = a.poll_cq(ea.cq, 16).unwrap();
    assert_eq!(
        ids_and_statuses(&wcs),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert!(a.read_mr(land.lkey, land.addr, 6 * 4096).unwrap() == &bytes[..]);
}

#[test]
fn receives_posted_in_init_serve_sends_once_the_qp_is_mp() {
    // MR-QP-2 (post_recv in INIT) with MR-MPN-1: a receive posted before
    // the INIT→RTR transition that makes the QP MP is kept. Before the fix
    // the switch to MP dropped it, and every SEND met RNR NAKs until a
    // receive was posted after RTR (found by `metaroce-ref perf --profile
    // mp --op send`, which posts its receives in INIT as for Base).
    let (mut a, mut b, ea, eb, p) = unconnected_pair();
    let mp = MpAttrs::default();
    let src = a.reg_mr(ea.pd, 6000, Access::LOCAL_WRITE).unwrap();
    a.write_mr(src.lkey, src.addr, &[0x3c; 6000]).unwrap();
    let land = b.reg_mr(eb.pd, 8192, Access::LOCAL_WRITE).unwrap();
    connect_mp(&mut a, ea, eb, IP_B, MAC_B, p, &mp);
    b.modify_qp(
        eb.qpn,
        QpState::Init,
        &QpAttrs {
            access: Some(Access::ALL),
            ..Default::default()
        },
    )
    .unwrap();
    let recv = |wr_id, addr| RecvWr {
        wr_id,
        sg_list: vec![Sge {
            addr,
            len: 6000,
            lkey: land.lkey,
        }],
    };
    b.post_recv(eb.qpn, recv(71, land.addr)).unwrap();
    b.modify_qp_mp(eb.qpn, &rtr_attrs(ea, IP_A, MAC_A, p), &mp)
        .unwrap();
    assert!(b.is_mp(eb.qpn).unwrap());
    to_rts(&mut b, eb, p);
    let sge = Sge {
        addr: src.addr,
        len: 6000,
        lkey: src.lkey,
    };
    a.post_send(ea.qpn, SendWr::new(5, WrOp::Send, vec![sge]))
        .unwrap();
    for now in 0..100 {
        shuttle(&mut a, &mut b, now * 10_000);
        a.handle_timeout(now * 10_000);
        b.handle_timeout(now * 10_000);
    }
    let done: Vec<(u64, WcStatus)> = a
        .poll_cq(ea.cq, 4)
        .unwrap()
        .iter()
        .map(|w| (w.wr_id, w.status))
        .collect();
    assert_eq!(done, [(5, WcStatus::Success)]);
    let got: Vec<(u64, WcStatus, u32)> = b
        .poll_cq(eb.cq, 4)
        .unwrap()
        .iter()
        .map(|w| (w.wr_id, w.status, w.byte_len))
        .collect();
    assert_eq!(got, [(71, WcStatus::Success, 6000)]);
    assert_eq!(b.counters().rnr_naks_sent, 0);
    assert_eq!(
        b.read_mr(land.lkey, land.addr, 6000).unwrap(),
        &[0x3c; 6000][..]
    );
}

#[test]
fn sends_refused_for_want_of_staging_are_resent_without_a_loss() {
    // MR-MPP-23, MR-MPP-25, MR-MPF-11 (SPEC v1.2 §7.16): B stages nothing
    // and A announced RN. A WRITE (MSN 0) is lost, so the receives of the
    // three SENDs behind it are not known: B answers each with NAK 0x66
    // and neither places nor acknowledges them. A holds them until the
    // WRITE, resent at its RTO, is acknowledged, then resends them. Only
    // the WRITE's loss retires a value and counts an RTO expiry.
    let (mut a, mut b, ea, eb, p) = unconnected_pair();
    let mp = |seed, rn| MpAttrs {
        entropy: MpEntropy::Seeded { n: 16, seed },
        peer_resource_nak: rn,
        max_staged_bytes: 0,
        ..MpAttrs::default()
    };
    connect_mp(&mut a, ea, eb, IP_B, MAC_B, p, &mp(9, false));
    connect_mp(&mut b, eb, ea, IP_A, MAC_A, p, &mp(10, true));
    let src = a.reg_mr(ea.pd, 400, Access::LOCAL_WRITE).unwrap();
    a.write_mr(
        src.lkey,
        src.addr,
        &(0..400).map(|i| i as u8).collect::<Vec<_>>(),
    )
    .unwrap();
    let target = b.reg_mr(eb.pd, 100, Access::ALL).unwrap();
    let land = b.reg_mr(eb.pd, 300, Access::LOCAL_WRITE).unwrap();
    for i in 0..3u64 {
        let sg = vec![Sge {
            addr: land.addr + 100 * i,
            len: 100,
            lkey: land.lkey,
        }];
        b.post_recv(
            eb.qpn,
            RecvWr {
                wr_id: 70 + i,
                sg_list: sg,
            },
        )
        .unwrap();
    }
    let sge = |off: u64| {
        vec![Sge {
            addr: src.addr + off,
            len: 100,
            lkey: src.lkey,
        }]
    };
    let write = WrOp::Write(remote(&target));
    a.post_send(ea.qpn, SendWr::new(1, write, sge(0))).unwrap();
    for i in 0..3u64 {
        a.post_send(ea.qpn, SendWr::new(2 + i, WrOp::Send, sge(100 * (i + 1))))
            .unwrap();
    }
    let first = drain(&mut a);
    assert_eq!(first.len(), 4);
    for f in &first[1..] {
        b.handle_frame(0, f); // the WRITE is lost
    }
    let answers = drain(&mut b);
    for f in &answers {
        a.handle_frame(0, f);
    }
    let naks: Vec<u8> = answers
        .iter()
        .filter_map(|f| {
            let f = Frame::parse(f, &ParseOptions::default()).ok()?;
            f.roce?.ext.sacketh.map(|s| s.syndrome.0)
        })
        .collect();
    assert_eq!(naks, [0x66; 3], "MR-MPP-23: one NAK 0x66 per refused SEND");
    let wcs = complete_with_timers(&mut a, &mut b, ea, 0, 4, 10_000);
    assert_eq!(
        ids_and_statuses(&wcs),
        [1, 2, 3, 4].map(|i| (i, WcStatus::Success))
    );
    let got = ids_and_statuses(&b.poll_cq(eb.cq, 8).unwrap());
    assert_eq!(got, [70, 71, 72].map(|i| (i, WcStatus::Success)));
    assert_eq!(
        b.read_mr(land.lkey, land.addr, 300).unwrap(),
        (100..400).map(|i| i as u8).collect::<Vec<_>>()
    );
    let c = a.counters();
    assert_eq!(c.mp_entropy_retired, 1, "MR-MPF-11: only the WRITE's value");
    assert_eq!(c.local_ack_timeouts, 1, "MR-MPF-11: one RTO expiry");
    assert_eq!(c.retransmitted_packets, 4);
}
