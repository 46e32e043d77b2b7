//! The local launcher: runs each PE of a plan as a child process of this one, the program
//! re-executed with the same arguments and told its PE by the environment (the way MPI ranks
//! learn theirs), and supervises them.
//!
//! A PE reaches the launcher over [`crate::link`]: a Unix socket in the job's private directory
//! when the job has no hosts file, else TCP on the launcher's address (the hosts file's
//! `[launcher] address`, or the one this machine's routes use toward the hosts). It proves it
//! belongs to the job with the job's secret and receives the plan over it, so a PE on another
//! host needs nothing of this machine's filesystem. The secret never appears on a command line:
//! a direct child has it in its environment, a PE started through a host's launch prefix
//! (`ssh h`) reads it from its standard input, and `mpirun` passes its own environment's on to
//! its ranks (`-x SLUICE_SECRET`).
//!
//! Start-up goes in steps so no PE waits on a name that does not exist yet: every PE binds the
//! receivers of its channels (creating their shared segments), then, once all have, opens its
//! senders, then builds and starts its threads; only when every PE is ready do the sources
//! start. Each child's output lines come out of this process prefixed with the PE's name.
//!
//! Supervision, the same over either stream: a PE that exits or whose stream closes without
//! reporting (a crash, SIGKILL, named with its signal) or that reports a failure stops the job:
//! the other PEs are killed, every segment of the job removed, and the error names the PE and
//! its operators. The error is the root cause ([`crate::error`]): the launcher collects every
//! failure until each PE has reported or ended, or a second after the first, and reports the
//! first failure of a PE's own accord, followed by the others and then by the consequences
//! (an edge that lost its sender, a receiver gone) in plan order.
//!
//! Each PE sends a heartbeat every 250 ms once it reached the launcher: one not heard from for
//! the stall timeout (5 s by default) fails the job, named with what its process's state says
//! (`stopped` after SIGSTOP). The launcher beats toward each PE the same way, from a thread of
//! its own ([`Heart`]): a PE that hears nothing from a stopped launcher for the stall timeout
//! leaves and removes the job's segments ([`crate::pe`]). A stop (Ctrl-C, the duration) is passed to every PE, whose sources finish so every
//! tuple in flight drains; a drain not over within the drain timeout (30 s) aborts the job, as
//! does an abort (a second Ctrl-C). Each step of start-up has the start timeout (30 s), after
//! which the job fails naming the PEs that are late, with their host and launch command; a
//! stop during start-up ends it at once. Children are in their own process group, so a
//! terminal's Ctrl-C reaches only the launcher; killing a PE kills its group, so whatever its
//! launch command started goes too. A PE whose stream to the launcher closes (the launcher
//! died, even by SIGKILL, or it is on another host) leaves, removing the job's segments and
//! control directory on its way out ([`crate::pe`]).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sluice_plan::PhysicalPlan;
use sluice_shm::JobSegments;
use sluice_transport::tcp::{JobSecret, WarningLimit};

use crate::checkpoints::{Coordinator, Order, PartAck, StateFiles};
use crate::link::{self, Admission, LinkListener, SharedLink};
use crate::pe::{ENV_CONTROL, ENV_JOB_ID, ENV_PARENT, ENV_PE, ENV_SECRET};
use crate::results::ResultsInbox;
use crate::resume::PeResume;
use crate::wire::{self, FromPe, ToPe, HEARTBEAT_PERIOD};
use crate::ResumeFrom;
use crate::{InstanceReport, JobReport, MetricsHandle, RunError, RunOptions, Running, RunningJob};
use sluice_exec::control::JobControl;
use sluice_exec::watch::{Sched, Silence};

/// The private directory's subdirectory where the PEs of a suspended job write their
/// instances' states ([`StateFiles`]).
const SUSPENDED_STATES: &str = "suspended";
/// The private directory's subdirectory where the state a job resumes from is written for its
/// PEs to read.
const RESUMED_STATES: &str = "resumed";

/// How long PEs may take to exit once they reported, and how long an ended PE's last words
/// (or its exit status) are waited for.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a PE's failure waits for a neighbour's death to show, which is then reported as
/// the cause.
const ROOT_CAUSE_GRACE: Duration = Duration::from_secs(1);
/// How often the launcher looks at its children while it waits.
const SUPERVISION_PERIOD: Duration = Duration::from_millis(20);
/// A gap between two looks at the PEs' heartbeats this long means the launcher itself was
/// stopped or starved, and their silence is not theirs.
const LAUNCHER_PAUSE: Duration = Duration::from_secs(1);

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

/// What every PE of a job is told when it starts.
pub(crate) struct PeEnvironment {
    /// Variables anyone may see: where the launcher is, the job's id.
    pub(crate) public: Vec<(&'static str, OsString)>,
    /// The job's secret, in hex, which goes through the environment or standard input only.
    pub(crate) secret: String,
}

/// One PE of the job.
struct Pe {
    name: String,
    operators: String,
    /// Where and how it was started, for messages: empty, or ` on host 'h' (launched with
    /// `ssh h`)`.
    placed: String,
    /// Its process, when this launcher started it directly.
    process: Option<Child>,
    control: Option<SharedLink>,
    report: Option<wire::WireReport>,
    /// The frames of its instances' states it sent before its report.
    framed: wire::StateFrames,
    /// The failure it reported.
    failure: Option<String>,
    status: Option<ExitStatus>,
    /// Its control stream has closed.
    hung_up: bool,
    /// When its exit or the close of its stream was first seen.
    ended_at: Option<Instant>,
    /// Its silent end (or its silence) is among the job's failures.
    blamed: bool,
    /// Since it was last heard from, once it reached the launcher.
    heard: Option<Silence>,
}

impl Pe {
    /// A PE not started yet.
    fn new(name: String, operators: String, placed: String) -> Self {
        Self {
            name,
            operators,
            placed,
            process: None,
            control: None,
            report: None,
            framed: wire::StateFrames::default(),
            failure: None,
            status: None,
            hung_up: false,
            ended_at: None,
            blamed: false,
            heard: None,
        }
    }

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

