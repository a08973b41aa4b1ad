//! Hand-written SVG charts: latency over time (per actor, mean and max per time bucket) and
//! the latency distribution (latency against percentile on a "nines" axis, per actor kind).

use std::fmt::Write as _;

use crate::metrics::{ActorKind, ActorResult, merged_histogram, to_f64};

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 420.0;
const MARGIN_LEFT: f64 = 70.0;
const MARGIN_RIGHT: f64 = 20.0;
const MARGIN_TOP: f64 = 40.0;
const MARGIN_BOTTOM: f64 = 50.0;
/// Time buckets of the latency-over-time chart.
const BUCKETS: usize = 300;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];
/// Percentiles drawn on the distribution chart, as nines: 0 = p0, 1 = p90, 2 = p99, ...
const NINES_MAX: f64 = 5.0;

/// A plot area mapping data to pixels.
struct Frame {
    x_max: f64,
    y_max: f64,
}

impl Frame {
    fn x(&self, value: f64) -> f64 {
        MARGIN_LEFT + (WIDTH - MARGIN_LEFT - MARGIN_RIGHT) * value / self.x_max.max(1e-9)
    }

    fn y(&self, value: f64) -> f64 {
        HEIGHT
            - MARGIN_BOTTOM
            - (HEIGHT - MARGIN_TOP - MARGIN_BOTTOM) * value / self.y_max.max(1e-9)
    }
}

