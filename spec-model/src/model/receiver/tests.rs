//! Admission and device tests: each names the requirement it checks.

use super::*;
use crate::model::congestion::{DcqcnParams, NpDecision};
use crate::model::qp::{QpState, QpType};
use crate::model::responder::Features;
use core::net::{IpAddr, Ipv6Addr};
use metaroce_codec::ethernet::VlanTag;
use metaroce_codec::ext::{DethRepr, FethRepr};
use metaroce_codec::{Frame, Opcode, PacketBuilder, ParseOptions};

const QPN: u32 = 0x11;
const OTHER: u32 = 0x22;

fn receiver() -> Receiver {
    let mut qps = BTreeMap::new();
    qps.insert(QPN, LocalQp::base(QpType::Rc));
    let mut ud = LocalQp::base(QpType::Ud);
    ud.q_key = metaroce_codec::builder::GSI_QKEY;
    ud.local_ip = None;
    ud.remote_ip = None;
    qps.insert(0x33, ud);
    let mut mp = LocalQp::base(QpType::Rc);
    mp.mp = Some(MpAdmission {
        trim_dscp: Some(7),
        trimming: true,
    });
    qps.insert(0x44, mp);
    qps.insert(OTHER, LocalQp::base(QpType::Rc));
    Receiver {
        vlan: true,
        mp: true,
        qps,
    }
}

fn send() -> PacketBuilder {
    PacketBuilder::new(Opcode::RC_SEND_ONLY)
        .psn(5)
        .payload(*b"data")
}

fn verdict_of(b: &PacketBuilder) -> (Vec<u8>, Option<Dropped>, bool) {
    let wire = b.build();
    let rx = receiver();
    let v = admit(&rx, &wire);
    let dropped = v.dropped().copied();
    let delivered = v.delivery().is_some();
    (wire, dropped, delivered)
}

fn dropped_by(b: &PacketBuilder) -> Dropped {
    let (_, d, _) = verdict_of(b);
    d.unwrap_or_else(|| panic!("not dropped: {b:?}"))
}

fn delivered(b: &PacketBuilder) -> bool {
    verdict_of(b).2
}

/// The delivered packet's headers (payload compared separately).
fn canonical_headers(
    b: &PacketBuilder,
) -> (metaroce_codec::BthRepr, metaroce_codec::ExtHeaders, Vec<u8>) {
    let wire = b.build();
    let rx = receiver();
    let v = admit(&rx, &wire);
    let d = v
        .delivery()
        .unwrap_or_else(|| panic!("not delivered: {v:?}"));
    (d.packet.bth, d.packet.ext, d.packet.payload.to_vec())
}

#[test]
fn a_valid_packet_is_delivered() {
    assert!(delivered(&send()));
}

#[test]
fn vlan_tag_is_accepted_like_none() {
    // MR-ENC-2: any PCP and VID, same packet as untagged.
    let plain = canonical_headers(&send());
    for (pcp, vid) in [(0, 1), (7, 4094), (3, 100)] {
        let tagged = send().vlan(VlanTag::dot1q(pcp, vid));
        assert_eq!(canonical_headers(&tagged), plain, "MR-ENC-2");
    }
}

#[test]
fn ethernet_padding_is_ignored() {
    // MR-ENC-3: bytes after the IP packet are not payload, pad or ICRC.
    let plain = canonical_headers(&send());
    let padded = send().trailer(vec![0xAB; 20]);
    assert_eq!(canonical_headers(&padded), plain, "MR-ENC-3");
}

#[test]
fn ipv4_options_and_fragments_are_dropped() {
    // MR-ENC-5
    let d = dropped_by(&send().ipv4_options(vec![1, 1, 1, 0]).ipv4_ihl(6));
    assert_eq!(d.reqs, &["MR-ENC-5"]);
    assert_eq!(d.counter, Some("malformed_drops"));
    let more = dropped_by(&send().ipv4_flags_frag(0x2000));
    assert_eq!(more.reqs, &["MR-ENC-5"], "MR-ENC-5: MF set");
    let later = dropped_by(&send().ipv4_flags_frag(0x0010));
    assert_eq!(later.reqs, &["MR-ENC-5"], "MR-ENC-5: offset not 0");
    // DF alone is not a fragment.
    assert!(delivered(&send().ipv4_flags_frag(0x4000)));
}

