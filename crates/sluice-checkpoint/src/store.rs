//! The checkpoint store of one job: writing parts, completing, aborting, retention, loading
//! the latest complete checkpoint and saving one as a savepoint.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::{self, Write};
use std::num::NonZeroUsize;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::durable::{make_dir, make_private_dir, sync_dir, write_durably, PRIVATE_DIR_MODE};
use crate::error::{io_error, RefusedFile, StoreError};
use crate::manifest::{
    read_manifest, write_manifest, CheckpointKind, Manifest, PartEntry, MANIFEST_FILE,
};
use crate::part::{header, part_file_name, verify_part, Check, PART_HEADER_LEN};

/// How many complete checkpoints a store keeps unless told otherwise.
pub const DEFAULT_RETAINED: NonZeroUsize = NonZeroUsize::new(3).unwrap();

/// The prefix of a checkpoint's directory name: `chk-N`.
const CHECKPOINT_PREFIX: &str = "chk-";
/// The prefix of a directory being removed (renamed so first: it no longer looks like a
/// checkpoint even if the removal is cut short).
const REMOVING_PREFIX: &str = ".removing-";

/// The directory name of checkpoint `n`.
pub(crate) fn checkpoint_dir_name(n: u64) -> String {
    format!("{CHECKPOINT_PREFIX}{n}")
}

/// The checkpoint a directory name `chk-N` names (decimal, no leading zero), or `None`.
pub(crate) fn parse_checkpoint_dir_name(name: &OsStr) -> Option<u64> {
    let digits = name.to_str()?.strip_prefix(CHECKPOINT_PREFIX)?;
    let canonical = digits.bytes().all(|b| b.is_ascii_digit())
        && !(digits.len() > 1 && digits.starts_with('0'));
    canonical.then(|| digits.parse().ok()).flatten()
}

/// The checkpoints' directories in the job's checkpoint directory `dir`, oldest first.
pub(crate) fn checkpoint_dirs(dir: &Path) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_error("read the directory", dir))? {
        let entry = entry.map_err(io_error("read the directory", dir))?;
        if let Some(n) = parse_checkpoint_dir_name(&entry.file_name()) {
            found.push((n, entry.path()));
        }
    }
    found.sort_unstable_by_key(|(n, _)| *n);
    Ok(found)
}

/// Whether the checkpoint in `dir` has its manifest: it was completed.
pub(crate) fn has_manifest(dir: &Path) -> bool {
    dir.join(MANIFEST_FILE).exists()
}

/// What [`CheckpointStore::write_part`] wrote: the manifest's entry for the part, and how long
/// the write took (file made, written, fsynced and renamed, directory fsynced).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartInfo {
    /// The part as the manifest lists it.
    pub entry: PartEntry,
    /// How long the write took.
    pub elapsed: Duration,
}

/// A complete checkpoint read back and verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedCheckpoint {
    /// Its number.
    pub n: u64,
    /// Its directory.
    pub dir: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
    /// Every part's payload, by part name.
    pub parts: BTreeMap<String, Vec<u8>>,
    /// The files of newer complete checkpoints refused on the way to this one (each also
    /// logged with `tracing::warn!`).
    pub skipped: Vec<RefusedFile>,
}

/// A complete checkpoint whose manifest and parts verified, its payloads left on disk: what a
/// launcher restarts a job from, each PE then reading its own instances' parts ([`read_part`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedCheckpoint {
    /// Its number.
    pub n: u64,
    /// Its directory.
    pub dir: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
    /// The files of newer complete checkpoints refused on the way to this one (each also
    /// logged with `tracing::warn!`).
    pub skipped: Vec<RefusedFile>,
}

impl VerifiedCheckpoint {
    fn loaded(self, parts: BTreeMap<String, Vec<u8>>) -> LoadedCheckpoint {
        LoadedCheckpoint {
            n: self.n,
            dir: self.dir,
            manifest: self.manifest,
            parts,
            skipped: self.skipped,
        }
    }
}

/// A checkpoint found and verified, with its payloads by part name when they were kept.
type Found = (VerifiedCheckpoint, BTreeMap<String, Vec<u8>>);

/// Refuses a manifest's entry whose file is not its part's: a manifest never names a file of
/// its own choosing (`../x`).
fn check_file_of(entry: &PartEntry) -> Result<(), String> {
    let file = part_file_name(&entry.name).map_err(|e| e.to_string())?;
    if entry.file == file {
        Ok(())
    } else {
        Err(format!(
            "the part {:?} is listed in the file {:?}, not in {file:?}",
            entry.name, entry.file
        ))
    }
}

