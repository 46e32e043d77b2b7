//! Segment file names: one per (job, edge), never two pairs on one name.
//!
//! A segment of job `J` for edge `E` is the file `<dir>/sluice-<J>-<E>`, `<dir>` being
//! [`DEFAULT_DIR`] unless a caller (a test) picks another. Job and edge names are escaped so
//! that the mapping is injective and the result is a safe file name: ASCII letters and digits
//! stay as they are, every other byte of their UTF-8 becomes `_` and two lowercase hex digits
//! (`-` is `_2d`, `_` is `_5f`). So the name holds exactly two `-`, after `sluice` and
//! between job and edge, and never a `.` or `/`.
//!
//! While [`crate::Segment::create`] builds a segment it is called
//! `sluice-<J>-<E>-<pid>.creating`; the pid in that name lets [`crate::remove_stale`] remove
//! what a creator that died half-way left behind.

use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Where segments live unless told otherwise: the tmpfs every Linux system mounts.
pub const DEFAULT_DIR: &str = "/dev/shm";
/// What every segment file name starts with.
pub const NAME_PREFIX: &str = "sluice-";
/// What the temporary name of a segment under construction ends with.
const CREATING_SUFFIX: &str = ".creating";
/// The longest a segment's file name may be: `NAME_MAX` (255) less room for the temporary
/// name's `-<pid>.creating`.
pub const MAX_FILE_NAME_LEN: usize = 235;

/// `-`, the longest `u32` in decimal, and the suffix, fit beside the longest name.
const _: () = assert!(MAX_FILE_NAME_LEN + 1 + 10 + CREATING_SUFFIX.len() <= 255);

/// Why a job and edge make no segment name.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum NameError {
    /// The job name is empty.
    #[error("a shared segment needs a job name, and it is empty")]
    EmptyJob,
    /// The edge name is empty.
    #[error("a shared segment of job `{job}` needs an edge name, and it is empty")]
    EmptyEdge {
        /// The job the segment would belong to.
        job: String,
    },
    /// The escaped name is longer than a file name may be.
    #[error(
        "the shared segment name for job `{job}` and edge `{edge}` is {len} bytes once \
         escaped; at most {max} fit in a file name"
    )]
    TooLong {
        /// The job name.
        job: String,
        /// The edge name (empty when only the job's prefix was too long).
        edge: String,
        /// The escaped file name's length.
        len: usize,
        /// [`MAX_FILE_NAME_LEN`].
        max: usize,
    },
}

/// The name, and so the path, of one job's segment for one edge.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SegmentName {
    dir: PathBuf,
    file_name: String,
}

impl SegmentName {
    /// The segment of `job` for `edge` in [`DEFAULT_DIR`].
    pub fn new(job: &str, edge: &str) -> Result<Self, NameError> {
        Self::in_dir(DEFAULT_DIR, job, edge)
    }

    /// The segment of `job` for `edge` in `dir` (tests use a temporary directory).
    pub fn in_dir(dir: impl Into<PathBuf>, job: &str, edge: &str) -> Result<Self, NameError> {
        let mut file_name = job_prefix(job)?;
        if edge.is_empty() {
            return Err(NameError::EmptyEdge {
                job: job.to_owned(),
            });
        }
        push_escaped(&mut file_name, edge);
        if file_name.len() > MAX_FILE_NAME_LEN {
            return Err(NameError::TooLong {
                job: job.to_owned(),
                edge: edge.to_owned(),
                len: file_name.len(),
                max: MAX_FILE_NAME_LEN,
            });
        }
        Ok(Self {
            dir: dir.into(),
            file_name,
        })
    }

    /// The directory the segment lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file name, `sluice-<job>-<edge>` escaped.
    pub fn file_name(&self) -> &str {
        &self.file_name
    }

    /// The full path of the segment file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.file_name)
    }

    /// The path the segment has while `pid` builds it.
    pub(crate) fn creating_path(&self, pid: u32) -> PathBuf {
        self.dir
            .join(format!("{}-{pid}{CREATING_SUFFIX}", self.file_name))
    }
}

impl fmt::Display for SegmentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path().display())
    }
}

/// `sluice-<job>-`: what the file names of all of `job`'s segments start with.
pub(crate) fn job_prefix(job: &str) -> Result<String, NameError> {
    if job.is_empty() {
        return Err(NameError::EmptyJob);
    }
    let mut prefix = String::from(NAME_PREFIX);
    push_escaped(&mut prefix, job);
    prefix.push('-');
    // The shortest edge escapes to one byte.
    if prefix.len() + 1 > MAX_FILE_NAME_LEN {
        return Err(NameError::TooLong {
            job: job.to_owned(),
            edge: String::new(),
            len: prefix.len() + 1,
            max: MAX_FILE_NAME_LEN,
        });
    }
    Ok(prefix)
}

