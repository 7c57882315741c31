//! Set-up shared by the mutant scenarios: devices that run a mutant or not,
//! connected Base and MP QP pairs, frames decoded for their fields, and
//! frames built by hand (A → B) with the codec.

use super::common::{self, End, IP_A, IP_B, MAC_A, MAC_B, Params, connect_mp, create_rc};
use core::fmt::Debug;
use metaroce_codec::ext::SackethRepr;
use metaroce_codec::{Frame, Opcode, PacketBuilder, ParseOptions};
use metaroce_ref::zoo::Mutant;
use metaroce_ref::*;

pub use common::drain;

/// Runs a scenario on the correct transport and on the mutant and checks
/// both outcomes: `correct` is what SPEC requires (`what` says which
/// requirement), `broken` what the mutant does instead.
pub fn check<T: PartialEq + Debug>(
    m: Mutant,
    what: &str,
    run: impl Fn(Option<Mutant>) -> T,
    correct: T,
    broken: T,
) {
    assert_ne!(correct, broken, "{m}: the scenario must tell them apart");
    let got = run(None);
    assert_eq!(got, correct, "correct transport: {what}");
    let got = run(Some(m));
    assert_eq!(
        got,
        broken,
        "mutant {m} must deviate from \"{what}\" as ZOO.md says: {}",
        m.symptom()
    );
}

/// A device at `mac`/`ip` running `mutant`.
pub fn device(mac: [u8; 6], ip: core::net::Ipv4Addr, seed: u8, mutant: Option<Mutant>) -> Device {
    let config = DeviceConfig {
        mutant,
        ..DeviceConfig::new(mac, ip)
    };
    Device::new(config, [seed; 32])
}

/// Two devices with `pairs` connected Base RC QP pairs; `a` and `b` are
/// their mutants. Pair 0 has A's PSNs start at 0xFFFFF0 (the wrap).
pub struct Base {
    pub a: Device,
    pub b: Device,
    pub qa: Vec<End>,
    pub qb: Vec<End>,
}

pub fn base(a: Option<Mutant>, b: Option<Mutant>, p: Params, pairs: usize) -> Base {
    let mut da = device(MAC_A, IP_A, 1, a);
    let mut db = device(MAC_B, IP_B, 2, b);
    let (mut qa, mut qb) = (Vec::new(), Vec::new());
    for i in 0..pairs as u32 {
        let ea = create_rc(&mut da, 0xFF_FFF0u32.wrapping_add(i * 0x1000) & 0xFF_FFFF);
        let eb = create_rc(&mut db, 0x12_3456 + i * 0x1000);
        common::connect(&mut da, ea, eb, IP_B, MAC_B, p);
        common::connect(&mut db, eb, ea, IP_A, MAC_A, p);
        qa.push(ea);
        qb.push(eb);
    }
    Base {
        a: da,
        b: db,
        qa,
        qb,
    }
}

/// Two devices with one connected MP QP pair: A's entropy set is
/// 0xC000–0xC00F, B's 0xD000–0xD00F.
pub fn mp(a: Option<Mutant>, b: Option<Mutant>, p: Params, attrs: MpAttrs) -> Base {
    let mut da = device(MAC_A, IP_A, 1, a);
    let mut db = device(MAC_B, IP_B, 2, b);
    let ea = create_rc(&mut da, 0xFF_FFF0);
    let eb = create_rc(&mut db, 0x12_3456);
    let set = |first: u16| MpAttrs {
        entropy: MpEntropy::Values((first..first + 16).collect()),
        ..attrs.clone()
    };
    connect_mp(&mut da, ea, eb, IP_B, MAC_B, p, &set(0xC000));
    connect_mp(&mut db, eb, ea, IP_A, MAC_A, p, &set(0xD000));
    Base {
        a: da,
        b: db,
        qa: vec![ea],
        qb: vec![eb],
    }
}

pub fn mr(dev: &mut Device, pd: PdHandle, len: usize, access: Access) -> MrInfo {
    dev.reg_mr(pd, len, access).unwrap()
}

pub fn sge(m: &MrInfo, off: u64, len: u32) -> Sge {
    Sge {
        addr: m.addr + off,
        len,
        lkey: m.lkey,
    }
}

pub fn remote(m: &MrInfo, off: u64) -> RemoteAddr {
    RemoteAddr {
        va: m.addr + off,
        rkey: m.rkey,
    }
}

/// Posts a receive of `len` bytes at the start of `m`.
pub fn recv(dev: &mut Device, e: End, m: &MrInfo, id: u64, len: u32) {
    dev.post_recv(
        e.qpn,
        RecvWr {
            wr_id: id,
            sg_list: vec![sge(m, 0, len)],
        },
    )
    .unwrap();
}

/// Posts a send work request with local bytes `data` (in a fresh MR).
pub fn post(dev: &mut Device, e: End, id: u64, op: WrOp, data: &[u8]) {
    let src = mr(dev, e.pd, data.len().max(1), Access::ALL);
    dev.write_mr(src.lkey, src.addr, data).unwrap();
    dev.post_send(
        e.qpn,
        SendWr::new(id, op, vec![sge(&src, 0, data.len() as u32)]),
    )
    .unwrap();
}

pub fn statuses(dev: &mut Device, e: End) -> Vec<WcStatus> {
    dev.poll_cq(e.cq, 1000)
        .unwrap()
        .iter()
        .map(|w| w.status)
        .collect()
}

/// Hands every frame to `to` at `now`.
pub fn deliver(to: &mut Device, now: u64, frames: &[Vec<u8>]) {
    for f in frames {
        to.handle_frame(now, f);
    }
}

/// The fields of a frame the scenarios look at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub opcode: Opcode,
    pub psn: u32,
    pub ack_req: bool,
    pub pad_count: u8,
    pub udp_src_port: u16,
    /// AETH syndrome and MSN.
    pub aeth: Option<(u8, u32)>,
    /// AtomicAckETH original value.
    pub orig: Option<u64>,
    pub sack: Option<SackethRepr>,
    pub payload: Vec<u8>,
}

/// Decodes a frame the device sent (it must parse).
pub fn seen(frame: &[u8]) -> Seen {
    let f = Frame::parse(frame, &ParseOptions::default()).expect("the device sends valid frames");
    let roce = f.roce.expect("a RoCE frame");
    Seen {
        opcode: roce.bth.opcode,
        psn: roce.bth.psn.value(),
        ack_req: roce.bth.ack_req,
        pad_count: roce.bth.pad_count,
        udp_src_port: f.udp.map_or(0, |u| u.src_port),
        aeth: roce.ext.aeth.map(|a| (a.syndrome.0, a.msn.value())),
        orig: roce.ext.atomic_ack_eth.map(|a| a.orig),
        sack: roce.ext.sacketh,
        payload: roce.payload.to_vec(),
    }
}

/// A packet from A's address to QP `dest_qp` of B, PSN `psn`.
pub fn to_b(op: Opcode, dest_qp: u32, psn: u32) -> PacketBuilder {
    PacketBuilder::new(op)
        .macs(MAC_A, MAC_B)
        .ipv4(IP_A, IP_B)
        .dest_qp(dest_qp)
        .psn(psn)
}

/// Moves frames both ways at `now` until both devices are quiet.
pub fn shuttle(x: &mut Base, now: u64) {
    common::shuttle(&mut x.a, &mut x.b, now);
}
