//! Unit tests of the conversation judge: pipelining, ACK coalescing,
//! skipped and unexpected responses, MSN learning, branch choice, pairing,
//! mid-conversation starts, bounds and hostile input; CNPs against CE marks
//! (`cnp.rs`), MP connections (`mp.rs`), closing idle connections (`evict.rs`),
//! deferred failure branches against eager ones (`deferred.rs`), frames
//! their receiver drops (`admission.rs`).

mod admission;
mod cnp;
mod deferred;
mod evict;
mod mp;
mod rd_atomic;
mod shadow;

use super::*;
use metaroce_codec::ext::{AethRepr, ExtHeaders, RethRepr, Syndrome};
use metaroce_codec::{BthRepr, Msn, Opcode, Psn};
use std::net::Ipv4Addr;

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

/// A packet that owns its payload, with where it travels.
#[derive(Clone)]
struct Pkt {
    bth: BthRepr,
    ext: ExtHeaders,
    payload: Vec<u8>,
    src: IpAddr,
    dst: IpAddr,
    udp_src_port: u16,
}

impl Pkt {
    /// The packet of a built frame, from `src` to `dst`.
    fn of(frame: &[u8], src: IpAddr, dst: IpAddr) -> Self {
        let parsed = metaroce_codec::Frame::parse(frame, &metaroce_codec::ParseOptions::default())
            .expect("frame");
        let roce = parsed.roce.expect("roce");
        Pkt {
            bth: roce.bth,
            ext: roce.ext,
            payload: roce.payload.to_vec(),
            src,
            dst,
            udp_src_port: parsed.udp.map_or(0xC000, |u| u.src_port),
        }
    }
}

fn request(opcode: Opcode, psn: u32, len: usize, ack_req: bool) -> Pkt {
    Pkt {
        bth: BthRepr {
            opcode,
            pkey: 0xFFFF,
            dest_qp: 0x12,
            psn: Psn::new(psn),
            ack_req,
            ..BthRepr::default()
        },
        ext: ExtHeaders::default(),
        payload: vec![0; len],
        src: A,
        dst: B,
        udp_src_port: 0xC000,
    }
}

fn read(psn: u32, len: u32) -> Pkt {
    let mut p = request(Opcode::RC_READ_REQUEST, psn, 0, true);
    p.ext.reth = Some(RethRepr {
        va: 0x1000,
        rkey: 7,
        dma_len: len,
    });
    p
}

fn response(opcode: Opcode, psn: u32, syndrome: Option<u8>, msn: u32, len: usize) -> Pkt {
    let mut ext = ExtHeaders::default();
    if let Some(s) = syndrome {
        ext.aeth = Some(AethRepr {
            syndrome: Syndrome(s),
            msn: Msn::new(msn),
        });
    }
    Pkt {
        bth: BthRepr {
            opcode,
            pkey: 0xFFFF,
            dest_qp: 0x11,
            psn: Psn::new(psn),
            ..BthRepr::default()
        },
        ext,
        payload: vec![0; len],
        src: B,
        dst: A,
        udp_src_port: 0xC000,
    }
}

fn ack(psn: u32, msn: u32) -> Pkt {
    response(Opcode::RC_ACK, psn, Some(0x1F), msn, 0)
}

fn run_with(
    cfg: ConversationConfig,
    pkts: &[Pkt],
) -> (ConversationJudge, Vec<ConversationFinding>) {
    let timed: Vec<(Pkt, u64, u8)> = pkts
        .iter()
        .enumerate()
        .map(|(i, p)| (p.clone(), 1_000_000 * i as u64, 0))
        .collect();
    run_timed(cfg, &timed)
}

/// Judges `p` as frame `frame`, captured at `ts` ns with ECN code point
/// `ecn` and a valid ICRC; returns what `on_packet` finds.
fn judge_packet(
    j: &mut ConversationJudge,
    p: &Pkt,
    frame: u64,
    ts: u64,
    ecn: u8,
) -> Vec<ConversationFinding> {
    judge_frame(j, p, frame, ts, ecn, true)
}

