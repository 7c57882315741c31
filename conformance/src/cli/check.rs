//! `metaroce check FILE` (or `--live IFACE`): every frame of a capture
//! judged against SPEC.md, per packet and per conversation.
//!
//! Streams the capture (memory bounded by the connections alive, not by the
//! file; [`crate::check::pipeline`] reads it and hands the frames to the
//! checker, on one thread or several), decodes each frame once, verifies its ICRC and runs the spec
//! model's static validators, then the conversation judge
//! ([`metaroce_spec::judge`], `--no-conversation` turns it off), which
//! rebuilds every connection and judges it with the models; its findings
//! name every frame involved.
//!
//! Outputs: findings as they are found (`--format text`, one line each, or
//! `jsonl`) and a summary per requirement and per connection, or JUnit XML
//! (`--format junit`, or `--junit FILE` beside any format); `--annotate
//! OUT.pcapng` writes the capture back with each finding as a packet
//! comment on its frames. Filters: `--qp` (repeatable) reports the findings
//! of those QPs, `--only` judges only Base or MP frames, `--from` and
//! `--to` judge a time range (see [`crate::check::Filter`]). A progress bar
//! is drawn on stderr for files of 64 MiB or more when stderr is a terminal.
//!
//! Exit code 0 when no reported finding is a MUST, 1 otherwise, 4 for bad
//! input: a file that is not a capture or ends inside a record gets a
//! one-line error naming the file and byte offset (findings before it are
//! printed).

#[cfg(feature = "libpcap")]
mod live;

use crate::check::pipeline::{Ended, Opened, judge_capture};
use crate::check::{
    Annotations, Checker, Declared, Filter, JudgeCounts, Reported, Tally, TimeBound, junit_xml,
    reported_json, reported_text, summary_text, write_annotated,
};
use crate::exit;
use crate::run::capability::load_profile;
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use metaroce_spec::Profile;
use metaroce_spec::judge::ConversationConfig;
use metaroce_spec::model::congestion::np::NpParams;
use metaroce_spec::model::responder::Features;
use metaroce_spec::validate::{Context, PMTU_VALUES};
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};

/// Files at least this large get a progress bar (when stderr is a terminal).
const PROGRESS_MIN_BYTES: u64 = 64 << 20;