    /// It reported its end: a report or a failure.
    fn has_spoken(&self) -> bool {
        self.report.is_some() || self.failure.is_some()
    }

    /// It ended without a word, and everything it might still say or tell of its end is in:
    /// an exit waits for its stream to close (its last words come first), unless it never
    /// connected; a closed stream waits for the exit status of a process this launcher
    /// started (it says how the PE died); either waits at most [`EXIT_TIMEOUT`].
    fn ended_silently(&self) -> bool {
        let Some(since) = self.ended_at else {
            return false;
        };
        let waited = since.elapsed() >= EXIT_TIMEOUT;
        !self.has_spoken()
            && match (self.status.is_some(), self.hung_up) {
                (true, true) => true,
                (true, false) => self.control.is_none() || waited,
                (false, _) => self.process.is_none() || waited,
            }
    }
}

/// The running PEs of a job.
pub(crate) struct Children {
    pes: Vec<Pe>,
    /// The `mpirun` running the PEs as its ranks.
    mpirun: Option<Child>,
    /// How and when `mpirun` was seen to end.
    mpirun_ended: Option<(ExitStatus, Instant)>,
    events: Receiver<(usize, Option<FromPe>)>,
    /// Protocol messages received and not yet awaited (`Bound`, `Ready`), with their PE.
    inbox: VecDeque<(usize, FromPe)>,
    /// How long a PE may go unheard once it reached the launcher.
    stall_timeout: Duration,
    /// When the PEs' heartbeats were last looked at.
    last_check: Instant,
    /// Every failure seen (reported, or a PE's silent end), in order, with the PE it is of (or
    /// `None`), and when the first came.
    failures: Vec<(Option<usize>, RunError)>,
    first_failure: Option<Instant>,
    segments: Option<JobSegments>,
    /// Where the PEs reach this launcher, for messages.
    listening: String,
    /// The PEs' latest live metrics.
    metrics: MetricsHandle,
    /// The launcher's heartbeat toward its PEs.
    heart: Heart,
    /// The job's private directory, if it needs one: for its control socket, or for
    /// `mpirun`'s hostfile.
    dir: Option<tempfile::TempDir>,
    /// The job's checkpoint directory, which each PE is sent with its plan.
    checkpoint_dir: Option<std::path::PathBuf>,
    /// Where its PEs write their instances' states if the job is suspended (PEs of this
    /// host only): [`StateFiles`] in the private directory.
    states: Option<std::path::PathBuf>,
    /// Parts of checkpoints the PEs reported, for the coordinator.
    acks: Vec<PartAck>,
    /// What the PEs' sinks return to the program.
    results: ResultsInbox,
}

/// The job's private directory, made now unless `dir` already holds it.
fn job_dir(dir: &mut Option<tempfile::TempDir>) -> Result<&std::path::Path, RunError> {
    let made = match dir.take() {
        Some(made) => made,
        None => link::private_job_dir()?,
    };
    Ok(dir.insert(made).path())
}

/// The launcher's heartbeat: a thread of its own that tells every PE admitted, every
/// [`HEARTBEAT_PERIOD`], that its launcher lives, so that a PE notices a launcher stopped
/// (SIGSTOP) or starved as the launcher notices such a PE ([`crate::pe`]). It beats until
/// dropped.
struct Heart {
    links: Arc<Mutex<Vec<SharedLink>>>,
}

impl Heart {
    /// Starts the thread, with no PE to beat for yet.
    fn start() -> Self {
        let links = Arc::new(Mutex::new(Vec::<SharedLink>::new()));
        let beating = Arc::downgrade(&links);
        std::thread::spawn(move || loop {
            std::thread::sleep(HEARTBEAT_PERIOD);
            // The job's supervision has ended once no one holds the list.
            let Some(links) = beating.upgrade() else {
                break;
            };
            let links = links.lock().unwrap_or_else(PoisonError::into_inner).clone();
            for link in links {
                // A PE that cannot be told has died; supervision reports it.
                let _ = link.send_unless_busy(&ToPe::Heartbeat);
            }
        });
        Self { links }
    }

