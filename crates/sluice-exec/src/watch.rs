//! Liveness of a job's threads, and the deadlines of a drain and of an abort.
//!
//! Every thread of a job has a progress counter it moves on: each round of its work loop (a
//! round is at most [`sluice_sync::PARK_TIMEOUT`] apart even when idle, so a thread waiting
//! for input is never stalled), each batch an operator emits, and each wait on a full queue
//! (backpressure is no stall: the thread downstream is the one to watch). The thread that
//! waits for a job ([`wait_threads`]) looks at the counters every [`WATCH_PERIOD`]; a thread
//! whose counter has not moved for
//! [`RunOptions::stall_timeout`](crate::RunOptions::stall_timeout) (5 s by default) of the time
//! it could have gone on is stuck in one call of an operator (an endless loop, a read that
//! never returns) and fails the job, named with its operators. The time it spent ready to run
//! but waiting for a CPU (on a busy machine's run queue: the kernel's `schedstat` and `stat`
//! of the thread, read for a thread silent for [`SCHED_READ_PERIOD`], at most that often) does
//! not count: a starved thread holds work but is not stuck ([`Silence`]). Such a thread cannot be stopped: it is left behind, and the
//! process should exit (a PE does). An operator call that legitimately takes longer than the
//! timeout needs a longer one (`--stall-timeout`): a `finish` writing a very large output, a
//! sink whose write to a network client blocks (backpressure from outside the job is a wait in
//! a call). Start hooks (a sink accepting its client) are not watched.
//!
//! A drain that has not ended [`RunOptions::drain_timeout`](crate::RunOptions::drain_timeout)
//! after the stop (30 s by default) aborts the job. An aborted job's threads get
//! [`ABORT_GRACE`] to leave; the wait returns without those that did not.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
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

/// How often the scheduling statistics of a thread that has not moved are read, and how long
/// it must be silent before they are.
pub(crate) const SCHED_READ_PERIOD: Duration = Duration::from_millis(20);

/// A thread's progress: a counter only that thread moves, 0 until its work loop starts, on a
/// cache line of its own, so threads moving theirs do not slow each other; and the thread's id
/// in the kernel, for its scheduling statistics (0 until it records it).
#[derive(Debug, Default, Clone)]
pub(crate) struct Progress(Arc<(CachePadded<AtomicU64>, AtomicU32)>);

impl Progress {
    /// The thread moved on. A load and a store, not a read-modify-write: only this thread
    /// writes the counter.
    #[inline]
    pub(crate) fn beat(&self) {
        // SYNC: Relaxed: the watcher only needs to see the value change eventually; nothing
        // is published through it.
        let next = self.0 .0.load(Ordering::Relaxed).wrapping_add(1).max(1);
        self.0 .0.store(next, Ordering::Relaxed);
    }

    /// Records the calling thread as the one whose progress this is.
    pub(crate) fn record_thread(&self) {
        // `/proc/thread-self` links to `PID/task/TID`.
        let tid = std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|link| link.file_name()?.to_str()?.parse().ok())
            .unwrap_or(0);
        // SYNC: Relaxed, read by `sched`; a thread not yet recorded is one whose waits are not
        // known, and it is watched by the wall clock alone.
        self.0 .1.store(tid, Ordering::Relaxed);
    }

    fn read(&self) -> u64 {
        // SYNC: pairs with the Relaxed store in `beat`; see there.
        self.0 .0.load(Ordering::Relaxed)
    }

    /// What the kernel says of the thread now; `None` where that is not known.
    fn sched(&self) -> Option<Sched> {
        // SYNC: pairs with the Relaxed store in `record_thread`.
        let tid = self.0 .1.load(Ordering::Relaxed);
        (tid != 0).then(|| Sched::of_task(&format!("/proc/self/task/{tid}")))?
    }
}

/// What the kernel says of a thread: the CPU time it ran and the time it waited, ready, for a
/// CPU (both in its life; a wait is added once it ends), and whether it is running or ready
/// to.
#[derive(Debug, Clone, Copy)]
pub struct Sched {
    ran: Duration,
    waited: Duration,
    runnable: bool,
}

impl Sched {
    /// Of the thread whose `/proc` directory is `task` (`/proc/PID/task/TID`): its `schedstat`
    /// and `stat`; `None` where they cannot be read.
    pub fn of_task(task: &str) -> Option<Sched> {
        let stat = std::fs::read_to_string(format!("{task}/schedstat")).ok()?;
        let mut fields = stat.split_whitespace().map(|f| f.parse::<u64>().ok());
        let (ran, waited) = (fields.next()??, fields.next()??);
        // The state follows the command's name, which is in parentheses.
        let state = std::fs::read_to_string(format!("{task}/stat")).ok()?;
        let state = state.rsplit_once(')')?.1.split_whitespace().next()?;
        Some(Sched {
            ran: Duration::from_nanos(ran),
            waited: Duration::from_nanos(waited),
            runnable: state == "R",
        })
    }
}

