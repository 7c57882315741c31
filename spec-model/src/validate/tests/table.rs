//! Every opcode of the codec's table, built as SPEC.md wants it, gives no
//! MUST finding: the validators do not cry wolf.

use super::{ctx, data, judge, mpeth, with_pmtu};
use crate::{Context, Severity};
use metaroce_codec::ext::RethRepr;
use metaroce_codec::opcode::{PayloadRule, Position};
use metaroce_codec::{Dialect, Opcode, PacketBuilder, ServiceClass};

/// `PacketBuilder::new(op)` defaults, a payload that fits the opcode's place
/// in its message and the PMTU, and only the fields SPEC.md requires that
/// the defaults leave unset: AckReq where MR-PKT-6 and MR-MPH-9 ask for it,
/// RETH DMA lengths (MR-PKT-3, MR-FLUSH-7, MR-MPH-11, MR-MPH-12), MPETH flags
/// and lengths (MR-MPH-2, MR-MPH-13) and SACK bitmap bit 0 (MR-MPP-13).
fn conforming(op: Opcode, pmtu: usize) -> PacketBuilder {
    let layout = op
        .layout(Dialect::MetaRoce)
        .expect("an opcode of the table");
    let len = match (layout.payload, layout.position) {
        (PayloadRule::None, _) => 0,
        _ if op == Opcode::RC_ATOMIC_WRITE => 8,
        (_, Position::First | Position::Middle) => pmtu,
        _ => 13,
    };
    let b = PacketBuilder::new(op).payload(data(len));
    let rc_ack_req = op.class() == ServiceClass::Rc
        && matches!(
            op.operation(),
            0x02..=0x05 | 0x08..=0x0B | 0x13 | 0x14 | 0x16 | 0x17 | 0x1C | 0x1D
        );
    let b = b.ack_req(rc_ack_req);
    let reth_len = match op.operation() {
        _ if !matches!(op.class(), ServiceClass::Rc | ServiceClass::Uc) => 13,
        0x06 => 10 * pmtu as u32,
        0x1D => 8,
        _ => len as u32,
    };
    let b = b.ext(|e| {
        if let Some(reth) = &mut e.reth {
            *reth = RethRepr {
                va: 0x1000,
                rkey: 0x77,
                dma_len: reth_len,
            };
        }
        if let Some(feth) = &mut e.feth {
            feth.placement_type = 1;
        }
    });
    if !op.is_mp() {
        return b;
    }
    match op {
        Opcode::MP_ACK => b,
        Opcode::MP_ATOMIC_ACK => b.ext(|e| {
            if let Some(s) = &mut e.sacketh {
                s.sack_bitmap = 1 << 63;
            }
        }),
        Opcode::MP_PROBE => b.ack_req(true),
        Opcode::MP_CMP_SWAP | Opcode::MP_FETCH_ADD => {
            b.ack_req(true).ext(|e| e.mpeth = Some(mpeth(0, 8, true)))
        }
        Opcode::MP_READ_RESPONSE => b.ext(|e| e.mpeth = Some(mpeth(0, 13, true))),
        _ => b.ack_req(true).ext(|e| e.mpeth = Some(mpeth(0, 13, true))),
    }
}

fn no_must_for_every_opcode(ctx: &Context, pmtu: usize, ipv6: bool) {
    let mut judged = 0;
    for op in (0..=255u8).map(Opcode) {
        if op.layout(Dialect::MetaRoce).is_none() {
            continue;
        }
        let mut b = conforming(op, pmtu);
        if ipv6 {
            b = b.ipv6(
                "2001:db8::1".parse().unwrap(),
                "2001:db8::2".parse().unwrap(),
            );
        }
        let findings = judge(&b, ctx);
        let supported = !matches!(op.class(), ServiceClass::Rd | ServiceClass::Xrc);
        for f in &findings {
            assert!(
                f.severity == Severity::Info && !supported,
                "{op}: unexpected finding {f:?}"
            );
        }
        judged += 1;
    }
    assert!(judged > 90, "only {judged} opcodes in the table");
}

#[test]
fn every_opcode_of_the_table_built_conforming_gives_no_must_finding() {
    no_must_for_every_opcode(&ctx(), 256, false);
    no_must_for_every_opcode(&with_pmtu(1024), 1024, false);
    no_must_for_every_opcode(&with_pmtu(4096), 4096, true);
}

#[test]
fn rd_and_xrc_opcodes_get_an_informational_note_only() {
    // MR-OPC-5: RD and XRC are "parsed, not supported", not reserved.
    for op in [0x44u8, 0xA4] {
        let findings = judge(&conforming(Opcode(op), 256), &ctx());
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].id, "MR-OPC-5");
        assert_eq!(findings[0].severity, Severity::Info);
    }
}

#[test]
fn no_panic_on_any_single_byte_change_of_any_opcode() {
    // Every byte of every table opcode's frame set to 0x00, 0xFF and
    // flipped, with PMTU unknown, known, and a trimming DSCP configured.
    let contexts = [
        ctx(),
        with_pmtu(256),
        Context {
            trim_dscp: Some(0),
            pkey: Some(0xFFFF),
            at_sender: true,
            ..Context::default()
        },
    ];
    for op in (0..=255u8).map(Opcode) {
        if op.layout(Dialect::MetaRoce).is_none() {
            continue;
        }
        let bytes = conforming(op, 256).build();
        for i in 0..bytes.len() {
            for value in [0x00, 0xFF, bytes[i] ^ 0x55] {
                let mut changed = bytes.clone();
                changed[i] = value;
                for c in &contexts {
                    if let Ok(frame) = metaroce_codec::Frame::parse(&changed, &c.parse_options()) {
                        let _ =
                            crate::validate_frame(&frame, metaroce_codec::icrc::verify(&frame), c);
                    }
                }
            }
        }
    }
}
