//! The shadow memory: a READ response or an atomic's original value that
//! contradicts what earlier frames proved is information naming both
//! frames; agreeing traffic, retransmissions, header-only frames and bytes
//! over the budget give nothing.

use super::*;
use metaroce_codec::ext::{AtomicAckEthRepr, AtomicEthRepr};

fn shadow_cfg(bytes: usize) -> ConversationConfig {
    ConversationConfig {
        pmtu: Some(1024),
        shadow_bytes: bytes,
        ..ConversationConfig::default()
    }
}

fn write(opcode: Opcode, psn: u32, reth: Option<(u64, u32)>, data: Vec<u8>) -> Pkt {
    let mut p = request(opcode, psn, 0, true);
    p.payload = data;
    p.ext.reth = reth.map(|(va, len)| RethRepr {
        va,
        rkey: 7,
        dma_len: len,
    });
    p
}

fn read_at(psn: u32, va: u64, len: u32) -> Pkt {
    let mut p = read(psn, len);
    if let Some(r) = p.ext.reth.as_mut() {
        r.va = va;
    }
    p
}

fn read_only(psn: u32, msn: u32, data: Vec<u8>) -> Pkt {
    let mut p = response(Opcode::RC_READ_RESPONSE_ONLY, psn, Some(0x1F), msn, 0);
    p.payload = data;
    p
}

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| seed.wrapping_add(i as u8)).collect()
}

fn infos(f: &[ConversationFinding], id: &str) -> Vec<Vec<u64>> {
    f.iter()
        .filter(|f| f.finding.id == id && f.finding.severity == crate::Severity::Info)
        .map(|f| f.frames.clone())
        .collect()
}

#[test]
fn a_read_that_returns_other_bytes_than_were_written_is_information() {
    let written = bytes(64, 1);
    let mut changed = written.clone();
    changed[10] ^= 0xFF;
    let pkts = |back: Vec<u8>| {
        vec![
            write(
                Opcode::RC_WRITE_ONLY,
                0,
                Some((0x1000, 64)),
                written.clone(),
            ),
            ack(0, 1),
            read_at(1, 0x1000, 64),
            read_only(1, 2, back),
        ]
    };
    let (_, f) = run_with(shadow_cfg(1 << 20), &pkts(written.clone()));
    assert_eq!(infos(&f, "MR-READ-6"), Vec::<Vec<u64>>::new(), "{f:?}");
    let (j, f) = run_with(shadow_cfg(1 << 20), &pkts(changed.clone()));
    // The READ response (frame 4) and the WRITE that proved the byte (1).
    assert_eq!(infos(&f, "MR-READ-6"), vec![vec![4, 1]], "{f:?}");
    assert!(
        f.iter()
            .all(|f| f.finding.severity != crate::Severity::Must)
    );
    assert!(j.notes().iter().any(|n| n.starts_with("shadow memory: 1 ")));
    // Off by default.
    assert_eq!(
        infos(&run(&pkts(changed)), "MR-READ-6"),
        Vec::<Vec<u64>>::new()
    );
}

#[test]
fn multi_packet_writes_and_reads_are_placed_by_psn() {
    // A 1500-byte WRITE (First 1024 + Last 476), then a READ of 100 bytes
    // at offset 1100 (inside the Last), then a READ of 2048 bytes whose
    // Last response (PSN offset 1, bytes 1024..2048) differs at offset 1030.
    let data = bytes(1500, 3);
    let mut second = vec![0; 1024];
    second[..476].copy_from_slice(&data[1024..]);
    let mut wrong = second.clone();
    wrong[6] ^= 1;
    let pkts = |last: Vec<u8>| {
        vec![
            write(
                Opcode::RC_WRITE_FIRST,
                0,
                Some((0x2000, 1500)),
                data[..1024].to_vec(),
            ),
            write(Opcode::RC_WRITE_LAST, 1, None, data[1024..].to_vec()),
            ack(1, 1),
            read_at(2, 0x2000 + 1100, 100),
            read_only(2, 2, data[1100..1200].to_vec()),
            read_at(3, 0x2000, 2048),
            {
                let mut p = response(Opcode::RC_READ_RESPONSE_FIRST, 3, Some(0x1F), 3, 0);
                p.payload = data[..1024].to_vec();
                p
            },
            {
                let mut p = response(Opcode::RC_READ_RESPONSE_LAST, 4, Some(0x1F), 3, 0);
                p.payload = last;
                p
            },
        ]
    };
    let (_, f) = run_with(shadow_cfg(1 << 20), &pkts(second));
    assert_eq!(infos(&f, "MR-READ-6"), Vec::<Vec<u64>>::new(), "{f:?}");
    let (_, f) = run_with(shadow_cfg(1 << 20), &pkts(wrong));
    // The Last response (frame 8); byte 1030 was proven by the WRITE Last (2).
    assert_eq!(infos(&f, "MR-READ-6"), vec![vec![8, 2]], "{f:?}");
    assert!(f[0].finding.message.contains("VA 0x2406"), "{f:?}");
}

