//! Liveness of a job's threads, and the deadlines of a drain and of an abort.
//!
//! Every thread of a job has a progress counter it moves on: each round of its work loop (a
//! round is at most [`sluice_sync::PARK_TIMEOUT`] apart even when idle), each batch an operator
//! emits, and each wait on a full queue (backpressure is no stall: the thread downstream is
//! the one to watch). The thread that waits for a job ([`wait_threads`]) looks at the counters
//! every [`WATCH_PERIOD`]; a thread whose counter has not moved for
//! [`RunOptions::stall_timeout`](crate::RunOptions::stall_timeout) (5 s by default) is stuck
//! in one call of an operator (an endless loop, a read that never returns) and fails the job,
//! named with its operators. Such a thread cannot be stopped: it is left behind, and the
//! process should exit (a PE does). An operator call that legitimately takes longer than the
//! timeout needs a longer one (`--stall-timeout`): a `finish` writing a very large output, a
//! sink whose write to a network client blocks (backpressure from outside the job is a wait in
//! a call). Start hooks (a sink accepting its client) are not watched.
//!
//! A drain that has not ended [`RunOptions::drain_timeout`](crate::RunOptions::drain_timeout)
//! after the stop (30 s by default) aborts the job. An aborted job's threads get
//! [`ABORT_GRACE`] to leave; the wait returns without those that did not.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sluice_sync::CachePadded;

use crate::control::JobControl;
use crate::{InstanceReport, RunError, RunOptions};

/// How often the waiting thread looks at the job's threads.
pub(crate) const WATCH_PERIOD: Duration = Duration::from_millis(5);
/// How long an aborted job's threads get to leave their loops.
pub(crate) const ABORT_GRACE: Duration = Duration::from_secs(2);

/// A thread's progress: a counter only that thread moves, 0 until its work loop starts. Each on
/// a cache line of its own, so threads moving theirs do not slow each other.
#[derive(Debug, Default, Clone)]
pub(crate) struct Progress(Arc<CachePadded<AtomicU64>>);

impl Progress {
    /// The thread moved on. A load and a store, not a read-modify-write: only this thread
    /// writes the counter.
    #[inline]
    pub(crate) fn beat(&self) {
        // SYNC: Relaxed: the watcher only needs to see the value change eventually; nothing
        // is published through it.
        let next = self.0.load(Ordering::Relaxed).wrapping_add(1).max(1);
        self.0.store(next, Ordering::Relaxed);
    }

    fn read(&self) -> u64 {
        // SYNC: pairs with the Relaxed store in `beat`; see there.
        self.0.load(Ordering::Relaxed)
    }
}

/// One running thread of a job.
pub struct Worker {
    pub(crate) handle: JoinHandle<Vec<InstanceReport>>,
    pub(crate) name: String,
    /// Its instances, for messages.
    pub(crate) operators: String,
    pub(crate) progress: Progress,
}

/// What the watch last saw of one thread.
struct Seen {
    value: u64,
    since: Instant,
    stuck: bool,
}

