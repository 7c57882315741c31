//! A two-tier leaf–spine fabric on virtual time: hosts (sans-IO
//! [`Device`]s) on leaf switches, every leaf joined to every spine, switch
//! output queues with ECN marking, tail drop and optional trimming
//! ([`port`]), ECMP hashing of the 5-tuple at every hop (so a UDP source
//! port is a path, as on real switches), and link events during a run (a
//! cable down, then withdrawn from ECMP after a reconvergence delay; a
//! cable degraded to a fraction of its rate).
//!
//! Deterministic: one event queue ordered by (time, insertion order), one
//! seeded random source for the marking decisions, and devices seeded by
//! the caller. Host NICs pull frames from their device when the wire is
//! free (round-robin over QPs, [`Device::poll_transmit`]), so a device sees
//! its own NIC's backpressure and its timestamps are taken at send time.
//!
//! [`run`] drives workloads ([`workload`]) over the fabric with Base or MP
//! QPs and measures them; [`scenario`] holds the built-in scenarios of
//! `metaroce-ref fabric`.

mod port;
pub mod run;
pub mod scenario;
pub mod workload;

pub use port::{Ecn, PortStats, QueuePolicy};

use super::SimRng;
use crate::{Device, DeviceConfig};
use core::net::Ipv4Addr;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use port::Port;

/// The shape and the switches of a fabric.
#[derive(Clone, Debug, PartialEq)]
pub struct FabricConfig {
    /// Hosts (any number from 2; the last leaf may be partly filled).
    pub hosts: usize,
    /// Hosts on each leaf.
    pub hosts_per_leaf: usize,
    /// Spines (every leaf has one uplink to each).
    pub spines: usize,
    /// Host link rate in Gb/s.
    pub host_gbps: f64,
    /// Leaf–spine link rate in Gb/s.
    pub fabric_gbps: f64,
    /// One-way propagation delay of every link.
    pub link_delay_ns: u64,
    /// Output queues of the switches.
    pub switch_queue: QueuePolicy,
    /// Seed of the fabric's random choices (marking, ECMP salts).
    pub seed: u64,
}

impl FabricConfig {
    /// A non-blocking fabric of `hosts` hosts at 100 Gb/s, 16 hosts per
    /// leaf (fewer for small fabrics), 1 µs links, 1 MiB buffers per
    /// output queue, ECN from 100 KiB to 400 KiB (DCQCN-style RED).
    pub fn non_blocking(hosts: usize, seed: u64) -> Self {
        let per_leaf = if hosts >= 64 { 16 } else { 4.max(hosts / 4) };
        FabricConfig {
            hosts,
            hosts_per_leaf: per_leaf,
            spines: per_leaf,
            host_gbps: 100.0,
            fabric_gbps: 100.0,
            link_delay_ns: 1_000,
            switch_queue: QueuePolicy {
                buffer_bytes: 1 << 20,
                ecn: Some(Ecn {
                    kmin_bytes: 100 << 10,
                    kmax_bytes: 400 << 10,
                    pmax: 0.2,
                }),
                trim_dscp: None,
            },
            seed,
        }
    }

    /// Leaves.
    pub fn leaves(&self) -> usize {
        self.hosts.div_ceil(self.hosts_per_leaf.max(1))
    }

    /// Host capacity of a leaf over its uplink capacity (1.0: non-blocking).
    pub fn oversubscription(&self) -> f64 {
        (self.hosts_per_leaf as f64 * self.host_gbps) / (self.spines as f64 * self.fabric_gbps)
    }

    /// The leaf of host `h`.
    pub fn leaf_of(&self, h: usize) -> usize {
        h / self.hosts_per_leaf.max(1)
    }
}

/// The MAC address of host `h`.
pub fn host_mac(h: usize) -> [u8; 6] {
    [0x02, 0xFA, 0xB0, 0, (h >> 8) as u8, h as u8]
}

/// The IPv4 address of host `h`.
pub fn host_ip(h: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 1 + (h >> 8) as u8, h as u8, 1)
}

/// What happens to a leaf–spine cable (both directions) during a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CableChange {
    /// The cable fails: queued and arriving frames are lost until ECMP
    /// withdraws it, `reroute_after_ns` later (`None`: never in this run).
    Down {
        /// Reconvergence delay of the fabric's routing.
        reroute_after_ns: Option<u64>,
    },
    /// The cable runs at this fraction of its rate (0 < f ≤ 1).
    Degrade(f64),
}

