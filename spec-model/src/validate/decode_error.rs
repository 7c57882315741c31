//! Frames the codec cannot decode: what their decode error shows about the
//! sender.

use crate::Finding;
use metaroce_codec::{Layer, WireError, WireErrorKind};

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
