//! The `text` view: layers and fields indented the way `tshark -V` prints
//! them, plus the ICRC status and any decode error.

use super::json::outer_json;
use super::{Decoded, cut_bth, mac, opcode_name};
use core::fmt::Write;
use metaroce_codec::ext::{ExtHeaders, SyndromeKind};
use metaroce_codec::ipv6::{EXTENSION_HEADERS, walk_extensions};
use metaroce_codec::{BthRepr, Dialect};
use metaroce_codec::{Frame, IcrcStatus, IpRepr, RocePacket};

/// Appends the text view of one frame to `out`.
pub fn frame_text(decoded: &Decoded<'_>, out: &mut String) {
    match decoded.orig_len {
        Some(orig) if orig as usize > decoded.len => {
            let _ = writeln!(
                out,
                "Frame {}: {} bytes captured of {orig} on the wire",
                decoded.number, decoded.len
            );
        }
        _ => {
            let _ = writeln!(out, "Frame {}: {} bytes", decoded.number, decoded.len);
        }
    }
    for comment in &decoded.comments {
        let _ = writeln!(out, "    [Comment: {comment}]");
    }
    for outer in decoded.encapsulation.layers() {
        let fields = outer_json(outer);
        let mut section = header(
            out,
            0,
            format_args!("Encapsulation ({}), taken off", outer.name()),
        );
        if let Some(map) = fields.as_object() {
            for (key, value) in map.iter().filter(|(k, _)| *k != "name") {
                section.line(key, value);
            }
        }
    }
    if let Ok(frame) = &decoded.frame
        && let Some(cut) = &frame.cut
    {
        let _ = writeln!(
            out,
            "    [Cut by the capture in {}: {} bytes of the datagram not captured]",
            cut.layer, cut.missing
        );
    }
    match &decoded.frame {
        Ok(frame) => layers(frame, decoded.dialect, out),
        Err(e) => {
            let _ = writeln!(out, "    [Decode error: {e}]");
        }
    }
    match decoded.icrc {
        IcrcStatus::NotRoce => {}
        IcrcStatus::NotCaptured => {
            let _ = writeln!(out, "    ICRC: not captured");
        }
        IcrcStatus::Valid => {
            let _ = writeln!(out, "    ICRC: valid");
        }
        IcrcStatus::Invalid { expected, found } => {
            let _ = writeln!(
                out,
                "    ICRC: INVALID (trailer holds 0x{found:08x}, computed 0x{expected:08x})"
            );
        }
    }
    out.push('\n');
}

/// Writes `label: value` lines at an indent.
pub(super) struct Section<'o> {
    out: &'o mut String,
    indent: usize,
}

impl Section<'_> {
    pub(super) fn line(&mut self, label: &str, value: impl core::fmt::Display) -> &mut Self {
        let _ = writeln!(
            self.out,
            "{:indent$}{label}: {value}",
            "",
            indent = self.indent
        );
        self
    }
}

pub(super) fn header(
    out: &mut String,
    indent: usize,
    title: impl core::fmt::Display,
) -> Section<'_> {
    let _ = writeln!(out, "{:indent$}{title}", "", indent = indent);
    Section {
        out,
        indent: indent + 4,
    }
}