/// A change to the cable between `leaf` and `spine` at `at_ns`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CableEvent {
    /// When.
    pub at_ns: u64,
    /// Leaf end.
    pub leaf: usize,
    /// Spine end.
    pub spine: usize,
    /// What happens.
    pub change: CableChange,
}

#[derive(Debug)]
enum Kind {
    TxDone(usize),
    Arrive(usize, Vec<u8>),
    Timer(usize),
    Cable(CableEvent),
    Withdraw(usize, usize),
}

#[derive(Debug)]
struct Event {
    at: u64,
    seq: u64,
    kind: Kind,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// What one [`Fabric::step`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Host `h`'s device handled a frame or a timer, or sent a frame: its
    /// completion queues may have changed.
    Host(usize),
    /// A switch or a cable event.
    Fabric,
    /// Nothing is in flight and no timer is armed.
    Idle,
}

/// The fabric with its hosts' devices.
#[derive(Debug)]
pub struct Fabric {
    cfg: FabricConfig,
    hosts: Vec<Device>,
    ports: Vec<Port>,
    host_up: Vec<usize>,
    leaf_down: Vec<usize>,
    up: Vec<Vec<usize>>,
    down: Vec<Vec<usize>>,
    /// Cables ECMP may choose, per [leaf][spine].
    routable: Vec<Vec<bool>>,
    salts: Vec<u64>,
    heap: BinaryHeap<Reverse<Event>>,
    seq: u64,
    now: u64,
    timer_at: Vec<u64>,
    rng: SimRng,
    unroutable: u64,
    bin_ns: u64,
    /// Bytes of data frames (≥ 1 KiB) arriving at hosts, per bin.
    bins: Vec<u64>,
    /// The same for frames from or to the watched leaf's hosts.
    watched: Option<(usize, Vec<u64>)>,
    events: u64,
}

/// Frames at least this long count as data in the throughput bins.
const DATA_FRAME: usize = 1024;

