//! A builder for valid and deliberately invalid RoCEv2 frames.
//!
//! By default it fills every derived field: IPv4 total length and checksum
//! (or IPv6 payload length), UDP length, BTH PadCnt, zero pad bytes and the
//! ICRC. Each of those can be overridden, and every header field can be set
//! to any value, so the harness and the fuzzer can make any packet they need:
//! a wrong ICRC, a PadCnt that disagrees with the pad, an IP length that
//! disagrees with UDP, reserved bits set, headers that disagree with the
//! opcode, or a frame cut short.
//!
//! ```
//! use metaroce_codec::{PacketBuilder, Opcode, Frame, ParseOptions, icrc};
//! let bytes = PacketBuilder::new(Opcode::RC_SEND_ONLY).psn(7).payload(*b"hello").build();
//! let frame = Frame::parse(&bytes, &ParseOptions::default()).unwrap();
//! assert_eq!(frame.roce.unwrap().payload, b"hello");
//! assert_eq!(icrc::verify(&frame), icrc::IcrcStatus::Valid);
//! ```

use crate::bth::BthRepr;
use crate::ethernet::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, EthernetRepr, VlanTag};
use crate::ext::{AethRepr, DethRepr, ExtHeaders, Syndrome};
use crate::frame::{Frame, IpRepr};
use crate::icrc;
use crate::ipv4::{Ipv4Repr, PROTOCOL_UDP};
use crate::ipv6::Ipv6Repr;
use crate::opcode::{Dialect, ExtKind, Opcode};
use crate::roce::{ICRC_LEN, RocePacket};
use crate::seq::Psn;
use crate::udp::{ROCEV2_PORT, UdpRepr};
use core::net::{Ipv4Addr, Ipv6Addr};

/// The Q_Key of the GSI QP (QP1).
pub const GSI_QKEY: u32 = 0x8001_0000;

/// The IP layer the builder makes.
#[derive(Clone, Debug, PartialEq, Eq)]
enum IpConfig {
    V4 {
        src: Ipv4Addr,
        dst: Ipv4Addr,
        tos: u8,
        ttl: u8,
        ident: u16,
        flags_frag: u16,
        options: Vec<u8>,
    },
    V6 {
        src: Ipv6Addr,
        dst: Ipv6Addr,
        traffic_class: u8,
        flow_label: u32,
        hop_limit: u8,
    },
}

/// Fields the builder derives unless told otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Overrides {
    pad_count: Option<u8>,
    pad: Option<Vec<u8>>,
    ip_length: Option<u16>,
    ipv4_ihl: Option<u8>,
    ipv4_checksum: Option<u16>,
    ip_protocol: Option<u8>,
    udp_length: Option<u16>,
    icrc: Option<[u8; ICRC_LEN]>,
    truncate: Option<usize>,
    trailer: Vec<u8>,
}

/// Builds one RoCEv2 frame. See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketBuilder {
    ethernet: EthernetRepr,
    ip: IpConfig,
    udp_src_port: u16,
    udp_dst_port: u16,
    udp_checksum: u16,
    bth: BthRepr,
    ext: ExtHeaders,
    payload: Vec<u8>,
    overrides: Overrides,
}

