//! Unit tests of the per-packet validators. Every test names the requirement
//! it checks; packets are made with the codec's `PacketBuilder`.

mod bth;
mod cnp;
mod decode_error;
mod encap;
mod ext;
mod icrc;
mod mp;
mod opcode;
mod packet;
mod table;

use super::{Context, validate_decode_error, validate_frame, validate_undecodable};
use crate::{Finding, Severity};
use metaroce_codec::ext::MpethRepr;
use metaroce_codec::{Frame, Msn, Opcode, PacketBuilder};

/// Parses the builder's frame as `ctx` says and runs the validators; a frame
/// that does not decode goes to `validate_undecodable`.
fn judge(b: &PacketBuilder, ctx: &Context) -> Vec<Finding> {
    judge_bytes(&b.build(), ctx)
}

/// [`judge`] of raw frame bytes.
fn judge_bytes(bytes: &[u8], ctx: &Context) -> Vec<Finding> {
    match Frame::parse(bytes, &ctx.parse_options()) {
        Ok(frame) => validate_frame(&frame, metaroce_codec::icrc::verify(&frame), ctx),
        Err(e) => {
            let undecodable = validate_undecodable(bytes, &e, ctx);
            // Without the bytes, the same error gives the same findings
            // except those that need the bytes (MR-ENC-8).
            let from_error = validate_decode_error(&e);
            assert!(from_error.iter().all(|f| undecodable.contains(f)));
            undecodable
        }
    }
}

fn ids(findings: &[Finding]) -> Vec<&'static str> {
    findings.iter().map(|f| f.id).collect()
}

/// No finding at all.
#[track_caller]
fn assert_clean(b: &PacketBuilder, ctx: &Context) {
    let findings = judge(b, ctx);
    assert!(findings.is_empty(), "expected no finding: {findings:#?}");
}

/// At least one finding, and every finding is against `id`.
#[track_caller]
fn assert_only(b: &PacketBuilder, ctx: &Context, id: &str) -> Vec<Finding> {
    let findings = judge(b, ctx);
    assert!(
        !findings.is_empty() && findings.iter().all(|f| f.id == id),
        "expected only {id}: {findings:#?}"
    );
    findings
}

/// Default context: PMTU unknown, port 4791, profile MP.
fn ctx() -> Context {
    Context::default()
}

fn with_pmtu(pmtu: u32) -> Context {
    Context {
        pmtu: Some(pmtu),
        ..Context::default()
    }
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| i as u8).collect()
}

/// A conforming RC SEND Only: 13 bytes (PadCnt 3), AckReq.
fn send_only() -> PacketBuilder {
    PacketBuilder::new(Opcode::RC_SEND_ONLY)
        .ack_req(true)
        .payload(data(13))
}

/// An MPETH for one packet of a message.
fn mpeth(offset: u32, msg_len: u32, last: bool) -> MpethRepr {
    MpethRepr {
        first: offset == 0,
        last,
        msn: Msn::new(4),
        offset,
        msg_len,
        timestamp: 77,
        ..MpethRepr::default()
    }
}

/// A conforming MP SEND packet at `offset` of a `msg_len`-byte message
/// carrying `len` bytes (L when it ends the message; AckReq with L).
fn mp_send(offset: u32, msg_len: u32, len: usize) -> PacketBuilder {
    let last = offset as usize + len == msg_len as usize;
    PacketBuilder::new(Opcode::MP_SEND)
        .ack_req(last)
        .ext(|e| e.mpeth = Some(mpeth(offset, msg_len, last)))
        .payload(data(len))
}

#[test]
fn findings_carry_the_severity_of_their_keyword() {
    // MR-ENC-6 is a SHOULD, MR-PKT-4 a MUST.
    let no_df = send_only().ipv4_flags_frag(0);
    let f = assert_only(&no_df, &ctx(), "MR-ENC-6");
    assert_eq!(f[0].severity, Severity::Should);
    let bad_pad = send_only().pad_count(0);
    let f = judge(&bad_pad, &ctx());
    assert_eq!(f[0].severity, Severity::Must, "MR-PKT-4 {f:?}");
}
