//! Runs a plan of messages ([`super::workload`]) over a [`Fabric`] with Base
//! or MP QPs, and checks exactly-once delivery.
//!
//! Every message is an RDMA WRITE with immediate data (the message's index)
//! into a buffer of the receiver, so both ends see it complete: the
//! requester by its work request ID, the responder by the immediate value
//! of its receive completion. A message is delivered exactly once when each
//! end completes it once and successfully; after the last message the
//! fabric runs on until idle (bounded) and any later completion counts as a
//! duplicate. A pair of hosts has one RC connection per channel, carrying
//! both directions.

use super::series::Series;
use super::workload::Msg;
use super::{CableEvent, Fabric, FabricConfig, PortStats, Step, host_ip, host_mac};
use crate::{
    Access, AddressVector, CqHandle, Device, MpAttrs, MpEntropy, MrInfo, QpAttrs, QpInit, QpState,
    QpType, RecvWr, RemoteAddr, SendWr, Sge, WcOpcode, WcStatus, WrOp,
};
use std::collections::BTreeMap;

/// The transport profile of every QP of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Profile {
    /// RoCEv2 RC: one UDP source port per QP, go-back-N.
    Base,
    /// MetaRoCE MP (SPEC §7): sprayed over the QP's entropy set.
    Mp,
}

impl Profile {
    /// "Base" or "MP".
    pub fn name(self) -> &'static str {
        match self {
            Profile::Base => "Base",
            Profile::Mp => "MP",
        }
    }
}

/// How to run a plan.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    /// The fabric.
    pub fabric: FabricConfig,
    /// Base or MP.
    pub profile: Profile,
    /// Path MTU of every connection.
    pub pmtu: u32,
    /// Local ACK timeout exponent (4.096 µs × 2^t) of every QP.
    pub timeout: u8,
    /// MP attributes; each QP's entropy set is drawn from a seed of its own.
    pub mp: MpAttrs,
    /// Cable events.
    pub cables: Vec<CableEvent>,
    /// Stop after this much virtual time.
    pub time_limit_ns: u64,
    /// Width of the goodput bins (at the start: [`Series`]).
    pub bin_ns: u64,
    /// Also bin the goodput of the flows from or to this leaf's hosts.
    pub watch_leaf: Option<usize>,
}

/// What a run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunResult {
    /// Per message: when it was posted.
    pub posted_at: Vec<Option<u64>>,
    /// Per message: when the receiver completed it (first time).
    pub delivered_at: Vec<Option<u64>>,
    /// Time of the last completion, either end.
    pub jct_ns: u64,
    /// Messages not completed exactly once, successfully, at both ends.
    pub lost: u64,
    /// Completions beyond the first (both ends).
    pub duplicated: u64,
    /// Completions with an error status.
    pub errors: u64,
    /// The first error completion: (time, host, message, status).
    pub first_error: Option<(u64, usize, u64, WcStatus)>,
    /// Packets the devices retransmitted.
    pub retransmitted_packets: u64,
    /// Retransmission timeouts (Base local ACK timeouts and MP RTOs).
    pub timeouts: u64,
    /// MP entropy values retired.
    pub retired: u64,
    /// Switch ports together.
    pub switch: PortStats,
    /// Frames all ports put on a wire.
    pub frames: u64,
    /// Fabric events processed.
    pub events: u64,
    /// Bytes delivered in order to receivers, over time.
    pub goodput: Series,
    /// The same for the flows from or to the watched leaf's hosts.
    pub watched: Option<Series>,
    /// Bytes each leaf–spine cable carried, `[leaf][spine]` of (up, down).
    pub cable_bytes: Vec<Vec<(u64, u64)>>,
    /// PFC pauses obeyed, all ports.
    pub pfc_pauses: u64,
    /// Time ports spent paused by PFC, summed.
    pub pfc_paused_ns: u64,
    /// Virtual time at the end of the run.
    pub end_ns: u64,
}

struct Host {
    cq: CqHandle,
    src: MrInfo,
    dst: MrInfo,
}

/// A connection: (host a, its QPN, host b, its QPN).
type Conn = (usize, u32, usize, u32);

fn device_for(seed: u64) -> impl FnMut(usize, crate::DeviceConfig) -> Device {
    move |h, mut cfg| {
        cfg.max_pmtu = 4096;
        let mut s = [0u8; 32];
        s[..8].copy_from_slice(&seed.to_le_bytes());
        s[8..16].copy_from_slice(&(h as u64).to_le_bytes());
        Device::new(cfg, s)
    }
}

