//! `sluice bench placement --run`: the three placements of the table run for real, on hosts
//! made of network namespaces ([`crate::foundation::netns`]), as the TurboStream paper's
//! Figure 9 runs its schedulers' placements on a cluster.
//!
//! For each number of hosts, that many namespaces on one bridge, each host with the slots of
//! the simulated cluster (`--workers` spread over them) as its `cores`; for each application,
//! the hosts file and each scheduler's plan file are written (as `sluice plan APP --optimize
//! placement` writes one: [`traffic_placement::plan_file`] of [`Scheduler::assign`]), read back
//! and planned, and the application runs on it as `sluice run APP --plan FILE --hosts FILE`
//! runs it: each PE a process started in its host's namespace through `ip netns exec`, TCP
//! between hosts, shared memory between PEs of one host. The spout sends at `--rate` for
//! `--duration` (after a discarded warm-up run of `--warmup`), and `--repeat` rounds run the
//! schedulers in turn, so that a change in the machine's load falls on all of them alike.
//!
//! Per run: the rate the spout reached, the end-to-end latency of every tuple from the spout
//! to the terminal bolt (the application's own histogram, [`JobReport::latency`]), the
//! integrity check (every tuple sent arrived once, intact), the share of the tuples received
//! over TCP among all tuples received by any instance (from the receivers' counts in the
//! job's last metrics sample, so the tuples of the last sampling period are missing from it),
//! and the machine's load average after the run. The result of a scheduler is the median of
//! its rounds, figure by figure.
//!
//! The hosts share this machine's cores: a namespace gives its PEs a network stack of their
//! own (each hop between hosts goes through two veth pairs and a bridge), not CPUs. So the
//! measurement shows what crossing a host costs in the network stack, not what spreading the
//! load over more machines gains.
//!
//! Needs root (namespaces); without it, says so and measures nothing. Every namespace and
//! every process is removed when the benchmark ends, also on an error and on Ctrl-C (which
//! aborts the running job).

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{bail, Context};
use serde::Serialize;
use sluice_apps::{storm, AppConfig, Settings};
use sluice_plan::consolidate::PlacementQuality;
use sluice_plan::traffic_placement::{plan_file, task_graph, Scheduler};
use sluice_plan::{HostsFile, PhysicalPlan, PlanFile, PlanOptions, PlanRequest};
use sluice_runtime::{JobReport, MetricsSnapshot, RunOptions, StopHandle};

use super::{cluster, PlacementBenchArgs};
use crate::apps::jobs::{print, serve_pe};
use crate::foundation::machine;
use crate::foundation::netns::{launch_prefix, NetnsHosts};
use crate::foundation::stats::{median, LatencySummary};

/// The hosts are on `10.NET.0.0/24`.
const NET: u8 = 61;

/// The transports that carry an edge between hosts.
const NETWORK_TRANSPORTS: [&str; 2] = ["tcp", "udp-mq"];

/// One run of a placement.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PlacedRun {
    /// 1, 2, ...
    pub(crate) round: usize,
    /// Tuples the spout sent.
    pub(crate) sent: u64,
    /// Tuples the terminal bolt received.
    pub(crate) received: u64,
    /// Whether every tuple sent arrived once with its payload intact.
    pub(crate) intact: bool,
    /// Tuples per second the spout reached while it sent.
    pub(crate) spout_per_sec: f64,
    /// The job's wall time, start-up and drain included.
    pub(crate) elapsed_s: f64,
    /// End-to-end latency of the tuples, in nanoseconds.
    pub(crate) latency_ns: Option<LatencySummary>,
    /// The share of received tuples that came over the network.
    pub(crate) cross_host_measured: Option<f64>,
    /// The 1-minute load average after the run.
    pub(crate) load_average: Option<f64>,
}

/// A scheduler's placement of one application on one cluster, and its runs.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PlacedResult {
    /// Always `placement-run`.
    pub(crate) bench: &'static str,
    /// The application.
    pub(crate) app: String,
    /// Each host's slots.
    pub(crate) slots: Vec<usize>,
    /// The scheduler.
    pub(crate) scheduler: &'static str,
    /// Operator instances.
    pub(crate) tasks: usize,
    /// Processes of the plan.
    pub(crate) pes: usize,
    /// The share of the traffic crossing hosts the placement predicts.
    pub(crate) cross_host_planned: f64,
    /// Its load imbalance (heaviest host over the mean).
    pub(crate) imbalance: f64,
    /// The spout's target rate.
    pub(crate) rate: u64,
    /// Medians over the runs.
    pub(crate) spout_per_sec: f64,
    /// Medians over the runs, figure by figure.
    pub(crate) latency_ns: Option<LatencySummary>,
    /// Median over the runs.
    pub(crate) cross_host_measured: Option<f64>,
    /// Median over the runs.
    pub(crate) load_average: Option<f64>,
    /// Every run.
    pub(crate) runs: Vec<PlacedRun>,
    /// Seconds each run sent.
    pub(crate) duration_s: f64,
    /// Where it was measured.
    pub(crate) commit: &'static str,
    /// The CPU model.
    pub(crate) cpu: String,
    /// This machine's cores, which every host shares.
    pub(crate) cores: usize,
}

