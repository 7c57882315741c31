//! The RoCEv2 Invariant CRC (SPEC §5).
//!
//! CRC-32 (IEEE 802.3, reflected, preset and complemented, as `crc32fast`
//! computes it) over: eight 0xFF bytes; the IP header with its variant fields
//! set to all ones (IPv4: ToS, TTL, checksum; IPv6: traffic class, flow label,
//! hop limit); the UDP header with the checksum set to all ones; the BTH with
//! byte 4 (FECN, BECN, reserved) set to all ones; then the extension headers,
//! payload and pad as they are. The trailer carries the value
//! least-significant byte first.
//!
//! IPv4 options, which RoCEv2 senders do not use, are covered as part of the
//! IP header (as scapy does). Parsing never checks the ICRC; these functions
//! are a separate step.
//!
//! RoCE v1 (IBA Annex A16) covers the same bytes without the UDP header:
//! eight 0xFF bytes, the GRH masked as an IPv6 header is, the BTH masked,
//! then the rest. A frame the capture cut short ([`crate::Cut`]) has no
//! ICRC to check: [`IcrcStatus::NotCaptured`].

use crate::bth::BthRepr;
use crate::frame::{Frame, IpRepr};
use crate::roce::{ICRC_LEN, RocePacket};
use crate::udp::UdpRepr;

/// The eight 0xFF bytes standing in for the InfiniBand LRH.
const LRH_STANDIN: [u8; 8] = [0xFF; 8];

/// The result of checking a frame's ICRC (by default `NotRoce`: nothing
/// checked).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IcrcStatus {
    /// Not a RoCEv2 frame: there is no ICRC.
    #[default]
    NotRoce,
    /// The trailer matches.
    Valid,
    /// A RoCE packet the capture did not record whole: its ICRC cannot be
    /// checked (never a fault of the packet's sender).
    NotCaptured,
    /// The trailer differs from the computed value.
    Invalid {
        /// CRC value computed over the frame.
        expected: u32,
        /// CRC value the trailer holds.
        found: u32,
    },
}

impl IcrcStatus {
    /// `Some(true)` valid, `Some(false)` invalid, `None` for non-RoCE
    /// frames and packets the capture cut short.
    pub const fn is_valid(self) -> Option<bool> {
        match self {
            IcrcStatus::NotRoce | IcrcStatus::NotCaptured => None,
            IcrcStatus::Valid => Some(true),
            IcrcStatus::Invalid { .. } => Some(false),
        }
    }
}

/// Bytes of extension headers the fast path of [`compute`] handles on the stack
/// (every extension header at once takes 140).
const EXT_MAX: usize = 160;

/// Computes the ICRC value of a RoCEv2 packet given its IP and UDP headers.
pub fn compute(ip: &IpRepr<'_>, udp: &UdpRepr, roce: &RocePacket<'_>) -> u32 {
    compute_with(ip, Some(udp), roce)
}

/// Computes the ICRC value of a RoCE v1 packet given its GRH.
pub fn compute_v1(grh: &IpRepr<'_>, roce: &RocePacket<'_>) -> u32 {
    compute_with(grh, None, roce)
}

/// The ICRC over IP (or GRH), UDP when there is one, and the packet.
fn compute_with(ip: &IpRepr<'_>, udp: Option<&UdpRepr>, roce: &RocePacket<'_>) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    // LRH stand-in, IP (at most 60 bytes as parsed), UDP and BTH, masked, and
    // the extension headers, in one buffer: one CRC update for all headers.
    const HEAD_MAX: usize = LRH_STANDIN.len() + 60 + UdpRepr::LEN + BthRepr::LEN + EXT_MAX;
    let masked_len = ip.buffer_len() + udp.map_or(0, UdpRepr::buffer_len) + BthRepr::LEN;
    let ext_len = roce.ext.buffer_len();
    let head_len = LRH_STANDIN.len() + masked_len + ext_len;
    if head_len <= HEAD_MAX {
        let mut head = [0u8; HEAD_MAX];
        let head = &mut head[..head_len];
        let (lrh, rest) = head.split_at_mut(LRH_STANDIN.len());
        lrh.copy_from_slice(&LRH_STANDIN);
        let (masked, ext) = rest.split_at_mut(masked_len);
        mask_headers(masked, ip, udp, &roce.bth);
        // `ext` has exactly `ext.buffer_len()` bytes, which `emit` accepts.
        let _ = roce.ext.emit(ext);
        hasher.update(head);
    } else {
        // Only a builder can make IPv4 options or extension headers this long.
        let mut long = vec![0u8; head_len];
        long[..LRH_STANDIN.len()].copy_from_slice(&LRH_STANDIN);
        let (masked, ext) = long[LRH_STANDIN.len()..].split_at_mut(masked_len);
        mask_headers(masked, ip, udp, &roce.bth);
        let _ = roce.ext.emit(ext);
        hasher.update(&long);
    }
    hasher.update(roce.payload);
    if !roce.pad.is_empty() {
        hasher.update(roce.pad);
    }
    hasher.finalize()
}

