//! Receive-side decoding and the QP-independent checks of SPEC §9.2
//! (rows 1–9): everything that can be judged before the addressed QP is
//! known. The device applies rows 10–21 (see `device.rs`).

use core::net::Ipv4Addr;
use metaroce_codec::ext::ExtHeaders;
use metaroce_codec::icrc::{self, IcrcStatus};
use metaroce_codec::{BthRepr, Frame, IpRepr, Layer, ParseOptions};

/// A decoded request or response packet.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RxPacket<'a> {
    pub bth: BthRepr,
    pub ext: ExtHeaders,
    pub payload: &'a [u8],
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    /// The Ethernet source: where a CNP for a UD packet goes (MR-CNP-4).
    pub src_mac: [u8; 6],
    pub ecn: u8,
    /// UDP source port (the entropy value of an MP packet).
    pub udp_src_port: u16,
    /// A trimmed MP packet (SPEC §7.10); not detected by this decoder yet.
    pub trimmed: bool,
    /// The ICRC matched (checked at row 21 by the device).
    pub icrc_ok: bool,
    /// PadCnt exceeds the bytes between the headers and the ICRC: dropped
    /// at row 20 (MR-ROB-4), after the QP-dependent rows 10–19 (the
    /// payload is then empty here).
    pub pad_too_large: bool,
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
    let frame = match Frame::parse(bytes, options) {
        Ok(frame) => frame,
        Err(e) if e.layer == Layer::Bth && e.field == "pad_count" => {
            return pad_too_large(bytes, e.offset, options);
        }
        // Row 1 / 8: a frame that ends early (MR-ROB-1).
        Err(_) => return Decoded::Malformed,
    };
    checked(frame, bytes)
}

/// A PadCnt larger than the bytes after the headers is row 20, which comes
/// after rows 10–19: the packet is decoded with PadCnt 0 (a copy), keeps
/// its PadCnt, and is marked for the device to drop at row 20.
fn pad_too_large<'a>(bytes: &'a [u8], at: usize, options: &ParseOptions) -> Decoded<'a> {
    let mut copy = bytes.to_vec();
    let Some(flags) = copy.get_mut(at) else {
        return Decoded::Malformed;
    };
    let pad_count = (*flags >> 4) & 0x3;
    *flags &= !0x30;
    let Ok(frame) = Frame::parse(&copy, options) else {
        return Decoded::Malformed;
    };
    match checked(frame, &copy) {
        Decoded::Packet(p) => Decoded::Packet(Box::new(RxPacket {
            bth: BthRepr { pad_count, ..p.bth },
            ext: p.ext,
            payload: &[],
            src_ip: p.src_ip,
            dst_ip: p.dst_ip,
            src_mac: p.src_mac,
            ecn: p.ecn,
            udp_src_port: p.udp_src_port,
            trimmed: p.trimmed,
            icrc_ok: false,
            pad_too_large: true,
        })),
        Decoded::Malformed => Decoded::Malformed,
        Decoded::NotRoce => Decoded::NotRoce,
    }
}

/// Rows 2–9 on a parsed frame.
fn checked<'a>(frame: Frame<'a>, bytes: &'a [u8]) -> Decoded<'a> {
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
        src_mac: frame.ethernet.src,
        ecn: v4.ecn(),
        udp_src_port: udp.src_port,
        trimmed: false,
        icrc_ok,
        pad_too_large: false,
    }))
}
