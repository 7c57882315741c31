//! The layers a capture adds around the frames it records, taken off.
//!
//! Mirrored and tunnelled traffic reaches a capture inside other headers:
//! a switch's ERSPAN session (type I, II and III, over GRE), GRE
//! transparent Ethernet bridging, VXLAN, a provider's service tag (QinQ,
//! or a lone 802.1ad tag), and the link-layer headers of capture points
//! that are not Ethernet: Linux cooked capture (SLL, SLL2: `tcpdump -i any`) and raw IP.
//! [`decapsulate`] takes them off and yields the frame inside, with an
//! [`Encapsulation`] that says what was taken off. The frame inside is then
//! decoded by [`crate::Frame`] ([`Inner::parse_into`]).
//!
//! Wire formats: GRE RFC 2784/2890; ERSPAN draft-foschiano-erspan-03
//! (type II: 8-byte header, GRE protocol 0x88BE with a sequence number;
//! type I: 0x88BE without one and no header; type III: 12 bytes, protocol
//! 0x22EB, and an 8-byte platform sub-header when its O bit is set); VXLAN
//! RFC 7348 (UDP port 4789); the Linux cooked capture headers as libpcap's
//! `LINKTYPE_LINUX_SLL` and `LINKTYPE_LINUX_SLL2` pages describe them.
//!
//! Contracts: never panics; at most [`MAX_LAYERS`] layers are taken off
//! (a deeper nesting is `Unsupported`); a frame with nothing to take off
//! is its own inner frame, with an empty [`Encapsulation`].

use crate::error::{Layer, WireError, be16, be32, parse_fixed};
use crate::ethernet::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, EthernetRepr, TPID_8021AD, VlanTag};
use crate::frame::{Frame, ParseOptions};
use crate::ipv4::{Ipv4Repr, PROTOCOL_UDP};
use crate::ipv6::Ipv6Repr;
use crate::udp::UdpRepr;
use core::net::IpAddr;

/// Link type of Ethernet (pcap `LINKTYPE_ETHERNET`).
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Link type of raw IP, version from the first nibble (`LINKTYPE_RAW`).
pub const LINKTYPE_RAW: u32 = 101;
/// Link type of Linux cooked capture v1 (`LINKTYPE_LINUX_SLL`).
pub const LINKTYPE_LINUX_SLL: u32 = 113;
/// Link type of raw IPv4 (`LINKTYPE_IPV4`).
pub const LINKTYPE_IPV4: u32 = 228;
/// Link type of raw IPv6 (`LINKTYPE_IPV6`).
pub const LINKTYPE_IPV6: u32 = 229;
/// Link type of Linux cooked capture v2 (`LINKTYPE_LINUX_SLL2`).
pub const LINKTYPE_LINUX_SLL2: u32 = 276;

/// The link types [`decapsulate`] reads.
pub const LINKTYPES: [u32; 6] = [
    LINKTYPE_ETHERNET,
    LINKTYPE_RAW,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_LINUX_SLL2,
];

/// IP protocol number of GRE.
pub const PROTOCOL_GRE: u8 = 47;
/// GRE protocol of transparent Ethernet bridging.
pub const GRE_PROTO_TEB: u16 = 0x6558;
/// GRE protocol of ERSPAN type I and II.
pub const GRE_PROTO_ERSPAN_II: u16 = 0x88BE;
/// GRE protocol of ERSPAN type III.
pub const GRE_PROTO_ERSPAN_III: u16 = 0x22EB;
/// The IANA UDP port of VXLAN.
pub const VXLAN_PORT: u16 = 4789;

/// Most layers [`decapsulate`] takes off one frame.
pub const MAX_LAYERS: usize = 4;

/// Byte offsets of the GRE header (RFC 2784, RFC 2890).
pub mod gre_field {
    /// Flags: C (0x80), R (0x40), K (0x20), S (0x10), then recursion.
    pub const FLAGS: usize = 0;
    /// Reserved flags (5 bits) and version (3 bits).
    pub const VERSION: usize = 1;
    /// Protocol type, 2 bytes.
    pub const PROTOCOL: usize = 2;
    /// Checksum present.
    pub const C: u8 = 0x80;
    /// Routing present (RFC 1701).
    pub const R: u8 = 0x40;
    /// Key present.
    pub const K: u8 = 0x20;
    /// Sequence number present.
    pub const S: u8 = 0x10;
}

