//! Independent oracle: scapy (`scapy.contrib.roce` plus the extension headers
//! defined in `tests/oracles/scapy_oracle.py`) against the codec.
//!
//! - scapy → codec: scapy builds frames (every opcode of the table plus
//!   unknown ones, IPv4 and IPv6, 0–2 VLAN tags, payloads 0–4,096 bytes,
//!   every pad count, random fields, ~10 % corrupted ICRCs); the codec must
//!   decode every field as scapy does, judge the ICRC as scapy does, compute
//!   the same ICRC value, and emit the bytes back exactly.
//! - codec → scapy: the codec's `PacketBuilder` makes frames over the same
//!   coverage; scapy must compute the ICRC the codec wrote and decode every
//!   field as it was built.
//!
//! The oracle needs Python with scapy: `$METAROCE_PYTHON`, else the
//! workspace's `.venv/bin/python`. Without it the tests print `SKIP: ...`
//! and pass, except with `CI=true`, where a missing oracle is a failure.

use metaroce_codec::ext::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, CnpRepr, DethRepr, FethRepr, IethRepr, ImmDtRepr,
    RethRepr, Syndrome,
};
use metaroce_codec::{
    BthRepr, EthernetRepr, ExtHeaders, Frame, IpRepr, Msn, Opcode, PacketBuilder, ParseOptions,
    Psn, RocePacket, UdpRepr, VlanTag, icrc,
};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::env;
use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Frames scapy generates for the scapy → codec test.
const GENERATED: usize = 2400;
/// Seed of the scapy generator.
const GENERATE_SEED: u64 = 4791;
/// Frames the codec builds for the codec → scapy test.
const BUILT: usize = 1200;
/// Seed of the Rust generator.
const BUILD_SEED: u64 = 0x5CA9_7000;
/// Disagreements listed when a test fails.
const SHOWN: usize = 20;

/// Payload sizes every data opcode must meet (besides random ones).
const PAYLOAD_EDGES: [usize; 10] = [0, 1, 2, 3, 4, 255, 256, 1024, 4095, 4096];

/// Opcodes with no layout in the codec's table (reserved RC/UC/UD/CNP codes,
/// manufacturer-specific codes outside MetaRoCE's 0xC0–0xCB). The script
/// uses the same list.
const UNKNOWN_OPCODES: [u8; 13] = [
    0x15, 0x18, 0x1B, 0x1E, 0x1F, 0x2C, 0x3F, 0x66, 0x80, 0x82, 0x9F, 0xE0, 0xFF,
];

/// Every opcode both directions cover: RC 0x00–0x14, 0x16, 0x17, FLUSH 0x1C,
/// ATOMIC WRITE 0x1D; UC 0x20–0x2B; UD 0x64, 0x65; CNP 0x81; the unknown ones.
fn opcodes() -> Vec<u8> {
    let mut ops: Vec<u8> = (0x00..=0x14).collect();
    ops.extend([0x16, 0x17, 0x1C, 0x1D]);
    ops.extend(0x20..=0x2B);
    ops.extend([0x64, 0x65, 0x81]);
    ops.extend(UNKNOWN_OPCODES);
    ops
}

// ---------------------------------------------------------------------------
// Finding and running the oracle.
// ---------------------------------------------------------------------------

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracles/scapy_oracle.py")
}

/// The Python that can run the oracle, or why there is none.
fn find_python() -> Result<PathBuf, String> {
    let python = match env::var_os("METAROCE_PYTHON") {
        Some(path) => PathBuf::from(path),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"),
    };
    let out = Command::new(&python)
        .args(["-c", "import scapy, scapy.contrib.roce"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} cannot import scapy: {}",
            python.display(),
            // The last line of the traceback names the problem.
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
                .trim()
        ));
    }
    Ok(python)
}

/// The oracle's Python; `None` (after printing why) when it is missing and
/// this is not CI. With `CI=true` a missing oracle fails the test.
fn oracle() -> Option<PathBuf> {
    match find_python() {
        Ok(python) => Some(python),
        Err(why) if env::var("CI").as_deref() == Ok("true") => {
            panic!(
                "scapy oracle unavailable and CI=true (set METAROCE_PYTHON or create .venv): {why}"
            )
        }
        Err(why) => {
            eprintln!("SKIP: scapy oracle: {why}");
            None
        }
    }
}

