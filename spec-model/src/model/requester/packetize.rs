//! Packetization of one work request into request packets (SPEC.md §6.5,
//! §4.3, §6.15, §6.16, §6.19, §6.20, §6.21).

use super::attrs::{QpType, RequesterAttrs};
use super::psn::packet_count;
use super::wr::{WorkRequest, WrOp};
use crate::model::OutOfLine;
use crate::model::outcome::HeaderSpec;
use crate::model::{Field, PacketSpec};
use metaroce_codec::ext::{AtomicEthRepr, DethRepr, FethRepr, RethRepr};
use metaroce_codec::{Opcode, Psn};

/// One request packet exactly as the requester must send it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestPacket {
    /// Opcode.
    pub opcode: Opcode,
    /// PSN.
    pub psn: Psn,
    /// BTH DestQP.
    pub dest_qp: u32,
    /// BTH P_Key.
    pub pkey: u16,
    /// AckReq: `Exact(true)` where MR-PKT-6 demands it, `Exact(false)` on UC
    /// and UD, otherwise the requester's choice.
    pub ack_req: Field<bool>,
    /// Solicited event.
    pub se: bool,
    /// RETH, when the opcode carries one.
    pub reth: Option<RethRepr>,
    /// AtomicETH, when the opcode carries one.
    pub atomic_eth: Option<AtomicEthRepr>,
    /// Immediate data, when the opcode carries it.
    pub immdt: Option<u32>,
    /// IETH R_Key, when the opcode carries it.
    pub ieth: Option<u32>,
    /// FETH, when the opcode carries it.
    pub feth: Option<FethRepr>,
    /// DETH, when the opcode carries it.
    pub deth: Option<DethRepr>,
    /// Payload bytes.
    pub payload_len: u32,
    /// Offset of the payload in the message (the local gather list).
    pub msg_offset: u64,
}

impl RequestPacket {
    /// The packet as a [`PacketSpec`] for [`crate::model::Outcomes`].
    pub fn spec(&self) -> PacketSpec {
        fn exact<T>(v: Option<T>) -> Field<T> {
            v.map_or(Field::Any, Field::Exact)
        }
        PacketSpec {
            psn: Field::Exact(self.psn),
            dest_qp: Field::Exact(self.dest_qp),
            headers: OutOfLine::new(HeaderSpec {
                ack_req: self.ack_req.clone(),
                se: Field::Exact(self.se),
                pkey: Field::Exact(self.pkey),
                reth: exact(self.reth),
                atomic_eth: exact(self.atomic_eth),
                immdt: exact(self.immdt),
                ieth: exact(self.ieth),
                feth: exact(self.feth),
                deth: exact(self.deth),
                payload_len: Field::Exact(self.payload_len),
                dscp: Field::Any,
            }),
            ..PacketSpec::opcode(self.opcode)
        }
    }
}

/// PSNs a work request occupies: one per packet, and for a READ the
/// `max(1, ceil(L / PMTU))` PSNs of its responses (MR-PSN-3).
pub fn psn_span(wr: &WorkRequest, pmtu: u32) -> u32 {
    match wr.op {
        WrOp::Read { .. } => packet_count(wr.length, pmtu),
        op if op.is_send() || op.is_write() => packet_count(wr.length, pmtu),
        _ => 1,
    }
}

/// Position of a packet in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pos {
    First,
    Middle,
    Last,
    Only,
}

fn position(i: u32, n: u32) -> Pos {
    match (i, n) {
        (_, 1) => Pos::Only,
        (0, _) => Pos::First,
        (i, n) if i + 1 == n => Pos::Last,
        _ => Pos::Middle,
    }
}

