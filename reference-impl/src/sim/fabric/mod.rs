//! A two-tier leaf–spine fabric on virtual time: hosts (sans-IO
//! [`Device`]s) on leaf switches, every leaf joined to every spine, switch
//! output queues with ECN marking, tail drop and optional trimming
//! ([`port`]), ECMP hashing of the 5-tuple at every hop (so a UDP source
//! port is a path, as on real switches), link events during a run (a
//! cable down, then withdrawn from ECMP after a reconvergence delay; a
//! cable degraded to a fraction of its rate; a cable flapping down and up
//! with a period), and an optional lossless mode (PFC, [`Pfc`]).
//!
//! PFC is modelled per ingress port, as switches account it: a switch
//! counts the bytes it holds that came in on each of its input links; when
//! they reach XOFF it pauses the sender at the other end of that link (the
//! PAUSE frame takes one link delay to get there), and resumes it at XON.
//! A paused port sends nothing, whatever its frames' destinations (the
//! head-of-line blocking PFC is known for); a paused host NIC takes nothing
//! from its device. In PFC mode switch queues never drop.
//!
//! Deterministic: one event queue ordered by (time, insertion order), one
//! seeded random source for the marking decisions, and devices seeded by
//! the caller. Host NICs pull frames from their device when the wire is
//! free (round-robin over QPs, [`Device::poll_transmit`]), so a device sees
//! its own NIC's backpressure and its timestamps are taken at send time.
//!
//! [`run`] drives workloads ([`workload`]) over the fabric with Base or MP
//! QPs and measures them; [`scenario`] holds the built-in scenarios of
//! `metaroce-ref fabric`; [`report`] turns a run into the series of its
//! plots, and `html` (feature `html`) draws them.

#[cfg(feature = "html")]
pub mod html;
mod port;
pub mod report;
pub mod run;
pub mod scenario;
pub mod series;
pub mod workload;

pub use port::{Ecn, PortStats, QueuePolicy};

use super::SimRng;
use crate::{Device, DeviceConfig};
use core::net::Ipv4Addr;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use port::Port;
use series::{Goodput, Series};

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
    /// Lossless mode: PFC pauses instead of drops (`None`: lossy).
    pub pfc: Option<Pfc>,
}

/// PFC thresholds, per ingress port of a switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pfc {
    /// Bytes held from one input link at which its sender is paused.
    pub xoff_bytes: usize,
    /// Bytes held at which it is resumed.
    pub xon_bytes: usize,
}

impl Default for Pfc {
    /// XOFF 256 KiB, XON 128 KiB: above the ECN marking range (100–400
    /// KiB starts marking first), a quarter of the lossy buffer.
    fn default() -> Self {
        Pfc {
            xoff_bytes: 256 << 10,
            xon_bytes: 128 << 10,
        }
    }
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
            pfc: None,
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
    /// The cable fails `flaps` times, every `period_ns`, each time for
    /// `down_ns`; while down it behaves as [`CableChange::Down`] (ECMP
    /// withdraws it after `reroute_after_ns` if it is still down then), and
    /// when it comes back ECMP uses it again at once.
    Flap {
        /// Time from one failure to the next.
        period_ns: u64,
        /// How long each failure lasts.
        down_ns: u64,
        /// Failures.
        flaps: u32,
        /// Reconvergence delay of the fabric's routing.
        reroute_after_ns: Option<u64>,
    },
}

