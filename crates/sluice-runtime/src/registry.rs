//! The job registry: every job a program starts ([`crate::start`], [`crate::run`], the
//! `sluice` command's built-in applications alike) registers its launching process in a
//! per-user directory while it runs, and `sluice jobs`, `sluice stop`, `sluice top` and
//! `sluice savepoint` find it there.
//!
//! The directory is `$XDG_RUNTIME_DIR/sluice/jobs`, or `/tmp/sluice-UID/jobs` without it; it
//! and its parent are made mode 0700 whatever the umask and checked on every open (a
//! directory of this user's, mode 0700, not a link), as a job's control directory is. A job
//! `ID` (`APP-PID`; `APP.N-PID` for the Nth job after the first that one process starts)
//! keeps two entries there while it runs: `ID.json` (its id, application, plan, PEs, start
//! time, pid, control socket, and its checkpoint directory when it takes checkpoints) and
//! `ID.sock`, a Unix socket (mode 0600) over which another process of the same user asks for
//! its latest [`MetricsSnapshot`] or its checkpoints' figures, asks it to stop, or asks it for
//! a savepoint, one JSON line each way ([`Request`], [`Reply`]). A stop drains the job as
//! Ctrl-C does. A savepoint is answered on a thread of its own once it is kept (other
//! questions are answered meanwhile), at most [`MAX_SAVEPOINTS_WAITING`] at once. The
//! launching process removes both entries when the job ends (its [`Registration`] is
//! dropped, which also ends the socket's thread); a job that died without removing them (its
//! pid gone, or no process listening on its socket any more: its pid was reused) is not
//! listed, and its entries are removed by the first lookup (or the next registration) that
//! finds them, as is a socket or a partial entry left without its entry by a process that is
//! gone. A job whose process lives but does not answer (stopped, starved) is listed as not
//! answering and keeps its entries: only a process that is gone loses them. The registry is
//! not under `$TMPDIR`: every job of the user must find the same one. As it ends, a job keeps
//! its summary beside the registry ([`crate::summaries`]), for `sluice ui` to list.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::checkpoint_figures::CheckpointFigures;
use crate::summaries::{epoch_secs, JobSummary, Outcome};
use sluice_plan::PhysicalPlan;

use crate::{CheckpointHandle, MetricsHandle, MetricsSnapshot, RunOptions, RunningJob, StopHandle};

/// The mode of the registry's directories.
const PRIVATE_DIR_MODE: u32 = 0o700;
/// How long a client waits for a job's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request or reply line read.
const MAX_LINE: u64 = 16 << 20;
/// The most savepoints a job waits for at once, each on a thread of its own; one more is
/// refused (the next checkpoint serves every savepoint asked for before it, so more would
/// only cost threads).
pub const MAX_SAVEPOINTS_WAITING: usize = 4;

