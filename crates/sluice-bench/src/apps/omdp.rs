//! `sluice bench omdp --sweep 1,5,10,25,50,100`: OMDP's latency against the feed rate under
//! each plan, the paper's Figure 8 (Vega against Fused over shared memory), and the highest
//! rate multiple each plan sustains.
//!
//! Every point is a `sluice run omdp --json` of its own, a child process: the run starts its
//! own feed sender processes, and `--plan processes` re-executes the command that runs it once
//! per PE. With `--repeat N` a point runs N times and the run with the median end-to-end mean
//! is kept. A multiple is sustained when the feed reached it and at most 0.01% of messages
//! were missed (the paper's rule).
//!
//! As the paper's feed senders replay prerecorded OPRA data, the sweep first records the feed
//! the runs' settings describe (`sluice_feed::record_generated`, into a temporary file, at most
//! [`MAX_RECORDED_PACKETS`] packets) and every run replays it, so that the senders spend their
//! core on sending rather than on generating (about 0.2 us a message). A run at a multiple
//! whose duration needs more packets than the recording holds ends its feed early; its rate is
//! measured over the packets' arrivals. `--generate` makes the senders generate as they send,
//! and `--set replay=FILE` replays a recording of your own. The feed goes over shared memory
//! (`--set feed=shm`) unless a `--set feed=` says otherwise: the kernel's loopback UDP path
//! costs the sender about 3.7 us a packet, so one sender tops out near 10x on two cores.

use std::io::Write;
use std::process::Command;

use anyhow::{bail, Context};
use clap::Args;
use serde_json::Value;

/// Arguments of `sluice bench omdp`.
#[derive(Debug, Clone, Args)]
pub struct OmdpBenchArgs {
    /// Rate multiples of the February 2008 OPRA rate (24,000 packets/s) to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,5,10,25,50,100")]
    pub sweep: Vec<f64>,
    /// The plans to compare.
    #[arg(long, value_delimiter = ',', default_value = "fused,processes")]
    pub plans: Vec<String>,
    /// Seconds each point runs.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Runs per point; the median (by end-to-end mean) is kept.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// An OMDP setting, `key=value`, for every run (see `sluice apps`).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
    /// Print one JSON object per point instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The feed senders generate the feed as they send, instead of replaying a recording made
    /// before the sweep.
    #[arg(long)]
    pub generate: bool,
}

/// The most packets the sweep records (about 100 bytes each).
pub const MAX_RECORDED_PACKETS: u64 = 4_000_000;

/// Records the feed `settings` describe, enough for `duration` seconds at `multiple`, into a
/// temporary directory; returns the directory (removed when dropped) and the setting that
/// replays it.
fn record_feed(
    settings: &[String],
    multiple: f64,
    duration: f64,
) -> anyhow::Result<(tempfile::TempDir, String)> {
    let config = sluice_apps::AppConfig {
        settings: sluice_apps::Settings::parse(settings.iter().map(String::as_str))?,
        ..sluice_apps::AppConfig::default()
    };
    let omdp = sluice_apps::omdp::OmdpConfig::from_app(&config)?;
    let packets = (multiple * duration * sluice_feed::OPRA_FEB_2008_PACKETS_PER_SEC as f64)
        .ceil()
        .clamp(1.0, MAX_RECORDED_PACKETS as f64) as u64;
    let dir = tempfile::tempdir().context("make a directory for the recorded feed")?;
    let path = dir.path().join("feed.rec");
    sluice_feed::record_generated(&omdp.feed, &path, packets, multiple)?;
    Ok((dir, format!("replay={}", path.display())))
}

/// One measured point: `sluice run omdp --json`'s object.
#[derive(Debug, Clone)]
pub(crate) struct Point {
    pub(crate) plan: String,
    pub(crate) multiple: f64,
    pub(crate) result: Value,
}

impl Point {
    fn number(&self, path: &[&str]) -> f64 {
        path.iter()
            .try_fold(&self.result, |v, key| v.get(key))
            .and_then(Value::as_f64)
            .unwrap_or(f64::NAN)
    }

    /// The average end-to-end latency in microseconds.
    pub(crate) fn end_to_end_mean(&self) -> f64 {
        self.number(&["latency_us", "end_to_end", "mean"])
    }

    /// Whether the plan kept up at this rate.
    pub(crate) fn sustained(&self) -> bool {
        self.result.get("sustained").and_then(Value::as_bool) == Some(true)
    }
}

/// The record of `point` as the benchmark suite keeps it: the run's object with the suite's
/// common fields added (`experiment`, `app`, the asked and reached packet rates as
/// `target_rate` and `input_per_sec`, the end-to-end latency as `latency_ns`), so that the
/// suite's tables and plots of latency against rate read it as they read the topologies'.
pub(crate) fn record(point: &Point) -> Value {
    let mut record = point.result.clone();
    let e2e = |stat: &str| point.number(&["latency_us", "end_to_end", stat]) * 1e3;
    record["experiment"] = "omdp".into();
    record["bench"] = "omdp".into();
    record["app"] = "omdp".into();
    record["plan"] = point.plan.clone().into();
    record["target_rate"] = (point.number(&["asked_packets_per_sec"]).round() as u64).into();
    record["input_per_sec"] = point.number(&["rate_packets_per_sec"]).into();
    record["latency_ns"] = serde_json::json!({
        "mean": e2e("mean"),
        "p50": e2e("p50"),
        "p99": e2e("p99"),
        "p999": e2e("p999"),
        "max": e2e("max"),
        "samples": point.number(&["samples_used"]) as u64,
    });
    record
}

