//! The suite's plots, drawn with `plotters` as SVG (inlined in `report.html`) and PNG:
//! throughput against tuple size per transport (tuples/s and Gbit/s), latency percentiles,
//! fan-out, large messages and the pipelines' speedup. Logarithmic axes are drawn as linear
//! axes over log10 of the values, labelled with the values themselves.
//!
//! Text needs a TrueType font, read once from the system (DejaVu Sans or Liberation Sans, or
//! the file `SLUICE_PLOT_FONT` names); without one there are no plots, and the report says so.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, Context};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use super::rows::{Row, ORDER};
use crate::foundation::stats::LatencySummary;

/// Throughput in tuples/s by size.
pub(crate) const THROUGHPUT: &str = "throughput";
/// Throughput in Gbit/s by size.
pub(crate) const THROUGHPUT_GBIT: &str = "throughput-gbit";
/// Latency percentiles by size.
pub(crate) const LATENCY: &str = "latency";
/// Fan-out by receivers.
pub(crate) const FANOUT: &str = "fanout";
/// Large-message latency by size.
pub(crate) const LARGE: &str = "large";
/// Each Storm topology's plot of latency by input rate: the application and the plot's name.
pub(crate) const TOPOLOGY: [(&str, &str); 2] = [
    ("sol", "topology-sol"),
    ("throughput-test", "topology-throughput-test"),
];
/// The pipelines' speedup by senders.
pub(crate) const PIPELINE: &str = "pipeline";

const SIZE: (u32, u32) = (960, 600);

/// Line colours, dark enough on white and told apart in order.
const COLORS: [(u8, u8, u8); 12] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (80, 80, 80),
    (188, 189, 34),
    (23, 190, 207),
    (0, 0, 128),
    (128, 0, 0),
];

/// A chart's name and its SVG text.
pub(crate) type Svg = (&'static str, String);

/// Where fonts are looked for, in order.
const FONTS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// Registers a system font as `sans-serif` (once); the error says where it looked.
fn font() -> anyhow::Result<()> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let mut places: Vec<String> = std::env::var("SLUICE_PLOT_FONT").into_iter().collect();
        places.extend(FONTS.iter().map(|p| p.to_string()));
        let bytes = places
            .iter()
            .find_map(|p| std::fs::read(p).ok())
            .ok_or_else(|| {
                format!(
                    "no TrueType font found (looked at {}; install fonts-dejavu-core or set SLUICE_PLOT_FONT)",
                    places.join(", ")
                )
            })?;
        // The font lives as long as the process: plotters keeps a 'static reference.
        register_font("sans-serif", FontStyle::Normal, Box::leak(bytes.into_boxed_slice()))
            .map_err(|_| "the font file is not a TrueType font".to_string())
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

/// One line of a chart.
struct Series {
    name: String,
    points: Vec<(f64, f64)>,
    /// Index into [`COLORS`].
    color: usize,
    /// Stroke width in pixels.
    width: u32,
}

/// One chart.
struct Chart {
    name: &'static str,
    title: String,
    x_label: &'static str,
    y_label: &'static str,
    log_x: bool,
    series: Vec<Series>,
}

/// A tick label: the value itself (10 to the tick on a log axis), two significant digits.
fn axis_label(value: f64, log: bool) -> String {
    if !log {
        // A count axis: only whole numbers get a label.
        return if (value - value.round()).abs() < 1e-6 {
            format!("{value:.0}")
        } else {
            String::new()
        };
    }
    let v = 10f64.powf(value);
    let (scaled, unit) = [(1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|(scale, _)| v >= *scale)
        .map_or((v, ""), |(scale, unit)| (v / scale, unit));
    if scaled >= 10.0 {
        format!("{scaled:.0}{unit}")
    } else if scaled >= 0.1 {
        format!("{scaled:.1}{unit}")
    } else {
        format!("{scaled:.2}{unit}")
    }
}

fn render<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, c: &Chart) -> anyhow::Result<()> {
    let fail = |e: &dyn std::fmt::Debug| anyhow!("plot {}: {e:?}", c.name);
    area.fill(&WHITE).map_err(|e| fail(&e))?;
    let tx = |x: f64| if c.log_x { x.log10() } else { x };
    let points: Vec<Vec<(f64, f64)>> = c
        .series
        .iter()
        .map(|s| {
            s.points
                .iter()
                .filter(|(x, y)| *y > 0.0 && (!c.log_x || *x > 0.0))
                .map(|&(x, y)| (tx(x), y.log10()))
                .collect()
        })
        .collect();
    let all = points.iter().flatten();
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    let pad_x = ((x1 - x0) * 0.05).max(0.1);
    let pad_y = ((y1 - y0) * 0.1).max(0.1);
    let mut chart = ChartBuilder::on(area)
        .caption(&c.title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d((x0 - pad_x)..(x1 + pad_x), (y0 - pad_y)..(y1 + pad_y))
        .map_err(|e| fail(&e))?;
    let (log_x, x_label, y_label) = (c.log_x, c.x_label, c.y_label);
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&|v| axis_label(*v, log_x))
        .y_label_formatter(&|v| axis_label(*v, true))
        .draw()
        .map_err(|e| fail(&e))?;
    for (s, pts) in c.series.iter().zip(&points) {
        if pts.is_empty() {
            continue;
        }
        let (r, g, b) = COLORS[s.color % COLORS.len()];
        let color = RGBColor(r, g, b).to_rgba();
        let style = color.stroke_width(s.width);
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), style))
            .map_err(|e| fail(&e))?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| fail(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(|e| fail(&e))?;
    area.present().map_err(|e| fail(&e))?;
    Ok(())
}

