//! The PE side of the local launcher: a process started as one PE of a job finds its role in
//! the environment, builds its part of the plan, follows the launcher's steps over the control
//! socket, runs, reports, and exits.

use std::io::BufReader;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;

use sluice_graph::Graph;
use sluice_plan::PhysicalPlan;
use sluice_transport::tcp::JobSecret;

use crate::assemble::{self, Scope, Sites};
use crate::control::JobControl;
use crate::wire::{self, FromPe, ToPe, WireReport};
use crate::{RunError, RunOptions};

/// The PE this process runs.
pub(crate) const ENV_PE: &str = "SLUICE_PE";
/// The rank Open MPI gives each process it starts.
const ENV_MPI_RANK: &str = "OMPI_COMM_WORLD_RANK";
/// The job's private directory: the plan and the control socket.
pub(crate) const ENV_JOB_DIR: &str = "SLUICE_JOB_DIR";
/// The job's id, which names its shared segments.
pub(crate) const ENV_JOB_ID: &str = "SLUICE_JOB_ID";
/// The file in the job's directory holding its secret, in hex.
pub(crate) const SECRET_FILE: &str = "secret";
/// The launcher's pid: a PE whose launcher is gone leaves at once.
pub(crate) const ENV_PARENT: &str = "SLUICE_LAUNCHER_PID";

/// Whether this process was started by a launcher as a PE of a job. A program can use it to
/// skip what only the launching process should do (a banner, a summary).
pub fn is_pe_process() -> bool {
    std::env::var_os(ENV_JOB_DIR).is_some()
}

/// What the environment says this PE is.
pub(crate) struct PeRole {
    pe: usize,
    dir: PathBuf,
    job: String,
    /// The launcher's pid, when it started this PE directly.
    launcher: Option<u32>,
}

impl PeRole {
    pub(crate) fn from_env() -> Option<Self> {
        let var = |name| std::env::var(name).ok();
        Some(Self {
            // Under mpirun, a PE is the rank Open MPI gives it.
            pe: var(ENV_PE).or_else(|| var(ENV_MPI_RANK))?.parse().ok()?,
            dir: PathBuf::from(var(ENV_JOB_DIR)?),
            job: var(ENV_JOB_ID)?,
            launcher: var(ENV_PARENT).and_then(|p| p.parse().ok()),
        })
    }
}

/// Runs this process's PE of the job and exits: 0 after a clean end, 1 after a failure.
pub(crate) fn serve(graph: &Graph, role: PeRole, options: &RunOptions) -> ! {
    // Die with whatever started this process (the launcher, or the command that runs it on
    // its host), even if it is killed outright; if the launcher is already gone, leave.
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    let parent = rustix::process::getppid().map(|p| p.as_raw_nonzero().get() as u32);
    if role
        .launcher
        .is_some_and(|launcher| parent != Some(launcher))
    {
        std::process::exit(1);
    }
    let Ok(mut stream) = UnixStream::connect(role.dir.join("control.sock")) else {
        eprintln!("cannot reach the launcher");
        std::process::exit(1);
    };
    let outcome = run(graph, &role, options, &mut stream);
    let message = match &outcome {
        Ok(report) => FromPe::Done {
            report: WireReport::from_report(report),
        },
        Err(error) => FromPe::Failed {
            error: error.to_string(),
        },
    };
    let _ = wire::send(&mut stream, &message);
    std::process::exit(if outcome.is_ok() { 0 } else { 1 })
}

fn run(
    graph: &Graph,
    role: &PeRole,
    options: &RunOptions,
    stream: &mut UnixStream,
) -> Result<crate::JobReport, RunError> {
    let lost = |e: std::io::Error| RunError::Launch(format!("the launcher is gone: {e}"));
    wire::send(stream, &FromPe::Hello { pe: role.pe }).map_err(lost)?;
    let plan_json = std::fs::read(role.dir.join("plan.json"))
        .map_err(|e| RunError::Launch(format!("cannot read the plan: {e}")))?;
    let plan: PhysicalPlan = serde_json::from_slice(&plan_json)
        .map_err(|e| RunError::Launch(format!("the plan does not parse: {e}")))?;
    let secret = std::fs::read_to_string(role.dir.join(SECRET_FILE))
        .ok()
        .and_then(|hex| JobSecret::from_hex(hex.trim()).ok())
        .ok_or_else(|| RunError::Launch("cannot read the job's secret".into()))?;
    let scope = Scope::Pe(role.pe);
    let mut sites = Sites {
        dir: sluice_shm::DEFAULT_DIR.into(),
        job: role.job.clone(),
        secret,
        endpoints: Default::default(),
    };
    let mut reader = BufReader::new(stream.try_clone().map_err(lost)?);
    let gone = || RunError::Launch("the launcher is gone".into());

    let bound = assemble::bind(graph, &plan, scope, &sites)?;
    let endpoints = bound.endpoints.clone();
    wire::send(stream, &FromPe::Bound { endpoints }).map_err(lost)?;
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
    let threads = assemble::start(graph, &plan, scope, &sites, bound, &own, &control)?;
    wire::send(stream, &FromPe::Ready).map_err(lost)?;
    if !matches!(wire::receive::<ToPe>(&mut reader), Ok(Some(ToPe::Go))) {
        return Err(gone());
    }
    control.go();
    let listener = control.clone();
    std::thread::spawn(move || loop {
        match wire::receive::<ToPe>(&mut reader) {
            Ok(Some(ToPe::Stop)) => listener.request_stop(),
            Ok(Some(_)) => {}
            // The launcher is gone: nobody waits for this PE's work.
            _ => {
                listener.abort();
                break;
            }
        }
    });
    let job = crate::RunningJob {
        control,
        running: crate::Running::Threads {
            threads,
            segments: None,
        },
        started: std::time::Instant::now(),
        duration: None,
    };
    job.wait()
}
