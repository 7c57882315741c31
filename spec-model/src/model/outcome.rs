//! What the model says may be observed after an event.
//!
//! A state machine of the model is a pure function
//! `(state, event) -> (state, Outcomes)`. [`Outcomes`] is a *set* of allowed
//! observations, not one pick: where SPEC.md allows a choice (coalescing an
//! ACK, a credit value, a retransmission time inside a window) the model
//! returns every allowed alternative, and a judge checks what it saw against
//! them. Every effect carries the requirement IDs that demand or allow it, so
//! a mismatch becomes a [`crate::Finding`] against the right requirement.

use metaroce_codec::ext::{AtomicEthRepr, DethRepr, FethRepr, RethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, Psn};

/// A constraint on one observed value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Field<T> {
    /// Any value is allowed.
    Any,
    /// Exactly this value.
    Exact(T),
    /// One of these values.
    OneOf(Vec<T>),
}

impl<T> Default for Field<T> {
    /// [`Field::Any`]: no constraint.
    fn default() -> Self {
        Field::Any
    }
}

impl<T: PartialEq> Field<T> {
    /// Whether `value` satisfies the constraint.
    pub fn allows(&self, value: &T) -> bool {
        match self {
            Field::Any => true,
            Field::Exact(v) => v == value,
            Field::OneOf(vs) => vs.contains(value),
        }
    }
}

/// Which syndromes an acknowledgement may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyndromeSpec {
    /// Any ACK syndrome (0x00–0x1F): the credit code is the responder's choice.
    AnyAck,
    /// An RNR NAK (0x20–0x3F) with this timer code.
    RnrNak {
        /// Timer code the responder's `min_rnr_timer` gives.
        timer: u8,
    },
    /// Exactly this syndrome (a NAK).
    Exact(Syndrome),
    /// An ACK whose credit code is `code` or 31 (no limit): what a responder
    /// that declares `credits` may send (MR-CRD-2).
    AckCredits {
        /// The credit code of the receive work requests posted and not consumed:
        /// the largest code allowed ("MR-CRD-2": any code up to it, or 31).
        code: u8,
    },
    /// An RNR NAK with any timer code (the responder's `min_rnr_timer` is unknown).
    AnyRnrNak,
}

impl SyndromeSpec {
    /// Whether `syndrome` satisfies the constraint.
    pub fn allows(&self, syndrome: Syndrome) -> bool {
        match *self {
            SyndromeSpec::AnyAck => syndrome.0 <= 0x1F,
            SyndromeSpec::RnrNak { timer } => syndrome.0 == 0x20 | (timer & 0x1F),
            SyndromeSpec::Exact(s) => s == syndrome,
            // "MR-CRD-2": a code not above the receive WRs posted, or 31.
            SyndromeSpec::AckCredits { code } => {
                syndrome.0 <= (code & 0x1F) || syndrome == Syndrome::ACK_UNLIMITED
            }
            SyndromeSpec::AnyRnrNak => (0x20..=0x3F).contains(&syndrome.0),
        }
    }
}

/// Constraints on a packet the implementation must or may send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketSpec {
    /// Opcode.
    pub opcode: Field<Opcode>,
    /// BTH PSN.
    pub psn: Field<Psn>,
    /// BTH DestQP.
    pub dest_qp: Field<u32>,
    /// AETH or SACKETH syndrome, when the opcode carries one.
    pub syndrome: Option<SyndromeSpec>,
    /// AETH or SACKETH MSN, when the opcode carries one.
    pub msn: Field<Msn>,
    /// Payload bytes (READ responses), when known.
    pub payload: Field<Vec<u8>>,
    /// AtomicAckETH original value (atomic acknowledgements).
    pub atomic_orig: Field<u64>,
    /// BTH flags, P_Key, request extension headers and payload length.
    /// [`HeaderSpec::default`] constrains none of them (out of line, and
    /// not allocated while unconstrained, to keep [`Effect`] small).
    pub headers: OutOfLine<HeaderSpec>,
    /// UDP source port (MP: the entropy value). Added for MP; `Any` by default.
    pub udp_src_port: Field<u16>,
    /// MPETH fields (MP requests, probes and READ responses). Added for MP;
    /// every field `Any` by default (out of line, not allocated then).
    pub mpeth: OutOfLine<MpethSpec>,
    /// SACKETH fields other than syndrome and MSN (MP ACK, MP Atomic
    /// Acknowledge). Added for MP; every field `Any` by default (out of
    /// line, not allocated then).
    pub sacketh: OutOfLine<SackethSpec>,
}