#[test]
fn ipv6_extension_headers_are_dropped() {
    let v6 = |b: PacketBuilder| {
        b.ipv6(
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2),
        )
    };
    let mut rx = receiver();
    if let Some(qp) = rx.qps.get_mut(&QPN) {
        qp.remote_ip = Some(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)));
        qp.local_ip = Some(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2)));
    }
    let ok = v6(send()).build();
    assert!(admit(&rx, &ok).delivery().is_some());
    for next_header in [0u8, 43, 44, 60] {
        let wire = v6(send()).ip_protocol(next_header).build();
        let v = admit(&rx, &wire);
        assert_eq!(
            v.dropped().map(|d| d.reqs),
            Some(&["MR-ENC-9"][..]),
            "MR-ENC-9"
        );
    }
}

#[test]
fn other_udp_ports_are_not_metaroce() {
    // MR-ENC-11: only port 4791.
    let wire = send().udp_dst_port(4792).build();
    assert_eq!(admit(&receiver(), &wire), Verdict::NotMetaRoce);
}

#[test]
fn any_udp_source_port_is_accepted() {
    // MR-ENC-14: 0 included, on requests, responses and CNPs.
    for port in [0u16, 1, 0x1234, 0xC000, 0xFFFF] {
        assert!(delivered(&send().udp_src_port(port)), "MR-ENC-14");
        let ack = PacketBuilder::new(Opcode::RC_ACK).udp_src_port(port);
        assert!(delivered(&ack), "MR-ENC-14: ACK");
        let cnp = PacketBuilder::new(Opcode::CNP).udp_src_port(port);
        assert!(delivered(&cnp), "MR-ENC-14: CNP");
    }
}

#[test]
fn udp_length_must_equal_the_ip_payload_length() {
    let ok_len = (8 + 12 + 4 + 4) as u16;
    let shorter = dropped_by(&send().udp_length(ok_len - 4));
    assert_eq!(shorter.reqs, &["MR-ENC-15"], "MR-ENC-15");
    let longer = dropped_by(&send().udp_length(ok_len + 4));
    assert_eq!(
        longer.reqs,
        &["MR-ROB-1", "MR-ENC-15"],
        "MR-ROB-1, MR-ENC-15"
    );
}

fn with_right_udp_checksum(b: PacketBuilder) -> PacketBuilder {
    let wire = b.build();
    let frame = Frame::parse(&wire, &ParseOptions::default()).expect("parses");
    let (Some(ip), Some(udp), Some(roce)) = (&frame.ip, &frame.udp, &frame.roce) else {
        panic!("not RoCE");
    };
    let sum = crate::validate::encap::udp_checksum_of(ip, udp, roce);
    b.udp_checksum(sum)
}

#[test]
fn udp_checksum_zero_and_correct_are_accepted() {
    // MR-ENC-17 over IPv4 and IPv6; a wrong one is reported (MR-ENC-18 allows a drop).
    let rx = receiver();
    let zero = send().build();
    assert_eq!(
        admit(&rx, &zero).delivery().map(|d| d.udp_checksum),
        Some(UdpChecksum::Zero),
        "MR-ENC-17"
    );
    let right = with_right_udp_checksum(send()).build();
    assert_eq!(
        admit(&rx, &right).delivery().map(|d| d.udp_checksum),
        Some(UdpChecksum::Correct),
        "MR-ENC-17"
    );
    let wrong = send().udp_checksum(0x1234).build();
    assert_eq!(
        admit(&rx, &wrong).delivery().map(|d| d.udp_checksum),
        Some(UdpChecksum::Wrong)
    );
    // IPv6
    let mut rx6 = receiver();
    let (a, b) = (
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2),
    );
    if let Some(qp) = rx6.qps.get_mut(&QPN) {
        qp.remote_ip = Some(IpAddr::V6(a));
        qp.local_ip = Some(IpAddr::V6(b));
    }
    let zero6 = send().ipv6(a, b).build();
    assert_eq!(
        admit(&rx6, &zero6).delivery().map(|d| d.udp_checksum),
        Some(UdpChecksum::Zero),
        "MR-ENC-17: IPv6"
    );
    let right6 = with_right_udp_checksum(send().ipv6(a, b)).build();
    assert_eq!(
        admit(&rx6, &right6).delivery().map(|d| d.udp_checksum),
        Some(UdpChecksum::Correct),
        "MR-ENC-17: IPv6"
    );
}

