//! Executes a physical plan inside this process.
//!
//! Each thread of the plan runs its operator instances fused: a tuple emitted by one instance
//! is passed by reference, depth first, to the downstream instances in the same thread by a
//! direct call (System S fusion, the Vega paper's section II.B). Edges between threads go
//! through the transport the plan names (a threaded port today). A thread's work loop polls
//! its sources and its receivers; a poll reports the work it did and the thread idles by its
//! [`IdleStrategy`](sluice_sync::IdleStrategy) when a round did none.
//!
//! The executor is hand-written because it *is* the fused transport: the cost of a hop between
//! fused operators is the cost of [`exec`]'s dispatch, so it avoids allocation, locking and
//! dynamic lookups on the per-tuple path.
//!
//! Stopping: a finite source ends its stream, end-of-stream flows downstream, and a thread
//! ends when all its instances have finished. [`StopHandle::stop`] makes every source finish
//! early, so every tuple already emitted is still processed (a drain). A failed or panicking
//! operator aborts the job: every thread leaves its loop, blocked senders give up, and
//! [`RunningJob::wait`] returns the first error, naming the operator instance.
#![forbid(unsafe_code)]

mod assemble;
mod control;
mod error;
mod exec;
mod report;

use std::time::{Duration, Instant};

pub use control::StopHandle;
pub use error::RunError;
pub use report::{InstanceReport, JobReport};

use sluice_graph::Graph;
use sluice_plan::PhysicalPlan;
use sluice_sync::IdleStrategy;

/// How to run a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions {
    /// How idle threads wait; by default chosen from the thread and core counts.
    pub idle: Option<IdleStrategy>,
    /// Stop (and drain) after this long; run until the sources end if `None`.
    pub duration: Option<Duration>,
    /// The most messages a receiver hands over per poll.
    pub poll_batch: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            idle: None,
            duration: None,
            poll_batch: 256,
        }
    }
}

/// A job whose threads are running.
pub struct RunningJob {
    control: std::sync::Arc<control::JobControl>,
    threads: Vec<std::thread::JoinHandle<Vec<InstanceReport>>>,
    started: Instant,
    duration: Option<Duration>,
}

/// Starts `plan` for `graph` in this process.
pub fn start(
    graph: &Graph,
    plan: &PhysicalPlan,
    options: &RunOptions,
) -> Result<RunningJob, RunError> {
    assemble::start(graph, plan, options)
}

/// Runs `plan` for `graph` to the end and returns the report.
pub fn run(
    graph: &Graph,
    plan: &PhysicalPlan,
    options: &RunOptions,
) -> Result<JobReport, RunError> {
    start(graph, plan, options)?.wait()
}

impl RunningJob {
    /// A handle that asks the job to stop and drain, e.g. from a Ctrl-C handler.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle::new(self.control.clone())
    }

    /// Waits for the job to end (stopping it after the run's duration, if one was set) and
    /// returns its report or its first error.
    pub fn wait(self) -> Result<JobReport, RunError> {
        let poll = Duration::from_millis(5);
        while self.threads.iter().any(|t| !t.is_finished()) {
            if let Some(limit) = self.duration {
                if self.started.elapsed() >= limit {
                    self.control.request_stop();
                }
            }
            std::thread::sleep(poll);
        }
        let elapsed = self.started.elapsed();
        let mut instances = Vec::new();
        for thread in self.threads {
            match thread.join() {
                Ok(reports) => instances.extend(reports),
                Err(_) => self.control.fail(
                    "runtime".into(),
                    sluice_graph::OperatorError::Panicked("a runtime thread panicked".into()),
                ),
            }
        }
        if let Some(error) = self.control.take_error() {
            return Err(error);
        }
        Ok(JobReport::new(elapsed, instances))
    }
}
