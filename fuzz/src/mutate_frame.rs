//! A structure-aware mutation of one RoCEv2 frame, for the packet targets'
//! `fuzz_mutator!`.
//!
//! The frame is parsed; one field is changed (opcode from the codec's table
//! with its extension headers made to fit, PSN near its value, DestQP,
//! P_Key, flags, AETH syndrome from the syndrome table, RETH, AtomicETH,
//! DETH, MPETH, SACKETH values, payload length or bytes); then the derived
//! fields are made consistent again: PadCnt and pad, UDP length, IP length,
//! IPv4 header checksum and ICRC. One mutation in eight targets one of those
//! derived fields instead and leaves it wrong. All randomness comes from the
//! seed libFuzzer passes. Bytes that do not parse as a RoCE frame get no
//! mutation here (`None`): the caller uses libFuzzer's own.
//!
//! Uses only `std` and `metaroce_codec`.

use metaroce_codec::ext::{ExtHeaders, Syndrome};
use metaroce_codec::{Dialect, ExtKind, Frame, IpRepr, Msn, Opcode, ParseOptions, icrc};

/// A small deterministic generator (xorshift64*), seeded by libFuzzer.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from libFuzzer's 32-bit seed.
    pub fn new(seed: u32) -> Self {
        Rng(u64::from(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.bits() % n }
    }

    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// The derived fields a mutation may target (and leave wrong).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Derived {
    PadCount,
    UdpLength,
    IpLength,
    Ipv4Checksum,
    Icrc,
}

/// Syndromes from the codec's table: ACK (no limit and some credit codes),
/// RNR NAK with several timers, every NAK code, and reserved ones.
pub fn syndromes() -> Vec<Syndrome> {
    let mut v = vec![Syndrome::ACK_UNLIMITED, Syndrome(0x00), Syndrome(0x0A)];
    v.extend([0x20u8, 0x21, 0x2E, 0x3F].map(Syndrome));
    v.extend([
        Syndrome::NAK_PSN_SEQ,
        Syndrome::NAK_INVALID_REQUEST,
        Syndrome::NAK_REMOTE_ACCESS,
        Syndrome::NAK_REMOTE_OP,
        Syndrome::NAK_INVALID_RD_REQUEST,
        Syndrome::NAK_TRIMMED,
    ]);
    v.extend([0x40u8, 0x66, 0x9F].map(Syndrome));
    v
}

/// Mutates `data` (a frame) into a new frame of at most `max_size` bytes,
/// or `None` when `data` is not a RoCE frame (or the result would not fit).
pub fn mutate(data: &[u8], max_size: usize, seed: u32) -> Option<Vec<u8>> {
    let options = ParseOptions::default();
    let frame = Frame::parse(data, &options).ok()?;
    let roce = frame.roce?;
    let mut rng = Rng::new(seed);
    let mut bth = roce.bth;
    let mut ext = roce.ext;
    let mut payload = roce.payload.to_vec();
    let targeted = (rng.below(8) == 0).then(|| {
        rng.pick(&[
            Derived::PadCount,
            Derived::UdpLength,
            Derived::IpLength,
            Derived::Ipv4Checksum,
            Derived::Icrc,
        ])
    });
    if targeted.is_none() || rng.below(2) == 0 {
        field(&mut rng, &mut bth, &mut ext, &mut payload);
    }
    // Derived fields, consistent unless targeted.
    let pad_count = if targeted == Some(Derived::PadCount) {
        (((4 - payload.len() % 4) % 4) as u8 + 1 + rng.below(3) as u8) & 3
    } else {
        ((4 - payload.len() % 4) % 4) as u8
    };
    bth.pad_count = pad_count;
    let pad = vec![0u8; usize::from(pad_count)];
    let mut out = frame;
    let mut packet = roce;
    packet.bth = bth;
    packet.ext = ext;
    packet.payload = &payload;
    packet.pad = &pad;
    out.roce = Some(packet);
    out.udp_excess = &[];
    let udp_len = 8 + packet.buffer_len();
    if let Some(udp) = &mut out.udp {
        udp.length = if targeted == Some(Derived::UdpLength) {
            off_by(&mut rng, udp_len)
        } else {
            clamp(udp_len)
        };
    }
    match &mut out.ip {
        Some(IpRepr::V4(v4)) => {
            let total = v4.buffer_len() + udp_len;
            v4.total_len = if targeted == Some(Derived::IpLength) {
                off_by(&mut rng, total)
            } else {
                clamp(total)
            };
            v4.checksum = v4.compute_checksum();
            if targeted == Some(Derived::Ipv4Checksum) {
                v4.checksum ^= 1 + rng.below(0xFFFF) as u16;
            }
        }
        Some(IpRepr::V6(v6)) => {
            v6.payload_len = if targeted == Some(Derived::IpLength) {
                off_by(&mut rng, udp_len)
            } else {
                clamp(udp_len)
            };
        }
        None => {}
    }
    icrc::fill(&mut out);
    if targeted == Some(Derived::Icrc)
        && let Some(r) = &mut out.roce
    {
        r.icrc[rng.below(4) as usize] ^= 1 + rng.below(255) as u8;
    }
    let bytes = out.to_bytes();
    (bytes.len() <= max_size).then_some(bytes)
}

