//! The processes an application runs beside its job and outside it (OMDP's feed senders):
//! started once the job's sources run, watched while it runs, and stopped when it ends.
//!
//! A companion is this `sluice` binary with the arguments the application gives. One that
//! cannot start, or that exits with a failure while the job runs, stops the job, and the run
//! fails with its name after the job has drained; what the companion said is on standard
//! error already. One still running when the job ends is killed: it only feeds the job.

use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use sluice_apps::Companion;
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
}

struct Running {
    name: String,
    child: Arc<Mutex<Child>>,
    watcher: JoinHandle<()>,
}

impl Companions {
    /// Starts every companion; a failure to start one stops the job through `stop`.
    pub(crate) fn start(&mut self, companions: &[Companion], stop: &StopHandle) {
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
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start the {}: {e}", companion.name))?;
        let child = Arc::new(Mutex::new(child));
        let (watched, ended, failure, stop) = (
            Arc::clone(&child),
            Arc::clone(&self.ended),
            Arc::clone(&self.failure),
            stop.clone(),
        );
        let name = companion.name.clone();
        let watcher = std::thread::spawn(move || {
            while !ended.load(Ordering::Acquire) {
                let status = watched.lock().map(|mut c| c.try_wait());
                match status {
                    Ok(Ok(None)) => std::thread::sleep(WATCH_EVERY),
                    Ok(Ok(Some(status))) if status.success() => return,
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
            name: companion.name.clone(),
            child,
            watcher,
        });
        Ok(())
    }

    fn fail(&self, stop: &StopHandle, error: String) {
        record(&self.failure, stop, error);
    }

    /// Stops the companions still running and reports the first failure, if any.
    pub(crate) fn stop(self) -> anyhow::Result<()> {
        self.ended.store(true, Ordering::Release);
        for running in self.running {
            let _ = running.watcher.join();
            if let Ok(mut child) = running.child.lock() {
                if matches!(child.try_wait(), Ok(None)) {
                    let _ = child.kill();
                }
                let _ = child.wait();
            } else {
                tracing::warn!("lost track of the {}", running.name);
            }
        }
        let failure = self.failure.lock().ok().and_then(|mut f| f.take());
        match failure {
            Some(failure) => Err(anyhow::anyhow!(failure)),
            None => Ok(()),
        }
    }
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
