//! One application benchmark: the options of `sluice bench app`, and the runs. Each of the
//! `--repeat` rounds runs the application (a warm-up run of `--warmup` seconds, discarded, then
//! a run of `--duration`), then each yardstick (`--warmup` seconds discarded, then `--duration`
//! measured), one after the other on this machine's cores.
//!
//! The application is built, planned and run as `sluice run` does it: `sluice_apps::build`,
//! `sluice_plan::plan`, `sluice_runtime::run`. Its throughput is the counted operator's
//! tuples in over the job's elapsed time (`JobReport::tuples_in`, `JobReport::elapsed`,
//! start-up and drain included); its latency, with `--rate`, the sink's end-to-end percentiles
//! (`JobReport::latency`). A yardstick runs on the calling thread, pinned to the core the plan
//! pins the counted operator's thread to, and unpinned when the plan pins none (the fused plan
//! never pins its one thread). It reads the clock once every [`STEPS_PER_CLOCK`] inputs.
//!
//! Under a plan of several processes the runtime re-executes this same command once per PE; in
//! such a process [`AppSettings::run_pe`] runs that PE and exits, measuring nothing.

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use sluice_apps::{AppConfig, Settings};
use sluice_plan::{PhysicalPlan, PlanOptions};
use sluice_runtime::{JobReport, RunOptions};

use crate::apps::entry::{Benchable, Yardstick, YardstickSpec};
use crate::apps::registry;
use crate::apps::result::{AppResult, AppRun, YardstickResult, YardstickRun};
use crate::foundation::args::RunArgs;
use crate::foundation::machine;
use crate::foundation::stats::{median, ratio, LatencySummary};
use crate::transports::endpoints::pin;

/// Options of `sluice bench app`.
#[derive(Debug, Clone, Args)]
pub struct AppBenchArgs {
    /// The application (wordcount, vwap).
    pub app: String,
    /// `fused` (one thread), `auto` (the plan for this machine at `--rate`), `threaded` (a
    /// thread per operator instance), `processes` (a process per operator instance, joined by
    /// shared memory), a plan the application ships (see `sluice apps`), or a plan file (TOML),
    /// as for `sluice run`.
    #[arg(long, default_value = "fused")]
    pub plan: String,
    /// Tuples per second from the application's source (sentences for wordcount); 0 or absent
    /// is as fast as possible. With a rate the result gives the end-to-end latency.
    #[arg(long, value_name = "N")]
    pub rate: Option<u64>,
    /// How long and how often it runs, and how it prints.
    #[command(flatten)]
    pub run: RunArgs,
    /// Application setting, `key=value`; repeatable (see `sluice apps`). The yardsticks
    /// generate the input the settings describe.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
    /// Run the application only, not its yardsticks (for a sweep of rates, as `sluice bench
    /// topology` runs).
    #[arg(long)]
    pub no_yardsticks: bool,
}

/// How many yardstick inputs go between two readings of the clock.
pub(crate) const STEPS_PER_CLOCK: usize = 64;

/// The validated settings of one application benchmark.
pub(crate) struct AppSettings {
    /// The application and its yardsticks.
    pub(crate) bench: &'static Benchable,
    /// The plan as named on the command line.
    pub(crate) plan: String,
    /// The application, built once: every run makes its operators afresh from the graph.
    app: sluice_apps::App,
    /// Its physical plan.
    physical: PhysicalPlan,
    /// Source tuples per second; `None` is as fast as possible.
    pub(crate) rate: Option<u64>,
    /// Measured in each run.
    pub(crate) duration: Duration,
    /// Before each measured run.
    pub(crate) warmup: Duration,
    /// Rounds.
    pub(crate) repeat: usize,
    /// Print JSON.
    pub(crate) json: bool,
    /// The application's `--set` values, which the yardsticks read too.
    settings: Settings,
    /// The core the plan pins the counted operator's thread to, where the yardsticks run.
    pub(crate) core: Option<usize>,
    /// Whether the yardsticks run.
    yardsticks: bool,
}

impl AppSettings {
    /// Checks `args` and builds and plans the application: it is benchable, its settings and
    /// the plan are valid, the numbers are in range.
    pub(crate) fn from_args(args: &AppBenchArgs) -> anyhow::Result<Self> {
        let bench = registry::find(&args.app)?;
        let (duration, warmup, repeat) = args.run.checked()?;
        let rate = args.rate.filter(|&r| r > 0);
        let settings = Settings::parse(args.settings.iter().map(String::as_str))?;
        let config = AppConfig {
            rate,
            duration: Some(duration),
            settings: settings.clone(),
            ..AppConfig::default()
        };
        let app = sluice_apps::build(bench.name, &config)?;
        let request = sluice_apps::plan_request(bench.name, &args.plan)?;
        // `auto` plans for the rate asked, as `sluice run` does.
        let options = PlanOptions {
            source_rate: rate,
            ..PlanOptions::default()
        };
        let physical = sluice_plan::plan(&app.graph, &request, &options)?;
        let core = app
            .graph
            .find(bench.counted)
            .and_then(|op| physical.instances.iter().find(|i| i.operator == op.id.0))
            .and_then(|instance| physical.threads().find(|t| t.id == instance.thread))
            .and_then(|thread| thread.core);
        Ok(Self {
            bench,
            plan: args.plan.clone(),
            app,
            physical,
            rate,
            duration,
            warmup,
            repeat,
            json: args.run.json,
            settings,
            core,
            yardsticks: !args.no_yardsticks,
        })
    }