/// Arguments of `metaroce check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Capture file (pcap or pcapng); omitted with `--live`.
    pub file: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Also write the verdict as JUnit XML to this file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write the capture back to this pcapng file with each finding as a
    /// comment on its frames (Wireshark's `frame.comment`).
    #[arg(long, value_name = "OUT.pcapng")]
    pub annotate: Option<PathBuf>,
    /// Report only the findings of this QP (either end of a connection, or a
    /// packet's DestQP); repeat for several. Decimal or 0x hex.
    #[arg(long = "qp", value_name = "QPN", value_parser = parse_qpn)]
    pub qps: Vec<u32>,
    /// Judge only the frames of this profile (Base: RC, UC, UD, CNP; MP:
    /// opcodes 0xC0–0xDF).
    #[arg(long, value_enum)]
    pub only: Option<ProfileArg>,
    /// The capability profile of the NICs (YAML, SPEC §2 keys: the file
    /// `metaroce run --profile` takes): judge against what it declares
    /// (credits, cnp_generation, atomics, flush, atomic_write,
    /// send_with_invalidate, immediate, mp, max_pmtu; the SPEC §10.3
    /// mp_reorder_threshold, mp_rto_min, mp_ack_prompt_max, mp_cwnd_max)
    /// instead of learning it; traffic that contradicts a declared value is
    /// a finding naming the frame.
    /// (`base` or `mp` here is the old name of --only.)
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Judge frames from this time on: seconds after the first frame (1.5),
    /// or @ and absolute Unix seconds (@1764431280.25).
    #[arg(long, value_name = "TIME")]
    pub from: Option<TimeBound>,
    /// Judge frames up to this time (same forms as --from); reading stops at
    /// the first frame after it.
    #[arg(long, value_name = "TIME")]
    pub to: Option<TimeBound>,
    /// Path MTU of the traffic (256, 512, 1024, 2048 or 4096); unknown by default.
    #[arg(long, value_parser = parse_pmtu)]
    pub pmtu: Option<u32>,
    /// A further UDP destination port that marks RoCEv2, besides 4791
    /// (repeat for several); a port other than 4791 is decoded and reported
    /// (MR-ENC-11).
    #[arg(long = "port", value_name = "PORT")]
    pub ports: Vec<u16>,
    /// Check a Base-only implementation: MP opcodes are not decoded and break MR-OPC-6.
    #[arg(long)]
    pub base: bool,
    /// The capture was taken at the sender, before any switch: ECN CE is the
    /// sender's (MR-ENC-21).
    #[arg(long)]
    pub at_sender: bool,
    /// Do not rebuild and judge the conversations (per-packet checks only).
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
    /// How far capture timestamps may be off, in µs: every timer window
    /// (retransmission timeout, RNR wait, MP loss by time, CNP delay and
    /// pacing) widens by this much on each side.
    #[arg(long, value_name = "US", default_value_t = 0)]
    pub tolerance: u64,
    /// A connection without a packet for this many seconds is closed: what
    /// it owed is reported and its state forgotten.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub idle: u64,
    /// Keep a shadow memory of up to this many MiB of payload: the bytes
    /// WRITEs and READ responses prove per R_Key, and the values atomics
    /// leave; a READ response or an atomic's original value that
    /// contradicts them is information naming both frames (never a MUST:
    /// the host CPU, other QPs, NAKed WRITEs and lost frames change memory
    /// too). Off (0) by default; header-only frames are skipped.
    #[arg(long, value_name = "MIB", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=4096))]
    pub shadow_memory: u64,
    /// The receivers do not declare `cnp_generation`: CE marks and CNPs are
    /// not judged (MR-CNP-1, MR-CNP-2).
    #[arg(long)]
    pub no_cnp: bool,
    /// `cnp_interval` of the notification points, µs (§10.2).
    #[arg(long, value_name = "US", default_value_t = 50)]
    pub cnp_interval: u64,
    /// `cnp_delay_max` of the notification points, µs (§10.2).
    #[arg(long, value_name = "US", default_value_t = 10)]
    pub cnp_delay: u64,
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Threads in all: N - 1 decode frames and verify their ICRCs beside
    /// the one that reads the capture and runs the conversation judge in
    /// frame order, which also decodes when their results are not ready
    /// (findings and their order do not depend on N); 1 does everything on
    /// one thread. Default: the available cores. Needs a mapped file.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// Read the capture file instead of mapping it into memory (mapping
    /// copies nothing, but the file must not be truncated while it is
    /// checked). Implies one thread.
    #[arg(long)]
    pub no_mmap: bool,
    /// Check a live link instead of a file (BPF `udp port 4791`, or the
    /// --port values); findings are printed as they happen. Stops on Ctrl-C
    /// or after --duration.
    /// (Needs a build with the `libpcap` feature; without it the flag
    /// says how to get one.)
    #[arg(long, value_name = "IFACE", conflicts_with = "file")]
    pub live: Option<String>,
    /// With --live: stop after this many seconds.
    #[arg(long, value_name = "SECS", requires = "live")]
    pub duration: Option<f64>,
}

/// Output formats of `check`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One line per finding, then a summary per requirement and per connection.
    Text,
    /// One JSON object per finding: frame, id, severity, message (and frames,
    /// source, qpns for conversation findings).
    Jsonl,
    /// JUnit XML at the end: a test case per requirement and per connection.
    Junit,
}

/// `--profile` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProfileArg {
    /// RoCEv2 Base: RC, UC, UD and CNP opcodes.
    Base,
    /// Multipath: opcodes 0xC0–0xDF.
    Mp,
}

/// 4791 and the `--port` values, each once.
pub(crate) fn roce_ports(extra: &[u16]) -> Vec<u16> {
    let mut ports = vec![metaroce_codec::udp::ROCEV2_PORT];
    for p in extra {
        if !ports.contains(p) {
            ports.push(*p);
        }
    }
    ports
}

fn parse_pmtu(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(v) if PMTU_VALUES.contains(&v) => Ok(v),
        _ => Err(format!("{s} is not a PMTU (256, 512, 1024, 2048 or 4096)")),
    }
}

fn parse_qpn(s: &str) -> Result<u32, String> {
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    };
    match v {
        Ok(q) if q <= 0xFF_FFFF => Ok(q),
        _ => Err(format!("{s} is not a QPN (0 … 0xffffff)")),
    }
}

