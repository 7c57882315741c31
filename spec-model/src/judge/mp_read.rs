//! MP READ Responses against the MP READ Requests they answer (§7.9), in
//! whatever order they arrive. A response names its READ by MPETH MSN and
//! carries offset o of the read. What one packet shows (offset a multiple
//! of the PMTU, payload `min(PMTU, length − o)`, inside its stated length)
//! the per-packet validators check; what needs the request is checked here:
//! the response's MSN is a READ's, it states the READ's length, and (PMTU
//! known) its PSN is the READ's PSN + o / PMTU (MR-MPR-1).
//!
//! Re-requests (offset > 0) ask for ranges the first request already asked
//! for, so a response to either is judged against the READ; whether a
//! responder answered a re-request for its range only (MR-MPR-9) is not
//! told apart from late answers to the first request, and is not judged.
//!
//! Only READs whose request is in the capture are judged (a capture may
//! start mid-conversation); a response whose MSN is that of a non-READ
//! request seen in the capture answers no READ (MR-MPR-1). Memory: at most
//! [`MAX_READS`] READs and 1,024 other MSNs per connection, the oldest
//! forgotten first.

use crate::Finding;
use metaroce_codec::{Opcode, Psn, RocePacket};
use std::collections::BTreeMap;

/// Most READs kept per connection.
pub const MAX_READS: usize = 256;

/// Most MSNs of non-READ messages kept per connection.
const MAX_OTHER: usize = 1024;

/// One READ seen in the capture.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Read {
    /// PSN of the original request (offset 0).
    psn: Psn,
    /// The read's length (MPETH message length of its request).
    len: u32,
}

/// The READs of one MP connection and the checks of their responses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct MpReads {
    pmtu: Option<u32>,
    /// READs by MSN.
    reads: BTreeMap<u32, Read>,
    /// MSNs of other messages (SEND, WRITE, atomics) seen, with their order.
    other: BTreeMap<u32, u64>,
    /// Requests seen (to forget the oldest MSNs).
    seen: u64,
    /// Responses judged.
    pub judged: u64,
}

impl MpReads {
    /// Checks for a connection whose PMTU is `pmtu`, when known.
    pub fn new(pmtu: Option<u32>) -> Self {
        MpReads {
            pmtu,
            ..MpReads::default()
        }
    }

    /// An MP request of the connection (with a right ICRC).
    pub fn on_request(&mut self, pkt: &RocePacket<'_>) {
        let Some(m) = pkt.ext.mpeth else {
            return;
        };
        self.seen += 1;
        let msn = m.msn.value();
        if pkt.bth.opcode != Opcode::MP_READ_REQUEST {
            if !self.reads.contains_key(&msn) {
                self.other.insert(msn, self.seen);
                if self.other.len() > MAX_OTHER
                    && let Some((&oldest, _)) = self.other.iter().min_by_key(|(_, s)| **s)
                {
                    self.other.remove(&oldest);
                }
            }
            return;
        }
        if pkt.ext.reth.is_none() || m.offset != 0 {
            return; // malformed (the validators report it), or a re-request
        }
        // The READ (or its retransmission).
        self.other.remove(&msn);
        self.reads.insert(
            msn,
            Read {
                psn: pkt.bth.psn,
                len: m.msg_len,
            },
        );
        if self.reads.len() > MAX_READS {
            // MSNs grow: the oldest READ is the one furthest behind `msn`.
            let newest = Psn::new(msn);
            if let Some(&oldest) = self
                .reads
                .keys()
                .max_by_key(|&&k| newest.distance(Psn::new(k)))
            {
                self.reads.remove(&oldest);
            }
        }
    }

    /// An MP READ Response of the connection (with a right ICRC): its
    /// findings.
    pub fn on_response(&mut self, pkt: &RocePacket<'_>) -> Vec<Finding> {
        let mut f = Vec::new();
        let Some(m) = pkt.ext.mpeth else {
            return f; // the per-packet validators report the missing header
        };
        let psn = pkt.bth.psn;
        let msn = m.msn.value();
        let Some(read) = self.reads.get(&msn) else {
            if self.other.contains_key(&msn) {
                f.push(Finding::new(
                    "MR-MPR-1",
                    format!(
                        "MP READ Response PSN {psn} carries MSN {msn}, which is not a READ's (a SEND, WRITE or atomic message has it)"
                    ),
                ));
            }
            return f;
        };
        self.judged += 1;
        let o = m.offset;
        if m.msg_len != read.len {
            f.push(Finding::new(
                "MR-MPR-1",
                format!(
                    "MP READ Response PSN {psn} (MSN {msn}) carries read length {}, the READ's is {}",
                    m.msg_len, read.len
                ),
            ));
        }
        // An offset off the PMTU grid is the validators' finding.
        if let Some(pmtu) = self.pmtu.filter(|&p| p > 0 && o % p == 0) {
            let want = read.psn.add(o / pmtu);
            if psn != want {
                f.push(Finding::new(
                    "MR-MPR-1",
                    format!(
                        "MP READ Response with offset {o} of the READ at PSN {} (MSN {msn}) has PSN {psn}, expected {want} (READ PSN + offset / PMTU {pmtu})",
                        read.psn
                    ),
                ));
            }
        }
        f
    }

    /// READs kept (the memory held).
    pub fn kept(&self) -> usize {
        self.reads.len()
    }
}
