//! Receive-side decoding and the QP-independent checks of SPEC §9.2
//! (rows 1–9): everything that can be judged before the addressed QP is
//! known. The device applies rows 10–21 (see `device.rs`).

use core::net::Ipv4Addr;
use metaroce_codec::ext::ExtHeaders;
use metaroce_codec::icrc::{self, IcrcStatus};
use metaroce_codec::{BthRepr, Frame, IpRepr, ParseOptions};

/// A decoded request or response packet.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RxPacket<'a> {
    pub bth: BthRepr,
    pub ext: ExtHeaders,
    pub payload: &'a [u8],
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub ecn: u8,
    /// UDP source port (the entropy value of an MP packet).
    pub udp_src_port: u16,
    /// A trimmed MP packet (SPEC §7.10); not detected by this decoder yet.
    pub trimmed: bool,
    /// The ICRC matched (checked at row 21 by the device).
    pub icrc_ok: bool,
}

/// Outcome of decoding.
#[derive(Debug)]
pub(crate) enum Decoded<'a> {
    /// Not a MetaRoCE packet for this device (not IPv4/UDP/4791).
    NotRoce,
    /// Dropped by rows 1–9 (counted in `malformed_drops`).
    Malformed,
    /// Passed rows 1–9.
    Packet(Box<RxPacket<'a>>),
}

/// Decodes a frame and applies §9.2 rows 1–9.
pub(crate) fn decode<'a>(bytes: &'a [u8], options: &ParseOptions) -> Decoded<'a> {
    let Ok(frame) = Frame::parse(bytes, options) else {
        // Row 1 / 8: a frame that ends early (MR-ROB-1).
        return Decoded::Malformed;
    };
    let v4 = match frame.ip {
        Some(IpRepr::V4(v4)) => v4,
        // `ipv6` is declared absent: IPv6 RoCE is dropped as malformed.
        Some(IpRepr::V6(_)) if frame.roce.is_some() => return Decoded::Malformed,
        _ => return Decoded::NotRoce,
    };
    if v4.ihl != 5 || v4.is_fragment() {
        // Row 2 (MR-ENC-5): only when it could be ours.
        return if v4.protocol == 17 {
            Decoded::Malformed
        } else {
            Decoded::NotRoce
        };
    }
    let (Some(udp), Some(roce)) = (frame.udp, frame.roce) else {
        return Decoded::NotRoce; // row 5
    };
    if v4.compute_checksum() != v4.checksum {
        return Decoded::Malformed; // row 3, MR-ROB-2
    }
    if !frame.udp_excess.is_empty() {
        return Decoded::Malformed; // row 6, MR-ENC-15
    }
    if udp.length % 4 != 0 || udp.length < 24 {
        return Decoded::Malformed; // row 7, MR-ROB-3
    }
    if roce.bth.tver != 0 {
        return Decoded::Malformed; // row 9, MR-BTH-1
    }
    let icrc_ok = icrc::verify_wire(&frame, bytes) == IcrcStatus::Valid;
    Decoded::Packet(Box::new(RxPacket {
        bth: roce.bth,
        ext: roce.ext,
        payload: roce.payload,
        src_ip: v4.src,
        dst_ip: v4.dst,
        ecn: v4.ecn(),
        udp_src_port: udp.src_port,
        trimmed: false,
        icrc_ok,
    }))
}
