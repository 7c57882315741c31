//! The per-packet capture checker behind `metaroce check`: decode each frame,
//! verify its ICRC, run the spec model's static validators
//! ([`metaroce_spec::validate`]) and keep a running summary.
//!
//! Memory does not grow with the capture: a frame's findings are returned to
//! the caller, and the summary holds counters only (one per requirement ID
//! seen, at most the number of requirements).

mod report;

pub use report::{finding_json, finding_text, summary_text};

use crate::decode::LINKTYPE_ETHERNET;
use metaroce_codec::{Frame, Layer, ParseOptions, icrc};
use metaroce_spec::requirements;
use metaroce_spec::validate::{Context, validate_frame, validate_undecodable};
use metaroce_spec::{Finding, Severity};
use std::collections::HashMap;

/// Judges the frames of one capture, in order.
#[derive(Debug)]
pub struct Checker {
    ctx: Context,
    options: ParseOptions,
    summary: Summary,
}

/// Counts over the frames checked so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Frames read.
    pub frames: u64,
    /// Frames that decoded as RoCE or failed inside a RoCE header.
    pub roce_frames: u64,
    /// Frames the codec could not decode (RoCE or not).
    pub undecodable: u64,
    /// Findings of severity MUST.
    pub must: u64,
    /// Findings of severity SHOULD.
    pub should: u64,
    /// Informational findings.
    pub info: u64,
    /// Findings per requirement ID.
    pub by_id: HashMap<&'static str, u64>,
}

impl Summary {
    /// All findings.
    pub fn findings(&self) -> u64 {
        self.must + self.should + self.info
    }

    /// Requirement IDs with their counts, in SPEC.md order (unknown IDs last).
    pub fn by_id_in_spec_order(&self) -> Vec<(&'static str, u64)> {
        let mut ids: Vec<(&'static str, u64)> =
            self.by_id.iter().map(|(id, n)| (*id, *n)).collect();
        ids.sort_by_key(|(id, _)| (requirements::get(id).map_or(usize::MAX, |r| r.line), *id));
        ids
    }

    fn count(&mut self, finding: &Finding) {
        match finding.severity {
            Severity::Must => self.must += 1,
            Severity::Should => self.should += 1,
            Severity::Info => self.info += 1,
        }
        *self.by_id.entry(finding.id).or_default() += 1;
    }
}

impl Checker {
    /// A checker for traffic described by `ctx`.
    pub fn new(ctx: Context) -> Self {
        let options = ctx.parse_options();
        Checker {
            ctx,
            options,
            summary: Summary::default(),
        }
    }

    /// Judges one captured frame and returns its findings.
    pub fn check(&mut self, linktype: u32, data: &[u8]) -> Vec<Finding> {
        self.summary.frames += 1;
        if linktype != LINKTYPE_ETHERNET {
            return Vec::new();
        }
        let findings = match Frame::parse(data, &self.options) {
            Ok(frame) => {
                let status = icrc::verify(&frame);
                if frame.roce.is_some() {
                    self.summary.roce_frames += 1;
                }
                validate_frame(&frame, status, &self.ctx)
            }
            Err(e) => {
                self.summary.undecodable += 1;
                let findings = validate_undecodable(data, &e, &self.ctx);
                // A RoCE header failed, or a RoCE packet sits behind IPv6
                // extension headers (MR-ENC-8).
                if !matches!(
                    e.layer,
                    Layer::Ethernet | Layer::Vlan | Layer::Ipv4 | Layer::Ipv6 | Layer::Udp
                ) || findings.iter().any(|f| f.id == "MR-ENC-8")
                {
                    self.summary.roce_frames += 1;
                }
                findings
            }
        };
        for f in &findings {
            self.summary.count(f);
        }
        findings
    }

    /// The counts so far.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metaroce_codec::{Opcode, PacketBuilder};

    /// An IPv6 RC SEND Only frame with a Destination Options header before UDP.
    fn behind_destination_options() -> Vec<u8> {
        let frame = PacketBuilder::new(Opcode::RC_SEND_ONLY)
            .ack_req(true)
            .payload(vec![1, 2, 3, 4])
            .ipv6("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap())
            .build();
        let ip = 14;
        let mut out = frame[..ip + 40].to_vec();
        out[ip + 6] = 60;
        let len = u16::from_be_bytes([out[ip + 4], out[ip + 5]]) + 8;
        out[ip + 4..ip + 6].copy_from_slice(&len.to_be_bytes());
        out.extend([17, 0, 0, 0, 0, 0, 0, 0]);
        out.extend_from_slice(&frame[ip + 40..]);
        out
    }

    #[test]
    fn ipv6_extension_headers_before_roce_are_mr_enc_8() {
        let mut checker = Checker::new(Context::default());
        let f = checker.check(LINKTYPE_ETHERNET, &behind_destination_options());
        assert_eq!(f.iter().map(|f| f.id).collect::<Vec<_>>(), ["MR-ENC-8"]);
        let s = checker.summary();
        assert_eq!((s.undecodable, s.roce_frames, s.must), (1, 1, 1));
    }
}
