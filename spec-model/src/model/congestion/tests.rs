//! Notification point and reaction point tests, each naming its requirement.

use super::dcqcn::ALPHA_ONE;
use super::*;
use core::net::IpAddr;
use metaroce_codec::Opcode;

const LINE: u64 = 100_000_000; // 100 Gb/s in kb/s

fn params() -> DcqcnParams {
    DcqcnParams::defaults(LINE)
}

fn marked(sender_qp: u32, src: [u8; 4]) -> Marked {
    Marked {
        opcode: Opcode::RC_SEND_ONLY,
        ecn_ce: true,
        mp: false,
        sender_qp,
        p_key: 0xFFFF,
        src_ip: IpAddr::from(src),
        dst_ip: IpAddr::from([10, 0, 0, 2]),
    }
}

#[test]
fn np_sends_a_cnp_for_a_marked_base_packet() {
    // MR-CNP-1, MR-CNP-4
    let np = NotificationPoint::default();
    let (_, d) = np.on_packet(&NpParams::default(), 5_000, &marked(0x12, [10, 0, 0, 1]));
    let NpDecision::Send(cnp) = d else {
        panic!("no CNP");
    };
    assert_eq!(cnp.dest_qp, 0x12, "MR-CNP-4");
    assert_eq!(cnp.src_ip, IpAddr::from([10, 0, 0, 2]), "MR-CNP-4");
    assert_eq!(cnp.dst_ip, IpAddr::from([10, 0, 0, 1]), "MR-CNP-4");
    assert_eq!(cnp.not_after_ns, 15_000, "MR-CNP-1");
    let spec = cnp.packet();
    assert!(spec.opcode.allows(&Opcode::CNP));
    assert!(spec.dest_qp.allows(&0x12) && !spec.dest_qp.allows(&0x13));
    // Not declared, or not marked: nothing.
    let off = NpParams {
        enabled: false,
        ..NpParams::default()
    };
    assert_eq!(
        np.on_packet(&off, 0, &marked(1, [1, 1, 1, 1])).1,
        NpDecision::Nothing
    );
    let unmarked = Marked {
        ecn_ce: false,
        ..marked(1, [1, 1, 1, 1])
    };
    assert_eq!(
        np.on_packet(&NpParams::default(), 0, &unmarked).1,
        NpDecision::Nothing
    );
    // ACK, Atomic ACK and CNP never cause one (MR-CNP-1).
    for op in [Opcode::RC_ACK, Opcode::RC_ATOMIC_ACK, Opcode::CNP] {
        let m = Marked {
            opcode: op,
            ..marked(1, [1, 1, 1, 1])
        };
        assert_eq!(
            np.on_packet(&NpParams::default(), 0, &m).1,
            NpDecision::Excluded(&["MR-CNP-1"]),
            "MR-CNP-1"
        );
    }
    // A READ response does.
    let m = Marked {
        opcode: Opcode::RC_READ_RESPONSE_ONLY,
        ..marked(1, [1, 1, 1, 1])
    };
    assert!(matches!(
        np.on_packet(&NpParams::default(), 0, &m).1,
        NpDecision::Send(_)
    ));
}

#[test]
fn np_never_answers_mp_packets() {
    // MR-CNP-6
    let m = Marked {
        mp: true,
        opcode: Opcode::MP_SEND,
        ..marked(1, [1, 1, 1, 1])
    };
    let np = NotificationPoint::default();
    let (next, d) = np.on_packet(&NpParams::default(), 0, &m);
    assert_eq!(d, NpDecision::Excluded(&["MR-CNP-6"]), "MR-CNP-6");
    assert_eq!(next, np);
}

#[test]
fn np_paces_per_scope() {
    // MR-CNP-2 for each declared scope.
    let p = |scope| NpParams {
        scope,
        ..NpParams::default()
    };
    let np = NotificationPoint::default();
    // qp: another QP is another slot; the same QP waits the interval.
    let qp = p(PacingScope::Qp);
    let (np1, _) = np.on_packet(&qp, 0, &marked(1, [10, 0, 0, 1]));
    assert_eq!(
        np1.on_packet(&qp, 49_999, &marked(1, [10, 0, 0, 1])).1,
        NpDecision::Paced,
        "MR-CNP-2"
    );
    assert!(matches!(
        np1.on_packet(&qp, 49_999, &marked(2, [10, 0, 0, 1])).1,
        NpDecision::Send(_)
    ));
    assert!(matches!(
        np1.on_packet(&qp, 50_000, &marked(1, [10, 0, 0, 1])).1,
        NpDecision::Send(_)
    ));
    // ip_pair: another QP behind the same addresses shares the slot.
    let pair = p(PacingScope::IpPair);
    let (np2, _) = np.on_packet(&pair, 0, &marked(1, [10, 0, 0, 1]));
    assert_eq!(
        np2.on_packet(&pair, 10, &marked(2, [10, 0, 0, 1])).1,
        NpDecision::Paced,
        "MR-CNP-2"
    );
    assert!(matches!(
        np2.on_packet(&pair, 10, &marked(2, [10, 0, 0, 5])).1,
        NpDecision::Send(_)
    ));
    // port: one slot for everything.
    let port = p(PacingScope::Port);
    let (np3, _) = np.on_packet(&port, 0, &marked(1, [10, 0, 0, 1]));
    assert_eq!(
        np3.on_packet(&port, 10, &marked(9, [10, 9, 9, 9])).1,
        NpDecision::Paced,
        "MR-CNP-2"
    );
    // A paced packet leaves the slot as it was.
    let (np4, _) = np1.on_packet(&qp, 30_000, &marked(1, [10, 0, 0, 1]));
    assert_eq!(np4, np1, "MR-CNP-2");
}

