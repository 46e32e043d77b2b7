//! The local launcher: runs each PE of a plan as a child process of this one, the program
//! re-executed with the same arguments and told its PE by the environment (the way MPI ranks
//! learn theirs), and supervises them.
//!
//! Start-up goes in steps so no PE waits on a name that does not exist yet: every PE binds the
//! receivers of its channels (creating their shared segments), then, once all have, opens its
//! senders, then builds and starts its threads; only when every PE is ready do the sources
//! start. Each child's output lines come out of this process prefixed with the PE's name.
//!
//! Supervision: a PE that exits without reporting (a crash, SIGKILL) or reports a failure
//! stops the job: the other PEs are killed, every segment of the job removed, and the error
//! names the PE and its operators. A stop (Ctrl-C, the duration) is passed to every PE, whose
//! sources finish so every tuple in flight drains. Children are in their own process group, so
//! a terminal's Ctrl-C reaches only the launcher, and die with it if it dies.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_plan::PhysicalPlan;
use sluice_shm::JobSegments;
use sluice_transport::tcp::JobSecret;

use crate::control::JobControl;
use crate::pe::{ENV_JOB_DIR, ENV_JOB_ID, ENV_PARENT, ENV_PE, SECRET_FILE};
use crate::wire::{self, FromPe, ToPe};
use crate::{InstanceReport, JobReport, RunError, RunOptions, Running, RunningJob};

/// How long PEs may take to connect, bind, and build before the launcher gives up.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long PEs may take to exit once they reported.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a PE's failure waits for a neighbour's death to show, which is then reported as
/// the cause.
const ROOT_CAUSE_GRACE: Duration = Duration::from_secs(1);
/// How often the launcher looks at its children while it waits.
const SUPERVISION_PERIOD: Duration = Duration::from_millis(20);

/// The segments of a new run of `plan`, under an id no other run on this host shares.
pub(crate) fn job_segments(plan: &PhysicalPlan) -> Result<JobSegments, RunError> {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let id = format!(
        "{}-{}-{}",
        plan.job,
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    );
    JobSegments::begin(&id).map_err(|e| RunError::Launch(format!("shared segments: {e}")))
}

/// A fresh secret for a job, which network receivers require of its senders.
pub(crate) fn job_secret() -> Result<JobSecret, RunError> {
    JobSecret::random().map_err(|e| RunError::Launch(format!("no job secret: {e}")))
}

/// How the PEs' processes are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spawner {
    /// Each PE a child of this process (through its host's launch prefix, if it has one).
    Direct,
    /// All PEs as the ranks of one `mpirun`, rank i being PE i.
    Mpi,
}

/// One PE of the job.
struct Pe {
    name: String,
    operators: String,
    /// Its process, when this launcher started it directly.
    process: Option<Child>,
    control: Option<UnixStream>,
    report: Option<wire::WireReport>,
    status: Option<ExitStatus>,
    /// Its control socket has closed.
    hung_up: bool,
}

