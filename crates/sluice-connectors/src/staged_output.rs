//! An output file published with checkpoints (two-phase commit, Flink's file sink model), so
//! that the output of a job recovered from a checkpoint equals that of a run without a fault.
//!
//! A file sink of a job that takes no checkpoint writes an [`OutputFile`] (a temporary file
//! renamed over the destination at the end). At its first checkpoint it turns into a
//! [`StagedOutput`]:
//! - [`StagedOutput::checkpoint`] (the pre-commit) closes the bytes written since the last
//!   checkpoint as *pending part* `n`: flushed, synced, renamed to its part name. The sink's
//!   state for the checkpoint ([`StagedState`]) records the parts pending, their lengths, and
//!   the length of the destination published so far.
//! - [`StagedOutput::complete`] (the commit) publishes the parts of checkpoints up to `n`: the
//!   first part ever published is renamed over the destination (which is therefore replaced
//!   whole, as without checkpoints), the later ones appended to it and synced; each part file
//!   is removed once it is in. A reader of the destination sees it grow by whole parts when
//!   it reads after a publish; one reading while a part is being appended may see the start
//!   of that part (appending in place is what keeps a publish cheap).
//! - [`StagedOutput::resume`] (recovery from a checkpoint's state, whose checkpoint is complete)
//!   publishes what the state holds pending (a part the failed attempt already appended is
//!   recognised by the destination's length and not appended twice), cuts the destination to
//!   the length the state accounts for (dropping what was published after it: the rest an
//!   attempt published at the end of its input before it failed), and removes the instance's
//!   other part files.
//! - [`StagedOutput::finish`] (end of input) publishes the pending parts and the rest.
//! - A sink that starts afresh removes the part files a failed earlier attempt left
//!   ([`discard_stale_parts`]).
//!
//! Part files live in the destination's directory, hidden, mode 0600, named after the
//! destination's file name and the sink instance's index: `.NAME.sluice-I-N.part` is pending
//! part `N` (a checkpoint's number) of instance `I`, and `.NAME.sluice-I.open` the part being
//! written. The destination takes the mode a plain file would (that of the output file the
//! sink began with, the umask applied).
//!
//! Instances of a parallel sink writing one destination each stage their own parts and
//! publish them into the destination as they would without checkpoints.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::output_file::OutputFile;

/// The mode of part files: private to the user running the job.
const PART_MODE: u32 = 0o600;

/// What a staged output published and holds pending at a checkpoint: the sink's state for it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedState {
    /// Bytes of the destination published (0: none; the destination is what it was before).
    published: u64,
    /// The destination's file once published: the first part's, which is renamed over it.
    identity: Option<FileIdentity>,
    /// The mode the destination takes.
    mode: u32,
    /// Parts closed at a checkpoint and not yet published, oldest first: (checkpoint, bytes).
    pending: Vec<(u64, u64)>,
}

/// Which file a path is: its device, its inode, and its birth time in nanoseconds where the
/// file system keeps one (0 where not), so that a file made where a removed one was, which
/// may get its inode number, is told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct FileIdentity(u64, u64, u64);

impl FileIdentity {
    fn of(meta: &fs::Metadata) -> Self {
        let born = meta
            .created()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as u64);
        Self(meta.dev(), meta.ino(), born)
    }
}

/// The names of one sink instance's files beside its destination.
#[derive(Debug, Clone)]
struct PartNames {
    /// The destination, its symbolic links resolved.
    destination: PathBuf,
    /// The destination's directory.
    directory: PathBuf,
    /// What every part name of this instance begins with: `.NAME.sluice-I`.
    stem: OsString,
}

impl PartNames {
    fn new(destination: PathBuf, instance: usize) -> io::Result<Self> {
        let name = destination
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "it names no file"))?;
        let directory = match destination.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut stem = OsString::from(".");
        stem.push(name);
        stem.push(format!(".sluice-{instance}"));
        Ok(Self {
            destination,
            directory,
            stem,
        })
    }

    /// Pending part `checkpoint`.
    fn part(&self, checkpoint: u64) -> PathBuf {
        let mut name = self.stem.clone();
        name.push(format!("-{checkpoint}.part"));
        self.directory.join(name)
    }

    /// The part being written.
    fn open(&self) -> PathBuf {
        let mut name = self.stem.clone();
        name.push(".open");
        self.directory.join(name)
    }

    /// Whether `name` (in the directory) is one of this instance's part files.
    fn is_ours(&self, name: &std::ffi::OsStr) -> bool {
        let (name, stem) = (name.as_encoded_bytes(), self.stem.as_encoded_bytes());
        let Some(rest) = name.strip_prefix(stem) else {
            return false;
        };
        rest == b".open"
            || rest.strip_prefix(b"-").is_some_and(|rest| {
                rest.strip_suffix(b".part")
                    .is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit))
            })
    }

    /// Removes every part file of this instance but `keep`.
    fn remove_parts_but(&self, keep: &[PathBuf]) -> io::Result<()> {
        for entry in fs::read_dir(&self.directory)? {
            let entry = entry?;
            if self.is_ours(&entry.file_name()) && !keep.contains(&entry.path()) {
                remove_if_present(&entry.path())?;
            }
        }
        Ok(())
    }

    /// Syncs the directory, so that renames in it survive a crash of the machine.
    fn sync_directory(&self) -> io::Result<()> {
        File::open(&self.directory)?.sync_all()
    }
}