/// A GRE header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GreRepr {
    /// Protocol type of the payload.
    pub protocol: u16,
    /// Checksum, when present.
    pub checksum: Option<u16>,
    /// Key, when present.
    pub key: Option<u32>,
    /// Sequence number, when present.
    pub sequence: Option<u32>,
}

impl GreRepr {
    /// Parses a version-0 GRE header without routing.
    pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        let ((flags, version, protocol), mut rest) = parse_fixed::<4, _>(Layer::Gre, input, |b| {
            (
                b[gre_field::FLAGS],
                b[gre_field::VERSION] & 0x07,
                be16(b, gre_field::PROTOCOL),
            )
        })?;
        if version != 0 {
            return Err(WireError::unsupported(
                Layer::Gre,
                "version",
                gre_field::VERSION,
                "GRE version other than 0",
            ));
        }
        if flags & gre_field::R != 0 {
            return Err(WireError::unsupported(
                Layer::Gre,
                "flags",
                gre_field::FLAGS,
                "GRE source routing",
            ));
        }
        let mut repr = GreRepr {
            protocol,
            ..GreRepr::default()
        };
        let word = |rest: &mut &[u8], name: &'static str| {
            let at = input.len() - rest.len();
            let (v, after) =
                parse_fixed::<4, _>(Layer::Gre, rest, |b| be32(b, 0)).map_err(|e| WireError {
                    field: name,
                    ..e.shifted(at)
                })?;
            *rest = after;
            Ok::<u32, WireError>(v)
        };
        if flags & gre_field::C != 0 {
            repr.checksum = Some((word(&mut rest, "checksum")? >> 16) as u16);
        }
        if flags & gre_field::K != 0 {
            repr.key = Some(word(&mut rest, "key")?);
        }
        if flags & gre_field::S != 0 {
            repr.sequence = Some(word(&mut rest, "sequence")?);
        }
        Ok((repr, rest))
    }
}

/// An ERSPAN header (type II or III; type I has none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ErspanRepr {
    /// ERSPAN version field: 1 for type II, 2 for type III.
    pub version: u8,
    /// VLAN of the mirrored frame (12 bits).
    pub vlan: u16,
    /// Class of service of the mirrored frame (3 bits).
    pub cos: u8,
    /// The mirror truncated the frame (T bit).
    pub truncated: bool,
    /// Session ID (10 bits).
    pub session: u16,
    /// Type II: port index (20 bits); type III: 0.
    pub index: u32,
    /// Type III: timestamp (32 bits, the granularity field says its unit).
    pub timestamp: u32,
    /// Type III: hardware ID (6 bits).
    pub hw_id: u8,
    /// Type III: direction (D bit: 1 egress).
    pub egress: bool,
    /// Type III: the 8-byte platform-specific sub-header is present.
    pub platform: bool,
}

impl ErspanRepr {
    /// Bytes of a type II header.
    pub const LEN_II: usize = 8;
    /// Bytes of a type III header without its platform sub-header.
    pub const LEN_III: usize = 12;

    /// Parses a type II header.
    pub fn parse_ii(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        let (repr, rest) = parse_fixed::<{ Self::LEN_II }, _>(Layer::Erspan, input, |b| {
            let w0 = be32(b, 0);
            ErspanRepr {
                version: (w0 >> 28) as u8,
                vlan: ((w0 >> 16) & 0x0FFF) as u16,
                cos: ((w0 >> 13) & 0x7) as u8,
                truncated: w0 & 0x0400 != 0,
                session: (w0 & 0x03FF) as u16,
                index: be32(b, 4) & 0x000F_FFFF,
                ..ErspanRepr::default()
            }
        })?;
        Self::check_version(repr, 1)?;
        Ok((repr, rest))
    }

