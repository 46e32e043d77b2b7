//! A benchmark's result: the median over repeats with every run's figures, the baseline's, the
//! ratio between them and where they were measured; as one line of JSON or as a table.

use std::fmt::Write as _;

use serde::Serialize;

use crate::foundation::args::{LatencyMethod, Transport, TupleEncoding};
use crate::foundation::record::RunFigures;
use crate::foundation::stats::{median, si, LatencySummary};
use crate::foundation::warnings::{self, Warning};

/// The result of one benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    /// `throughput` or `latency`.
    pub bench: &'static str,
    /// `fused` or `threaded`.
    pub transport: Transport,
    /// `facade` or `normal`.
    pub encoding: TupleEncoding,
    /// Bytes per tuple.
    pub tuple_size: usize,
    /// Sending processes into the one receiver (more than 1 only for `shm-osr`).
    pub producers: usize,
    /// Receivers the one sender sent every tuple to (more than 1 for a fan-out); the rates
    /// are their sum.
    pub receivers: usize,
    /// Median over runs of the mean tuples per second of one receiver (a fan-out only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_receiver_tuples_per_sec: Option<f64>,
    /// Bytes of the ring (`shm-osr` and `shm-vega` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ring_bytes: Option<usize>,
    /// The rate the sender was asked for (latency only), tuples per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<u64>,
    /// Median over runs of the tuples per second at the receiver.
    pub tuples_per_sec: f64,
    /// Median over runs of the payload Gbit/s at the receiver.
    pub gbit_per_sec: f64,
    /// How latency was measured (latency only): `one-way-clock` (the receiver subtracted the
    /// send time in the tuple) or `half-round-trip` (`latency_ns` is half of `round_trip_ns`,
    /// through a reflector process).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_method: Option<LatencyMethod>,
    /// Median over runs of each one-way latency figure (latency only; null for throughput).
    pub latency_ns: Option<LatencySummary>,
    /// Median over runs of each round-trip figure (`half-round-trip` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_trip_ns: Option<LatencySummary>,
    /// Median over runs of the share of tuples sent that were lost, from 0 to 1 (lossy
    /// transports only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    /// Seconds measured per run.
    pub duration_s: f64,
    /// Seconds of warm-up discarded per run.
    pub warmup_s: f64,
    /// Whether Sluice's threads were pinned to cores.
    pub pinned: bool,
    /// The idle strategy asked for with `--idle`, or `default` (chosen from the cores).
    pub idle: String,
    /// Every Sluice run.
    pub runs: Vec<RunFigures>,
    /// The baseline, measured in the same invocation.
    pub baseline: BaselineResult,
    /// Throughput only: Sluice's tuples per second divided by the baseline's (higher is better).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_baseline: Option<f64>,
    /// Latency only: Sluice's p50 divided by the baseline's (lower is better).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_ratio_to_baseline: Option<f64>,
    /// Latency only: Sluice's p99 divided by the baseline's (lower is better).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_ratio_to_baseline: Option<f64>,
    /// Shared-memory throughput only: Sluice's Gbit/s divided by the median memcpy through a
    /// region the ring's size of the baseline runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_ring_memcpy: Option<f64>,
    /// Shared-memory latency only: Sluice's p50 divided by the median two-line hand-off of the
    /// baseline runs, the least any single-producer queue can take between the two cores.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_ratio_to_handoff: Option<f64>,
    /// Figures that cannot be true as printed (a floor beaten, a rate not reached, repeats
    /// that disagree), each with the rule it broke; empty when none.
    pub warnings: Vec<Warning>,
    /// The commit built (`git rev-parse --short HEAD`), or `unknown`.
    pub commit: &'static str,
    /// The CPU model, or `unknown`.
    pub cpu: String,
    /// Cores available to the process.
    pub cores: usize,
}

/// The baseline's side of a result.
#[derive(Debug, Clone, Serialize)]
pub struct BaselineResult {
    /// `direct-call` or `crossbeam-channel`.
    pub name: &'static str,
    /// What exactly was measured.
    pub description: String,
    /// Whether no run of the baseline could be measured; `reason` says why.
    pub skipped: bool,
    /// Why a baseline run failed (the first failure), when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Median tuples per second at the receiver (absent when skipped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tuples_per_sec: Option<f64>,
    /// Median payload Gbit/s at the receiver (absent when skipped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gbit_per_sec: Option<f64>,
    /// Median one-way latency figures (latency only; null for throughput).
    pub latency_ns: Option<LatencySummary>,
    /// Median round-trip figures (`half-round-trip` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_trip_ns: Option<LatencySummary>,
    /// Median share of tuples lost (lossy baselines only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    /// Every baseline run.
    pub runs: Vec<RunFigures>,
}

