//! A `send` step → frame bytes, through the codec's `PacketBuilder`. Field
//! names are those of `metaroce decode --format jsonl`; anything a vector
//! leaves out is derived (addresses, DestQP, PSN, AckReq, lengths, PadCnt,
//! ICRC).

use super::context::Context;
use crate::vector::expr;
use crate::vector::model::{Bytes, Num, OpcodeRef, SendStep, Value};
use crate::vector::opcodes::opcode_by_name;
use metaroce_codec::ext::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, DethRepr, ExtHeaders, FethRepr, IethRepr, ImmDtRepr,
    MpethRepr, RethRepr, SackethRepr, Syndrome,
};
use metaroce_codec::opcode::Position;
use metaroce_codec::{Dialect, Msn, Opcode, PacketBuilder, Psn};
use std::collections::BTreeMap;

/// Resolves a number against the test's bindings.
pub fn num(n: &Num, ctx: &Context) -> Result<u64, String> {
    match n {
        Num::Int(v) => Ok(*v),
        Num::Expr(text) => expr::eval(text, &ctx.bindings).map_err(|e| e.to_string()),
    }
}

/// The bytes a `Bytes` value stands for.
pub fn bytes(b: &Bytes, ctx: &Context) -> Result<Vec<u8>, String> {
    match b {
        Bytes::Hex(text) => crate::vector::hex::decode(text),
        Bytes::Generated(g) => {
            let len = num(&g.len, ctx)?;
            if len > 1 << 20 {
                return Err(format!(
                    "{len} bytes: more than the 1 MiB a vector may generate"
                ));
            }
            Ok((0..len as usize)
                .map(|i| g.byte.unwrap_or((i as u8).wrapping_add(g.seed)))
                .collect())
        }
    }
}

fn value(v: &Value, ctx: &Context, field: &str) -> Result<u64, String> {
    match v {
        Value::Bool(b) => Ok(u64::from(*b)),
        Value::Num(n) => num(n, ctx).map_err(|e| format!("{field}: {e}")),
    }
}

fn flag(v: &Value, ctx: &Context, field: &str) -> Result<bool, String> {
    match value(v, ctx, field)? {
        0 => Ok(false),
        1 => Ok(true),
        n => Err(format!("{field}: {n} is not a boolean")),
    }
}

fn fits(v: u64, bits: u32, field: &str) -> Result<u64, String> {
    if bits < 64 && v >> bits != 0 {
        Err(format!("{field}: {v:#x} does not fit in {bits} bits"))
    } else {
        Ok(v)
    }
}

fn sized(v: &Value, ctx: &Context, field: &str, bits: u32) -> Result<u64, String> {
    fits(value(v, ctx, field)?, bits, field)
}

/// Sequence numbers wrap: an expression's value is taken modulo 2^24.
fn seq(v: &Value, ctx: &Context, field: &str) -> Result<u32, String> {
    Ok((value(v, ctx, field)? & 0xFF_FFFF) as u32)
}

/// The opcode a step names.
pub fn opcode(r: &OpcodeRef) -> Result<Opcode, String> {
    match r {
        OpcodeRef::Number(n) => Ok(Opcode(*n)),
        OpcodeRef::Name(name) => {
            opcode_by_name(name).ok_or_else(|| format!("unknown opcode name `{name}`"))
        }
    }
}

fn mac(text: &str, field: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = text.split([':', '-']).collect();
    let mut out = [0u8; 6];
    if parts.len() != 6 {
        return Err(format!("{field}: `{text}` is not a MAC address"));
    }
    for (o, p) in out.iter_mut().zip(parts) {
        *o = u8::from_str_radix(p, 16)
            .map_err(|_| format!("{field}: `{text}` is not a MAC address"))?;
    }
    Ok(out)
}

fn text_of<'a>(v: &'a Value, field: &str) -> Result<&'a str, String> {
    match v {
        Value::Num(Num::Expr(t)) => Ok(t),
        _ => Err(format!("{field}: give an address as a string")),
    }
}

