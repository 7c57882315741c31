//! The mixed workload of the simulator scenario tables (`sim_scenarios`,
//! `mp_scenarios`): SENDs, WRITEs, READs and atomics of 0 B to 1 MiB posted
//! from A (device 0) to B (device 1) of a simulated network, every
//! completion checked, and the table row a scenario yields.

use super::End;
use metaroce_ref::sim::{Network, SimRng};
use metaroce_ref::*;
use std::collections::VecDeque;

const SLOT: u64 = 1 << 20; // 1 MiB
const SLOTS: usize = 8;
const TARGET: usize = 2 << 20;
const COUNTERS: usize = 64;
/// Messages posted and not yet completed, at most.
pub const OUTSTANDING: usize = 48;

/// One row of a scenario table.
pub struct Row {
    pub name: &'static str,
    pub messages: usize,
    pub bytes: u64,
    pub frames: u64,
    pub impaired: u64,
    pub retransmitted: u64,
    pub timeouts: u64,
    pub seq_naks: u64,
    pub rnr_naks: u64,
    pub time_ns: u64,
    /// Peak requester state awaiting acknowledgement (either QP).
    pub unacked: usize,
}

impl Row {
    /// Goodput in Gb/s over the virtual time.
    pub fn goodput(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.time_ns.max(1) as f64
    }
}

