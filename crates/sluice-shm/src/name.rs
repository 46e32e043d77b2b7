//! Segment file names: one per (job, edge), never two pairs on one name.
//!
//! A segment of job `J` for edge `E` is the file `<dir>/sluice-<J>-<E>`, `<dir>` being
//! [`DEFAULT_DIR`] unless a caller (a test) picks another. Job and edge names are escaped so
//! that the mapping is injective and the result is a safe file name: ASCII letters and digits
//! stay as they are, every other byte of their UTF-8 becomes `_` and two lowercase hex digits
//! (`-` is `_2d`, `_` is `_5f`). So the name holds exactly two `-`, after `sluice` and
//! between job and edge (and a third before a nonce, below), and never a `.` or `/`.
//!
//! A segment that others must not be able to guess ([`crate::Segment::create_unique`]) has a
//! *nonce* after its edge: `sluice-<J>-<E>-<nonce>`, the nonce 16 lowercase hex digits drawn
//! from the operating system's randomness. A job's name and an edge's are easy to predict (a
//! job id holds the launcher's pid, which is sequential): any local user could create the file
//! first, and the job, which refuses to open a file that is not its own, could not start. The
//! nonce makes that a guess of 64 bits; the creator tells the name to whoever opens the
//! segment. The name still starts with `sluice-<J>-`, so [`crate::JobSegments`] removes it
//! with the job's other segments.
//!
//! While [`crate::Segment::create`] builds a segment it is called
//! `<name>-<pid>.creating`; the pid in that name lets [`crate::remove_stale`] remove what a
//! creator that died half-way left behind. A unique segment is built under a name with a
//! nonce of its own, so the temporary name, which anyone can list, does not give away the
//! name the segment will be published under.

use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Where segments live unless told otherwise: the tmpfs every Linux system mounts.
pub const DEFAULT_DIR: &str = "/dev/shm";
/// What every segment file name starts with.
pub const NAME_PREFIX: &str = "sluice-";
/// What the temporary name of a segment under construction ends with.
const CREATING_SUFFIX: &str = ".creating";
/// How many hex digits a nonce has.
const NONCE_DIGITS: usize = 16;
/// The longest a segment's file name may be without its nonce: `NAME_MAX` (255) less room for
/// `-<nonce>` and the temporary name's `-<pid>.creating`.
pub const MAX_FILE_NAME_LEN: usize = 218;

/// The nonce, `-`, the longest `u32` in decimal, and the suffix, fit beside the longest name.
const _: () = assert!(MAX_FILE_NAME_LEN + 1 + NONCE_DIGITS + 1 + 10 + CREATING_SUFFIX.len() <= 255);

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
    /// `sluice-<job>-<edge>`, escaped.
    base: String,
    /// `base`, then `-<nonce>` if it has one.
    file_name: String,
    nonce: Option<u64>,
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
            base: file_name.clone(),
            file_name,
            nonce: None,
        })
    }

    /// This name with `nonce` after its edge (in place of any nonce it had):
    /// `sluice-<job>-<edge>-<nonce>`.
    pub fn with_nonce(&self, nonce: u64) -> Self {
        Self {
            dir: self.dir.clone(),
            base: self.base.clone(),
            file_name: format!("{}-{nonce:0width$x}", self.base, width = NONCE_DIGITS),
            nonce: Some(nonce),
        }
    }

    /// The nonce after the edge, if the name has one.
    pub fn nonce(&self) -> Option<u64> {
        self.nonce
    }

    /// The directory the segment lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file name, `sluice-<job>-<edge>` escaped, then `-<nonce>` if it has one.
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
    /// `sluice-<job>-<edge>`, perhaps with `-<nonce>`: a published segment; its creator is in
    /// its header.
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

/// Whether `file_name` has the shape `sluice-<escaped job>-<escaped edge>`, perhaps followed
/// by `-<nonce>`.
fn is_published(file_name: &str) -> bool {
    let Some(rest) = file_name.strip_prefix(NAME_PREFIX) else {
        return false;
    };
    let escaped = |part: &str| {
        !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    let nonce = |part: &str| {
        part.len() == NONCE_DIGITS && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let Some((job, rest)) = rest.split_once('-') else {
        return false;
    };
    let edge = match rest.split_once('-') {
        Some((edge, suffix)) if nonce(suffix) => edge,
        Some(_) => return false,
        None => rest,
    };
    escaped(job) && escaped(edge)
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
        let unique = SegmentName::in_dir("/d", "job-1", "edge.0")
            .map(|n| n.with_nonce(0x00c0_ffee))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            unique.file_name(),
            "sluice-job_2d1-edge_2e0-0000000000c0ffee"
        );
        assert_eq!(unique.nonce(), Some(0x00c0_ffee));
        assert_eq!(
            classify(unique.file_name()),
            Some(SegmentFileName::Published)
        );
        let creating = unique.creating_path(7);
        assert_eq!(
            creating
                .file_name()
                .map(|f| f.to_string_lossy().into_owned()),
            Some("sluice-job_2d1-edge_2e0-0000000000c0ffee-7.creating".into())
        );
        assert_eq!(
            classify("sluice-job_2d1-edge_2e0-0000000000c0ffee-7.creating"),
            Some(SegmentFileName::Creating { pid: 7 })
        );
        for other in [
            "sluice-",
            "sluice-a",
            "sluice-a-",
            "sluice--b",
            "sluice-a-b-c",
            "sluice-a-b-0000000000C0FFEE",
            "sluice-a-b-00c0ffee",
            "sluice-a-b-0000000000c0ffee-0000000000c0ffee",
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
        // The longest name that fits is accepted, and with a nonce and as a temporary name it
        // is still a file name.
        let fits = "x".repeat(MAX_FILE_NAME_LEN - "sluice-j-".len());
        assert_eq!(file_name("j", &fits).len(), MAX_FILE_NAME_LEN);
        let longest = SegmentName::in_dir("/d", "j", &fits)
            .map(|n| n.with_nonce(u64::MAX).creating_path(u32::MAX))
            .unwrap_or_default();
        assert_eq!(longest.file_name().map(|f| f.len()), Some(255));
    }
}
