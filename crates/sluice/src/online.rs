//! `sluice run APP --hosts FILE --online-placement`: TurboStream's on-line placement. A
//! monitor reads the running job's live metrics every `--rebalance-every` seconds and turns
//! what each instance did since the last reading into a task graph (its load: CPU time when
//! the job is profiled, tuples handled otherwise; and the tuples it delivered to each other
//! instance, as counted); when the scheduler's placement of that graph would cut the
//! fraction of the traffic crossing hosts by more than `--rebalance-threshold`
//! ([`rebalance`]), the job is redeployed on it:
//!
//! 1. the job is suspended ([`StopHandle::suspend`]): its sources stop where they are, every
//!    tuple in flight drains, and every instance leaves its state (keyed state per key, the
//!    sources' positions);
//! 2. the new plan starts from that state ([`sluice_runtime::resume_with`]), each key's state
//!    with the instance its key now goes to, and the sources go on from where they stopped.
//!
//! No tuple is lost or repeated; the pause (from the suspension to the sources going again)
//! is logged and summed up at the end. The job's report is every run's, merged
//! ([`JobReport::absorb`]). `--duration` is the whole job's; no redeploy starts in its last
//! second. Ctrl-C stops whichever run is under way, and a redeploy under way resumes only
//! to drain. Every source of the application must be able to resume where it stopped
//! ([`sluice_graph::Source::resumable`]): the job fails at its start otherwise.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use sluice_graph::Graph;
use sluice_plan::consolidate::TaskGraph;
use sluice_plan::traffic_placement::{measured_task_graph, plan_file, rebalance, Rebalance};
use sluice_plan::{PhysicalPlan, PlanOptions, PlanRequest};
use sluice_runtime::metrics::InstanceMetrics;
use sluice_runtime::{
    JobReport, MetricsHandle, MetricsSnapshot, RunError, RunOptions, RunningJob, StopHandle,
};

use crate::plan_choice::parse_seconds;

/// The options of on-line placement.
#[derive(Args, Debug, Clone)]
pub(crate) struct OnlineArgs {
    /// Watch the job and redeploy it on the hosts of --hosts when moving its instances cuts
    /// the traffic between hosts (TurboStream's on-line placement); no tuple or state is lost.
    #[arg(long, requires = "hosts")]
    pub online_placement: bool,
    /// Seconds between two readings of the traffic (--online-placement).
    #[arg(long, default_value = "5", value_parser = parse_seconds)]
    rebalance_every: Duration,
    /// Redeploy when the fraction of the traffic crossing hosts would fall by more than this
    /// (0 to 1; --online-placement).
    #[arg(long, default_value = "0.1", value_parser = parse_fraction)]
    rebalance_threshold: f64,
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(format!("'{text}' is not a fraction from 0 to 1")),
    }
}

/// The stop handle of whichever run of the job is under way, for Ctrl-C; and a handle of the
/// whole job for the job registry (`sluice stop`), whose stop the monitor passes on to the
/// run under way.
#[derive(Clone, Default)]
pub(crate) struct SharedStop {
    current: Arc<Mutex<StopHandle>>,
    whole: StopHandle,
}

impl SharedStop {
    /// The handle of the first run.
    pub(crate) fn handle(&self) -> StopHandle {
        self.lock().clone()
    }

    /// A handle on the whole job, whichever run is under way: a stop through it reaches the
    /// run under way within the monitor's reaction time (an abort aborts the first run only).
    pub(crate) fn whole(&self) -> StopHandle {
        self.whole.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StopHandle> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops (drains) the run under way, and any run a redeploy starts after.
    pub(crate) fn stop(&self) {
        self.whole.stop();
        self.lock().stop();
    }

    /// Aborts the run under way.
    pub(crate) fn abort(&self) {
        self.lock().abort();
    }

    /// Whether the run under way (the last, once the job ended) was stopped: by Ctrl-C, by
    /// `sluice stop` (of the whole job, or of the run itself), or at the end of its duration.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stop_asked() || self.lock().is_stopping()
    }

