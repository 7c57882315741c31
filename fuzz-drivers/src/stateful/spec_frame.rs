//! Frames that satisfy a model's [`PacketSpec`]: what a conforming sender
//! would put on the wire for a packet the model says must or may be sent.
//! Constrained fields take their value (`Exact`) or one of their values
//! (`OneOf`, chosen from the input); free fields (`Any`) come from the input.
//! The stateful model target uses these to let the model talk to itself
//! (requester to a peer responder and back) so the conversation goes deep.

use super::frame::Endpoints;
use super::input::Input;
use metaroce_codec::ext::{IethRepr, ImmDtRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, PacketBuilder, Psn};
use metaroce_spec::model::{Field, PacketSpec, SyndromeSpec};

/// The value of `field`: its own, one of its own, or `any` from the input.
fn choose<T: Clone>(
    field: &Field<T>,
    inp: &mut Input<'_>,
    any: impl FnOnce(&mut Input<'_>) -> T,
) -> Option<T> {
    match field {
        Field::Exact(v) => Some(v.clone()),
        Field::OneOf(vs) if vs.is_empty() => None,
        Field::OneOf(vs) => Some(vs[inp.pick(vs.len())].clone()),
        Field::Any => Some(any(inp)),
    }
}

/// A syndrome the constraint allows.
fn syndrome(spec: SyndromeSpec) -> Syndrome {
    match spec {
        SyndromeSpec::AnyAck => Syndrome::ACK_UNLIMITED,
        SyndromeSpec::RnrNak { timer } => Syndrome(0x20 | (timer & 0x1F)),
        SyndromeSpec::Exact(s) => s,
        SyndromeSpec::AckCredits { code } => Syndrome(code & 0x1F),
        SyndromeSpec::AnyRnrNak => Syndrome(0x20),
    }
}

/// The frame a conforming sender sends for `spec`, from `ep`; `None` when
/// the spec leaves the opcode free or allows no value for a field.
pub fn build(spec: &PacketSpec, inp: &mut Input<'_>, ep: &Endpoints) -> Option<Vec<u8>> {
    let opcode: Opcode = choose(&spec.opcode, inp, |i| Opcode(i.u8()))?;
    let psn: Psn = choose(&spec.psn, inp, |i| Psn::new(i.u32()))?;
    let dest_qp: u32 = choose(&spec.dest_qp, inp, |i| i.u32() & 0xFF_FFFF)?;
    let h = &spec.headers;
    let ack_req = choose(&h.ack_req, inp, |i| i.bool())?;
    let se = choose(&h.se, inp, |i| i.bool())?;
    let pkey = choose(&h.pkey, inp, |_| 0xFFFF)?;
    let port = choose(&spec.udp_src_port, inp, |i| 0xC000 | (i.u16() & 0x3FFF))?;
    let payload: Vec<u8> = match &spec.payload {
        Field::Any => {
            let n = choose(&h.payload_len, inp, |_| 0)?;
            let seed = inp.u8();
            (0..n.min(1 << 16))
                .map(|i| seed.wrapping_add(i as u8))
                .collect()
        }
        other => choose(other, inp, |_| Vec::new())?,
    };
    let mut b = PacketBuilder::new(opcode)
        .macs(ep.src_mac, ep.dst_mac)
        .ipv4(ep.src_ip, ep.dst_ip)
        .udp_src_port(port)
        .dest_qp(dest_qp)
        .psn(psn.value())
        .ack_req(ack_req)
        .bth(|bth| {
            bth.se = se;
            bth.pkey = pkey;
        });
    let msn: Msn = choose(&spec.msn, inp, |i| Msn::new(i.u32()))?;
    let syn = spec.syndrome.map(syndrome);
    let e = b.ext_mut();
    if let Some(a) = &mut e.aeth {
        a.msn = msn;
        if let Some(s) = syn {
            a.syndrome = s;
        }
    }
    if let Some(a) = &mut e.atomic_ack_eth {
        a.orig = choose(&spec.atomic_orig, inp, |i| i.u64())?;
    }
    if e.reth.is_some() {
        e.reth = Some(choose(&h.reth, inp, |_| e.reth.unwrap_or_default())?);
    }
    if e.atomic_eth.is_some() {
        e.atomic_eth = Some(choose(&h.atomic_eth, inp, |_| {
            e.atomic_eth.unwrap_or_default()
        })?);
    }
    if e.immdt.is_some() {
        e.immdt = Some(ImmDtRepr {
            value: choose(&h.immdt, inp, |i| i.u32())?,
        });
    }
    if e.ieth.is_some() {
        e.ieth = Some(IethRepr {
            rkey: choose(&h.ieth, inp, |i| i.u32())?,
        });
    }
    if e.feth.is_some() {
        e.feth = Some(choose(&h.feth, inp, |_| e.feth.unwrap_or_default())?);
    }
    if e.deth.is_some() {
        e.deth = Some(choose(&h.deth, inp, |_| e.deth.unwrap_or_default())?);
    }
    if let Some(m) = &mut e.mpeth {
        let s = &spec.mpeth;
        m.first = choose(&s.first, inp, |i| i.bool())?;
        m.last = choose(&s.last, inp, |i| i.bool())?;
        m.retransmission = choose(&s.retransmission, inp, |i| i.bool())?;
        m.msn = choose(&s.msn, inp, |i| Msn::new(i.u32()))?;
        m.offset = choose(&s.offset, inp, |_| 0)?;
        m.msg_len = choose(&s.msg_len, inp, |_| payload.len() as u32)?;
        m.timestamp = choose(&s.timestamp, inp, |i| i.u32())?;
        if let Some(r) = &mut e.reth {
            r.dma_len = choose(&s.dma_len, inp, |_| r.dma_len)?;
        }
    }
    if let Some(k) = &mut e.sacketh {
        let s = &spec.sacketh;
        k.msn = msn;
        if let Some(syn) = syn {
            k.syndrome = syn;
        }
        k.ecn_ce = choose(&s.ecn_ce, inp, |_| false)?;
        k.retransmission = choose(&s.retransmission, inp, |_| false)?;
        k.trimmed = choose(&s.trimmed, inp, |_| false)?;
        k.sack_base_psn = choose(&s.sack_base_psn, inp, |_| psn)?;
        k.sack_bitmap = choose(&s.sack_bitmap, inp, |_| 0)?;
        k.echoed_entropy = choose(&s.echoed_entropy, inp, |i| i.u16())?;
        k.echoed_timestamp = choose(&s.echoed_timestamp, inp, |i| i.u32())?;
    }
    Some(b.payload(payload).build())
}
