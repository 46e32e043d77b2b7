//! The flags every thread of a job watches: go (sources may start), stop (drain and end),
//! suspend (drain and keep every instance's state, to resume elsewhere) and abort (leave now);
//! the checkpoint asked for and the last one complete, with where instances hand their parts
//! ([`crate::checkpoint`]); and the job's failures, from which [`crate::error::root_cause`]
//! makes its error.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::checkpoint::CheckpointSink;

use sluice_graph::OperatorError;

use crate::error::{root_cause, MAX_FAILURES};
use crate::RunError;

/// Job-wide control shared by all threads.
pub struct JobControl {
    go: AtomicBool,
    stop: AtomicBool,
    suspend: AtomicBool,
    abort: AtomicBool,
    /// The last checkpoint asked for (0: none yet).
    checkpoint_asked: AtomicU64,
    /// The last checkpoint complete (0: none yet).
    checkpoint_complete: AtomicU64,
    /// Where instances hand their parts of checkpoints, once the job is checkpointed.
    checkpoint_sink: OnceLock<Arc<dyn CheckpointSink>>,
    /// Every failure recorded, in order (at most [`MAX_FAILURES`]).
    failures: Mutex<Vec<RunError>>,
}

impl JobControl {
    /// A job whose sources start as soon as every thread is ready (`go`), or only once
    /// [`JobControl::go`] is called (a PE waiting for the rest of its job).
    pub fn new(go: bool) -> Self {
        Self {
            go: AtomicBool::new(go),
            stop: AtomicBool::new(false),
            suspend: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            checkpoint_asked: AtomicU64::new(0),
            checkpoint_complete: AtomicU64::new(0),
            checkpoint_sink: OnceLock::new(),
            failures: Mutex::new(Vec::new()),
        }
    }

    /// Makes the job checkpointed: its instances hand their parts of checkpoints to `sink`.
    /// Set before the threads start; a second sink is ignored.
    pub fn set_checkpoint_sink(&self, sink: Arc<dyn CheckpointSink>) {
        let _ = self.checkpoint_sink.set(sink);
    }

    /// Where instances hand their parts of checkpoints, if the job is checkpointed.
    pub fn checkpoint_sink(&self) -> Option<&Arc<dyn CheckpointSink>> {
        self.checkpoint_sink.get()
    }

    /// Asks for checkpoint `n` (numbers only grow): every running source takes its position
    /// and sends the barrier at the top of its thread's next round.
    pub fn trigger_checkpoint(&self, n: u64) {
        // SYNC: Relaxed, with `checkpoint_asked`: the number is the whole message; what the
        // sources then send is ordered by the queues.
        self.checkpoint_asked.fetch_max(n, Ordering::Relaxed);
    }

    /// The last checkpoint asked for (0: none).
    #[inline]
    pub fn checkpoint_asked(&self) -> u64 {
        self.checkpoint_asked.load(Ordering::Relaxed)
    }

    /// Checkpoint `n` is complete: every instance's part is stored. Instances are told at the
    /// top of their thread's next round.
    pub fn complete_checkpoint(&self, n: u64) {
        // SYNC: Relaxed, with `checkpoint_complete`: the number is the whole message.
        self.checkpoint_complete.fetch_max(n, Ordering::Relaxed);
    }

    /// The last checkpoint complete (0: none).
    #[inline]
    pub fn checkpoint_complete(&self) -> u64 {
        self.checkpoint_complete.load(Ordering::Relaxed)
    }

    /// Lets the threads start their work loops.
    pub fn go(&self) {
        // SYNC: Release pairs with the Acquire load in `may_go`; nothing else is published
        // through it, the queues order the data.
        self.go.store(true, Ordering::Release);
    }

    /// Whether the threads may start their work loops.
    pub fn may_go(&self) -> bool {
        self.go.load(Ordering::Acquire)
    }

    /// Asks every source to finish, so that the job drains and ends.
    pub fn request_stop(&self) {
        // SYNC: Release pairs with the Acquire load in `stop_requested`: a thread that sees
        // the stop also sees a suspension requested before it (`request_suspend`). What
        // sources do after seeing it (finish, send end-of-stream) is ordered by the queues.
        self.stop.store(true, Ordering::Release);
    }

