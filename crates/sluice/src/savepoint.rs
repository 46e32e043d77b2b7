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
use std::sync::{Mutex, PoisonError};
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
        None => checkpoints.names.next(&checkpoints.dir, SystemTime::now()),
    };
    checkpoints.handle.savepoint(&target, wait)
}

/// Hands out a job's default savepoint directories. A savepoint's directory is made only
/// once its checkpoint completes, so savepoints asked for in the same second must not be
/// given the same name: this remembers the last one handed out.
#[derive(Default)]
pub(crate) struct DefaultNames {
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
    fn a_job_without_checkpoints_names_the_flag() {
        let refused = take(None, None, Duration::from_secs(1)).unwrap_err();
        assert!(refused.contains("--checkpoint-every"), "{refused}");
    }
}
