//! Seeds of `metaroce fuzz`: the `send` steps of the committed vectors
//! (one corpus with the suite, conformance/FUZZ.md), rewritten for the fuzz setup.
//!
//! Taken from Base vectors where the harness is the requester on an RC QP.
//! Every MR a seed names becomes the fuzz MR (`mr.X.addr` → `mr.fuzz.addr`),
//! `second_qp` and `iut.qpn2`/`h.qpn2` become the fuzz QP's (the sentinel is
//! never a target), the PSN is left to the generator (which numbers the
//! batch's requests from `${psn}`), `repeat` is dropped. A seed that still
//! names something the fuzz setup does not bind (a captured value) is
//! skipped.

use super::batch;
use crate::vector::model::{Profile, Role, SendStep, Step};
use crate::vector::{VectorSet, load::check_vector};

/// The rewritten seeds of `set`, and how many `send` steps were skipped.
pub fn from_vectors(set: &VectorSet) -> (Vec<SendStep>, usize) {
    let mut seeds = Vec::new();
    let mut skipped = 0;
    for loaded in &set.tests {
        let v = &loaded.vector;
        if v.profile != Profile::Base || v.role != Role::Requester || v.setup.qp.qp_type != "rc" {
            continue;
        }
        for step in &v.steps {
            let Step::Send(s) = step else { continue };
            match rewrite(s) {
                Some(r) => seeds.push(r),
                None => skipped += 1,
            }
        }
    }
    (seeds, skipped)
}

/// Rewrites one `send` step for the fuzz setup; `None` when it cannot be.
pub fn rewrite(step: &SendStep) -> Option<SendStep> {
    let mut json = serde_json::to_value(step).ok()?;
    rename(&mut json);
    let mut s: SendStep = serde_json::from_value(json).ok()?;
    s.second_qp = false;
    s.repeat = None;
    s.bth.remove("psn");
    s.note = Some("seed".into());
    // Checked the way the loader checks a vector: every name bound.
    let probe = batch::batch_vector("fuzz.seed-check", &[s.clone()], 0, false);
    check_vector(&probe).ok()?;
    Some(s)
}

/// Renames MRs and second-QP names in every string of a JSON value.
fn rename(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(text) => *text = rename_text(text),
        serde_json::Value::Array(items) => items.iter_mut().for_each(rename),
        serde_json::Value::Object(map) => map.values_mut().for_each(rename),
        _ => {}
    }
}

fn rename_text(text: &str) -> String {
    let text = text.replace("qpn2", "qpn");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(i) = rest.find("mr.") {
        let boundary = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
        out.push_str(&rest[..i + 3]);
        rest = &rest[i + 3..];
        if !boundary {
            continue;
        }
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(rest.len());
        if rest[name_len..].starts_with('.') {
            out.push_str(super::mutate_send_steps::FUZZ_MR);
            rest = &rest[name_len..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::rename_text;

    #[test]
    fn every_mr_becomes_the_fuzz_mr() {
        assert_eq!(
            rename_text("${mr.buf.addr + mr.dst_2.len - 1}"),
            "${mr.fuzz.addr + mr.fuzz.len - 1}"
        );
        assert_eq!(rename_text("${iut.qpn2}"), "${iut.qpn}");
        assert_eq!(rename_text("plain"), "plain");
    }
}
