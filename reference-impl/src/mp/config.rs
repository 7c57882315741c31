//! MP parameters negotiated at connect (SPEC §7.1) and the local constants of
//! SPEC §10.3, with their range checks.

use crate::error::VerbsError;
use metaroce_agent::rng::SplitMix64;

/// How the entropy set of an MP QP is given (SPEC §7.1 `mp_entropy_set`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MpEntropy {
    /// Exactly these values, each in 0xC000–0xFFFF, distinct (MR-MPS-2).
    Values(Vec<u16>),
    /// `n` distinct values in 0xC000–0xFFFF derived from `seed`.
    Seeded {
        /// Set size N (1–256).
        n: u16,
        /// Seed of the derivation (deterministic).
        seed: u64,
    },
}

/// Local sender and receiver constants of SPEC §10.3. Times in ns, except
/// where named otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpTuning {
    /// `mp_reorder_threshold` K (1–64).
    pub reorder_threshold: u8,
    /// `mp_ack_coalesce_count` (1–64).
    pub ack_coalesce_count: u8,
    /// `mp_ack_coalesce_time` in ns (1–64 µs).
    pub ack_coalesce_time_ns: u64,
    /// `mp_rto_init` in ns.
    pub rto_init_ns: u64,
    /// `mp_rto_min` in ns.
    pub rto_min_ns: u64,
    /// `mp_rto_max` in ns.
    pub rto_max_ns: u64,
    /// `mp_base_rtt` before the first sample, in ns.
    pub base_rtt_ns: u64,
    /// `mp_target_qdelay` in ns.
    pub target_qdelay_ns: u64,
    /// `mp_cwnd_init` in bytes.
    pub cwnd_init: u64,
    /// `mp_cwnd_max` in bytes.
    pub cwnd_max: u64,
    /// `mp_md_factor` β in thousandths (50–500).
    pub md_factor_milli: u16,
    /// `mp_ai_bytes` per srtt.
    pub ai_bytes: u64,
    /// `mp_retire_hold` in ns.
    pub retire_hold_ns: u64,
    /// `mp_retire_hold_max` in ns.
    pub retire_hold_max_ns: u64,
}

impl Default for MpTuning {
    /// The defaults of SPEC §10.3.
    fn default() -> Self {
        MpTuning {
            reorder_threshold: 32,
            ack_coalesce_count: 16,
            ack_coalesce_time_ns: 8_000,
            rto_init_ns: 1_000_000,
            rto_min_ns: 100_000,
            rto_max_ns: 16_000_000,
            base_rtt_ns: 10_000,
            target_qdelay_ns: 10_000,
            cwnd_init: 524_288,
            cwnd_max: 786_432,
            md_factor_milli: 300,
            ai_bytes: 16_384,
            retire_hold_ns: 500_000,
            retire_hold_max_ns: 64_000_000,
        }
    }
}

/// The MP attributes given on the INIT to RTR transition (SPEC §7.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpAttrs {
    /// This QP's entropy set (the UDP source ports it sends from).
    pub entropy: MpEntropy,
    /// `mp_window` W in PSNs (64–16384; both ends equal).
    pub window: u32,
    /// `mp_trim_dscp`: DSCP of trimmed packets, `None` = trimming off.
    pub trim_dscp: Option<u8>,
    /// `mp_ack_dscp`: DSCP of the QP's MP ACKs, MP Atomic Acknowledges and
    /// MP Probes (MR-MPA-12); `None` = the DSCP of its traffic class.
    pub ack_dscp: Option<u8>,
    /// `mp_peer_ordered`: the peer's responder honours the MPETH O flag
    /// (SPEC §7.5), so a fenced work request is sent at once with O.
    pub peer_ordered: bool,
    /// Local constants.
    pub tuning: MpTuning,
    /// `mp_peer_resource_nak`: the peer's requester understands NAK 0x66
    /// (SPEC §7.1, §7.16), so the responder answers a packet it refuses
    /// for lack of staging with it instead of dropping it (MR-MPP-23).
    pub peer_resource_nak: bool,
    /// The responder's staging limit in bytes (`mp_max_staged_bytes`,
    /// SPEC §2): SEND payload kept while its receive work request is not
    /// yet known. `u64::MAX`: bounded only by the window.
    pub max_staged_bytes: u64,
}

