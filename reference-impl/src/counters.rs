//! The per-device counters of SPEC §9.3, Base and MP.

/// Event counters (SPEC §9.3). Each equals the number of events of its kind
/// (MR-ROB-10); they only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets dropped for a wrong ICRC (MR-ICRC-7).
    pub icrc_errors: u64,
    /// Packets dropped by rows 1–9, 11–17 and 20 of §9.2.
    pub malformed_drops: u64,
    /// Packets dropped for DestQP 0, 1, 0xFFFFFF or a missing QP.
    pub unknown_qp_drops: u64,
    /// Packets dropped for a P_Key mismatch.
    pub pkey_violations: u64,
    /// UD packets dropped for a Q_Key mismatch.
    pub qkey_violations: u64,
    /// NAK 0x60 sent.
    pub seq_naks_sent: u64,
    /// RNR NAKs sent.
    pub rnr_naks_sent: u64,
    /// Duplicate request packets received.
    pub duplicate_requests: u64,
    /// Retries caused by the local ACK timeout.
    pub local_ack_timeouts: u64,
    /// Request packets retransmitted.
    pub retransmitted_packets: u64,
    /// CNPs sent.
    pub cnp_sent: u64,
    /// CNPs received for existing QPs.
    pub cnp_received: u64,
    /// Packets received with ECN CE.
    pub ecn_ce_received: u64,
    /// MP request packets dropped outside the receive window (MR-MPW-1).
    pub mp_out_of_window: u64,
    /// Trimmed MP packets received (§7.10).
    pub mp_trimmed_received: u64,
    /// MP retransmissions (and READ re-requests) under rule (a) of §7.8
    /// or MR-MPR-6's K later responses.
    pub mp_retx_reorder: u64,
    /// MP retransmissions (and READ re-requests) after the RTO, rule (b).
    pub mp_retx_timeout: u64,
    /// MP retransmissions (and READ re-requests) after a NAK 0x65 or a
    /// trimmed READ response.
    pub mp_retx_trim: u64,
    /// MP entropy values retired (MR-MPF-9).
    pub mp_entropy_retired: u64,
    /// MP probes sent (MR-MPF-9).
    pub mp_probes_sent: u64,
    /// Frames handed out by `poll_transmit` (not a SPEC counter).
    pub frames_sent: u64,
    /// Frames given to `handle_frame` (not a SPEC counter).
    pub frames_received: u64,
}
