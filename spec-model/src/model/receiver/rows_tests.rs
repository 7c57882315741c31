//! [`frame_admission`] (a capture checker's admission of a decoded frame)
//! against [`admit`] (the whole receive path) on the same bytes: when the
//! receiving QP's rows pass, both deliver the same frames and drop the
//! others for the same row. (A UDP destination port other than 4791 is
//! not decoded as RoCE with the default options here; `frame_admission`
//! leaves that row to the caller, see its documentation.)

use super::*;
use crate::model::qp::QpType;
use metaroce_codec::ext::{SackethRepr, Syndrome};
use metaroce_codec::{Dialect, Frame, Opcode, PacketBuilder, ParseOptions, Psn, icrc};

/// A receiver with an RC QP 0x11 and an MP QP 0x44, both in RTS, reached
/// from 10.0.0.1.
fn receiver() -> Receiver {
    let mut mp = LocalQp::base(QpType::Rc);
    mp.mp = Some(MpAdmission {
        trim_dscp: None,
        trimming: false,
    });
    Receiver {
        vlan: false,
        mp: true,
        qps: BTreeMap::from([(0x11, LocalQp::base(QpType::Rc)), (0x44, mp)]),
    }
}

fn mp_ack() -> PacketBuilder {
    PacketBuilder::new(Opcode::MP_ACK)
        .psn(9)
        .dest_qp(0x44)
        .udp_src_port(0xD001)
        .ext(|e| {
            e.sacketh = Some(SackethRepr {
                syndrome: Syndrome(0x1F),
                sack_base_psn: Psn::new(10),
                ..SackethRepr::default()
            })
        })
}

fn rc_send() -> PacketBuilder {
    PacketBuilder::new(Opcode::RC_SEND_ONLY)
        .psn(5)
        .payload(*b"data")
}

/// Every row the frame alone decides, on an MP ACK and an RC SEND.
fn cases() -> Vec<(&'static str, PacketBuilder)> {
    let mut all = Vec::new();
    for (name, b) in [("mp ack", mp_ack()), ("rc send", rc_send())] {
        all.push((name, b.clone()));
        all.push(("bad ipv4 checksum", b.clone().ipv4_checksum(0x0BAD)));
        all.push(("bad icrc", b.clone().corrupt_icrc()));
        all.push(("tver 1", b.clone().bth(|h| h.tver = 1)));
        all.push(("qpn 0", b.clone().dest_qp(0)));
        all.push(("qpn 0xffffff", b.clone().dest_qp(0xFF_FFFF)));
        all.push(("udp port 4792", b.clone().udp_dst_port(4792)));
        all.push(("udp length short", b.clone().udp_length(28)));
        all.push(("trailer", b.clone().trailer([0; 6])));
    }
    all.push(("mp ack pad", mp_ack().pad_count(1)));
    all.push(("mp ack payload", mp_ack().payload([1, 2, 3, 4])));
    all.push((
        "rc reserved opcode",
        rc_send().bth(|h| h.opcode = Opcode(0x1E)),
    ));
    all.push(("rd opcode", rc_send().bth(|h| h.opcode = Opcode(0x40))));
    all.push(("ipv4 options", rc_send().ipv4_options([1, 1, 1, 1])));
    all.push(("ipv4 fragment", rc_send().ipv4_flags_frag(0x2000)));
    all.push(("udp checksum wrong", rc_send().udp_checksum(0x1234)));
    all
}

#[test]
fn frame_admission_agrees_with_admit() {
    let rx = receiver();
    let options = ParseOptions {
        dialect: Dialect::MetaRoce,
        ..ParseOptions::default()
    };
    let mut dropped = 0;
    for (name, b) in cases() {
        let wire = b.build();
        let verdict = admit(&rx, &wire);
        let Ok(frame) = Frame::parse(&wire, &options) else {
            // What the codec cannot decode never reaches a QP either.
            assert!(verdict.delivery().is_none(), "{name}: {verdict:?}");
            continue;
        };
        let status = icrc::verify_wire(&frame, &wire);
        let ours = frame_admission(&frame, status, Dialect::MetaRoce, false);
        match (&verdict, ours) {
            (Verdict::Deliver(_), Ok(())) => {}
            (Verdict::Drop(d), Err(e)) => {
                assert_eq!(d.reqs, e.reqs, "{name}");
                dropped += 1;
            }
            (Verdict::NotMetaRoce, Err(e)) => assert_eq!(e.reqs, ["MR-ENC-11"], "{name}"),
            _ => panic!("{name}: admit {verdict:?}, frame_admission {ours:?}"),
        }
    }
    assert!(dropped >= 15, "only {dropped} drops compared");
}

/// "MR-ROB-2": the IPv4 header checksum row, named.
#[test]
fn a_bad_ipv4_header_checksum_is_dropped_by_frame_admission() {
    let wire = mp_ack().ipv4_checksum(0x0BAD).build();
    let frame = Frame::parse(&wire, &ParseOptions::default()).unwrap();
    let status = icrc::verify_wire(&frame, &wire);
    assert_eq!(status, metaroce_codec::IcrcStatus::Valid);
    let e = frame_admission(&frame, status, Dialect::MetaRoce, false).unwrap_err();
    assert_eq!(e.reqs, ["MR-ROB-2"]);
}

/// A frame decoded as RoCE on another port the caller was told carries
/// RoCE is not dropped for its port here (MR-ENC-11 is a per-packet finding
/// of its sender; the conversation shows whether its receiver took it).
#[test]
fn frame_admission_leaves_the_destination_port_to_the_caller() {
    let wire = mp_ack().udp_dst_port(4792).build();
    let options = ParseOptions {
        roce_ports: vec![4791, 4792],
        ..ParseOptions::default()
    };
    let frame = Frame::parse(&wire, &options).unwrap();
    let status = icrc::verify_wire(&frame, &wire);
    assert_eq!(
        frame_admission(&frame, status, Dialect::MetaRoce, false),
        Ok(())
    );
    assert_eq!(admit(&receiver(), &wire), Verdict::NotMetaRoce);
}