    /// Whether a stop was asked of the whole job (a suspension of a run is none).
    fn stop_asked(&self) -> bool {
        self.whole.is_stopping()
    }

    /// A handle for the next run, stopped at once if a stop was asked meanwhile.
    fn next(&self) -> StopHandle {
        let handle = StopHandle::new();
        *self.lock() = handle.clone();
        if self.stop_asked() {
            handle.stop();
        }
        handle
    }
}

/// What a redeploy needs besides the running job.
pub(crate) struct Redeploys<'a> {
    pub graph: &'a Graph,
    pub plan_options: PlanOptions,
    pub options: RunOptions,
    pub args: &'a OnlineArgs,
    /// When the first run started, for the whole job's duration.
    pub started: Instant,
}

/// One redeploy, for the summary.
struct Moved {
    at: Duration,
    rebalance: Rebalance,
    drained: Duration,
    pause: Duration,
    state_bytes: usize,
}

/// Waits for `first` (running `plan`) under the monitor, redeploying it as often as the
/// traffic says, and returns the whole job's report. The first run's metrics handle follows
/// each run that takes its place, so whoever watches it (the progress line, `sluice top`,
/// the web page, Prometheus) goes on.
pub(crate) fn supervise(
    first: RunningJob,
    plan: &PhysicalPlan,
    redeploys: &Redeploys<'_>,
    stop: &SharedStop,
) -> Result<JobReport, RunError> {
    let metrics = first.metrics_handle();
    let mut job = first;
    let mut plan = plan.clone();
    let mut merged: Option<JobReport> = None;
    let mut moves: Vec<Moved> = Vec::new();
    loop {
        let monitor = Monitor::start(&job, &plan, redeploys, stop);
        let report = job.wait();
        let decision = monitor.finish();
        let report = report?;
        let state = report.state();
        match &mut merged {
            Some(earlier) => earlier.absorb(report),
            None => merged = Some(report),
        }
        let (Some(state), Some((rebalance, suspended))) = (state, decision) else {
            let mut report = merged.expect("a run ended");
            report.elapsed = redeploys.started.elapsed();
            summarize(&moves);
            return Ok(report);
        };
        let drained = suspended.elapsed();
        let file = plan_file(&plan, &plan.hosts, &rebalance.host_of);
        let request = PlanRequest::File("the on-line placement".into(), file);
        let next_plan = sluice_plan::plan(redeploys.graph, &request, &redeploys.plan_options)
            .map_err(|e| RunError::Launch(format!("cannot plan the new placement: {e}")))?;
        let options = RunOptions {
            duration: redeploys
                .options
                .duration
                .map(|d| d.saturating_sub(redeploys.started.elapsed()).max(MIN_RUN)),
            ..redeploys.options
        };
        let handle = stop.next();
        job = sluice_runtime::resume_with(redeploys.graph, &next_plan, &options, &handle, &state)?;
        let moved = Moved {
            at: suspended.duration_since(redeploys.started),
            drained,
            pause: suspended.elapsed(),
            state_bytes: state.bytes(),
            rebalance,
        };
        tracing::info!(
            "redeployed at {:.1} s: traffic crossing hosts {:.1}% -> {:.1}% (imbalance {:.2} \
             -> {:.2}); the sources paused {:.3} s (drain {:.3} s), {} of state in {} instances",
            moved.at.as_secs_f64(),
            100.0 * moved.rebalance.now.cross_host_traffic,
            100.0 * moved.rebalance.proposed.cross_host_traffic,
            moved.rebalance.now.imbalance,
            moved.rebalance.proposed.imbalance,
            moved.pause.as_secs_f64(),
            moved.drained.as_secs_f64(),
            sluice_runtime::size_text(moved.state_bytes as f64),
            state.instances(),
        );
        moves.push(moved);
        metrics.follow(&job.metrics_handle());
        plan = next_plan;
    }
}

