//! Every truncated prefix fails with the exact error, and no input panics.

mod common;
#[path = "common/frames.rs"]
mod frames;

use metaroce_codec::{
    BthRepr, Dialect, ExtKind, Frame, IpRepr, Layer, ParseOptions, RocePacket, WireError,
    WireErrorKind,
};

/// The error a frame prefix of `n` bytes must give: the first layer that does
/// not fit. Above the IP header, the IP length is what no longer fits.
fn expected_frame_error(frame: &Frame<'_>, n: usize) -> WireError {
    let tags = frame.ethernet.tags().len();
    if n < 14 {
        return WireError::truncated(Layer::Ethernet, "header", 0, 14, n);
    }
    for t in 0..tags {
        let at = 12 + 4 * t + 2;
        if n < at + 4 {
            return WireError::truncated(Layer::Vlan, "header", at, 4, n - at);
        }
    }
    let ip_at = 14 + 4 * tags;
    match frame.ip.unwrap() {
        IpRepr::V4(_) if n < ip_at + 20 => {
            WireError::truncated(Layer::Ipv4, "header", ip_at, 20, n - ip_at)
        }
        IpRepr::V4(v4) => WireError::truncated(
            Layer::Ipv4,
            "total_len",
            ip_at,
            usize::from(v4.total_len),
            n - ip_at,
        ),
        IpRepr::V6(_) if n < ip_at + 40 => {
            WireError::truncated(Layer::Ipv6, "header", ip_at, 40, n - ip_at)
        }
        IpRepr::V6(v6) => WireError::truncated(
            Layer::Ipv6,
            "payload_len",
            ip_at + 40,
            usize::from(v6.payload_len),
            n - ip_at - 40,
        ),
    }
}

#[test]
fn every_frame_prefix_fails_with_the_exact_error() {
    let mut checked = 0;
    for (name, builder) in frames::sample_builders() {
        let bytes = builder.build();
        let full = Frame::parse(&bytes, &ParseOptions::default()).unwrap();
        for n in 0..bytes.len() {
            let err = Frame::parse(&bytes[..n], &ParseOptions::default())
                .expect_err(&format!("{name}: prefix {n} of {} parsed", bytes.len()));
            assert_eq!(err, expected_frame_error(&full, n), "{name}: prefix {n}");
            checked += 1;
        }
    }
    assert!(checked > 10_000, "only {checked} prefixes");
}

/// Below the UDP layer the packet's own headers decide: each header that does
/// not fit is named with its offset; once the headers and ICRC fit, a shorter
/// payload still parses (RoCE has no length field of its own).
#[test]
fn every_roce_prefix_fails_at_the_right_header() {
    for (name, builder) in frames::sample_builders() {
        let bytes = builder.build();
        let frame = Frame::parse(&bytes, &ParseOptions::default()).unwrap();
        let roce = frame.roce.unwrap();
        let mut packet = vec![0u8; roce.buffer_len()];
        roce.emit(&mut packet).unwrap();
        let layout = roce.bth.opcode.layout(Dialect::MetaRoce).unwrap();
        for n in 0..packet.len() {
            let got = RocePacket::parse(&packet[..n], Dialect::MetaRoce);
            let mut at = BthRepr::LEN;
            let mut expected = if n < at {
                Some(WireError::truncated(Layer::Bth, "header", 0, 12, n))
            } else {
                None
            };
            for &kind in layout.headers {
                if expected.is_none() && n < at + kind.wire_len() {
                    expected = Some(WireError::truncated(
                        layer_of(kind),
                        "header",
                        at,
                        kind.wire_len(),
                        n - at,
                    ));
                }
                at += kind.wire_len();
            }
            if expected.is_none() && n < at + 4 {
                expected = Some(WireError::truncated(Layer::Icrc, "trailer", at, 4, n - at));
            } else if expected.is_none() && n < at + 4 + usize::from(roce.bth.pad_count) {
                expected = Some(WireError::invalid(
                    Layer::Bth,
                    "pad_count",
                    1,
                    u64::from(roce.bth.pad_count),
                    "pad count exceeds the bytes between the headers and the ICRC",
                ));
            }
            match expected {
                Some(e) => assert_eq!(got, Err(e), "{name}: prefix {n}"),
                None => {
                    let p = got.unwrap_or_else(|e| panic!("{name}: prefix {n}: {e}"));
                    assert_eq!(p.ext, roce.ext, "{name}: prefix {n}");
                    assert_eq!(p.header_len() + p.payload.len() + p.pad.len() + 4, n);
                }
            }
        }
    }
}

fn layer_of(kind: ExtKind) -> Layer {
    match kind {
        ExtKind::Rdeth => Layer::Rdeth,
        ExtKind::Deth => Layer::Deth,
        ExtKind::Xrceth => Layer::Xrceth,
        ExtKind::Mpeth => Layer::Mpeth,
        ExtKind::Sacketh => Layer::Sacketh,
        ExtKind::Feth => Layer::Feth,
        ExtKind::Reth => Layer::Reth,
        ExtKind::AtomicEth => Layer::AtomicEth,
        ExtKind::Aeth => Layer::Aeth,
        ExtKind::AtomicAckEth => Layer::AtomicAckEth,
        ExtKind::ImmDt => Layer::ImmDt,
        ExtKind::Ieth => Layer::Ieth,
        ExtKind::Cnp => Layer::Cnp,
    }
}

