//! MP ACK content (§7.2 SACKETH, §7.6) and the ACK policy (MR-MPA-1, MR-MPA-2).

use super::{MpResponder, Trigger};
use crate::model::OutOfLine;
use crate::model::outcome::HeaderSpec;
use crate::model::{Effect, Field, Outcomes, PacketSpec, SackethSpec, SyndromeSpec};
use metaroce_codec::ext::Syndrome;
use metaroce_codec::{Opcode, Psn};

/// Accepted packets not yet covered by an MP ACK (MR-MPA-2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckDebt {
    /// Arrival time of the earliest uncovered packet.
    pub first_ns: u64,
    /// Uncovered packets.
    pub count: u32,
}

/// Why an accepted packet needs a prompt MP ACK (MR-MPA-1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckReasons {
    /// AckReq set.
    pub ack_req: bool,
    /// Opens a gap.
    pub opens_gap: bool,
    /// Fills a gap.
    pub fills_gap: bool,
    /// Arrived with CE.
    pub ecn_ce: bool,
    /// Is a duplicate.
    pub duplicate: bool,
}

impl AckReasons {
    /// Any reason at all.
    pub fn any(&self) -> bool {
        self.ack_req || self.opens_gap || self.fills_gap || self.ecn_ce || self.duplicate
    }
}

impl MpResponder {
    /// The entropy values the responder may send from (MR-MPS-1).
    pub(crate) fn own_entropy(&self) -> Field<u16> {
        if self.cfg.entropy_set.is_empty() {
            Field::Any
        } else {
            Field::OneOf(self.cfg.entropy_set.clone())
        }
    }

    pub(crate) fn sack_header(
        &self,
        opcode: Opcode,
        syndrome: SyndromeSpec,
        base: Psn,
        t: &Trigger,
    ) -> PacketSpec {
        PacketSpec {
            psn: Field::Exact(self.received.cum),
            dest_qp: Field::Exact(self.remote_qpn),
            syndrome: Some(syndrome),
            msn: Field::Exact(self.ack_msn()),
            udp_src_port: self.own_entropy(),
            headers: OutOfLine::new(HeaderSpec {
                ack_req: Field::Exact(false),
                // MR-MPA-12.
                dscp: self.cfg.control_dscp(),
                ..HeaderSpec::default()
            }),
            sacketh: OutOfLine::new(SackethSpec {
                ecn_ce: Field::Exact(t.ecn_ce),
                retransmission: Field::Exact(t.retransmission),
                trimmed: Field::Exact(t.trimmed),
                sack_base_psn: Field::Exact(base),
                sack_bitmap: Field::Exact(self.received.bitmap(base)),
                echoed_entropy: Field::Exact(t.entropy),
                echoed_timestamp: Field::Exact(t.timestamp),
            }),
            ..PacketSpec::opcode(opcode)
        }
    }

    /// An MP ACK with ACK syndrome 0x1F triggered by `t`: BTH PSN = c
    /// (MR-MPA-3, MR-MPH-6), base by the SACK base rule and exact bitmap
    /// (MR-MPA-4), MSN (MR-MPA-7), echoes and flags (MR-MPA-6), syndrome 0x1F
    /// (MR-MPA-8).
    pub fn ack_spec(&self, t: &Trigger) -> PacketSpec {
        let base = self.received.ack_base(t.psn);
        self.sack_header(
            Opcode::MP_ACK,
            SyndromeSpec::Exact(Syndrome::ACK_UNLIMITED),
            base,
            t,
        )
    }

    /// An MP ACK carrying NAK `syndrome` for the packet `t` (§7.15): SACK base
    /// PSN = the offending PSN (MR-MPP-15).
    pub(crate) fn nak_spec(&self, syndrome: Syndrome, t: &Trigger) -> PacketSpec {
        self.sack_header(Opcode::MP_ACK, SyndromeSpec::Exact(syndrome), t.psn, t)
    }

    /// NAK 0x65 for a trimmed packet (MR-MPT-5): base = its PSN, T set.
    pub(crate) fn trim_nak_spec(&self, t: &Trigger) -> PacketSpec {
        self.nak_spec(Syndrome::NAK_TRIMMED, t)
    }

    /// RNR NAK 0x20 + `min_rnr_timer` naming the refused PSN (MR-MPP-17).
    pub(crate) fn rnr_spec(&self, t: &Trigger) -> PacketSpec {
        self.sack_header(
            Opcode::MP_ACK,
            SyndromeSpec::RnrNak {
                timer: self.cfg.min_rnr_timer,
            },
            t.psn,
            t,
        )
    }

    /// MP Atomic Acknowledge (MR-MPP-13): ACK syndrome, base = request PSN,
    /// original value `orig` when the model knows it.
    pub(crate) fn atomic_ack_spec(&self, t: &Trigger, orig: Option<u64>) -> PacketSpec {
        let mut spec = self.sack_header(
            Opcode::MP_ATOMIC_ACK,
            SyndromeSpec::Exact(Syndrome::ACK_UNLIMITED),
            t.psn,
            t,
        );
        spec.atomic_orig = orig.map_or(Field::Any, Field::Exact);
        spec
    }

    /// The ACK policy after accepting a packet: an MP ACK is required when a
    /// reason of MR-MPA-1 holds or the coalescing count of MR-MPA-2 is reached,
    /// and allowed otherwise. `t` is the accepted packet.
    pub(crate) fn ack_policy(
        &mut self,
        out: Outcomes,
        t: &Trigger,
        why: AckReasons,
        now: u64,
    ) -> Outcomes {
        self.last_trigger = Some(*t);
        let debt = match self.ack_debt {
            Some(d) => AckDebt {
                first_ns: d.first_ns,
                count: d.count + 1,
            },
            None => AckDebt {
                first_ns: now,
                count: 1,
            },
        };
        let spec = self.ack_spec(t);
        if why.duplicate {
            self.ack_debt = None;
            out.require(&["MR-MPA-1", "MR-MPW-3", "MR-MPP-8"], Effect::Send(spec))
        } else if why.any() {
            self.ack_debt = None;
            out.require(&["MR-MPA-1"], Effect::Send(spec))
        } else if debt.count >= self.cfg.ack_coalesce_count
            || now >= debt.first_ns.saturating_add(self.cfg.ack_coalesce_time)
        {
            self.ack_debt = None;
            out.require(&["MR-MPA-2"], Effect::Send(spec))
        } else {
            self.ack_debt = Some(debt);
            out.allow(&["MR-MPA-2"], Effect::Send(spec))
        }
    }
}
