//! Retransmitted request packets: where a retransmission may start, what it
//! must resend, what it must carry and when it may happen (SPEC.md §6.8,
//! §6.11, §6.13, §6.14).

use super::{Cause, RequestStreamJudge, Retx, Sent};
use crate::Finding;
use crate::model::kept_ext::KeptExt;
use crate::model::requester::psn::HALF_SPACE;
use crate::model::requester::psn::packet_count;
use crate::model::requester::timer::local_ack_timeout_ns;
use metaroce_codec::{Opcode, Psn, RocePacket};

impl RequestStreamJudge {
    /// A packet whose PSN was sent before.
    pub(super) fn on_retransmit(
        &mut self,
        pkt: &RocePacket<'_>,
        now_ns: Option<u64>,
        f: &mut Vec<Finding>,
    ) {
        let psn = pkt.bth.psn;
        if let Some(acked) = self.acked
            && !psn.is_after(acked)
        {
            f.push(Finding::new(
                "MR-REQ-6",
                format!("retransmits PSN {psn}, already acknowledged (up to {acked})"),
            ));
        }
        match self.retx {
            Some(r) if r.cursor == psn => {}
            Some(r) if psn.is_after(r.cursor) => self.report_skip(r, psn, psn, f),
            _ => {
                let cause = self.classify_start(pkt, now_ns, f);
                self.retx = Some(Retx { cursor: psn, cause });
            }
        }
        let span = self.check_identical(pkt, now_ns, f);
        if let Some(r) = self.retx.as_mut() {
            r.cursor = psn.add(span);
        }
    }

    /// Where and when a new retransmission starts, by what it answers.
    fn classify_start(
        &mut self,
        pkt: &RocePacket<'_>,
        now_ns: Option<u64>,
        f: &mut Vec<Finding>,
    ) -> Cause {
        let psn = pkt.bth.psn;
        if let Some(nak) = self.seq_nak.take() {
            // "MR-NAK-5": resume at the NAK PSN ("MR-REQ-4": or at an earlier
            // READ or atomic whose responses were lost).
            let earlier_rdma = nak.is_after(psn) && self.is_rdma_request(psn);
            // With loss before the capture point, the packets from the NAK
            // PSN on may have been resent and lost again.
            let maybe_lost = self.config.lossy && psn.is_after(nak);
            if psn != nak && !earlier_rdma && !maybe_lost {
                f.push(Finding::new(
                    "MR-NAK-5",
                    format!("go-back-N after NAK 0x60 PSN {nak} resumes at PSN {psn}"),
                ));
            }
            return Cause::SeqNak(nak);
        }
        if let Some(nak) = self.repeated_nak.take()
            && psn == nak
        {
            f.push(Finding::new(
                "MR-TMR-9",
                format!("second go-back-N retry for a repeated NAK 0x60 PSN {nak}"),
            ));
            return Cause::SeqNak(nak);
        }
        if let Some((rnr_psn, arrived, wait)) = self.rnr.take() {
            // "MR-RNR-4", "MR-REQ-4": a READ or atomic before the NAK lost its
            // responses; the retry starts there, without the RNR wait.
            let earlier_rdma = rnr_psn.is_after(psn) && self.is_rdma_request(psn);
            if psn != rnr_psn && !earlier_rdma {
                f.push(Finding::new(
                    "MR-RNR-4",
                    format!("retransmission after RNR NAK PSN {rnr_psn} resumes at PSN {psn}"),
                ));
            }
            if earlier_rdma {
                return Cause::Rnr;
            }
            if let (Some(now), Some(at)) = (now_ns, arrived) {
                let waited = now.saturating_sub(at);
                let tol = self.config.tolerance_ns;
                if waited.saturating_add(tol) < wait {
                    f.push(Finding::new(
                        "MR-RNR-3",
                        format!("retransmitted {waited} ns after an RNR NAK asking for {wait} ns"),
                    ));
                } else if waited > (2 * wait + 100_000).saturating_add(tol) {
                    f.push(Finding::new(
                        "MR-RNR-5",
                        format!("retransmitted {waited} ns after an RNR NAK of {wait} ns (later than 2× + 100 µs)"),
                    ));
                }
            }
            return Cause::Rnr;
        }
        if self.is_partial_read(psn) {
            return Cause::ReadGap; // "MR-READ-8": a re-request on a gap
        }
        self.check_timeout(psn, now_ns, f);
        Cause::Timeout
    }