/// Waits for `workers` to end, calling `tick` every round (it may request a stop); fails the
/// job when a thread stalls, when a drain passes its deadline, and leaves an aborted job after
/// [`ABORT_GRACE`]. Returns the reports of the threads that ended.
pub fn wait_threads(
    workers: Vec<Worker>,
    control: &JobControl,
    options: &RunOptions,
    mut tick: impl FnMut(),
) -> Vec<InstanceReport> {
    let now = Instant::now();
    let mut seen: Vec<Seen> = workers
        .iter()
        .map(|w| Seen {
            value: w.progress.read(),
            since: now,
            stuck: false,
        })
        .collect();
    let mut drain_began = None;
    let mut abort_began = None;
    loop {
        tick();
        let now = Instant::now();
        let running = |w: &Worker, s: &Seen| !s.stuck && !w.handle.is_finished();
        if !workers.iter().zip(&seen).any(|(w, s)| running(w, s)) {
            break;
        }
        if control.aborting() {
            if abort_began.get_or_insert(now).elapsed() >= ABORT_GRACE {
                break;
            }
        } else {
            if control.stop_requested() {
                let began = *drain_began.get_or_insert(now);
                if now.duration_since(began) >= options.drain_timeout {
                    let waiting: Vec<String> = workers
                        .iter()
                        .zip(&seen)
                        .filter(|(w, s)| running(w, s))
                        .map(|(w, _)| format!("thread '{}'", w.name))
                        .collect();
                    control.fail_with(RunError::DrainTimeout {
                        limit: options.drain_timeout,
                        waiting: format!(" (still draining: {})", waiting.join(", ")),
                    });
                }
            }
            for (worker, seen) in workers.iter().zip(&mut seen) {
                let value = worker.progress.read();
                if value != seen.value {
                    (seen.value, seen.since) = (value, now);
                } else if value != 0
                    && running(worker, seen)
                    && now.duration_since(seen.since) >= options.stall_timeout
                {
                    seen.stuck = true;
                    control.fail_with(RunError::Stalled {
                        thread: worker.name.clone(),
                        operators: worker.operators.clone(),
                        stalled_for: options.stall_timeout,
                    });
                }
            }
        }
        std::thread::sleep(WATCH_PERIOD);
    }
    let mut instances = Vec::new();
    for worker in workers {
        if !worker.handle.is_finished() {
            // Stuck, or slow to leave an aborted job: left behind.
            continue;
        }
        match worker.handle.join() {
            Ok(reports) => instances.extend(reports),
            Err(_) => control.fail(
                worker.name,
                sluice_graph::OperatorError::Panicked("a runtime thread panicked".into()),
            ),
        }
    }
    instances
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(name: &str, body: impl FnOnce(Progress) + Send + 'static) -> Worker {
        let progress = Progress::default();
        let moved = progress.clone();
        Worker {
            handle: std::thread::spawn(move || {
                body(moved);
                Vec::new()
            }),
            name: name.into(),
            operators: format!("{name}-op"),
            progress,
        }
    }

    fn quick() -> RunOptions {
        RunOptions {
            stall_timeout: Duration::from_millis(200),
            drain_timeout: Duration::from_millis(300),
            ..RunOptions::default()
        }
    }

    #[test]
    fn a_thread_that_stops_moving_fails_the_job_and_is_left_behind() {
        let control = JobControl::new(true);
        let (release, stuck) = std::sync::mpsc::channel::<()>();
        let workers = vec![
            worker("busy", |p| {
                for _ in 0..100 {
                    p.beat();
                    std::thread::sleep(Duration::from_millis(2));
                }
            }),
            worker("stuck", move |p| {
                p.beat();
                let _ = stuck.recv();
            }),
        ];
        wait_threads(workers, &control, &quick(), || {});
        let error = control.take_error().unwrap().to_string();
        assert!(
            error.starts_with(
                "thread 'stuck' (operators: stuck-op) made no progress for 0.2 s: an operator \
                 is stuck in a call"
            ),
            "{error}"
        );
        drop(release);
    }

    #[test]
    fn a_thread_not_yet_started_or_moving_is_not_stuck() {
        let control = JobControl::new(true);
        let workers = vec![
            worker("waiting", |_| {
                std::thread::sleep(Duration::from_millis(400))
            }),
            worker("moving", |p| {
                for _ in 0..200 {
                    p.beat();
                    std::thread::sleep(Duration::from_millis(2));
                }
            }),
        ];
        wait_threads(workers, &control, &quick(), || {});
        assert!(control.take_error().is_none());
    }

    #[test]
    fn a_drain_past_its_deadline_aborts_the_job() {
        let control = JobControl::new(true);
        control.request_stop();
        let (release, draining) = std::sync::mpsc::channel::<()>();
        let workers = vec![worker("sink", move |p| loop {
            p.beat();
            match draining.recv_timeout(Duration::from_millis(2)) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                _ => break,
            }
        })];
        wait_threads(workers, &control, &quick(), || {});
        assert_eq!(
            control.take_error().unwrap().to_string(),
            "the drain did not end within 0.3 s of the stop (still draining: thread 'sink'); \
             the job was aborted"
        );
        drop(release);
    }
}
