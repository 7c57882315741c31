//! Closing connections: memory bounded by the connections alive, not by the
//! capture's length. An idle connection is closed (what it owed reported),
//! and with MAX_CONNECTIONS open the least recently active one makes room.

use super::*;

const S: u64 = 1_000_000_000;

#[test]
fn an_idle_connection_is_closed_and_its_missing_ack_reported() {
    // QPN 0x12's SEND is never acknowledged; 11 s later (idle time 10 s)
    // another connection's packet closes it.
    let mut other = request(Opcode::RC_SEND_ONLY, 500, 8, true);
    other.bth.dest_qp = 0x40;
    let p = [
        (request(Opcode::RC_SEND_ONLY, 100, 8, true), 0, 0),
        (other, 11 * S, 0),
    ];
    let cfg = ConversationConfig {
        pmtu: Some(1024),
        ack_delay_ns: 1_000,
        ..ConversationConfig::default()
    };
    let (j, f) = run_timed(cfg, &p);
    assert_eq!(ids(&f), vec![("MR-ACK-1", 1)], "{f:#?}");
    assert_eq!(f[0].qpns, vec![0x12]);
    assert_eq!(j.open_connections(), 1);
    assert_eq!(j.evicted(), (1, 0));
    let c = j.connections();
    assert_eq!(c.len(), 2);
    assert!(c[0].evicted && !c[1].evicted);
    assert_eq!((c[0].first_frame, c[0].last_frame), (1, 1));
}

#[test]
fn the_table_of_open_connections_is_bounded() {
    // MAX_CONNECTIONS + 10 connections, each a SEND and its ACK.
    let mut j = ConversationJudge::new(ConversationConfig {
        pmtu: Some(1024),
        ..ConversationConfig::default()
    });
    let n = MAX_CONNECTIONS as u32 + 10;
    for i in 0..n {
        let mut req = request(Opcode::RC_SEND_ONLY, 100, 8, true);
        req.bth.dest_qp = 0x1000 + i;
        let mut a = ack(100, 1);
        a.bth.dest_qp = 0x10_0000 + i;
        for (k, q) in [req, a].iter().enumerate() {
            let f = judge_packet(
                &mut j,
                q,
                u64::from(i) * 2 + k as u64 + 1,
                u64::from(i) * 1000 + k as u64,
                0,
            );
            assert!(f.is_empty(), "connection {i}: {f:#?}");
        }
        assert!(j.open_connections() <= MAX_CONNECTIONS);
    }
    assert_eq!(j.evicted(), (10, 0));
    assert_eq!(j.connections().len(), n as usize);
    assert!(j.finish().is_empty());
}
