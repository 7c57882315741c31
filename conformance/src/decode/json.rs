//! The `jsonl` view: one JSON object per frame. Integers are JSON numbers;
//! key names follow SPEC.md's field names.

use super::{Decoded, mac, opcode_name};
use metaroce_codec::decap::Outer;
use metaroce_codec::ext::ExtHeaders;
use metaroce_codec::ipv6::{EXTENSION_HEADERS, walk_extensions};
use metaroce_codec::{BthRepr, Dialect, Frame, IpRepr, RocePacket};
use serde_json::{Map, Value, json};

/// The JSON object of one decoded frame.
///
/// Always: `frame`, `len`, `roce`, `error`, `icrc_valid`. When the capture
/// records it: `orig_len` (the length on the wire). When the capture added
/// layers: `encapsulation`, one object per layer taken off, outermost
/// first. When decoded: `eth`, `ip` (for RoCE v1 `grh`), `udp`, `cut` when
/// the capture cut the frame short (`layer` it ends in, `missing` bytes of
/// the datagram, `roce_missing` bytes of the RoCE packet), and for RoCE
/// `bth`, `payload_len` (on the wire), `payload_captured`, `pad_len`,
/// `icrc` (`null` when not captured) and one object per extension header
/// present. A RoCE packet cut inside its headers has `bth` when the BTH
/// was captured. IPv6 with extension headers has `ipv6_ext`.
pub fn frame_json(decoded: &Decoded<'_>) -> Value {
    let mut obj = Map::new();
    obj.insert("frame".into(), json!(decoded.number));
    obj.insert("len".into(), json!(decoded.len));
    if let Some(orig) = decoded.orig_len {
        obj.insert("orig_len".into(), json!(orig));
    }
    if !decoded.encapsulation.is_empty() {
        let layers: Vec<Value> = decoded.encapsulation.layers().map(outer_json).collect();
        obj.insert("encapsulation".into(), Value::Array(layers));
    }
    obj.insert("timestamp_ns".into(), json!(decoded.timestamp_ns));
    obj.insert("roce".into(), json!(decoded.is_roce()));
    obj.insert(
        "error".into(),
        decoded
            .frame
            .as_ref()
            .err()
            .map_or(Value::Null, |e| json!(e.to_string())),
    );
    obj.insert("icrc_valid".into(), json!(decoded.icrc.is_valid()));
    if !decoded.comments.is_empty() {
        obj.insert("comments".into(), json!(decoded.comments));
    }
    if let Ok(frame) = &decoded.frame {
        layers(frame, decoded.dialect, &mut obj);
    }
    Value::Object(obj)
}

/// One layer a capture added: its kind (`name`) and fields.
pub(super) fn outer_json(outer: &Outer) -> Value {
    let ip = |ip: &metaroce_codec::decap::OuterIp| (ip.src.to_string(), ip.dst.to_string());
    match outer {
        Outer::ServiceTag(tag) | Outer::SingleServiceTag(tag) => json!({
            "name": outer.name(), "tpid": tag.tpid, "pcp": tag.pcp(), "dei": tag.dei(),
            "vid": tag.vid(),
        }),
        Outer::Sll(s) => json!({
            "name": outer.name(), "packet_type": s.packet_type, "hatype": s.hatype,
            "addr": s.addr[..usize::from(s.addr_len)].iter()
                .map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"),
            "protocol": s.protocol, "ifindex": s.ifindex,
        }),
        Outer::RawIp { linktype } => json!({"name": outer.name(), "linktype": linktype}),
        Outer::Gre {
            ip: addrs,
            gre,
            erspan,
        } => {
            let (src, dst) = ip(addrs);
            let mut o = json!({
                "name": outer.name(), "src": src, "dst": dst, "gre_protocol": gre.protocol,
                "gre_key": gre.key, "gre_sequence": gre.sequence,
            });
            if let (Some(e), Some(map)) = (erspan, o.as_object_mut()) {
                map.insert("erspan_version".into(), json!(e.version));
                map.insert("session".into(), json!(e.session));
                map.insert("vlan".into(), json!(e.vlan));
                map.insert("cos".into(), json!(e.cos));
                map.insert("truncated".into(), json!(e.truncated));
                if e.version == 1 {
                    map.insert("index".into(), json!(e.index));
                } else {
                    map.insert("timestamp".into(), json!(e.timestamp));
                    map.insert("hw_id".into(), json!(e.hw_id));
                    map.insert("egress".into(), json!(e.egress));
                }
            }
            o
        }
        Outer::Vxlan {
            ip: addrs,
            src_port,
            vni,
        } => {
            let (src, dst) = ip(addrs);
            json!({"name": outer.name(), "src": src, "dst": dst, "src_port": src_port, "vni": vni})
        }
    }
}

