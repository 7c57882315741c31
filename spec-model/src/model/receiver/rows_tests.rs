//! [`FrameAdmission`] (a capture checker's admission of a decoded frame)
//! against [`admit`] (the whole receive path) on the same bytes: when the
//! receiving QP's rows pass, both deliver the same frames and drop the
//! others for the same row. (A UDP destination port other than 4791 is
//! not decoded as RoCE with the default options here; `FrameAdmission`
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
fn frame_admission_agrees_with_admit_row_by_row() {
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
        let ours = FrameAdmission::new(Dialect::MetaRoce).admit(&frame, status, false, None);
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
fn a_bad_ipv4_header_checksum_is_dropped_unless_the_caller_verified_it() {
    let wire = mp_ack().ipv4_checksum(0x0BAD).build();
    let frame = Frame::parse(&wire, &ParseOptions::default()).unwrap();
    let status = icrc::verify_wire(&frame, &wire);
    assert_eq!(status, metaroce_codec::IcrcStatus::Valid);
    let rows = FrameAdmission::new(Dialect::MetaRoce);
    let e = rows.admit(&frame, status, false, None).unwrap_err();
    assert_eq!(e.reqs, ["MR-ROB-2"]);
    assert_eq!(rows.admit(&frame, status, false, Some(false)), Err(e));
    // A caller that verified it (and found it right) is believed.
    assert_eq!(rows.admit(&frame, status, false, Some(true)), Ok(()));
    // `metaroce check` believes the validators: a frame without findings
    // has a right checksum, since a wrong one is always MR-ENC-7.
    let ctx = crate::validate::Context::default();
    let findings = crate::validate::validate_frame(&frame, status, &ctx);
    assert!(findings.iter().any(|f| f.id == "MR-ENC-7"), "{findings:?}");
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
        FrameAdmission::new(Dialect::MetaRoce).admit(&frame, status, false, None),
        Ok(())
    );
    assert_eq!(admit(&receiver(), &wire), Verdict::NotMetaRoce);
}

/// The rows an opcode decides (11, 13, 20), for every opcode, on an RC
/// SEND and an MP ACK body: a frame `FrameAdmission` drops is never
/// delivered by `admit`, and where `admit`'s first failing row is one of
/// those it names the same row.
#[test]
fn frame_admission_agrees_with_admit_on_every_opcode() {
    const FRAME_ROWS: [&[&str]; 6] = [
        &["MR-OPC-4"],
        &["MR-OPC-4", "MR-OPC-3"],
        &["MR-OPC-2"],
        &["MR-ROB-5"],
        &["MR-ROB-4"],
        &["MR-ICRC-3", "MR-ICRC-4"],
    ];
    let rx = receiver();
    let rows = FrameAdmission::new(Dialect::MetaRoce);
    let options = ParseOptions {
        dialect: Dialect::MetaRoce,
        ..ParseOptions::default()
    };
    let (mut judged, mut same_row) = (0, 0);
    for code in 0..=255u8 {
        for (qpn, body) in [(0x11, rc_send()), (0x44, mp_ack())] {
            let wire = body.dest_qp(qpn).bth(|h| h.opcode = Opcode(code)).build();
            let Ok(frame) = Frame::parse(&wire, &options) else {
                continue;
            };
            judged += 1;
            let ours = rows.admit(&frame, icrc::verify_wire(&frame, &wire), false, None);
            match admit(&rx, &wire) {
                Verdict::Deliver(_) => assert_eq!(ours, Ok(()), "opcode {code:#04x}"),
                Verdict::Drop(d) if FRAME_ROWS.contains(&d.reqs) => {
                    assert_eq!(ours, Err(d), "opcode {code:#04x}");
                    same_row += 1;
                }
                v => assert!(ours.is_ok() || v.delivery().is_none(), "opcode {code:#04x}"),
            }
        }
    }
    assert!(
        judged > 256 && same_row > 32,
        "{judged} frames, {same_row} by one row"
    );
}