    /// Asks for a stop that suspends: sources keep their position, instances snapshot their
    /// state instead of finishing.
    pub fn request_suspend(&self) {
        // SYNC: Relaxed: published by the Release store of the stop that follows. A thread
        // that handles an end-of-stream sent after its source saw the stop sees it too (the
        // queue orders the end after the source's reads); one that handles an end sent
        // before (a source that was exhausted) may see it or not, and either is consistent:
        // the instance finishes or is suspended, and resumes finished or to be finished.
        self.suspend.store(true, Ordering::Relaxed);
        self.request_stop();
    }

    /// Whether the stop under way suspends the job.
    #[inline]
    pub fn suspending(&self) -> bool {
        self.suspend.load(Ordering::Relaxed)
    }

    #[inline]
    /// Whether a stop (or a suspension) was requested.
    pub fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    #[inline]
    /// Whether the job is aborting: every thread leaves its loop now.
    pub fn aborting(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }

    /// Records `error` from `instance` (unless it is the echo of an abort) and aborts the job.
    pub fn fail(&self, instance: String, error: OperatorError) {
        if matches!(error, OperatorError::Aborted) {
            self.abort();
        } else {
            self.fail_with(RunError::Operator { instance, error });
        }
    }

    /// Makes the job's control ready for a restart of the job after a failure: no abort, no
    /// failure recorded; a stop asked for, the checkpoint numbers and the sink stay.
    pub fn rearm(&self) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.abort.store(false, Ordering::Relaxed);
    }

    /// Leaves at once without recording a cause (the launcher reports why).
    pub fn abort(&self) {
        self.abort.store(true, Ordering::Relaxed);
    }

    /// Records a failure and aborts the job.
    pub fn fail_with(&self, error: RunError) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if failures.len() < MAX_FAILURES {
            failures.push(error);
        }
        self.abort();
    }

    /// The job's error: its root cause followed by the rest ([`root_cause`]); `Aborted` if it
    /// aborted without a recorded failure; `None` if it did not fail.
    pub fn take_error(&self) -> Option<RunError> {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let error = root_cause(std::mem::take(&mut *failures));
        if error.is_none() && self.aborting() {
            return Some(RunError::Aborted);
        }
        error
    }
}

/// Asks a running job to stop: sources finish, in-flight tuples drain, the job ends normally;
/// or to abort.
#[derive(Clone)]
pub struct StopHandle {
    control: Arc<JobControl>,
}

impl Default for StopHandle {
    fn default() -> Self {
        Self::new()
    }
}

impl StopHandle {
    /// A handle for a job not started yet (`sluice_runtime::start_with`), so that a stop can come
    /// during its start-up.
    pub fn new() -> Self {
        Self::from_control(Arc::new(JobControl::new(true)))
    }

    /// A handle on the job `control` controls.
    pub fn from_control(control: Arc<JobControl>) -> Self {
        Self { control }
    }

    /// The job's control this handle sets.
    pub fn control(&self) -> Arc<JobControl> {
        self.control.clone()
    }

    /// Requests the stop; returns at once.
    pub fn stop(&self) {
        self.control.request_stop();
    }

    /// Requests a suspension; returns at once. The job drains as for a stop, but its sources
    /// keep their position and every instance gives its state ([`Source::snapshot`],
    /// [`Operator::snapshot`]) instead of finishing: [`crate::JobReport::state`] then holds
    /// what `sluice_runtime::resume_with` resumes the job from, on another plan, losing and
    /// repeating no tuple. A job whose sources cannot resume fails at its start when it is
    /// started suspendable ([`crate::RunOptions::suspendable`]).
    ///
    /// [`Source::snapshot`]: sluice_graph::Source::snapshot
    /// [`Operator::snapshot`]: sluice_graph::Operator::snapshot
    pub fn suspend(&self) {
        self.control.request_suspend();
    }

    /// Whether a stop was already requested.
    pub fn is_stopping(&self) -> bool {
        self.control.stop_requested()
    }

    /// Aborts the job without draining (a second Ctrl-C): its PEs are killed, its segments
    /// and directory removed, and it fails with [`RunError::Interrupted`]. Returns at once.
    pub fn abort(&self) {
        let during = if self.control.stop_requested() {
            "again during the drain"
        } else {
            "while running"
        };
        self.control.fail_with(RunError::Interrupted(during));
    }
}
