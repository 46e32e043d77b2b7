//! The PE side of the local launcher: a process started as one PE of a job finds its role in
//! the environment, builds its part of the plan, follows the launcher's steps over the control
//! stream ([`crate::link`]), which also brings it the plan, runs, reports, and exits.
//!
//! From the moment it reaches its launcher it sends a heartbeat every
//! [`HEARTBEAT_PERIOD`](crate::wire::HEARTBEAT_PERIOD), from a thread of its own, so its
//! launcher notices a PE that is stopped (SIGSTOP) or starved, during start-up too; a stuck
//! thread of its own it reports as its failure ([`crate::watch`]). The launcher beats the
//! same way toward its PEs: a PE that hears nothing from it, not even a heartbeat, for the
//! stall timeout (its launcher stopped or starved, or its host cut off) gives it up, as it
//! does when its stream to the launcher closes (the launcher died, even by SIGKILL): it
//! aborts, says why on its standard error, and since no launcher will clean up after the job,
//! removes every shared segment of the job and the launcher's control directory on its way
//! out.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sluice_graph::Graph;
use sluice_transport::tcp::JobSecret;

use crate::checkpoints::PartWriter;
use crate::link::{remove_job_dir, ControlAddress, Link, SharedLink};
use crate::metrics::ProcessMetrics;
use crate::results::LinkOutlet;
use crate::wire::{self, FromPe, StateFrames, ToPe, WireReport, HEARTBEAT_PERIOD};
use crate::{RunError, RunOptions};
use sluice_exec::assemble::{self, Scope, Sites};
use sluice_exec::control::JobControl;

/// The name of a PE's heartbeat thread, by which its launcher finds what the kernel says of
/// it (a heartbeat waiting for a CPU is not silence).
pub(crate) const HEARTBEAT_THREAD: &str = "heartbeat";
/// The PE this process runs.
pub(crate) const ENV_PE: &str = "SLUICE_PE";
/// The rank Open MPI gives each process it starts.
const ENV_MPI_RANK: &str = "OMPI_COMM_WORLD_RANK";
/// Where the launcher listens: its control socket's path, or its TCP `address:port`.
pub(crate) const ENV_CONTROL: &str = "SLUICE_CONTROL";
/// The job's id, which names its shared segments.
pub(crate) const ENV_JOB_ID: &str = "SLUICE_JOB_ID";
/// The job's secret, in hex; a PE started without it reads it as the first line of its
/// standard input (a PE started through a host's launch prefix, whose command line others
/// could read).
pub(crate) const ENV_SECRET: &str = "SLUICE_SECRET";
/// The launcher's pid: a PE whose launcher is gone leaves at once.
pub(crate) const ENV_PARENT: &str = "SLUICE_LAUNCHER_PID";
/// The environment variables a launcher gives its PEs, every one `SLUICE_`-prefixed: a program
/// that reads `SLUICE_*` variables of its own leaves these alone.
pub const PE_ENVIRONMENT: [&str; 5] = [ENV_PE, ENV_CONTROL, ENV_JOB_ID, ENV_SECRET, ENV_PARENT];

/// Whether this process was started by a launcher as a PE of a job. A program can use it to
/// skip what only the launching process should do (a banner, a summary).
pub fn is_pe_process() -> bool {
    std::env::var_os(ENV_CONTROL).is_some()
}

/// What the environment (and, for the secret, perhaps standard input) says this PE is.
struct PeRole {
    pe: usize,
    control: ControlAddress,
    job: String,
    secret: JobSecret,
    /// The launcher's pid, when it started this PE directly.
    launcher: Option<u32>,
}

impl PeRole {
    fn from_env() -> Result<Self, String> {
        let var = |name| std::env::var(name).ok();
        let missing = |name: &str| format!("{name} is not set or not valid");
        // Under mpirun, a PE is the rank Open MPI gives it.
        let pe = var(ENV_PE)
            .or_else(|| var(ENV_MPI_RANK))
            .and_then(|pe| pe.parse().ok())
            .ok_or_else(|| missing(ENV_PE))?;
        let control = std::env::var_os(ENV_CONTROL)
            .and_then(|c| ControlAddress::from_env(&c))
            .ok_or_else(|| missing(ENV_CONTROL))?;
        let job = var(ENV_JOB_ID).ok_or_else(|| missing(ENV_JOB_ID))?;
        let hex = match var(ENV_SECRET) {
            Some(hex) => hex,
            None => {
                let mut line = String::new();
                std::io::stdin()
                    .lock()
                    .read_line(&mut line)
                    .map_err(|e| format!("cannot read the job's secret: {e}"))?;
                line
            }
        };
        let secret = JobSecret::from_hex(&hex).map_err(|e| format!("no job secret given: {e}"))?;
        Ok(Self {
            pe,
            control,
            job,
            secret,
            launcher: var(ENV_PARENT).and_then(|p| p.parse().ok()),
        })
    }
}