/// Why the registry, or a job in it, could not be used.
#[derive(Debug, Error)]
pub enum RegistryError {
    /// A file or socket operation failed.
    #[error("cannot {what}: {source}")]
    Io {
        /// What was being done, e.g. `listen on /run/user/1000/sluice/jobs/a-1.sock`.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The registry's directory is not private to this user.
    #[error("the job registry {dir} is not private: {why}")]
    NotPrivate {
        /// The directory.
        dir: PathBuf,
        /// Why not.
        why: String,
    },
    /// A job's answer (or a client's request) is not what the protocol says.
    #[error("the job's answer is not understood: {0}")]
    Protocol(#[from] serde_json::Error),
    /// A job answered another question than the one asked.
    #[error("the job answered out of turn")]
    OutOfTurn,
}

impl RegistryError {
    /// Whether no process listens on the job's socket, which a job's process does for as long
    /// as it lives, even stopped.
    pub fn nobody_listens(&self) -> bool {
        matches!(self, Self::Io { source, .. }
            if source.kind() == std::io::ErrorKind::ConnectionRefused)
    }
}

/// `what` failed with `source`.
fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RegistryError {
    let what = what.into();
    move |source| RegistryError::Io { what, source }
}

/// What the registry holds of one running job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobEntry {
    /// `APP-PID` (`APP.N-PID`): unique among the jobs running on this host.
    pub id: String,
    /// The application.
    pub app: String,
    /// The plan it runs under.
    pub plan: String,
    /// Its PEs.
    pub pes: usize,
    /// When it started, in seconds since the Unix epoch.
    pub started: u64,
    /// The launching process.
    pub pid: u32,
    /// Its control socket.
    pub socket: PathBuf,
    /// Its checkpoint directory (absolute); `None`: it takes no checkpoints.
    #[serde(default)]
    pub checkpoints: Option<PathBuf>,
}

/// What a client asks a job.
#[derive(Debug, Serialize, Deserialize)]
enum Request {
    /// Its latest metrics.
    Metrics,
    /// The plan it runs.
    Plan,
    /// Drain and stop, as Ctrl-C does.
    Stop,
    /// What its checkpoints and restarts did so far.
    Checkpoints,
    /// Take a checkpoint now and keep it as a savepoint in `dir` (absolute; `None`: a new
    /// directory in the job's checkpoint directory), waiting for it at most `wait_ms`.
    Savepoint { dir: Option<PathBuf>, wait_ms: u64 },
}

/// What a job answers.
#[derive(Debug, Serialize, Deserialize)]
enum Reply {
    Metrics(MetricsSnapshot),
    Plan(PhysicalPlan),
    Stopping,
    /// `None`: the job takes no checkpoints.
    Checkpoints(Option<CheckpointFigures>),
    /// The savepoint's directory, or why there is none.
    Savepoint(Result<PathBuf, String>),
}

/// The registry's directory, made and checked: `$XDG_RUNTIME_DIR/sluice/jobs` or
/// `/tmp/sluice-UID/jobs`.
pub fn registry_dir() -> Result<PathBuf, RegistryError> {
    let parent = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(runtime) => PathBuf::from(runtime).join("sluice"),
        // Not `$TMPDIR`: every job of the user must find the same registry.
        None => PathBuf::from(format!(
            "/tmp/sluice-{}",
            rustix::process::geteuid().as_raw()
        )),
    };
    let dir = parent.join("jobs");
    for d in [&parent, &dir] {
        make_private_dir(d)?;
    }
    Ok(dir)
}

/// Makes `dir` (mode 0700) unless it exists, then checks it is private.
///
/// It is made with mode 0700, not made and then narrowed: another process of the user (a job
/// registering, `sluice jobs` listing) that finds it between the two would see the umask's
/// mode and refuse it, and a job refused so runs unlisted.
pub(crate) fn make_private_dir(dir: &Path) -> Result<(), RegistryError> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .mode(PRIVATE_DIR_MODE)
        .create(dir)
    {
        // The umask can only have taken bits away; `chmod` is not subject to it.
        Ok(()) => std::fs::set_permissions(dir, std::fs::Permissions::from_mode(PRIVATE_DIR_MODE))
            .map_err(io(format!("make {} private", dir.display())))?,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(format!("make {}", dir.display()))(e)),
    }
    match crate::link::why_not_private(dir) {
        None => Ok(()),
        Some(why) => Err(RegistryError::NotPrivate {
            dir: dir.to_path_buf(),
            why,
        }),
    }
}

/// A job's entries in the registry while it runs, and the thread answering on its socket;
/// removed (and the thread ended) when dropped.
pub struct Registration {
    /// The entry's file.
    path: PathBuf,
    /// What the entry says.
    entry: JobEntry,
    /// The plan the job runs.
    plan: Arc<PhysicalPlan>,
    // SYNC: set before the wake-up connection in `drop`; the socket's thread reads it after
    // each connection it accepts, so it sees it set once it accepts that one. Relaxed: the
    // connection itself orders them.
    closed: Arc<AtomicBool>,
}

impl Registration {
    /// The job's id in the registry (what `sluice jobs` lists, `sluice stop` takes).
    pub fn id(&self) -> &str {
        &self.entry.id
    }