fn layers(frame: &Frame<'_>, dialect: Dialect, obj: &mut Map<String, Value>) {
    let eth = &frame.ethernet;
    obj.insert(
        "eth".into(),
        json!({
            "src": mac(&eth.src),
            "dst": mac(&eth.dst),
            "ethertype": eth.ethertype,
            "vlans": eth.tags().iter().map(|t| json!({
                "tpid": t.tpid, "pcp": t.pcp(), "dei": t.dei(), "vid": t.vid()
            })).collect::<Vec<_>>(),
        }),
    );
    match &frame.ip {
        Some(IpRepr::V4(ip)) => {
            _ = obj.insert(
                "ip".into(),
                json!({
                    "version": 4, "src": ip.src.to_string(), "dst": ip.dst.to_string(),
                    "dscp": ip.dscp(), "ecn": ip.ecn(), "ihl": ip.ihl, "total_len": ip.total_len,
                    "ident": ip.ident, "df": ip.dont_fragment(), "mf": ip.more_fragments(),
                    "frag_offset": ip.fragment_offset(), "ttl": ip.ttl, "protocol": ip.protocol,
                    "checksum": ip.checksum, "checksum_valid": ip.checksum == ip.compute_checksum(),
                    "options_len": ip.options.len(),
                }),
            )
        }
        Some(IpRepr::V6(ip)) => {
            _ = obj.insert(
                if frame.is_roce_v1() { "grh" } else { "ip" }.into(),
                json!({
                    "version": 6, "src": ip.src.to_string(), "dst": ip.dst.to_string(),
                    "dscp": ip.dscp(), "ecn": ip.ecn(), "flow_label": ip.flow_label,
                    "payload_len": ip.payload_len, "next_header": ip.next_header,
                    "hop_limit": ip.hop_limit,
                }),
            )
        }
        None => {}
    }
    if let Some(udp) = &frame.udp {
        obj.insert(
            "udp".into(),
            json!({
                "src_port": udp.src_port, "dst_port": udp.dst_port,
                "length": udp.length, "checksum": udp.checksum,
            }),
        );
    }
    if let Some(IpRepr::V6(ip)) = &frame.ip
        && frame.udp.is_none()
        && EXTENSION_HEADERS.contains(&ip.next_header)
    {
        let chain = walk_extensions(ip.next_header, frame.payload);
        obj.insert(
            "ipv6_ext".into(),
            json!({"count": chain.count, "next_header": chain.next_header,
                   "incomplete": chain.incomplete}),
        );
    }
    if let Some(cut) = &frame.cut {
        obj.insert(
            "cut".into(),
            json!({"layer": cut.layer.name(), "missing": cut.missing,
                   "roce_missing": cut.roce_missing}),
        );
    }
    if let Some(roce) = &frame.roce {
        roce_json(frame, roce, dialect, obj);
    } else if let Some(bth) = super::cut_bth(frame) {
        bth_json(&bth, dialect, obj);
    }
}

