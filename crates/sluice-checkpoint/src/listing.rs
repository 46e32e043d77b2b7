//! Listing the checkpoints and savepoints in a directory, each verified: what
//! `sluice checkpoints DIR` prints.

use std::path::{Path, PathBuf};

use crate::error::{io_error, RefusedFile, StoreError};
use crate::manifest::{read_manifest, CheckpointKind};
use crate::part::Check;
use crate::store::{has_manifest, parse_checkpoint_dir_name, verify_checkpoint};

/// Whether a checkpoint would load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointStatus {
    /// Its manifest and every part verify.
    Complete,
    /// It has no manifest: being written, or abandoned.
    Partial,
    /// It has a manifest, but these files do not verify.
    Corrupt(Vec<RefusedFile>),
}

/// One checkpoint or savepoint found by [`list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// Its directory.
    pub dir: PathBuf,
    /// Its number: from its manifest, or from its directory's name `chk-N`; `None` for a
    /// savepoint whose manifest does not read.
    pub n: Option<u64>,
    /// From its manifest; a `chk-N` directory whose manifest does not read is a checkpoint's.
    pub kind: Option<CheckpointKind>,
    /// When it was triggered, in milliseconds since the Unix epoch (from the manifest).
    pub created_unix_ms: Option<u64>,
    /// The bytes of the files in its directory.
    pub bytes: u64,
    /// How long it took, in milliseconds (from the manifest).
    pub duration_ms: Option<u64>,
    /// The longest alignment of an instance, in milliseconds (from the manifest).
    pub alignment_ms: Option<u64>,
    /// Whether it would load.
    pub status: CheckpointStatus,
}

/// Every checkpoint and savepoint in `dir`, each verified (every part is read), ordered by
/// number: `dir` itself if it is one checkpoint's or savepoint's directory; otherwise its
/// `chk-N` directories, complete or not, and its other directories that hold a manifest
/// (savepoints saved there); a checkpoint before a savepoint of the same number. It reads
/// every part of every checkpoint: [`crate::CheckpointStore::next_number`] and
/// [`crate::CheckpointStore::latest`] read less.
pub fn list(dir: &Path) -> Result<Vec<CheckpointInfo>, StoreError> {
    if has_manifest(dir) {
        return Ok(vec![describe(dir)?]);
    }
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_error("read the directory", dir))? {
        let path = entry.map_err(io_error("read the directory", dir))?.path();
        // A hidden directory is one being removed (or not the store's).
        let hidden = path
            .file_name()
            .is_some_and(|name| name.as_encoded_bytes().starts_with(b"."));
        if hidden {
            continue;
        }
        let named = path
            .file_name()
            .and_then(parse_checkpoint_dir_name)
            .is_some();
        if path.is_dir() && (named || has_manifest(&path)) {
            found.push(describe(&path)?);
        }
    }
    found.sort_by(|a, b| (a.n, a.kind, &a.dir).cmp(&(b.n, b.kind, &b.dir)));
    Ok(found)
}

/// Describes the checkpoint or savepoint in `dir`.
fn describe(dir: &Path) -> Result<CheckpointInfo, StoreError> {
    let named = dir.file_name().and_then(parse_checkpoint_dir_name);
    let mut bytes = 0;
    for entry in std::fs::read_dir(dir).map_err(io_error("read the directory", dir))? {
        let entry = entry.map_err(io_error("read the directory", dir))?;
        let metadata = entry.metadata().map_err(io_error("read", &entry.path()))?;
        if metadata.is_file() {
            bytes += metadata.len();
        }
    }
    let status = if !has_manifest(dir) {
        CheckpointStatus::Partial
    } else {
        match verify_checkpoint(dir, named, Check::Checksum) {
            Ok(_) => CheckpointStatus::Complete,
            Err(refused) => CheckpointStatus::Corrupt(refused),
        }
    };
    let manifest = read_manifest(dir).ok();
    let checkpoint_named = named.map(|_| CheckpointKind::Checkpoint);
    Ok(CheckpointInfo {
        dir: dir.to_path_buf(),
        n: manifest.as_ref().map(|m| m.n).or(named),
        kind: manifest.as_ref().map(|m| m.kind).or(checkpoint_named),
        created_unix_ms: manifest.as_ref().map(|m| m.created_unix_ms),
        bytes,
        duration_ms: manifest.as_ref().map(|m| m.duration_ms),
        alignment_ms: manifest.as_ref().map(|m| m.alignment_ms),
        status,
    })
}
