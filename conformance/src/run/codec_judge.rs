//! Static codec vectors: decode the frame, match its fields, and compare
//! the per-packet findings of the spec model with the vector's list.

use super::context::Context;
use super::iut::Endpoint;
use super::matching::{check_fields, frame_view, summary};
use super::verdict::{Direction, PacketRecord, StepRecord, TestResult, Verdict};
use crate::vector::CodecVector;
use metaroce_codec::{Dialect, Frame, ParseOptions, icrc};
use metaroce_spec::validate::{self, Context as ValidateContext};
use std::collections::{BTreeMap, BTreeSet};

/// The requirement IDs the per-packet validators report for `bytes`.
pub fn findings(bytes: &[u8], base_only: bool) -> BTreeSet<String> {
    let mut ctx = ValidateContext::default();
    let mut options = ParseOptions::default();
    if base_only {
        ctx.profile = metaroce_spec::Profile::Base;
        options.dialect = Dialect::Base;
    }
    match Frame::parse(bytes, &options) {
        Ok(frame) => validate::validate_frame(&frame, icrc::verify(&frame), &ctx),
        Err(e) => validate::validate_undecodable(bytes, &e, &ctx),
    }
    .into_iter()
    .map(|f| f.id.to_string())
    .collect()
}

/// Judges one codec vector.
pub fn judge(v: &CodecVector, file: &str) -> TestResult {
    let mut steps = Vec::new();
    let mut verdict = Verdict::Pass;
    let mut reason = None;
    let bytes = crate::vector::hex::decode(&v.frame).unwrap_or_default();
    let view = frame_view(&bytes);
    let ctx = Context {
        bindings: Default::default(),
        harness: Endpoint {
            mac: [0; 6],
            ip: core::net::Ipv4Addr::UNSPECIFIED,
        },
        iut: Endpoint {
            mac: [0; 6],
            ip: core::net::Ipv4Addr::UNSPECIFIED,
        },
        iut_qpn: 0,
        iut_qpn2: 0,
        cq: 0,
        udp_sport: 0,
        p_key: 0xFFFF,
        traffic_class: 0,
        mrs: BTreeMap::new(),
        start_ns: 0,
        margin_ns: 0,
        rtr_attrs: Default::default(),
        counters_at_start: BTreeMap::new(),
    };
    match check_fields(&view, &v.fields, &ctx) {
        Ok(()) => steps.push(StepRecord {
            index: 0,
            kind: "fields".into(),
            ok: true,
            detail: format!("{} fields match", v.fields.len()),
        }),
        Err(misses) => {
            let r = misses.join("; ");
            steps.push(StepRecord {
                index: 0,
                kind: "fields".into(),
                ok: false,
                detail: r.clone(),
            });
            verdict = Verdict::Fail;
            reason = Some(r);
        }
    }
    let found = findings(&bytes, v.base_only);
    let wanted: BTreeSet<String> = v.findings.iter().cloned().collect();
    let ok = found == wanted;
    let detail = format!(
        "findings: expected [{}], got [{}]",
        wanted.iter().cloned().collect::<Vec<_>>().join(", "),
        found.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    steps.push(StepRecord {
        index: 1,
        kind: "findings".into(),
        ok,
        detail: detail.clone(),
    });
    if !ok && verdict == Verdict::Pass {
        verdict = Verdict::Fail;
        reason = Some(detail);
    }
    TestResult {
        id: v.id.clone(),
        title: v.title.clone(),
        file: file.to_string(),
        requirements: v.requirements.clone(),
        profile: "codec".into(),
        role: "codec".into(),
        area: TestResult::area_of(&v.requirements[0]),
        verdict,
        failed_requirement: (verdict == Verdict::Fail).then(|| v.requirements[0].clone()),
        reason,
        duration_us: 0,
        attempts: 1,
        steps,
        packets: vec![PacketRecord {
            at_ns: 0,
            direction: Direction::Sent,
            step: Some(0),
            summary: summary(&view),
            note: "codec vector frame".into(),
            bytes,
        }],
    }
}