impl BenchResult {
    /// What in this result cannot be true as printed: Sluice below the hardware's floor or
    /// the two-line hand-off (shared memory's latency), the hand-off below the one-line
    /// ping-pong it is made of, a latency run short of its rate, either side's repeats
    /// disagreeing.
    pub(crate) fn doubts(&self) -> Vec<Warning> {
        let latency = self.latency_ns.map(|l| l.p50);
        let base_runs = &self.baseline.runs;
        let median_of = |figure: fn(&RunFigures) -> Option<f64>| {
            let values: Vec<f64> = base_runs.iter().filter_map(figure).collect();
            (!values.is_empty()).then(|| median(&values))
        };
        let (cacheline, handoff) = (median_of(|r| r.cacheline_ns), median_of(|r| r.handoff_ns));
        let hardware = (self.baseline.name == "hardware")
            .then_some(self.baseline.latency_ns.map(|l| l.p50))
            .flatten();
        let floors = [
            latency.zip(hardware).and_then(|(ours, floor)| {
                warnings::below_floor(
                    ("sluice's p50", ours, "ns"),
                    ("the hardware baseline's p50", floor, "ns"),
                    "nothing between the same two cores can beat",
                )
            }),
            latency.zip(handoff).and_then(|(ours, floor)| {
                warnings::below_floor(
                    ("sluice's p50", ours, "ns"),
                    ("the two-line hand-off", floor, "ns"),
                    "is the least any single-producer queue takes between the two cores",
                )
            }),
            handoff.zip(cacheline).and_then(|(handoff, floor)| {
                warnings::below_floor(
                    ("the two-line hand-off", handoff, "ns"),
                    ("the one-line ping-pong", floor, "ns"),
                    "moves one line where the hand-off moves two",
                )
            }),
        ];
        let rate = self.target_rate.and_then(|asked| {
            warnings::rate_not_reached("the sender", self.tuples_per_sec, asked as f64)
        });
        let spread = |who: &str, runs: &[RunFigures]| match latency {
            Some(_) => {
                let p50s: Vec<f64> = runs
                    .iter()
                    .filter_map(|r| r.latency_ns.map(|l| l.p50))
                    .collect();
                warnings::wide_spread(&format!("{who}'s p50"), &p50s, "ns")
            }
            None => {
                let rates: Vec<f64> = runs.iter().map(|r| r.tuples_per_sec).collect();
                warnings::wide_spread(&format!("{who}'s throughput"), &rates, "tuples/s")
            }
        };
        let spreads = [
            spread("sluice", &self.runs),
            spread("the baseline", base_runs),
        ];
        floors
            .into_iter()
            .chain([rate])
            .chain(spreads)
            .flatten()
            .collect()
    }
}

/// `result` as one line of JSON.
pub fn render_json(result: &BenchResult) -> String {
    // Serializing plain structs of numbers and strings cannot fail.
    serde_json::to_string(result).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// `N run(s) of D s after W s warm-up; commit C, CPU, K core(s)`: how long each of `runs` runs
/// was measured (`duration_s`) after its warm-up (`warmup_s`), and where.
pub(crate) fn runs_line(
    runs: usize,
    (duration_s, warmup_s): (f64, f64),
    commit: &str,
    cpu: &str,
    cores: usize,
) -> String {
    format!(
        "{runs} run(s) of {duration_s} s after {warmup_s} s warm-up; commit {commit}, {cpu}, {cores} core(s)"
    )
}

/// The figures of one line of the table.
struct Line<'a> {
    tps: f64,
    gbit: f64,
    latency: Option<&'a LatencySummary>,
    loss: Option<f64>,
}

fn row(out: &mut String, who: &str, run: &str, line: Line<'_>) {
    let Line {
        tps,
        gbit,
        latency,
        loss,
    } = line;
    let _ = write!(out, "{who:<10} {run:>6} {:>12} {gbit:>9.3}", si(tps));
    if let Some(loss) = loss {
        let _ = write!(out, " {:>7.2}", loss * 100.0);
    }
    if let Some(l) = latency {
        let _ = write!(
            out,
            " {:>9.0} {:>9.0} {:>9.0} {:>9.1}",
            l.p50, l.p99, l.p999, l.mean
        );
    }
    out.push('\n');
}