/// A checkpoint that verified: its manifest, and its payloads by part name if they were kept.
pub(crate) struct Verified {
    pub manifest: Manifest,
    pub parts: BTreeMap<String, Vec<u8>>,
}

/// Reads and verifies the checkpoint in `dir`: its manifest (of checkpoint `n` if given), and
/// every part it lists as `check` says. Returns the manifest and, with [`Check::Payload`], the
/// payloads by part name; or every file refused.
pub(crate) fn verify_checkpoint(
    dir: &Path,
    n: Option<u64>,
    check: Check,
) -> Result<Verified, Vec<RefusedFile>> {
    let manifest = read_manifest(dir).map_err(|refused| vec![refused])?;
    let refuse_manifest = |reason: String| vec![RefusedFile::new(&dir.join(MANIFEST_FILE), reason)];
    if let Some(n) = n.filter(|&n| n != manifest.n) {
        return Err(refuse_manifest(format!(
            "it describes checkpoint {}, in the directory of checkpoint {n}",
            manifest.n
        )));
    }
    let mut refused = Vec::new();
    let mut parts = BTreeMap::new();
    for entry in &manifest.parts {
        check_file_of(entry).map_err(refuse_manifest)?;
        match verify_part(&dir.join(&entry.file), entry, check) {
            Ok(payload) => {
                if parts
                    .insert(entry.name.clone(), payload.unwrap_or_default())
                    .is_some()
                {
                    return Err(refuse_manifest(format!(
                        "it lists the part {:?} twice",
                        entry.name
                    )));
                }
            }
            Err(file) => refused.push(file),
        }
    }
    if refused.is_empty() {
        Ok(Verified { manifest, parts })
    } else {
        Err(refused)
    }
}

/// The newest complete checkpoint in the job's checkpoint directory `dir` that verifies as
/// `check` says, falling back past those that do not, with its payloads if it keeps them;
/// `None` if none is complete; an error naming every file refused if some are complete but
/// none verifies.
fn latest_in(dir: &Path, check: Check) -> Result<Option<Found>, StoreError> {
    let mut skipped = Vec::new();
    let mut complete_seen = false;
    for (n, path) in checkpoint_dirs(dir)?.into_iter().rev() {
        if !has_manifest(&path) {
            continue;
        }
        complete_seen = true;
        match verify_checkpoint(&path, Some(n), check) {
            Ok(Verified { manifest, parts }) => {
                let verified = VerifiedCheckpoint {
                    n,
                    dir: path,
                    manifest,
                    skipped,
                };
                return Ok(Some((verified, parts)));
            }
            Err(refused) => {
                for file in &refused {
                    tracing::warn!(
                        "checkpoint {n} skipped: {file}; falling back to the one before"
                    );
                }
                skipped.extend(refused);
            }
        }
    }
    if complete_seen {
        Err(StoreError::NoneVerifies {
            dir: dir.to_path_buf(),
            refused: skipped,
        })
    } else {
        Ok(None)
    }
}

/// Reads one part of the checkpoint (or savepoint) in `dir`, as its manifest lists it, and
/// verifies it: what a PE restoring one instance reads, given the entry by its coordinator,
/// without loading the other instances' state.
pub fn read_part(dir: &Path, entry: &PartEntry) -> Result<Vec<u8>, StoreError> {
    let corrupt = |refused: RefusedFile| StoreError::Corrupt {
        dir: dir.to_path_buf(),
        refused: vec![refused],
    };
    let path = dir.join(&entry.file);
    check_file_of(entry).map_err(|why| corrupt(RefusedFile::new(&path, why)))?;
    let payload = verify_part(&path, entry, Check::Payload).map_err(corrupt)?;
    Ok(payload.unwrap_or_default())
}

/// Loads what `sluice run --from DIR` names: one checkpoint's or savepoint's directory (it must
/// verify), or a job's checkpoint directory (its latest complete checkpoint that verifies).
pub fn load(dir: &Path) -> Result<LoadedCheckpoint, StoreError> {
    let (verified, parts) = find(dir, Check::Payload)?;
    Ok(verified.loaded(parts))
}

