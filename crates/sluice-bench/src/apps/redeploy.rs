//! `sluice bench redeploy`: the pause a redeploy of on-line placement causes (`sluice run APP
//! --hosts FILE --online-placement`), where the TurboStream paper's shutdown-and-restart took
//! 15-20 s, beside a cold start of the same plan measured in the same run.
//!
//! For each application (SOL, WordCount, the Throughput Test by default), on two hosts of this
//! machine (127.0.0.1 and 127.0.0.2, two slots each; no root needed), the application is
//! planned a process per instance dealt over the hosts in turn (`--plan processes`, where an
//! on-line job starts) and, as the redeploy's target, on the scheduler's placement of its
//! declared traffic ([`Scheduler::Consolidated`] as a plan file, [`plan_file`], which is how
//! the monitor of `--online-placement` writes the placement it moves to). Both plans are made
//! before the job starts. Each repetition:
//!
//! 1. starts the job suspendable ([`RunOptions::suspendable`]) on the first plan, each PE a
//!    process re-running this program for one application (`pe_args`), the source at
//!    `--rate`, and lets it run `--run-for` seconds;
//! 2. redeploys it: suspends it ([`StopHandle::suspend`]) and waits for its report, whose
//!    state ([`JobReport::state`]) it then holds (the *drain*), and starts the target plan
//!    from that state ([`resume_with`], the *restart*). The *pause* is from the suspension to
//!    `resume_with` returning, when every PE of the new plan is ready and the sources go on
//!    (what `--online-placement` logs as "the sources paused");
//! 3. lets the resumed job run `--run-for` seconds, stops it and checks the two runs' merged
//!    report ([`JobReport::absorb`]): for SOL and the Throughput Test, every tuple the spout
//!    sent reached the terminal bolt once, intact and in time to be checked (the integrity
//!    check, [`storm::Integrity`]); for WordCount, the counts it wrote equal a direct count
//!    of the sentences its source generated, which holds only if no sentence was lost or
//!    repeated and every word's running count moved with the word;
//! 4. measures the baseline: a cold start of the same target plan without state
//!    ([`start_with`], until it returns), what a restart that carries no state costs, and
//!    stops it.
//!
//! A repetition whose check fails ends the benchmark with an error naming it. `--warmup`
//! repetitions (1 by default) go first and are discarded. The result of an application: the
//! pause's median, p90 (nearest rank: with five repetitions, the largest) and max, the medians
//! of the drain, the restart and the cold start, the median of the repetitions' ratios of
//! pause to cold start, and the state's size ([`JobState::bytes`]: every operator's encoded
//! keyed state and the sources' positions).
//!
//! Every PE runs on this machine, so the cost of starting a process and of the loopback
//! network is this machine's; a real cluster adds its network's round trips to the start-up's
//! few steps.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;
use sluice_apps::{storm, AppConfig, Settings};
use sluice_plan::consolidate::PlacementQuality;
use sluice_plan::traffic_placement::{plan_file, task_graph, Scheduler};
use sluice_plan::{HostsFile, PhysicalPlan, PlanOptions, PlanRequest};
use sluice_runtime::{resume_with, start_with, JobReport, JobState, RunOptions, StopHandle};

use super::jobs::{hosts_file, print, serve_pe};
use super::storm::integrity;
use super::wordcount::direct_counts;
use crate::foundation::args::{checked_repeat, seconds};
use crate::foundation::machine;
use crate::foundation::stats::{median, nearest_rank};

