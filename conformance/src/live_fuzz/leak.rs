//! The READ-leak oracle ("must not leak bytes into READ responses";
//! MR-SEC-6, MR-SEC-4): a READ request of the batch whose range
//! does not lie inside the `fuzz` MR (with that MR's R_Key) must not be
//! answered with data. Canaries cannot see a read; the harness can, because
//! it knows every request it sent.
//!
//! Judged on the batch's packet log: every READ request the harness sent to
//! the fuzz QP, with the fuzz MR's R_Key, classified by range; a READ
//! response with data at the PSN of an out-of-range request (and of no
//! in-range request) is a finding. The reproducer gets an `expect_none`
//! step for responses at those PSNs.

use super::mutate_send_steps::{FUZZ_MR, psn_expr};
use crate::run::context::Context;
use crate::run::verdict::{Direction, TestResult};
use crate::vector::model::{MatchTest, Matcher, Num, Step};
use metaroce_codec::{Frame, Opcode, ParseOptions};
use std::collections::{BTreeMap, BTreeSet};

/// PSN offsets (from `${psn}`) of out-of-range READs that were answered
/// with data, and a description of the first.
pub fn leaks(result: &TestResult, ctx: &Context) -> Option<(Vec<u32>, String)> {
    let mr = ctx.mrs.get(FUZZ_MR)?;
    let base = ctx.bindings.get("psn")? as u32;
    let h_qpn = ctx.bindings.get("h.qpn")? as u32;
    let options = ParseOptions::default();
    let (mut outside, mut inside) = (BTreeMap::new(), BTreeSet::new());
    let mut leaked = Vec::new();
    for p in &result.packets {
        let Ok(frame) = Frame::parse(&p.bytes, &options) else {
            continue;
        };
        let Some(roce) = frame.roce else { continue };
        let psn = roce.bth.psn.value();
        match p.direction {
            Direction::Sent => {
                if roce.bth.opcode != Opcode::RC_READ_REQUEST || roce.bth.dest_qp != ctx.iut_qpn {
                    continue;
                }
                let Some(reth) = roce.ext.reth else { continue };
                if u64::from(reth.rkey) != mr.rkey || reth.dma_len == 0 {
                    continue;
                }
                let end = reth.va.checked_add(u64::from(reth.dma_len));
                let fits = reth.va >= mr.addr && end.is_some_and(|e| e <= mr.addr + mr.len);
                if fits {
                    inside.insert(psn);
                } else {
                    outside.insert(psn, (reth.va, reth.dma_len));
                }
            }
            Direction::Received => {
                let op = roce.bth.opcode.0;
                let is_response = (Opcode::RC_READ_RESPONSE_FIRST.0
                    ..=Opcode::RC_READ_RESPONSE_ONLY.0)
                    .contains(&op);
                if !is_response || roce.bth.dest_qp != h_qpn || roce.payload.is_empty() {
                    continue;
                }
                if let Some(&(va, len)) = outside.get(&psn)
                    && !inside.contains(&psn)
                {
                    leaked.push((psn, va, len, roce.payload.len()));
                }
            }
        }
    }
    let &(psn, va, len, got) = leaked.first()?;
    let offsets: BTreeSet<u32> = leaked
        .iter()
        .map(|l| l.0.wrapping_sub(base) & 0xFF_FFFF)
        .collect();
    let reason = format!(
        "a READ of {len} bytes at MR `{FUZZ_MR}` + {} (the MR has {} bytes) was answered with {got} data bytes at PSN {psn:#08x} instead of NAK remote access error: bytes from outside the MR",
        va.wrapping_sub(mr.addr) as i64,
        mr.len
    );
    Some((offsets.into_iter().collect(), reason))
}

/// The reproducer's check: no READ response with data at these PSN offsets.
pub fn expect_no_response(offsets: &[u32]) -> Step {
    let psns: Vec<Matcher> = offsets
        .iter()
        .map(|&o| match psn_expr(i64::from(o)) {
            crate::vector::model::Value::Num(Num::Expr(t)) => Matcher::Text(t),
            _ => Matcher::Int(u64::from(o)),
        })
        .collect();
    let names = [
        "RC_READ_RESPONSE_FIRST",
        "RC_READ_RESPONSE_MIDDLE",
        "RC_READ_RESPONSE_LAST",
        "RC_READ_RESPONSE_ONLY",
    ];
    let any = |items: Vec<Matcher>| {
        Matcher::Test(MatchTest {
            any_of: Some(items),
            not: None,
            min: None,
            max: None,
            absent: None,
        })
    };
    let fields = BTreeMap::from([
        (
            "opcode".to_string(),
            any(names.iter().map(|n| Matcher::Text(n.to_string())).collect()),
        ),
        ("bth.dest_qp".to_string(), Matcher::Text("${h.qpn}".into())),
        ("bth.psn".to_string(), any(psns)),
    ]);
    Step::ExpectNone(crate::vector::model::ExpectNoneStep {
        within_us: Num::Int(500),
        lower_bound: false,
        from_step: None,
        fields,
        requirement: Some("MR-SEC-6".into()),
    })
}
