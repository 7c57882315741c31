//! The per-packet capture checker behind `metaroce check`: decode each frame,
//! verify its ICRC, run the spec model's static validators
//! ([`metaroce_spec::validate`]) and keep a running summary.
//!
//! With a [`ConversationConfig`] ([`Checker::with_conversation`]) each RoCE
//! frame also goes to the conversation judge
//! ([`metaroce_spec::judge::ConversationJudge`]), which rebuilds every RC
//! connection and judges it with the requester and responder models; its
//! findings name several frames, and [`Checker::finish`] reports what was
//! required and never observed.
//!
//! Memory does not grow with the capture: a frame's findings are returned to
//! the caller, and the summary holds counters only (one per requirement ID
//! seen, at most the number of requirements); the conversation judge's memory
//! is bounded per connection (see its module).

mod report;

pub use report::{
    connection_text, finding_json, finding_text, reported_json, reported_text, summary_text,
};

use crate::decode::LINKTYPE_ETHERNET;
use metaroce_codec::{Frame, IpRepr, Layer, ParseOptions, icrc};
use metaroce_spec::judge::{
    ConnectionSummary, ConversationConfig, ConversationFinding, ConversationJudge, PacketMeta,
};
use metaroce_spec::requirements;
use metaroce_spec::validate::{Context, validate_frame, validate_undecodable};
use metaroce_spec::{Finding, Severity};
use std::collections::HashMap;
use std::net::IpAddr;

/// Judges the frames of one capture, in order.
#[derive(Debug)]
pub struct Checker {
    ctx: Context,
    options: ParseOptions,
    summary: Summary,
    conversation: Option<ConversationJudge>,
}

/// A finding with the frames it concerns (the first shows it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reported {
    /// Frames involved; a per-packet finding names one.
    pub frames: Vec<u64>,
    /// The finding.
    pub finding: Finding,
    /// Whether the conversation judge (not a per-packet validator) found it.
    pub conversation: bool,
}

impl Reported {
    fn of(c: ConversationFinding) -> Self {
        Reported {
            frames: c.frames,
            finding: c.finding,
            conversation: true,
        }
    }
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
            conversation: None,
        }
    }

    /// A checker that also runs the conversation judge with `cfg`.
    pub fn with_conversation(ctx: Context, cfg: ConversationConfig) -> Self {
        let mut checker = Checker::new(ctx);
        checker.conversation = Some(ConversationJudge::new(cfg));
        checker
    }

    /// Judges frame `number` captured at `timestamp_ns`: the per-packet
    /// findings, then the conversation judge's (when enabled).
    pub fn check_frame(
        &mut self,
        number: u64,
        timestamp_ns: u64,
        linktype: u32,
        data: &[u8],
    ) -> Vec<Reported> {
        let mut all: Vec<Reported> = self
            .check(linktype, data)
            .into_iter()
            .map(|finding| Reported {
                frames: vec![number],
                finding,
                conversation: false,
            })
            .collect();
        let Some(judge) = self.conversation.as_mut() else {
            return all;
        };
        if linktype != LINKTYPE_ETHERNET {
            return all;
        }
        let Ok(frame) = Frame::parse(data, &self.options) else {
            return all;
        };
        let (Some(ip), Some(udp), Some(pkt)) = (frame.ip, frame.udp, frame.roce) else {
            return all;
        };
        let (src, dst) = match ip {
            IpRepr::V4(v4) => (IpAddr::V4(v4.src), IpAddr::V4(v4.dst)),
            IpRepr::V6(v6) => (IpAddr::V6(v6.src), IpAddr::V6(v6.dst)),
        };
        let meta = PacketMeta {
            frame: number,
            timestamp_ns,
            src,
            dst,
            udp_src_port: udp.src_port,
            ecn: ip.ecn(),
            icrc_valid: !matches!(icrc::verify(&frame), icrc::IcrcStatus::Invalid { .. }),
        };
        let found: Vec<Reported> = judge
            .on_packet(&meta, &pkt)
            .into_iter()
            .map(Reported::of)
            .collect();
        for r in &found {
            self.summary.count(&r.finding);
        }
        all.extend(found);
        all
    }

    /// The capture ended: the conversation judge's last findings (responses
    /// required and never observed).
    pub fn finish(&mut self) -> Vec<Reported> {
        let Some(judge) = self.conversation.as_mut() else {
            return Vec::new();
        };
        let found: Vec<Reported> = judge.finish().into_iter().map(Reported::of).collect();
        for r in &found {
            self.summary.count(&r.finding);
        }
        found
    }

    /// The connections the conversation judge follows (empty without it).
    pub fn connections(&self) -> Vec<ConnectionSummary> {
        self.conversation
            .as_ref()
            .map_or_else(Vec::new, ConversationJudge::connections)
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