#[test]
fn rp_starts_and_stays_at_line_rate_without_cnps() {
    // MR-DCQCN-7
    let p = params();
    let mut rp = ReactionPoint::new(&p, 0);
    assert_eq!((rp.rc, rp.rt), (LINE, LINE), "MR-DCQCN-7");
    for t in 1..200u64 {
        rp = rp.on_event(&p, t * 1_000_000, RpEvent::Sent(1 << 20)).0;
        assert_eq!(rp.rc, LINE, "MR-DCQCN-7");
    }
}

#[test]
fn first_cnp_halves_the_rate() {
    // MR-DCQCN-1: with α ≈ 1 and rpg_gd 11, RC × (1 − α/2).
    let p = params();
    let rp = ReactionPoint::new(&p, 0);
    let (rp, c) = rp.on_event(&p, 1_000, RpEvent::Cnp);
    assert!(c.cut, "MR-DCQCN-1");
    let alpha = 1023 * ALPHA_ONE / 1024;
    let expected = LINE * (ALPHA_ONE - alpha / 2) / ALPHA_ONE;
    assert!(
        rp.rc.abs_diff(expected) <= 1,
        "MR-DCQCN-1: {} vs {expected}",
        rp.rc
    );
    assert!(rp.rc > LINE / 2 && rp.rc < LINE / 2 + LINE / 1000);
    // rate_to_set_on_first_cnp sets the rate first, then the cut applies.
    let p2 = DcqcnParams {
        rate_on_first_cnp: 40_000_000,
        ..p
    };
    let (rp2, _) = ReactionPoint::new(&p2, 0).on_event(&p2, 1_000, RpEvent::Cnp);
    assert!(
        rp2.rc
            .abs_diff(40_000_000 * (ALPHA_ONE - alpha / 2) / ALPHA_ONE)
            <= 1,
        "MR-DCQCN-1"
    );
    // rpg_min_dec_fac bounds the cut: with gd 10 and α ≈ 1 the factor would be ≈ 0.
    let p3 = DcqcnParams { gd: 10, ..p };
    let (rp3, _) = ReactionPoint::new(&p3, 0).on_event(&p3, 1_000, RpEvent::Cnp);
    assert_eq!(rp3.rc, LINE / 2, "MR-DCQCN-1: min_dec_fac 50 %");
    // clamp_tgt_rate: RT follows RC at the cut.
    let p4 = DcqcnParams {
        clamp_tgt_rate: true,
        ..p
    };
    let (rp4, _) = ReactionPoint::new(&p4, 0).on_event(&p4, 1_000, RpEvent::Cnp);
    assert_eq!(rp4.rt, LINE, "MR-DCQCN-1: RT = RC before the cut");
}

#[test]
fn one_cut_per_monitor_period() {
    // MR-DCQCN-2
    let p = params();
    let (rp, _) = ReactionPoint::new(&p, 0).on_event(&p, 10_000, RpEvent::Cnp);
    let (rp2, c) = rp.on_event(&p, 13_999, RpEvent::Cnp);
    assert!(!c.cut, "MR-DCQCN-2");
    assert_eq!(rp2.rc, rp.rc, "MR-DCQCN-2");
    assert!(rp2.cnp_seen);
    let (rp3, c) = rp2.on_event(&p, 14_000, RpEvent::Cnp);
    assert!(c.cut && rp3.rc < rp2.rc, "MR-DCQCN-2: period over");
}

#[test]
fn never_below_the_minimum_rate() {
    // MR-DCQCN-3
    let p = DcqcnParams {
        min_rate: 5_000_000,
        ..params()
    };
    let mut rp = ReactionPoint::new(&p, 0);
    for i in 1..100u64 {
        rp = rp.on_event(&p, i * 5_000, RpEvent::Cnp).0;
        assert!(rp.rc >= p.min_rate, "MR-DCQCN-3");
    }
    assert_eq!(rp.rc, p.min_rate, "MR-DCQCN-3: reached the floor");
}

