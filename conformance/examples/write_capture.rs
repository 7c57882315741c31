//! Writes a synthetic capture of 4 KiB-payload RC WRITE traffic with its
//! ACKs, as classic pcap (nanoseconds), for the `metaroce check` speed
//! benchmark (`conformance/bench/check_speed.sh`).
//!
//! `QPS` connections (default 8) between 10.0.0.1 and 10.0.0.2, PMTU 4096,
//! interleaved message by message. Each message is 16 packets (64 KiB: WRITE
//! First, 14 Middle, Last with AckReq), answered by one ACK with the
//! responder's MSN, as a conforming responder does; every frame has a valid
//! ICRC and pseudo-random payload. Frames are 100 ns apart. Writing stops at
//! the first message boundary after `BYTES` bytes of file (default 1 GB).
//!
//! With KIND `send256`: small frames instead, where the per-packet cost
//! dominates: RC SEND Only requests of 256 B payload, each with AckReq and
//! answered by an ACK (half the frames are 58-byte ACKs).
//!
//! With KIND `mp256`: the MP profile's small frames: single-packet MP SEND
//! messages of 256 B sprayed over 8 UDP source ports, every second one
//! answered by an MP ACK (cumulative, echoing it) from one of 8 responder
//! ports in turn, for the MP judge's per-ACK cost.
//!
//! `cargo run --release -p metaroce-conformance --example write_capture -- OUT [BYTES] [QPS] [KIND]`

use metaroce_codec::Psn;
use metaroce_codec::ext::{AethRepr, MpethRepr, RethRepr, SackethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, PacketBuilder};
use metaroce_conformance::capture::PcapWriter;
use std::io::BufWriter;
use std::net::Ipv4Addr;

/// Payload bytes per packet (the PMTU).
const PMTU: usize = 4096;
/// Payload bytes of a SEND in the small-frame capture.
const SMALL: usize = 256;
/// Packets per WRITE message.
const PACKETS: u32 = 16;