    /// Beats for the PE at the end of `link` too.
    fn beat_for(&self, link: SharedLink) {
        let mut links = self.links.lock().unwrap_or_else(PoisonError::into_inner);
        links.push(link);
    }
}

/// Spawns one process per PE of `plan` and brings them to the point where sources start,
/// each instance with its state in `resume` if the job resumes.
pub(crate) fn start(
    plan: &PhysicalPlan,
    options: &RunOptions,
    spawner: Spawner,
    control: Arc<JobControl>,
    resume: Option<ResumeFrom<'_>>,
    results: ResultsInbox,
) -> Result<RunningJob, RunError> {
    let launch = |e: std::io::Error, what: &str| RunError::Launch(format!("{what}: {e}"));
    let segments = job_segments(plan)?;
    // The directory is the launcher's alone (mode 0700), and so its control socket. PEs that
    // reach the launcher over TCP need none (a PE on another host could not remove it).
    let mut dir = None;
    let secret = job_secret()?;
    let listener = match &plan.launcher {
        None => LinkListener::unix(&job_dir(&mut dir)?.join(link::CONTROL_SOCKET))?,
        Some(launcher) => LinkListener::tcp(link::launcher_ip(
            launcher.address,
            plan.pes.iter().filter_map(|pe| plan.host_of(pe)),
        )?)?,
    };
    // A suspended job's state reaches PEs of this host in files, as a restart's checkpoint
    // does, and leaves them so: it never travels in their control messages.
    let written;
    let (resume, states) = match &plan.launcher {
        None => {
            let private = job_dir(&mut dir)?.to_path_buf();
            let resume = match resume {
                Some(ResumeFrom::State(state)) => {
                    written = StateFiles::open(&private.join(RESUMED_STATES))?.write_job(state)?;
                    Some(ResumeFrom::Checkpoint(&written))
                }
                other => other,
            };
            (resume, Some(private.join(SUSPENDED_STATES)))
        }
        Some(_) => (resume, None),
    };
    let exe = match options.pe_program {
        Some(program) => program.to_path_buf(),
        None => std::env::current_exe().map_err(|e| launch(e, "cannot find this program"))?,
    };
    let address = listener.address()?.to_env();
    let environment = PeEnvironment {
        public: vec![
            (ENV_CONTROL, address.clone()),
            (ENV_JOB_ID, segments.job().into()),
        ],
        secret: secret.to_hex(),
    };
    let mut children = Children {
        pes: plan
            .pes
            .iter()
            .map(|pe| {
                let operators: Vec<&str> =
                    plan.pe_instances(pe.id).map(|i| i.name.as_str()).collect();
                let placed = match plan.host_of(pe) {
                    Some(host) if !host.launch.is_empty() => format!(
                        " on host '{}' (launched with `{}`)",
                        host.name,
                        host.launch.join(" ")
                    ),
                    _ => String::new(),
                };
                Pe::new(pe.name.clone(), operators.join(", "), placed)
            })
            .collect(),
        mpirun: None,
        mpirun_ended: None,
        events: mpsc::channel().1,
        inbox: VecDeque::new(),
        stall_timeout: options.stall_timeout,
        last_check: Instant::now(),
        failures: Vec::new(),
        first_failure: None,
        segments: Some(segments),
        listening: address.to_string_lossy().into_owned(),
        metrics: MetricsHandle::new(&plan.job, plan.pes.iter().map(|p| p.name.clone())),
        heart: Heart::start(),
        dir,
        checkpoint_dir: options.checkpoints.map(|c| c.dir.to_path_buf()),
        states,
        acks: Vec::new(),
        results,
    };
    let spawned = match spawner {
        Spawner::Direct => spawn_each(plan, &exe, options, &environment, &mut children),
        Spawner::Mpi => job_dir(&mut children.dir)
            .and_then(|dir| crate::mpi::spawn_mpirun(plan, &exe, options, &environment, dir))
            .map(|mpirun| children.mpirun = Some(mpirun)),
    };
    if let Err(error) = spawned {
        children.kill_all();
        return Err(error);
    }
    let starting = Starting {
        control: &control,
        timeout: options.start_timeout,
    };
    let result = children
        .connect_all(listener, &secret, (plan, resume), &starting)
        .and_then(|()| {
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
                &starting,
            )?;
            children.tell_all(&ToPe::Connect { endpoints });
            children.await_all(|m| matches!(m, FromPe::Ready), "start", &starting)?;
            children.tell_all(&ToPe::Go);
            Ok(())
        });
    if let Err(error) = result {
        children.kill_all();
        return Err(error);
    }
    Ok(RunningJob {
        control,
        metrics: children.metrics.clone(),
        running: Running::Processes(Box::new(children)),
        started: Instant::now(),
        options: *options,
        recovery: None,
        registration: None,
        progress: None,
    })
}

/// Starts each PE of `plan` as a child of this process, through its host's launch prefix.
fn spawn_each(
    plan: &PhysicalPlan,
    exe: &std::path::Path,
    options: &RunOptions,
    environment: &PeEnvironment,
    children: &mut Children,
) -> Result<(), RunError> {
    for pe in &plan.pes {
        let mut env = environment.public.clone();
        env.push((ENV_PE, pe.id.to_string().into()));
        let prefix = plan.host_of(pe).map_or(&[][..], |h| h.launch.as_slice());
        let (mut command, stdin) = match prefix.split_first() {
            // This machine: a direct child, which checks it is ours and dies with us; its
            // environment is readable by its user alone, so it carries the secret.
            None => {
                env.push((ENV_PARENT, std::process::id().to_string().into()));
                let mut command = Command::new(exe);
                command.envs(env).env(ENV_SECRET, &environment.secret);
                (command, None)
            }
            // Another host (`ssh h`, `ip netns exec h`): the environment goes on the command
            // line through `env`, which every such prefix passes along; the secret, which
            // must not be on a command line, goes as the first line of its standard input.
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.env_remove(ENV_SECRET).args(rest).arg("env");
                for (key, value) in &env {
                    command.arg(assignment(key, value));
                }
                command.arg(exe);
                (command, Some(format!("{}\n", environment.secret)))
            }
        };
        command.args(pe_args(options));
        let child = spawn_logged(command, &pe.name, stdin.as_deref())?;
        children.pes[pe.id].process = Some(child);
    }
    Ok(())
}

/// The arguments a PE's process gets after the program: [`RunOptions::pe_args`], else this
/// process's own.
pub(crate) fn pe_args(options: &RunOptions) -> Vec<OsString> {
    match options.pe_args {
        Some(args) => args.to_vec(),
        None => std::env::args_os().skip(1).collect(),
    }
}

/// `KEY=VALUE`, the way `env` and `mpirun -x` take a variable on the command line.
pub(crate) fn assignment(key: &str, value: &OsString) -> OsString {
    let mut pair = OsString::from(key);
    pair.push("=");
    pair.push(value);
    pair
}

