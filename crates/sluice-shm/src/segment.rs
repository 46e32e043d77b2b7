//! A mapped shared segment: creating one (allocated, mode `0600`, published under its name only
//! once complete), opening one (every header field and file attribute checked), and removing
//! it (by its creator when dropped, unless told to keep it).
//!
//! Creation, step by step:
//! 1. open `sluice-<job>-<edge>-<pid>.creating` with `O_CREAT | O_EXCL | O_NOFOLLOW`, then
//!    `fchmod` it to exactly `0600` (the umask cannot widen or narrow it);
//! 2. `fallocate` the whole size, so a full tmpfs fails here with `ENOSPC` rather than with a
//!    `SIGBUS` on some later first touch of a page (filesystems without `fallocate` get
//!    `ftruncate`);
//! 3. `pwrite` the header;
//! 4. map the file (`MAP_SHARED`, pre-faulted so the hot path takes no page faults);
//! 5. `renameat2(RENAME_NOREPLACE)` it to `sluice-<job>-<edge>`: atomic, and refused if the
//!    name exists. Until this step no opener can see the segment; after it the segment is
//!    complete. A failure at any earlier step removes the temporary file.
//!
//! [`Segment::create_unique`] does the same under names nobody can guess
//! (`sluice-<job>-<edge>-<nonce>`, see [`crate::SegmentName`]), building it under a temporary
//! name with a nonce of its own; if either name is taken (someone created it first, by chance
//! or on purpose) it draws fresh nonces and tries again, up to [`CREATE_ATTEMPTS`] times. What
//! it found is never opened or removed: it is not ours to touch.

use crate::header::{
    SegmentHeader, CAPACITY_COUNT, DATA_ALIGN, DATA_OFFSET, HEADER_LEN, HEADER_VERSION, MAGIC,
};
use crate::name::SegmentName;
use crate::spec::{SegmentKind, SegmentSpec};
use crate::stale::process_is_running;
use memmap2::{MmapOptions, MmapRaw};
use rustix::fs::{FallocateFlags, Mode, OFlags, RenameFlags, CWD};
use rustix::io::Errno;
use std::fmt;
use std::fs::{File, Permissions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use thiserror::Error;

/// The only mode a segment file may have: read and write for its owner, nothing for others.
const SEGMENT_MODE: u32 = 0o600;

/// How many pairs of names [`Segment::create_unique`] tries before it gives up. Two random
/// 64-bit nonces collide with an existing file only if someone saw the name first, so even one
/// retry is rare; eight bound the work a hostile neighbour can cause.
pub const CREATE_ATTEMPTS: usize = 8;

/// The step of [`Segment::create`] that failed, for [`CreateError::Io`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateStep {
    /// Creating the (temporary) file.
    CreateFile,
    /// Setting its mode to `0600`.
    SetMode,
    /// Allocating its pages.
    Allocate,
    /// Writing the header.
    WriteHeader,
    /// Mapping it.
    Map,
    /// Renaming it to its public name.
    Publish,
}

impl fmt::Display for CreateStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::CreateFile => "creating the file",
            Self::SetMode => "setting its mode to 0600",
            Self::Allocate => "allocating its pages",
            Self::WriteHeader => "writing its header",
            Self::Map => "mapping it",
            Self::Publish => "renaming it to its name",
        })
    }
}