#[test]
fn ecn_dscp_and_ttl_never_cause_a_drop() {
    // MR-ENC-22
    for tos in [0u8, 0x03, 0xB8, 0xFF, 0x1D] {
        for ttl in [1u8, 2, 64, 255] {
            assert!(
                delivered(&send().traffic_class(tos).hop_limit(ttl)),
                "MR-ENC-22: tos {tos:#x} ttl {ttl}"
            );
        }
    }
}

#[test]
fn ignored_bth_bits_do_not_change_the_packet() {
    // MR-BTH-3: M, Resv6a, Resv7, FECN and (outside CNPs) BECN.
    let plain = canonical_headers(&send());
    let noisy = send().bth(|b| {
        b.migreq = true;
        b.resv6a = 0x3F;
        b.resv7 = 0x7F;
        b.fecn = true;
        b.becn = true;
    });
    assert_eq!(canonical_headers(&noisy), plain, "MR-BTH-3");
    // BECN stays set in a CNP.
    let cnp = canonical_headers(&PacketBuilder::new(Opcode::CNP));
    assert!(cnp.0.becn);
}

#[test]
fn reserved_extension_fields_do_not_change_the_packet() {
    // MR-EXT-2: DETH byte 4, FETH bits 0–25, the CNP bytes.
    let ud = |reserved: u8| {
        PacketBuilder::new(Opcode::UD_SEND_ONLY)
            .dest_qp(0x33)
            .deth(DethRepr {
                qkey: metaroce_codec::builder::GSI_QKEY,
                reserved,
                src_qp: 0x55,
            })
            .payload(*b"abcd")
    };
    assert_eq!(
        canonical_headers(&ud(0xEE)),
        canonical_headers(&ud(0)),
        "MR-EXT-2"
    );
    let flush = |reserved: u32| {
        PacketBuilder::new(Opcode::RC_FLUSH).ext(|e| {
            e.feth = Some(FethRepr {
                reserved,
                selectivity_level: 0,
                placement_type: 1,
            });
        })
    };
    let (bth, ext, _) = canonical_headers(&flush(0x3FF_FFFF));
    assert_eq!(
        (bth, ext),
        {
            let (b, e, _) = canonical_headers(&flush(0));
            (b, e)
        },
        "MR-EXT-2"
    );
    let noisy_cnp = PacketBuilder::new(Opcode::CNP).ext(|e| {
        if let Some(c) = &mut e.cnp {
            c.reserved = [0xFF; 16];
        }
    });
    assert_eq!(
        canonical_headers(&noisy_cnp),
        canonical_headers(&PacketBuilder::new(Opcode::CNP)),
        "MR-EXT-2"
    );
}

#[test]
fn reserved_mp_header_bits_do_not_change_the_packet() {
    // MR-MPH-7: MPETH byte 0, SACKETH byte 4 and bytes 18–19.
    let mp_send = |reserved: u8| {
        PacketBuilder::new(Opcode::MP_SEND)
            .dest_qp(0x44)
            .payload(*b"abcd")
            .ext(|e| {
                if let Some(m) = &mut e.mpeth {
                    m.first = true;
                    m.last = true;
                    m.msg_len = 4;
                    m.reserved = reserved;
                }
            })
    };
    assert_eq!(
        canonical_headers(&mp_send(0x1F)),
        canonical_headers(&mp_send(0)),
        "MR-MPH-7"
    );
    let mp_ack = |flags: u8, reserved: u16| {
        PacketBuilder::new(Opcode::MP_ACK).dest_qp(0x44).ext(|e| {
            if let Some(s) = &mut e.sacketh {
                s.reserved_flags = flags;
                s.reserved = reserved;
            }
        })
    };
    assert_eq!(
        canonical_headers(&mp_ack(0x1F, 0xFFFF)),
        canonical_headers(&mp_ack(0, 0)),
        "MR-MPH-7"
    );
}

#[test]
fn opcode_alone_decides_the_headers() {
    // MR-OPC-1: the same 20 bytes after BTH are RETH + 4 payload bytes for a
    // WRITE Only and 20 payload bytes for a SEND Only.
    let write = PacketBuilder::new(Opcode::RC_WRITE_ONLY).payload(*b"wxyz");
    let (_, ext, payload) = canonical_headers(&write);
    assert!(ext.reth.is_some(), "MR-OPC-1");
    assert_eq!(payload, b"wxyz");
    let (_, ext, payload) = canonical_headers(&send().payload(vec![7; 20]));
    assert!(ext.reth.is_none(), "MR-OPC-1");
    assert_eq!(payload.len(), 20);
    // A WRITE Only whose bytes end inside its RETH is too short for its opcode.
    let bytes = PacketBuilder::new(Opcode::RC_WRITE_ONLY).build();
    let cut = bytes.len() - 4 - 8;
    let short = PacketBuilder::new(Opcode::RC_WRITE_ONLY).truncate(cut);
    let (_, d, _) = verdict_of(&short);
    assert!(d.is_some(), "MR-OPC-1, MR-ROB-1");
}

