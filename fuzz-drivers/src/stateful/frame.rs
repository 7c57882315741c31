//! Structure-aware frames for the stateful targets: a few input bytes choose
//! an opcode that fits the target QP, a PSN near the one the receiver
//! expects, keys and addresses of registered memory, and the value of every
//! header the opcode carries; `PacketBuilder` then fills lengths, PadCnt and
//! the ICRC, so most frames are valid and reach deep state. A small share
//! carries one deliberate breakage (wrong ICRC, PadCnt, IP or UDP length, cut
//! short, trailing bytes, an extension header removed).

use super::input::Input;
use core::net::Ipv4Addr;
use metaroce_codec::ext::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, DethRepr, FethRepr, IethRepr, ImmDtRepr, MpethRepr,
    RethRepr, SackethRepr, Syndrome,
};
use metaroce_codec::{Dialect, ExtKind, Msn, Opcode, PacketBuilder, Psn};

/// Largest payload an injected frame carries.
pub const MAX_PAYLOAD: usize = 4096;

/// Addresses of the sender and receiver of injected frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoints {
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source IPv4 address.
    pub src_ip: Ipv4Addr,
    /// Destination IPv4 address.
    pub dst_ip: Ipv4Addr,
}

/// A registered region frames may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// R_Key.
    pub rkey: u32,
    /// First virtual address.
    pub va: u64,
    /// Length in bytes.
    pub len: u64,
}

/// Which opcodes fit a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Base RC: requests and responses.
    Rc,
    /// MP opcodes.
    Mp,
    /// UD SENDs.
    Ud,
}

/// What a frame is aimed at: one QP and the state its receiver is in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// DestQP.
    pub qpn: u32,
    /// Opcodes that fit it.
    pub family: Family,
    /// PSN for requests (the responder's expected PSN).
    pub request_psn: Psn,
    /// PSN for responses (the requester's newest outstanding PSN).
    pub response_psn: Psn,
    /// The QP's P_Key.
    pub pkey: u16,
    /// Its Q_Key (UD).
    pub qkey: u32,
    /// PMTU (payload sizes cluster around it).
    pub pmtu: u32,
    /// Regions RETH and AtomicETH may name.
    pub regions: Vec<Region>,
    /// MSN responses carry by default.
    pub msn: u32,
}

/// The Base RC opcodes of the codec's table (requests and responses).
fn rc_opcodes() -> impl Iterator<Item = Opcode> {
    (0..=u8::MAX)
        .map(Opcode)
        .filter(|o| o.is_rc_request() || o.is_rc_response())
}

/// The MP opcodes of the codec's table.
fn mp_opcodes() -> impl Iterator<Item = Opcode> {
    (0..=u8::MAX).map(Opcode).filter(|o| o.is_mp())
}

/// Every opcode the codec's table knows (MetaRoCE dialect).
pub fn table_opcodes() -> Vec<Opcode> {
    (0..=0xFFu8)
        .map(Opcode)
        .filter(|o| o.layout(Dialect::MetaRoce).is_some())
        .collect()
}

fn opcode(inp: &mut Input<'_>, family: Family) -> Opcode {
    let family_ops: Vec<Opcode> = match family {
        Family::Rc => rc_opcodes().collect(),
        Family::Mp => mp_opcodes().collect(),
        Family::Ud => vec![Opcode::UD_SEND_ONLY, Opcode::UD_SEND_ONLY_IMM],
    };
    match inp.pick(16) {
        0 => Opcode(inp.u8()),
        1 => {
            let all = table_opcodes();
            all[inp.pick(all.len())]
        }
        _ => family_ops[inp.pick(family_ops.len())],
    }
}

/// A PSN near `base`: mostly within ±3, sometimes ±128, sometimes any.
fn psn_near(inp: &mut Input<'_>, base: Psn) -> Psn {
    match inp.pick(8) {
        0 => Psn::new(inp.u32()),
        1 => base.add(i32::from(inp.u8() as i8) as u32),
        _ => base.add((inp.pick(7) as u32).wrapping_sub(3)),
    }
}