/// Why [`Segment::create`] failed. Every variant names the segment's path and its size in
/// bytes (header included).
#[derive(Debug, Error)]
pub enum CreateError {
    /// A segment of that name exists already: another process created it, or a crashed run
    /// left it (see [`crate::remove_stale`]).
    #[error(
        "cannot create shared segment {path} ({size} bytes): it already exists{}",
        creator_note(*creator_pid)
    )]
    AlreadyExists {
        /// The segment's path.
        path: PathBuf,
        /// The size that was asked for.
        size: u64,
        /// The pid the existing segment's header names, if it could be read.
        creator_pid: Option<u32>,
    },
    /// The file system (for `/dev/shm`, a tmpfs sized at mount time) has no room for it.
    #[error(
        "cannot create shared segment {path} ({size} bytes): no space left on its file system \
         ({source}); free some, make it larger, or ask for a smaller segment"
    )]
    NoSpace {
        /// The segment's path.
        path: PathBuf,
        /// The size that was asked for.
        size: u64,
        /// The system's error.
        source: io::Error,
    },
    /// The size does not fit in a file or an address space.
    #[error(
        "cannot create shared segment {path} ({size} bytes): too large for a file or a mapping"
    )]
    TooLarge {
        /// The segment's path.
        path: PathBuf,
        /// The size that was asked for (saturated at `u64::MAX`).
        size: u64,
    },
    /// The operating system gave no random bytes for a unique name.
    #[error("cannot create shared segment {path} ({size} bytes): no random name: {reason}")]
    NoRandomName {
        /// The segment's path, without its nonce.
        path: PathBuf,
        /// The size that was asked for.
        size: u64,
        /// Why.
        reason: String,
    },
    /// Any other failure (a missing or read-only directory, say), with the step it hit.
    #[error("cannot create shared segment {path} ({size} bytes): {step}: {source}")]
    Io {
        /// The segment's path.
        path: PathBuf,
        /// The size that was asked for.
        size: u64,
        /// What was being done.
        step: CreateStep,
        /// The system's error.
        source: io::Error,
    },
}

fn creator_note(creator_pid: Option<u32>) -> String {
    match creator_pid {
        Some(pid) if process_is_running(pid) => format!(" (created by pid {pid}, still running)"),
        Some(pid) => format!(" (created by pid {pid}, no longer running: a stale segment)"),
        None => String::new(),
    }
}

impl CreateError {
    fn from_io(path: &Path, size: u64, step: CreateStep, source: io::Error) -> Self {
        let path = path.to_owned();
        match Errno::from_io_error(&source) {
            Some(Errno::NOSPC | Errno::DQUOT) => Self::NoSpace { path, size, source },
            Some(Errno::FBIG) => Self::TooLarge { path, size },
            _ => Self::Io {
                path,
                size,
                step,
                source,
            },
        }
    }

    /// The path of the segment that could not be created.
    pub fn path(&self) -> &Path {
        match self {
            Self::AlreadyExists { path, .. }
            | Self::NoSpace { path, .. }
            | Self::TooLarge { path, .. }
            | Self::NoRandomName { path, .. }
            | Self::Io { path, .. } => path,
        }
    }

    /// The size in bytes (header included) that was asked for.
    pub fn size(&self) -> u64 {
        match self {
            Self::AlreadyExists { size, .. }
            | Self::NoSpace { size, .. }
            | Self::TooLarge { size, .. }
            | Self::NoRandomName { size, .. }
            | Self::Io { size, .. } => *size,
        }
    }
}

