//! Sluice's control plane, and the runtime's facade: runs a physical plan with each PE as a
//! process of its own (the local [`Launcher`], which re-executes the program once per PE and
//! supervises the children; or `mpirun`), or every PE as threads of this process.
//!
//! The work itself (assembly of a PE's threads, the fused work loop, drain, suspend and state,
//! metrics counters, the report) is the data plane, the crate `sluice-exec`; this crate holds
//! what starts and supervises it: spawning the PEs, the control link to each and its
//! heartbeats (`link`, `wire`), supervision and the root cause of a failure (`launch`), the PE's
//! side of it ([`serve_pe`]). Dependencies point one way: this crate uses `sluice-exec`, which
//! knows nothing of processes. Everything a program calls is here ([`run`], [`start`],
//! [`resume_with`], [`RunOptions`], [`StopHandle`], [`JobReport`], [`metrics`], ...), the data
//! plane's types re-exported, so a program depends on this crate only. A program reads the
//! run options `sluice run` reads, from the same `SLUICE_*` variables and configuration file,
//! with [`configured_options`] ([`configuration`]).
//!
//! Stopping: a finite source ends its stream, end-of-stream flows downstream, and a thread
//! ends when all its instances have finished. [`StopHandle::stop`] makes every source finish
//! early, so every tuple already emitted is still processed (a drain), within
//! [`RunOptions::drain_timeout`]. [`StopHandle::suspend`] drains the same way but keeps
//! every source's position and every instance's state ([`JobReport::state`]) instead of
//! finishing, and [`resume_with`] starts the job again from it, on another plan. A failed or
//! panicking operator aborts the job: every thread leaves its loop, blocked senders give up,
//! and [`RunningJob::wait`] returns the error, its root cause first ([`RunError`]). A thread
//! stuck in an operator's call, or a PE that stops sending heartbeats, fails the job within
//! [`RunOptions::stall_timeout`]; [`StopHandle::abort`] aborts it at once, still removing
//! everything it made. A job stopped before its sources ended says on standard error that its
//! output is partial ([`RunOptions::partial_notice`]).
//!
//! Watching: every job started here registers in the job registry ([`registry`]: `sluice
//! jobs`, `top`, `stop`, `sluice ui`'s page and REST API find it) and shows its progress on
//! standard error while it runs ([`progress`], [`RunOptions::progress`]), a program's as
//! `sluice run`'s. Its own `/metrics` and web page are served by `sluice-web`
//! (`sluice_web::job_server`), a layer above this one.
//!
//! # The PE entry
//!
//! The local launcher starts each PE by re-executing this program with the PE's role in the
//! environment ([`PE_ENVIRONMENT`]); MPI starts its ranks the same way. Such a process enters
//! through [`serve_pe`]: it rebuilds nothing but the graph (which the program builds as it
//! always does), receives its plan from the launcher, runs its part, reports and exits. A
//! program may call [`serve_pe`] itself, first thing after building its graph (after
//! [`is_pe_process`]); [`start`], [`start_with`], [`resume_with`] and [`run`] call it too,
//! before anything else, so that a program that builds its graph and calls `run` works
//! unchanged as every PE of its own job, as the book promises.
//!
//! Why the process exits there rather than `start` returning an outcome that says "this
//! process served as a PE": everything a program does after `run` (print a summary, write the
//! output, start another job) belongs to the launching process only, and a PE that ran it
//! would duplicate the job's output once per PE. An outcome every caller must check makes
//! forgetting the check a silent bug in every program; an exit makes the safe path the only
//! one, and a program that wants to do something before its PE serves (set up logging, skip a
//! banner) tests [`is_pe_process`] first.
#![forbid(unsafe_code)]

mod checkpoint_figures;
mod checkpoints;
pub mod configuration;
mod launch;
mod link;
mod mpi;
mod pe;
pub mod progress;
pub mod registry;
mod results;
mod resume;
pub mod summaries;
mod wire;

use std::sync::Arc;
use std::time::Instant;