/// `result` as a readable table.
pub fn render_table(result: &BenchResult) -> String {
    let mut out = String::new();
    let encoding = match result.encoding {
        TupleEncoding::Facade => "facade",
        TupleEncoding::Normal => "normal",
    };
    let transport = result.transport.name();
    let _ = write!(
        out,
        "sluice bench {}: {transport} transport, {}-byte {encoding} tuples",
        result.bench, result.tuple_size
    );
    if result.producers > 1 {
        let _ = write!(out, " from {} producers", result.producers);
    }
    if result.receivers > 1 {
        let _ = write!(out, " to {} receivers (rates summed)", result.receivers);
    }
    if let Some(rate) = result.target_rate {
        let _ = write!(out, " at {rate} tuples/s");
    }
    match result.latency_method {
        Some(LatencyMethod::HalfRoundTrip) => out.push_str(
            "\nlatency: one way = half the round trip through a reflector process on the other core",
        ),
        Some(LatencyMethod::PingPong) => out.push_str(
            "\nlatency: one way = half the round trip through a reflector process on the other core, one tuple in flight (ping-pong)",
        ),
        Some(LatencyMethod::OneWayClock) => {
            out.push_str("\nlatency: one way, from the send time in the tuple (one clock)")
        }
        None => {}
    }
    let _ = writeln!(
        out,
        "\n{}{}",
        runs_line(
            result.runs.len(),
            (result.duration_s, result.warmup_s),
            result.commit,
            &result.cpu,
            result.cores
        ),
        if result.pinned {
            ", threads pinned"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "baseline: {} ({})\n",
        result.baseline.name, result.baseline.description
    );
    let _ = write!(
        out,
        "{:<10} {:>6} {:>12} {:>9}",
        "", "run", "tuples/s", "Gbit/s"
    );
    if result.loss.is_some() {
        let _ = write!(out, " {:>7}", "lost %");
    }
    if result.latency_ns.is_some() {
        let _ = write!(
            out,
            " {:>9} {:>9} {:>9} {:>9}",
            "p50 ns", "p99 ns", "p99.9 ns", "mean ns"
        );
    }
    out.push('\n');
    for (who, runs, tps, gbit, latency, loss) in [
        (
            "sluice",
            &result.runs,
            result.tuples_per_sec,
            result.gbit_per_sec,
            result.latency_ns.as_ref(),
            result.loss,
        ),
        (
            "baseline",
            &result.baseline.runs,
            result.baseline.tuples_per_sec.unwrap_or(0.0),
            result.baseline.gbit_per_sec.unwrap_or(0.0),
            result.baseline.latency_ns.as_ref(),
            result.baseline.loss,
        ),
    ] {
        // A lossy transport's baseline is lossy too: both sides have the column or neither.
        let column = |loss: Option<f64>| result.loss.map(|_| loss.unwrap_or(0.0));
        for (i, run) in runs.iter().enumerate() {
            let n = (i + 1).to_string();
            let line = Line {
                tps: run.tuples_per_sec,
                gbit: run.gbit_per_sec,
                latency: run.latency_ns.as_ref(),
                loss: column(run.loss.map(|l| l.fraction())),
            };
            row(&mut out, who, &n, line);
        }
        let line = Line {
            tps,
            gbit,
            latency,
            loss: column(loss),
        };
        row(&mut out, who, "median", line);
    }
    out.push('\n');
    if let Some(reason) = &result.baseline.reason {
        let _ = writeln!(out, "baseline not measured: {reason}");
    }
    if let Some(r) = result.ratio_to_baseline {
        let _ = writeln!(out, "sluice / baseline throughput: {r:.3}");
    }
    if let Some(r) = result.p50_ratio_to_baseline {
        let _ = writeln!(out, "sluice / baseline latency: p50 {r:.3}");
    }
    if let Some(r) = result.p99_ratio_to_baseline {
        let _ = writeln!(out, "sluice / baseline latency: p99 {r:.3}");
    }
    if let Some(r) = result.ratio_to_ring_memcpy {
        let _ = writeln!(out, "sluice / memcpy through the ring's footprint: {r:.3}");
    }
    if let Some(r) = result.p50_ratio_to_handoff {
        let _ = writeln!(out, "sluice / two-line hand-off latency: p50 {r:.3}");
    }
    for (what, figure, unit) in [
        (
            "cache line one-way, core 0 -> 1",
            (|run: &RunFigures| run.cacheline_ns) as fn(&RunFigures) -> Option<f64>,
            "ns",
        ),
        (
            "two lines, one writer each (a queue's hand-off), one-way, core 0 -> 1",
            |run: &RunFigures| run.handoff_ns,
            "ns",
        ),
        (
            "one line, clock-stamped one-way (the least a stamped latency can show), core 0 -> 1",
            |run: &RunFigures| run.stamped_ns,
            "ns",
        ),
        (
            "memcpy, one core, of the tuple size through a region the ring's size",
            |run: &RunFigures| run.ring_memcpy_gbit,
            "Gbit/s",
        ),
    ] {
        let runs: Vec<String> = result
            .baseline
            .runs
            .iter()
            .filter_map(figure)
            .map(|x| format!("{x:.0}"))
            .collect();
        if !runs.is_empty() {
            let _ = writeln!(
                out,
                "{what}, at each baseline run: {} {unit}",
                runs.join(", ")
            );
        }
    }
    for (who, rtt) in [
        ("sluice", result.round_trip_ns),
        ("baseline", result.baseline.round_trip_ns),
    ] {
        if let Some(l) = rtt {
            let _ = writeln!(
                out,
                "{who} round trip ns: p50 {:.0}, p99 {:.0}, p99.9 {:.0}, max {:.0}",
                l.p50, l.p99, l.p999, l.max
            );
        }
    }
    out.push_str(&warnings::lines(&result.warnings));
    out
}