impl CableChange {
    /// Whether the cable fails (down or flapping).
    pub fn fails(&self) -> bool {
        matches!(self, CableChange::Down { .. } | CableChange::Flap { .. })
    }
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
    /// Boxed: events sit in the heap by the million, so they stay small.
    Cable(Box<CableEvent>),
    /// The cable (leaf, spine) fails; withdrawn from ECMP after the delay.
    CableDown(usize, usize, Option<u64>),
    /// The cable (leaf, spine) comes back.
    CableUp(usize, usize),
    /// ECMP withdraws (leaf, spine) if it is still in failure `generation`.
    Withdraw(usize, usize, u64),
    /// PFC: port `i` pauses (`true`) or resumes.
    Pause(usize, bool),
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
    /// Failures of each cable so far, per [leaf][spine].
    failures: Vec<Vec<u64>>,
    /// PFC: bytes switches hold that came in over each port.
    ingress_bytes: Vec<usize>,
    /// PFC: whether each port was told to pause.
    pause_sent: Vec<bool>,
    salts: Vec<u64>,
    heap: BinaryHeap<Reverse<Event>>,
    seq: u64,
    now: u64,
    timer_at: Vec<u64>,
    rng: SimRng,
    unroutable: u64,
    bin_ns: u64,
    meter: Goodput,
    /// Bytes delivered in order to receivers ([`Goodput`]), over time.
    goodput: Series,
    /// The same for flows from or to the watched leaf's hosts.
    watched: Option<(usize, Series)>,
    events: u64,
}

/// Frames shorter than this may be ACKs (data frames at PMTU 1024 and up
/// are longer): the goodput meter reads these.
const DATA_FRAME: usize = 1024;
/// Bins of the goodput series (then coarser, [`Series`]).
const GOODPUT_BINS: usize = 1024;
/// Bins of the watched leaf's series.
const WATCHED_BINS: usize = 1 << 14;

impl Fabric {
    /// A fabric of `cfg` whose host `h` is a device made by `device(h,
    /// config)` from the default configuration with the host's addresses;
    /// goodput is binned from `bin_ns` wide ([`Fabric::goodput`]).
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
        let mut q = cfg.switch_queue;
        if cfg.pfc.is_some() {
            q.buffer_bytes = usize::MAX;
            q.trim_dscp = None;
        }
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
        let nports = ports.len();
        Fabric {
            routable: vec![vec![true; cfg.spines]; leaves],
            failures: vec![vec![0; cfg.spines]; leaves],
            ingress_bytes: vec![0; nports],
            pause_sent: vec![false; nports],
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
            meter: Goodput::default(),
            goodput: Series::new(bin_ns, GOODPUT_BINS),
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
        self.push(e.at_ns, Kind::Cable(Box::new(e)));
    }

    /// Lets host `h` send what its device has (after verbs calls) and
    /// re-arms its timer.
    ///
    /// A timer event is queued whenever the device's deadline changes, and
    /// superseded ones are skipped when they come up, so the device sees
    /// `handle_timeout` exactly at its deadlines. (Queuing only earlier
    /// deadlines and letting a timer fire early, finding nothing due, is
    /// about 10 % faster for MP but changes MP's figures slightly: an MP
    /// device's behaviour depends on when its clock is advanced.)
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

    /// Counts the bytes delivered in order from `requester` (its QP
    /// `requester_qpn`, first PSN `start_psn`) to `receiver`, one PMTU
    /// (`bytes_per_psn`) per PSN, into [`Fabric::goodput`].
    pub fn follow(
        &mut self,
        receiver: usize,
        requester: usize,
        requester_qpn: u32,
        start_psn: u32,
        bytes_per_psn: u64,
    ) {
        self.meter
            .follow(receiver, requester, requester_qpn, start_psn, bytes_per_psn);
    }

    /// Bytes delivered in order to receivers (of the followed flows), over
    /// time: bins from `bin_ns` wide, at most 1024 of them.
    pub fn goodput(&self) -> &Series {
        &self.goodput
    }

    /// Also bins (from `bin_ns` wide, up to 16,384 bins) the goodput of the
    /// flows from or to the hosts of `leaf`.
    pub fn watch_leaf(&mut self, leaf: usize) {
        self.watched = Some((leaf, Series::new(self.bin_ns, WATCHED_BINS)));
    }

    /// The watched leaf's goodput series, if one is watched.
    pub fn watched(&self) -> Option<&Series> {
        self.watched.as_ref().map(|(_, s)| s)
    }