impl Pe {
    /// Waits until the process has exited or `deadline` has passed.
    fn reap(&mut self, deadline: Instant) {
        while self.status.is_none() && self.process.is_some() {
            self.status = self.exited();
            if Instant::now() >= deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Its exit status, if its process (started by this launcher) has exited.
    fn exited(&mut self) -> Option<ExitStatus> {
        self.process.as_mut()?.try_wait().ok().flatten()
    }
}

/// The running PEs of a job.
pub(crate) struct Children {
    pes: Vec<Pe>,
    /// The `mpirun` running the PEs as its ranks.
    mpirun: Option<Child>,
    events: Receiver<(usize, Option<FromPe>)>,
    segments: Option<JobSegments>,
    _dir: tempfile::TempDir,
}

/// Spawns one process per PE of `plan` and brings them to the point where sources start.
pub(crate) fn start(
    plan: &PhysicalPlan,
    options: &RunOptions,
    spawner: Spawner,
) -> Result<RunningJob, RunError> {
    let launch = |e: std::io::Error, what: &str| RunError::Launch(format!("{what}: {e}"));
    let segments = job_segments(plan)?;
    let dir = tempfile::Builder::new()
        .prefix("sluice-job-")
        .tempdir()
        .map_err(|e| launch(e, "cannot make the job's directory"))?;
    let plan_json = serde_json::to_vec(plan).map_err(|e| RunError::Launch(e.to_string()))?;
    // The directory is the launcher's alone (mode 0700), so the secret file is too.
    let secret = job_secret()?.to_hex();
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dir.path().join(SECRET_FILE))
        .and_then(|mut f| f.write_all(secret.as_bytes()))
        .map_err(|e| launch(e, "cannot write the job's secret"))?;
    std::fs::write(dir.path().join("plan.json"), plan_json)
        .map_err(|e| launch(e, "cannot write the plan"))?;
    let listener = UnixListener::bind(dir.path().join("control.sock"))
        .map_err(|e| launch(e, "cannot listen for PEs"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| launch(e, "control socket"))?;

    let exe = std::env::current_exe().map_err(|e| launch(e, "cannot find this program"))?;
    let mut children = Children {
        pes: Vec::new(),
        mpirun: None,
        events: mpsc::channel().1,
        segments: Some(segments),
        _dir: dir,
    };
    let job_id = children
        .segments
        .as_ref()
        .map_or("", |s| s.job())
        .to_string();
    children.pes = plan
        .pes
        .iter()
        .map(|pe| Pe {
            name: pe.name.clone(),
            operators: plan
                .pe_instances(pe.id)
                .map(|i| i.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            process: None,
            control: None,
            report: None,
            status: None,
            hung_up: false,
        })
        .collect();
    let env: Vec<(&str, OsString)> = vec![
        (ENV_JOB_DIR, children._dir.path().into()),
        (ENV_JOB_ID, job_id.into()),
    ];
    let spawned = match spawner {
        Spawner::Direct => spawn_each(plan, &exe, &env, &mut children),
        Spawner::Mpi => crate::mpi::spawn_mpirun(plan, &exe, &env, children._dir.path())
            .map(|mpirun| children.mpirun = Some(mpirun)),
    };
    if let Err(error) = spawned {
        children.kill_all();
        return Err(error);
    }
    let result = children.connect_all(&listener).and_then(|()| {
        let mut endpoints = Vec::new();
        children.await_all(
            |m| match m {
                FromPe::Bound { endpoints: e } => {
                    endpoints.extend(e.iter().copied());
                    true
                }
                _ => false,
            },
            "bind its receivers",
        )?;
        children.tell_all(&ToPe::Connect { endpoints });
        children.await_all(|m| matches!(m, FromPe::Ready), "start")?;
        children.tell_all(&ToPe::Go);
        Ok(())
    });
    if let Err(error) = result {
        children.kill_all();
        return Err(error);
    }
    Ok(RunningJob {
        control: Arc::new(JobControl::new(true)),
        running: Running::Processes(children),
        started: Instant::now(),
        duration: options.duration,
    })
}

/// Starts each PE of `plan` as a child of this process, through its host's launch prefix.
fn spawn_each(
    plan: &PhysicalPlan,
    exe: &std::path::Path,
    common: &[(&str, OsString)],
    children: &mut Children,
) -> Result<(), RunError> {
    for pe in &plan.pes {
        let mut env = common.to_vec();
        env.push((ENV_PE, pe.id.to_string().into()));
        let prefix = plan.host_of(pe).map_or(&[][..], |h| h.launch.as_slice());
        let mut command = match prefix.split_first() {
            // This machine: a direct child, which checks it is ours and dies with us.
            None => {
                env.push((ENV_PARENT, std::process::id().to_string().into()));
                let mut command = Command::new(exe);
                command.envs(env);
                command
            }
            // Another host (`ssh h`, `ip netns exec h`): the environment goes on the command
            // line through `env`, which every such prefix passes along.
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg("env");
                for (key, value) in &env {
                    command.arg(assignment(key, value));
                }
                command.arg(exe);
                command
            }
        };
        command.args(std::env::args_os().skip(1));
        let child = spawn_logged(command, &pe.name)?;
        children.pes[pe.id].process = Some(child);
    }
    Ok(())
}

/// `KEY=VALUE`, the way `env` and `mpirun -x` take a variable on the command line.
pub(crate) fn assignment(key: &str, value: &OsString) -> OsString {
    let mut pair = OsString::from(key);
    pair.push("=");
    pair.push(value);
    pair
}

/// Spawns `command` in a process group of its own, its output lines prefixed with `name`.
pub(crate) fn spawn_logged(mut command: Command, name: &str) -> Result<Child, RunError> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| RunError::Launch(format!("cannot start {name}: {e}")))?;
    if let Some(out) = child.stdout.take() {
        prefix_lines(out, name.to_string(), false);
    }
    if let Some(err) = child.stderr.take() {
        prefix_lines(err, name.to_string(), true);
    }
    Ok(child)
}

/// Copies a child's output to ours, each line prefixed with `[pe] `.
fn prefix_lines(from: impl Read + Send + 'static, pe: String, to_stderr: bool) {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            if to_stderr {
                let _ = writeln!(std::io::stderr().lock(), "[{pe}] {line}");
            } else {
                let _ = writeln!(std::io::stdout().lock(), "[{pe}] {line}");
            }
        }
    });
}

