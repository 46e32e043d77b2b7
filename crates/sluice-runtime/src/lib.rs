//! Executes a physical plan: each PE as a process of its own (the local [`Launcher`], which
//! re-executes the program once per PE and supervises the children), or every PE as threads of
//! this process.
//!
//! Each thread of the plan runs its operator instances fused: a tuple emitted by one instance
//! is passed by reference, depth first, to the downstream instances in the same thread by a
//! direct call (System S fusion, the Vega paper's section II.B). Edges between threads go
//! through the transport of their channel: a threaded port inside a PE, and between PEs the
//! sender and receiver the planner inserted (shared memory on one host). A thread's work loop polls
//! its sources and its receivers; a poll reports the work it did and the thread idles by its
//! [`IdleStrategy`] when a round did none.
//!
//! The executor is hand-written because it *is* the fused transport: the cost of a hop between
//! fused operators is the cost of the `exec` module's dispatch, so it avoids allocation, locking
//! and dynamic lookups on the per-tuple path.
//!
//! Stopping: a finite source ends its stream, end-of-stream flows downstream, and a thread
//! ends when all its instances have finished. [`StopHandle::stop`] makes every source finish
//! early, so every tuple already emitted is still processed (a drain), within
//! [`RunOptions::drain_timeout`]. [`StopHandle::suspend`] drains the same way but keeps
//! every source's position and every instance's state ([`JobReport::state`]) instead of
//! finishing, and [`resume_with`] starts the job again from it, on another plan. A failed or panicking operator aborts the job: every thread
//! leaves its loop, blocked senders give up, and [`RunningJob::wait`] returns the error, its
//! root cause first ([`RunError`]). A thread stuck in an operator's call, or a PE that stops
//! sending heartbeats, fails the job within [`RunOptions::stall_timeout`] (see `watch`);
//! [`StopHandle::abort`] aborts it at once, still removing everything it made.
#![forbid(unsafe_code)]

mod assemble;
mod clock;
mod control;
mod error;
mod exec;
mod launch;
mod link;
pub mod metrics;
mod mpi;
mod pe;
mod report;
mod state;
mod watch;
mod wire;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use control::StopHandle;
pub use error::RunError;
pub use link::why_not_private;
pub use metrics::{MetricsHandle, MetricsSnapshot};
pub use pe::{is_pe_process, PE_ENVIRONMENT};
pub use report::{InstanceReport, JobReport, LOST_TUPLES_COUNTER};
pub use state::{size_text, InstanceState, JobState};

use sluice_graph::Graph;
use sluice_plan::PhysicalPlan;
use sluice_shm::JobSegments;
use sluice_sync::IdleStrategy;

use crate::assemble::{Scope, Sites};
use crate::control::JobControl;

/// Where the PEs of a plan run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Launcher {
    /// One OS process per PE on this host, children of this one (the program re-executes
    /// itself as each PE); a plan of one PE runs in this process.
    #[default]
    Local,
    /// Every PE as threads of this process; edges between PEs still use their transports.
    InProcess,
    /// Every PE as a rank of Open MPI's `mpirun`, on the hosts the plan placed it on.
    Mpi,
}

/// Tuples a source emits between latency markers unless [`RunOptions::latency_every`] says
/// otherwise: at 40,000 tuples/s, 600 samples a second, for a clock read per 64 tuples.
pub const DEFAULT_LATENCY_EVERY: u64 = 64;