#[test]
fn bad_icrc_is_dropped_silently() {
    // MR-ICRC-3
    let d = dropped_by(&send().corrupt_icrc());
    assert_eq!(d.counter, Some("icrc_errors"), "MR-ICRC-3");
    assert!(d.reqs.contains(&"MR-ICRC-3"));
}

#[test]
fn bad_icrc_changes_no_state_and_reaches_no_qp() {
    // MR-ICRC-4, MR-ICRC-6: no delivery (so no placement, response or
    // completion), no CNP even when CE-marked, no QP state change.
    let dev = device();
    let wire = send().traffic_class(0x03).corrupt_icrc().build();
    let (next, r) = dev.receive(&wire, 1_000);
    assert!(r.delivery().is_none(), "MR-ICRC-6");
    assert_eq!(r.np, NpDecision::Nothing, "MR-ICRC-4: no CNP");
    assert_eq!(next.rps, dev.rps, "MR-ICRC-4");
    assert_eq!(next.np, dev.np, "MR-ICRC-4");
    assert_eq!(next.receiver, dev.receiver, "MR-ICRC-4");
    assert_eq!(next.counters.icrc_errors, 1);
    assert_eq!(next.counters.ecn_ce_received, 0);
    // A bad-ICRC CNP does not cut the rate (MR-DCQCN-8).
    let cnp = PacketBuilder::new(Opcode::CNP).corrupt_icrc().build();
    let (next, r) = dev.receive(&cnp, 1_000);
    assert_eq!(r.rate, None, "MR-DCQCN-8");
    assert_eq!(next.rps, dev.rps, "MR-DCQCN-8");
}

#[test]
fn rewritten_variant_fields_keep_the_packet_valid() {
    // MR-ICRC-5: DSCP, ECN, TTL, IPv4 checksum, UDP checksum and BTH byte 4
    // rewritten after the ICRC was computed.
    let original = send().build();
    let frame = Frame::parse(&original, &ParseOptions::default()).expect("parses");
    let icrc = frame.roce.map(|r| r.icrc_value()).unwrap_or(0);
    let rewritten = send()
        .traffic_class(0xBB)
        .hop_limit(3)
        .udp_checksum(0x5A5A)
        .bth(|b| {
            b.fecn = true;
            b.becn = true;
            b.resv6a = 0x2A;
        })
        .icrc(icrc);
    assert!(delivered(&rewritten), "MR-ICRC-5");
    // A covered field changed: the ICRC no longer matches.
    let covered = send().psn(6).icrc(icrc);
    assert_eq!(dropped_by(&covered).counter, Some("icrc_errors"));
}

#[test]
fn truncated_frames_are_dropped() {
    // MR-ROB-1: ends inside UDP, IP length beyond the bytes, no room for ICRC.
    let full = send().build();
    for cut in [14 + 20 + 4, full.len() - 2] {
        let d = dropped_by(&send().truncate(cut));
        assert!(d.reqs.contains(&"MR-ROB-1"), "MR-ROB-1 at {cut}: {d:?}");
    }
    let d = dropped_by(&send().ip_length(200));
    assert_eq!(d.reqs, &["MR-ROB-1"], "MR-ROB-1");
}

#[test]
fn wrong_ipv4_header_checksum_is_dropped() {
    // MR-ROB-2
    assert_eq!(
        dropped_by(&send().ipv4_checksum(0xBEEF)).reqs,
        &["MR-ROB-2"]
    );
}

#[test]
fn udp_length_not_a_multiple_of_four_is_dropped() {
    // MR-ROB-3: 5 payload bytes and no pad make a UDP length of 29.
    let odd = send().payload(*b"abcde").pad_count(0).pad_bytes(Vec::new());
    assert_eq!(dropped_by(&odd).reqs, &["MR-ROB-3"], "MR-ROB-3");
}