    /// A retransmission because of elapsed time: from the oldest
    /// unacknowledged PSN, inside the window of MR-TMR-1 … MR-TMR-4.
    fn check_timeout(&self, psn: Psn, now_ns: Option<u64>, f: &mut Vec<Finding>) {
        let una = self.acked.map(|a| a.add(1));
        if let Some(una) = una
            && psn.is_after(una)
            && self.holding(una).is_some()
        {
            f.push(Finding::new(
                "MR-REQ-5",
                format!(
                    "timeout retry starts at PSN {psn}, after the oldest unacknowledged PSN {una}"
                ),
            ));
        }
        let (Some(timeout), Some(now)) = (self.config.timeout, now_ns) else {
            return;
        };
        let Some(t) = local_ack_timeout_ns(timeout) else {
            f.push(Finding::new(
                "MR-TMR-4",
                format!("PSN {psn} retransmitted because of time with timeout 0"),
            ));
            return;
        };
        let oldest = una.unwrap_or(psn);
        let tx = self.holding(oldest).and_then(|(_, s)| s.last_tx_ns);
        let Some(reference) = tx.max(self.last_ack_ns) else {
            return;
        };
        let elapsed = now.saturating_sub(reference);
        let tol = self.config.tolerance_ns;
        if elapsed.saturating_add(tol) < t {
            f.push(Finding::new(
                "MR-TMR-1",
                format!("timeout retry of PSN {psn} after {elapsed} ns, earlier than T = {t} ns"),
            ));
        } else if elapsed > (4 * t).saturating_add(tol) {
            f.push(Finding::new(
                "MR-TMR-2",
                format!(
                    "timeout retry of PSN {psn} after {elapsed} ns, later than 4T = {} ns",
                    4 * t
                ),
            ));
        } else if elapsed > (2 * t).saturating_add(tol) {
            f.push(Finding::new(
                "MR-TMR-3",
                format!(
                    "timeout retry of PSN {psn} after {elapsed} ns, later than 2T = {} ns",
                    2 * t
                ),
            ));
        }
    }

    /// Compares a retransmission with the original ("MR-REQ-5"); a READ
    /// re-request inside its block must ask for the missing rest. Returns the
    /// PSNs the packet covers.
    fn check_identical(
        &mut self,
        pkt: &RocePacket<'_>,
        now_ns: Option<u64>,
        f: &mut Vec<Finding>,
    ) -> u32 {
        let psn = pkt.bth.psn;
        let pmtu = self.pmtu.single();
        let Some((first, orig)) = self.holding(psn).map(|(k, s)| (k, s.clone())) else {
            // Sent before the judge started listening, or acknowledged; or,
            // when packets may be missing, its first transmission was lost:
            // this is the first the judge sees of it.
            if self.config.lossy && self.acked.is_none_or(|a| psn.is_after(a)) {
                return self.record_first_seen(pkt, now_ns);
            }
            return 1;
        };
        let offset = psn.distance(first);
        let mut expected_ext = orig.ext.get();
        if offset > 0 {
            // Only a READ block holds PSNs other than its first.
            let read = orig.opcode == Opcode::RC_READ_REQUEST;
            if read && pkt.bth.opcode != Opcode::RC_READ_REQUEST {
                f.push(Finding::new(
                    "MR-PSN-3",
                    format!(
                        "{} at PSN {psn} lies in the PSNs reserved by the READ at PSN {first}",
                        pkt.bth.opcode
                    ),
                ));
                return 1;
            }
            match (
                orig.opcode == Opcode::RC_READ_REQUEST,
                expected_ext.reth,
                pmtu,
            ) {
                (true, Some(mut reth), Some(p)) => {
                    let done = u64::from(offset) * u64::from(p);
                    reth.va = reth.va.wrapping_add(done);
                    reth.dma_len = reth
                        .dma_len
                        .saturating_sub(u32::try_from(done).unwrap_or(u32::MAX));
                    expected_ext.reth = Some(reth);
                }
                _ => return orig.span - offset,
            }
        }
        if pkt.bth.opcode != orig.opcode
            || pkt.bth.se != orig.se
            || pkt.ext != expected_ext
            || !orig.payload.is(pkt.payload)
        {
            f.push(Finding::new(
                "MR-REQ-5",
                format!(
                    "retransmission of PSN {psn} ({}) differs from the original ({})",
                    pkt.bth.opcode, orig.opcode
                ),
            ));
        }
        if let Some(s) = self.sent.get_mut(&first.value())
            && offset == 0
        {
            s.last_tx_ns = now_ns;
        }
        orig.span.max(1) - offset
    }