/// A part of a [`PacketSpec`] that most specs leave unconstrained, kept out
/// of line: nothing is allocated while it is its default (every field
/// `Any`), so a spec that does not constrain it stays small and cheap to
/// build, move and drop. It reads as a `T` (`Deref`); writing through it
/// (`DerefMut`) allocates the default first. Two are equal when the values
/// they read as are, and it prints as the value.
#[derive(Clone, Default)]
pub struct OutOfLine<T: Unconstrained>(Option<Box<T>>);

/// A value with an unconstrained default that lives for the whole program,
/// for [`OutOfLine`] to read as while nothing is allocated.
pub trait Unconstrained: Default + 'static {
    /// The default value (every field `Any`).
    fn unconstrained() -> &'static Self;
}

impl<T: Unconstrained> OutOfLine<T> {
    /// Keeps `value` (allocated).
    pub fn new(value: T) -> Self {
        OutOfLine(Some(Box::new(value)))
    }
}

impl<T: Unconstrained> From<T> for OutOfLine<T> {
    fn from(value: T) -> Self {
        OutOfLine::new(value)
    }
}

impl<T: Unconstrained> std::ops::Deref for OutOfLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        match &self.0 {
            Some(value) => value,
            None => T::unconstrained(),
        }
    }
}

impl<T: Unconstrained> std::ops::DerefMut for OutOfLine<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0.get_or_insert_with(Box::default)
    }
}

impl<T: Unconstrained + PartialEq> PartialEq for OutOfLine<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Unconstrained + Eq> Eq for OutOfLine<T> {}

impl<T: Unconstrained + std::fmt::Debug> std::fmt::Debug for OutOfLine<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl Unconstrained for HeaderSpec {
    fn unconstrained() -> &'static Self {
        static ANY: HeaderSpec = HeaderSpec {
            ack_req: Field::Any,
            se: Field::Any,
            pkey: Field::Any,
            reth: Field::Any,
            atomic_eth: Field::Any,
            immdt: Field::Any,
            ieth: Field::Any,
            feth: Field::Any,
            deth: Field::Any,
            payload_len: Field::Any,
            dscp: Field::Any,
        };
        &ANY
    }
}

impl Unconstrained for MpethSpec {
    fn unconstrained() -> &'static Self {
        static ANY: MpethSpec = MpethSpec {
            first: Field::Any,
            last: Field::Any,
            retransmission: Field::Any,
            msn: Field::Any,
            offset: Field::Any,
            msg_len: Field::Any,
            timestamp: Field::Any,
            dma_len: Field::Any,
            ordered: Field::Any,
        };
        &ANY
    }
}

impl Unconstrained for SackethSpec {
    fn unconstrained() -> &'static Self {
        static ANY: SackethSpec = SackethSpec {
            ecn_ce: Field::Any,
            retransmission: Field::Any,
            trimmed: Field::Any,
            sack_base_psn: Field::Any,
            sack_bitmap: Field::Any,
            echoed_entropy: Field::Any,
            echoed_timestamp: Field::Any,
        };
        &ANY
    }
}