    /// Keeps the summary of the job, which ended with `outcome` after `metrics` and
    /// `checkpoints` ([`crate::summaries`]); a summary that cannot be written is warned about.
    pub(crate) fn keep_summary(
        &self,
        outcome: (Outcome, Option<String>),
        metrics: MetricsSnapshot,
        checkpoints: Option<CheckpointFigures>,
    ) {
        let (outcome, error) = outcome;
        let summary = JobSummary {
            entry: self.entry.clone(),
            ended: epoch_secs(),
            outcome,
            error,
            plan: PhysicalPlan::clone(&self.plan),
            metrics,
            checkpoints,
        };
        if let Err(error) = crate::summaries::keep(&summary) {
            tracing::warn!("the job's summary is not kept (`sluice ui` will not list it): {error}");
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SYNC: see `closed`.
        self.closed.store(true, Ordering::Relaxed);
        // Wakes the socket's thread, which then leaves.
        let _ = UnixStream::connect(&self.entry.socket);
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(&self.entry.socket);
    }
}

/// What a job's control socket answers from.
struct Controls {
    plan: Arc<PhysicalPlan>,
    metrics: MetricsHandle,
    stop: StopHandle,
    /// Its checkpoints, when it takes them.
    checkpoints: Option<Checkpointing>,
}

/// A checkpointed job's checkpoints, for its control socket.
struct Checkpointing {
    /// Its checkpoint directory (absolute).
    dir: PathBuf,
    handle: CheckpointHandle,
    /// The default savepoint directories handed out so far.
    names: DefaultNames,
}

/// What a job is, for the registry.
struct JobIdentity<'a> {
    app: &'a str,
    plan: &'a str,
    pes: usize,
}

/// Registers `job`, which runs `plan`: its application is the plan's job, its plan the
/// plan's strategy. A registry that cannot be written is warned about; the job runs on.
pub(crate) fn register_job(
    job: &RunningJob,
    plan: &PhysicalPlan,
    options: &RunOptions,
) -> Option<Registration> {
    let checkpoints = job
        .checkpoint_handle()
        .zip(options.checkpoints)
        .map(|(handle, c)| Checkpointing {
            // Another process, elsewhere, finds it by the registry.
            dir: std::path::absolute(c.dir).unwrap_or_else(|_| c.dir.to_path_buf()),
            handle,
            names: DefaultNames::default(),
        });
    let controls = Controls {
        plan: Arc::new(plan.clone()),
        metrics: job.metrics_handle(),
        stop: job.stop_handle(),
        checkpoints,
    };
    let identity = JobIdentity {
        app: &plan.job,
        plan: &plan.strategy,
        pes: plan.pes.len(),
    };
    register(&identity, controls)
        .inspect_err(|error| {
            tracing::warn!(
                "the job is not in the job registry (`sluice jobs` will not list it): {error}"
            )
        })
        .ok()
}

/// Jobs this process registered so far: the first is `APP-PID`, later ones `APP.N-PID`.
// SYNC: a count only, no data behind it; Relaxed.
static REGISTERED: AtomicU64 = AtomicU64::new(0);

/// Registers the running job `identity` and answers on its socket from `controls`.
fn register(identity: &JobIdentity<'_>, controls: Controls) -> Result<Registration, RegistryError> {
    let dir = registry_dir()?;
    sweep(&dir);
    let pid = std::process::id();
    let app = identity.app;
    // SYNC: see `REGISTERED`.
    let id = match REGISTERED.fetch_add(1, Ordering::Relaxed) {
        0 => format!("{app}-{pid}"),
        n => format!("{app}.{n}-{pid}"),
    };
    let socket = dir.join(format!("{id}.sock"));
    // A job of an earlier process with this pid died without cleaning up.
    let _ = std::fs::remove_file(&socket);
    let listener =
        UnixListener::bind(&socket).map_err(io(format!("listen on {}", socket.display())))?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
        .map_err(io(format!("make {} private", socket.display())))?;
    let entry = JobEntry {
        id: id.clone(),
        app: app.to_string(),
        plan: identity.plan.to_string(),
        pes: identity.pes,
        started: epoch_secs(),
        pid,
        socket,
        checkpoints: controls.checkpoints.as_ref().map(|c| c.dir.clone()),
    };
    let path = dir.join(format!("{id}.json"));
    let closed = Arc::new(AtomicBool::new(false));
    let registration = Registration {
        path: path.clone(),
        entry: entry.clone(),
        plan: controls.plan.clone(),
        closed: closed.clone(),
    };
    // Written whole, then renamed: a reader never sees half an entry.
    let partial = dir.join(format!(".{id}.json.partial"));
    serde_json::to_vec(&entry)
        .map_err(std::io::Error::from)
        .and_then(|bytes| write_whole(&partial, &path, &bytes))
        .map_err(io(format!("register the job in {}", dir.display())))?;
    let answering = Arc::new(Answering {
        controls,
        savepoints_waiting: AtomicUsize::new(0),
    });
    std::thread::Builder::new()
        .name("sluice-jobs".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                // SYNC: see `Registration::closed`.
                if closed.load(Ordering::Relaxed) {
                    break;
                }
                // One client at a time: each asks one short question (a savepoint's wait is
                // on a thread of its own).
                let _ = answer(stream, &answering);
            }
        })
        .map_err(io("start the registry's thread"))?;
    Ok(registration)
}