/// Arguments of `sluice bench redeploy`.
#[derive(Debug, Clone, Args)]
pub struct RedeployBenchArgs {
    /// The applications, comma-separated: sol, wordcount, throughput-test.
    #[arg(
        long,
        default_value = "sol,wordcount,throughput-test",
        value_delimiter = ','
    )]
    apps: Vec<String>,
    /// Measured repetitions of each application's redeploy.
    #[arg(long, value_name = "R", default_value_t = 5)]
    repeat: usize,
    /// Repetitions before them, discarded.
    #[arg(long, value_name = "N", default_value_t = 1)]
    warmup: usize,
    /// Tuples per second from the source (WordCount: sentences).
    #[arg(long, value_name = "N", default_value_t = 5000)]
    rate: u64,
    /// Seconds the job runs before the redeploy, and again after it before it stops.
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    run_for: f64,
    /// Application setting, `key=value`; repeatable, given to every application.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// Print one JSON object per application, one per line, instead of a table.
    #[arg(long)]
    json: bool,
    /// Where WordCount writes its counts (the benchmark gives it to its own PEs).
    #[arg(long, hide = true, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// The pause, the drain, the restart and the cold start of one repetition, in seconds.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Repetition {
    /// From the suspension to the suspended job's report, state included.
    drain_s: f64,
    /// `resume_with` on the new plan, until it returned.
    restart_s: f64,
    /// From the suspension until the sources went on: the drain and the restart.
    pause_s: f64,
    /// `start_with` of the new plan without state, until it returned.
    cold_start_s: f64,
    /// Bytes of state carried over.
    state_bytes: usize,
    /// Instances whose state was carried over.
    state_instances: usize,
    /// What the source emitted before the redeploy and after it.
    emitted: [u64; 2],
    /// The delivery check, one line.
    check: String,
    /// The 1-minute load average after the repetition.
    load_average: Option<f64>,
}

/// Median, p90 and max of a figure over the repetitions.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Spread {
    median: f64,
    p90: f64,
    max: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Self {
        Self {
            median: median(values),
            p90: nearest_rank(values, 0.9),
            max: nearest_rank(values, 1.0),
        }
    }
}

/// One application's redeploys.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RedeployResult {
    /// Always `redeploy`.
    bench: &'static str,
    /// The application.
    app: String,
    /// Its operator instances.
    instances: usize,
    /// PEs of the first plan and of the scheduler's.
    pes: [usize; 2],
    /// The share of the declared traffic crossing hosts, before and after.
    cross_host: [f64; 2],
    /// The source's rate.
    rate: u64,
    /// Seconds the job ran before the redeploy and after it.
    run_for_s: f64,
    /// The pause.
    pause_s: Spread,
    /// Its drain, median.
    drain_s: f64,
    /// Its restart, median.
    restart_s: f64,
    /// The baseline: a cold start of the same plan.
    cold_start_s: Spread,
    /// The median of the repetitions' ratios of pause to cold start.
    pause_over_cold_start: f64,
    /// Bytes of state carried over, median.
    state_bytes: f64,
    /// Repetitions whose delivery check held (all, or the benchmark failed).
    intact: usize,
    /// Median of the load averages after the repetitions.
    load_average: Option<f64>,
    /// Every measured repetition.
    runs: Vec<Repetition>,
    /// Where it was measured.
    commit: &'static str,
    /// The CPU model.
    cpu: String,
    /// This machine's cores, which both hosts share.
    cores: usize,
}

/// Runs the benchmark and prints the table (or a JSON line per application). In a process the
/// runtime started as a PE of one of its jobs, runs that PE instead.
pub(crate) fn main(args: &RedeployBenchArgs) -> anyhow::Result<()> {
    let settings = Settings::parse(args.settings.iter().map(String::as_str))?;
    if sluice_runtime::is_pe_process() {
        let config = config(args, &settings, args.output.clone());
        return serve_pe("redeploy", &args.apps, &config);
    }
    print(&measure(args, &settings)?, args.json, table)
}

/// The configuration the benchmark and its PEs build an application with.
fn config(args: &RedeployBenchArgs, settings: &Settings, output: Option<PathBuf>) -> AppConfig {
    AppConfig {
        rate: Some(args.rate),
        output,
        settings: settings.clone(),
        ..AppConfig::default()
    }
}

/// Every application's redeploys.
pub(crate) fn measure(
    args: &RedeployBenchArgs,
    settings: &Settings,
) -> anyhow::Result<Vec<RedeployResult>> {
    let repeat = checked_repeat(args.repeat)?;
    let run_for = seconds("--run-for", args.run_for, false)?;
    anyhow::ensure!(args.rate > 0, "--rate takes tuples per second above 0");
    let dir = tempfile::tempdir().context("cannot make a directory for WordCount's counts")?;
    let mut results = Vec::new();
    for app in &args.apps {
        let setup = Setup::new(app, args, settings, dir.path())?;
        for round in 1..=args.warmup {
            setup
                .repetition(run_for)
                .with_context(|| format!("{app}: warm-up {round}"))?;
        }
        let mut runs = Vec::with_capacity(repeat);
        for round in 1..=repeat {
            let run = setup
                .repetition(run_for)
                .with_context(|| format!("{app}: repetition {round}"))?;
            eprintln!("{app}: repetition {round}: {}", run.line());
            runs.push(run);
        }
        results.push(setup.result(args, run_for, runs));
    }
    Ok(results)
}