/// Builds the frame of a `send` step.
pub fn build(step: &SendStep, ctx: &Context) -> Result<Vec<u8>, String> {
    let op = opcode(&step.opcode)?;
    let mut b = PacketBuilder::new(op);
    let (mut src_mac, mut dst_mac) = (ctx.harness.mac, ctx.iut.mac);
    for (k, v) in &step.eth {
        match k.as_str() {
            "src" => src_mac = mac(text_of(v, "eth.src")?, "eth.src")?,
            "dst" => dst_mac = mac(text_of(v, "eth.dst")?, "eth.dst")?,
            _ => return Err(format!("eth.{k}: not a field the harness sets (src, dst)")),
        }
    }
    b = b.macs(src_mac, dst_mac);
    let (mut src_ip, mut dst_ip) = (ctx.harness.ip, ctx.iut.ip);
    for (k, v) in &step.ip {
        match k.as_str() {
            "src" => {
                src_ip = text_of(v, "ip.src")?
                    .parse()
                    .map_err(|_| "ip.src: not an IPv4 address".to_string())?
            }
            "dst" => {
                dst_ip = text_of(v, "ip.dst")?
                    .parse()
                    .map_err(|_| "ip.dst: not an IPv4 address".to_string())?
            }
            _ => {}
        }
    }
    b = b.ipv4(src_ip, dst_ip);
    let mut tos = u8::try_from(ctx.traffic_class).unwrap_or(0);
    for (k, v) in &step.ip {
        let f = format!("ip.{k}");
        match k.as_str() {
            "src" | "dst" => {}
            "dscp" => tos = (tos & 0x03) | ((sized(v, ctx, &f, 6)? as u8) << 2),
            "ecn" => tos = (tos & 0xFC) | sized(v, ctx, &f, 2)? as u8,
            "ttl" => b = b.hop_limit(sized(v, ctx, &f, 8)? as u8),
            "total_len" => b = b.ip_length(sized(v, ctx, &f, 16)? as u16),
            "protocol" => b = b.ip_protocol(sized(v, ctx, &f, 8)? as u8),
            "checksum" => b = b.ipv4_checksum(sized(v, ctx, &f, 16)? as u16),
            "ihl" => b = b.ipv4_ihl(sized(v, ctx, &f, 4)? as u8),
            "ident" => b = b.ipv4_ident(sized(v, ctx, &f, 16)? as u16),
            _ => return Err(format!("{f}: not a field the harness sets")),
        }
    }
    b = b.traffic_class(tos);
    b = b.udp_src_port(ctx.udp_sport);
    for (k, v) in &step.udp {
        let f = format!("udp.{k}");
        match k.as_str() {
            "src_port" => b = b.udp_src_port(sized(v, ctx, &f, 16)? as u16),
            "dst_port" => b = b.udp_dst_port(sized(v, ctx, &f, 16)? as u16),
            "length" => b = b.udp_length(sized(v, ctx, &f, 16)? as u16),
            "checksum" => b = b.udp_checksum(sized(v, ctx, &f, 16)? as u16),
            _ => return Err(format!("{f}: not a UDP field")),
        }
    }
    // BTH defaults: the QP under test, the harness's first PSN, AckReq on a
    // message's last packet, the QP's P_Key.
    let dest_qp = if step.second_qp {
        ctx.iut_qpn2
    } else {
        ctx.iut_qpn
    };
    let ends_message = op
        .layout(Dialect::MetaRoce)
        .is_some_and(|l| matches!(l.position, Position::Only | Position::Last));
    let is_request = !matches!(
        op,
        Opcode::RC_ACK
            | Opcode::RC_ATOMIC_ACK
            | Opcode::MP_ACK
            | Opcode::MP_ATOMIC_ACK
            | Opcode::CNP
    ) && !op.is_rc_read_response()
        && op != Opcode::MP_READ_RESPONSE;
    let pkey = ctx.p_key;
    let psn = ctx.bindings.get("psn").unwrap_or(0) as u32;
    b = b.bth(|h| {
        h.dest_qp = dest_qp;
        h.psn = Psn::new(psn);
        h.ack_req = ends_message && is_request;
        h.pkey = pkey;
    });
    let mut pad_override = None;
    for (k, v) in &step.bth {
        let f = format!("bth.{k}");
        let n = match k.as_str() {
            "psn" => u64::from(seq(v, ctx, &f)?),
            "dest_qp" => sized(v, ctx, &f, 24)?,
            "pkey" => sized(v, ctx, &f, 16)?,
            "pad_count" => sized(v, ctx, &f, 2)?,
            "tver" => sized(v, ctx, &f, 4)?,
            "resv6a" => sized(v, ctx, &f, 6)?,
            "resv7" => sized(v, ctx, &f, 7)?,
            "se" | "m" | "fecn" | "becn" | "ack_req" => u64::from(flag(v, ctx, &f)?),
            _ => return Err(format!("{f}: not a BTH field")),
        };
        if k == "pad_count" {
            pad_override = Some(n as u8);
            continue;
        }
        b = b.bth(|h| match k.as_str() {
            "psn" => h.psn = Psn::new(n as u32),
            "dest_qp" => h.dest_qp = n as u32,
            "pkey" => h.pkey = n as u16,
            "tver" => h.tver = n as u8,
            "resv6a" => h.resv6a = n as u8,
            "resv7" => h.resv7 = n as u8,
            "se" => h.se = n == 1,
            "m" => h.migreq = n == 1,
            "fecn" => h.fecn = n == 1,
            "becn" => h.becn = n == 1,
            _ => h.ack_req = n == 1,
        });
    }
    let mut ext = b.ext_mut().to_owned();
    apply_ext(&mut ext, &step.ext, ctx)?;
    b = b.ext(|e| *e = ext);
    if let Some(p) = &step.payload {
        b = b.payload(bytes(p, ctx).map_err(|e| format!("payload: {e}"))?);
    }
    if let Some(p) = pad_override {
        b = b.pad_count(p);
    }
    if let Some(c) = &step.corrupt {
        if let Some(pad) = &c.pad_bytes {
            b = b.pad_bytes(bytes(pad, ctx).map_err(|e| format!("corrupt.pad_bytes: {e}"))?);
        }
        if let Some(v) = &c.icrc_value {
            b = b.icrc(fits(num(v, ctx)?, 32, "corrupt.icrc_value")? as u32);
        }
        if c.icrc {
            b = b.corrupt_icrc();
        }
        if let Some(t) = &c.trailer {
            b = b.trailer(bytes(t, ctx).map_err(|e| format!("corrupt.trailer: {e}"))?);
        }
        if let Some(n) = &c.truncate {
            b = b.truncate(num(n, ctx)? as usize);
        }
    }
    Ok(b.build())
}