/// Why [`Segment::open`] refused a segment. Every variant names the path; each mismatch names
/// the field, what was expected and what was found.
#[derive(Debug, Error)]
pub enum OpenError {
    /// No segment has that name (not created yet, or removed already).
    #[error("shared segment {path} does not exist")]
    NotFound {
        /// The segment's path.
        path: PathBuf,
    },
    /// The name is a symbolic link, directory or other non-file.
    #[error("shared segment {path} is not a regular file")]
    NotARegularFile {
        /// The segment's path.
        path: PathBuf,
    },
    /// Another user owns the file.
    #[error("shared segment {path} is owned by uid {found}, expected uid {expected} (us)")]
    OwnerMismatch {
        /// The segment's path.
        path: PathBuf,
        /// Our effective uid.
        expected: u32,
        /// The file's owner.
        found: u32,
    },
    /// The file's mode is not exactly `0600`.
    #[error("shared segment {path} has mode {found:04o}, expected 0600")]
    ModeMismatch {
        /// The segment's path.
        path: PathBuf,
        /// The file's permission bits.
        found: u32,
    },
    /// The file is too short to hold a header.
    #[error("shared segment {path} is {found} bytes, too short for its {HEADER_LEN}-byte header")]
    TooShort {
        /// The segment's path.
        path: PathBuf,
        /// The file's size.
        found: u64,
    },
    /// The file does not start with [`MAGIC`]: it is not a Sluice segment.
    #[error(
        "shared segment {path} has magic {found:#018x}, expected {MAGIC:#018x}: \
         not a Sluice segment"
    )]
    BadMagic {
        /// The segment's path.
        path: PathBuf,
        /// The first 8 bytes, as a host-order `u64`.
        found: u64,
    },
    /// The header is of another layout (a segment of another Sluice version).
    #[error("shared segment {path} has header version {found}, expected {HEADER_VERSION}")]
    HeaderVersionMismatch {
        /// The segment's path.
        path: PathBuf,
        /// The header version in the file.
        found: u32,
    },
    /// The segment holds another kind of data.
    #[error("shared segment {path} holds kind `{found}`, expected `{expected}`")]
    KindMismatch {
        /// The segment's path.
        path: PathBuf,
        /// The kind the opener expected.
        expected: SegmentKind,
        /// The kind in the header.
        found: SegmentKind,
    },
    /// The data area is of another layout version.
    #[error("shared segment {path} has layout version {found}, expected {expected}")]
    LayoutVersionMismatch {
        /// The segment's path.
        path: PathBuf,
        /// The version the opener expected.
        expected: u32,
        /// The version in the header.
        found: u32,
    },
    /// One of the capacities differs.
    #[error("shared segment {path} has capacity[{index}] = {found}, expected {expected}")]
    CapacityMismatch {
        /// The segment's path.
        path: PathBuf,
        /// Which capacity (0 or 1).
        index: usize,
        /// The capacity the opener expected.
        expected: u64,
        /// The capacity in the header.
        found: u64,
    },
    /// The header puts the data area somewhere other than [`DATA_OFFSET`].
    #[error("shared segment {path} has data offset {found}, expected {DATA_OFFSET}")]
    DataOffsetMismatch {
        /// The segment's path.
        path: PathBuf,
        /// The offset in the header.
        found: u64,
    },
    /// The data area has another length.
    #[error("shared segment {path} has a data area of {found} bytes, expected {expected}")]
    DataLenMismatch {
        /// The segment's path.
        path: PathBuf,
        /// The length the opener expected.
        expected: u64,
        /// The length in the header.
        found: u64,
    },
    /// The file's size is not header plus data area (truncated or extended since creation).
    #[error("shared segment {path} is {found} bytes, expected {expected} (header and data area)")]
    FileSizeMismatch {
        /// The segment's path.
        path: PathBuf,
        /// The size the header implies.
        expected: u64,
        /// The file's size.
        found: u64,
    },
    /// Opening, reading or mapping the file failed (permission denied, say).
    #[error("cannot open shared segment {path}: {source}")]
    Io {
        /// The segment's path.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
}

impl OpenError {
    /// The path of the segment that was refused.
    pub fn path(&self) -> &Path {
        match self {
            Self::NotFound { path }
            | Self::NotARegularFile { path }
            | Self::OwnerMismatch { path, .. }
            | Self::ModeMismatch { path, .. }
            | Self::TooShort { path, .. }
            | Self::BadMagic { path, .. }
            | Self::HeaderVersionMismatch { path, .. }
            | Self::KindMismatch { path, .. }
            | Self::LayoutVersionMismatch { path, .. }
            | Self::CapacityMismatch { path, .. }
            | Self::DataOffsetMismatch { path, .. }
            | Self::DataLenMismatch { path, .. }
            | Self::FileSizeMismatch { path, .. }
            | Self::Io { path, .. } => path,
        }
    }
}