pub use checkpoint_figures::{CheckpointFigures, RestartFigures};
pub use checkpoints::{load_checkpoint, CheckpointHandle, StoredCheckpoint};
pub use configuration::configured_options;
pub use link::why_not_private;
pub use pe::{is_pe_process, PE_ENVIRONMENT};
pub use resume::ResumeFrom;
pub use sluice_exec::metrics;
pub use sluice_exec::{
    size_text, CheckpointOptions, CheckpointSummary, InstanceReport, InstanceState, JobReport,
    JobState, Launcher, MetricsHandle, MetricsSnapshot, Restart, RunError, RunOptions, StopHandle,
    DEFAULT_ALIGN_LIMIT, DEFAULT_CHECKPOINTS_RETAINED, DEFAULT_CHECKPOINT_TIMEOUT,
    DEFAULT_COLLECT_LIMIT, DEFAULT_DRAIN_TIMEOUT, DEFAULT_LATENCY_EVERY, DEFAULT_RESTARTS,
    DEFAULT_RESTART_DELAY, DEFAULT_STALL_TIMEOUT, DEFAULT_START_TIMEOUT, LOST_TUPLES_COUNTER,
};

use checkpoints::{Coordinator, Order, PartAck, PartWriter};
use results::ResultsInbox;
use sluice_checkpoint::CheckpointStore;
use sluice_exec::assemble::{self, Scope, Sites};
use sluice_exec::control::JobControl;
use sluice_exec::watch;
use sluice_graph::Graph;
use sluice_plan::PhysicalPlan;
use sluice_shm::JobSegments;

/// A job whose threads (or processes) are running.
pub struct RunningJob {
    control: Arc<JobControl>,
    running: Running,
    started: Instant,
    options: RunOptions,
    metrics: MetricsHandle,
    /// Checkpoints and restarts, when the job takes checkpoints.
    recovery: Option<Box<Recovery>>,
    /// Its entry in the job registry while it runs ([`registry`]); `None` in a PE, or when
    /// the registry could not be written (warned about).
    registration: Option<registry::Registration>,
    /// Its progress on standard error ([`RunOptions::progress`]); `None` in a PE, or when
    /// not asked for.
    progress: Option<progress::Progress>,
}

/// What a checkpointed job needs to take its checkpoints and to restart from them.
struct Recovery {
    coordinator: Coordinator,
    store: Arc<CheckpointStore>,
    /// When the job runs in this process: the writer of its parts, and its acknowledgements.
    local: Option<(Arc<PartWriter>, crossbeam_channel::Receiver<PartAck>)>,
    graph: Graph,
    plan: PhysicalPlan,
    stop: StopHandle,
    /// Restarts still allowed.
    restarts_left: u32,
}

impl Recovery {
    /// Opens the job's checkpoint store and, when the job runs in this process, makes its
    /// part writer the job's checkpoint sink.
    fn prepare(
        graph: &Graph,
        plan: &PhysicalPlan,
        options: &RunOptions,
        checkpoints: &CheckpointOptions,
        stop: &StopHandle,
    ) -> Result<Self, RunError> {
        plan.check_checkpointed()?;
        let store = checkpoints::open_store(checkpoints)?;
        // Numbers go on from whatever the directory holds, so no checkpoint overwrites one.
        let first = store
            .next_number()
            .map_err(|e| RunError::Launch(format!("checkpoints: {e}")))?;
        let job = format!("{}-{}", plan.job, std::process::id());
        let coordinator = Coordinator::new(store.clone(), *checkpoints, plan, &job, first);
        let local = if runs_as_threads(plan, options) {
            let (acks, acknowledged) = crossbeam_channel::unbounded();
            let writer = PartWriter::start(store.clone(), move |ack| {
                let _ = acks.send(ack);
            })?;
            stop.control().set_checkpoint_sink(writer.clone());
            Some((writer, acknowledged))
        } else {
            None
        };
        Ok(Self {
            coordinator,
            store,
            local,
            graph: graph.clone(),
            plan: plan.clone(),
            stop: stop.clone(),
            restarts_left: checkpoints.restarts,
        })
    }

    /// One step of checkpointing for a job in this process: takes in the parts written,
    /// and passes the coordinator's orders to the job's threads.
    fn tick_local(&mut self, control: &JobControl) {
        if let Some((_, acknowledged)) = &self.local {
            for ack in acknowledged.try_iter() {
                self.coordinator.acknowledge(ack);
            }
        }
        for order in self.coordinator.tick() {
            match order {
                Order::Take(n) => control.trigger_checkpoint(n),
                Order::Complete(n) => control.complete_checkpoint(n),
            }
        }
    }

