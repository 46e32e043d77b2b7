//! The job registry: each running job's launching process registers itself in a per-user
//! directory, and `sluice jobs`, `sluice stop` and `sluice top` find it there.
//!
//! The directory is `$XDG_RUNTIME_DIR/sluice/jobs`, or `/tmp/sluice-UID/jobs` without it; it
//! and its parent are made mode 0700 whatever the umask and checked on every open (a
//! directory of this user's, mode 0700, not a link), as a job's control directory is. A job
//! `ID` (`APP-PID`) keeps two entries there while it runs: `ID.json` (its id, application,
//! plan, PEs, start time, pid, control socket, and its checkpoint directory when it takes
//! checkpoints) and `ID.sock`, a Unix socket (mode 0600) over which another `sluice` of the
//! same user asks for its latest [`MetricsSnapshot`] or its checkpoints' figures, asks it to
//! stop, or asks it for a savepoint, one JSON line each way ([`Request`], [`Reply`]). A stop
//! drains the job as Ctrl-C does: the job's own terminal still prints its summary. A
//! savepoint is answered on a thread of its own once it is kept (other questions are answered
//! meanwhile), at most [`MAX_SAVEPOINTS_WAITING`] at once. The launching process removes both
//! entries when the job ends; a job that died without removing them (its pid gone, or no
//! process listening on its socket any more: its pid was reused) is not listed, and its
//! entries are removed by the first `sluice jobs` (or `stop`, `top`, or the next `sluice run`)
//! that finds them, as is a socket or a partial entry left without its entry by a process
//! that is gone. A job whose process lives but does not answer (stopped, starved) is listed as
//! not answering and keeps its entries: only a process that is gone loses them. The registry
//! is not under `$TMPDIR`: every job of the user must find the same one.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::Args;
use serde::{Deserialize, Serialize};
use sluice_runtime::{CheckpointHandle, MetricsHandle, MetricsSnapshot, StopHandle};

use crate::checkpoint_figures::CheckpointFigures;
use crate::observe::JobIdentity;
use crate::stdout::tell;

/// The mode of the registry's directories.
const PRIVATE_DIR_MODE: u32 = 0o700;
/// How long a client waits for a job's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request or reply line read.
const MAX_LINE: u64 = 16 << 20;
/// The most savepoints a job waits for at once, each on a thread of its own; one more is
/// refused (the next checkpoint serves every savepoint asked for before it, so more would
/// only cost threads).
pub(crate) const MAX_SAVEPOINTS_WAITING: usize = 4;

/// What the registry holds of one running job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct JobEntry {
    /// `APP-PID`: unique among the jobs running on this host.
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
    Stopping,
    /// `None`: the job takes no checkpoints.
    Checkpoints(Option<CheckpointFigures>),
    /// The savepoint's directory, or why there is none.
    Savepoint(Result<PathBuf, String>),
}

