//! A whole Ethernet frame, decoded as far as this codec goes.
//!
//! [`Frame::parse`] is lossless: for every input it accepts,
//! [`Frame::emit`] writes back the same bytes (reserved bits, unknown opcodes,
//! pad, a wrong ICRC, Ethernet padding and FCS included). Lengths are taken
//! from the headers and checked against the input; nothing is recomputed.

use crate::error::{Layer, WireError, check_emit};
use crate::ethernet::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, EthernetRepr};
use crate::ipv4::{Ipv4Repr, PROTOCOL_UDP};
use crate::ipv6::Ipv6Repr;
use crate::opcode::Dialect;
use crate::roce::RocePacket;
use crate::udp::{ROCEV2_PORT, UdpRepr};

/// How frames are recognised and decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseOptions {
    /// UDP destination ports that mark a RoCEv2 packet (default: 4791).
    pub roce_ports: Vec<u16>,
    /// Whether MetaRoCE MP opcodes are decoded (default) or left unknown.
    pub dialect: Dialect,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            roce_ports: vec![ROCEV2_PORT],
            dialect: Dialect::MetaRoce,
        }
    }
}

/// The IP header of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpRepr<'a> {
    /// IPv4, with its options.
    V4(Ipv4Repr<'a>),
    /// IPv6 fixed header.
    V6(Ipv6Repr),
}

impl IpRepr<'_> {
    /// Header bytes on the wire.
    pub fn buffer_len(&self) -> usize {
        match self {
            IpRepr::V4(v4) => v4.buffer_len(),
            IpRepr::V6(v6) => v6.buffer_len(),
        }
    }

    /// ECN code point.
    pub const fn ecn(&self) -> u8 {
        match self {
            IpRepr::V4(v4) => v4.ecn(),
            IpRepr::V6(v6) => v6.ecn(),
        }
    }

    /// DSCP.
    pub const fn dscp(&self) -> u8 {
        match self {
            IpRepr::V4(v4) => v4.dscp(),
            IpRepr::V6(v6) => v6.dscp(),
        }
    }

    /// Writes the header.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        match self {
            IpRepr::V4(v4) => v4.emit(buf),
            IpRepr::V6(v6) => v6.emit(buf),
        }
    }
}

/// The payload of an IP datagram and what it carries.
struct IpPayload<'a> {
    bytes: &'a [u8],
    protocol: u8,
    fragment: bool,
}

/// A decoded frame. Layers that are absent are `None`; bytes below the last
/// decoded layer are kept in `payload`. The default is an empty frame (no
/// layer decoded), a place for [`Frame::parse_from`] to fill.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Frame<'a> {
    /// Ethernet header and VLAN tags.
    pub ethernet: EthernetRepr,
    /// IP header, when the EtherType is IPv4 or IPv6.
    pub ip: Option<IpRepr<'a>>,
    /// UDP header, when IP carries UDP (and the datagram is not a fragment).
    pub udp: Option<UdpRepr>,
    /// RoCEv2 packet, when the UDP destination port is a RoCE port.
    pub roce: Option<RocePacket<'a>>,
    /// Undecoded bytes of the innermost decoded layer (empty for RoCE).
    pub payload: &'a [u8],
    /// Bytes inside the IP datagram after the UDP length.
    pub udp_excess: &'a [u8],
    /// Bytes after the IP datagram (Ethernet padding, FCS) or after a non-IP payload.
    pub trailer: &'a [u8],
}

impl<'a> Frame<'a> {
    /// Decodes an Ethernet frame (without or with FCS; an FCS ends up in `trailer`).
    pub fn parse(input: &'a [u8], options: &ParseOptions) -> Result<Self, WireError> {
        let mut frame = Frame::default();
        frame.parse_from(input, options)?;
        Ok(frame)
    }

