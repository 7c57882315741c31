//! post_send: packetization, PSNs, headers, AckReq, local limits.

use crate::common::*;
use metaroce_codec::{Opcode, Psn};
use metaroce_spec::model::requester::{QpType, RequesterAttrs, WorkRequest, WrOp, packetize};
use metaroce_spec::model::{Effect, Field, PacketSpec, WcStatus};
use std::fmt::Write as _;

fn field<T: std::fmt::Debug>(f: &Field<T>) -> String {
    match f {
        Field::Any => "any".into(),
        Field::Exact(v) => format!("{v:?}"),
        Field::OneOf(vs) => format!("one of {vs:?}"),
    }
}

fn render(specs: &[PacketSpec]) -> String {
    let mut s = String::new();
    for p in specs {
        let h = &p.headers;
        let Field::Exact(op) = &p.opcode else {
            unreachable!()
        };
        let Field::Exact(psn) = &p.psn else {
            unreachable!()
        };
        write!(
            s,
            "psn={:#08x} {:<34} ack_req={:<5} se={} len={}",
            psn.value(),
            op.name().unwrap_or("?"),
            field(&h.ack_req),
            field(&h.se),
            field(&h.payload_len)
        )
        .unwrap();
        if let Field::Exact(r) = &h.reth {
            write!(
                s,
                " reth(va={:#x} rkey={:#x} len={})",
                r.va, r.rkey, r.dma_len
            )
            .unwrap();
        }
        if let Field::Exact(a) = &h.atomic_eth {
            write!(
                s,
                " atomic(va={:#x} rkey={:#x} swap_add={:#x} compare={:#x})",
                a.va, a.rkey, a.swap_add, a.compare
            )
            .unwrap();
        }
        s.push('\n');
    }
    s
}

/// MR-PKT-1, MR-PKT-3, MR-PKT-6, MR-PSN-3, MR-READ-1: the packets the model
/// requires for a scripted set of work requests at PMTU 1024.
#[test]
fn snapshot_scripted_work_requests_pmtu_1024() {
    let mut s = state(RequesterAttrs {
        sq_psn: Psn::new(0x100),
        ..rc(1024)
    });
    let wrs = [
        WorkRequest::send(3000),
        WorkRequest::write(0, 0x1000, 0xAB),
        WorkRequest::read(2500, 0x2000, 0xCD),
        WorkRequest::new(
            WrOp::CmpSwap {
                va: 0x3000,
                rkey: 0xEF,
                compare: 1,
                swap: 2,
            },
            8,
        ),
        WorkRequest::new(
            WrOp::FetchAdd {
                va: 0x3008,
                rkey: 0xEF,
                add: 5,
            },
            8,
        ),
    ];
    let mut specs = Vec::new();
    for wr in wrs {
        let (next, out) = s.post_send(wr, 0);
        s = next;
        specs.extend(sends(&out));
    }
    insta::assert_snapshot!(render(&specs));
    assert_eq!(s.next_psn, Psn::new(0x100 + 3 + 1 + 3 + 1 + 1), "MR-PSN-3");
}

/// MR-PKT-1: First/Middle/Last sizes and the with-Immediate / with-Invalidate
/// variants on the Last or Only packet.
#[test]
fn mr_pkt_1_split_and_variants() {
    let a = rc(1024);
    let ops = |wr: WorkRequest| -> Vec<(u8, u32)> {
        packetize(&wr, &a, Psn::new(0))
            .iter()
            .map(|p| (p.opcode.0, p.payload_len))
            .collect()
    };
    assert_eq!(
        ops(WorkRequest::send(3000)),
        vec![(0x00, 1024), (0x01, 1024), (0x02, 952)]
    );
    assert_eq!(
        ops(WorkRequest::send(2048)),
        vec![(0x00, 1024), (0x02, 1024)]
    );
    assert_eq!(ops(WorkRequest::send(0)), vec![(0x04, 0)]);
    assert_eq!(ops(WorkRequest::send(1024)), vec![(0x04, 1024)]);
    assert_eq!(
        ops(WorkRequest::new(WrOp::SendImm { imm: 7 }, 1500)),
        vec![(0x00, 1024), (0x03, 476)]
    );
    assert_eq!(
        ops(WorkRequest::new(WrOp::SendInv { rkey: 9 }, 10)),
        vec![(0x17, 10)]
    );
    assert_eq!(
        ops(WorkRequest::new(
            WrOp::WriteImm {
                va: 0,
                rkey: 1,
                imm: 2
            },
            2049
        )),
        vec![(0x06, 1024), (0x07, 1024), (0x09, 1)]
    );
    assert_eq!(
        ops(WorkRequest::new(
            WrOp::WriteImm {
                va: 0,
                rkey: 1,
                imm: 2
            },
            5
        )),
        vec![(0x0B, 5)]
    );
}