/// The registry's directory, made and checked: `$XDG_RUNTIME_DIR/sluice/jobs` or
/// `/tmp/sluice-UID/jobs`.
pub(crate) fn registry_dir() -> anyhow::Result<PathBuf> {
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
fn make_private_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::create_dir(dir) {
        Ok(()) => std::fs::set_permissions(dir, std::fs::Permissions::from_mode(PRIVATE_DIR_MODE))
            .with_context(|| format!("cannot make {} private", dir.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot make {}", dir.display())),
    }
    check_private_dir(dir)
}

/// Refuses `dir` unless it is a directory (not a link) of this user's with mode 0700.
fn check_private_dir(dir: &Path) -> anyhow::Result<()> {
    match sluice_runtime::why_not_private(dir) {
        None => Ok(()),
        Some(why) => bail!("the job registry {} is not private: {why}", dir.display()),
    }
}

/// A job's entries in the registry while it runs, and the thread answering on its socket;
/// removed when dropped.
pub(crate) struct Registration {
    entry: PathBuf,
    socket: PathBuf,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.entry);
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// What a job's control socket answers from.
pub(crate) struct Controls {
    pub metrics: MetricsHandle,
    pub stop: StopHandle,
    /// Its checkpoints, when it takes them.
    pub checkpoints: Option<Checkpointing>,
}

/// A checkpointed job's checkpoints, for its control socket.
pub(crate) struct Checkpointing {
    /// Its checkpoint directory (absolute).
    pub dir: PathBuf,
    pub handle: CheckpointHandle,
    /// The default savepoint directories handed out so far.
    pub names: crate::savepoint::DefaultNames,
}

/// Registers the running job `identity` and answers on its socket from `controls`.
pub(crate) fn register(
    identity: &JobIdentity<'_>,
    controls: Controls,
) -> anyhow::Result<Registration> {
    let dir = registry_dir()?;
    sweep(&dir);
    let pid = std::process::id();
    let app = identity.app;
    let id = format!("{app}-{pid}");
    let socket = dir.join(format!("{id}.sock"));
    // A job of an earlier process with this pid died without cleaning up.
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket)
        .with_context(|| format!("cannot listen on {}", socket.display()))?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
    let entry = JobEntry {
        id: id.clone(),
        app: app.to_string(),
        plan: identity.plan.to_string(),
        pes: identity.pes,
        started: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        pid,
        socket: socket.clone(),
        checkpoints: controls.checkpoints.as_ref().map(|c| c.dir.clone()),
    };
    let path = dir.join(format!("{id}.json"));
    let registration = Registration {
        entry: path.clone(),
        socket,
    };
    // Written whole, then renamed: a reader never sees half an entry.
    let partial = dir.join(format!(".{id}.json.partial"));
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&partial)
        .and_then(|mut f| f.write_all(&serde_json::to_vec(&entry)?))
        .and_then(|()| std::fs::rename(&partial, &path))
        .with_context(|| format!("cannot register the job in {}", dir.display()))?;
    let answering = Arc::new(Answering {
        controls,
        savepoints_waiting: AtomicUsize::new(0),
    });
    std::thread::Builder::new()
        .name("sluice-jobs".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                // One client at a time: each asks one short question (a savepoint's wait is
                // on a thread of its own).
                let _ = answer(stream, &answering);
            }
        })?;
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
fn answer(stream: UnixStream, answering: &Arc<Answering>) -> anyhow::Result<()> {
    stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    stream.set_write_timeout(Some(ANSWER_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new(std::io::Read::take(&stream, MAX_LINE)).read_line(&mut line)?;
    let controls = &answering.controls;
    let reply = match serde_json::from_str::<Request>(&line)? {
        Request::Metrics => Reply::Metrics(controls.metrics.snapshot()),
        Request::Stop => {
            if !controls.stop.is_stopping() {
                tell(format_args!(
                    "stopping: asked by `sluice stop`; draining in-flight tuples"
                ));
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
                        let kept = crate::savepoint::take(
                            answering.controls.checkpoints.as_ref(),
                            dir,
                            wait,
                        );
                        let _ = send(&stream, &Reply::Savepoint(kept));
                        // SYNC: see `Answering::savepoints_waiting`.
                        answering.savepoints_waiting.fetch_sub(1, Ordering::Relaxed);
                    })?;
                return Ok(());
            }
        }
    };
    send(&stream, &reply)
}

/// Writes `message` to `stream` as one JSON line.
fn send(stream: &UnixStream, message: &impl Serialize) -> anyhow::Result<()> {
    let mut out = serde_json::to_vec(message)?;
    out.push(b'\n');
    (&*stream).write_all(&out)?;
    Ok(())
}

/// Asks the job at `socket` `request`; its reply.
fn ask(socket: &Path, request: &Request) -> anyhow::Result<Reply> {
    ask_within(socket, request, ANSWER_TIMEOUT)
}

/// Asks the job at `socket` `request` and waits for its reply at most `patience`.
fn ask_within(socket: &Path, request: &Request, patience: Duration) -> anyhow::Result<Reply> {
    let stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(patience))?;
    stream.set_write_timeout(Some(ANSWER_TIMEOUT))?;
    send(&stream, request)?;
    let mut reply = String::new();
    BufReader::new(std::io::Read::take(&stream, MAX_LINE)).read_line(&mut reply)?;
    Ok(serde_json::from_str(&reply)?)
}

