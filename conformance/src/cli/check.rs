//! `metaroce check FILE`: the per-packet checks of every frame of a capture.
//!
//! Streams the capture (constant memory), decodes each frame, verifies its
//! ICRC and runs the spec model's static validators; prints each finding with
//! its frame number and requirement ID, then (text) a summary. Exit code 0
//! when no finding is a MUST, 1 otherwise, 4 for bad input: a file that is
//! not a capture or ends inside a record gets a one-line error naming the
//! file and byte offset.
//!
//! After the per-packet validators, the conversation judge
//! ([`metaroce_spec::judge`]) rebuilds each RC connection and judges it with
//! the requester and responder models (`--no-conversation` turns it off); its
//! findings name every frame involved, and the text summary ends with one
//! line per connection.

use crate::capture::CaptureReader;
use crate::check::{
    Checker, Reported, connection_text, reported_json, reported_text, summary_text,
};
use crate::exit;
use clap::{Args, ValueEnum};
use metaroce_spec::Profile;
use metaroce_spec::judge::ConversationConfig;
use metaroce_spec::validate::{Context, PMTU_VALUES};
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

/// Arguments of `metaroce check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Capture file (pcap or pcapng).
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Path MTU of the traffic (256, 512, 1024, 2048 or 4096); unknown by default.
    #[arg(long, value_parser = parse_pmtu)]
    pub pmtu: Option<u32>,
    /// UDP destination port that marks RoCEv2 (repeat for several); a port
    /// other than 4791 is decoded and reported (MR-ENC-11).
    #[arg(long = "port", value_name = "PORT", default_value = "4791")]
    pub ports: Vec<u16>,
    /// Check a Base-only implementation: MP opcodes are not decoded and break MR-OPC-6.
    #[arg(long)]
    pub base: bool,
    /// The capture was taken at the sender, before any switch: ECN CE is the
    /// sender's (MR-ENC-21).
    #[arg(long)]
    pub at_sender: bool,
    /// Do not rebuild and judge the RC conversations (per-packet checks only).
    #[arg(long)]
    pub no_conversation: bool,
    /// Packets may be missing from the capture (lost between a peer and the
    /// capture point, e.g. netem): the conversation judge takes request gaps
    /// as loss and reports missing responses as information.
    #[arg(long)]
    pub lossy: bool,
    /// The requesters' local ACK `timeout` attribute (0–31), when known: the
    /// conversation judge then checks retransmission times (MR-TMR-1 … 4).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=31))]
    pub timeout: Option<u8>,
}

/// Output formats of `check`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One line per finding, then a summary.
    Text,
    /// One JSON object per finding: frame, id, severity, message.
    Jsonl,
}

fn parse_pmtu(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(v) if PMTU_VALUES.contains(&v) => Ok(v),
        _ => Err(format!("{s} is not a PMTU (256, 512, 1024, 2048 or 4096)")),
    }
}

/// Runs `check`; returns the exit code.
pub fn run(args: &CheckArgs) -> u8 {
    let ctx = Context {
        pmtu: args.pmtu,
        roce_ports: args.ports.clone(),
        profile: if args.base {
            Profile::Base
        } else {
            Profile::Mp
        },
        at_sender: args.at_sender,
        ..Context::default()
    };
    let mut checker = if args.no_conversation {
        Checker::new(ctx)
    } else {
        Checker::with_conversation(
            ctx,
            ConversationConfig {
                pmtu: args.pmtu,
                timeout: args.timeout,
                lossy: args.lossy,
                ..ConversationConfig::default()
            },
        )
    };
    let mut reader = match CaptureReader::open(&args.file) {
        Ok(reader) => reader,
        Err(e) => return super::bad_input("check", &args.file, &e),
    };
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    loop {
        let frame = match reader.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(e) => {
                let _ = out.flush();
                return super::bad_input("check", &args.file, &e);
            }
        };
        let found =
            checker.check_frame(frame.number, frame.timestamp_ns, frame.linktype, frame.data);
        if let Err(e) = print(&mut out, args.format, &found) {
            return super::output_error("check", &e);
        }
    }
    let last = checker.finish();
    if let Err(e) = print(&mut out, args.format, &last) {
        return super::output_error("check", &e);
    }
    let summary = checker.summary();
    if args.format == Format::Text {
        let separator = if summary.findings() > 0 { "\n" } else { "" };
        if let Err(e) = write!(out, "{separator}{}", summary_text(summary)) {
            return super::output_error("check", &e);
        }
        let conns = checker.connections();
        if !conns.is_empty() {
            let mut text = String::from("  connections:\n");
            for c in &conns {
                text.push_str(&format!("    {}\n", connection_text(c)));
            }
            if let Err(e) = write!(out, "{text}") {
                return super::output_error("check", &e);
            }
        }
    }
    if let Err(e) = out.flush() {
        return super::output_error("check", &e);
    }
    if summary.must > 0 {
        exit::FAIL
    } else {
        exit::OK
    }
}

fn print(out: &mut impl Write, format: Format, found: &[Reported]) -> io::Result<()> {
    for r in found {
        match format {
            Format::Text => writeln!(out, "{}", reported_text(r))?,
            Format::Jsonl => writeln!(out, "{}", reported_json(r))?,
        }
    }
    Ok(())
}