/// A run a redeploy starts lasts at least this long (its sources then drain).
const MIN_RUN: Duration = Duration::from_millis(100);
/// No redeploy starts when less than this is left of the job's duration.
const LAST_MOVE: Duration = Duration::from_secs(1);

/// Logs what the redeploys did, in all.
fn summarize(moves: &[Moved]) {
    if moves.is_empty() {
        tracing::info!("on-line placement: the job ran on its first placement throughout");
        return;
    }
    let paused: Duration = moves.iter().map(|m| m.pause).sum();
    let last = &moves[moves.len() - 1].rebalance;
    tracing::info!(
        "on-line placement: {} redeploy(s), the sources paused {:.3} s in all; traffic \
         crossing hosts {:.1}% -> {:.1}%",
        moves.len(),
        paused.as_secs_f64(),
        100.0 * moves[0].rebalance.now.cross_host_traffic,
        100.0 * last.proposed.cross_host_traffic,
    );
}

/// The thread reading a run's metrics; it suspends the run when a redeploy is worth it.
struct Monitor {
    done: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Option<(Rebalance, Instant)>>,
}

impl Monitor {
    fn start(
        job: &RunningJob,
        plan: &PhysicalPlan,
        redeploys: &Redeploys<'_>,
        shared: &SharedStop,
    ) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let watcher = Watcher {
            metrics: job.metrics_handle(),
            stop: job.stop_handle(),
            whole: shared.whole(),
            plan: plan.clone(),
            every: redeploys.args.rebalance_every,
            threshold: redeploys.args.rebalance_threshold,
            deadline: redeploys.options.duration.map(|d| redeploys.started + d),
            done: done.clone(),
        };
        Self {
            done,
            thread: std::thread::spawn(move || watcher.watch()),
        }
    }

    /// Ends the monitor; what it decided, and when it suspended the run, if it did.
    fn finish(self) -> Option<(Rebalance, Instant)> {
        self.done.store(true, Ordering::Relaxed);
        self.thread.join().ok().flatten()
    }
}

struct Watcher {
    metrics: MetricsHandle,
    stop: StopHandle,
    /// The whole job's handle: a stop through it stops this run.
    whole: StopHandle,
    plan: PhysicalPlan,
    every: Duration,
    threshold: f64,
    deadline: Option<Instant>,
    done: Arc<AtomicBool>,
}