/// RC opcode of a SEND or WRITE packet at `pos` (MR-PKT-1).
fn rc_data_opcode(op: WrOp, pos: Pos) -> Opcode {
    use Opcode as O;
    match (op, pos) {
        (WrOp::Send | WrOp::SendImm { .. } | WrOp::SendInv { .. }, Pos::First) => O::RC_SEND_FIRST,
        (WrOp::Send | WrOp::SendImm { .. } | WrOp::SendInv { .. }, Pos::Middle) => {
            O::RC_SEND_MIDDLE
        }
        (WrOp::Send, Pos::Last) => O::RC_SEND_LAST,
        (WrOp::SendImm { .. }, Pos::Last) => O::RC_SEND_LAST_IMM,
        (WrOp::SendInv { .. }, Pos::Last) => O::RC_SEND_LAST_INV,
        (WrOp::Send, Pos::Only) => O::RC_SEND_ONLY,
        (WrOp::SendImm { .. }, Pos::Only) => O::RC_SEND_ONLY_IMM,
        (WrOp::SendInv { .. }, Pos::Only) => O::RC_SEND_ONLY_INV,
        (_, Pos::First) => O::RC_WRITE_FIRST,
        (_, Pos::Middle) => O::RC_WRITE_MIDDLE,
        (WrOp::WriteImm { .. }, Pos::Last) => O::RC_WRITE_LAST_IMM,
        (_, Pos::Last) => O::RC_WRITE_LAST,
        (WrOp::WriteImm { .. }, Pos::Only) => O::RC_WRITE_ONLY_IMM,
        (_, Pos::Only) => O::RC_WRITE_ONLY,
    }
}