/// Appends `part` escaped: letters and digits as they are, any other byte as `_xx`.
fn push_escaped(out: &mut String, part: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for byte in part.bytes() {
        if byte.is_ascii_alphanumeric() {
            out.push(char::from(byte));
        } else {
            out.push('_');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
    }
}

/// What a file in a segment directory is, judged by its name alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SegmentFileName {
    /// `sluice-<job>-<edge>`: a published segment; its creator is in its header.
    Published,
    /// `sluice-<job>-<edge>-<pid>.creating`: a segment `pid` is building (or died building).
    Creating {
        /// The creator's pid.
        pid: u32,
    },
}

/// Whether `file_name` is a segment's name, and which kind; `None` for any other file.
pub(crate) fn classify(file_name: &str) -> Option<SegmentFileName> {
    if let Some(base) = file_name.strip_suffix(CREATING_SUFFIX) {
        let (published, pid) = base.rsplit_once('-')?;
        if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let pid = pid.parse().ok()?;
        return is_published(published).then_some(SegmentFileName::Creating { pid });
    }
    is_published(file_name).then_some(SegmentFileName::Published)
}

/// Whether `file_name` has the shape `sluice-<escaped job>-<escaped edge>`.
fn is_published(file_name: &str) -> bool {
    let Some(rest) = file_name.strip_prefix(NAME_PREFIX) else {
        return false;
    };
    let escaped = |part: &str| {
        !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    match rest.split_once('-') {
        Some((job, edge)) => escaped(job) && escaped(edge),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_name(job: &str, edge: &str) -> String {
        match SegmentName::in_dir("/d", job, edge) {
            Ok(name) => name.file_name().to_owned(),
            Err(e) => panic!("{job}/{edge}: {e}"),
        }
    }

    #[test]
    fn plain_names_stay_readable() {
        assert_eq!(
            file_name("wordcount7", "pe0to1"),
            "sluice-wordcount7-pe0to1"
        );
        assert_eq!(
            SegmentName::new("j", "e").map(|n| n.path()),
            Ok(PathBuf::from("/dev/shm/sluice-j-e"))
        );
    }

    #[test]
    fn escaping_keeps_distinct_pairs_apart() {
        // Each pair would collide under a naive "replace odd characters by `_`" scheme or a
        // plain `-` join.
        let pairs = [
            ("a-b", "c"),
            ("a", "b-c"),
            ("a_b", "c"),
            ("a.b", "c"),
            ("a/b", "c"),
            ("a", "b_2dc"),
            ("a_2d", "c"),
            ("é", "c"),
        ];
        let names: std::collections::HashSet<String> =
            pairs.iter().map(|(j, e)| file_name(j, e)).collect();
        assert_eq!(names.len(), pairs.len());
        assert_eq!(file_name("a-b", "x/y.z"), "sluice-a_2db-x_2fy_2ez");
        assert_eq!(file_name("é", "_"), "sluice-_c3_a9-_5f");
    }

    #[test]
    fn names_classify_as_published_and_temporary_names_carry_the_pid() {
        let name = file_name("job-1", "edge.0");
        assert_eq!(classify(&name), Some(SegmentFileName::Published));
        let creating = SegmentName::in_dir("/d", "job-1", "edge.0")
            .map(|n| n.creating_path(4242))
            .ok()
            .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
            .unwrap_or_default();
        assert_eq!(
            classify(&creating),
            Some(SegmentFileName::Creating { pid: 4242 })
        );
        for other in [
            "sluice-",
            "sluice-a",
            "sluice-a-",
            "sluice--b",
            "sluice-a-b-c",
            "sluice-a-b.txt",
            "sluice-a-b-.creating",
            "sluice-a-b-+1.creating",
            "sluice-a-b-99999999999.creating",
            "other-a-b",
            ".sluice-a-b",
        ] {
            assert_eq!(classify(other), None, "{other}");
        }
    }

    #[test]
    fn bad_names_are_errors() {
        assert_eq!(SegmentName::in_dir("/d", "", "e"), Err(NameError::EmptyJob));
        assert_eq!(
            SegmentName::in_dir("/d", "j", ""),
            Err(NameError::EmptyEdge { job: "j".into() })
        );
        let long = "x".repeat(MAX_FILE_NAME_LEN);
        assert!(matches!(
            SegmentName::in_dir("/d", "j", &long),
            Err(NameError::TooLong {
                max: MAX_FILE_NAME_LEN,
                ..
            })
        ));
        assert!(matches!(job_prefix(&long), Err(NameError::TooLong { .. })));
        // The longest name that fits is accepted.
        let fits = "x".repeat(MAX_FILE_NAME_LEN - "sluice-j-".len());
        assert_eq!(file_name("j", &fits).len(), MAX_FILE_NAME_LEN);
    }
}
