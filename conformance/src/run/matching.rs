//! Judging an observed frame or completion against a step's matchers.
//! A frame is seen as `metaroce decode --format jsonl` shows it, plus
//! `payload` (hex) and `syndrome` (a name, from AETH or SACKETH).

use super::context::Context;
use super::packet::num;
use crate::decode::{Decoded, LINKTYPE_ETHERNET, frame_json};
use crate::vector::expr;
use crate::vector::model::{MatchTest, Matcher, Num};
use metaroce_codec::ParseOptions;
use serde_json::Value;
use std::collections::BTreeMap;

/// The JSON view of a frame the IUT sent: `metaroce decode --format jsonl`
/// plus `opcode` (the codec's constant name, `RC_ACK`), `payload` (hex) and
/// `syndrome` (a name).
pub fn frame_view(bytes: &[u8]) -> Value {
    let decoded = Decoded::new(0, 0, LINKTYPE_ETHERNET, bytes, &ParseOptions::default());
    let mut view = frame_json(&decoded);
    if let (Value::Object(map), Ok(frame)) = (&mut view, &decoded.frame)
        && let Some(roce) = &frame.roce
    {
        let op = roce.bth.opcode;
        let name = metaroce_codec::Opcode::CONSTANTS
            .iter()
            .find(|(_, o)| *o == op)
            .map_or_else(|| format!("{:#04x}", op.0), |(n, _)| (*n).to_string());
        map.insert("opcode".into(), Value::String(name));
        map.insert(
            "payload".into(),
            Value::String(crate::vector::hex::encode(roce.payload)),
        );
        let syn = roce
            .ext
            .aeth
            .map(|a| a.syndrome.0)
            .or(roce.ext.sacketh.map(|s| s.syndrome.0));
        if let Some(s) = syn {
            map.insert("syndrome".into(), Value::String(syndrome_name(s)));
        }
    }
    view
}

/// `ack`, `rnr`, `nak_seq`, `nak_inv_req`, `nak_rem_access`, `nak_rem_op`,
/// `nak_inv_rd_req`, `nak_other`, `reserved`.
pub fn syndrome_name(s: u8) -> String {
    match s >> 5 {
        0 => "ack",
        1 => "rnr",
        3 => match s & 0x1F {
            0 => "nak_seq",
            1 => "nak_inv_req",
            2 => "nak_rem_access",
            3 => "nak_rem_op",
            4 => "nak_inv_rd_req",
            _ => "nak_other",
        },
        _ => "reserved",
    }
    .to_string()
}

/// A one-line summary of a frame for logs and ladders.
pub fn summary(view: &Value) -> String {
    let get = |path: &str| lookup(view, path);
    if view.get("roce") != Some(&Value::Bool(true)) {
        return match get("error") {
            Some(Value::String(e)) => format!("not RoCE: {e}"),
            _ => "not RoCE".into(),
        };
    }
    let mut s = format!(
        "{} psn={} qp={:#x}",
        get("bth.opcode_name")
            .and_then(Value::as_str)
            .unwrap_or("unknown opcode"),
        get("bth.psn").and_then(Value::as_u64).unwrap_or(0),
        get("bth.dest_qp").and_then(Value::as_u64).unwrap_or(0),
    );
    if get("bth.ack_req") == Some(&Value::Bool(true)) {
        s.push_str(" A");
    }
    if let Some(Value::String(syn)) = get("syndrome") {
        s.push_str(&format!(" {syn}"));
        if let Some(msn) = get("aeth.msn").or(get("sacketh.msn")) {
            s.push_str(&format!(" msn={msn}"));
        }
    }
    if let Some(n) = get("payload_len").and_then(Value::as_u64)
        && n > 0
    {
        s.push_str(&format!(" len={n}"));
    }
    if get("icrc_valid") == Some(&Value::Bool(false)) {
        s.push_str(" BAD-ICRC");
    }
    s
}

/// The value at a dotted path.
pub fn lookup<'a>(view: &'a Value, path: &str) -> Option<&'a Value> {
    let mut at = view;
    for part in path.split('.') {
        at = at.get(part)?;
    }
    Some(at)
}

