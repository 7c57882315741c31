//! Responses at the completer: ACK, NAK, RNR NAK, READ responses and atomic
//! acknowledgements (SPEC.md §6.8, §6.13, §6.15, §6.16, §9.2 rows 29–31).

use super::attrs::{QpStatus, QpType};
use super::local::accessible;
use super::{RequesterState, WqePhase, WrOp};
use crate::model::{Effect, Field, Outcomes, WcStatus};
use metaroce_codec::ext::SyndromeKind;
use metaroce_codec::{Opcode, Psn, RocePacket, ServiceClass};

fn drop(reqs: &'static [&'static str], counter: Option<&'static str>) -> Outcomes {
    Outcomes::none().require(reqs, Effect::Drop { counter })
}

impl RequesterState {
    /// A response packet arrives at `now_ns`.
    ///
    /// Responses are dropped in ERR ("MR-QP-5"), with a reserved syndrome
    /// ("MR-REQ-11") or with a PSN later than the last PSN sent or earlier than
    /// the oldest unacknowledged PSN minus one ("MR-REQ-9"). Otherwise:
    /// cumulative ACKs complete work requests ("MR-REQ-3"), NAK 0x60 starts a
    /// go-back-N retry ("MR-NAK-5"), error NAKs fail the work request
    /// ("MR-NAK-6"), RNR NAKs start an RNR wait ("MR-RNR-3"), READ responses
    /// are placed in order ("MR-READ-7"), atomic acknowledgements return the
    /// original value ("MR-ATOM-6"), and a response of the wrong kind fails
    /// the work request with BAD_RESP_ERR ("MR-REQ-10").
    pub fn on_response(mut self, pkt: &RocePacket<'_>, now_ns: u64) -> (Self, Outcomes) {
        let out = match self.classify(pkt) {
            Err(dropped) => dropped,
            Ok(()) => {
                let mut out = Outcomes::none();
                self.dispatch(pkt, now_ns, &mut out);
                if self.status == QpStatus::Rts {
                    self.complete_front(&mut out);
                    self.pump(now_ns, &mut out);
                    self.complete_front(&mut out);
                }
                out
            }
        };
        (self, out)
    }

    /// The checks that drop a response without any other effect.
    fn classify(&self, pkt: &RocePacket<'_>) -> Result<(), Outcomes> {
        let bth = &pkt.bth;
        if self.status != QpStatus::Rts {
            return Err(drop(&["MR-QP-5"], None));
        }
        if bth.tver != 0 {
            return Err(drop(&["MR-BTH-1"], Some("malformed_drops")));
        }
        if bth.opcode.class() != ServiceClass::Rc || self.attrs.qp_type != QpType::Rc {
            return Err(drop(&["MR-OPC-3"], Some("malformed_drops")));
        }
        if bth.opcode.layout(metaroce_codec::Dialect::Base).is_none() {
            return Err(drop(&["MR-OPC-2"], Some("malformed_drops")));
        }
        if !bth.opcode.is_rc_response() {
            // A request: the responder's business, not the completer's.
            return Err(drop(&[], None));
        }
        if !metaroce_codec::bth::pkey_matches(bth.pkey, self.attrs.p_key) {
            return Err(drop(&["MR-BTH-5"], Some("pkey_violations")));
        }
        if let Some(aeth) = pkt.ext.aeth {
            let s = aeth.syndrome.0;
            if (0x40..=0x5F).contains(&s) || s >= 0x80 {
                return Err(drop(&["MR-REQ-11"], None));
            }
        }
        // "MR-REQ-9": inside [una - 1, next_psn - 1] or dropped.
        let base = self.una.sub(1);
        if bth.psn.distance(base) >= self.next_psn.distance(base) {
            return Err(drop(&["MR-REQ-9"], None));
        }
        Ok(())
    }

    fn dispatch(&mut self, pkt: &RocePacket<'_>, now_ns: u64, out: &mut Outcomes) {
        let p = pkt.bth.psn;
        let outstanding = p != self.una.sub(1);
        let syndrome = pkt.ext.aeth.map(|a| a.syndrome.kind());
        match pkt.bth.opcode {
            Opcode::RC_ACK => match syndrome {
                Some(SyndromeKind::Ack { .. }) => {
                    self.update_credits(pkt.ext.aeth);
                    if let Some(restart) = self.ack_through(p, now_ns) {
                        // "MR-REQ-4": responses of an earlier READ or atomic were lost.
                        self.go_back(restart, now_ns, &["MR-REQ-4", "MR-REQ-5"], out);
                    }
                }
                Some(SyndromeKind::RnrNak { timer }) if outstanding => {
                    self.on_rnr_nak(p, timer, now_ns, out);
                }
                Some(SyndromeKind::Nak { code: 0 }) if outstanding => {
                    self.on_seq_nak(p, now_ns, out)
                }
                Some(SyndromeKind::Nak { code }) if outstanding => {
                    // "MR-NAK-6": 1 → REM_INV_REQ_ERR, 2 → REM_ACCESS_ERR, 3–31 → REM_OP_ERR.
                    let status = match code {
                        1 => WcStatus::RemInvReqErr,
                        2 => WcStatus::RemAccessErr,
                        _ => WcStatus::RemOpErr,
                    };
                    if let Some(idx) = self.wqe_holding(p) {
                        self.fail(idx, status, &["MR-NAK-6", "MR-QP-7"], out);
                    }
                }
                // A NAK for a PSN that is not outstanding (the one before `una`).
                _ => *out = drop(&["MR-REQ-9"], None),
            },
            Opcode::RC_ATOMIC_ACK => self.on_atomic_ack(pkt, now_ns, out),
            _ => self.on_read_response(pkt, now_ns, out),
        }
    }

