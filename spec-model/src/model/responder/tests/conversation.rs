//! A scripted RC conversation, snapshotted outcome by outcome.

use super::*;

#[test]
fn scripted_conversation_snapshot() {
    let p = PMTU as usize;
    let script: Vec<(&str, PacketBuilder)> = vec![
        (
            "SEND Only",
            req(Opcode::RC_SEND_ONLY, 0)
                .ack_req(true)
                .payload(*b"hello"),
        ),
        (
            "WRITE First",
            reth(req(Opcode::RC_WRITE_FIRST, 1), VA, RKEY, 2 * PMTU + 4).payload(vec![0xAA; p]),
        ),
        (
            "WRITE Middle",
            req(Opcode::RC_WRITE_MIDDLE, 2).payload(vec![0xBB; p]),
        ),
        (
            "WRITE Last",
            req(Opcode::RC_WRITE_LAST, 3)
                .ack_req(true)
                .payload(*b"tail"),
        ),
        (
            "READ 3 packets",
            reth(
                req(Opcode::RC_READ_REQUEST, 4),
                VA + 1024,
                RKEY,
                2 * PMTU + 16,
            ),
        ),
        (
            "CmpSwap",
            atomic(
                req(Opcode::RC_CMP_SWAP, 7),
                VA + 2048,
                0x55,
                0x0706_0504_0302_0100,
            ),
        ),
        (
            "FetchAdd",
            atomic(req(Opcode::RC_FETCH_ADD, 8), VA + 2048, 1, 0),
        ),
        (
            "duplicate READ from PSN 5",
            reth(
                req(Opcode::RC_READ_REQUEST, 5),
                VA + 1024 + u64::from(PMTU),
                RKEY,
                PMTU + 16,
            ),
        ),
        ("ahead PSN 12", req(Opcode::RC_SEND_ONLY, 12).ack_req(true)),
        ("ahead PSN 13", req(Opcode::RC_SEND_ONLY, 13).ack_req(true)),
        (
            "duplicate SEND Only PSN 0",
            req(Opcode::RC_SEND_ONLY, 0)
                .ack_req(true)
                .payload(*b"hello"),
        ),
        (
            "SEND Only PSN 9",
            req(Opcode::RC_SEND_ONLY, 9)
                .ack_req(true)
                .payload(*b"again"),
        ),
    ];
    let mut st = rc(0, 2);
    let mut log = String::new();
    for (name, b) in script {
        let (next, o) = run(&st, &b);
        let _ = writeln!(
            log,
            "{name} (psn {}): -> ePSN {} MSN {:?} {:?}",
            b.frame().roce.unwrap().bth.psn,
            next.epsn,
            next.msn,
            next.qp_state
        );
        log.push_str(&render(&o, "  "));
        st = next;
    }
    insta::assert_snapshot!(log);
}