fn connect(
    dev: &mut Device,
    me: (u32, u32),
    peer: (u32, u32),
    peer_host: usize,
    cfg: &RunConfig,
    entropy_seed: u64,
) {
    let (qpn, psn) = me;
    let init = QpAttrs {
        access: Some(Access::ALL),
        ..Default::default()
    };
    dev.modify_qp(qpn, QpState::Init, &init).expect("INIT");
    let rtr = QpAttrs {
        dest_qpn: Some(peer.0),
        rq_psn: Some(peer.1),
        pmtu: Some(cfg.pmtu),
        path: Some(AddressVector {
            dest_ip: host_ip(peer_host),
            dest_mac: host_mac(peer_host),
            traffic_class: 0,
            hop_limit: 64,
        }),
        max_dest_rd_atomic: Some(16),
        min_rnr_timer: Some(1),
        ..Default::default()
    };
    match cfg.profile {
        Profile::Base => dev.modify_qp(qpn, QpState::Rtr, &rtr).expect("RTR"),
        Profile::Mp => {
            let mp = MpAttrs {
                entropy: match cfg.mp.entropy {
                    MpEntropy::Seeded { n, .. } => MpEntropy::Seeded {
                        n,
                        seed: entropy_seed,
                    },
                    ref v => v.clone(),
                },
                ..cfg.mp.clone()
            };
            dev.modify_qp_mp(qpn, &rtr, &mp).expect("RTR (MP)");
        }
    }
    let rts = QpAttrs {
        sq_psn: Some(psn),
        timeout: Some(cfg.timeout),
        retry_cnt: Some(7),
        rnr_retry: Some(7),
        max_rd_atomic: Some(16),
        ..Default::default()
    };
    dev.modify_qp(qpn, QpState::Rts, &rts).expect("RTS");
}

