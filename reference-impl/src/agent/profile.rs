//! The reference transport's own capability profile (SPEC §2).

use crate::DeviceConfig;
use crate::MpTuning;
use crate::mp::config::{ENTROPY_SET_MAX, WINDOW_MAX};
use metaroce_agent::CapabilityProfile;

/// What the reference transport implements (Base RC with go-back-N, UD,
/// atomics, SEND with Invalidate, immediate data, IPv4, no SQD, no
/// credits, no DCQCN, UDP checksum zero; MP QPs beside Base ones, SPEC §7),
/// with the limits of `cfg`.
///
/// MP: entropy sets of up to 256 values and windows up to 16384 PSNs (the
/// full ranges of SPEC §10.3, what `MpAttrs::check` accepts); no
/// trimmed-packet recognition (the receive path does not detect trimming,
/// so `mp_trimming` is false); no flow-label entropy (no IPv6). A responder
/// stages SEND packets whose receive work request is not yet known without
/// a byte limit of its own: only the receive window bounds it, at W packets
/// of at most PMTU bytes, so the largest window at the largest PMTU is
/// declared. Ordered messages (MPETH O, SPEC v1.2 §7.5): the responder
/// keeps their packets until every earlier message is placed (MR-MPP-20),
/// and a fenced work request goes at once with O toward a peer that
/// honours it (`mp_peer_ordered`, MR-MPP-11).
pub fn reference_profile(cfg: &DeviceConfig) -> CapabilityProfile {
    // The MP local constants every MP QP of the agent uses (`MpTuning`'s
    // defaults; `modify_qp` may set only `mp_reorder_threshold` per QP).
    let t = MpTuning::default();
    let us = |ns: u64| ns / 1_000;
    CapabilityProfile {
        rc: true,
        uc: false,
        ud: true,
        atomics: true,
        flush: false,
        atomic_write: false,
        send_with_invalidate: true,
        invalidate_reg_mr: true,
        immediate: true,
        ipv4: true,
        ipv6: false,
        vlan: false,
        sqd: false,
        max_pmtu: cfg.max_pmtu,
        max_msg_size: cfg.max_msg_size.min(1 << 31),
        max_rd_atomic: cfg.max_rd_atomic,
        max_dest_rd_atomic: cfg.max_dest_rd_atomic,
        credits: false,
        cnp_generation: cfg.cnp_generation,
        cnp_pacing_scope: "qp".into(),
        dcqcn_reaction: false,
        udp_checksum_tx: "zero".into(),
        counters: true,
        implementation_chosen_psn: false,
        mp: true,
        mp_entropy_set_max: ENTROPY_SET_MAX as u32,
        mp_window_max: WINDOW_MAX,
        mp_trimming: false,
        mp_flow_label_entropy: false,
        mp_max_staged_bytes: u64::from(WINDOW_MAX) * u64::from(cfg.max_pmtu),
        mp_resource_nak: true,
        mp_ordered_write: true,
        cm: false,
        host_big_endian: cfg!(target_endian = "big"),
        mp_reorder_threshold: Some(u64::from(t.reorder_threshold)),
        mp_ack_coalesce_time: Some(us(t.ack_coalesce_time_ns)),
        // A prompt ACK leaves while the packet that owes it is handled
        // (no delay of its own): within the §10.3 default bound.
        mp_ack_prompt_max: Some(4),
        mp_rto_init: Some(us(t.rto_init_ns)),
        mp_rto_min: Some(us(t.rto_min_ns)),
        mp_rto_max: Some(us(t.rto_max_ns)),
        mp_retire_hold: Some(us(t.retire_hold_ns)),
        mp_retire_hold_max: Some(us(t.retire_hold_max_ns)),
        mp_cwnd_max: Some(t.cwnd_max),
    }
}