/// (R_Key, VA, length) near a registered region, or anything.
fn remote(inp: &mut Input<'_>, regions: &[Region]) -> (u32, u64, u32) {
    if regions.is_empty() || inp.pick(8) == 0 {
        return (inp.u32(), inp.u64(), inp.u32());
    }
    let r = regions[inp.pick(regions.len())];
    let span = r.len.saturating_add(16).max(1);
    // Offsets straddle both ends of the region (bounds checks).
    let off = (u64::from(inp.u16()) % span).wrapping_sub(8);
    let len = match inp.pick(4) {
        0 => 0,
        1 => inp.u32(),
        _ => u32::from(inp.u16()) % (r.len as u32).saturating_add(16).max(1),
    };
    (r.rkey, r.va.wrapping_add(off), len)
}

fn syndrome(inp: &mut Input<'_>) -> Syndrome {
    Syndrome(match inp.pick(8) {
        0..=2 => 0x1F,
        3 => inp.u8() & 0x1F,
        4 => 0x20 | (inp.u8() & 0x1F),
        5 | 6 => 0x60 + inp.pick(6) as u8,
        _ => inp.u8(),
    })
}

fn payload_len(inp: &mut Input<'_>, pmtu: u32) -> usize {
    let pmtu = pmtu as usize;
    match inp.pick(8) {
        0 => 0,
        1 | 2 => pmtu,
        3 => pmtu.saturating_sub(inp.pick(4)),
        4 => usize::from(inp.u16()) % (MAX_PAYLOAD + 1),
        _ => 1 + inp.pick(64),
    }
}

/// Reads one frame aimed at one of `targets` (or at a random QP).
pub fn frame(inp: &mut Input<'_>, ep: &Endpoints, targets: &[Target]) -> Vec<u8> {
    let fallback = Target {
        qpn: 0,
        family: Family::Rc,
        request_psn: Psn::new(0),
        response_psn: Psn::new(0),
        pkey: 0xFFFF,
        qkey: 0,
        pmtu: 1024,
        regions: Vec::new(),
        msn: 0,
    };
    let mut t = targets
        .get(inp.pick(targets.len()))
        .unwrap_or(&fallback)
        .clone();
    if inp.pick(32) == 0 {
        // Any QPN, or (half the time) the target's with one bit of its top
        // byte flipped: a QPN that shares the low 16 bits with a real one
        // (a lookup must compare all 24 bits, MR-BTH-6).
        let v = inp.u32();
        t.qpn = if v & 0x0100_0000 != 0 {
            t.qpn ^ (1 << (16 + ((v >> 25) & 7)))
        } else {
            v & 0xFF_FFFF
        };
    }
    let op = opcode(inp, t.family);
    let response = op.is_rc_response() || op.is_mp_response();
    let base = if response {
        t.response_psn
    } else {
        t.request_psn
    };
    let psn = psn_near(inp, base);
    let mut b = PacketBuilder::new(op)
        .macs(ep.src_mac, ep.dst_mac)
        .ipv4(ep.src_ip, ep.dst_ip)
        .dest_qp(t.qpn)
        .psn(psn.value())
        .ack_req(inp.bool());
    let pkey = if inp.pick(16) == 0 { inp.u16() } else { t.pkey };
    let (se, ecn_ce, port) = (inp.bool(), inp.pick(8) == 0, inp.u16());
    b = b
        .bth(|h| {
            h.pkey = pkey;
            h.se = se;
        })
        .udp_src_port(0xC000 | (port & 0x3FFF))
        .traffic_class(if ecn_ce { 0b11 } else { 0b10 });
    let kinds: Vec<ExtKind> = b.ext_mut().kinds().collect();
    for kind in kinds {
        fill(inp, &mut b, kind, &t);
    }
    let len = if op
        .layout(Dialect::MetaRoce)
        .is_some_and(|l| l.payload == metaroce_codec::opcode::PayloadRule::Data)
        || inp.pick(32) == 0
    {
        payload_len(inp, t.pmtu)
    } else {
        0
    };
    let seed = inp.u8();
    b = b.payload(
        (0..len)
            .map(|i| seed.wrapping_add(i as u8))
            .collect::<Vec<u8>>(),
    );
    breakage(inp, b).build()
}

