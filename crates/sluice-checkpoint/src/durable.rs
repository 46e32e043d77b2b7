//! Durable file writes and private directories: the few file-system steps every file of a
//! checkpoint is written with.
//!
//! A file is written whole under a temporary name in its directory (`.NAME.XXXXXXXXXXXXXXXX.tmp`,
//! 16 random hex digits, so writers on several hosts of a shared mount never share one),
//! fsynced, renamed over its name, and then the directory is fsynced so the rename itself
//! survives a power cut. A reader therefore sees the file whole or not at all, and once
//! [`write_durably`] returns it stays. On any failure the temporary file is removed.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{io_error, StoreError};

/// The mode of the directories the store makes.
pub(crate) const PRIVATE_DIR_MODE: u32 = 0o700;
/// The mode of the files the store writes.
const PRIVATE_FILE_MODE: u32 = 0o600;
/// The suffix of a temporary file (`.NAME.XXXXXXXXXXXXXXXX.tmp`); readers ignore such files.
pub(crate) const TEMP_SUFFIX: &str = ".tmp";

/// Writes the file `name` in `dir` whole and durably: `fill` writes its bytes into a
/// temporary file, which is fsynced, renamed to `name`, and `dir` is fsynced.
pub(crate) fn write_durably(
    dir: &Path,
    name: &str,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<(), StoreError> {
    let path = dir.join(name);
    let temp = dir.join(format!(".{name}.{:016x}{TEMP_SUFFIX}", fastrand::u64(..)));
    let result = write_then_rename(&temp, &path, fill);
    if result.is_err() {
        // Whatever was written goes: a full disk is left as it was found.
        let _ = std::fs::remove_file(&temp);
    }
    result?;
    sync_dir(dir)
}

/// The steps of [`write_durably`] up to the rename.
fn write_then_rename(
    temp: &Path,
    path: &Path,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<(), StoreError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(PRIVATE_FILE_MODE)
        .open(temp)
        .map_err(io_error("create", temp))?;
    fill(&mut file).map_err(io_error("write", temp))?;
    file.sync_all().map_err(io_error("fsync", temp))?;
    drop(file);
    std::fs::rename(temp, path).map_err(io_error("rename into place", path))
}

/// Fsyncs the directory `dir`: the entries made, renamed or removed in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error("fsync the directory", dir))
}

/// Makes the directory `dir` (mode 0700, whatever the umask) unless it exists; returns whether it made it. Its
/// parent must exist.
pub(crate) fn make_dir(dir: &Path) -> Result<bool, StoreError> {
    match DirBuilder::new().mode(PRIVATE_DIR_MODE).create(dir) {
        // The mode again, whatever the umask took from it.
        Ok(()) => std::fs::set_permissions(dir, Permissions::from_mode(PRIVATE_DIR_MODE))
            .map(|()| true)
            .map_err(io_error("set the mode of", dir)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io_error("make the directory", dir)(e)),
    }
}

/// Makes `dir` and its missing parents (mode 0700, whatever the umask), then refuses it
/// unless it is a directory of this user's that no one else can write: a checkpoint another
/// user could replace would be loaded as the job's state.
pub(crate) fn make_private_dir(dir: &Path) -> Result<(), StoreError> {
    let mut missing: Vec<PathBuf> = Vec::new();
    let mut ancestor = Some(dir);
    while let Some(d) = ancestor.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        missing.push(d.to_path_buf());
        ancestor = d.parent();
    }
    for d in missing.iter().rev() {
        make_dir(d)?;
    }
    if let Some(why) = why_not_private(dir) {
        return Err(StoreError::NotPrivate {
            dir: dir.to_path_buf(),
            why,
        });
    }
    Ok(())
}

/// Why `dir` is not a directory of this user's closed to others' writes, or `None` if it is.
/// A symbolic link is followed (a checkpoint directory on a shared mount is often reached
/// through one): what counts is the directory the files land in.
fn why_not_private(dir: &Path) -> Option<String> {
    let metadata = match std::fs::metadata(dir) {
        Ok(metadata) => metadata,
        Err(e) => return Some(e.to_string()),
    };
    let uid = rustix::process::geteuid().as_raw();
    let mode = metadata.mode() & 0o7777;
    if !metadata.is_dir() {
        Some("it is not a directory".into())
    } else if metadata.uid() != uid {
        Some(format!(
            "it belongs to uid {}, not to this user (uid {uid})",
            metadata.uid()
        ))
    } else if mode & 0o022 != 0 {
        Some(format!(
            "its mode {mode:04o} lets others write in it (allow at most 0755; 0700 is made)"
        ))
    } else {
        None
    }
}
