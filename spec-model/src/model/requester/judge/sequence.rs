//! New request packets: packetization, opcode sequence, RETH, AckReq and SE
//! (SPEC.md §6.5, §4.1), and the PSN window (MR-PSN-4).

use super::{Msg, QpType, RequestStreamJudge, Sent};
use crate::Finding;
use crate::model::kept_ext::KeptExt;
use crate::model::requester::psn::HALF_SPACE;
use metaroce_codec::opcode::Position;
use metaroce_codec::{Dialect, Opcode, Psn, RocePacket};

/// Largest RETH DMA length (MR-EXT-5).
const MAX_DMA: u32 = 1 << 31;

impl RequestStreamJudge {
    /// A packet with a new PSN (`first`: the first packet the judge sees).
    pub(super) fn on_new(
        &mut self,
        pkt: &RocePacket<'_>,
        now_ns: Option<u64>,
        first: bool,
        f: &mut Vec<Finding>,
    ) {
        let psn = pkt.bth.psn;
        if let Some(acked) = self.acked {
            // "MR-PSN-4": never 2^23 or more after the oldest unacknowledged PSN.
            if psn.distance(acked.add(1)) >= HALF_SPACE {
                f.push(Finding::new(
                    "MR-PSN-4",
                    format!(
                        "new request PSN {psn} is 2^23 or more after the oldest unacknowledged PSN {}",
                        acked.add(1)
                    ),
                ));
            }
        }
        let span = self.check_packet(pkt, first, f);
        let payload = self.keep_payload(pkt.payload);
        self.keep_sent(
            psn,
            Sent {
                opcode: pkt.bth.opcode,
                se: pkt.bth.se,
                ext: KeptExt::new(&pkt.ext),
                payload,
                span,
                last_tx_ns: now_ns,
            },
        );
        self.next_psn = Some(psn.add(span)); // "MR-PSN-3"
    }

