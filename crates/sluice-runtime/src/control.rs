//! The flags every thread of a job watches: go (sources may start), stop (drain and end) and
//! abort (leave now), and the first error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sluice_graph::OperatorError;

use crate::RunError;

/// Job-wide control shared by all threads.
pub(crate) struct JobControl {
    go: AtomicBool,
    stop: AtomicBool,
    abort: AtomicBool,
    first_error: Mutex<Option<RunError>>,
}

impl JobControl {
    /// A job whose sources start as soon as every thread is ready (`go`), or only once
    /// [`JobControl::go`] is called (a PE waiting for the rest of its job).
    pub(crate) fn new(go: bool) -> Self {
        Self {
            go: AtomicBool::new(go),
            stop: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            first_error: Mutex::new(None),
        }
    }

    /// Lets the threads start their work loops.
    pub(crate) fn go(&self) {
        // SYNC: Release pairs with the Acquire load in `may_go`; nothing else is published
        // through it, the queues order the data.
        self.go.store(true, Ordering::Release);
    }

    pub(crate) fn may_go(&self) -> bool {
        self.go.load(Ordering::Acquire)
    }

    pub(crate) fn request_stop(&self) {
        // SYNC: Relaxed suffices: sources only need to see the flag eventually, and what they
        // do after seeing it (finish, send end-of-stream) is ordered by the queues themselves.
        self.stop.store(true, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn aborting(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }

    /// Records `error` from `instance` (unless an earlier error is already recorded, or this is
    /// the echo of an abort) and aborts the job.
    pub(crate) fn fail(&self, instance: String, error: OperatorError) {
        if !matches!(error, OperatorError::Aborted) {
            let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert(RunError::Operator { instance, error });
        }
        self.abort.store(true, Ordering::Relaxed);
    }

    /// Leaves at once without recording a cause (the launcher reports why).
    pub(crate) fn abort(&self) {
        self.abort.store(true, Ordering::Relaxed);
    }

    /// Records a runtime failure that is not an operator's and aborts the job.
    pub(crate) fn fail_with(&self, error: RunError) {
        let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert(error);
        self.abort.store(true, Ordering::Relaxed);
    }

    pub(crate) fn take_error(&self) -> Option<RunError> {
        let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
        let error = first.take();
        if error.is_none() && self.aborting() {
            return Some(RunError::Aborted);
        }
        error
    }
}

/// Asks a running job to stop: sources finish, in-flight tuples drain, the job ends normally.
#[derive(Clone)]
pub struct StopHandle {
    control: Arc<JobControl>,
}

impl StopHandle {
    pub(crate) fn new(control: Arc<JobControl>) -> Self {
        Self { control }
    }

    /// Requests the stop; returns at once.
    pub fn stop(&self) {
        self.control.request_stop();
    }

    /// Whether a stop was already requested.
    pub fn is_stopping(&self) -> bool {
        self.control.stop_requested()
    }
}