/// Runs the script with `args`, feeding `stdin`; returns its standard output.
fn run_script(python: &Path, args: &[&str], stdin: Option<String>) -> String {
    let mut child = Command::new(python)
        .arg(script())
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the scapy oracle: {e}"));
    // Write from another thread so that a full stdout pipe cannot deadlock us.
    let writer = stdin.map(|input| {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        std::thread::spawn(move || pipe.write_all(input.as_bytes()))
    });
    let out = child
        .wait_with_output()
        .expect("the scapy oracle runs to the end");
    if let Some(writer) = writer {
        writer
            .join()
            .expect("stdin writer thread")
            .expect("write frames to the scapy oracle");
    }
    assert!(
        out.status.success(),
        "scapy oracle {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("oracle output is UTF-8")
}

// ---------------------------------------------------------------------------
// Views: every field as "<header>.<field>" → JSON value, named as the script
// names scapy's fields. Flags are 0/1, byte strings lowercase hex.
// ---------------------------------------------------------------------------

type View = BTreeMap<String, Value>;

fn put(view: &mut View, key: &str, value: impl Into<Value>) {
    view.insert(key.to_owned(), value.into());
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd number of hex digits");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digits"))
        .collect()
}

fn view_ethernet(view: &mut View, eth: &EthernetRepr) {
    put(view, "eth.dst", hex(&eth.dst));
    put(view, "eth.src", hex(&eth.src));
    for (i, tag) in eth.tags().iter().enumerate() {
        view_vlan(view, i, tag);
    }
    put(view, "eth.vlan_count", eth.vlan_count);
    put(view, "eth.type", eth.ethertype);
}

fn view_vlan(view: &mut View, index: usize, tag: &VlanTag) {
    put(view, &format!("vlan{index}.tpid"), tag.tpid);
    put(view, &format!("vlan{index}.pcp"), tag.pcp());
    put(view, &format!("vlan{index}.dei"), u8::from(tag.dei()));
    put(view, &format!("vlan{index}.vid"), tag.vid());
}

fn view_ip(view: &mut View, ip: &IpRepr<'_>) {
    match ip {
        IpRepr::V4(v4) => {
            put(view, "ip.version", 4);
            put(view, "ip.ihl", v4.ihl);
            put(view, "ip.tos", v4.tos);
            put(view, "ip.len", v4.total_len);
            put(view, "ip.id", v4.ident);
            put(view, "ip.flags_frag", v4.flags_frag);
            put(view, "ip.ttl", v4.ttl);
            put(view, "ip.proto", v4.protocol);
            put(view, "ip.chksum", v4.checksum);
            put(view, "ip.src", hex(&v4.src.octets()));
            put(view, "ip.dst", hex(&v4.dst.octets()));
            put(view, "ip.options", hex(v4.options));
        }
        IpRepr::V6(v6) => {
            put(view, "ip.version", 6);
            put(view, "ip.tc", v6.traffic_class);
            put(view, "ip.fl", v6.flow_label);
            put(view, "ip.plen", v6.payload_len);
            put(view, "ip.nh", v6.next_header);
            put(view, "ip.hlim", v6.hop_limit);
            put(view, "ip.src", hex(&v6.src.octets()));
            put(view, "ip.dst", hex(&v6.dst.octets()));
        }
    }
}

fn view_udp(view: &mut View, udp: &UdpRepr) {
    put(view, "udp.sport", udp.src_port);
    put(view, "udp.dport", udp.dst_port);
    put(view, "udp.len", udp.length);
    put(view, "udp.chksum", udp.checksum);
}