/// `--profile base|mp`, the old name of `--only` (when no such file exists).
fn old_only(p: &Path) -> Option<ProfileArg> {
    if p.exists() {
        return None;
    }
    match p.to_str()?.to_ascii_lowercase().as_str() {
        "base" => Some(ProfileArg::Base),
        "mp" => Some(ProfileArg::Mp),
        _ => None,
    }
}

impl CheckArgs {
    /// The `--only` filter, or `--profile base|mp` (its old name, with a
    /// note on stderr) when no such file exists.
    fn only(&self) -> Option<ProfileArg> {
        if self.only.is_some() {
            return self.only;
        }
        let old = old_only(self.profile.as_deref()?)?;
        eprintln!(
            "metaroce check: --profile base|mp is now --only base|mp (--profile takes a capability profile FILE)"
        );
        Some(old)
    }

    /// The capability profile's declarations (none without `--profile FILE`).
    fn declared(&self) -> Result<Declared, String> {
        let Some(p) = self.profile.as_deref() else {
            return Ok(Declared::default());
        };
        if old_only(p).is_some() {
            return Ok(Declared::default());
        }
        let map = load_profile(p).map_err(|e| e.to_string())?;
        Declared::from_profile(&map).map_err(|e| format!("{}: {e}", p.display()))
    }

    fn context(&self) -> Context {
        Context {
            pmtu: self.pmtu,
            roce_ports: roce_ports(&self.ports),
            profile: if self.base {
                Profile::Base
            } else {
                Profile::Mp
            },
            at_sender: self.at_sender,
            ..Context::default()
        }
    }

    fn checker(&self) -> Result<Checker, String> {
        let declared = self.declared()?;
        let mut ctx = self.context();
        if declared.mp == Some(false) {
            // A Base-only NIC (as --base): MP opcodes break MR-OPC-6.
            ctx.profile = Profile::Base;
        }
        let checker = if self.no_conversation {
            Checker::new(ctx)
        } else {
            let np = NpParams {
                interval_ns: self.cnp_interval.saturating_mul(1000),
                delay_max_ns: self.cnp_delay.saturating_mul(1000),
                ..NpParams::default()
            };
            let mut cfg = ConversationConfig {
                pmtu: self.pmtu,
                max_pmtu: declared.max_pmtu,
                timeout: self.timeout,
                lossy: self.lossy,
                tolerance_ns: self.tolerance.saturating_mul(1000),
                idle_ns: self.idle.saturating_mul(1_000_000_000),
                np: (!self.no_cnp && declared.cnp_generation != Some(false)).then_some(np),
                credits: declared.credits,
                features: declared.features.unwrap_or(Features::ALL),
                rd_limits: declared.rd_limits,
                shadow_bytes: usize::try_from(self.shadow_memory << 20).unwrap_or(usize::MAX),
                ..ConversationConfig::default()
            };
            declared.apply_mp(&mut cfg.mp, self.pmtu);
            Checker::with_conversation(ctx, cfg)
        };
        Ok(checker.only_profile(self.only().map(|p| match p {
            ProfileArg::Base => Profile::Base,
            ProfileArg::Mp => Profile::Mp,
        })))
    }
}

/// Where findings go: printed (text, JSON lines), counted, kept for
/// annotation; only those the filter reports.
struct Emitter<W: Write> {
    out: W,
    format: Format,
    filter: Filter,
    tally: Tally,
    notes: Option<Annotations>,
}

impl<W: Write> Emitter<W> {
    fn emit(&mut self, found: &[Reported]) -> io::Result<()> {
        for r in found.iter().filter(|r| self.filter.finding(r)) {
            self.tally.add(r);
            if let Some(n) = self.notes.as_mut() {
                n.add(r);
            }
            match self.format {
                Format::Text => writeln!(self.out, "{}", reported_text(r))?,
                Format::Jsonl => writeln!(self.out, "{}", reported_json(r))?,
                Format::Junit => {}
            }
        }
        Ok(())
    }

    /// The summary (text) or the JUnit report, and the `--junit` file.
    fn conclude(&mut self, checker: &Checker, name: &str, junit: Option<&Path>) -> io::Result<()> {
        let conns: Vec<_> = checker
            .connections()
            .into_iter()
            .filter(|c| self.filter.connection(c))
            .collect();
        let counts = checker.judge().map(|j| JudgeCounts {
            evicted: j.evicted().0,
            orphans: j.orphans(),
        });
        match self.format {
            Format::Text => {
                let (m, s, i) = self.tally.counts();
                let separator = if m + s + i > 0 { "\n" } else { "" };
                let text = summary_text(checker.summary(), &self.tally, &conns, counts);
                write!(self.out, "{separator}{text}")?;
            }
            Format::Jsonl => {}
            Format::Junit => {
                let xml = junit_xml(name, checker.summary(), &self.tally, &conns);
                write!(self.out, "{xml}")?;
            }
        }
        if let Some(path) = junit {
            let xml = junit_xml(name, checker.summary(), &self.tally, &conns);
            std::fs::write(path, xml)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        }
        self.out.flush()
    }

