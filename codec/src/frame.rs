//! A whole Ethernet frame, decoded as far as this codec goes.
//!
//! [`Frame::parse`] is lossless: for every input it accepts,
//! [`Frame::emit`] writes back the same bytes (reserved bits, unknown opcodes,
//! pad, a wrong ICRC, Ethernet padding and FCS included). Lengths are taken
//! from the headers and checked against the input; nothing is recomputed.
//!
//! By default a frame shorter than its headers say is a `Truncated` error:
//! what the harness and the fuzz targets want. A capture that keeps only
//! the first bytes of each frame (`tcpdump -s 128`, a switch's mirror
//! truncation) asks for [`ParseOptions::accept_cut`]: then every header the
//! capture holds is decoded, the lengths of what it does not hold come from
//! the IP and UDP headers, and [`Frame::cut`] says where the capture ends
//! and how many bytes it left out. Such a frame still emits the bytes it was
//! parsed from.

use std::net::IpAddr;

use crate::bth::BthRepr;
use crate::error::{Layer, WireError, WireErrorKind, check_emit};
use crate::ethernet::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_ROCE_V1, EthernetRepr};
use crate::ipv4::{Ipv4Repr, PROTOCOL_UDP};
use crate::ipv6::{EXTENSION_HEADERS, Ipv6Repr, walk_extensions};
use crate::opcode::Dialect;
use crate::roce::{ICRC_LEN, RocePacket};
use crate::udp::{ROCEV2_PORT, UdpRepr};

/// The GRH next header of a BTH (IBA 8.3.1): what a RoCE v1 GRH carries.
pub const GRH_NEXT_HEADER_BTH: u8 = 0x1B;

/// How frames are recognised and decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseOptions {
    /// UDP destination ports that mark a RoCEv2 packet (default: 4791).
    pub roce_ports: Vec<u16>,
    /// Whether MetaRoCE MP opcodes are decoded (default) or left unknown.
    pub dialect: Dialect,
    /// A frame the capture cut short decodes as far as it goes, with
    /// [`Frame::cut`] set, instead of being a `Truncated` error (default
    /// false). For captures; the strict default is for generated frames.
    pub accept_cut: bool,
    /// RoCE v1 (EtherType 0x8915: a GRH and the BTH, no IP or UDP) is
    /// decoded (default false: the frame is Ethernet with a payload).
    pub roce_v1: bool,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            roce_ports: vec![ROCEV2_PORT],
            dialect: Dialect::MetaRoce,
            accept_cut: false,
            roce_v1: false,
        }
    }
}

impl ParseOptions {
    /// The options for frames read from a capture: the defaults with
    /// [`ParseOptions::accept_cut`] and [`ParseOptions::roce_v1`] set.
    pub fn capture() -> Self {
        ParseOptions {
            accept_cut: true,
            roce_v1: true,
            ..ParseOptions::default()
        }
    }
}

/// Where a capture cut a frame short ([`ParseOptions::accept_cut`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cut {
    /// The first layer the capture does not hold whole: the header it ends
    /// in, or [`Layer::Payload`] when every header is whole (the payload,
    /// pad or ICRC is not).
    pub layer: Layer,
    /// Bytes of the IP datagram (of the GRH payload, for RoCE v1) the
    /// capture left out, as the IP header says; 0 when the capture ends
    /// inside the IP header.
    pub missing: usize,
    /// Of those, bytes of the RoCE packet (payload, pad, ICRC).
    pub roce_missing: usize,
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

    /// Source and destination addresses.
    pub const fn addrs(&self) -> (IpAddr, IpAddr) {
        match self {
            IpRepr::V4(v4) => (IpAddr::V4(v4.src), IpAddr::V4(v4.dst)),
            IpRepr::V6(v6) => (IpAddr::V6(v6.src), IpAddr::V6(v6.dst)),
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
    /// The payload bytes captured.
    bytes: &'a [u8],
    /// Payload bytes on the wire (more than `bytes` when the capture cut it).
    wire_len: usize,
    protocol: u8,
    fragment: bool,
}

/// A decoded frame. Layers that are absent are `None`; bytes below the last
/// decoded layer are kept in `payload`. The default is an empty frame (no
/// layer decoded), a place for [`Frame::parse_from`] to fill.
///
/// RoCE v1 ([`ParseOptions::roce_v1`]) has its GRH in `ip` (an IPv6
/// header in form, next header 0x1B), no `udp`, and the packet in `roce`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Frame<'a> {
    /// Ethernet header and VLAN tags.
    pub ethernet: EthernetRepr,
    /// IP header, when the EtherType is IPv4 or IPv6 (the GRH of RoCE v1).
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
    /// Where the capture cut the frame short (only with
    /// [`ParseOptions::accept_cut`]; `None`: the frame is whole).
    pub cut: Option<Cut>,
}