fn view_bth(view: &mut View, bth: &BthRepr) {
    put(view, "bth.opcode", bth.opcode.0);
    put(view, "bth.se", u8::from(bth.se));
    put(view, "bth.m", u8::from(bth.migreq));
    put(view, "bth.pad_count", bth.pad_count);
    put(view, "bth.tver", bth.tver);
    put(view, "bth.pkey", bth.pkey);
    put(view, "bth.fecn", u8::from(bth.fecn));
    put(view, "bth.becn", u8::from(bth.becn));
    put(view, "bth.resv6a", bth.resv6a);
    put(view, "bth.dest_qp", bth.dest_qp);
    put(view, "bth.ack_req", u8::from(bth.ack_req));
    put(view, "bth.resv7", bth.resv7);
    put(view, "bth.psn", bth.psn.value());
}

/// Every present extension header. Headers scapy has no class for (RDETH,
/// XRCETH, MPETH, SACKETH) get keys too, so that a codec decoding one where
/// scapy sees none is reported.
fn view_ext(view: &mut View, ext: &ExtHeaders) {
    if let Some(h) = ext.reth {
        put(view, "reth.va", h.va);
        put(view, "reth.rkey", h.rkey);
        put(view, "reth.dma_len", h.dma_len);
    }
    if let Some(h) = ext.aeth {
        put(view, "aeth.syndrome", h.syndrome.0);
        put(view, "aeth.msn", h.msn.value());
    }
    if let Some(h) = ext.atomic_eth {
        put(view, "atomic_eth.va", h.va);
        put(view, "atomic_eth.rkey", h.rkey);
        put(view, "atomic_eth.swap_add", h.swap_add);
        put(view, "atomic_eth.compare", h.compare);
    }
    if let Some(h) = ext.atomic_ack_eth {
        put(view, "atomic_ack_eth.orig", h.orig);
    }
    if let Some(h) = ext.immdt {
        put(view, "immdt.value", h.value);
    }
    if let Some(h) = ext.ieth {
        put(view, "ieth.rkey", h.rkey);
    }
    if let Some(h) = ext.deth {
        put(view, "deth.qkey", h.qkey);
        put(view, "deth.reserved", h.reserved);
        put(view, "deth.src_qp", h.src_qp);
    }
    if let Some(h) = ext.feth {
        put(view, "feth.reserved", h.reserved);
        put(view, "feth.selectivity_level", h.selectivity_level);
        put(view, "feth.placement_type", h.placement_type);
    }
    if let Some(h) = ext.cnp {
        put(view, "cnp.reserved", hex(&h.reserved));
    }
    for (present, name) in [
        (ext.rdeth.is_some(), "rdeth"),
        (ext.xrceth.is_some(), "xrceth"),
        (ext.mpeth.is_some(), "mpeth"),
        (ext.sacketh.is_some(), "sacketh"),
    ] {
        if present {
            put(view, &format!("{name}.present"), 1);
        }
    }
}

fn view_body(view: &mut View, payload: &[u8], pad: &[u8]) {
    put(view, "payload_len", payload.len());
    put(view, "payload_crc32", crc32fast::hash(payload));
    put(view, "pad", hex(pad));
}

/// The codec's view of a parsed frame, ICRC judgement included.
fn codec_view(frame: &Frame<'_>) -> View {
    let mut view = View::new();
    view_ethernet(&mut view, &frame.ethernet);
    if let Some(ip) = &frame.ip {
        view_ip(&mut view, ip);
    }
    if let Some(udp) = &frame.udp {
        view_udp(&mut view, udp);
    }
    if let Some(roce) = &frame.roce {
        view_roce(&mut view, roce);
    }
    if let Some(value) = icrc::expected(frame) {
        put(&mut view, "icrc_computed", hex(&value.to_le_bytes()));
    }
    if let Some(valid) = icrc::verify(frame).is_valid() {
        put(&mut view, "icrc_valid", u8::from(valid));
    }
    // Bytes the codec left undecoded; scapy reports none for these frames.
    for (bytes, key) in [
        (frame.payload, "undecoded"),
        (frame.udp_excess, "udp_excess"),
        (frame.trailer, "trailer"),
    ] {
        if !bytes.is_empty() {
            put(&mut view, key, hex(bytes));
        }
    }
    view
}

fn view_roce(view: &mut View, roce: &RocePacket<'_>) {
    view_bth(view, &roce.bth);
    view_ext(view, &roce.ext);
    view_body(view, roce.payload, roce.pad);
    put(view, "icrc", hex(&roce.icrc));
}

