//! Frames their receiver drops (`PacketMeta::admitted` false: a bad ICRC,
//! IPv4 header checksum, UDP length, …) are their sender's acts but reach
//! nothing at the receiver: a request does not reach the responder side, an
//! MP ACK does not acknowledge anything to the MP judge.

use super::*;
use crate::model::mp::testutil::{ack as mp_ack, req, wire};
use metaroce_codec::ext::SackethRepr;

/// Judges `(packet, capture time, admitted)` in order, then the end.
fn run_admitted(cfg: ConversationConfig, pkts: &[(Pkt, u64, bool)]) -> Vec<ConversationFinding> {
    let mut j = ConversationJudge::new(cfg);
    let mut all = Vec::new();
    for (i, (p, ts, admitted)) in pkts.iter().enumerate() {
        all.extend(judge_frame(&mut j, p, i as u64 + 1, *ts, 0, *admitted));
    }
    all.extend(j.finish());
    all
}

fn cfg() -> ConversationConfig {
    ConversationConfig {
        pmtu: Some(1024),
        ..ConversationConfig::default()
    }
}

#[test]
fn a_request_its_receiver_drops_is_owed_no_response() {
    // SEND 100 ACKed; SEND 101 with AckReq dropped at the responder; the
    // capture ends 1 ms later (a request to another QP) without an ACK of 101.
    let mut other_qp = request(Opcode::RC_SEND_ONLY, 7, 8, true);
    other_qp.bth.dest_qp = 0x99;
    let p = |admitted| {
        vec![
            (request(Opcode::RC_SEND_ONLY, 100, 8, true), 0, true),
            (ack(100, 0), 1_000, true),
            (request(Opcode::RC_SEND_ONLY, 101, 8, true), 2_000, admitted),
            (other_qp.clone(), 1_000_000, true),
        ]
    };
    let dropped = run_admitted(cfg(), &p(false));
    assert_eq!(ids(&dropped), vec![], "{dropped:#?}");
    // Received, it is owed an ACK (or a NAK): the capture shows none.
    let received = run_admitted(cfg(), &p(true));
    assert_eq!(ids(&received), vec![("MR-ACK-1", 3)]);
}

/// MP SEND at PSN `psn`, A → B QPN 0x12, 256 bytes of a 1024-byte message.
fn mp_data(psn: u32, retx: bool) -> Pkt {
    let b = req(Opcode::MP_SEND, psn, 0, psn * 256, 1024, &[0; 256])
        .dest_qp(0x12)
        .ack_req(retx)
        .ext(|e| {
            if let Some(m) = e.mpeth.as_mut() {
                m.retransmission = retx;
            }
        });
    Pkt::of(&wire(b).0, A, B)
}

#[test]
fn an_mp_ack_its_receiver_drops_acknowledges_nothing() {
    // PSNs 0..=3; the ACK of all four is dropped at the requester; after
    // the RTO (100 µs) PSN 2 is resent: no MR-MPL-6.
    let all = SackethRepr {
        syndrome: Syndrome(0x1F),
        msn: Msn::new(0),
        sack_base_psn: Psn::new(4),
        ..SackethRepr::default()
    };
    let ack = Pkt::of(&wire(mp_ack(3, all)).0, B, A);
    let p = |admitted| {
        let mut p: Vec<(Pkt, u64, bool)> = (0..4)
            .map(|i| (mp_data(i, false), u64::from(i), true))
            .collect();
        p.push((ack.clone(), 10, admitted));
        // The copy carries a new stamp (MR-MPL-7) on the clock that
        // stamped PSN `i` `1000 + i` at `i` ns: built after the ACK.
        let copy = req(Opcode::MP_SEND, 2, 0, 512, 1024, &[0; 256])
            .dest_qp(0x12)
            .ack_req(true)
            .ext(|e| {
                if let Some(m) = e.mpeth.as_mut() {
                    m.retransmission = true;
                    m.timestamp = 201_000;
                }
            });
        p.push((Pkt::of(&wire(copy).0, A, B), 200_000, true));
        p
    };
    let dropped = run_admitted(cfg(), &p(false));
    assert_eq!(ids(&dropped), vec![], "{dropped:#?}");
    let received = run_admitted(cfg(), &p(true));
    assert_eq!(ids(&received), vec![("MR-MPL-6", 6)]);
}