impl PacketBuilder {
    /// A packet of `opcode` with the headers its layout names, all defaulted:
    /// MACs 02:00:00:00:00:01 → :02, IPv4 10.0.0.1 → 10.0.0.2 (DF, TTL 64),
    /// UDP 0xC000 → 4791 with checksum 0, P_Key 0xFFFF, DestQP 0x11, PSN 0,
    /// AETH syndrome 0x1F, DETH Q_Key 0x80010000, empty payload.
    pub fn new(opcode: Opcode) -> Self {
        let mut ext = ExtHeaders::default();
        if let Some(layout) = opcode.layout(Dialect::MetaRoce) {
            for &kind in layout.headers {
                ext.insert_default(kind);
            }
        }
        if let Some(aeth) = &mut ext.aeth {
            aeth.syndrome = Syndrome::ACK_UNLIMITED;
        }
        if let Some(sacketh) = &mut ext.sacketh {
            sacketh.syndrome = Syndrome::ACK_UNLIMITED;
        }
        if let Some(deth) = &mut ext.deth {
            deth.qkey = GSI_QKEY;
        }
        PacketBuilder {
            ethernet: EthernetRepr {
                dst: [0x02, 0, 0, 0, 0, 0x02],
                src: [0x02, 0, 0, 0, 0, 0x01],
                ethertype: ETHERTYPE_IPV4,
                ..EthernetRepr::default()
            },
            ip: IpConfig::V4 {
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::new(10, 0, 0, 2),
                tos: 0,
                ttl: 64,
                ident: 0,
                flags_frag: 0x4000,
                options: Vec::new(),
            },
            udp_src_port: 0xC000,
            udp_dst_port: ROCEV2_PORT,
            udp_checksum: 0,
            bth: BthRepr {
                opcode,
                pkey: 0xFFFF,
                dest_qp: 0x11,
                becn: opcode == Opcode::CNP,
                ..BthRepr::default()
            },
            ext,
            payload: Vec::new(),
            overrides: Overrides::default(),
        }
    }

    /// Sets the MAC addresses.
    pub fn macs(mut self, src: [u8; 6], dst: [u8; 6]) -> Self {
        self.ethernet.src = src;
        self.ethernet.dst = dst;
        self
    }

    /// Adds a VLAN tag (at most two are kept; a third replaces the inner one).
    pub fn vlan(mut self, tag: VlanTag) -> Self {
        let n = usize::from(self.ethernet.vlan_count.min(1));
        self.ethernet.vlans[n] = tag;
        self.ethernet.vlan_count = (n + 1) as u8;
        self
    }

    /// IPv4 with these addresses (keeps ToS and TTL if already IPv4).
    pub fn ipv4(mut self, src: Ipv4Addr, dst: Ipv4Addr) -> Self {
        self.ethernet.ethertype = ETHERTYPE_IPV4;
        match &mut self.ip {
            IpConfig::V4 { src: s, dst: d, .. } => (*s, *d) = (src, dst),
            IpConfig::V6 {
                traffic_class,
                hop_limit,
                ..
            } => {
                self.ip = IpConfig::V4 {
                    src,
                    dst,
                    tos: *traffic_class,
                    ttl: *hop_limit,
                    ident: 0,
                    flags_frag: 0x4000,
                    options: Vec::new(),
                }
            }
        }
        self
    }

    /// IPv6 with these addresses (keeps the traffic class and hop limit).
    pub fn ipv6(mut self, src: Ipv6Addr, dst: Ipv6Addr) -> Self {
        self.ethernet.ethertype = ETHERTYPE_IPV6;
        let (traffic_class, hop_limit, flow_label) = match &self.ip {
            IpConfig::V4 { tos, ttl, .. } => (*tos, *ttl, 0),
            IpConfig::V6 {
                traffic_class,
                hop_limit,
                flow_label,
                ..
            } => (*traffic_class, *hop_limit, *flow_label),
        };
        self.ip = IpConfig::V6 {
            src,
            dst,
            traffic_class,
            flow_label,
            hop_limit,
        };
        self
    }

    /// IPv4 ToS or IPv6 traffic class (DSCP and ECN).
    pub fn traffic_class(mut self, value: u8) -> Self {
        match &mut self.ip {
            IpConfig::V4 { tos, .. } => *tos = value,
            IpConfig::V6 { traffic_class, .. } => *traffic_class = value,
        }
        self
    }

    /// IPv4 TTL or IPv6 hop limit.
    pub fn hop_limit(mut self, value: u8) -> Self {
        match &mut self.ip {
            IpConfig::V4 { ttl, .. } => *ttl = value,
            IpConfig::V6 { hop_limit, .. } => *hop_limit = value,
        }
        self
    }

    /// IPv6 flow label (ignored for IPv4).
    pub fn flow_label(mut self, value: u32) -> Self {
        if let IpConfig::V6 { flow_label, .. } = &mut self.ip {
            *flow_label = value & 0xF_FFFF;
        }
        self
    }

