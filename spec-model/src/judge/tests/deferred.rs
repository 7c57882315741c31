//! Deferred failure branches (`expect.rs`): a request's RNR NAK, NAK and
//! drop branches are built only when something depends on them. The
//! findings must be those of building every branch at once, whatever the
//! responses: here over every combination of eight answers to three SEND
//! or WRITE Only requests, answered one by one or pipelined, with and
//! without AckReq, with and without loss.

use super::*;
use crate::judge::expect::EAGER;

/// The findings for `pkts` with deferral and with every branch built at once.
fn both(
    cfg: &ConversationConfig,
    pkts: &[Pkt],
) -> (Vec<ConversationFinding>, Vec<ConversationFinding>) {
    EAGER.with(|e| e.set(false));
    let deferred = run_with(cfg.clone(), pkts).1;
    EAGER.with(|e| e.set(true));
    let eager = run_with(cfg.clone(), pkts).1;
    EAGER.with(|e| e.set(false));
    (deferred, eager)
}

/// What the responder may send back for request `i` (PSN 100 + i): ACK,
/// ACK with a wrong MSN, RNR NAK, NAK 0x61 (MR-RSP-8), NAK 0x62, NAK 0x63
/// (MR-RSP-9), sequence NAK, nothing.
fn answer(kind: u32, i: u32) -> Option<Pkt> {
    let psn = 100 + i;
    let syndrome = match kind {
        0 => return Some(ack(psn, i + 1)),
        1 => return Some(ack(psn, 50)),
        2 => 0x2D,
        3 => 0x61,
        4 => 0x62,
        5 => 0x63,
        6 => 0x60,
        _ => return None,
    };
    Some(response(Opcode::RC_ACK, psn, Some(syndrome), i, 0))
}

fn req(write: bool, psn: u32, ack_req: bool) -> Pkt {
    if !write {
        return request(Opcode::RC_SEND_ONLY, psn, 8, ack_req);
    }
    let mut p = request(Opcode::RC_WRITE_ONLY, psn, 8, ack_req);
    p.ext.reth = Some(RethRepr {
        va: 0x1000,
        rkey: 7,
        dma_len: 8,
    });
    p
}

#[test]
fn deferred_branches_give_the_findings_of_eager_ones() {
    let cfgs = [
        ConversationConfig {
            pmtu: Some(1024),
            ..ConversationConfig::default()
        },
        lossy(),
    ];
    let mut found = 0;
    for answers in 0..8u32.pow(3) {
        let kinds = [answers % 8, answers / 8 % 8, answers / 64];
        for shape in 0..8u32 {
            let (pipelined, write, no_ack_req) = (shape & 1 != 0, shape & 2 != 0, shape & 4 != 0);
            let mut pkts = Vec::new();
            let mut later = Vec::new();
            for (i, &kind) in (0u32..).zip(&kinds) {
                // The middle request without AckReq: its ACK may be coalesced.
                pkts.push(req(write && i != 1, 100 + i, !(no_ack_req && i == 1)));
                let a = answer(kind, i);
                if pipelined {
                    later.extend(a);
                } else {
                    pkts.extend(a);
                }
            }
            pkts.extend(later);
            for cfg in &cfgs {
                let (deferred, eager) = both(cfg, &pkts);
                found += eager.len();
                assert_eq!(
                    deferred, eager,
                    "answers {kinds:?}, shape {shape}, lossy {}",
                    cfg.lossy
                );
            }
        }
    }
    // The combinations are not all conforming: the comparison covers findings.
    assert!(found > 1000, "{found} findings");
}
