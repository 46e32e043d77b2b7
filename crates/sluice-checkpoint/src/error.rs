//! What can go wrong storing or loading a checkpoint: every error names the file or directory
//! and what is wrong with it, and a full disk is an error of its own ([`StoreError::DiskFull`])
//! a coordinator can act on (fail this checkpoint, keep the job running, try again later).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// A file of a checkpoint that does not verify, and why: what [`crate::LoadedCheckpoint`]
/// reports of the checkpoints it skipped, and what [`StoreError::NoneVerifies`] lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedFile {
    /// The file (or the checkpoint's directory when its manifest is missing).
    pub path: PathBuf,
    /// What is wrong with it.
    pub reason: String,
}

impl RefusedFile {
    pub(crate) fn new(path: &Path, reason: impl Into<String>) -> Self {
        Self {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for RefusedFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

/// Files refused, one a line: the tail of the messages of [`StoreError::NoneVerifies`] and
/// [`StoreError::Corrupt`].
pub(crate) struct RefusedList<'a>(pub &'a [RefusedFile]);

impl fmt::Display for RefusedList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for refused in self.0 {
            write!(f, "\n  {refused}")?;
        }
        Ok(())
    }
}

/// An error of the checkpoint store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file system has no room (ENOSPC) or the user's quota is spent (EDQUOT). Whatever
    /// was being written is removed; no checkpoint looks complete because of it.
    #[error("the disk is full writing {path}: {source}")]
    DiskFull {
        /// The file being written.
        path: PathBuf,
        /// The error of the write, fsync or rename.
        source: io::Error,
    },
    /// Any other failure of the file system.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done: "write", "read", "rename", ...
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The checkpoint directory could be read or changed by someone else.
    #[error("the checkpoint directory {dir} is refused: {why}")]
    NotPrivate {
        /// The directory.
        dir: PathBuf,
        /// Whose it is or what its mode allows.
        why: String,
    },
    /// A part's name cannot become a file name.
    #[error("the part name {name:?} is refused: {why}")]
    PartName {
        /// The name as given.
        name: String,
        /// Why.
        why: String,
    },
    /// A manifest handed to [`crate::CheckpointStore::complete`] does not describe what is on
    /// disk, or does not describe checkpoint `n`.
    #[error("checkpoint {n} cannot complete: {why}")]
    Incomplete {
        /// The checkpoint.
        n: u64,
        /// What is missing or different (naming the file).
        why: String,
    },
    /// Checkpoint `n` already has its manifest: its parts cannot change and it cannot be
    /// aborted.
    #[error("checkpoint {n} is already complete: {manifest} exists")]
    AlreadyComplete {
        /// The checkpoint.
        n: u64,
        /// Its manifest.
        manifest: PathBuf,
    },
    /// Checkpoint `n` has no manifest (or no directory) to save or load.
    #[error("checkpoint {n} is not complete: {dir} has no manifest")]
    NotComplete {
        /// The checkpoint.
        n: u64,
        /// Its directory.
        dir: PathBuf,
    },
    /// Complete checkpoints exist but not one verifies: every file refused is listed.
    #[error("no complete checkpoint in {dir} verifies; refused:{}", RefusedList(.refused))]
    NoneVerifies {
        /// The job's checkpoint directory.
        dir: PathBuf,
        /// Every file refused, newest checkpoint first.
        refused: Vec<RefusedFile>,
    },
    /// The one checkpoint or savepoint asked for does not verify.
    #[error("the checkpoint in {dir} is refused:{}", RefusedList(.refused))]
    Corrupt {
        /// Its directory.
        dir: PathBuf,
        /// Every file refused.
        refused: Vec<RefusedFile>,
    },
    /// A directory given to load from holds neither a manifest nor a complete checkpoint.
    #[error("{dir} holds no complete checkpoint or savepoint (no MANIFEST.json in it or in any chk-N directory)")]
    NothingToLoad {
        /// The directory.
        dir: PathBuf,
    },
    /// A savepoint's target is refused.
    #[error("the savepoint directory {target} is refused: {why}")]
    SavepointTarget {
        /// The target.
        target: PathBuf,
        /// Why.
        why: String,
    },
}

impl StoreError {
    /// Whether this is a full disk or a spent quota: the checkpoint failed, the job can go on.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, StoreError::DiskFull { .. })
    }
}

/// Maps an I/O error of `action` on `path` to a [`StoreError`], a full disk to its own kind.
pub(crate) fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| {
        // std maps ENOSPC to StorageFull and EDQUOT to QuotaExceeded.
        let full = matches!(
            source.kind(),
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
        );
        if full {
            StoreError::DiskFull { path, source }
        } else {
            StoreError::Io {
                action,
                path,
                source,
            }
        }
    }
}