impl Children {
    /// Accepts one connection per PE and starts a reader for each.
    fn connect_all(&mut self, listener: &UnixListener) -> Result<(), RunError> {
        let (events, received) = mpsc::channel();
        self.events = received;
        let deadline = Instant::now() + START_TIMEOUT;
        let mut connected = 0;
        while connected < self.pes.len() {
            match listener.accept() {
                Ok((stream, _)) => {
                    let _ = stream.set_nonblocking(false);
                    let mut reader = BufReader::new(
                        stream
                            .try_clone()
                            .map_err(|e| RunError::Launch(format!("control socket: {e}")))?,
                    );
                    let pe = match wire::receive::<FromPe>(&mut reader) {
                        Ok(Some(FromPe::Hello { pe })) if pe < self.pes.len() => pe,
                        _ => continue,
                    };
                    if self.pes[pe].control.is_some() {
                        continue;
                    }
                    self.pes[pe].control = Some(stream);
                    connected += 1;
                    let events = events.clone();
                    std::thread::spawn(move || loop {
                        let message = wire::receive::<FromPe>(&mut reader).ok().flatten();
                        let end = message.is_none();
                        if events.send((pe, message)).is_err() || end {
                            break;
                        }
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.check_alive()?;
                    if Instant::now() > deadline {
                        return Err(RunError::Launch(format!(
                            "PEs did not connect within {} s",
                            START_TIMEOUT.as_secs()
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => return Err(RunError::Launch(format!("control socket: {e}"))),
            }
        }
        Ok(())
    }

    /// Waits until every PE has sent a message `expected` accepts.
    fn await_all(
        &mut self,
        mut expected: impl FnMut(&FromPe) -> bool,
        step: &str,
    ) -> Result<(), RunError> {
        let deadline = Instant::now() + START_TIMEOUT;
        let mut waiting = self.pes.len();
        while waiting > 0 {
            match self.events.recv_timeout(SUPERVISION_PERIOD) {
                Ok((_, Some(message))) if expected(&message) => waiting -= 1,
                Ok((pe, message)) => self.unexpected(pe, message)?,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(RunError::Launch("every PE hung up".into()))
                }
            }
            self.check_alive()?;
            if Instant::now() > deadline {
                return Err(RunError::Launch(format!(
                    "PEs did not {step} within {} s",
                    START_TIMEOUT.as_secs()
                )));
            }
        }
        Ok(())
    }

    /// A message out of turn: a failure is the job's error; a lost socket is a dead PE.
    fn unexpected(&mut self, pe: usize, message: Option<FromPe>) -> Result<(), RunError> {
        match message {
            Some(FromPe::Failed { error }) => {
                // A PE often fails because a neighbour died (its edge broke); the death is the
                // cause to report, so look for one before blaming this PE.
                let deadline = Instant::now() + ROOT_CAUSE_GRACE;
                while Instant::now() < deadline {
                    for other in 0..self.pes.len() {
                        let p = &mut self.pes[other];
                        if other != pe && p.status.is_none() && p.report.is_none() {
                            if let Some(status) = p.exited() {
                                p.status = Some(status);
                                return Err(self.died(other));
                            }
                        }
                    }
                    // A PE whose connection closes without a report has died too.
                    if let Ok((other, None)) = self.events.recv_timeout(Duration::from_millis(5)) {
                        if other != pe && self.pes[other].report.is_none() {
                            self.pes[other].hung_up = true;
                            self.pes[other].reap(Instant::now() + SUPERVISION_PERIOD);
                            return Err(self.died(other));
                        }
                    }
                }
                Err(self.failed(pe, error))
            }
            Some(FromPe::Done { report }) => {
                self.pes[pe].report = Some(report);
                Ok(())
            }
            Some(_) => Ok(()),
            None if self.pes[pe].report.is_some() => {
                self.pes[pe].hung_up = true;
                Ok(())
            }
            None => {
                self.pes[pe].hung_up = true;
                // The socket closed without a report: the PE is dying; wait for its status.
                self.pes[pe].reap(Instant::now() + EXIT_TIMEOUT);
                Err(self.died(pe))
            }
        }
    }

    fn failed(&self, pe: usize, error: String) -> RunError {
        RunError::PeFailed {
            pe: self.pes[pe].name.clone(),
            error,
        }
    }

    fn died(&self, pe: usize) -> RunError {
        let p = &self.pes[pe];
        let how = match p.status {
            Some(status) => match (status.code(), status.signal()) {
                (Some(code), _) => format!("exited with status {code}"),
                (_, Some(signal)) => format!("was killed by signal {signal}"),
                _ => "ended".to_string(),
            },
            None => "ended without reporting".to_string(),
        };
        RunError::PeDied {
            pe: p.name.clone(),
            operators: p.operators.clone(),
            how,
        }
    }

    /// Fails if a PE has exited without reporting.
    fn check_alive(&mut self) -> Result<(), RunError> {
        for pe in 0..self.pes.len() {
            if self.pes[pe].status.is_some() {
                continue;
            }
            if let Some(status) = self.pes[pe].exited() {
                self.pes[pe].status = Some(status);
                // Its last words may still be on their way: read until its socket closes,
                // which its reader reports after everything the PE sent.
                let deadline = Instant::now() + EXIT_TIMEOUT;
                while self.pes[pe].report.is_none() && !self.pes[pe].hung_up {
                    match self.events.recv_timeout(SUPERVISION_PERIOD) {
                        Ok((from, message)) => self.unexpected(from, message)?,
                        Err(_) if Instant::now() > deadline => break,
                        Err(_) => {}
                    }
                }
                if self.pes[pe].report.is_none() {
                    return Err(self.died(pe));
                }
            }
        }
        if let Some(status) = self
            .mpirun
            .as_mut()
            .and_then(|m| m.try_wait().ok().flatten())
        {
            self.mpirun = None;
            // Its ranks' last words may still be on their way.
            let deadline = Instant::now() + EXIT_TIMEOUT;
            while self.pes.iter().any(|p| p.report.is_none() && !p.hung_up) {
                match self.events.recv_timeout(SUPERVISION_PERIOD) {
                    Ok((from, message)) => self.unexpected(from, message)?,
                    Err(_) if Instant::now() > deadline => break,
                    Err(_) => {}
                }
            }
            if let Some(pe) = self.pes.iter().find(|p| p.report.is_none()) {
                return Err(RunError::Launch(format!(
                    "mpirun ended ({status}) before PE '{}' reported",
                    pe.name
                )));
            }
        }
        Ok(())
    }

    fn tell_all(&mut self, message: &ToPe) {
        for pe in &mut self.pes {
            if let Some(stream) = &mut pe.control {
                // A PE that cannot be told has died; supervision reports it.
                let _ = wire::send(stream, message);
            }
        }
    }

    /// Kills every PE still running, reaps them, and removes the job's segments.
    fn kill_all(&mut self) {
        for pe in &mut self.pes {
            if let (None, Some(process)) = (pe.status, pe.process.as_mut()) {
                let _ = process.kill();
                pe.status = process.wait().ok();
            }
        }
        if let Some(mpirun) = self.mpirun.take() {
            crate::mpi::stop_mpirun(mpirun);
        }
        if let Some(segments) = self.segments.take() {
            let _ = segments.end();
        }
    }

    /// Supervises the PEs until all have reported, passing on a stop; returns the merged
    /// report or the first failure (after killing the rest).
    pub(crate) fn wait(
        mut self,
        control: &JobControl,
        stop_when_due: impl Fn(),
        started: Instant,
    ) -> Result<JobReport, RunError> {
        let mut stop_sent = false;
        let result = loop {
            if self.pes.iter().all(|p| p.report.is_some()) {
                break Ok(());
            }
            stop_when_due();
            if control.stop_requested() && !stop_sent {
                stop_sent = true;
                self.tell_all(&ToPe::Stop);
            }
            match self.events.recv_timeout(SUPERVISION_PERIOD) {
                Ok((pe, message)) => {
                    if let Err(e) = self.unexpected(pe, message) {
                        break Err(e);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    break Err(RunError::Launch("every PE hung up".into()))
                }
            }
            if let Err(e) = self.check_alive() {
                break Err(e);
            }
        };
        if let Err(error) = result {
            self.kill_all();
            return Err(error);
        }
        let elapsed = started.elapsed();
        let deadline = Instant::now() + EXIT_TIMEOUT;
        for pe in &mut self.pes {
            pe.reap(deadline);
        }
        if let Some(mpirun) = &mut self.mpirun {
            // Its ranks have reported and are leaving; it ends once they have.
            while !matches!(mpirun.try_wait(), Ok(Some(_))) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        self.kill_all();
        let instances: Vec<InstanceReport> = self
            .pes
            .iter_mut()
            .filter_map(|pe| pe.report.take())
            .flat_map(wire::WireReport::into_instances)
            .collect();
        Ok(JobReport::new(elapsed, instances))
    }
}
