//! The bug zoo (feature `zoo`): deliberately broken variants of the
//! reference transport, one wrong behaviour each, for testing the
//! conformance suite and the fuzzers. A suite that passes the transport
//! must fail every mutant; `reference-impl/ZOO.md` tabulates them.
//!
//! A mutant is selected by [`crate::DeviceConfig::mutant`]; a
//! [`crate::Device`] built with it behaves broken in exactly that one way
//! and correctly in every other. In the code, each departure is one
//! `zoo!(…, Name …)` hook (see `src/zoo_hook.rs`) marked `// zoo: <name>`
//! at the place where the correct behaviour is decided; without the feature
//! the hooks expand to the correct code alone.
//!
//! Names are stable: they appear on command lines (`--iut
//! builtin:mutant=NAME`) and in reports.
// traceability: ignore-file (requirement IDs here are data: what each
// mutant breaks, not what the transport implements)

mod frame;
mod replay;

pub(crate) use frame::{pad_overrun, zero_padcnt};
pub(crate) use replay::{atomic_again, place_again};

use core::fmt;
use core::str::FromStr;

/// The conformance profile whose behaviour a mutant breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Profile {
    /// RoCEv2 Base (RC, UD, CNP; SPEC §6).
    Base,
    /// Multipath (SPEC §7).
    Mp,
}

/// Which side of an exchange a mutant breaks: the implementation under
/// test as responder (it receives requests; the harness plays the
/// requester) or as requester (it sends requests; the harness answers).
/// Receive-path checks (ICRC, keys, CNP generation, robustness) count as
/// responder behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The mutant shows in what the device answers.
    Responder,
    /// The mutant shows in what the device sends on its own.
    Requester,
}

/// Defines [`Mutant`] and its tables from one list, so a name, profile,
/// role, description, symptom and requirement list can never drift apart.
macro_rules! mutants {
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident = $name:literal, $profile:ident, $role:ident,
        [$($req:literal),+ $(,)?],
        $what:literal,
        $shows:literal;
    )*) => {
        /// One deliberately broken variant of the reference transport.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Mutant {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Mutant {
            /// Every mutant, in the order of `ZOO.md`.
            pub const ALL: &'static [Mutant] = &[$(Mutant::$variant),*];

            /// The stable name (kebab-case).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Mutant::$variant => $name,)*
                }
            }

            /// What is broken.
            pub const fn description(self) -> &'static str {
                match self {
                    $(Mutant::$variant => $what,)*
                }
            }

            /// How it shows on the wire or through the agent (completions,
            /// memory bytes, counters) in a short exchange.
            pub const fn symptom(self) -> &'static str {
                match self {
                    $(Mutant::$variant => $shows,)*
                }
            }

            /// The SPEC.md requirements the mutant breaks.
            pub const fn requirements(self) -> &'static [&'static str] {
                match self {
                    $(Mutant::$variant => &[$($req),+],)*
                }
            }

            /// The profile whose behaviour it breaks.
            pub const fn profile(self) -> Profile {
                match self {
                    $(Mutant::$variant => Profile::$profile,)*
                }
            }

            /// The side of the exchange it breaks.
            pub const fn role(self) -> Role {
                match self {
                    $(Mutant::$variant => Role::$role,)*
                }
            }
        }
    };
}

