//! The reference transport's own capability profile (SPEC §2).

use crate::DeviceConfig;
use crate::MpTuning;
use crate::mp::config::{ENTROPY_SET_MAX, WINDOW_MAX};
use metaroce_agent::CapabilityProfile;
use metaroce_agent::mp_local::mp_local_values;
use serde_json::{Map, Value};

/// The MP local constants of SPEC §10.3 the agent's MP QPs use, and so
/// those its profile declares (SPEC §2): [`reference_profile_with`] and the
/// agent's `modify_qp` both read this one value, so `hello` and the
/// transport cannot disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpLocal {
    /// The per-QP tuning (`modify_qp` may still set `mp_reorder_threshold`
    /// per QP).
    pub tuning: MpTuning,
    /// `mp_ack_prompt_max` declared, in µs: a bound, not a delay (a prompt
    /// ACK leaves while the packet that owes it is handled).
    pub ack_prompt_max_us: u64,
}

impl Default for MpLocal {
    /// The §10.3 defaults.
    fn default() -> Self {
        MpLocal {
            tuning: MpTuning::default(),
            ack_prompt_max_us: 4,
        }
    }
}

impl MpLocal {
    /// The constants a profile fragment declares: `map` holds §2 keys of
    /// the MP local constants (µs, PSNs or bytes, as §10.3); the others keep
    /// their defaults, moved into the order §10.3 requires as the harness
    /// does (`metaroce_agent::mp_local`, one table for both).
    ///
    /// # Errors
    /// A key that is not one of these constants, a value outside its §10.3
    /// range or two values out of order; the message names the key.
    pub fn from_profile(map: &Map<String, Value>) -> Result<Self, String> {
        use metaroce_agent::mp_local::MP_LOCAL;
        if let Some(k) = map.keys().find(|k| !MP_LOCAL.iter().any(|c| c.key == *k)) {
            let keys: Vec<&str> = MP_LOCAL.iter().map(|c| c.key).collect();
            return Err(format!(
                "`{k}` is not an MP local constant of SPEC §2 (one of: {})",
                keys.join(", ")
            ));
        }
        let v = mp_local_values(map)?;
        let ns = |key: &str| v[key] * 1_000;
        let d = MpTuning::default();
        Ok(MpLocal {
            tuning: MpTuning {
                // Within 1..=64 and 1..=1000000 µs etc.: checked above.
                reorder_threshold: u8::try_from(v["mp_reorder_threshold"])
                    .map_err(|_| "mp_reorder_threshold: not a PSN count".to_string())?,
                ack_coalesce_time_ns: ns("mp_ack_coalesce_time"),
                rto_init_ns: ns("mp_rto_init"),
                rto_min_ns: ns("mp_rto_min"),
                rto_max_ns: ns("mp_rto_max"),
                retire_hold_ns: ns("mp_retire_hold"),
                retire_hold_max_ns: ns("mp_retire_hold_max"),
                cwnd_max: v["mp_cwnd_max"],
                // Below the declared maximum (SPEC §10.3: init ≤ max).
                cwnd_init: d.cwnd_init.min(v["mp_cwnd_max"]),
                ..d
            },
            ack_prompt_max_us: v["mp_ack_prompt_max"],
        })
    }
}

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
    reference_profile_with(cfg, &MpLocal::default())
}

/// [`reference_profile`] declaring the MP local constants `mp` (those every
/// MP QP of the agent uses; `modify_qp` may set only `mp_reorder_threshold`
/// per QP).
pub fn reference_profile_with(cfg: &DeviceConfig, mp: &MpLocal) -> CapabilityProfile {
    let t = mp.tuning;
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
        mp_ack_prompt_max: Some(mp.ack_prompt_max_us),
        mp_rto_init: Some(us(t.rto_init_ns)),
        mp_rto_min: Some(us(t.rto_min_ns)),
        mp_rto_max: Some(us(t.rto_max_ns)),
        mp_retire_hold: Some(us(t.retire_hold_ns)),
        mp_retire_hold_max: Some(us(t.retire_hold_max_ns)),
        mp_cwnd_max: Some(t.cwnd_max),
    }
}
