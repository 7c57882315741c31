//! The built-in scenarios of `metaroce-ref fabric`, each run with Base and
//! with MP on the same fabric, plan and seed, and the summary row of each
//! run (the terminal table and the JSON keys of `docs/fabric.md`).

use super::run::{Profile, RunConfig, RunResult, run};
use super::workload::{Msg, Workload};
use super::{CableChange, CableEvent, FabricConfig};
use crate::MpAttrs;
use serde::Serialize;

/// Names of the built-in scenarios.
pub const NAMES: [&str; 8] = [
    "permutation",
    "allreduce",
    "alltoall",
    "incast",
    "link-failure",
    "flapping",
    "degraded",
    "mixed",
];

/// A scenario: a fabric, a workload and the cable events of the run.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Its name.
    pub name: String,
    /// The fabric.
    pub fabric: FabricConfig,
    /// The workload.
    pub workload: Workload,
    /// Cable events.
    pub cables: Vec<CableEvent>,
    /// Virtual time limit of each run.
    pub time_limit_ns: u64,
    /// Attributes of the MP runs (default: SPEC §7.1 and §10.3 defaults).
    pub mp: MpAttrs,
}

/// Path MTU of every connection.
pub const PMTU: u32 = 4096;
/// Local ACK timeout exponent of every QP: 4.096 µs × 2^8 ≈ 1 ms.
pub const TIMEOUT: u8 = 8;

/// Size of the built-in workloads: `Full` for the command, `Small` for
/// quick tests (a quarter to an eighth of the bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// Bytes as documented in docs/fabric.md.
    Full,
    /// Fewer bytes, for debug-build tests.
    Small,
}

/// The built-in scenario `name` on a non-blocking fabric of `hosts` hosts
/// (oversubscribed `oversub`:1 when above 1).
pub fn builtin(name: &str, hosts: usize, oversub: f64, seed: u64, size: Size) -> Option<Scenario> {
    let mut fabric = FabricConfig::non_blocking(hosts.max(2), seed);
    if oversub > 1.0 {
        fabric.spines = ((fabric.hosts_per_leaf as f64 / oversub).round() as usize).max(1);
    }
    let k = match size {
        Size::Full => 1,
        Size::Small => 4,
    };
    let mib = |m: u64| (m << 20) / k;
    let n = fabric.hosts;
    // Failures after the start-up transient, with 10 base RTTs of
    // steady state before them.
    let at = [400_000, 120_000][usize::from(size == Size::Small)];
    let cable = |change| CableEvent {
        at_ns: at,
        leaf: 0,
        spine: 0,
        change,
    };
    let (workload, cables) = match name {
        "permutation" => (
            Workload::Permutation {
                bytes: mib(8),
                msg_bytes: mib(1),
            },
            vec![],
        ),
        "incast" => (
            Workload::Incast {
                senders: (n - 1).min(32),
                bytes: mib(1),
                msg_bytes: mib(1) / 2,
            },
            vec![],
        ),
        "allreduce" => (
            Workload::AllReduce {
                bytes: mib(16),
                channels: 4,
                slice_bytes: 512 << 10,
            },
            vec![],
        ),
        "alltoall" => (
            Workload::AllToAll {
                bytes_per_pair: (256 << 10) / k,
                msg_bytes: 64 << 10,
            },
            vec![],
        ),
        "link-failure" => (
            Workload::Permutation {
                bytes: mib(16),
                msg_bytes: mib(1),
            },
            vec![cable(CableChange::Down {
                reroute_after_ns: Some(500_000 / k),
            })],
        ),
        "flapping" => (
            Workload::Permutation {
                bytes: mib(16),
                msg_bytes: mib(1),
            },
            vec![cable(CableChange::Flap {
                period_ns: 200_000 / k,
                down_ns: 100_000 / k,
                flaps: 8,
                reroute_after_ns: Some(50_000 / k),
            })],
        ),
        "degraded" => (
            Workload::Permutation {
                bytes: mib(8),
                msg_bytes: mib(1),
            },
            vec![cable(CableChange::Degrade(0.25))],
        ),
        "mixed" => (
            Workload::Mixed {
                bytes: mib(4),
                msg_bytes: mib(1),
                background: 16,
                host_gbps: fabric.host_gbps,
            },
            vec![],
        ),
        _ => return None,
    };
    Some(Scenario {
        name: name.to_string(),
        fabric,
        workload,
        cables,
        time_limit_ns: 500_000_000,
        mp: MpAttrs::default(),
    })
}