// ---------------------------------------------------------------------------
// Comparison.
// ---------------------------------------------------------------------------

#[derive(Default)]
struct Tally {
    frames: usize,
    fields: usize,
    disagreements: Vec<String>,
}

impl Tally {
    /// Every field of `left` must be in `right` with the same value. With
    /// `exhaustive`, every field of `right` must also be in `left`. The
    /// names say who reported what in the messages.
    fn compare(
        &mut self,
        frame: &str,
        (left_name, left): (&str, &Map<String, Value>),
        (right_name, right): (&str, &View),
        exhaustive: bool,
    ) {
        for (key, want) in left {
            self.fields += 1;
            match right.get(key) {
                Some(got) if got == want => {}
                Some(got) => self.disagreements.push(format!(
                    "{frame}: {key}: {left_name} {want}, {right_name} {got}"
                )),
                None => self.disagreements.push(format!(
                    "{frame}: {key}: {left_name} {want}, {right_name} has no such field"
                )),
            }
        }
        if exhaustive {
            for (key, got) in right {
                if !left.contains_key(key) {
                    self.disagreements.push(format!(
                        "{frame}: {key}: {right_name} {got}, {left_name} has no such field"
                    ));
                }
            }
        }
    }

    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        self.fields += 1;
        if !ok {
            self.disagreements.push(what());
        }
    }

    fn finish(self, direction: &str) {
        eprintln!(
            "scapy oracle ({direction}): {} frames, {} fields compared, {} disagreements",
            self.frames,
            self.fields,
            self.disagreements.len()
        );
        if !self.disagreements.is_empty() {
            let shown: Vec<&str> = self
                .disagreements
                .iter()
                .take(SHOWN)
                .map(String::as_str)
                .collect();
            panic!(
                "{} disagreements between scapy and the codec ({direction}); first {}:\n{}",
                self.disagreements.len(),
                shown.len(),
                shown.join("\n")
            );
        }
    }
}

// ---------------------------------------------------------------------------
// (a) scapy → codec
// ---------------------------------------------------------------------------

#[test]
fn scapy_built_frames_decode_as_scapy_decodes_them() {
    let Some(python) = oracle() else { return };
    let count = GENERATED.to_string();
    let seed = GENERATE_SEED.to_string();
    let out = run_script(
        &python,
        &["generate", "--count", &count, "--seed", &seed],
        None,
    );

    let mut tally = Tally::default();
    let mut opcodes_seen = BTreeSet::new();
    let mut ip_versions = BTreeSet::new();
    let mut vlan_counts = BTreeSet::new();
    let mut pad_counts = BTreeSet::new();
    let mut sizes = BTreeSet::new();
    let mut cases = BTreeMap::<String, usize>::new();
    for (i, line) in out.lines().enumerate() {
        let record: Value = serde_json::from_str(line).expect("oracle line is JSON");
        let bytes = unhex(record["hex"].as_str().expect("hex"));
        let expect = record["expect"].as_object().expect("expect object");
        let case = record["case"].as_str().expect("case").to_owned();
        let name = format!("frame {i} ({case}, opcode {})", expect["bth.opcode"]);
        tally.frames += 1;

        opcodes_seen.insert(expect["bth.opcode"].as_u64().expect("opcode"));
        ip_versions.insert(expect["ip.version"].as_u64().expect("ip version"));
        vlan_counts.insert(expect["eth.vlan_count"].as_u64().expect("vlan count"));
        pad_counts.insert(expect["bth.pad_count"].as_u64().expect("pad count"));
        sizes.insert(expect["payload_len"].as_u64().expect("payload len"));
        *cases.entry(case.clone()).or_default() += 1;

        let frame = match Frame::parse(&bytes, &ParseOptions::default()) {
            Ok(frame) => frame,
            Err(e) => {
                tally.fields += expect.len();
                tally.disagreements.push(format!(
                    "{name}: scapy decodes it, the codec rejects it: {e}"
                ));
                continue;
            }
        };
        tally.compare(
            &name,
            ("scapy", expect),
            ("codec", &codec_view(&frame)),
            true,
        );
        tally.check(frame.to_bytes() == bytes, || {
            format!("{name}: emit does not reproduce the bytes")
        });
        // The generator's intent, so that the oracle cannot pass vacuously.
        tally.check((case == "corrupt") == (expect["icrc_valid"] == 0), || {
            format!(
                "{name}: case {case} but scapy says icrc_valid {}",
                expect["icrc_valid"]
            )
        });
    }

    assert_eq!(tally.frames, GENERATED, "one oracle line per frame");
    let missing: Vec<String> = opcodes()
        .into_iter()
        .filter(|op| !opcodes_seen.contains(&u64::from(*op)))
        .map(|op| format!("{op:#04x}"))
        .collect();
    assert!(missing.is_empty(), "opcodes not generated: {missing:?}");
    assert_eq!(ip_versions, BTreeSet::from([4, 6]));
    assert_eq!(vlan_counts, BTreeSet::from([0, 1, 2]));
    assert_eq!(pad_counts, BTreeSet::from([0, 1, 2, 3]));
    for edge in PAYLOAD_EDGES {
        assert!(
            sizes.contains(&(edge as u64)),
            "payload size {edge} not generated"
        );
    }
    for residue in 0..4 {
        let n = sizes.iter().filter(|s| *s % 4 == residue).count();
        assert!(n > 50, "only {n} payload sizes ≡ {residue} mod 4");
    }
    let corrupt = cases.get("corrupt").copied().unwrap_or(0);
    assert!(
        corrupt * 20 >= GENERATED && corrupt * 5 <= GENERATED,
        "corrupted ICRCs: {corrupt} of {GENERATED}"
    );
    assert!(
        cases.get("masked").copied().unwrap_or(0) > 0,
        "no masked-field frames"
    );
    tally.finish("scapy → codec");
}

