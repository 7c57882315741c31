//! How `metaroce check` prints findings and its summary.

use super::{Reported, Summary, Tally};
use core::fmt::Write;
use metaroce_spec::Finding;
use metaroce_spec::judge::{CmMp, ConnectionSummary, LimitSource};
use metaroce_spec::model::mp::setup::Side;
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

/// `frame N: …` for one frame, `frame N (with M, …): …` for several.
pub fn reported_text(r: &Reported) -> String {
    let first = r.frames.first().copied().unwrap_or(0);
    let line = finding_text(first, &r.finding);
    if r.frames.len() <= 1 {
        return line;
    }
    let others: Vec<String> = r.frames[1..].iter().map(u64::to_string).collect();
    let head = format!("frame {first}");
    line.replacen(&head, &format!("{head} (with {})", others.join(", ")), 1)
}

/// A per-packet finding as [`finding_json`]; a conversation finding adds
/// `"frames"` (all frames involved) and `"source": "conversation"`.
pub fn reported_json(r: &Reported) -> Value {
    let mut v = finding_json(r.frames.first().copied().unwrap_or(0), &r.finding);
    if !r.conversation {
        return v;
    }
    if let Some(map) = v.as_object_mut() {
        map.insert("frames".into(), json!(r.frames));
        if !r.qpns.is_empty() {
            map.insert("qpns".into(), json!(r.qpns));
        }
        let source = if r.conversation {
            "conversation"
        } else {
            "packet"
        };
        map.insert("source".into(), json!(source));
    }
    v
}

/// One line per connection: addresses, QPNs, packets, findings.
pub fn connection_text(c: &ConnectionSummary) -> String {
    let requester_qpn = c
        .requester_qpn
        .map_or_else(|| "?".to_string(), |q| format!("{q:#08x}"));
    let mut line = format!(
        "{} QPN {requester_qpn} -> {} QPN {:#08x} ({}, frames {}-{}): {} requests, {} responses, {} conversation findings",
        c.key.requester,
        c.key.responder,
        c.key.responder_qpn,
        if c.mp { "MP" } else { "Base" },
        c.first_frame,
        c.last_frame,
        c.requests,
        c.responses,
        c.findings
    );
    if c.unjudged_requests + c.unjudged_responses > 0 {
        let _ = write!(
            line,
            " ({} requests, {} responses not judged)",
            c.unjudged_requests, c.unjudged_responses
        );
    }
    let b = &c.behaviour;
    let mut shown = Vec::new();
    if let Some([req, rep]) = b.cm {
        shown.push(format!("RDMA-CM REQ {req} REP {rep}"));
    }
    if let Some(m) = b.cm_mp {
        shown.push(cm_mp_text(&m));
    }
    if let Some(p) = b.pmtu {
        shown.push(format!("PMTU {p}"));
    }
    let yes_no = |c: bool| if c { "credits" } else { "no credits" };
    match (b.credits, b.credits_declared) {
        (Some(declared), true) => shown.push(match b.credits_seen {
            Some((seen, frame)) => format!(
                "{} declared, {} seen (frame {frame})",
                yes_no(declared),
                yes_no(seen)
            ),
            None => format!("{} declared", yes_no(declared)),
        }),
        (Some(true), false) => shown.push(format!("credits (from frame {})", b.credits_frame)),
        (Some(false), false) => shown.push("no credits".to_string()),
        (None, _) => {}
    }
    match b.migreq {
        1 => shown.push("M 0".to_string()),
        2 => shown.push("M 1".to_string()),
        3 => shown.push("M mixed".to_string()),
        _ => {}
    }
    if b.ecn_capable {
        shown.push("ECN-capable".to_string());
    }
    if b.ack_req_gap > 0 {
        shown.push(format!("up to {} requests without AckReq", b.ack_req_gap));
    }
    if let Some(l) = b.rd_limit.filter(|_| b.rd_peak > 0) {
        let from = match l.source {
            LimitSource::Cm { .. } => "Responder Resources from RDMA-CM",
            LimitSource::MaxRdAtomic => "max_rd_atomic",
            LimitSource::MaxDestRdAtomic => "max_dest_rd_atomic",
        };
        shown.push(format!(
            "up to {} READ/atomic outstanding as captured ({from} {})",
            b.rd_peak, l.value
        ));
    }
    if !shown.is_empty() {
        let _ = write!(line, "; {}", shown.join(", "));
    }
    line
}