/// What the socket's thread answers from.
struct Answering {
    controls: Controls,
    /// Savepoints being waited for, each on a thread of its own.
    // SYNC: a count only, no data behind it: incremented by the socket's thread before it
    // starts a savepoint's thread, decremented by that thread once it answered; Relaxed.
    savepoints_waiting: AtomicUsize,
}

/// Reads one request from `stream` and answers it.
fn answer(stream: UnixStream, answering: &Arc<Answering>) -> Result<(), RegistryError> {
    let socket = io("answer on the job's socket");
    stream
        .set_read_timeout(Some(ANSWER_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(ANSWER_TIMEOUT)))
        .and_then(|()| {
            let mut line = String::new();
            BufReader::new(std::io::Read::take(&stream, MAX_LINE))
                .read_line(&mut line)
                .map(|_| line)
        })
        .map_err(socket)
        .and_then(|line| Ok(serde_json::from_str::<Request>(&line)?))
        .and_then(|request| reply(request, stream, answering))
}

/// Answers `request` on `stream`.
fn reply(
    request: Request,
    stream: UnixStream,
    answering: &Arc<Answering>,
) -> Result<(), RegistryError> {
    let controls = &answering.controls;
    let reply = match request {
        Request::Metrics => Reply::Metrics(controls.metrics.snapshot()),
        Request::Plan => Reply::Plan(PhysicalPlan::clone(&controls.plan)),
        Request::Stop => {
            if !controls.stop.is_stopping() {
                // Written, not `eprintln!`: a closed standard error must not panic here.
                let _ = writeln!(
                    std::io::stderr(),
                    "stopping: asked by `sluice stop`; draining in-flight tuples"
                );
                controls.stop.stop();
            }
            Reply::Stopping
        }
        Request::Checkpoints => Reply::Checkpoints(
            controls
                .checkpoints
                .as_ref()
                .map(|c| CheckpointFigures::from(&c.handle.summary())),
        ),
        Request::Savepoint { dir, wait_ms } => {
            // SYNC: see `Answering::savepoints_waiting`.
            let waiting = answering.savepoints_waiting.fetch_add(1, Ordering::Relaxed);
            if waiting >= MAX_SAVEPOINTS_WAITING {
                answering.savepoints_waiting.fetch_sub(1, Ordering::Relaxed);
                Reply::Savepoint(Err(format!(
                    "{waiting} savepoints are being taken already (MAX_SAVEPOINTS_WAITING is \
                     {MAX_SAVEPOINTS_WAITING}); ask again once they are kept"
                )))
            } else {
                let answering = answering.clone();
                let wait = Duration::from_millis(wait_ms);
                std::thread::Builder::new()
                    .name("sluice-savepoint".into())
                    .spawn(move || {
                        let kept =
                            take_savepoint(answering.controls.checkpoints.as_ref(), dir, wait);
                        let _ = send(&stream, &Reply::Savepoint(kept));
                        // SYNC: see `Answering::savepoints_waiting`.
                        answering.savepoints_waiting.fetch_sub(1, Ordering::Relaxed);
                    })
                    .map_err(io("start a savepoint's thread"))?;
                return Ok(());
            }
        }
    };
    send(&stream, &reply)
}