/// Spawns `command` in a process group of its own, its output lines prefixed with `name`;
/// `stdin`, if given, is all it reads on its standard input (else it reads nothing).
pub(crate) fn spawn_logged(
    mut command: Command,
    name: &str,
    stdin: Option<&str>,
) -> Result<Child, RunError> {
    let cannot = |e: std::io::Error| {
        RunError::Launch(format!(
            "cannot start {name}: {e}{}",
            link::open_files_note(&e)
        ))
    };
    let mut child = command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(cannot)?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A line fits the pipe's buffer: the write returns at once. Dropping the pipe closes
        // it, so the child reads nothing more.
        if let Err(e) = pipe.write_all(text.as_bytes()) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(cannot(e));
        }
    }
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

/// The name of a signal that ends processes, e.g. `SIGKILL` for 9.
fn signal_name(signal: i32) -> Option<&'static str> {
    use rustix::process::Signal;
    let known = [
        (Signal::HUP, "SIGHUP"),
        (Signal::INT, "SIGINT"),
        (Signal::QUIT, "SIGQUIT"),
        (Signal::ILL, "SIGILL"),
        (Signal::ABORT, "SIGABRT"),
        (Signal::BUS, "SIGBUS"),
        (Signal::FPE, "SIGFPE"),
        (Signal::KILL, "SIGKILL"),
        (Signal::SEGV, "SIGSEGV"),
        (Signal::PIPE, "SIGPIPE"),
        (Signal::ALARM, "SIGALRM"),
        (Signal::TERM, "SIGTERM"),
        (Signal::USR1, "SIGUSR1"),
        (Signal::USR2, "SIGUSR2"),
        (Signal::XCPU, "SIGXCPU"),
        (Signal::XFSZ, "SIGXFSZ"),
    ];
    known
        .iter()
        .find(|(s, _)| s.as_raw() == signal)
        .map(|(_, name)| *name)
}

/// What start-up is bounded by: the user's stop, and the start timeout of each step.
struct Starting<'a> {
    control: &'a JobControl,
    timeout: Duration,
}

impl Starting<'_> {
    /// Fails when the user stopped the job, or when the step that `began` has taken longer
    /// than the start timeout (saying who is late, by `late`).
    fn check(&self, began: Instant, late: impl FnOnce() -> String) -> Result<(), RunError> {
        if self.control.stop_requested() || self.control.aborting() {
            return Err(RunError::Interrupted("during start-up"));
        }
        if began.elapsed() > self.timeout {
            return Err(RunError::Launch(format!(
                "{} within {} s (the start timeout)",
                late(),
                self.timeout.as_secs_f64()
            )));
        }
        Ok(())
    }
}

/// A PE is read by what the kernel says of its heartbeat thread once it has been silent for
/// this long (two heartbeats missed).
const HEARD_GRACE: Duration = Duration::from_millis(500);

/// What the kernel says of the heartbeat thread of the PE process `pid` (found by its name,
/// [`crate::pe::HEARTBEAT_THREAD`]), on this host.
fn heartbeat_thread(pid: u32) -> Option<Sched> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    tasks.filter_map(Result::ok).find_map(|task| {
        let name = std::fs::read_to_string(task.path().join("comm")).ok()?;
        (name.trim_end() == crate::pe::HEARTBEAT_THREAD)
            .then(|| Sched::of_task(&task.path().to_string_lossy()))?
    })
}

/// The state letter of process `pid` in `/proc/PID/stat` (`R`, `S`, `D`, `T`, ...).
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold anything: the state follows the last.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

/// Reports a connection the launcher turned away: a stranger must not stop the job, but its
/// user should know; as a `tcp` receiver does, up to the limits of `warnings` (by the peer's
/// address), so that a flood of connections cannot flood the log.
fn refused(warnings: &mut WarningLimit<String>, peer: &str, why: &str) {
    let from = peer
        .parse::<std::net::SocketAddr>()
        .map_or_else(|_| peer.to_string(), |addr| addr.ip().to_string());
    let warning = || format!("warning: refused a control connection from {peer}: {why}");
    if let Some(line) = warnings.line(from, warning) {
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }
}