/// The summary of one run: the row of the table and of the JSON output.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// "Base" or "MP".
    pub profile: &'static str,
    /// Hosts.
    pub hosts: usize,
    /// Mean over the workload's flows (one per sender, receiver and
    /// channel; background excluded) of the flow's goodput over its fair
    /// rate (the rate that finishes it at the ideal time), each capped at
    /// 1 and weighted by bytes: 1.0 is the fabric's bound (bisection or
    /// host line rate) reached by every flow.
    pub goodput_fraction: f64,
    /// Job completion time over the ideal one.
    pub jct_over_ideal: f64,
    /// Job completion time.
    pub jct_us: f64,
    /// The ideal: the busiest host link or leaf uplink set at full rate,
    /// plus one path latency (all-reduce: one 2-link latency per step).
    pub ideal_us: f64,
    /// Median time from posting a message to its arrival.
    pub p50_completion_us: f64,
    /// 99th percentile of the same.
    pub p99_completion_us: f64,
    /// Retransmitted packets × PMTU (the transports count packets).
    pub retransmitted_bytes: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Time from a cable failure until the goodput (bytes delivered in
    /// order) of the flows from or to the failed cable's leaf reaches 0.9
    /// of its remaining ideal (those flows at line rate × the fraction of
    /// the leaf's uplinks left), in base RTTs (`None`: no failure, or it
    /// never got there).
    pub recovery_rtts: Option<f64>,
    /// Whether a cable failed during the run.
    pub cable_failed: bool,
    /// Messages not delivered exactly once.
    pub messages_lost: u64,
    /// Completions beyond the first.
    pub duplicated: u64,
    /// Completions with an error (e.g. retry count exceeded: the QP then
    /// flushes its other messages).
    pub errors: u64,
    /// Deepest switch queue, KiB.
    pub max_queue_kib: f64,
    /// Frames the switches dropped.
    pub drops: u64,
    /// Frames the switches marked CE.
    pub ecn_marks: u64,
    /// PFC pauses obeyed by all ports (0 without `pfc`).
    pub pfc_pauses: u64,
    /// Time ports spent paused by PFC, summed over ports.
    pub pfc_paused_us: f64,
    /// Frames put on a wire, every hop counted.
    pub frames: u64,
    /// Fabric events processed.
    pub events: u64,
}