#[test]
fn management_multicast_and_unknown_qps_are_dropped() {
    // MR-BTH-6
    for qpn in [0u32, 1, 0xFF_FFFF, 0x99] {
        let d = dropped_by(&send().dest_qp(qpn));
        assert_eq!(d.reqs, &["MR-BTH-6"], "MR-BTH-6 for {qpn:#x}");
        assert_eq!(d.counter, Some("unknown_qp_drops"));
    }
}

#[test]
fn foreign_addresses_are_dropped_for_connected_qps() {
    // MR-SEC-9
    let spoofed = send().ipv4([10, 0, 0, 9].into(), [10, 0, 0, 2].into());
    assert_eq!(dropped_by(&spoofed).reqs, &["MR-SEC-9"], "MR-SEC-9");
    let wrong_dst = send().ipv4([10, 0, 0, 1].into(), [10, 0, 0, 7].into());
    assert_eq!(dropped_by(&wrong_dst).reqs, &["MR-SEC-9"], "MR-SEC-9");
    // UD QPs take datagrams from anyone.
    let ud = PacketBuilder::new(Opcode::UD_SEND_ONLY)
        .dest_qp(0x33)
        .ipv4([10, 9, 9, 9].into(), [10, 0, 0, 2].into());
    assert!(delivered(&ud));
}

#[test]
fn trimmed_mp_packets_survive_icrc_and_udp_length() {
    // MR-MPT-3: DSCP 7 on the MP QP, payload cut, UDP length left as sent.
    let full_len = (8 + 12 + 16 + 16 + 1024 + 4) as u16;
    let trimmed = PacketBuilder::new(Opcode::MP_WRITE)
        .dest_qp(0x44)
        .traffic_class(7 << 2)
        .ext(|e| {
            if let Some(m) = &mut e.mpeth {
                m.first = true;
                m.last = true;
                m.msg_len = 1024;
            }
        })
        .udp_length(full_len)
        .corrupt_icrc();
    let (_, d, ok) = verdict_of(&trimmed);
    assert!(ok && d.is_none(), "MR-MPT-3: {d:?}");
    let rx = receiver();
    let wire = trimmed.build();
    assert!(admit(&rx, &wire).delivery().is_some_and(|d| d.trimmed));
    // The same bytes with another DSCP are an ordinary packet with a bad length.
    let plain = trimmed.clone().traffic_class(0);
    assert!(dropped_by(&plain).reqs.contains(&"MR-ENC-15"));
}

fn device() -> Device {
    let mut dev = Device::new(receiver());
    dev.dcqcn = Some(DcqcnParams::defaults(100_000_000));
    dev.enter_rts(QPN, 0).enter_rts(OTHER, 0).enter_rts(0x44, 0)
}

#[test]
fn a_packet_changes_only_the_qp_it_names() {
    // MR-ROB-6: a CNP for QPN cuts QPN's rate only; malformed input changes no QP.
    let dev = device();
    let cnp = PacketBuilder::new(Opcode::CNP).build();
    let (next, r) = dev.receive(&cnp, 10_000);
    assert!(r.rate.is_some_and(|c| c.cut));
    assert_ne!(next.rps.get(&QPN), dev.rps.get(&QPN));
    assert_eq!(next.rps.get(&OTHER), dev.rps.get(&OTHER), "MR-ROB-6");
    let junk = [
        send().ipv4_checksum(1).build(),
        send().dest_qp(OTHER).pad_count(3).build(),
        send().bth(|b| b.tver = 1).build(),
        send().truncate(30).build(),
    ];
    for wire in &junk {
        let (after, r) = dev.receive(wire, 10_000);
        assert!(r.verdict.dropped().is_some());
        assert_eq!(after.rps, dev.rps, "MR-ROB-6");
        assert_eq!(after.np, dev.np, "MR-ROB-6");
        assert_eq!(after.receiver, dev.receiver, "MR-ROB-6");
    }
}

