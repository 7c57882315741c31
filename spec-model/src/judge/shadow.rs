//! Shadow memory (opt-in, [`ConversationConfig::shadow_bytes`](super::ConversationConfig)):
//! per responder address and R_Key, the bytes the capture proves a memory
//! range held, from the payloads of RDMA WRITEs (what was written) and of
//! READ responses (what was read), and per 8-byte atomic target the value
//! after each Compare-Swap or Fetch-Add (from its Atomic Acknowledge's
//! original value and the request's operands).
//!
//! A READ response whose bytes differ from the ones proven there, or an
//! atomic's original value that differs from the value the previous atomic
//! left, is *information* (MR-READ-6, MR-ATOM-4), never a MUST finding: the
//! responder host's CPU, a QP the capture does not show, a WRITE that was
//! NAKed (its bytes were never placed), a frame the capture point lost, or
//! two QPs whose requests the responder executes in another order than the
//! capture shows them may all change that memory in between. It names both
//! frames. Bytes written by WRITE and values changed by atomics are not
//! compared with each other (an atomic's value is in the responder host's
//! byte order, which the capture does not show): an atomic forgets the
//! bytes of its 8 bytes, a WRITE the atomic values it overlaps.
//!
//! Only frames whose payload was captured and that their receiver admits
//! are used. Memory: at most the configured number of payload bytes (then
//! what does not fit is counted, and what it overwrites still forgotten),
//! [`MAX_VALUES`] atomic values, [`MAX_MESSAGES`] WRITE/READ/atomic
//! requests per connection.

use super::ConversationFinding;
use crate::Finding;
use metaroce_codec::{Opcode, Psn, RocePacket};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;

/// Most atomic values kept.
pub const MAX_VALUES: usize = 4096;

/// Most requests per connection whose responses or later packets are
/// placed by PSN.
pub const MAX_MESSAGES: usize = 32;

/// Most contradictions reported as findings; the others are counted.
pub const MAX_REPORTED: u64 = 16;

/// A memory region: the responder's address and the R_Key.
type Region = (IpAddr, u32);

/// Bytes the capture proves a range held, from `frame`.
#[derive(Clone, Debug)]
struct Seg {
    bytes: Vec<u8>,
    frame: u64,
}

/// What a request did, for placing its later packets and responses.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Write,
    Read,
    Atomic {
        fetch_add: bool,
        swap_add: u64,
        compare: u64,
        answered: bool,
    },
}

#[derive(Clone, Copy, Debug)]
struct Msg {
    psn: Psn,
    va: u64,
    rkey: u32,
    len: u32,
    kind: Kind,
}

/// A connection's recent WRITE, READ and atomic requests.
#[derive(Clone, Debug, Default)]
pub(crate) struct Messages {
    msgs: VecDeque<Msg>,
}

impl Messages {
    fn push(&mut self, m: Msg) {
        if self.msgs.iter().any(|o| o.psn == m.psn) {
            return; // a retransmission
        }
        if self.msgs.len() >= MAX_MESSAGES {
            self.msgs.pop_front();
        }
        self.msgs.push_back(m);
    }

    /// The newest WRITE or READ (`read`) whose packets include PSN `psn`,
    /// and the byte offset of that packet in it.
    fn place(&self, psn: Psn, read: bool, pmtu: Option<u32>) -> Option<(Msg, u64)> {
        self.msgs.iter().rev().find_map(|m| {
            if matches!(m.kind, Kind::Read) != read || matches!(m.kind, Kind::Atomic { .. }) {
                return None;
            }
            if psn.is_before(m.psn) {
                return None;
            }
            let k = psn.distance(m.psn);
            if k == 0 {
                return Some((*m, 0));
            }
            let pmtu = pmtu?;
            (k < m.len.div_ceil(pmtu)).then(|| (*m, u64::from(k) * u64::from(pmtu)))
        })
    }
}

/// The shadow memory of a capture; see the module documentation.
#[derive(Clone, Debug)]
pub(crate) struct Shadow {
    budget: usize,
    bytes: usize,
    regions: HashMap<Region, BTreeMap<u64, Seg>>,
    values: BTreeMap<(IpAddr, u32, u64), (u64, u64)>,
    /// Payload bytes not kept (over the budget).
    pub dropped: u64,
    /// Contradictions seen (the first [`MAX_REPORTED`] reported).
    pub contradictions: u64,
}

