//! A deterministic network simulator: devices joined by one-way [`Link`]s
//! on virtual time (nanoseconds), each link with a seeded impairment
//! pipeline ([`Impairments`]). Frames are routed by destination MAC.
//!
//! The simulator owns each device through the in-memory driver
//! ([`crate::drivers::memory::MemoryDriver`]) and advances time event by
//! event: the next frame arrival, held-frame release or device timer.

pub mod fabric;
mod impair;
mod link;
mod paths;

pub use impair::{Impairments, SimRng};
pub use link::{Link, LinkStats};
pub use paths::{PortRule, path_of, udp_src_port};

use crate::Device;
use crate::drivers::memory::MemoryDriver;
use std::collections::BTreeMap;

/// Devices and links.
#[derive(Debug, Default)]
pub struct Network {
    nodes: Vec<MemoryDriver>,
    links: BTreeMap<(usize, usize), Link>,
    now: u64,
    unroutable: u64,
}

impl Network {
    /// An empty network at time 0.
    pub fn new() -> Self {
        Network::default()
    }

    /// Adds a device; returns its index.
    pub fn add(&mut self, device: Device) -> usize {
        self.nodes.push(MemoryDriver::new(device));
        self.nodes.len() - 1
    }

    /// Joins `a` and `b` with one link each way, seeded from `seed`.
    pub fn connect(&mut self, a: usize, b: usize, imp: Impairments, seed: u64) {
        self.links.insert((a, b), Link::new(imp, seed));
        self.links
            .insert((b, a), Link::new(imp, seed ^ 0x9E37_79B9_7F4A_7C15));
    }

    /// Current virtual time.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// A device.
    pub fn device(&self, i: usize) -> &Device {
        self.nodes[i].device()
    }

    /// A device, for verbs calls.
    pub fn device_mut(&mut self, i: usize) -> &mut Device {
        self.nodes[i].device_mut()
    }

    /// The link from `a` to `b`.
    pub fn link(&self, a: usize, b: usize) -> Option<&Link> {
        self.links.get(&(a, b))
    }

    /// The link from `a` to `b`, to add paths or port rules.
    pub fn link_mut(&mut self, a: usize, b: usize) -> Option<&mut Link> {
        self.links.get_mut(&(a, b))
    }

    /// Frames sent to a MAC no device has.
    pub fn unroutable(&self) -> u64 {
        self.unroutable
    }

    fn route(&mut self, from: usize, frames: Vec<Vec<u8>>) {
        for frame in frames {
            let to = frame.get(0..6).and_then(|mac| {
                self.nodes
                    .iter()
                    .position(|n| n.device().config().mac == mac)
            });
            match to.and_then(|to| self.links.get_mut(&(from, to))) {
                Some(link) => link.send(self.now, frame),
                None => self.unroutable += 1,
            }
        }
    }

    /// Sends what every device has queued now (after verbs calls).
    pub fn flush(&mut self) {
        for i in 0..self.nodes.len() {
            let frames = self.nodes[i].poll(self.now);
            self.route(i, frames);
        }
    }

    /// Advances to the next event and processes it. Returns `false` when
    /// nothing is in flight and no timer is armed.
    pub fn step(&mut self) -> bool {
        self.flush();
        let next = self
            .links
            .values()
            .filter_map(Link::next_event)
            .chain(self.nodes.iter().filter_map(MemoryDriver::next_timeout))
            .min();
        let Some(t) = next else { return false };
        self.now = self.now.max(t);
        let now = self.now;
        for (&(_, to), link) in self.links.iter_mut() {
            for frame in link.take_due(now) {
                self.nodes[to].deliver(frame);
            }
        }
        self.flush();
        true
    }
}