/// Constraints on the BTH flags, the P_Key, the request extension headers and
/// the payload length of a packet (used by the requester model; every field
/// defaults to [`Field::Any`]).
///
/// A header constrained to `Exact(h)` must be present with exactly those
/// values; which headers a packet carries at all follows from its opcode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeaderSpec {
    /// BTH AckReq.
    pub ack_req: Field<bool>,
    /// BTH SE (solicited event).
    pub se: Field<bool>,
    /// BTH P_Key.
    pub pkey: Field<u16>,
    /// RETH.
    pub reth: Field<RethRepr>,
    /// AtomicETH.
    pub atomic_eth: Field<AtomicEthRepr>,
    /// Immediate data.
    pub immdt: Field<u32>,
    /// IETH R_Key.
    pub ieth: Field<u32>,
    /// FETH.
    pub feth: Field<FethRepr>,
    /// DETH.
    pub deth: Field<DethRepr>,
    /// Payload bytes (pad excluded).
    pub payload_len: Field<u32>,
    /// The IP header's DSCP (MP: MR-MPA-12), judged by
    /// [`crate::model::mp::spec_allows_dscp`] where the IP header is known.
    pub dscp: Field<u8>,
}

/// Constraints on the MPETH of a packet (SPEC.md §7.2). `Default` is all `Any`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MpethSpec {
    /// F flag.
    pub first: Field<bool>,
    /// L flag.
    pub last: Field<bool>,
    /// R flag.
    pub retransmission: Field<bool>,
    /// MPETH MSN.
    pub msn: Field<Msn>,
    /// Offset.
    pub offset: Field<u32>,
    /// Message length.
    pub msg_len: Field<u32>,
    /// Timestamp.
    pub timestamp: Field<u32>,
    /// RETH DMA length (MP WRITE, MP READ Request), when RETH is present.
    pub dma_len: Field<u32>,
    /// O flag (SPEC v1.2 §7.5, MR-MPP-21).
    pub ordered: Field<bool>,
}

/// Constraints on the SACKETH of a packet (SPEC.md §7.2) besides its syndrome
/// and MSN, which [`PacketSpec::syndrome`] and [`PacketSpec::msn`] hold.
/// `Default` is all `Any`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SackethSpec {
    /// E flag.
    pub ecn_ce: Field<bool>,
    /// R flag.
    pub retransmission: Field<bool>,
    /// T flag.
    pub trimmed: Field<bool>,
    /// SACK base PSN.
    pub sack_base_psn: Field<Psn>,
    /// SACK bitmap.
    pub sack_bitmap: Field<u64>,
    /// Echoed entropy.
    pub echoed_entropy: Field<u16>,
    /// Echoed timestamp.
    pub echoed_timestamp: Field<u32>,
}

impl PacketSpec {
    /// A packet with only its opcode constrained.
    pub fn opcode(opcode: Opcode) -> Self {
        PacketSpec {
            opcode: Field::Exact(opcode),
            psn: Field::Any,
            dest_qp: Field::Any,
            syndrome: None,
            msn: Field::Any,
            payload: Field::Any,
            atomic_orig: Field::Any,
            headers: OutOfLine::default(),
            udp_src_port: Field::Any,
            mpeth: OutOfLine::default(),
            sacketh: OutOfLine::default(),
        }
    }
}

/// The verbs work-completion statuses SPEC.md uses (numeric values as verbs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WcStatus {
    /// 0.
    Success = 0,
    /// 1: local length error.
    LocLenErr = 1,
    /// 2: local QP operation error.
    LocQpOpErr = 2,
    /// 4: local protection error.
    LocProtErr = 4,
    /// 5: flushed.
    WrFlushErr = 5,
    /// 7: bad response.
    BadRespErr = 7,
    /// 9: remote invalid request.
    RemInvReqErr = 9,
    /// 10: remote access error.
    RemAccessErr = 10,
    /// 11: remote operational error.
    RemOpErr = 11,
    /// 12: transport retry counter exceeded.
    RetryExcErr = 12,
    /// 13: RNR retry counter exceeded.
    RnrRetryExcErr = 13,
    /// 19: fatal error.
    FatalErr = 19,
}

/// Constraints on a work completion the agent reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompletionSpec {
    /// Work request the completion is for (the model's own numbering, in posting order).
    pub wr: u64,
    /// Status.
    pub status: Field<WcStatus>,
    /// Byte count (receive completions).
    pub byte_len: Field<u32>,
    /// Immediate data, when present.
    pub imm: Field<Option<u32>>,
}

