//! Outstanding RDMA-resource operations against the limit (MR-CM-4 with
//! the RDMA-CM Responder Resources, MR-REQ-7 with a profile's
//! `max_rd_atomic`): a requester beyond it is caught; one that runs at
//! exactly the limit with pipelined READs, or whose capture lost or
//! reordered responses, or that retransmits, is not.

use super::*;
use metaroce_codec::cm::{CmMad, CmMessage, CmRep, CmReq, MadHeader};

const LIMIT_IDS: [&str; 2] = ["MR-CM-4", "MR-REQ-7"];

/// REQ (frame 1, A → B, QPN 0x11) and REP (frame 2, B → A, QPN 0x12): the
/// passive side announces `rr` Responder Resources, the active side asks
/// for an Initiator Depth of `initiator_depth`.
fn cm(j: &mut ConversationJudge, rr: u8, initiator_depth: u8) {
    cm_both(j, (4, initiator_depth), (rr, 4));
}

/// REQ and REP as [`cm`], with the REQ's (Responder Resources, Initiator
/// Depth) and the REP's.
fn cm_both(
    j: &mut ConversationJudge,
    (req_rr, req_depth): (u8, u8),
    (rep_rr, rep_depth): (u8, u8),
) {
    let meta = |frame, src, dst| PacketMeta {
        frame,
        timestamp_ns: 0,
        src,
        dst,
        udp_src_port: 0xC000,
        ecn: 0,
        dscp: 0,
        icrc_valid: true,
        admitted: true,
        payload_len: None,
    };
    let req = CmReq {
        local_comm_id: 1,
        local_qpn: 0x11,
        responder_resources: req_rr,
        initiator_depth: req_depth,
        starting_psn: 0,
        path_mtu: 3,
        ..CmReq::default()
    };
    let rep = CmRep {
        local_comm_id: 2,
        remote_comm_id: 1,
        local_qpn: 0x12,
        starting_psn: 500,
        responder_resources: rep_rr,
        initiator_depth: rep_depth,
        ..CmRep::default()
    };
    for (frame, src, dst, message) in [
        (1, A, B, CmMessage::Req(req)),
        (2, B, A, CmMessage::Rep(rep)),
    ] {
        let mad = CmMad {
            header: MadHeader::default(),
            message,
        };
        j.on_cm(&meta(frame, src, dst), &mad);
    }
}

/// Judges `pkts` (frames from 3 on, at the given times in µs) after a CM
/// exchange announcing `rr` (none: `cm_rr` is `None`).
fn judge(
    cfg: ConversationConfig,
    cm_rr: Option<(u8, u8)>,
    pkts: &[(Pkt, u64)],
) -> Vec<ConversationFinding> {
    let mut j = ConversationJudge::new(cfg);
    if let Some((rr, depth)) = cm_rr {
        cm(&mut j, rr, depth);
    }
    let mut all = Vec::new();
    for (i, (p, us)) in pkts.iter().enumerate() {
        all.extend(judge_packet(&mut j, p, i as u64 + 3, us * 1000, 0));
    }
    all.extend(j.finish());
    all
}

fn limit_findings(f: &[ConversationFinding]) -> Vec<&ConversationFinding> {
    f.iter()
        .filter(|f| LIMIT_IDS.contains(&f.finding.id))
        .collect()
}

fn only(psn: u32, msn: u32) -> Pkt {
    response(Opcode::RC_READ_RESPONSE_ONLY, psn, Some(0x1F), msn, 64)
}

fn cfg() -> ConversationConfig {
    ConversationConfig {
        pmtu: Some(1024),
        ..ConversationConfig::default()
    }
}

/// Three one-packet READs, each sent before any response (times in µs).
fn three_reads_then_responses(gap_us: u64) -> Vec<(Pkt, u64)> {
    vec![
        (read(0, 64), 0),
        (read(1, 64), 1),
        (read(2, 64), 2),
        (only(0, 1), 2 + gap_us),
        (only(1, 2), 3 + gap_us),
        (only(2, 3), 4 + gap_us),
    ]
}

#[test]
fn more_reads_than_the_rep_announced_is_a_finding_naming_req_rep_and_request() {
    let f = judge(cfg(), Some((2, 2)), &three_reads_then_responses(100));
    let found = limit_findings(&f);
    assert_eq!(found.len(), 1, "{f:?}");
    let c = found[0];
    assert_eq!(c.finding.id, "MR-CM-4");
    assert_eq!(c.finding.severity, crate::Severity::Must);
    // The third READ (frame 5), the REQ and REP (1, 2), the two older READs.
    assert_eq!(c.frames, vec![5, 1, 2, 3, 4]);
    assert!(c.finding.message.contains("2 Responder Resources"), "{c:?}");
    // Nothing else about this correct-but-for-the-limit traffic.
    assert_eq!(f.len(), 1, "{f:?}");
}