// ---------------------------------------------------------------------------
// (b) codec → scapy
// ---------------------------------------------------------------------------

/// splitmix64: a small deterministic generator (no dependency needed).
struct SplitMix64(metaroce_agent::rng::SplitMix64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A value of `bits` random bits (1..=64).
    fn bits(&mut self, bits: u32) -> u64 {
        self.next() >> (64 - bits)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// `true` with probability `percent` %.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    fn u8(&mut self) -> u8 {
        self.bits(8) as u8
    }

    fn u16(&mut self) -> u16 {
        self.bits(16) as u16
    }

    fn u32(&mut self) -> u32 {
        self.bits(32) as u32
    }
}

/// One frame the codec built, with the fields it was built from.
struct Built {
    bytes: Vec<u8>,
    spec: View,
}

/// Payload length: the opcode's rule from SPEC §4.3 (none for
/// requests without data and acknowledgements, 8 for ATOMIC WRITE), else an
/// edge size or a random one; unknown opcodes get data too.
fn payload_len(rng: &mut SplitMix64, op: u8) -> usize {
    let no_data = matches!(op, 0x0C | 0x11..=0x14 | 0x1C | 0x81);
    if op == 0x1D {
        8
    } else if no_data {
        0
    } else if rng.chance(30) {
        PAYLOAD_EDGES[rng.below(PAYLOAD_EDGES.len() as u64) as usize]
    } else {
        rng.below(4097) as usize
    }
}

/// Random values in every header the opcode's layout put in `ext`.
fn randomize_ext(rng: &mut SplitMix64, ext: &mut ExtHeaders) {
    if let Some(h) = &mut ext.reth {
        *h = RethRepr {
            va: rng.next(),
            rkey: rng.u32(),
            dma_len: rng.u32(),
        };
    }
    if let Some(h) = &mut ext.aeth {
        *h = AethRepr {
            syndrome: Syndrome(rng.u8()),
            msn: Msn::new(rng.bits(24) as u32),
        };
    }
    if let Some(h) = &mut ext.atomic_eth {
        *h = AtomicEthRepr {
            va: rng.next(),
            rkey: rng.u32(),
            swap_add: rng.next(),
            compare: rng.next(),
        };
    }
    if let Some(h) = &mut ext.atomic_ack_eth {
        *h = AtomicAckEthRepr { orig: rng.next() };
    }
    if let Some(h) = &mut ext.immdt {
        *h = ImmDtRepr { value: rng.u32() };
    }
    if let Some(h) = &mut ext.ieth {
        *h = IethRepr { rkey: rng.u32() };
    }
    if let Some(h) = &mut ext.deth {
        *h = DethRepr {
            qkey: rng.u32(),
            reserved: rng.u8(),
            src_qp: rng.bits(24) as u32,
        };
    }
    if let Some(h) = &mut ext.feth {
        *h = FethRepr {
            reserved: rng.bits(26) as u32,
            selectivity_level: rng.bits(2) as u8,
            placement_type: rng.bits(4) as u8,
        };
    }
    if let Some(h) = &mut ext.cnp
        && rng.chance(30)
    {
        *h = CnpRepr {
            reserved: rng.bytes(16).try_into().expect("16 bytes"),
        };
    }
}

