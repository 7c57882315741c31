//! `vectors/captures/sample.pcapng`: a short, commented capture of every kind
//! of packet (README's main command decodes it). This test rebuilds it and
//! fails if the committed file is stale; `METAROCE_BLESS=1` rewrites it.

use metaroce_codec::ext::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, DethRepr, ImmDtRepr, MpethRepr, RethRepr,
    SackethRepr, Syndrome,
};
use metaroce_codec::{Msn, Opcode, PacketBuilder, Psn, VlanTag};
use metaroce_conformance::capture::PcapNgWriter;
use std::path::PathBuf;

const A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0A];
const B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0B];
const QP_A: u32 = 0x000011;
const QP_B: u32 = 0x000012;
const PMTU: usize = 256;

/// A → B request.
fn req(op: Opcode, psn: u32) -> PacketBuilder {
    PacketBuilder::new(op)
        .macs(A, B)
        .dest_qp(QP_B)
        .psn(psn)
        .udp_src_port(0xC011)
}

/// B → A response.
fn resp(op: Opcode, psn: u32, syndrome: u8, msn: u32) -> PacketBuilder {
    PacketBuilder::new(op)
        .macs(B, A)
        .ipv4("10.0.0.2".parse().unwrap(), "10.0.0.1".parse().unwrap())
        .dest_qp(QP_A)
        .psn(psn)
        .udp_src_port(0xC012)
        .ext(|e| {
            if let Some(aeth) = &mut e.aeth {
                *aeth = AethRepr {
                    syndrome: Syndrome(syndrome),
                    msn: Msn::new(msn),
                };
            }
        })
}

fn reth(va: u64, len: u32) -> impl FnOnce(&mut metaroce_codec::ExtHeaders) {
    move |e| {
        e.reth = Some(RethRepr {
            va,
            rkey: 0x0000_1234,
            dma_len: len,
        })
    }
}

fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
}

fn atomic(va: u64, swap_add: u64, compare: u64) -> impl FnOnce(&mut metaroce_codec::ExtHeaders) {
    move |e| {
        e.atomic_eth = Some(AtomicEthRepr {
            va,
            rkey: 0x1234,
            swap_add,
            compare,
        })
    }
}

fn original(orig: u64) -> impl FnOnce(&mut metaroce_codec::ExtHeaders) {
    move |e| e.atomic_ack_eth = Some(AtomicAckEthRepr { orig })
}