/// Runs the measured mode and prints the table (or a JSON line per result). In a process the
/// runtime started as a PE of one of its jobs, runs that PE instead.
pub(super) fn main(args: &PlacementBenchArgs) -> anyhow::Result<()> {
    let settings = Settings::parse(args.settings.iter().map(String::as_str))?;
    if sluice_runtime::is_pe_process() {
        return serve_pe("placement --run", &args.apps, &config(args.rate, &settings));
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "sluice bench placement --run: skipped: making network-namespace hosts needs root"
        );
        return Ok(());
    }
    let current = Arc::new(CurrentJob::default());
    let on_interrupt = current.clone();
    ctrlc::set_handler(move || on_interrupt.interrupt())
        .context("cannot catch Ctrl-C to clean up after an interrupted run")?;
    let results = measure(args, &settings, &current)?;
    print(&results, args.runs.json, table)
}

/// The configuration every run and its PEs build the application with.
fn config(rate: u64, settings: &Settings) -> AppConfig {
    AppConfig {
        rate: Some(rate),
        settings: settings.clone(),
        ..AppConfig::default()
    }
}

/// The running job, which Ctrl-C aborts.
#[derive(Default)]
pub(crate) struct CurrentJob {
    stop: Mutex<Option<StopHandle>>,
    interrupted: AtomicBool,
}

impl CurrentJob {
    /// Ctrl-C: abort the running job and start no other.
    fn interrupt(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
        if let Some(stop) = &*self.stop.lock().unwrap_or_else(PoisonError::into_inner) {
            stop.abort();
        }
    }

    /// Runs `plan` for `app` with `options`; its report and its last metrics sample.
    fn run(
        &self,
        app: &sluice_apps::App,
        plan: &PhysicalPlan,
        options: &RunOptions,
    ) -> anyhow::Result<(JobReport, MetricsSnapshot)> {
        let stop = StopHandle::new();
        *self.stop.lock().unwrap_or_else(PoisonError::into_inner) = Some(stop.clone());
        if self.interrupted.load(Ordering::SeqCst) {
            bail!("interrupted");
        }
        let job = sluice_runtime::start_with(&app.graph, plan, options, &stop)?;
        let metrics = job.metrics_handle();
        let report = job.wait()?;
        Ok((report, metrics.snapshot()))
    }
}

/// One application placed by one scheduler on the hosts.
struct Placement {
    scheduler: Scheduler,
    quality: PlacementQuality,
    plan: PhysicalPlan,
    runs: Vec<PlacedRun>,
}

/// Every run, host count by host count, application by application: `--repeat` rounds of the
/// schedulers in turn.
pub(crate) fn measure(
    args: &PlacementBenchArgs,
    settings: &Settings,
    current: &CurrentJob,
) -> anyhow::Result<Vec<PlacedResult>> {
    let (duration, warmup, repeat) = args.runs.checked()?;
    anyhow::ensure!(args.rate > 0, "--rate takes tuples per second above 0");
    let dir = tempfile::tempdir().context("cannot make a directory for the plan files")?;
    let mut results = Vec::new();
    for &count in &args.hosts {
        anyhow::ensure!(count > 0, "--hosts takes numbers of hosts above 0");
        let slots: Vec<usize> = cluster(count, args.workers)
            .hosts
            .iter()
            .map(|h| h.cores)
            .collect();
        let hosts = NetnsHosts::make(count, NET)?;
        let file = hosts.hosts_file(|i| slots[i], launch_prefix);
        for app in &args.apps {
            let built = sluice_apps::build(app, &config(args.rate, settings))?;
            let mut placements = place(app, &built, &file, dir.path())?;
            let options = RunOptions {
                duration: Some(duration),
                pe_args: Some(pe_args(app, args)),
                ..RunOptions::default()
            };
            for round in 1..=repeat {
                for p in &mut placements {
                    let what = format!("{app} on {count} hosts, {}", p.scheduler.name());
                    if !warmup.is_zero() {
                        let warm = RunOptions {
                            duration: Some(warmup),
                            ..options
                        };
                        current
                            .run(&built, &p.plan, &warm)
                            .with_context(|| format!("{what}: the warm-up run"))?;
                    }
                    let (report, metrics) = current
                        .run(&built, &p.plan, &options)
                        .with_context(|| format!("{what}: round {round}"))?;
                    let run = placed_run(round, &report, &metrics);
                    eprintln!("{what}: round {round}: {}", run.line());
                    p.runs.push(run);
                }
            }
            results.extend(placements.into_iter().map(|p| {
                PlacedResult {
                    bench: "placement-run",
                    app: app.clone(),
                    slots: slots.clone(),
                    scheduler: p.scheduler.name(),
                    tasks: p.plan.instances.len(),
                    pes: p.plan.pes.len(),
                    cross_host_planned: p.quality.cross_host_traffic,
                    imbalance: p.quality.imbalance,
                    rate: args.rate,
                    spout_per_sec: median(
                        &p.runs.iter().map(|r| r.spout_per_sec).collect::<Vec<_>>(),
                    ),
                    latency_ns: LatencySummary::median_of(
                        &p.runs
                            .iter()
                            .filter_map(|r| r.latency_ns)
                            .collect::<Vec<_>>(),
                    ),
                    cross_host_measured: median_of_known(
                        p.runs.iter().map(|r| r.cross_host_measured),
                    ),
                    load_average: median_of_known(p.runs.iter().map(|r| r.load_average)),
                    runs: p.runs,
                    duration_s: duration.as_secs_f64(),
                    commit: machine::commit(),
                    cpu: machine::cpu(),
                    cores: machine::cores(),
                }
            }));
        }
    }
    Ok(results)
}