impl Default for MpAttrs {
    /// N = 128 values from seed 0, W = 1024, no trimming, §10.3 constants,
    /// a peer without RN, staging bounded only by the window.
    fn default() -> Self {
        MpAttrs {
            entropy: MpEntropy::Seeded { n: 128, seed: 0 },
            window: 1024,
            trim_dscp: None,
            ack_dscp: None,
            peer_ordered: false,
            tuning: MpTuning::default(),
            peer_resource_nak: false,
            max_staged_bytes: u64::MAX,
        }
    }
}

/// Declared `mp_entropy_set_max`.
pub(crate) const ENTROPY_SET_MAX: usize = 256;
/// Declared `mp_window_max`.
pub(crate) const WINDOW_MAX: u32 = 16384;
/// Lowest entropy value (SPEC §10.3).
pub(crate) const ENTROPY_MIN: u16 = 0xC000;

/// The checked, effective MP configuration of a QP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MpConfig {
    pub values: Vec<u16>,
    pub window: u32,
    pub trim_dscp: Option<u8>,
    pub ack_dscp: Option<u8>,
    pub peer_ordered: bool,
    pub tuning: MpTuning,
    pub peer_resource_nak: bool,
    pub max_staged_bytes: u64,
}

fn range(ok: bool, name: &'static str) -> Result<(), VerbsError> {
    if ok {
        Ok(())
    } else {
        Err(VerbsError::OutOfRange(name))
    }
}

impl MpAttrs {
    /// Range checks of §7.1 and §10.3 (MR-MPS-2, MR-MPW-4), and the
    /// derivation of a seeded entropy set.
    pub(crate) fn check(&self, pmtu: u32) -> Result<MpConfig, VerbsError> {
        let values = match &self.entropy {
            MpEntropy::Values(v) => v.clone(),
            MpEntropy::Seeded { n, seed } => {
                range(
                    (1..=ENTROPY_SET_MAX as u16).contains(n),
                    "mp_entropy_set_size",
                )?;
                derive_values(usize::from(*n), *seed)
            }
        };
        // MR-MPS-2: 1..=256 distinct values in 0xC000–0xFFFF.
        range(
            (1..=ENTROPY_SET_MAX).contains(&values.len()),
            "mp_entropy_set_size",
        )?;
        range(values.iter().all(|&v| v >= ENTROPY_MIN), "mp_entropy_set")?;
        let mut sorted = values.clone();
        sorted.sort_unstable();
        sorted.dedup();
        range(sorted.len() == values.len(), "mp_entropy_set")?;
        // MR-MPW-4.
        range((64..=WINDOW_MAX).contains(&self.window), "mp_window")?;
        range(self.trim_dscp.is_none_or(|d| d <= 63), "mp_trim_dscp")?;
        range(self.ack_dscp.is_none_or(|d| d <= 63), "mp_ack_dscp")?;
        let t = &self.tuning;
        let us = 1_000;
        range(
            (1..=64).contains(&t.reorder_threshold),
            "mp_reorder_threshold",
        )?;
        range(
            (1..=64).contains(&t.ack_coalesce_count),
            "mp_ack_coalesce_count",
        )?;
        range(
            (us..=64 * us).contains(&t.ack_coalesce_time_ns),
            "mp_ack_coalesce_time",
        )?;
        range(
            (10 * us..=10_000 * us).contains(&t.rto_min_ns),
            "mp_rto_min",
        )?;
        range(
            (1_000 * us..=1_000_000 * us).contains(&t.rto_max_ns),
            "mp_rto_max",
        )?;
        range(
            (t.rto_min_ns..=t.rto_max_ns).contains(&t.rto_init_ns),
            "mp_rto_init",
        )?;
        range((us..=10_000 * us).contains(&t.base_rtt_ns), "mp_base_rtt")?;
        range(
            (us..=1_000 * us).contains(&t.target_qdelay_ns),
            "mp_target_qdelay",
        )?;
        range(
            (u64::from(pmtu)..=67_108_864).contains(&t.cwnd_max),
            "mp_cwnd_max",
        )?;
        range(
            (u64::from(pmtu)..=t.cwnd_max).contains(&t.cwnd_init),
            "mp_cwnd_init",
        )?;
        range((50..=500).contains(&t.md_factor_milli), "mp_md_factor")?;
        range((256..=1_048_576).contains(&t.ai_bytes), "mp_ai_bytes")?;
        range(
            (10 * us..=1_000_000 * us).contains(&t.retire_hold_ns),
            "mp_retire_hold",
        )?;
        range(
            (t.retire_hold_ns..=10_000_000 * us).contains(&t.retire_hold_max_ns),
            "mp_retire_hold_max",
        )?;
        Ok(MpConfig {
            values,
            window: self.window,
            trim_dscp: self.trim_dscp,
            ack_dscp: self.ack_dscp,
            peer_ordered: self.peer_ordered,
            tuning: self.tuning,
            peer_resource_nak: self.peer_resource_nak,
            max_staged_bytes: self.max_staged_bytes,
        })
    }
}

