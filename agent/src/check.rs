//! Request checks every agent makes the same way (AGENT.md §4, §5): object
//! limits, handles, addresses, QPNs, SGE lists, `poll_cq` bounds. An agent
//! calls these before it touches its device, so a rejected request has no
//! effect; what depends on the device (which handles exist, its queue
//! capacities) is the caller's argument.

use crate::protocol::{AgentError, ErrorCode, MAX_OBJECTS, MAX_POLL, MAX_WAIT_MS, PollCq, SgeJson};
use core::net::{IpAddr, Ipv4Addr};
use serde_json::{Map, Value};

/// A check's result.
pub type Res<T> = Result<T, AgentError>;

/// An error blamed on `field` (shorthand of [`AgentError::field`]).
pub fn bad(code: ErrorCode, field: &str, why: impl core::fmt::Display) -> AgentError {
    AgentError::field(code, field, why)
}

/// `resource_exhausted` when `n` objects of a kind (`what`, plural) are
/// already alive: at most [`MAX_OBJECTS`] of each.
pub fn room(n: usize, what: &str) -> Res<()> {
    if n >= MAX_OBJECTS {
        Err(AgentError::general(
            ErrorCode::ResourceExhausted,
            format!("at most {MAX_OBJECTS} {what}"),
        ))
    } else {
        Ok(())
    }
}

/// `unknown_handle` for the handle `v` in `field`.
pub fn unknown(field: &str, v: u32) -> AgentError {
    bad(
        ErrorCode::UnknownHandle,
        field,
        format!("no such handle {v}"),
    )
}

/// The fields of a JSON object (`json!({...})`); anything else is empty.
pub fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// An IPv4 address in `field`; IPv6 is `unsupported` (no agent declares
/// `ipv6`), anything else `bad_value`.
pub fn ipv4(s: &str, field: &str) -> Res<Ipv4Addr> {
    match s.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => Ok(ip),
        Ok(IpAddr::V6(_)) => Err(bad(
            ErrorCode::Unsupported,
            field,
            "IPv6 is not supported (profile ipv6: false)",
        )),
        Err(_) => Err(bad(
            ErrorCode::BadValue,
            field,
            format!("{s:?} is not an IP address"),
        )),
    }
}

/// A QPN in `field`: 24 bits.
pub fn qpn24(v: u32, field: &str) -> Res<u32> {
    if v <= 0xFF_FFFF {
        Ok(v)
    } else {
        Err(bad(
            ErrorCode::OutOfRange,
            field,
            format!("{v} does not fit 24 bits"),
        ))
    }
}

/// The SGE list of a work request, at most `max` entries (the QP's
/// `max_send_sge` or `max_recv_sge`), each mapped by `sge` to the agent's
/// own type.
pub fn sges<T>(list: &[SgeJson], max: u32, sge: impl Fn(&SgeJson) -> T) -> Res<Vec<T>> {
    if list.len() > max as usize {
        return Err(bad(
            ErrorCode::OutOfRange,
            "sg_list",
            format!("{} SGEs, at most {max}", list.len()),
        ));
    }
    Ok(list.iter().map(sge).collect())
}

/// A `poll_cq` request: its CQ exists (`cq_known`), `max` is
/// 1..=[`MAX_POLL`], `wait_ms` at most [`MAX_WAIT_MS`].
pub fn check_poll(r: &PollCq, cq_known: bool) -> Res<()> {
    if !cq_known {
        return Err(unknown("cq", r.cq));
    }
    if !(1..=MAX_POLL).contains(&r.max) {
        return Err(bad(
            ErrorCode::OutOfRange,
            "max",
            format!("{} is outside 1..={MAX_POLL}", r.max),
        ));
    }
    if r.wait_ms > MAX_WAIT_MS {
        return Err(bad(
            ErrorCode::OutOfRange,
            "wait_ms",
            format!("{} is outside 0..={MAX_WAIT_MS}", r.wait_ms),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_name_their_field() {
        assert_eq!(qpn24(0xFF_FFFF, "qpn"), Ok(0xFF_FFFF));
        let e = qpn24(1 << 24, "ud.qpn").unwrap_err();
        assert_eq!(
            (e.code, e.field.as_deref()),
            (ErrorCode::OutOfRange, Some("ud.qpn"))
        );
        assert_eq!(ipv4("10.0.0.1", "x"), Ok(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(ipv4("::1", "x").unwrap_err().code, ErrorCode::Unsupported);
        assert_eq!(ipv4("ten", "x").unwrap_err().code, ErrorCode::BadValue);
        assert!(room(MAX_OBJECTS - 1, "QPs").is_ok());
        assert_eq!(
            room(MAX_OBJECTS, "QPs").unwrap_err().code,
            ErrorCode::ResourceExhausted
        );
        let sge = SgeJson {
            addr: 1,
            length: 2,
            lkey: 3,
        };
        assert_eq!(sges(&[sge; 2], 2, |s| s.lkey), Ok(vec![3, 3]));
        let e = sges(&[sge; 3], 2, |s| s.lkey).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("sg_list"));
    }

    #[test]
    fn poll_bounds() {
        let p = |max, wait_ms| PollCq {
            cq: 7,
            max,
            wait_ms,
        };
        assert!(check_poll(&p(1, MAX_WAIT_MS), true).is_ok());
        assert_eq!(
            check_poll(&p(1, 0), false).unwrap_err().code,
            ErrorCode::UnknownHandle
        );
        assert_eq!(
            check_poll(&p(0, 0), true).unwrap_err().field.as_deref(),
            Some("max")
        );
        assert_eq!(
            check_poll(&p(MAX_POLL + 1, 0), true)
                .unwrap_err()
                .field
                .as_deref(),
            Some("max")
        );
        assert_eq!(
            check_poll(&p(1, MAX_WAIT_MS + 1), true)
                .unwrap_err()
                .field
                .as_deref(),
            Some("wait_ms")
        );
    }
}
