//! Finding and removing the segments a crashed run left behind: those whose creator process no
//! longer exists.
//!
//! A published segment names its creator in its header; a segment that died half-built names
//! it in its temporary file name (`…-<pid>.creating`). Only files owned by our effective uid
//! are considered, and only those that look like segments (by name, and for published ones by
//! magic and header version); anything else in the directory is left alone.
//!
//! Liveness is `kill(pid, 0)`: the process is gone when that fails with `ESRCH`. A pid can be
//! reused by an unrelated process, in which case the segment is kept (the safe side: nothing
//! in use is ever removed), and [`crate::Segment::create`] of that name reports it as existing
//! with its creator still running.

use crate::name::{classify, job_prefix, NameError, SegmentFileName, NAME_PREFIX};
use crate::segment::{read_own_segment_file, remove_if_same, FileId};
use rustix::io::Errno;
use rustix::process::Pid;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A segment that was removed because its creator was gone: worth reporting, since it means a
/// process of an earlier run crashed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleSegment {
    /// The file that was removed.
    pub path: PathBuf,
    /// The pid of the process that created it and no longer runs.
    pub creator_pid: u32,
}

/// Why removing a set of segments ([`remove_stale`], [`crate::JobSegments::end`]) failed.
#[derive(Debug, Error)]
pub enum SweepError {
    /// The job name makes no segment names.
    #[error(transparent)]
    InvalidJob(#[from] NameError),
    /// The directory could not be listed.
    #[error("cannot list shared segments in {dir}: {source}")]
    ListDir {
        /// The directory.
        dir: PathBuf,
        /// The system's error.
        source: io::Error,
    },
    /// A segment could not be removed.
    #[error("cannot remove shared segment {path}: {source}")]
    Remove {
        /// The segment's path.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
}

/// Removes from `dir` the segments of `job` (of every job when `None`) whose creator process
/// no longer exists, and returns them so that the caller can report the crash.
pub fn remove_stale(dir: &Path, job: Option<&str>) -> Result<Vec<StaleSegment>, SweepError> {
    let prefix = match job {
        Some(job) => job_prefix(job)?,
        None => NAME_PREFIX.to_owned(),
    };
    let mut removed = Vec::new();
    for (path, kind) in segment_files(dir, &prefix)? {
        let (creator_pid, id) = match kind {
            SegmentFileName::Creating { pid } => match own_file_id(&path) {
                Some(id) => (pid, id),
                None => continue,
            },
            SegmentFileName::Published => match read_own_segment_file(&path) {
                Some(file) if file.header.is_current() && file.header.creator_pid != 0 => {
                    (file.header.creator_pid, file.id)
                }
                _ => continue,
            },
        };
        if process_is_running(creator_pid) {
            continue;
        }
        match remove_if_same(&path, id) {
            Ok(true) => removed.push(StaleSegment { path, creator_pid }),
            // Someone else removed or replaced it meanwhile.
            Ok(false) => {}
            Err(source) => return Err(SweepError::Remove { path, source }),
        }
    }
    Ok(removed)
}

/// Whether process `pid` exists (on this host, in our pid namespace). `false` for pid 0 and
/// for numbers no pid can have. A process of another user counts as existing.
pub fn process_is_running(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(Errno::SRCH) => false,
        // `EPERM`: it exists but is not ours to signal. Anything else: keep to the safe side.
        Err(_) => true,
    }
}

/// The files in `dir` whose names start with `prefix` and have a segment's shape.
pub(crate) fn segment_files(
    dir: &Path,
    prefix: &str,
) -> Result<Vec<(PathBuf, SegmentFileName)>, SweepError> {
    let list_error = |source| SweepError::ListDir {
        dir: dir.to_owned(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(list_error)? {
        let entry = entry.map_err(list_error)?;
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue;
        };
        if !file_name.starts_with(prefix) {
            continue;
        }
        if let Some(kind) = classify(file_name) {
            files.push((entry.path(), kind));
        }
    }
    Ok(files)
}

/// `path`'s identity if it is a regular file (not a link) owned by our effective uid.
pub(crate) fn own_file_id(path: &Path) -> Option<FileId> {
    let metadata = std::fs::symlink_metadata(path).ok()?;
    let ours = metadata.is_file() && metadata.uid() == rustix::process::geteuid().as_raw();
    ours.then(|| FileId::of(&metadata))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn we_are_running_and_pid_zero_is_not() {
        assert!(process_is_running(std::process::id()));
        assert!(!process_is_running(0));
        assert!(!process_is_running(u32::MAX));
    }
}
