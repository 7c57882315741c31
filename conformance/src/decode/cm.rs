//! The CM MAD a UD SEND to QP1 carries (RDMA-CM's connection setup), in
//! both views: `text` sections like `tshark -V`'s "MAD Header" and "CM
//! ConnectRequest", and a `cm` object in `jsonl`.

use super::text::{Section, header};
use metaroce_codec::RocePacket;
use metaroce_codec::cm::{CmMad, CmMessage, carries_mad};
use metaroce_codec::mp_setup::MpSetupField;
use serde_json::{Value, json};

/// The MAD of `roce`, when it is a packet to QP1: decoded, or why not.
fn mad_of(roce: &RocePacket<'_>) -> Option<Result<CmMad, metaroce_codec::WireError>> {
    carries_mad(roce).then(|| CmMad::parse(roce.payload))
}

/// Appends the MAD header and CM message of `roce` (nothing for other packets).
pub fn cm_text(roce: &RocePacket<'_>, out: &mut String) {
    let mad = match mad_of(roce) {
        None => return,
        Some(Err(e)) => {
            out.push_str(&format!("    [MAD decode error: {e}]\n"));
            return;
        }
        Some(Ok(m)) => m,
    };
    let h = &mad.header;
    header(out, 4, "MAD Header")
        .line("Base Version", h.base_version)
        .line("Management Class", format_args!("0x{:02x}", h.mgmt_class))
        .line("Class Version", h.class_version)
        .line("Method", format_args!("0x{:02x}", h.method))
        .line("Status", format_args!("0x{:04x}", h.status))
        .line(
            "Transaction ID",
            format_args!("0x{:016x}", h.transaction_id),
        )
        .line("Attribute ID", format_args!("0x{:04x}", h.attribute_id.0))
        .line(
            "Attribute Modifier",
            format_args!("0x{:08x}", h.attribute_modifier),
        );
    let mut s: Section<'_> = header(out, 4, format_args!("CM {}", mad.name()));
    match mad.message {
        CmMessage::Req(r) => {
            s.line(
                "Local Communication ID",
                format_args!("0x{:08x}", r.local_comm_id),
            )
            .line("ServiceID", format_args!("0x{:016x}", r.service_id))
            .line("Local QPN", format_args!("0x{:06x}", r.local_qpn))
            .line("Responder Resources", r.responder_resources)
            .line("Initiator Depth", r.initiator_depth)
            .line("Transport Service Type", r.transport_type)
            .line("End-to-End Flow Control", r.end_to_end_flow_control)
            .line("Starting PSN", r.starting_psn)
            .line("Retry Count", r.retry_count)
            .line("Partition Key", format_args!("0x{:04x}", r.pkey))
            .line(
                "Path Packet Payload MTU",
                format_args!("{} ({})", r.path_mtu, pmtu_text(r.pmtu())),
            )
            .line("RNR Retry Count", r.rnr_retry_count)
            .line("SRQ", r.srq);
            if let Some(p) = r.primary {
                s.line("Primary Local Port GID", gid_text(&p.local_gid))
                    .line("Primary Remote Port GID", gid_text(&p.remote_gid))
                    .line("Primary Local ACK Timeout", p.local_ack_timeout);
            }
            mp_setup_text(&r.mp_setup, out);
        }
        CmMessage::Rep(r) => {
            s.comm_ids(r.local_comm_id, r.remote_comm_id)
                .line("Local QPN", format_args!("0x{:06x}", r.local_qpn))
                .line("Starting PSN", r.starting_psn)
                .line("Responder Resources", r.responder_resources)
                .line("Initiator Depth", r.initiator_depth)
                .line("Target ACK Delay", r.target_ack_delay)
                .line("End-to-End Flow Control", r.end_to_end_flow_control)
                .line("RNR Retry Count", r.rnr_retry_count)
                .line("SRQ", r.srq);
            mp_setup_text(&r.mp_setup, out);
        }
        CmMessage::Rej(r) => {
            s.comm_ids(r.local_comm_id, r.remote_comm_id)
                .line("Message REJected", r.message_rejected)
                .line("Reason", r.reason);
        }
        CmMessage::Mra(r) => {
            s.comm_ids(r.local_comm_id, r.remote_comm_id)
                .line("Message MRAed", r.message_mraed)
                .line("Service Timeout", r.service_timeout);
        }
        CmMessage::Dreq(r) => {
            s.comm_ids(r.local_comm_id, r.remote_comm_id)
                .line("Remote QPN", format_args!("0x{:06x}", r.remote_qpn));
        }
        CmMessage::Rtu(r) | CmMessage::Drep(r) => {
            s.comm_ids(r.local_comm_id, r.remote_comm_id);
        }
        CmMessage::Other => {
            s.line("Message", "not decoded");
        }
    }
}