fn flag(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

fn ethertype(value: u16) -> String {
    let name = match value {
        metaroce_codec::ethernet::ETHERTYPE_IPV4 => " (IPv4)",
        metaroce_codec::ethernet::ETHERTYPE_IPV6 => " (IPv6)",
        _ => "",
    };
    format!("0x{value:04x}{name}")
}

fn layers(frame: &Frame<'_>, dialect: Dialect, out: &mut String) {
    let eth = &frame.ethernet;
    header(
        out,
        0,
        format_args!(
            "Ethernet II, Src: {}, Dst: {}",
            mac(&eth.src),
            mac(&eth.dst)
        ),
    )
    .line("Type", ethertype(eth.ethertype));
    for tag in eth.tags() {
        header(out, 0, "802.1Q Virtual LAN")
            .line("TPID", format_args!("0x{:04x}", tag.tpid))
            .line("Priority", tag.pcp())
            .line("DEI", tag.dei() as u8)
            .line("ID", tag.vid());
    }
    match &frame.ip {
        Some(IpRepr::V4(ip)) => {
            let ok = if ip.checksum == ip.compute_checksum() {
                "correct"
            } else {
                "incorrect"
            };
            header(
                out,
                0,
                format_args!(
                    "Internet Protocol Version 4, Src: {}, Dst: {}",
                    ip.src, ip.dst
                ),
            )
            .line(
                "Header Length",
                format_args!("{} bytes ({})", usize::from(ip.ihl) * 4, ip.ihl),
            )
            .line("DSCP", ip.dscp())
            .line("ECN", ip.ecn())
            .line("Total Length", ip.total_len)
            .line("Identification", format_args!("0x{:04x}", ip.ident))
            .line(
                "Flags",
                format_args!(
                    "DF {}, MF {}, Fragment Offset {}",
                    ip.dont_fragment() as u8,
                    ip.more_fragments() as u8,
                    ip.fragment_offset()
                ),
            )
            .line("Time to Live", ip.ttl)
            .line("Protocol", ip.protocol)
            .line(
                "Header Checksum",
                format_args!("0x{:04x} [{ok}]", ip.checksum),
            );
        }
        Some(IpRepr::V6(ip)) => {
            let name = if frame.is_roce_v1() {
                "Global Route Header (RoCE v1)"
            } else {
                "Internet Protocol Version 6"
            };
            header(
                out,
                0,
                format_args!("{name}, Src: {}, Dst: {}", ip.src, ip.dst),
            )
            .line(
                "Traffic Class",
                format_args!(
                    "0x{:02x} (DSCP {}, ECN {})",
                    ip.traffic_class,
                    ip.dscp(),
                    ip.ecn()
                ),
            )
            .line("Flow Label", format_args!("0x{:05x}", ip.flow_label))
            .line("Payload Length", ip.payload_len)
            .line("Next Header", ip.next_header)
            .line("Hop Limit", ip.hop_limit);
        }
        None => {}
    }
    if let Some(udp) = &frame.udp {
        header(
            out,
            0,
            format_args!(
                "User Datagram Protocol, Src Port: {}, Dst Port: {}",
                udp.src_port, udp.dst_port
            ),
        )
        .line("Length", udp.length)
        .line("Checksum", format_args!("0x{:04x}", udp.checksum));
    }
    if let Some(IpRepr::V6(ip)) = &frame.ip
        && frame.udp.is_none()
        && EXTENSION_HEADERS.contains(&ip.next_header)
    {
        let chain = walk_extensions(ip.next_header, frame.payload);
        let _ = writeln!(
            out,
            "IPv6 extension headers: {}, then next header {}{}",
            chain.count,
            chain.next_header,
            if chain.incomplete {
                " (walk stopped early)"
            } else {
                ""
            }
        );
    }
    if let Some(roce) = &frame.roce {
        roce_text(frame, roce, dialect, out);
    } else if let Some(bth) = cut_bth(frame) {
        let _ = writeln!(
            out,
            "InfiniBand ({})",
            if frame.is_roce_v1() {
                "RoCE v1"
            } else {
                "RoCEv2"
            }
        );
        bth_text(&bth, dialect, out);
        let _ = writeln!(out, "    [Extension headers not captured]");
    } else if !frame.payload.is_empty() {
        let _ = writeln!(out, "Data ({} bytes)", frame.payload.len());
    }
    if !frame.trailer.is_empty() {
        let _ = writeln!(out, "Trailer ({} bytes)", frame.trailer.len());
    }
}

fn roce_text(frame: &Frame<'_>, roce: &RocePacket<'_>, dialect: Dialect, out: &mut String) {
    let version = if frame.is_roce_v1() {
        "RoCE v1"
    } else {
        "RoCEv2"
    };
    let _ = writeln!(out, "InfiniBand ({version})");
    bth_text(&roce.bth, dialect, out);
    ext_text(&roce.ext, out);
    super::cm::cm_text(roce, out);
    let wire = frame.roce_payload_len().unwrap_or(roce.payload.len());
    if wire != roce.payload.len() {
        let _ = writeln!(
            out,
            "    Payload: {wire} bytes ({} captured)",
            roce.payload.len()
        );
    } else if !roce.payload.is_empty() {
        let _ = writeln!(out, "    Payload: {} bytes", roce.payload.len());
    }
    if !roce.pad.is_empty() {
        let _ = writeln!(out, "    Pad: {} bytes", roce.pad.len());
    }
    if frame.roce_whole() {
        let _ = writeln!(out, "    Invariant CRC: 0x{:08x}", roce.icrc_value());
    } else {
        let _ = writeln!(out, "    Invariant CRC: not captured");
    }
}

fn bth_text(b: &BthRepr, dialect: Dialect, out: &mut String) {
    header(out, 4, "Base Transport Header")
        .line(
            "Opcode",
            format_args!(
                "{} (0x{:02x})",
                opcode_name(b.opcode, dialect).unwrap_or("unknown"),
                b.opcode.0
            ),
        )
        .line("Solicited Event", flag(b.se))
        .line("MigReq", flag(b.migreq))
        .line("Pad Count", b.pad_count)
        .line("Header Version", b.tver)
        .line("Partition Key", format_args!("0x{:04x}", b.pkey))
        .line("FECN", flag(b.fecn))
        .line("BECN", flag(b.becn))
        .line("Reserved", b.resv6a)
        .line(
            "Destination Queue Pair",
            format_args!("0x{:06x}", b.dest_qp),
        )
        .line("Acknowledge Request", flag(b.ack_req))
        .line("Reserved", b.resv7)
        .line("Packet Sequence Number", b.psn.value());
}

/// A syndrome as text; `mp`: in an MP SACKETH, where NAK codes 5 and 6
/// have names.
fn syndrome_text(value: u8, mp: bool) -> String {
    let syndrome = metaroce_codec::ext::Syndrome(value);
    let kind = match syndrome.kind() {
        SyndromeKind::Ack { credit_code } => format!("ACK, credit code {credit_code}"),
        SyndromeKind::RnrNak { timer } => format!("RNR NAK, timer code {timer}"),
        SyndromeKind::Reserved { value } => format!("reserved type, value {value}"),
        SyndromeKind::Nak { code } => match syndrome.nak_name(mp) {
            Some(name) => format!("NAK, code {code}: {name}"),
            None => format!("NAK, code {code}"),
        },
    };
    format!("0x{value:02x} ({kind})")
}

fn ext_text(ext: &ExtHeaders, out: &mut String) {
    if let Some(h) = ext.rdeth {
        header(out, 4, "Reliable Datagram ETH").line("EE Context", h.ee_context);
    }
    if let Some(h) = ext.deth {
        header(out, 4, "Datagram ETH")
            .line("Queue Key", format_args!("0x{:08x}", h.qkey))
            .line("Source Queue Pair", format_args!("0x{:06x}", h.src_qp));
    }
    if let Some(h) = ext.xrceth {
        header(out, 4, "XRC ETH").line("XRC SRQ", h.xrc_srq);
    }
    if let Some(h) = ext.mpeth {
        header(out, 4, "Multipath ETH (MPETH)")
            .line("First", flag(h.first))
            .line("Last", flag(h.last))
            .line("Retransmission", flag(h.retransmission))
            .line("Ordered", flag(h.ordered))
            .line("Message Sequence Number", h.msn.value())
            .line("Offset", h.offset)
            .line("Message Length", h.msg_len)
            .line("Timestamp", h.timestamp);
    }
    if let Some(h) = ext.sacketh {
        header(out, 4, "Selective ACK ETH (SACKETH)")
            .line("Syndrome", syndrome_text(h.syndrome.0, true))
            .line("Message Sequence Number", h.msn.value())
            .line("ECN-CE Seen", flag(h.ecn_ce))
            .line("Retransmission Echo", flag(h.retransmission))
            .line("Trimmed", flag(h.trimmed))
            .line("SACK Base PSN", h.sack_base_psn.value())
            .line("SACK Bitmap", format_args!("0x{:016x}", h.sack_bitmap))
            .line("Echoed Entropy", format_args!("0x{:04x}", h.echoed_entropy))
            .line("Echoed Timestamp", h.echoed_timestamp);
    }
    if let Some(h) = ext.feth {
        header(out, 4, "FLUSH ETH")
            .line("Selectivity Level", h.selectivity_level)
            .line("Placement Type", h.placement_type);
    }
    if let Some(h) = ext.reth {
        header(out, 4, "RDMA ETH")
            .line("Virtual Address", format_args!("0x{:016x}", h.va))
            .line("Remote Key", format_args!("0x{:08x}", h.rkey))
            .line("DMA Length", h.dma_len);
    }
    if let Some(h) = ext.atomic_eth {
        header(out, 4, "Atomic ETH")
            .line("Virtual Address", format_args!("0x{:016x}", h.va))
            .line("Remote Key", format_args!("0x{:08x}", h.rkey))
            .line("Swap (or Add) Data", format_args!("0x{:016x}", h.swap_add))
            .line("Compare Data", format_args!("0x{:016x}", h.compare));
    }
    if let Some(h) = ext.aeth {
        header(out, 4, "ACK ETH")
            .line("Syndrome", syndrome_text(h.syndrome.0, false))
            .line("Message Sequence Number", h.msn.value());
    }
    if let Some(h) = ext.atomic_ack_eth {
        header(out, 4, "Atomic ACK ETH")
            .line("Original Remote Data", format_args!("0x{:016x}", h.orig));
    }
    if let Some(h) = ext.immdt {
        header(out, 4, "Immediate Data").line("Immediate Data", format_args!("0x{:08x}", h.value));
    }
    if let Some(h) = ext.ieth {
        header(out, 4, "Invalidate ETH").line("Remote Key", format_args!("0x{:08x}", h.rkey));
    }
    if let Some(h) = ext.cnp {
        let zero = h.reserved.iter().all(|b| *b == 0);
        header(out, 4, "CNP").line(
            "Reserved (16 bytes)",
            if zero { "all zero" } else { "NOT zero" },
        );
    }
}
