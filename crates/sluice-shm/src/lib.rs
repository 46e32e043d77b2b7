//! Shared-memory segments for Sluice's cross-process transports.
//!
//! A segment is a file in `/dev/shm` (a tmpfs) that several processes of one job map. It
//! starts with a 64-byte `#[repr(C)]` header ([`header`]: magic, header version, what the
//! segment holds, its owner's layout version and capacities, the creator's pid) followed by a
//! data area that the owner (a ring in `sluice-ring`) lays out as it likes.
//!
//! - [`Segment::create`] makes a new segment, mode `0600`, with all its pages allocated up
//!   front (so a full `/dev/shm` is a [`CreateError::NoSpace`] naming the path and size at
//!   creation, never a `SIGBUS` later). The file is built under a temporary name and renamed
//!   into place only when complete, so no process ever opens a half-initialised segment.
//! - [`Segment::open`] maps an existing segment after checking everything it can: owner, mode,
//!   size, magic, header version, kind, layout version, capacities. Each mismatch is its own
//!   [`OpenError`] variant naming the path, the field, what was expected and what was found.
//! - [`SegmentName`] gives each (job, edge) pair its own file name, `sluice-<job>-<edge>`;
//!   [`Segment::create_unique`] adds a random nonce to it (`sluice-<job>-<edge>-<nonce>`), so
//!   that no other user can create the name first and keep the job from starting.
//! - [`remove_stale`] deletes the segments a crashed run left behind (their creator's pid is
//!   gone) and reports them; [`JobSegments`] does that when a job starts and removes all of the
//!   job's segments when it ends.
//!
//! The data area a [`Segment`] hands out ([`Segment::base`], [`Segment::len`]) is 64-byte
//! aligned, zero-filled when the segment is created, and stays mapped at the same address for
//! as long as the `Segment` lives: what `sluice_ring::RingMemory` asks of its implementors.
//!
//! This crate needs no `unsafe`: `memmap2::MmapRaw` maps the file without ever handing out a
//! reference into it (only raw pointers, whose users argue their own safety), and the header is
//! read and written with `pread`/`pwrite` as a `bytemuck::Pod` value.
//!
//! Linux only: segments rely on tmpfs, `fallocate` and `renameat2(RENAME_NOREPLACE)`.

#![forbid(unsafe_code)]

#[cfg(not(target_os = "linux"))]
compile_error!("sluice-shm supports Linux only (segments are tmpfs files under /dev/shm)");

pub mod header;
mod job;
mod name;
mod segment;
mod spec;
mod stale;

pub use job::{BeginJobError, JobSegments};
pub use name::{NameError, SegmentName, DEFAULT_DIR, MAX_FILE_NAME_LEN, NAME_PREFIX};
pub use segment::{CreateError, CreateStep, OpenError, RemoveError, Segment, CREATE_ATTEMPTS};
pub use spec::{SegmentKind, SegmentSpec};
pub use stale::{process_is_running, remove_stale, StaleSegment, SweepError};