/// MR-PKT-3: RETH only on WRITE First/Only and READ, with the total length.
#[test]
fn mr_pkt_3_reth_placement() {
    let a = rc(1024);
    let p = packetize(&WorkRequest::write(2500, 0x10, 0x20), &a, Psn::new(5));
    assert_eq!(
        p[0].reth.map(|r| (r.va, r.rkey, r.dma_len)),
        Some((0x10, 0x20, 2500))
    );
    assert!(p[1].reth.is_none() && p[2].reth.is_none());
    let s = packetize(&WorkRequest::send(2500), &a, Psn::new(5));
    assert!(s.iter().all(|p| p.reth.is_none()));
}

/// MR-PKT-6: AckReq in last/only SEND and WRITE packets and every atomic,
/// FLUSH and ATOMIC WRITE; MR-FLUSH-7: ATOMIC WRITE is one 0x1D packet, 8 B.
#[test]
fn mr_pkt_6_ack_req_and_mr_flush_7() {
    let a = rc(256);
    let p = packetize(&WorkRequest::send(600), &a, Psn::new(0));
    assert_eq!(
        p.iter().map(|p| p.ack_req.clone()).collect::<Vec<_>>(),
        vec![Field::Any, Field::Any, Field::Exact(true)]
    );
    for op in [
        WrOp::CmpSwap {
            va: 0,
            rkey: 1,
            compare: 2,
            swap: 3,
        },
        WrOp::FetchAdd {
            va: 0,
            rkey: 1,
            add: 2,
        },
        WrOp::Flush {
            va: 0,
            rkey: 1,
            selectivity: 0,
            placement: 1,
        },
        WrOp::AtomicWrite { va: 8, rkey: 1 },
    ] {
        let p = packetize(&WorkRequest::new(op, 64), &a, Psn::new(0));
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].ack_req, Field::Exact(true), "{op:?}");
    }
    let aw = packetize(
        &WorkRequest::new(WrOp::AtomicWrite { va: 8, rkey: 1 }, 99),
        &a,
        Psn::new(0),
    );
    assert_eq!(aw[0].opcode, Opcode::RC_ATOMIC_WRITE);
    assert_eq!((aw[0].payload_len, aw[0].reth.unwrap().dma_len), (8, 8));
}

/// MR-BTH-7: SE only in the last packet of a solicited SEND.
#[test]
fn mr_bth_7_se_only_on_last() {
    let p = packetize(&WorkRequest::send(2500).solicited(), &rc(1024), Psn::new(0));
    assert_eq!(
        p.iter().map(|p| p.se).collect::<Vec<_>>(),
        vec![false, false, true]
    );
    let w = packetize(
        &WorkRequest::write(10, 0, 0).solicited(),
        &rc(1024),
        Psn::new(0),
    );
    assert!(!w[0].se);
}

/// MR-PSN-3, MR-BTH-8, MR-PSN-5: consecutive PSNs across the wrap; a READ
/// reserves ceil(L / PMTU) PSNs.
#[test]
fn mr_psn_3_wrap_and_read_reservation() {
    let s = state(RequesterAttrs {
        sq_psn: Psn::new(0xFF_FFFE),
        ..rc(1024)
    });
    let (s, out) = s.post_send(WorkRequest::send(3000), 0);
    assert_eq!(
        sent(&out),
        vec![(0x00, 0xFF_FFFE), (0x01, 0xFF_FFFF), (0x02, 0)]
    );
    let (s, out) = s.post_send(WorkRequest::read(2500, 0, 1), 0);
    assert_eq!(sent(&out), vec![(0x0C, 1)]);
    let (_, out) = s.post_send(WorkRequest::send(1), 0);
    assert_eq!(
        sent(&out),
        vec![(0x04, 4)],
        "the READ reserved PSNs 1, 2 and 3"
    );
}

