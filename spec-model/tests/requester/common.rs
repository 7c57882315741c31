//! Packets and outcome helpers shared by the requester tests.

use metaroce_codec::ext::{AethRepr, AtomicAckEthRepr, ExtHeaders, Syndrome};
use metaroce_codec::{BthRepr, Msn, Opcode, Psn, RocePacket};
use metaroce_spec::model::requester::{RequestPacket, RequesterAttrs, RequesterState};
use metaroce_spec::model::{Effect, Field, Outcomes, PacketSpec, WcStatus};

/// A packet that owns its payload.
#[derive(Clone, Debug)]
pub struct Owned {
    pub bth: BthRepr,
    pub ext: ExtHeaders,
    pub payload: Vec<u8>,
}

impl Owned {
    pub fn pkt(&self) -> RocePacket<'_> {
        RocePacket {
            bth: self.bth,
            ext: self.ext,
            payload: &self.payload,
            pad: &[],
            icrc: [0; 4],
        }
    }
}

pub fn bare(opcode: Opcode, psn: u32) -> Owned {
    Owned {
        bth: BthRepr {
            opcode,
            pkey: 0xFFFF,
            dest_qp: 0x12,
            psn: Psn::new(psn),
            ..BthRepr::default()
        },
        ext: ExtHeaders::default(),
        payload: Vec::new(),
    }
}

/// An Acknowledge with `syndrome`.
pub fn aeth_pkt(opcode: Opcode, psn: u32, syndrome: u8) -> Owned {
    let mut p = bare(opcode, psn);
    p.ext.aeth = Some(AethRepr {
        syndrome: Syndrome(syndrome),
        msn: Msn::new(0),
    });
    p
}

pub fn ack(psn: u32) -> Owned {
    aeth_pkt(Opcode::RC_ACK, psn, 0x1F)
}

pub fn ack_msn(psn: u32, syndrome: u8, msn: u32) -> Owned {
    let mut p = aeth_pkt(Opcode::RC_ACK, psn, syndrome);
    p.ext.aeth = Some(AethRepr {
        syndrome: Syndrome(syndrome),
        msn: Msn::new(msn),
    });
    p
}

pub fn read_resp(opcode: Opcode, psn: u32, len: usize) -> Owned {
    let mut p = if opcode == Opcode::RC_READ_RESPONSE_MIDDLE {
        bare(opcode, psn)
    } else {
        aeth_pkt(opcode, psn, 0x1F)
    };
    p.payload = (0..len).map(|i| (i % 251) as u8).collect();
    p
}

pub fn atomic_ack(psn: u32, orig: u64) -> Owned {
    let mut p = aeth_pkt(Opcode::RC_ATOMIC_ACK, psn, 0x1F);
    p.ext.atomic_ack_eth = Some(AtomicAckEthRepr { orig });
    p
}

/// The request packet a conforming requester sends for `spec` (AckReq set
/// where required), with a payload pattern of the PSN.
pub fn from_request(r: &RequestPacket) -> Owned {
    let mut p = bare(r.opcode, r.psn.value());
    p.bth.dest_qp = r.dest_qp;
    p.bth.pkey = r.pkey;
    p.bth.se = r.se;
    p.bth.ack_req = r.ack_req == Field::Exact(true);
    p.ext.reth = r.reth;
    p.ext.atomic_eth = r.atomic_eth;
    p.ext.immdt = r
        .immdt
        .map(|value| metaroce_codec::ext::ImmDtRepr { value });
    p.ext.ieth = r.ieth.map(|rkey| metaroce_codec::ext::IethRepr { rkey });
    p.ext.feth = r.feth;
    p.ext.deth = r.deth;
    p.payload = (0..r.payload_len)
        .map(|i| (i as u8).wrapping_add(r.msg_offset as u8))
        .collect();
    p
}

/// The packets an outcome set requires, in order.
pub fn sends(out: &Outcomes) -> Vec<PacketSpec> {
    out.required
        .iter()
        .filter_map(|c| match &c.value {
            Effect::Send(p) => Some(p.clone()),
            _ => None,
        })
        .collect()
}

/// (opcode, PSN) of the packets an outcome set requires.
pub fn sent(out: &Outcomes) -> Vec<(u8, u32)> {
    sends(out)
        .iter()
        .map(|p| match (&p.opcode, &p.psn) {
            (Field::Exact(o), Field::Exact(s)) => (o.0, s.value()),
            _ => panic!("request packets have exact opcodes and PSNs"),
        })
        .collect()
}

/// (work request, status) of the completions an outcome set requires.
pub fn completions(out: &Outcomes) -> Vec<(u64, WcStatus)> {
    out.required
        .iter()
        .filter_map(|c| match &c.value {
            Effect::Complete(cs) => match cs.status {
                Field::Exact(s) => Some((cs.wr, s)),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

pub fn enters_error(out: &Outcomes) -> bool {
    out.required.iter().any(|c| c.value == Effect::EnterError)
}

pub fn dropped(out: &Outcomes, id: &str) -> bool {
    out.required
        .iter()
        .any(|c| matches!(c.value, Effect::Drop { .. }) && c.reqs.contains(&id))
}

pub fn rc(pmtu: u32) -> RequesterAttrs {
    RequesterAttrs {
        pmtu,
        ..RequesterAttrs::default()
    }
}

pub fn state(attrs: RequesterAttrs) -> RequesterState {
    RequesterState::new(attrs)
}

/// Feeds a response built by `make` at `now`.
pub fn respond(s: RequesterState, p: &Owned, now: u64) -> (RequesterState, Outcomes) {
    s.on_response(&p.pkt(), now)
}