/// [`judge_packet`] for a frame its receiver admits or (`admitted` false) drops.
fn judge_frame(
    j: &mut ConversationJudge,
    p: &Pkt,
    frame: u64,
    ts: u64,
    ecn: u8,
    admitted: bool,
) -> Vec<ConversationFinding> {
    let meta = PacketMeta {
        frame,
        timestamp_ns: ts,
        src: p.src,
        dst: p.dst,
        udp_src_port: p.udp_src_port,
        ecn,
        dscp: 0,
        icrc_valid: admitted,
        admitted,
        payload_len: None,
    };
    let pkt = RocePacket {
        bth: p.bth,
        ext: p.ext,
        payload: &p.payload,
        pad: &[],
        icrc: [0; 4],
    };
    j.on_packet(&meta, &pkt)
}

/// Judges packets with their capture times (ns) and ECN code points; frame
/// numbers count from 1.
fn run_timed(
    cfg: ConversationConfig,
    pkts: &[(Pkt, u64, u8)],
) -> (ConversationJudge, Vec<ConversationFinding>) {
    let mut j = ConversationJudge::new(cfg);
    let mut all = Vec::new();
    for (i, (p, ts, ecn)) in pkts.iter().enumerate() {
        all.extend(judge_packet(&mut j, p, i as u64 + 1, *ts, *ecn));
    }
    all.extend(j.finish());
    (j, all)
}

fn run(pkts: &[Pkt]) -> Vec<ConversationFinding> {
    let cfg = ConversationConfig {
        pmtu: Some(1024),
        ..ConversationConfig::default()
    };
    run_with(cfg, pkts).1
}

fn lossy() -> ConversationConfig {
    ConversationConfig {
        pmtu: Some(1024),
        lossy: true,
        ..ConversationConfig::default()
    }
}

fn ids(f: &[ConversationFinding]) -> Vec<(&'static str, u64)> {
    f.iter().map(|c| (c.finding.id, c.frames[0])).collect()
}

fn sends(from: u32, n: u32) -> Vec<Pkt> {
    (0..n)
        .map(|i| request(Opcode::RC_SEND_ONLY, from + i, 8, true))
        .collect()
}

#[test]
fn pipelined_acks_in_order_conform() {
    // "MR-ACK-1", "MR-ACK-2", "MR-MSN-2": three SENDs, then their ACKs.
    let mut p = sends(100, 3);
    p.extend([ack(100, 5), ack(101, 6), ack(102, 7)]);
    assert_eq!(ids(&run(&p)), vec![]);
}

#[test]
fn one_ack_may_cover_several_requests() {
    // "MR-ACK-1": an ACK of a later PSN covers the earlier AckReq packets.
    let mut p = sends(100, 3);
    p.push(ack(102, 7));
    assert_eq!(ids(&run(&p)), vec![]);
}

#[test]
fn missing_ack_at_the_end_is_a_finding() {
    // "MR-ACK-1": the last SEND is never acknowledged.
    let mut p = sends(100, 2);
    p.push(ack(100, 1));
    assert_eq!(ids(&run(&p)), vec![("MR-ACK-1", 2)]);
}

#[test]
fn wrong_msn_after_it_was_learnt() {
    // "MR-MSN-2": the first ACK teaches MSN 5; the next must carry 6.
    let mut p = sends(100, 2);
    p.extend([ack(100, 5), ack(101, 9)]);
    let f = run(&p);
    // The wrong ACK still acknowledges PSN 101 ("MR-ACK-1" is met).
    assert_eq!(ids(&f), vec![("MR-MSN-2", 4)]);
    // It rests on the MSN learned from frame 3: that frame is named too
    // (the earlier ACK may be the wrong one).
    assert_eq!(f[0].frames, vec![4, 2, 3]);
    assert!(
        f[0].finding
            .message
            .contains("learned from the AETH of frame 3")
    );
}

#[test]
fn ack_of_a_psn_not_executed() {
    // "MR-ACK-4": PSN 105 was never received.
    let mut p = sends(100, 1);
    p.extend([ack(100, 1), ack(105, 2)]);
    assert_eq!(ids(&run(&p)), vec![("MR-ACK-4", 3)]);
}

#[test]
fn skipped_read_response_is_reported_when_the_next_one_shows_it() {
    // "MR-READ-2": First, then Last: the Middle was skipped.
    let p = [
        read(10, 3000),
        response(Opcode::RC_READ_RESPONSE_FIRST, 10, Some(0x1F), 1, 1024),
        response(Opcode::RC_READ_RESPONSE_LAST, 12, Some(0x1F), 1, 952),
    ];
    let f = run(&p);
    assert_eq!(ids(&f), vec![("MR-READ-2", 1)]);
    assert_eq!(f[0].frames, vec![1, 3]);
}

