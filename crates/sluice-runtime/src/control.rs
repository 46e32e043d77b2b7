//! The flags every thread of a job watches: stop (drain and end) and abort (leave now), and
//! the first error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sluice_graph::OperatorError;

use crate::RunError;

/// Job-wide control shared by all threads.
#[derive(Default)]
pub(crate) struct JobControl {
    stop: AtomicBool,
    abort: AtomicBool,
    first_error: Mutex<Option<RunError>>,
}

impl JobControl {
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
