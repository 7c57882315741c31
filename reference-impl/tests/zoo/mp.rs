//! Scenarios of the MP mutants (SPEC §7): an MP QP pair, the mutant at B
//! (responder) or A (requester).

use super::common::Params;
use super::fixture::*;
use metaroce_codec::ext::{MpethRepr, RethRepr};
use metaroce_codec::{Msn, Opcode};
use metaroce_ref::zoo::Mutant;
use metaroce_ref::*;

fn attrs() -> MpAttrs {
    MpAttrs {
        window: 64,
        ..MpAttrs::default()
    }
}

/// An MP WRITE of `data` from A to a fresh MR of B: the pair, the MR and
/// A's request frames (not yet delivered).
fn mp_write(
    a: Option<Mutant>,
    b: Option<Mutant>,
    mp: MpAttrs,
    data: &[u8],
) -> (Base, MrInfo, Vec<Vec<u8>>) {
    let mut x = super::fixture::mp(a, b, Params::default(), mp);
    let (ea, eb) = (x.qa[0], x.qb[0]);
    let dst = mr(&mut x.b, eb.pd, data.len(), Access::ALL);
    post(&mut x.a, ea, 1, WrOp::Write(remote(&dst, 0)), data);
    let req = drain(&mut x.a);
    (x, dst, req)
}

pub fn mp_replace_after_complete() {
    check(
        Mutant::MpReplaceAfterComplete,
        "MR-MPP-8, MR-MPW-3: a duplicate of a completed WRITE is acknowledged, never placed again",
        |m| {
            let (mut x, dst, req) = mp_write(None, m, attrs(), &[7; 16]);
            deliver(&mut x.b, 0, &req);
            let first = drain(&mut x.b).len();
            // The application reuses the memory once the WRITE is done.
            x.b.write_mr(dst.lkey, dst.addr, &[0; 16]).unwrap();
            deliver(&mut x.b, 1, &req); // a retransmitted copy
            let again = drain(&mut x.b).len();
            let now = x.b.read_mr(dst.lkey, dst.addr, 16).unwrap().to_vec();
            (first, again, x.b.counters().duplicate_requests, now)
        },
        (1, 1, 1, vec![0; 16]),
        (1, 1, 1, vec![7; 16]),
    );
}

pub fn mp_sack_off_by_one() {
    check(
        Mutant::MpSackOffByOne,
        "MR-MPA-4: bit i of the SACK bitmap reports PSN base + i",
        |m| {
            let (mut x, _, req) = mp_write(None, m, attrs(), &[1; 2048]);
            assert_eq!(req.len(), 2);
            deliver(&mut x.b, 0, &req[1..]); // the first is lost
            let ea = x.qa[0];
            drain(&mut x.b)
                .iter()
                .filter_map(|f| seen(f).sack)
                .map(|s| {
                    let base = s.sack_base_psn.value().wrapping_sub(ea.psn) & 0xFF_FFFF;
                    (base, s.sack_bitmap)
                })
                .collect::<Vec<_>>()
        },
        vec![(0, 1 << 62)],
        vec![(0, 1 << 63)],
    );
}

pub fn mp_window_not_enforced() {
    check(
        Mutant::MpWindowNotEnforced,
        "MR-MPW-1: a PSN more than W (64) beyond c is dropped and counted",
        |m| {
            let mut x = super::fixture::mp(None, m, Params::default(), attrs());
            let (ea, eb) = (x.qa[0], x.qb[0]);
            let dst = mr(&mut x.b, eb.pd, 8, Access::ALL);
            // c = sq_psn − 1: PSN sq_psn + 64 is 65 beyond it.
            let psn = ea.psn.wrapping_add(64) & 0xFF_FFFF;
            let frame = to_b(Opcode::MP_WRITE, eb.qpn, psn)
                .udp_src_port(0xC000)
                .ack_req(true)
                .ext(|e| {
                    e.mpeth = Some(MpethRepr {
                        first: true,
                        last: true,
                        msn: Msn::new(0),
                        msg_len: 8,
                        ..MpethRepr::default()
                    });
                    e.reth = Some(RethRepr {
                        va: dst.addr,
                        rkey: dst.rkey,
                        dma_len: 8,
                    });
                })
                .payload(vec![6; 8])
                .build();
            x.b.handle_frame(0, &frame);
            let rsp = drain(&mut x.b).len();
            let now = x.b.read_mr(dst.lkey, dst.addr, 8).unwrap().to_vec();
            (x.b.counters().mp_out_of_window, rsp, now)
        },
        (1, 0, vec![0; 8]),
        (0, 1, vec![6; 8]),
    );
}