    /// NAK 0x60 with outstanding PSN `p`: earlier PSNs are acknowledged and
    /// every outstanding packet from `p` is resent in order ("MR-NAK-5"),
    /// counting one retry ("MR-TMR-5").
    fn on_seq_nak(&mut self, p: Psn, now_ns: u64, out: &mut Outcomes) {
        if self.nak_retry_psn == Some(p) {
            // "MR-TMR-9": no second retry for the NAK that started the one in progress.
            *out = Outcomes::none().allow(&["MR-TMR-9"], Effect::Drop { counter: None });
            return;
        }
        let start = self.ack_through(p.sub(1), now_ns).unwrap_or(p); // "MR-REQ-4"
        self.nak_retry_psn = Some(p);
        self.go_back(start, now_ns, &["MR-NAK-5", "MR-REQ-5", "MR-TMR-5"], out);
    }

    /// Implicit acknowledgement by a response with PSN `p`: everything before
    /// it. Returns false (and retries) when an earlier READ or atomic lost its
    /// responses ("MR-REQ-4"); the response is then dropped.
    fn implicit_ack(&mut self, p: Psn, now_ns: u64, out: &mut Outcomes) -> bool {
        match self.ack_through(p.sub(1), now_ns) {
            Some(restart) => {
                self.go_back(restart, now_ns, &["MR-REQ-4", "MR-REQ-5"], out);
                false
            }
            None => true,
        }
    }

    fn bad_response(&mut self, idx: Option<usize>, out: &mut Outcomes) {
        if let Some(idx) = idx {
            self.fail(idx, WcStatus::BadRespErr, &["MR-REQ-10"], out);
        }
    }

    /// A READ response of the right kind and position whose payload length
    /// is wrong: BAD_RESP_ERR, or LOC_LEN_ERR as hfi1 reports it
    /// (`ack_len_err`), "MR-REQ-10".
    fn bad_length(&mut self, idx: usize, out: &mut Outcomes) {
        let wr = self.queue[idx].id;
        self.bad_response(Some(idx), out);
        for c in &mut out.required {
            if let Effect::Complete(spec) = &mut c.value
                && spec.wr == wr
            {
                spec.status = Field::OneOf(vec![WcStatus::BadRespErr, WcStatus::LocLenErr]);
            }
        }
    }

    fn on_atomic_ack(&mut self, pkt: &RocePacket<'_>, now_ns: u64, out: &mut Outcomes) {
        let p = pkt.bth.psn;
        let Some(idx) = self.wqe_holding(p) else {
            *out = drop(&["MR-REQ-9"], None); // a duplicate of an answered atomic
            return;
        };
        let ack = matches!(
            pkt.ext.aeth.map(|a| a.syndrome.kind()),
            Some(SyndromeKind::Ack { .. })
        );
        if !self.queue[idx].wr.op.is_atomic() || !ack {
            // "MR-REQ-10": an atomic acknowledgement for a non-atomic.
            return self.bad_response(Some(idx), out);
        }
        if !self.implicit_ack(p, now_ns, out) {
            return;
        }
        self.update_credits(pkt.ext.aeth);
        let wr = &self.queue[idx].wr;
        if !accessible(&self.local, wr.lkey, wr.local_offset, 8, true) {
            // "MR-REQ-12": the original value cannot be written locally.
            return self.fail(idx, WcStatus::LocProtErr, &["MR-REQ-12", "MR-QP-7"], out);
        }
        let orig = pkt.ext.atomic_ack_eth.map_or(0, |a| a.orig);
        let w = &mut self.queue[idx];
        // "MR-ATOM-6": the original value in the local buffer before the completion.
        *out = std::mem::take(out).require(
            &["MR-ATOM-6"],
            Effect::Write {
                key: w.wr.lkey,
                offset: w.wr.local_offset,
                bytes: orig.to_le_bytes().to_vec(),
            },
        );
        w.responses = 1;
        w.phase = WqePhase::Done;
        self.advance_una(p.add(1), now_ns);
    }

