//! `metaroce decode FILE`: every frame's layers and fields, its ICRC status and
//! any decode error.
//!
//! Frames that do not decode are reported in the output and do not change the
//! exit code; a file that is not a capture, or ends inside a record, is bad
//! input: a one-line error naming the file and byte offset, exit code 4 (after
//! every complete frame before it was printed).

use crate::capture::CaptureReader;
use crate::decode::{Decoded, frame_json, frame_text};
use crate::exit;
use clap::{Args, ValueEnum};
use metaroce_codec::{Dialect, ParseOptions};
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

/// Arguments of `metaroce decode`.
#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// Capture file (pcap or pcapng).
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// UDP destination port that marks RoCEv2 (repeat for several).
    #[arg(long = "port", value_name = "PORT", default_value = "4791")]
    pub ports: Vec<u16>,
    /// Decode as plain RoCEv2: MetaRoCE MP opcodes (0xC0–0xDF) stay unknown.
    #[arg(long)]
    pub base: bool,
}

/// Output formats of `decode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Indented layers and fields, like `tshark -V`.
    Text,
    /// One JSON object per frame.
    Jsonl,
}

/// Runs `decode`; returns the exit code.
pub fn run(args: &DecodeArgs) -> u8 {
    let options = ParseOptions {
        roce_ports: args.ports.clone(),
        dialect: if args.base {
            Dialect::Base
        } else {
            Dialect::MetaRoce
        },
        // Captures hold frames cut short and RoCE v1.
        accept_cut: true,
        roce_v1: true,
    };
    let mut reader = match CaptureReader::open(&args.file) {
        Ok(reader) => reader,
        Err(e) => return super::bad_input("decode", &args.file, &e),
    };
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut text = String::new();
    loop {
        let frame = match reader.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(e) => {
                let _ = out.flush();
                return super::bad_input("decode", &args.file, &e);
            }
        };
        let decoded = Decoded::new(
            frame.number,
            frame.timestamp_ns,
            frame.linktype,
            frame.data,
            &options,
        )
        .with_orig_len(frame.orig_len)
        .with_comments(frame.comments());
        let written = match args.format {
            Format::Jsonl => writeln!(out, "{}", frame_json(&decoded)),
            Format::Text => {
                text.clear();
                frame_text(&decoded, &mut text);
                out.write_all(text.as_bytes())
            }
        };
        if let Err(e) = written {
            return super::output_error("decode", &e);
        }
    }
    match out.flush() {
        Ok(()) => exit::OK,
        Err(e) => super::output_error("decode", &e),
    }
}