/// The frames and their comments, in capture order.
fn frames() -> Vec<(Vec<u8>, &'static str)> {
    let write = data(600, 0x40);
    let mut f = vec![
        (
            req(Opcode::RC_SEND_ONLY, 100)
                .ack_req(true)
                .payload(*b"hello, MetaRoCE")
                .build(),
            "RC SEND Only, 15 bytes + 1 pad, AckReq",
        ),
        (
            resp(Opcode::RC_ACK, 100, 0x1F, 1).build(),
            "ACK PSN 100, MSN 1",
        ),
        (
            req(Opcode::RC_WRITE_FIRST, 101)
                .ext(reth(0x1000, 600))
                .payload(&write[..PMTU])
                .build(),
            "RDMA WRITE First (PMTU 256), RETH va 0x1000 len 600",
        ),
        (
            req(Opcode::RC_WRITE_MIDDLE, 102)
                .payload(&write[PMTU..2 * PMTU])
                .build(),
            "RDMA WRITE Middle",
        ),
        (
            req(Opcode::RC_WRITE_LAST, 103)
                .ack_req(true)
                .payload(&write[2 * PMTU..])
                .build(),
            "RDMA WRITE Last, 88 bytes, AckReq",
        ),
        (
            resp(Opcode::RC_ACK, 103, 0x1F, 2).build(),
            "ACK PSN 103, MSN 2",
        ),
        (
            req(Opcode::RC_READ_REQUEST, 104)
                .ext(reth(0x2000, 300))
                .build(),
            "RDMA READ Request, 300 bytes: reserves PSNs 104-105",
        ),
        (
            resp(Opcode::RC_READ_RESPONSE_FIRST, 104, 0x1F, 3)
                .payload(data(PMTU, 0x80))
                .build(),
            "READ Response First, AETH MSN 3",
        ),
        (
            resp(Opcode::RC_READ_RESPONSE_LAST, 105, 0x1F, 3)
                .payload(data(44, 0x80))
                .build(),
            "READ Response Last, 44 bytes",
        ),
        (
            req(Opcode::RC_CMP_SWAP, 106)
                .ack_req(true)
                .ext(atomic(0x3000, 7, 0))
                .build(),
            "Compare & Swap at 0x3000: 0 -> 7",
        ),
        (
            resp(Opcode::RC_ATOMIC_ACK, 106, 0x1F, 4)
                .ext(original(0))
                .build(),
            "Atomic ACK, original 0",
        ),
        (
            req(Opcode::RC_FETCH_ADD, 107)
                .ack_req(true)
                .ext(atomic(0x3000, 5, 0))
                .build(),
            "Fetch & Add 5 at 0x3000",
        ),
        (
            resp(Opcode::RC_ATOMIC_ACK, 107, 0x1F, 5)
                .ext(original(7))
                .build(),
            "Atomic ACK, original 7",
        ),
        (
            req(Opcode::RC_SEND_ONLY, 110)
                .ack_req(true)
                .payload(*b"gap")
                .build(),
            "SEND with PSN 110: 108-109 missing",
        ),
        (
            resp(Opcode::RC_ACK, 108, 0x60, 5).build(),
            "NAK PSN sequence error, expected PSN 108",
        ),
        (
            req(Opcode::RC_SEND_ONLY, 108)
                .ack_req(true)
                .payload(*b"late")
                .build(),
            "SEND PSN 108 (go-back-N resend)",
        ),
        (
            resp(Opcode::RC_ACK, 108, 0x2E, 5).build(),
            "RNR NAK, timer code 14 (1.28 ms)",
        ),
        (
            PacketBuilder::new(Opcode::UD_SEND_ONLY_IMM)
                .macs(A, B)
                .vlan(VlanTag::dot1q(3, 100))
                .ipv6(
                    "2001:db8::a".parse().unwrap(),
                    "2001:db8::b".parse().unwrap(),
                )
                .flow_label(0xC0FFE)
                .traffic_class(0x62)
                .dest_qp(0x000200)
                .deth(DethRepr {
                    qkey: 0x1111_1111,
                    reserved: 0,
                    src_qp: 0x000201,
                })
                .ext(|e| e.immdt = Some(ImmDtRepr { value: 0xFEED_F00D }))
                .payload(data(37, 1))
                .build(),
            "UD SEND Only with Immediate over IPv6 and VLAN 100 (PCP 3)",
        ),
        (
            PacketBuilder::new(Opcode::CNP)
                .macs(B, A)
                .ipv4("10.0.0.2".parse().unwrap(), "10.0.0.1".parse().unwrap())
                .traffic_class(0xC2)
                .udp_src_port(0)
                .dest_qp(QP_A)
                .build(),
            "CNP to QP 0x11 (BECN set), as a ConnectX NIC sends it",
        ),
    ];
    for (i, (offset, last)) in [(0u32, false), (1024, true)].into_iter().enumerate() {
        let mp = req(Opcode::MP_WRITE, 200 + i as u32)
            .udp_src_port(0xC100 + 7 * i as u16)
            .ack_req(last)
            .traffic_class(0x02)
            .ext(|e| {
                e.mpeth = Some(MpethRepr {
                    first: offset == 0,
                    last,
                    msn: Msn::new(9),
                    offset,
                    msg_len: 1100,
                    timestamp: 1_000 + offset,
                    ..MpethRepr::default()
                });
                e.reth = Some(RethRepr {
                    va: 0x8000,
                    rkey: 0x1234,
                    dma_len: 1100,
                });
            })
            .payload(data(if last { 76 } else { 1024 }, 9))
            .build();
        let comment = if last {
            "MP WRITE, last packet, sprayed on entropy 0xC107"
        } else {
            "MP WRITE, first packet, entropy 0xC100"
        };
        f.push((mp, comment));
    }
    let sack = SackethRepr {
        syndrome: Syndrome::ACK_UNLIMITED,
        msn: Msn::new(9),
        sack_base_psn: Psn::new(202),
        echoed_entropy: 0xC107,
        echoed_timestamp: 2024,
        ..SackethRepr::default()
    };
    f.push((
        resp(Opcode::MP_ACK, 201, 0x1F, 9)
            .ext(|e| e.sacketh = Some(sack))
            .build(),
        "MP ACK: cumulative PSN 201, MSN 9, echoes entropy 0xC107",
    ));
    f.push((
        req(Opcode::RC_SEND_ONLY, 111)
            .ack_req(true)
            .payload(*b"bad icrc")
            .corrupt_icrc()
            .build(),
        "SEND with a corrupted ICRC: a receiver drops it silently",
    ));
    f.push((
        req(Opcode::RC_SEND_ONLY, 112)
            .ack_req(true)
            .payload(*b"xy")
            .pad_count(3)
            .pad_bytes(vec![])
            .build(),
        "SEND whose PadCnt (3) exceeds its payload: does not decode",
    ));
    f
}

fn capture_bytes() -> Vec<u8> {
    let mut out = PcapNgWriter::new(Vec::new()).unwrap();
    let start_ns = 1_764_000_000_000_000_000u64;
    for (i, (bytes, comment)) in frames().into_iter().enumerate() {
        let t = start_ns + 1_000 * i as u64;
        out.write_packet(t, &bytes, bytes.len() as u32, Some(comment))
            .unwrap();
    }
    out.into_inner()
}

#[test]
fn committed_sample_capture_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../vectors/captures/sample.pcapng");
    let fresh = capture_bytes();
    if std::env::var("METAROCE_BLESS").as_deref() == Ok("1") {
        std::fs::write(&path, &fresh).unwrap();
    }
    let committed = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with METAROCE_BLESS=1 to create it)",
            path.display()
        )
    });
    assert!(
        committed == fresh,
        "{} is stale: rerun with METAROCE_BLESS=1 and commit it",
        path.display()
    );
}
