//! Writes the seed corpora of the fuzz targets.
//!
//! ```text
//! cargo run --manifest-path fuzz/Cargo.toml --example seed-corpus -- [--out DIR] [FRAMES.hex ...]
//! ```
//!
//! - `DIR/codec_parse` and `DIR/codec_roundtrip` get the same frames: every
//!   opcode of the codec's table built with `PacketBuilder` in two variants
//!   (IPv4/IPv6, 0–2 VLAN tags, several payload sizes), a few edge frames
//!   (unknown opcodes, not RoCE, Ethernet padding and FCS, wrong ICRC, cut
//!   short), the known frames of `seeds/known_frames.hex`, and the frames of
//!   every extra hex file named on the command line (one frame per line, white
//!   space ignored, `#` comment lines), such as the scapy oracle's.
//! - `DIR/codec_builder` gets one input per table opcode, in the byte layout
//!   `BuilderSpec` documents, each checked to describe a valid frame.
//!
//! `DIR` defaults to the crate's `corpus/`. Files are named by the SHA-1 of
//! their content, as libFuzzer names them, so reruns add nothing twice and
//! leave other files (fuzzer finds, other seeds) alone. Every frame must pass
//! `check_parse` and `check_roundtrip` first: a frame that does not is a bug,
//! and the program stops naming it.

use arbitrary::{Arbitrary, Unstructured};
use metaroce_codec::opcode::PayloadRule;
use metaroce_codec::{Dialect, Opcode, PacketBuilder, VlanTag};
use metaroce_fuzz::spec::Expect;
use metaroce_fuzz::{BuilderSpec, check_builder, check_parse, check_roundtrip};
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Payload sizes the built frames cycle through (data-carrying opcodes only).
const PAYLOAD_SIZES: [usize; 10] = [0, 1, 2, 3, 4, 5, 31, 64, 256, 1024];

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("seed-corpus: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = crate_dir.join("corpus");
    let mut hex_files = vec![crate_dir.join("seeds/known_frames.hex")];
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = PathBuf::from(args.next().ok_or("--out needs a directory")?),
            "-h" | "--help" => {
                println!("usage: seed-corpus [--out DIR] [FRAMES.hex ...]");
                return Ok(());
            }
            _ => hex_files.push(PathBuf::from(arg)),
        }
    }

    let mut frames = built_frames();
    frames.extend(edge_frames());
    for file in &hex_files {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        frames.extend(parse_hex_frames(&text).map_err(|e| format!("{}: {e}", file.display()))?);
    }
    for (i, frame) in frames.iter().enumerate() {
        check_parse(frame)
            .and_then(|()| check_roundtrip(frame))
            .map_err(|e| format!("seed frame {i} ({}) fails: {e}", to_hex(frame)))?;
    }
    let mut written = 0;
    for target in ["codec_parse", "codec_roundtrip"] {
        written += write_corpus(&out.join(target), &frames)?;
    }
    let specs = builder_seeds()?;
    written += write_corpus(&out.join("codec_builder"), &specs)?;
    println!(
        "seed-corpus: {} frames, {} builder inputs, {written} new files in {}",
        frames.len(),
        specs.len(),
        out.display()
    );
    Ok(())
}

/// Every opcode with a layout in the MetaRoCE dialect.
fn table_opcodes() -> Vec<Opcode> {
    (0..=255u8)
        .map(Opcode)
        .filter(|op| op.layout(Dialect::MetaRoce).is_some())
        .collect()
}

/// Two valid frames per table opcode, varying IP version, tags and payload.
fn built_frames() -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    for (k, opcode) in table_opcodes().into_iter().enumerate() {
        let carries_data = opcode
            .layout(Dialect::MetaRoce)
            .is_some_and(|l| l.payload == PayloadRule::Data);
        for variant in [2 * k, 2 * k + 1] {
            let size = if carries_data {
                PAYLOAD_SIZES[variant % PAYLOAD_SIZES.len()]
            } else {
                0
            };
            let payload: Vec<u8> = (0..size).map(|i| (i * 7 + k) as u8).collect();
            let mut b = PacketBuilder::new(opcode)
                .psn((variant as u32) * 0x1_0101)
                .dest_qp(0x100 + k as u32)
                .ack_req(variant % 3 == 0)
                .udp_src_port(0xC000 + variant as u16)
                .payload(payload);
            if variant % 4 >= 2 {
                b = b.ipv6(
                    Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
                    Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2),
                );
            }
            for tag in 0..(variant % 3) as u16 {
                b = b.vlan(VlanTag::dot1q(3, 100 + tag));
            }
            frames.push(b.build());
        }
    }
    frames
}