    /// Whether the job may be restarted after `error`: restarts are left, the user did not
    /// interrupt it, it was not stopping, and the failure would not simply recur.
    fn may_restart(&self, error: &RunError, control: &JobControl) -> bool {
        self.restarts_left > 0
            && !error.is_interrupt()
            && !error.is_permanent()
            && !control.stop_requested()
    }

    /// Waits for the part writer to write what it was given.
    fn finish(&self) {
        if let Some((writer, _)) = &self.local {
            writer.finish();
        }
    }
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
/// In a process that the local launcher started as a PE of a job, this enters [`serve_pe`]
/// instead, which runs that PE, reports to the launcher and exits the process: a program
/// that builds its graph and calls `start` (or [`run`]) works unchanged as every PE of its
/// own job.
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

/// As [`start_with`], resuming from `from`: a suspended job's ([`StopHandle::suspend`])
/// [`JobReport::state`], or a checkpoint ([`load_checkpoint`]). Every instance takes back its state (an operator whose parallelism
/// changed gets its keys dealt anew, each to the instance its key now goes to), every source
/// resumes where it stopped, and an instance that had finished stays finished. `plan` may
/// place the instances anywhere.
pub fn resume_with<'a>(
    graph: &Graph,
    plan: &PhysicalPlan,
    options: &RunOptions,
    stop: &StopHandle,
    from: impl Into<ResumeFrom<'a>>,
) -> Result<RunningJob, RunError> {
    start_from(graph, plan, options, stop, Some(from.into()))
}

fn start_from(
    graph: &Graph,
    plan: &PhysicalPlan,
    options: &RunOptions,
    stop: &StopHandle,
    resume: Option<ResumeFrom<'_>>,
) -> Result<RunningJob, RunError> {
    if is_pe_process() {
        serve_pe(graph, options)
    }
    plan.check()?;
    check_mpi(plan, options.launcher)?;
    let recovery = match &options.checkpoints {
        Some(checkpoints) => Some(Box::new(Recovery::prepare(
            graph,
            plan,
            options,
            checkpoints,
            stop,
        )?)),
        None => None,
    };
    let mut job = launch_job(graph, plan, options, stop.control(), resume)?;
    job.recovery = recovery;
    job.registration = registry::register_job(&job, plan, options);
    job.progress = progress::Progress::start_if_asked(&job.metrics, options);
    Ok(job)
}

/// Starts the job's PEs: as processes, or as threads of this process.
fn launch_job(
    graph: &Graph,
    plan: &PhysicalPlan,
    options: &RunOptions,
    control: Arc<JobControl>,
    resume: Option<ResumeFrom<'_>>,
) -> Result<RunningJob, RunError> {
    if runs_as_threads(plan, options) {
        return start_threads(graph, plan, options, control, resume);
    }
    let spawner = match options.launcher {
        Launcher::Mpi => launch::Spawner::Mpi,
        _ => launch::Spawner::Direct,
    };
    let results = ResultsInbox::new(graph.result_inlets().clone(), options.collect_limit);
    launch::start(plan, options, spawner, control, resume, results)
}

/// Whether the job's PEs run as threads of this process: a plan of one PE, or the in-process
/// launcher.
fn runs_as_threads(plan: &PhysicalPlan, options: &RunOptions) -> bool {
    match options.launcher {
        Launcher::Local => plan.pes.len() <= 1,
        Launcher::InProcess => true,
        Launcher::Mpi => false,
    }
}