/// Builds one frame of `op` with random fields over the test's coverage.
fn build_random(rng: &mut SplitMix64, op: u8) -> Built {
    let mut spec = View::new();
    let (src_mac, dst_mac): ([u8; 6], [u8; 6]) = (
        rng.bytes(6).try_into().expect("6 bytes"),
        rng.bytes(6).try_into().expect("6 bytes"),
    );
    put(&mut spec, "eth.src", hex(&src_mac));
    put(&mut spec, "eth.dst", hex(&dst_mac));
    let mut builder = PacketBuilder::new(Opcode(op)).macs(src_mac, dst_mac);

    let vlan_count = rng.below(3) as usize;
    put(&mut spec, "eth.vlan_count", vlan_count);
    for i in 0..vlan_count {
        // The outer tag of a double-tagged frame is 802.1Q or 802.1ad.
        let tpid = if i == 0 && vlan_count == 2 && rng.chance(50) {
            0x88A8
        } else {
            0x8100
        };
        let tag = VlanTag {
            tpid,
            tci: rng.u16(),
        };
        view_vlan(&mut spec, i, &tag);
        builder = builder.vlan(tag);
    }

    if rng.chance(50) {
        let (src, dst) = (Ipv4Addr::from(rng.u32()), Ipv4Addr::from(rng.u32()));
        let (tos, ttl, ident) = (rng.u8(), rng.u8(), rng.u16());
        let flags_frag = if rng.chance(50) { 0x4000 } else { 0 };
        builder = builder
            .ipv4(src, dst)
            .traffic_class(tos)
            .hop_limit(ttl)
            .ipv4_ident(ident)
            .ipv4_flags_frag(flags_frag);
        // Rare on RoCE, but both sides cover options in the ICRC.
        let options: &[u8] = match rng.below(40) {
            0 => &[0x94, 0x04, 0x00, 0x00], // Router Alert
            1 => &[0x01, 0x01, 0x01, 0x00], // NOP NOP NOP EOL
            _ => &[],
        };
        builder = builder.ipv4_options(options);
        put(&mut spec, "ip.version", 4);
        put(&mut spec, "ip.src", hex(&src.octets()));
        put(&mut spec, "ip.dst", hex(&dst.octets()));
        put(&mut spec, "ip.tos", tos);
        put(&mut spec, "ip.ttl", ttl);
        put(&mut spec, "ip.id", ident);
        put(&mut spec, "ip.flags_frag", flags_frag);
        put(&mut spec, "ip.options", hex(options));
    } else {
        let (src, dst) = (
            Ipv6Addr::from(u128::from(rng.next()) << 64 | u128::from(rng.next())),
            Ipv6Addr::from(u128::from(rng.next()) << 64 | u128::from(rng.next())),
        );
        let (tc, fl, hlim) = (rng.u8(), rng.bits(20) as u32, rng.u8());
        builder = builder
            .ipv6(src, dst)
            .traffic_class(tc)
            .flow_label(fl)
            .hop_limit(hlim);
        put(&mut spec, "ip.version", 6);
        put(&mut spec, "ip.src", hex(&src.octets()));
        put(&mut spec, "ip.dst", hex(&dst.octets()));
        put(&mut spec, "ip.tc", tc);
        put(&mut spec, "ip.fl", fl);
        put(&mut spec, "ip.hlim", hlim);
    }

    let sport = rng.u16();
    let udp_checksum = if rng.chance(50) { 0 } else { rng.u16() };
    builder = builder.udp_src_port(sport).udp_checksum(udp_checksum);
    put(&mut spec, "udp.sport", sport);
    put(&mut spec, "udp.dport", 4791);
    put(&mut spec, "udp.chksum", udp_checksum);

    let len = payload_len(rng, op);
    let payload = rng.bytes(len);
    let pad_count = (4 - len % 4) % 4;
    // Reserved fields: zero half the time, random otherwise.
    let reserved = rng.chance(50);
    let bth = BthRepr {
        opcode: Opcode(op),
        se: rng.chance(50),
        migreq: rng.chance(50),
        pad_count: pad_count as u8,
        tver: if reserved { rng.bits(4) as u8 } else { 0 },
        pkey: rng.u16(),
        fecn: rng.chance(20),
        becn: op == 0x81 || rng.chance(20),
        resv6a: if reserved { rng.bits(6) as u8 } else { 0 },
        dest_qp: rng.bits(24) as u32,
        ack_req: rng.chance(50),
        resv7: if reserved { rng.bits(7) as u8 } else { 0 },
        psn: Psn::new(rng.bits(24) as u32),
    };
    view_bth(&mut spec, &bth);
    builder = builder.bth(|b| *b = bth);
    let mut ext = *builder.ext_mut();
    randomize_ext(rng, &mut ext);
    view_ext(&mut spec, &ext);
    builder = builder.ext(|e| *e = ext);

    // Pad bytes are zero when sent; sometimes make them not.
    let pad = if rng.chance(10) {
        rng.bytes(pad_count)
    } else {
        vec![0; pad_count]
    };
    view_body(&mut spec, &payload, &pad);
    builder = builder.payload(payload).pad_bytes(pad);
    put(&mut spec, "icrc_valid", 1);

    Built {
        bytes: builder.build(),
        spec,
    }
}