/// A `Truncated` error whose bytes lie within `wire_len` bytes of its
/// input: the capture, not the sender, left them out.
fn cut_by_capture(e: &WireError, wire_len: usize) -> bool {
    match e.kind {
        WireErrorKind::Truncated { needed, .. } => e.offset.saturating_add(needed) <= wire_len,
        _ => false,
    }
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
    #[inline]
    pub fn parse_from(&mut self, input: &'a [u8], options: &ParseOptions) -> Result<(), WireError> {
        let (ethernet, rest) = EthernetRepr::parse(input)?;
        self.parse_after(ethernet, rest, input.len() - rest.len(), options)
    }

    /// Decodes what follows a link-layer header: `input` starts where
    /// `ethernet.ethertype` says (an IP header, a GRH), `start` bytes into
    /// the captured frame (error offsets count from there). For link types
    /// whose header is not Ethernet ([`crate::decap`]): `ethernet` then
    /// stands for it, and [`Frame::emit`] writes it as an Ethernet header.
    #[inline]
    pub fn parse_after(
        &mut self,
        ethernet: EthernetRepr,
        input: &'a [u8],
        start: usize,
        options: &ParseOptions,
    ) -> Result<(), WireError> {
        *self = Frame {
            ethernet,
            ip: None,
            udp: None,
            roce: None,
            payload: input,
            udp_excess: &[],
            trailer: &[],
            cut: None,
        };
        let datagram = match ethernet.ethertype {
            ETHERTYPE_IPV4 => self.parse_ipv4(input, start, options)?,
            ETHERTYPE_IPV6 => self.parse_ipv6(input, start, options)?,
            ETHERTYPE_ROCE_V1 if options.roce_v1 => {
                return self.parse_roce_v1(input, start, options);
            }
            _ => return Ok(()),
        };
        let Some(datagram) = datagram else {
            return Ok(());
        };
        let ip_payload = datagram.bytes;
        self.payload = ip_payload;
        if datagram.protocol != PROTOCOL_UDP || datagram.fragment {
            return Ok(());
        }
        let udp_start = start + input.len() - self.trailer.len() - ip_payload.len();
        let (udp, udp_rest) = match UdpRepr::parse(ip_payload) {
            Ok(parsed) => parsed,
            Err(e) if self.cut.is_some() && cut_by_capture(&e, datagram.wire_len) => {
                self.cut_in(Layer::Udp);
                return Ok(());
            }
            Err(e) => return Err(e.shifted(udp_start)),
        };
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
        if udp_len > datagram.wire_len {
            return Err(WireError::truncated(
                Layer::Udp,
                "length",
                udp_start,
                udp_len,
                datagram.wire_len,
            ));
        }
        let captured = (udp_len - UdpRepr::LEN).min(udp_rest.len());
        let (udp_payload, excess) = udp_rest.split_at(captured);
        self.udp = Some(udp);
        self.udp_excess = excess;
        self.payload = udp_payload;
        if options.roce_ports.contains(&udp.dst_port) {
            let roce_start = udp_start + UdpRepr::LEN;
            self.parse_roce(udp_payload, udp_len - UdpRepr::LEN, roce_start, options)?;
        }
        Ok(())
    }

    /// Decodes the RoCE packet in `bytes` (its first bytes, when the
    /// capture cut it: `wire_len` on the wire), `start` bytes into the frame.
    /// The whole packet (the common case) is decoded here, in line; a
    /// packet the capture cut short goes to [`Frame::parse_roce_cut`].
    #[inline(always)]
    fn parse_roce(
        &mut self,
        bytes: &'a [u8],
        wire_len: usize,
        start: usize,
        options: &ParseOptions,
    ) -> Result<(), WireError> {
        if self.cut.is_some() {
            return self.parse_roce_cut(bytes, wire_len, start, options);
        }
        self.roce
            .insert(RocePacket::default())
            .parse_from(bytes, options.dialect)
            .map_err(|e| e.shifted(start))?;
        self.payload = &[];
        Ok(())
    }

    /// [`Frame::parse_roce`] of a packet the capture cut short.
    #[inline(never)]
    fn parse_roce_cut(
        &mut self,
        bytes: &'a [u8],
        wire_len: usize,
        start: usize,
        options: &ParseOptions,
    ) -> Result<(), WireError> {
        let mut packet = RocePacket::default();
        match packet.parse_cut_from(bytes, wire_len, options.dialect) {
            Ok(missing) => {
                self.roce = Some(packet);
                self.payload = &[];
                if let Some(cut) = &mut self.cut {
                    cut.roce_missing = missing;
                    if missing == 0 {
                        // Only bytes after the RoCE packet were left out.
                        cut.layer = Layer::Payload;
                    }
                }
                Ok(())
            }
            Err(e) if cut_by_capture(&e, wire_len) => {
                self.cut_in(e.layer);
                Ok(())
            }
            Err(e) => Err(e.shifted(start)),
        }
    }

    /// The capture ends inside `layer`'s header.
    fn cut_in(&mut self, layer: Layer) {
        if let Some(cut) = &mut self.cut {
            cut.layer = layer;
            cut.roce_missing = 0;
        }
    }

    /// The bytes of a datagram of `wire_len` bytes at the front of `rest`:
    /// the datagram (as captured) and the trailer, and `Cut` set when the
    /// capture holds less than `wire_len` and cut frames are accepted.
    /// `None`: truncated and not accepted.
    #[inline]
    fn split_datagram(
        &mut self,
        rest: &'a [u8],
        wire_len: usize,
        options: &ParseOptions,
    ) -> Option<&'a [u8]> {
        if wire_len <= rest.len() {
            let (datagram, trailer) = rest.split_at(wire_len);
            self.trailer = trailer;
            return Some(datagram);
        }
        if !options.accept_cut {
            return None;
        }
        self.cut = Some(Cut {
            layer: Layer::Payload,
            missing: wire_len - rest.len(),
            roce_missing: 0,
        });
        Some(rest)
    }

    /// An IP header the capture cut short (accepted): no IP layer, the
    /// bytes kept as payload.
    fn ip_cut(&mut self, e: &WireError, layer: Layer, options: &ParseOptions) -> bool {
        let cut = options.accept_cut && matches!(e.kind, WireErrorKind::Truncated { .. });
        if cut {
            self.cut = Some(Cut {
                layer,
                missing: 0,
                roce_missing: 0,
            });
        }
        cut
    }

    /// Decodes IPv4; sets `ip` and `trailer`.
    #[inline]
    fn parse_ipv4(
        &mut self,
        input: &'a [u8],
        start: usize,
        options: &ParseOptions,
    ) -> Result<Option<IpPayload<'a>>, WireError> {
        let (ip, rest) = match Ipv4Repr::parse(input) {
            Ok(parsed) => parsed,
            Err(e) if self.ip_cut(&e, Layer::Ipv4, options) => return Ok(None),
            Err(e) => return Err(e.shifted(start)),
        };
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
        let Some(datagram) = self.split_datagram(input, total, options) else {
            return Err(WireError::truncated(
                Layer::Ipv4,
                "total_len",
                start,
                total,
                input.len(),
            ));
        };
        self.ip = Some(IpRepr::V4(ip));
        Ok(Some(IpPayload {
            bytes: &rest[..datagram.len() - header_len],
            wire_len: total - header_len,
            protocol: ip.protocol,
            fragment: ip.is_fragment(),
        }))
    }

    /// Decodes IPv6; sets `ip` and `trailer`. Extension headers in front
    /// of a UDP datagram to a RoCE port are `Unsupported` (MetaRoCE sends
    /// none); in front of anything else the datagram is kept as payload.
    #[inline]
    fn parse_ipv6(
        &mut self,
        input: &'a [u8],
        start: usize,
        options: &ParseOptions,
    ) -> Result<Option<IpPayload<'a>>, WireError> {
        let (ip, rest) = match Ipv6Repr::parse_fixed_header(input) {
            Ok(parsed) => parsed,
            Err(e) if self.ip_cut(&e, Layer::Ipv6, options) => return Ok(None),
            Err(e) => return Err(e.shifted(start)),
        };
        let len = usize::from(ip.payload_len);
        let Some(datagram) = self.split_datagram(rest, len, options) else {
            return Err(WireError::truncated(
                Layer::Ipv6,
                "payload_len",
                start + Ipv6Repr::LEN,
                len,
                rest.len(),
            ));
        };
        if EXTENSION_HEADERS.contains(&ip.next_header) {
            let chain = walk_extensions(ip.next_header, datagram);
            let to_roce = !chain.incomplete
                && chain.next_header == PROTOCOL_UDP
                && chain.rest.get(2..4).is_some_and(|p| {
                    options
                        .roce_ports
                        .contains(&u16::from_be_bytes([p[0], p[1]]))
                });
            if to_roce {
                return Err(WireError::unsupported(
                    Layer::Ipv6,
                    "next_header",
                    start + crate::ipv6::field::NEXT_HEADER,
                    "IPv6 extension headers",
                ));
            }
        }
        self.ip = Some(IpRepr::V6(ip));
        Ok(Some(IpPayload {
            bytes: datagram,
            wire_len: len,
            protocol: ip.next_header,
            fragment: false,
        }))
    }

    /// Decodes RoCE v1: the GRH (in `ip`) and the packet after it.
    fn parse_roce_v1(
        &mut self,
        input: &'a [u8],
        start: usize,
        options: &ParseOptions,
    ) -> Result<(), WireError> {
        let (grh, rest) = match Ipv6Repr::parse_fixed_header(input) {
            Ok(parsed) => parsed,
            Err(e) if self.ip_cut(&e, Layer::Grh, options) => return Ok(()),
            Err(mut e) => {
                e.layer = Layer::Grh;
                return Err(e.shifted(start));
            }
        };
        let len = usize::from(grh.payload_len);
        let Some(datagram) = self.split_datagram(rest, len, options) else {
            return Err(WireError::truncated(
                Layer::Grh,
                "payload_len",
                start + Ipv6Repr::LEN,
                len,
                rest.len(),
            ));
        };
        self.ip = Some(IpRepr::V6(grh));
        self.payload = datagram;
        if grh.next_header != GRH_NEXT_HEADER_BTH {
            return Ok(());
        }
        self.parse_roce(datagram, len, start + Ipv6Repr::LEN, options)
    }

    /// Whether the frame is RoCE v1 (its `ip` is a GRH).
    pub fn is_roce_v1(&self) -> bool {
        self.ethernet.ethertype == ETHERTYPE_ROCE_V1 && self.udp.is_none()
    }

    /// Payload bytes of the RoCE packet on the wire: those captured, and
    /// those the capture left out ([`Frame::cut`]).
    pub fn roce_payload_len(&self) -> Option<usize> {
        let roce = self.roce.as_ref()?;
        let missing = self.cut.map_or(0, |c| c.roce_missing);
        let tail = ICRC_LEN + usize::from(roce.bth.pad_count);
        Some(roce.payload.len() + missing.saturating_sub(tail))
    }

    /// Whether the capture cut a RoCE packet inside its headers (BTH or an
    /// extension header): UDP named a RoCE port (or the GRH a BTH), and no
    /// `roce` was decoded.
    pub fn cut_in_roce_headers(&self) -> bool {
        self.roce.is_none()
            && self.cut.is_some_and(|c| {
                c.layer.is_roce() && !matches!(c.layer, Layer::Payload | Layer::Icrc)
            })
    }

    /// The BTH of a RoCEv2 packet that did not decode: after
    /// [`Frame::parse_from`] (or [`Frame::parse_after`]) failed inside the
    /// RoCE packet, past its BTH (an extension header cut short, no room
    /// for the ICRC, a PadCnt beyond the bytes left), its BTH, read from
    /// the bytes the UDP header delimits. A failed parse leaves in `self`
    /// the layers it decoded before the error: `ip`, `udp` and, in
    /// `payload`, the UDP payload, which this reads. `None` when the error
    /// lies elsewhere (no UDP header to one of `options.roce_ports` was
    /// decoded), when the bytes end inside the BTH, and after a parse that
    /// succeeded (`payload` is then empty for RoCE). The IP header and the
    /// BTH are what a receiver needs to take such a packet as trimmed by a
    /// switch (MetaRoCE SPEC.md §7.10, MR-MPT-4): its addresses, DSCP,
    /// opcode and DestQP.
    pub fn undecoded_bth(&self, options: &ParseOptions) -> Option<BthRepr> {
        let udp = self.udp.as_ref()?;
        if self.ip.is_none() || !options.roce_ports.contains(&udp.dst_port) {
            return None;
        }
        BthRepr::parse(self.payload).ok().map(|(bth, _)| bth)
    }

    /// Whether the capture holds the whole RoCE packet, ICRC included.
    pub fn roce_whole(&self) -> bool {
        self.cut.is_none_or(|c| c.roce_missing == 0)
    }

    /// ICRC bytes of the RoCE packet the capture holds.
    fn icrc_captured(&self) -> usize {
        ICRC_LEN - self.cut.map_or(0, |c| c.roce_missing.min(ICRC_LEN))
    }

    /// Bytes on the wire (those captured, for a frame the capture cut).
    pub fn buffer_len(&self) -> usize {
        self.ethernet.buffer_len()
            + self.ip.as_ref().map_or(0, IpRepr::buffer_len)
            + self.udp.as_ref().map_or(0, UdpRepr::buffer_len)
            + self
                .roce
                .as_ref()
                .map_or(0, |r| r.buffer_len() - ICRC_LEN + self.icrc_captured())
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
            if self.roce_whole() {
                at += roce.emit(&mut buf[at..])?;
            } else {
                // The ICRC bytes the capture left out are not written.
                roce.bth.emit(&mut buf[at..])?;
                at += crate::bth::BthRepr::LEN;
                at += roce.ext.emit(&mut buf[at..])?;
                let icrc = &roce.icrc[..self.icrc_captured()];
                for part in [roce.payload, roce.pad, icrc] {
                    buf[at..at + part.len()].copy_from_slice(part);
                    at += part.len();
                }
            }
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