/// One observable effect.
// PacketSpec is large since the MP fields; clarity over size (the model is not fast code).
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// A packet on the wire.
    Send(PacketSpec),
    /// Bytes placed in a memory region (R_Key or L_Key, offset from the region start).
    Write {
        /// Key of the region.
        key: u32,
        /// Offset from the region's start.
        offset: u64,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// A work completion.
    Complete(CompletionSpec),
    /// The memory region or window named by `key` is invalidated (SEND with
    /// Invalidate); the receive completion reports `key`.
    Invalidate {
        /// The invalidated R_Key.
        key: u32,
    },
    /// The QP enters ERR.
    EnterError,
    /// The packet is dropped with no state change and nothing sent; the counter
    /// of SPEC.md §9.3 it bumps, if any.
    Drop {
        /// Counter name, e.g. `"malformed_drops"`.
        counter: Option<&'static str>,
    },
}

/// An effect with the requirements that demand or allow it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cited<T> {
    /// The effect.
    pub value: T,
    /// Requirement IDs (`MR-<AREA>-<n>`).
    pub reqs: &'static [&'static str],
}

/// Everything the model allows after one event.
///
/// Every `required` effect must be observed; `optional` effects may be;
/// anything else observed breaks a requirement. `alternatives` lists further
/// complete outcome sets the spec allows instead of this one (for example
/// "ACK now" or "coalesce"); a judge accepts an observation that fits any.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcomes {
    /// Effects that must be observed.
    pub required: Vec<Cited<Effect>>,
    /// Effects that may be observed.
    pub optional: Vec<Cited<Effect>>,
    /// Other complete sets of outcomes the spec allows instead.
    pub alternatives: Vec<Outcomes>,
}

impl Outcomes {
    /// Nothing observable.
    pub fn none() -> Self {
        Outcomes::default()
    }

    /// Adds a required effect.
    #[must_use]
    pub fn require(mut self, reqs: &'static [&'static str], effect: Effect) -> Self {
        self.required.push(Cited {
            value: effect,
            reqs,
        });
        self
    }

    /// Adds an optional effect.
    #[must_use]
    pub fn allow(mut self, reqs: &'static [&'static str], effect: Effect) -> Self {
        self.optional.push(Cited {
            value: effect,
            reqs,
        });
        self
    }

    /// Adds an alternative outcome set.
    #[must_use]
    pub fn or(mut self, other: Outcomes) -> Self {
        self.alternatives.push(other);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndrome_constraints() {
        assert!(SyndromeSpec::AnyAck.allows(Syndrome(0x00)));
        assert!(SyndromeSpec::AnyAck.allows(Syndrome(0x1F)));
        assert!(!SyndromeSpec::AnyAck.allows(Syndrome(0x20)));
        assert!(SyndromeSpec::RnrNak { timer: 14 }.allows(Syndrome(0x2E)));
        assert!(!SyndromeSpec::RnrNak { timer: 14 }.allows(Syndrome(0x2D)));
        assert!(SyndromeSpec::Exact(Syndrome::NAK_PSN_SEQ).allows(Syndrome(0x60)));
        let credits = SyndromeSpec::AckCredits { code: 3 };
        assert!(credits.allows(Syndrome(0x03)) && credits.allows(Syndrome(0x1F)));
        assert!(
            credits.allows(Syndrome(0x00)),
            "fewer credits than posted (MR-CRD-2)"
        );
        assert!(!credits.allows(Syndrome(0x04)));
        assert!(SyndromeSpec::AnyRnrNak.allows(Syndrome(0x20)));
        assert!(SyndromeSpec::AnyRnrNak.allows(Syndrome(0x3F)));
        assert!(!SyndromeSpec::AnyRnrNak.allows(Syndrome(0x1F)));
    }

    #[test]
    fn field_constraints() {
        assert!(Field::Any.allows(&3));
        assert!(Field::Exact(3).allows(&3) && !Field::Exact(3).allows(&4));
        assert!(Field::OneOf(vec![1, 2]).allows(&2) && !Field::OneOf(vec![1, 2]).allows(&3));
    }
}