/// MR-PKT-8: a message longer than max_msg_size sends nothing and completes
/// with LOC_LEN_ERR, which takes an RC QP to ERR (§6.2, SPEC v1.1).
#[test]
fn mr_pkt_8_oversize_is_loc_len_err() {
    let attrs = RequesterAttrs {
        max_msg_size: 4096,
        ..rc(1024)
    };
    let (s, out) = state(attrs.clone()).post_send(WorkRequest::send(4097), 0);
    assert!(sent(&out).is_empty());
    assert_eq!(completions(&out), vec![(0, WcStatus::LocLenErr)]);
    assert!(enters_error(&out), "MR-PKT-8: an RC QP enters ERR");
    let (_, out) = s.post_send(WorkRequest::send(10), 0);
    assert!(sent(&out).is_empty());
    assert_eq!(completions(&out), vec![(1, WcStatus::WrFlushErr)]);
    // Behind an outstanding message it completes in posting order (MR-REQ-1),
    // and the work request after it is flushed, not sent.
    let (s, out) = state(attrs).post_send(WorkRequest::send(10), 0);
    assert_eq!(sent(&out), vec![(0x04, 0)]);
    let (s, out) = s.post_send(WorkRequest::send(5000), 0);
    assert!(completions(&out).is_empty());
    let (s, out) = s.post_send(WorkRequest::send(10), 0);
    assert!(sent(&out).is_empty(), "nothing starts after the failed one");
    let (_, out) = respond(s, &ack(0), 1);
    assert_eq!(
        completions(&out),
        vec![
            (0, WcStatus::Success),
            (1, WcStatus::LocLenErr),
            (2, WcStatus::WrFlushErr)
        ]
    );
    assert!(enters_error(&out));
}

/// MR-REQ-7: a READ or atomic beyond max_rd_atomic waits (and so does
/// everything posted after it).
#[test]
fn mr_req_7_max_rd_atomic() {
    let s = state(RequesterAttrs {
        max_rd_atomic: 2,
        ..rc(1024)
    });
    let (s, a) = s.post_send(WorkRequest::read(100, 0, 1), 0);
    let (s, b) = s.post_send(WorkRequest::read(100, 0, 1), 0);
    let (s, c) = s.post_send(
        WorkRequest::new(
            WrOp::FetchAdd {
                va: 0,
                rkey: 1,
                add: 1,
            },
            8,
        ),
        0,
    );
    let (s, d) = s.post_send(WorkRequest::send(1), 0);
    assert_eq!((sent(&a), sent(&b)), (vec![(0x0C, 0)], vec![(0x0C, 1)]));
    assert!(sent(&c).is_empty() && sent(&d).is_empty());
    assert_eq!(s.outstanding_rdma(), 2);
    let (_, out) = respond(s, &read_resp(Opcode::RC_READ_RESPONSE_ONLY, 0, 100), 5);
    assert_eq!(sent(&out), vec![(0x14, 2), (0x04, 3)]);
    assert_eq!(completions(&out), vec![(0, WcStatus::Success)]);
}

/// MR-REQ-8: a fenced work request waits for earlier READs.
#[test]
fn mr_req_8_fence() {
    let s = state(rc(1024));
    let (s, _) = s.post_send(WorkRequest::read(10, 0, 1), 0);
    let (s, out) = s.post_send(WorkRequest::send(1).fenced(), 0);
    assert!(sent(&out).is_empty());
    let (_, out) = respond(s, &read_resp(Opcode::RC_READ_RESPONSE_ONLY, 0, 10), 1);
    assert_eq!(sent(&out), vec![(0x04, 1)]);
}

