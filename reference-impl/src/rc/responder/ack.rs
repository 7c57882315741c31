//! The responder's queue of responses and how each becomes packets:
//! Acknowledge and NAK (MR-ACK-2, MR-NAK-3), Atomic Acknowledge (MR-ATOM-4)
//! and READ responses (MR-READ-2, MR-READ-3). Responses leave in the order
//! they were queued, which is PSN order of the requests (MR-READ-4).

use crate::wire::{Out, Path};
use metaroce_codec::ext::{AethRepr, AtomicAckEthRepr, Syndrome};
use metaroce_codec::{Msn, Opcode, Psn};
use std::collections::VecDeque;

/// Credit code "no limit": this responder does not declare `credits` (MR-CRD-1).
pub(crate) const ACK_SYNDROME: u8 = 0x1F;

/// One queued response.
#[derive(Clone, Debug)]
pub(crate) enum Response {
    /// Acknowledge (0x11) with any syndrome: ACK, RNR NAK or NAK.
    Ack { psn: Psn, syndrome: u8, msn: Msn },
    /// Atomic Acknowledge (0x12) with the original value.
    AtomicAck { psn: Psn, orig: u64, msn: Msn },
    /// The responses of one READ: `data` was read when the READ was executed
    /// (MR-READ-6); `next` packets of it have been sent.
    Read {
        first: Psn,
        data: Vec<u8>,
        next: u32,
        msn: Msn,
    },
}

/// The queue.
#[derive(Debug, Default)]
pub(crate) struct Responses {
    queue: VecDeque<Response>,
}

impl Responses {
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn clear(&mut self) {
        self.queue.clear();
    }

    /// Queues a response. A plain ACK replaces an unsent plain ACK at the
    /// tail: the newer one covers a later PSN (coalescing, MR-ACK-1/5).
    pub(crate) fn push(&mut self, response: Response) {
        if let Response::Ack {
            syndrome: ACK_SYNDROME,
            ..
        } = response
            && let Some(Response::Ack {
                syndrome: ACK_SYNDROME,
                ..
            }) = self.queue.back()
        {
            self.queue.pop_back();
        }
        self.queue.push_back(response);
    }

    /// Drops queued responses of the READ whose PSN block is
    /// [first, first + n): a duplicate of it is re-executed from the PSN the
    /// requester asked for (MR-DUP-4), which supersedes them.
    pub(crate) fn cancel_read(&mut self, first: Psn, n: u32) {
        self.queue.retain(|r| match r {
            Response::Read { first: f, .. } => f.distance(first) >= n,
            _ => true,
        });
    }

    /// The next response packet.
    pub(crate) fn next_packet(&mut self, path: &Path, pmtu: u32) -> Option<Vec<u8>> {
        let front = self.queue.front_mut()?;
        let (out, finished) = match front {
            Response::Ack { psn, syndrome, msn } => (ack(*psn, *syndrome, *msn), true),
            Response::AtomicAck { psn, orig, msn } => {
                let mut out = Out::new(Opcode::RC_ATOMIC_ACK, psn.value());
                out.ext.aeth = Some(aeth(ACK_SYNDROME, *msn));
                out.ext.atomic_ack_eth = Some(AtomicAckEthRepr { orig: *orig });
                (out, true)
            }
            Response::Read {
                first,
                data,
                next,
                msn,
            } => {
                let p = pmtu as usize;
                let n = data.len().div_ceil(p).max(1) as u32;
                let i = *next;
                let opcode = match (n, i) {
                    (1, _) => Opcode::RC_READ_RESPONSE_ONLY,
                    (_, 0) => Opcode::RC_READ_RESPONSE_FIRST,
                    (_, i) if i == n - 1 => Opcode::RC_READ_RESPONSE_LAST,
                    _ => Opcode::RC_READ_RESPONSE_MIDDLE,
                };
                let start = (i as usize * p).min(data.len());
                let end = (start + p).min(data.len());
                let mut out = Out::new(opcode, first.add(i).value());
                if opcode != Opcode::RC_READ_RESPONSE_MIDDLE {
                    out.ext.aeth = Some(aeth(ACK_SYNDROME, *msn)); // MR-READ-3, MR-MSN-3
                }
                out.payload = data[start..end].to_vec();
                out.ect = true;
                *next += 1;
                (out, *next >= n)
            }
        };
        if finished {
            self.queue.pop_front();
        }
        Some(path.build(out))
    }

    /// Every queued response as frames (before a fatal NAK, MR-RSP-11).
    pub(crate) fn drain(&mut self, path: &Path, pmtu: u32, into: &mut VecDeque<Vec<u8>>) {
        while let Some(frame) = self.next_packet(path, pmtu) {
            into.push_back(frame);
        }
    }
}

fn aeth(syndrome: u8, msn: Msn) -> AethRepr {
    AethRepr {
        syndrome: Syndrome(syndrome),
        msn,
    }
}

/// An Acknowledge packet (ACK, RNR NAK or NAK): SE 0, AckReq 0 (MR-ACK-6).
pub(crate) fn ack(psn: Psn, syndrome: u8, msn: Msn) -> Out {
    let mut out = Out::new(Opcode::RC_ACK, psn.value());
    out.ext.aeth = Some(aeth(syndrome, msn));
    out
}
