//! MP parameters (SPEC.md §7.1) and local constants (§10.3).

/// The MP parameters of one QP and the local constants of one end.
///
/// Times are in nanoseconds. The defaults are those of §10.3 (PMTU 1024 as in
/// §10.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpConfig {
    /// Path MTU in bytes.
    pub pmtu: u32,
    /// This end's entropy set (`mp_entropy_set`), values in 0xC000–0xFFFF.
    pub entropy_set: Vec<u16>,
    /// Receive window W in PSNs (`mp_window`).
    pub window: u32,
    /// DSCP that marks trimmed packets (`mp_trim_dscp`); `None`: trimming off.
    pub trim_dscp: Option<u8>,
    /// The implementation declares `mp_trimming`.
    pub trimming: bool,
    /// The DSCP of the QP's traffic class (`path.traffic_class` >> 2).
    pub dscp: u8,
    /// `mp_ack_dscp`: the DSCP of its MP ACKs, MP Atomic Acknowledges and
    /// MP Probes (MR-MPA-12); `None`: the traffic class's.
    pub ack_dscp: Option<u8>,
    /// Reorder threshold K (`mp_reorder_threshold`).
    pub reorder_threshold: u32,
    /// `mp_ack_coalesce_count`.
    pub ack_coalesce_count: u32,
    /// `mp_ack_coalesce_time` in ns.
    pub ack_coalesce_time: u64,
    /// `mp_ack_prompt_max` in ns.
    pub ack_prompt_max: u64,
    /// `mp_rto_init` in ns.
    pub rto_init: u64,
    /// `mp_rto_min` in ns.
    pub rto_min: u64,
    /// `mp_rto_max` in ns.
    pub rto_max: u64,
    /// `retry_cnt` (0–7, 7 meaning seven).
    pub retry_cnt: u32,
    /// `mp_base_rtt` in ns.
    pub base_rtt: u64,
    /// `mp_target_qdelay` in ns.
    pub target_qdelay: u64,
    /// `mp_cwnd_init` in bytes.
    pub cwnd_init: u64,
    /// `mp_cwnd_max` in bytes.
    pub cwnd_max: u64,
    /// `mp_md_factor` β in thousandths (300 = 0.3).
    pub md_factor_milli: u64,
    /// `mp_ai_bytes`.
    pub ai_bytes: u64,
    /// `mp_retire_hold` in ns.
    pub retire_hold: u64,
    /// `mp_retire_hold_max` in ns.
    pub retire_hold_max: u64,
    /// `max_dest_rd_atomic`: responder resources kept.
    pub max_dest_rd_atomic: usize,
    /// `min_rnr_timer` code.
    pub min_rnr_timer: u8,
    /// `mp_max_staged_bytes` (0: the responder never stages SEND data).
    pub max_staged_bytes: u64,
    /// Whether the requester of the direction this configuration serves
    /// announced RN (§7.16: its implementation declares `mp_resource_nak`;
    /// out of band, the responder's `mp_peer_resource_nak`). `Some(true)`:
    /// the responder may answer a refusal for lack of resources with NAK
    /// 0x66 and the requester treats it as MR-MPP-25 says; `Some(false)`:
    /// a 0x66 toward it is a finding (MR-MPP-23) and ends its QP
    /// (MR-MPP-16); `None` (default): not known, so the responder model
    /// never sends 0x66, the requester model follows MR-MPP-25 and the
    /// judge reports nothing.
    pub resource_nak: Option<bool>,
    /// `rnr_retry` (0–7, 7 meaning unlimited): RNR NAKs and resource NAKs
    /// counted before RNR_RETRY_EXC_ERR (§6.11, MR-MPP-25).
    pub rnr_retry: u32,
    /// The responder host stores 64-bit integers little-endian (atomics, §6.16).
    pub host_little_endian: bool,
    /// `mp_ordered_write` of this end: its responder honours MPETH O
    /// (SPEC v1.2 §7.5, MR-MPP-20).
    pub ordered_write: bool,
    /// `mp_peer_ordered`: the peer's responder honours O (MR-MPP-21).
    pub peer_ordered: bool,
}

impl MpConfig {
    /// The DSCP MR-MPA-12 requires of this QP's MP ACKs, MP Atomic
    /// Acknowledges and MP Probes: `mp_ack_dscp` when set, else the traffic
    /// class's; any when that is the trimming DSCP, which the sender must
    /// replace (MR-MPT-9) by a value the text does not fix.
    pub fn control_dscp(&self) -> crate::model::Field<u8> {
        match self.ack_dscp {
            Some(d) => crate::model::Field::Exact(d),
            None if self.trim_dscp == Some(self.dscp) => crate::model::Field::Any,
            None => crate::model::Field::Exact(self.dscp),
        }
    }
}

impl Default for MpConfig {
    fn default() -> Self {
        MpConfig {
            pmtu: 1024,
            entropy_set: (0..128).map(|i| 0xC000 + i).collect(),
            window: 1024,
            trim_dscp: None,
            trimming: false,
            dscp: 0,
            ack_dscp: None,
            reorder_threshold: 32,
            ack_coalesce_count: 16,
            ack_coalesce_time: 8_000,
            ack_prompt_max: 4_000,
            rto_init: 1_000_000,
            rto_min: 100_000,
            rto_max: 16_000_000,
            retry_cnt: 7,
            base_rtt: 10_000,
            target_qdelay: 10_000,
            cwnd_init: 524_288,
            cwnd_max: 786_432,
            md_factor_milli: 300,
            ai_bytes: 16_384,
            retire_hold: 500_000,
            retire_hold_max: 64_000_000,
            max_dest_rd_atomic: 16,
            min_rnr_timer: 12,
            max_staged_bytes: 0,
            resource_nak: None,
            rnr_retry: 7,
            host_little_endian: true,
            ordered_write: false,
            peer_ordered: false,
        }
    }
}

impl MpConfig {
    /// The RNR wait of `min_rnr_timer` in ns (table of §6.11).
    pub fn rnr_period_ns(&self) -> u64 {
        rnr_timer_ns(self.min_rnr_timer)
    }
}

/// The RNR timer table of §6.11, code → nanoseconds.
pub fn rnr_timer_ns(code: u8) -> u64 {
    /// Hundredths of a millisecond (10 µs units) per code.
    const TEN_US: [u64; 32] = [
        65_536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
        1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
    ];
    TEN_US[usize::from(code & 0x1F)] * 10_000
}