fn fetch_add(psn: u32, add: u64) -> Pkt {
    let mut p = request(Opcode::RC_FETCH_ADD, psn, 0, true);
    p.ext.atomic_eth = Some(AtomicEthRepr {
        va: 0x3000,
        rkey: 7,
        swap_add: add,
        compare: 0,
    });
    p
}

fn atomic_ack(psn: u32, msn: u32, orig: u64) -> Pkt {
    let mut p = response(Opcode::RC_ATOMIC_ACK, psn, Some(0x1F), msn, 0);
    p.ext.atomic_ack_eth = Some(AtomicAckEthRepr { orig });
    p
}

#[test]
fn an_atomic_original_value_is_held_to_the_previous_atomic_result() {
    let pkts = |second_orig| {
        vec![
            fetch_add(0, 5),
            // Resent before its answer came, answered again from the
            // responder's saved result.
            fetch_add(0, 5),
            atomic_ack(0, 1, 10),
            atomic_ack(0, 1, 10),
            fetch_add(1, 1),
            atomic_ack(1, 2, second_orig),
        ]
    };
    let (_, f) = run_with(shadow_cfg(1 << 20), &pkts(15));
    assert_eq!(f, vec![]);
    let (_, f) = run_with(shadow_cfg(1 << 20), &pkts(99));
    assert_eq!(infos(&f, "MR-ATOM-4"), vec![vec![6, 3]], "{f:?}");
    // A WRITE over the target in between: its value is unknown again.
    let mut p = pkts(99);
    p.insert(
        4,
        write(Opcode::RC_WRITE_ONLY, 1, Some((0x3004, 8)), bytes(8, 0)),
    );
    for q in p.iter_mut().skip(5) {
        q.bth.psn = q.bth.psn.add(1);
    }
    let (_, f) = run_with(shadow_cfg(1 << 20), &p);
    assert_eq!(infos(&f, "MR-ATOM-4"), Vec::<Vec<u64>>::new(), "{f:?}");
}

#[test]
fn bytes_over_the_budget_are_counted_and_forget_what_they_overwrite() {
    // 32 bytes of budget: the first 16-byte WRITE is kept, the 64-byte one
    // over it is not, and forgets it; the READ then proves nothing wrong.
    let pkts = vec![
        write(Opcode::RC_WRITE_ONLY, 0, Some((0x1000, 16)), bytes(16, 1)),
        write(Opcode::RC_WRITE_ONLY, 1, Some((0x1000, 64)), bytes(64, 100)),
        ack(1, 2),
        read_at(2, 0x1000, 16),
        read_only(2, 3, bytes(16, 200)),
    ];
    let (j, f) = run_with(shadow_cfg(32), &pkts);
    assert_eq!(infos(&f, "MR-READ-6"), Vec::<Vec<u64>>::new(), "{f:?}");
    // The READ response's 16 bytes are kept; the 64 were not.
    assert_eq!(j.shadow_bytes(), (16, 64));
}

#[test]
fn header_only_frames_prove_nothing() {
    let written = bytes(64, 1);
    let pkts = [
        write(Opcode::RC_WRITE_ONLY, 0, Some((0x1000, 64)), written),
        ack(0, 1),
        read_at(1, 0x1000, 64),
        read_only(1, 2, bytes(64, 9)),
    ];
    let mut j = ConversationJudge::new(shadow_cfg(1 << 20));
    let mut f = Vec::new();
    for (i, p) in pkts.iter().enumerate() {
        let meta = PacketMeta {
            frame: i as u64 + 1,
            timestamp_ns: i as u64 * 1000,
            src: p.src,
            dst: p.dst,
            udp_src_port: p.udp_src_port,
            ecn: 0,
            dscp: 0,
            icrc_valid: true,
            admitted: true,
            payload_len: Some(p.payload.len()),
        };
        let pkt = RocePacket {
            bth: p.bth,
            ext: p.ext,
            payload: &[],
            pad: &[],
            icrc: [0; 4],
        };
        f.extend(j.on_packet(&meta, &pkt));
    }
    f.extend(j.finish());
    assert_eq!(infos(&f, "MR-READ-6"), Vec::<Vec<u64>>::new(), "{f:?}");
    assert_eq!(j.shadow_bytes(), (0, 0));
}