    /// IPv4 identification (ignored for IPv6).
    pub fn ipv4_ident(mut self, value: u16) -> Self {
        if let IpConfig::V4 { ident, .. } = &mut self.ip {
            *ident = value;
        }
        self
    }

    /// IPv4 flags and fragment offset (ignored for IPv6).
    pub fn ipv4_flags_frag(mut self, value: u16) -> Self {
        if let IpConfig::V4 { flags_frag, .. } = &mut self.ip {
            *flags_frag = value;
        }
        self
    }

    /// IPv4 option bytes (ignored for IPv6); IHL follows unless overridden.
    pub fn ipv4_options(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        if let IpConfig::V4 { options, .. } = &mut self.ip {
            *options = bytes.into();
        }
        self
    }

    /// UDP source port (the flow entropy).
    pub fn udp_src_port(mut self, port: u16) -> Self {
        self.udp_src_port = port;
        self
    }

    /// UDP destination port (default 4791).
    pub fn udp_dst_port(mut self, port: u16) -> Self {
        self.udp_dst_port = port;
        self
    }

    /// UDP checksum as sent (default 0; not computed).
    pub fn udp_checksum(mut self, value: u16) -> Self {
        self.udp_checksum = value;
        self
    }

    /// The BTH, for any field (PadCnt is overwritten unless [`Self::pad_count`] is set).
    pub fn bth_mut(&mut self) -> &mut BthRepr {
        &mut self.bth
    }

    /// Changes the BTH with a closure.
    pub fn bth(mut self, edit: impl FnOnce(&mut BthRepr)) -> Self {
        edit(&mut self.bth);
        self
    }

    /// Destination QP.
    pub fn dest_qp(mut self, qpn: u32) -> Self {
        self.bth.dest_qp = qpn & 0xFF_FFFF;
        self
    }

    /// PSN.
    pub fn psn(mut self, psn: u32) -> Self {
        self.bth.psn = Psn::new(psn);
        self
    }

    /// AckReq bit.
    pub fn ack_req(mut self, on: bool) -> Self {
        self.bth.ack_req = on;
        self
    }

    /// The extension headers, for any header or field.
    pub fn ext_mut(&mut self) -> &mut ExtHeaders {
        &mut self.ext
    }

    /// Changes the extension headers with a closure.
    pub fn ext(mut self, edit: impl FnOnce(&mut ExtHeaders)) -> Self {
        edit(&mut self.ext);
        self
    }

    /// Removes a header the opcode's layout asks for (to make a malformed packet).
    pub fn without(mut self, kind: ExtKind) -> Self {
        self.ext.remove(kind);
        self
    }

    /// Sets the AETH (adding it if the opcode has none).
    pub fn aeth(mut self, aeth: AethRepr) -> Self {
        self.ext.aeth = Some(aeth);
        self
    }

    /// Sets the DETH (adding it if the opcode has none).
    pub fn deth(mut self, deth: DethRepr) -> Self {
        self.ext.deth = Some(deth);
        self
    }

    /// Payload bytes (pad excluded).
    pub fn payload(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.payload = bytes.into();
        self
    }

    /// PadCnt as sent, instead of `(-payload) mod 4`. Pad bytes follow it unless
    /// [`Self::pad_bytes`] is also set.
    pub fn pad_count(mut self, value: u8) -> Self {
        self.overrides.pad_count = Some(value & 0x3);
        self
    }

    /// Pad bytes as sent, instead of PadCnt zero bytes.
    pub fn pad_bytes(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.overrides.pad = Some(bytes.into());
        self
    }

    /// IPv4 total length or IPv6 payload length as sent.
    pub fn ip_length(mut self, value: u16) -> Self {
        self.overrides.ip_length = Some(value);
        self
    }

    /// IPv4 IHL as sent.
    pub fn ipv4_ihl(mut self, value: u8) -> Self {
        self.overrides.ipv4_ihl = Some(value & 0x0F);
        self
    }

