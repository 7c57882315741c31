//! One output port of the fabric: a FIFO queue drained at the link's rate
//! onto a wire with a fixed delay, with the queue disciplines of a switch:
//! ECN marking (a step threshold or RED between two thresholds), tail drop
//! at the buffer size, optional packet trimming (SPEC §7.10) instead of the
//! drop, and the link events of a run (down, degraded to a fraction of its
//! rate). Each queued frame remembers the port it came in on, so a switch
//! in PFC mode can account its buffer per ingress port (see `super`).

use super::super::SimRng;
use super::super::link::mark_ce;
use metaroce_codec::{Frame, ParseOptions};
use std::collections::VecDeque;

/// ECN marking of a switch queue, as DCQCN deployments configure it: no
/// mark below `kmin_bytes`, probability rising linearly to `pmax` at
/// `kmax_bytes`, every packet above (`kmin == kmax`: a step threshold).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ecn {
    /// Queue depth where marking starts.
    pub kmin_bytes: usize,
    /// Queue depth where every packet is marked.
    pub kmax_bytes: usize,
    /// Marking probability just below `kmax_bytes`.
    pub pmax: f64,
}

/// What the queue of a switch port does with a frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueuePolicy {
    /// Buffer of the port; a frame that does not fit is dropped (or
    /// trimmed). `usize::MAX`: unbounded (a host NIC).
    pub buffer_bytes: usize,
    /// ECN marking, if any.
    pub ecn: Option<Ecn>,
    /// Trim instead of dropping: cut the payload and rewrite the DSCP to
    /// this value (SPEC §7.10).
    pub trim_dscp: Option<u8>,
}

impl QueuePolicy {
    /// A host NIC's queue: unbounded, no marking.
    pub const fn nic() -> Self {
        QueuePolicy {
            buffer_bytes: usize::MAX,
            ecn: None,
            trim_dscp: None,
        }
    }
}

/// Counts of one port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames put on the wire.
    pub tx_frames: u64,
    /// Bytes put on the wire.
    pub tx_bytes: u64,
    /// Frames dropped (full buffer or link down).
    pub dropped: u64,
    /// Frames marked CE.
    pub marked: u64,
    /// Frames trimmed.
    pub trimmed: u64,
    /// Deepest the queue was, in bytes.
    pub max_queue_bytes: usize,
    /// PFC pauses this port obeyed (it stopped sending).
    pub pauses: u64,
    /// Time this port spent paused by PFC.
    pub paused_ns: u64,
}

/// One direction of a cable.
#[derive(Debug)]
pub(super) struct Port {
    pub to: usize,
    rate_gbps: f64,
    pub rate_factor: f64,
    pub delay_ns: u64,
    pub policy: QueuePolicy,
    pub up: bool,
    pub busy: bool,
    /// Paused by PFC since this time.
    pub paused_since: Option<u64>,
    queue: VecDeque<(Vec<u8>, usize)>,
    pub queued_bytes: usize,
    pub stats: PortStats,
}

/// Ethernet + IPv4 header length (frames carry no VLAN tag here).
const IP_AT: usize = 14;

impl Port {
    pub fn new(to: usize, rate_gbps: f64, delay_ns: u64, policy: QueuePolicy) -> Self {
        Port {
            to,
            rate_gbps,
            rate_factor: 1.0,
            delay_ns,
            policy,
            up: true,
            busy: false,
            paused_since: None,
            queue: VecDeque::new(),
            queued_bytes: 0,
            stats: PortStats::default(),
        }
    }

    /// Serialization time of `len` bytes at the current rate.
    pub fn tx_ns(&self, len: usize) -> u64 {
        let gbps = (self.rate_gbps * self.rate_factor).max(1e-6);
        ((len as f64 * 8.0) / gbps).ceil() as u64
    }

    /// Queues a frame that came in on port `ingress`, applying the drop,
    /// trim and marking disciplines; returns the bytes queued (`None`:
    /// dropped).
    pub fn enqueue(
        &mut self,
        mut frame: Vec<u8>,
        ingress: usize,
        rng: &mut SimRng,
    ) -> Option<usize> {
        if !self.up {
            self.stats.dropped += 1;
            return None;
        }
        let depth = self.queued_bytes;
        if depth.saturating_add(frame.len()) > self.policy.buffer_bytes {
            match self.policy.trim_dscp {
                Some(dscp) if trim(&mut frame, dscp) => self.stats.trimmed += 1,
                _ => {
                    self.stats.dropped += 1;
                    return None;
                }
            }
        } else if let Some(e) = self.policy.ecn {
            let p = if depth >= e.kmax_bytes {
                1.0
            } else if depth < e.kmin_bytes {
                0.0
            } else {
                e.pmax * (depth - e.kmin_bytes) as f64 / (e.kmax_bytes - e.kmin_bytes).max(1) as f64
            };
            if (p >= 1.0 || rng.chance(p)) && mark_ce(&mut frame) {
                self.stats.marked += 1;
            }
        }
        let len = frame.len();
        self.queued_bytes += len;
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.queued_bytes);
        self.queue.push_back((frame, ingress));
        Some(len)
    }

    /// Takes the head frame to put on the wire, with the port it came in
    /// on (`None` when empty).
    pub fn dequeue(&mut self) -> Option<(Vec<u8>, usize)> {
        let (frame, ingress) = self.queue.pop_front()?;
        self.queued_bytes -= frame.len();
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += frame.len() as u64;
        Some((frame, ingress))
    }

    /// The link goes down: what is queued is lost. Returns the lost frames'
    /// (ingress port, length).
    pub fn fail(&mut self) -> Vec<(usize, usize)> {
        self.up = false;
        self.stats.dropped += self.queue.len() as u64;
        self.queued_bytes = 0;
        self.queue.drain(..).map(|(f, i)| (i, f.len())).collect()
    }

    /// PFC: stop sending at `now` (`on`), or resume.
    pub fn pause(&mut self, on: bool, now: u64) {
        match (on, self.paused_since) {
            (true, None) => {
                self.paused_since = Some(now);
                self.stats.pauses += 1;
            }
            (false, Some(t)) => {
                self.paused_since = None;
                self.stats.paused_ns += now.saturating_sub(t);
            }
            _ => {}
        }
    }
}