/// How a repetition checks that no tuple was lost or repeated.
enum Delivery {
    /// SOL, the Throughput Test: the integrity check of the terminal bolt.
    Topology,
    /// WordCount: its counts, written to `output`, against a direct count.
    WordCount { output: PathBuf, settings: Settings },
}

impl Delivery {
    /// The operator whose tuples out are the source's.
    fn source(&self) -> &'static str {
        match self {
            Delivery::Topology => storm::SPOUT,
            Delivery::WordCount { .. } => "sentences",
        }
    }

    /// Whether every tuple of `report`'s job arrived once, and the figures, in one line.
    fn check(&self, report: &JobReport) -> anyhow::Result<(bool, String)> {
        match self {
            Delivery::Topology => {
                let integrity = integrity(report);
                Ok((integrity.holds(), integrity.line()))
            }
            Delivery::WordCount { output, settings } => {
                let sentences = report.tuples_out("sentences");
                let words = report.tuples_in("sum");
                let expected = direct_counts(settings, sentences)?;
                let in_sentences: u64 = expected.values().sum();
                let written = read_counts(output)?;
                let same = written == expected;
                let line = format!(
                    "counts: {}: {sentences} sentences, {words} words counted of the \
                     {in_sentences} in them; the {} counts written {} a direct count",
                    if same && words == in_sentences {
                        "ok"
                    } else {
                        "FAILED"
                    },
                    written.len(),
                    if same { "equal" } else { "differ from" },
                );
                Ok((same && words == in_sentences, line))
            }
        }
    }
}

/// WordCount's output: `word<TAB>count` lines.
fn read_counts(path: &Path) -> anyhow::Result<HashMap<String, u64>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read WordCount's counts {}", path.display()))?;
    text.lines()
        .map(|line| {
            let (word, count) = line
                .split_once('\t')
                .with_context(|| format!("{}: not `word<TAB>count`: {line}", path.display()))?;
            let count = count
                .parse()
                .with_context(|| format!("{}: not a count: {line}", path.display()))?;
            Ok((word.to_string(), count))
        })
        .collect()
}

/// An application ready to be redeployed: its graph, the two plans and the options its jobs
/// run with.
struct Setup {
    name: String,
    app: sluice_apps::App,
    before: PhysicalPlan,
    after: PhysicalPlan,
    quality: [PlacementQuality; 2],
    options: RunOptions,
    delivery: Delivery,
}

impl Setup {
    /// `name` built and planned on the two hosts; WordCount writes its counts in `dir`.
    fn new(
        name: &str,
        args: &RedeployBenchArgs,
        settings: &Settings,
        dir: &Path,
    ) -> anyhow::Result<Self> {
        let delivery = match name {
            "sol" | "throughput-test" => Delivery::Topology,
            "wordcount" => Delivery::WordCount {
                output: dir.join("counts.tsv"),
                settings: settings.clone(),
            },
            _ => bail!("--apps takes sol, wordcount and throughput-test, not '{name}'"),
        };
        let output = match &delivery {
            Delivery::WordCount { output, .. } => Some(output.clone()),
            Delivery::Topology => None,
        };
        let app = sluice_apps::build(name, &config(args, settings, output.clone()))?;
        let options = PlanOptions {
            hosts: Some(local_hosts()),
            ..PlanOptions::default()
        };
        let before = sluice_plan::plan(&app.graph, &PlanRequest::Processes, &options)?;
        let tasks = task_graph(&before, |_| 1.0);
        let slots: Vec<usize> = before.hosts.iter().map(|h| h.cores).collect();
        let host_of = Scheduler::Consolidated.assign(&tasks, &slots);
        let file = plan_file(&before, &before.hosts, &host_of);
        let request = PlanRequest::File("the scheduler's placement".into(), file);
        let after = sluice_plan::plan(&app.graph, &request, &options)?;
        let quality = [
            PlacementQuality::of(&tasks, &before.instance_hosts(), &slots),
            PlacementQuality::of(&tasks, &host_of, &slots),
        ];
        Ok(Self {
            name: name.to_string(),
            app,
            before,
            after,
            quality,
            options: RunOptions {
                suspendable: true,
                pe_args: Some(pe_args(name, args, output.as_deref())),
                ..RunOptions::default()
            },
            delivery,
        })
    }

