//! `sluice savepoint JOB-ID [DIR]`: asks a running job, over its control socket
//! ([`crate::jobs`]), for a savepoint: the job takes its next checkpoint at once (after the
//! one in flight, if any) and keeps it in DIR, which retention never removes and from which
//! `sluice run APP --from DIR` starts. DIR defaults to `savepoint-YYYYMMDDTHHMMSSZ` (UTC) in
//! the job's checkpoint directory. It prints the savepoint's directory. A job that takes no
//! checkpoints (run without `--checkpoint-every`) has none to keep, and says so. A savepoint
//! not kept within `--timeout` is reported as such, but the job still keeps it in DIR once its
//! checkpoint completes (the runtime has no way to withdraw an ask).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use clap::Args;

use crate::jobs::{self, Checkpointing};

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

/// In the job: takes a savepoint into `dir` (the default one in its checkpoint directory when
/// `None`), waiting for it at most `wait`; its directory, or why there is none.
pub(crate) fn take(
    checkpoints: Option<&Checkpointing>,
    dir: Option<PathBuf>,
    wait: Duration,
) -> Result<PathBuf, String> {
    let Some(checkpoints) = checkpoints else {
        return Err(
            "it takes no checkpoints, and a savepoint is a checkpoint kept: run it with \
             --checkpoint-every DURATION (e.g. --checkpoint-every 1s)"
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
        None => default_dir(&checkpoints.dir, SystemTime::now()),
    };
    checkpoints.handle.savepoint(&target, wait)
}

/// A new directory for a savepoint taken at `now` in the checkpoint directory `checkpoints`:
/// `savepoint-YYYYMMDDTHHMMSSZ`, with `-2`, `-3`, ... after it when one of that second exists.
fn default_dir(checkpoints: &Path, now: SystemTime) -> PathBuf {
    let stamp: String = humantime::format_rfc3339_seconds(now)
        .to_string()
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    let base = format!("savepoint-{stamp}");
    let mut dir = checkpoints.join(&base);
    let mut k = 1;
    while dir.exists() {
        k += 1;
        dir = checkpoints.join(format!("{base}-{k}"));
    }
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_directory_is_named_by_the_time_and_never_one_that_exists() {
        let root = tempfile::tempdir().unwrap();
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let first = default_dir(root.path(), at);
        assert_eq!(first, root.path().join("savepoint-20270115T080000Z"));
        std::fs::create_dir(&first).unwrap();
        assert_eq!(
            default_dir(root.path(), at),
            root.path().join("savepoint-20270115T080000Z-2")
        );
    }

    #[test]
    fn a_job_without_checkpoints_names_the_flag() {
        let refused = take(None, None, Duration::from_secs(1)).unwrap_err();
        assert!(refused.contains("--checkpoint-every"), "{refused}");
    }
}
