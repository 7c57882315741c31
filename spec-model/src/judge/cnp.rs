//! CNP generation and pacing judged against the CE marks of a capture
//! (SPEC.md §6.17), with the notification point's parameters ([`NpParams`]).
//!
//! A Base packet that arrives CE-marked with a valid ICRC and is not an
//! Acknowledge, Atomic Acknowledge or CNP obliges its receiver (the
//! notification point, NP) to send a CNP to the sender's QP within
//! `cnp_delay_max` (MR-CNP-1), unless a CNP of the same pacing scope left
//! less than `cnp_interval` before (MR-CNP-2). The judge follows, per NP and
//! pacing slot, the last CNP observed and the oldest mark still owed a CNP:
//!
//! - a mark while no CNP of its slot was observed within `cnp_interval` (plus
//!   the tolerance) owes one; within `cnp_interval` minus the tolerance it is
//!   paced; in between it is not judged;
//! - a CNP observed from the NP to the marked packet's sender (IP addresses
//!   swapped, DestQP the sender's QPN when the judge knows it, MR-CNP-4)
//!   settles its slot's debt; two CNPs of one slot less than `cnp_interval`
//!   minus the tolerance apart break MR-CNP-2;
//! - a debt still open `cnp_delay_max` plus the tolerance after its mark is
//!   a finding (information in a lossy capture: the mark may have been lost
//!   after the capture point); a capture that ends earlier is not judged;
//! - a CNP addressed to a QP that the capture shows is an MP QP breaks
//!   MR-CNP-6.
//!
//! The capture may be taken anywhere on the path: marks made after the
//! capture point are invisible, so a CNP with no visible mark is not a
//! finding; capture timestamps are not the NP's, which the tolerance covers.
//!
//! Memory: one slot per NP and pacing key seen, forgotten after the
//! connections' idle time ([`CnpJudge::forget_idle`]), at most
//! [`MAX_SLOTS`]; deadlines in a queue ordered by time; at most
//! [`MAX_MP_QPS`] MP QPs remembered.

use super::ConversationFinding;
use crate::Finding;
use crate::model::congestion::np::{NpParams, PacingScope};
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;

/// Most pacing slots followed at once; the least recently used is dropped.
pub const MAX_SLOTS: usize = 65_536;

/// Most MP QPs remembered for MR-CNP-6.
pub const MAX_MP_QPS: usize = 65_536;

/// The pacing slot of a CNP, per notification point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Scope {
    /// The QP the CNP goes to.
    Qp(u32),
    /// Scope `qp`, but the sender's QPN is not known yet: the peer address.
    QpOf(IpAddr),
    /// The peer address (`ip_pair` scope; the NP's address is in the key).
    IpPair(IpAddr),
    /// The whole port.
    Port,
}

/// A slot: (NP address, scope).
type SlotKey = (IpAddr, Scope);

/// A mark still owed a CNP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Debt {
    frame: u64,
    due_ns: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    /// Time and frame of the last CNP observed.
    last_cnp: Option<(u64, u64)>,
    debt: Option<Debt>,
    /// Last time the slot was used.
    seen_ns: u64,
}

/// A CE-marked packet, as the CNP judge needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mark {
    pub frame: u64,
    pub timestamp_ns: u64,
    /// The marked packet's source (the CNP's destination).
    pub src: IpAddr,
    /// The marked packet's destination (the NP).
    pub dst: IpAddr,
    /// The QPN of the QP that sent it, when known.
    pub sender_qp: Option<u32>,
}

/// Judges CNPs against CE marks; see the module documentation.
#[derive(Clone, Debug)]
pub(crate) struct CnpJudge {
    params: NpParams,
    tolerance_ns: u64,
    lossy: bool,
    slots: HashMap<SlotKey, Slot>,
    /// Deadlines in the order they fall: (due, slot, frame).
    deadlines: VecDeque<(u64, SlotKey, u64)>,
    /// (address, QPN) of the QPs the capture shows use MP.
    mp_qps: HashSet<(IpAddr, u32)>,
}

impl CnpJudge {
    pub fn new(params: NpParams, tolerance_ns: u64, lossy: bool) -> Self {
        CnpJudge {
            params,
            tolerance_ns,
            lossy,
            slots: HashMap::new(),
            deadlines: VecDeque::new(),
            mp_qps: HashSet::new(),
        }
    }

    fn scope(&self, peer: IpAddr, qp: Option<u32>) -> Scope {
        match (self.params.scope, qp) {
            (PacingScope::Qp, Some(q)) => Scope::Qp(q),
            (PacingScope::Qp, None) => Scope::QpOf(peer),
            (PacingScope::IpPair, _) => Scope::IpPair(peer),
            (PacingScope::Port, _) => Scope::Port,
        }
    }

    /// Time passed to `now_ns`: debts past their deadline are findings.
    #[inline]
    pub fn advance(&mut self, now_ns: u64, out: &mut Vec<ConversationFinding>) {
        if self
            .deadlines
            .front()
            .is_some_and(|&(due, _, _)| due.saturating_add(self.tolerance_ns) < now_ns)
        {
            self.advance_due(now_ns, out);
        }
    }

