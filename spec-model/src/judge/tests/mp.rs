//! MP connections in the conversation judge: requests and MP ACKs pair into
//! one connection judged by the MP judge (selective retransmission and SACK
//! consistency), with the frames involved; memory stays bounded.

use super::*;
use crate::model::mp::testutil::{ack as mp_ack, req, wire};
use metaroce_codec::ext::{RethRepr, SackethRepr};

/// An MP SEND packet (256 B of a 2560 B message) at PSN `psn`, A → B QPN 0x12.
fn data(psn: u32, retx: bool) -> Pkt {
    stamped(psn, retx, 1000 + psn)
}

/// [`data`] stamped `ts` (MPETH timestamp): [`data`]'s stamp is its PSN
/// plus 1000, so the requester's clock runs 1000 ns ahead of capture time
/// when PSN `i` is captured at `i` ns; a copy resent at `t` is stamped
/// `1000 + t` (MR-MPL-7: a new timestamp).
fn stamped(psn: u32, retx: bool, ts: u32) -> Pkt {
    let b = req(Opcode::MP_SEND, psn, 0, (psn % 10) * 256, 2560, &[0; 256])
        .dest_qp(0x12)
        .ack_req(retx)
        .ext(|e| {
            if let Some(m) = e.mpeth.as_mut() {
                m.retransmission = retx;
                m.timestamp = ts;
            }
        });
    Pkt::of(&wire(b).0, A, B)
}

/// An MP ACK B → A (QPN 0x22) with cumulative PSN `cum` and SACK bits from
/// `base` on.
fn sack(cum: u32, base: u32, bits: u64) -> Pkt {
    let s = SackethRepr {
        syndrome: Syndrome(0x1F),
        msn: Msn::new(0xFF_FFFF),
        sack_base_psn: Psn::new(base),
        sack_bitmap: bits,
        ..SackethRepr::default()
    };
    Pkt::of(&wire(mp_ack(cum, s)).0, B, A)
}

fn cfg() -> ConversationConfig {
    let mut c = ConversationConfig {
        pmtu: Some(256),
        ..ConversationConfig::default()
    };
    // Written for K = 3, the §10.3 default until 2026-12-01.
    c.mp.reorder_threshold = 3;
    c
}

#[test]
fn selective_retransmission_of_the_missing_psn_conforms() {
    // PSNs 0..5 sent; 0 missing, 1..4 SACKed (4 ≥ K later PSNs acked): only
    // PSN 0 is resent, with R and AckReq ("MR-MPL-6", "MR-MPL-7").
    let mut p: Vec<(Pkt, u64, u8)> = (0..5).map(|i| (data(i, false), u64::from(i), 0)).collect();
    p.push((sack(0xFF_FFFF, 0, 0b1111 << 59), 10, 0));
    p.push((data(0, true), 20, 0));
    p.push((sack(4, 5, 0), 30, 0));
    let (j, f) = run_timed(cfg(), &p);
    assert_eq!(ids(&f), vec![], "{f:#?}");
    let c = j.connections();
    assert_eq!(c.len(), 1);
    assert!(c[0].mp);
    assert_eq!((c[0].requests, c[0].responses), (6, 2));
    assert_eq!(c[0].requester_qpn, Some(0x22));
}

#[test]
fn resending_a_sacked_psn_is_mr_mpl_6_with_both_frames() {
    let mut p: Vec<(Pkt, u64, u8)> = (0..5).map(|i| (data(i, false), u64::from(i), 0)).collect();
    p.push((sack(0xFF_FFFF, 0, 0b1111 << 59), 10, 0));
    p.push((stamped(2, true, 1020), 20, 0));
    let f = run_timed(cfg(), &p).1;
    assert_eq!(ids(&f), vec![("MR-MPL-6", 7)], "{f:#?}");
    // The copy, the ACK that covered PSN 2, the original.
    assert_eq!(f[0].frames, vec![7, 6, 3]);
    assert_eq!(f[0].qpns, vec![0x12, 0x22]);
}

#[test]
fn resending_a_cumulatively_acked_psn_is_caught_after_it_is_forgotten() {
    // "MR-MPL-6": the judge forgets PSNs below the cumulative ACK, and still
    // knows a request carrying one is a retransmission of an acknowledged PSN.
    let mut p: Vec<(Pkt, u64, u8)> = (0..5).map(|i| (data(i, false), u64::from(i), 0)).collect();
    p.push((sack(4, 5, 0), 10, 0));
    let (j, f) = run_timed(cfg(), &p);
    assert_eq!(ids(&f), vec![]);
    assert_eq!(j.pending(), 0, "acknowledged PSNs are forgotten");
    p.push((stamped(1, true, 1020), 20, 0));
    let f = run_timed(cfg(), &p).1;
    assert_eq!(ids(&f), vec![("MR-MPL-6", 7)]);
    assert_eq!(f[0].frames, vec![7, 6]);
}

#[test]
fn an_early_retransmission_is_mr_mpl_4() {
    // Resent 10 ns after the original, nothing later acknowledged.
    let p = [
        (data(0, false), 0, 0),
        (data(1, false), 1, 0),
        (data(0, true), 10, 0),
    ];
    let f = run_timed(cfg(), &p).1;
    assert_eq!(ids(&f), vec![("MR-MPL-4", 3)], "{f:#?}");
    assert_eq!(f[0].frames, vec![3, 1]);
}

