//! A file a sink writes, which appears under its name only once it is complete.
//!
//! [`OutputFile::create`] makes a file under a temporary name (`.NAME.PID.XXXXXX.partial`, PID
//! the process's id) in the destination's directory when the job starts, so a directory the user cannot write fails the
//! job before any input is read. Bytes go to that file; [`OutputFile::commit`] syncs it and
//! renames it over the destination (a rename within one directory is atomic), so the
//! destination is either what it was before or the whole output, never a file cut off
//! mid-record by a full disk. Dropped without a commit (a failed write, a failed job), the
//! temporary file is removed. A process killed before either leaves it: the next
//! `create` of the same destination removes the temporary files of processes that are gone.
//!
//! A destination that is a symbolic link is resolved first, so the link keeps pointing at the
//! output. A destination that exists and is not a regular file (`/dev/null`, `/dev/full`, a
//! named pipe, a terminal) is written directly: there is nothing to rename over it.
//!
//! A sink of a job that takes checkpoints turns its output file into a
//! [`StagedOutput`](crate::staged_output::StagedOutput) at the first one, which publishes the
//! file a part at a time as checkpoints complete.
//!
//! A job suspended to be redeployed keeps its temporary file ([`OutputFile::keep`]); the
//! resumed sink opens it again ([`OutputFile::resume`]), cut to the bytes written before, and
//! commits it at the end as if it had never stopped.

use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions, Permissions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tempfile::TempPath;

/// A file written under a temporary name and renamed over its destination when complete (see
/// the module doc).
#[derive(Debug)]
pub struct OutputFile {
    file: File,
    /// Where the complete file goes: the destination, its symbolic links resolved.
    destination: PathBuf,
    /// The temporary file, removed when dropped; `None` for a destination written directly.
    partial: Option<TempPath>,
}

impl OutputFile {
    /// Starts the file that will be `path`: under a temporary name beside it, or `path`
    /// itself if it exists and is not a regular file. Fails, naming nothing but the cause,
    /// when `path` is a directory or its directory cannot be written.
    pub fn create(path: &Path) -> io::Result<Self> {
        let destination = destination(path)?;
        if is_special(&destination) {
            return Ok(Self {
                file: File::create(&destination)?,
                destination,
                partial: None,
            });
        }
        let name = destination
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "it names no file"))?;
        let directory = match destination.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        remove_orphans(directory, name);
        // The mode a plain `File::create` gives, the umask applied by the kernel.
        let (file, partial) = tempfile::Builder::new()
            .prefix(&format!(
                ".{}.{}.",
                name.to_string_lossy(),
                std::process::id()
            ))
            .suffix(".partial")
            .permissions(Permissions::from_mode(0o666))
            .tempfile_in(directory)?
            .into_parts();
        Ok(Self {
            file,
            destination,
            partial: Some(partial),
        })
    }

    /// Goes on with the file a suspended sink kept ([`keep`](Self::keep)): `partial` (or
    /// `path` itself when written directly) cut to its first `offset` bytes, written after
    /// them.
    pub fn resume(path: &Path, partial: Option<&Path>, offset: u64) -> io::Result<Self> {
        let destination = destination(path)?;
        let written = partial.unwrap_or(&destination);
        let mut file = OpenOptions::new()
            .write(true)
            .create(partial.is_none())
            .truncate(false)
            .open(written)?;
        // A device cannot be cut (and needs not be).
        if file.metadata()?.is_file() {
            file.set_len(offset)?;
        }
        file.seek(SeekFrom::End(0))?;
        Ok(Self {
            file,
            destination,
            partial: partial.map(TempPath::try_from_path).transpose()?,
        })
    }

    /// Syncs the file and renames it over its destination.
    pub fn commit(self) -> io::Result<()> {
        self.file.sync_all().or_else(ignore_unsyncable)?;
        match self.partial {
            Some(partial) => partial.persist(&self.destination).map_err(|e| e.error),
            None => Ok(()),
        }
    }

    /// Whether the destination is written directly (it is not a regular file).
    pub fn is_direct(&self) -> bool {
        self.partial.is_none()
    }

    /// The file, the destination and the temporary file (`None` for a destination written
    /// directly), for an output going on as a [`StagedOutput`](crate::staged_output::StagedOutput).
    pub(crate) fn into_parts(self) -> (File, PathBuf, Option<TempPath>) {
        (self.file, self.destination, self.partial)
    }

    /// Leaves the temporary file in place for a resumed sink and says where it is (`None` for
    /// a destination written directly).
    pub fn keep(self) -> io::Result<Option<PathBuf>> {
        self.partial
            .map(|partial| partial.keep().map_err(|e| e.error))
            .transpose()
    }
}

impl Write for OutputFile {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.file.write(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// `path` with its symbolic links resolved if it exists; refused if it is a directory.
pub(crate) fn destination(path: &Path) -> io::Result<PathBuf> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "it is a directory",
        )),
        Ok(_) => std::fs::canonicalize(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(path.to_path_buf()),
        Err(e) => Err(e),
    }
}

