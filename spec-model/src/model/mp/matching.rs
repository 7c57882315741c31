//! Whether an observed packet satisfies a [`PacketSpec`].

use crate::model::PacketSpec;
use metaroce_codec::RocePacket;

/// Whether `packet`, sent from UDP source port `udp_src_port`, satisfies every
/// constraint of `spec`. A constraint on a header the packet lacks fails
/// unless it is `Any`.
pub fn spec_allows(spec: &PacketSpec, packet: &RocePacket<'_>, udp_src_port: u16) -> bool {
    use crate::model::Field;
    fn opt<T: PartialEq>(f: &Field<T>, v: Option<T>) -> bool {
        match v {
            Some(v) => f.allows(&v),
            None => *f == Field::Any,
        }
    }
    let bth = &packet.bth;
    let ext = &packet.ext;
    let syndrome = ext
        .sacketh
        .map(|s| s.syndrome)
        .or(ext.aeth.map(|a| a.syndrome));
    let ack_msn = ext.sacketh.map(|s| s.msn).or(ext.aeth.map(|a| a.msn));
    let m = ext.mpeth;
    let s = ext.sacketh;
    let dma_len = ext.reth.map(|r| r.dma_len);
    spec.opcode.allows(&bth.opcode)
        && spec.psn.allows(&bth.psn)
        && spec.dest_qp.allows(&bth.dest_qp)
        && match (spec.syndrome, syndrome) {
            (None, _) => true,
            (Some(want), Some(got)) => want.allows(got),
            (Some(_), None) => false,
        }
        && opt(&spec.msn, ack_msn)
        && spec.payload.allows(&packet.payload.to_vec())
        && opt(&spec.atomic_orig, ext.atomic_ack_eth.map(|a| a.orig))
        && spec.udp_src_port.allows(&udp_src_port)
        && spec.headers.ack_req.allows(&bth.ack_req)
        && opt(&spec.mpeth.first, m.map(|m| m.first))
        && opt(&spec.mpeth.last, m.map(|m| m.last))
        && opt(&spec.mpeth.retransmission, m.map(|m| m.retransmission))
        && opt(&spec.mpeth.msn, m.map(|m| m.msn))
        && opt(&spec.mpeth.offset, m.map(|m| m.offset))
        && opt(&spec.mpeth.msg_len, m.map(|m| m.msg_len))
        && opt(&spec.mpeth.timestamp, m.map(|m| m.timestamp))
        && opt(&spec.mpeth.dma_len, dma_len)
        && opt(&spec.mpeth.ordered, m.map(|m| m.ordered))
        && opt(&spec.sacketh.ecn_ce, s.map(|s| s.ecn_ce))
        && opt(&spec.sacketh.retransmission, s.map(|s| s.retransmission))
        && opt(&spec.sacketh.trimmed, s.map(|s| s.trimmed))
        && opt(&spec.sacketh.sack_base_psn, s.map(|s| s.sack_base_psn))
        && opt(&spec.sacketh.sack_bitmap, s.map(|s| s.sack_bitmap))
        && opt(&spec.sacketh.echoed_entropy, s.map(|s| s.echoed_entropy))
        && opt(
            &spec.sacketh.echoed_timestamp,
            s.map(|s| s.echoed_timestamp),
        )
}

/// Whether `spec` allows the DSCP `dscp` of the packet's IP header
/// (MR-MPA-12), for a caller that has the IP header ([`spec_allows`] sees
/// only the RoCE packet).
pub fn spec_allows_dscp(spec: &PacketSpec, dscp: u8) -> bool {
    spec.headers.dscp.allows(&dscp)
}