/// Runs this process's PE of the job and exits: 0 after a clean end, 1 after a failure.
pub(crate) fn serve(graph: &Graph, options: &RunOptions) -> ! {
    let role = match PeRole::from_env() {
        Ok(role) => role,
        Err(error) => {
            // Written, not `eprintln!`: a closed standard error must not turn this into a panic.
            let _ = writeln!(std::io::stderr(), "error: this PE cannot start: {error}");
            std::process::exit(1);
        }
    };
    if launcher_left(&role) {
        // Killed before this PE reached it: the job's directory is left for it to remove.
        leave_no_trace(&role);
        std::process::exit(1);
    }
    let link = match Link::open(&role.control, &role.secret, role.pe) {
        Ok(link) => link,
        Err(error) => {
            // A launcher killed before this PE reached it left its job's directory behind.
            if launcher_left(&role) {
                leave_no_trace(&role);
            }
            let _ = writeln!(std::io::stderr(), "error: {error}");
            std::process::exit(1);
        }
    };
    let outcome = run_and_report(graph, &role, options, link);
    match outcome {
        Ok(_) => {
            // After the report: MPI_Finalize waits for every rank, and a rank that failed
            // never comes (mpirun takes the job down once it exits).
            end_mpi();
            std::process::exit(0)
        }
        Err(RunError::LauncherLost(why)) => {
            leave_no_trace(&role);
            // Its standard error may have gone with it: a failed write is no matter.
            let _ = writeln!(
                std::io::stderr(),
                "error: the launcher is gone ({why}); the job's segments were removed"
            );
            std::process::exit(1)
        }
        Err(_) => std::process::exit(1),
    }
}

/// Runs the PE over its stream to the launcher, heartbeats and all, and reports how it ended;
/// `LauncherLost` if the report could not be sent.
fn run_and_report(
    graph: &Graph,
    role: &PeRole,
    options: &RunOptions,
    link: Link,
) -> Result<crate::JobReport, RunError> {
    // A launcher silent for the stall timeout (stopped, starved, its host cut off) is as good
    // as gone: a read finds out, and a write does not wait for it for ever.
    let patience = Some(options.stall_timeout);
    link.set_read_timeout(patience)
        .and_then(|()| link.set_write_timeout(patience))
        .map_err(launcher_lost)?;
    let reader = link.try_clone().map_err(launcher_lost)?;
    let reporter = SharedLink::new(link);
    // What this PE's sinks return to the program goes back over the same link.
    sluice_graph::install_result_outlet(Arc::new(LinkOutlet::new(reporter.clone())));
    // From now on, through start-up too: a PE stopped while it builds is noticed as well.
    // When the launcher is gone the stream's reader finds out and ends the PE.
    // Its threads' live metrics go with the heartbeat once they run.
    let metrics = Arc::new(ProcessMetrics::default());
    let heart = reporter.clone();
    let sampled = options.metrics.then(|| metrics.clone());
    let beating = std::thread::Builder::new().name(HEARTBEAT_THREAD.into());
    let spawned = beating.spawn(move || loop {
        std::thread::sleep(HEARTBEAT_PERIOD);
        if heart.send(&FromPe::Heartbeat).is_err() {
            break;
        }
        let threads = sampled
            .as_ref()
            .and_then(|m| m.sample().into_iter().next())
            .map(|(_, threads)| threads);
        if let Some(threads) = threads {
            if heart.send(&FromPe::Metrics { threads }).is_err() {
                break;
            }
        }
    });
    spawned.map_err(|e| RunError::Launch(format!("cannot start the heartbeat thread: {e}")))?;
    let published = options.metrics.then_some(&*metrics);
    let outcome = run(
        graph,
        role,
        options,
        BufReader::new(reader),
        &reporter,
        published,
    );
    let failed = |error: &RunError| FromPe::Failed {
        error: error.to_string(),
        consequence: error.is_consequence(),
        permanent: error.is_permanent(),
    };
    let messages: Vec<FromPe> = match &outcome {
        Ok((report, states)) => {
            let mut wire = WireReport::from_report(report);
            // On this host, the states go in files; to a launcher of another, in frames.
            let frames = match states {
                Some(dir) => wire.store_states(dir).map(|()| Vec::new()),
                None => wire.frame_states(),
            };
            match frames {
                Ok(mut frames) => {
                    frames.push(FromPe::Done { report: wire });
                    frames
                }
                Err(error) => vec![failed(&error)],
            }
        }
        Err(error) => vec![failed(error)],
    };
    let outcome = outcome.map(|(report, _)| report);
    let sent = messages.iter().try_for_each(|m| reporter.send(m));
    match (sent, outcome) {
        // Why the launcher was lost is what the PE says, not that it could not tell it.
        (_, Err(RunError::LauncherLost(why))) => Err(RunError::LauncherLost(why)),
        (Err(e), _) => Err(launcher_lost(e)),
        (Ok(()), outcome) => outcome,
    }
}