#[test]
fn error_messages_name_layer_field_offset_and_lengths() {
    let err = WireError::truncated(Layer::Reth, "header", 54, 16, 3);
    assert_eq!(
        err.to_string(),
        "reth.header at byte 54: truncated: needs 16 bytes, 3 available"
    );
    let bytes = frames::sample_builders()[0]
        .1
        .clone()
        .pad_count(3)
        .pad_bytes(vec![])
        .build();
    let err = Frame::parse(&bytes, &ParseOptions::default()).unwrap_err();
    assert!(matches!(err.kind, WireErrorKind::Invalid { value: 3, .. }));
    assert_eq!(
        err.to_string(),
        "bth.pad_count at byte 43: invalid value 3 (0x3): pad count exceeds the bytes between the headers and the ICRC"
    );
}

#[test]
fn unsupported_features_are_named() {
    use metaroce_codec::{Opcode, PacketBuilder, VlanTag};
    let three_tags = PacketBuilder::new(Opcode::RC_SEND_ONLY)
        .vlan(VlanTag::dot1q(0, 1))
        .vlan(VlanTag::dot1q(0, 2))
        .build();
    let mut bytes = three_tags[..12].to_vec();
    bytes.extend_from_slice(&[0x81, 0x00, 0x00, 0x03]);
    bytes.extend_from_slice(&three_tags[12..]);
    let err = Frame::parse(&bytes, &ParseOptions::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "vlan.tpid at byte 20: unsupported: more than two VLAN tags"
    );

    // A Destination Options header (8 bytes) in front of UDP to 4791:
    // MetaRoCE sends none, and the codec says so.
    let v6 = PacketBuilder::new(Opcode::RC_SEND_ONLY)
        .ipv6("::1".parse().unwrap(), "::2".parse().unwrap())
        .build();
    let mut ext = v6[..54].to_vec();
    ext[20] = 60;
    let len = u16::from_be_bytes([ext[18], ext[19]]) + 8;
    ext[18..20].copy_from_slice(&len.to_be_bytes());
    ext.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
    ext.extend_from_slice(&v6[54..]);
    let err = Frame::parse(&ext, &ParseOptions::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "ipv6.next_header at byte 20: unsupported: IPv6 extension headers"
    );
    // The same chain in front of another UDP port: an IPv6 datagram kept
    // whole as its payload, lossless.
    let mut other = ext.clone();
    other[54 + 8 + 2..54 + 8 + 4].copy_from_slice(&53u16.to_be_bytes());
    let frame = Frame::parse(&other, &ParseOptions::default()).unwrap();
    assert!(frame.udp.is_none() && frame.roce.is_none());
    assert_eq!(frame.payload.len(), usize::from(len));
    assert_eq!(frame.to_bytes(), other);
}

/// A RoCEv2 packet whose IP and UDP lengths say it ends inside its
/// extension headers, right after them (no room for the ICRC) or inside
/// its BTH (as a switch that trims packets leaves it): the parse fails, and
/// [`Frame::undecoded_bth`] reads the BTH the failed parse left behind,
/// whole, or `None` when the packet ends inside it.
#[test]
fn undecoded_bth_of_a_packet_cut_after_its_bth() {
    let options = ParseOptions::default();
    let mut checked = 0;
    for (name, builder) in frames::sample_builders() {
        let bytes = builder.build();
        let full = Frame::parse(&bytes, &options).unwrap();
        assert_eq!(full.undecoded_bth(&options), None, "{name}: decoded");
        let (Some(IpRepr::V4(v4)), Some(roce)) = (full.ip, full.roce) else {
            continue;
        };
        if !full.ethernet.tags().is_empty() || v4.buffer_len() != 20 {
            continue;
        }
        // Ethernet 14 + IPv4 20 + UDP 8.
        let roce_at = 42;
        let headers = roce.header_len();
        for n in [0, 11, 12, headers - 1, headers, headers + 3] {
            if n > headers + 3 || (n == headers - 1 && headers == 12) {
                continue;
            }
            let mut cut = bytes[..roce_at + n].to_vec();
            cut[16..18].copy_from_slice(&u16::try_from(20 + 8 + n).unwrap().to_be_bytes());
            cut[38..40].copy_from_slice(&u16::try_from(8 + n).unwrap().to_be_bytes());
            let mut frame = Frame::default();
            let err = frame.parse_from(&cut, &options).unwrap_err();
            let want = (n >= BthRepr::LEN).then_some(roce.bth);
            assert_eq!(
                frame.undecoded_bth(&options),
                want,
                "{name}: {n} bytes of {headers} header bytes ({err})"
            );
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} cut packets");
}