    /// Bytes each leaf–spine cable carried: `[leaf][spine]` of (leaf to
    /// spine, spine to leaf).
    pub fn cable_bytes(&self) -> Vec<Vec<(u64, u64)>> {
        (0..self.cfg.leaves())
            .map(|l| {
                (0..self.cfg.spines)
                    .map(|s| {
                        let up = self.ports[self.up[l][s]].stats.tx_bytes;
                        (up, self.ports[self.down[s][l]].stats.tx_bytes)
                    })
                    .collect()
            })
            .collect()
    }

    /// PFC pauses every port (NICs included) obeyed, and the time they
    /// spent paused, summed over ports.
    pub fn pfc_pauses(&self) -> (u64, u64) {
        self.ports.iter().fold((0, 0), |(n, t), p| {
            let open = p.paused_since.map_or(0, |s| self.now.saturating_sub(s));
            (n + p.stats.pauses, t + p.stats.paused_ns + open)
        })
    }

    /// A frame leaving host `h`: when it is an ACK that delivers bytes,
    /// count them.
    fn meter(&mut self, h: usize, frame: &[u8]) {
        let Some((requester, bytes)) = self.meter.on_send(h, frame) else {
            return;
        };
        self.goodput.add(self.now, bytes);
        if let Some((leaf, s)) = &mut self.watched {
            let on = |x: usize| self.cfg.leaf_of(x) == *leaf;
            if on(h) || on(requester) {
                s.add(self.now, bytes);
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
        if p.busy || !p.up || p.paused_since.is_some() {
            return;
        }
        let frame = match self.ports[i].dequeue() {
            Some((f, ingress)) => {
                self.release(ingress, f.len());
                f
            }
            None if i < self.cfg.hosts => {
                let dev = &mut self.hosts[i];
                dev.handle_timeout(self.now);
                match dev.poll_transmit() {
                    Some(f) => {
                        let p = &mut self.ports[i];
                        p.stats.tx_frames += 1;
                        p.stats.tx_bytes += f.len() as u64;
                        if f.len() < DATA_FRAME {
                            self.meter(i, &f);
                        }
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

    /// PFC: a switch no longer holds `len` bytes that came in over port
    /// `ingress`; resume its sender at XON.
    fn release(&mut self, ingress: usize, len: usize) {
        let Some(pfc) = self.cfg.pfc else { return };
        let Some(held) = self.ingress_bytes.get_mut(ingress) else {
            return;
        };
        *held = held.saturating_sub(len);
        if self.pause_sent[ingress] && *held <= pfc.xon_bytes {
            self.pause_sent[ingress] = false;
            let at = self.now + self.ports[ingress].delay_ns;
            self.push(at, Kind::Pause(ingress, false));
        }
    }

    /// PFC: a switch now holds `len` more bytes that came in over port
    /// `ingress`; pause its sender at XOFF.
    fn hold(&mut self, ingress: usize, len: usize) {
        let Some(pfc) = self.cfg.pfc else { return };
        self.ingress_bytes[ingress] += len;
        if !self.pause_sent[ingress] && self.ingress_bytes[ingress] >= pfc.xoff_bytes {
            self.pause_sent[ingress] = true;
            let at = self.now + self.ports[ingress].delay_ns;
            self.push(at, Kind::Pause(ingress, true));
        }
    }

    /// The cable (leaf `l`, spine `s`) fails in both directions.
    fn cable_down(&mut self, l: usize, s: usize, reroute_after_ns: Option<u64>) {
        self.failures[l][s] += 1;
        for p in [self.up[l][s], self.down[s][l]] {
            for (ingress, len) in self.ports[p].fail() {
                self.release(ingress, len);
            }
        }
        if let Some(d) = reroute_after_ns {
            let g = self.failures[l][s];
            self.push(self.now + d, Kind::Withdraw(l, s, g));
        }
    }

    /// The cable (leaf `l`, spine `s`) works again, and ECMP uses it.
    fn cable_up(&mut self, l: usize, s: usize) {
        self.routable[l][s] = true;
        for p in [self.up[l][s], self.down[s][l]] {
            self.ports[p].up = true;
            self.start_tx(p);
        }
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
            let live = |s: &usize| self.routable[l][*s] && self.routable[dl][*s];
            let n_live = (0..self.cfg.spines).filter(live).count();
            if n_live == 0 {
                return None;
            }
            let k = ecmp_hash(frame, self.salts[l]) % n_live as u64;
            let s = (0..self.cfg.spines).filter(live).nth(k as usize)?;
            Some(self.up[l][s])
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
                    self.hosts[to].handle_frame(self.now, &frame);
                    self.kick(to);
                    return Step::Host(to);
                }
                match self.route(to, &frame) {
                    Some(out) => {
                        if let Some(len) = self.ports[out].enqueue(frame, i, &mut self.rng) {
                            self.hold(i, len);
                        }
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
                        self.cable_down(e.leaf, e.spine, reroute_after_ns);
                    }
                    CableChange::Degrade(f) => {
                        let f = f.clamp(1e-3, 1.0);
                        self.ports[a].rate_factor = f;
                        self.ports[b].rate_factor = f;
                    }
                    CableChange::Flap {
                        period_ns,
                        down_ns,
                        flaps,
                        reroute_after_ns,
                    } => {
                        for k in 0..u64::from(flaps) {
                            let at = self.now + k * period_ns;
                            let (l, s) = (e.leaf, e.spine);
                            self.push(at, Kind::CableDown(l, s, reroute_after_ns));
                            self.push(at + down_ns.max(1), Kind::CableUp(l, s));
                        }
                    }
                }
                Step::Fabric
            }
            Kind::CableDown(l, s, reroute) => {
                self.cable_down(l, s, reroute);
                Step::Fabric
            }
            Kind::CableUp(l, s) => {
                self.cable_up(l, s);
                Step::Fabric
            }
            Kind::Withdraw(l, s, g) => {
                if self.failures[l][s] == g && !self.ports[self.up[l][s]].up {
                    self.routable[l][s] = false;
                }
                Step::Fabric
            }
            Kind::Pause(i, on) => {
                let now = self.now;
                self.ports[i].pause(on, now);
                if on {
                    return Step::Fabric;
                }
                self.start_tx(i);
                if i < self.cfg.hosts {
                    self.kick(i);
                    return Step::Host(i);
                }
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

    fn idle_fabric() -> Fabric {
        let cfg = FabricConfig::non_blocking(8, 1);
        Fabric::new(cfg, 1_000, |_, c| Device::new(c, [7; 32]))
    }

    #[test]
    fn a_flapping_cable_goes_down_and_up_with_its_period() {
        let mut f = idle_fabric();
        f.schedule(CableEvent {
            at_ns: 1_000,
            leaf: 1,
            spine: 2,
            change: CableChange::Flap {
                period_ns: 100,
                down_ns: 40,
                flaps: 3,
                reroute_after_ns: Some(30),
            },
        });
        let port = f.up[1][2];
        // (time, cable up, routable) after each event.
        let mut seen = Vec::new();
        for _ in 0..100 {
            if f.step() == Step::Idle {
                break;
            }
            seen.push((f.now(), f.ports[port].up, f.routable[1][2]));
        }
        let mut want = vec![(1_000, true, true)];
        for k in 0..3 {
            let t = 1_000 + k * 100;
            want.extend([
                (t, false, true),
                (t + 30, false, false),
                (t + 40, true, true),
            ]);
        }
        assert_eq!(seen, want);
        assert_eq!(f.failures[1][2], 3);
    }

    #[test]
    fn a_withdrawal_after_the_cable_came_back_is_ignored() {
        let mut f = idle_fabric();
        f.schedule(CableEvent {
            at_ns: 0,
            leaf: 0,
            spine: 0,
            change: CableChange::Flap {
                period_ns: 100,
                down_ns: 10,
                flaps: 1,
                reroute_after_ns: Some(50),
            },
        });
        while f.step() != Step::Idle {}
        assert!(f.routable[0][0] && f.ports[f.up[0][0]].up);
    }
}
