//! Encapsulation (SPEC.md §3): Ethernet and VLAN, IPv4, IPv6, UDP, ECN.

use super::{Context, Packet};
use crate::Finding;
use metaroce_codec::ethernet::TPID_8021Q;
use metaroce_codec::ipv4::{PROTOCOL_UDP, internet_checksum};
use metaroce_codec::udp::ROCEV2_PORT;
use metaroce_codec::{Frame, IpRepr, Ipv4Repr, RocePacket, UdpRepr};

/// ECN code point "congestion experienced".
const ECN_CE: u8 = 0b11;

/// Encapsulation checks of a RoCE packet.
pub(super) fn check(p: &Packet<'_, '_>, ctx: &Context, out: &mut Vec<Finding>) {
    vlan(p.frame, out);
    if let Some(IpRepr::V4(v4)) = &p.frame.ip {
        ipv4_header(v4, out);
    }
    if !p.trimmed {
        ip_length(p.frame, out);
    }
    if let Some(udp) = &p.frame.udp {
        ports(udp, out);
        // A packet the capture cut short has no payload to sum.
        if !p.trimmed
            && p.frame.roce_whole()
            && let Some(ip) = &p.frame.ip
        {
            udp_checksum(ip, udp, p.roce, out);
        }
    }
    if ctx.at_sender
        && let Some(ip) = &p.frame.ip
        && ip.ecn() == ECN_CE
    {
        out.push(Finding::new(
            "MR-ENC-21",
            "ECN CE (0b11) in a packet captured at its sender",
        ));
    }
}

/// The first fragment of an IPv4 datagram whose UDP header names a RoCE port:
/// the codec does not decode fragments, but its IPv4 header is still judged.
pub(super) fn check_fragment(frame: &Frame<'_>, ctx: &Context, out: &mut Vec<Finding>) {
    let Some(IpRepr::V4(v4)) = &frame.ip else {
        return;
    };
    let first_fragment = v4.is_fragment() && v4.fragment_offset() == 0;
    if !first_fragment || v4.protocol != PROTOCOL_UDP {
        return;
    }
    let Some(dst) = frame.payload.get(2..4) else {
        return;
    };
    let dst_port = u16::from_be_bytes([dst[0], dst[1]]);
    if ctx.roce_ports.contains(&dst_port) {
        ipv4_header(v4, out);
    }
}

/// MR-ENC-1: EtherType directly after the source MAC or after one 802.1Q tag.
fn vlan(frame: &Frame<'_>, out: &mut Vec<Finding>) {
    let tags = frame.ethernet.tags();
    if tags.len() > 1 {
        out.push(Finding::new(
            "MR-ENC-1",
            format!(
                "{} VLAN tags before the EtherType: at most one 802.1Q tag",
                tags.len()
            ),
        ));
    } else if let Some(tag) = tags.first()
        && tag.tpid != TPID_8021Q
    {
        out.push(Finding::new(
            "MR-ENC-1",
            format!("VLAN tag with TPID 0x{:04x}, not 0x8100", tag.tpid),
        ));
    }
}

/// IPv4 header rules a sender must follow.
fn ipv4_header(v4: &Ipv4Repr<'_>, out: &mut Vec<Finding>) {
    if v4.ihl != 5 || !v4.options.is_empty() {
        out.push(Finding::new(
            "MR-ENC-4",
            format!(
                "IPv4 IHL {} with {} option bytes: MetaRoCE sends IHL 5, no options",
                v4.ihl,
                v4.options.len()
            ),
        ));
    }
    if !v4.dont_fragment() {
        out.push(Finding::new("MR-ENC-6", "IPv4 Don't Fragment flag not set"));
    }
    let right = v4.compute_checksum();
    if v4.checksum != right {
        out.push(Finding::new(
            "MR-ENC-7",
            format!(
                "IPv4 header checksum 0x{:04x} but the header needs 0x{right:04x}",
                v4.checksum
            ),
        ));
    }
}

/// MR-ENC-7: the IP length covers exactly the UDP datagram.
fn ip_length(frame: &Frame<'_>, out: &mut Vec<Finding>) {
    let (Some(ip), Some(udp)) = (&frame.ip, &frame.udp) else {
        return;
    };
    if frame.udp_excess.is_empty() {
        return;
    }
    let message = match ip {
        IpRepr::V4(v4) => format!(
            "IPv4 total length {} but UDP length {} needs {}",
            v4.total_len,
            udp.length,
            v4.buffer_len() + usize::from(udp.length)
        ),
        IpRepr::V6(v6) => format!(
            "IPv6 payload length {} but UDP length {} needs {}",
            v6.payload_len, udp.length, udp.length
        ),
    };
    out.push(Finding::new("MR-ENC-7", message));
}

/// MR-ENC-11 (destination port). The source port is not judged: any value is
/// allowed (MR-ENC-13, a MAY since v1.1).
fn ports(udp: &UdpRepr, out: &mut Vec<Finding>) {
    if udp.dst_port != ROCEV2_PORT {
        out.push(Finding::new(
            "MR-ENC-11",
            format!(
                "UDP destination port {} instead of 4791 on a RoCE packet",
                udp.dst_port
            ),
        ));
    }
}

/// MR-ENC-16: the UDP checksum is 0 or correct.
fn udp_checksum(ip: &IpRepr<'_>, udp: &UdpRepr, roce: &RocePacket<'_>, out: &mut Vec<Finding>) {
    if udp.checksum == 0 {
        return;
    }
    let right = udp_checksum_of(ip, udp, roce);
    if udp.checksum != right {
        out.push(Finding::new(
            "MR-ENC-16",
            format!(
                "UDP checksum 0x{:04x} is neither 0 nor the correct 0x{right:04x}",
                udp.checksum
            ),
        ));
    }
}

/// The UDP checksum of the datagram (RFC 768, RFC 8200 §8.1): one's
/// complement sum over the pseudo-header, the UDP header with checksum 0 and
/// the payload; a result of 0 is sent as 0xFFFF.
pub(crate) fn udp_checksum_of(ip: &IpRepr<'_>, udp: &UdpRepr, roce: &RocePacket<'_>) -> u16 {
    let mut bytes = Vec::with_capacity(40 + UdpRepr::LEN + roce.buffer_len());
    match ip {
        IpRepr::V4(v4) => {
            bytes.extend_from_slice(&v4.src.octets());
            bytes.extend_from_slice(&v4.dst.octets());
            bytes.extend_from_slice(&[0, PROTOCOL_UDP]);
            bytes.extend_from_slice(&udp.length.to_be_bytes());
        }
        IpRepr::V6(v6) => {
            bytes.extend_from_slice(&v6.src.octets());
            bytes.extend_from_slice(&v6.dst.octets());
            bytes.extend_from_slice(&u32::from(udp.length).to_be_bytes());
            bytes.extend_from_slice(&[0, 0, 0, PROTOCOL_UDP]);
        }
    }
    bytes.extend_from_slice(&udp.src_port.to_be_bytes());
    bytes.extend_from_slice(&udp.dst_port.to_be_bytes());
    bytes.extend_from_slice(&udp.length.to_be_bytes());
    bytes.extend_from_slice(&[0, 0]);
    let start = bytes.len();
    bytes.resize(start + roce.buffer_len(), 0);
    // The buffer holds exactly `buffer_len()` bytes, which `emit` accepts.
    let _ = roce.emit(&mut bytes[start..]);
    match internet_checksum(&bytes) {
        0 => 0xFFFF,
        sum => sum,
    }
}
