//! No packet the codec can parse makes the responder panic (§9.1).

use super::*;
use metaroce_codec::ext::{AethRepr, DethRepr};

fn states() -> Vec<ResponderState> {
    let attrs = QpAttributes {
        pmtu: PMTU,
        ..QpAttributes::defaults()
    };
    let first = req(Opcode::RC_SEND_ONLY, 5);
    let frame = first.frame();
    let pkt = frame.roce.unwrap();
    let mut all = vec![rc(5, 2), rc(0xFF_FFFF, 0)];
    for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
        all.push(
            ResponderState::new(t, attrs.clone(), Features::ALL, Psn::new(5))
                .with_qp_state(QpState::Rts),
        );
        all.push(ResponderState::learned(
            t,
            QpAttributes::unknown(PMTU, 0xFFFF),
            Features::ALL,
            &pkt,
        ));
    }
    all
}

/// MR-ROB-5: every input has a defined outcome (and no panic, §9.1).
#[test]
fn every_opcode_with_odd_fields_has_an_outcome_mr_rob_5() {
    let lens = [0usize, 1, 8, PMTU as usize, PMTU as usize + 1];
    for st in states() {
        for op in 0..=255u8 {
            for &len in &lens {
                for (psn, va, dma_len) in [
                    (5u32, VA, 8u32),
                    (4, u64::MAX - 3, u32::MAX),
                    (0x80_0005, 0, 0),
                ] {
                    let b = req(Opcode(op), psn)
                        .ack_req(true)
                        .ext(|e| {
                            e.reth = Some(RethRepr {
                                va,
                                rkey: RKEY,
                                dma_len,
                            });
                            e.atomic_eth = Some(AtomicEthRepr {
                                va,
                                rkey: RKEY,
                                swap_add: 1,
                                compare: 2,
                            });
                            e.feth = Some(FethRepr {
                                reserved: 0,
                                selectivity_level: 1,
                                placement_type: 3,
                            });
                            e.ieth = Some(IethRepr { rkey: RKEY });
                            e.deth = Some(DethRepr {
                                qkey: 0x1111_1111,
                                reserved: 0,
                                src_qp: 3,
                            });
                            e.aeth = Some(AethRepr::default());
                        })
                        .payload(vec![0x5A; len]);
                    // The builder emits every header; parsing by opcode keeps
                    // only the ones the opcode names, as a receiver would.
                    let bytes = b.build();
                    let Ok(frame) = metaroce_codec::Frame::parse(&bytes, &Default::default())
                    else {
                        continue;
                    };
                    let Some(pkt) = frame.roce else { continue };
                    let all = st.branches(&pkt);
                    assert!(!all.is_empty(), "opcode {op:#04x}");
                    let (_, o) = st.on_request(&pkt);
                    assert_eq!(o.alternatives.len(), all.len() - 1);
                }
            }
        }
    }
}

#[test]
fn huge_read_into_unknown_memory_is_bounded() {
    let first = reth(req(Opcode::RC_READ_REQUEST, 0), 0, RKEY, 1 << 31);
    let frame = first.frame();
    let pkt = frame.roce.unwrap();
    let st = ResponderState::learned(
        QpType::Rc,
        QpAttributes::unknown(256, 0xFFFF),
        Features::ALL,
        &pkt,
    );
    let (next, o) = st.on_request(&pkt);
    assert_eq!(next.epsn, Psn::new(1 << 23), "MR-RSP-1: n = 2^31 / 256");
    assert_eq!(sent(&o).len(), ack::MAX_LISTED_READ_RESPONSES as usize);
}
