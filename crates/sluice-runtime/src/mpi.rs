//! The MPI launcher: the PEs of a job run as the ranks of one Open MPI `mpirun`, rank i being
//! PE i, each on the host the plan placed it on. Sluice does not use MPI to move tuples here;
//! `mpirun` is the cluster launcher, and the PEs reach the launcher's control stream to bind,
//! connect and report as under the local launcher.
//!
//! The command is one app context per PE, joined MPMD-style with `:`, so each rank gets the
//! program's own arguments verbatim (an app context file cannot quote them): `mpirun
//! --oversubscribe [--hostfile F] -np 1 [-host H] -x SLUICE_CONTROL=.. -x SLUICE_JOB_ID=.. -x
//! SLUICE_SECRET EXE ARGS : -np 1 ...`. The secret is in `mpirun`'s environment, which `-x`
//! without a value passes on, so it is on no command line. With hosts, the hostfile lists each
//! host with its cores as slots.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use sluice_plan::PhysicalPlan;

use crate::launch::{assignment, pe_args, spawn_logged, PeEnvironment};
use crate::pe::ENV_SECRET;
use crate::{RunError, RunOptions};

/// The MPI hostfile's name in the job's private directory.
pub(crate) const HOSTFILE: &str = "hostfile";
/// How long `mpirun` gets to take its ranks down after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Starts `mpirun` with one rank per PE of `plan`, each running `exe` with the PEs'
/// arguments ([`RunOptions::pe_args`]) and `environment`.
pub(crate) fn spawn_mpirun(
    plan: &PhysicalPlan,
    exe: &Path,
    options: &RunOptions,
    environment: &PeEnvironment,
    dir: &Path,
) -> Result<Child, RunError> {
    let mut command = Command::new("mpirun");
    command
        .env(ENV_SECRET, &environment.secret)
        .arg("--oversubscribe");
    if rustix::process::geteuid().is_root() {
        // Open MPI refuses root unless told twice; PEs in containers and CI often are root.
        command
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    let remote = plan.pes.iter().any(|pe| pe.host != "localhost");
    if remote {
        let hostfile = dir.join(HOSTFILE);
        let lines: String = plan
            .hosts
            .iter()
            .map(|h| format!("{} slots={}\n", h.name, h.cores))
            .collect();
        std::fs::write(&hostfile, lines)
            .map_err(|e| RunError::Launch(format!("cannot write the MPI hostfile: {e}")))?;
        command.arg("--hostfile").arg(&hostfile);
    }
    for (rank, pe) in plan.pes.iter().enumerate() {
        if rank > 0 {
            command.arg(":");
        }
        command.args(["-np", "1"]);
        if remote {
            command.args(["-host", &pe.host]);
        }
        for (key, value) in &environment.public {
            command.arg("-x").arg(assignment(key, value));
        }
        command.args(["-x", ENV_SECRET]);
        command.arg(exe).args(pe_args(options));
    }
    spawn_logged(command, "mpirun", None).map_err(|e| match e {
        RunError::Launch(m) => RunError::Launch(format!(
            "{m} (is Open MPI installed? Debian: apt-get install openmpi-bin)"
        )),
        other => other,
    })
}

/// Stops `mpirun`: SIGTERM so it takes its ranks down, SIGKILL if it does not end in time.
pub(crate) fn stop_mpirun(mut mpirun: Child) {
    if let Ok(None) = mpirun.try_wait() {
        if let Some(pid) = rustix::process::Pid::from_raw(mpirun.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = mpirun.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = mpirun.kill();
    }
    let _ = mpirun.wait();
}