/// How to run a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions {
    /// How idle threads wait; by default chosen from the thread and core counts.
    pub idle: Option<IdleStrategy>,
    /// Stop (and drain) after this long; run until the sources end if `None`.
    pub duration: Option<Duration>,
    /// The most messages a receiver hands over per poll.
    pub poll_batch: usize,
    /// Where the PEs run.
    pub launcher: Launcher,
    /// Each source sends a latency marker after this many tuples (0: none). Markers travel
    /// in order with the data, each along one path: an instance passes a marker to one
    /// instance of each downstream operator (to all on a broadcast edge), as Flink's latency
    /// markers take one channel. Every instance a marker reaches records how long it took,
    /// and the sinks' figures are the job's end-to-end latency ([`JobReport::latency`]).
    pub latency_every: u64,
    /// Estimate each instance's CPU time ([`InstanceReport::cpu_ns`]) by timing a sample of
    /// every thread's rounds: what `sluice run --profile` records for the optimizers.
    pub profile_cpu: bool,
    /// A thread that makes no progress (a round of its loop, a batch, a wait on a full queue)
    /// or a PE that sends no heartbeat for this long fails the job, naming it.
    pub stall_timeout: Duration,
    /// A drain (after a stop) that has not ended this long after the stop aborts the job.
    pub drain_timeout: Duration,
    /// How long the PEs may take to start (each step of start-up: reaching the launcher,
    /// binding, starting), through their hosts' launch commands too.
    pub start_timeout: Duration,
    /// Whether the threads publish live metrics ([`metrics`], [`RunningJob::metrics`]); on
    /// by default.
    pub metrics: bool,
    /// The arguments each PE's process is started with (after the program), when not this
    /// process's own: a program whose command line does not rebuild the graph (the query
    /// shell, where the statement was typed, not given) passes what does. The slice lives as
    /// long as the program (`Box::leak` it: a few hundred bytes per job), which keeps the
    /// options `Copy`.
    pub pe_args: Option<&'static [std::ffi::OsString]>,
    /// The job may be suspended to be redeployed ([`StopHandle::suspend`]): it fails at its
    /// start, naming the source, unless every source can resume where it stopped.
    pub suspendable: bool,
}

/// [`RunOptions::stall_timeout`] unless set: far above any pause of a working thread (a
/// scheduling delay, a full queue is no pause: waiting on one counts as progress).
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(5);
/// [`RunOptions::drain_timeout`] unless set.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// [`RunOptions::start_timeout`] unless set: room for `ssh` to log in and start a PE.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            idle: None,
            duration: None,
            poll_batch: 256,
            launcher: Launcher::Local,
            latency_every: DEFAULT_LATENCY_EVERY,
            profile_cpu: false,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            start_timeout: DEFAULT_START_TIMEOUT,
            metrics: true,
            pe_args: None,
            suspendable: false,
        }
    }
}

/// A job whose threads (or processes) are running.
pub struct RunningJob {
    control: Arc<JobControl>,
    running: Running,
    started: Instant,
    options: RunOptions,
    metrics: MetricsHandle,
}

enum Running {
    /// Threads of this process, and the job's shared segments while they run.
    Threads {
        workers: Vec<watch::Worker>,
        segments: Option<JobSegments>,
    },
    /// Child processes, one per PE.
    Processes(Box<launch::Children>),
}

/// Starts `plan` for `graph`: in this process, or as one process per PE (see [`Launcher`]).
///
/// In a process that the local launcher started as a PE of a job, this runs that PE instead,
/// reports to the launcher and exits the process: a program that builds its graph and calls
/// `start` (or [`run`]) works unchanged as every PE of its own job.
pub fn start(
    graph: &Graph,
    plan: &PhysicalPlan,
    options: &RunOptions,
) -> Result<RunningJob, RunError> {
    start_with(graph, plan, options, &StopHandle::new())
}

/// As [`start`], controlled by `stop` from the beginning: a stop (or an abort) during
/// start-up ends the start with [`RunError::Interrupted`], after removing what it made.
pub fn start_with(
    graph: &Graph,
    plan: &PhysicalPlan,
    options: &RunOptions,
    stop: &StopHandle,
) -> Result<RunningJob, RunError> {
    start_from(graph, plan, options, stop, None)
}

/// As [`start_with`], resuming a suspended job ([`StopHandle::suspend`]) from `state`, its
/// [`JobReport::state`]: every instance takes back its state (an operator whose parallelism
/// changed gets its keys dealt anew, each to the instance its key now goes to), every source
/// resumes where it stopped, and an instance that had finished stays finished. `plan` may
/// place the instances anywhere.
pub fn resume_with(
    graph: &Graph,
    plan: &PhysicalPlan,
    options: &RunOptions,
    stop: &StopHandle,
    state: &JobState,
) -> Result<RunningJob, RunError> {
    start_from(graph, plan, options, stop, Some(state))
}

fn start_from(
    graph: &Graph,
    plan: &PhysicalPlan,
    options: &RunOptions,
    stop: &StopHandle,
    resume: Option<&JobState>,
) -> Result<RunningJob, RunError> {
    if is_pe_process() {
        pe::serve(graph, options)
    }
    plan.check()?;
    check_mpi(plan, options.launcher)?;
    let control = stop.control();
    match options.launcher {
        Launcher::Local if plan.pes.len() > 1 => {
            launch::start(plan, options, launch::Spawner::Direct, control, resume)
        }
        Launcher::Mpi => launch::start(plan, options, launch::Spawner::Mpi, control, resume),
        _ => start_threads(graph, plan, options, control, resume),
    }
}