/// The `cm` object of `roce` (`None` for packets not to QP1).
pub fn cm_json(roce: &RocePacket<'_>) -> Option<Value> {
    let mad = match mad_of(roce)? {
        Err(e) => return Some(json!({"error": e.to_string()})),
        Ok(m) => m,
    };
    let h = &mad.header;
    let mut message = match mad.message {
        CmMessage::Req(r) => json!({
            "local_comm_id": r.local_comm_id, "service_id": r.service_id,
            "local_qpn": r.local_qpn, "responder_resources": r.responder_resources,
            "initiator_depth": r.initiator_depth, "transport_type": r.transport_type,
            "end_to_end_flow_control": r.end_to_end_flow_control,
            "starting_psn": r.starting_psn, "retry_count": r.retry_count, "pkey": r.pkey,
            "path_mtu": r.path_mtu, "pmtu": r.pmtu(), "rnr_retry_count": r.rnr_retry_count,
            "srq": r.srq,
            "primary_local_gid": r.primary.map(|p| gid_text(&p.local_gid)),
            "primary_remote_gid": r.primary.map(|p| gid_text(&p.remote_gid)),
            "primary_local_ack_timeout": r.primary.map(|p| p.local_ack_timeout),
        }),
        CmMessage::Rep(r) => json!({
            "local_comm_id": r.local_comm_id, "remote_comm_id": r.remote_comm_id,
            "local_qpn": r.local_qpn, "starting_psn": r.starting_psn,
            "responder_resources": r.responder_resources, "initiator_depth": r.initiator_depth,
            "target_ack_delay": r.target_ack_delay,
            "end_to_end_flow_control": r.end_to_end_flow_control,
            "rnr_retry_count": r.rnr_retry_count, "srq": r.srq,
        }),
        CmMessage::Rej(r) => json!({
            "local_comm_id": r.local_comm_id, "remote_comm_id": r.remote_comm_id,
            "message_rejected": r.message_rejected, "reason": r.reason,
        }),
        CmMessage::Mra(r) => json!({
            "local_comm_id": r.local_comm_id, "remote_comm_id": r.remote_comm_id,
            "message_mraed": r.message_mraed, "service_timeout": r.service_timeout,
        }),
        CmMessage::Dreq(r) => json!({
            "local_comm_id": r.local_comm_id, "remote_comm_id": r.remote_comm_id,
            "remote_qpn": r.remote_qpn,
        }),
        CmMessage::Rtu(r) | CmMessage::Drep(r) => json!({
            "local_comm_id": r.local_comm_id, "remote_comm_id": r.remote_comm_id,
        }),
        CmMessage::Other => Value::Null,
    };
    let setup = match mad.message {
        CmMessage::Req(r) => mp_setup_json(&r.mp_setup),
        CmMessage::Rep(r) => mp_setup_json(&r.mp_setup),
        _ => None,
    };
    if let (Some(v), Some(fields)) = (setup, message.as_object_mut()) {
        fields.insert("mp_setup".into(), v);
    }
    Some(json!({
        "base_version": h.base_version, "mgmt_class": h.mgmt_class,
        "class_version": h.class_version, "method": h.method, "status": h.status,
        "transaction_id": h.transaction_id, "attribute_id": h.attribute_id.0,
        "attribute_modifier": h.attribute_modifier, "message": mad.name(), "fields": message,
    }))
}

/// The MetaRoCE MP setup block of a REQ or REP (SPEC.md §7.1.1), as a
/// section after the message's; nothing when there is none.
fn mp_setup_text(f: &MpSetupField, out: &mut String) {
    match f {
        MpSetupField::Absent => {}
        MpSetupField::NotCaptured => {
            header(out, 4, "MetaRoCE MP setup block").line("Block", "not captured");
        }
        MpSetupField::Unreadable { field, value } => {
            header(out, 4, "MetaRoCE MP setup block")
                .line("Block", format_args!("unreadable: {field} {value}"));
        }
        MpSetupField::Block(b) => {
            header(out, 4, "MetaRoCE MP setup block")
                .line("Version", b.version)
                .line("Length", b.length)
                .line("Flags", format_args!("0x{:02x}", b.flags))
                .line("MP (M)", b.mp())
                .line(
                    "Trim DSCP",
                    b.trim()
                        .map_or_else(|| "off".to_string(), |d| d.to_string()),
                )
                .line("Ordered (O)", b.ordered())
                .line("Resource NAK (RN)", b.resource_nak())
                .line("Window", b.window)
                .line("Entropy Set Size", b.entropy_set_size)
                .line("Planes", b.planes)
                .line("ACK Coalescing (us)", b.ack_coalesce_us)
                .line("ACK Prompt Bound (us)", b.ack_prompt_us)
                .line("Max Staged Bytes", b.max_staged_bytes);
        }
    }
}

/// The `mp_setup` object of a REQ's or REP's `fields` (`None`: no block).
fn mp_setup_json(f: &MpSetupField) -> Option<Value> {
    Some(match f {
        MpSetupField::Absent => return None,
        MpSetupField::NotCaptured => json!({"not_captured": true}),
        MpSetupField::Unreadable { field, value } => {
            json!({"unreadable": {"field": field, "value": value}})
        }
        MpSetupField::Block(b) => json!({
            "version": b.version, "length": b.length, "flags": b.flags,
            "mp": b.mp(), "trim_dscp": b.trim(), "ordered": b.ordered(),
            "resource_nak": b.resource_nak(), "window": b.window,
            "entropy_set_size": b.entropy_set_size, "planes": b.planes,
            "ack_coalesce_us": b.ack_coalesce_us, "ack_prompt_us": b.ack_prompt_us,
            "max_staged_bytes": b.max_staged_bytes,
        }),
    })
}

fn pmtu_text(p: Option<u32>) -> String {
    p.map_or_else(|| "reserved".to_string(), |b| format!("{b} bytes"))
}

/// A GID: the IPv4 address when it is IPv4-mapped (RoCEv2), else IPv6 text.
pub(crate) fn gid_text(gid: &[u8; 16]) -> String {
    let v6 = std::net::Ipv6Addr::from(*gid);
    match v6.to_ipv4_mapped() {
        Some(v4) => v4.to_string(),
        None => v6.to_string(),
    }
}

impl Section<'_> {
    /// The two communication IDs every CM message after the REQ carries.
    fn comm_ids(&mut self, local: u32, remote: u32) -> &mut Self {
        self.line("Local Communication ID", format_args!("0x{local:08x}"))
            .line("Remote Communication ID", format_args!("0x{remote:08x}"))
    }
}
