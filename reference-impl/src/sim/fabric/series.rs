//! Time series of a run in bounded memory, and the goodput meter that
//! fills them.
//!
//! [`Series`] sums a quantity into bins of equal width; it holds at most a
//! fixed number of bins, and when time runs past them it merges adjacent
//! pairs and doubles the width, so a run of any length costs the same
//! memory.
//!
//! [`Goodput`] counts bytes delivered in order to each receiver: it reads
//! the cumulative acknowledgement of every ACK a receiver sends (Base: the
//! BTH PSN of an RC ACK, the PSN before it for a NAK; MP: the BTH PSN of an
//! MP ACK, its cumulative ACK PSN, SPEC MR-MPA-3), and counts the PSNs by
//! which it moved forward. Retransmitted and duplicate packets do not move
//! it, so a transport that resends a lot gains nothing here.

use metaroce_codec::ext::SyndromeKind;
use metaroce_codec::{Frame, Opcode, ParseOptions, Psn};
use std::collections::BTreeMap;

/// Sums per bin of `width_ns`, at most `cap` bins (then coarser).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Series {
    width_ns: u64,
    cap: usize,
    bins: Vec<u64>,
}

impl Series {
    /// Bins of `width_ns` (at least 1 ns), at most `cap` of them (at least 2).
    pub fn new(width_ns: u64, cap: usize) -> Self {
        Series {
            width_ns: width_ns.max(1),
            cap: cap.max(2),
            bins: Vec::new(),
        }
    }

    /// Adds `x` at time `t_ns`.
    pub fn add(&mut self, t_ns: u64, x: u64) {
        let mut b = t_ns / self.width_ns;
        while b >= self.cap as u64 {
            let merged: Vec<u64> = self.bins.chunks(2).map(|c| c.iter().sum()).collect();
            self.bins = merged;
            self.width_ns = self.width_ns.saturating_mul(2);
            b = t_ns / self.width_ns;
        }
        let b = b as usize;
        if self.bins.len() <= b {
            self.bins.resize(b + 1, 0);
        }
        self.bins[b] += x;
    }

    /// The width of a bin now.
    pub fn width_ns(&self) -> u64 {
        self.width_ns
    }

    /// The sums, bin 0 from time 0 (trailing empty bins are left out).
    pub fn bins(&self) -> &[u64] {
        &self.bins
    }
}

/// One direction of a connection, seen from its receiver's ACKs.
#[derive(Clone, Copy, Debug)]
struct Flow {
    /// The requester's host.
    requester: usize,
    /// The cumulative ACK PSN last seen.
    cum: Psn,
    /// Bytes one PSN stands for (the path MTU).
    bytes_per_psn: u64,
}

/// Bytes delivered in order, per connection direction, from the ACKs the
/// receivers send.
#[derive(Clone, Debug, Default)]
pub struct Goodput {
    /// (receiver host, requester's QPN) → the flow.
    flows: BTreeMap<(usize, u32), Flow>,
}

impl Goodput {
    /// Follows the flow from `requester` (QP `requester_qpn`, first PSN
    /// `start_psn`) to `receiver`, `bytes_per_psn` bytes a packet.
    pub fn follow(
        &mut self,
        receiver: usize,
        requester: usize,
        requester_qpn: u32,
        start_psn: u32,
        bytes_per_psn: u64,
    ) {
        self.flows.insert(
            (receiver, requester_qpn),
            Flow {
                requester,
                cum: Psn::new(start_psn).sub(1),
                bytes_per_psn,
            },
        );
    }

    /// A frame leaving host `from`: when it is an ACK of a followed flow
    /// that moves the flow's cumulative ACK PSN forward, the requester's
    /// host and the bytes newly delivered in order.
    pub fn on_send(&mut self, from: usize, frame: &[u8]) -> Option<(usize, u64)> {
        if self.flows.is_empty() {
            return None;
        }
        let parsed = Frame::parse(frame, &ParseOptions::default()).ok()?;
        let p = parsed.roce?;
        let cum = match p.bth.opcode {
            Opcode::MP_ACK => p.bth.psn,
            Opcode::RC_ACK => match p.ext.aeth?.syndrome.kind() {
                SyndromeKind::Ack { .. } => p.bth.psn,
                // A NAK names the PSN it expects (IBA 9.7.5.1.3).
                SyndromeKind::Nak { .. } | SyndromeKind::RnrNak { .. } => p.bth.psn.sub(1),
                SyndromeKind::Reserved { .. } => return None,
            },
            _ => return None,
        };
        let f = self.flows.get_mut(&(from, p.bth.dest_qp))?;
        if !cum.is_after(f.cum) {
            return None;
        }
        let n = cum.distance(f.cum);
        f.cum = cum;
        Some((f.requester, u64::from(n) * f.bytes_per_psn))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_keeps_its_bin_count_by_doubling_the_width() {
        let mut s = Series::new(10, 4);
        for t in [0, 15, 39] {
            s.add(t, 1);
        }
        assert_eq!((s.width_ns(), s.bins()), (10, &[1, 1, 0, 1][..]));
        s.add(45, 5);
        assert_eq!((s.width_ns(), s.bins()), (20, &[2, 1, 5][..]));
        s.add(1000, 1);
        assert_eq!(s.width_ns(), 320);
        assert_eq!(s.bins(), &[8, 0, 0, 1]);
        assert_eq!(s.bins().iter().sum::<u64>(), 9);
    }

    fn ack(psn: u32, qp: u32, syndrome: u8, opcode: Opcode) -> Vec<u8> {
        use core::net::Ipv4Addr;
        use metaroce_codec::PacketBuilder;
        let mut b = PacketBuilder::new(opcode)
            .macs([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
            .ipv4(Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 1))
            .dest_qp(qp)
            .psn(psn);
        if opcode == Opcode::RC_ACK {
            b = b.aeth(metaroce_codec::ext::AethRepr {
                syndrome: metaroce_codec::ext::Syndrome(syndrome),
                msn: metaroce_codec::Msn::new(0),
            });
        }
        b.build()
    }

    #[test]
    fn goodput_counts_only_forward_moves_of_the_cumulative_ack() {
        let mut g = Goodput::default();
        g.follow(2, 1, 0x11, 100, 4096);
        // ACK of 100..=115: 16 packets.
        assert_eq!(
            g.on_send(2, &ack(115, 0x11, 0, Opcode::RC_ACK)),
            Some((1, 16 * 4096))
        );
        // A duplicate ACK, an older one, another QP: nothing.
        assert_eq!(g.on_send(2, &ack(115, 0x11, 0, Opcode::RC_ACK)), None);
        assert_eq!(g.on_send(2, &ack(110, 0x11, 0, Opcode::RC_ACK)), None);
        assert_eq!(g.on_send(2, &ack(130, 0x12, 0, Opcode::RC_ACK)), None);
        // A sequence NAK expecting 120 delivered 116..=119.
        assert_eq!(
            g.on_send(2, &ack(120, 0x11, 0x60, Opcode::RC_ACK)),
            Some((1, 4 * 4096))
        );
        // Across the 24-bit wrap.
        g.follow(3, 1, 0x21, 0xFF_FFFF, 1024);
        assert_eq!(
            g.on_send(3, &ack(1, 0x21, 0, Opcode::RC_ACK)),
            Some((1, 3 * 1024))
        );
    }
}