/// The latest metrics of the job at `socket`.
pub(crate) fn metrics_of(socket: &Path) -> anyhow::Result<MetricsSnapshot> {
    match ask(socket, &Request::Metrics)? {
        Reply::Metrics(snapshot) => Ok(snapshot),
        _ => bail!("the job answered out of turn"),
    }
}

/// What the checkpoints of the job at `socket` did so far; `None` when it takes none.
pub(crate) fn checkpoints_of(socket: &Path) -> anyhow::Result<Option<CheckpointFigures>> {
    match ask(socket, &Request::Checkpoints)? {
        Reply::Checkpoints(figures) => Ok(figures),
        _ => bail!("the job answered out of turn"),
    }
}

/// Asks the job at `socket` for a savepoint in `dir` (absolute; `None`: the job's default)
/// and waits for it at most `wait`: the savepoint's directory, or the job's reason for none.
pub(crate) fn savepoint_of(
    socket: &Path,
    dir: Option<PathBuf>,
    wait: Duration,
) -> anyhow::Result<Result<PathBuf, String>> {
    let request = Request::Savepoint {
        dir,
        wait_ms: wait.as_millis().try_into().unwrap_or(u64::MAX),
    };
    // The job answers once its wait is over, whatever happened.
    match ask_within(socket, &request, wait + ANSWER_TIMEOUT)? {
        Reply::Savepoint(kept) => Ok(kept),
        _ => bail!("the job answered out of turn"),
    }
}

/// The checkpoint directory the registry holds for the running job `id`; `None` when no
/// running job has that id or it takes no checkpoints.
pub(crate) fn checkpoint_dir_of(id: &str) -> anyhow::Result<Option<PathBuf>> {
    let dir = registry_dir()?;
    sweep(&dir);
    Ok(entries(&dir)
        .into_iter()
        .filter_map(|(_, entry)| entry)
        .find(|e| e.id == id)
        .and_then(|e| e.checkpoints))
}

/// Removes the entries of jobs whose process is gone (killed before it could remove them), so
/// they do not pile up between two `sluice jobs`; and every other file of the registry (a
/// socket, a partial entry) of a process that is gone, which has no entry.
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
        // `ID.sock`, `.ID.json.partial`: the ID is `APP-PID`.
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
fn alive(pid: u32) -> bool {
    rustix::process::Pid::from_raw(pid as i32)
        .is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
}

/// The running jobs, oldest first, each with its latest metrics (`None`: its process lives
/// but does not answer); removes the entries of jobs that died without cleaning up.
pub(crate) fn running() -> anyhow::Result<Vec<(JobEntry, Option<MetricsSnapshot>)>> {
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
            Err(e) if nobody_listens(&e) => remove_entry(&dir, &path, Some(&entry)),
            // Alive (the sweep kept it) but silent: stopped or starved, still the user's job.
            Err(_) => jobs.push((entry, None)),
        }
    }
    jobs.sort_by(|a, b| (a.0.started, &a.0.id).cmp(&(b.0.started, &b.0.id)));
    Ok(jobs)
}

/// Whether `error` (of [`ask`]) says that no process listens on the socket, which a job's
/// process does for as long as it lives, even stopped.
fn nobody_listens(error: &anyhow::Error) -> bool {
    error
        .downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
}

/// What the state of process `pid` says of a job that does not answer.
pub(crate) fn silence(pid: u32) -> &'static str {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name is in parentheses and may hold anything: the state follows the last.
    match stat.rsplit_once(')').map(|(_, rest)| rest.trim_start()) {
        Some(state) if state.starts_with('T') => "its process is stopped (SIGSTOP?)",
        Some(state) if state.starts_with('t') => "its process is stopped by a debugger",
        _ => "its process is busy or starved",
    }
}