    /// [`Frame::parse`] into `self`, in place: a frame is some 400 bytes,
    /// and a checker that decodes millions of small frames into a slot it
    /// keeps saves moving each one (a move right after the parse's many
    /// small stores costs more than the decoding of some headers). On an
    /// error `self` holds the layers decoded before it: only the error is
    /// meaningful then.
    pub fn parse_from(&mut self, input: &'a [u8], options: &ParseOptions) -> Result<(), WireError> {
        let (ethernet, rest) = EthernetRepr::parse(input)?;
        *self = Frame {
            ethernet,
            ip: None,
            udp: None,
            roce: None,
            payload: rest,
            udp_excess: &[],
            trailer: &[],
        };
        let ip_start = input.len() - rest.len();
        let datagram = match ethernet.ethertype {
            ETHERTYPE_IPV4 => self.parse_ipv4(rest, ip_start)?,
            ETHERTYPE_IPV6 => self.parse_ipv6(rest, ip_start)?,
            _ => return Ok(()),
        };
        let ip_payload = datagram.bytes;
        self.payload = ip_payload;
        if datagram.protocol != PROTOCOL_UDP || datagram.fragment {
            return Ok(());
        }
        let udp_start = input.len() - self.trailer.len() - ip_payload.len();
        let (udp, udp_rest) = UdpRepr::parse(ip_payload).map_err(|e| e.shifted(udp_start))?;
        let udp_len = usize::from(udp.length);
        if udp_len < UdpRepr::LEN {
            return Err(WireError::invalid(
                Layer::Udp,
                "length",
                udp_start + crate::udp::field::LENGTH,
                u64::from(udp.length),
                "UDP length below the 8-byte header",
            ));
        }
        if udp_len > ip_payload.len() {
            return Err(WireError::truncated(
                Layer::Udp,
                "length",
                udp_start,
                udp_len,
                ip_payload.len(),
            ));
        }
        let (udp_payload, excess) = udp_rest.split_at(udp_len - UdpRepr::LEN);
        self.udp = Some(udp);
        self.udp_excess = excess;
        self.payload = udp_payload;
        if options.roce_ports.contains(&udp.dst_port) {
            let roce_start = udp_start + UdpRepr::LEN;
            self.roce
                .insert(RocePacket::default())
                .parse_from(udp_payload, options.dialect)
                .map_err(|e| e.shifted(roce_start))?;
            self.payload = &[];
        }
        Ok(())
    }

    /// Decodes IPv4; sets `ip` and `trailer`.
    #[inline]
    fn parse_ipv4(&mut self, input: &'a [u8], start: usize) -> Result<IpPayload<'a>, WireError> {
        let (ip, rest) = Ipv4Repr::parse(input).map_err(|e| e.shifted(start))?;
        let header_len = ip.buffer_len();
        let total = usize::from(ip.total_len);
        if total < header_len {
            return Err(WireError::invalid(
                Layer::Ipv4,
                "total_len",
                start + crate::ipv4::field::TOTAL_LEN,
                u64::from(ip.total_len),
                "total length below the header length",
            ));
        }
        if total > input.len() {
            return Err(WireError::truncated(
                Layer::Ipv4,
                "total_len",
                start,
                total,
                input.len(),
            ));
        }
        let (payload, trailer) = rest.split_at(total - header_len);
        self.ip = Some(IpRepr::V4(ip));
        self.trailer = trailer;
        Ok(IpPayload {
            bytes: payload,
            protocol: ip.protocol,
            fragment: ip.is_fragment(),
        })
    }

    /// Decodes IPv6; sets `ip` and `trailer`.
    #[inline]
    fn parse_ipv6(&mut self, input: &'a [u8], start: usize) -> Result<IpPayload<'a>, WireError> {
        let (ip, rest) = Ipv6Repr::parse(input).map_err(|e| e.shifted(start))?;
        let len = usize::from(ip.payload_len);
        if len > rest.len() {
            return Err(WireError::truncated(
                Layer::Ipv6,
                "payload_len",
                start + Ipv6Repr::LEN,
                len,
                rest.len(),
            ));
        }
        let (payload, trailer) = rest.split_at(len);
        self.ip = Some(IpRepr::V6(ip));
        self.trailer = trailer;
        Ok(IpPayload {
            bytes: payload,
            protocol: ip.next_header,
            fragment: false,
        })
    }

    /// Bytes on the wire.
    pub fn buffer_len(&self) -> usize {
        self.ethernet.buffer_len()
            + self.ip.as_ref().map_or(0, IpRepr::buffer_len)
            + self.udp.as_ref().map_or(0, UdpRepr::buffer_len)
            + self.roce.as_ref().map_or(0, RocePacket::buffer_len)
            + self.payload.len()
            + self.udp_excess.len()
            + self.trailer.len()
    }

    /// Writes the frame into the start of `buf`; returns the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        check_emit(Layer::Ethernet, buf, self.buffer_len())?;
        self.ethernet.emit(buf)?;
        let mut at = self.ethernet.buffer_len();
        if let Some(ip) = &self.ip {
            ip.emit(&mut buf[at..])?;
            at += ip.buffer_len();
        }
        if let Some(udp) = &self.udp {
            udp.emit(&mut buf[at..])?;
            at += UdpRepr::LEN;
        }
        if let Some(roce) = &self.roce {
            at += roce.emit(&mut buf[at..])?;
        }
        for part in [self.payload, self.udp_excess, self.trailer] {
            buf[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        Ok(at)
    }

    /// The frame's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0; self.buffer_len()];
        // The buffer has exactly `buffer_len()` bytes, which `emit` accepts.
        let written = self.emit(&mut out).unwrap_or(0);
        out.truncate(written);
        out
    }
}