/// How long a thread (a job's, or a PE's heartbeat) has been silent though it could have gone
/// on: until it has been silent for a grace period, the time since it was last heard; then,
/// every [`SCHED_READ_PERIOD`], what the kernel says of it ([`Sched`]): of a period at whose
/// end it is ready to run, only the CPU time it had (the rest it waited for a CPU); of any
/// other, the period less the waits for a CPU that ended in it. Without what the kernel says,
/// the whole period.
#[derive(Debug, Clone, Copy)]
pub struct Silence {
    since: Instant,
    grace: Duration,
    /// The silence up to the last reading, and that reading with its time.
    counted: Duration,
    last_read: Option<(Instant, Option<Sched>)>,
}

impl Silence {
    /// A silence from `since`, whose thread is read only after `grace`.
    pub fn new(since: Instant, grace: Duration) -> Self {
        Self {
            since,
            grace,
            counted: Duration::ZERO,
            last_read: None,
        }
    }

    /// The silence as of `now`, reading the thread with `read` when it is time to.
    pub fn length(&mut self, now: Instant, read: impl FnOnce() -> Option<Sched>) -> Duration {
        let (read_at, before) = match self.last_read {
            None if now.duration_since(self.since) < self.grace => {
                return now.duration_since(self.since)
            }
            None => {
                self.counted = now.duration_since(self.since);
                self.last_read = Some((now, read()));
                return self.counted;
            }
            Some(last) => last,
        };
        let period = now.duration_since(read_at);
        if period >= SCHED_READ_PERIOD {
            let after = read();
            self.counted += match (before, after) {
                (Some(before), Some(after)) if after.runnable => {
                    after.ran.saturating_sub(before.ran).min(period)
                }
                (Some(before), Some(after)) => {
                    period - after.waited.saturating_sub(before.waited).min(period)
                }
                _ => period,
            };
            self.last_read = Some((now, after));
        }
        self.counted
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
    stuck: bool,
    /// Since the counter last moved.
    silence: Silence,
}

impl Seen {
    fn new(value: u64, now: Instant) -> Self {
        Self {
            value,
            stuck: false,
            silence: Silence::new(now, SCHED_READ_PERIOD),
        }
    }
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
        .map(|w| Seen::new(w.progress.read(), now))
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
                    *seen = Seen {
                        stuck: seen.stuck,
                        ..Seen::new(value, now)
                    };
                } else if value != 0
                    && running(worker, seen)
                    && seen.silence.length(now, || worker.progress.sched()) >= options.stall_timeout
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
    fn a_thread_starved_of_a_cpu_is_not_stuck() {
        // The watched thread shares a core with a spinning one and runs at nice 19: it gets
        // a slice in about seventy, so the wall clock alone sees it silent for longer than
        // the timeout although it moves on whenever it runs.
        let core = core_affinity::get_core_ids()
            .and_then(|ids| ids.first().copied())
            .expect("a core");
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spinning = done.clone();
        let spinner = std::thread::spawn(move || {
            core_affinity::set_for_current(core);
            while !spinning.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        let control = JobControl::new(true);
        let workers = vec![worker("starved", move |p| {
            core_affinity::set_for_current(core);
            p.record_thread();
            // On Linux, the calling thread's nice value.
            rustix::process::setpriority_process(None, 19).expect("nice 19");
            let began = Instant::now();
            while began.elapsed() < Duration::from_secs(2) {
                p.beat();
            }
        })];
        let options = RunOptions {
            stall_timeout: Duration::from_millis(100),
            ..quick()
        };
        wait_threads(workers, &control, &options, || {});
        done.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
        let error = control.take_error().map(|e| e.to_string());
        assert_eq!(error, None);
    }

    #[test]
    fn a_silence_counts_the_time_a_thread_could_go_on_and_not_its_waits_for_a_cpu() {
        let start = Instant::now();
        let ms = Duration::from_millis;
        let at = |n| start + ms(n);
        let sched = |ran, waited, runnable| {
            Some(Sched {
                ran: ms(ran),
                waited: ms(waited),
                runnable,
            })
        };
        let mut silence = Silence::new(start, ms(10));
        // Within the grace, the wall clock; then the silence so far, and a first reading.
        assert_eq!(silence.length(at(5), || panic!("read early")), ms(5));
        assert_eq!(silence.length(at(10), || sched(0, 0, true)), ms(10));
        // Not read again within a period.
        assert_eq!(silence.length(at(15), || panic!("read early")), ms(10));
        // Ready to run at the end of a period of 100 ms, having run 2 ms of it: 2 ms.
        assert_eq!(silence.length(at(110), || sched(2, 0, true)), ms(12));
        // Asleep at the end of a period: all of it but the 30 ms it waited for a CPU.
        assert_eq!(silence.length(at(210), || sched(2, 30, false)), ms(82));
        // Nothing known: all of it.
        assert_eq!(silence.length(at(310), || None), ms(182));
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