/// Runs one point `repeat` times and keeps the median run.
pub(crate) fn measure_point(
    args: &OmdpBenchArgs,
    plan: &str,
    multiple: f64,
) -> anyhow::Result<Point> {
    let mut runs = Vec::with_capacity(args.repeat.max(1));
    for _ in 0..args.repeat.max(1) {
        runs.push(Point {
            plan: plan.to_string(),
            multiple,
            result: run_point(plan, multiple, args.duration, &args.settings)?,
        });
    }
    runs.sort_by(|a, b| a.end_to_end_mean().total_cmp(&b.end_to_end_mean()));
    Ok(runs.swap_remove(runs.len() / 2))
}

/// One `sluice run omdp --json` under `plan` at `multiple` for `duration` seconds with the
/// OMDP `settings`: its JSON object.
pub(crate) fn run_point(
    plan: &str,
    multiple: f64,
    duration: f64,
    settings: &[String],
) -> anyhow::Result<Value> {
    let exe = std::env::current_exe().context("find the sluice binary")?;
    let mut command = Command::new(exe);
    command.args(["run", "omdp", "--json", "--plan", plan]);
    command.args(["--rate-multiple", &multiple.to_string()]);
    command.args(["--duration", &duration.to_string()]);
    for setting in settings {
        command.args(["--set", setting]);
    }
    let output = command.output().context("start sluice run omdp")?;
    if !output.status.success() {
        bail!(
            "sluice run omdp --plan {plan} --rate-multiple {multiple} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).with_context(|| format!("read sluice run omdp's JSON: {line}"))
}

/// The highest multiple `plan` sustained among `points`, if any.
pub(crate) fn highest_sustained(points: &[Point], plan: &str) -> Option<f64> {
    points
        .iter()
        .filter(|p| p.plan == plan && p.sustained())
        .map(|p| p.multiple)
        .max_by(f64::total_cmp)
}

/// The table of a sweep.
pub(crate) fn table(points: &[Point], plans: &[String]) -> String {
    let mut text = format!(
        "{:<14} {:>6} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8}  {}\n",
        "plan",
        "x OPRA",
        "pkts/s",
        "received",
        "missed %",
        "FH",
        "To DE",
        "DE",
        "To MC",
        "e2e mean",
        "e2e p99",
        "sustained"
    );
    for p in points {
        let hop = |h: &str| p.number(&["latency_us", h, "mean"]);
        text.push_str(&format!(
            "{:<14} {:>6} {:>9.0} {:>9.0} {:>9.4} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>8.2} {:>8.2}  {}\n",
            p.plan,
            p.multiple,
            p.number(&["asked_packets_per_sec"]),
            p.number(&["rate_packets_per_sec"]),
            100.0 * p.number(&["missed_fraction"]),
            hop("fh"),
            hop("to_de"),
            hop("de"),
            hop("to_mc"),
            p.end_to_end_mean(),
            p.number(&["latency_us", "end_to_end", "p99"]),
            if p.sustained() { "yes" } else { "no" }
        ));
    }
    text.push_str("latency in microseconds (means, and the end-to-end p99)\n");
    for plan in plans {
        match highest_sustained(points, plan) {
            Some(m) => text.push_str(&format!("highest sustained multiple, {plan}: {m}x\n")),
            None => text.push_str(&format!(
                "highest sustained multiple, {plan}: none measured\n"
            )),
        }
    }
    text
}

/// Runs `sluice bench omdp`.
pub(crate) fn main(args: &OmdpBenchArgs) -> anyhow::Result<()> {
    if args.sweep.iter().any(|m| m.is_nan() || *m <= 0.0) {
        bail!("--sweep: every rate multiple must be above 0");
    }
    let mut args = args.clone();
    if !args.settings.iter().any(|s| s.starts_with("feed=")) {
        args.settings.push("feed=shm".into());
    }
    let replaying = args.settings.iter().any(|s| s.starts_with("replay="));
    let _recording = if args.generate || replaying {
        None
    } else {
        let most = args.sweep.iter().copied().fold(0.0, f64::max);
        let (dir, replay) = record_feed(&args.settings, most, args.duration)?;
        args.settings.push(replay);
        Some(dir)
    };
    let args = &args;
    let mut points = Vec::new();
    let mut out = std::io::stdout().lock();
    for plan in &args.plans {
        for &multiple in &args.sweep {
            let point = measure_point(args, plan, multiple)?;
            if args.json {
                writeln!(out, "{}", point.result)?;
            }
            points.push(point);
        }
    }
    if !args.json {
        write!(out, "{}", table(&points, &args.plans))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn point(plan: &str, multiple: f64, e2e: f64, sustained: bool) -> Point {
        Point {
            plan: plan.into(),
            multiple,
            result: json!({
                "sustained": sustained,
                "latency_us": {"end_to_end": {"mean": e2e, "p99": e2e * 2.0}},
            }),
        }
    }

    #[test]
    fn the_highest_sustained_multiple_is_per_plan() {
        let points = [
            point("fused", 1.0, 3.0, true),
            point("fused", 50.0, 5.0, true),
            point("fused", 100.0, 50.0, false),
            point("processes", 1.0, 9.0, false),
        ];
        assert_eq!(highest_sustained(&points, "fused"), Some(50.0));
        assert_eq!(highest_sustained(&points, "processes"), None);
        let plans = ["fused".to_string(), "processes".to_string()];
        let text = table(&points, &plans);
        assert!(
            text.contains("highest sustained multiple, fused: 50x"),
            "{text}"
        );
        assert!(text.contains("processes: none measured"), "{text}");
    }
}