/// Refuses a plan with an `mpi` edge unless its PEs are launched by `mpirun` (whether this
/// program has the `mpi` transport is the plan's check, [`PhysicalPlan::check`]).
fn check_mpi(plan: &PhysicalPlan, launcher: Launcher) -> Result<(), RunError> {
    let Some(edge) = assemble::mpi_channel(plan) else {
        return Ok(());
    };
    if launcher != Launcher::Mpi {
        return Err(RunError::Launch(format!(
            "edge {edge} uses the mpi transport, which runs only between PEs launched by \
             mpirun: add --launcher mpi"
        )));
    }
    Ok(())
}

/// Runs `plan` for `graph` to the end and returns the report.
pub fn run(
    graph: &Graph,
    plan: &PhysicalPlan,
    options: &RunOptions,
) -> Result<JobReport, RunError> {
    start(graph, plan, options)?.wait()
}

/// Runs every PE of `plan` as threads of this process.
fn start_threads(
    graph: &Graph,
    plan: &PhysicalPlan,
    options: &RunOptions,
    control: Arc<JobControl>,
    resume: Option<&JobState>,
) -> Result<RunningJob, RunError> {
    let segments = launch::job_segments(plan)?;
    let mut sites = Sites::new(segments.job(), launch::job_secret()?);
    let bound = assemble::bind(graph, plan, Scope::All, &sites)?;
    sites.endpoints.extend(bound.endpoints.iter().copied());
    let process = Arc::new(metrics::ProcessMetrics::default());
    let watched = assemble::Watched {
        control: &control,
        metrics: options.metrics.then_some(&*process),
        resume,
    };
    let workers = assemble::start(graph, plan, Scope::All, &sites, bound, options, watched)?;
    let handle = MetricsHandle::new(&plan.job, plan.pes.iter().map(|p| p.name.clone()));
    if options.metrics {
        handle.sample_threads(process);
    }
    Ok(RunningJob {
        control,
        running: Running::Threads {
            workers,
            segments: Some(segments),
        },
        started: Instant::now(),
        options: *options,
        metrics: handle,
    })
}

impl RunningJob {
    /// A handle that asks the job to stop and drain, e.g. from a Ctrl-C handler.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle::from_control(self.control.clone())
    }

    /// A handle on the job's live metrics, for other threads of this process while
    /// [`RunningJob::wait`] runs (a snapshot a few times a second, rates included).
    pub fn metrics_handle(&self) -> MetricsHandle {
        self.metrics.clone()
    }

    /// The job's live metrics now: each PE's latest sample (at most
    /// [`metrics::SAMPLE_PERIOD`] old), empty until the first comes or when they are off
    /// ([`RunOptions::metrics`]).
    pub fn metrics(&self) -> MetricsSnapshot {
        self.metrics.snapshot()
    }

    /// Waits for the job to end (stopping it after the run's duration, if one was set) and
    /// returns its report or its error: its root cause first ([`RunError`]). A thread or PE
    /// that stalls, a drain past its deadline, and an abort ([`StopHandle::abort`]) end it
    /// too (see [`RunOptions`]).
    pub fn wait(self) -> Result<JobReport, RunError> {
        let Self {
            control,
            running,
            started,
            options,
            metrics,
        } = self;
        let stop_when_due = || {
            if options
                .duration
                .is_some_and(|limit| started.elapsed() >= limit)
            {
                control.request_stop();
            }
        };
        // Whichever way the job ends, a sampler of its threads leaves.
        struct Ended(MetricsHandle);
        impl Drop for Ended {
            fn drop(&mut self) {
                self.0.end();
            }
        }
        let _ended = Ended(metrics);
        match running {
            Running::Processes(children) => {
                children.wait(&control, &options, stop_when_due, started)
            }
            Running::Threads { workers, segments } => {
                let instances = watch::wait_threads(workers, &control, &options, stop_when_due);
                let elapsed = started.elapsed();
                drop(segments);
                if let Some(error) = control.take_error() {
                    return Err(error);
                }
                Ok(JobReport::new(elapsed, instances))
            }
        }
    }
}