#[test]
fn pipelined_reads_at_exactly_the_limit_conform() {
    // Limit 2: two READs always in flight, a new one only after an answer;
    // multi-packet READs (3000 bytes at PMTU 1024: 3 responses each).
    let first = |psn, msn| response(Opcode::RC_READ_RESPONSE_FIRST, psn, Some(0x1F), msn, 1024);
    let middle = |psn| response(Opcode::RC_READ_RESPONSE_MIDDLE, psn, None, 0, 1024);
    let last = |psn, msn| response(Opcode::RC_READ_RESPONSE_LAST, psn, Some(0x1F), msn, 952);
    let mut p = vec![(read(0, 3000), 0), (read(3, 3000), 1)];
    let mut t = 2;
    let mut next = 6;
    for k in 0..6u32 {
        let psn = 3 * k;
        p.push((first(psn, k + 1), t));
        p.push((middle(psn + 1), t + 1));
        p.push((last(psn + 2, k + 1), t + 2));
        if k < 4 {
            p.push((read(next, 3000), t + 3));
            next += 3;
        }
        t += 4;
    }
    // 100 µs between packets: beyond the reordering tolerance.
    let p: Vec<(Pkt, u64)> = p.into_iter().map(|(p, t)| (p, 100 * t)).collect();
    let f = judge(cfg(), Some((2, 2)), &p);
    assert_eq!(f, vec![]);
    // The same traffic against a limit of 1 is caught (the test can fail).
    let f = judge(cfg(), Some((1, 1)), &p);
    assert_eq!(limit_findings(&f).len(), 1, "{f:?}");
}

#[test]
fn a_response_captured_just_after_the_request_it_allowed_is_reordering() {
    // READ 2 was sent after READ 0's response arrived, but a host-side
    // capture recorded the response 10 µs later: within the tolerance.
    let p = [
        (read(0, 64), 0),
        (read(1, 64), 1),
        (read(2, 64), 100),
        (only(0, 1), 110),
        (only(1, 2), 200),
        (only(2, 3), 300),
    ];
    assert_eq!(judge(cfg(), Some((2, 2)), &p), vec![]);
    // Without a tolerance the same order is an excess.
    let strict = ConversationConfig {
        reorder_ns: 0,
        ..cfg()
    };
    assert_eq!(limit_findings(&judge(strict, Some((2, 2)), &p)).len(), 1);
}

#[test]
fn a_response_the_capture_point_lost_is_implied_by_a_later_one() {
    // Limit 1. READ 0's response was lost by the capture point; the
    // requester had it (it sent READ 1), and READ 1's response implies it.
    let p = [
        (read(0, 64), 0),
        (read(1, 64), 100),
        (only(1, 2), 200),
        (read(2, 64), 300),
        (only(2, 3), 400),
    ];
    assert_eq!(
        limit_findings(&judge(cfg(), Some((1, 1)), &p)),
        Vec::<&ConversationFinding>::new()
    );
    // With READ 0's response captured after READ 1, READ 1 is an excess.
    let p = [
        (read(0, 64), 0),
        (read(1, 64), 100),
        (only(0, 1), 200),
        (only(1, 2), 300),
    ];
    assert_eq!(limit_findings(&judge(cfg(), Some((1, 1)), &p)).len(), 1);
}

#[test]
fn retransmitted_reads_are_not_new_operations() {
    // Limit 1: READ 0 sent, resent whole after a timeout, then resent as
    // its tail (a partial retry: same R_Key and end address); READ 1 only
    // after READ 0's last response.
    let mut tail = read(2, 3000 - 2048);
    if let Some(r) = tail.ext.reth.as_mut() {
        r.va += 2048;
    }
    let p = [
        (read(0, 3000), 0),
        (
            response(Opcode::RC_READ_RESPONSE_FIRST, 0, Some(0x1F), 0, 1024),
            10,
        ),
        (
            response(Opcode::RC_READ_RESPONSE_MIDDLE, 1, None, 0, 1024),
            11,
        ),
        (tail, 5000),
        (
            response(Opcode::RC_READ_RESPONSE_ONLY, 2, Some(0x1F), 1, 952),
            5010,
        ),
        (read(3, 64), 5020),
        (only(3, 2), 5030),
    ];
    assert_eq!(
        limit_findings(&judge(cfg(), Some((1, 1)), &p)),
        Vec::<&ConversationFinding>::new()
    );
    let p = [
        (read(0, 64), 0),
        (read(0, 64), 5000),
        (only(0, 1), 5010),
        (read(1, 64), 5020),
        (only(1, 2), 5030),
    ];
    assert_eq!(
        limit_findings(&judge(cfg(), Some((1, 1)), &p)),
        Vec::<&ConversationFinding>::new()
    );
}