/// Whether the launcher that started this PE directly is no longer its parent (it died).
fn launcher_left(role: &PeRole) -> bool {
    let parent = rustix::process::getppid().map(|p| p.as_raw_nonzero().get() as u32);
    role.launcher
        .is_some_and(|launcher| parent != Some(launcher))
}

/// The stream to the launcher broke, or the launcher left it silent past the stall timeout.
fn launcher_lost(error: std::io::Error) -> RunError {
    match error.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => RunError::LauncherLost(
            "it took nothing this PE sent for the stall timeout: its process is stopped or \
                 starved, or its host is cut off"
                .into(),
        ),
        _ => RunError::LauncherLost(error.to_string()),
    }
}

/// The launcher's next order, past its heartbeats: `LauncherLost` when its stream ends or it
/// sends nothing, not even a heartbeat, for `patience` (the stall timeout; the stream's read
/// timeout).
fn next_order(reader: &mut BufReader<Link>, patience: Duration) -> Result<ToPe, RunError> {
    loop {
        match wire::receive_message::<ToPe>(reader) {
            Ok(Some(ToPe::Heartbeat)) => {}
            Ok(Some(order)) => return Ok(order),
            Ok(None) => return Err(RunError::LauncherLost("its stream ended".into())),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(RunError::LauncherLost(format!(
                    "it sent no heartbeat for {} s, the stall timeout: its process is stopped \
                     or starved, or its host is cut off",
                    patience.as_secs_f64()
                )))
            }
            Err(e) => return Err(RunError::LauncherLost(e.to_string())),
        }
    }
}

/// Removes what the job left on this host when its launcher is gone and cannot: every shared
/// segment of the job, and the launcher's private directory with its control socket.
fn leave_no_trace(role: &PeRole) {
    if let Ok(segments) = sluice_shm::JobSegments::begin(&role.job) {
        let _ = segments.end();
    }
    if let Some(dir) = match &role.control {
        ControlAddress::Unix(socket) => socket.parent(),
        ControlAddress::Tcp(_) => None,
    } {
        remove_job_dir(dir);
    }
}

/// Initialises MPI in this PE (every PE of a job with an `mpi` edge must: Open MPI's
/// initialisation waits for all ranks).
#[cfg(feature = "mpi")]
fn start_mpi(pe: usize) -> Result<(), RunError> {
    sluice_transport::mpi::session::initialize(pe).map_err(|e| RunError::Launch(e.to_string()))
}

/// Refuses: this program has no `mpi` transport.
#[cfg(not(feature = "mpi"))]
fn start_mpi(_: usize) -> Result<(), RunError> {
    Err(RunError::Launch(
        sluice_transport::TransportError::NotBuilt {
            transport: "mpi",
            feature: "mpi",
        }
        .to_string(),
    ))
}

/// Finalises MPI if this PE initialised it.
fn end_mpi() {
    #[cfg(feature = "mpi")]
    sluice_transport::mpi::session::finalize();
}