#[test]
fn lossy_capture_reports_missing_responses_as_information() {
    let p = [
        read(10, 3000),
        response(Opcode::RC_READ_RESPONSE_FIRST, 10, Some(0x1F), 1, 1024),
        response(Opcode::RC_READ_RESPONSE_LAST, 12, Some(0x1F), 1, 952),
    ];
    let cfg = ConversationConfig {
        pmtu: Some(1024),
        lossy: true,
        ..ConversationConfig::default()
    };
    let (_, f) = run_with(cfg, &p);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].finding.severity, crate::Severity::Info);
}

#[test]
fn sequence_nak_then_go_back_n() {
    // "MR-NAK-1", "MR-NAK-2": PSN 101 lost; 102 and 103 ahead: one NAK.
    let mut p = vec![request(Opcode::RC_SEND_ONLY, 100, 8, true)];
    p.push(request(Opcode::RC_SEND_ONLY, 102, 8, true));
    p.push(request(Opcode::RC_SEND_ONLY, 103, 8, true));
    p.push(ack(100, 1));
    p.push(response(Opcode::RC_ACK, 101, Some(0x60), 1, 0));
    p.extend(sends(101, 3));
    p.extend([ack(101, 2), ack(103, 4)]);
    // Lossy: PSN 101 was lost before the capture point.
    assert_eq!(ids(&run_with(lossy(), &p).1), vec![]);
}

#[test]
fn second_sequence_nak_is_a_finding() {
    // "MR-NAK-2": a second NAK 0x60 before the expected PSN arrived.
    let mut p = vec![request(Opcode::RC_SEND_ONLY, 100, 8, true)];
    p.push(request(Opcode::RC_SEND_ONLY, 102, 8, true));
    p.push(request(Opcode::RC_SEND_ONLY, 103, 8, true));
    p.push(ack(100, 1));
    p.push(response(Opcode::RC_ACK, 101, Some(0x60), 1, 0));
    p.push(response(Opcode::RC_ACK, 101, Some(0x60), 1, 0));
    let f = run_with(lossy(), &p).1;
    assert_eq!(ids(&f), vec![("MR-NAK-2", 6)], "{f:#?}");
    assert_eq!(f[0].frames, vec![6, 5], "the second NAK, then the first");
}

#[test]
fn rnr_branch_is_taken_when_observed() {
    // "MR-RNR-1": the receive queue is unknown, so an RNR NAK is allowed;
    // the state then holds the expected PSN, and the retry is executed.
    let mut p = sends(100, 1);
    p.push(response(Opcode::RC_ACK, 100, Some(0x2D), 0, 0)); // 0.96 ms
    p.extend(sends(100, 1));
    p.push(ack(100, 1));
    assert_eq!(ids(&run(&p)), vec![]);
}

#[test]
fn duplicate_is_re_acknowledged() {
    // "MR-DUP-2": a resent SEND is answered with the ACK of ePSN − 1.
    // Resent before the ACK came back (as rxe's early timer does).
    let mut p = sends(100, 2);
    p.extend(sends(100, 2));
    p.extend([ack(101, 2), ack(101, 2), ack(101, 2)]);
    assert_eq!(ids(&run(&p)), vec![]);
}

#[test]
fn a_capture_joined_mid_conversation_judges_nothing_before_it() {
    // Responses to requests before the first one observed are not judged;
    // a SEND Middle first seen continues an unknown message.
    let mut p = vec![
        ack(50, 9),
        response(Opcode::RC_READ_RESPONSE_MIDDLE, 60, None, 0, 1024),
    ];
    p.push(request(Opcode::RC_SEND_MIDDLE, 100, 1024, false));
    p.push(request(Opcode::RC_SEND_LAST, 101, 10, true));
    p.push(ack(101, 12));
    assert_eq!(ids(&run(&p)), vec![]);
}

#[test]
fn pmtu_is_learnt_from_the_packets() {
    let p = [
        request(Opcode::RC_SEND_FIRST, 100, 1024, false),
        request(Opcode::RC_SEND_LAST, 101, 10, true),
        ack(101, 1),
        request(Opcode::RC_SEND_ONLY, 102, 10, true),
        ack(102, 2),
    ];
    let (j, f) = run_with(ConversationConfig::default(), &p);
    assert_eq!(ids(&f), vec![]);
    let c = j.connections();
    assert_eq!(c[0].requester_qpn, Some(0x11));
    assert_eq!((c[0].requests, c[0].responses), (3, 2));
}

