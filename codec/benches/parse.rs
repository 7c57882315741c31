//! Parse and ICRC throughput of `metaroce-codec`, side by side with
//! `crc32fast` alone and `etherparse`.
//!
//! Run with `cargo bench -p metaroce-codec --bench parse`. One criterion group
//! per RC WRITE ONLY payload size (64 B, 1 KiB, 4 KiB; IPv4, RETH); every
//! benchmark in a group gets the same frame and `Throughput::Bytes` of the
//! whole frame, so the reported throughputs compare directly:
//!
//! - `metaroce full parse + icrc verify`: [`Frame::parse`] then
//!   [`icrc::verify_wire`] (the CRC over the received bytes in place), the
//!   work a receiver or capture checker does per frame.
//! - `metaroce full parse + icrc verify (repr path)`: the same with
//!   [`icrc::verify`], which re-emits the headers from the parsed values (what
//!   a builder-made frame needs); for context.
//! - `crc32fast over frame bytes`: `crc32fast::hash` over the whole frame, the
//!   ceiling for anything that checks a CRC over every byte.
//! - `metaroce header parse only`: [`Frame::parse`] alone (Ethernet, IPv4,
//!   UDP, BTH, RETH decoded into reprs; payload borrowed, no CRC).
//! - `etherparse headers`: `etherparse::SlicedPacket::from_ethernet`, the
//!   comparator for the header-parse target. Like `Frame::parse` it walks
//!   Ethernet (VLAN), IP and UDP, checks every header and length against the
//!   slice and returns a small value borrowing the input (264 bytes; ours is
//!   424). It reads fields lazily, so it does somewhat less work per header
//!   than `Frame::parse`, which decodes every field and also BTH and RETH.
//! - `etherparse PacketHeaders (context)`:
//!   `etherparse::PacketHeaders::from_ethernet_slice` decodes into owned
//!   header structs, but its result is 9.5 KB (fixed-size IPv6 extension
//!   buffers), so its time is dominated by moving that value rather than by
//!   parsing; reported for context, not used for the target.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use metaroce_codec::{Frame, IcrcStatus, Opcode, PacketBuilder, ParseOptions, icrc};

/// Payload sizes measured, in bytes.
const PAYLOADS: [usize; 3] = [64, 1024, 4096];

/// A valid RC WRITE ONLY frame with `payload` bytes of payload.
fn frame_bytes(payload: usize) -> Vec<u8> {
    let data: Vec<u8> = (0..payload).map(|i| (i * 31 + 7) as u8).collect();
    PacketBuilder::new(Opcode::RC_WRITE_ONLY)
        .payload(data)
        .build()
}

fn bench_parse(c: &mut Criterion) {
    let options = ParseOptions::default();
    for payload in PAYLOADS {
        let bytes = frame_bytes(payload);
        // Sanity: the frame parses, is RoCE, and its ICRC is valid; etherparse accepts it.
        let frame = Frame::parse(&bytes, &options).expect("builder frame parses");
        assert_eq!(icrc::verify(&frame), IcrcStatus::Valid);
        assert_eq!(icrc::verify_wire(&frame, &bytes), IcrcStatus::Valid);
        assert!(etherparse::SlicedPacket::from_ethernet(&bytes).is_ok());
        assert!(etherparse::PacketHeaders::from_ethernet_slice(&bytes).is_ok());

        let mut group = c.benchmark_group(format!("parse/{payload}B payload"));
        group.throughput(Throughput::Bytes(bytes.len() as u64));

        group.bench_function("metaroce full parse + icrc verify", |b| {
            b.iter(|| {
                let wire = black_box(&bytes[..]);
                match Frame::parse(wire, black_box(&options)) {
                    Ok(frame) => icrc::verify_wire(&frame, wire),
                    Err(_) => IcrcStatus::NotRoce,
                }
            })
        });
        group.bench_function("metaroce full parse + icrc verify (repr path)", |b| {
            b.iter(
                || match Frame::parse(black_box(&bytes), black_box(&options)) {
                    Ok(frame) => icrc::verify(&frame),
                    Err(_) => IcrcStatus::NotRoce,
                },
            )
        });
        group.bench_function("crc32fast over frame bytes", |b| {
            b.iter(|| crc32fast::hash(black_box(&bytes)))
        });
        group.bench_function("metaroce header parse only", |b| {
            b.iter(|| Frame::parse(black_box(&bytes), black_box(&options)))
        });
        group.bench_function("etherparse headers", |b| {
            b.iter(|| etherparse::SlicedPacket::from_ethernet(black_box(&bytes)))
        });
        group.bench_function("etherparse PacketHeaders (context)", |b| {
            b.iter(|| etherparse::PacketHeaders::from_ethernet_slice(black_box(&bytes)))
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench_parse
}
criterion_main!(benches);