#[test]
fn malformed_bursts_do_not_change_how_valid_traffic_is_processed() {
    // MR-ROB-7 (functional part): after any burst of malformed packets a valid
    // packet gets exactly the outcome it gets without the burst.
    let dev = device();
    let valid = send().traffic_class(0x03).build();
    let (clean, expected) = dev.receive(&valid, 100_000);
    let mut d = dev.clone();
    let burst: Vec<Vec<u8>> = (0..50u8)
        .map(|i| match i % 5 {
            0 => send().corrupt_icrc().build(),
            1 => send().udp_length(12).build(),
            2 => send().dest_qp(u32::from(i) + 0x100).build(),
            3 => send().bth(|b| b.pkey = 0x1234).build(),
            _ => PacketBuilder::new(Opcode(0xE5)).build(),
        })
        .collect();
    for wire in &burst {
        d = d.receive(wire, 50_000).0;
    }
    let (after, got) = d.receive(&valid, 100_000);
    assert_eq!(got, expected, "MR-ROB-7");
    assert_eq!(after.rps, clean.rps, "MR-ROB-7");
    assert_eq!(after.np, clean.np, "MR-ROB-7");
}

#[test]
fn counters_count_the_events() {
    // MR-ROB-10: replaying a mixed sequence gives counters equal to the number
    // of events of each kind.
    let mut dev = device();
    let frames = [
        send().corrupt_icrc().build(),           // icrc_errors
        send().corrupt_icrc().build(),           // icrc_errors
        send().dest_qp(0x99).build(),            // unknown_qp_drops
        send().bth(|b| b.pkey = 0x1234).build(), // pkey_violations
        send().ipv4_checksum(7).build(),         // malformed_drops
        PacketBuilder::new(Opcode::UD_SEND_ONLY)
            .dest_qp(0x33)
            .deth(DethRepr {
                qkey: 5,
                reserved: 0,
                src_qp: 9,
            })
            .build(), // qkey_violations
        send().traffic_class(0x03).build(),      // ecn_ce_received, cnp_sent
        send().traffic_class(0x03).build(),      // ecn_ce_received (paced)
        PacketBuilder::new(Opcode::CNP).build(), // cnp_received
        send().udp_dst_port(80).build(),         // nothing
    ];
    for (i, wire) in frames.iter().enumerate() {
        dev = dev.receive(wire, 1_000 * i as u64).0;
    }
    let c = dev.counters;
    assert_eq!(
        (
            c.icrc_errors,
            c.unknown_qp_drops,
            c.pkey_violations,
            c.malformed_drops,
            c.qkey_violations
        ),
        (2, 1, 1, 1, 1),
        "MR-ROB-10"
    );
    assert_eq!(
        (c.ecn_ce_received, c.cnp_sent, c.cnp_received),
        (2, 1, 1),
        "MR-ROB-10"
    );
    assert_eq!(c.get("icrc_errors"), Some(2));
    assert_eq!(c.get("mp_probes_sent"), None);
}

#[test]
fn ce_marked_packets_cause_paced_cnps() {
    // MR-CNP-1, MR-CNP-2, MR-CNP-4 through the device.
    let dev = device();
    let marked = send().traffic_class(0x03).build();
    let (dev, r) = dev.receive(&marked, 1_000);
    let NpDecision::Send(cnp) = r.np else {
        panic!("no CNP: {:?}", r.np);
    };
    assert_eq!(cnp.dest_qp, 0x12, "MR-CNP-4: the receiving QP's dest_qpn");
    assert_eq!(cnp.src_ip, IpAddr::from([10, 0, 0, 2]), "MR-CNP-4");
    assert_eq!(cnp.dst_ip, IpAddr::from([10, 0, 0, 1]), "MR-CNP-4");
    assert_eq!(cnp.not_after_ns, 11_000, "MR-CNP-1: within cnp_delay_max");
    assert_eq!(r.outcomes.required.len(), 1, "MR-CNP-1");
    let (dev, r) = dev.receive(&marked, 20_000);
    assert_eq!(r.np, NpDecision::Paced, "MR-CNP-2");
    assert!(r.outcomes.required.is_empty(), "MR-CNP-2");
    let (_, r) = dev.receive(&marked, 51_000);
    assert!(
        matches!(r.np, NpDecision::Send(_)),
        "MR-CNP-2: interval over"
    );
    // An unmarked packet, and a marked ACK, cause none (MR-CNP-1).
    let unmarked = send().build();
    let (_, r) = device().receive(&unmarked, 1_000);
    assert_eq!(r.np, NpDecision::Nothing);
    let ack = PacketBuilder::new(Opcode::RC_ACK)
        .traffic_class(0x03)
        .build();
    let (_, r) = device().receive(&ack, 1_000);
    assert!(matches!(r.np, NpDecision::Excluded(_)), "MR-CNP-1");
}