/// xorshift64: deterministic pseudo-random payload bytes.
fn fill(state: &mut u64, buf: &mut [u8]) {
    for chunk in buf.chunks_mut(8) {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let bytes = state.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

/// Time of the last frame and what was written.
struct Counts {
    ts: u64,
    written: u64,
    frames: u64,
}

impl Counts {
    fn put<W: std::io::Write>(
        &mut self,
        w: &mut PcapWriter<W>,
        frame: &[u8],
    ) -> std::io::Result<()> {
        self.ts += 100;
        self.written += 16 + frame.len() as u64;
        self.frames += 1;
        w.write_packet(self.ts, frame, frame.len() as u32)
    }
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let out = args.next().unwrap_or_else(|| "write.pcap".into());
    let limit: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000_000);
    let qps: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(8).max(1);
    let (small, mp) = match args.next().as_deref() {
        None | Some("write4k") => (false, false),
        Some("send256") => (true, false),
        Some("mp256") => (true, true),
        Some(other) => {
            eprintln!("write_capture: KIND is write4k, send256 or mp256, not {other}");
            std::process::exit(2);
        }
    };
    let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let file = std::fs::File::create(&out)?;
    let mut w = PcapWriter::new(BufWriter::with_capacity(1 << 20, file))?;
    // Per connection: next PSN (starting near the top to cross the wrap) and MSN.
    let mut psn: Vec<u32> = (0..qps).map(|q| 0xFF_F000 + q * 0x100).collect();
    let mut msn: Vec<u32> = vec![0; qps as usize];
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut payload = vec![0u8; if small { SMALL } else { PMTU }];
    let mut c = Counts {
        ts: 1_764_000_000_000_000_000,
        written: 24,
        frames: 0,
    };
    let mut va = 0x10_0000u64;
    'outer: loop {
        for q in 0..qps as usize {
            if c.written >= limit {
                break 'outer;
            }
            let (requester_qpn, responder_qpn) = (0x100 + q as u32, 0x200 + q as u32);
            if mp {
                for _ in 0..2 {
                    fill(&mut rng, &mut payload);
                    let (port, stamp) = (0xC000 + (psn[q] % 8) as u16, (c.ts + 100) as u32);
                    let send = PacketBuilder::new(Opcode::MP_SEND)
                        .ipv4(a, b)
                        .udp_src_port(port)
                        .dest_qp(responder_qpn)
                        .psn(psn[q])
                        .ack_req(true)
                        .payload(payload.clone())
                        .ext(|e| {
                            e.mpeth = Some(MpethRepr {
                                first: true,
                                last: true,
                                msn: Msn::new(msn[q]),
                                msg_len: SMALL as u32,
                                timestamp: stamp,
                                ..MpethRepr::default()
                            })
                        });
                    c.put(&mut w, &send.build())?;
                    msn[q] = (msn[q] + 1) & 0xFF_FFFF;
                    psn[q] = (psn[q] + 1) & 0xFF_FFFF;
                    if psn[q].is_multiple_of(2) {
                        let cum = psn[q].wrapping_sub(1) & 0xFF_FFFF;
                        let ack = PacketBuilder::new(Opcode::MP_ACK)
                            .ipv4(b, a)
                            .udp_src_port(0xD000 + (cum / 2 % 8) as u16)
                            .dest_qp(requester_qpn)
                            .psn(cum)
                            .ext(|e| {
                                e.sacketh = Some(SackethRepr {
                                    syndrome: Syndrome(0x1F),
                                    msn: Msn::new(msn[q].wrapping_sub(1) & 0xFF_FFFF),
                                    sack_base_psn: Psn::new(psn[q]),
                                    echoed_entropy: port,
                                    echoed_timestamp: stamp,
                                    ..SackethRepr::default()
                                })
                            });
                        c.put(&mut w, &ack.build())?;
                    }
                }
                continue;
            }
            if small {
                fill(&mut rng, &mut payload);
                let send = PacketBuilder::new(Opcode::RC_SEND_ONLY)
                    .ipv4(a, b)
                    .udp_src_port(0xC000 + q as u16)
                    .dest_qp(responder_qpn)
                    .psn(psn[q])
                    .ack_req(true)
                    .payload(payload.clone());
                c.put(&mut w, &send.build())?;
                msn[q] = (msn[q] + 1) & 0xFF_FFFF;
                let ack = PacketBuilder::new(Opcode::RC_ACK)
                    .ipv4(b, a)
                    .udp_src_port(0xC000 + q as u16)
                    .dest_qp(requester_qpn)
                    .psn(psn[q])
                    .aeth(AethRepr {
                        syndrome: Syndrome::ACK_UNLIMITED,
                        msn: Msn::new(msn[q]),
                    });
                c.put(&mut w, &ack.build())?;
                psn[q] = (psn[q] + 1) & 0xFF_FFFF;
                continue;
            }
            for i in 0..PACKETS {
                let op = match i {
                    0 => Opcode::RC_WRITE_FIRST,
                    i if i == PACKETS - 1 => Opcode::RC_WRITE_LAST,
                    _ => Opcode::RC_WRITE_MIDDLE,
                };
                fill(&mut rng, &mut payload);
                let mut p = PacketBuilder::new(op)
                    .ipv4(a, b)
                    .udp_src_port(0xC000 + q as u16)
                    .dest_qp(responder_qpn)
                    .psn(psn[q])
                    .ack_req(i == PACKETS - 1)
                    .payload(payload.clone());
                if i == 0 {
                    p = p.ext(|e| {
                        e.reth = Some(RethRepr {
                            va,
                            rkey: 0x1234,
                            dma_len: PACKETS * PMTU as u32,
                        });
                    });
                }
                c.put(&mut w, &p.build())?;
                psn[q] = (psn[q] + 1) & 0xFF_FFFF;
            }
            va = va.wrapping_add(u64::from(PACKETS) * PMTU as u64);
            msn[q] = (msn[q] + 1) & 0xFF_FFFF;
            let ack = PacketBuilder::new(Opcode::RC_ACK)
                .ipv4(b, a)
                .udp_src_port(0xC000 + q as u16)
                .dest_qp(requester_qpn)
                .psn(psn[q].wrapping_sub(1) & 0xFF_FFFF)
                .aeth(AethRepr {
                    syndrome: Syndrome::ACK_UNLIMITED,
                    msn: Msn::new(msn[q]),
                });
            c.put(&mut w, &ack.build())?;
        }
    }
    w.flush()?;
    eprintln!("{out}: {} frames, {} bytes", c.frames, c.written);
    Ok(())
}