    fn on_read_response(&mut self, pkt: &RocePacket<'_>, now_ns: u64, out: &mut Outcomes) {
        let p = pkt.bth.psn;
        let op = pkt.bth.opcode;
        let Some(idx) = self.wqe_holding(p) else {
            *out = drop(&["MR-REQ-9"], None); // a duplicate of an answered request
            return;
        };
        let ack = matches!(
            pkt.ext.aeth.map(|a| a.syndrome.kind()),
            None | Some(SyndromeKind::Ack { .. })
        );
        let wr_op = self.queue[idx].wr.op;
        if matches!(wr_op, WrOp::Flush { .. } | WrOp::AtomicWrite { .. }) {
            // "MR-REQ-10": FLUSH and ATOMIC WRITE accept a READ Response Only.
            if op != Opcode::RC_READ_RESPONSE_ONLY || !ack || !pkt.payload.is_empty() {
                return self.bad_response(Some(idx), out);
            }
            if !self.implicit_ack(p, now_ns, out) {
                return;
            }
            self.update_credits(pkt.ext.aeth);
            self.queue[idx].responses = 1;
            self.queue[idx].phase = WqePhase::Done;
            self.advance_una(p.add(1), now_ns);
            return;
        }
        if !matches!(wr_op, WrOp::Read { .. }) || !ack {
            // "MR-REQ-10": a READ response for a non-READ, or with a NAK syndrome.
            return self.bad_response(Some(idx), out);
        }
        let w = &self.queue[idx];
        let expected = w.first_psn.add(w.responses);
        if p != expected {
            if p.is_after(expected) {
                // "MR-READ-7": a response later than the next expected one is dropped.
                *out = drop(&["MR-READ-7"], None);
                if self.attrs.reread_on_gap && w.reread_psn != Some(expected) {
                    self.queue[idx].reread_psn = Some(expected);
                    // "MR-READ-8": re-request from the first missing response at once.
                    self.go_back(
                        expected,
                        now_ns,
                        &["MR-READ-8", "MR-REQ-5", "MR-TMR-5"],
                        out,
                    );
                }
            } else {
                *out = drop(&["MR-READ-7"], None);
            }
            return;
        }
        let remaining = w.span - w.responses;
        let pmtu = self.attrs.pmtu;
        let done_bytes = u64::from(w.responses) * u64::from(pmtu);
        let rest = w.wr.length.saturating_sub(done_bytes);
        let (want, len_ok) = match (w.stream_open, remaining) {
            (false, 1) => (
                Opcode::RC_READ_RESPONSE_ONLY,
                pkt.payload.len() as u64 == rest,
            ),
            (false, _) => (
                Opcode::RC_READ_RESPONSE_FIRST,
                pkt.payload.len() == pmtu as usize,
            ),
            (true, 1) => (
                Opcode::RC_READ_RESPONSE_LAST,
                pkt.payload.len() as u64 == rest,
            ),
            (true, _) => (
                Opcode::RC_READ_RESPONSE_MIDDLE,
                pkt.payload.len() == pmtu as usize,
            ),
        };
        // "MR-READ-7": after a re-request from a PSN inside the READ, First or
        // Only there is the rule, and Middle or Last (rxe's replay) is
        // accepted too.
        let replay = match want {
            Opcode::RC_READ_RESPONSE_FIRST if w.responses > 0 => {
                Some(Opcode::RC_READ_RESPONSE_MIDDLE)
            }
            Opcode::RC_READ_RESPONSE_ONLY if w.responses > 0 => Some(Opcode::RC_READ_RESPONSE_LAST),
            _ => None,
        };
        if op != want && Some(op) != replay {
            // "MR-REQ-10": e.g. a Middle or Last when no READ response is in progress.
            return self.bad_response(Some(idx), out);
        }
        if !len_ok {
            return self.bad_length(idx, out);
        }
        if w.responses == 0 && !self.implicit_ack(p, now_ns, out) {
            return;
        }
        self.update_credits(pkt.ext.aeth);
        let wr = &self.queue[idx].wr;
        let len = pkt.payload.len() as u64;
        if !accessible(
            &self.local,
            wr.lkey,
            wr.local_offset.saturating_add(done_bytes),
            len,
            true,
        ) {
            // "MR-REQ-12": the READ data cannot be written locally.
            return self.fail(idx, WcStatus::LocProtErr, &["MR-REQ-12", "MR-QP-7"], out);
        }
        let w = &mut self.queue[idx];
        // "MR-READ-7": placed at offset (PSN - request PSN) × PMTU.
        *out = std::mem::take(out).require(
            &["MR-READ-7"],
            Effect::Write {
                key: w.wr.lkey,
                offset: w.wr.local_offset.saturating_add(done_bytes),
                bytes: pkt.payload.to_vec(),
            },
        );
        w.responses += 1;
        w.stream_open = matches!(
            op,
            Opcode::RC_READ_RESPONSE_FIRST | Opcode::RC_READ_RESPONSE_MIDDLE
        );
        if w.responses == w.span {
            w.phase = WqePhase::Done; // "MR-READ-7": complete on the Last or Only.
        }
        self.advance_una(p.add(1), now_ns);
    }
}