/// Fills header `kind` of the builder's packet from the input.
fn fill(inp: &mut Input<'_>, b: &mut PacketBuilder, kind: ExtKind, t: &Target) {
    let e = b.ext_mut();
    match kind {
        ExtKind::Reth => {
            let (rkey, va, dma_len) = remote(inp, &t.regions);
            e.reth = Some(RethRepr { va, rkey, dma_len });
        }
        ExtKind::AtomicEth => {
            let (rkey, va, _) = remote(inp, &t.regions);
            let va = if inp.pick(4) == 0 { va } else { va & !7 };
            e.atomic_eth = Some(AtomicEthRepr {
                va,
                rkey,
                swap_add: inp.u64(),
                compare: inp.u64(),
            });
        }
        ExtKind::Aeth => {
            e.aeth = Some(AethRepr {
                syndrome: syndrome(inp),
                msn: Msn::new(t.msn.wrapping_add(inp.pick(4) as u32)),
            });
        }
        ExtKind::AtomicAckEth => e.atomic_ack_eth = Some(AtomicAckEthRepr { orig: inp.u64() }),
        ExtKind::ImmDt => e.immdt = Some(ImmDtRepr { value: inp.u32() }),
        ExtKind::Ieth => {
            let rkey = match t.regions.first() {
                Some(r) if inp.bool() => r.rkey,
                _ => inp.u32(),
            };
            e.ieth = Some(IethRepr { rkey });
        }
        ExtKind::Deth => {
            let qkey = if inp.pick(8) == 0 { inp.u32() } else { t.qkey };
            e.deth = Some(DethRepr {
                qkey,
                reserved: 0,
                src_qp: inp.u32() & 0xFF_FFFF,
            });
        }
        ExtKind::Feth => {
            e.feth = Some(FethRepr {
                reserved: 0,
                selectivity_level: inp.u8() & 0x3,
                placement_type: inp.u8() & 0x3,
            })
        }
        ExtKind::Mpeth => {
            let flags = inp.u8();
            let pmtu = t.pmtu.max(1);
            e.mpeth = Some(MpethRepr {
                first: flags & 1 != 0,
                last: flags & 2 != 0,
                retransmission: flags & 4 != 0,
                ordered: false,
                reserved: 0,
                msn: Msn::new(t.msn.wrapping_add(inp.pick(4) as u32)),
                offset: pmtu * inp.pick(4) as u32,
                msg_len: match inp.pick(4) {
                    0 => inp.u32(),
                    n => pmtu * n as u32 - inp.pick(3) as u32,
                },
                timestamp: inp.u32(),
            });
        }
        ExtKind::Sacketh => {
            let flags = inp.u8();
            e.sacketh = Some(SackethRepr {
                syndrome: syndrome(inp),
                msn: Msn::new(t.msn.wrapping_add(inp.pick(4) as u32)),
                ecn_ce: flags & 1 != 0,
                retransmission: flags & 2 != 0,
                trimmed: flags & 4 != 0,
                reserved_flags: 0,
                sack_base_psn: psn_near(inp, t.response_psn),
                sack_bitmap: if inp.bool() {
                    inp.u64()
                } else {
                    u64::from(inp.u8())
                },
                echoed_entropy: inp.u16(),
                reserved: 0,
                echoed_timestamp: inp.u32(),
            });
        }
        // RDETH, XRCETH and the CNP's bytes: defaults are as good as any.
        _ => {}
    }
}

/// One deliberate breakage in 16 frames, else the frame as built.
fn breakage(inp: &mut Input<'_>, b: PacketBuilder) -> PacketBuilder {
    if inp.pick(16) != 0 {
        return b;
    }
    match inp.pick(9) {
        0 => b.corrupt_icrc(),
        1 => b.pad_count(inp.u8() & 3),
        2 => b.ip_length(inp.u16()),
        3 => b.udp_length(inp.u16()),
        4 => {
            let n = b.build().len();
            b.truncate(n.saturating_sub(1 + inp.pick(32)))
        }
        5 => b.trailer(inp.bytes(8)),
        6 => b.ipv4_checksum(inp.u16()),
        7 => {
            let mut b = b;
            let kinds: Vec<ExtKind> = b.ext_mut().kinds().collect();
            match kinds.get(inp.pick(kinds.len().max(1))) {
                Some(&k) => b.without(k),
                None => b,
            }
        }
        _ => b.bth(|h| h.tver = 1),
    }
}