impl Children {
    /// Admits one connection per PE, sends each the plan (and the state the job resumes
    /// from) and starts a reader for it; reports (on standard error) every connection
    /// refused. Closes the listener once all are in.
    fn connect_all(
        &mut self,
        listener: LinkListener,
        secret: &JobSecret,
        (plan, resume): (&PhysicalPlan, Option<ResumeFrom<'_>>),
        starting: &Starting<'_>,
    ) -> Result<(), RunError> {
        let (events, received) = mpsc::channel();
        self.events = received;
        let (admit, admissions) = mpsc::channel();
        let handshakes = link::Handshakes::for_peers(self.pes.len());
        // Each PE is sent the plan and the state of its own instances.
        let checkpoints = self.checkpoint_dir.clone();
        let states = self.states.clone();
        // A state in memory (for PEs of other hosts) goes in frames before the plan.
        let messages_for = |pe: usize| -> Result<Vec<ToPe>, RunError> {
            let (mut messages, resume) = match resume.map(|from| from.for_pe(plan, pe)) {
                Some(PeResume::State(state)) => (
                    wire::state_frames(&state)?
                        .into_iter()
                        .map(|bytes| ToPe::StateFrame(wire::Frame::new(bytes)))
                        .collect(),
                    Some(Box::new(PeResume::Framed)),
                ),
                other => (Vec::new(), other.map(Box::new)),
            };
            messages.push(ToPe::Plan {
                plan: Box::new(plan.clone()),
                resume,
                checkpoints: checkpoints.clone(),
                states: states.clone(),
            });
            Ok(messages)
        };
        let mut messages = (0..self.pes.len())
            .map(|pe| messages_for(pe).map(Some))
            .collect::<Result<Vec<_>, _>>()?;
        let began = Instant::now();
        let mut warnings = WarningLimit::default();
        let mut connected = 0;
        let mut admit_all = || -> Result<(), RunError> {
            while connected < self.pes.len() {
                listener.admit(secret, &handshakes, &admit)?;
                match admissions.recv_timeout(Duration::from_millis(2)) {
                    Ok(Admission::Admitted {
                        pe,
                        mut link,
                        mut reader,
                    }) => {
                        if self.pes.get(pe).is_none_or(|p| p.control.is_some()) {
                            refused(&mut warnings, "a peer", "it claimed a PE that is not free");
                            continue;
                        }
                        // A PE that cannot be told has died; supervision reports it. A state's
                        // frames go from a thread of their own, and heartbeats between them:
                        // the other PEs are admitted and kept alive meanwhile.
                        let mut messages = messages[pe].take().unwrap_or_default();
                        let link = match messages.len() {
                            1 => {
                                let _ = wire::send_message(&mut link, &messages[0]);
                                SharedLink::new(link)
                            }
                            _ => {
                                let link = SharedLink::new(link);
                                let sending = link.clone();
                                std::thread::spawn(move || {
                                    for message in messages.drain(..) {
                                        if sending.send(&message).is_err() {
                                            break;
                                        }
                                    }
                                });
                                link
                            }
                        };
                        self.heart.beat_for(link.clone());
                        self.pes[pe].control = Some(link);
                        self.pes[pe].heard = Some(Silence::new(Instant::now(), HEARD_GRACE));
                        connected += 1;
                        let events = events.clone();
                        std::thread::spawn(move || loop {
                            let message =
                                wire::receive_message::<FromPe>(&mut reader).ok().flatten();
                            let end = message.is_none();
                            if events.send((pe, message)).is_err() || end {
                                break;
                            }
                        });
                    }
                    Ok(Admission::Refused { peer, why }) => refused(&mut warnings, &peer, why),
                    Ok(Admission::Failed(error)) => return Err(error),
                    Err(_) => {}
                }
                self.supervise(Duration::ZERO)?;
                starting.check(began, || {
                    self.late(|p| p.control.is_none(), "reach the launcher")
                })?;
            }
            Ok(())
        };
        let admitted = admit_all();
        if warnings.withheld() > 0 {
            let _ = writeln!(
                std::io::stderr().lock(),
                "warning: refused {} more control connections (not shown)",
                warnings.withheld()
            );
        }
        admitted
    }

    /// Waits until every PE has sent a message `expected` accepts.
    fn await_all(
        &mut self,
        mut expected: impl FnMut(&FromPe) -> bool,
        step: &str,
        starting: &Starting<'_>,
    ) -> Result<(), RunError> {
        let began = Instant::now();
        let mut done = vec![false; self.pes.len()];
        while done.contains(&false) {
            self.supervise(SUPERVISION_PERIOD)?;
            while let Some((pe, message)) = self.inbox.pop_front() {
                if expected(&message) {
                    done[pe] = true;
                }
            }
            starting.check(began, || {
                let mut late = done.iter().map(|d| !d);
                self.late(|_| late.next().unwrap_or(false), step)
            })?;
        }
        Ok(())
    }

    /// The message for the PEs `late` picks, which did not `step` in time.
    fn late(&self, mut late: impl FnMut(&Pe) -> bool, step: &str) -> String {
        let named: Vec<String> = self
            .pes
            .iter()
            .filter(|p| late(p))
            .map(|p| format!("PE '{}'{}", p.name, p.placed))
            .collect();
        format!("{} did not {step}", named.join(", "))
    }

    /// Counts every running PE not heard from for the stall timeout as a failure, naming what
    /// its process's state says (a stopped process, one in an uninterruptible wait).
    fn check_heartbeats(&mut self) {
        let timeout = self.stall_timeout;
        let now = Instant::now();
        if now.duration_since(std::mem::replace(&mut self.last_check, now)) >= LAUNCHER_PAUSE {
            // This launcher was stopped or starved itself: its PEs' silence is its own (they
            // may have left because of it, and say so); each gets the timeout afresh.
            for p in &mut self.pes {
                if p.heard.is_some() {
                    p.heard = Some(Silence::new(now, HEARD_GRACE));
                }
            }
        }
        for pe in 0..self.pes.len() {
            let p = &mut self.pes[pe];
            if p.blamed || p.has_spoken() || p.ended_at.is_some() {
                continue;
            }
            // A heartbeat that waits for a CPU on a busy machine is not silence.
            let pid = p.process.as_ref().map(Child::id);
            let silent = p.heard.as_mut().is_some_and(|heard| {
                heard.length(now, || pid.and_then(heartbeat_thread)) >= timeout
            });
            if !silent {
                continue;
            }
            let p = &self.pes[pe];
            let state = match p.process.as_ref().and_then(|c| process_state(c.id())) {
                Some('T') => ": its process is stopped (SIGSTOP?)",
                Some('t') => ": its process is stopped by a debugger",
                Some('D') => ": its process is stuck in an uninterruptible wait",
                _ => ": it does not respond",
            };
            let silent = RunError::Silent {
                pe: p.name.clone(),
                operators: p.operators.clone(),
                silent_for: timeout,
                state: state.into(),
            };
            self.pes[pe].blamed = true;
            self.fail(Some(pe), silent);
        }
    }

    /// One step of supervision: takes the PEs' messages (waiting up to `wait` for the first),
    /// recording reports, failures and closed streams and keeping the rest for
    /// [`Children::await_all`]; then looks at how the PEs (and `mpirun`) stand, counting a PE
    /// that ended without reporting, and `mpirun` ending before every PE reported, as failures.
    /// Fails with the job's root cause once the failures are in (see [`Children::verdict`]).
    fn supervise(&mut self, wait: Duration) -> Result<(), RunError> {
        let mut next = self.events.recv_timeout(wait).map_err(|e| match e {
            RecvTimeoutError::Timeout => TryRecvError::Empty,
            RecvTimeoutError::Disconnected => TryRecvError::Disconnected,
        });
        loop {
            match next {
                Ok((pe, message)) => self.record(pe, message),
                Err(TryRecvError::Empty) => break,
                // Every stream has closed: only exits are left to see.
                Err(TryRecvError::Disconnected) => {
                    std::thread::sleep(wait);
                    break;
                }
            }
            next = self.events.try_recv();
        }
        let now = Instant::now();
        for p in &mut self.pes {
            if p.status.is_none() {
                p.status = p.exited();
                if p.status.is_some() {
                    p.ended_at.get_or_insert(now);
                }
            }
        }
        while let Some(pe) = self
            .pes
            .iter()
            .position(|p| !p.blamed && p.ended_silently())
        {
            self.pes[pe].blamed = true;
            let died = self.died(pe);
            self.fail(Some(pe), died);
        }
        if let (None, Some(mpirun)) = (self.mpirun_ended, &mut self.mpirun) {
            if let Ok(Some(status)) = mpirun.try_wait() {
                self.mpirun_ended = Some((status, now));
                // Its ranks' last words may still be on their way: waited for below.
            }
        }
        self.check_heartbeats();
        if let Some((status, since)) = self.mpirun_ended {
            let settled = since.elapsed() >= EXIT_TIMEOUT
                || self.pes.iter().all(|p| p.has_spoken() || p.hung_up);
            if let Some(pe) = self
                .pes
                .iter()
                .position(|p| !p.has_spoken() && !p.blamed)
                .filter(|_| settled && self.failures.is_empty())
            {
                self.pes[pe].blamed = true;
                let error = RunError::Launch(format!(
                    "mpirun ended ({status}) before PE '{}' reported",
                    self.pes[pe].name
                ));
                self.fail(Some(pe), error);
            }
        }
        self.verdict()
    }

    /// Records one of the job's failures, of `pe` if it is one PE's.
    fn fail(&mut self, pe: Option<usize>, error: RunError) {
        if self.failures.len() < sluice_exec::error::MAX_FAILURES {
            self.failures.push((pe, error));
        }
        self.first_failure.get_or_insert_with(Instant::now);
    }

    /// The job's error, once its failures are in: when every PE has reported or ended, or
    /// [`ROOT_CAUSE_GRACE`] after the first failure (a cause may be reported after its
    /// consequence: the PE that failed of its own accord reports once its threads have left,
    /// the neighbour it cut off as soon as it notices). Consequences are listed in plan order
    /// of their PEs, as they spread along the edges, whatever order their reports came in.
    ///
    /// A PE killed by a signal (`kill -9`, a crash) is a cause as soon as its exit and the
    /// close of its stream are seen: nothing its neighbours report can have caused it, and
    /// they notice it only by checking their peers' processes now and then (each a tenth of a
    /// second or more, one after the other along the edges), so the job is not kept waiting
    /// for them: a restart starts at once.
    fn verdict(&mut self) -> Result<(), RunError> {
        let Some(first) = self.first_failure else {
            return Ok(());
        };
        // A PE's exit is seen before its last words are read: one that ended counts once it
        // spoke or was blamed for its silent end, which waits for its stream to close.
        let settled = self.pes.iter().all(|p| p.has_spoken() || p.blamed);
        let killed = self
            .pes
            .iter()
            .any(|p| p.blamed && p.status.is_some_and(|s| s.signal().is_some()));
        if !settled && !killed && first.elapsed() < ROOT_CAUSE_GRACE {
            return Ok(());
        }
        let mut failures = std::mem::take(&mut self.failures);
        failures.sort_by_key(|(pe, f)| f.is_consequence().then_some(*pe));
        match sluice_exec::error::root_cause(failures.into_iter().map(|(_, f)| f).collect()) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Takes in one message of `pe`'s (`None`: its stream closed).
    fn record(&mut self, pe: usize, message: Option<FromPe>) {
        let p = &mut self.pes[pe];
        if message.is_some() && p.heard.is_some() {
            p.heard = Some(Silence::new(Instant::now(), HEARD_GRACE));
        }
        match message {
            Some(FromPe::Heartbeat) => {}
            Some(FromPe::Metrics { threads }) => self.metrics.record(&p.name, threads),
            // A PE failed by what it sent (its results past the limit) has no report.
            Some(FromPe::Done { report }) if p.failure.is_none() => p.report = Some(report),
            Some(FromPe::Done { .. }) => {}
            Some(FromPe::Checkpointed { ack }) => self.acks.push(ack),
            Some(FromPe::StateFrame(frame)) => p.framed.take(frame),
            Some(FromPe::Results {
                sink,
                instance,
                tuples,
            }) => {
                let taken = self
                    .results
                    .take(&p.name, (&sink, instance, tuples.bytes()));
                if let Err(error) = taken {
                    p.failure.get_or_insert_with(|| error.to_string());
                    self.fail(Some(pe), error);
                }
            }
            Some(FromPe::Failed {
                error,
                consequence,
                permanent,
            }) => {
                if p.failure.is_none() {
                    p.failure = Some(error.clone());
                    let failed = RunError::PeFailed {
                        pe: p.name.clone(),
                        error,
                        consequence,
                        permanent,
                    };
                    self.fail(Some(pe), failed);
                }
            }
            Some(message) => self.inbox.push_back((pe, message)),
            None => {
                p.hung_up = true;
                p.ended_at.get_or_insert_with(Instant::now);
            }
        }
    }

    fn died(&self, pe: usize) -> RunError {
        let p = &self.pes[pe];
        let how = match p.status {
            Some(status) => match (status.code(), status.signal()) {
                (Some(code), _) => format!("exited with status {code}"),
                (_, Some(signal)) => format!(
                    "was killed by signal {signal}{}",
                    signal_name(signal).map_or(String::new(), |n| format!(" ({n})"))
                ),
                _ => "ended".to_string(),
            },
            None => "ended without reporting".to_string(),
        };
        let how = if p.control.is_none() && !p.hung_up {
            // Most likely its host cannot reach this launcher (or its secret was wrong).
            format!("{how} before reaching the launcher at {}", self.listening)
        } else {
            how
        };
        RunError::PeDied {
            pe: p.name.clone(),
            operators: p.operators.clone(),
            how,
        }
    }

    fn tell_all(&mut self, message: &ToPe) {
        for pe in &mut self.pes {
            if let Some(stream) = &pe.control {
                // A PE that cannot be told has died; supervision reports it.
                let _ = stream.send(message);
            }
        }
    }

    /// Kills every PE still running, reaps them, and removes the job's segments. Every PE is
    /// signalled before any is waited for: a PE holding much memory takes the kernel a while
    /// to tear down (some 0.1-0.4 s at 100 MB of state), and they go down together rather
    /// than one after the other.
    fn kill_all(&mut self) {
        for pe in &mut self.pes {
            if let (None, Some(process)) = (pe.status, pe.process.as_mut()) {
                // Its whole process group: what a launch prefix started too (a shell's
                // children). The group is the process's own while it is not reaped.
                let group = rustix::process::Pid::from_raw(process.id() as i32);
                if group
                    .and_then(|g| {
                        rustix::process::kill_process_group(g, rustix::process::Signal::KILL).ok()
                    })
                    .is_none()
                {
                    let _ = process.kill();
                }
            }
        }
        for pe in &mut self.pes {
            if let (None, Some(process)) = (pe.status, pe.process.as_mut()) {
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
    /// report or the job's error (after killing the rest): a PE's failure, its silence, a
    /// drain past [`RunOptions::drain_timeout`], or an abort.
    pub(crate) fn wait(
        mut self,
        control: &JobControl,
        options: &RunOptions,
        stop_when_due: impl Fn(),
        started: Instant,
        mut coordinator: Option<&mut Coordinator>,
    ) -> Result<JobReport, RunError> {
        let mut stop_sent: Option<Instant> = None;
        let result = loop {
            if self.pes.iter().all(|p| p.report.is_some()) {
                break Ok(());
            }
            stop_when_due();
            if let Some(coordinator) = coordinator.as_deref_mut() {
                for ack in self.acks.drain(..) {
                    coordinator.acknowledge(ack);
                }
                for order in coordinator.tick() {
                    self.tell_all(&match order {
                        Order::Take(n) => ToPe::Checkpoint { n },
                        Order::Complete(n) => ToPe::CheckpointComplete { n },
                    });
                }
            }
            if control.aborting() {
                break Err(control.take_error().unwrap_or(RunError::Aborted));
            }
            if control.stop_requested() && stop_sent.is_none() {
                stop_sent = Some(Instant::now());
                self.tell_all(if control.suspending() {
                    &ToPe::Suspend
                } else {
                    &ToPe::Stop
                });
            }
            if stop_sent.is_some_and(|sent| sent.elapsed() >= options.drain_timeout) {
                let waiting: Vec<String> = self
                    .pes
                    .iter()
                    .filter(|p| p.report.is_none())
                    .map(|p| format!("PE '{}'", p.name))
                    .collect();
                break Err(RunError::DrainTimeout {
                    limit: options.drain_timeout,
                    waiting: format!(" (still draining: {})", waiting.join(", ")),
                });
            }
            if let Err(e) = self.supervise(SUPERVISION_PERIOD) {
                break Err(e);
            }
            self.inbox.clear();
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
        let mut instances: Vec<InstanceReport> = Vec::new();
        for pe in &mut self.pes {
            if let Some(report) = pe.report.take() {
                instances.extend(report.into_instances(self.states.as_deref(), &mut pe.framed)?);
            }
        }
        Ok(JobReport::new(elapsed, instances))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::Sender;

    /// A job of PEs `p0`, `p1`, ... whose processes this launcher did not start (as under
    /// `mpirun`), and the sender of their messages.
    fn children(n: usize) -> (Children, Sender<(usize, Option<FromPe>)>) {
        let (sent, events) = mpsc::channel();
        let children = Children {
            pes: (0..n)
                .map(|i| Pe::new(format!("p{i}"), format!("op{i}"), String::new()))
                .collect(),
            mpirun: None,
            mpirun_ended: None,
            events,
            inbox: VecDeque::new(),
            stall_timeout: crate::DEFAULT_STALL_TIMEOUT,
            last_check: Instant::now(),
            failures: Vec::new(),
            first_failure: None,
            segments: None,
            listening: "here".into(),
            metrics: MetricsHandle::new("job", []),
            heart: Heart::start(),
            dir: None,
            checkpoint_dir: None,
            states: None,
            acks: Vec::new(),
            results: ResultsInbox::new(Default::default(), 0),
        };
        (children, sent)
    }

    /// Supervises until a step fails (a watchdog fails the test after 10 s).
    fn supervise_until_error(children: &mut Children) -> RunError {
        let watchdog = Instant::now() + Duration::from_secs(10);
        loop {
            if let Err(error) = children.supervise(SUPERVISION_PERIOD) {
                return error;
            }
            assert!(Instant::now() < watchdog, "supervision never failed");
        }
    }

    fn done() -> FromPe {
        FromPe::Done {
            report: wire::WireReport::from_report(&JobReport::new(Duration::ZERO, Vec::new())),
        }
    }

    #[test]
    fn a_failure_waiting_for_its_cause_keeps_every_other_message() {
        let (mut children, sent) = children(3);
        let failed = FromPe::Failed {
            error: "edge broke".into(),
            consequence: true,
            permanent: false,
        };
        for event in [
            (2, Some(FromPe::Ready)),
            (0, Some(failed)),
            // A PE that reports and then closes its stream is not a death.
            (1, Some(done())),
            (1, None),
        ] {
            sent.send(event).unwrap();
        }
        match supervise_until_error(&mut children) {
            RunError::PeFailed { pe, error, .. } => {
                assert_eq!((pe.as_str(), error.as_str()), ("p0", "edge broke"))
            }
            other => panic!("{other}"),
        }
        assert!(children.pes[1].report.is_some());
        assert!(matches!(
            children.inbox.pop_front(),
            Some((2, FromPe::Ready))
        ));
    }

    #[test]
    fn a_failure_of_its_own_reported_after_its_consequence_is_the_cause() {
        let (mut children, sent) = children(3);
        let failed = |error: &str, consequence| FromPe::Failed {
            error: error.into(),
            consequence,
            permanent: false,
        };
        for event in [
            (2, Some(failed("cut off too", true))),
            (1, Some(failed("panicked", false))),
            (0, Some(failed("cut off", true))),
        ] {
            sent.send(event).unwrap();
        }
        assert_eq!(
            supervise_until_error(&mut children).to_string(),
            "PE 'p1': panicked\n  followed by: PE 'p0': cut off\n  followed by: PE 'p2': cut \
             off too"
        );
    }

    #[test]
    fn a_pe_unheard_for_the_stall_timeout_fails_the_job_and_a_heartbeat_keeps_it() {
        let (mut children, sent) = children(2);
        children.stall_timeout = Duration::from_millis(300);
        let now = Instant::now();
        for pe in &mut children.pes {
            pe.heard = Some(Silence::new(now, HEARD_GRACE));
        }
        // p0 beats throughout; p1 falls silent.
        let watchdog = now + Duration::from_secs(10);
        let error = loop {
            sent.send((0, Some(FromPe::Heartbeat))).unwrap();
            if let Err(error) = children.supervise(SUPERVISION_PERIOD) {
                break error;
            }
            assert!(Instant::now() < watchdog, "the silence was never noticed");
        };
        // The root cause is p1's silence. On a machine so loaded that this loop itself went
        // unscheduled for the timeout, p0 is named after it too.
        assert_eq!(
            error.to_string().lines().next().unwrap_or_default(),
            "PE 'p1' (operators: op1) sent no heartbeat for 0.3 s: it does not respond; the job \
             was stopped"
        );
    }

    #[test]
    fn a_launcher_that_was_stopped_itself_does_not_blame_its_pes_for_its_silence() {
        let (mut children, _sent) = children(2);
        children.stall_timeout = Duration::from_millis(300);
        // Nothing was looked at, and nothing heard, for two seconds: this launcher was stopped.
        let then = Instant::now() - Duration::from_secs(2);
        children.last_check = then;
        for pe in &mut children.pes {
            pe.heard = Some(Silence::new(then, HEARD_GRACE));
        }
        assert!(children.supervise(Duration::ZERO).is_ok());
        assert!(children.failures.is_empty());
    }

    #[test]
    fn refused_control_connections_are_warned_of_up_to_a_limit_per_address() {
        let mut warnings = WarningLimit::default();
        for port in 0..1000 {
            refused(
                &mut warnings,
                &format!("10.0.0.1:{port}"),
                "it said nothing",
            );
        }
        refused(&mut warnings, "10.0.0.2:1", "it said nothing");
        let shown = sluice_transport::tcp::WARNINGS_PER_ADDRESS as u64;
        assert_eq!(warnings.withheld(), 1000 - shown);
    }

    /// A death by a signal is the job's error at its first sight, while the other PEs have
    /// not noticed it yet (they would, by polling their peers' processes, and fail as its
    /// consequences): no grace is waited for them.
    #[test]
    fn a_pe_killed_by_a_signal_is_the_cause_before_its_neighbours_notice() {
        let (mut children, sent) = children(3);
        // What waitpid says of a process killed by SIGKILL, and its stream closed.
        children.pes[1].status = Some(ExitStatus::from_raw(9));
        sent.send((1, None)).unwrap();
        let error = children
            .supervise(SUPERVISION_PERIOD)
            .expect_err("the killed PE is the job's error at once");
        assert_eq!(
            error.to_string(),
            "PE 'p1' (operators: op1) was killed by signal 9 (SIGKILL); the job was stopped"
        );
    }

    #[test]
    fn a_silent_end_during_a_failures_grace_is_the_cause() {
        let (mut children, sent) = children(2);
        sent.send((
            0,
            Some(FromPe::Failed {
                error: "edge broke".into(),
                consequence: true,
                permanent: false,
            }),
        ))
        .unwrap();
        sent.send((1, None)).unwrap();
        assert_eq!(
            supervise_until_error(&mut children).to_string(),
            "PE 'p1' (operators: op1) ended without reporting; the job was stopped\n  followed \
             by: PE 'p0': edge broke"
        );
    }
}
