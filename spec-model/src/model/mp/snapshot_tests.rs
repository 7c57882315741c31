//! An insta snapshot of a scripted MP scenario: a requester and a responder
//! exchange a WRITE and a READ over four entropy values; one packet is lost
//! and recovered by reordering (K = 3); every event's outcomes are recorded.

use super::requester::tests::{build, cfg, send_next};
use super::requester::{MpRequester, SendWr, WrOp};
use super::responder::MpResponder;
use super::testutil::*;
use super::{Access, ArrivalInfo, MemoryRegion};
use crate::model::{Effect, Field, Outcomes, PacketSpec};
use std::fmt::Write as _;

fn f<T: std::fmt::Debug>(x: &Field<T>) -> String {
    match x {
        Field::Exact(v) => format!("{v:?}"),
        Field::OneOf(v) => format!("{v:x?}"),
        Field::Any => "*".into(),
    }
}

fn brief(spec: &PacketSpec) -> String {
    format!(
        "{} psn={} ev={} R={} off={} base={} bitmap={} syn={:?}",
        f(&spec.opcode),
        f(&spec.psn),
        f(&spec.udp_src_port),
        f(&spec.mpeth.retransmission),
        f(&spec.mpeth.offset),
        f(&spec.sacketh.sack_base_psn),
        match &spec.sacketh.sack_bitmap {
            Field::Exact(b) => format!("{b:#018x}"),
            _ => "*".into(),
        },
        spec.syndrome,
    )
}

fn show(log: &mut String, event: &str, o: &Outcomes) {
    let _ = writeln!(log, "{event}");
    for (kind, list) in [("must", &o.required), ("may ", &o.optional)] {
        for c in list {
            let what = match &c.value {
                Effect::Send(s) => brief(s),
                Effect::Write { key, offset, bytes } => {
                    format!("write key={key:#x} off={offset} len={}", bytes.len())
                }
                Effect::Complete(c) => format!("complete wr={} {:?}", c.wr, c.status),
                other => format!("{other:?}"),
            };
            let _ = writeln!(log, "  {kind} {what}  {:?}", c.reqs);
        }
    }
}

#[test]
fn scripted_scenario_snapshot() {
    let mut log = String::new();
    let rq = MpRequester::new(cfg(), 0x22, psn(0xFF_FFFE));
    let mut rs = MpResponder::new(cfg(), 0x11, psn(0xFF_FFFE)).with_region(MemoryRegion::known(
        7,
        0x1000,
        &[0x5A; 2048],
        Access::ALL,
    ));
    let (rq, o) = rq.post_send(SendWr {
        wr: 1,
        op: WrOp::Write {
            va: 0x1000,
            rkey: 7,
            len: 1024,
            imm: None,
        },
        fence: false,
        signaled: true,
    });
    show(&mut log, "post WRITE 1024", &o);
    let (rq, o) = rq.post_send(SendWr {
        wr: 2,
        op: WrOp::Read {
            va: 0x1000,
            rkey: 7,
            len: 512,
        },
        fence: false,
        signaled: true,
    });
    show(&mut log, "post READ 512", &o);
    let mut rq = rq;
    let mut wires = Vec::new();
    for t in 0..5u64 {
        let out = rq.next_packets(t);
        let (n, f, ev) = send_next(&rq, t);
        assert!(f.is_empty(), "{f:?}");
        let spec = out
            .optional
            .iter()
            .find_map(|c| match &c.value {
                Effect::Send(s) => Some(s.clone()),
                _ => None,
            })
            .unwrap();
        wires.push((wire(build(&rq, &spec, t as u32).udp_src_port(ev)), ev, t));
        rq = n;
    }
    // The first packet (PSN 0xFFFFFE) is lost; the others arrive.
    let mut acks = Vec::new();
    for (w, ev, t) in wires.iter().skip(1) {
        let (n, o) = rs.on_packet(
            &w.roce(),
            &ArrivalInfo {
                udp_src_port: *ev,
                now_ns: 100 + t,
                ..ArrivalInfo::default()
            },
        );
        show(
            &mut log,
            &format!("responder gets PSN {}", w.roce().bth.psn),
            &o,
        );
        acks.extend(o.required.iter().filter_map(|c| match &c.value {
            Effect::Send(s) if s.opcode == Field::Exact(metaroce_codec::Opcode::MP_ACK) => {
                Some(s.clone())
            }
            _ => None,
        }));
        rs = n;
    }
    // Feed the last required ACK back to the requester.
    let last = acks.last().unwrap().clone();
    let Field::Exact(cum) = last.psn else {
        panic!()
    };
    let Field::Exact(base) = last.sacketh.sack_base_psn else {
        panic!()
    };
    let Field::Exact(bitmap) = last.sacketh.sack_bitmap else {
        panic!()
    };
    let Field::Exact(ev) = last.sacketh.echoed_entropy else {
        panic!()
    };
    let Field::Exact(ts) = last.sacketh.echoed_timestamp else {
        panic!()
    };
    let a = wire(
        ack(
            cum.value(),
            metaroce_codec::ext::SackethRepr {
                syndrome: metaroce_codec::ext::Syndrome(0x1F),
                msn: metaroce_codec::Msn::new(0xFF_FFFF),
                sack_base_psn: base,
                sack_bitmap: bitmap,
                echoed_entropy: ev,
                echoed_timestamp: ts,
                ..Default::default()
            },
        )
        .dest_qp(0x22),
    );
    let (rq, o) = rq.on_ack(
        &a.roce(),
        &ArrivalInfo {
            now_ns: 200,
            ..ArrivalInfo::default()
        },
    );
    show(&mut log, "requester gets the ACK (K = 3 reached)", &o);
    let _ = writeln!(
        log,
        "retired: {:x?} cwnd: {} in flight: {}",
        rq.entropy.retired.keys().collect::<Vec<_>>(),
        rq.cc.cwnd,
        rq.bytes_in_flight()
    );
    let (_, f, ev) = send_next(&rq, 201);
    let _ = writeln!(log, "retransmission sent on {ev:#06x}, findings {f:?}");
    insta::assert_snapshot!(log);
}