/// As [`load`], verifying every part without keeping the payloads: a restart's launcher
/// leaves each PE to read its own parts.
pub fn verify(dir: &Path) -> Result<VerifiedCheckpoint, StoreError> {
    find(dir, Check::Checksum).map(|(verified, _)| verified)
}

fn find(dir: &Path, check: Check) -> Result<Found, StoreError> {
    if has_manifest(dir) {
        let n = dir.file_name().and_then(parse_checkpoint_dir_name);
        let Verified { manifest, parts } =
            verify_checkpoint(dir, n, check).map_err(|refused| StoreError::Corrupt {
                dir: dir.to_path_buf(),
                refused,
            })?;
        let verified = VerifiedCheckpoint {
            n: manifest.n,
            dir: dir.to_path_buf(),
            manifest,
            skipped: Vec::new(),
        };
        return Ok((verified, parts));
    }
    latest_in(dir, check)?.ok_or_else(|| StoreError::NothingToLoad {
        dir: dir.to_path_buf(),
    })
}

/// The checkpoints of one job, in its checkpoint directory (see the crate's documentation for
/// the layout). Every method takes `&self`: the instances' writer threads of a process share
/// one store, and PEs on other hosts open their own on a shared mount.
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    dir: PathBuf,
    retained: NonZeroUsize,
}