/// Writes `message` to `stream` as one JSON line.
fn send(stream: &UnixStream, message: &impl Serialize) -> Result<(), RegistryError> {
    let mut out = serde_json::to_vec(message)?;
    out.push(b'\n');
    (&*stream)
        .write_all(&out)
        .map_err(io("write to the job's socket"))
}

/// Asks the job at `socket` `request` and waits for its reply at most `patience`.
fn ask_within(
    socket: &Path,
    request: &Request,
    patience: Duration,
) -> Result<Reply, RegistryError> {
    let stream = UnixStream::connect(socket).map_err(io(format!("reach {}", socket.display())))?;
    stream
        .set_read_timeout(Some(patience))
        .and_then(|()| stream.set_write_timeout(Some(ANSWER_TIMEOUT)))
        .map_err(io("set the socket's timeouts"))?;
    send(&stream, request)?;
    let mut reply = String::new();
    BufReader::new(std::io::Read::take(&stream, MAX_LINE))
        .read_line(&mut reply)
        .map_err(io(format!("read the job's answer on {}", socket.display())))?;
    Ok(serde_json::from_str(&reply)?)
}

/// Asks the job at `socket` `request`; its reply.
fn ask(socket: &Path, request: &Request) -> Result<Reply, RegistryError> {
    ask_within(socket, request, ANSWER_TIMEOUT)
}

/// The latest metrics of the job at `socket`.
pub fn metrics_of(socket: &Path) -> Result<MetricsSnapshot, RegistryError> {
    match ask(socket, &Request::Metrics)? {
        Reply::Metrics(snapshot) => Ok(snapshot),
        _ => Err(RegistryError::OutOfTurn),
    }
}

/// The plan of the job at `socket`.
pub fn plan_of(socket: &Path) -> Result<PhysicalPlan, RegistryError> {
    match ask(socket, &Request::Plan)? {
        Reply::Plan(plan) => Ok(plan),
        _ => Err(RegistryError::OutOfTurn),
    }
}

/// Asks the job at `socket` to drain and stop, as Ctrl-C does; returns once it was asked.
pub fn stop_job(socket: &Path) -> Result<(), RegistryError> {
    match ask(socket, &Request::Stop)? {
        Reply::Stopping => Ok(()),
        _ => Err(RegistryError::OutOfTurn),
    }
}

/// What the checkpoints of the job at `socket` did so far; `None` when it takes none.
pub fn checkpoints_of(socket: &Path) -> Result<Option<CheckpointFigures>, RegistryError> {
    match ask(socket, &Request::Checkpoints)? {
        Reply::Checkpoints(figures) => Ok(figures),
        _ => Err(RegistryError::OutOfTurn),
    }
}

/// Asks the job at `socket` for a savepoint in `dir` (absolute; `None`: the job's default)
/// and waits for it at most `wait`: the savepoint's directory, or the job's reason for none.
pub fn savepoint_of(
    socket: &Path,
    dir: Option<PathBuf>,
    wait: Duration,
) -> Result<Result<PathBuf, String>, RegistryError> {
    let request = Request::Savepoint {
        dir,
        wait_ms: wait.as_millis().try_into().unwrap_or(u64::MAX),
    };
    // The job answers once its wait is over, whatever happened.
    match ask_within(socket, &request, wait + ANSWER_TIMEOUT)? {
        Reply::Savepoint(kept) => Ok(kept),
        _ => Err(RegistryError::OutOfTurn),
    }
}

/// The checkpoint directory the registry holds for the running job `id`; `None` when no
/// running job has that id or it takes no checkpoints.
pub fn checkpoint_dir_of(id: &str) -> Result<Option<PathBuf>, RegistryError> {
    let dir = registry_dir()?;
    sweep(&dir);
    Ok(entries(&dir)
        .into_iter()
        .filter_map(|(_, entry)| entry)
        .find(|e| e.id == id)
        .and_then(|e| e.checkpoints))
}