/// `MR_SIM_MESSAGES`: messages per scenario (`default` when unset).
pub fn sim_messages(default: usize) -> usize {
    std::env::var("MR_SIM_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// How the Base table and the MP tables drive the workload differently.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Also fence a WRITE over the range of an unfinished WRITE, not only
    /// of an unfinished READ (MP places WRITEs in arrival order: SPEC §7.5
    /// note, MR-MPP-11).
    pub fence_write_after_write: bool,
    /// Fail once virtual time passes this many ns.
    pub time_limit_ns: Option<u64>,
}

/// What a run measured, for the caller's own bounds and its table row.
pub struct Outcome {
    /// Payload bytes of every message (8 for an atomic).
    pub bytes: u64,
    /// Virtual time of the last completion.
    pub done_at: u64,
    /// Peak requester state awaiting acknowledgement (either QP).
    pub unacked: usize,
    /// Peak responder messages in progress (either QP).
    pub incomplete: usize,
    /// A's counters at the last completion.
    pub ca: Counters,
    /// B's counters at the last completion.
    pub cb: Counters,
    /// Frames the links dropped, corrupted, reordered or duplicated.
    pub impaired: u64,
    /// Packets both devices retransmitted.
    pub retransmitted: u64,
}

impl Outcome {
    /// The table row of this run (RNR NAKs of both sides).
    pub fn row(&self, name: &'static str, messages: usize) -> Row {
        Row {
            name,
            messages,
            bytes: self.bytes,
            frames: self.ca.frames_sent + self.cb.frames_sent,
            impaired: self.impaired,
            retransmitted: self.retransmitted,
            timeouts: self.ca.local_ack_timeouts,
            seq_naks: self.cb.seq_naks_sent,
            rnr_naks: self.cb.rnr_naks_sent + self.ca.rnr_naks_sent,
            time_ns: self.done_at,
            unacked: self.unacked,
        }
    }
}

fn size(rng: &mut SimRng) -> u64 {
    let u = rng.unit();
    if u < 0.5 {
        rng.below(257)
    } else if u < 0.85 {
        257 + rng.below(8192 - 257)
    } else if u < 0.99 {
        8193 + rng.below(65536 - 8193)
    } else {
        65537 + rng.below((1 << 20) - 65536)
    }
}

#[derive(Clone, Debug)]
enum Expect {
    /// A WRITE of [roff, roff + len) at the responder.
    Write {
        roff: u64,
        len: u64,
    },
    Read {
        slot: usize,
        roff: u64,
        data: Vec<u8>,
    },
    Atomic {
        index: usize,
        orig: u64,
    },
    Send,
}

fn sge(m: &MrInfo, off: u64, len: u64) -> Sge {
    Sge {
        addr: m.addr + off,
        len: len as u32,
        lkey: m.lkey,
    }
}

/// Runs `messages` mixed messages from `ea` (device 0) to `eb` (device 1)
/// of `net`, drawn from `seed`, at most [`OUTSTANDING`] at a time, and
/// checks that: every message completes successfully, once, in posting
/// order, without a stall (nor past `opts.time_limit_ns`); READ data,
/// atomic originals and SEND data (in receive order) are byte-exact; B's
/// final WRITE image and atomic words are exact; the queues and the frames
/// in flight on the links stay bounded. Returns what the caller bounds
/// further and tabulates.
pub fn run_mixed(
    net: &mut Network,
    (ea, eb): (End, End),
    name: &'static str,
    messages: usize,
    seed: u64,
    opts: Options,
) -> Outcome {
    let (ia, ib) = (0, 1);
    let mut rng = SimRng::new(seed ^ 0xABCD);
    // A: source bytes, READ landing slots, atomic results.
    let a = net.device_mut(ia);
    let src = a.reg_mr(ea.pd, TARGET, Access::LOCAL_WRITE).unwrap();
    let src_bytes: Vec<u8> = (0..TARGET).map(|_| rng.next_u64() as u8).collect();
    a.write_mr(src.lkey, src.addr, &src_bytes).unwrap();
    let land = a
        .reg_mr(ea.pd, SLOTS * SLOT as usize, Access::LOCAL_WRITE)
        .unwrap();
    let results = a.reg_mr(ea.pd, 8 * messages, Access::LOCAL_WRITE).unwrap();
    // B: WRITE/READ target, atomic words, receive slots.
    let b = net.device_mut(ib);
    let target = b.reg_mr(eb.pd, TARGET, Access::ALL).unwrap();
    let mut image: Vec<u8> = (0..TARGET).map(|_| rng.next_u64() as u8).collect();
    b.write_mr(target.lkey, target.addr, &image).unwrap();
    let words = b.reg_mr(eb.pd, 8 * COUNTERS, Access::ALL).unwrap();
    let mut counters = [0u64; COUNTERS];
    let rslots = b
        .reg_mr(eb.pd, SLOTS * SLOT as usize, Access::LOCAL_WRITE)
        .unwrap();

    let mut free_land: Vec<usize> = (0..SLOTS).collect();
    let mut free_recv: Vec<usize> = (0..SLOTS).collect();
    let mut posted_recv: VecDeque<usize> = VecDeque::new();
    let mut sends: VecDeque<Vec<u8>> = VecDeque::new();
    let mut pending: VecDeque<(u64, Expect)> = VecDeque::new();
    let (mut posted, mut done, mut bytes) = (0usize, 0usize, 0u64);
    let (mut max_depth, mut unacked, mut incomplete) = (0, 0, 0);
    while done < messages {
        // Receives: every free slot is posted.
        while let Some(slot) = free_recv.pop() {
            let wr = RecvWr {
                wr_id: slot as u64,
                sg_list: vec![sge(&rslots, slot as u64 * SLOT, SLOT)],
            };
            net.device_mut(ib).post_recv(eb.qpn, wr).unwrap();
            posted_recv.push_back(slot);
        }
        while posted < messages && pending.len() < OUTSTANDING {
            let id = posted as u64;
            let len = size(&mut rng);
            let off = rng.below(TARGET as u64 - len);
            let roff = rng.below(TARGET as u64 - len);
            let remote = RemoteAddr {
                va: target.addr + roff,
                rkey: target.rkey,
            };
            let pick = rng.below(100);
            let (wr, expect) = if pick < 30 {
                sends.push_back(src_bytes[off as usize..(off + len) as usize].to_vec());
                (
                    SendWr::new(id, WrOp::Send, vec![sge(&src, off, len)]),
                    Expect::Send,
                )
            } else if pick < 60 || (pick < 80 && free_land.is_empty()) {
                image[roff as usize..(roff + len) as usize]
                    .copy_from_slice(&src_bytes[off as usize..(off + len) as usize]);
                let mut wr = SendWr::new(id, WrOp::Write(remote), vec![sge(&src, off, len)]);
                // A re-executed READ reads memory again (MR-DUP-4), so a WRITE
                // over a range an unfinished READ covers waits (MR-REQ-8).
                wr.fence = pending.iter().any(|(_, e)| match e {
                    Expect::Read { roff: r, data, .. } => {
                        roff < r + data.len() as u64 && *r < roff + len
                    }
                    Expect::Write { roff: r, len: l } if opts.fence_write_after_write => {
                        roff < r + l && *r < roff + len
                    }
                    _ => false,
                });
                (wr, Expect::Write { roff, len })
            } else if pick < 80 {
                let slot = free_land.pop().unwrap_or(0);
                let data = image[roff as usize..(roff + len) as usize].to_vec();
                let wr = SendWr::new(
                    id,
                    WrOp::Read(remote),
                    vec![sge(&land, slot as u64 * SLOT, len)],
                );
                (wr, Expect::Read { slot, roff, data })
            } else {
                let index = rng.below(COUNTERS as u64) as usize;
                let word = RemoteAddr {
                    va: words.addr + 8 * index as u64,
                    rkey: words.rkey,
                };
                let orig = counters[index];
                let local = vec![sge(&results, 8 * id, 8)];
                let op = if pick < 90 {
                    let add = rng.next_u64() >> 8;
                    counters[index] = orig.wrapping_add(add);
                    WrOp::FetchAdd { remote: word, add }
                } else {
                    let compare = if rng.chance(0.5) {
                        orig
                    } else {
                        rng.next_u64()
                    };
                    let swap = rng.next_u64();
                    if compare == orig {
                        counters[index] = swap;
                    }
                    WrOp::CompareSwap {
                        remote: word,
                        compare,
                        swap,
                    }
                };
                (SendWr::new(id, op, local), Expect::Atomic { index, orig })
            };
            bytes += if matches!(expect, Expect::Atomic { .. }) {
                8
            } else {
                len
            };
            net.device_mut(ia).post_send(ea.qpn, wr).unwrap();
            pending.push_back((id, expect));
            posted += 1;
        }
        let progressed = net.step();
        if let Some(limit) = opts.time_limit_ns {
            assert!(
                net.now() < limit,
                "{name}: virtual time limit at {done}/{messages}\nA {}\nB {}",
                net.device(ia).mp_summary(ea.qpn),
                net.device(ib).mp_summary(eb.qpn)
            );
        }
        // Requester completions: exactly once, in posting order.
        for wc in net.device_mut(ia).poll_cq(ea.cq, usize::MAX).unwrap() {
            assert_eq!(wc.status, WcStatus::Success, "{name}: {wc:?}");
            let (id, expect) = pending
                .pop_front()
                .expect("a completion for a posted request");
            assert_eq!(wc.wr_id, id, "{name}: completion order");
            match expect {
                Expect::Read { slot, data, .. } => {
                    let got = net
                        .device(ia)
                        .read_mr(land.lkey, land.addr + slot as u64 * SLOT, data.len() as u64)
                        .unwrap();
                    assert!(got == &data[..], "{name}: READ {id} data");
                    free_land.push(slot);
                }
                Expect::Atomic { orig, index } => {
                    let got = net
                        .device(ia)
                        .read_mr(results.lkey, results.addr + 8 * id, 8)
                        .unwrap();
                    assert_eq!(got, &orig.to_ne_bytes(), "{name}: atomic {id} on {index}");
                }
                Expect::Write { .. } | Expect::Send => {}
            }
            done += 1;
        }
        // Responder completions: SENDs in order, byte-exact.
        for wc in net.device_mut(ib).poll_cq(eb.cq, usize::MAX).unwrap() {
            assert_eq!(wc.status, WcStatus::Success, "{name}: {wc:?}");
            let slot = posted_recv.pop_front().expect("a posted receive");
            assert_eq!(wc.wr_id, slot as u64, "{name}: receive order");
            let data = sends.pop_front().expect("a SEND for this receive");
            assert_eq!(wc.byte_len as usize, data.len());
            let got = net
                .device(ib)
                .read_mr(
                    rslots.lkey,
                    rslots.addr + slot as u64 * SLOT,
                    data.len() as u64,
                )
                .unwrap();
            assert!(got == &data[..], "{name}: SEND data");
            free_recv.push(slot);
        }
        for (dev, qpn) in [(ia, ea.qpn), (ib, eb.qpn)] {
            let d = net.device(dev).queue_depths(qpn).unwrap();
            max_depth = max_depth.max(d.send + d.responses);
            unacked = unacked.max(d.unacked);
            incomplete = incomplete.max(d.incomplete);
        }
        // (MP QPs add their state; a Base QP's summary is empty.)
        assert!(
            progressed || done == messages,
            "{name}: stalled at {done}/{messages}\nA {}\nB {}",
            net.device(ia).mp_summary(ea.qpn),
            net.device(ib).mp_summary(eb.qpn)
        );
    }
    let done_at = net.now();
    assert!(sends.is_empty());
    // Final memory images at the responder.
    let b = net.device(ib);
    assert!(
        b.read_mr(target.lkey, target.addr, TARGET as u64).unwrap() == &image[..],
        "{name}: WRITE image"
    );
    for (i, c) in counters.iter().enumerate() {
        assert_eq!(
            b.read_mr(words.lkey, words.addr + 8 * i as u64, 8).unwrap(),
            &c.to_ne_bytes()
        );
    }
    assert!(
        max_depth <= OUTSTANDING + SLOTS + 64,
        "{name}: queues bounded ({max_depth})"
    );
    let link_max = [(ia, ib), (ib, ia)]
        .iter()
        .map(|&(x, y)| net.link(x, y).unwrap().stats().max_in_flight)
        .max()
        .unwrap_or(0);
    // The links buffer without limit; what they hold is bounded by the
    // transport: 16 READs of at most 256 responses plus the request window.
    assert!(
        link_max < 2 * 16 * 256 + 512,
        "{name}: in-flight frames bounded ({link_max})"
    );
    let (ca, cb) = (*net.device(ia).counters(), *net.device(ib).counters());
    let impaired: u64 = [(ia, ib), (ib, ia)]
        .iter()
        .map(|&(x, y)| {
            let s = net.link(x, y).unwrap().stats();
            s.dropped + s.corrupted + s.reordered + s.duplicated
        })
        .sum();
    Outcome {
        bytes,
        done_at,
        unacked,
        incomplete,
        ca,
        cb,
        impaired,
        retransmitted: ca.retransmitted_packets + cb.retransmitted_packets,
    }
}

/// Exactly once: nothing completes after the last message, on either side,
/// however long the network runs on (bounded to 10,000 steps).
pub fn assert_nothing_completes_after(net: &mut Network, (ea, eb): (End, End)) {
    for _ in 0..10_000 {
        if !net.step() {
            break;
        }
    }
    assert!(net.device_mut(0).poll_cq(ea.cq, 1).unwrap().is_empty());
    assert!(net.device_mut(1).poll_cq(eb.cq, 1).unwrap().is_empty());
}