    /// One redeploy and its baseline; an error if the redeploy lost or repeated a tuple.
    fn repetition(&self, run_for: Duration) -> anyhow::Result<Repetition> {
        let graph = &self.app.graph;
        if let Delivery::WordCount { output, .. } = &self.delivery {
            // No counts of an earlier run may pass for this one's.
            match std::fs::remove_file(output) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).context("cannot remove WordCount's earlier counts")
                }
                _ => {}
            }
        }
        let stop = StopHandle::new();
        let job = start_with(graph, &self.before, &self.options, &stop)
            .context("the start on the first placement")?;
        std::thread::sleep(run_for);
        let suspended = Instant::now();
        stop.suspend();
        let mut report = job.wait().context("the suspension")?;
        let drain = suspended.elapsed();
        let state: JobState = report
            .state()
            .context("the suspended job left no state: its source had ended before")?;
        let restarting = Instant::now();
        let stop = StopHandle::new();
        let job = resume_with(graph, &self.after, &self.options, &stop, &state)
            .context("the restart on the scheduler's placement")?;
        let (restart, pause) = (restarting.elapsed(), suspended.elapsed());
        let emitted_before = report.tuples_out(self.delivery.source());
        std::thread::sleep(run_for);
        stop.stop();
        report.absorb(job.wait().context("the resumed job")?);
        let (intact, check) = self.delivery.check(&report)?;
        if !intact {
            bail!("the redeploy lost or repeated tuples: {check}");
        }
        let stop = StopHandle::new();
        let starting = Instant::now();
        let job = start_with(graph, &self.after, &self.options, &stop)
            .context("the cold start of the scheduler's placement")?;
        let cold_start = starting.elapsed();
        stop.stop();
        job.wait().context("the cold-started job")?;
        let emitted = report.tuples_out(self.delivery.source());
        Ok(Repetition {
            drain_s: drain.as_secs_f64(),
            restart_s: restart.as_secs_f64(),
            pause_s: pause.as_secs_f64(),
            cold_start_s: cold_start.as_secs_f64(),
            state_bytes: state.bytes(),
            state_instances: state.instances(),
            emitted: [emitted_before, emitted - emitted_before],
            check,
            load_average: machine::load_average(),
        })
    }

    /// The result of the measured repetitions `runs`.
    fn result(
        self,
        args: &RedeployBenchArgs,
        run_for: Duration,
        runs: Vec<Repetition>,
    ) -> RedeployResult {
        let figure = |f: fn(&Repetition) -> f64| runs.iter().map(f).collect::<Vec<f64>>();
        let load: Vec<f64> = runs.iter().filter_map(|r| r.load_average).collect();
        RedeployResult {
            bench: "redeploy",
            app: self.name,
            instances: self.before.instances.len(),
            pes: [self.before.pes.len(), self.after.pes.len()],
            cross_host: self.quality.map(|q| q.cross_host_traffic),
            rate: args.rate,
            run_for_s: run_for.as_secs_f64(),
            pause_s: Spread::of(&figure(|r| r.pause_s)),
            drain_s: median(&figure(|r| r.drain_s)),
            restart_s: median(&figure(|r| r.restart_s)),
            cold_start_s: Spread::of(&figure(|r| r.cold_start_s)),
            pause_over_cold_start: median(&figure(|r| r.pause_s / r.cold_start_s)),
            state_bytes: median(&figure(|r| r.state_bytes as f64)),
            intact: runs.len(),
            load_average: (!load.is_empty()).then(|| median(&load)),
            runs,
            commit: machine::commit(),
            cpu: machine::cpu(),
            cores: machine::cores(),
        }
    }
}

/// Two hosts of two slots on this machine, at two loopback addresses.
fn local_hosts() -> HostsFile {
    hosts_file((1..=2).map(|h| (format!("h{h}"), Ipv4Addr::new(127, 0, 0, h).into(), 2)))
}

/// The arguments a PE of `app`'s jobs is started with: this command for `app` alone, with the
/// settings that build the same graph and WordCount's `output`.
fn pe_args(
    app: &str,
    args: &RedeployBenchArgs,
    output: Option<&Path>,
) -> &'static [std::ffi::OsString] {
    let mut words: Vec<std::ffi::OsString> = ["bench", "redeploy", "--apps", app, "--rate"]
        .map(Into::into)
        .to_vec();
    words.push(args.rate.to_string().into());
    for setting in &args.settings {
        words.extend(["--set".into(), setting.into()]);
    }
    if let Some(output) = output {
        words.extend(["--output".into(), output.as_os_str().to_owned()]);
    }
    Box::leak(words.into_boxed_slice())
}