mutants! {
    /// Acknowledges carry MSN + 1.
    MsnOffByOne = "msn-off-by-one", Base, Responder,
        ["MR-ACK-2", "MR-MSN-2"],
        "Acknowledges carry the responder's MSN plus one in their AETH.",
        "After the first SEND the ACK's AETH MSN is 2 instead of 1.";
    /// Acknowledges name the PSN after the one executed.
    AckPsnOffByOne = "ack-psn-off-by-one", Base, Responder,
        ["MR-ACK-2", "MR-ACK-4"],
        "Acknowledges carry the expected PSN instead of the last executed one: they acknowledge a PSN not received yet.",
        "The ACK of a SEND at PSN p has BTH PSN p + 1; the requester drops it as beyond its sent PSNs, so the SEND completes only after a local ACK timeout and a retry.";
    /// A sequence NAK per out-of-sequence packet.
    SeqNakEveryPacket = "seq-nak-every-packet", Base, Responder,
        ["MR-NAK-2"],
        "A sequence NAK (0x60) is sent for every out-of-sequence packet, not once per gap.",
        "Three packets after a lost one draw three NAK 0x60 (seq_naks_sent 3) instead of one.";
    /// Duplicate READs are dropped.
    DupReadIgnored = "dup-read-ignored", Base, Responder,
        ["MR-DUP-4"],
        "A duplicate READ request matching a kept READ is dropped instead of re-executed.",
        "A repeated READ request gets no READ responses (correct: the READ is answered again, with memory read again).";
    /// Duplicate atomics are executed again.
    AtomicReplayReexecutes = "atomic-replay-reexecutes", Base, Responder,
        ["MR-DUP-5", "MR-ATOM-3"],
        "A duplicate atomic is executed again instead of answered with the kept original value.",
        "A repeated Fetch-Add adds twice to the word, and the second Atomic Acknowledge carries the already-added value.";
    /// WRITE bounds check lets one byte past the MR through (memory bug).
    RkeyBoundsOffByOne = "rkey-bounds-off-by-one", Base, Responder,
        ["MR-RSP-6", "MR-SEC-4", "MR-SEC-5"],
        "The R_Key range check of a WRITE accepts a range that ends one byte past the MR; that byte lands in the memory after the MR (in this model: the first byte of the region registered next).",
        "A WRITE ending one byte past the MR is acknowledged instead of NAK 0x62 with the QP to ERR; the MR's bytes change and the first byte of the next-registered MR is overwritten (a MEMORY finding).";
    /// READ may run past the MR end and leaks what follows (memory bug).
    ReadLeak = "read-leak", Base, Responder,
        ["MR-SEC-6", "MR-SEC-4", "MR-RSP-6"],
        "The range check of a READ lets it run up to 4 KiB past the MR end; the bytes past the end are read from the memory after the MR (the regions registered next).",
        "A READ past the MR end is answered instead of NAK 0x62, and its response carries the bytes of another MR (a MEMORY finding).";
    /// The MR's remote-write right is not checked.
    WriteAccessUnchecked = "write-access-unchecked", Base, Responder,
        ["MR-RSP-6"],
        "The MR's access rights are not checked for WRITE: a WRITE into an MR registered without remote_write is placed.",
        "The WRITE is acknowledged instead of NAK 0x62 and the MR's bytes change.";
    /// RNR NAKs carry timer code 0.
    RnrTimerCodeZero = "rnr-timer-code-zero", Base, Responder,
        ["MR-RNR-1"],
        "RNR NAKs carry timer code 0 (655.36 ms) instead of the QP's min_rnr_timer.",
        "With min_rnr_timer 1 the RNR NAK's syndrome is 0x20 instead of 0x21.";
    /// ACKs carry credit code 0.
    CreditCodeZero = "credit-code-zero", Base, Responder,
        ["MR-CRD-1"],
        "ACKs carry credit code 0 (no credits) although the responder does not declare credits.",
        "The ACK syndrome is 0x00 instead of 0x1F.";
    /// SEND with Invalidate does not invalidate.
    SendInvIgnored = "send-inv-ignored", Base, Responder,
        ["MR-RSP-10", "MR-SEC-8"],
        "A SEND with Invalidate completes without invalidating the R_Key it names.",
        "The receive completion reports no invalidated R_Key, and a later WRITE with that R_Key is placed instead of NAK 0x62.";
    /// The ICRC is not checked on receive.
    IcrcNotChecked = "icrc-not-checked", Base, Responder,
        ["MR-ICRC-3", "MR-ICRC-4"],
        "The ICRC of received packets is not checked.",
        "A WRITE with a corrupted ICRC is placed and acknowledged; icrc_errors stays 0.";
    /// The P_Key is not checked on receive.
    PkeyNotChecked = "pkey-not-checked", Base, Responder,
        ["MR-BTH-5"],
        "The P_Key of a received packet is not compared with the QP's.",
        "A SEND with another P_Key is executed and acknowledged; pkey_violations stays 0.";
    /// QPs are looked up by the low 16 bits of DestQP.
    QpnLowBits = "qpn-low-bits", Base, Responder,
        ["MR-BTH-6"],
        "The destination QP is looked up by the low 16 bits of DestQP only.",
        "A packet to a QPN that names no QP but shares its low 16 bits with one is executed and answered instead of dropped (unknown_qp_drops).";
    /// UD Q_Keys are not checked.
    QkeyNotChecked = "qkey-not-checked", Base, Responder,
        ["MR-UD-2"],
        "A UD receiver does not compare the DETH Q_Key with the QP's.",
        "A UD SEND with a wrong Q_Key is delivered (a receive completion); qkey_violations stays 0.";
    /// No CNPs.
    CnpNeverSent = "cnp-never-sent", Base, Responder,
        ["MR-CNP-1"],
        "No CNP is sent for CE-marked packets.",
        "A CE-marked request is acknowledged but draws no CNP; cnp_sent stays 0.";
    /// CNPs are not paced.
    CnpNotPaced = "cnp-not-paced", Base, Responder,
        ["MR-CNP-2"],
        "CNPs are not paced: every CE-marked packet draws one.",
        "Two CE-marked packets 1 µs apart draw two CNPs; cnp_interval (50 µs) allows one.";
    /// Liveness: the whole device stops after a bad PadCnt.
    WedgeOnBadPadcnt = "wedge-on-bad-padcnt", Base, Responder,
        ["MR-ROB-5", "MR-ROB-6", "MR-ROB-7"],
        "After a packet dropped for its PadCnt (more pad than bytes after the headers, or PadCnt on an opcode without payload: §9.2 rows 8 and 20), the device drops every later packet, for every QP.",
        "After one READ request with PadCnt 1, a valid SEND to any QP (a sentinel QP included) draws no ACK and no completion (correct: the bad packet is dropped, nothing else changes).";
    /// Liveness: a QP stops after a reserved opcode.
    WedgeOnUnknownOpcode = "wedge-on-unknown-opcode", Base, Responder,
        ["MR-OPC-2", "MR-ROB-5"],
        "After a packet with a reserved opcode, the addressed QP drops every later packet.",
        "After one packet with opcode 0x15, a valid SEND to that QP draws no ACK and no completion (other QPs still answer).";
    /// Sent packets carry PadCnt 0 with their pad.
    PadcntZero = "padcnt-zero", Base, Requester,
        ["MR-PKT-4"],
        "Sent packets carry PadCnt 0 while keeping their pad bytes, so the receiver takes the pad for payload.",
        "A 5-byte SEND has PadCnt 0 instead of 3 and arrives as 8 bytes.";
    /// No AckReq on the last packet.
    AckReqNeverOnLast = "ackreq-never-on-last", Base, Requester,
        ["MR-PKT-6"],
        "AckReq is not set in the last or only packet of a SEND or WRITE.",
        "A SEND Only leaves with AckReq 0 and draws no ACK; its retransmissions neither, so alone it ends in RETRY_EXC_ERR instead of SUCCESS.";
    /// The RNR wait is not honoured.
    RnrWaitIgnored = "rnr-wait-ignored", Base, Requester,
        ["MR-RNR-3"],
        "After an RNR NAK the requester resends at once, ignoring the NAK's timer.",
        "The retransmission after an RNR NAK with code 1 leaves at the NAK's arrival instead of 10 µs later.";
    /// retry_cnt is not enforced.
    RetryForever = "retry-forever", Base, Requester,
        ["MR-TMR-5", "MR-TMR-6"],
        "retry_cnt is not enforced: go-back-N retries never end in RETRY_EXC_ERR.",
        "With retry_cnt 1 and no answer the request is still resent after ten timeouts, with no error completion and the QP in RTS.";
    /// MP: duplicates are placed again after completion.
    MpReplaceAfterComplete = "mp-replace-after-complete", Mp, Responder,
        ["MR-MPP-8", "MR-MPW-3"],
        "A duplicate MP WRITE packet is placed again after its message completed.",
        "Memory rewritten after the WRITE completed is overwritten again by a retransmitted packet of that WRITE.";
    /// MP: the SACK bitmap is shifted by one.
    MpSackOffByOne = "mp-sack-off-by-one", Mp, Responder,
        ["MR-MPA-4", "MR-MPA-9"],
        "SACK bitmap bit i reports PSN base + i + 1 instead of base + i.",
        "With PSN c + 1 lost and c + 2 received the bitmap is 0x8000… (c + 1 claimed received) instead of 0x4000….";
    /// MP: the receive window is not enforced.
    MpWindowNotEnforced = "mp-window-not-enforced", Mp, Responder,
        ["MR-MPW-1", "MR-SEC-10"],
        "The MP receive window is not enforced: PSNs up to 2^23 − 1 beyond the cumulative ACK PSN are accepted.",
        "A WRITE at PSN c + W + 1 is placed and acknowledged instead of dropped and counted in mp_out_of_window.";
    /// MP: ACKs echo the wrong entropy.
    MpAckEchoWrong = "mp-ack-echo-wrong", Mp, Responder,
        ["MR-MPA-6"],
        "MP ACKs echo their own UDP source port instead of the entropy value of the packet that triggered them.",
        "The SACKETH echoed entropy differs from the UDP source port of the packet acknowledged.";
    /// MP: probes are not answered.
    MpProbeUnanswered = "mp-probe-unanswered", Mp, Responder,
        ["MR-MPF-5"],
        "MP Probes are dropped unanswered.",
        "An MP Probe draws no MP ACK.";
    /// MP: selective acknowledgement ignored; go-back-N on loss.
    MpGoBackN = "mp-go-back-n", Mp, Requester,
        ["MR-MPA-10", "MR-MPL-3", "MR-MPL-6"],
        "The requester ignores SACK bitmaps: a loss is repaired only by the RTO, which resends every unacknowledged PSN, those the peer reported received included.",
        "One lost packet of eight: eight retransmissions after the RTO instead of one as soon as K later packets are selectively acknowledged.";
    /// MP: no spraying.
    MpSingleEntropy = "mp-single-entropy", Mp, Requester,
        ["MR-MPS-3"],
        "Every packet is sent from the first value of the entropy set (no spraying).",
        "Sixteen packets on a QP with sixteen entropy values all carry the same UDP source port.";
    /// MP: cwnd is not applied to first transmissions.
    MpCwndIgnored = "mp-cwnd-ignored", Mp, Requester,
        ["MR-MPC-1"],
        "The congestion window does not limit first transmissions.",
        "With mp_cwnd_init 2 PMTU an 8-packet WRITE leaves at once instead of 2 packets before the first ACK.";
}

impl fmt::Display for Mutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a mutant's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownMutant {
    /// The name given.
    pub name: String,
}

impl fmt::Display for UnknownMutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown mutant `{}`; valid names: ", self.name)?;
        for (i, m) in Mutant::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(m.name())?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownMutant {}

impl FromStr for Mutant {
    type Err = UnknownMutant;

    /// The mutant with this name (exact, as [`Mutant::name`] gives it).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mutant::ALL
            .iter()
            .copied()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownMutant { name: s.into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_kebab_case_and_parse_back() {
        let mut names: Vec<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
        for n in &names {
            assert!(
                n.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{n}"
            );
            assert_eq!(n.parse::<Mutant>().map(Mutant::name), Ok(*n));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Mutant::ALL.len());
    }

    #[test]
    fn unknown_name_lists_the_valid_ones() {
        let e = "msn-off-by-two".parse::<Mutant>().unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("unknown mutant `msn-off-by-two`"),
            "{text}"
        );
        for m in Mutant::ALL {
            assert!(text.contains(m.name()), "{text}");
        }
    }
}