/// Removes the part files a failed earlier attempt of instance `instance` left beside
/// `destination`, before a sink that starts afresh writes it.
pub fn discard_stale_parts(destination: &Path, instance: usize) -> io::Result<()> {
    let names = PartNames::new(crate::output_file::destination(destination)?, instance)?;
    match names.remove_parts_but(&[]) {
        // A directory that can be written but not listed: nothing there that could be
        // found, so nothing to discard.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Ok(()),
        other => other,
    }
}

/// An output file published with checkpoints (see the module doc).
#[derive(Debug)]
pub struct StagedOutput {
    names: PartNames,
    /// The part being written.
    open: File,
    state: StagedState,
}

impl StagedOutput {
    /// Goes on from `file`, which becomes the part being written: the output of a sink that
    /// met its first checkpoint.
    pub fn begin(file: OutputFile, instance: usize) -> io::Result<Self> {
        let (open, destination, partial) = file.into_parts();
        let names = PartNames::new(destination, instance)?;
        let partial = partial.ok_or_else(|| {
            io::Error::new(io::ErrorKind::Unsupported, "the output is written directly")
        })?;
        let mode = open.metadata()?.mode() & 0o7777;
        open.set_permissions(Permissions::from_mode(PART_MODE))?;
        partial.persist(names.open()).map_err(|e| e.error)?;
        Ok(Self {
            names,
            open,
            state: StagedState {
                mode,
                ..StagedState::default()
            },
        })
    }

    /// Recovers the output of instance `instance` from a checkpoint's `state` (its
    /// checkpoint complete): publishes what it holds pending, cuts the destination to what
    /// it accounts for, removes the instance's other part files and opens a new part.
    pub fn resume(destination: &Path, instance: usize, state: StagedState) -> io::Result<Self> {
        let names = PartNames::new(crate::output_file::destination(destination)?, instance)?;
        let mut staged = Self {
            open: create_part(&names.open())?,
            names,
            state,
        };
        let ours = staged.state.identity.is_some_and(|id| {
            fs::metadata(&staged.names.destination).is_ok_and(|m| FileIdentity::of(&m) == id)
        });
        if staged.state.published > 0 && !ours {
            return Err(io::Error::other(format!(
                "{} is no longer the file this job published its first {} bytes into",
                staged.names.destination.display(),
                staged.state.published
            )));
        }
        let mut length = if ours {
            fs::metadata(&staged.names.destination)?.len()
        } else {
            0
        };
        for (checkpoint, bytes) in std::mem::take(&mut staged.state.pending) {
            let end = staged.state.published + bytes;
            let part = staged.names.part(checkpoint);
            if ours && length >= end {
                // Published before the failure; its file may not have been removed yet.
                remove_if_present(&part)?;
                staged.state.published = end;
                continue;
            }
            if !part.exists() {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "pending part {} of checkpoint {checkpoint} is missing",
                        part.display()
                    ),
                ));
            }
            if staged.state.published > 0 {
                cut(&staged.names.destination, staged.state.published)?;
            }
            staged.publish(&part, bytes)?;
            length = end;
        }
        if staged.state.published > 0 {
            cut(&staged.names.destination, staged.state.published)?;
        }
        staged.names.remove_parts_but(&[staged.names.open()])?;
        Ok(staged)
    }

    /// Closes what was written since the last checkpoint as pending part `checkpoint` and
    /// opens the next; returns the state to keep for the checkpoint.
    pub fn checkpoint(&mut self, checkpoint: u64) -> io::Result<StagedState> {
        let bytes = self.open.metadata()?.len();
        if bytes > 0 {
            self.open.sync_data()?;
            let part = self.names.part(checkpoint);
            fs::rename(self.names.open(), &part)?;
            self.names.sync_directory()?;
            if self.state.identity.is_none() {
                self.state.identity = Some(FileIdentity::of(&self.open.metadata()?));
            }
            self.state.pending.push((checkpoint, bytes));
            self.open = create_part(&self.names.open())?;
        }
        Ok(self.state.clone())
    }

    /// Publishes the parts of checkpoint `checkpoint` and those before (it is complete).
    pub fn complete(&mut self, checkpoint: u64) -> io::Result<()> {
        let due = self
            .state
            .pending
            .partition_point(|&(n, _)| n <= checkpoint);
        for (n, bytes) in self.state.pending.drain(..due).collect::<Vec<_>>() {
            let part = self.names.part(n);
            self.publish(&part, bytes)?;
        }
        Ok(())
    }

    /// Publishes every pending part and the part being written, and opens a new one: the
    /// output is complete up to here (the end of the input, or a suspension to redeploy).
    /// Returns the state, with nothing pending.
    pub fn publish_all(&mut self) -> io::Result<StagedState> {
        self.complete(u64::MAX)?;
        let bytes = self.open.metadata()?.len();
        if bytes > 0 || self.state.identity.is_none() {
            // An output with nothing in it still replaces the destination, as without
            // checkpoints.
            self.open.sync_data()?;
            if self.state.identity.is_none() {
                self.state.identity = Some(FileIdentity::of(&self.open.metadata()?));
            }
            let open = self.names.open();
            self.publish(&open, bytes)?;
            self.open = create_part(&open)?;
        }
        Ok(self.state.clone())
    }

    /// Publishes the pending parts and the rest at the end of the input, and removes the
    /// part being written. Returns the state, everything published: what a checkpoint taken
    /// after the end keeps.
    pub fn finish(mut self) -> io::Result<StagedState> {
        let state = self.publish_all()?;
        remove_if_present(&self.names.open())?;
        Ok(state)
    }

    /// Publishes `part` (`bytes` long): renamed over the destination if it is the first,
    /// appended to it otherwise; then removed.
    fn publish(&mut self, part: &Path, bytes: u64) -> io::Result<()> {
        if self.state.published == 0 {
            fs::set_permissions(part, Permissions::from_mode(self.state.mode))?;
            fs::rename(part, &self.names.destination)?;
            self.names.sync_directory()?;
        } else {
            let mut destination = OpenOptions::new()
                .append(true)
                .open(&self.names.destination)?;
            io::copy(&mut File::open(part)?, &mut destination)?;
            destination.sync_data()?;
            fs::remove_file(part)?;
        }
        self.state.published += bytes;
        Ok(())
    }
}