    /// Parses a type III header and skips its platform sub-header.
    pub fn parse_iii(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        let (repr, rest) = parse_fixed::<{ Self::LEN_III }, _>(Layer::Erspan, input, |b| {
            let w0 = be32(b, 0);
            let w2 = be32(b, 8);
            ErspanRepr {
                version: (w0 >> 28) as u8,
                vlan: ((w0 >> 16) & 0x0FFF) as u16,
                cos: ((w0 >> 13) & 0x7) as u8,
                truncated: w0 & 0x0400 != 0,
                session: (w0 & 0x03FF) as u16,
                timestamp: be32(b, 4),
                hw_id: ((w2 >> 4) & 0x3F) as u8,
                egress: w2 & 0x8 != 0,
                platform: w2 & 0x1 != 0,
                ..ErspanRepr::default()
            }
        })?;
        Self::check_version(repr, 2)?;
        if !repr.platform {
            return Ok((repr, rest));
        }
        let (_, rest) =
            parse_fixed::<8, _>(Layer::Erspan, rest, |_| ()).map_err(|e| WireError {
                field: "platform",
                ..e.shifted(Self::LEN_III)
            })?;
        Ok((repr, rest))
    }

    fn check_version(repr: Self, want: u8) -> Result<(), WireError> {
        if repr.version == want {
            return Ok(());
        }
        Err(WireError::invalid(
            Layer::Erspan,
            "version",
            0,
            u64::from(repr.version),
            "ERSPAN version does not match the GRE protocol type",
        ))
    }
}

/// A Linux cooked capture header (SLL v1 or v2), the fields both carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SllRepr {
    /// 1 or 2.
    pub version: u8,
    /// Packet type: 0 to us, 1 broadcast, 2 multicast, 3 to another host,
    /// 4 sent by us.
    pub packet_type: u8,
    /// ARPHRD type of the interface (1: Ethernet).
    pub hatype: u16,
    /// Link-layer address length (at most 8 are kept).
    pub addr_len: u8,
    /// Link-layer source address (the first `addr_len` bytes).
    pub addr: [u8; 8],
    /// Protocol: the EtherType of what follows.
    pub protocol: u16,
    /// SLL2: interface index.
    pub ifindex: u32,
}

impl SllRepr {
    /// Bytes of an SLL v1 header.
    pub const LEN_V1: usize = 16;
    /// Bytes of an SLL v2 header.
    pub const LEN_V2: usize = 20;

    /// Parses an SLL v1 header.
    pub fn parse_v1(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        parse_fixed::<{ Self::LEN_V1 }, _>(Layer::Link, input, |b| {
            let mut addr = [0u8; 8];
            addr.copy_from_slice(&b[6..14]);
            SllRepr {
                version: 1,
                packet_type: be16(b, 0) as u8,
                hatype: be16(b, 2),
                addr_len: be16(b, 4).min(8) as u8,
                addr,
                protocol: be16(b, 14),
                ifindex: 0,
            }
        })
    }

    /// Parses an SLL v2 header.
    pub fn parse_v2(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        parse_fixed::<{ Self::LEN_V2 }, _>(Layer::Link, input, |b| {
            let mut addr = [0u8; 8];
            addr.copy_from_slice(&b[12..20]);
            SllRepr {
                version: 2,
                protocol: be16(b, 0),
                ifindex: be32(b, 4),
                hatype: be16(b, 8),
                packet_type: b[10],
                addr_len: b[11].min(8),
                addr,
            }
        })
    }

    /// The link-layer source address as an Ethernet MAC, when it is one.
    pub fn mac(&self) -> Option<[u8; 6]> {
        if self.hatype != 1 || self.addr_len != 6 {
            return None;
        }
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&self.addr[..6]);
        Some(mac)
    }
}

/// The IP addresses of a tunnel's outer header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OuterIp {
    /// Source (the mirroring switch or tunnel end).
    pub src: IpAddr,
    /// Destination (the collector or tunnel end).
    pub dst: IpAddr,
}

/// One layer [`decapsulate`] took off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outer {
    /// A VLAN tag outside the frame's own: the outer tag of two (QinQ, a
    /// service tag the network added).
    ServiceTag(VlanTag),
    /// A lone 802.1ad service tag (TPID 0x88A8, IEEE 802.1Q Table 9-1):
    /// a provider bridge's tag the network added in front of an untagged
    /// frame; a NIC sends at most an 802.1Q customer tag (0x8100).
    SingleServiceTag(VlanTag),
    /// A Linux cooked capture header (no Ethernet header was captured).
    Sll(SllRepr),
    /// A raw IP link type (no link-layer header was captured).
    RawIp {
        /// The capture's link type.
        linktype: u32,
    },
    /// GRE carrying an Ethernet frame (transparent Ethernet bridging), an
    /// ERSPAN session, or an IP packet.
    Gre {
        /// Outer IP addresses.
        ip: OuterIp,
        /// The GRE header.
        gre: GreRepr,
        /// The ERSPAN header (type II or III), when GRE carries one.
        erspan: Option<ErspanRepr>,
    },
    /// VXLAN.
    Vxlan {
        /// Outer IP addresses.
        ip: OuterIp,
        /// Outer UDP source port.
        src_port: u16,
        /// VXLAN network identifier (24 bits).
        vni: u32,
    },
}