    fn verdict(&self) -> u8 {
        if self.tally.counts().0 > 0 {
            exit::FAIL
        } else {
            exit::OK
        }
    }
}

/// Runs `check`; returns the exit code.
pub fn run(args: &CheckArgs) -> u8 {
    if let Some(iface) = args.live.as_deref() {
        #[cfg(feature = "libpcap")]
        return live::run(args, iface);
        #[cfg(not(feature = "libpcap"))]
        {
            eprintln!(
                "metaroce check: --live {iface}: this metaroce was built without the `libpcap` feature; \
                 rebuild with it (apt-get install libpcap-dev; \
                 cargo install --locked --path conformance --features libpcap), \
                 or capture with `tcpdump -i {iface} -w F.pcap udp port 4791` and run `metaroce check F.pcap`"
            );
            return exit::BAD_INPUT;
        }
    }
    let Some(file) = args.file.as_deref() else {
        eprintln!("metaroce check: give a capture FILE (or --live IFACE with the libpcap feature)");
        return exit::BAD_INPUT;
    };
    let mut checker = match args.checker() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("metaroce check: {e}");
            return exit::BAD_INPUT;
        }
    };
    let mut opened = match Opened::open(file, args.no_mmap) {
        Ok(opened) => opened,
        Err(e) => return super::bad_input("check", file, &e),
    };
    let mut em = Emitter {
        // Not the locked handle: the judge may run on any of the threads
        // (`check::parallel`), and this buffer takes the lock only when it
        // writes 64 KiB out.
        out: BufWriter::with_capacity(1 << 16, io::stdout()),
        format: args.format,
        filter: Filter::new(args.qps.clone(), args.from, args.to),
        tally: Tally::default(),
        notes: args.annotate.as_ref().map(|_| Annotations::default()),
    };
    let progress = progress_bar(file, args.no_progress);
    let threads = args.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, usize::from),
        usize::from,
    );
    let time = em.filter.clone();
    let ended = judge_capture(
        &mut opened,
        threads,
        &mut checker,
        time,
        &mut |found: &[Reported]| em.emit(found),
        progress.as_ref(),
    );
    match ended {
        Ended::Done => {}
        Ended::BadInput(e) => {
            let _ = em.out.flush();
            if let Some(pb) = &progress {
                pb.finish_and_clear();
            }
            return super::bad_input("check", file, &e);
        }
        Ended::Output(e) => return super::output_error("check", &e),
    }
    if let Some(pb) = &progress {
        pb.finish_and_clear();
    }
    let last = checker.finish();
    let name = file.display().to_string();
    if let Err(e) = em
        .emit(&last)
        .and_then(|()| em.conclude(&checker, &name, args.junit.as_deref()))
    {
        return super::output_error("check", &e);
    }
    if let (Some(out), Some(notes)) = (args.annotate.as_deref(), em.notes.as_ref()) {
        if notes.dropped > 0 {
            eprintln!(
                "metaroce check: {} findings beyond the first {} were not written as comments",
                notes.dropped,
                crate::check::MAX_ANNOTATIONS
            );
        }
        match write_annotated(file, out, notes) {
            Ok(_) => {}
            Err(crate::check::AnnotateError::Read(e)) => {
                return super::bad_input("check", file, &e);
            }
            Err(e) => {
                eprintln!("metaroce check: --annotate {}: {e}", out.display());
                return exit::ERROR;
            }
        }
    }
    em.verdict()
}

/// A progress bar over the file's bytes, when it is large and stderr is a
/// terminal.
fn progress_bar(file: &Path, disabled: bool) -> Option<ProgressBar> {
    if disabled || !io::stderr().is_terminal() {
        return None;
    }
    let len = std::fs::metadata(file).ok()?.len();
    if len < PROGRESS_MIN_BYTES {
        return None;
    }
    let pb = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} checking [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    Some(pb)
}