/// The running job `id`, or the only one when `id` is `None` (asking which one on a terminal
/// when there are several).
pub(crate) fn pick(id: Option<&str>) -> anyhow::Result<JobEntry> {
    let jobs = running()?;
    if let Some(id) = id {
        return jobs
            .into_iter()
            .map(|(entry, _)| entry)
            .find(|e| e.id == id)
            .with_context(|| format!("no running job '{id}' (see `sluice jobs`)"));
    }
    match jobs.len() {
        0 => bail!("no job is running (start one with `sluice run`)"),
        1 => Ok(jobs.into_iter().next().map(|(e, _)| e).context("no job")?),
        _ => {
            let mut out = std::io::stdout().lock();
            write_table(&mut out, &jobs)?;
            if !std::io::stdin().is_terminal() {
                bail!("several jobs are running: name one by its ID");
            }
            write!(out, "which job (ID)? ")?;
            out.flush()?;
            let mut answer = String::new();
            std::io::stdin().read_line(&mut answer)?;
            let answer = answer.trim();
            jobs.into_iter()
                .map(|(entry, _)| entry)
                .find(|e| e.id == answer)
                .with_context(|| format!("no running job '{answer}'"))
        }
    }
}

/// Writes the table `sluice jobs` prints.
fn write_table(
    out: &mut impl Write,
    jobs: &[(JobEntry, Option<MetricsSnapshot>)],
) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<24} {:<14} {:<14} {:>4} {:>10} {:>16}",
        "ID", "APPLICATION", "PLAN", "PES", "UPTIME", "SOURCES (/s)"
    )?;
    for (job, metrics) in jobs {
        let (uptime, sources) = match metrics {
            Some(m) => (m.uptime_secs, with_commas(m.source_rate().round() as u64)),
            None => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                (
                    now.saturating_sub(job.started) as f64,
                    "not answering".into(),
                )
            }
        };
        writeln!(
            out,
            "{:<24} {:<14} {:<14} {:>4} {:>10} {:>16}",
            job.id,
            job.app,
            job.plan,
            job.pes,
            format!("{uptime:.1} s"),
            sources
        )?;
    }
    Ok(())
}

/// `n` with thousands separated by commas: `1,234,567`.
pub(crate) fn with_commas(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `sluice jobs`: lists the running jobs of this user on this host.
pub(crate) fn list() -> anyhow::Result<()> {
    let jobs = running()?;
    let mut out = std::io::stdout().lock();
    if jobs.is_empty() {
        writeln!(out, "no job is running")?;
        return Ok(());
    }
    write_table(&mut out, &jobs)?;
    Ok(())
}

/// Arguments of `sluice stop`.
#[derive(Args, Debug)]
pub(crate) struct StopArgs {
    /// The job's ID, as `sluice jobs` lists it.
    id: String,
    /// Return once the job was asked, without waiting for it to drain and end.
    #[arg(long)]
    no_wait: bool,
    /// How long to wait for it to end, in seconds (default 60).
    #[arg(long, value_parser = crate::plan_choice::parse_seconds)]
    timeout: Option<Duration>,
}

/// `sluice stop ID`: asks the job to drain and stop, and waits until it has ended.
pub(crate) fn stop(args: StopArgs) -> anyhow::Result<()> {
    let job = pick(Some(&args.id))?;
    let asked = ask(&job.socket, &Request::Stop).with_context(|| {
        format!(
            "job '{}' (pid {}) does not answer: {}; its entry is kept",
            job.id,
            job.pid,
            silence(job.pid)
        )
    })?;
    if !matches!(asked, Reply::Stopping) {
        bail!("job '{}' answered out of turn", job.id);
    }
    let mut out = std::io::stdout().lock();
    if args.no_wait {
        writeln!(out, "asked job '{}' to stop", job.id)?;
        return Ok(());
    }
    let timeout = args.timeout.unwrap_or(Duration::from_secs(60));
    let began = Instant::now();
    while alive(job.pid) && job.socket.exists() {
        if began.elapsed() >= timeout {
            bail!(
                "job '{}' was asked to stop but has not ended after {:.0} s",
                job.id,
                timeout.as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    writeln!(out, "stopped job '{}'", job.id)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_separated() {
        assert_eq!(with_commas(0), "0");
        assert_eq!(with_commas(999), "999");
        assert_eq!(with_commas(1000), "1,000");
        assert_eq!(with_commas(1234567), "1,234,567");
    }
}