/// Removes the temporary files of `name` in `directory` that processes now gone left (killed
/// before they could commit or remove them). Best effort: a file that cannot be listed or
/// removed stays, and the output is made all the same.
fn remove_orphans(directory: &Path, name: &OsStr) {
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    let mut prefix = OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let owner = file_name
            .as_encoded_bytes()
            .strip_prefix(prefix.as_encoded_bytes())
            .and_then(|rest| rest.strip_suffix(b".partial"))
            .and_then(|rest| rest.split(|&b| b == b'.').next())
            .and_then(|pid| std::str::from_utf8(pid).ok()?.parse::<i32>().ok());
        if owner.is_some_and(|pid| !alive(pid)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether process `pid` exists (one of another user counts: it cannot be signalled, but it
/// is there).
fn alive(pid: i32) -> bool {
    rustix::process::Pid::from_raw(pid).is_some_and(|p| {
        !matches!(
            rustix::process::test_kill_process(p),
            Err(rustix::io::Errno::SRCH)
        )
    })
}

/// Whether `path` exists and is not a regular file.
fn is_special(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| !meta.is_file())
}

/// A device or pipe that cannot be synced (`EINVAL`) has nothing to sync.
fn ignore_unsyncable(error: io::Error) -> io::Result<()> {
    match error.kind() {
        io::ErrorKind::InvalidInput => Ok(()),
        _ => Err(error),
    }
}

/// Whether `a` and `b` are one file (the same device and inode: through a symbolic or hard
/// link too). A path that does not exist is no file.
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_destination_appears_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.txt");
        std::fs::write(&out, "before\n").unwrap();
        let mut file = OutputFile::create(&out).unwrap();
        file.write_all(b"after\n").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "before\n");
        file.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "after\n");
        assert_eq!(names(dir.path()), ["out.txt"]);
    }

    #[test]
    fn a_file_dropped_uncommitted_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = OutputFile::create(&dir.path().join("out.txt")).unwrap();
        file.write_all(b"half a rec").unwrap();
        drop(file);
        assert!(names(dir.path()).is_empty());
    }

    #[test]
    fn the_temporary_files_of_processes_gone_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.txt");
        // Beyond the largest process id Linux gives (2^22): no such process.
        let gone = ".out.txt.4194305.AbC123.partial";
        let ours = format!(".out.txt.{}.XyZ789.partial", std::process::id());
        let others = [".other.txt.4194305.AbC123.partial", ".out.txt.partial"];
        for name in [gone, &ours].into_iter().chain(others) {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        let file = OutputFile::create(&out).unwrap();
        file.commit().unwrap();
        let mut expected = vec![ours, "out.txt".to_string()];
        expected.extend(others.map(String::from));
        expected.sort();
        assert_eq!(names(dir.path()), expected);
    }

    #[test]
    fn a_symbolic_link_keeps_pointing_at_the_output() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.txt");
        let link = dir.path().join("link.txt");
        std::fs::write(&target, "old").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut file = OutputFile::create(&link).unwrap();
        file.write_all(b"new").unwrap();
        file.commit().unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
    }

    #[test]
    fn a_directory_and_a_path_under_a_file_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let error = OutputFile::create(dir.path()).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::IsADirectory);
        // Under a regular file, as a directory nobody can write (root included).
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(OutputFile::create(&file.join("out.txt")).is_err());
    }

    #[test]
    fn a_kept_file_resumes_where_it_was_cut() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.txt");
        let mut file = OutputFile::create(&out).unwrap();
        file.write_all(b"one\ntwo\nthr").unwrap();
        let partial = file.keep().unwrap();
        assert!(!out.exists());
        let mut file = OutputFile::resume(&out, partial.as_deref(), 8).unwrap();
        file.write_all(b"three\n").unwrap();
        file.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "one\ntwo\nthree\n");
        assert_eq!(names(dir.path()), ["out.txt"]);
    }

    #[test]
    fn a_device_is_written_directly() {
        let mut file = OutputFile::create(Path::new("/dev/null")).unwrap();
        file.write_all(b"gone").unwrap();
        file.commit().unwrap();
        let mut full = OutputFile::create(Path::new("/dev/full")).unwrap();
        let error = full.write_all(b"x").unwrap_err();
        assert_eq!(error.raw_os_error(), Some(28), "{error}");
    }

    #[test]
    fn the_same_file_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, "x").unwrap();
        let hard = dir.path().join("hard");
        std::fs::hard_link(&a, &hard).unwrap();
        let soft = dir.path().join("soft");
        std::os::unix::fs::symlink(&a, &soft).unwrap();
        assert!(same_file(&a, &hard) && same_file(&a, &soft));
        std::fs::write(dir.path().join("b"), "x").unwrap();
        assert!(!same_file(&a, &dir.path().join("b")));
        assert!(!same_file(&a, &dir.path().join("missing")));
    }
}