/// Frames at the edges of what the parser accepts.
fn edge_frames() -> Vec<Vec<u8>> {
    let send = || PacketBuilder::new(Opcode::RC_SEND_ONLY).payload(*b"seed");
    let mut frames = vec![
        // Unknown opcodes: everything after the BTH is payload.
        PacketBuilder::new(Opcode(0x15)).payload([1; 9]).build(),
        PacketBuilder::new(Opcode(0xCC)).payload([2; 20]).build(),
        PacketBuilder::new(Opcode(0xFF)).payload([3; 3]).build(),
        // UDP to another port, an IPv4 fragment, another IP protocol.
        send().udp_dst_port(4792).build(),
        send().ipv4_flags_frag(0x2000).build(),
        send().ip_protocol(6).build(),
        // Ethernet padding and FCS after the datagram; IPv4 options.
        send().trailer([0; 8]).build(),
        send().ipv4_options([1, 1, 1, 0]).build(),
        // Wrong ICRC, odd pad count, reserved bits set.
        send().corrupt_icrc().build(),
        send().pad_count(3).pad_bytes([0xAA; 3]).build(),
        send()
            .bth(|b| {
                b.tver = 0xF;
                b.resv6a = 0x3F;
                b.resv7 = 0x7F;
            })
            .build(),
        // Lengths that disagree, and a frame cut short: parse errors.
        send().udp_length(9).build(),
        send().ip_length(2000).build(),
        send().truncate(40).build(),
    ];
    // A non-IP frame (ARP EtherType).
    let mut arp = vec![0xFF; 6];
    arp.extend([0x02, 0, 0, 0, 0, 0x01, 0x08, 0x06]);
    arp.extend([0; 28]);
    frames.push(arp);
    frames
}

/// One `codec_builder` input per table opcode, each a valid frame.
fn builder_seeds() -> Result<Vec<Vec<u8>>, String> {
    let mut seeds = Vec::new();
    for (k, opcode) in table_opcodes().into_iter().enumerate() {
        let mut input = vec![opcode.0, (k % 2) as u8, (k % 3) as u8];
        input.resize(160, 0);
        let spec = BuilderSpec::arbitrary_take_rest(Unstructured::new(&input))
            .map_err(|e| format!("builder seed for {opcode}: {e}"))?;
        if spec.opcode != opcode || spec.expect() != (Expect::ReadsBack { icrc_valid: true }) {
            return Err(format!(
                "builder seed for {opcode} does not decode as meant: {spec:?}"
            ));
        }
        check_builder(&spec).map_err(|e| format!("builder seed for {opcode}: {e}"))?;
        seeds.push(input);
    }
    Ok(seeds)
}

/// Frames of a hex file: one per non-blank line, `#` lines are comments.
fn parse_hex_frames(text: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut frames = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let digits: Vec<u8> = line.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        let frame: Option<Vec<u8>> = digits
            .len()
            .is_multiple_of(2)
            .then(|| {
                digits
                    .chunks(2)
                    .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
                    .collect()
            })
            .flatten();
        frames.push(frame.ok_or(format!("line {}: not an even run of hex digits", n + 1))?);
    }
    Ok(frames)
}

/// Writes each input as `DIR/<sha1 of content>`; returns how many were new.
fn write_corpus(dir: &Path, inputs: &[Vec<u8>]) -> Result<usize, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut new = 0;
    for input in inputs {
        let path = dir.join(sha1_smol::Sha1::from(input).digest().to_string());
        if !path.exists() {
            std::fs::write(&path, input)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            new += 1;
        }
    }
    Ok(new)
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