/// Emits IP, UDP (when there is one) and BTH into `buf` (exactly their
/// length) and masks the variant fields.
fn mask_headers(buf: &mut [u8], ip: &IpRepr<'_>, udp: Option<&UdpRepr>, bth: &BthRepr) {
    let ip_len = ip.buffer_len();
    // `buf` is sized by the caller to hold exactly these headers.
    let _ = ip.emit(buf);
    let mut at = ip_len;
    if let Some(udp) = udp {
        let _ = udp.emit(&mut buf[at..]);
        at += UdpRepr::LEN;
    }
    let _ = bth.emit(&mut buf[at..]);
    mask_in_place(buf, ip, udp.is_some());
}

/// Sets the variant fields of IP, UDP (`with_udp`) and BTH headers laid
/// out in `buf` (exactly their length) to all ones: the one definition of
/// the masking.
fn mask_in_place(buf: &mut [u8], ip: &IpRepr<'_>, with_udp: bool) {
    let ip_len = ip.buffer_len();
    match ip {
        IpRepr::V4(_) => {
            buf[crate::ipv4::field::TOS] = 0xFF;
            buf[crate::ipv4::field::TTL] = 0xFF;
            buf[crate::ipv4::field::CHECKSUM..crate::ipv4::field::CHECKSUM + 2].fill(0xFF);
        }
        IpRepr::V6(_) => {
            buf[0] |= 0x0F;
            buf[1..4].fill(0xFF);
            buf[crate::ipv6::field::HOP_LIMIT] = 0xFF;
        }
    }
    let mut bth = ip_len;
    if with_udp {
        let udp_checksum = ip_len + crate::udp::field::CHECKSUM;
        buf[udp_checksum..udp_checksum + 2].fill(0xFF);
        bth += UdpRepr::LEN;
    }
    buf[bth + crate::bth::field::CONGESTION] = 0xFF;
}

/// The ICRC value `frame` should carry, or `None` when it is not RoCE
/// (v2, or v1 when decoded) or the capture cut its packet short.
pub fn expected(frame: &Frame<'_>) -> Option<u32> {
    if !frame.roce_whole() {
        return None;
    }
    match (&frame.ip, &frame.udp, &frame.roce) {
        (Some(ip), Some(udp), Some(roce)) => Some(compute(ip, udp, roce)),
        (Some(grh), None, Some(roce)) if frame.is_roce_v1() => Some(compute_v1(grh, roce)),
        _ => None,
    }
}

/// Checks the frame's ICRC trailer.
pub fn verify(frame: &Frame<'_>) -> IcrcStatus {
    if frame.roce.is_some() && !frame.roce_whole() {
        return IcrcStatus::NotCaptured;
    }
    match (expected(frame), &frame.roce) {
        (Some(expected), Some(roce)) if expected == roce.icrc_value() => IcrcStatus::Valid,
        (Some(expected), Some(roce)) => IcrcStatus::Invalid {
            expected,
            found: roce.icrc_value(),
        },
        _ => IcrcStatus::NotRoce,
    }
}

/// Checks the ICRC of a frame against the bytes it was parsed from, hashing
/// them in place: only the masked IP, UDP and BTH headers (at most 80 bytes)
/// are copied. This is the fast path for checkers that hold the wire bytes.
///
/// `wire` must be the input `frame` was parsed from. If its length disagrees
/// with the frame's, the frame's values are used instead (as [`verify`]), so a
/// wrong `wire` can never produce a result for other bytes than the frame's.
pub fn verify_wire(frame: &Frame<'_>, wire: &[u8]) -> IcrcStatus {
    verify_wire_marked(frame, wire).0
}

/// Where a RoCE packet's payload lies in its ICRC computation: the CRC-32 of
/// the covered bytes before the payload and the CRC-32 of those through the
/// payload's end (pad excluded). From them [`PayloadMark::payload_crc`]
/// gives the CRC-32 of the payload alone, so a payload can later be compared
/// with another one (as far as a CRC-32 tells: bytes with equal CRCs are
/// taken as equal; unequal CRCs prove the bytes differ) without keeping its
/// bytes, and without hashing them a second time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PayloadMark {
    /// CRC-32 of the covered bytes before the payload.
    pub before: u32,
    /// CRC-32 of the covered bytes through the last payload byte.
    pub through: u32,
    /// Payload bytes.
    pub len: u32,
}

