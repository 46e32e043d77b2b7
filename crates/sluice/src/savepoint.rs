//! `sluice savepoint JOB-ID [DIR]`: asks a running job, over its control socket
//! ([`crate::jobs`]), for a savepoint: the job takes its next checkpoint at once (after the
//! one in flight, if any) and keeps it in DIR, which retention never removes and from which
//! `sluice run APP --from DIR` starts. DIR defaults to `savepoint-YYYYMMDDTHHMMSSZ` (UTC) in
//! the job's checkpoint directory. It prints the savepoint's directory. A job that takes no
//! checkpoints (run without `--checkpoint-every`) has none to keep, and says so. A savepoint
//! not kept within `--timeout` is reported as such, but the job still keeps it in DIR once its
//! checkpoint completes (the runtime has no way to withdraw an ask).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use crate::jobs;

/// How long `sluice savepoint` waits for the savepoint unless `--timeout` says otherwise.
const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// Arguments of `sluice savepoint`.
#[derive(Args, Debug)]
pub(crate) struct SavepointArgs {
    /// The job's ID, as `sluice jobs` lists it.
    id: String,
    /// Where to keep the savepoint: a directory that does not exist yet (default: a new
    /// `savepoint-YYYYMMDDTHHMMSSZ` in the job's checkpoint directory).
    dir: Option<PathBuf>,
    /// How long to wait for the savepoint, in seconds (default 60).
    #[arg(long, value_parser = crate::plan_choice::parse_seconds)]
    timeout: Option<Duration>,
}

/// `sluice savepoint ID [DIR]`: the savepoint's directory on standard output.
pub(crate) fn savepoint(args: SavepointArgs) -> anyhow::Result<()> {
    let job = jobs::pick(Some(&args.id))?;
    // The job's working directory is not this one's.
    let dir = args
        .dir
        .map(|dir| std::path::absolute(&dir).with_context(|| format!("{}", dir.display())))
        .transpose()?;
    let wait = args.timeout.unwrap_or(DEFAULT_WAIT);
    let kept = jobs::savepoint_of(&job.socket, dir, wait).with_context(|| {
        format!(
            "job '{}' (pid {}) does not answer: {}",
            job.id,
            job.pid,
            jobs::silence(job.pid)
        )
    })?;
    let kept = kept.map_err(|why| anyhow::anyhow!("job '{}' kept no savepoint: {why}", job.id))?;
    writeln!(std::io::stdout().lock(), "{}", kept.display())?;
    Ok(())
}