/// Cuts a RoCE packet to its headers (BTH and the opcode's extension
/// headers, as the codec decodes them), rewrites its DSCP and fixes the IP
/// length and checksum, as a trimming switch does (SPEC §7.10). Returns
/// `false` for a frame that is not RoCE over IPv4 (then it is dropped).
fn trim(frame: &mut Vec<u8>, dscp: u8) -> bool {
    let keep = {
        let Ok(parsed) = Frame::parse(frame, &ParseOptions::default()) else {
            return false;
        };
        let Some(roce) = parsed.roce else {
            return false;
        };
        roce.payload.as_ptr() as usize - frame.as_ptr() as usize
    };
    if keep <= IP_AT + 20 || keep > frame.len() {
        return false;
    }
    frame.truncate(keep);
    let ip = &mut frame[IP_AT..IP_AT + 20];
    ip[1] = (dscp << 2) | (ip[1] & 0b11);
    let total = (keep - IP_AT) as u16;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[10] = 0;
    ip[11] = 0;
    let sum = metaroce_codec::ipv4::internet_checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: usize) -> Vec<u8> {
        vec![0u8; len]
    }

    #[test]
    fn tail_drop_at_the_buffer() {
        let policy = QueuePolicy {
            buffer_bytes: 3000,
            ecn: None,
            trim_dscp: None,
        };
        let mut p = Port::new(0, 100.0, 1000, policy);
        let mut rng = SimRng::new(1);
        for _ in 0..3 {
            p.enqueue(frame(1000), 0, &mut rng);
        }
        p.enqueue(frame(1000), 0, &mut rng);
        assert_eq!((p.stats.dropped, p.queued_bytes), (1, 3000));
        assert!(p.dequeue().is_some());
        assert_eq!(p.queued_bytes, 2000);
    }

    #[test]
    fn degraded_rate_serializes_slower() {
        let mut p = Port::new(0, 100.0, 0, QueuePolicy::nic());
        // 32,768 bits at 100 Gb/s, then at 25 Gb/s (rounded up to a ns).
        assert_eq!(p.tx_ns(4096), 328);
        p.rate_factor = 0.25;
        assert_eq!(p.tx_ns(4096), 1311);
    }

    #[test]
    fn trimming_keeps_the_headers_and_rewrites_the_dscp() {
        use core::net::Ipv4Addr;
        use metaroce_codec::{Opcode, PacketBuilder};
        let mut f = PacketBuilder::new(Opcode::RC_SEND_MIDDLE)
            .macs([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
            .dest_qp(0x12)
            .psn(7)
            .payload(vec![0xAB; 1024])
            .build();
        assert!(trim(&mut f, 46));
        // Ethernet 14 + IPv4 20 + UDP 8 + BTH 12: no payload, pad or ICRC.
        assert_eq!(f.len(), 54);
        assert_eq!(f[IP_AT + 1] >> 2, 46);
        assert_eq!(u16::from_be_bytes([f[IP_AT + 2], f[IP_AT + 3]]), 40);
        let ip = &f[IP_AT..IP_AT + 20];
        assert_eq!(metaroce_codec::ipv4::internet_checksum(ip), 0);
        // A full buffer trims a RoCE packet instead of dropping it, and
        // drops what it cannot trim.
        let policy = QueuePolicy {
            buffer_bytes: 100,
            ecn: None,
            trim_dscp: Some(46),
        };
        let mut p = Port::new(0, 100.0, 0, policy);
        let mut rng = SimRng::new(1);
        p.enqueue(vec![0u8; 60], 0, &mut rng);
        let whole = PacketBuilder::new(Opcode::RC_SEND_MIDDLE)
            .macs([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
            .payload(vec![0xAB; 1024])
            .build();
        p.enqueue(whole, 0, &mut rng);
        p.enqueue(vec![0u8; 60], 0, &mut rng);
        assert_eq!((p.stats.trimmed, p.stats.dropped), (1, 1));
        assert_eq!(p.queued_bytes, 60 + 54);
    }

    #[test]
    fn a_down_port_drops_everything() {
        let mut p = Port::new(0, 100.0, 0, QueuePolicy::nic());
        let mut rng = SimRng::new(1);
        p.enqueue(frame(100), 0, &mut rng);
        assert_eq!(p.fail(), vec![(0, 100)]);
        p.enqueue(frame(100), 0, &mut rng);
        assert_eq!((p.stats.dropped, p.dequeue()), (2, None));
    }
}