impl PayloadMark {
    /// The CRC-32 of the payload alone (as `crc32fast::hash` of its bytes):
    /// `through` is `before` followed by `len` bytes, and a CRC-32 is linear
    /// in its input. Costs a few hundred ns (a polynomial product), so it is
    /// meant for the rare comparison, not for every packet.
    pub fn payload_crc(&self) -> u32 {
        let mut shifted = crc32fast::Hasher::new_with_initial_len(self.before, 0);
        shifted.combine(&crc32fast::Hasher::new_with_initial_len(
            0,
            u64::from(self.len),
        ));
        self.through ^ shifted.finalize()
    }

    /// Whether `payload` is (as far as a CRC-32 tells) the payload marked.
    pub fn matches(&self, payload: &[u8]) -> bool {
        payload.len() == self.len as usize && crc32fast::hash(payload) == self.payload_crc()
    }
}

/// [`verify_wire`], and the packet's [`PayloadMark`] taken on the way (`None`
/// when the frame is not RoCE or `wire` does not match it).
pub fn verify_wire_marked(frame: &Frame<'_>, wire: &[u8]) -> (IcrcStatus, Option<PayloadMark>) {
    match wire.get(frame.ethernet.buffer_len()..) {
        Some(ip_wire) => verify_ip_marked(frame, ip_wire),
        None => (verify(frame), None),
    }
}

/// [`verify_wire_marked`] for `ip_wire`, the bytes from the frame's IP
/// header (or GRH) on: for frames whose link-layer header is not the
/// Ethernet header they hold ([`Frame::parse_after`]), and frames found
/// inside an encapsulation.
pub fn verify_ip_marked(frame: &Frame<'_>, ip_wire: &[u8]) -> (IcrcStatus, Option<PayloadMark>) {
    let (Some(ip), Some(roce)) = (&frame.ip, &frame.roce) else {
        return (IcrcStatus::NotRoce, None);
    };
    let udp_len = match &frame.udp {
        Some(_) => UdpRepr::LEN,
        None if frame.is_roce_v1() => 0,
        None => return (IcrcStatus::NotRoce, None),
    };
    if !frame.roce_whole() {
        return (IcrcStatus::NotCaptured, None);
    }
    if ip_wire.len() + frame.ethernet.buffer_len() != frame.buffer_len() {
        return (verify(frame), None);
    }
    let masked_len = ip.buffer_len() + udp_len + BthRepr::LEN;
    let covered_end = ip.buffer_len() + udp_len + roce.buffer_len() - ICRC_LEN;
    // The covered bytes after the masked headers: extension headers,
    // payload, pad.
    let payload_len = roce.payload.len();
    let pad_len = roce.pad.len();
    let (Some(masked_src), Some(rest), Ok(len)) = (
        ip_wire.get(..masked_len),
        ip_wire.get(masked_len..covered_end),
        u32::try_from(payload_len),
    ) else {
        return (verify(frame), None);
    };
    let Some(ext_len) = rest.len().checked_sub(payload_len + pad_len) else {
        return (verify(frame), None);
    };
    let (ext, rest) = rest.split_at(ext_len);
    let (payload, pad) = rest.split_at(payload_len);
    let mut head = [0u8; LRH_STANDIN.len() + 60 + UdpRepr::LEN + BthRepr::LEN];
    let Some(head) = head.get_mut(..LRH_STANDIN.len() + masked_len) else {
        return (verify(frame), None);
    };
    let (lrh, masked) = head.split_at_mut(LRH_STANDIN.len());
    lrh.copy_from_slice(&LRH_STANDIN);
    masked.copy_from_slice(masked_src);
    mask_in_place(masked, ip, udp_len != 0);
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(head);
    hasher.update(ext);
    let before = hasher.clone().finalize();
    hasher.update(payload);
    let through = hasher.clone().finalize();
    hasher.update(pad);
    let expected = hasher.finalize();
    let mark = PayloadMark {
        before,
        through,
        len,
    };
    let status = if expected == roce.icrc_value() {
        IcrcStatus::Valid
    } else {
        IcrcStatus::Invalid {
            expected,
            found: roce.icrc_value(),
        }
    };
    (status, Some(mark))
}

/// Sets the frame's ICRC trailer to the computed value. No effect on non-RoCE frames.
pub fn fill(frame: &mut Frame<'_>) {
    if let Some(value) = expected(frame)
        && let Some(roce) = &mut frame.roce
    {
        roce.icrc = value.to_le_bytes();
    }
}
