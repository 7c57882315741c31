//! The commonest request of a capture, judged without the whole model: an
//! in-sequence SEND or WRITE Middle without AckReq that continues a message
//! whose progress is known, on a responder whose memory (WRITE) or receive
//! work request (SEND) is unknown — so no check can fail and nothing but
//! the optional Acknowledge of MR-ACK-5 can be observed.
//!
//! [`ResponderState::continuation`] gives what [`ResponderState::branches`]
//! gives for such a packet (one branch: expected PSN plus one, the
//! message's progress advanced; outcome: the optional ACK), without its
//! allocations, and `None` for every other packet. The test below holds it
//! to that over every opcode, PSN class, length, AckReq, NAK state and
//! message state.

use super::{Message, QpType};
use super::{NakState, ResponderState, WriteTarget, ack, gate};
use crate::model::{Knowledge, PacketSpec};
use metaroce_codec::{Opcode, RocePacket};

impl ResponderState {
    /// For a plain continuation packet (see the module documentation), the
    /// state after it and the Acknowledge it allows (MR-ACK-5, with the MSN
    /// and PSN MR-ACK-2 asks for); `None` for any other packet.
    pub fn continuation(&self, pkt: &RocePacket<'_>) -> Option<(ResponderState, PacketSpec)> {
        let next = self.continuation_state(pkt)?;
        let spec = next.continuation_ack(pkt.bth.psn);
        Some((next, spec))
    }

    /// The state part of [`Self::continuation`]: for a judge that already
    /// holds the Acknowledge a run of continuation packets allows.
    pub fn continuation_state(&self, pkt: &RocePacket<'_>) -> Option<ResponderState> {
        let op = pkt.bth.opcode;
        if self.qp_type != QpType::Rc
            || self.nak != NakState::None
            || pkt.bth.ack_req
            || pkt.bth.psn != self.epsn // "MR-RSP-1": only the expected PSN
            || !matches!(op, Opcode::RC_SEND_MIDDLE | Opcode::RC_WRITE_MIDDLE)
        {
            return None;
        }
        let len = u32::try_from(pkt.payload.len()).ok()?;
        if len != self.attrs.pmtu {
            return None; // "MR-RSP-4": a Middle carries exactly the PMTU
        }
        if gate::check(self, pkt).is_some() {
            return None;
        }
        let progress = match (&self.in_progress, op) {
            // "MR-RSP-5": within the RETH DMA length; memory unknown, so
            // nothing to place that the capture could show.
            (
                Knowledge::Known(Some(Message::Write {
                    target: Knowledge::Known(t),
                })),
                Opcode::RC_WRITE_MIDDLE,
            ) if len <= t.remaining && !self.memory.is_known() => Message::Write {
                target: Knowledge::Known(WriteTarget {
                    va: t.va.wrapping_add(u64::from(len)),
                    remaining: t.remaining - len,
                    ..*t
                }),
            },
            // A SEND Middle is no plain continuation: with the receive work
            // request unknown the model also allows NAK 0x61 / 0x63 (the
            // buffer may be too short or not writable, MR-RSP-8, MR-RSP-9),
            // so it goes through the full responder model.
            _ => return None,
        };
        let mut next = self.clone();
        next.epsn = pkt.bth.psn.add(1);
        next.in_progress = Knowledge::Known(Some(progress));
        Some(next)
    }

    /// The Acknowledge of [`Self::continuation`] for the continuation packet
    /// at `psn` that led to this state.
    pub fn continuation_ack(&self, psn: metaroce_codec::Psn) -> PacketSpec {
        ack::ack(self, psn) // "MR-ACK-5", "MR-ACK-2"
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Branch, Features, MemoryRegion, QpAttributes, RecvWr};
    use super::*;
    use crate::model::{Effect, Outcomes};
    use metaroce_codec::{BthRepr, ExtHeaders, Msn, Psn};
    use std::collections::VecDeque;

