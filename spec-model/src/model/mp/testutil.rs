//! Test helpers: MP packets built with the codec's builder.

use super::ArrivalInfo;
use crate::model::{Effect, Outcomes, PacketSpec};
use metaroce_codec::ext::{AtomicEthRepr, MpethRepr, RethRepr, SackethRepr};
use metaroce_codec::{Frame, Msn, Opcode, PacketBuilder, ParseOptions, Psn, RocePacket};

/// Bytes of one MP packet, kept so that a [`RocePacket`] can borrow them.
pub struct Wire(pub Vec<u8>);

impl Wire {
    /// The RoCE packet.
    pub fn roce(&self) -> RocePacket<'_> {
        Frame::parse(&self.0, &ParseOptions::default())
            .expect("frame")
            .roce
            .expect("roce")
    }
}

/// An MP request packet with MPETH flags F and L derived from offset and
/// length, AckReq on L, and the given payload.
pub fn req(
    op: Opcode,
    psn: u32,
    msn: u32,
    offset: u32,
    msg_len: u32,
    payload: &[u8],
) -> PacketBuilder {
    let last = offset as usize + payload.len() == msg_len as usize || op == Opcode::MP_READ_REQUEST;
    PacketBuilder::new(op)
        .psn(psn)
        .ack_req(last)
        .payload(payload.to_vec())
        .ext(|e| {
            e.mpeth = Some(MpethRepr {
                first: offset == 0,
                last,
                msn: Msn::new(msn),
                offset,
                msg_len,
                timestamp: 1000 + psn,
                ..MpethRepr::default()
            });
        })
}

/// An MP WRITE packet to `va` with R_Key `rkey`.
pub fn write(
    psn: u32,
    msn: u32,
    offset: u32,
    msg_len: u32,
    va: u64,
    rkey: u32,
    payload: &[u8],
) -> PacketBuilder {
    req(Opcode::MP_WRITE, psn, msn, offset, msg_len, payload).ext(|e| {
        e.reth = Some(RethRepr {
            va,
            rkey,
            dma_len: msg_len,
        });
    })
}

/// An MP READ request.
pub fn read(
    psn: u32,
    msn: u32,
    offset: u32,
    msg_len: u32,
    va: u64,
    rkey: u32,
    dma_len: u32,
) -> PacketBuilder {
    req(Opcode::MP_READ_REQUEST, psn, msn, offset, msg_len, &[]).ext(|e| {
        e.reth = Some(RethRepr { va, rkey, dma_len });
        if let Some(m) = &mut e.mpeth {
            m.first = true;
            m.last = true;
            m.retransmission = offset != 0;
        }
    })
}

/// An MP Fetch-Add.
pub fn fetch_add(psn: u32, msn: u32, va: u64, rkey: u32, add: u64) -> PacketBuilder {
    req(Opcode::MP_FETCH_ADD, psn, msn, 0, 8, &[]).ext(|e| {
        e.atomic_eth = Some(AtomicEthRepr {
            va,
            rkey,
            swap_add: add,
            compare: 0,
        });
        if let Some(m) = &mut e.mpeth {
            m.first = true;
            m.last = true;
        }
    })
}

/// An MP ACK.
pub fn ack(cum: u32, sack: SackethRepr) -> PacketBuilder {
    PacketBuilder::new(Opcode::MP_ACK)
        .psn(cum)
        .dest_qp(0x22)
        .ext(|e| e.sacketh = Some(sack))
}

/// Builds the bytes.
pub fn wire(b: PacketBuilder) -> Wire {
    Wire(b.build())
}

/// Arrival at `now` from entropy `ev`.
pub fn at(now: u64, ev: u16) -> ArrivalInfo {
    ArrivalInfo {
        udp_src_port: ev,
        now_ns: now,
        ..ArrivalInfo::default()
    }
}

/// The packets an outcome requires.
pub fn required_sends(o: &Outcomes) -> Vec<&PacketSpec> {
    o.required
        .iter()
        .filter_map(|c| match &c.value {
            Effect::Send(s) => Some(s),
            _ => None,
        })
        .collect()
}

/// The packets an outcome allows but does not require.
pub fn optional_sends(o: &Outcomes) -> Vec<&PacketSpec> {
    o.optional
        .iter()
        .filter_map(|c| match &c.value {
            Effect::Send(s) => Some(s),
            _ => None,
        })
        .collect()
}

/// The memory writes an outcome requires.
pub fn writes(o: &Outcomes) -> Vec<(u32, u64, Vec<u8>)> {
    o.required
        .iter()
        .filter_map(|c| match &c.value {
            Effect::Write { key, offset, bytes } => Some((*key, *offset, bytes.clone())),
            _ => None,
        })
        .collect()
}

/// A PSN.
pub fn psn(v: u32) -> Psn {
    Psn::new(v)
}
