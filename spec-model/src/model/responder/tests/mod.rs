//! Tests of the responder, by concern. Each test names the requirements it checks.

mod checks;
mod conversation;
mod dup;
mod ops;
mod robust;
mod sequence;
mod ud_uc;
mod unknown;

use super::*;
use crate::model::{Effect, Field, Outcomes, PacketSpec, SyndromeSpec, WcStatus};
use core::fmt::Write as _;
use metaroce_codec::ext::{AtomicEthRepr, FethRepr, IethRepr, ImmDtRepr, RethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, PacketBuilder, Psn};

pub(super) const RKEY: u32 = 0x0A0B_0C0D;
pub(super) const VA: u64 = 0x1_0000;
pub(super) const PMTU: u32 = 256;

/// An RC responder in RTS: PMTU 256, every access, 4 responder resources, a
/// 4 KiB region at VA holding 0, 1, 2, …, and `recvs` receive WRs of 4 KiB.
pub(super) fn rc(rq_psn: u32, recvs: u64) -> ResponderState {
    let attrs = QpAttributes {
        pmtu: PMTU,
        max_dest_rd_atomic: Knowledge::Known(4),
        ..QpAttributes::defaults()
    };
    let contents: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
    let mut st = ResponderState::new(QpType::Rc, attrs, Features::ALL, Psn::new(rq_psn))
        .with_qp_state(QpState::Rts)
        .with_region(MemoryRegion::with_contents(
            RKEY,
            1,
            VA,
            AccessFlags::ALL,
            contents,
        ));
    for id in 0..recvs {
        st = st.post_recv(RecvWr::new(id, 4096));
    }
    st
}

/// A request of `opcode` with PSN `psn` to the responder's QP.
pub(super) fn req(opcode: Opcode, psn: u32) -> PacketBuilder {
    PacketBuilder::new(opcode).dest_qp(0x11).psn(psn)
}

pub(super) fn reth(b: PacketBuilder, va: u64, rkey: u32, dma_len: u32) -> PacketBuilder {
    b.ext(|e| e.reth = Some(RethRepr { va, rkey, dma_len }))
}

pub(super) fn atomic(b: PacketBuilder, va: u64, swap_add: u64, compare: u64) -> PacketBuilder {
    b.ext(|e| {
        e.atomic_eth = Some(AtomicEthRepr {
            va,
            rkey: RKEY,
            swap_add,
            compare,
        });
    })
}

pub(super) fn imm(b: PacketBuilder, value: u32) -> PacketBuilder {
    b.ext(|e| e.immdt = Some(ImmDtRepr { value }))
}

pub(super) fn ieth(b: PacketBuilder, rkey: u32) -> PacketBuilder {
    b.ext(|e| e.ieth = Some(IethRepr { rkey }))
}

pub(super) fn feth(b: PacketBuilder, selectivity_level: u8, placement_type: u8) -> PacketBuilder {
    b.ext(|e| {
        e.feth = Some(FethRepr {
            reserved: 0,
            selectivity_level,
            placement_type,
        });
    })
}

/// Runs `b` through `on_request`.
pub(super) fn run(st: &ResponderState, b: &PacketBuilder) -> (ResponderState, Outcomes) {
    let frame = b.frame();
    let pkt = frame.roce.expect("builder makes RoCE frames");
    st.on_request(&pkt)
}

/// All branches of `b`.
pub(super) fn branches(st: &ResponderState, b: &PacketBuilder) -> Vec<Branch> {
    let frame = b.frame();
    st.branches(&frame.roce.expect("builder makes RoCE frames"))
}

/// The packets `o` requires.
pub(super) fn sent(o: &Outcomes) -> Vec<&PacketSpec> {
    o.required
        .iter()
        .filter_map(|c| match &c.value {
            Effect::Send(p) => Some(p),
            _ => None,
        })
        .collect()
}

/// The single packet `o` requires.
pub(super) fn one_sent(o: &Outcomes) -> &PacketSpec {
    let s = sent(o);
    assert_eq!(s.len(), 1, "exactly one packet: {o:#?}");
    s[0]
}

/// `o` requires a NAK with `syndrome` and `psn` and moves the QP to ERR.
pub(super) fn assert_fatal(st: &ResponderState, o: &Outcomes, syndrome: u8, psn: u32, req: &str) {
    let p = one_sent(o);
    assert_eq!(
        p.syndrome,
        Some(SyndromeSpec::Exact(Syndrome(syndrome))),
        "{req}"
    );
    assert_eq!(
        p.psn,
        Field::Exact(Psn::new(psn)),
        "{req}: NAK PSN (MR-NAK-3)"
    );
    assert!(
        o.required.iter().any(|c| c.value == Effect::EnterError),
        "{req}: MR-RSP-11"
    );
    assert!(
        o.required.iter().any(|c| c.reqs.contains(&req)),
        "{req} cited: {o:#?}"
    );
    assert_eq!(st.qp_state, QpState::Err, "{req}: MR-RSP-11");
}