impl Write for StagedOutput {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.open.write(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.open.flush()
    }
}

/// A new, empty part file at `path` (mode 0600), replacing any.
fn create_part(path: &Path) -> io::Result<File> {
    remove_if_present(path)?;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(PART_MODE)
        .open(path)
}

/// Cuts the file at `path` to `length` bytes if it is longer.
fn cut(path: &Path, length: u64) -> io::Result<()> {
    let file = OpenOptions::new().write(true).open(path)?;
    if file.metadata()?.len() > length {
        file.set_len(length)?;
        file.sync_data()?;
    }
    Ok(())
}

/// Removes the file at `path`; one already gone is fine.
fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names in `dir` and their modes, sorted.
    fn listing(dir: &Path) -> Vec<(String, u32)> {
        let mut names: Vec<(String, u32)> = fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let mode = e.metadata().unwrap().mode() & 0o777;
                (e.file_name().to_string_lossy().into_owned(), mode)
            })
            .collect();
        names.sort();
        names
    }

    #[test]
    fn parts_are_hidden_private_and_named_after_the_output_instance_and_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.txt");
        let mut file = OutputFile::create(&out).unwrap();
        file.write_all(b"one\n").unwrap();
        // The mode a plain file takes here, the umask applied.
        let plain = {
            let probe = dir.path().join("probe");
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .open(&probe)
                .unwrap();
            let mode = fs::metadata(&probe).unwrap().mode() & 0o777;
            fs::remove_file(probe).unwrap();
            mode
        };
        let mut staged = StagedOutput::begin(file, 3).unwrap();
        staged.checkpoint(7).unwrap();
        staged.write_all(b"two\n").unwrap();
        assert_eq!(
            listing(dir.path()),
            [
                (".out.txt.sluice-3-7.part".to_string(), 0o600),
                (".out.txt.sluice-3.open".to_string(), 0o600)
            ]
        );
        staged.complete(7).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "one\n");
        staged.finish().unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "one\ntwo\n");
        assert_eq!(listing(dir.path()), [("out.txt".to_string(), plain)]);
    }

    #[test]
    fn only_this_instances_part_files_are_its_own() {
        let names = PartNames::new(PathBuf::from("/d/out.txt"), 1).unwrap();
        let ours = |name: &str| names.is_ours(std::ffi::OsStr::new(name));
        assert!(ours(".out.txt.sluice-1-12.part") && ours(".out.txt.sluice-1.open"));
        assert!(!ours(".out.txt.sluice-10-12.part") && !ours(".out.txt.sluice-1-.part"));
        assert!(!ours(".out.txt.sluice-1-x.part") && !ours("out.txt"));
    }
}
