//! Emit into a 0xa5-filled buffer; parse→emit round trips (proptest); built
//! fields read back; insta snapshots of decoded packets.

mod common;
#[path = "common/frames.rs"]
mod frames;

use metaroce_codec::ext::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, CnpRepr, DethRepr, ExtHeaders, FethRepr, IethRepr,
    ImmDtRepr, MpethRepr, RdethRepr, RethRepr, SackethRepr, XrcethRepr,
};
use metaroce_codec::{
    BthRepr, Dialect, Frame, IcrcStatus, Opcode, PacketBuilder, ParseOptions, Psn, VlanTag, icrc,
};
use proptest::prelude::*;

#[test]
fn frames_emit_exactly_into_a_dirty_buffer() {
    for (name, builder) in frames::sample_builders() {
        let bytes = builder.build();
        let frame = Frame::parse(&bytes, &ParseOptions::default()).unwrap();
        assert_eq!(frame.buffer_len(), bytes.len(), "{name}");
        let mut buf = vec![0xa5; bytes.len()];
        assert_eq!(frame.emit(&mut buf), Ok(bytes.len()), "{name}");
        assert_eq!(buf, bytes, "{name}");
        let mut short = vec![0xa5; bytes.len() - 1];
        assert!(
            frame.emit(&mut short).is_err(),
            "{name}: short buffer must be an error"
        );
        assert_eq!(icrc::verify(&frame), IcrcStatus::Valid, "{name}");
    }
}

/// The builder's payload, as `build` would send it.
fn built_payload(b: &PacketBuilder) -> Vec<u8> {
    b.frame()
        .roce
        .map(|r| r.payload.to_vec())
        .unwrap_or_default()
}

/// `build_filled` with the builder's own payload appended is `build`.
fn check_build_filled(name: &str, b: &PacketBuilder) {
    let payload = built_payload(b);
    let filled = b.build_filled(payload.len(), |buf| {
        buf.extend_from_slice(&payload);
        Ok::<(), ()>(())
    });
    assert_eq!(filled, Ok(b.build()), "{name}");
}

#[test]
fn build_filled_is_build_with_the_payload_written_in_place() {
    for (name, b) in frames::sample_builders() {
        check_build_filled(&name, &b);
    }
    let b = PacketBuilder::new(Opcode::RC_WRITE_ONLY).psn(3);
    // A fill that appends too few bytes is zero-extended, too many cut.
    let short = b.build_filled(6, |buf| {
        buf.extend_from_slice(b"ab");
        Ok::<(), ()>(())
    });
    assert_eq!(short, Ok(b.clone().payload(*b"ab\0\0\0\0").build()));
    let long = b.build_filled(2, |buf| {
        buf.extend_from_slice(b"abcdef");
        Ok::<(), ()>(())
    });
    assert_eq!(long, Ok(b.clone().payload(*b"ab").build()));
    // An error from the fill is returned.
    assert_eq!(b.build_filled(4, |_| Err(7)), Err(7));
}