/// Why [`Segment::remove`] failed.
#[derive(Debug, Error)]
pub enum RemoveError {
    /// The name no longer refers to this segment: someone removed it (and perhaps created
    /// another segment under the same name, which is left alone).
    #[error("shared segment {path} was already removed")]
    AlreadyRemoved {
        /// The segment's path.
        path: PathBuf,
    },
    /// Unlinking failed.
    #[error("cannot remove shared segment {path}: {source}")]
    Io {
        /// The segment's path.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
}

/// Which file a path named when a segment was created or opened: device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    pub(crate) fn of(metadata: &std::fs::Metadata) -> Self {
        Self {
            dev: metadata.dev(),
            ino: metadata.ino(),
        }
    }
}

/// Removes `path` if it still names the file `id`; `Ok(false)` when it is gone or names
/// another file now. (A remover that raced with us between the check and the unlink could
/// still make us remove a newer file; only processes of our own uid can get there.)
pub(crate) fn remove_if_same(path: &Path, id: FileId) -> io::Result<bool> {
    match std::fs::symlink_metadata(path) {
        Ok(metadata) if FileId::of(&metadata) == id => {}
        Ok(_) => return Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    }
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// A segment file of ours, opened without following links: regular, owned by our effective
/// uid, with a readable header (whatever its contents). What [`crate::remove_stale`] and the
/// "already exists" diagnostics need.
pub(crate) struct OwnSegmentFile {
    pub(crate) header: SegmentHeader,
    pub(crate) id: FileId,
}

/// Opens `path` read-only, without following links; `None` when it is not a regular file of
/// ours with a whole header.
pub(crate) fn read_own_segment_file(path: &Path) -> Option<OwnSegmentFile> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .ok()?;
    let file = File::from(fd);
    let metadata = file.metadata().ok()?;
    let ours = metadata.is_file() && metadata.uid() == rustix::process::geteuid().as_raw();
    if !ours || metadata.len() < HEADER_LEN as u64 {
        return None;
    }
    let header = read_header(&file).ok()?;
    Some(OwnSegmentFile {
        header,
        id: FileId::of(&metadata),
    })
}

fn read_header(file: &File) -> io::Result<SegmentHeader> {
    let mut bytes = [0; HEADER_LEN];
    file.read_exact_at(&mut bytes, 0)?;
    Ok(SegmentHeader::from_bytes(bytes))
}

/// Our pid, as the header stores it.
pub(crate) fn own_pid() -> u32 {
    // A pid is positive, so it fits.
    rustix::process::getpid()
        .as_raw_nonzero()
        .get()
        .unsigned_abs()
}

/// Removes the temporary file of a creation that failed half-way, unless disarmed.
struct UnpublishedFile<'a> {
    path: &'a Path,
    armed: bool,
}

impl Drop for UnpublishedFile<'_> {
    fn drop(&mut self) {
        if self.armed {
            // Nothing more to do if it fails: `remove_stale` removes it once we have exited.
            let _ = std::fs::remove_file(self.path);
        }
    }
}

/// A shared segment mapped into this process: a header and a data area.
///
/// The data area ([`Segment::base`], [`Segment::len`]) is aligned to [`DATA_ALIGN`] (64)
/// bytes, readable and writable, zero-filled when [`Segment::create`] returns, and mapped at
/// the same address until the `Segment` drops. A segment returned by [`Segment::open`] shows
/// whatever its users have written. This crate never reads or writes the data area, and never
/// makes a Rust reference to it: its users (the rings) reach it through the raw pointer and
/// synchronise by their own protocols.
///
/// The creator removes the file when its `Segment` drops (unless [`Segment::keep_on_drop`]
/// was called); openers never do. Processes that still have the segment mapped keep using it
/// after its name is gone: removal only keeps new processes from opening it.
#[derive(Debug)]
pub struct Segment {
    map: MmapRaw,
    name: SegmentName,
    path: PathBuf,
    header: SegmentHeader,
    id: FileId,
    is_creator: bool,
    remove_on_drop: bool,
}

// Rings share their memory between threads: `RingMemory` requires `Send + Sync`.
const _: fn() = || {
    fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Segment>();
};