    fn states() -> Vec<ResponderState> {
        let base = ResponderState::new(
            QpType::Rc,
            QpAttributes::unknown(1024, 0xFFFF),
            Features::ALL,
            Psn::new(100),
        );
        let mut out = Vec::new();
        let target = WriteTarget {
            va: 0x1000,
            rkey: 7,
            remaining: 3000,
        };
        let messages = [
            Knowledge::Unknown,
            Knowledge::Known(None),
            Knowledge::Known(Some(Message::Write {
                target: Knowledge::Known(target),
            })),
            Knowledge::Known(Some(Message::Write {
                target: Knowledge::Known(WriteTarget {
                    remaining: 1000,
                    ..target
                }),
            })),
            Knowledge::Known(Some(Message::Write {
                target: Knowledge::Unknown,
            })),
            Knowledge::Known(Some(Message::Send {
                recv: Knowledge::Unknown,
                received: 1024,
            })),
            Knowledge::Known(Some(Message::Send {
                recv: Knowledge::Known(RecvWr {
                    id: 1,
                    capacity: 1500,
                    writable: true,
                }),
                received: 1024,
            })),
        ];
        for msg in messages {
            for nak in [NakState::None, NakState::Sequence, NakState::Rnr] {
                for memory_known in [false, true] {
                    for msn in [Knowledge::Unknown, Knowledge::Known(Msn::new(5))] {
                        let mut st = base.clone();
                        st.in_progress = msg.clone();
                        st.nak = nak;
                        st.msn = msn;
                        st.recv_queue = Knowledge::Unknown;
                        st.memory = if memory_known {
                            Knowledge::Known(vec![MemoryRegion::new(
                                7,
                                0,
                                0x1000,
                                4096,
                                crate::model::responder::AccessFlags::WRITE,
                            )])
                        } else {
                            Knowledge::Unknown
                        };
                        out.push(st.clone());
                        st.recv_queue = Knowledge::Known(VecDeque::new());
                        out.push(st);
                    }
                }
            }
        }
        out
    }

    /// `continuation` agrees with `branches` wherever it answers, and
    /// answers for the plain continuations it is meant for.
    #[test]
    fn continuation_is_the_models_only_branch() {
        let mut answered = 0;
        for st in states() {
            for opcode in 0..=0x1Fu8 {
                for psn in [99u32, 100, 101] {
                    for len in [1023usize, 1024, 1025] {
                        for ack_req in [false, true] {
                            for pkey in [0xFFFFu16, 0x1234] {
                                let bth = BthRepr {
                                    opcode: Opcode(opcode),
                                    psn: Psn::new(psn),
                                    ack_req,
                                    pkey,
                                    dest_qp: 0x12,
                                    ..BthRepr::default()
                                };
                                let payload = vec![0; len];
                                let pkt = RocePacket {
                                    bth,
                                    ext: ExtHeaders::default(),
                                    payload: &payload,
                                    pad: &[],
                                    icrc: [0; 4],
                                };
                                let Some((next, spec)) = st.continuation(&pkt) else {
                                    continue;
                                };
                                answered += 1;
                                let expected = vec![Branch {
                                    state: next,
                                    outcomes: Outcomes::none()
                                        .allow(&["MR-ACK-5"], Effect::Send(spec)),
                                }];
                                assert_eq!(st.branches(&pkt), expected, "{st:?}\n{bth:?}");
                            }
                        }
                    }
                }
            }
        }
        // PSN 100, 1024 B, no AckReq, P_Key matching, NAK none, two MSNs, two
        // receive queues: a WRITE Middle within its DMA length (not the
        // target with 1000 B left) with memory unknown. A SEND Middle is
        // never a plain continuation (the model also allows NAK 0x61/0x63
        // while the receive WR is unknown).
        assert_eq!(answered, 2 * 2, "cases answered");
    }
}
