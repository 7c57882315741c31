//! Stimuli for `metaroce fuzz`: structure-aware mutations of the `send`
//! steps of the committed vectors, and packets generated from the opcode
//! table (conformance/FUZZ.md).
//!
//! Every stimulus is a [`SendStep`], so the frame is built by the harness's
//! own builder ([`crate::run::packet::build`]): lengths, PadCnt and ICRC are
//! derived and stay consistent unless a mutation sets them on purpose
//! (`pad_count`, `udp.length`, `ip.total_len`, `corrupt`, a DMA length that
//! disagrees with the payload). Every packet addresses the fuzz QP (never
//! `second_qp`, the sentinel); a mutated `bth.dest_qp` is a random 24-bit
//! number, which names the sentinel with probability 2^-24 per mutation.

use crate::vector::model::{Bytes, Corruption, GeneratedBytes, Num, OpcodeRef, SendStep, Value};
use metaroce_agent::rng::SplitMix64;
use metaroce_codec::Opcode;
use std::collections::BTreeMap;

/// The MR the fuzz packets aim at (`setup.mrs` of a batch).
pub const FUZZ_MR: &str = "fuzz";
/// Its length.
pub const FUZZ_MR_LEN: u64 = 256;

/// The fuzzer's deterministic generator (SplitMix64): a run is reproduced by
/// its `--seed`.
#[derive(Clone, Debug)]
pub struct Rng(SplitMix64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(SplitMix64::new(seed ^ 0x6D65_7461_726F_6365))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

fn expr(text: String) -> Value {
    Value::Num(Num::Expr(text))
}

fn int(v: u64) -> Value {
    Value::Num(Num::Int(v))
}

/// `${psn + k}` modulo 2^24, written without a subtraction (expressions are
/// unsigned): `k` may be negative.
pub fn psn_expr(k: i64) -> Value {
    expr(format!("${{psn + {}}}", k.rem_euclid(1 << 24)))
}

/// PSNs a request of this opcode and DMA length consumes (a READ one per
/// PMTU of 1024 bytes, everything else one).
fn psn_span(step: &SendStep) -> i64 {
    let is_read = matches!(&step.opcode, OpcodeRef::Number(n) if *n == Opcode::RC_READ_REQUEST.0)
        || matches!(&step.opcode, OpcodeRef::Name(n) if n.eq_ignore_ascii_case("RC_READ_REQUEST"));
    if !is_read {
        return 1;
    }
    let len = match step.ext.get("reth").and_then(|r| r.get("dma_len")) {
        Some(Value::Num(Num::Int(n))) => *n,
        _ => 1,
    };
    (len.div_ceil(1024).clamp(1, 64)) as i64
}

/// Opcodes the generator draws from: every opcode of the Base RC, UC and
/// UD tables, CNP, the MP opcodes, and reserved values.
fn opcode_pool() -> Vec<u8> {
    let mut pool: Vec<u8> = Opcode::CONSTANTS.iter().map(|(_, op)| op.0).collect();
    // Reserved codes of the RC table (MR-OPC-2) and beyond every table.
    pool.extend([0x15, 0x16, 0x17, 0x1F, 0x3F, 0x5F, 0x7F, 0x9F, 0xBF, 0xFF]);
    pool
}

/// Makes stimuli for one run.
#[derive(Debug)]
pub struct Generator {
    rng: Rng,
    seeds: Vec<SendStep>,
    opcodes: Vec<u8>,
    /// The PSN offset (from `${psn}`) the next in-sequence request has.
    next_psn: i64,
}

impl Generator {
    /// A generator over `seeds` (rewritten `send` steps, see
    /// [`super::seeds`]), seeded with `seed`.
    pub fn new(seeds: Vec<SendStep>, seed: u64) -> Self {
        Generator {
            rng: Rng::new(seed),
            seeds,
            opcodes: opcode_pool(),
            next_psn: 0,
        }
    }

    /// The generator's random source (for batch-level choices).
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// Starts a batch: PSNs count from `${psn}` again (each batch runs on a
    /// freshly reset IUT).
    pub fn start_batch(&mut self) {
        self.next_psn = 0;
    }

    /// The next stimulus: a mutated seed (1 in 2), a request aimed at an
    /// edge of the fuzz MR (1 in 4) or a packet generated from the opcode
    /// table.
    pub fn stimulus(&mut self) -> SendStep {
        let mut step = if !self.seeds.is_empty() && self.rng.chance(1, 2) {
            let mut s = self.rng.pick(&self.seeds).clone();
            let n = 1 + self.rng.below(3);
            for _ in 0..n {
                self.mutate(&mut s);
            }
            s
        } else if self.rng.chance(1, 2) {
            self.edge_request()
        } else {
            self.generate()
        };
        if !step.bth.contains_key("psn") {
            // Mostly in sequence; sometimes a little behind or ahead.
            let off = if self.rng.chance(1, 8) {
                self.rng.below(7) as i64 - 3
            } else {
                0
            };
            step.bth.insert("psn".into(), psn_expr(self.next_psn + off));
        }
        self.next_psn += psn_span(&step);
        step
    }

    /// A valid-looking WRITE Only or READ request whose range starts or
    /// ends within a byte of an edge of the fuzz MR (or, 1 in 8, lies in the
    /// `ro` MR) (MR-SEC-4, MR-SEC-5,
    /// MR-RSP-6: the bounds checks), its payload as long as its DMA length.
    fn edge_request(&mut self) -> SendStep {
        let r = &mut self.rng;
        let write = r.chance(1, 2);
        let len = *r.pick(&[1u64, 2, 4, 8, 16, 64, 255, 256]);
        let delta = r.below(3) as i64 - 1;
        let va = if r.chance(1, 2) {
            // The range ends at the MR's end + delta.
            let back = len as i64 - delta;
            if back >= 0 {
                format!("${{mr.{FUZZ_MR}.addr + mr.{FUZZ_MR}.len - {back}}}")
            } else {
                format!("${{mr.{FUZZ_MR}.addr + mr.{FUZZ_MR}.len + {}}}", -back)
            }
        } else if delta < 0 {
            format!("${{mr.{FUZZ_MR}.addr - {}}}", -delta)
        } else {
            format!("${{mr.{FUZZ_MR}.addr + {delta}}}")
        };
        // Now and then a request for the `ro` MR, which grants no remote
        // access: the responder must refuse it (MR-RSP-6) and `ro` must not
        // change (MR-SEC-4; the batch's `expect_memory`).
        let (mr, va) = if r.chance(1, 8) {
            ("ro", format!("${{mr.ro.addr + {}}}", r.below(8)))
        } else {
            (FUZZ_MR, va)
        };
        let (op, payload) = if write {
            (
                Opcode::RC_WRITE_ONLY,
                Some(payload(len, r.below(256) as u8)),
            )
        } else {
            (Opcode::RC_READ_REQUEST, None)
        };
        let reth = BTreeMap::from([
            ("va".to_string(), expr(va)),
            ("rkey".to_string(), expr(format!("${{mr.{mr}.rkey}}"))),
            (
                "dma_len".to_string(),
                int(len.min(if mr == "ro" { 56 } else { len })),
            ),
        ]);
        let payload = if mr == "ro" {
            payload.map(|_| self::payload(len.min(56), 0x77))
        } else {
            payload
        };
        SendStep {
            opcode: OpcodeRef::Number(op.0),
            bth: BTreeMap::new(),
            ext: BTreeMap::from([("reth".to_string(), reth)]),
            payload,
            ip: BTreeMap::new(),
            udp: BTreeMap::new(),
            eth: BTreeMap::new(),
            corrupt: None,
            second_qp: false,
            repeat: None,
            hold: false,
            note: Some("generated, at an edge of the fuzz MR".into()),
        }
    }

    /// A packet from the opcode table with headers aimed at the fuzz MR.
    fn generate(&mut self) -> SendStep {
        let op = *self.rng.pick(&self.opcodes);
        let len = *self
            .rng
            .pick(&[0u64, 1, 3, 4, 8, 16, 64, 255, 256, 257, 1024]);
        let mut step = SendStep {
            opcode: OpcodeRef::Number(op),
            bth: BTreeMap::new(),
            ext: BTreeMap::new(),
            payload: None,
            ip: BTreeMap::new(),
            udp: BTreeMap::new(),
            eth: BTreeMap::new(),
            corrupt: None,
            second_qp: false,
            repeat: None,
            hold: false,
            note: Some(format!("generated, opcode {op:#04x}")),
        };
        let opcode = Opcode(op);
        let layout = opcode.layout(metaroce_codec::Dialect::MetaRoce);
        let has_payload =
            layout.is_none_or(|l| l.payload == metaroce_codec::opcode::PayloadRule::Data);
        if has_payload {
            step.payload = Some(payload(len, self.rng.below(256) as u8));
        }
        let reth = BTreeMap::from([
            (
                "va".to_string(),
                expr(format!(
                    "${{mr.{FUZZ_MR}.addr + {}}}",
                    self.rng.below(FUZZ_MR_LEN)
                )),
            ),
            ("rkey".to_string(), expr(format!("${{mr.{FUZZ_MR}.rkey}}"))),
            ("dma_len".to_string(), int(len.min(FUZZ_MR_LEN))),
        ]);
        step.ext.insert("reth".into(), reth);
        if self.rng.chance(1, 4) {
            self.mutate(&mut step);
        }
        step
    }

    /// One structure-aware mutation.
    pub fn mutate(&mut self, s: &mut SendStep) {
        let r = &mut self.rng;
        match r.below(16) {
            // PSN near the window, or anywhere.
            0 => {
                let v = if r.chance(1, 4) {
                    int(r.below(1 << 24))
                } else {
                    psn_expr(self.next_psn + r.below(9) as i64 - 4)
                };
                s.bth.insert("psn".into(), v);
            }
            // The range aimed at the MR's edges, payload kept equal to it.
            1 | 2 => {
                let len = *r.pick(&[0u64, 1, 2, 4, 8, 16, 64, 128, 255, 256]);
                let delta = r.below(5) as i64 - 2;
                let va = if r.chance(1, 2) {
                    let back = len as i64 - delta;
                    if back >= 0 {
                        format!("${{mr.{FUZZ_MR}.addr + mr.{FUZZ_MR}.len - {back}}}")
                    } else {
                        format!("${{mr.{FUZZ_MR}.addr + mr.{FUZZ_MR}.len + {}}}", -back)
                    }
                } else if delta < 0 {
                    format!("${{mr.{FUZZ_MR}.addr - {}}}", -delta)
                } else {
                    format!("${{mr.{FUZZ_MR}.addr + {delta}}}")
                };
                let reth = s.ext.entry("reth".into()).or_default();
                reth.insert("va".into(), expr(va));
                reth.insert("rkey".into(), expr(format!("${{mr.{FUZZ_MR}.rkey}}")));
                reth.insert("dma_len".into(), int(len));
                if s.payload.is_some() || r.chance(1, 2) {
                    s.payload = Some(payload(len, r.below(256) as u8));
                }
            }
            // Keys.
            3 => {
                let keys = [
                    format!("${{mr.{FUZZ_MR}.rkey + 1}}"),
                    format!("${{mr.{FUZZ_MR}.rkey + 0x100}}"),
                    format!("${{mr.{FUZZ_MR}.lkey}}"),
                    "0".to_string(),
                    "0xffffffff".to_string(),
                ];
                let key = r.pick(&keys).clone();
                let header = if s.ext.contains_key("atomic_eth") {
                    "atomic_eth"
                } else {
                    "reth"
                };
                s.ext
                    .entry(header.into())
                    .or_default()
                    .insert("rkey".into(), expr(key));
            }
            // A DMA length that disagrees with the payload (targets lengths).
            4 => {
                let len = *r.pick(&[0u64, 1, 257, 4096, 0x8000_0000, 0xFFFF_FFFF]);
                s.ext
                    .entry("reth".into())
                    .or_default()
                    .insert("dma_len".into(), int(len));
            }
            // PadCnt (targets padding).
            5 => {
                s.bth.insert("pad_count".into(), int(1 + r.below(3)));
            }
            // Another opcode with the same headers.
            6 => {
                s.opcode = OpcodeRef::Number(*r.pick(&self.opcodes));
            }
            // A reserved opcode.
            7 => {
                s.opcode = OpcodeRef::Number(*r.pick(&[0x15u8, 0x16, 0x17, 0x1F, 0x3F, 0xFF]));
            }
            // ICRC, truncation, trailing bytes, pad bytes.
            8 => {
                let c = s.corrupt.get_or_insert_with(Corruption::default);
                match r.below(4) {
                    0 => c.icrc = true,
                    // Never shorter than an Ethernet header: such a frame
                    // cannot cross a link (AF_PACKET refuses it, EINVAL).
                    1 => c.truncate = Some(Num::Int(14 + r.below(76))),
                    2 => c.trailer = Some(payload(1 + r.below(8), 0xAB)),
                    _ => c.pad_bytes = Some(Bytes::Hex("ff".into())),
                }
            }
            // BTH flags and reserved fields.
            9 => {
                let (k, v) = match r.below(6) {
                    0 => ("tver", int(1 + r.below(15))),
                    1 => ("se", Value::Bool(true)),
                    2 => ("m", Value::Bool(true)),
                    3 => ("resv6a", int(1 + r.below(63))),
                    4 => ("resv7", int(1 + r.below(127))),
                    _ => ("ack_req", Value::Bool(r.chance(1, 2))),
                };
                s.bth.insert(k.into(), v);
            }
            // IP and UDP fields (checksums and lengths targeted on purpose).
            10 => {
                let (layer, k, v) = match r.below(5) {
                    0 => ("ip", "ttl", int(r.below(2))),
                    1 => ("ip", "checksum", int(r.below(1 << 16))),
                    2 => ("ip", "total_len", int(r.below(1 << 16))),
                    3 => ("udp", "length", int(r.below(1 << 16))),
                    _ => ("udp", "dst_port", int(*r.pick(&[4790u64, 4792, 0]))),
                };
                let map = if layer == "ip" { &mut s.ip } else { &mut s.udp };
                map.insert(k.into(), v);
            }
            // Payload length (PadCnt and lengths follow).
            11 => {
                let len = *r.pick(&[0u64, 1, 2, 3, 5, 255, 256, 1023, 1024, 1025, 4097]);
                s.payload = Some(payload(len, r.below(256) as u8));
            }
            // Another destination QP (never the sentinel's on purpose).
            12 => {
                s.bth
                    .insert("dest_qp".into(), int(0x10_0000 | r.below(0xF_0000)));
            }
            // P_Key.
            13 => {
                s.bth
                    .insert("pkey".into(), int(*r.pick(&[0u64, 0x7FFF, 0x8001, 0x1234])));
            }
            // Atomic operands and address.
            14 => {
                let a = s.ext.entry("atomic_eth".into()).or_default();
                let off = *r.pick(&[0u64, 1, 4, 8, FUZZ_MR_LEN - 8, FUZZ_MR_LEN - 4, FUZZ_MR_LEN]);
                a.insert("va".into(), expr(format!("${{mr.{FUZZ_MR}.addr + {off}}}")));
                a.insert("rkey".into(), expr(format!("${{mr.{FUZZ_MR}.rkey}}")));
                a.insert("swap_add".into(), int(r.next_u64()));
                a.insert("compare".into(), int(r.next_u64()));
            }
            // Immediate data and invalidate keys.
            _ => {
                if r.chance(1, 2) {
                    s.ext
                        .entry("immdt".into())
                        .or_default()
                        .insert("value".into(), int(r.below(1 << 32)));
                } else {
                    s.ext
                        .entry("ieth".into())
                        .or_default()
                        .insert("rkey".into(), expr(format!("${{mr.{FUZZ_MR}.rkey}}")));
                }
            }
        }
    }
}

fn payload(len: u64, seed: u8) -> Bytes {
    Bytes::Generated(GeneratedBytes {
        len: Num::Int(len),
        byte: None,
        seed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stimuli() {
        let mut a = Generator::new(Vec::new(), 7);
        let mut b = Generator::new(Vec::new(), 7);
        for _ in 0..50 {
            let (x, y) = (a.stimulus(), b.stimulus());
            assert_eq!(
                serde_json::to_string(&x).unwrap(),
                serde_json::to_string(&y).unwrap()
            );
        }
    }

    #[test]
    fn psn_offsets_wrap_without_subtraction() {
        assert_eq!(psn_expr(-1), expr("${psn + 16777215}".into()));
        assert_eq!(psn_expr(3), expr("${psn + 3}".into()));
    }

    #[test]
    fn never_the_sentinel() {
        let mut g = Generator::new(Vec::new(), 1);
        for _ in 0..500 {
            assert!(
                !g.stimulus().second_qp,
                "fuzz packets address the fuzz QP only"
            );
        }
    }
}
