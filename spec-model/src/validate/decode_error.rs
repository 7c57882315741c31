//! Frames the codec cannot decode: what their decode error shows about the
//! sender.

use super::Context;
use crate::Finding;
use metaroce_codec::ipv6::{self, Ipv6Repr};
use metaroce_codec::{Layer, UdpRepr, WireError, WireErrorKind};

/// IPv6 next header of UDP.
const NEXT_HEADER_UDP: u8 = 17;

/// Judges a frame that did not decode, from its bytes and its decode error:
/// what [`validate_decode_error`] finds, and "MR-ENC-8" when the frame is
/// IPv6 with extension headers (which the codec does not decode) in front of
/// a UDP datagram to a RoCE port of `ctx`.
pub fn validate_undecodable(bytes: &[u8], err: &WireError, ctx: &Context) -> Vec<Finding> {
    let mut out = validate_decode_error(err);
    out.extend(extension_headers(bytes, err, ctx));
    out
}

/// "MR-ENC-8": no IPv6 extension header in front of a MetaRoCE packet.
fn extension_headers(bytes: &[u8], err: &WireError, ctx: &Context) -> Option<Finding> {
    if err.layer != Layer::Ipv6
        || err.field != "next_header"
        || !matches!(err.kind, WireErrorKind::Unsupported { .. })
    {
        return None;
    }
    let start = err.offset.checked_sub(ipv6::field::NEXT_HEADER)?;
    let (ip, chain) = Ipv6Repr::parse_with_extensions(bytes.get(start..)?).ok()?;
    if chain.count == 0 || chain.incomplete || chain.next_header != NEXT_HEADER_UDP {
        return None;
    }
    let (udp, _) = UdpRepr::parse(chain.rest).ok()?;
    if !ctx.roce_ports.contains(&udp.dst_port) {
        return None;
    }
    Some(Finding::new(
        "MR-ENC-8",
        format!(
            "IPv6 next header {} (byte {}): {} extension header(s) before UDP to port {}",
            ip.next_header, err.offset, chain.count, udp.dst_port
        ),
    ))
}

/// Judges a frame that did not decode, from its decode error alone.
///
/// Only errors inside the RoCE packet (BTH and after) are judged: by then
/// UDP has named a RoCE port and the UDP length fits the IP datagram, so the
/// packet, not the capture, is short. An error in Ethernet, IP or UDP gives
/// no finding: the frame is not known to be a MetaRoCE packet.
pub fn validate_decode_error(err: &WireError) -> Vec<Finding> {
    let finding = match (err.layer, err.kind) {
        (Layer::Bth, WireErrorKind::Invalid { value, .. }) if err.field == "pad_count" => {
            Finding::new(
                "MR-PKT-4",
                format!(
                    "PadCnt {value} exceeds the bytes between the headers and the ICRC (byte {})",
                    err.offset
                ),
            )
        }
        (Layer::Bth, WireErrorKind::Truncated { available, .. }) => Finding::new(
            "MR-ICRC-1",
            format!(
                "UDP payload of {available} bytes cannot hold the 12-byte BTH and the 4-byte ICRC"
            ),
        ),
        (Layer::Icrc, WireErrorKind::Truncated { available, .. }) => Finding::new(
            "MR-ICRC-1",
            format!(
                "packet ends {available} bytes after its headers (byte {}): no room for the 4-byte ICRC",
                err.offset
            ),
        ),
        (
            layer @ (Layer::Reth
            | Layer::Aeth
            | Layer::AtomicEth
            | Layer::AtomicAckEth
            | Layer::ImmDt
            | Layer::Ieth
            | Layer::Deth
            | Layer::Feth
            | Layer::Cnp
            | Layer::Mpeth
            | Layer::Sacketh),
            WireErrorKind::Truncated { needed, available },
        ) => Finding::new(
            "MR-EXT-3",
            format!(
                "{} at byte {} has {available} of its {needed} bytes: the opcode's headers are incomplete",
                layer.name(),
                err.offset
            ),
        ),
        _ => return Vec::new(),
    };
    vec![finding]
}