#[test]
fn a_declared_max_pmtu_bounds_the_learnt_pmtu() {
    // A SEND First of 1024 bytes: PMTU 1024 when learnt, but longer than
    // every PMTU up to a declared `max_pmtu` of 512 (MR-PKT-1 at frame 1).
    let p = [
        request(Opcode::RC_SEND_FIRST, 100, 1024, false),
        request(Opcode::RC_SEND_LAST, 101, 10, true),
        ack(101, 1),
    ];
    let max = |max_pmtu| ConversationConfig {
        max_pmtu,
        ..ConversationConfig::default()
    };
    assert_eq!(ids(&run_with(max(None), &p).1), vec![]);
    assert_eq!(ids(&run_with(max(Some(4096)), &p).1), vec![]);
    assert_eq!(ids(&run_with(max(Some(512)), &p).1), vec![("MR-PKT-1", 1)]);
    // A given PMTU wins over the declared maximum.
    let given = ConversationConfig {
        pmtu: Some(1024),
        ..max(Some(512))
    };
    assert_eq!(ids(&run_with(given, &p).1), vec![]);
}

#[test]
fn two_qps_between_the_same_hosts_pair_by_psn() {
    let mut p = sends(100, 1);
    let mut other = request(Opcode::RC_SEND_ONLY, 5000, 8, true);
    other.bth.dest_qp = 0x13;
    p.push(other);
    let mut a2 = ack(5000, 1);
    a2.bth.dest_qp = 0x21;
    p.push(a2);
    p.push(ack(100, 1));
    let (j, f) = run_with(
        ConversationConfig {
            pmtu: Some(1024),
            ..ConversationConfig::default()
        },
        &p,
    );
    assert_eq!(ids(&f), vec![]);
    let c = j.connections();
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].requester_qpn, Some(0x11));
    assert_eq!(c[1].requester_qpn, Some(0x21));
}

#[test]
fn a_request_just_before_the_end_is_not_judged() {
    // Its ACK may come after the capture ends (within `ack_delay_ns`).
    let p = sends(100, 1);
    let cfg = ConversationConfig {
        pmtu: Some(1024),
        ack_delay_ns: 1_000,
        ..ConversationConfig::default()
    };
    assert!(run_with(cfg, &p).1.is_empty());
}

#[test]
fn pending_queue_is_bounded() {
    // Requests without AckReq and no response: the queue stays bounded.
    let p: Vec<Pkt> = (0..MAX_PENDING as u32 + 50)
        .map(|i| request(Opcode::RC_WRITE_MIDDLE, i, 1024, false))
        .collect();
    let cfg = ConversationConfig {
        pmtu: Some(1024),
        ..ConversationConfig::default()
    };
    let mut j = ConversationJudge::new(cfg);
    for (i, q) in p.iter().enumerate() {
        let q = Pkt {
            udp_src_port: 1,
            ..q.clone()
        };
        judge_packet(&mut j, &q, i as u64, 0, 3);
        assert!(j.pending() <= MAX_PENDING);
    }
    assert_eq!(j.connections()[0].ce_marked, MAX_PENDING as u64 + 50);
}

#[test]
fn arbitrary_headers_do_not_panic() {
    // Every opcode, odd PSNs, AETHs and lengths: findings or not, no panic.
    let mut p = Vec::new();
    for op in 0..=255u8 {
        let mut q = request(
            Opcode(op),
            u32::from(op) * 0x10101,
            usize::from(op) * 7,
            op % 2 == 0,
        );
        q.ext.aeth = Some(AethRepr {
            syndrome: Syndrome(op),
            msn: Msn::new(u32::from(op)),
        });
        if op % 3 == 0 {
            std::mem::swap(&mut q.src, &mut q.dst);
        }
        p.push(q);
    }
    let _ = run(&p);
    let _ = run_with(ConversationConfig::default(), &p);
}

/// A WRITE of `n` packets of 1024 B from PSN `psn` (First, Middles, Last
/// with AckReq).
fn write_message(psn: u32, n: u32) -> Vec<Pkt> {
    (0..n)
        .map(|i| {
            let op = match i {
                0 => Opcode::RC_WRITE_FIRST,
                i if i == n - 1 => Opcode::RC_WRITE_LAST,
                _ => Opcode::RC_WRITE_MIDDLE,
            };
            let mut p = request(op, psn + i, 1024, i == n - 1);
            if i == 0 {
                p.ext.reth = Some(RethRepr {
                    va: 0x1000,
                    rkey: 7,
                    dma_len: 1024 * n,
                });
            }
            p
        })
        .collect()
}

