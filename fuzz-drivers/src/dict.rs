//! The libFuzzer dictionaries, generated from the codec's tables: every
//! opcode of the opcode table, the AETH syndromes, and the constants of the
//! wire (UDP port 4791, P_Keys, QPNs, PSN edges, PMTU sizes, ethertypes,
//! the GSI Q_Key).
//!
//! `roce.dict` spells values as the wire does (network byte order), for the
//! packet targets; `stateful.dict` spells them as the stateful targets'
//! input format reads them (little-endian), for `model_stateful`,
//! `reference_stateful` and `differential`. `cargo run --example gen-dict`
//! writes both; `codec/tests/fuzz_dict.rs` fails when the committed files
//! differ from what this generates.

use metaroce_codec::ext::{Syndrome, SyndromeKind};
use metaroce_codec::{Dialect, Opcode};
use std::fmt::Write as _;

/// The dictionary files: (file name under `fuzz/dict/`, contents).
pub fn all() -> Vec<(&'static str, String)> {
    vec![("roce.dict", roce()), ("stateful.dict", stateful())]
}

/// Byte order of multi-byte values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    Big,
    Little,
}

fn entry(out: &mut String, name: &str, bytes: &[u8]) {
    let _ = write!(out, "{name}=\"");
    for b in bytes {
        let _ = write!(out, "\\x{b:02x}");
    }
    out.push_str("\"\n");
}

fn int(out: &mut String, name: &str, value: u64, width: usize, order: Order) {
    let le = value.to_le_bytes();
    let mut bytes = le[..width].to_vec();
    if order == Order::Big {
        bytes.reverse();
    }
    entry(out, name, &bytes);
}

/// Every opcode of the codec's table (MetaRoCE dialect), with its name.
fn opcodes(out: &mut String) {
    out.push_str("# Opcodes of the codec's table (BTH byte 0)\n");
    for op in (0..=0xFFu8).map(Opcode) {
        if let Some(layout) = op.layout(Dialect::MetaRoce) {
            let name: String = layout
                .name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_lowercase()
                    } else {
                        '_'
                    }
                })
                .collect();
            entry(out, &format!("op_{:02x}_{name}", op.0), &[op.0]);
        }
    }
}

/// The AETH/SACKETH syndromes: every ACK credit code, every RNR timer, the
/// NAK codes the codec names, and one reserved value of each reserved kind.
fn syndromes(out: &mut String) {
    out.push_str("# AETH syndromes (ACK credit codes, RNR timers, NAK codes)\n");
    for s in (0..=0xFFu8).map(Syndrome) {
        let name = match s.kind() {
            _ if s.0 & 0x80 != 0 => continue,
            SyndromeKind::Ack { credit_code } => format!("ack_credit_{credit_code}"),
            SyndromeKind::RnrNak { timer } => format!("rnr_nak_timer_{timer}"),
            SyndromeKind::Nak { code } if code <= 5 => format!("nak_code_{code}"),
            SyndromeKind::Reserved { value: 0 } => "syndrome_reserved".into(),
            _ => continue,
        };
        entry(out, &format!("syn_{:02x}_{name}", s.0), &[s.0]);
    }
}

fn constants(out: &mut String, order: Order) {
    out.push_str("# Wire constants\n");
    int(out, "udp_port_4791", 4791, 2, order);
    for (name, v) in [
        ("pkey_ffff", 0xFFFF),
        ("pkey_7fff", 0x7FFF),
        ("pkey_8001", 0x8001),
    ] {
        int(out, name, v, 2, order);
    }
    for (name, v) in [
        ("ethertype_ipv4", 0x0800),
        ("ethertype_ipv6", 0x86DD),
        ("ethertype_vlan", 0x8100),
    ] {
        int(out, name, v, 2, order);
    }
    for pmtu in [256u64, 512, 1024, 2048, 4096] {
        int(out, &format!("pmtu_{pmtu}"), pmtu, 2, order);
        int(out, &format!("len_{pmtu}"), pmtu, 4, order);
    }
    int(out, "dma_len_2_31", 1 << 31, 4, order);
    for (name, v) in [
        ("psn_0", 0),
        ("psn_max", 0xFF_FFFF),
        ("psn_half", 0x80_0000),
        ("psn_half_minus_1", 0x7F_FFFF),
        ("qpn_gsi", 1),
        ("qpn_multicast", 0xFF_FFFF),
    ] {
        int(out, name, v, 3, order);
    }
    int(
        out,
        "qkey_gsi",
        u64::from(metaroce_codec::builder::GSI_QKEY),
        4,
        order,
    );
}

/// `roce.dict`: the packet targets' dictionary (network byte order).
pub fn roce() -> String {
    let mut out = String::from(
        "# libFuzzer dictionary for the packet targets (codec_parse, codec_roundtrip,\n\
         # codec_builder). Generated from metaroce-codec's tables by\n\
         # `cargo run --example gen-dict` in fuzz/; do not edit.\n",
    );
    opcodes(&mut out);
    syndromes(&mut out);
    constants(&mut out, Order::Big);
    entry(&mut out, "ipv4_udp_proto", &[17]);
    out
}

/// `stateful.dict`: the stateful targets' dictionary (little-endian, as
/// their input format reads values).
pub fn stateful() -> String {
    let mut out = String::from(
        "# libFuzzer dictionary for the stateful targets (model_stateful,\n\
         # reference_stateful, differential), values little-endian as their input\n\
         # format reads them. Generated from metaroce-codec's tables by\n\
         # `cargo run --example gen-dict` in fuzz/; do not edit.\n",
    );
    opcodes(&mut out);
    syndromes(&mut out);
    constants(&mut out, Order::Little);
    out
}
