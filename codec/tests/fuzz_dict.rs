//! The libFuzzer dictionaries committed under `fuzz/dict/` are what the
//! fuzz targets' generator (`fuzz-drivers/src/dict.rs`, from the codec's opcode and
//! syndrome tables) writes today: a new opcode or syndrome in the codec
//! shows up here until `cargo run --example gen-dict` (in fuzz/) is rerun.
//!
//! The generator is `metaroce-fuzz-drivers`' (a dev-dependency).

use metaroce_fuzz_drivers::dict;

use std::path::Path;

#[test]
fn committed_dictionaries_are_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/dict");
    for (name, want) in dict::all() {
        let path = dir.join(name);
        let have = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        assert!(
            have == want,
            "fuzz/dict/{name} is stale: rerun `cargo run --manifest-path fuzz/Cargo.toml --example gen-dict`"
        );
    }
}

#[test]
fn dictionaries_name_every_table_opcode_once() {
    // libFuzzer's dictionary syntax: name="\xNN...", one per line.
    let roce = dict::roce();
    let opcodes = roce.lines().filter(|l| l.starts_with("op_")).count();
    let table = (0..=0xFFu8)
        .filter(|&o| {
            metaroce_codec::Opcode(o)
                .layout(metaroce_codec::Dialect::MetaRoce)
                .is_some()
        })
        .count();
    assert_eq!(opcodes, table);
    for line in roce.lines().filter(|l| !l.starts_with('#')) {
        let (name, value) = line.split_once('=').expect("name=value");
        assert!(
            !name.is_empty() && value.starts_with('"') && value.ends_with('"'),
            "{line}"
        );
    }
}