impl Outer {
    /// A short name: `qinq`, `s-tag`, `sll`, `sll2`, `raw-ip`, `gre`,
    /// `erspan-i`, `erspan-ii`, `erspan-iii`, `vxlan`.
    pub fn name(&self) -> &'static str {
        match self {
            Outer::ServiceTag(_) => "qinq",
            Outer::SingleServiceTag(_) => "s-tag",
            Outer::Sll(s) if s.version == 2 => "sll2",
            Outer::Sll(_) => "sll",
            Outer::RawIp { .. } => "raw-ip",
            Outer::Gre { gre, erspan, .. } => match (gre.protocol, erspan) {
                (GRE_PROTO_ERSPAN_III, _) => "erspan-iii",
                (GRE_PROTO_ERSPAN_II, Some(_)) => "erspan-ii",
                (GRE_PROTO_ERSPAN_II, None) => "erspan-i",
                _ => "gre",
            },
            Outer::Vxlan { .. } => "vxlan",
        }
    }
}

/// What [`decapsulate`] took off a frame, outermost first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Encapsulation {
    layers: [Option<Outer>; MAX_LAYERS],
    len: u8,
}

impl Encapsulation {
    /// The layers, outermost first.
    pub fn layers(&self) -> impl Iterator<Item = &Outer> {
        let len = usize::from(self.len).min(MAX_LAYERS);
        self.layers[..len].iter().flatten()
    }

    /// Empties it without touching its storage (it is some 400 bytes: a
    /// checker resets one per frame).
    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Whether nothing was taken off.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `erspan-ii` or `vxlan/qinq`: the layers' names, outermost first,
    /// joined by `/`.
    pub fn describe(&self) -> String {
        self.layers().map(Outer::name).collect::<Vec<_>>().join("/")
    }

    fn push(&mut self, outer: Outer, at: usize) -> Result<(), WireError> {
        let Some(slot) = self.layers.get_mut(usize::from(self.len)) else {
            return Err(WireError::unsupported(
                Layer::Ethernet,
                "encapsulation",
                at,
                "more than four layers of encapsulation",
            ));
        };
        *slot = Some(outer);
        self.len += 1;
        Ok(())
    }
}

/// How the inner frame starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InnerStart {
    /// With its Ethernet header (`bytes` are an Ethernet frame).
    Ethernet,
    /// After a link-layer header that is not in `bytes` (or that was
    /// changed: a QinQ frame without its service tag): `bytes` start with
    /// what this header's EtherType names, an IP header or a GRH.
    AfterLink(EthernetRepr),
}

/// The frame inside the layers taken off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Inner<'a> {
    /// How it starts.
    pub start: InnerStart,
    /// Its bytes (as captured: a cut frame is cut here too).
    pub bytes: &'a [u8],
    /// Where `bytes` start in the captured frame.
    pub offset: usize,
}

impl<'a> Inner<'a> {
    /// Decodes the inner frame into `frame` ([`Frame::parse_from`] or
    /// [`Frame::parse_after`]); error offsets count from the captured
    /// frame's first byte.
    pub fn parse_into(
        &self,
        frame: &mut Frame<'a>,
        options: &ParseOptions,
    ) -> Result<(), WireError> {
        match self.start {
            InnerStart::Ethernet => frame
                .parse_from(self.bytes, options)
                .map_err(|e| e.shifted(self.offset)),
            InnerStart::AfterLink(eth) => frame.parse_after(eth, self.bytes, self.offset, options),
        }
    }