/// A line of `color` (an index into [`COLORS`]) through `points`, sorted by x.
fn line(name: String, mut points: Vec<(f64, f64)>, color: usize) -> Series {
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    Series {
        name,
        points,
        color,
        width: 2,
    }
}

fn throughput(rows: &[Row], gbit: bool) -> Chart {
    let value = |r: &Row| {
        if gbit {
            r.gbit_per_sec.unwrap_or(0.0)
        } else {
            r.tuples_per_sec.unwrap_or(0.0)
        }
    };
    let mut series: Vec<Series> = ORDER
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let pts = rows
                .iter()
                .filter(|r| {
                    r.experiment == "throughput"
                        && !r.skipped
                        && r.peer.is_none()
                        && r.transport.as_deref() == Some(*t)
                })
                .map(|r| (r.tuple_size.unwrap_or(0) as f64, value(r)))
                .collect();
            line(t.to_string(), pts, i)
        })
        .collect();
    let mut peers: Vec<&str> = rows
        .iter()
        .filter(|r| r.bench.as_deref() == Some("throughput") && !r.skipped)
        .filter(|r| r.experiment != "fanout")
        .filter_map(|r| r.peer.as_deref())
        .collect();
    peers.sort();
    peers.dedup();
    for (i, p) in peers.into_iter().enumerate() {
        let pts = rows
            .iter()
            .filter(|r| r.peer.as_deref() == Some(p) && r.bench.as_deref() == Some("throughput"))
            .filter(|r| !r.skipped && r.experiment != "fanout")
            .map(|r| (r.tuple_size.unwrap_or(0) as f64, value(r)))
            .collect();
        series.push(line(format!("peer {p}"), pts, ORDER.len() + i));
    }
    Chart {
        name: if gbit { THROUGHPUT_GBIT } else { THROUGHPUT },
        title: format!(
            "Throughput by tuple size ({})",
            if gbit { "Gbit/s" } else { "tuples/s" }
        ),
        x_label: "tuple bytes",
        y_label: if gbit { "Gbit/s" } else { "tuples/s" },
        log_x: true,
        series,
    }
}

