//! The processes an application runs beside its job and outside it (OMDP's feed senders):
//! started once the job's sources run, watched while it runs, and stopped when it ends.
//!
//! A companion is this `sluice` binary with the arguments the application gives. One that
//! cannot start, or that exits with a failure while the job runs, stops the job, and the run
//! fails with its name after the job has drained; what the companion said is on standard
//! error already. A companion that feeds the job ([`Companion::feeds_the_job`]) ends the
//! job's input: once every such companion has exited well, the job takes what is still on its
//! way for [`COMPANION_DRAIN`], then is stopped, as a source that ended stops it. One still
//! running when the job ends is asked to stop (SIGTERM), so that it says what it did, and
//! killed if it has not ended within [`COMPANION_STOP_TIMEOUT`]. What a companion printed on
//! standard output goes to the application when it asked for it ([`Companion::output`]).

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sluice_apps::{Companion, COMPANION_DRAIN, COMPANION_STOP_TIMEOUT};
use sluice_runtime::StopHandle;

/// How often a watcher looks at its companion.
const WATCH_EVERY: Duration = Duration::from_millis(20);

/// The running companions of a job.
#[derive(Default)]
pub(crate) struct Companions {
    running: Vec<Running>,
    /// The first failure: a companion that could not start or exited with a failure.
    failure: Arc<Mutex<Option<String>>>,
    ended: Arc<AtomicBool>,
    /// Companions feeding the job that have not yet exited well.
    // SYNC: decremented by each feeding companion's watcher; the one that takes it to 0 stops
    // the job and sets `ended_input` (Release), read by `ended_the_input` (Acquire).
    feeding: Arc<AtomicUsize>,
    /// Whether the companions feeding the job ended, and so stopped it.
    ended_input: Arc<AtomicBool>,
}

struct Running {
    companion: Companion,
    child: Arc<Mutex<Child>>,
    watcher: JoinHandle<()>,
}

impl Companions {
    /// Starts every companion; a failure to start one stops the job through `stop`.
    pub(crate) fn start(&mut self, companions: &[Companion], stop: &StopHandle) {
        let feeding = companions.iter().filter(|c| c.feeds_the_job).count();
        // SYNC: before any watcher starts (thread spawn orders it before their loads).
        self.feeding.store(feeding, Ordering::Relaxed);
        for companion in companions {
            if let Err(error) = self.start_one(companion, stop) {
                self.fail(stop, error);
            }
        }
    }

    fn start_one(&mut self, companion: &Companion, stop: &StopHandle) -> Result<(), String> {
        let exe = std::env::current_exe().map_err(|e| {
            format!(
                "cannot find the sluice binary to start the {}: {e}",
                companion.name
            )
        })?;
        let child = Command::new(exe)
            .args(&companion.args)
            .stdin(Stdio::null())
            .stdout(if companion.output.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .spawn()
            .map_err(|e| format!("cannot start the {}: {e}", companion.name))?;
        let child = Arc::new(Mutex::new(child));
        let watched = Arc::clone(&child);
        let (ended, failure, stop) = (
            Arc::clone(&self.ended),
            Arc::clone(&self.failure),
            stop.clone(),
        );
        let (feeding, ended_input) = (Arc::clone(&self.feeding), Arc::clone(&self.ended_input));
        let (name, feeds) = (companion.name.clone(), companion.feeds_the_job);
        let watcher = std::thread::spawn(move || {
            while !ended.load(Ordering::Acquire) {
                let status = watched.lock().map(|mut c| c.try_wait());
                match status {
                    Ok(Ok(None)) => std::thread::sleep(WATCH_EVERY),
                    Ok(Ok(Some(status))) if status.success() => {
                        if feeds && feeding.fetch_sub(1, Ordering::AcqRel) == 1 {
                            // The input is over: let the job take what is on its way.
                            std::thread::sleep(COMPANION_DRAIN);
                            ended_input.store(true, Ordering::Release);
                            stop.stop();
                        }
                        return;
                    }
                    Ok(Ok(Some(status))) => {
                        record(&failure, &stop, describe(&name, status));
                        return;
                    }
                    Ok(Err(e)) => {
                        record(&failure, &stop, format!("cannot watch the {name}: {e}"));
                        return;
                    }
                    Err(_) => return,
                }
            }
        });
        self.running.push(Running {
            companion: companion.clone(),
            child,
            watcher,
        });
        Ok(())
    }

    fn fail(&self, stop: &StopHandle, error: String) {
        record(&self.failure, stop, error);
    }

    /// Whether the companions feeding the job ended, which stopped it: its sources' input was
    /// over, not cut short.
    pub(crate) fn ended_the_input(&self) -> bool {
        self.ended_input.load(Ordering::Acquire)
    }

    /// Stops the companions still running, hands each one's output to the application when
    /// it asked for it, and reports the first failure, if any.
    pub(crate) fn stop(self) -> anyhow::Result<()> {
        self.ended.store(true, Ordering::Release);
        for running in self.running {
            let _ = running.watcher.join();
            let Ok(mut child) = running.child.lock() else {
                tracing::warn!("lost track of the {}", running.companion.name);
                continue;
            };
            end(&mut child, &running.companion.name);
            if let (Some(output), Some(mut stdout)) =
                (&running.companion.output, child.stdout.take())
            {
                let mut text = String::new();
                match stdout.read_to_string(&mut text) {
                    Ok(_) => {
                        let _ = output.set(text);
                    }
                    Err(e) => tracing::warn!(
                        "cannot read what the {} printed: {e}",
                        running.companion.name
                    ),
                }
            }
        }
        let failure = self.failure.lock().ok().and_then(|mut f| f.take());
        match failure {
            Some(failure) => Err(anyhow::anyhow!(failure)),
            None => Ok(()),
        }
    }
}

/// Ends `child` if it still runs: SIGTERM, then SIGKILL after [`COMPANION_STOP_TIMEOUT`].
fn end(child: &mut Child, name: &str) {
    if !matches!(child.try_wait(), Ok(None)) {
        return;
    }
    let pid = rustix::process::Pid::from_child(child);
    if rustix::process::kill_process(pid, rustix::process::Signal::TERM).is_ok() {
        let deadline = Instant::now() + COMPANION_STOP_TIMEOUT;
        while Instant::now() < deadline {
            if !matches!(child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(WATCH_EVERY);
        }
        tracing::warn!(
            "the {name} did not end within {} s of being asked to: killed",
            COMPANION_STOP_TIMEOUT.as_secs_f64()
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Keeps the first failure and stops the job.
fn record(failure: &Mutex<Option<String>>, stop: &StopHandle, error: String) {
    if let Ok(mut first) = failure.lock() {
        if first.is_none() {
            tracing::error!("{error}; stopping the job");
            *first = Some(error);
        }
    }
    stop.stop();
}

fn describe(name: &str, status: ExitStatus) -> String {
    match status.code() {
        Some(code) => format!("the {name} failed (exit status {code})"),
        None => format!("the {name} was killed ({status})"),
    }
}