    /// Runs the application for `duration`, stopping and draining it then.
    fn job(&self, duration: Duration) -> anyhow::Result<JobReport> {
        let options = RunOptions {
            duration: Some(duration),
            ..RunOptions::default()
        };
        Ok(sluice_runtime::run(
            &self.app.graph,
            &self.physical,
            &options,
        )?)
    }

    /// In a process the runtime started as one PE of the application's job: runs that PE and
    /// exits (`sluice_runtime::run` does not return there).
    pub(crate) fn run_pe(&self) -> anyhow::Result<()> {
        self.job(self.duration).map(drop)
    }

    /// One run of the application: a discarded warm-up run, then the measured one.
    pub(crate) fn run_app(&self) -> anyhow::Result<AppRun> {
        if !self.warmup.is_zero() {
            self.job(self.warmup).context("the warm-up run")?;
        }
        let report = self.job(self.duration)?;
        let units = report.tuples_in(self.bench.counted);
        let elapsed_s = report.elapsed.as_secs_f64();
        Ok(AppRun {
            units,
            elapsed_s,
            per_sec: units as f64 / elapsed_s,
            input_per_sec: self.bench.input_rate.map(|rate| rate(&report)),
            latency_ns: self
                .rate
                .and(report.latency())
                .as_ref()
                .and_then(LatencySummary::from_histogram),
        })
    }

    /// One run of `spec`: a fresh yardstick stepped for the warm-up, then measured for the
    /// duration, on the core of the counted operator's thread.
    pub(crate) fn run_yardstick(&self, spec: &YardstickSpec) -> anyhow::Result<YardstickRun> {
        let _pinned = self.core.map(pin);
        let mut yardstick = (spec.make)(&self.settings)?;
        drive(yardstick.as_mut(), self.warmup);
        let (units, elapsed) = drive(yardstick.as_mut(), self.duration);
        let elapsed_s = elapsed.as_secs_f64();
        Ok(YardstickRun {
            units,
            elapsed_s,
            per_sec: units as f64 / elapsed_s,
        })
    }
}

/// Runs the benchmark `s` describes: `repeat` rounds of the application then each yardstick
/// (unless `--no-yardsticks`).
pub(crate) fn measure(s: &AppSettings) -> anyhow::Result<AppResult> {
    let mut runs = Vec::with_capacity(s.repeat);
    let mut yardsticks = vec![Vec::with_capacity(s.repeat); s.bench.yardsticks.len()];
    for i in 1..=s.repeat {
        let run = s.run_app();
        runs.push(run.with_context(|| format!("{} run {i}", s.bench.name))?);
        if !s.yardsticks {
            continue;
        }
        for (spec, runs) in s.bench.yardsticks.iter().zip(&mut yardsticks) {
            let run = s.run_yardstick(spec);
            runs.push(run.with_context(|| format!("{} run {i}", spec.name))?);
        }
    }
    Ok(summarise(s, runs, yardsticks))
}

/// The median `per_sec` of `runs`.
fn median_rate<R>(runs: &[R], per_sec: fn(&R) -> f64) -> f64 {
    median(&runs.iter().map(per_sec).collect::<Vec<_>>())
}

/// The result of the application's `runs` and each yardstick's (in `s`'s order).
fn summarise(s: &AppSettings, runs: Vec<AppRun>, yardsticks: Vec<Vec<YardstickRun>>) -> AppResult {
    let per_sec = median_rate(&runs, |r| r.per_sec);
    let latencies: Vec<LatencySummary> = runs.iter().filter_map(|r| r.latency_ns).collect();
    let yardsticks = s
        .bench
        .yardsticks
        .iter()
        .zip(yardsticks)
        .filter(|(_, runs)| !runs.is_empty())
        .map(|(spec, runs)| {
            let theirs = median_rate(&runs, |r| r.per_sec);
            YardstickResult {
                name: spec.name,
                description: spec.about,
                tunes: spec.tunes,
                per_sec: theirs,
                ratio: ratio(per_sec, theirs),
                runs,
            }
        })
        .collect();
    let mut result = AppResult {
        bench: "app",
        app: s.bench.name,
        plan: s.plan.clone(),
        unit: s.bench.unit,
        counted_operator: s.bench.counted,
        input: s.bench.input,
        target_rate: s.rate,
        per_sec,
        input_per_sec: s
            .bench
            .input_rate
            .map(|_| median_rate(&runs, |r| r.input_per_sec.unwrap_or(0.0))),
        latency_ns: LatencySummary::median_of(&latencies),
        runs,
        yardsticks,
        duration_s: s.duration.as_secs_f64(),
        warmup_s: s.warmup.as_secs_f64(),
        yardstick_core: s.core,
        warnings: Vec::new(),
        commit: machine::commit(),
        cpu: machine::cpu(),
        cores: machine::cores(),
    };
    result.warnings = result.doubts();
    result
}

/// Steps `yardstick` until `duration` has passed (at least once); returns the units it made
/// and the time it took.
fn drive(yardstick: &mut dyn Yardstick, duration: Duration) -> (u64, Duration) {
    let started = Instant::now();
    let mut units = 0;
    loop {
        units += yardstick.steps(STEPS_PER_CLOCK);
        let elapsed = started.elapsed();
        if elapsed >= duration {
            return (units, elapsed);
        }
    }
}
