//! A one-way link: serialization at its rate, the impairment pipeline
//! (drop, corrupt, ECN mark, duplicate, reorder, delay and jitter), and the
//! frames in flight ordered by arrival time.

use super::impair::{Impairments, SimRng};
use super::paths::{PortRule, path_of, udp_src_port};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What a link did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames given to the link.
    pub sent: u64,
    /// Frames lost.
    pub dropped: u64,
    /// Extra copies delivered.
    pub duplicated: u64,
    /// Frames held back behind later ones.
    pub reordered: u64,
    /// Frames with one byte changed.
    pub corrupted: u64,
    /// Frames marked CE.
    pub marked: u64,
    /// Frames delivered.
    pub delivered: u64,
    /// Most frames in flight at once.
    pub max_in_flight: usize,
}

#[derive(Debug)]
struct Held {
    frame: Vec<u8>,
    remaining: u32,
    deadline: u64,
}

/// One direction of a connection between two devices.
#[derive(Debug)]
pub struct Link {
    imp: Impairments,
    rng: SimRng,
    busy_until: u64,
    seq: u64,
    in_flight: BinaryHeap<Reverse<(u64, u64, Vec<u8>)>>,
    held: Vec<Held>,
    stats: LinkStats,
    /// Extra delay of each parallel path (empty: one path).
    paths: Vec<u64>,
    rules: Vec<PortRule>,
}

/// Ethernet header length (frames carry no VLAN tag here).
const ETH_LEN: usize = 14;

impl Link {
    /// A link with these impairments and seed.
    pub fn new(imp: Impairments, seed: u64) -> Self {
        Link {
            imp,
            rng: SimRng::new(seed),
            busy_until: 0,
            seq: 0,
            in_flight: BinaryHeap::new(),
            held: Vec::new(),
            stats: LinkStats::default(),
            paths: Vec::new(),
            rules: Vec::new(),
        }
    }

    /// Parallel paths with these extra one-way delays; a frame takes the
    /// one a hash of its UDP source port selects ([`path_of`]).
    pub fn set_paths(&mut self, extra_delay_ns: Vec<u64>) {
        self.paths = extra_delay_ns;
    }

    /// Adds an impairment for one UDP source port.
    pub fn add_rule(&mut self, rule: PortRule) {
        self.rules.push(rule);
    }

    /// Statistics so far.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// Frames in flight or held.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len() + self.held.len()
    }

    fn schedule(&mut self, at: u64, frame: Vec<u8>) {
        self.seq += 1;
        self.in_flight.push(Reverse((at, self.seq, frame)));
        self.stats.max_in_flight = self.stats.max_in_flight.max(self.in_flight());
    }

    /// A frame leaves the sender at `now`.
    pub fn send(&mut self, now: u64, mut frame: Vec<u8>) {
        self.stats.sent += 1;
        let tx_ns = ((frame.len() as f64 * 8.0) / self.imp.rate_gbps.max(1e-6)).ceil() as u64;
        self.busy_until = self.busy_until.max(now) + tx_ns;
        if self.rng.chance(self.imp.drop) {
            self.stats.dropped += 1;
            return;
        }
        let port = udp_src_port(&frame);
        let rule = self.rules.iter().find(|r| Some(r.port) == port).copied();
        if let Some(r) = rule {
            if self.rng.chance(r.drop) {
                self.stats.dropped += 1;
                return;
            }
            if self.rng.chance(r.ecn_mark) && mark_ce(&mut frame) {
                self.stats.marked += 1;
            }
        }
        let path_delay = match (port, self.paths.len()) {
            (Some(p), n) if n > 0 => self.paths[path_of(p, n)],
            _ => 0,
        };
        if self.rng.chance(self.imp.corrupt) && frame.len() > ETH_LEN {
            let at = ETH_LEN + self.rng.below((frame.len() - ETH_LEN) as u64) as usize;
            let flip = 1 + self.rng.below(255) as u8;
            frame[at] ^= flip;
            self.stats.corrupted += 1;
        }
        if self.rng.chance(self.imp.ecn_mark) && mark_ce(&mut frame) {
            self.stats.marked += 1;
        }
        let jitter = self.rng.below(self.imp.jitter_ns + 1);
        let arrival = self.busy_until + self.imp.delay_ns + jitter + path_delay;
        let copies = if self.rng.chance(self.imp.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for copy in 0..copies {
            let frame = if copy + 1 == copies {
                std::mem::take(&mut frame)
            } else {
                frame.clone()
            };
            if self.imp.reorder_depth > 0 && self.rng.chance(self.imp.reorder) {
                self.stats.reordered += 1;
                let remaining = 1 + self.rng.below(u64::from(self.imp.reorder_depth)) as u32;
                // Released behind `remaining` later frames, or after a while.
                let deadline = arrival + u64::from(remaining) * tx_ns.max(100) + 1;
                self.held.push(Held {
                    frame,
                    remaining,
                    deadline,
                });
                continue;
            }
            self.schedule(arrival + copy as u64, frame);
            self.overtake(arrival + 1);
        }
    }

    /// A frame passed the held ones: count down and release those due.
    fn overtake(&mut self, at: u64) {
        let mut i = 0;
        while i < self.held.len() {
            self.held[i].remaining -= 1;
            if self.held[i].remaining == 0 {
                let h = self.held.swap_remove(i);
                self.schedule(at, h.frame);
            } else {
                i += 1;
            }
        }
    }

    /// The time of the next arrival or release.
    pub fn next_event(&self) -> Option<u64> {
        let arrival = self.in_flight.peek().map(|Reverse((t, _, _))| *t);
        let held = self.held.iter().map(|h| h.deadline).min();
        match (arrival, held) {
            (Some(a), Some(h)) => Some(a.min(h)),
            (a, h) => a.or(h),
        }
    }

    /// Frames arriving at or before `now`, in arrival order.
    pub fn take_due(&mut self, now: u64) -> Vec<Vec<u8>> {
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].deadline <= now {
                let h = self.held.swap_remove(i);
                self.schedule(now, h.frame);
            } else {
                i += 1;
            }
        }
        let mut out = Vec::new();
        while let Some(Reverse((t, _, _))) = self.in_flight.peek() {
            if *t > now {
                break;
            }
            if let Some(Reverse((_, _, frame))) = self.in_flight.pop() {
                out.push(frame);
            }
        }
        self.stats.delivered += out.len() as u64;
        out
    }
}

/// Marks an ECN-capable IPv4 frame CE and fixes the header checksum, as a
/// switch does. Returns whether it marked.
pub(super) fn mark_ce(frame: &mut [u8]) -> bool {
    let Some(ip) = frame.get_mut(ETH_LEN..ETH_LEN + 20) else {
        return false;
    };
    if ip[0] >> 4 != 4 || ip[1] & 0b11 == 0 {
        return false;
    }
    ip[1] |= 0b11;
    ip[10] = 0;
    ip[11] = 0;
    let sum = metaroce_codec::ipv4::internet_checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    true
}