impl MpConfig {
    /// The DSCPs this QP sends with (MR-MPA-12, MR-MPT-9).
    pub(crate) fn dscps(&self) -> Dscps {
        Dscps {
            trim: self.trim_dscp,
            ack: self.ack_dscp,
        }
    }
}

/// The DSCPs of an MP QP's packets: data packets carry the path's traffic
/// class but never `mp_trim_dscp` (MR-MPT-9); MP ACKs, MP Atomic
/// Acknowledges and MP Probes carry `mp_ack_dscp` when it is set, else the
/// data DSCP (MR-MPA-12). ECN bits are the packet's own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Dscps {
    trim: Option<u8>,
    ack: Option<u8>,
}

impl Dscps {
    /// `path` for a data packet (requests, READ responses).
    pub(crate) fn data(self, path: &mut crate::wire::Path) {
        if self.trim.is_some_and(|d| path.traffic_class >> 2 == d) {
            path.traffic_class &= 0x03;
        }
    }

    /// `path` for an MP ACK, MP Atomic Acknowledge or MP Probe.
    pub(crate) fn control(self, path: &mut crate::wire::Path) {
        match self.ack {
            Some(d) => path.traffic_class = (d << 2) | (path.traffic_class & 0x03),
            None => self.data(path),
        }
    }
}

/// `n` distinct values in 0xC000–0xFFFF from `seed` (splitmix64 stream).
pub(crate) fn derive_values(n: usize, seed: u64) -> Vec<u16> {
    let mut rng = SplitMix64::new(seed);
    let mut out: Vec<u16> = Vec::with_capacity(n);
    while out.len() < n.min(0x4000) {
        let v = ENTROPY_MIN | (rng.next_u64() as u16 & 0x3FFF);
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dscps_of_data_and_control_packets_mr_mpa_12_mr_mpt_9() {
        let path = crate::wire::Path {
            src_mac: [0; 6],
            dst_mac: [0; 6],
            src_ip: core::net::Ipv4Addr::UNSPECIFIED,
            dst_ip: core::net::Ipv4Addr::UNSPECIFIED,
            udp_src_port: 0xC000,
            traffic_class: (10 << 2) | 2,
            hop_limit: 64,
            pkey: 0xFFFF,
            dest_qp: 1,
        };
        let tc = |d: Dscps, control: bool| {
            let mut p = path;
            if control {
                d.control(&mut p);
            } else {
                d.data(&mut p);
            }
            p.traffic_class
        };
        let plain = Dscps::default();
        assert_eq!(
            (tc(plain, false), tc(plain, true)),
            ((10 << 2) | 2, (10 << 2) | 2)
        );
        let ack = Dscps {
            trim: None,
            ack: Some(46),
        };
        assert_eq!(tc(ack, false), (10 << 2) | 2, "data keep the traffic class");
        assert_eq!(tc(ack, true), (46 << 2) | 2, "MR-MPA-12");
        let trim = Dscps {
            trim: Some(10),
            ack: None,
        };
        assert_eq!((tc(trim, false), tc(trim, true)), (2, 2), "MR-MPT-9");
    }

    #[test]
    fn seeded_sets_are_distinct_and_in_range() {
        let c = MpAttrs::default().check(4096).unwrap();
        assert_eq!(c.values.len(), 128);
        let mut s = c.values.clone();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s.len(), 128);
        assert!(c.values.iter().all(|&v| v >= 0xC000));
    }

    #[test]
    fn bad_sets_and_windows_are_rejected() {
        let mut a = MpAttrs {
            entropy: MpEntropy::Values(vec![0xC000, 0xC000]),
            ..MpAttrs::default()
        };
        assert!(a.check(4096).is_err());
        a.entropy = MpEntropy::Values(vec![0xBFFF]);
        assert!(a.check(4096).is_err());
        a.entropy = MpEntropy::Values(vec![]);
        assert!(a.check(4096).is_err());
        a.entropy = MpEntropy::Values(vec![0xC001]);
        assert!(a.check(4096).is_ok());
        a.window = 63;
        assert!(a.check(4096).is_err());
        a.window = 16385;
        assert!(a.check(4096).is_err());
    }
}