/// Why fields did not match: `field: expected X, observed Y` per mismatch.
pub fn check_fields(
    view: &Value,
    fields: &BTreeMap<String, Matcher>,
    ctx: &Context,
) -> Result<(), Vec<String>> {
    let mut misses = Vec::new();
    for (path, m) in fields {
        let observed = lookup(view, path);
        match matches(observed, m, ctx) {
            Ok(true) => {}
            Ok(false) => misses.push(format!(
                "{path}: expected {}, observed {}",
                describe(m, ctx),
                observed.map_or("nothing".to_string(), show)
            )),
            Err(e) => misses.push(format!("{path}: {e}")),
        }
    }
    if misses.is_empty() {
        Ok(())
    } else {
        Err(misses)
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Number(n) => match n.as_u64() {
            Some(x) if x > 9 => format!("{x} ({x:#x})"),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// Describes a matcher with its expressions evaluated.
pub fn describe(m: &Matcher, ctx: &Context) -> String {
    match m {
        Matcher::Bool(b) => b.to_string(),
        Matcher::Int(n) => n.to_string(),
        Matcher::Text(t) if expr::is_expression(t) => match expr::eval(t, &ctx.bindings) {
            Ok(v) => format!("{v} ({t})"),
            Err(_) => t.clone(),
        },
        Matcher::Text(t) => format!("\"{t}\""),
        Matcher::Test(t) => {
            let mut parts = Vec::new();
            if let Some(any) = &t.any_of {
                let list: Vec<String> = any.iter().map(|m| describe(m, ctx)).collect();
                parts.push(format!("one of [{}]", list.join(", ")));
            }
            if let Some(n) = &t.not {
                parts.push(format!("not {}", describe(n, ctx)));
            }
            if let Some(n) = &t.min {
                parts.push(format!(
                    ">= {}",
                    num(n, ctx).map_or("?".into(), |v| v.to_string())
                ));
            }
            if let Some(n) = &t.max {
                parts.push(format!(
                    "<= {}",
                    num(n, ctx).map_or("?".into(), |v| v.to_string())
                ));
            }
            if let Some(a) = t.absent {
                parts.push(if a { "absent" } else { "present" }.into());
            }
            parts.join(" and ")
        }
    }
}

/// Whether `observed` satisfies `m`.
pub fn matches(observed: Option<&Value>, m: &Matcher, ctx: &Context) -> Result<bool, String> {
    match m {
        Matcher::Test(t) => test(observed, t, ctx),
        _ => {
            let Some(obs) = observed else {
                return Ok(false);
            };
            match m {
                Matcher::Bool(b) => Ok(obs.as_bool() == Some(*b)),
                Matcher::Int(n) => Ok(obs.as_u64() == Some(*n)),
                Matcher::Text(t) if expr::is_expression(t) => {
                    let want = expr::eval(t, &ctx.bindings).map_err(|e| e.to_string())?;
                    // An IPv4 address (`ip.src`) compares as its 32-bit value
                    // (`${h.ip}`, `${iut.ip}`).
                    let o = obs.as_u64().or_else(|| {
                        obs.as_str()
                            .and_then(|s| s.parse::<core::net::Ipv4Addr>().ok())
                            .map(|a| u64::from(u32::from(a)))
                    });
                    Ok(o.is_some_and(|o| o == want || wraps(o, want)))
                }
                Matcher::Text(t) => Ok(match obs {
                    Value::String(s) => s.eq_ignore_ascii_case(t),
                    Value::Number(n) => {
                        expr::eval(t, &ctx.bindings).is_ok_and(|v| n.as_u64() == Some(v))
                    }
                    _ => false,
                }),
                Matcher::Test(_) => unreachable!("handled above"),
            }
        }
    }
}

/// A 24-bit field compared with an expression that wrapped past 2^24
/// (`${psn + 1}` with psn = 0xFFFFFF).
fn wraps(observed: u64, want: u64) -> bool {
    observed < (1 << 24) && want & 0xFF_FFFF == observed && want >> 24 != 0 && want < (1 << 25)
        || observed < (1 << 24) && want > u64::MAX - (1 << 24) && want & 0xFF_FFFF == observed
}

fn test(observed: Option<&Value>, t: &MatchTest, ctx: &Context) -> Result<bool, String> {
    if let Some(absent) = t.absent
        && observed.is_none() != absent
    {
        return Ok(false);
    }
    if let Some(any) = &t.any_of {
        let mut hit = false;
        for m in any {
            hit |= matches(observed, m, ctx)?;
        }
        if !hit {
            return Ok(false);
        }
    }
    if let Some(n) = &t.not
        && matches(observed, n, ctx)?
    {
        return Ok(false);
    }
    let value = observed.and_then(Value::as_u64);
    let bound = |n: &Num| num(n, ctx);
    if let Some(min) = &t.min
        && value.is_none_or(|v| v < bound(min).unwrap_or(u64::MAX))
    {
        return Ok(false);
    }
    if let Some(max) = &t.max
        && value.is_none_or(|v| v > bound(max).unwrap_or(0))
    {
        return Ok(false);
    }
    Ok(true)
}
