//! Where checkpoints live: a job's checkpoints on disk, one checksummed file per instance per
//! checkpoint and a manifest written last, on a local disk or a mount shared by several hosts.
//!
//! The store knows nothing of operators, plans or barriers: a part is an opaque payload (an
//! instance's snapshot) under the instance's name. The checkpoint coordinator (control plane)
//! and the PEs' snapshot writers use it; it depends on no other Sluice crate.
//!
//! # Layout
//!
//! ```text
//! DIR/                          the job's checkpoint directory (--checkpoint-dir), mode 0700
//! ├── chk-6/                    checkpoint 6: complete (it has its manifest)
//! │   ├── source[0].part        one file per instance: header + payload (see below)
//! │   ├── sum[0].part
//! │   ├── sum[1].part
//! │   └── MANIFEST.json         written last: its presence is what "complete" means
//! ├── chk-7/                    complete
//! ├── chk-8/                    being written (or abandoned): no manifest, so not complete
//! │   ├── source[0].part
//! │   └── .sum[0].part.3f9c0a1b2c3d4e5f.tmp   a part being written; readers ignore it
//! ├── before-upgrade/           a savepoint saved here (its manifest says "savepoint")
//! └── .removing-chk-5-…/        a checkpoint being removed by retention
//! ```
//!
//! A part file (`part.rs`):
//!
//! ```text
//! | magic "SLUICEPT" 8 | version u32 | reserved u32 | payload length u64 | payload crc32 u32 |
//! | header crc32 u32 | payload ... |           (32-byte header, integers little-endian)
//! ```
//!
//! The manifest (`manifest.rs`) is JSON a person can read: `{"format": 1, "crc32": C,
//! "manifest": {job, application, kind, n, created_unix_ms, duration_ms, alignment_ms, plan,
//! parts: [{name, file, bytes, crc32}]}}`.
//!
//! # Why a crash never leaves a checkpoint that looks complete
//!
//! Every file is written under a temporary name in its own directory, fsynced, renamed over its
//! final name, and then the directory is fsynced (`durable.rs`): a file is seen whole or not at
//! all, and once the write returns it survives a crash or power cut. A PE acknowledges its part
//! only after that. The coordinator calls [`CheckpointStore::complete`] once every part is
//! acknowledged; it checks every part listed is on disk with its length, fsyncs the job's
//! directory (so `chk-N` itself is durable), and only then writes the manifest the same way.
//! So when `MANIFEST.json` exists, every part it lists was durable before it:
//!
//! - a crash before the manifest's rename leaves `chk-N` without one: partial, never loaded,
//!   removed by retention once a later checkpoint completes (or by [`CheckpointStore::abort`]);
//! - a crash after it leaves a complete checkpoint;
//! - a full disk (ENOSPC, EDQUOT) fails the write with [`StoreError::DiskFull`]; the temporary
//!   file is removed, the manifest is never renamed into place, and the previous complete
//!   checkpoint stays as it was.
//!
//! Retention removes a checkpoint by renaming its directory to `.removing-…` first (it stops
//! being a checkpoint at once), then deleting it, so a crash mid-removal leaves no
//! half-deleted checkpoint that looks complete either.
//!
//! Damage after the fact (a bad disk, a cut-off copy, a hand edit) is found when reading: the
//! manifest must be byte for byte what this build writes and match its crc32; every part's
//! header must carry the magic, this format version and its own crc32; its length must be the
//! header's plus the payload's and the manifest's; its payload must match both crc32s.
//! [`CheckpointStore::latest`] skips a checkpoint with any refused file, naming the file, for
//! the one before.
//!
//! # Concurrency
//!
//! Every method takes `&self` and the store is `Send + Sync`: instances' writer threads share
//! it, and PEs on other hosts open the same directory on a shared mount. Distinct parts are
//! distinct files, and temporary names carry 64 random bits, so concurrent writers never touch
//! one file. Completing checkpoint `n` abandons every checkpoint before `n` still in progress.

#![forbid(unsafe_code)]

mod durable;
mod error;
mod listing;
mod manifest;
mod part;
mod store;

pub use error::{RefusedFile, StoreError};
pub use listing::{list, CheckpointInfo, CheckpointStatus};
pub use manifest::{
    CheckpointKind, Manifest, PartEntry, MANIFEST_FILE, MANIFEST_FORMAT, MAX_MANIFEST_BYTES,
};
pub use part::{
    part_file_name, MAX_PART_FILE_NAME, PART_FORMAT, PART_HEADER_LEN, PART_MAGIC, PART_SUFFIX,
};
pub use store::{
    load, read_part, verify, CheckpointStore, LoadedCheckpoint, PartInfo, VerifiedCheckpoint,
    DEFAULT_RETAINED,
};
