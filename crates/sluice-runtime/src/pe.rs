//! The PE side of the local launcher: a process started as one PE of a job finds its role in
//! the environment, builds its part of the plan, follows the launcher's steps over the control
//! stream ([`crate::link`]), which also brings it the plan, runs, reports, and exits.
//!
//! From the moment it reaches its launcher it sends a heartbeat every
//! [`HEARTBEAT_PERIOD`](crate::wire::HEARTBEAT_PERIOD), from a thread of its own, so its
//! launcher notices a PE that is stopped (SIGSTOP) or starved, during start-up too; a stuck thread of its own it
//! reports as its failure ([`crate::watch`]). When its stream to the launcher closes (the
//! launcher died, even by SIGKILL) it aborts, and since no launcher will clean up after the
//! job, removes every shared segment of the job and the launcher's control directory on its
//! way out.

use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Mutex};

use sluice_graph::Graph;
use sluice_transport::tcp::JobSecret;

use crate::link::{check_private_dir, ControlAddress, Link};
use crate::metrics::ProcessMetrics;
use crate::wire::{self, FromPe, ToPe, WireReport, HEARTBEAT_PERIOD};
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

/// The writing end of the control stream, shared by the heartbeat and the PE's reports.
#[derive(Clone)]
struct Reporter(Arc<Mutex<Link>>);

impl Reporter {
    fn send(&self, message: &FromPe) -> std::io::Result<()> {
        let mut link = self.0.lock().unwrap_or_else(|p| p.into_inner());
        wire::send(&mut *link, message)
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
    let reader = link.try_clone().map_err(launcher_lost)?;
    let reporter = Reporter(Arc::new(Mutex::new(link)));
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
    let message = match &outcome {
        Ok(report) => FromPe::Done {
            report: WireReport::from_report(report),
        },
        Err(error) => FromPe::Failed {
            error: error.to_string(),
            consequence: error.is_consequence(),
        },
    };
    reporter.send(&message).map_err(launcher_lost)?;
    outcome
}

/// Whether the launcher that started this PE directly is no longer its parent (it died).
fn launcher_left(role: &PeRole) -> bool {
    let parent = rustix::process::getppid().map(|p| p.as_raw_nonzero().get() as u32);
    role.launcher
        .is_some_and(|launcher| parent != Some(launcher))
}

/// The stream to the launcher broke.
fn launcher_lost(error: std::io::Error) -> RunError {
    RunError::LauncherLost(error.to_string())
}

/// Removes what the job left on this host when its launcher is gone and cannot: every shared
/// segment of the job, and the launcher's private directory with its control socket.
fn leave_no_trace(role: &PeRole) {
    if let Ok(segments) = sluice_shm::JobSegments::begin(&role.job) {
        let _ = segments.end();
    }
    if let ControlAddress::Unix(socket) = &role.control {
        let Some(dir) = socket.parent() else { return };
        let is_job_dir = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(crate::link::JOB_DIR_PREFIX));
        if is_job_dir && check_private_dir(dir).is_ok() {
            // Another PE may be removing them too.
            let _ = std::fs::remove_file(socket);
            let _ = std::fs::remove_file(dir.join(crate::mpi::HOSTFILE));
            let _ = std::fs::remove_dir(dir);
        }
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
    reporter: &Reporter,
    metrics: Option<&ProcessMetrics>,
) -> Result<crate::JobReport, RunError> {
    let gone = || RunError::LauncherLost("its stream ended".into());
    let (plan, resume) = match wire::receive::<ToPe>(&mut reader) {
        Ok(Some(ToPe::Plan { plan, resume })) => (plan, resume),
        _ => return Err(gone()),
    };
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
    match wire::receive::<ToPe>(&mut reader) {
        Ok(Some(ToPe::Connect { endpoints })) => sites.endpoints.extend(endpoints),
        _ => return Err(gone()),
    }
    let control = Arc::new(JobControl::new(false));
    // The launcher keeps the time; this PE runs until its sources end or it is told to stop.
    let own = RunOptions {
        duration: None,
        ..*options
    };
    let watched = assemble::Watched {
        control: &control,
        metrics,
        resume: resume.as_deref(),
    };
    let workers = assemble::start(graph, &plan, scope, &sites, bound, &own, watched)?;
    reporter.send(&FromPe::Ready).map_err(launcher_lost)?;
    if !matches!(wire::receive::<ToPe>(&mut reader), Ok(Some(ToPe::Go))) {
        // Its threads leave at once: nobody waits for this PE's work.
        control.abort();
        return Err(gone());
    }
    control.go();
    // The launcher is gone when its stream ends: this PE's work is wanted no more, and the
    // wait below ends (the failure to report it then tells `serve` to clean up).
    let listener = control.clone();
    std::thread::spawn(move || loop {
        match wire::receive::<ToPe>(&mut reader) {
            Ok(Some(ToPe::Stop)) => listener.request_stop(),
            Ok(Some(ToPe::Suspend)) => listener.request_suspend(),
            Ok(Some(_)) => {}
            _ => {
                listener.abort();
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
    };
    job.wait()
}