    /// IPv4 header checksum as sent.
    pub fn ipv4_checksum(mut self, value: u16) -> Self {
        self.overrides.ipv4_checksum = Some(value);
        self
    }

    /// IPv4 protocol or IPv6 next header as sent (default 17).
    pub fn ip_protocol(mut self, value: u8) -> Self {
        self.overrides.ip_protocol = Some(value);
        self
    }

    /// UDP length as sent.
    pub fn udp_length(mut self, value: u16) -> Self {
        self.overrides.udp_length = Some(value);
        self
    }

    /// ICRC value as sent (written least-significant byte first).
    pub fn icrc(mut self, value: u32) -> Self {
        self.overrides.icrc = Some(value.to_le_bytes());
        self
    }

    /// An ICRC that is certainly wrong (the right one with its low bit flipped).
    pub fn corrupt_icrc(mut self) -> Self {
        let right = icrc::expected(&self.frame()).unwrap_or(0);
        self.overrides.icrc = Some((right ^ 1).to_le_bytes());
        self
    }

    /// Bytes appended after the IP datagram (Ethernet padding, an FCS, junk).
    pub fn trailer(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.overrides.trailer = bytes.into();
        self
    }

    /// Cuts the built frame to `len` bytes (headers keep their stated lengths).
    pub fn truncate(mut self, len: usize) -> Self {
        self.overrides.truncate = Some(len);
        self
    }

