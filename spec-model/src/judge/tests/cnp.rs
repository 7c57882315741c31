//! CNPs judged against CE marks (SPEC.md §6.17): MR-CNP-1 (a CNP within
//! `cnp_delay_max` of a mark), MR-CNP-2 (pacing), MR-CNP-6 (never to an MP QP).

use super::*;
use crate::Severity;

const US: u64 = 1_000;

/// A CNP from B (the NP) to QPN `dest_qp` at A.
fn cnp(dest_qp: u32) -> Pkt {
    let mut p = request(Opcode::CNP, 0, 16, false);
    p.bth.dest_qp = dest_qp;
    p.bth.becn = true;
    (p.src, p.dst) = (B, A);
    p
}

fn send(psn: u32) -> Pkt {
    request(Opcode::RC_SEND_ONLY, psn, 8, true)
}

fn cfg() -> ConversationConfig {
    ConversationConfig {
        pmtu: Some(1024),
        ..ConversationConfig::default()
    }
}

/// (ID, frames, severity) of the CNP findings.
fn cnp_findings(f: &[ConversationFinding]) -> Vec<(&'static str, Vec<u64>, Severity)> {
    f.iter()
        .filter(|c| c.finding.id.starts_with("MR-CNP"))
        .map(|c| (c.finding.id, c.frames.clone(), c.finding.severity))
        .collect()
}

/// Judges `p` under `cfg` and checks that its CNP findings are `want`
/// (every finding is shown when they are not).
#[track_caller]
fn assert_cnp_findings(
    cfg: ConversationConfig,
    p: &[(Pkt, u64, u8)],
    want: Vec<(&'static str, Vec<u64>, Severity)>,
) {
    let f = run_timed(cfg, p).1;
    assert_eq!(cnp_findings(&f), want, "{f:#?}");
}

#[test]
fn a_cnp_within_the_delay_answers_a_mark() {
    // "MR-CNP-1": the SEND arrives CE-marked; B answers with a CNP to the
    // requester's QPN (0x11, learnt from the ACK) 5 µs later.
    let p = [
        (send(100), 0, 3),
        (ack(100, 1), US, 0),
        (cnp(0x11), 5 * US, 0),
        (send(101), 100 * US, 0),
        (ack(101, 2), 101 * US, 0),
    ];
    assert_cnp_findings(cfg(), &p, vec![]);
}

#[test]
fn a_skipped_cnp_is_mr_cnp_1() {
    // "MR-CNP-1": no CNP within cnp_delay_max (10 µs); the next packet, 100 µs
    // later, shows the deadline passed.
    let p = [
        (send(100), 0, 3),
        (ack(100, 1), US, 0),
        (send(101), 100 * US, 0),
        (ack(101, 2), 101 * US, 0),
    ];
    assert_cnp_findings(cfg(), &p, vec![("MR-CNP-1", vec![1], Severity::Must)]);
}

#[test]
fn a_capture_that_ends_before_the_deadline_is_not_judged() {
    let p = [(send(100), 0, 3), (ack(100, 1), US, 0)];
    assert_cnp_findings(cfg(), &p, vec![]);
}

#[test]
fn marks_within_the_interval_are_paced() {
    // "MR-CNP-2": after the CNP at 5 µs, marks at 20 and 40 µs need none
    // (cnp_interval 50 µs); the mark at 70 µs does, and gets none.
    let mut p = vec![
        (send(100), 0, 3),
        (ack(100, 1), US, 0),
        (cnp(0x11), 5 * US, 0),
    ];
    for (i, t) in [20u64, 40].into_iter().enumerate() {
        p.push((send(101 + i as u32), t * US, 3));
        p.push((ack(101 + i as u32, 2 + i as u32), (t + 1) * US, 0));
    }
    assert_cnp_findings(cfg(), &p, vec![]);
    p.push((send(103), 70 * US, 3));
    p.push((ack(103, 4), 71 * US, 0));
    p.push((send(104), 200 * US, 0));
    assert_cnp_findings(cfg(), &p, vec![("MR-CNP-1", vec![8], Severity::Must)]);
}

#[test]
fn two_cnps_within_the_interval_are_mr_cnp_2() {
    let p = [
        (send(100), 0, 3),
        (ack(100, 1), US, 0),
        (cnp(0x11), 5 * US, 0),
        (send(101), 10 * US, 3),
        (cnp(0x11), 15 * US, 0),
        (ack(101, 2), 16 * US, 0),
    ];
    assert_cnp_findings(cfg(), &p, vec![("MR-CNP-2", vec![5, 3], Severity::Must)]);
}

#[test]
fn a_mark_before_the_requester_qpn_is_known_is_answered_by_its_cnp() {
    // The CNP (to 0x11) comes before any response taught the requester QPN.
    let p = [
        (send(100), 0, 3),
        (cnp(0x11), 4 * US, 0),
        (ack(100, 1), 6 * US, 0),
        (send(101), 100 * US, 0),
        (ack(101, 2), 101 * US, 0),
    ];
    assert_cnp_findings(cfg(), &p, vec![]);
}

#[test]
fn the_tolerance_widens_the_deadline_and_lossy_makes_it_information() {
    let p = [
        (send(100), 0, 3),
        (ack(100, 1), US, 0),
        (cnp(0x11), 15 * US, 0),
        (send(101), 100 * US, 0),
        (ack(101, 2), 101 * US, 0),
    ];
    // 15 µs is late.
    assert_cnp_findings(cfg(), &p, vec![("MR-CNP-1", vec![1], Severity::Must)]);
    let tolerant = ConversationConfig {
        tolerance_ns: 10 * US,
        ..cfg()
    };
    assert_cnp_findings(tolerant, &p, vec![]);
    let lossy = ConversationConfig {
        lossy: true,
        ..cfg()
    };
    assert_cnp_findings(lossy, &p, vec![("MR-CNP-1", vec![1], Severity::Info)]);
}

#[test]
fn acks_and_undeclared_generation_owe_nothing() {
    // "MR-CNP-1": a marked Acknowledge needs no CNP; and with cnp_generation
    // not declared nothing is judged.
    let p = [
        (send(100), 0, 0),
        (ack(100, 1), US, 3),
        (send(101), 100 * US, 3),
        (ack(101, 2), 101 * US, 0),
        (send(102), 200 * US, 0),
    ];
    assert_cnp_findings(cfg(), &p, vec![("MR-CNP-1", vec![3], Severity::Must)]);
    let off = ConversationConfig { np: None, ..cfg() };
    assert_cnp_findings(off, &p, vec![]);
}

#[test]
fn a_cnp_to_an_mp_qp_is_mr_cnp_6() {
    use crate::model::mp::testutil::{req, wire};
    // A's QPN 0x11 sends MP requests to B's 0x12 and gets MP ACKs back on
    // 0x22 (the MP test helper's requester QPN).
    let mp = wire(req(Opcode::MP_SEND, 7, 0, 0, 8, &[1; 8]).dest_qp(0x12));
    let mp_req = Pkt::of(&mp.0, A, B);
    let s = metaroce_codec::ext::SackethRepr {
        syndrome: Syndrome(0x1F),
        ..Default::default()
    };
    let ackp = wire(crate::model::mp::testutil::ack(7, s));
    let mp_ack = Pkt::of(&ackp.0, B, A);
    let p = [(mp_req, 0, 3), (mp_ack, US, 0), (cnp(0x22), 2 * US, 0)];
    assert_cnp_findings(cfg(), &p, vec![("MR-CNP-6", vec![3], Severity::Must)]);
}