impl Repetition {
    /// One line of progress.
    fn line(&self) -> String {
        format!(
            "paused {:.3} s (drain {:.3} s, restart {:.3} s), cold start {:.3} s, {} B of state \
             in {} instances, {} + {} tuples from the source; {}",
            self.pause_s,
            self.drain_s,
            self.restart_s,
            self.cold_start_s,
            self.state_bytes,
            self.state_instances,
            self.emitted[0],
            self.emitted[1],
            self.check
        )
    }
}

/// The results in markdown: a row per application.
pub(crate) fn table(results: &[RedeployResult]) -> String {
    let mut out = String::new();
    if let Some(r) = results.first() {
        let _ = writeln!(
            out,
            "sluice bench redeploy: source at {} tuples/s, {} s before and after each redeploy, \
             {} repetition(s); two hosts on this machine; commit {}, {}, {} cores\n",
            r.rate,
            r.run_for_s,
            r.runs.len(),
            r.commit,
            r.cpu,
            r.cores
        );
    }
    out.push_str(
        "| application | instances | PEs | across hosts | state | pause median | p90 | max | drain | restart | cold start | pause / cold start | intact | load avg |\n\
         |---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        let _ = writeln!(
            out,
            "| {} | {} | {} -> {} | {:.0}% -> {:.0}% | {} | {} | {} | {} | {} | {} | {} | {:.2} | {}/{} | {} |",
            r.app,
            r.instances,
            r.pes[0],
            r.pes[1],
            100.0 * r.cross_host[0],
            100.0 * r.cross_host[1],
            sluice_runtime::size_text(r.state_bytes),
            millis(r.pause_s.median),
            millis(r.pause_s.p90),
            millis(r.pause_s.max),
            millis(r.drain_s),
            millis(r.restart_s),
            millis(r.cold_start_s.median),
            r.pause_over_cold_start,
            r.intact,
            r.runs.len(),
            r.load_average.map_or("-".into(), |l| format!("{l:.2}")),
        );
    }
    out
}

/// Seconds as milliseconds with their unit.
fn millis(s: f64) -> String {
    format!("{:.0} ms", s * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(settings: &[&str]) -> RedeployBenchArgs {
        RedeployBenchArgs {
            apps: vec!["wordcount".into()],
            repeat: 1,
            warmup: 0,
            rate: 300,
            run_for: 0.5,
            settings: settings.iter().map(|s| s.to_string()).collect(),
            json: false,
            output: None,
        }
    }

    #[test]
    fn a_pe_is_started_for_one_application_with_the_same_graph() {
        let words: Vec<String> = pe_args(
            "wordcount",
            &args(&["words=4"]),
            Some(Path::new("/d/counts.tsv")),
        )
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
        assert_eq!(
            words.join(" "),
            "bench redeploy --apps wordcount --rate 300 --set words=4 --output /d/counts.tsv"
        );
    }

    #[test]
    fn the_redeploy_moves_a_chain_dealt_over_two_hosts_onto_fewer_crossings() {
        let dir = tempfile::tempdir().unwrap();
        let setup = Setup::new("wordcount", &args(&[]), &Settings::default(), dir.path()).unwrap();
        assert_eq!(setup.before.pes.len(), setup.before.instances.len());
        assert!(setup.after.pes.len() <= 4);
        let [before, after] = setup.quality;
        assert!(after.cross_host_traffic < before.cross_host_traffic);
        let unknown = Setup::new("relay", &args(&[]), &Settings::default(), dir.path());
        assert!(unknown.is_err());
    }

    #[test]
    fn wordcount_counts_are_read_back_and_a_garbled_line_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("counts.tsv");
        std::fs::write(&path, "kalo\t3\nmi\t1\n").unwrap();
        let counts = read_counts(&path).unwrap();
        assert_eq!((counts["kalo"], counts["mi"]), (3, 1));
        std::fs::write(&path, "kalo 3\n").unwrap();
        assert!(read_counts(&path).is_err());
        std::fs::write(&path, "kalo\tthree\n").unwrap();
        assert!(read_counts(&path).is_err());
    }
}