/// The median of the values that are known; `None` if none is.
fn median_of_known(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let known: Vec<f64> = values.flatten().collect();
    (!known.is_empty()).then(|| median(&known))
}

/// Each scheduler's placement of `app` on the hosts of `hosts`: its plan file and the hosts
/// file written in `dir`, read back and planned, as `sluice run --plan FILE --hosts FILE`
/// plans them.
fn place(
    app: &str,
    built: &sluice_apps::App,
    hosts: &HostsFile,
    dir: &Path,
) -> anyhow::Result<Vec<Placement>> {
    let hosts_path = dir.join("hosts.toml");
    std::fs::write(&hosts_path, toml::to_string(hosts)?)?;
    let hosts = HostsFile::read(&hosts_path, &std::fs::read_to_string(&hosts_path)?)?;
    let options = PlanOptions {
        hosts: Some(hosts),
        ..PlanOptions::default()
    };
    let per_instance = sluice_plan::plan(&built.graph, &PlanRequest::Processes, &options)?;
    let slots: Vec<usize> = per_instance.hosts.iter().map(|h| h.cores).collect();
    let tasks = task_graph(&per_instance, |_| 1.0);
    Scheduler::ALL
        .iter()
        .map(|&scheduler| {
            let host_of = scheduler.assign(&tasks, &slots);
            let file = plan_file(&per_instance, &per_instance.hosts, &host_of);
            let path = dir.join(format!("{app}-{}.toml", scheduler_slug(scheduler)));
            std::fs::write(&path, toml::to_string(&file)?)?;
            let file = PlanFile::read(&path, &std::fs::read_to_string(&path)?)?;
            let request = PlanRequest::File(path.display().to_string(), file);
            Ok(Placement {
                scheduler,
                quality: PlacementQuality::of(&tasks, &host_of, &slots),
                plan: sluice_plan::plan(&built.graph, &request, &options)?,
                runs: Vec::new(),
            })
        })
        .collect()
}

/// A file-name word for `scheduler`.
fn scheduler_slug(scheduler: Scheduler) -> &'static str {
    match scheduler {
        Scheduler::RoundRobin => "round-robin",
        Scheduler::StormEven => "storm-even",
        Scheduler::Consolidated => "consolidated",
    }
}

/// The arguments a PE of `app`'s jobs is started with: this command for `app` alone, with the
/// settings that build the same graph.
fn pe_args(app: &str, args: &PlacementBenchArgs) -> &'static [std::ffi::OsString] {
    let mut words: Vec<String> = ["bench", "placement", "--run", "--apps", app, "--rate"]
        .map(String::from)
        .to_vec();
    words.push(args.rate.to_string());
    for setting in &args.settings {
        words.extend(["--set".to_string(), setting.clone()]);
    }
    Box::leak(words.into_iter().map(Into::into).collect())
}

/// The figures of one run from its report and its last metrics sample.
fn placed_run(round: usize, report: &JobReport, metrics: &MetricsSnapshot) -> PlacedRun {
    let integrity = crate::apps::storm::integrity(report);
    PlacedRun {
        round,
        sent: integrity.sent,
        received: integrity.received,
        intact: integrity.holds(),
        spout_per_sec: storm::achieved_rate(report, storm::SPOUT),
        elapsed_s: report.elapsed.as_secs_f64(),
        latency_ns: report
            .latency()
            .as_ref()
            .and_then(LatencySummary::from_histogram),
        cross_host_measured: cross_host_share(metrics),
        load_average: machine::load_average(),
    }
}