/// Each header emits exactly its bytes into a 0xa5 buffer of exactly its
/// length, refuses one byte less, and parses back to itself.
#[test]
fn every_header_emits_exactly_and_refuses_a_short_buffer() {
    macro_rules! check {
        ($repr:expr, $ty:ty) => {{
            let repr: $ty = $repr;
            let mut buf = vec![0xa5; <$ty>::LEN];
            repr.emit(&mut buf).unwrap();
            let (back, rest) = <$ty>::parse(&buf).unwrap();
            assert_eq!(back, repr, stringify!($ty));
            assert!(rest.is_empty());
            let mut short = vec![0xa5; <$ty>::LEN - 1];
            assert!(repr.emit(&mut short).is_err(), stringify!($ty));
            assert!(
                <$ty>::parse(&buf[..<$ty>::LEN - 1]).is_err(),
                stringify!($ty)
            );
        }};
    }
    check!(
        BthRepr {
            opcode: Opcode(0xAB),
            se: true,
            migreq: true,
            pad_count: 2,
            tver: 0xF,
            pkey: 0x7FFF,
            fecn: true,
            becn: true,
            resv6a: 0x2A,
            dest_qp: 0xFFFFFF,
            ack_req: true,
            resv7: 0x55,
            psn: Psn::new(0xABCDEF),
        },
        BthRepr
    );
    check!(
        RethRepr {
            va: u64::MAX - 1,
            rkey: 0x1234_5678,
            dma_len: 0x8000_0000
        },
        RethRepr
    );
    check!(
        AethRepr {
            syndrome: metaroce_codec::ext::Syndrome(0xE1),
            msn: metaroce_codec::Msn::new(9)
        },
        AethRepr
    );
    check!(
        AtomicEthRepr {
            va: 8,
            rkey: 1,
            swap_add: 2,
            compare: u64::MAX
        },
        AtomicEthRepr
    );
    check!(
        AtomicAckEthRepr {
            orig: 0x0102_0304_0506_0708
        },
        AtomicAckEthRepr
    );
    check!(ImmDtRepr { value: 0xCAFE_F00D }, ImmDtRepr);
    check!(IethRepr { rkey: 0xFEED }, IethRepr);
    check!(
        DethRepr {
            qkey: 0x8001_0000,
            reserved: 0xFF,
            src_qp: 0xABCDEF
        },
        DethRepr
    );
    check!(
        RdethRepr {
            reserved: 0x7F,
            ee_context: 0x00BEEF
        },
        RdethRepr
    );
    check!(
        XrcethRepr {
            reserved: 1,
            xrc_srq: 0xFFFFFF
        },
        XrcethRepr
    );
    check!(
        FethRepr {
            reserved: 0x03FF_FFFF,
            selectivity_level: 3,
            placement_type: 0xA
        },
        FethRepr
    );
    check!(
        CnpRepr {
            reserved: [0x5A; 16]
        },
        CnpRepr
    );
    check!(
        MpethRepr {
            first: true,
            last: false,
            retransmission: true,
            ordered: true,
            reserved: 0x01,
            msn: metaroce_codec::Msn::new(0xFFFFFF),
            offset: 4096,
            msg_len: 1 << 20,
            timestamp: u32::MAX,
        },
        MpethRepr
    );
    check!(
        SackethRepr {
            syndrome: metaroce_codec::ext::Syndrome::NAK_TRIMMED,
            msn: metaroce_codec::Msn::new(1),
            ecn_ce: false,
            retransmission: true,
            trimmed: true,
            reserved_flags: 0x1F,
            sack_base_psn: Psn::new(0xFFFFFE),
            sack_bitmap: 0x8000_0000_0000_0001,
            echoed_entropy: 0xFFFF,
            reserved: 0xA5A5,
            echoed_timestamp: 42,
        },
        SackethRepr
    );
}

#[test]
fn sack_bitmap_bit_zero_is_the_base_psn_and_wraps() {
    let sack = SackethRepr {
        sack_base_psn: Psn::new(0xFFFFFF),
        sack_bitmap: 0xC000_0000_0000_0001,
        ..SackethRepr::default()
    };
    assert!(sack.is_sacked(Psn::new(0xFFFFFF)));
    assert!(
        sack.is_sacked(Psn::new(0)),
        "bit 1 is base + 1, across the wrap"
    );
    assert!(!sack.is_sacked(Psn::new(1)));
    assert!(sack.is_sacked(Psn::new(62)), "bit 63");
    assert!(!sack.is_sacked(Psn::new(63)), "outside the 64-PSN window");
}

/// A proptest strategy for any type with an `arbitrary` derive (the codec's reprs).
fn from_arbitrary<T: for<'a> arbitrary::Arbitrary<'a> + std::fmt::Debug>()
-> impl Strategy<Value = T> {
    prop::collection::vec(any::<u8>(), 128..512).prop_filter_map("arbitrary", |bytes| {
        T::arbitrary(&mut arbitrary::Unstructured::new(&bytes)).ok()
    })
}

/// The BTH and headers as the wire holds them (emit, then parse back).
fn wire_values(bth: BthRepr, ext: ExtHeaders) -> (BthRepr, ExtHeaders) {
    let mut buf = [0u8; 12];
    bth.emit(&mut buf).unwrap();
    let bth = BthRepr::parse(&buf).unwrap().0;
    let kinds: Vec<_> = ext.kinds().collect();
    let mut buf = vec![0u8; ext.buffer_len()];
    ext.emit(&mut buf).unwrap();
    (bth, ExtHeaders::parse(&kinds, &buf).unwrap().0)
}

