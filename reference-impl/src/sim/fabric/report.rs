//! The series behind the plots of a run (goodput over time, the
//! message-completion-time distribution, per-cable utilisation), small
//! enough for the JSON summary and for the HTML report (`html`, feature
//! `html`).

use super::FabricConfig;
use super::run::RunResult;
use serde::Serialize;

/// Points of the completion-time distribution: every 0.5 %.
const QUANTILES: usize = 201;

/// The plotted series of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plots {
    /// Width of a goodput bin, µs.
    pub goodput_bin_us: f64,
    /// Goodput (bytes delivered in order to the receivers, all flows) per
    /// bin, Gb/s; bin 0 starts at time 0.
    pub goodput_gbps: Vec<f64>,
    /// Message completion time (posting to arrival), µs, at the quantiles
    /// 0, 0.5, 1, …, 100 % (empty when no message arrived).
    pub completion_quantiles_us: Vec<f64>,
    /// Utilisation of each leaf-to-spine cable direction over the job
    /// (bytes sent over what the nominal rate could send by the job's
    /// completion), `[leaf][spine]`.
    pub uplink_utilisation: Vec<Vec<f64>>,
    /// The same, spine to leaf, `[leaf][spine]`.
    pub downlink_utilisation: Vec<Vec<f64>>,
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The series of run `r` on fabric `f`.
pub fn plots(f: &FabricConfig, r: &RunResult) -> Plots {
    let w = r.goodput.width_ns().max(1) as f64;
    let goodput_gbps = r
        .goodput
        .bins()
        .iter()
        .map(|&b| round3(b as f64 * 8.0 / w))
        .collect();
    let mut times: Vec<f64> = r
        .posted_at
        .iter()
        .zip(&r.delivered_at)
        .filter_map(|(p, d)| Some(d.as_ref()?.saturating_sub(*p.as_ref()?) as f64 / 1e3))
        .collect();
    times.sort_by(f64::total_cmp);
    let completion_quantiles_us = if times.is_empty() {
        Vec::new()
    } else {
        (0..QUANTILES)
            .map(|q| {
                let i = ((times.len() - 1) * q).div_ceil(QUANTILES - 1);
                round3(times[i.min(times.len() - 1)])
            })
            .collect()
    };
    let capacity = f.fabric_gbps / 8.0 * r.jct_ns.max(1) as f64;
    let util = |pick: fn(&(u64, u64)) -> u64| -> Vec<Vec<f64>> {
        r.cable_bytes
            .iter()
            .map(|row| {
                row.iter()
                    .map(|c| round3(pick(c) as f64 / capacity))
                    .collect()
            })
            .collect()
    };
    Plots {
        goodput_bin_us: round3(w / 1e3),
        goodput_gbps,
        completion_quantiles_us,
        uplink_utilisation: util(|c| c.0),
        downlink_utilisation: util(|c| c.1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::fabric::series::Series;

    #[test]
    fn plots_of_a_small_result() {
        let f = FabricConfig::non_blocking(8, 1);
        let mut goodput = Series::new(1_000, 8);
        goodput.add(500, 12_500); // 100 Gb/s over 1 µs
        let r = RunResult {
            posted_at: vec![Some(0), Some(0), None],
            delivered_at: vec![Some(10_000), Some(30_000), None],
            jct_ns: 1_000,
            goodput,
            cable_bytes: vec![vec![(12_500, 0)]],
            ..Default::default()
        };
        let p = plots(&f, &r);
        assert_eq!((p.goodput_bin_us, p.goodput_gbps), (1.0, vec![100.0]));
        let q = &p.completion_quantiles_us;
        assert_eq!((q.len(), q[0], q[100], q[200]), (201, 10.0, 30.0, 30.0));
        assert_eq!(p.uplink_utilisation, vec![vec![1.0]]);
        assert_eq!(p.downlink_utilisation, vec![vec![0.0]]);
    }
}
