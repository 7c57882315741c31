//! The MP requester's transmit judge on opcodes and MPETH (MR-MPN-3,
//! MR-MPH-1), and MP atomics (MR-MPP-14).

use super::*;

/// A fresh requester with one Fetch-Add posted.
fn posted_fetch_add() -> MpRequester {
    posted_fetch_add_with(cfg())
}

/// [`posted_fetch_add`] with the configuration `c`.
fn posted_fetch_add_with(c: MpConfig) -> MpRequester {
    let r = MpRequester::new(c, 0x22, psn(0));
    r.post_send(SendWr {
        wr: 1,
        op: WrOp::FetchAdd {
            va: 0x2000,
            rkey: 7,
            add: 5,
        },
        fence: false,
        signaled: true,
    })
    .0
}

fn completed(o: &Outcomes, wr: u64) -> bool {
    o.required
        .iter()
        .any(|c| matches!(&c.value, Effect::Complete(c) if c.wr == wr))
}

#[test]
fn only_mp_request_opcodes_mr_mpn_3() {
    let r = MpRequester::new(cfg(), 0x22, psn(0));
    let (r, _) = r.post_send(write_wr(1, 256));
    // Conforming: the MP WRITE the model lists.
    let (_, f, _) = send_next(&r, 0);
    assert!(f.is_empty(), "MR-MPN-3: {f:?}");
    // Violating: an RC-class opcode and a CNP from the MP QP.
    let rc = wire(
        PacketBuilder::new(Opcode::RC_SEND_ONLY)
            .psn(0)
            .dest_qp(0x22)
            .payload(vec![0; 16]),
    );
    assert_eq!(
        ids(&r.on_transmit(&rc.roce(), 0xC000, 0).1),
        vec!["MR-MPN-3"]
    );
    let cnp = wire(PacketBuilder::new(Opcode::CNP).dest_qp(0x22));
    assert_eq!(
        ids(&r.on_transmit(&cnp.roce(), 0xC000, 0).1),
        vec!["MR-MPN-3"]
    );
}

#[test]
fn mpeth_after_bth_mr_mph_1() {
    let r = MpRequester::new(cfg(), 0x22, psn(0));
    let (r, _) = r.post_send(write_wr(1, 256));
    let spec = r.packet_spec(&r.wrs[&1], 0, false, 0);
    let w = wire(build(&r, &spec, 0));
    // Conforming: MPETH directly after BTH.
    let good = w.roce();
    assert!(good.ext.mpeth.is_some());
    assert!(r.on_transmit(&good, 0xC000, 0).1.is_empty(), "MR-MPH-1");
    // Violating: the same MP WRITE without MPETH.
    let mut bad = w.roce();
    bad.ext.mpeth = None;
    assert_eq!(ids(&r.on_transmit(&bad, 0xC000, 0).1), vec!["MR-MPH-1"]);
}

/// An MP Atomic Acknowledge for PSN `p` with original value `orig`.
fn atomic_ack(p: u32, orig: u64) -> Wire {
    wire(
        PacketBuilder::new(Opcode::MP_ATOMIC_ACK)
            .psn(p)
            .dest_qp(0x22)
            .ext(|e| {
                e.sacketh = Some(sack(p, p, 1 << 63, 0xC000, 0));
                e.atomic_ack_eth = Some(metaroce_codec::ext::AtomicAckEthRepr { orig });
            }),
    )
}