    /// The frame as a value, every derived field filled (or overridden).
    /// Truncation applies only to [`Self::build`].
    pub fn frame(&self) -> Frame<'_> {
        self.frame_with(&self.payload)
    }

    /// [`Self::frame`] with `payload` in place of the builder's payload.
    fn frame_with<'a>(&'a self, payload: &'a [u8]) -> Frame<'a> {
        let o = &self.overrides;
        let pad_count = o.pad_count.unwrap_or(((4 - payload.len() % 4) % 4) as u8);
        const ZEROS: [u8; 3] = [0; 3];
        let pad: &[u8] = match &o.pad {
            Some(bytes) => bytes,
            None => &ZEROS[..usize::from(pad_count)],
        };
        let mut bth = self.bth;
        bth.pad_count = pad_count;
        let roce = RocePacket {
            bth,
            ext: self.ext,
            payload,
            pad,
            icrc: [0; ICRC_LEN],
        };
        let udp_len = UdpRepr::LEN + roce.buffer_len();
        let udp = UdpRepr {
            src_port: self.udp_src_port,
            dst_port: self.udp_dst_port,
            length: o.udp_length.unwrap_or(clamp_u16(udp_len)),
            checksum: self.udp_checksum,
        };
        let protocol = o.ip_protocol.unwrap_or(PROTOCOL_UDP);
        let ip = match &self.ip {
            IpConfig::V4 {
                src,
                dst,
                tos,
                ttl,
                ident,
                flags_frag,
                options,
            } => {
                let header_len = Ipv4Repr::MIN_LEN + options.len();
                let mut v4 = Ipv4Repr {
                    ihl: o.ipv4_ihl.unwrap_or(((header_len / 4).min(15)) as u8),
                    tos: *tos,
                    total_len: o.ip_length.unwrap_or(clamp_u16(header_len + udp_len)),
                    ident: *ident,
                    flags_frag: *flags_frag,
                    ttl: *ttl,
                    protocol,
                    checksum: 0,
                    src: *src,
                    dst: *dst,
                    options,
                };
                v4.checksum = o.ipv4_checksum.unwrap_or_else(|| v4.compute_checksum());
                IpRepr::V4(v4)
            }
            IpConfig::V6 {
                src,
                dst,
                traffic_class,
                flow_label,
                hop_limit,
            } => IpRepr::V6(Ipv6Repr {
                traffic_class: *traffic_class,
                flow_label: *flow_label,
                payload_len: o.ip_length.unwrap_or(clamp_u16(udp_len)),
                next_header: protocol,
                hop_limit: *hop_limit,
                src: *src,
                dst: *dst,
            }),
        };
        let mut frame = Frame {
            ethernet: self.ethernet,
            ip: Some(ip),
            udp: Some(udp),
            roce: Some(roce),
            payload: &[],
            udp_excess: &[],
            trailer: &o.trailer,
            cut: None,
        };
        match o.icrc {
            Some(trailer) => {
                if let Some(roce) = &mut frame.roce {
                    roce.icrc = trailer;
                }
            }
            None => icrc::fill(&mut frame),
        }
        frame
    }

    /// The frame's bytes, as [`Self::build`] makes them, but with a payload
    /// of `len` bytes that `fill` appends to the buffer it is handed (which
    /// then holds exactly the headers) instead of the builder's own payload:
    /// the payload is written once, straight into the frame, with no zero
    /// fill. PadCnt, the lengths and the ICRC follow `len`; if `fill`
    /// appends more or fewer bytes, the payload is cut or zero-extended to
    /// `len`. An error from `fill` is returned as is.
    ///
    /// ```
    /// use metaroce_codec::{Opcode, PacketBuilder};
    /// let b = PacketBuilder::new(Opcode::RC_SEND_ONLY).psn(7);
    /// let filled = b
    ///     .build_filled(5, |buf| {
    ///         buf.extend_from_slice(b"hello");
    ///         Ok::<(), ()>(())
    ///     })
    ///     .unwrap();
    /// assert_eq!(filled, b.payload(*b"hello").build());
    /// ```
    pub fn build_filled<E>(
        &self,
        len: usize,
        fill: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<Vec<u8>, E> {
        // The headers' sizes do not depend on the payload (as `frame_with`
        // lays them out: Ethernet, IP with its options, UDP, BTH, extensions).
        let ip_len = match &self.ip {
            IpConfig::V4 { options, .. } => Ipv4Repr::MIN_LEN + options.len(),
            IpConfig::V6 { .. } => Ipv6Repr::LEN,
        };
        let head = self.ethernet.buffer_len()
            + ip_len
            + UdpRepr::LEN
            + BthRepr::LEN
            + self.ext.buffer_len();
        let o = &self.overrides;
        let mut buf = Vec::with_capacity(head + len + 3 + ICRC_LEN + o.trailer.len());
        buf.resize(head, 0);
        fill(&mut buf)?;
        buf.resize(head + len, 0);
        let (headers, payload) = buf.split_at_mut(head);
        let frame = self.frame_with(payload);
        let mut at = 0;
        // `headers` has exactly the headers' length, which each `emit` accepts.
        let _ = frame.ethernet.emit(headers);
        at += frame.ethernet.buffer_len();
        if let Some(ip) = &frame.ip {
            let _ = ip.emit(&mut headers[at..]);
            at += ip.buffer_len();
        }
        if let Some(udp) = &frame.udp {
            let _ = udp.emit(&mut headers[at..]);
            at += UdpRepr::LEN;
        }
        let (pad_len, icrc) = match &frame.roce {
            Some(roce) => {
                let _ = roce.bth.emit(&mut headers[at..]);
                let _ = roce.ext.emit(&mut headers[at + crate::bth::BthRepr::LEN..]);
                (roce.pad.len(), roce.icrc)
            }
            None => (0, [0; ICRC_LEN]),
        };
        match &o.pad {
            Some(bytes) => buf.extend_from_slice(bytes),
            None => buf.resize(buf.len() + pad_len, 0),
        }
        buf.extend_from_slice(&icrc);
        buf.extend_from_slice(&o.trailer);
        if let Some(cut) = o.truncate {
            buf.truncate(cut);
        }
        Ok(buf)
    }

    /// The frame's bytes (cut short if [`Self::truncate`] was set).
    pub fn build(&self) -> Vec<u8> {
        let mut bytes = self.frame().to_bytes();
        if let Some(len) = self.overrides.truncate {
            bytes.truncate(len);
        }
        bytes
    }
}

fn clamp_u16(value: usize) -> u16 {
    u16::try_from(value).unwrap_or(u16::MAX)
}