/// The entry of a process started as a PE of a job ([`is_pe_process`]): runs this process's
/// PE of the job `graph` belongs to, with the plan its launcher sends, reports to the
/// launcher and exits the process, with 0 after a clean end and 1 after a failure (see the
/// crate's docs, "The PE entry"). `options` are the program's own: the launcher decides the
/// duration. Not for a process that is no PE: it exits with an error saying its role is
/// missing.
pub fn serve_pe(graph: &Graph, options: &RunOptions) -> ! {
    pe::serve(graph, options)
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

/// Whether the duration of a job started at `started` with `options`, if it has one, has
/// passed.
fn duration_passed(options: &RunOptions, started: Instant) -> bool {
    options
        .duration
        .is_some_and(|limit| started.elapsed() >= limit)
}

/// Runs every PE of `plan` as threads of this process.
fn start_threads(
    graph: &Graph,
    plan: &PhysicalPlan,
    options: &RunOptions,
    control: Arc<JobControl>,
    resume: Option<ResumeFrom<'_>>,
) -> Result<RunningJob, RunError> {
    let mut resume = resume.map(ResumeFrom::state).transpose()?;
    let segments = launch::job_segments(plan)?;
    let mut sites = Sites::new(segments.job(), launch::job_secret()?);
    let bound = assemble::bind(graph, plan, Scope::All, &sites)?;
    sites.endpoints.extend(bound.endpoints.iter().copied());
    let process = Arc::new(metrics::ProcessMetrics::default());
    let watched = assemble::Watched {
        control: &control,
        metrics: options.metrics.then_some(&*process),
        resume: resume.as_mut(),
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
        recovery: None,
        registration: None,
        progress: None,
    })
}

impl RunningJob {
    /// The job's id in the job registry (`sluice jobs` lists it, `sluice stop ID` stops it);
    /// `None` when the registry could not be written.
    pub fn registry_id(&self) -> Option<&str> {
        self.registration.as_ref().map(registry::Registration::id)
    }

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
    pub fn wait(mut self) -> Result<JobReport, RunError> {
        // Whichever way the job ends, a sampler of its threads leaves.
        struct Ended(MetricsHandle);
        impl Drop for Ended {
            fn drop(&mut self) {
                self.0.end();
            }
        }
        let _ended = Ended(self.metrics.clone());
        let ended = loop {
            let outcome = self.wait_attempt();
            let error = match outcome {
                Ok(mut report) => {
                    report.checkpoints = self.checkpoints();
                    break Ok(report);
                }
                Err(error) => error,
            };
            let restartable = self
                .recovery
                .as_ref()
                .is_some_and(|r| r.may_restart(&error, &self.control));
            if !restartable {
                break Err(error);
            }
            if let Err(error) = self.restart(error) {
                break Err(error);
            }
        }
        .inspect(|_| self.finish_recovery())
        .inspect_err(|_| self.finish_recovery())
        .inspect(|_| self.metrics.end())
        .inspect_err(|_| self.metrics.end());
        if let Some(progress) = self.progress.take() {
            progress.finish();
        }
        // A suspended job goes on elsewhere: its output is not cut short.
        let cut_short = self.stopped_early() && !self.control.suspending();
        if ended.is_ok() && cut_short && self.options.partial_notice {
            eprintln!(
                "the output is partial: the job was stopped (by the program, `sluice stop` or \
                 POST /jobs/ID/stop) before its sources ended"
            );
        }
        self.keep_summary(&ended);
        ended
    }

    /// Whether the job's duration, if it has one, has passed.
    fn duration_passed(&self) -> bool {
        duration_passed(&self.options, self.started)
    }

    /// Whether a stop (or a suspension) was asked before the job's duration, if it has one,
    /// was up (its end asks for one too): the sources did not end on their own.
    fn stopped_early(&self) -> bool {
        self.control.stop_requested() && !self.duration_passed()
    }

    /// Keeps what is to be known of the job, which ended with `ended`, before its registry
    /// entry goes ([`summaries`]).
    fn keep_summary(&self, ended: &Result<JobReport, RunError>) {
        let Some(registration) = &self.registration else {
            return;
        };
        let outcome = match ended {
            Err(error) => (summaries::Outcome::Failed, Some(error.to_string())),
            Ok(_) if self.stopped_early() => (summaries::Outcome::Stopped, None),
            Ok(_) => (summaries::Outcome::Finished, None),
        };
        let checkpoints = self.checkpoints().as_ref().map(CheckpointFigures::from);
        registration.keep_summary(outcome, self.metrics.snapshot(), checkpoints);
    }