/// Removes the entries of jobs whose process is gone (killed before it could remove them), so
/// they do not pile up between two lookups; and every other file of the registry (a socket, a
/// partial entry) of a process that is gone, which has no entry.
fn sweep(dir: &Path) {
    let mut entered = Vec::new();
    for (path, entry) in entries(dir) {
        if entry.as_ref().is_none_or(|e| !alive(e.pid)) {
            remove_entry(dir, &path, entry.as_ref());
        } else {
            entered.extend(path.file_stem().map(|s| s.to_os_string()));
        }
    }
    let Ok(files) = std::fs::read_dir(dir) else {
        return;
    };
    for path in files.flatten().map(|f| f.path()) {
        // `ID.sock`, `.ID.json.partial`: the ID ends in `-PID`.
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(id) = name.strip_suffix(".sock").or_else(|| {
            name.strip_prefix('.')
                .and_then(|n| n.strip_suffix(".json.partial"))
        }) else {
            continue;
        };
        let pid = id.rsplit_once('-').and_then(|(_, pid)| pid.parse().ok());
        let orphan = !entered.iter().any(|e| e.to_str() == Some(id));
        if orphan && pid.is_some_and(|pid| !alive(pid)) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Every entry file in the registry `dir`, read (`None`: not an entry).
fn entries(dir: &Path) -> Vec<(PathBuf, Option<JobEntry>)> {
    let Ok(files) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    files
        .flatten()
        .map(|f| f.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|path| {
            let entry = std::fs::read(&path)
                .ok()
                .and_then(|bytes| serde_json::from_slice(&bytes).ok());
            (path, entry)
        })
        .collect()
}

/// Removes the entry at `path` and its socket (if it is in `dir`).
fn remove_entry(dir: &Path, path: &Path, entry: Option<&JobEntry>) {
    if let Some(entry) = entry.filter(|e| e.socket.parent() == Some(dir)) {
        let _ = std::fs::remove_file(&entry.socket);
    }
    let _ = std::fs::remove_file(path);
}

/// Whether process `pid` exists.
pub fn alive(pid: u32) -> bool {
    rustix::process::Pid::from_raw(pid as i32)
        .is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
}

/// The running jobs, oldest first, each with its latest metrics (`None`: its process lives
/// but does not answer); removes the entries of jobs that died without cleaning up.
pub fn running() -> Result<Vec<(JobEntry, Option<MetricsSnapshot>)>, RegistryError> {
    let dir = registry_dir()?;
    sweep(&dir);
    let mut jobs = Vec::new();
    for (path, entry) in entries(&dir) {
        let Some(entry) = entry.filter(|e| e.socket.parent() == Some(dir.as_path())) else {
            // Not an entry of this registry at all: it goes.
            remove_entry(&dir, &path, None);
            continue;
        };
        match metrics_of(&entry.socket) {
            Ok(metrics) => jobs.push((entry, Some(metrics))),
            // Nobody listens on its socket: the process with its pid is another one.
            Err(e) if e.nobody_listens() => remove_entry(&dir, &path, Some(&entry)),
            // Alive (the sweep kept it) but silent: stopped or starved, still the user's job.
            Err(_) => jobs.push((entry, None)),
        }
    }
    jobs.sort_by(|a, b| (a.0.started, &a.0.id).cmp(&(b.0.started, &b.0.id)));
    Ok(jobs)
}

/// What the state of process `pid` says of a job that does not answer.
pub fn silence(pid: u32) -> &'static str {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name is in parentheses and may hold anything: the state follows the last.
    match stat.rsplit_once(')').map(|(_, rest)| rest.trim_start()) {
        Some(state) if state.starts_with('T') => "its process is stopped (SIGSTOP?)",
        Some(state) if state.starts_with('t') => "its process is stopped by a debugger",
        _ => "its process is busy or starved",
    }
}

/// In the job: takes a savepoint into `dir` (the default one in its checkpoint directory when
/// `None`), waiting for it at most `wait`; its directory, or why there is none.
fn take_savepoint(
    checkpoints: Option<&Checkpointing>,
    dir: Option<PathBuf>,
    wait: Duration,
) -> Result<PathBuf, String> {
    let Some(checkpoints) = checkpoints else {
        return Err(
            "it takes no checkpoints, and a savepoint is a checkpoint kept: run it with \
             --checkpoint-every DURATION (e.g. --checkpoint-every 1s; in a program of its \
             own, RunOptions::checkpoints)"
                .into(),
        );
    };
    let target = match dir {
        Some(dir) if dir.is_relative() => {
            return Err(format!(
                "the savepoint's directory {} is relative: the job's working directory is not \
                 the asker's",
                dir.display()
            ))
        }
        Some(dir) => dir,
        None => checkpoints.names.next(&checkpoints.dir, SystemTime::now()),
    };
    checkpoints.handle.savepoint(&target, wait)
}

/// Hands out a job's default savepoint directories. A savepoint's directory is made only
/// once its checkpoint completes, so savepoints asked for in the same second must not be
/// given the same name: this remembers the last one handed out.
#[derive(Default)]
struct DefaultNames {
    /// The last one's time stamp and its number within that second.
    last: Mutex<Option<(String, u32)>>,
}

impl DefaultNames {
    /// A new directory for a savepoint asked for at `now` in the checkpoint directory
    /// `checkpoints`: `savepoint-YYYYMMDDTHHMMSSZ`, with `-2`, `-3`, ... after it for the
    /// second and later of that second; never one handed out before nor one that exists.
    fn next(&self, checkpoints: &Path, now: SystemTime) -> PathBuf {
        let stamp: String = humantime::format_rfc3339_seconds(now)
            .to_string()
            .chars()
            .filter(|c| !matches!(c, '-' | ':'))
            .collect();
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let mut k = match last.as_ref() {
            Some((before, k)) if *before == stamp => k + 1,
            _ => 1,
        };
        loop {
            let dir = match k {
                1 => checkpoints.join(format!("savepoint-{stamp}")),
                _ => checkpoints.join(format!("savepoint-{stamp}-{k}")),
            };
            if !dir.exists() {
                *last = Some((stamp, k));
                return dir;
            }
            k += 1;
        }
    }
}

/// Writes `bytes` to `partial` (mode 0600), then renames it to `path`: a reader never sees
/// half a file.
pub(crate) fn write_whole(partial: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(partial)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| std::fs::rename(partial, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_directory_is_named_by_the_time_and_never_one_handed_out_or_that_exists() {
        let root = tempfile::tempdir().unwrap();
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let names = DefaultNames::default();
        let name = |suffix: &str| {
            root.path()
                .join(format!("savepoint-20270115T080000Z{suffix}"))
        };
        // Two asked for in one second, neither made yet: two names.
        assert_eq!(names.next(root.path(), at), name(""));
        assert_eq!(names.next(root.path(), at), name("-2"));
        // One made by another job (or by hand) is skipped.
        std::fs::create_dir(name("-3")).unwrap();
        assert_eq!(names.next(root.path(), at), name("-4"));
        // A job of its own starts from the first name that does not exist.
        std::fs::create_dir(name("")).unwrap();
        assert_eq!(DefaultNames::default().next(root.path(), at), name("-2"));
        let later = at + Duration::from_secs(1);
        assert_eq!(
            names.next(root.path(), later),
            root.path().join("savepoint-20270115T080001Z")
        );
    }

    #[test]
    fn makers_of_the_registry_at_once_all_find_it_private() {
        // Each round, several threads make the same new directory at once, as a job
        // registering and `sluice jobs` do; none may find it made but not yet private.
        for round in 0..200 {
            let root = tempfile::tempdir().unwrap();
            let dir = root.path().join(format!("jobs-{round}"));
            let start = std::sync::Barrier::new(4);
            std::thread::scope(|s| {
                let makers: Vec<_> = (0..4)
                    .map(|_| {
                        s.spawn(|| {
                            start.wait();
                            make_private_dir(&dir)
                        })
                    })
                    .collect();
                for maker in makers {
                    maker.join().unwrap().unwrap();
                }
            });
        }
    }

    #[test]
    fn a_job_without_checkpoints_names_the_flag() {
        let refused = take_savepoint(None, None, Duration::from_secs(1)).unwrap_err();
        assert!(refused.contains("--checkpoint-every"), "{refused}");
    }
}
