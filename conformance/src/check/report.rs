//! How `metaroce check` prints findings and its summary.

use super::Summary;
use core::fmt::Write;
use metaroce_spec::Finding;
use serde_json::{Value, json};

/// `frame N: MR-X-n [severity] message`.
pub fn finding_text(frame: u64, finding: &Finding) -> String {
    format!(
        "frame {frame}: {} [{}] {}",
        finding.id,
        finding.severity.as_str(),
        finding.message
    )
}

/// `{"frame", "id", "severity", "message"}`.
pub fn finding_json(frame: u64, finding: &Finding) -> Value {
    json!({
        "frame": frame,
        "id": finding.id,
        "severity": finding.severity.as_str(),
        "message": finding.message,
    })
}

/// The summary that ends the text output.
pub fn summary_text(summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Summary");
    let _ = writeln!(out, "  frames: {}", summary.frames);
    let _ = writeln!(out, "  RoCE frames: {}", summary.roce_frames);
    let _ = writeln!(out, "  undecodable frames: {}", summary.undecodable);
    let _ = writeln!(
        out,
        "  findings: {} (must {}, should {}, info {})",
        summary.findings(),
        summary.must,
        summary.should,
        summary.info
    );
    let by_id = summary.by_id_in_spec_order();
    if !by_id.is_empty() {
        let _ = writeln!(out, "  by requirement:");
        for (id, n) in by_id {
            let _ = writeln!(out, "    {id:<12} {n}");
        }
    }
    out
}