#[test]
fn codec_built_frames_get_the_same_icrc_from_scapy() {
    let Some(python) = oracle() else { return };
    let mut rng = SplitMix64(metaroce_agent::rng::SplitMix64::new(BUILD_SEED));
    let ops = opcodes();
    let built: Vec<Built> = (0..BUILT)
        .map(|i| build_random(&mut rng, ops[i % ops.len()]))
        .collect();
    let input: String = built.iter().map(|b| hex(&b.bytes) + "\n").collect();
    let out = run_script(&python, &["icrc"], Some(input));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), built.len(), "one oracle line per frame");

    let mut tally = Tally::default();
    for (i, (b, line)) in built.iter().zip(lines).enumerate() {
        tally.frames += 1;
        let record: Value = serde_json::from_str(line).expect("oracle line is JSON");
        let name = format!("frame {i} (opcode {})", b.spec["bth.opcode"]);
        let Some(view) = record["view"].as_object() else {
            tally.fields += 1;
            tally.disagreements.push(format!(
                "{name}: scapy cannot decode it: {}",
                record["error"]
            ));
            continue;
        };
        let frame = Frame::parse(&b.bytes, &ParseOptions::default())
            .unwrap_or_else(|e| panic!("{name}: the codec rejects its own frame: {e}"));
        let trailer = hex(&frame.roce.as_ref().expect("RoCE frame").icrc);
        // scapy's ICRC equals the trailer the codec wrote.
        tally.check(view["icrc_computed"] == trailer.as_str(), || {
            format!(
                "{name}: ICRC: scapy computes {}, the codec wrote {trailer}",
                view["icrc_computed"]
            )
        });
        // scapy decodes every field as it was built...
        let fields_built: Map<String, Value> = b.spec.clone().into_iter().collect();
        let scapy: View = view.clone().into_iter().collect();
        tally.compare(&name, ("built", &fields_built), ("scapy", &scapy), false);
        // ...and as the codec decodes it, with nothing more or less.
        tally.compare(&name, ("scapy", view), ("codec", &codec_view(&frame)), true);
    }
    tally.finish("codec → scapy");
}