    /// [`CnpJudge::advance`] with a deadline passed (rare: kept out of line).
    #[inline(never)]
    fn advance_due(&mut self, now_ns: u64, out: &mut Vec<ConversationFinding>) {
        let tol = self.tolerance_ns;
        while let Some(&(due, key, frame)) = self.deadlines.front() {
            if due.saturating_add(tol) >= now_ns {
                break;
            }
            self.deadlines.pop_front();
            let Some(slot) = self.slots.get_mut(&key) else {
                continue;
            };
            if slot.debt.is_none_or(|d| d.frame != frame) {
                continue; // settled, or replaced
            }
            slot.debt = None;
            let message = format!(
                "CE-marked packet to {} got no CNP within cnp_delay_max ({} ns{})",
                key.0,
                self.params.delay_max_ns,
                if tol > 0 {
                    format!(" + {tol} ns tolerance")
                } else {
                    String::new()
                }
            );
            let finding = if self.lossy {
                Finding::info(
                    "MR-CNP-1",
                    format!("{message} (mark or CNP lost beside the capture point?)"),
                )
            } else {
                Finding::new("MR-CNP-1", message)
            };
            out.push(ConversationFinding {
                finding,
                frames: vec![frame],
                qpns: Vec::new(),
                connection: None,
            });
        }
    }

    /// A CE-marked packet that MR-CNP-1 covers.
    pub fn on_mark(&mut self, m: &Mark) {
        if !self.params.enabled {
            return;
        }
        let key = (m.dst, self.scope(m.src, m.sender_qp));
        self.make_room(&key);
        let slot = self.slots.entry(key).or_default();
        slot.seen_ns = m.timestamp_ns;
        if slot.debt.is_some() {
            return; // one CNP will answer both marks
        }
        let (interval, tol) = (self.params.interval_ns, self.tolerance_ns);
        let owed = match slot.last_cnp {
            None => true,
            Some((at, _)) => {
                let since = m.timestamp_ns.saturating_sub(at);
                // Paced below interval − tol, owed from interval + tol on,
                // not judged in between.
                since >= interval.saturating_add(tol)
            }
        };
        if owed {
            let due_ns = m.timestamp_ns.saturating_add(self.params.delay_max_ns);
            slot.debt = Some(Debt {
                frame: m.frame,
                due_ns,
            });
            self.deadlines.push_back((due_ns, key, m.frame));
        }
    }

    /// A CNP from `src` (the NP) to QPN `dest_qp` at `dst`, captured at `now_ns`.
    pub fn on_cnp(
        &mut self,
        frame: u64,
        now_ns: u64,
        (src, dst): (IpAddr, IpAddr),
        dest_qp: u32,
        out: &mut Vec<ConversationFinding>,
    ) {
        if self.mp_qps.contains(&(dst, dest_qp)) {
            out.push(ConversationFinding {
                finding: Finding::new(
                    "MR-CNP-6",
                    format!("CNP from {src} to MP QP {dest_qp:#08x} at {dst}"),
                ),
                frames: vec![frame],
                qpns: vec![dest_qp],
                connection: None,
            });
        }
        let key = (src, self.scope(dst, Some(dest_qp)));
        self.make_room(&key);
        let (interval, tol) = (self.params.interval_ns, self.tolerance_ns);
        let slot = self.slots.entry(key).or_default();
        slot.seen_ns = now_ns;
        if let Some((at, prev)) = slot.last_cnp {
            let since = now_ns.saturating_sub(at);
            if since < interval.saturating_sub(tol) {
                out.push(ConversationFinding {
                    finding: Finding::new(
                        "MR-CNP-2",
                        format!(
                            "CNP to QPN {dest_qp:#08x} {since} ns after the previous one of its pacing scope (cnp_interval {interval} ns)"
                        ),
                    ),
                    frames: vec![frame, prev],
                    qpns: vec![dest_qp],
                    connection: None,
                });
            }
        }
        slot.last_cnp = Some((now_ns, frame));
        slot.debt = None;
        // Under scope `qp`, marks whose sender QPN was not known wait in a
        // slot keyed by the peer's address: this CNP answers them too.
        if let Scope::Qp(_) = key.1
            && let Some(s) = self.slots.get_mut(&(src, Scope::QpOf(dst)))
        {
            s.debt = None;
            s.last_cnp = Some((now_ns, frame));
        }
    }

    /// The capture shows QPN `qpn` at `ip` uses MP (MR-CNP-6).
    pub fn mp_qp(&mut self, ip: IpAddr, qpn: u32) {
        if self.mp_qps.len() < MAX_MP_QPS {
            self.mp_qps.insert((ip, qpn));
        }
    }

    /// Forgets slots unused since `before_ns` that owe nothing.
    pub fn forget_idle(&mut self, before_ns: u64) {
        self.slots
            .retain(|_, s| s.debt.is_some() || s.seen_ns >= before_ns);
    }

    /// Keeps the slot count within [`MAX_SLOTS`] before `key` is added.
    fn make_room(&mut self, key: &SlotKey) {
        if self.slots.len() < MAX_SLOTS || self.slots.contains_key(key) {
            return;
        }
        let oldest = self
            .slots
            .iter()
            .min_by_key(|(_, s)| s.seen_ns)
            .map(|(k, _)| *k);
        if let Some(k) = oldest {
            self.slots.remove(&k);
        }
    }
}