impl Fabric {
    /// A fabric of `cfg` whose host `h` is a device made by `device(h,
    /// config)` from the default configuration with the host's addresses;
    /// throughput is binned every `bin_ns`.
    pub fn new(
        cfg: FabricConfig,
        bin_ns: u64,
        mut device: impl FnMut(usize, DeviceConfig) -> Device,
    ) -> Self {
        let n = cfg.hosts;
        let leaves = cfg.leaves();
        let leaf_node = |l: usize| n + l;
        let spine_node = |s: usize| n + leaves + s;
        let mut ports = Vec::new();
        let mut add = |p: Port| {
            ports.push(p);
            ports.len() - 1
        };
        let d = cfg.link_delay_ns;
        let q = cfg.switch_queue;
        let hosts: Vec<Device> = (0..n)
            .map(|h| device(h, DeviceConfig::new(host_mac(h), host_ip(h))))
            .collect();
        let host_up = (0..n)
            .map(|h| {
                add(Port::new(
                    leaf_node(cfg.leaf_of(h)),
                    cfg.host_gbps,
                    d,
                    QueuePolicy::nic(),
                ))
            })
            .collect();
        let leaf_down = (0..n)
            .map(|h| add(Port::new(h, cfg.host_gbps, d, q)))
            .collect();
        let up = (0..leaves)
            .map(|_| {
                (0..cfg.spines)
                    .map(|s| add(Port::new(spine_node(s), cfg.fabric_gbps, d, q)))
                    .collect()
            })
            .collect();
        let down = (0..cfg.spines)
            .map(|_| {
                (0..leaves)
                    .map(|l| add(Port::new(leaf_node(l), cfg.fabric_gbps, d, q)))
                    .collect()
            })
            .collect();
        let mut rng = SimRng::new(cfg.seed ^ 0xFAB);
        let salts = (0..leaves + cfg.spines).map(|_| rng.next_u64()).collect();
        Fabric {
            routable: vec![vec![true; cfg.spines]; leaves],
            cfg,
            hosts,
            ports,
            host_up,
            leaf_down,
            up,
            down,
            salts,
            heap: BinaryHeap::new(),
            seq: 0,
            now: 0,
            timer_at: vec![u64::MAX; n],
            rng,
            unroutable: 0,
            bin_ns: bin_ns.max(1),
            bins: Vec::new(),
            watched: None,
            events: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &FabricConfig {
        &self.cfg
    }

    /// Current virtual time.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Host `h`'s device.
    pub fn device(&self, h: usize) -> &Device {
        &self.hosts[h]
    }

    /// Host `h`'s device, for verbs calls; call [`Fabric::kick`] after.
    pub fn device_mut(&mut self, h: usize) -> &mut Device {
        &mut self.hosts[h]
    }

    /// Schedules a cable event.
    pub fn schedule(&mut self, e: CableEvent) {
        self.push(e.at_ns, Kind::Cable(e));
    }

    /// Lets host `h` send what its device has (after verbs calls) and
    /// re-arms its timer.
    pub fn kick(&mut self, h: usize) {
        self.start_tx(self.host_up[h]);
        if let Some(t) = self.hosts[h].poll_timeout() {
            let t = t.max(self.now + 1);
            if t != self.timer_at[h] {
                self.timer_at[h] = t;
                self.push(t, Kind::Timer(h));
            }
        }
    }

    /// When the next event is due, if any.
    pub fn next_event_at(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse(e)| e.at)
    }

    /// Moves virtual time forward to `t` (no event may be due before it:
    /// see [`Fabric::next_event_at`]); never backwards.
    pub fn advance_to(&mut self, t: u64) {
        debug_assert!(self.next_event_at().is_none_or(|e| e >= t));
        self.now = self.now.max(t);
    }

    /// Frames switches could not route (no live path).
    pub fn unroutable(&self) -> u64 {
        self.unroutable
    }

    /// Events processed so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Bytes of data frames arriving at hosts per bin of `bin_ns`.
    pub fn throughput_bins(&self) -> &[u64] {
        &self.bins
    }

    /// Also bins the data frames sent from or to the hosts of `leaf`.
    pub fn watch_leaf(&mut self, leaf: usize) {
        self.watched = Some((leaf, Vec::new()));
    }

    /// The bins of the watched leaf (empty when none is watched).
    pub fn watched_bins(&self) -> &[u64] {
        self.watched.as_ref().map_or(&[], |(_, b)| b)
    }

    fn bin(&mut self, to: usize, frame: &[u8]) {
        let b = (self.now / self.bin_ns) as usize;
        let add = |bins: &mut Vec<u64>| {
            if bins.len() <= b {
                bins.resize(b + 1, 0);
            }
            bins[b] += frame.len() as u64;
        };
        add(&mut self.bins);
        if let Some((leaf, bins)) = &mut self.watched {
            // The source host from its address (10.(1 + h / 256).(h % 256).1).
            let src = frame
                .get(27..29)
                .map(|b| (usize::from(b[0]).wrapping_sub(1) << 8) | usize::from(b[1]));
            let on = |h: usize| self.cfg.leaf_of(h) == *leaf;
            if on(to) || src.is_some_and(on) {
                add(bins);
            }
        }
    }

    /// The sum of every switch port's counts, with the deepest queue.
    pub fn switch_stats(&self) -> PortStats {
        let n = self.cfg.hosts;
        let mut s = PortStats::default();
        for p in &self.ports[n..] {
            s.tx_frames += p.stats.tx_frames;
            s.tx_bytes += p.stats.tx_bytes;
            s.dropped += p.stats.dropped;
            s.marked += p.stats.marked;
            s.trimmed += p.stats.trimmed;
            s.max_queue_bytes = s.max_queue_bytes.max(p.stats.max_queue_bytes);
        }
        s
    }

    /// Frames every port (NICs included) put on a wire.
    pub fn frames_carried(&self) -> u64 {
        self.ports.iter().map(|p| p.stats.tx_frames).sum()
    }

    fn push(&mut self, at: u64, kind: Kind) {
        self.seq += 1;
        self.heap.push(Reverse(Event {
            at,
            seq: self.seq,
            kind,
        }));
    }

    /// Puts the next frame of port `i` on the wire if it is free; a host
    /// NIC first pulls one from its device.
    fn start_tx(&mut self, i: usize) {
        let p = &self.ports[i];
        if p.busy || !p.up {
            return;
        }
        let frame = match self.ports[i].dequeue() {
            Some(f) => f,
            None if i < self.cfg.hosts => {
                let dev = &mut self.hosts[i];
                dev.handle_timeout(self.now);
                match dev.poll_transmit() {
                    Some(f) => {
                        let p = &mut self.ports[i];
                        p.stats.tx_frames += 1;
                        p.stats.tx_bytes += f.len() as u64;
                        f
                    }
                    None => return,
                }
            }
            None => return,
        };
        let p = &mut self.ports[i];
        p.busy = true;
        let done = self.now + p.tx_ns(frame.len());
        let arrive = done + p.delay_ns;
        self.push(done, Kind::TxDone(i));
        self.push(arrive, Kind::Arrive(i, frame));
    }

    /// The output port a switch node takes for a frame, by destination MAC
    /// and the ECMP hash of the 5-tuple.
    fn route(&self, node: usize, frame: &[u8]) -> Option<usize> {
        let mac = frame.get(0..6)?;
        if mac[0..4] != host_mac(0)[0..4] {
            return None;
        }
        let dst = (usize::from(mac[4]) << 8) | usize::from(mac[5]);
        if dst >= self.cfg.hosts {
            return None;
        }
        let (n, leaves) = (self.cfg.hosts, self.cfg.leaves());
        let dl = self.cfg.leaf_of(dst);
        if node < n + leaves {
            let l = node - n;
            if l == dl {
                return Some(self.leaf_down[dst]);
            }
            let live: Vec<usize> = (0..self.cfg.spines)
                .filter(|&s| self.routable[l][s] && self.routable[dl][s])
                .collect();
            if live.is_empty() {
                return None;
            }
            let k = ecmp_hash(frame, self.salts[l]) % live.len() as u64;
            Some(self.up[l][live[k as usize]])
        } else {
            Some(self.down[node - n - leaves][dl])
        }
    }

    /// Processes the next event.
    pub fn step(&mut self) -> Step {
        let Some(Reverse(ev)) = self.heap.pop() else {
            return Step::Idle;
        };
        self.now = self.now.max(ev.at);
        self.events += 1;
        match ev.kind {
            Kind::TxDone(i) => {
                self.ports[i].busy = false;
                self.start_tx(i);
                if i < self.cfg.hosts {
                    self.kick(i);
                    return Step::Host(i);
                }
                Step::Fabric
            }
            Kind::Arrive(i, frame) => {
                let to = self.ports[i].to;
                if to < self.cfg.hosts {
                    if frame.len() >= DATA_FRAME {
                        self.bin(to, &frame);
                    }
                    self.hosts[to].handle_frame(self.now, &frame);
                    self.kick(to);
                    return Step::Host(to);
                }
                match self.route(to, &frame) {
                    Some(out) => {
                        self.ports[out].enqueue(frame, &mut self.rng);
                        self.start_tx(out);
                    }
                    None => self.unroutable += 1,
                }
                Step::Fabric
            }
            Kind::Timer(h) => {
                if self.timer_at[h] != ev.at {
                    return Step::Fabric; // superseded
                }
                self.timer_at[h] = u64::MAX;
                self.hosts[h].handle_timeout(self.now);
                self.kick(h);
                Step::Host(h)
            }
            Kind::Cable(e) => {
                let (a, b) = (self.up[e.leaf][e.spine], self.down[e.spine][e.leaf]);
                match e.change {
                    CableChange::Down { reroute_after_ns } => {
                        self.ports[a].fail();
                        self.ports[b].fail();
                        if let Some(d) = reroute_after_ns {
                            self.push(self.now + d, Kind::Withdraw(e.leaf, e.spine));
                        }
                    }
                    CableChange::Degrade(f) => {
                        let f = f.clamp(1e-3, 1.0);
                        self.ports[a].rate_factor = f;
                        self.ports[b].rate_factor = f;
                    }
                }
                Step::Fabric
            }
            Kind::Withdraw(l, s) => {
                self.routable[l][s] = false;
                Step::Fabric
            }
        }
    }
}

/// The ECMP hash of a switch (its `salt`) over the IPv4 5-tuple of a frame
/// (source and destination address, protocol, UDP ports).
fn ecmp_hash(frame: &[u8], salt: u64) -> u64 {
    let word = |r: core::ops::Range<usize>| {
        frame
            .get(r)
            .map_or(0, |b| b.iter().fold(0u64, |a, &x| (a << 8) | u64::from(x)))
    };
    let mut h = salt;
    for w in [word(26..34), word(23..24), word(34..38)] {
        h = mix(h ^ w);
    }
    h
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_and_addresses() {
        let c = FabricConfig::non_blocking(128, 1);
        assert_eq!((c.leaves(), c.spines, c.oversubscription()), (8, 16, 1.0));
        assert_eq!(c.leaf_of(17), 1);
        assert_ne!(host_ip(0), host_ip(256));
        assert_eq!(host_mac(300)[4..6], [1, 44]);
    }

    #[test]
    fn the_hash_spreads_source_ports() {
        let mut f = vec![0u8; 64];
        let mut hits = [0u32; 8];
        for p in 0xC000u16..0xC400 {
            f[34..36].copy_from_slice(&p.to_be_bytes());
            hits[(ecmp_hash(&f, 7) % 8) as usize] += 1;
        }
        assert!(hits.iter().all(|&h| h > 64), "{hits:?}");
    }
}