#[test]
fn acks_inside_a_run_of_middle_packets_are_judged() {
    // "MR-ACK-5": the responder may acknowledge any Middle, with the PSN and
    // MSN MR-ACK-2 asks for; the Middles are queued as one run.
    let mut p = write_message(100, 20);
    p.insert(6, ack(104, 7)); // after PSN 104 (frames 1..=5 are PSNs 100..=104)
    p.insert(12, ack(109, 7));
    p.push(ack(119, 8));
    assert_eq!(ids(&run(&p)), vec![], "coalesced ACKs inside a run");
    // The same with a wrong MSN on an ACK of a Middle: MR-MSN-2 at that ACK.
    let mut bad = write_message(100, 20);
    bad.insert(6, ack(104, 7));
    bad.insert(12, ack(109, 9));
    bad.push(ack(119, 8));
    let f = run(&bad);
    assert_eq!(ids(&f), vec![("MR-MSN-2", 13)], "{f:#?}");
    // An ACK of a PSN the run never reached: MR-ACK-4.
    let mut early = write_message(100, 20);
    early.insert(6, ack(110, 7));
    assert!(
        ids(&run(&early)).contains(&("MR-ACK-4", 7)),
        "{:#?}",
        run(&early)
    );
}

#[test]
fn lossy_capture_reinterprets_a_request_whose_responses_were_lost() {
    // A Fetch-Add (MSN 1) and a SEND answered with an RNR NAK (MSN stays
    // 1), both resent twice; the second SEND's RNR NAK is lost before the
    // capture point, and the third Atomic Acknowledge (a replay) carries MSN
    // 1, which shows the second SEND was not executed either. A lossy
    // capture must take that branch, not report MR-DUP-5. Found by the
    // differential fuzz target against the reference transport.
    let mut fa = request(Opcode::RC_FETCH_ADD, 7, 0, true);
    fa.ext.atomic_eth = Some(metaroce_codec::ext::AtomicEthRepr {
        va: 0x1000,
        rkey: 7,
        swap_add: 1,
        compare: 0,
    });
    let fa2 = || {
        let mut p = request(Opcode::RC_FETCH_ADD, 7, 0, true);
        p.ext.atomic_eth = fa.ext.atomic_eth;
        p
    };
    let atomic_ack = || response(Opcode::RC_ATOMIC_ACK, 7, Some(0x1F), 1, 0);
    // The requester resent both twice on timeouts before any response came.
    let send = || request(Opcode::RC_SEND_ONLY, 8, 16, true);
    let pkts = [
        fa2(),
        send(),
        fa2(),
        send(),
        fa2(),
        send(),
        atomic_ack(),
        response(Opcode::RC_ACK, 8, Some(0x27), 1, 0),
        atomic_ack(),
        atomic_ack(),
    ];
    let lossy = ConversationConfig {
        pmtu: Some(1024),
        lossy: true,
        ..ConversationConfig::default()
    };
    let (_, f) = run_with(lossy.clone(), &pkts);
    let musts: Vec<_> = f
        .iter()
        .filter(|f| f.finding.severity == crate::Severity::Must)
        .collect();
    assert!(musts.is_empty(), "MR-DUP-5: {musts:?}");
    // Without loss the missing RNR NAK is a finding, as before.
    let (_, strict) = run_with(
        ConversationConfig {
            lossy: false,
            ..lossy
        },
        &pkts,
    );
    assert!(
        strict
            .iter()
            .any(|f| f.finding.severity == crate::Severity::Must),
        "a strict capture still reports the missing response"
    );
}

#[test]
fn a_run_is_judged_again_when_an_rnr_nak_shows_another_branch() {
    // "MR-RNR-1", "MR-RNR-2": the receive queue is unknown; the SEND First
    // gets an RNR NAK, so its Middles (a queued run) were ahead of the
    // expected PSN and dropped silently; the retry from the First succeeds.
    let send = |psn: u32, op: Opcode, ack_req: bool| request(op, psn, 1024, ack_req);
    let mut p = vec![send(100, Opcode::RC_SEND_FIRST, false)];
    for i in 1..6 {
        p.push(send(100 + i, Opcode::RC_SEND_MIDDLE, false));
    }
    p.push(response(Opcode::RC_ACK, 100, Some(0x2D), 0, 0));
    p.push(send(100, Opcode::RC_SEND_FIRST, false));
    for i in 1..6 {
        p.push(send(100 + i, Opcode::RC_SEND_MIDDLE, false));
    }
    let mut last = send(106, Opcode::RC_SEND_LAST, true);
    last.payload.truncate(10);
    p.push(last);
    p.push(ack(106, 1));
    let f = run(&p);
    assert_eq!(ids(&f), vec![], "{f:#?}");
}