impl Segment {
    /// Creates the segment `name` as `spec` says, mode `0600`, its data area zeroed, its
    /// header naming this process as creator.
    ///
    /// Fails if the name exists (even if its creator is dead: call [`crate::remove_stale`]
    /// first), if the file system has no room ([`CreateError::NoSpace`]), or if the directory
    /// is missing or not writable; every error names the path and the size.
    pub fn create(name: &SegmentName, spec: &SegmentSpec) -> Result<Self, CreateError> {
        Self::create_as(name, name, spec)
    }

    /// Creates a segment as [`Segment::create`] does, under `base` with a nonce drawn from the
    /// operating system's randomness (`sluice-<job>-<edge>-<nonce>`), so that nobody can
    /// create its name first; its openers learn the name from [`Segment::name`]. A name taken
    /// already is left alone and fresh nonces are drawn, up to [`CREATE_ATTEMPTS`] times.
    pub fn create_unique(base: &SegmentName, spec: &SegmentSpec) -> Result<Self, CreateError> {
        Self::create_unique_from(base, spec, || {
            let mut bytes = [0; 8];
            getrandom::fill(&mut bytes).map(|()| u64::from_ne_bytes(bytes))
        })
    }

    /// [`Segment::create_unique`] with nonces from `nonces` (tests force collisions).
    fn create_unique_from(
        base: &SegmentName,
        spec: &SegmentSpec,
        mut nonces: impl FnMut() -> Result<u64, getrandom::Error>,
    ) -> Result<Self, CreateError> {
        let mut attempt = 1;
        loop {
            let mut nonce = || {
                nonces().map_err(|e| CreateError::NoRandomName {
                    path: base.path(),
                    size: segment_size(spec).unwrap_or(u64::MAX),
                    reason: e.to_string(),
                })
            };
            let name = base.with_nonce(nonce()?);
            let building = base.with_nonce(nonce()?);
            match Self::create_as(&name, &building, spec) {
                Err(CreateError::AlreadyExists { .. }) if attempt < CREATE_ATTEMPTS => {
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    /// Creates the segment `name`, building it under `building`'s temporary name.
    fn create_as(
        name: &SegmentName,
        building: &SegmentName,
        spec: &SegmentSpec,
    ) -> Result<Self, CreateError> {
        let path = name.path();
        let Some(size) = segment_size(spec) else {
            let size = (spec.data_len as u64).saturating_add(DATA_OFFSET as u64);
            return Err(CreateError::TooLarge { path, size });
        };
        let fail = |step, e: io::Error| CreateError::from_io(&path, size, step, e);
        let pid = own_pid();
        let creating = building.creating_path(pid);

        let fd = rustix::fs::open(
            &creating,
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(SEGMENT_MODE),
        );
        let file = match fd {
            Ok(fd) => File::from(fd),
            // Another thread of ours is creating the same name, or a crashed process whose
            // pid we now have left its temporary file.
            Err(Errno::EXIST) => {
                return Err(CreateError::AlreadyExists {
                    path,
                    size,
                    creator_pid: Some(pid),
                })
            }
            Err(e) => return Err(fail(CreateStep::CreateFile, e.into())),
        };
        let mut unpublished = UnpublishedFile {
            path: &creating,
            armed: true,
        };

        file.set_permissions(Permissions::from_mode(SEGMENT_MODE))
            .map_err(|e| fail(CreateStep::SetMode, e))?;
        allocate(&file, size).map_err(|e| fail(CreateStep::Allocate, e))?;
        let header = SegmentHeader {
            magic: MAGIC,
            header_version: HEADER_VERSION,
            layout_version: spec.layout_version,
            kind: *spec.kind.as_bytes(),
            creator_pid: pid,
            reserved: 0,
            capacities: spec.capacities,
            data_offset: DATA_OFFSET as u64,
            data_len: spec.data_len as u64,
        };
        file.write_all_at(&header.to_bytes(), 0)
            .map_err(|e| fail(CreateStep::WriteHeader, e))?;
        let map = map(&file, size).map_err(|e| fail(CreateStep::Map, e))?;
        let id = file
            .metadata()
            .map(|m| FileId::of(&m))
            .map_err(|e| fail(CreateStep::CreateFile, e))?;

        match rustix::fs::renameat_with(CWD, &creating, CWD, &path, RenameFlags::NOREPLACE) {
            Ok(()) => unpublished.armed = false,
            Err(Errno::EXIST) => {
                let creator_pid = read_own_segment_file(&path)
                    .filter(|file| file.header.is_current())
                    .map(|file| file.header.creator_pid);
                return Err(CreateError::AlreadyExists {
                    path,
                    size,
                    creator_pid,
                });
            }
            Err(e) => return Err(fail(CreateStep::Publish, e.into())),
        }

        Ok(Self {
            map,
            name: name.clone(),
            path,
            header,
            id,
            is_creator: true,
            remove_on_drop: true,
        })
    }

    /// Opens and maps the segment `name`, checking that it is a regular file owned by us with
    /// mode `0600`, that its header has our magic and header version and matches `expected`
    /// field by field, and that the file's size is header plus data area.
    pub fn open(name: &SegmentName, expected: &SegmentSpec) -> Result<Self, OpenError> {
        let path = name.path();
        let io_error = |source: io::Error| OpenError::Io {
            path: path.clone(),
            source,
        };
        let fd = rustix::fs::open(
            &path,
            OFlags::RDWR | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
            Mode::empty(),
        );
        let file = match fd {
            Ok(fd) => File::from(fd),
            Err(Errno::NOENT) => return Err(OpenError::NotFound { path }),
            // `O_NOFOLLOW` met a symbolic link; `EISDIR`: a directory cannot open for writing.
            Err(Errno::LOOP | Errno::ISDIR) => return Err(OpenError::NotARegularFile { path }),
            Err(e) => return Err(io_error(e.into())),
        };
        let metadata = file.metadata().map_err(io_error)?;
        if !metadata.is_file() {
            return Err(OpenError::NotARegularFile { path });
        }
        let uid = rustix::process::geteuid().as_raw();
        if metadata.uid() != uid {
            return Err(OpenError::OwnerMismatch {
                path,
                expected: uid,
                found: metadata.uid(),
            });
        }
        let mode = metadata.mode() & 0o7777;
        if mode != SEGMENT_MODE {
            return Err(OpenError::ModeMismatch { path, found: mode });
        }
        let file_len = metadata.len();
        if file_len < HEADER_LEN as u64 {
            return Err(OpenError::TooShort {
                path,
                found: file_len,
            });
        }
        let header = read_header(&file).map_err(io_error)?;
        check_header(&path, &header, expected)?;
        let expected_len = (DATA_OFFSET as u64).saturating_add(header.data_len);
        if file_len != expected_len {
            return Err(OpenError::FileSizeMismatch {
                path,
                expected: expected_len,
                found: file_len,
            });
        }
        // `check_header` made `data_len` equal to a `usize`, so the size fits one too unless
        // it is within a header of `usize::MAX`, which no mapping is.
        let size = usize::try_from(expected_len).map_err(|_| {
            io_error(io::Error::new(
                io::ErrorKind::InvalidData,
                "segment larger than the address space",
            ))
        })?;
        let map = map(&file, size as u64).map_err(io_error)?;
        Ok(Self {
            map,
            name: name.clone(),
            path,
            header,
            id: FileId::of(&metadata),
            is_creator: false,
            remove_on_drop: false,
        })
    }

    /// The first byte of the data area: aligned to [`DATA_ALIGN`], valid for [`Segment::len`]
    /// bytes of reads and writes while `self` lives.
    pub fn base(&self) -> NonNull<u8> {
        let data = self.map.as_mut_ptr().wrapping_add(DATA_OFFSET);
        // A successful `mmap` never returns the zero page (`vm.mmap_min_addr`), so the
        // fallback is unreachable; it keeps this function free of panics.
        NonNull::new(data).unwrap_or(NonNull::dangling())
    }

    /// The first byte of the data area as a raw pointer; see [`Segment::base`].
    pub fn as_ptr(&self) -> *mut u8 {
        self.base().as_ptr()
    }

    /// How many bytes the data area has.
    pub fn len(&self) -> usize {
        self.map.len().saturating_sub(DATA_OFFSET)
    }

    /// Whether the data area has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The segment's name (with its nonce, for one made by [`Segment::create_unique`]).
    pub fn name(&self) -> &SegmentName {
        &self.name
    }

    /// The segment file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the header records: kind, layout version, capacities, data length.
    pub fn spec(&self) -> SegmentSpec {
        SegmentSpec {
            kind: SegmentKind::new(self.header.kind),
            layout_version: self.header.layout_version,
            capacities: self.header.capacities,
            data_len: self.len(),
        }
    }

    /// The pid of the process that created the segment.
    pub fn creator_pid(&self) -> u32 {
        self.header.creator_pid
    }

    /// Whether the creator is still running (see [`crate::process_is_running`] for what that
    /// can and cannot tell). A peer polling an empty ring can ask this now and then, so that
    /// it reports a dead creator instead of waiting forever.
    pub fn creator_is_running(&self) -> bool {
        process_is_running(self.header.creator_pid)
    }

    /// Whether this process created the segment (rather than opened it).
    pub fn is_creator(&self) -> bool {
        self.is_creator
    }

    /// Leaves the file in place when this `Segment` drops (for a creator that hands the
    /// segment to processes that outlive it; something else must then remove it, such as
    /// [`crate::JobSegments`] or [`crate::remove_stale`]).
    pub fn keep_on_drop(&mut self) {
        self.remove_on_drop = false;
    }

    /// Removes the segment's name now, whoever created it. The mapping stays valid until
    /// `self` drops, here at the end of the call; other processes' mappings stay valid too.
    pub fn remove(mut self) -> Result<(), RemoveError> {
        self.remove_on_drop = false;
        match remove_if_same(&self.path, self.id) {
            Ok(true) => Ok(()),
            Ok(false) => Err(RemoveError::AlreadyRemoved {
                path: self.path.clone(),
            }),
            Err(source) => Err(RemoveError::Io {
                path: self.path.clone(),
                source,
            }),
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.remove_on_drop {
            // A drop cannot report; a name left behind is removed by `JobSegments` when the
            // job ends or by `remove_stale` once we have exited.
            let _ = remove_if_same(&self.path, self.id);
        }
    }
}

/// The size of a segment of `spec`, header included, if it fits a file and a mapping.
fn segment_size(spec: &SegmentSpec) -> Option<u64> {
    (spec.data_len as u64)
        .checked_add(DATA_OFFSET as u64)
        .filter(|&size| i64::try_from(size).is_ok() && usize::try_from(size).is_ok())
}

/// Allocates `size` bytes for `file` so that touching any page later cannot fail.
fn allocate(file: &File, size: u64) -> io::Result<()> {
    loop {
        match rustix::fs::fallocate(file, FallocateFlags::empty(), 0, size) {
            Ok(()) => return Ok(()),
            Err(Errno::INTR) => continue,
            // Not every file system has `fallocate` (tmpfs does): a sparse file of the right
            // size is the best those can do.
            Err(Errno::OPNOTSUPP) => return file.set_len(size),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Maps the whole file, shared, its pages faulted in now rather than on first touch.
fn map(file: &File, size: u64) -> io::Result<MmapRaw> {
    let len = usize::try_from(size)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "larger than a mapping"))?;
    let map = MmapOptions::new().len(len).populate().map_raw(file)?;
    if map.as_ptr() as usize & (DATA_ALIGN - 1) != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the mapping is not 64-byte aligned",
        ));
    }
    Ok(map)
}

/// Compares a header with what the opener expects, field by field.
fn check_header(
    path: &Path,
    header: &SegmentHeader,
    expected: &SegmentSpec,
) -> Result<(), OpenError> {
    let path = || path.to_owned();
    if header.magic != MAGIC {
        return Err(OpenError::BadMagic {
            path: path(),
            found: header.magic,
        });
    }
    if header.header_version != HEADER_VERSION {
        return Err(OpenError::HeaderVersionMismatch {
            path: path(),
            found: header.header_version,
        });
    }
    let found_kind = SegmentKind::new(header.kind);
    if found_kind != expected.kind {
        return Err(OpenError::KindMismatch {
            path: path(),
            expected: expected.kind,
            found: found_kind,
        });
    }
    if header.layout_version != expected.layout_version {
        return Err(OpenError::LayoutVersionMismatch {
            path: path(),
            expected: expected.layout_version,
            found: header.layout_version,
        });
    }
    for index in 0..CAPACITY_COUNT {
        if header.capacities[index] != expected.capacities[index] {
            return Err(OpenError::CapacityMismatch {
                path: path(),
                index,
                expected: expected.capacities[index],
                found: header.capacities[index],
            });
        }
    }
    if header.data_offset != DATA_OFFSET as u64 {
        return Err(OpenError::DataOffsetMismatch {
            path: path(),
            found: header.data_offset,
        });
    }
    if header.data_len != expected.data_len as u64 {
        return Err(OpenError::DataLenMismatch {
            path: path(),
            expected: expected.data_len as u64,
            found: header.data_len,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SegmentSpec {
        SegmentSpec {
            kind: SegmentKind::new(*b"testuniq"),
            layout_version: 1,
            capacities: [0, 0],
            data_len: 64,
        }
    }

    /// Nonces in the order given, as the operating system would draw them.
    fn drawn(nonces: &[u64]) -> impl FnMut() -> Result<u64, getrandom::Error> + '_ {
        let mut next = nonces.iter();
        move || Ok(next.next().copied().unwrap_or(u64::MAX))
    }

    #[test]
    fn a_taken_name_or_temporary_name_is_left_alone_and_fresh_nonces_are_drawn() {
        let dir = tempfile::tempdir().unwrap();
        let base = SegmentName::in_dir(dir.path(), "job", "edge").unwrap();
        // Someone created the name of the first attempt, and the temporary name of the
        // second (its creating file, under our pid).
        std::fs::write(base.with_nonce(1).path(), b"theirs").unwrap();
        std::fs::write(base.with_nonce(4).creating_path(own_pid()), b"theirs").unwrap();
        let segment = Segment::create_unique_from(&base, &spec(), drawn(&[1, 2, 3, 4, 5, 6]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(segment.name(), &base.with_nonce(5));
        assert_eq!(segment.path(), base.with_nonce(5).path());
        assert_eq!(std::fs::read(base.with_nonce(1).path()).unwrap(), b"theirs");
        // Nothing of ours is left under a temporary name.
        assert!(!base.with_nonce(2).creating_path(own_pid()).exists());
        assert!(!base.with_nonce(6).creating_path(own_pid()).exists());
        Segment::open(segment.name(), &spec()).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn creation_gives_up_after_its_attempts_with_the_last_name_taken() {
        let dir = tempfile::tempdir().unwrap();
        let base = SegmentName::in_dir(dir.path(), "job", "edge").unwrap();
        std::fs::write(base.with_nonce(7).path(), b"theirs").unwrap();
        // Every attempt draws the taken nonce for its name.
        let error = Segment::create_unique_from(&base, &spec(), || Ok(7))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.ends_with("-0000000000000007 (128 bytes): it already exists"),
            "{error}"
        );
        let failed =
            Segment::create_unique_from(&base, &spec(), || Err(getrandom::Error::UNSUPPORTED));
        assert!(matches!(failed, Err(CreateError::NoRandomName { .. })));
    }
}
