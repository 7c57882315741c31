//! Workloads of AI training and inference as plans of messages: a
//! permutation, N→1 incast, ring all-reduce as NCCL runs it (channels,
//! chunks cut into slices, each slice forwarded once it has arrived), all-to-all
//! (mixture-of-experts dispatch), and a permutation under a background of
//! small messages.

use super::super::SimRng;

/// One message: `bytes` from `src` to `dst` on connection `channel` of
/// the pair, posted at `at_ns` or once message `after` has arrived at
/// `src`, whichever is later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    /// Sending host.
    pub src: usize,
    /// Receiving host.
    pub dst: usize,
    /// Payload bytes.
    pub bytes: u64,
    /// Which of the pair's connections carries it.
    pub channel: usize,
    /// Earliest posting time.
    pub at_ns: u64,
    /// A message that must have arrived at `src` first.
    pub after: Option<usize>,
    /// Background load: not part of the workload's goodput.
    pub background: bool,
}

/// A workload, independent of the hosts it runs on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Workload {
    /// Every host sends `bytes` to one other host, each host receiving
    /// from one (a random derangement), in messages of `msg_bytes`.
    Permutation {
        /// Bytes per host.
        bytes: u64,
        /// Message size.
        msg_bytes: u64,
    },
    /// Hosts 1..=`senders` each send `bytes` to host 0.
    Incast {
        /// Senders.
        senders: usize,
        /// Bytes per sender.
        bytes: u64,
        /// Message size.
        msg_bytes: u64,
    },
    /// Ring all-reduce of `bytes` per host over `channels` rings (one
    /// connection per ring and neighbour pair): 2(N−1) steps, each
    /// moving a chunk of bytes/(channels·N) to the next host in slices of
    /// at most `slice_bytes`; a slice is sent once the slice of the step
    /// before has arrived (reduce-scatter then all-gather).
    AllReduce {
        /// Bytes per host.
        bytes: u64,
        /// Rings (NCCL channels).
        channels: usize,
        /// Largest message.
        slice_bytes: u64,
    },
    /// Every host sends `bytes_per_pair` to every other host.
    AllToAll {
        /// Bytes per ordered pair.
        bytes_per_pair: u64,
        /// Message size.
        msg_bytes: u64,
    },
    /// A permutation plus a background of small messages (4–64 KiB)
    /// between random pairs, `background` per host, posted at random
    /// times over the permutation's ideal duration at `host_gbps`.
    Mixed {
        /// Bytes per host of the permutation.
        bytes: u64,
        /// Message size of the permutation.
        msg_bytes: u64,
        /// Background messages per host.
        background: usize,
        /// Host rate used to spread the background in time.
        host_gbps: f64,
    },
}

fn split(bytes: u64, msg: u64) -> impl Iterator<Item = u64> {
    let msg = msg.max(1);
    (0..bytes.div_ceil(msg)).map(move |i| msg.min(bytes - i * msg))
}

/// A random derangement of 0..n (nobody sends to itself).
fn derangement(n: usize, rng: &mut SimRng) -> Vec<usize> {
    loop {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            p.swap(i, rng.below(i as u64 + 1) as usize);
        }
        if p.iter().enumerate().all(|(i, &d)| i != d) {
            return p;
        }
    }
}

fn flow(src: usize, dst: usize, bytes: u64, msg: u64, out: &mut Vec<Msg>) {
    for b in split(bytes, msg) {
        out.push(Msg {
            src,
            dst,
            bytes: b,
            channel: 0,
            at_ns: 0,
            after: None,
            background: false,
        });
    }
}