    /// Reports the PSNs from the retransmission cursor to `upto` that were
    /// neither resent nor acknowledged.
    pub(super) fn report_skip(&self, retx: Retx, upto: Psn, at: Psn, f: &mut Vec<Finding>) {
        if self.config.lossy {
            return; // the PSNs may have been resent and lost again
        }
        let from = match self.acked {
            Some(a) if a.add(1).is_after(retx.cursor) => a.add(1),
            _ => retx.cursor,
        };
        if !upto.is_after(from) || upto.distance(from) >= HALF_SPACE {
            return;
        }
        let (id, why) = match retx.cause {
            Cause::SeqNak(_) => ("MR-NAK-5", "go-back-N after NAK 0x60"),
            Cause::Rnr => ("MR-RNR-4", "retransmission after RNR NAK"),
            Cause::ReadGap | Cause::Timeout => ("MR-REQ-5", "go-back-N retry"),
        };
        f.push(Finding::new(
            id,
            format!(
                "{why} skipped unacknowledged PSN {from} to {} (next packet PSN {at})",
                upto.sub(1)
            ),
        ));
    }

    /// Keeps a packet whose first transmission the capture lost; returns
    /// the PSNs it occupies.
    fn record_first_seen(&mut self, pkt: &RocePacket<'_>, now_ns: Option<u64>) -> u32 {
        let span = match (pkt.bth.opcode, pkt.ext.reth, self.pmtu.single()) {
            (Opcode::RC_READ_REQUEST, Some(reth), Some(p)) => {
                packet_count(u64::from(reth.dma_len), p)
            }
            _ => 1,
        };
        let payload = self.keep_payload(pkt.payload);
        self.keep_sent(
            pkt.bth.psn,
            Sent {
                opcode: pkt.bth.opcode,
                se: pkt.bth.se,
                ext: KeptExt::new(&pkt.ext),
                payload,
                span,
                last_tx_ns: now_ns,
            },
        );
        span
    }

    fn is_rdma_request(&self, psn: Psn) -> bool {
        self.holding(psn)
            .is_some_and(|(_, s)| matches!(s.opcode.0, 0x0C | 0x13 | 0x14 | 0x1C | 0x1D))
    }

    /// `psn` lies inside a READ block past its first PSN, or is a READ whose
    /// earlier responses arrived: a re-request from the first missing response.
    fn is_partial_read(&self, psn: Psn) -> bool {
        self.holding(psn)
            .is_some_and(|(first, s)| s.opcode == Opcode::RC_READ_REQUEST && psn != first)
            && self.acked.is_some_and(|a| a.add(1) == psn)
    }
}