fn apply_ext(
    ext: &mut ExtHeaders,
    given: &BTreeMap<String, BTreeMap<String, Value>>,
    ctx: &Context,
) -> Result<(), String> {
    for (header, fields) in given {
        for (k, v) in fields {
            let f = format!("ext.{header}.{k}");
            let f = f.as_str();
            match header.as_str() {
                "reth" => {
                    let h = ext.reth.get_or_insert_with(RethRepr::default);
                    match k.as_str() {
                        "va" => h.va = value(v, ctx, f)?,
                        "rkey" => h.rkey = sized(v, ctx, f, 32)? as u32,
                        "dma_len" => h.dma_len = sized(v, ctx, f, 32)? as u32,
                        _ => return Err(format!("{f}: not a RETH field")),
                    }
                }
                "aeth" => {
                    let h = ext.aeth.get_or_insert_with(AethRepr::default);
                    match k.as_str() {
                        "syndrome" => h.syndrome = Syndrome(syndrome(v, ctx, f)?),
                        "msn" => h.msn = Msn::new(seq(v, ctx, f)?),
                        _ => return Err(format!("{f}: not an AETH field")),
                    }
                }
                "atomic_eth" => {
                    let h = ext.atomic_eth.get_or_insert_with(AtomicEthRepr::default);
                    match k.as_str() {
                        "va" => h.va = value(v, ctx, f)?,
                        "rkey" => h.rkey = sized(v, ctx, f, 32)? as u32,
                        "swap_add" => h.swap_add = value(v, ctx, f)?,
                        "compare" => h.compare = value(v, ctx, f)?,
                        _ => return Err(format!("{f}: not an AtomicETH field")),
                    }
                }
                "atomic_ack_eth" => {
                    let h = ext
                        .atomic_ack_eth
                        .get_or_insert_with(AtomicAckEthRepr::default);
                    match k.as_str() {
                        "orig" => h.orig = value(v, ctx, f)?,
                        _ => return Err(format!("{f}: not an AtomicAckETH field")),
                    }
                }
                "immdt" => {
                    let h = ext.immdt.get_or_insert_with(ImmDtRepr::default);
                    match k.as_str() {
                        "value" => h.value = sized(v, ctx, f, 32)? as u32,
                        _ => return Err(format!("{f}: not an ImmDt field")),
                    }
                }
                "ieth" => {
                    let h = ext.ieth.get_or_insert_with(IethRepr::default);
                    match k.as_str() {
                        "rkey" => h.rkey = sized(v, ctx, f, 32)? as u32,
                        _ => return Err(format!("{f}: not an IETH field")),
                    }
                }
                "deth" => {
                    let h = ext.deth.get_or_insert_with(DethRepr::default);
                    match k.as_str() {
                        "qkey" => h.qkey = sized(v, ctx, f, 32)? as u32,
                        "src_qp" => h.src_qp = sized(v, ctx, f, 24)? as u32,
                        "reserved" => h.reserved = sized(v, ctx, f, 8)? as u8,
                        _ => return Err(format!("{f}: not a DETH field")),
                    }
                }
                "feth" => {
                    let h = ext.feth.get_or_insert_with(FethRepr::default);
                    match k.as_str() {
                        "selectivity_level" => h.selectivity_level = sized(v, ctx, f, 8)? as u8,
                        "placement_type" => h.placement_type = sized(v, ctx, f, 8)? as u8,
                        "reserved" => h.reserved = sized(v, ctx, f, 32)? as u32,
                        _ => return Err(format!("{f}: not a FETH field")),
                    }
                }
                "mpeth" => {
                    let h = ext.mpeth.get_or_insert_with(MpethRepr::default);
                    match k.as_str() {
                        "first" => h.first = flag(v, ctx, f)?,
                        "last" => h.last = flag(v, ctx, f)?,
                        "retransmission" => h.retransmission = flag(v, ctx, f)?,
                        "ordered" => h.ordered = flag(v, ctx, f)?,
                        "reserved" => h.reserved = sized(v, ctx, f, 4)? as u8,
                        "msn" => h.msn = Msn::new(seq(v, ctx, f)?),
                        "offset" => h.offset = sized(v, ctx, f, 32)? as u32,
                        "msg_len" => h.msg_len = sized(v, ctx, f, 32)? as u32,
                        "timestamp" => h.timestamp = sized(v, ctx, f, 32)? as u32,
                        _ => return Err(format!("{f}: not an MPETH field")),
                    }
                }
                "sacketh" => {
                    let h = ext.sacketh.get_or_insert_with(SackethRepr::default);
                    match k.as_str() {
                        "syndrome" => h.syndrome = Syndrome(syndrome(v, ctx, f)?),
                        "msn" => h.msn = Msn::new(seq(v, ctx, f)?),
                        "ecn_ce" => h.ecn_ce = flag(v, ctx, f)?,
                        "retransmission" => h.retransmission = flag(v, ctx, f)?,
                        "trimmed" => h.trimmed = flag(v, ctx, f)?,
                        "reserved_flags" => h.reserved_flags = sized(v, ctx, f, 8)? as u8,
                        "sack_base_psn" => h.sack_base_psn = Psn::new(seq(v, ctx, f)?),
                        "sack_bitmap" => h.sack_bitmap = value(v, ctx, f)?,
                        "echoed_entropy" => h.echoed_entropy = sized(v, ctx, f, 16)? as u16,
                        "reserved" => h.reserved = sized(v, ctx, f, 16)? as u16,
                        "echoed_timestamp" => h.echoed_timestamp = sized(v, ctx, f, 32)? as u32,
                        _ => return Err(format!("{f}: not a SACKETH field")),
                    }
                }
                _ => {
                    return Err(format!(
                        "ext.{header}: not a header the harness builds (reth, aeth, atomic_eth, \
                         atomic_ack_eth, immdt, ieth, deth, feth, mpeth, sacketh)"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// An AETH/SACKETH syndrome: a number or one of the names of
/// [`syndrome_by_name`].
fn syndrome(v: &Value, ctx: &Context, f: &str) -> Result<u8, String> {
    if let Value::Num(Num::Expr(t)) = v
        && !expr::is_expression(t)
        && let Some(s) = syndrome_by_name(t)
    {
        return Ok(s);
    }
    Ok(sized(v, ctx, f, 8)? as u8)
}

/// Syndrome names: `ack` (credits 0x1F, unlimited), `ack_credits_N`,
/// `rnr_N` (timer code N), `nak_seq`, `nak_inv_req`, `nak_rem_access`,
/// `nak_rem_op`, `nak_inv_rd_req`.
pub fn syndrome_by_name(name: &str) -> Option<u8> {
    let n = name.trim().to_ascii_lowercase();
    match n.as_str() {
        "ack" => Some(0x1F),
        "nak_seq" => Some(0x60),
        "nak_inv_req" => Some(0x61),
        "nak_rem_access" => Some(0x62),
        "nak_rem_op" => Some(0x63),
        "nak_inv_rd_req" => Some(0x64),
        _ => {
            if let Some(code) = n.strip_prefix("rnr_") {
                let c: u8 = code.parse().ok()?;
                (c < 32).then_some(0x20 | c)
            } else if let Some(c) = n.strip_prefix("ack_credits_") {
                let c: u8 = c.parse().ok()?;
                (c < 32).then_some(c)
            } else {
                None
            }
        }
    }
}
