//! The `codec_builder` target: a packet description drawn by `arbitrary`,
//! built with [`PacketBuilder`], parsed back and compared field by field.

use crate::checks::{check_parse, check_roundtrip};
use arbitrary::{Arbitrary, Unstructured};
use metaroce_codec::ethernet::{TPID_8021AD, TPID_8021Q, TPID_QINQ_LEGACY};
use metaroce_codec::ext::{
    DethRepr, FethRepr, MpethRepr, RdethRepr, SackethRepr, XrcethRepr, mpeth_flags, sacketh_flags,
};
use metaroce_codec::{
    BthRepr, Dialect, ExtHeaders, ExtKind, Frame, IcrcStatus, IpRepr, Opcode, PacketBuilder,
    ParseOptions, VlanTag, icrc,
};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Largest payload a spec carries.
pub const MAX_PAYLOAD: usize = 4096;

/// The tag protocol identifiers the parser recognises; a tag gets one of them.
pub const TPIDS: [u16; 3] = [TPID_8021Q, TPID_8021AD, TPID_QINQ_LEGACY];

/// One RoCEv2 frame to build. Without overrides it is valid and must read
/// back as described.
///
/// The field order is the byte order `arbitrary` reads, which the seeding
/// program relies on: byte 0 is the opcode, byte 1 bit 0 picks IPv6, byte 2
/// (mod 3) is the number of VLAN tags; all-zero bytes after that give a
/// frame without overrides and an empty payload.
#[derive(Clone, Debug, Arbitrary)]
pub struct BuilderSpec {
    /// BTH opcode (also replaces the one in `bth`).
    pub opcode: Opcode,
    /// IPv6 instead of IPv4.
    pub ipv6: bool,
    /// VLAN tags on the wire: `vlan_count % 3` of `vlans`.
    pub vlan_count: u8,
    /// Tag values.
    pub vlans: [Vlan; 2],
    /// IP header fields.
    pub ip: IpFields,
    /// UDP source port.
    pub udp_src_port: u16,
    /// BTH fields; the opcode comes from `opcode`, PadCnt is derived.
    pub bth: BthRepr,
    /// Header values; only the headers the opcode's layout names are sent
    /// (unless [`Override::ExtraHeaders`]).
    pub ext: ExtHeaders,
    /// Payload, at most [`MAX_PAYLOAD`] bytes.
    #[arbitrary(with = payload)]
    pub payload: Vec<u8>,
    /// Deliberate changes to derived fields.
    pub overrides: Vec<Override>,
}

/// One VLAN tag.
#[derive(Clone, Copy, Debug, Arbitrary)]
pub struct Vlan {
    /// Index into [`TPIDS`] (mod 3).
    pub tpid: u8,
    /// Tag control information.
    pub tci: u16,
}

impl Vlan {
    /// The tag as sent.
    pub fn tag(self) -> VlanTag {
        VlanTag {
            tpid: TPIDS[usize::from(self.tpid) % TPIDS.len()],
            tci: self.tci,
        }
    }
}

/// IP header fields; IPv4 uses the first four bytes of each address.
#[derive(Clone, Copy, Debug, Arbitrary)]
pub struct IpFields {
    /// Source address.
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// IPv4 ToS or IPv6 traffic class.
    pub traffic_class: u8,
    /// TTL or hop limit.
    pub hop_limit: u8,
    /// IPv6 flow label (20 bits used).
    pub flow_label: u32,
    /// IPv4 identification.
    pub ident: u16,
}

/// A deliberate change to what the builder derives.
#[derive(Clone, Debug, Arbitrary)]
pub enum Override {
    /// Bytes after the IP datagram: the frame stays valid.
    Trailer(Vec<u8>),
    /// IPv4 header checksum (not checked by the parser): stays valid.
    Ipv4Checksum(u16),
    /// UDP checksum (not checked, masked in the ICRC): stays valid.
    UdpChecksum(u16),
    /// IPv4 options: valid when a multiple of 4 bytes, at most 40.
    Ipv4Options(Vec<u8>),
    /// ICRC trailer value: parses, ICRC probably wrong.
    Icrc(u32),
    /// BTH PadCnt.
    PadCount(u8),
    /// Pad bytes.
    PadBytes(Vec<u8>),
    /// IPv4 total length or IPv6 payload length.
    IpLength(u16),
    /// IPv4 IHL.
    Ipv4Ihl(u8),
    /// IP protocol / next header.
    IpProtocol(u8),
    /// IPv4 flags and fragment offset.
    Ipv4FlagsFrag(u16),
    /// UDP length.
    UdpLength(u16),
    /// UDP destination port.
    UdpDstPort(u16),
    /// Cut the frame to this many bytes.
    Truncate(u16),
    /// Send the drawn extension headers as they are, whatever the opcode.
    ExtraHeaders,
}