pub fn mp_ack_echo_wrong() {
    check(
        Mutant::MpAckEchoWrong,
        "MR-MPA-6: the MP ACK echoes the entropy value of the packet it answers",
        |m| {
            let (mut x, _, req) = mp_write(None, m, attrs(), &[1; 16]);
            let sent_from = seen(&req[0]).udp_src_port;
            deliver(&mut x.b, 0, &req);
            let ack = seen(&drain(&mut x.b)[0]);
            let echoed = ack.sack.map(|s| s.echoed_entropy);
            (echoed == Some(sent_from), echoed == Some(ack.udp_src_port))
        },
        (true, false),
        (false, true),
    );
}

pub fn mp_probe_unanswered() {
    check(
        Mutant::MpProbeUnanswered,
        "MR-MPF-5: an MP Probe draws an MP ACK",
        |m| {
            let mut x = super::fixture::mp(None, m, Params::default(), attrs());
            let (ea, eb) = (x.qa[0], x.qb[0]);
            let probe = to_b(Opcode::MP_PROBE, eb.qpn, ea.psn.wrapping_sub(1) & 0xFF_FFFF)
                .udp_src_port(0xC003)
                .ack_req(true)
                .ext(|e| {
                    e.mpeth = Some(MpethRepr {
                        timestamp: 77,
                        ..MpethRepr::default()
                    });
                })
                .build();
            x.b.handle_frame(0, &probe);
            drain(&mut x.b)
                .iter()
                .filter_map(|f| seen(f).sack)
                .map(|s| (s.echoed_entropy, s.echoed_timestamp))
                .collect::<Vec<_>>()
        },
        vec![(0xC003, 77)],
        vec![],
    );
}

pub fn mp_go_back_n() {
    check(
        Mutant::MpGoBackN,
        "MR-MPL-3, MR-MPL-6, MR-MPA-10: one lost packet of eight is the only one resent",
        |m| {
            let (mut x, dst, req) = mp_write(m, None, attrs(), &[3; 8192]);
            assert_eq!(req.len(), 8);
            let ea = x.qa[0];
            deliver(&mut x.b, 0, &req[1..]); // the first is lost
            let mut now = 0;
            for _ in 0..20 {
                let from_b = drain(&mut x.b);
                deliver(&mut x.a, now, &from_b);
                let from_a = drain(&mut x.a);
                deliver(&mut x.b, now, &from_a);
                if from_a.is_empty() && from_b.is_empty() {
                    let Some(t) = [x.a.poll_timeout(), x.b.poll_timeout()]
                        .into_iter()
                        .flatten()
                        .min()
                    else {
                        break;
                    };
                    now = t;
                    x.a.handle_timeout(now);
                    x.b.handle_timeout(now);
                }
                if !statuses(&mut x.a, ea).is_empty() {
                    break;
                }
            }
            let landed = x.b.read_mr(dst.lkey, dst.addr, 8192).unwrap() == [3; 8192];
            (x.a.counters().retransmitted_packets, landed)
        },
        (1, true),
        (8, true),
    );
}

pub fn mp_single_entropy() {
    check(
        Mutant::MpSingleEntropy,
        "MR-MPS-3: sixteen packets from a round start use all sixteen entropy values",
        |m| {
            let (_, _, req) = mp_write(m, None, attrs(), &[1; 16384]);
            let mut ports: Vec<u16> = req.iter().map(|f| seen(f).udp_src_port).collect();
            ports.sort_unstable();
            ports.dedup();
            (req.len(), ports.len())
        },
        (16, 16),
        (16, 1),
    );
}

pub fn mp_cwnd_ignored() {
    let small = MpAttrs {
        tuning: MpTuning {
            cwnd_init: 2048,
            ..MpTuning::default()
        },
        ..attrs()
    };
    check(
        Mutant::MpCwndIgnored,
        "MR-MPC-1: with cwnd 2 PMTU, 2 packets of an 8-packet WRITE leave before an ACK",
        |m| mp_write(m, None, small.clone(), &[1; 8192]).2.len(),
        2,
        8,
    );
}