/// What the MP setup blocks of a connection's RDMA-CM exchange agreed
/// (SPEC.md §7.1.1), from its requester's side.
fn cm_mp_text(m: &CmMp) -> String {
    let Some(a) = m.agreed else {
        return "MP asked in the REQ, declined by the REP (Base)".to_string();
    };
    // This direction's requester and responder views (MR-MPN-9).
    let (req_view, resp_view) = match m.requester {
        Side::Active => (a.active, a.passive),
        Side::Passive => (a.passive, a.active),
    };
    let trim = a
        .trim_dscp
        .map_or_else(|| "trimming off".to_string(), |d| format!("trim DSCP {d}"));
    format!(
        "MP set up by the CM: W {}, {trim}, responder {} the O flag, requester {} NAK 0x66",
        a.window,
        if req_view.peer_ordered {
            "honours"
        } else {
            "ignores"
        },
        if resp_view.peer_resource_nak {
            "understands"
        } else {
            "does not understand"
        }
    )
}

/// Counts the conversation judge keeps about its connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JudgeCounts {
    /// Connections closed before the end (idle, or to make room).
    pub evicted: u64,
    /// Responses that paired with no connection.
    pub orphans: u64,
}

/// The summary that ends the text output: counts, findings per requirement
/// (with severity and first frame) and per connection (with their
/// requirements).
pub fn summary_text(
    summary: &Summary,
    tally: &Tally,
    connections: &[ConnectionSummary],
    judge: Option<JudgeCounts>,
) -> String {
    let mut out = String::new();
    let (must, should, info) = tally.counts();
    let _ = writeln!(out, "Summary");
    let _ = writeln!(out, "  frames: {}", summary.frames);
    let _ = writeln!(out, "  RoCE frames: {}", summary.roce_frames);
    let _ = writeln!(out, "  undecodable frames: {}", summary.undecodable);
    if summary.filtered > 0 {
        let _ = writeln!(out, "  frames of the other profile: {}", summary.filtered);
    }
    if summary.cut > 0 {
        let _ = writeln!(
            out,
            "  frames cut short by the capture: {} (payloads not captured: lengths taken from \
             the IP and UDP headers; ICRC not captured: {}; cut inside RoCE headers, not \
             judged: {})",
            summary.cut, summary.icrc_not_captured, summary.cut_in_headers
        );
    }
    if !summary.encapsulated.is_empty() {
        let kinds: Vec<String> = summary
            .encapsulated
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        let _ = writeln!(
            out,
            "  frames inside layers the capture added (taken off; the frame inside is judged): {}",
            kinds.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "  findings: {} (must {must}, should {should}, info {info})",
        must + should + info
    );
    let by_id = tally.by_id();
    if !by_id.is_empty() {
        let _ = writeln!(out, "  by requirement:");
        for (id, t) in by_id {
            let _ = writeln!(
                out,
                "    {id:<12} {:>6}  {:<6} first at frame {}",
                t.total(),
                t.worst().as_str(),
                t.first_frame
            );
        }
        let _ = match crate::spec_site::published_spec() {
            Some(base) => writeln!(out, "    (texts: `metaroce spec show ID`, or {base}#ID)"),
            None => writeln!(out, "    (texts: `metaroce spec show ID`)"),
        };
    }
    for note in &summary.notes {
        let _ = writeln!(out, "  capture note: {note}");
    }
    // Connections with findings; the clean ones are counted (the full list
    // is in `--format jsonl`... and JUnit).
    let flagged: Vec<&ConnectionSummary> = connections
        .iter()
        .filter(|c| c.findings > 0 || !tally.for_connection(c).is_empty())
        .collect();
    let clean = connections.len() - flagged.len();
    if !connections.is_empty() {
        let _ = writeln!(
            out,
            "  connections: {} ({} with findings, {clean} clean)",
            connections.len(),
            flagged.len()
        );
        for c in flagged {
            let _ = write!(out, "    {}", connection_text(c));
            let ids: Vec<String> = tally
                .for_connection(c)
                .iter()
                .map(|(id, t)| format!("{id} x{}", t.total()))
                .collect();
            if !ids.is_empty() {
                let _ = write!(out, " [{}]", ids.join(", "));
            }
            let _ = writeln!(out);
        }
    }
    if let Some(j) = judge
        && j.evicted + j.orphans > 0
    {
        let _ = writeln!(
            out,
            "  connections closed before the end: {}; responses of no connection: {}",
            j.evicted, j.orphans
        );
    }
    out
}