impl Workload {
    /// The messages of this workload on `hosts` hosts (at least 2), drawn
    /// from `seed`.
    pub fn plan(&self, hosts: usize, seed: u64) -> Vec<Msg> {
        let mut rng = SimRng::new(seed ^ 0x0301_10AD);
        let mut out = Vec::new();
        let n = hosts.max(2);
        match *self {
            Workload::Permutation { bytes, msg_bytes } => {
                for (s, d) in derangement(n, &mut rng).into_iter().enumerate() {
                    flow(s, d, bytes, msg_bytes, &mut out);
                }
            }
            Workload::Incast {
                senders,
                bytes,
                msg_bytes,
            } => {
                for s in 1..=senders.min(n - 1) {
                    flow(s, 0, bytes, msg_bytes, &mut out);
                }
            }
            Workload::AllToAll {
                bytes_per_pair,
                msg_bytes,
            } => {
                // Each host starts with a different peer (i + 1, i + 2, …),
                // as all-to-all implementations stagger their sends.
                for k in 1..n {
                    for s in 0..n {
                        flow(s, (s + k) % n, bytes_per_pair, msg_bytes, &mut out);
                    }
                }
            }
            Workload::AllReduce {
                bytes,
                channels,
                slice_bytes,
            } => {
                let channels = channels.max(1);
                let chunk = (bytes / (channels * n) as u64).max(1);
                let slices: Vec<u64> = split(chunk, slice_bytes).collect();
                let steps = 2 * (n - 1);
                // index[(step, host, channel, slice)]
                let idx = |k: usize, i: usize, c: usize, j: usize| {
                    ((k * n + i) * channels + c) * slices.len() + j
                };
                for k in 0..steps {
                    for i in 0..n {
                        for c in 0..channels {
                            for (j, &b) in slices.iter().enumerate() {
                                out.push(Msg {
                                    src: i,
                                    dst: (i + 1) % n,
                                    bytes: b,
                                    channel: c,
                                    at_ns: 0,
                                    after: (k > 0).then(|| idx(k - 1, (i + n - 1) % n, c, j)),
                                    background: false,
                                });
                            }
                        }
                    }
                }
            }
            Workload::Mixed {
                bytes,
                msg_bytes,
                background,
                host_gbps,
            } => {
                for (s, d) in derangement(n, &mut rng).into_iter().enumerate() {
                    flow(s, d, bytes, msg_bytes, &mut out);
                }
                let span = (bytes as f64 * 8.0 / host_gbps.max(1e-3)) as u64;
                for s in 0..n {
                    for _ in 0..background {
                        let d = (s + 1 + rng.below(n as u64 - 1) as usize) % n;
                        out.push(Msg {
                            src: s,
                            dst: d,
                            bytes: 4096 + rng.below(60 * 1024 + 1),
                            channel: 1,
                            at_ns: rng.below(span.max(1)),
                            after: None,
                            background: true,
                        });
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_sends_and_receives_once_per_host() {
        let w = Workload::Permutation {
            bytes: 3 << 20,
            msg_bytes: 1 << 20,
        };
        let plan = w.plan(16, 5);
        assert_eq!(plan.len(), 48);
        let mut rx = [0u64; 16];
        for m in &plan {
            assert_ne!(m.src, m.dst);
            rx[m.dst] += m.bytes;
        }
        assert!(rx.iter().all(|&b| b == 3 << 20));
        assert_eq!(plan, w.plan(16, 5));
    }

    #[test]
    fn allreduce_chains_each_slice_around_the_ring() {
        let w = Workload::AllReduce {
            bytes: 8 << 20,
            channels: 2,
            slice_bytes: 256 << 10,
        };
        let n = 4;
        let plan = w.plan(n, 1);
        // 2(N−1) steps × N hosts × 2 channels × 4 slices of 256 KiB.
        assert_eq!(plan.len(), 6 * 4 * 2 * 4);
        for m in &plan {
            assert_eq!(m.dst, (m.src + 1) % n);
            if let Some(a) = m.after {
                let p = plan[a];
                assert_eq!((p.dst, p.channel, p.bytes), (m.src, m.channel, m.bytes));
            }
        }
        let sent: u64 = plan.iter().filter(|m| m.src == 0).map(|m| m.bytes).sum();
        assert_eq!(sent, 2 * 3 * (8 << 20) / 4);
    }

    #[test]
    fn split_covers_the_bytes() {
        assert_eq!(split(10, 4).collect::<Vec<_>>(), [4, 4, 2]);
        assert_eq!(split(0, 4).count(), 0);
    }
}