/// MR-CRD-3, MR-CRD-4, MR-CRD-5: a requester starts with limit 0 and may
/// send one receive-consuming message beyond its limit (rdmavt); code 31
/// lifts the limit.
#[test]
fn mr_crd_3_credit_limit() {
    let s = state(RequesterAttrs {
        credits: true,
        ..rc(1024)
    });
    let (s, out) = s.post_send(WorkRequest::send(1), 0);
    assert_eq!(sent(&out), vec![(0x04, 0)], "limit 0: message 1 may go");
    let (s, out) = s.post_send(WorkRequest::send(1), 0);
    assert!(
        sent(&out).is_empty(),
        "MR-CRD-3: no ACK yet, message 2 is more than one beyond the limit 0"
    );
    // ACK of message 1, MSN 1, credit code 0: limit 1, message 2 may go.
    let (s, out) = respond(s, &ack_msn(0, 0x00, 1), 1);
    assert_eq!(sent(&out), vec![(0x04, 1)]);
    let (s, out) = s.post_send(WorkRequest::send(1), 2);
    assert!(
        sent(&out).is_empty(),
        "MR-CRD-3: message 3 is more than one beyond the limit 1"
    );
    let (s, out) = respond(s, &ack_msn(1, 0x1F, 2), 3);
    assert_eq!(
        sent(&out),
        vec![(0x04, 2)],
        "MR-CRD-4: code 31 lifts the limit"
    );
    // Without `credits` any code is a plain acknowledgement (MR-CRD-5).
    let t = state(rc(1024));
    let (t, _) = t.post_send(WorkRequest::send(1), 0);
    let (t, _) = respond(t, &ack_msn(0, 0x00, 1), 1);
    let (_, out) = t.post_send(WorkRequest::send(1), 2);
    assert_eq!(sent(&out), vec![(0x04, 1)]);
    drop(s);
}

/// MR-UD-1: UD packets carry DETH (Q_Key, own QPN); MR-UD-10 (a SHOULD):
/// AckReq either value for the model, PSN + 1 each;
/// MR-UD-4, MR-UD-5: an oversize UD message sends nothing and completes with
/// SUCCESS or LOC_LEN_ERR.
#[test]
fn mr_ud_1_4_5_datagrams() {
    let a = RequesterAttrs {
        qp_type: QpType::Ud,
        own_qpn: 0x44,
        ..rc(1024)
    };
    let s = state(a);
    let (s, out) = s.post_send(WorkRequest::send(100).to_ud(0x55, 0x1234), 0);
    let p = &sends(&out)[0];
    assert_eq!(p.opcode, Field::Exact(Opcode::UD_SEND_ONLY));
    assert_eq!(p.dest_qp, Field::Exact(0x55));
    assert_eq!(p.headers.ack_req, Field::Any, "MR-UD-10 is a SHOULD");
    assert_eq!(
        p.headers.deth,
        Field::Exact(metaroce_codec::ext::DethRepr {
            qkey: 0x1234,
            reserved: 0,
            src_qp: 0x44
        })
    );
    assert_eq!(completions(&out), vec![(0, WcStatus::Success)]);
    let (s, out) = s.post_send(WorkRequest::send(1025).to_ud(0x55, 1), 0);
    assert!(sent(&out).is_empty());
    assert_eq!(completions(&out), vec![(1, WcStatus::LocLenErr)]);
    assert_eq!(
        completions(&out.alternatives[0]),
        vec![(1, WcStatus::Success)]
    );
    let (_, out) = s.post_send(WorkRequest::send(1).to_ud(0x55, 1), 0);
    assert_eq!(
        sent(&out),
        vec![(0x64, 1)],
        "MR-UD-10: PSN + 1 per packet (nothing was sent for the oversize one)"
    );
}

/// MR-UC-1: UC opcodes, nothing is retransmitted; MR-UC-4 (a SHOULD): AckReq
/// either value for the model.
#[test]
fn mr_uc_1_no_ack_req_no_retransmission() {
    let s = state(RequesterAttrs {
        qp_type: QpType::Uc,
        ..rc(1024)
    });
    let (s, out) = s.post_send(WorkRequest::write(1500, 0, 1), 0);
    assert_eq!(sent(&out), vec![(0x26, 0), (0x28, 1)]);
    assert!(sends(&out).iter().all(|p| p.headers.ack_req == Field::Any));
    assert_eq!(completions(&out), vec![(0, WcStatus::Success)]);
    let (_, out) = s.on_timer(u64::MAX / 2);
    assert!(out.required.is_empty());
    let _ = Effect::EnterError;
}