fn arb_frame_builder() -> impl Strategy<Value = PacketBuilder> {
    (
        any::<u8>(),
        from_arbitrary::<BthRepr>(),
        from_arbitrary::<ExtHeaders>(),
        prop::collection::vec(any::<u8>(), 0..300),
        0u8..3,
        any::<bool>(),
        any::<u16>(),
    )
        .prop_map(|(op, bth, ext, payload, vlans, v6, sport)| {
            let mut b = PacketBuilder::new(Opcode(op))
                .payload(payload)
                .udp_src_port(sport);
            // Fields wider than their bit width are masked by emit (tested per
            // header above); start from what the wire can hold.
            let (bth, ext) = wire_values(bth, ext);
            *b.bth_mut() = BthRepr {
                opcode: Opcode(op),
                ..bth
            };
            // Keep exactly the headers the opcode's layout names, with arbitrary values.
            let layout = Opcode(op)
                .layout(Dialect::MetaRoce)
                .map_or(&[][..], |l| l.headers);
            let e = b.ext_mut();
            *e = ext;
            for kind in metaroce_codec::ExtKind::ALL {
                if layout.contains(&kind) {
                    e.insert_default(kind);
                } else {
                    e.remove(kind);
                }
            }
            for i in 0..vlans {
                b = b.vlan(VlanTag::dot1q(i, 10 + u16::from(i)));
            }
            if v6 {
                b = b.ipv6("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap());
            }
            b
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    /// Whatever parses emits back byte for byte.
    #[test]
    fn any_bytes_that_parse_round_trip(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(frame) = Frame::parse(&bytes, &ParseOptions::default()) {
            prop_assert_eq!(frame.to_bytes(), bytes);
        }
    }

    /// Valid frames with random bytes flipped or cut: still no panic, and
    /// whatever parses round-trips.
    #[test]
    fn mutated_frames_round_trip(b in arb_frame_builder(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6), cut in any::<prop::sample::Index>(), do_cut in any::<bool>()) {
        let mut bytes = b.build();
        for (at, x) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= x;
        }
        if do_cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        if let Ok(frame) = Frame::parse(&bytes, &ParseOptions::default()) {
            prop_assert_eq!(frame.to_bytes(), bytes.clone());
            // The in-place fast path agrees with the repr path on every frame.
            prop_assert_eq!(icrc::verify_wire(&frame, &bytes), icrc::verify(&frame));
        }
        if let Ok(frame) = Frame::parse(&bytes, &ParseOptions { dialect: Dialect::Base, ..ParseOptions::default() }) {
            prop_assert_eq!(frame.to_bytes(), bytes);
        }
    }

    /// `build_filled` with the builder's payload is `build`, overrides included.
    #[test]
    fn build_filled_matches_build(b in arb_frame_builder()) {
        check_build_filled("arbitrary", &b);
    }

    /// What the builder was told is what the parser reads back.
    #[test]
    fn built_fields_read_back(b in arb_frame_builder()) {
        let built = b.frame();
        let bytes = b.build();
        let frame = Frame::parse(&bytes, &ParseOptions::default()).unwrap();
        prop_assert_eq!(frame, built);
        prop_assert_eq!(icrc::verify(&frame), IcrcStatus::Valid);
        let roce = frame.roce.unwrap();
        prop_assert_eq!(usize::from(roce.bth.pad_count), (4 - roce.payload.len() % 4) % 4);
    }

    #[test]
    fn arbitrary_bth_round_trips(bth in from_arbitrary::<BthRepr>()) {
        let mut buf = [0xa5u8; 12];
        bth.emit(&mut buf).unwrap();
        let masked = BthRepr {
            pad_count: bth.pad_count & 3,
            tver: bth.tver & 0xF,
            resv6a: bth.resv6a & 0x3F,
            resv7: bth.resv7 & 0x7F,
            dest_qp: bth.dest_qp & 0xFF_FFFF,
            ..bth
        };
        prop_assert_eq!(BthRepr::parse(&buf).unwrap().0, masked);
    }
}