/// What a spec's frame must do when parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Parse succeeds and every field reads back; the ICRC is valid if `icrc_valid`.
    ReadsBack {
        /// Whether the ICRC must verify.
        icrc_valid: bool,
    },
    /// An override may have made it invalid: it only must not panic.
    NoPanic,
}

fn payload(u: &mut Unstructured<'_>) -> arbitrary::Result<Vec<u8>> {
    let len = u.arbitrary_len::<u8>()?.min(MAX_PAYLOAD);
    Ok(u.bytes(len)?.to_vec())
}

impl BuilderSpec {
    /// The VLAN tags sent.
    pub fn tags(&self) -> Vec<VlanTag> {
        let count = usize::from(self.vlan_count % 3);
        self.vlans[..count].iter().map(|v| v.tag()).collect()
    }

    /// The extension headers sent: the drawn values of exactly the headers
    /// the opcode's layout names (zero where none was drawn), or every drawn
    /// header with [`Override::ExtraHeaders`].
    pub fn sent_ext(&self) -> ExtHeaders {
        if self
            .overrides
            .iter()
            .any(|o| matches!(o, Override::ExtraHeaders))
        {
            return self.ext;
        }
        let layout = self
            .opcode
            .layout(Dialect::MetaRoce)
            .map_or(&[][..], |l| l.headers);
        let mut ext = self.ext;
        for kind in ExtKind::ALL {
            if layout.contains(&kind) {
                ext.insert_default(kind);
            } else {
                ext.remove(kind);
            }
        }
        ext
    }

    /// What parsing the built frame must give.
    pub fn expect(&self) -> Expect {
        let mut icrc_valid = true;
        for o in &self.overrides {
            match o {
                Override::Trailer(_) | Override::Ipv4Checksum(_) | Override::UdpChecksum(_) => {}
                Override::Ipv4Options(bytes)
                    if bytes.len().is_multiple_of(4) && bytes.len() <= 40 => {}
                Override::Icrc(_) => icrc_valid = false,
                _ => return Expect::NoPanic,
            }
        }
        Expect::ReadsBack { icrc_valid }
    }

    /// The builder for this spec.
    pub fn builder(&self) -> PacketBuilder {
        let ip = &self.ip;
        let mut b = PacketBuilder::new(self.opcode)
            .udp_src_port(self.udp_src_port)
            .payload(self.payload.clone());
        b = if self.ipv6 {
            b.ipv6(Ipv6Addr::from(ip.src), Ipv6Addr::from(ip.dst))
                .flow_label(ip.flow_label)
        } else {
            let v4 = |a: [u8; 16]| Ipv4Addr::new(a[0], a[1], a[2], a[3]);
            b.ipv4(v4(ip.src), v4(ip.dst)).ipv4_ident(ip.ident)
        };
        b = b.traffic_class(ip.traffic_class).hop_limit(ip.hop_limit);
        for tag in self.tags() {
            b = b.vlan(tag);
        }
        *b.bth_mut() = BthRepr {
            opcode: self.opcode,
            ..self.bth
        };
        *b.ext_mut() = self.sent_ext();
        for o in &self.overrides {
            b = match o {
                Override::Trailer(bytes) => b.trailer(bytes.clone()),
                Override::Ipv4Checksum(v) => b.ipv4_checksum(*v),
                Override::UdpChecksum(v) => b.udp_checksum(*v),
                Override::Ipv4Options(bytes) => b.ipv4_options(bytes.clone()),
                Override::Icrc(v) => b.icrc(*v),
                Override::PadCount(v) => b.pad_count(*v),
                Override::PadBytes(bytes) => b.pad_bytes(bytes.clone()),
                Override::IpLength(v) => b.ip_length(*v),
                Override::Ipv4Ihl(v) => b.ipv4_ihl(*v),
                Override::IpProtocol(v) => b.ip_protocol(*v),
                Override::Ipv4FlagsFrag(v) => b.ipv4_flags_frag(*v),
                Override::UdpLength(v) => b.udp_length(*v),
                Override::UdpDstPort(v) => b.udp_dst_port(*v),
                Override::Truncate(len) => b.truncate(usize::from(*len)),
                Override::ExtraHeaders => b,
            };
        }
        b
    }
}