#[test]
fn rate_recovers_by_timer_and_byte_steps() {
    // MR-DCQCN-4: fast recovery, additive and hyper increase, capped at line rate.
    let p = DcqcnParams {
        threshold: 2,
        ..params()
    };
    let (cut, _) = ReactionPoint::new(&p, 0).on_event(&p, 0, RpEvent::Cnp);
    let (rc0, rt0) = (cut.rc, cut.rt);
    // Timer step 1: TC = 1 < F = 2 → fast recovery, RT unchanged.
    let (s1, c) = cut.on_event(&p, p.time_reset_ns, RpEvent::Tick);
    assert_eq!(c.increases, 1, "MR-DCQCN-4");
    assert_eq!(s1.rt, rt0);
    assert_eq!(s1.rc, (rt0 + rc0).div_ceil(2), "MR-DCQCN-4: fast recovery");
    // Byte steps: BC 1, 2, 3. At TC = 1, BC = 3: max ≥ F, min < F → additive.
    let (s2, c) = s1.on_event(&p, p.time_reset_ns, RpEvent::Sent(3 * p.byte_reset));
    assert_eq!(c.increases, 3);
    assert_eq!((s2.tc, s2.bc), (1, 3));
    // Timer steps to TC = 3 > F with BC = 3 > F → hyper increase.
    let (s3, _) = s2.on_event(&p, 3 * p.time_reset_ns, RpEvent::Tick);
    assert_eq!(s3.tc, 3);
    assert!(s3.rc > s2.rc, "MR-DCQCN-4");
    // Without CNPs, the rate reaches the line rate and stays there.
    let (s4, _) = s3.on_event(&p, 10_000_000_000, RpEvent::Tick);
    assert_eq!((s4.rc, s4.rt), (LINE, LINE), "MR-DCQCN-4");
}

#[test]
fn increase_steps_follow_the_thresholds() {
    // MR-DCQCN-4: exact RT steps for additive (ai) and hyper (hai) increases
    // when RT is below the line rate.
    let p = DcqcnParams {
        threshold: 1,
        clamp_tgt_rate: true,
        ..params()
    };
    let (cut, _) = ReactionPoint::new(&p, 0).on_event(&p, 0, RpEvent::Cnp);
    let (cut, _) = cut.on_event(&p, 10_000, RpEvent::Cnp);
    let rt0 = cut.rt;
    assert!(rt0 < LINE);
    // One timer step: TC 1, BC 0: additive.
    let (a, _) = cut.on_event(&p, 10_000 + p.time_reset_ns, RpEvent::Tick);
    assert_eq!(a.rt, rt0 + p.ai_rate, "MR-DCQCN-4: additive");
    // Two byte steps and one more timer step: TC 2, BC 2 > F: hyper.
    let (b, _) = a.on_event(
        &p,
        10_000 + p.time_reset_ns,
        RpEvent::Sent(2 * p.byte_reset),
    );
    let rt_b = b.rt;
    let (h, _) = b.on_event(&p, 10_000 + 2 * p.time_reset_ns, RpEvent::Tick);
    assert_eq!(h.rt, rt_b + p.hai_rate, "MR-DCQCN-4: hyper");
}

#[test]
fn alpha_follows_the_cnp_history() {
    // MR-DCQCN-5
    let p = params();
    let rp = ReactionPoint::new(&p, 0);
    let a0 = rp.alpha;
    let (rp, _) = rp.on_event(&p, 1_000, RpEvent::Cnp);
    let (with_cnp, _) = rp.on_event(&p, p.alpha_period_ns, RpEvent::Tick);
    let expected = a0 - a0 * p.g / ALPHA_ONE + p.g;
    assert_eq!(
        with_cnp.alpha,
        expected.min(ALPHA_ONE),
        "MR-DCQCN-5: (1 − g)α + g"
    );
    assert!(!with_cnp.cnp_seen);
    let (without, _) = with_cnp.on_event(&p, 2 * p.alpha_period_ns, RpEvent::Tick);
    assert_eq!(
        without.alpha,
        with_cnp.alpha - with_cnp.alpha * p.g / ALPHA_ONE,
        "MR-DCQCN-5: (1 − g)α"
    );
    // After a long quiet time α is small, so the next cut is small.
    let (quiet, _) = without.on_event(&p, 1_000_000_000, RpEvent::Tick);
    assert!(quiet.alpha < ALPHA_ONE / 100, "MR-DCQCN-5");
    let before = quiet.rc;
    let (after, c) = quiet.on_event(&p, 1_000_000_000, RpEvent::Cnp);
    assert!(c.cut);
    assert!(
        after.rc > before - before / 100,
        "MR-DCQCN-5: cut size follows α"
    );
}