impl Watcher {
    fn watch(self) -> Option<(Rebalance, Instant)> {
        let slots: Vec<usize> = self.plan.hosts.iter().map(|h| h.cores.max(1)).collect();
        let current = self.plan.instance_hosts();
        let mut before: Option<MetricsSnapshot> = None;
        loop {
            let woke = Instant::now() + self.every;
            while Instant::now() < woke {
                if self.whole.is_stopping() {
                    self.stop.stop();
                }
                if self.done.load(Ordering::Relaxed) || self.stop.is_stopping() {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if self
                .deadline
                .is_some_and(|d| d.saturating_duration_since(Instant::now()) < LAST_MOVE)
            {
                return None;
            }
            let after = self.metrics.snapshot();
            let Some(earlier) = before.replace(after.clone()) else {
                continue;
            };
            let tasks = measured_tasks(&self.plan, &earlier, &after);
            if let Some(better) = rebalance(&tasks, &current, &slots, self.threshold) {
                self.metrics.hand_over();
                self.stop.suspend();
                return Some((better, Instant::now()));
            }
        }
    }
}

/// The task graph of what `plan`'s instances did between two readings, as the runtime
/// counted it: each instance weighs the CPU time it used (when the job is profiled, so its
/// CPU is sampled) or else the tuples it handled (received, or emitted by a source), and each
/// edge the tuples its upstream instance delivered on it, so a key-by edge with skewed keys
/// weighs what it really carried.
fn measured_tasks(
    plan: &PhysicalPlan,
    before: &MetricsSnapshot,
    after: &MetricsSnapshot,
) -> TaskGraph {
    let earlier: HashMap<usize, &InstanceMetrics> = before.instances().map(|i| (i.id, i)).collect();
    let timed = after.instances().any(|i| i.cpu_ns > 0);
    let mut load = vec![0.0; plan.instances.len()];
    for i in after.instances() {
        let was = earlier.get(&i.id);
        let grew = |figure: fn(&InstanceMetrics) -> u64| {
            figure(i).saturating_sub(was.map_or(0, |w| figure(w))) as f64
        };
        if let Some(weight) = load.get_mut(i.id) {
            *weight = match (timed, i.source) {
                (true, _) => grew(|m| m.cpu_ns),
                (false, true) => grew(|m| m.tuples_out),
                (false, false) => grew(|m| m.tuples_in),
            };
        }
    }
    let sent_before: HashMap<(usize, usize), u64> = before
        .traffic()
        .map(|(from, to, n)| ((from, to), n))
        .collect();
    let traffic = after.traffic().map(|(from, to, n)| {
        let was = sent_before.get(&(from, to)).copied().unwrap_or(0);
        (from, to, n.saturating_sub(was) as f64)
    });
    measured_task_graph(plan, &load, traffic)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_apps::AppConfig;
    use sluice_runtime::metrics::{PeMetrics, ThreadMetrics};

    use crate::plan_choice::AppArgs;

    fn snapshot(instances: Vec<InstanceMetrics>) -> MetricsSnapshot {
        let thread = ThreadMetrics {
            instances,
            ..ThreadMetrics::default()
        };
        MetricsSnapshot {
            pes: vec![PeMetrics {
                threads: vec![thread],
                ..PeMetrics::default()
            }],
            ..MetricsSnapshot::default()
        }
    }

    #[test]
    fn the_monitor_weighs_each_edge_with_what_it_carried_between_two_readings() {
        let app = AppArgs {
            app: "wordcount".into(),
            plan: "processes".into(),
            hosts: None,
            queue_capacity: None,
            settings: vec!["parallelism=2".into()],
            checkpointed: false,
        };
        let (_, plan) = app.build(AppConfig::default()).unwrap();
        let id = |name: &str| plan.instances.iter().position(|i| i.name == name).unwrap();
        let (split, sum0, sum1) = (id("split"), id("sum[0]"), id("sum[1]"));
        let figures = |id, tuples_in, cpu_ns, sent: Vec<(usize, u64)>| InstanceMetrics {
            id,
            tuples_in,
            cpu_ns,
            sent,
            ..InstanceMetrics::default()
        };
        let before = snapshot(vec![
            figures(split, 10, 0, vec![(sum0, 100), (sum1, 100)]),
            figures(sum0, 100, 0, Vec::new()),
        ]);
        let after = snapshot(vec![
            figures(split, 30, 0, vec![(sum0, 1000), (sum1, 200)]),
            figures(sum0, 1000, 0, Vec::new()),
        ]);
        // Skewed keys: 900 words went to sum[0] since the last reading, 100 to sum[1].
        let tasks = measured_tasks(&plan, &before, &after);
        assert_eq!(tasks.total_traffic(), 1000.0);
        let alone = |task: usize| -> Vec<usize> {
            (0..plan.instances.len())
                .map(|t| usize::from(t == task))
                .collect()
        };
        assert_eq!(tasks.cut(&alone(sum0)), 900.0);
        assert_eq!((tasks.weight(split), tasks.weight(sum0)), (20.0, 900.0));
        // With the CPU sampled, the CPU used weighs instead.
        let timed = snapshot(vec![figures(split, 30, 5_000, Vec::new())]);
        let tasks = measured_tasks(&plan, &before, &timed);
        assert_eq!((tasks.weight(split), tasks.weight(sum0)), (5_000.0, 0.0));
    }
}