    /// Checks one new packet against the message in progress; returns the
    /// PSNs it occupies.
    fn check_packet(&mut self, pkt: &RocePacket<'_>, first: bool, f: &mut Vec<Finding>) -> u32 {
        let bth = &pkt.bth;
        let psn = bth.psn;
        let op = Opcode(bth.opcode.0 & 0x1F); // UC opcodes mirror the RC ones.
        let name = bth.opcode;
        let len = pkt.payload.len() as u32;
        let uc = self.config.qp_type == QpType::Uc;
        let is_send = op.is_rc_send();
        let is_write = op.is_rc_write();
        let pos = op
            .layout(Dialect::Base)
            .map_or(Position::Only, |l| l.position);

        // Opcode sequence: "MR-PKT-2" (nothing between the packets of a
        // message) and "MR-PKT-1" (Middle/Last only inside a message).
        let continues = matches!(pos, Position::Middle | Position::Last);
        match self.msg {
            Some(m) if continues && m.write == is_write && (is_send || is_write) => {}
            Some(m) => {
                f.push(Finding::new(
                    "MR-PKT-2",
                    format!(
                        "{name} at PSN {psn} inside the {} message that started at PSN {}",
                        if m.write { "WRITE" } else { "SEND" },
                        m.first_psn
                    ),
                ));
                self.msg = None;
            }
            None if continues && !first => f.push(Finding::new(
                "MR-PKT-1",
                format!("{name} at PSN {psn} with no message in progress (no First)"),
            )),
            None => {}
        }
        if continues && self.msg.is_none() {
            // Joined mid-message (first packet seen) or after a reported break.
            self.msg = Some(Msg {
                write: is_write,
                first_psn: psn,
                bytes: 0,
                dma_len: None,
                since_ack_req: 0,
            });
        }

        // Payload lengths by position: "MR-PKT-1".
        if is_send || is_write {
            let ok = match pos {
                Position::First | Position::Middle => self.pmtu.narrow(|p| p == len),
                Position::Last => len >= 1 && self.pmtu.narrow(|p| len <= p),
                _ => self.pmtu.narrow(|p| len <= p),
            };
            if !ok {
                f.push(Finding::new(
                    "MR-PKT-1",
                    format!(
                        "{name} at PSN {psn} carries {len} B, which no PMTU allows at its position"
                    ),
                ));
            }
        }

        // RETH: "MR-PKT-3" and "MR-EXT-5".
        if let Some(reth) = pkt.ext.reth {
            if reth.dma_len > MAX_DMA {
                f.push(Finding::new(
                    "MR-EXT-5",
                    format!(
                        "{name} at PSN {psn}: RETH DMA length {} > 2^31",
                        reth.dma_len
                    ),
                ));
            }
            if is_write && pos == Position::Only && reth.dma_len != len {
                f.push(Finding::new(
                    "MR-PKT-3",
                    format!(
                        "{name} at PSN {psn}: RETH DMA length {} but {len} B sent",
                        reth.dma_len
                    ),
                ));
            }
        }
        if op == Opcode::RC_ATOMIC_WRITE
            && (len != 8 || pkt.ext.reth.is_none_or(|r| r.dma_len != 8))
        {
            f.push(Finding::new(
                "MR-FLUSH-7",
                format!("ATOMIC WRITE at PSN {psn}: {len} B payload, RETH length not 8 or absent"),
            ));
        }

        // AckReq: "MR-PKT-6" (RC), "MR-UC-1" (UC).
        let last = matches!(pos, Position::Last | Position::Only);
        let needs_ack = (is_send || is_write) && last || matches!(op.0, 0x13 | 0x14 | 0x1C | 0x1D);
        if uc && bth.ack_req {
            f.push(Finding::new(
                "MR-UC-1",
                format!("UC {name} at PSN {psn} has AckReq set"),
            ));
        } else if !uc && needs_ack && !bth.ack_req {
            f.push(Finding::new(
                "MR-PKT-6",
                format!("{name} at PSN {psn} lacks AckReq"),
            ));
        }
        // SE: "MR-BTH-7".
        let se_allowed = last && (is_send || matches!(op.0, 0x09 | 0x0B));
        if bth.se && !se_allowed {
            f.push(Finding::new(
                "MR-BTH-7",
                format!("{name} at PSN {psn} has SE set"),
            ));
        }

        // Message bookkeeping, the WRITE length ("MR-PKT-3") and the AckReq
        // interval ("MR-PKT-7").
        if pos == Position::First && (is_send || is_write) {
            self.msg = Some(Msg {
                write: is_write,
                first_psn: psn,
                bytes: 0,
                dma_len: pkt.ext.reth.map(|r| r.dma_len),
                since_ack_req: 0,
            });
        }
        if let Some(m) = self.msg.as_mut() {
            m.bytes += u64::from(len);
            m.since_ack_req = if bth.ack_req { 0 } else { m.since_ack_req + 1 };
            if !uc && m.since_ack_req == 64 {
                f.push(Finding::new(
                    "MR-PKT-7",
                    format!("64 consecutive packets without AckReq up to PSN {psn}"),
                ));
            }
            if pos == Position::Last {
                if let Some(dma) = m.dma_len
                    && m.bytes != u64::from(dma)
                {
                    f.push(Finding::new(
                        "MR-PKT-3",
                        format!(
                            "WRITE from PSN {}: RETH DMA length {dma} but {} B sent",
                            m.first_psn, m.bytes
                        ),
                    ));
                }
                self.msg = None;
            }
        }

        if op == Opcode::RC_READ_REQUEST {
            let dma = pkt.ext.reth.map_or(0, |r| r.dma_len);
            return self.read_span(psn, u64::from(dma)); // "MR-PSN-3"
        }
        1
    }

    /// A new packet at `psn` ends any retransmission in progress; PSNs it did
    /// not resend and nobody acknowledged were skipped.
    pub(super) fn end_retransmission(&mut self, psn: Psn, f: &mut Vec<Finding>) {
        let Some(retx) = self.retx.take() else { return };
        let Some(next) = self.next_psn else { return };
        if retx.cursor != next && retx.cursor.distance(next) >= HALF_SPACE {
            self.report_skip(retx, next, psn, f);
        }
    }
}
