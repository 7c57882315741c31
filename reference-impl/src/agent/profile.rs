//! The capability profile of SPEC §2 as `hello` reports it, and the
//! reference transport's own profile.

use crate::DeviceConfig;
use crate::mp::config::{ENTROPY_SET_MAX, WINDOW_MAX};
use serde::{Deserialize, Serialize};

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
    /// A SEND with Invalidate can invalidate a `reg_mr` region (MR-RSP-10).
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
}

impl CapabilityProfile {
    /// What the reference transport implements (Base RC with go-back-N,
    /// UD, atomics, SEND with Invalidate, immediate data, IPv4, no SQD,
    /// no credits, no DCQCN, UDP checksum zero; MP QPs beside Base ones,
    /// SPEC §7), with the limits of `cfg`.
    ///
    /// MP: entropy sets of up to 256 values and windows up to 16384 PSNs
    /// (the full ranges of SPEC §10.3, what `MpAttrs::check` accepts);
    /// no trimmed-packet recognition (the receive path does not detect
    /// trimming, so `mp_trimming` is false); no flow-label entropy (no
    /// IPv6). A responder stages SEND packets whose receive work request is
    /// not yet known without a byte limit of its own: only the receive
    /// window bounds it, at W packets of at most PMTU bytes, so the largest
    /// window at the largest PMTU is declared.
    pub fn reference(cfg: &DeviceConfig) -> Self {
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
        }
    }
}