impl Shadow {
    pub fn new(budget: usize) -> Self {
        Shadow {
            budget,
            bytes: 0,
            regions: HashMap::new(),
            values: BTreeMap::new(),
            dropped: 0,
            contradictions: 0,
        }
    }

    /// A request from `src` to `dst` (frame `frame`) of a connection whose
    /// requests are `msgs`.
    pub fn on_request(
        &mut self,
        msgs: &mut Messages,
        pmtu: Option<u32>,
        (dst, frame): (IpAddr, u64),
        pkt: &RocePacket<'_>,
    ) {
        let op = pkt.bth.opcode;
        let psn = pkt.bth.psn;
        if op.is_rc_write() {
            let (m, offset) = match pkt.ext.reth {
                Some(r) => {
                    let m = Msg {
                        psn,
                        va: r.va,
                        rkey: r.rkey,
                        len: r.dma_len,
                        kind: Kind::Write,
                    };
                    msgs.push(m);
                    (m, 0)
                }
                None => match msgs.place(psn, false, pmtu) {
                    Some(p) => p,
                    None => return,
                },
            };
            if offset + pkt.payload.len() as u64 > u64::from(m.len) {
                return;
            }
            self.record(
                (dst, m.rkey),
                m.va.wrapping_add(offset),
                pkt.payload,
                frame,
                true,
            );
        } else if op == Opcode::RC_READ_REQUEST {
            if let Some(r) = pkt.ext.reth {
                msgs.push(Msg {
                    psn,
                    va: r.va,
                    rkey: r.rkey,
                    len: r.dma_len,
                    kind: Kind::Read,
                });
            }
        } else if op == Opcode::RC_ATOMIC_WRITE {
            if let Some(r) = pkt.ext.reth {
                self.forget((dst, r.rkey), r.va, 8, true);
            }
        } else if let Some(a) = pkt.ext.atomic_eth {
            msgs.push(Msg {
                psn,
                va: a.va,
                rkey: a.rkey,
                len: 8,
                kind: Kind::Atomic {
                    fetch_add: op == Opcode::RC_FETCH_ADD,
                    swap_add: a.swap_add,
                    compare: a.compare,
                    answered: false,
                },
            });
        }
    }

    /// A response from `src` (frame `frame`) of a connection whose requests
    /// are `msgs`.
    pub fn on_response(
        &mut self,
        msgs: &mut Messages,
        pmtu: Option<u32>,
        (src, frame): (IpAddr, u64),
        pkt: &RocePacket<'_>,
        out: &mut Vec<ConversationFinding>,
    ) {
        let op = pkt.bth.opcode;
        let psn = pkt.bth.psn;
        if op.is_rc_read_response() {
            let Some((m, offset)) = msgs.place(psn, true, pmtu) else {
                return;
            };
            if pkt.payload.is_empty() || offset + pkt.payload.len() as u64 > u64::from(m.len) {
                return;
            }
            let region = (src, m.rkey);
            let va = m.va.wrapping_add(offset);
            if let Some((at, proved)) = self.differs(region, va, pkt.payload) {
                self.contradict(out, "MR-READ-6", [frame, proved], || {
                    format!(
                        "READ Response PSN {psn} (frame {frame}) returns, at VA {at:#x} of R_Key {:#x}, a byte other than frame {proved} showed there; not proof of a fault: the responder's CPU, a QP not captured, a NAKed WRITE or a lost frame may have changed that memory in between",
                        m.rkey
                    )
                });
            }
            self.record(region, va, pkt.payload, frame, false);
        } else if op == Opcode::RC_ATOMIC_ACK
            && let Some(orig) = pkt.ext.atomic_ack_eth.map(|a| a.orig)
            && let Some(m) = msgs.msgs.iter_mut().find(|m| m.psn == psn)
            && let Kind::Atomic {
                fetch_add,
                swap_add,
                compare,
                answered: answered @ false,
            } = &mut m.kind
        {
            *answered = true;
            let (fetch_add, swap_add, compare) = (*fetch_add, *swap_add, *compare);
            let (va, rkey) = (m.va, m.rkey);
            let key = (src, rkey, va);
            if let Some(&(value, proved)) = self.values.get(&key)
                && value != orig
            {
                self.contradict(out, "MR-ATOM-4", [frame, proved], || {
                    format!(
                        "Atomic Acknowledge PSN {psn} (frame {frame}) returns original value {orig:#x} at VA {va:#x} of R_Key {rkey:#x}, but the atomic answered in frame {proved} left {value:#x} there; not proof of a fault: the responder's CPU, a QP not captured or a lost frame may have changed it in between"
                    )
                });
            }
            let after = if fetch_add {
                orig.wrapping_add(swap_add)
            } else if orig == compare {
                swap_add
            } else {
                orig
            };
            self.forget((src, rkey), va, 8, false);
            if self.values.len() < MAX_VALUES || self.values.contains_key(&key) {
                self.values.insert(key, (after, frame));
            }
        }
    }

