//! The segments of one job, as a guard: made when the job starts (removing what crashed runs
//! left), and removing every segment of the job when the job ends or the guard drops.
//!
//! The launcher holds it for the job's lifetime. Its PEs create and open segments under the
//! names it gives ([`JobSegments::name`]); whichever process created one, it is gone once the
//! job is over, even if that process was killed and never ran its `Drop`.

use crate::name::{job_prefix, NameError, SegmentName, DEFAULT_DIR};
use crate::stale::{own_file_id, remove_stale, segment_files, StaleSegment, SweepError};
use std::io;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why [`JobSegments::begin`] failed.
#[derive(Debug, Error)]
pub enum BeginJobError {
    /// The job name makes no segment names.
    #[error(transparent)]
    InvalidJob(#[from] NameError),
    /// Removing the stale segments of earlier runs failed.
    #[error(transparent)]
    Sweep(#[from] SweepError),
}

/// One job's segments in one directory; removes them all when dropped.
///
/// A job id must not be shared by two runs at once: ending one would remove the other's
/// segments (a process that has them mapped keeps working, but none can open them anew).
#[derive(Debug)]
pub struct JobSegments {
    dir: PathBuf,
    job: String,
    prefix: String,
    stale_removed: Vec<StaleSegment>,
    ended: bool,
}

impl JobSegments {
    /// Starts `job` in [`DEFAULT_DIR`]; see [`JobSegments::begin_in`].
    pub fn begin(job: &str) -> Result<Self, BeginJobError> {
        Self::begin_in(DEFAULT_DIR, job)
    }

    /// Starts `job` in `dir`: first removes the stale segments of every job in `dir` (those
    /// whose creator no longer runs; see [`JobSegments::stale_removed`] to report them).
    pub fn begin_in(dir: impl Into<PathBuf>, job: &str) -> Result<Self, BeginJobError> {
        let dir = dir.into();
        let prefix = job_prefix(job)?;
        let stale_removed = remove_stale(&dir, None)?;
        Ok(Self {
            dir,
            job: job.to_owned(),
            prefix,
            stale_removed,
            ended: false,
        })
    }

    /// The job's name.
    pub fn job(&self) -> &str {
        &self.job
    }

    /// The directory the job's segments live in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The name of the job's segment for `edge`.
    pub fn name(&self, edge: &str) -> Result<SegmentName, NameError> {
        SegmentName::in_dir(&self.dir, &self.job, edge)
    }

    /// The stale segments [`JobSegments::begin_in`] removed: each one a sign that a process of
    /// an earlier run crashed.
    pub fn stale_removed(&self) -> &[StaleSegment] {
        &self.stale_removed
    }

    /// Ends the job: removes every segment of the job that is still there (also those being
    /// created), whoever created it, and returns their paths.
    pub fn end(mut self) -> Result<Vec<PathBuf>, SweepError> {
        self.ended = true;
        self.remove_all()
    }

    fn remove_all(&self) -> Result<Vec<PathBuf>, SweepError> {
        let mut removed = Vec::new();
        for (path, _) in segment_files(&self.dir, &self.prefix)? {
            if own_file_id(&path).is_none() {
                continue;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => removed.push(path),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(SweepError::Remove { path, source }),
            }
        }
        Ok(removed)
    }
}

impl Drop for JobSegments {
    fn drop(&mut self) {
        if !self.ended {
            // A drop cannot report; `end` can.
            let _ = self.remove_all();
        }
    }
}
