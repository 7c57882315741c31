//! Writes a synthetic RC conversation of N frames (default 200,000) as
//! pcapng, for measuring `metaroce check`: 10.0.0.1 sends pipelined
//! 3-packet RDMA WRITEs (PMTU 1024) and 2-packet READs to 10.0.0.2, which
//! answers each WRITE with an ACK and each READ with its responses, as a
//! conforming responder does.
//!
//! `cargo run --release -p metaroce-conformance --example conversation_capture -- OUT [N]`

use metaroce_codec::ext::{AethRepr, RethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, PacketBuilder};
use metaroce_conformance::capture::PcapNgWriter;
use std::net::Ipv4Addr;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let out = args.next().unwrap_or_else(|| "conversation.pcapng".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let req = |op: Opcode, psn: u32| {
        PacketBuilder::new(op)
            .ipv4(a, b)
            .dest_qp(0x12)
            .psn(psn & 0xFF_FFFF)
    };
    let resp = |op: Opcode, psn: u32, msn: u32, aeth: bool| {
        let p = PacketBuilder::new(op)
            .ipv4(b, a)
            .dest_qp(0x11)
            .psn(psn & 0xFF_FFFF);
        if aeth {
            p.aeth(AethRepr {
                syndrome: Syndrome::ACK_UNLIMITED,
                msn: Msn::new(msn),
            })
        } else {
            p
        }
    };
    let reth = |len| RethRepr {
        va: 0x10_0000,
        rkey: 7,
        dma_len: len,
    };
    let mut frames: Vec<Vec<u8>> = Vec::with_capacity(n + 8);
    let (mut psn, mut msn) = (0xFF_FF00u32, 0u32); // wraps the PSN space
    while frames.len() < n {
        // Four WRITEs in flight, then their ACKs; then a READ.
        let start = psn;
        for _ in 0..4 {
            frames.push(
                req(Opcode::RC_WRITE_FIRST, psn)
                    .ext(|e| e.reth = Some(reth(2500)))
                    .payload(vec![1; 1024])
                    .build(),
            );
            frames.push(
                req(Opcode::RC_WRITE_MIDDLE, psn + 1)
                    .payload(vec![2; 1024])
                    .build(),
            );
            frames.push(
                req(Opcode::RC_WRITE_LAST, psn + 2)
                    .ack_req(true)
                    .payload(vec![3; 452])
                    .build(),
            );
            psn += 3;
        }
        for i in 0..4 {
            msn += 1;
            frames.push(resp(Opcode::RC_ACK, start + 3 * i + 2, msn, true).build());
        }
        frames.push(
            req(Opcode::RC_READ_REQUEST, psn)
                .ack_req(true)
                .ext(|e| e.reth = Some(reth(2000)))
                .build(),
        );
        msn += 1;
        frames.push(
            resp(Opcode::RC_READ_RESPONSE_FIRST, psn, msn, true)
                .payload(vec![4; 1024])
                .build(),
        );
        frames.push(
            resp(Opcode::RC_READ_RESPONSE_LAST, psn + 1, msn, true)
                .payload(vec![5; 976])
                .build(),
        );
        psn += 2;
    }
    frames.truncate(n);
    let mut w = PcapNgWriter::new(std::io::BufWriter::new(std::fs::File::create(&out)?))?;
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(1_000 * i as u64, f, f.len() as u32, None)?;
    }
    w.into_inner();
    Ok(())
}
