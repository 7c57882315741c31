//! What the MP responder sends: MP ACKs with SACKETH (SPEC §7.6), MP Atomic
//! Acknowledges (§7.14) and MP READ Responses (§7.9), in queue order.

use super::MpResponder;
use crate::wire::{Out, Path};
use metaroce_codec::ext::{AtomicAckEthRepr, MpethRepr, SackethRepr, Syndrome};
use metaroce_codec::{Msn, Opcode};

/// MR-MPA-8: ACK syndrome with credit code 31.
pub(crate) const ACK_SYNDROME: u8 = 0x1F;

/// The packet an MP ACK answers, with what it echoes (MR-MPA-6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Trigger {
    /// Its PSN index, when known.
    pub idx: Option<u64>,
    pub entropy: u16,
    pub ts: u32,
    pub ce: bool,
    pub retx: bool,
    pub trimmed: bool,
    pub syndrome: u8,
    /// The PSN index a NAK or RNR NAK names.
    pub nak_base: Option<u64>,
    /// A probe's answer (never merged with another ACK).
    pub probe: bool,
}

impl Trigger {
    fn plain(&self) -> bool {
        self.syndrome == ACK_SYNDROME && !self.ce && !self.trimmed && !self.probe
    }
}

/// One queued response.
#[derive(Clone, Debug)]
pub(crate) enum Job {
    Ack(Trigger),
    AtomicAck {
        first: u64,
        orig: u64,
        echo: Trigger,
    },
    Read {
        msn: u32,
        /// PSN index of the READ request (response k has first + k).
        first: u64,
        read_len: u32,
        /// Bytes [offset, offset + data.len()) of the read.
        offset: u32,
        data: Vec<u8>,
        next: usize,
        echo: Trigger,
    },
}

impl MpResponder {
    /// Queues an MP ACK; a plain one replaces a plain one still queued.
    pub(super) fn push_ack(&mut self, t: Trigger) {
        self.uncovered = 0;
        if t.plain()
            && let Some(Job::Ack(last)) = self.jobs.back_mut()
            && last.plain()
        {
            *last = t;
            return;
        }
        self.jobs.push_back(Job::Ack(t));
    }

    fn sacketh(&self, t: &Trigger) -> SackethRepr {
        let (base, bits) = self.map.bitmap(t.idx, t.nak_base);
        // zoo: mp-sack-off-by-one — bit i reports base + i + 1.
        let bitmap = zoo!(self.mutant, MpSackOffByOne => bits << 1, else bits);
        SackethRepr {
            syndrome: Syndrome(t.syndrome),
            // MR-MPA-7.
            msn: Msn::new(if self.next_msn == 0 {
                0xFF_FFFF
            } else {
                (self.next_msn - 1) as u32
            }),
            ecn_ce: t.ce,
            retransmission: t.retx,
            trimmed: t.trimmed,
            reserved_flags: 0,
            sack_base_psn: base,
            sack_bitmap: bitmap,
            echoed_entropy: t.entropy,
            reserved: 0,
            echoed_timestamp: t.ts,
        }
    }

    /// The next response packet, with a value of this QP's entropy set
    /// (MR-MPS-1): READ responses by rounds (MR-MPS-3), acknowledgements
    /// by a rotation of their own that consumes none of the round
    /// (MR-MPS-9), with the ACK DSCP (MR-MPA-12).
    pub(super) fn next_packet(&mut self, mut path: Path, pmtu: u32) -> Option<Vec<u8>> {
        let cum = self.map.cum_psn().value();
        if matches!(self.jobs.front()?, Job::Read { .. }) {
            self.dscps.data(&mut path);
            path.udp_src_port = self.entropy.next(self.now, None);
        } else {
            self.dscps.control(&mut path);
            path.udp_src_port = self.entropy.rotation(self.ack_turn);
            self.ack_turn = self.ack_turn.wrapping_add(1);
        }
        let out = match self.jobs.front_mut()? {
            Job::Ack(t) => {
                let t = *t;
                self.jobs.pop_front();
                // MR-MPH-6, MR-MPA-3.
                let mut out = Out::new(Opcode::MP_ACK, cum);
                out.ext.sacketh = Some(self.sacketh(&t));
                // zoo: mp-ack-echo-wrong — echoes its own entropy value.
                zoo!(self.mutant, MpAckEchoWrong => if let Some(s) = out.ext.sacketh.as_mut() {
                    s.echoed_entropy = path.udp_src_port;
                });
                out
            }
            Job::AtomicAck { first, orig, echo } => {
                let (first, orig, echo) = (*first, *orig, *echo);
                self.jobs.pop_front();
                // MR-MPP-13: base = the request PSN.
                let t = Trigger {
                    nak_base: Some(first),
                    ..echo
                };
                let mut out = Out::new(Opcode::MP_ATOMIC_ACK, cum);
                out.ext.sacketh = Some(self.sacketh(&t));
                out.ext.atomic_ack_eth = Some(AtomicAckEthRepr { orig });
                out
            }
            Job::Read {
                msn,
                first,
                read_len,
                offset,
                data,
                next,
                echo,
            } => {
                // MR-MPR-1: one response per PMTU of [offset, offset + d).
                let p = pmtu as usize;
                let at = *next;
                let chunk = (data.len() - at.min(data.len())).min(p);
                let off = *offset as usize + at;
                let psn = self.map.psn(*first + (off / p.max(1)) as u64);
                let mut out = Out::new(Opcode::MP_READ_RESPONSE, psn.value());
                out.ext.mpeth = Some(MpethRepr {
                    first: off == 0,
                    last: off + chunk == *read_len as usize,
                    retransmission: echo.retx,
                    ordered: false,
                    reserved: 0,
                    msn: Msn::new(*msn),
                    offset: off as u32,
                    msg_len: *read_len,
                    timestamp: echo.ts,
                });
                out.ect = true;
                // The response's bytes go straight into the frame.
                let bytes = data.get(at..at + chunk).unwrap_or_default();
                let frame = path.build_filled(&out, chunk, |buf| {
                    buf.extend_from_slice(bytes);
                    Ok::<(), core::convert::Infallible>(())
                });
                *next = at + chunk;
                if *next >= data.len() {
                    self.jobs.pop_front();
                }
                return frame.ok();
            }
        };
        Some(path.build(out))
    }
}
