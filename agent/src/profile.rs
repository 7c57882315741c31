//! The capability profile of SPEC §2 as `hello` reports it.

use serde::{Deserialize, Serialize};

/// Every key of the SPEC §2 table, in its order: what `hello` reports (the
/// MP local constants may be left out at their defaults) and the only keys
/// a profile file may hold (`metaroce run --profile`; a conformance test
/// compares this list with SPEC.md).
pub const PROFILE_KEYS: &[&str] = &[
    "rc",
    "uc",
    "ud",
    "atomics",
    "flush",
    "atomic_write",
    "send_with_invalidate",
    "invalidate_reg_mr",
    "immediate",
    "ipv4",
    "ipv6",
    "vlan",
    "sqd",
    "max_pmtu",
    "max_msg_size",
    "max_rd_atomic",
    "max_dest_rd_atomic",
    "credits",
    "cnp_generation",
    "cnp_pacing_scope",
    "dcqcn_reaction",
    "udp_checksum_tx",
    "counters",
    "implementation_chosen_psn",
    "mp",
    "mp_entropy_set_max",
    "mp_window_max",
    "mp_trimming",
    "mp_flow_label_entropy",
    "mp_max_staged_bytes",
    "mp_ordered_write",
    "mp_resource_nak",
    "mp_reorder_threshold",
    "mp_ack_coalesce_time",
    "mp_ack_prompt_max",
    "mp_rto_init",
    "mp_rto_min",
    "mp_rto_max",
    "mp_retire_hold",
    "mp_retire_hold_max",
    "mp_cwnd_max",
    "cm",
    "host_big_endian",
];

/// Every key of SPEC §2, with its type. `hello` sends them all, so the
/// harness never relies on a default (MR-PICS-1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // the keys of SPEC §2 of the same names
pub struct CapabilityProfile {
    pub rc: bool,
    pub uc: bool,
    pub ud: bool,
    pub atomics: bool,
    pub flush: bool,
    pub atomic_write: bool,
    pub send_with_invalidate: bool,
    /// A SEND with Invalidate can invalidate a `reg_mr` region (MR-RSP-10);
    /// absent in profiles written before v1.1, hence the default.
    #[serde(default)]
    pub invalidate_reg_mr: bool,
    pub immediate: bool,
    pub ipv4: bool,
    pub ipv6: bool,
    pub vlan: bool,
    pub sqd: bool,
    pub max_pmtu: u32,
    pub max_msg_size: u64,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub credits: bool,
    pub cnp_generation: bool,
    /// `qp`, `ip_pair` or `port`.
    pub cnp_pacing_scope: String,
    pub dcqcn_reaction: bool,
    /// `zero` or `computed`.
    pub udp_checksum_tx: String,
    pub counters: bool,
    pub implementation_chosen_psn: bool,
    pub mp: bool,
    pub mp_entropy_set_max: u32,
    pub mp_window_max: u32,
    pub mp_trimming: bool,
    pub mp_flow_label_entropy: bool,
    pub mp_max_staged_bytes: u64,
    /// The MP requester understands NAK 0x66 and the responder sends it
    /// toward a peer that does (SPEC §7.16); absent in profiles written
    /// before v1.2, hence the default.
    #[serde(default)]
    pub mp_resource_nak: bool,
    /// The MP responder honours the MPETH O flag and the requester sends a
    /// fenced work request at once with O toward a peer that honours it
    /// (SPEC v1.2 §7.5); absent in profiles written before v1.2, hence the
    /// default.
    #[serde(default)]
    pub mp_ordered_write: bool,
    /// Connection setup through the CM on QP 1 (SPEC §6.22); absent in
    /// profiles written before v1.1, hence the default.
    #[serde(default)]
    pub cm: bool,
    /// The host stores 64-bit integers big-endian (SPEC §6.16, MR-ATOM-6).
    #[serde(default)]
    pub host_big_endian: bool,
    // The MP local constants of SPEC §10.3 that §2 lets a profile declare
    // (µs, PSNs or bytes, as §10.3); absent: the §10.3 default (MR-PICS-1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_reorder_threshold: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_ack_coalesce_time: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_ack_prompt_max: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_rto_init: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_rto_min: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_rto_max: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_retire_hold: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_retire_hold_max: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_cwnd_max: Option<u64>,
}