    /// Waits for the running attempt of the job to end.
    fn wait_attempt(&mut self) -> Result<JobReport, RunError> {
        let running = std::mem::replace(
            &mut self.running,
            Running::Threads {
                workers: Vec::new(),
                segments: None,
            },
        );
        let (control, options, started) = (self.control.clone(), self.options, self.started);
        let stop_when_due = || {
            if duration_passed(&options, started) {
                control.request_stop();
            }
        };
        match running {
            Running::Processes(children) => {
                let coordinator = self.recovery.as_deref_mut().map(|r| &mut r.coordinator);
                children.wait(&control, &options, stop_when_due, started, coordinator)
            }
            Running::Threads { workers, segments } => {
                let mut recovery = self.recovery.as_deref_mut();
                let instances = watch::wait_threads(workers, &control, &options, || {
                    stop_when_due();
                    if let Some(recovery) = recovery.as_deref_mut() {
                        recovery.tick_local(&control);
                    }
                });
                let elapsed = started.elapsed();
                drop(segments);
                if let Some(error) = control.take_error() {
                    return Err(error);
                }
                Ok(JobReport::new(elapsed, instances))
            }
        }
    }

    /// Restarts the job after `error` from its last complete checkpoint (from its start if it
    /// has none), saying so on standard error. A restart that fails while the job starts
    /// again (a PE killed during its start-up, say) is followed by another while restarts are
    /// left, each counted and logged as one.
    ///
    /// The first attempt verifies the checkpoint's manifest and its parts' headers and lengths,
    /// not their payloads: each PE checksums the parts it reads, so the state is read once.
    /// An attempt that fails (a PE that found a part damaged, among others) makes the next
    /// one read and checksum every part first, falling back past a damaged checkpoint.
    fn restart(&mut self, mut error: RunError) -> Result<(), RunError> {
        let Some(recovery) = self.recovery.as_deref_mut() else {
            return Err(error);
        };
        let delay = self
            .options
            .checkpoints
            .map_or(DEFAULT_RESTART_DELAY, |c| c.restart_delay);
        let mut verify: checkpoints::Verify = CheckpointStore::latest_complete;
        let relaunched = loop {
            let from = checkpoints::latest_checkpoint(&recovery.store, verify)?;
            let whence = match &from {
                Some(checkpoint) => format!("from checkpoint {}", checkpoint.n),
                None => "from the start (no checkpoint is complete yet)".to_string(),
            };
            recovery.restarts_left -= 1;
            let at = self.started.elapsed();
            let cause = error.to_string();
            let cause = cause.lines().next().unwrap_or_default();
            eprintln!(
                "restarting the job {whence} at {:.3} s, after: {cause} ({} restart(s) left)",
                at.as_secs_f64(),
                recovery.restarts_left
            );
            recovery.coordinator.restarted(Restart {
                at,
                from: from.as_ref().map(|checkpoint| checkpoint.n),
                cause: cause.to_string(),
            });
            std::thread::sleep(delay);
            self.control.rearm();
            let resume = from.as_ref().map(ResumeFrom::Checkpoint);
            match launch_job(
                &recovery.graph,
                &recovery.plan,
                &self.options,
                recovery.stop.control(),
                resume,
            ) {
                Ok(relaunched) => {
                    // Every PE has read its state and is ready: what follows is replay.
                    recovery.coordinator.runs_again();
                    eprintln!(
                        "the job runs again {whence} at {:.3} s: every instance restored its state",
                        self.started.elapsed().as_secs_f64()
                    );
                    break relaunched;
                }
                Err(failed) if recovery.may_restart(&failed, &self.control) => {
                    error = failed;
                    verify = CheckpointStore::latest_verified;
                }
                Err(failed) => return Err(failed),
            }
        };
        self.running = relaunched.running;
        // The job's figures are the new attempt's from now on, wherever they are watched.
        self.metrics.end();
        self.metrics.follow(&relaunched.metrics);
        self.metrics = relaunched.metrics;
        Ok(())
    }

    /// What the job's checkpoints and restarts did so far; `None` when it takes none.
    pub fn checkpoints(&self) -> Option<CheckpointSummary> {
        self.recovery.as_ref().map(|r| r.coordinator.stats.clone())
    }

    /// A handle on the job's checkpoints for other threads while [`RunningJob::wait`] runs
    /// (what they did, savepoints on demand); `None` when it takes none.
    pub fn checkpoint_handle(&self) -> Option<CheckpointHandle> {
        self.recovery.as_ref().map(|r| r.coordinator.handle.clone())
    }

    /// Once the job ended: its part writer has written everything.
    fn finish_recovery(&self) {
        if let Some(recovery) = &self.recovery {
            recovery.finish();
        }
    }
}