/// Mean (solid) and max (faint) latency per time bucket, one colour per actor.
pub fn latency_over_time(title: &str, results: &[ActorResult]) -> String {
    let end_us = results
        .iter()
        .filter_map(|result| result.series.last().map(|(at, _)| *at))
        .max()
        .unwrap_or(1)
        .max(1);
    let bucketed: Vec<Vec<(f64, f64, f64)>> = results
        .iter()
        .map(|result| buckets(&result.series, end_us))
        .collect();
    let y_max = bucketed
        .iter()
        .flatten()
        .map(|(_, _, max)| *max)
        .fold(0.001, f64::max);
    let frame = Frame {
        x_max: to_f64(end_us) / 1e6,
        y_max,
    };
    let mut svg = open(title, &frame, "time (s)", "latency (ms)");
    for (index, (result, points)) in results.iter().zip(&bucketed).enumerate() {
        let color = COLORS[index % COLORS.len()];
        let means: Vec<(f64, f64)> = points.iter().map(|(x, mean, _)| (*x, *mean)).collect();
        let maxes: Vec<(f64, f64)> = points.iter().map(|(x, _, max)| (*x, *max)).collect();
        polyline(&mut svg, &frame, &maxes, color, 0.25);
        polyline(&mut svg, &frame, &means, color, 1.0);
        legend(
            &mut svg,
            index,
            color,
            &format!("{} (mean; faint: max)", result.label()),
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// (seconds, mean ms, max ms) per non-empty bucket.
fn buckets(series: &[(u64, u64)], end_us: u64) -> Vec<(f64, f64, f64)> {
    let mut sums = vec![(0u64, 0u64, 0u64); BUCKETS];
    let width = end_us.div_ceil(BUCKETS as u64).max(1);
    for &(at, latency) in series {
        let index = usize::try_from(at / width)
            .unwrap_or(BUCKETS - 1)
            .min(BUCKETS - 1);
        let bucket = &mut sums[index];
        bucket.0 += latency;
        bucket.1 += 1;
        bucket.2 = bucket.2.max(latency);
    }
    sums.iter()
        .enumerate()
        .filter(|(_, (_, count, _))| *count > 0)
        .map(|(index, (sum, count, max))| {
            let x = to_f64(u64::try_from(index).unwrap_or(0) * width) / 1e6;
            (
                x,
                to_f64(*sum) / to_f64(*count) / 1000.0,
                to_f64(*max) / 1000.0,
            )
        })
        .collect()
}

/// Latency against percentile, x in nines (p90 = 1, p99 = 2, ...), one line per kind.
pub fn latency_distribution(title: &str, results: &[ActorResult]) -> String {
    let kinds = [
        ActorKind::Producer,
        ActorKind::Consumer,
        ActorKind::ProducingConsumer,
    ];
    let mut lines = Vec::new();
    for kind in kinds {
        let of_kind: Vec<&ActorResult> = results.iter().filter(|r| r.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        let histogram = merged_histogram(&of_kind);
        let points: Vec<(f64, f64)> = (0..=250)
            .map(|step| {
                let nines = NINES_MAX * f64::from(step) / 250.0;
                let percentile = 100.0 * (1.0 - 10f64.powf(-nines));
                let value = histogram.value_at_percentile(percentile);
                (nines, to_f64(value) / 1000.0)
            })
            .collect();
        lines.push((kind, points));
    }
    let y_max = lines
        .iter()
        .flat_map(|(_, points)| points.iter().map(|(_, y)| *y))
        .fold(0.001, f64::max);
    let frame = Frame {
        x_max: NINES_MAX,
        y_max,
    };
    let mut svg = open(title, &frame, "percentile", "latency (ms)");
    for (index, (kind, points)) in lines.iter().enumerate() {
        let color = COLORS[index % COLORS.len()];
        polyline(&mut svg, &frame, points, color, 1.0);
        legend(&mut svg, index, color, &format!("all {}s", kind.name()));
    }
    svg.push_str("</svg>\n");
    svg
}

/// The SVG head, axes, grid and tick labels.
fn open(title: &str, frame: &Frame, x_label: &str, y_label: &str) -> String {
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" \
         fill=\"white\"/>\n<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">\
         {title}</text>\n",
        WIDTH / 2.0
    );
    for tick in 0..=5 {
        let value = frame.y_max * f64::from(tick) / 5.0;
        let y = frame.y(value);
        let _ = writeln!(
            svg,
            "<line x1=\"{MARGIN_LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{value:.2}</text>",
            WIDTH - MARGIN_RIGHT,
            MARGIN_LEFT - 6.0,
            y + 4.0
        );
    }
    let nines = x_label == "percentile";
    for tick in 0..=5 {
        let value = frame.x_max * f64::from(tick) / 5.0;
        let x = frame.x(value);
        let label = if nines {
            ["p0", "p90", "p99", "p99.9", "p99.99", "p99.999"][usize::try_from(tick).unwrap_or(0)]
                .to_owned()
        } else {
            format!("{value:.1}")
        };
        let _ = writeln!(
            svg,
            "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>",
            HEIGHT - MARGIN_BOTTOM + 18.0
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{x_label}</text>\
         <text x=\"16\" y=\"{:.1}\" transform=\"rotate(-90 16 {:.1})\" \
         text-anchor=\"middle\">{y_label}</text>",
        WIDTH / 2.0,
        HEIGHT - 10.0,
        HEIGHT / 2.0,
        HEIGHT / 2.0
    );
    svg
}

fn polyline(svg: &mut String, frame: &Frame, points: &[(f64, f64)], color: &str, opacity: f64) {
    let mut coordinates = String::new();
    for (x, y) in points {
        let _ = write!(coordinates, "{:.1},{:.1} ", frame.x(*x), frame.y(*y));
    }
    let _ = writeln!(
        svg,
        "<polyline fill=\"none\" stroke=\"{color}\" stroke-opacity=\"{opacity}\" \
         stroke-width=\"1.5\" points=\"{coordinates}\"/>"
    );
}

fn legend(svg: &mut String, index: usize, color: &str, label: &str) {
    let y = MARGIN_TOP + 14.0 * to_f64(u64::try_from(index).unwrap_or(0));
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{y:.1}\" fill=\"{color}\">{label}</text>",
        MARGIN_LEFT + 10.0
    );
}