    /// Reports a contradiction (the first [`MAX_REPORTED`]).
    fn contradict(
        &mut self,
        out: &mut Vec<ConversationFinding>,
        id: &'static str,
        frames: [u64; 2],
        message: impl FnOnce() -> String,
    ) {
        self.contradictions += 1;
        if self.contradictions <= MAX_REPORTED {
            out.push(ConversationFinding {
                finding: Finding::info(id, message()),
                frames: frames.to_vec(),
                qpns: Vec::new(),
                connection: None,
            });
        }
    }

    /// The first byte of `data` at `va` that differs from the bytes proven
    /// there, and the frame that proved them.
    fn differs(&self, region: Region, va: u64, data: &[u8]) -> Option<(u64, u64)> {
        let segs = self.regions.get(&region)?;
        let end = va.checked_add(data.len() as u64)?;
        for (&start, seg) in segs.range(..end).rev() {
            let seg_end = start + seg.bytes.len() as u64;
            if seg_end <= va {
                break;
            }
            let from = start.max(va);
            let to = seg_end.min(end);
            let (a, b) = (
                &seg.bytes[(from - start) as usize..(to - start) as usize],
                &data[(from - va) as usize..(to - va) as usize],
            );
            if let Some(i) = a.iter().zip(b).position(|(x, y)| x != y) {
                return Some((from + i as u64, seg.frame));
            }
        }
        None
    }

    /// The capture proves `data` at `va` from `frame` on; a WRITE
    /// (`written`) also forgets the atomic values it overlaps.
    fn record(&mut self, region: Region, va: u64, data: &[u8], frame: u64, written: bool) {
        if data.is_empty() {
            return;
        }
        self.forget(region, va, data.len() as u64, written);
        if va.checked_add(data.len() as u64).is_none() {
            return;
        }
        if self.bytes + data.len() > self.budget {
            self.dropped += data.len() as u64;
            return;
        }
        self.bytes += data.len();
        self.regions.entry(region).or_default().insert(
            va,
            Seg {
                bytes: data.to_vec(),
                frame,
            },
        );
    }

    /// Forgets what was proven of `[va, va + len)`; with `values`, the
    /// atomic values of targets that overlap it too.
    fn forget(&mut self, region: Region, va: u64, len: u64, values: bool) {
        let end = va.saturating_add(len);
        if values && !self.values.is_empty() {
            let lo = (region.0, region.1, va.saturating_sub(7));
            let hi = (region.0, region.1, end);
            let stale: Vec<_> = self.values.range(lo..hi).map(|(k, _)| *k).collect();
            for k in stale {
                self.values.remove(&k);
            }
        }
        let Some(segs) = self.regions.get_mut(&region) else {
            return;
        };
        let overlapping: Vec<u64> = segs
            .range(..end)
            .rev()
            .take_while(|(s, seg)| **s + seg.bytes.len() as u64 > va)
            .map(|(s, _)| *s)
            .collect();
        for start in overlapping {
            let Some(seg) = segs.remove(&start) else {
                continue;
            };
            self.bytes -= seg.bytes.len();
            let seg_end = start + seg.bytes.len() as u64;
            if start < va {
                let left = seg.bytes[..(va - start) as usize].to_vec();
                self.bytes += left.len();
                segs.insert(
                    start,
                    Seg {
                        bytes: left,
                        frame: seg.frame,
                    },
                );
            }
            if seg_end > end {
                let right = seg.bytes[(end - start) as usize..].to_vec();
                self.bytes += right.len();
                segs.insert(
                    end,
                    Seg {
                        bytes: right,
                        frame: seg.frame,
                    },
                );
            }
        }
        if segs.is_empty() {
            self.regions.remove(&region);
        }
    }

    /// Payload bytes kept.
    pub fn held(&self) -> usize {
        self.bytes
    }
}