/// The BTH as the wire holds it: fields cut to their bit widths.
pub fn wire_bth(bth: BthRepr) -> BthRepr {
    BthRepr {
        pad_count: bth.pad_count & 0x3,
        tver: bth.tver & 0xF,
        resv6a: bth.resv6a & 0x3F,
        dest_qp: bth.dest_qp & 0xFF_FFFF,
        resv7: bth.resv7 & 0x7F,
        ..bth
    }
}

/// Extension headers as the wire holds them: fields cut to their bit widths.
/// (PSNs and MSNs are 24-bit by construction.)
pub fn wire_ext(ext: ExtHeaders) -> ExtHeaders {
    ExtHeaders {
        rdeth: ext.rdeth.map(|h| RdethRepr {
            ee_context: h.ee_context & 0xFF_FFFF,
            ..h
        }),
        deth: ext.deth.map(|h| DethRepr {
            src_qp: h.src_qp & 0xFF_FFFF,
            ..h
        }),
        xrceth: ext.xrceth.map(|h| XrcethRepr {
            xrc_srq: h.xrc_srq & 0xFF_FFFF,
            ..h
        }),
        mpeth: ext.mpeth.map(|h| MpethRepr {
            reserved: h.reserved & mpeth_flags::RESERVED,
            ..h
        }),
        sacketh: ext.sacketh.map(|h| SackethRepr {
            reserved_flags: h.reserved_flags & sacketh_flags::RESERVED,
            ..h
        }),
        feth: ext.feth.map(|h| FethRepr {
            reserved: h.reserved & 0x03FF_FFFF,
            selectivity_level: h.selectivity_level & 0x3,
            placement_type: h.placement_type & 0xF,
        }),
        ..ext
    }
}

/// Builds `spec`, parses the bytes, and checks that whatever parses
/// round-trips; without invalidating overrides, that parsing succeeds and
/// reads back opcode, BTH (PadCnt derived), the layout's extension headers,
/// payload, VLAN tags, IP version and UDP source port, with a valid ICRC, and
/// that a plain-RoCEv2 parse agrees wherever the dialects do.
pub fn check_builder(spec: &BuilderSpec) -> Result<(), String> {
    let bytes = spec.builder().build();
    check_parse(&bytes)?;
    check_roundtrip(&bytes)?;
    let Expect::ReadsBack { icrc_valid } = spec.expect() else {
        return Ok(());
    };
    let frame = Frame::parse(&bytes, &ParseOptions::default())
        .map_err(|e| format!("a valid built frame does not parse: {e}"))?;
    let roce = frame
        .roce
        .ok_or("a built frame parses without a RoCE packet")?;

    let pad_count = ((4 - spec.payload.len() % 4) % 4) as u8;
    let bth = wire_bth(BthRepr {
        opcode: spec.opcode,
        pad_count,
        ..spec.bth
    });
    same("BTH", &roce.bth, &bth)?;
    same("extension headers", &roce.ext, &wire_ext(spec.sent_ext()))?;
    same("payload", &roce.payload, &spec.payload.as_slice())?;
    same("pad", &roce.pad.len(), &usize::from(pad_count))?;
    same("VLAN tags", &frame.ethernet.tags(), &spec.tags().as_slice())?;
    same(
        "IP version",
        &matches!(frame.ip, Some(IpRepr::V6(_))),
        &spec.ipv6,
    )?;
    let udp = frame.udp.ok_or("a built RoCE frame parses without UDP")?;
    same("UDP source port", &udp.src_port, &spec.udp_src_port)?;
    if icrc_valid {
        same("ICRC", &icrc::verify(&frame), &IcrcStatus::Valid)?;
    }

    let opcode = spec.opcode;
    if opcode.layout(Dialect::Base) == opcode.layout(Dialect::MetaRoce) {
        let base = ParseOptions {
            dialect: Dialect::Base,
            ..ParseOptions::default()
        };
        let plain = Frame::parse(&bytes, &base)
            .map_err(|e| format!("parses as MetaRoCE but not as plain RoCEv2: {e}"))?;
        same("plain RoCEv2 parse", &plain, &frame)?;
    }
    Ok(())
}

fn same<T: PartialEq + std::fmt::Debug>(what: &str, found: &T, built: &T) -> Result<(), String> {
    if found == built {
        Ok(())
    } else {
        Err(format!("{what}: parsed {found:?}, built {built:?}"))
    }
}