fn roce_json(
    frame: &Frame<'_>,
    roce: &RocePacket<'_>,
    dialect: Dialect,
    obj: &mut Map<String, Value>,
) {
    bth_json(&roce.bth, dialect, obj);
    let whole = frame.roce_whole();
    let payload_len = frame.roce_payload_len().unwrap_or(roce.payload.len());
    obj.insert("payload_len".into(), json!(payload_len));
    obj.insert("payload_captured".into(), json!(roce.payload.len()));
    obj.insert("pad_len".into(), json!(roce.pad.len()));
    obj.insert(
        "icrc".into(),
        if whole {
            json!(roce.icrc_value())
        } else {
            Value::Null
        },
    );
    ext_json(&roce.ext, obj);
    if let Some(cm) = super::cm::cm_json(roce) {
        obj.insert("cm".into(), cm);
    }
}

fn bth_json(b: &BthRepr, dialect: Dialect, obj: &mut Map<String, Value>) {
    obj.insert(
        "bth".into(),
        json!({
            "opcode": b.opcode.0, "opcode_name": opcode_name(b.opcode, dialect), "se": b.se, "m": b.migreq,
            "pad_count": b.pad_count, "tver": b.tver, "pkey": b.pkey, "fecn": b.fecn,
            "becn": b.becn, "resv6a": b.resv6a, "dest_qp": b.dest_qp, "ack_req": b.ack_req,
            "resv7": b.resv7, "psn": b.psn.value(),
        }),
    );
}

fn ext_json(ext: &ExtHeaders, obj: &mut Map<String, Value>) {
    let mut put = |key: &str, value: Value| _ = obj.insert(key.into(), value);
    if let Some(h) = ext.rdeth {
        put(
            "rdeth",
            json!({"ee_context": h.ee_context, "reserved": h.reserved}),
        );
    }
    if let Some(h) = ext.deth {
        put(
            "deth",
            json!({"qkey": h.qkey, "src_qp": h.src_qp, "reserved": h.reserved}),
        );
    }
    if let Some(h) = ext.xrceth {
        put(
            "xrceth",
            json!({"xrc_srq": h.xrc_srq, "reserved": h.reserved}),
        );
    }
    if let Some(h) = ext.mpeth {
        put(
            "mpeth",
            json!({
                "first": h.first, "last": h.last, "retransmission": h.retransmission,
                "ordered": h.ordered, "reserved": h.reserved, "msn": h.msn.value(), "offset": h.offset,
                "msg_len": h.msg_len, "timestamp": h.timestamp,
            }),
        );
    }
    if let Some(h) = ext.sacketh {
        put(
            "sacketh",
            json!({
                "syndrome": h.syndrome.0, "msn": h.msn.value(), "ecn_ce": h.ecn_ce,
                "retransmission": h.retransmission, "trimmed": h.trimmed,
                "reserved_flags": h.reserved_flags, "sack_base_psn": h.sack_base_psn.value(),
                "sack_bitmap": h.sack_bitmap, "echoed_entropy": h.echoed_entropy,
                "reserved": h.reserved, "echoed_timestamp": h.echoed_timestamp,
            }),
        );
    }
    if let Some(h) = ext.feth {
        put(
            "feth",
            json!({
                "selectivity_level": h.selectivity_level, "placement_type": h.placement_type,
                "reserved": h.reserved,
            }),
        );
    }
    if let Some(h) = ext.reth {
        put(
            "reth",
            json!({"va": h.va, "rkey": h.rkey, "dma_len": h.dma_len}),
        );
    }
    if let Some(h) = ext.atomic_eth {
        put(
            "atomic_eth",
            json!({"va": h.va, "rkey": h.rkey, "swap_add": h.swap_add, "compare": h.compare}),
        );
    }
    if let Some(h) = ext.aeth {
        put(
            "aeth",
            json!({"syndrome": h.syndrome.0, "msn": h.msn.value()}),
        );
    }
    if let Some(h) = ext.atomic_ack_eth {
        put("atomic_ack_eth", json!({"orig": h.orig}));
    }
    if let Some(h) = ext.immdt {
        put("immdt", json!({"value": h.value}));
    }
    if let Some(h) = ext.ieth {
        put("ieth", json!({"rkey": h.rkey}));
    }
    if let Some(h) = ext.cnp {
        put(
            "cnp",
            json!({"reserved_zero": h.reserved.iter().all(|b| *b == 0)}),
        );
    }
}