/// `o` is a drop citing `req`.
pub(super) fn assert_drop(o: &Outcomes, req: &str) {
    assert_eq!(o.required.len(), 1, "{req}: {o:#?}");
    assert!(
        matches!(o.required[0].value, Effect::Drop { .. }),
        "{req}: {o:#?}"
    );
    assert!(o.required[0].reqs.contains(&req), "{req} cited: {o:#?}");
}

/// `o` requires an ACK with `psn` and `msn`.
pub(super) fn assert_ack(o: &Outcomes, psn: u32, msn: u32) {
    let p = sent(o)
        .into_iter()
        .find(|p| p.opcode == Field::Exact(Opcode::RC_ACK))
        .expect("an ACK");
    assert_eq!(p.psn, Field::Exact(Psn::new(psn)), "MR-ACK-2 PSN");
    assert_eq!(p.msn, Field::Exact(Msn::new(msn)), "MR-ACK-2 MSN");
    assert!(
        matches!(p.syndrome, Some(SyndromeSpec::Exact(s)) if s.0 <= 0x1F),
        "MR-ACK-2"
    );
}

fn render_field<T: core::fmt::Debug>(f: &Field<T>) -> String {
    match f {
        Field::Any => "*".into(),
        Field::Exact(v) => format!("{v:?}"),
        Field::OneOf(vs) => format!("{vs:?}"),
    }
}

fn render_effect(e: &Effect) -> String {
    match e {
        Effect::Send(p) => {
            let op = match &p.opcode {
                Field::Exact(op) => op.name().unwrap_or("?").to_string(),
                other => render_field(other),
            };
            let mut s = format!("send {op} psn={}", render_field(&p.psn));
            if let Some(syn) = p.syndrome {
                let _ = write!(s, " syn={syn:?} msn={}", render_field(&p.msn));
            }
            match &p.payload {
                Field::Exact(b) if !b.is_empty() => {
                    let _ = write!(s, " payload={}B[{:02x}..]", b.len(), b[0]);
                }
                Field::Any => s.push_str(" payload=*"),
                _ => {}
            }
            if p.atomic_orig != Field::Any {
                let _ = write!(s, " orig={}", render_field(&p.atomic_orig));
            }
            s
        }
        Effect::Write { key, offset, bytes } => {
            format!("write key={key:#x} offset={offset} len={}", bytes.len())
        }
        Effect::Complete(c) => format!(
            "complete wr={} status={} len={} imm={}",
            c.wr,
            render_field(&c.status),
            render_field(&c.byte_len),
            render_field(&c.imm)
        ),
        other => format!("{other:?}"),
    }
}

/// A compact, stable rendering of an outcome set, for snapshots.
pub(super) fn render(o: &Outcomes, indent: &str) -> String {
    let mut out = String::new();
    for c in &o.required {
        let _ = writeln!(out, "{indent}must {} {:?}", render_effect(&c.value), c.reqs);
    }
    for c in &o.optional {
        let _ = writeln!(out, "{indent}may  {} {:?}", render_effect(&c.value), c.reqs);
    }
    if o.required.is_empty() && o.optional.is_empty() {
        let _ = writeln!(out, "{indent}(nothing)");
    }
    for alt in &o.alternatives {
        let _ = writeln!(out, "{indent}or:");
        out.push_str(&render(alt, &format!("{indent}  ")));
    }
    out
}

#[test]
fn entering_rtr_sets_expected_psn_and_msn() {
    // MR-QP-9: expected PSN = rq_psn, MSN 0, for any rq_psn (MR-PSN-5).
    for rq_psn in [0u32, 7, 0x7F_FFFF, 0xFF_FFFF] {
        let st = ResponderState::new(
            QpType::Rc,
            QpAttributes::defaults(),
            Features::ALL,
            Psn::new(rq_psn),
        );
        assert_eq!(st.epsn, Psn::new(rq_psn), "MR-QP-9");
        assert_eq!(st.msn, Knowledge::Known(Msn::new(0)), "MR-QP-9");
        assert_eq!(st.qp_state, QpState::Rtr);
        // The first SEND with the expected PSN is executed and acknowledged
        // with that PSN and MSN 1.
        let st = rc(rq_psn, 1);
        let (_, o) = run(&st, &req(Opcode::RC_SEND_ONLY, rq_psn).ack_req(true));
        assert_ack(&o, rq_psn, 1);
    }
}