#[test]
fn atomic_completes_on_atomic_ack_only_mr_mpp_14() {
    let (r, f, _) = send_next(&posted_fetch_add(), 0);
    assert!(f.is_empty(), "{f:?}");
    // An MP ACK reports PSN 0 received: no completion yet.
    let (r, o) = ack_at(&r, 0, sack(0, 1, 0, 0xC000, 0), 100);
    assert!(!completed(&o, 1), "MR-MPP-14: not on an MP ACK");
    // No Atomic Acknowledge within the RTO of the transmission at 0: the
    // request again, R set.
    let rto = r.rtt.rto(&r.cfg);
    let (r2, o) = r.on_timer(rto - 1);
    assert!(
        required_sends(&o).is_empty(),
        "MR-MPP-14: not before the RTO"
    );
    let (r2, o) = r2.on_timer(rto);
    let s = required_sends(&o);
    assert_eq!(s.len(), 1, "MR-MPP-14: retransmitted after the RTO");
    assert_eq!(s[0].opcode, Field::Exact(Opcode::MP_FETCH_ADD));
    assert_eq!(s[0].psn, Field::Exact(psn(0)));
    assert_eq!(s[0].mpeth.retransmission, Field::Exact(true), "MR-MPP-14");
    // Violating: the retransmission with R clear.
    let no_r = wire(build(&r2, s[0], 5).ext(|e| e.mpeth.as_mut().unwrap().retransmission = false));
    let Field::OneOf(evs) = &s[0].udp_src_port else {
        panic!("entropy set")
    };
    assert!(ids(&r2.on_transmit(&no_r.roce(), evs[0], rto).1).contains(&"MR-MPL-7"));
    // The Atomic Acknowledge completes it, with MR-MPP-14.
    let aa = atomic_ack(0, 42);
    let (r3, o) = r2.on_ack(
        &aa.roce(),
        &ArrivalInfo {
            now_ns: rto + 10,
            ..ArrivalInfo::default()
        },
    );
    assert!(completed(&o, 1), "MR-MPP-14");
    assert!(o.required.iter().any(|c| c.reqs == ["MR-MPP-14"]));
    assert!(r3.wrs.is_empty());
}

#[test]
fn atomic_ack_first_completes_at_once_mr_mpp_14() {
    let (r, _, _) = send_next(&posted_fetch_add(), 0);
    let aa = atomic_ack(0, 7);
    let (r, o) = r.on_ack(
        &aa.roce(),
        &ArrivalInfo {
            now_ns: 100,
            ..ArrivalInfo::default()
        },
    );
    assert!(completed(&o, 1), "MR-MPP-14");
    // Nothing left to retransmit.
    let (_, o) = r.on_timer(100 + 100 * r.rtt.rto(&r.cfg));
    assert!(required_sends(&o).is_empty(), "MR-MPP-14");
}

#[test]
fn atomic_resend_retires_nothing_and_counts_mr_mpf_11_mr_mpl_8() {
    let mut c = cfg();
    c.retry_cnt = 1;
    let r = posted_fetch_add_with(c);
    let (r, _, ev) = send_next(&r, 0);
    let (r, _) = ack_at(&r, 0, sack(0, 1, 0, ev, 0), 100);
    let cwnd = r.cc.cwnd;
    // The first expiry resends it: no retirement, no decrease (MR-MPF-11),
    // one expiry counted (MR-MPL-8).
    let rto = r.rtt.rto(&r.cfg);
    let (r, o) = r.on_timer(rto);
    assert_eq!(required_sends(&o).len(), 1, "MR-MPP-14");
    assert!(r.entropy.retired.is_empty(), "MR-MPF-11: no retirement");
    assert_eq!(r.cc.cwnd, cwnd, "MR-MPF-11: no decrease");
    assert_eq!(r.retries, 1, "MR-MPL-8: the resend is an RTO expiry");
    let (r, _, ev) = send_next(&r, rto);
    // An MP ACK of the copy reports a PSN acknowledged before: no progress.
    let (r, _) = ack_at(&r, 0, sack(0, 1, 0, ev, 0), rto + 100);
    assert_eq!(r.retries, 1, "MR-MPL-8: not an acknowledgement of new PSNs");
    // The next expiry is the second in a row: more than retry_cnt = 1.
    let (r, o) = r.on_timer(rto + 100 * r.rtt.rto(&r.cfg));
    assert!(r.error, "MR-MPL-8");
    assert!(o.required.iter().any(|c| c.reqs == ["MR-MPL-8"]));
}