#[test]
fn atomics_and_flush_count_too() {
    let mut fa = request(Opcode::RC_FETCH_ADD, 0, 0, true);
    fa.ext.atomic_eth = Some(metaroce_codec::ext::AtomicEthRepr {
        va: 0x1000,
        rkey: 7,
        swap_add: 1,
        compare: 0,
    });
    let p = [
        (fa, 0),
        (read(1, 64), 1),
        (response(Opcode::RC_ATOMIC_ACK, 0, Some(0x1F), 1, 0), 100),
        (only(1, 2), 200),
    ];
    let f = judge(cfg(), Some((1, 1)), &p);
    let found = limit_findings(&f);
    assert_eq!(found.len(), 1, "{f:?}");
    assert_eq!(found[0].frames[0], 4);
}

#[test]
fn the_profile_limit_applies_without_a_cm_exchange() {
    let p = three_reads_then_responses(100);
    // No CM exchange, no profile: nothing to judge against.
    assert_eq!(
        limit_findings(&judge(cfg(), None, &p)),
        Vec::<&ConversationFinding>::new()
    );
    let with = |limits| ConversationConfig {
        rd_limits: limits,
        ..cfg()
    };
    let f = judge(
        with(RdLimits {
            max_rd_atomic: Some(2),
            max_dest_rd_atomic: None,
        }),
        None,
        &p,
    );
    let found = limit_findings(&f);
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].finding.id, found[0].finding.severity),
        ("MR-REQ-7", crate::Severity::Must)
    );
    assert_eq!(found[0].frames, vec![5, 3, 4]);
    // max_dest_rd_atomic alone: information (a consumer may set more).
    let f = judge(
        with(RdLimits {
            max_rd_atomic: None,
            max_dest_rd_atomic: Some(2),
        }),
        None,
        &p,
    );
    assert_eq!(
        limit_findings(&f)[0].finding.severity,
        crate::Severity::Info
    );
    // The CM exchange takes precedence over the profile.
    let f = judge(
        with(RdLimits {
            max_rd_atomic: Some(1),
            max_dest_rd_atomic: None,
        }),
        Some((3, 3)),
        &p,
    );
    assert_eq!(limit_findings(&f), Vec::<&ConversationFinding>::new());
}

#[test]
fn an_excess_the_cm_exchange_itself_set_up_is_information() {
    // The active side asked for Initiator Depth 4 and got 2 Responder
    // Resources: it is held to 2 (MUST).
    let f = judge(cfg(), Some((2, 4)), &three_reads_then_responses(100));
    let found = limit_findings(&f);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].finding.severity, crate::Severity::Must);
    // The passive side (B, QPN 0x12) announced Initiator Depth 4 in its
    // REP against the REQ's 2 Responder Resources: its consumer set the
    // excess up, so three READs from it are information.
    let reverse = |mut p: Pkt| {
        std::mem::swap(&mut p.src, &mut p.dst);
        p.bth.dest_qp = if p.bth.dest_qp == 0x12 { 0x11 } else { 0x12 };
        p
    };
    let p: Vec<(Pkt, u64)> = three_reads_then_responses(100)
        .into_iter()
        .map(|(p, t)| (reverse(p), t))
        .collect();
    let mut j = ConversationJudge::new(cfg());
    cm_both(&mut j, (2, 4), (4, 4));
    let mut f = Vec::new();
    for (i, (pkt, us)) in p.iter().enumerate() {
        f.extend(judge_packet(&mut j, pkt, i as u64 + 3, us * 1000, 0));
    }
    f.extend(j.finish());
    let found = limit_findings(&f);
    assert_eq!(found.len(), 1, "{f:?}");
    assert_eq!(found[0].finding.severity, crate::Severity::Info);
    assert_eq!(found[0].frames, vec![5, 1, 2, 3, 4]);
    // Had it announced 2, the same READs break MR-CM-4.
    let mut j = ConversationJudge::new(cfg());
    cm_both(&mut j, (2, 4), (4, 2));
    let mut f = Vec::new();
    for (i, (pkt, us)) in p.iter().enumerate() {
        f.extend(judge_packet(&mut j, pkt, i as u64 + 3, us * 1000, 0));
    }
    let found = limit_findings(&f);
    assert_eq!(found.len(), 1, "{f:?}");
    assert_eq!(found[0].finding.severity, crate::Severity::Must);
}

#[test]
fn a_connection_without_reads_holds_nothing_for_them() {
    let mut j = ConversationJudge::new(cfg());
    cm(&mut j, 1, 1);
    for (i, p) in sends(0, 3).iter().enumerate() {
        judge_packet(&mut j, p, i as u64 + 3, i as u64 * 1000, 0);
    }
    // The three SENDs queued at the responder side, no RDMA-resource state.
    let queued = j.pending();
    let mut j2 = ConversationJudge::new(cfg());
    for (i, p) in sends(0, 3).iter().enumerate() {
        judge_packet(&mut j2, p, i as u64 + 3, i as u64 * 1000, 0);
    }
    assert_eq!(queued, j2.pending());
    assert_eq!(
        j.connections()[0].behaviour.rd_limit.map(|l| l.value),
        Some(1)
    );
    assert_eq!(j.connections()[0].behaviour.rd_peak, 0);
}
