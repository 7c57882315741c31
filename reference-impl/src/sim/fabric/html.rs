//! The HTML report of `metaroce-ref fabric --html`: one self-contained page
//! (no script, no external file) with the summary table and, for every
//! scenario, the figures of [`FIGURES`], each an inline SVG drawn by
//! `plotters` with one line or bar set per profile (Base and MP side by
//! side).

use super::report::Plots;
use super::scenario::{Summary, table};
use plotters::prelude::*;
use std::fmt;

/// The figures of every scenario, in page order; each is one
/// `<figure data-plot="NAME">` holding one `<svg>`.
pub const FIGURES: [&str; 3] = ["goodput", "completion-cdf", "uplink-utilisation"];

/// One run of the report: its summary row and its series.
#[derive(Clone, Copy, Debug)]
pub struct Run<'a> {
    /// The summary row.
    pub summary: &'a Summary,
    /// The plotted series.
    pub plots: &'a Plots,
}

/// A figure `plotters` could not draw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlotError {
    /// The scenario.
    pub scenario: String,
    /// The figure, one of [`FIGURES`].
    pub figure: &'static str,
    /// What plotters said.
    pub detail: String,
}

impl fmt::Display for PlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "plotting {} of scenario {}: {}",
            self.figure, self.scenario, self.detail
        )
    }
}

impl std::error::Error for PlotError {}

const WIDTH: u32 = 640;
const HEIGHT: u32 = 320;