    /// The bytes from the inner frame's IP header (or GRH) on, for
    /// [`crate::icrc::verify_ip_marked`].
    pub fn ip_bytes(&self, frame: &Frame<'_>) -> &'a [u8] {
        match self.start {
            InnerStart::Ethernet => self.bytes.get(frame.ethernet.buffer_len()..).unwrap_or(&[]),
            InnerStart::AfterLink(_) => self.bytes,
        }
    }
}

/// Takes the capture's layers off frame `data` of link type `linktype`:
/// the link-layer header when it is not Ethernet, a QinQ service tag, and
/// tunnels (GRE, ERSPAN, VXLAN) down to the innermost frame. `options`
/// says whether a tunnel the capture cut short is followed as far as it
/// goes ([`ParseOptions::accept_cut`]). An unknown link type is
/// `Unsupported`.
pub fn decapsulate<'a>(
    linktype: u32,
    data: &'a [u8],
    options: &ParseOptions,
) -> Result<(Encapsulation, Inner<'a>), WireError> {
    let mut enc = Encapsulation::default();
    let inner = match linktype {
        LINKTYPE_ETHERNET => Inner {
            start: InnerStart::Ethernet,
            bytes: data,
            offset: 0,
        },
        LINKTYPE_LINUX_SLL | LINKTYPE_LINUX_SLL2 => {
            let (sll, rest) = if linktype == LINKTYPE_LINUX_SLL {
                SllRepr::parse_v1(data)?
            } else {
                SllRepr::parse_v2(data)?
            };
            enc.push(Outer::Sll(sll), 0)?;
            let offset = data.len() - rest.len();
            let eth = EthernetRepr {
                src: sll.mac().unwrap_or_default(),
                ethertype: sll.protocol,
                ..EthernetRepr::default()
            };
            let (eth, rest) = eth.with_tags(rest, offset)?;
            Inner {
                start: InnerStart::AfterLink(eth),
                bytes: rest,
                offset: data.len() - rest.len(),
            }
        }
        LINKTYPE_RAW | LINKTYPE_IPV4 | LINKTYPE_IPV6 => {
            enc.push(Outer::RawIp { linktype }, 0)?;
            let version = data.first().map_or(0, |b| b >> 4);
            let ethertype = match (linktype, version) {
                (LINKTYPE_IPV4, _) | (LINKTYPE_RAW, 4) => ETHERTYPE_IPV4,
                (LINKTYPE_IPV6, _) | (LINKTYPE_RAW, 6) => ETHERTYPE_IPV6,
                _ => {
                    return Err(WireError::invalid(
                        Layer::Link,
                        "version",
                        0,
                        u64::from(version),
                        "raw IP link type but the IP version is neither 4 nor 6",
                    ));
                }
            };
            Inner {
                start: InnerStart::AfterLink(EthernetRepr {
                    ethertype,
                    ..EthernetRepr::default()
                }),
                bytes: data,
                offset: 0,
            }
        }
        _ => {
            return Err(WireError::unsupported(
                Layer::Link,
                "linktype",
                0,
                "link type other than Ethernet, Linux cooked capture (SLL, SLL2) or raw IP",
            ));
        }
    };
    let inner = peel(inner, &mut enc, options)?;
    Ok((enc, inner))
}

/// Takes tunnels and service tags off `inner`, repeatedly.
fn peel<'a>(
    mut inner: Inner<'a>,
    enc: &mut Encapsulation,
    options: &ParseOptions,
) -> Result<Inner<'a>, WireError> {
    for _ in 0..=MAX_LAYERS {
        let (eth, after_link, link_len) = match inner.start {
            InnerStart::Ethernet => {
                let (eth, rest) =
                    EthernetRepr::parse(inner.bytes).map_err(|e| e.shifted(inner.offset))?;
                (eth, rest, inner.bytes.len() - rest.len())
            }
            InnerStart::AfterLink(eth) => (eth, inner.bytes, 0),
        };
        // The outer tag of two, or a lone 802.1ad service tag: the
        // network's, not the NIC's.
        let service = match eth.tags() {
            [_, _] => true,
            [tag] => tag.tpid == TPID_8021AD,
            _ => false,
        };
        if service && let Some((without, tag)) = eth.without_outer_tag() {
            let outer = if without.tags().is_empty() {
                Outer::SingleServiceTag(tag)
            } else {
                Outer::ServiceTag(tag)
            };
            enc.push(outer, inner.offset)?;
            inner = Inner {
                start: InnerStart::AfterLink(without),
                bytes: after_link,
                offset: inner.offset + link_len,
            };
            continue;
        }
        let ip_offset = inner.offset + link_len;
        match tunnel(eth.ethertype, after_link, ip_offset, options)? {
            Some((outer, next)) => {
                enc.push(outer, ip_offset)?;
                inner = next;
            }
            None => return Ok(inner),
        }
    }
    Err(WireError::unsupported(
        Layer::Ethernet,
        "encapsulation",
        inner.offset,
        "more than four layers of encapsulation",
    ))
}