fn run(
    graph: &Graph,
    role: &PeRole,
    options: &RunOptions,
    mut reader: BufReader<Link>,
    reporter: &SharedLink,
    metrics: Option<&ProcessMetrics>,
) -> Result<(crate::JobReport, Option<PathBuf>), RunError> {
    let patience = options.stall_timeout;
    let unexpected = |order: ToPe| RunError::LauncherLost(format!("it sent {order:?} out of turn"));
    // A state from another host comes in frames before the plan.
    let mut framed = StateFrames::default();
    let (plan, resume, checkpoint_dir, states) = loop {
        match next_order(&mut reader, patience)? {
            ToPe::StateFrame(frame) => framed.take(frame),
            ToPe::Plan {
                plan,
                resume,
                checkpoints,
                states,
            } => break (plan, resume, checkpoints, states),
            order => return Err(unexpected(order)),
        }
    };
    // A checkpoint's parts are read here, from its files, before anything is built.
    let mut resume = resume
        .map(|from| from.into_state(&mut framed))
        .transpose()?;
    if assemble::mpi_channel(&plan).is_some() {
        start_mpi(role.pe)?;
    }
    let scope = Scope::Pe(role.pe);
    let mut sites = Sites::new(role.job.clone(), role.secret.clone());

    let bound = assemble::bind(graph, &plan, scope, &sites)?;
    let endpoints = bound.endpoints.clone();
    reporter
        .send(&FromPe::Bound { endpoints })
        .map_err(launcher_lost)?;
    match next_order(&mut reader, patience)? {
        ToPe::Connect { endpoints } => sites.endpoints.extend(endpoints),
        order => return Err(unexpected(order)),
    }
    let control = Arc::new(JobControl::new(false));
    // Its instances' parts of checkpoints are written here and acknowledged to the launcher.
    let writer = match checkpoint_dir {
        Some(dir) => {
            let store = sluice_checkpoint::CheckpointStore::open(&dir)
                .map_err(|e| RunError::Launch(format!("checkpoints: {e}")))?;
            let acknowledging = reporter.clone();
            let writer = PartWriter::start(Arc::new(store), move |ack| {
                // A launcher that cannot be told is gone: this PE finds out on its stream.
                let _ = acknowledging.send(&FromPe::Checkpointed { ack });
            })?;
            control.set_checkpoint_sink(writer.clone());
            Some(writer)
        }
        None => None,
    };
    // The launcher keeps the time; this PE runs until its sources end or it is told to stop.
    let own = RunOptions {
        duration: None,
        ..*options
    };
    let watched = assemble::Watched {
        control: &control,
        metrics,
        resume: resume.as_mut(),
    };
    let workers = assemble::start(graph, &plan, scope, &sites, bound, &own, watched)?;
    reporter.send(&FromPe::Ready).map_err(launcher_lost)?;
    match next_order(&mut reader, patience) {
        Ok(ToPe::Go) => {}
        other => {
            // Its threads leave at once: nobody waits for this PE's work.
            control.abort();
            return Err(other.map_or_else(|lost| lost, unexpected));
        }
    }
    control.go();
    // The launcher is gone when its stream ends: this PE's work is wanted no more, and the
    // wait below ends (the failure to report it then tells `serve` to clean up).
    let listener = control.clone();
    std::thread::spawn(move || loop {
        match next_order(&mut reader, patience) {
            Ok(ToPe::Stop) => listener.request_stop(),
            Ok(ToPe::Suspend) => listener.request_suspend(),
            Ok(ToPe::Checkpoint { n }) => listener.trigger_checkpoint(n),
            Ok(ToPe::CheckpointComplete { n }) => listener.complete_checkpoint(n),
            Ok(_) => {}
            Err(lost) => {
                // The job's error, so that `serve` says why and removes what the job left.
                listener.fail_with(lost);
                break;
            }
        }
    });
    let job = crate::RunningJob {
        control,
        running: crate::Running::Threads {
            workers,
            segments: None,
        },
        started: std::time::Instant::now(),
        options: own,
        // The launcher keeps the job's figures: this PE sends them with its heartbeat.
        metrics: crate::MetricsHandle::new(&plan.job, []),
        // The launcher coordinates the checkpoints and restarts the job, and shows its
        // progress.
        recovery: None,
        registration: None,
        progress: None,
    };
    let outcome = job.wait();
    // Every part acknowledged before the report: the launcher counts them first.
    if let Some(writer) = writer {
        writer.finish();
    }
    // A suspended job's states are written where the launcher said, not sent in the report.
    outcome.map(|report| (report, states))
}