/// Runs `plan` under `cfg` with devices seeded from `seed`.
pub fn run(cfg: &RunConfig, plan: &[Msg], seed: u64) -> RunResult {
    let n = cfg.fabric.hosts;
    let mut fab = Fabric::new(cfg.fabric.clone(), cfg.bin_ns, device_for(seed));
    for e in &cfg.cables {
        fab.schedule(*e);
    }
    if let Some(l) = cfg.watch_leaf {
        fab.watch_leaf(l);
    }
    let max_msg = plan.iter().map(|m| m.bytes).max().unwrap_or(1).max(8) as usize;
    let mut hosts = Vec::with_capacity(n);
    let mut pds = Vec::with_capacity(n);
    for h in 0..n {
        let d = fab.device_mut(h);
        let pd = d.alloc_pd();
        let cq = d.create_cq();
        let src = d.reg_mr(pd, max_msg, Access::LOCAL_WRITE).expect("MR");
        let dst = d.reg_mr(pd, max_msg, Access::ALL).expect("MR");
        hosts.push(Host { cq, src, dst });
        pds.push(pd);
    }
    // One connection per (unordered pair, channel), in plan order.
    let mut conns: Vec<Conn> = Vec::new();
    let mut conn_of: BTreeMap<(usize, usize, usize), usize> = BTreeMap::new();
    let mut msg_conn = Vec::with_capacity(plan.len());
    for m in plan {
        let key = (m.src.min(m.dst), m.src.max(m.dst), m.channel);
        let c = *conn_of.entry(key).or_insert_with(|| {
            let (a, b) = (key.0, key.1);
            let mut ends = [(0u32, 0u32); 2];
            for (i, h) in [a, b].into_iter().enumerate() {
                let d = fab.device_mut(h);
                let qpn = d
                    .create_qp(QpInit {
                        qp_type: QpType::Rc,
                        pd: pds[h],
                        send_cq: hosts[h].cq,
                        recv_cq: hosts[h].cq,
                        sq_sig_all: false,
                    })
                    .expect("QP");
                ends[i] = (qpn, d.random_psn());
            }
            let es = seed ^ ((conns.len() as u64) << 20);
            connect(fab.device_mut(a), ends[0], ends[1], b, cfg, es);
            connect(fab.device_mut(b), ends[1], ends[0], a, cfg, es ^ 1);
            let pmtu = u64::from(cfg.pmtu);
            fab.follow(b, a, ends[0].0, ends[0].1, pmtu);
            fab.follow(a, b, ends[1].0, ends[1].1, pmtu);
            conns.push((a, ends[0].0, b, ends[1].0));
            conns.len() - 1
        });
        msg_conn.push(c);
    }
    // Receives for every message, posted before anything is sent.
    for (i, m) in plan.iter().enumerate() {
        let (a, qa, _, qb) = conns[msg_conn[i]];
        let qpn = if m.dst == a { qa } else { qb };
        let wr = RecvWr {
            wr_id: i as u64,
            sg_list: Vec::new(),
        };
        fab.device_mut(m.dst).post_recv(qpn, wr).expect("post_recv");
    }
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); plan.len()];
    let mut timed: Vec<usize> = Vec::new();
    for (i, m) in plan.iter().enumerate() {
        match m.after {
            Some(a) if a < plan.len() => dependents[a].push(i),
            _ => timed.push(i),
        }
    }
    // Latest first, so the next is popped from the end.
    timed.sort_by_key(|&i| std::cmp::Reverse((plan[i].at_ns, i)));

    let mut r = RunResult {
        posted_at: vec![None; plan.len()],
        delivered_at: vec![None; plan.len()],
        ..Default::default()
    };
    let mut req_done = vec![0u32; plan.len()];
    let mut rsp_done = vec![0u32; plan.len()];
    let mut complete = 0usize;
    let post = |fab: &mut Fabric, r: &mut RunResult, i: usize| {
        let m = plan[i];
        let (a, qa, _, qb) = conns[msg_conn[i]];
        let qpn = if m.src == a { qa } else { qb };
        let (src, dst) = (&hosts[m.src].src, &hosts[m.dst].dst);
        let remote = RemoteAddr {
            va: dst.addr,
            rkey: dst.rkey,
        };
        let sge = Sge {
            addr: src.addr,
            len: m.bytes as u32,
            lkey: src.lkey,
        };
        let wr = SendWr::new(i as u64, WrOp::WriteImm(remote, i as u32), vec![sge]);
        r.posted_at[i] = Some(fab.now());
        if fab.device_mut(m.src).post_send(qpn, wr).is_err() {
            r.errors += 1;
        }
        fab.kick(m.src);
    };
    let mut draining: Option<u64> = None;
    loop {
        if complete == plan.len() && draining.is_none() {
            r.jct_ns = fab.now();
            // Exactly once: run on (bounded) and catch any late completion.
            draining = Some(fab.events() + 200_000);
        }
        if draining.is_some_and(|limit| fab.events() >= limit) || fab.now() > cfg.time_limit_ns {
            break;
        }
        while let Some(&i) = timed.last() {
            if plan[i].at_ns > fab.now() && fab.next_event_at().is_some_and(|t| t < plan[i].at_ns) {
                break;
            }
            timed.pop();
            fab.advance_to(plan[i].at_ns);
            post(&mut fab, &mut r, i);
        }
        let h = match fab.step() {
            Step::Host(h) => h,
            Step::Fabric => continue,
            Step::Idle => break,
        };
        let wcs = fab
            .device_mut(h)
            .poll_cq(hosts[h].cq, usize::MAX)
            .unwrap_or_default();
        for wc in wcs {
            if wc.status != WcStatus::Success {
                r.errors += 1;
                r.first_error
                    .get_or_insert((fab.now(), h, wc.wr_id, wc.status));
                continue;
            }
            let now = fab.now();
            let (i, rsp) = match wc.opcode {
                WcOpcode::RecvRdmaWithImm => (wc.imm.unwrap_or(u32::MAX) as usize, true),
                _ => (wc.wr_id as usize, false),
            };
            if i >= plan.len() {
                r.errors += 1;
                continue;
            }
            let count = if rsp {
                &mut rsp_done[i]
            } else {
                &mut req_done[i]
            };
            *count += 1;
            if *count > 1 {
                r.duplicated += 1;
                continue;
            }
            if rsp {
                r.delivered_at[i] = Some(now);
                for &d in &dependents[i] {
                    post(&mut fab, &mut r, d);
                }
            }
            if req_done[i] == 1 && rsp_done[i] == 1 {
                complete += 1;
                r.jct_ns = r.jct_ns.max(now);
            }
        }
    }
    r.lost = (0..plan.len())
        .filter(|&i| req_done[i] != 1 || rsp_done[i] != 1)
        .count() as u64;
    for h in 0..n {
        let c = fab.device(h).counters();
        r.retransmitted_packets += c.retransmitted_packets;
        r.timeouts += c.local_ack_timeouts + c.mp_retx_timeout;
        r.retired += c.mp_entropy_retired;
    }
    r.switch = fab.switch_stats();
    r.frames = fab.frames_carried();
    r.events = fab.events();
    r.goodput = fab.goodput().clone();
    r.watched = fab.watched().cloned();
    r.cable_bytes = fab.cable_bytes();
    (r.pfc_pauses, r.pfc_paused_ns) = fab.pfc_pauses();
    r.end_ns = fab.now();
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::fabric::Pfc;

    fn msg(src: usize, dst: usize, bytes: u64) -> Msg {
        Msg {
            src,
            dst,
            bytes,
            channel: 0,
            at_ns: 0,
            after: None,
            background: false,
        }
    }

    fn cfg(profile: Profile, pfc: Option<Pfc>) -> RunConfig {
        let mut fabric = FabricConfig::non_blocking(8, 1);
        fabric.pfc = pfc;
        RunConfig {
            fabric,
            profile,
            pmtu: 4096,
            timeout: 8,
            mp: MpAttrs::default(),
            cables: Vec::new(),
            time_limit_ns: 100_000_000,
            bin_ns: 10_000,
            watch_leaf: None,
        }
    }

    /// `cfg` with the MP reorder threshold of SPEC v1.1 (K = 3): the tests
    /// below need an incast that drops and retransmits, which the v1.2
    /// default (K = 32, with the RTO sweep) mostly avoids on this fabric.
    fn cfg_k3(profile: Profile, pfc: Option<Pfc>) -> RunConfig {
        let mut c = cfg(profile, pfc);
        c.mp.tuning.reorder_threshold = 3;
        c
    }

    /// 3 → 1 incast across the spines (hosts 5, 6, 7 of leaf 1 to host 0
    /// of leaf 0) and a victim flow from host 4 to host 1 over the same
    /// spines (MP sprays over all of them), 1 MiB each; message 3 is the
    /// victim's.
    fn incast_and_victim() -> Vec<Msg> {
        let mib = 1 << 20;
        vec![
            msg(5, 0, mib),
            msg(6, 0, mib),
            msg(7, 0, mib),
            msg(4, 1, mib),
        ]
    }

    #[test]
    fn pfc_loses_nothing_and_blocks_the_victim_behind_the_incast() {
        let plan = incast_and_victim();
        let lossy = run(&cfg_k3(Profile::Mp, None), &plan, 1);
        let lossless = run(&cfg_k3(Profile::Mp, Some(Pfc::default())), &plan, 1);
        for r in [&lossy, &lossless] {
            assert_eq!((r.lost, r.duplicated, r.errors), (0, 0, 0));
        }
        // Lossy: the incast overflows host 0's port; PFC: no drop, pauses.
        assert!(lossy.switch.dropped > 0, "{:?}", lossy.switch);
        assert_eq!(lossy.pfc_pauses, 0);
        assert_eq!(lossless.switch.dropped, 0, "{:?}", lossless.switch);
        assert!(lossless.pfc_pauses > 0);
        // Head-of-line blocking: the victim goes to an idle host, yet its
        // packets wait behind the incast's in the paused spine ports.
        let victim = |r: &RunResult| r.delivered_at[3].unwrap() - r.posted_at[3].unwrap();
        println!(
            "victim: {} ns lossy ({} drops), {} ns with PFC ({} pauses, {} ns paused)",
            victim(&lossy),
            lossy.switch.dropped,
            victim(&lossless),
            lossless.pfc_pauses,
            lossless.pfc_paused_ns
        );
        assert!(
            victim(&lossless) > victim(&lossy) * 3 / 2,
            "victim {} ns with PFC, {} ns without",
            victim(&lossless),
            victim(&lossy)
        );
    }

    #[test]
    fn goodput_counts_each_delivered_byte_once() {
        let plan = incast_and_victim();
        for profile in [Profile::Base, Profile::Mp] {
            let r = run(&cfg_k3(profile, None), &plan, 1);
            assert_eq!(r.lost, 0);
            // Retransmissions happened, yet the goodput is the plan's bytes.
            assert!(r.retransmitted_packets > 0, "{profile:?}");
            let total: u64 = r.goodput.bins().iter().sum();
            assert_eq!(total, 4 << 20, "{profile:?}");
        }
    }
}