/// The tunnel an IP packet of EtherType `ethertype` at `offset` carries,
/// and the frame inside it; `None` when it carries none.
fn tunnel<'a>(
    ethertype: u16,
    bytes: &'a [u8],
    offset: usize,
    options: &ParseOptions,
) -> Result<Option<(Outer, Inner<'a>)>, WireError> {
    let Some((ip, protocol, header_len, payload)) = outer_ip(ethertype, bytes, options) else {
        return Ok(None);
    };
    let payload_offset = offset + header_len;
    match protocol {
        PROTOCOL_GRE => gre(ip, payload, payload_offset),
        PROTOCOL_UDP => vxlan(ip, payload, payload_offset),
        _ => Ok(None),
    }
}

/// The outer IP header's addresses, protocol, length and payload (as captured,
/// bounded by the IP length), when the packet may be a tunnel: IPv4 not a
/// fragment, IPv6 without extension headers. `None` otherwise, or when the
/// capture cut the datagram and `options` does not accept that.
fn outer_ip<'a>(
    ethertype: u16,
    bytes: &'a [u8],
    options: &ParseOptions,
) -> Option<(OuterIp, u8, usize, &'a [u8])> {
    let (ip, protocol, rest, len) = match ethertype {
        ETHERTYPE_IPV4 => {
            let (v4, rest) = Ipv4Repr::parse(bytes).ok()?;
            if v4.is_fragment() {
                return None;
            }
            let len = usize::from(v4.total_len).checked_sub(v4.buffer_len())?;
            let ip = OuterIp {
                src: IpAddr::V4(v4.src),
                dst: IpAddr::V4(v4.dst),
            };
            (ip, v4.protocol, rest, len)
        }
        ETHERTYPE_IPV6 => {
            let (v6, rest) = Ipv6Repr::parse(bytes).ok()?;
            let ip = OuterIp {
                src: IpAddr::V6(v6.src),
                dst: IpAddr::V6(v6.dst),
            };
            (ip, v6.next_header, rest, usize::from(v6.payload_len))
        }
        _ => return None,
    };
    if protocol != PROTOCOL_GRE && protocol != PROTOCOL_UDP {
        return None;
    }
    let header_len = bytes.len() - rest.len();
    match rest.get(..len) {
        Some(payload) => Some((ip, protocol, header_len, payload)),
        None if options.accept_cut => Some((ip, protocol, header_len, rest)),
        None => None,
    }
}

/// GRE carrying Ethernet (TEB), ERSPAN or IP; `None` for anything else.
fn gre(ip: OuterIp, bytes: &[u8], offset: usize) -> Result<Option<(Outer, Inner<'_>)>, WireError> {
    let (gre, rest) = GreRepr::parse(bytes).map_err(|e| e.shifted(offset))?;
    let at = offset + bytes.len() - rest.len();
    let (erspan, rest, start) = match gre.protocol {
        GRE_PROTO_TEB => (None, rest, InnerStart::Ethernet),
        GRE_PROTO_ERSPAN_II if gre.sequence.is_none() => (None, rest, InnerStart::Ethernet),
        GRE_PROTO_ERSPAN_II => {
            let (e, rest) = ErspanRepr::parse_ii(rest).map_err(|e| e.shifted(at))?;
            (Some(e), rest, InnerStart::Ethernet)
        }
        GRE_PROTO_ERSPAN_III => {
            let (e, rest) = ErspanRepr::parse_iii(rest).map_err(|e| e.shifted(at))?;
            (Some(e), rest, InnerStart::Ethernet)
        }
        ethertype @ (ETHERTYPE_IPV4 | ETHERTYPE_IPV6) => (
            None,
            rest,
            InnerStart::AfterLink(EthernetRepr {
                ethertype,
                ..EthernetRepr::default()
            }),
        ),
        _ => return Ok(None),
    };
    let inner = Inner {
        start,
        bytes: rest,
        offset: offset + bytes.len() - rest.len(),
    };
    Ok(Some((Outer::Gre { ip, gre, erspan }, inner)))
}