/// Ideal times of a plan on `f`: the bandwidth bound and the latency of
/// one path (4 links of a cross-leaf path at full-size packets).
pub fn ideal(f: &FabricConfig, plan: &[Msg]) -> (f64, f64) {
    let leaves = f.leaves();
    let mut tx = vec![0u64; f.hosts];
    let mut rx = vec![0u64; f.hosts];
    let mut up = vec![0u64; leaves];
    let mut down = vec![0u64; leaves];
    for m in plan {
        tx[m.src] += m.bytes;
        rx[m.dst] += m.bytes;
        let (ls, ld) = (f.leaf_of(m.src), f.leaf_of(m.dst));
        if ls != ld {
            up[ls] += m.bytes;
            down[ld] += m.bytes;
        }
    }
    let host = tx.iter().chain(&rx).max().copied().unwrap_or(0) as f64 * 8.0 / f.host_gbps;
    let uplinks = f.spines as f64 * f.fabric_gbps;
    let fabric = up.iter().chain(&down).max().copied().unwrap_or(0) as f64 * 8.0 / uplinks;
    let pkt = f64::from(PMTU + 80) * 8.0;
    let hop = f.link_delay_ns as f64 + pkt / f.host_gbps.min(f.fabric_gbps);
    (host.max(fabric), 4.0 * hop)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

/// Recovery after the first cable failure of `s`, in base RTTs: from the
/// failure until the goodput of the flows from or to the failed cable's
/// leaf (bytes delivered in order, bins one base RTT wide unless the run
/// was long enough to coarsen them, 3-bin mean) reaches 0.9 of what is
/// left of its ideal: those flows at the host line rate, times the
/// fraction of the leaf's uplinks still up. `None` when nothing failed or
/// it never got there before the workload's first flow ended.
fn recovery(s: &Scenario, plan: &[Msg], r: &RunResult, rtt_ns: f64) -> Option<f64> {
    let (fail, leaf) = s
        .cables
        .iter()
        .find_map(|c| c.change.fails().then_some((c.at_ns, c.leaf)))?;
    let series = r.watched.as_ref()?;
    let (bins, w) = (series.bins(), series.width_ns() as f64);
    let fb = (fail as f64 / w) as usize;
    let f = &s.fabric;
    let mut touching = std::collections::BTreeSet::new();
    // Until the first flow of the workload ends (then throughput falls
    // for reasons other than the failure).
    let mut last: std::collections::BTreeMap<(usize, usize, usize), u64> = Default::default();
    for (i, m) in plan.iter().enumerate().filter(|(_, m)| !m.background) {
        if f.leaf_of(m.src) == leaf || f.leaf_of(m.dst) == leaf {
            touching.insert((m.src, m.dst, m.channel));
        }
        if let Some(t) = r.delivered_at[i] {
            let e = last.entry((m.src, m.dst, m.channel)).or_insert(0);
            *e = (*e).max(t);
        }
    }
    let per_bin = touching.len() as f64 * f.host_gbps / 8.0 * w;
    let left = 1.0 - 1.0 / f.spines as f64;
    let target = 0.9 * per_bin * left;
    let end = last.values().min().copied().unwrap_or(r.jct_ns);
    let eb = ((end as f64 / w) as usize).min(bins.len());
    (fb..eb.saturating_sub(3))
        .find(|&b| bins[b..b + 3].iter().sum::<u64>() as f64 / 3.0 >= target)
        .map(|b| ((b as f64 * w - fail as f64) / rtt_ns).max(0.0))
}

/// Base RTT of a fabric: twice the path latency (data out, ACK back).
pub fn base_rtt_ns(f: &FabricConfig) -> f64 {
    let (_, path) = ideal(f, &[]);
    2.0 * path
}

/// Runs scenario `s` with `profile` (devices seeded from `seed`); returns
/// the summary row and the raw result.
pub fn run_profile(s: &Scenario, profile: Profile, seed: u64) -> (Summary, RunResult) {
    let plan = s.workload.plan(s.fabric.hosts, seed);
    let rtt = base_rtt_ns(&s.fabric);
    let cfg = RunConfig {
        fabric: s.fabric.clone(),
        profile,
        pmtu: PMTU,
        timeout: TIMEOUT,
        mp: s.mp.clone(),
        cables: s.cables.clone(),
        time_limit_ns: s.time_limit_ns,
        bin_ns: rtt as u64,
        watch_leaf: s.cables.first().map(|c| c.leaf),
    };
    let r = run(&cfg, &plan, seed);
    let (t_bw, path) = ideal(&s.fabric, &plan);
    // All-reduce: one latency of the shortest path (2 links, ring
    // neighbours on one leaf) per dependent step, a lower bound.
    let latency = match s.workload {
        Workload::AllReduce { .. } => (2 * (s.fabric.hosts - 1)) as f64 * path / 2.0,
        _ => path,
    };
    let ideal_ns = t_bw + latency;
    let mut times: Vec<f64> = plan
        .iter()
        .enumerate()
        .filter_map(|(i, _)| Some((r.delivered_at[i]? - r.posted_at[i]?) as f64 / 1e3))
        .collect();
    times.sort_by(f64::total_cmp);
    // Flows: bytes, first posting, last arrival.
    let mut flows: std::collections::BTreeMap<(usize, usize, usize), (u64, u64, u64)> =
        Default::default();
    for (i, m) in plan.iter().enumerate().filter(|(_, m)| !m.background) {
        let e = flows
            .entry((m.src, m.dst, m.channel))
            .or_insert((0, u64::MAX, 0));
        e.0 += m.bytes;
        e.1 = e.1.min(r.posted_at[i].unwrap_or(0));
        e.2 = e.2.max(r.delivered_at[i].unwrap_or(r.end_ns));
    }
    let (mut got, mut want) = (0.0, 0.0);
    for &(bytes, start, end) in flows.values() {
        let fair = bytes as f64 / t_bw.max(1.0);
        got += (bytes as f64 / (end.saturating_sub(start)).max(1) as f64).min(fair);
        want += fair;
    }
    let summary = Summary {
        scenario: s.name.clone(),
        profile: profile.name(),
        hosts: s.fabric.hosts,
        goodput_fraction: round3(if want > 0.0 { got / want } else { 0.0 }),
        jct_over_ideal: round3(r.jct_ns as f64 / ideal_ns.max(1.0)),
        jct_us: round3(r.jct_ns as f64 / 1e3),
        ideal_us: round3(ideal_ns / 1e3),
        p50_completion_us: round3(percentile(&times, 0.5)),
        p99_completion_us: round3(percentile(&times, 0.99)),
        retransmitted_bytes: r.retransmitted_packets * u64::from(PMTU),
        timeouts: r.timeouts,
        recovery_rtts: recovery(s, &plan, &r, rtt).map(round3),
        cable_failed: s.cables.iter().any(|c| c.change.fails()),
        messages_lost: r.lost,
        duplicated: r.duplicated,
        errors: r.errors,
        max_queue_kib: round3(r.switch.max_queue_bytes as f64 / 1024.0),
        drops: r.switch.dropped,
        ecn_marks: r.switch.marked,
        pfc_pauses: r.pfc_pauses,
        pfc_paused_us: round3(r.pfc_paused_ns as f64 / 1e3),
        frames: r.frames,
        events: r.events,
    };
    (summary, r)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The terminal table of summaries (Markdown).
pub fn table(rows: &[Summary]) -> String {
    let mut t = String::from(
        "| scenario | profile | hosts | goodput_fraction | jct_over_ideal | p50_completion_us | p99_completion_us | retransmitted_bytes | timeouts | recovery_rtts | messages_lost | max_queue_kib | drops | ecn_marks |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let rec = match r.recovery_rtts {
            Some(x) => format!("{x:.1}"),
            None if r.cable_failed => "never".to_string(),
            None => "-".to_string(),
        };
        t += &format!(
            "| {} | {} | {} | {:.3} | {:.3} | {:.1} | {:.1} | {} | {} | {} | {} | {:.0} | {} | {} |\n",
            r.scenario,
            r.profile,
            r.hosts,
            r.goodput_fraction,
            r.jct_over_ideal,
            r.p50_completion_us,
            r.p99_completion_us,
            r.retransmitted_bytes,
            r.timeouts,
            rec,
            r.messages_lost,
            r.max_queue_kib,
            r.drops,
            r.ecn_marks,
        );
    }
    t
}