/// A figure of a latency summary, named.
type Figure = (&'static str, fn(&LatencySummary) -> f64);
const P50: Figure = ("p50", |l| l.p50);
const P99: Figure = ("p99", |l| l.p99);
const MEAN: Figure = ("mean", |l| l.mean);

/// Two lines of colour `color` for `name` through `rows`, at x as `x` reads it: the first
/// figure in microseconds thick, the second thin.
fn latency_pair(
    name: &str,
    color: usize,
    figures: [Figure; 2],
    rows: &[&Row],
    x: impl Fn(&Row) -> Option<f64>,
) -> Vec<Series> {
    figures
        .into_iter()
        .zip([3, 1])
        .map(|((which, pick), width)| {
            let pts = rows
                .iter()
                .filter_map(|r| Some((x(r)?, pick(&r.latency_ns?) / 1e3)))
                .collect();
            Series {
                width,
                ..line(format!("{name} {which}"), pts, color)
            }
        })
        .collect()
}

fn latency(rows: &[Row]) -> Chart {
    let picked: Vec<&Row> = rows
        .iter()
        .filter(|r| r.experiment == "latency" && !r.skipped && r.peer.is_none())
        .collect();
    let rate = picked
        .iter()
        .filter_map(|r| r.target_rate)
        .max()
        .unwrap_or(0);
    // One colour per transport: p50 thick, p99 thin.
    let mut series = Vec::new();
    for (i, t) in ORDER.iter().enumerate() {
        let of_transport: Vec<&Row> = picked
            .iter()
            .copied()
            .filter(|r| r.transport.as_deref() == Some(*t) && r.target_rate == Some(rate))
            .collect();
        series.extend(latency_pair(t, i, [P50, P99], &of_transport, |r| {
            Some(r.tuple_size? as f64)
        }));
    }
    Chart {
        name: LATENCY,
        title: format!("One-way latency percentiles at {rate} tuples/s (network: RTT/2)"),
        x_label: "tuple bytes",
        y_label: "microseconds",
        log_x: true,
        series,
    }
}

fn fanout(rows: &[Row]) -> Chart {
    let picked: Vec<&Row> = rows
        .iter()
        .filter(|r| r.experiment == "fanout" && !r.skipped)
        .collect();
    let mut sizes: Vec<usize> = picked.iter().filter_map(|r| r.tuple_size).collect();
    sizes.sort();
    sizes.dedup();
    let mut series = Vec::new();
    for t in ORDER {
        for &size in &sizes {
            let pts = picked
                .iter()
                .filter(|r| r.transport.as_deref() == Some(t) && r.tuple_size == Some(size))
                .map(|r| {
                    (
                        r.receivers.unwrap_or(1) as f64,
                        r.gbit_per_sec.unwrap_or(0.0),
                    )
                })
                .collect();
            let color = series.len();
            series.push(line(format!("{t} {size} B"), pts, color));
        }
    }
    Chart {
        name: FANOUT,
        title: "Fan-out: aggregate Gbit/s by receivers".into(),
        x_label: "receivers",
        y_label: "Gbit/s (sum)",
        log_x: false,
        series,
    }
}

fn large(rows: &[Row]) -> Chart {
    let picked: Vec<&Row> = rows
        .iter()
        .filter(|r| {
            r.experiment == "large"
                && !r.skipped
                && (r.transport.as_deref() != Some("shm-osr")
                    || r.ring_bytes == Some(super::matrix::LARGE_RING_BYTES))
        })
        .collect();
    let mut keys: Vec<(String, u64)> = picked
        .iter()
        .map(|r| {
            (
                r.transport.clone().unwrap_or_default(),
                r.target_rate.unwrap_or(0),
            )
        })
        .collect();
    keys.sort();
    keys.dedup();
    let series = keys
        .into_iter()
        .enumerate()
        .map(|(i, (t, rate))| {
            let pts = picked
                .iter()
                .filter(|r| r.transport.as_deref() == Some(&t) && r.target_rate == Some(rate))
                .filter_map(|r| Some((r.tuple_size? as f64, r.latency_ns?.mean / 1e3)))
                .collect();
            line(format!("{t} at {rate}/s"), pts, i)
        })
        .collect();
    Chart {
        name: LARGE,
        title: "Large messages: mean one-way latency".into(),
        x_label: "message bytes",
        y_label: "microseconds",
        log_x: true,
        series,
    }
}

/// The plot of OMDP's end-to-end latency by feed rate.
pub(crate) const OMDP: &str = "omdp";

/// The latency of the topology `app` by input rate: per plan, p99 thick and the mean thin.
fn topology(rows: &[Row], (app, name): (&str, &'static str)) -> Chart {
    by_rate(rows, "topology", app, name, "input tuples/s")
}

/// The latency of `app`'s records of `experiment` by their input rate (`x_label`): per plan,
/// p99 thick and the mean thin.
fn by_rate(
    rows: &[Row],
    experiment: &str,
    app: &str,
    name: &'static str,
    x_label: &'static str,
) -> Chart {
    let picked: Vec<&Row> = rows
        .iter()
        .filter(|r| r.experiment == experiment && !r.skipped && r.app.as_deref() == Some(app))
        .collect();
    let mut plans: Vec<String> = picked.iter().filter_map(|r| r.plan.clone()).collect();
    plans.sort();
    plans.dedup();
    let mut series = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        let of_plan: Vec<&Row> = picked
            .iter()
            .copied()
            .filter(|r| r.plan.as_ref() == Some(plan))
            .collect();
        series.extend(latency_pair(plan, i, [P99, MEAN], &of_plan, |r| {
            Some(r.target_rate? as f64)
        }));
    }
    Chart {
        name,
        title: format!("{app}: end-to-end latency by input rate"),
        x_label,
        y_label: "microseconds",
        log_x: true,
        series,
    }
}

/// The pipelines' speedup by senders and receivers.
fn pipeline(rows: &[Row]) -> Chart {
    let picked: Vec<&Row> = rows
        .iter()
        .filter(|r| r.experiment == "pipeline" && !r.skipped)
        .collect();
    let mut apps: Vec<String> = picked.iter().filter_map(|r| r.app.clone()).collect();
    apps.sort();
    apps.dedup();
    let series = apps
        .into_iter()
        .enumerate()
        .map(|(i, app)| {
            let pts = picked
                .iter()
                .filter(|r| r.app.as_ref() == Some(&app) && r.senders == r.receivers)
                .filter_map(|r| Some((r.senders? as f64, r.speedup?)))
                .collect();
            line(app, pts, i)
        })
        .collect();
    Chart {
        name: PIPELINE,
        title: "Pipelines: speedup over the serial program".into(),
        x_label: "senders = receivers",
        y_label: "speedup",
        log_x: false,
        series,
    }
}

/// Draws every chart that has data into `dir` as `NAME.svg` and `NAME.png`; returns each
/// chart's SVG text and the paths written.
pub(crate) fn draw(dir: &Path, rows: &[Row]) -> anyhow::Result<(Vec<Svg>, Vec<PathBuf>)> {
    font()?;
    let mut charts = vec![
        throughput(rows, false),
        throughput(rows, true),
        latency(rows),
        fanout(rows),
        large(rows),
        pipeline(rows),
    ];
    charts.extend(TOPOLOGY.into_iter().map(|plot| topology(rows, plot)));
    charts.push(by_rate(rows, "omdp", "omdp", OMDP, "feed packets/s"));
    let mut svgs = Vec::new();
    let mut paths = Vec::new();
    for c in charts
        .iter()
        .filter(|c| c.series.iter().any(|s| !s.points.is_empty()))
    {
        let mut svg = String::new();
        {
            let area = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
            render(&area, c)?;
        }
        let svg_path = dir.join(format!("{}.svg", c.name));
        std::fs::write(&svg_path, &svg).with_context(|| format!("write {}", svg_path.display()))?;
        let png_path = dir.join(format!("{}.png", c.name));
        {
            let area = BitMapBackend::new(&png_path, SIZE).into_drawing_area();
            render(&area, c)?;
        }
        paths.push(svg_path);
        paths.push(png_path);
        svgs.push((c.name, svg));
    }
    Ok((svgs, paths))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(axis_label(7.2, true), "16M");
        assert_eq!(axis_label(2.0, true), "100");
        assert_eq!(axis_label(0.0, true), "1.0");
        assert_eq!(axis_label(-1.5, true), "0.03");
        assert_eq!(axis_label(3.0, false), "3");
        assert_eq!(axis_label(2.5, false), "");
    }
}