/// The body of a packet target's `fuzz_mutator!`: three mutations in four
/// are [`mutate`] (when the input is a RoCE frame), the rest libFuzzer's own
/// (`fallback`, i.e. `libfuzzer_sys::fuzzer_mutate`), so byte-level
/// mutations still reach what no frame looks like. `data` is libFuzzer's
/// buffer (`max_size` bytes long at least), the input its first `size`.
pub fn packet_mutator(
    data: &mut [u8],
    size: usize,
    max_size: usize,
    seed: u32,
    fallback: impl FnOnce(&mut [u8], usize, usize) -> usize,
) -> usize {
    let size = size.min(data.len());
    let max_size = max_size.min(data.len());
    if !seed.is_multiple_of(4)
        && let Some(m) = mutate(&data[..size], max_size, seed)
    {
        data[..m.len()].copy_from_slice(&m);
        return m.len();
    }
    fallback(data, size, max_size)
}

fn clamp(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// `n` off by a small nonzero amount.
fn off_by(rng: &mut Rng, n: usize) -> u16 {
    let d = 1 + rng.below(8) as usize;
    clamp(if rng.below(2) == 0 {
        n + d
    } else {
        n.saturating_sub(d)
    })
}

/// Changes one field of the packet.
fn field(
    rng: &mut Rng,
    bth: &mut metaroce_codec::BthRepr,
    ext: &mut ExtHeaders,
    payload: &mut Vec<u8>,
) {
    match rng.below(12) {
        0 | 1 => {
            let op = if rng.below(4) == 0 {
                Opcode(rng.bits() as u8)
            } else {
                let table: Vec<Opcode> = (0..=0xFFu8)
                    .map(Opcode)
                    .filter(|o| o.layout(Dialect::MetaRoce).is_some())
                    .collect();
                rng.pick(&table)
            };
            bth.opcode = op;
            fit_headers(ext, op);
        }
        2 => {
            let d = rng.below(17) as u32;
            bth.psn = bth.psn.add(d.wrapping_sub(8));
        }
        3 => {
            bth.dest_qp = match rng.below(4) {
                0 => rng.pick(&[0, 1, 0xFF_FFFF]),
                1 => bth.dest_qp ^ 1,
                _ => rng.bits() as u32 & 0xFF_FFFF,
            }
        }
        4 => {
            let any = rng.bits() as u16;
            bth.pkey = rng.pick(&[0xFFFF, 0x7FFF, 0x8001, 0, any]);
        }
        5 => match rng.below(5) {
            0 => bth.ack_req ^= true,
            1 => bth.se ^= true,
            2 => bth.migreq ^= true,
            3 => bth.becn ^= true,
            _ => bth.tver = rng.below(16) as u8,
        },
        6 => {
            let s = rng.pick(&syndromes());
            if let Some(a) = &mut ext.aeth {
                a.syndrome = s;
            } else if let Some(k) = &mut ext.sacketh {
                k.syndrome = s;
            }
            if let Some(a) = &mut ext.aeth {
                a.msn = Msn::new(
                    a.msn
                        .value()
                        .wrapping_add(rng.below(3) as u32)
                        .wrapping_sub(1),
                );
            }
        }
        7 => {
            if let Some(r) = &mut ext.reth {
                match rng.below(4) {
                    0 => r.dma_len = rng.pick(&[0, 1, 256, 1024, 4096, 1 << 31, u32::MAX]),
                    1 => r.dma_len = r.dma_len.wrapping_add(rng.below(3) as u32).wrapping_sub(1),
                    2 => r.va = r.va.wrapping_add(rng.below(17)).wrapping_sub(8),
                    _ => r.rkey ^= 1 << rng.below(32),
                }
            } else if let Some(a) = &mut ext.atomic_eth {
                a.va = a.va.wrapping_add(rng.below(9)).wrapping_sub(4);
            } else if let Some(d) = &mut ext.deth {
                d.qkey = rng.pick(&[0x8001_0000, 0, d.qkey ^ 1]);
            }
        }
        8 => {
            if let Some(m) = &mut ext.mpeth {
                match rng.below(4) {
                    0 => (m.first, m.last) = (rng.below(2) == 0, rng.below(2) == 0),
                    1 => m.offset = m.offset.wrapping_add(rng.pick(&[1, 256, 1024])),
                    2 => m.msg_len = rng.pick(&[0, 1, 1024, 4096, u32::MAX]),
                    _ => m.msn = Msn::new(m.msn.value() ^ 1),
                }
            } else if let Some(k) = &mut ext.sacketh {
                k.sack_bitmap ^= 1 << rng.below(64);
                k.sack_base_psn = k.sack_base_psn.add(rng.below(5) as u32);
            }
        }
        9 | 10 => {
            let len = match rng.below(4) {
                0 => payload.len().saturating_sub(1 + rng.below(4) as usize),
                1 => payload.len() + 1 + rng.below(4) as usize,
                _ => rng.pick(&[0, 1, 256, 1024, 2048, 4096]),
            };
            payload.resize(len, 0xA5);
        }
        _ => {
            if !payload.is_empty() {
                let at = rng.below(payload.len() as u64) as usize;
                payload[at] ^= 1 + rng.below(255) as u8;
            }
        }
    }
}

/// Makes the extension headers those of `op`'s layout: kept where present,
/// defaulted where missing, removed where the layout has none.
fn fit_headers(ext: &mut ExtHeaders, op: Opcode) {
    let want: Vec<ExtKind> = op
        .layout(Dialect::MetaRoce)
        .map(|l| l.headers.to_vec())
        .unwrap_or_default();
    for kind in ExtKind::ALL {
        let has = ext.has(kind);
        let wanted = want.contains(&kind);
        if has && !wanted {
            ext.remove(kind);
        } else if wanted && !has {
            ext.insert_default(kind);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metaroce_codec::{IcrcStatus, PacketBuilder};

    #[test]
    fn mutations_keep_frames_consistent_unless_targeted() {
        let base = PacketBuilder::new(Opcode::RC_WRITE_ONLY)
            .payload(vec![7; 13])
            .build();
        let mut consistent = 0;
        for seed in 0..2000 {
            let Some(m) = mutate(&base, 1 << 16, seed) else {
                continue;
            };
            let Ok(f) = Frame::parse(&m, &ParseOptions::default()) else {
                continue;
            };
            if icrc::verify(&f) == IcrcStatus::Valid {
                consistent += 1;
            }
        }
        assert!(
            consistent > 1500,
            "{consistent} of 2000 mutants parse with a valid ICRC"
        );
    }
}