#[test]
fn ud_cnps_go_to_the_deth_source_qp() {
    // MR-CNP-4
    let ud = PacketBuilder::new(Opcode::UD_SEND_ONLY)
        .dest_qp(0x33)
        .traffic_class(0x03)
        .ipv4([10, 0, 0, 8].into(), [10, 0, 0, 2].into())
        .deth(DethRepr {
            qkey: metaroce_codec::builder::GSI_QKEY,
            reserved: 0,
            src_qp: 0x777,
        })
        .build();
    let (_, r) = device().receive(&ud, 1_000);
    let NpDecision::Send(cnp) = r.np else {
        panic!("no CNP");
    };
    assert_eq!(cnp.dest_qp, 0x777, "MR-CNP-4");
    assert_eq!(cnp.dst_ip, IpAddr::from([10, 0, 0, 8]), "MR-CNP-4");
}

#[test]
fn mp_qps_get_no_cnps_and_ignore_cnps() {
    // MR-CNP-6: no CNP for a CE-marked packet of an MP QP.
    let mp = PacketBuilder::new(Opcode::MP_SEND)
        .dest_qp(0x44)
        .traffic_class(0x03)
        .ext(|e| {
            if let Some(m) = &mut e.mpeth {
                m.first = true;
                m.last = true;
            }
        })
        .build();
    let (_, r) = device().receive(&mp, 1_000);
    assert_eq!(r.np, NpDecision::Excluded(&["MR-CNP-6"]), "MR-CNP-6");
    // MR-MPN-5: a CNP to an MP QP is dropped with no congestion effect.
    let dev = device();
    let cnp = PacketBuilder::new(Opcode::CNP).dest_qp(0x44).build();
    let (next, r) = dev.receive(&cnp, 1_000);
    assert_eq!(r.rate, None, "MR-MPN-5");
    assert_eq!(next.rps, dev.rps, "MR-MPN-5");
    assert_eq!(
        r.outcomes.required.first().map(|c| c.reqs),
        Some(&["MR-MPN-5"][..]),
        "MR-MPN-5"
    );
}

#[test]
fn reset_clears_congestion_state_silently() {
    // MR-QP-8: after RESET the QP has no rate limit left and no pacing slot,
    // and the reset itself shows nothing.
    let dev = device();
    let (dev, _) = dev.receive(&PacketBuilder::new(Opcode::CNP).build(), 10_000);
    let (dev, _) = dev.receive(&send().traffic_class(0x03).build(), 10_000);
    assert!(dev.rps.get(&QPN).is_some_and(|rp| rp.rc < 100_000_000));
    assert!(!dev.np.last_cnp.is_empty());
    let (reset, outcomes) = dev.reset(QPN);
    assert_eq!(
        outcomes,
        Outcomes::none(),
        "MR-QP-8: no completion, no packet"
    );
    assert!(!reset.rps.contains_key(&QPN), "MR-QP-8");
    assert!(reset.np.last_cnp.is_empty(), "MR-QP-8");
    assert_eq!(
        reset.receiver.qps.get(&QPN).map(|q| q.state),
        Some(QpState::Reset)
    );
    // Back in RTS it starts at the line rate again.
    let again = reset.enter_rts(QPN, 20_000);
    assert_eq!(
        again.rps.get(&QPN).map(|rp| rp.rc),
        Some(100_000_000),
        "MR-QP-8"
    );
    // In RESET the QP drops what it is sent (MR-QP-3).
    let plain = send().build();
    let (_, r) = reset.receive(&plain, 20_000);
    assert!(r.verdict.dropped().is_some());
}

#[test]
fn features_and_classes_gate_delivery() {
    let mut rx = receiver();
    if let Some(qp) = rx.qps.get_mut(&QPN) {
        qp.features = Features::DEFAULT;
    }
    let atomic = PacketBuilder::new(Opcode::RC_FETCH_ADD).build();
    assert_eq!(
        admit(&rx, &atomic).dropped().map(|d| d.reqs),
        Some(&["MR-PICS-3"][..])
    );
    let mp_on_base = PacketBuilder::new(Opcode::MP_SEND).build();
    assert_eq!(
        admit(&rx, &mp_on_base).dropped().map(|d| d.reqs),
        Some(&["MR-OPC-3"][..])
    );
    let reserved = PacketBuilder::new(Opcode(0x15)).build();
    assert_eq!(
        admit(&rx, &reserved).dropped().map(|d| d.reqs),
        Some(&["MR-OPC-2"][..])
    );
}