#[test]
fn lossy_capture_relearns_an_msn_taught_by_a_replay() {
    // A Fetch-Add and its retransmission, then a SEND and its retransmission,
    // all before any response. The responder executes the Fetch-Add (MSN 1),
    // replays it for the duplicate, executes the SEND (MSN 2) and acknowledges
    // its duplicate; only the replay of the third Fetch-Add copy (MSN 2, sent
    // after the SEND executed) and the last ACK (MSN 2) reach the capture.
    // The first AETH seen taught MSN 2 for the Fetch-Add; the ACK then shows
    // it came from a replay. A lossy capture learns again instead of
    // reporting MR-MSN-2. Found by the differential fuzz target.
    let fa = || {
        let mut p = request(Opcode::RC_FETCH_ADD, 7, 0, true);
        p.ext.atomic_eth = Some(metaroce_codec::ext::AtomicEthRepr {
            va: 0x1000,
            rkey: 7,
            swap_add: 1,
            compare: 0,
        });
        p
    };
    let send = || request(Opcode::RC_SEND_ONLY, 8, 0, true);
    let pkts = [
        fa(),
        fa(),
        send(),
        fa(),
        send(),
        response(Opcode::RC_ATOMIC_ACK, 7, Some(0x1F), 2, 0),
        ack(8, 2),
    ];
    let lossy = ConversationConfig {
        pmtu: Some(1024),
        lossy: true,
        ..ConversationConfig::default()
    };
    let (_, f) = run_with(lossy, &pkts);
    let musts: Vec<_> = f
        .iter()
        .filter(|f| f.finding.severity == crate::Severity::Must)
        .collect();
    assert!(musts.is_empty(), "MR-MSN-2: {musts:?}");
}

#[test]
fn response_to_a_request_retired_early_is_not_judged() {
    // More than MAX_PENDING requests go unanswered (a requester retransmits
    // while the responder waits for a receive); the first ones are retired
    // early. An RNR NAK for the first PSN then arrives: what it answers is
    // gone, so it is not judged (before: "fits no expected response").
    // Found by the differential fuzz target.
    let mut pkts: Vec<Pkt> = (0..MAX_PENDING as u32 + 8)
        .map(|i| request(Opcode::RC_SEND_ONLY, i, 8, i % 16 == 15))
        .collect();
    pkts.push(response(Opcode::RC_ACK, 0, Some(0x20), 0, 0));
    let cfg = ConversationConfig {
        pmtu: Some(1024),
        ..ConversationConfig::default()
    };
    let (j, f) = run_with(cfg, &pkts);
    assert!(
        !f.iter().any(|f| f.frames.contains(&(pkts.len() as u64))),
        "{f:?}"
    );
    assert!(j.connections()[0].unjudged_responses >= 1);
}

#[test]
fn a_gap_an_ack_covers_is_capture_loss_and_a_nakked_one_is_not() {
    // A WRITE of PSN 100..=119 whose 105 and 106 the capture point lost:
    // the ACK of 119 shows the responder received them. No finding.
    let mut lost = write_message(100, 20);
    lost.drain(5..7);
    lost.push(ack(119, 1));
    let (judge, f) = run_with(ConversationConfig::default(), &lost);
    assert_eq!(ids(&f), vec![], "{f:#?}");
    assert_eq!(judge.connections()[0].behaviour.capture_loss_from, Some(19));
    // The same gap answered with a sequence NAK of 105: the requester
    // skipped them (frame 6, PSN 107, is MR-PSN-3).
    let mut real = write_message(100, 20);
    real.drain(5..7);
    real.insert(6, response(Opcode::RC_ACK, 105, Some(0x60), 0, 0));
    let (judge, f) = run_with(ConversationConfig::default(), &real);
    assert!(ids(&f).contains(&("MR-PSN-3", 6)), "{f:#?}");
    assert_eq!(judge.connections()[0].behaviour.capture_loss_from, None);
}