impl CheckpointStore {
    /// Opens the job's checkpoint directory `dir`, made (mode 0700, parents too) if missing;
    /// refused if it is not a directory of this user's, or others may write in it. Keeps the
    /// last [`DEFAULT_RETAINED`] complete checkpoints.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        make_private_dir(dir)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            retained: DEFAULT_RETAINED,
        })
    }

    /// Keeps the last `retained` complete checkpoints instead (`--checkpoints-retained`).
    pub fn with_retained(self, retained: NonZeroUsize) -> Self {
        Self { retained, ..self }
    }

    /// The job's checkpoint directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory of checkpoint `n`.
    pub fn checkpoint_dir(&self, n: u64) -> PathBuf {
        self.dir.join(checkpoint_dir_name(n))
    }

    /// The number the job's next checkpoint takes so that it overwrites none: one past the
    /// highest `chk-N` directory, complete or not (1 in an empty directory). Reads names only,
    /// where [`crate::list`] reads every part.
    pub fn next_number(&self) -> Result<u64, StoreError> {
        Ok(checkpoint_dirs(&self.dir)?
            .last()
            .map_or(1, |(n, _)| n.saturating_add(1)))
    }

    /// Writes the part `part` (an instance's name, such as `sum[1]`) of checkpoint `n`: the
    /// header and `payload`, durably (see the crate's documentation). Refused if the name
    /// cannot be a file name, or checkpoint `n` is already complete. A full disk is
    /// [`StoreError::DiskFull`], and leaves nothing behind.
    pub fn write_part(&self, n: u64, part: &str, payload: &[u8]) -> Result<PartInfo, StoreError> {
        let started = Instant::now();
        let file = part_file_name(part)?;
        let dir = self.checkpoint_dir(n);
        if make_dir(&dir)? {
            sync_dir(&self.dir)?;
        }
        let manifest = dir.join(MANIFEST_FILE);
        if manifest.exists() {
            return Err(StoreError::AlreadyComplete { n, manifest });
        }
        let (header, crc32) = header(payload);
        write_durably(&dir, &file, |f| {
            f.write_all(&header)?;
            f.write_all(payload)
        })?;
        Ok(PartInfo {
            entry: PartEntry {
                name: part.to_string(),
                file,
                bytes: (PART_HEADER_LEN + payload.len()) as u64,
                crc32,
            },
            elapsed: started.elapsed(),
        })
    }

    /// Completes checkpoint `n`: checks every part `manifest` lists is on disk with its
    /// length, writes the manifest durably (the step that makes the checkpoint complete), then
    /// applies retention: of the complete checkpoints the last `retained` are kept, older ones
    /// are removed, and so is every checkpoint before `n` that never completed (completing `n`
    /// abandons them). Savepoints are never removed. A failure of retention is logged, not
    /// returned: the checkpoint is complete.
    pub fn complete(&self, n: u64, manifest: &Manifest) -> Result<(), StoreError> {
        let incomplete = |why: String| StoreError::Incomplete { n, why };
        if manifest.n != n {
            return Err(incomplete(format!(
                "the manifest given describes checkpoint {}",
                manifest.n
            )));
        }
        if manifest.kind != CheckpointKind::Checkpoint {
            return Err(incomplete(
                "the manifest given is a savepoint's (save_as makes savepoints)".into(),
            ));
        }
        let dir = self.checkpoint_dir(n);
        // A checkpoint of no parts has no directory yet.
        make_dir(&dir)?;
        let manifest_path = dir.join(MANIFEST_FILE);
        if manifest_path.exists() {
            return Err(StoreError::AlreadyComplete {
                n,
                manifest: manifest_path,
            });
        }
        let mut names = BTreeSet::new();
        for entry in &manifest.parts {
            if !names.insert(&entry.name) {
                return Err(incomplete(format!(
                    "the part {:?} is listed twice",
                    entry.name
                )));
            }
            check_file_of(entry).map_err(incomplete)?;
            let path = dir.join(&entry.file);
            let bytes = match std::fs::metadata(&path) {
                Ok(metadata) => metadata.len(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(incomplete(format!("{} is missing", path.display())))
                }
                Err(e) => return Err(io_error("read", &path)(e)),
            };
            if bytes != entry.bytes {
                return Err(incomplete(format!(
                    "{} has {bytes} bytes, the manifest says {}",
                    path.display(),
                    entry.bytes
                )));
            }
        }
        // The checkpoint's own directory entry is durable before its manifest can be.
        sync_dir(&self.dir)?;
        write_manifest(&dir, manifest)?;
        self.retain(n);
        Ok(())
    }

    /// Removes what checkpoint `n` wrote, after it failed. Refused if it is complete.
    pub fn abort(&self, n: u64) -> Result<(), StoreError> {
        let dir = self.checkpoint_dir(n);
        let manifest = dir.join(MANIFEST_FILE);
        if manifest.exists() {
            return Err(StoreError::AlreadyComplete { n, manifest });
        }
        match std::fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            _ => self.remove_checkpoint(&dir),
        }
    }

    /// The newest complete checkpoint whose manifest and every part verify; one that does not
    /// is skipped (named in [`LoadedCheckpoint::skipped`] and logged) for the one before.
    /// `None` if no checkpoint is complete; [`StoreError::NoneVerifies`], naming every file
    /// refused, if some are but none verifies.
    pub fn latest(&self) -> Result<Option<LoadedCheckpoint>, StoreError> {
        Ok(latest_in(&self.dir, Check::Payload)?.map(|(verified, parts)| verified.loaded(parts)))
    }

    /// As [`CheckpointStore::latest`], its payloads verified and left on disk.
    pub fn latest_verified(&self) -> Result<Option<VerifiedCheckpoint>, StoreError> {
        Ok(latest_in(&self.dir, Check::Checksum)?.map(|(verified, _)| verified))
    }

    /// As [`CheckpointStore::latest_verified`], its payloads not read: the manifest is
    /// verified, and each part's header and length against it, but not the payloads'
    /// checksums, which whoever reads a part checks then ([`read_part`]). What a restart
    /// starts from at once: its PEs read every part anyway, so reading them here first would
    /// read the state twice; a part found damaged then fails the restart, and the next one
    /// verifies with [`CheckpointStore::latest_verified`], falling back past it.
    pub fn latest_complete(&self) -> Result<Option<VerifiedCheckpoint>, StoreError> {
        Ok(latest_in(&self.dir, Check::Header)?.map(|(verified, _)| verified))
    }

    /// Saves complete checkpoint `n` as a savepoint in the new directory `target` (its missing
    /// parents made): its parts hard-linked (copied across file systems; a part file never
    /// changes once written, so a link shares nothing that moves), then a manifest of kind
    /// savepoint written last. The checkpoint must verify first. Returns the savepoint's
    /// directory. A savepoint is never removed by retention, in `target` or anywhere.
    pub fn save_as(&self, n: u64, target: &Path) -> Result<PathBuf, StoreError> {
        let source = self.checkpoint_dir(n);
        if !has_manifest(&source) {
            return Err(StoreError::NotComplete { n, dir: source });
        }
        let manifest = verify_checkpoint(&source, Some(n), Check::Checksum)
            .map_err(|refused| StoreError::Corrupt {
                dir: source.clone(),
                refused,
            })?
            .manifest;
        let refuse = |why: &str| StoreError::SavepointTarget {
            target: target.to_path_buf(),
            why: why.to_string(),
        };
        let Some(name) = target.file_name() else {
            return Err(refuse("it names no directory"));
        };
        if parse_checkpoint_dir_name(name).is_some() {
            return Err(refuse(
                "a name chk-N is a checkpoint's, which retention removes; choose another",
            ));
        }
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE_DIR_MODE)
            .create(parent)
            .map_err(io_error("make the directory", parent))?;
        if !make_dir(target)? {
            return Err(refuse("it exists already"));
        }
        let saved = fill_savepoint(&source, target, manifest);
        if saved.is_err() {
            // The directory is this call's own: what it holds is not a savepoint.
            let _ = std::fs::remove_dir_all(target);
        }
        saved?;
        sync_dir(parent)?;
        Ok(target.to_path_buf())
    }

    /// Removes the checkpoint directory `dir`: renamed first (it stops looking like a
    /// checkpoint at once), then deleted.
    fn remove_checkpoint(&self, dir: &Path) -> Result<(), StoreError> {
        let name = dir
            .file_name()
            .map(OsStr::to_string_lossy)
            .unwrap_or_default();
        let doomed = self.dir.join(format!(
            "{REMOVING_PREFIX}{name}-{:016x}",
            fastrand::u64(..)
        ));
        std::fs::rename(dir, &doomed).map_err(io_error("rename for removal", dir))?;
        sync_dir(&self.dir)?;
        std::fs::remove_dir_all(&doomed).map_err(io_error("remove", &doomed))
    }

    /// Applies retention after checkpoint `n` completed; logs what fails.
    fn retain(&self, n: u64) {
        if let Err(e) = self.try_retain(n) {
            tracing::warn!("checkpoint {n} is complete, but retention failed: {e}");
        }
    }

    /// Removes complete checkpoints past the last `retained`, checkpoints before `n` that
    /// never completed, and what earlier removals left half done.
    fn try_retain(&self, n: u64) -> Result<(), StoreError> {
        let mut complete = Vec::new();
        for (m, dir) in checkpoint_dirs(&self.dir)? {
            if has_manifest(&dir) {
                // A savepoint is kept even in a chk-N directory (made by hand); a damaged
                // manifest counts as a checkpoint's.
                if !matches!(read_manifest(&dir), Ok(m) if m.kind == CheckpointKind::Savepoint) {
                    complete.push(dir);
                }
            } else if m < n {
                self.remove_checkpoint(&dir)?;
            }
        }
        let excess = complete.len().saturating_sub(self.retained.get());
        for dir in &complete[..excess] {
            self.remove_checkpoint(dir)?;
        }
        for entry in
            std::fs::read_dir(&self.dir).map_err(io_error("read the directory", &self.dir))?
        {
            let entry = entry.map_err(io_error("read the directory", &self.dir))?;
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(REMOVING_PREFIX)
            {
                let path = entry.path();
                std::fs::remove_dir_all(&path).map_err(io_error("remove", &path))?;
            }
        }
        Ok(())
    }
}

