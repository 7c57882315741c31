//! Interoperability with Wireshark's `tshark`, when it is installed.
//!
//! Without tshark these tests print a `SKIP` line and pass, unless `CI=true`,
//! where a missing tshark fails them.

use std::path::PathBuf;
use std::process::Command;

use super::packet;
use crate::capture::{ByteOrder, PcapConfig, PcapNgWriter, PcapWriter};

/// True if tshark runs; otherwise prints SKIP (or panics when `CI=true`).
fn require_tshark(test: &str) -> bool {
    let runs = Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !runs {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!(
                "{test}: tshark is not installed, and CI=true requires it (apt-get install tshark)"
            );
        }
        eprintln!("SKIP {test}: tshark not found on PATH");
    }
    runs
}

/// A file in the temp directory, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, bytes: &[u8]) -> Self {
        let path =
            std::env::temp_dir().join(format!("metaroce-capture-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `tshark -T fields` output for `fields`, one line per packet, fields joined by `|`.
fn fields(file: &TempFile, fields: &[&str]) -> Result<Vec<String>, String> {
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r"]).arg(&file.0);
    cmd.args(["-T", "fields", "-E", "separator=|"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}

#[test]
fn tshark_shows_pcapng_comments_and_timestamps() {
    if !require_tshark("tshark_shows_pcapng_comments_and_timestamps") {
        return;
    }
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    w.write_packet(1_700_000_000_123_456_789, &packet(60, 1), 60, None)
        .unwrap();
    w.write_packet(
        1_700_000_001_000_000_001,
        &packet(61, 2),
        1514,
        Some("first"),
    )
    .unwrap();
    w.write_packet_with_comments(
        170_000_000_250_000_000,
        &packet(64, 3),
        64,
        &["second", "third"],
    )
    .unwrap();
    let file = TempFile::new("comments.pcapng", &w.into_inner());

    // Wireshark 3.6 renamed `pkt_comment` to `frame.comment`.
    let comments = fields(&file, &["frame.comment"])
        .or_else(|_| fields(&file, &["pkt_comment"]))
        .expect("tshark reads the file");
    assert_eq!(comments, ["", "first", "second,third"]);

    let details = fields(&file, &["frame.time_epoch", "frame.len", "frame.cap_len"]).unwrap();
    assert_eq!(
        details,
        [
            "1700000000.123456789|60|60",
            "1700000001.000000001|1514|61",
            "170000000.250000000|64|64",
        ]
    );
}

#[test]
fn tshark_reads_big_endian_nanosecond_pcap() {
    if !require_tshark("tshark_reads_big_endian_nanosecond_pcap") {
        return;
    }
    let config = PcapConfig {
        byte_order: ByteOrder::Big,
        ..PcapConfig::default()
    };
    let mut w = PcapWriter::with_config(Vec::new(), config).unwrap();
    w.write_packet(1_700_000_000_000_000_007, &packet(42, 9), 100)
        .unwrap();
    let file = TempFile::new("big-endian.pcap", &w.into_inner());
    let details = fields(&file, &["frame.time_epoch", "frame.len", "frame.cap_len"]).unwrap();
    assert_eq!(details, ["1700000000.000000007|100|42"]);
}
