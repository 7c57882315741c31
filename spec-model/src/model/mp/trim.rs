//! Recognition of trimmed MP packets (SPEC.md §7.10).

use super::{ArrivalInfo, MpConfig};
use metaroce_codec::ext::ExtHeaders;
use metaroce_codec::{BthRepr, Dialect, ExtKind, Opcode, RocePacket};

/// The MP data opcodes a switch may trim: 0xC0–0xC3, 0xC5, 0xCB.
pub fn is_data_opcode(op: Opcode) -> bool {
    op.is_mp_data()
}

/// Whether a packet is trimmed by the three facts of §7.10 (MR-MPT-1): the
/// DSCP is `mp_trim_dscp`, the opcode is a data opcode, and the bytes after
/// the extension headers that the IP length gives are fewer than the payload
/// the MPETH implies plus its pad plus the 4-byte ICRC. Only when the
/// receiver declares `mp_trimming` and `mp_trim_dscp` is set.
pub fn is_trimmed(cfg: &MpConfig, packet: &RocePacket<'_>, arrival: &ArrivalInfo) -> bool {
    let Some(dscp) = cfg.trim_dscp else {
        return false;
    };
    if !cfg.trimming || arrival.dscp != dscp || !is_data_opcode(packet.bth.opcode) {
        return false;
    }
    if !headers_complete(packet) {
        return true; // cut inside its extension headers (MR-MPT-4)
    }
    let Some(mpeth) = packet.ext.mpeth else {
        return false;
    };
    let header_len = packet.header_len();
    let available = arrival
        .ip_roce_len
        .unwrap_or_else(|| packet.buffer_len())
        .saturating_sub(header_len);
    let implied = u64::from(cfg.pmtu).min(u64::from(mpeth.msg_len.saturating_sub(mpeth.offset)));
    let pad = (4 - implied % 4) % 4;
    (available as u64) < implied + pad + 4
}

/// The headers of a possibly trimmed packet: BTH and the extension headers of
/// its opcode, with everything after them as payload and no ICRC. A switch may
/// cut into the extension headers (SPEC v1.2 MR-MPT-4: a 64-byte trim keeps
/// only 10 bytes of MPETH over IPv4): then the complete leading headers are
/// kept, the rest are absent and the payload is empty. `None` when the bytes do
/// not hold the complete BTH (or the opcode has no layout), so the packet is
/// dropped (MR-MPT-4).
pub fn trimmed_view(roce_bytes: &[u8]) -> Option<RocePacket<'_>> {
    let (bth, rest) = BthRepr::parse(roce_bytes).ok()?;
    let layout = bth.opcode.layout(Dialect::MetaRoce)?;
    let (ext, payload) = match ExtHeaders::parse(layout.headers, rest) {
        Ok(parsed) => parsed,
        Err(_) => {
            let ext = (0..layout.headers.len())
                .rev()
                .find_map(|n| ExtHeaders::parse(&layout.headers[..n], rest).ok())
                .map(|(e, _)| e)
                .unwrap_or_default();
            (ext, &[][..])
        }
    };
    Some(RocePacket {
        bth,
        ext,
        payload,
        pad: &[],
        icrc: [0; 4],
    })
}

/// Whether every extension header of the packet's opcode is present; false
/// only for a view of a packet cut inside them ([`trimmed_view`]).
pub fn headers_complete(packet: &RocePacket<'_>) -> bool {
    let Some(layout) = packet.bth.opcode.layout(Dialect::MetaRoce) else {
        return true;
    };
    let e = &packet.ext;
    layout.headers.iter().all(|k| match k {
        ExtKind::Mpeth => e.mpeth.is_some(),
        ExtKind::Reth => e.reth.is_some(),
        ExtKind::ImmDt => e.immdt.is_some(),
        ExtKind::Ieth => e.ieth.is_some(),
        ExtKind::AtomicEth => e.atomic_eth.is_some(),
        _ => true,
    })
}
