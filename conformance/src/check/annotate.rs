//! `metaroce check --annotate OUT.pcapng`: the capture written back with
//! each finding as a packet comment (`opt_comment`, which Wireshark shows as
//! `frame.comment`) on every frame it concerns.
//!
//! A conversation finding may be known only long after its frames went by
//! (a missing response is found at the end), so annotating takes two
//! passes: the check collects the comments by frame ([`Annotations`], at
//! most [`MAX_ANNOTATIONS`]), then [`write_annotated`] reads the input again
//! and writes every frame, with its comments, as pcapng (one interface with
//! the link type of the first frame; the input's own comments are kept
//! first).

use super::Reported;
use crate::capture::{CaptureError, CaptureReader, PcapNgWriter};
use core::fmt;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::Path;

/// Most comments kept for one run; further findings are counted, not written.
pub const MAX_ANNOTATIONS: usize = 1_000_000;

/// Comments to write, by frame number.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Annotations {
    by_frame: BTreeMap<u64, Vec<String>>,
    count: usize,
    /// Comments not kept because [`MAX_ANNOTATIONS`] were.
    pub dropped: u64,
}

impl Annotations {
    /// Adds finding `r` as a comment on each frame it concerns.
    pub fn add(&mut self, r: &Reported) {
        let others = |me: u64| -> String {
            let rest: Vec<String> = r
                .frames
                .iter()
                .filter(|&&f| f != me)
                .map(u64::to_string)
                .collect();
            if rest.is_empty() {
                String::new()
            } else {
                format!(" (with frame {})", rest.join(", "))
            }
        };
        for &frame in &r.frames {
            if self.count >= MAX_ANNOTATIONS {
                self.dropped += 1;
                continue;
            }
            self.count += 1;
            self.by_frame.entry(frame).or_default().push(format!(
                "metaroce: {} [{}] {}{}",
                r.finding.id,
                r.finding.severity.as_str(),
                r.finding.message,
                others(frame)
            ));
        }
    }

    /// Comments kept.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no comment is kept.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The comments of `frame`.
    pub fn of(&self, frame: u64) -> &[String] {
        self.by_frame.get(&frame).map_or(&[], Vec::as_slice)
    }
}

/// Why annotating failed.
#[derive(Debug)]
pub enum AnnotateError {
    /// Reading the input again failed.
    Read(CaptureError),
    /// Writing the output failed.
    Write(io::Error),
}

impl fmt::Display for AnnotateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnnotateError::Read(e) => write!(f, "reading the capture again: {e}"),
            AnnotateError::Write(e) => write!(f, "writing: {e}"),
        }
    }
}

impl std::error::Error for AnnotateError {}

/// Writes every frame of `input` to `output` as pcapng, each with the
/// comments `notes` holds for it; returns the frames written.
pub fn write_annotated(
    input: &Path,
    output: &Path,
    notes: &Annotations,
) -> Result<u64, AnnotateError> {
    let mut reader = CaptureReader::open(input).map_err(AnnotateError::Read)?;
    let out = File::create(output).map_err(AnnotateError::Write)?;
    let mut writer: Option<PcapNgWriter<BufWriter<File>>> = None;
    let mut out = Some(BufWriter::with_capacity(1 << 20, out));
    let mut written = 0u64;
    while let Some(frame) = reader.next_frame().map_err(AnnotateError::Read)? {
        if writer.is_none() {
            let linktype = u16::try_from(frame.linktype).unwrap_or(1);
            let sink = out
                .take()
                .ok_or_else(|| AnnotateError::Write(io::Error::other("output already started")))?;
            writer = Some(
                PcapNgWriter::new_with_linktype(sink, linktype).map_err(AnnotateError::Write)?,
            );
        }
        let Some(w) = writer.as_mut() else { break };
        let mut comments: Vec<&str> = frame.comments().collect();
        comments.extend(notes.of(frame.number).iter().map(String::as_str));
        w.write_packet_with_comments(frame.timestamp_ns, frame.data, frame.orig_len, &comments)
            .map_err(AnnotateError::Write)?;
        written += 1;
    }
    match (writer, out) {
        (Some(mut w), _) => w.flush().map_err(AnnotateError::Write)?,
        // An empty capture: a pcapng file with its headers only.
        (None, Some(sink)) => PcapNgWriter::new(sink)
            .and_then(|mut w| w.flush())
            .map_err(AnnotateError::Write)?,
        (None, None) => {}
    }
    Ok(written)
}