/// The packets of `wr` starting at `first_psn`, in PSN order.
///
/// SEND and WRITE messages split as §6.5 states (MR-PKT-1); RETH only in
/// WRITE First/Only and READ (MR-PKT-3) with the total length; AckReq in
/// every last/only SEND and WRITE packet and in every atomic, FLUSH and ATOMIC
/// WRITE (MR-PKT-6); SE only in the last packet of a SEND or WRITE with
/// Immediate that asked for it (MR-BTH-7). UC packets carry AckReq 0
/// (MR-UC-1); UD packets carry DETH (MR-UD-1), AckReq either value (MR-UD-10). Operations the
/// QP type cannot carry give no packets (the caller rejects them first).
pub fn packetize(wr: &WorkRequest, attrs: &RequesterAttrs, first_psn: Psn) -> Vec<RequestPacket> {
    let pmtu = attrs.pmtu.max(1);
    let base = RequestPacket {
        opcode: Opcode::RC_SEND_ONLY,
        psn: first_psn,
        dest_qp: attrs.dest_qpn,
        pkey: attrs.p_key, // "MR-BTH-4"
        ack_req: Field::Exact(true),
        se: false,
        reth: None,
        atomic_eth: None,
        immdt: None,
        ieth: None,
        feth: None,
        deth: None,
        payload_len: 0,
        msg_offset: 0,
    };
    let reth = |va: u64, rkey: u32, len: u64| RethRepr {
        va,
        rkey,
        dma_len: u32::try_from(len).unwrap_or(u32::MAX),
    };
    match (attrs.qp_type, wr.op) {
        (QpType::Ud, WrOp::Send | WrOp::SendImm { .. }) => {
            let Some(dest) = wr.ud else { return Vec::new() };
            let imm = match wr.op {
                WrOp::SendImm { imm } => Some(imm),
                _ => None,
            };
            vec![RequestPacket {
                opcode: if imm.is_some() {
                    Opcode::UD_SEND_ONLY_IMM
                } else {
                    Opcode::UD_SEND_ONLY
                },
                dest_qp: dest.qpn,
                ack_req: Field::Any, // "MR-UD-10" is a SHOULD: either value passes
                se: wr.solicited,
                deth: Some(DethRepr {
                    qkey: dest.qkey,
                    reserved: 0,
                    src_qp: attrs.own_qpn,
                }),
                immdt: imm,
                payload_len: u32::try_from(wr.length).unwrap_or(u32::MAX),
                ..base
            }]
        }
        (QpType::Ud, _) => Vec::new(),
        (QpType::Uc, op) if !(op.is_send() || op.is_write()) => Vec::new(),
        (QpType::Uc, WrOp::SendInv { .. }) => Vec::new(),
        (qp_type, op) if op.is_send() || op.is_write() => {
            let n = packet_count(wr.length, pmtu);
            (0..n)
                .map(|i| {
                    let pos = position(i, n);
                    let last = matches!(pos, Pos::Last | Pos::Only);
                    let offset = u64::from(i) * u64::from(pmtu);
                    let len = (wr.length - offset.min(wr.length)).min(u64::from(pmtu));
                    let mut opcode = rc_data_opcode(op, pos);
                    if qp_type == QpType::Uc {
                        opcode = Opcode(opcode.0 | 0x20);
                    }
                    let ack_req = match (qp_type, last) {
                        (QpType::Uc, _) => Field::Any,   // "MR-UC-4" is a SHOULD
                        (_, true) => Field::Exact(true), // "MR-PKT-6"
                        (_, false) => Field::Any,
                    };
                    let (va, rkey) = match op {
                        WrOp::Write { va, rkey } | WrOp::WriteImm { va, rkey, .. } => {
                            (Some(va), rkey)
                        }
                        _ => (None, 0),
                    };
                    RequestPacket {
                        opcode,
                        psn: first_psn.add(i),
                        ack_req,
                        // "MR-BTH-7": SE only in the last packet of a SEND or WRITE with Immediate.
                        se: last
                            && wr.solicited
                            && (op.is_send() || matches!(op, WrOp::WriteImm { .. })),
                        reth: match (va, pos) {
                            (Some(va), Pos::First | Pos::Only) => Some(reth(va, rkey, wr.length)), // "MR-PKT-3"
                            _ => None,
                        },
                        immdt: match op {
                            WrOp::SendImm { imm } | WrOp::WriteImm { imm, .. } if last => Some(imm),
                            _ => None,
                        },
                        ieth: match op {
                            WrOp::SendInv { rkey } if last => Some(rkey),
                            _ => None,
                        },
                        payload_len: u32::try_from(len).unwrap_or(u32::MAX),
                        msg_offset: offset,
                        ..base.clone()
                    }
                })
                .collect()
        }
        (_, WrOp::Read { va, rkey }) => vec![RequestPacket {
            opcode: Opcode::RC_READ_REQUEST,
            ack_req: Field::Any,
            reth: Some(reth(va, rkey, wr.length)), // "MR-READ-1"
            ..base
        }],
        (
            _,
            WrOp::CmpSwap {
                va,
                rkey,
                compare,
                swap,
            },
        ) => vec![RequestPacket {
            opcode: Opcode::RC_CMP_SWAP,
            atomic_eth: Some(AtomicEthRepr {
                va,
                rkey,
                swap_add: swap,
                compare,
            }),
            ..base
        }],
        (_, WrOp::FetchAdd { va, rkey, add }) => vec![RequestPacket {
            opcode: Opcode::RC_FETCH_ADD,
            atomic_eth: Some(AtomicEthRepr {
                va,
                rkey,
                swap_add: add,
                compare: 0,
            }),
            ..base
        }],
        (
            _,
            WrOp::Flush {
                va,
                rkey,
                selectivity,
                placement,
            },
        ) => vec![RequestPacket {
            opcode: Opcode::RC_FLUSH,
            feth: Some(FethRepr {
                reserved: 0,
                selectivity_level: selectivity,
                placement_type: placement,
            }),
            reth: Some(reth(va, rkey, wr.length)),
            ..base
        }],
        // "MR-FLUSH-7": one 0x1D packet, RETH length 8, 8 bytes of payload.
        (_, WrOp::AtomicWrite { va, rkey }) => vec![RequestPacket {
            opcode: Opcode::RC_ATOMIC_WRITE,
            reth: Some(reth(va, rkey, 8)),
            payload_len: 8,
            ..base
        }],
        // Unreachable: every SEND and WRITE took the arm above.
        (_, _) => Vec::new(),
    }
}

/// The READ request that re-requests a READ from its first missing response:
/// PSN `first + received`, VA advanced and DMA length reduced by the bytes
/// already received (MR-REQ-5).
pub fn reread_packet(
    wr: &WorkRequest,
    attrs: &RequesterAttrs,
    first_psn: Psn,
    received: u32,
) -> Option<RequestPacket> {
    let WrOp::Read { va, rkey } = wr.op else {
        return None;
    };
    let done = (u64::from(received) * u64::from(attrs.pmtu)).min(wr.length);
    let mut packet = packetize(wr, attrs, first_psn).pop()?;
    packet.psn = first_psn.add(received);
    packet.reth = Some(RethRepr {
        va: va.wrapping_add(done),
        rkey,
        dma_len: u32::try_from(wr.length - done).unwrap_or(u32::MAX),
    });
    Some(packet)
}