/// VXLAN (UDP destination port 4789 with the I flag); `None` for any other
/// UDP datagram.
fn vxlan(
    ip: OuterIp,
    bytes: &[u8],
    offset: usize,
) -> Result<Option<(Outer, Inner<'_>)>, WireError> {
    let Ok((udp, rest)) = UdpRepr::parse(bytes) else {
        return Ok(None);
    };
    if udp.dst_port != VXLAN_PORT {
        return Ok(None);
    }
    let ((flags, vni), _) = parse_fixed::<8, _>(Layer::Vxlan, rest, |b| (b[0], be32(b, 4) >> 8))
        .map_err(|e| e.shifted(offset + UdpRepr::LEN))?;
    if flags & 0x08 == 0 {
        // Not a VXLAN header with a VNI: some other use of the port.
        return Ok(None);
    }
    let inner_bytes = rest.get(8..).unwrap_or(&[]);
    let outer = Outer::Vxlan {
        ip,
        src_port: udp.src_port,
        vni,
    };
    let inner = Inner {
        start: InnerStart::Ethernet,
        bytes: inner_bytes,
        offset: offset + bytes.len() - inner_bytes.len(),
    };
    Ok(Some((outer, inner)))
}

/// Decodes captured frame `data` of link type `linktype` into `frame`: a
/// plain Ethernet frame holding RoCE (with at most one tag) at once, the
/// fast path; anything else after [`decapsulate`] took off the layers the
/// capture added, if any, which go to `encapsulation` (emptied first).
/// Returns the bytes from the decoded frame's IP header (or GRH) on, for
/// the ICRC ([`crate::icrc::verify_ip_marked`]). An Ethernet frame whose
/// tunnel does not decode stays the outer frame it is. A link type not in
/// [`LINKTYPES`] is `Unsupported`. Error offsets count from the first
/// captured byte. Both places are filled in place: the fast path moves
/// nothing.
#[inline]
pub fn parse_captured<'a>(
    linktype: u32,
    data: &'a [u8],
    frame: &mut Frame<'a>,
    encapsulation: &mut Encapsulation,
    options: &ParseOptions,
) -> Result<&'a [u8], WireError> {
    encapsulation.clear();
    let plain = linktype == LINKTYPE_ETHERNET;
    let parsed = if plain {
        frame.parse_from(data, options)
    } else {
        Err(WireError::unsupported(
            Layer::Link,
            "linktype",
            0,
            "not Ethernet",
        ))
    };
    let ip_wire = |frame: &Frame<'_>| data.get(frame.ethernet.buffer_len()..).unwrap_or(&[]);
    // A NIC's own tag (at most one 802.1Q tag) stays; a service tag is
    // the network's and is taken off on the slow path.
    let own_tags = match frame.ethernet.tags() {
        [] => true,
        [tag] => tag.tpid != TPID_8021AD,
        _ => false,
    };
    if parsed.is_ok() && frame.roce.is_some() && own_tags {
        return Ok(ip_wire(frame));
    }
    slow_path(linktype, data, frame, encapsulation, options, parsed)
}

/// [`parse_captured`] beyond the fast path.
#[inline(never)]
fn slow_path<'a>(
    linktype: u32,
    data: &'a [u8],
    frame: &mut Frame<'a>,
    encapsulation: &mut Encapsulation,
    options: &ParseOptions,
    parsed: Result<(), WireError>,
) -> Result<&'a [u8], WireError> {
    match decapsulate(linktype, data, options) {
        Ok((enc, inner)) if !enc.is_empty() => {
            *encapsulation = enc;
            inner.parse_into(frame, options)?;
            Ok(inner.ip_bytes(frame))
        }
        Err(e) if linktype != LINKTYPE_ETHERNET => Err(e),
        // Nothing to take off, or a tunnel that does not decode: the plain
        // parse stands.
        _ => parsed.map(|()| data.get(frame.ethernet.buffer_len()..).unwrap_or(&[])),
    }
}