/// The share of the tuples received by any instance that came over a network transport.
fn cross_host_share(metrics: &MetricsSnapshot) -> Option<f64> {
    let (mut network, mut all) = (0u64, 0u64);
    for edge in metrics.edges() {
        all += edge.tuples;
        if NETWORK_TRANSPORTS.contains(&edge.transport.as_str()) {
            network += edge.tuples;
        }
    }
    (all > 0).then(|| network as f64 / all as f64)
}

impl PlacedRun {
    /// One line of progress.
    fn line(&self) -> String {
        let (p50, p99) = self
            .latency_ns
            .map_or((f64::NAN, f64::NAN), |l| (l.p50 / 1e3, l.p99 / 1e3));
        format!(
            "{:.0} tuples/s, p50 {p50:.0} us, p99 {p99:.0} us, {} of {} tuples received{}, {} over the network",
            self.spout_per_sec,
            self.received,
            self.sent,
            if self.intact { " intact" } else { ", INTEGRITY FAILED" },
            self.cross_host_measured
                .map_or("?".into(), |s| format!("{:.1}%", 100.0 * s)),
        )
    }
}

/// The results in markdown: a row per application, cluster and scheduler.
pub(crate) fn table(results: &[PlacedResult]) -> String {
    let mut out = String::new();
    if let Some(r) = results.first() {
        let _ = writeln!(
            out,
            "sluice bench placement --run: spout at {} tuples/s for {} s, median of {} run(s); commit {}, {}, {} cores shared by every host\n",
            r.rate,
            r.duration_s,
            r.runs.len(),
            r.commit,
            r.cpu,
            r.cores
        );
    }
    out.push_str(
        "| application | hosts x slots | scheduler | PEs | across hosts, planned | across hosts, measured | tuples/s | p50 | p99 | intact runs | load avg |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        let (p50, p99) = r
            .latency_ns
            .map_or(("-".into(), "-".into()), |l| (micros(l.p50), micros(l.p99)));
        let _ = writeln!(
            out,
            "| {} | {} x {} | {} | {} | {:.1}% | {} | {:.0} | {p50} | {p99} | {}/{} | {} |",
            r.app,
            r.slots.len(),
            r.slots[0],
            r.scheduler,
            r.pes,
            100.0 * r.cross_host_planned,
            r.cross_host_measured
                .map_or("-".into(), |s| format!("{:.1}%", 100.0 * s)),
            r.spout_per_sec,
            r.runs.iter().filter(|run| run.intact).count(),
            r.runs.len(),
            r.load_average.map_or("-".into(), |l| format!("{l:.2}")),
        );
    }
    out
}

/// Nanoseconds as microseconds with their unit.
fn micros(ns: f64) -> String {
    format!("{:.0} us", ns / 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::foundation::args::RunArgs;
    use sluice_runtime::metrics::{EdgeMetrics, PeMetrics, ThreadMetrics};

    #[test]
    fn the_share_across_hosts_is_what_network_receivers_received_of_all() {
        let edge = |transport: &str, tuples| EdgeMetrics {
            transport: transport.into(),
            tuples,
            ..EdgeMetrics::default()
        };
        let thread = |inputs| ThreadMetrics {
            inputs,
            ..ThreadMetrics::default()
        };
        let mut metrics = MetricsSnapshot {
            pes: vec![
                PeMetrics {
                    threads: vec![thread(vec![edge("tcp", 30), edge("shm-vega", 50)])],
                    ..PeMetrics::default()
                },
                PeMetrics {
                    threads: vec![thread(vec![edge("threaded", 10), edge("udp-mq", 10)])],
                    ..PeMetrics::default()
                },
            ],
            ..MetricsSnapshot::default()
        };
        assert_eq!(cross_host_share(&metrics), Some(0.4));
        metrics.pes.clear();
        assert_eq!(cross_host_share(&metrics), None);
    }

    #[test]
    fn a_pe_is_started_for_one_application_with_the_same_settings() {
        let args = PlacementBenchArgs {
            apps: vec!["sol".into(), "throughput-test".into()],
            hosts: vec![2],
            workers: 8,
            settings: vec!["levels=3".into()],
            run: true,
            rate: 5000,
            runs: RunArgs {
                duration: 1.0,
                warmup: 0.0,
                repeat: 1,
                json: true,
            },
        };
        let words: Vec<String> = pe_args("sol", &args)
            .iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            words.join(" "),
            "bench placement --run --apps sol --rate 5000 --set levels=3"
        );
    }
}