fn color(profile: &str, i: usize) -> RGBColor {
    match profile {
        "Base" => RGBColor(0x1f, 0x77, 0xb4),
        "MP" => RGBColor(0xd6, 0x27, 0x28),
        _ => [
            RGBColor(0x2c, 0xa0, 0x2c),
            RGBColor(0x94, 0x67, 0xbd),
            RGBColor(0x8c, 0x56, 0x4b),
        ][i % 3],
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

type Drawn = Result<(), Box<dyn std::error::Error>>;
/// The drawing area of one figure.
type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
/// What draws one figure.
type Draw = fn(&Area, &[Run]) -> Drawn;

/// Draws a chart's legend (one entry per profile) at `position`.
fn legend<'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    position: SeriesLabelPosition,
) -> Drawn {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Goodput over time, one line per profile.
fn goodput(area: &Area, runs: &[Run]) -> Drawn {
    let pts = |p: &Plots| -> Vec<(f64, f64)> {
        let w = p.goodput_bin_us;
        (p.goodput_gbps.iter().enumerate())
            .map(|(i, &g)| ((i as f64 + 0.5) * w, g))
            .collect()
    };
    let xmax = (runs.iter())
        .map(|r| r.plots.goodput_gbps.len() as f64 * r.plots.goodput_bin_us)
        .fold(1.0, f64::max);
    let ymax = (runs
        .iter()
        .flat_map(|r| r.plots.goodput_gbps.iter().copied()))
    .fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption(
            "Goodput (bytes delivered in order, all flows)",
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..xmax, 0.0..ymax * 1.25)?;
    chart
        .configure_mesh()
        .x_desc("time (µs)")
        .y_desc("Gb/s")
        .draw()?;
    for (i, r) in runs.iter().enumerate() {
        let c = color(r.summary.profile, i);
        chart
            .draw_series(LineSeries::new(pts(r.plots), c.stroke_width(2)))?
            .label(r.summary.profile)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

/// Message-completion-time CDF, one line per profile.
fn completion_cdf(area: &Area, runs: &[Run]) -> Drawn {
    let xmax = (runs.iter())
        .filter_map(|r| r.plots.completion_quantiles_us.last().copied())
        .fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption(
            "Message completion time (posting to arrival), CDF",
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..xmax * 1.02, 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_desc("completion time (µs)")
        .y_desc("fraction of messages")
        .draw()?;
    for (i, r) in runs.iter().enumerate() {
        let q = &r.plots.completion_quantiles_us;
        let n = q.len().saturating_sub(1).max(1) as f64;
        let pts = q.iter().enumerate().map(|(k, &t)| (t, k as f64 / n));
        let c = color(r.summary.profile, i);
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
            .label(r.summary.profile)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)
}

/// Utilisation of every leaf-to-spine cable, grouped bars per profile.
fn uplinks(area: &Area, runs: &[Run]) -> Drawn {
    let spines = (runs.iter())
        .filter_map(|r| r.plots.uplink_utilisation.first().map(Vec::len))
        .max()
        .unwrap_or(1)
        .max(1);
    let cables = (runs.iter())
        .map(|r| {
            r.plots
                .uplink_utilisation
                .iter()
                .map(Vec::len)
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0)
        .max(1);
    let ymax = (runs.iter())
        .flat_map(|r| r.plots.uplink_utilisation.iter().flatten().copied())
        .fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption(
            "Leaf-to-spine cable utilisation over the job",
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(-0.5..cables as f64 - 0.5, 0.0..ymax * 1.3)?;
    let label = move |x: &f64| {
        let i = x.round().max(0.0) as usize;
        format!("L{}S{}", i / spines, i % spines)
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(cables.min(16))
        .x_label_formatter(&label)
        .x_desc("cable (leaf, spine)")
        .y_desc("utilisation")
        .draw()?;
    let width = 0.8 / runs.len().max(1) as f64;
    for (p, r) in runs.iter().enumerate() {
        let c = color(r.summary.profile, p);
        let bars = (r.plots.uplink_utilisation.iter().flatten().enumerate()).map(|(i, &u)| {
            let x0 = i as f64 - 0.4 + p as f64 * width;
            Rectangle::new([(x0, 0.0), (x0 + width, u)], c.filled())
        });
        chart
            .draw_series(bars)?
            .label(r.summary.profile)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

/// One figure as an SVG document.
fn svg(figure: &'static str, runs: &[Run], draw: Draw) -> Result<String, PlotError> {
    let mut out = String::new();
    let err = |e: &dyn fmt::Display| PlotError {
        scenario: runs
            .first()
            .map_or_else(String::new, |r| r.summary.scenario.clone()),
        figure,
        detail: e.to_string(),
    };
    {
        let area = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        area.fill(&WHITE).map_err(|e| err(&e))?;
        draw(&area, runs).map_err(|e| err(&e))?;
        area.present().map_err(|e| err(&e))?;
    }
    Ok(out)
}

/// The report page: a heading, the command that made it, the summary
/// table, then per scenario (in the order of `runs`) the [`FIGURES`].
pub fn report(command: &str, runs: &[Run]) -> Result<String, PlotError> {
    let rows: Vec<Summary> = runs.iter().map(|r| r.summary.clone()).collect();
    let mut page = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>metaroce-ref fabric: Base and MP side by side</title>\n<style>\n\
         body { font-family: sans-serif; max-width: 1340px; margin: 1em auto; }\n\
         pre { font-size: 12px; overflow-x: auto; }\n\
         .figs { display: flex; flex-wrap: wrap; gap: 8px; }\n\
         figure { margin: 0; }\n</style>\n</head>\n<body>\n\
         <h1>metaroce-ref fabric: Base and MP side by side</h1>\n",
    );
    page += &format!(
        "<p>Made by <code>{}</code>. Definitions of the columns and of the plots: docs/fabric.md.</p>\n<pre>{}</pre>\n",
        escape(command),
        escape(&table(&rows))
    );
    let mut names: Vec<&str> = Vec::new();
    for r in runs {
        if !names.contains(&r.summary.scenario.as_str()) {
            names.push(&r.summary.scenario);
        }
    }
    for name in names {
        let group: Vec<Run> = (runs.iter())
            .filter(|r| r.summary.scenario == name)
            .copied()
            .collect();
        page += &format!("<h2>{}</h2>\n<div class=\"figs\">\n", escape(name));
        let draws: [Draw; 3] = [goodput, completion_cdf, uplinks];
        for (figure, draw) in FIGURES.into_iter().zip(draws) {
            page += &format!(
                "<figure data-plot=\"{figure}\">\n{}\n</figure>\n",
                svg(figure, &group, draw)?
            );
        }
        page += "</div>\n";
    }
    page += "</body>\n</html>\n";
    Ok(page)
}