/// Links (or copies) the parts of the checkpoint in `source` into `target`, then writes
/// `manifest` there as a savepoint's.
fn fill_savepoint(source: &Path, target: &Path, manifest: Manifest) -> Result<(), StoreError> {
    for entry in &manifest.parts {
        let from = source.join(&entry.file);
        if std::fs::hard_link(&from, target.join(&entry.file)).is_err() {
            write_durably(target, &entry.file, |f| {
                io::copy(&mut std::fs::File::open(&from)?, f).map(drop)
            })?;
        }
    }
    sync_dir(target)?;
    write_manifest(
        target,
        &Manifest {
            kind: CheckpointKind::Savepoint,
            ..manifest
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_threads_can_share_a_store() {
        fn shared<T: Send + Sync + Clone>() {}
        shared::<CheckpointStore>();
        fn sent<T: Send + Sync>() {}
        sent::<StoreError>();
        sent::<LoadedCheckpoint>();
    }

    #[test]
    fn checkpoint_dir_names_round_trip_and_are_canonical() {
        for n in [0, 7, u64::MAX] {
            assert_eq!(
                parse_checkpoint_dir_name(OsStr::new(&checkpoint_dir_name(n))),
                Some(n)
            );
        }
        for name in [
            "chk-",
            "chk-07",
            "chk-1x",
            "chk--1",
            "chk-18446744073709551616",
            "sp-1",
        ] {
            assert_eq!(parse_checkpoint_dir_name(OsStr::new(name)), None, "{name}");
        }
    }
}