#[test]
fn sack_that_unreports_a_psn_is_mr_mpa_5() {
    let mut p: Vec<(Pkt, u64, u8)> = (0..4).map(|i| (data(i, false), u64::from(i), 0)).collect();
    p.push((sack(0xFF_FFFF, 0, 0b0100 << 60), 10, 0)); // PSN 1 received
    p.push((sack(0xFF_FFFF, 0, 0), 11, 0)); // PSN 1 missing again
    let f = run_timed(cfg(), &p).1;
    assert_eq!(ids(&f), vec![("MR-MPA-5", 6)], "{f:#?}");
}

#[test]
fn memory_stays_bounded_over_a_long_stream() {
    // 20,000 PSNs, each acknowledged: the judge keeps what is in flight.
    let mut j = ConversationJudge::new(cfg());
    for i in 0..20_000u32 {
        for (k, q) in [data(i, false), sack(i, i + 1, 0)].iter().enumerate() {
            let f = judge_packet(
                &mut j,
                q,
                u64::from(i) * 2 + k as u64 + 1,
                u64::from(i) * 1000 + k as u64,
                0,
            );
            assert!(f.is_empty(), "{f:#?}");
        }
        assert!(j.pending() <= 1);
    }
}

/// An MP READ Request A → B (QPN 0x12) for `dma` bytes from `offset` of a
/// `len`-byte read, MSN `msn`; R set for a re-request.
fn read_req(psn: u32, msn: u32, offset: u32, len: u32, dma: u32) -> Pkt {
    let b = req(Opcode::MP_READ_REQUEST, psn, msn, offset, len, &[])
        .dest_qp(0x12)
        .ext(|e| {
            e.reth = Some(RethRepr {
                va: 0x1000 + u64::from(offset),
                rkey: 7,
                dma_len: dma,
            });
            if let Some(m) = e.mpeth.as_mut() {
                m.retransmission = offset != 0;
            }
        });
    Pkt::of(&wire(b).0, A, B)
}

/// An MP READ Response B → A (QPN 0x22) at `psn` with `n` bytes from
/// `offset` of a `len`-byte read, MSN `msn`.
fn read_resp(psn: u32, msn: u32, offset: u32, len: u32, n: usize) -> Pkt {
    let b = req(Opcode::MP_READ_RESPONSE, psn, msn, offset, len, &vec![5; n]).dest_qp(0x22);
    Pkt::of(&wire(b).0, B, A)
}

/// The MR-MPR findings, by frame.
fn mpr(pkts: &[Pkt]) -> Vec<(&'static str, u64)> {
    let f = run_with(cfg(), pkts).1;
    ids(&f)
        .into_iter()
        .filter(|(id, _)| id.starts_with("MR-MPR"))
        .collect()
}

#[test]
fn read_responses_out_of_order_conform() {
    // A READ of 600 B at PSN 10 (PMTU 256: PSNs 10, 11, 12), answered out of order.
    let p = [
        read_req(10, 3, 0, 600, 600),
        read_resp(12, 3, 512, 600, 88),
        read_resp(10, 3, 0, 600, 256),
        read_resp(11, 3, 256, 600, 256),
    ];
    assert_eq!(mpr(&p), vec![]);
    let (j, _) = run_with(cfg(), &p);
    assert_eq!(j.connections()[0].unjudged_responses, 0, "all three judged");
}

#[test]
fn read_response_with_a_wrong_psn_or_length_is_mr_mpr_1() {
    let p = [
        read_req(10, 3, 0, 600, 600),
        read_resp(10, 3, 0, 600, 256),
        // Offset 256 belongs at PSN 11.
        read_resp(12, 3, 256, 600, 256),
        read_resp(12, 3, 512, 600, 88),
        // Another read length than the READ's (a wrong payload length is
        // the per-packet validators' MR-MPR-1).
        read_resp(11, 3, 256, 700, 256),
    ];
    assert_eq!(mpr(&p), vec![("MR-MPR-1", 3), ("MR-MPR-1", 5)]);
}

#[test]
fn read_responses_after_a_re_request_are_judged_against_the_read() {
    // Responses for 0 and 512 arrived, 256 is re-requested ([256, 512) at
    // PSN 11, R set) and answered; the late answer to the first request
    // for offset 0 conforms too; a response at the wrong PSN does not.
    let mut p = vec![
        read_req(10, 3, 0, 600, 600),
        read_resp(10, 3, 0, 600, 256),
        read_resp(12, 3, 512, 600, 88),
        read_req(11, 3, 256, 600, 256),
        read_resp(11, 3, 256, 600, 256),
        read_resp(10, 3, 0, 600, 256),
    ];
    assert_eq!(mpr(&p), vec![]);
    p.push(read_resp(12, 3, 256, 600, 256));
    assert_eq!(mpr(&p), vec![("MR-MPR-1", 7)]);
}

#[test]
fn read_response_with_the_msn_of_a_send_answers_no_read() {
    let mut p: Vec<Pkt> = (0..2).map(|i| data(i, false)).collect();
    p.push(read_req(2, 1, 0, 256, 256));
    p.push(read_resp(2, 0, 0, 256, 256));
    // `data` sends MSN 0 (SEND); the READ is MSN 1.
    assert_eq!(mpr(&p), vec![("MR-MPR-1", 4)]);
}
