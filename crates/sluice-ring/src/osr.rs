//! The OSR ring: many producers (threads or processes), one consumer, one byte ring — the
//! `OSRBuffer` of TurboStream (Zhang et al., section IV), made safe against producers that die
//! or stall in the middle of a write.
//!
//! Why hand-written: the ring is the intra-node IPC path between processes, so it lives in
//! shared memory and may hold no pointers; it must never block on a producer that died; and it
//! has to move tens of millions of small tuples a second, which leaves room for three atomic
//! read-modify-writes per *record* (a record may carry a batch of tuples) and nothing more.
//!
//! # Memory layout
//! Everything lives inside one [`RingMemory`] block: the control block at offset 0, then the
//! byte ring. Offsets are the named constants below, checked at compile time.
//! ```text
//! offset  line                          fields (u64 each)                  written by
//!    0    RESERVE_LINE_OFFSET           write_pos                          every producer (CAS)
//!   64    SHARED_LINE_OFFSET            magic, version, capacity, window,  creator; flags and
//!                                       flags, hole_mask, consumer_pid     hole_mask rarely
//!  128    CONSUMER_LINE_OFFSET          read_pos, skipped_records,         the consumer
//!                                       skipped_spans, corrupt_records
//!  192    PRODUCERS_LINE_OFFSET         producers, lost_commits,           producers, rarely
//!                                       late_claims, joined
//!  256    HOLES_LINE_OFFSET             8 hole slots: start | len << 32    the consumer
//!  320    PRODUCER_TABLE_OFFSET         1024 producer slots (128 lines):   each joined producer,
//!                                       pid | joined << 32 | left << 33    at join and at leave
//! 8512    DATA_OFFSET                   the byte ring: `capacity` bytes (a power of two)
//! ```
//! `write_pos` and `read_pos` are byte *positions* that grow forever (a `u64` does not wrap in
//! practice); a position's ring offset is `position & (capacity - 1)` and its *lap* is
//! `position / capacity`.
//!
//! # Records
//! Every record starts at an 8-byte aligned offset with one status word and never crosses the
//! end of the ring:
//! ```text
//! +--------------------+----------------------------------------+--------+
//! | status word (u64)  | payload (len bytes)                    | 0..7 B |
//! |                    | for a batch: per tuple [len u32|0 u32] | zero   |
//! |                    | then the tuple, rounded up to 8 bytes  | pad    |
//! +--------------------+----------------------------------------+--------+
//! ^ 8-byte aligned      ^ 8-byte aligned                                 ^ next record
//!
//! the status word:
//!  63                              32 31                     8 7   5  4  3    0
//! +----------------------------------+------------------------+-----+---+------+
//! |          target task (u32)       |  extent in words (24)  |tail |bat|status|
//! +----------------------------------+------------------------+-----+---+------+
//! ```
//! `extent` counts the whole record (status word included) in 8-byte words, `tail` the
//! padding bytes after the payload (so `len = 8 * extent - 8 - tail`), `bat` marks a batch.
//! Status values: `0` empty (the whole word is zero), `1` `Writing`, `2` `Ready`, `3` `Read`
//! (delivered early by the right side of the window), `4` `Flush` (padding: the end of a lap,
//! space before a hole, an aborted record), `5` `Skipped` and `6` `Acked` (see "The window").
//! The paper's `target_task` and `length` are the word's `target` and `extent`/`tail`; since
//! one word holds all of it, the header is written by one CAS and published by one more.
//!
//! # Protocol
//! Freed space is always **zero**: the consumer zeroes every byte it releases before it
//! publishes the new `read_pos`. That single invariant is what lets the consumer tell
//! "reserved but nothing written yet" from stale bytes, with no tag that payload could forge.
//!
//! A producer writes a record in three atomic steps:
//! 1. **Reserve**: CAS `write_pos` from `w` to `w + extent` (one CAS; the loser retries from
//!    the value the CAS returns). If the record does not fit before the end of the lap, the
//!    producer first reserves the rest of the lap as a `Flush` pad (the paper's flush record
//!    and wrap); if it would overlap a hole (below), it pads up to the hole and jumps over it.
//!    It never reserves past `read_pos + capacity`: then it returns [`ReserveError::Full`] and
//!    the caller idles and retries (backpressure).
//! 2. **Claim**: CAS the status word at `w` from `0` to `Writing` (with extent and target).
//! 3. **Commit**: write the payload, then CAS the status word `Writing` → `Ready` with
//!    Release. Dropping an uncommitted reservation CASes it to `Flush` instead (abort).
//!
//! The consumer walks records from `read_pos` by their extents, delivers `Ready` ones, and
//! after each poll zeroes what it passed and stores `read_pos` with Release.
//!
//! # The window
//! The consumer reads with the sliding window of the paper. Its *left edge* is the oldest
//! record not yet resolved; when that record is not ready (still `Writing`, or reserved with
//! no status word yet) the left edge waits while the *right side* keeps delivering the `Ready`
//! records behind it, marking each `Read` so the left edge passes it later. The right side
//! stops at the next record that is not ready, and before delivering a record it reads the
//! left edge's status word again (a producer commits its record before it reserves its next
//! one, so once the later one is seen `Ready` the earlier one is seen committed): the records
//! of one producer are delivered in the order it wrote them.
//!
//! **Precisely**: `window` (≥ 1) counts consumer polls ([`OsrConsumer::poll`] calls). Each
//! poll that ends with the left edge resting on the same unready record adds one; the poll
//! that adds the `window`-th one skips that record. A record is therefore waited on for at
//! most `window` polls — a bound the caller turns into time by how often it polls (a busy
//! consumer polls every few tens of nanoseconds; pick `window` so that it outlasts any
//! scheduling delay of a live producer, e.g. millions). Skipping:
//! - a `Writing` record: the consumer CASes its status word `Writing` → `Skipped`. Exactly one
//!   of that CAS and the producer's commit CAS wins; if the producer won, the record is
//!   delivered normally. Counted in `skipped_records`.
//! - a reservation with no status word yet (the producer stopped between its two CASes): the
//!   consumer CASes every word from the left edge `0` → `Skipped` until it meets a non-zero
//!   word (the next claimed record: payload is only ever written after a successful claim, and
//!   free space is zero), the current `write_pos`, the end of the lap or a hole. A producer
//!   whose claim CAS then fails on `Skipped` knows it lost the race; it has written nothing.
//!   Counted in `skipped_spans`.
//!
//! **A skipped region becomes a hole.** The slow producer may still be writing into it, so its
//! bytes cannot be freed: the consumer records `(offset, len)` in a hole slot and does not zero
//! it. Producers never place a record over a hole: they pad up to it and jump over it (a jump
//! is a `write_pos` CAS with no status word; both sides know the holes, and a hole is added or
//! removed only before the `read_pos` store that lets producers reach its next lap, so both
//! sides always agree). When the slow producer finishes, its CAS fails on `Skipped`, and it
//! replaces the mark with `Acked` (Release) and never touches the record again; its commit
//! returns [`CommitError::Lost`]. When every reservation in a hole is `Acked`, the consumer
//! zeroes the hole and frees its slot the next time its read position passes the hole. A
//! producer that really died never acknowledges: its hole stays for the life of the ring
//! (at most one reservation's bytes, or a few for a span), and since records never straddle a
//! hole it can also lower the largest record that fits ([`ReserveError::TooLarge`] then says
//! how large one fits now). With all [`HOLE_SLOTS`] slots in use the consumer cannot skip any
//! more and poisons the ring ([`OsrError::TooManyHoles`]).
//!
//! **The caller may decide instead.** A `window` of `u64::MAX` polls never expires; then
//! [`OsrConsumer::stall`] says what holds the left edge after a poll (a record still
//! `Writing`, with its target, or an unclaimed reservation) and [`OsrConsumer::skip_stall`]
//! skips it now, exactly as an expired window would. A caller that knows which producers are
//! alive (the producer table, below) skips only a dead producer's record, so a live producer
//! never loses one however long it is descheduled. Skipping an *unclaimed* reservation never
//! loses data even when its producer is alive: its claim then fails before it wrote anything,
//! and it reserves again.
//!
//! So a producer dying at any instruction costs at most its own record (or records), stalls
//! the left edge for `window` polls and never the right side; and a producer that was only
//! slow never corrupts anything: it learns that its record was lost.
//!
//! # Who touches which word
//! Plain (non-atomic) accesses: the owner writes the payload of the record it claimed, the
//! consumer reads a `Ready` record's payload and zeroes freed bytes. Every other access to a
//! ring word is atomic. The consumer's span-skip CASes only words after a boundary it won, so
//! they never race with a payload write; a payload is never written after `Ready`; every
//! producer access to a word is ordered before the consumer's zeroing of it by a Release
//! operation on that word (commit, abort, pad, acknowledgement) that the consumer acquires;
//! freed bytes are only reused after the `read_pos` store that follows their zeroing; hole
//! bytes are neither zeroed nor reused until acknowledged. Hence no plain access ever runs
//! concurrently with another access to the same bytes.
//!
//! No CAS can succeed on a recycled word (no ABA): `write_pos` only grows, so a producer with
//! a stale view fails its reservation CAS; a status word is CASed only by the owner of a live
//! reservation, whose bytes cannot be recycled before it acknowledges, and by the consumer.
//!
//! # Open batches
//! A producer can keep one batch record open across calls ([`OsrProducer::try_open_batch`]):
//! reserved and claimed at a generous size, filled tuple by tuple
//! ([`OsrProducer::append_to_batch`]), and committed later ([`OsrProducer::commit_batch`])
//! *shrunk* to what was written. Shrinking writes a `Flush` status word covering the unused
//! tail inside the record (atomically, before the commit) and then commits the status word with
//! the smaller extent: the consumer, which reads the record only after the Release commit,
//! delivers the short record and passes the pad. If the consumer skipped the record first, the
//! commit CAS fails as for any record and the producer acknowledges the whole reservation (the
//! pad word lies inside the quarantined hole, which nobody reads). An empty batch is aborted.
//! A producer holds at most one open batch and reserves nothing else while it is open, so the
//! ordering argument of the right side ("commits before it reserves its next one") holds.
//!
//! # The producer table
//! A producer made by [`OsrRing::join`] takes the next of [`PRODUCER_SLOTS`] slots (a
//! `fetch_add` on `joined`) and stores its process id there (Release); when its handle drops it
//! sets the slot's `left` bit (Release, after all its commits). The consumer reads the table
//! ([`OsrConsumer::producer`]) to tell a producer that died (its pid is gone) or left from one
//! that is merely slow; records name their producer by whatever the caller puts in `target`
//! (the `shm-osr` transport puts the slot index there). The consumer stores its own pid in the
//! shared line when it attaches, so producers can tell a dead consumer
//! ([`OsrProducer::consumer_pid`]).
//!
//! The table has [`PRODUCER_SLOTS`] (1024) slots, as many senders as a `tcp` receiver takes,
//! so that every fan-in the applications allow (up to 1024 upstream instances, or the Vega
//! paper's 20 feed handlers into each engine) is one ring polled by one consumer. The other
//! way to take more producers, several rings per consumer, was not chosen: the consumer would
//! poll every ring on every empty poll (its idle cost and its latency grow with the fan-in),
//! the producers' records would no longer share one order, and nothing in the protocol asks
//! for it. The reservation protocol never looks at the table: a slot is written only by its
//! producer (when it joins and when it leaves) and read by the consumer when it checks a
//! producer, so a larger table costs 8 bytes of shared memory a slot and no atomic operation
//! on the hot path. More producers do contend harder on the `write_pos` CAS, which is the
//! paper's design; a planner that fans in beyond the table splits the senders over several
//! rings.
//!
//! # Failure model
//! A producer may stop forever at any instruction (its process killed) or be delayed for any
//! time (descheduled, stopped): neither corrupts the ring or stalls the consumer beyond the
//! window. The window cannot tell the two apart, so a producer delayed past it loses its
//! record (it is told so). What the ring does not survive is a producer that writes outside
//! its reservation: shared memory gives every mapper every byte. Bounds checks keep such
//! scribbles from turning into out-of-bounds accesses or hangs in this process, but bytes it
//! overwrites in other records are delivered as they are.
//!
//! # Untrusted memory
//! Another process can scribble on the ring. Every length read from it is checked before use:
//! an extent that is zero, runs past the end of the lap, over a hole or past the largest
//! record is reported as [`OsrError::Corrupt`] and poisons the ring; a batch whose inner
//! framing does not fit its record is dropped and counted in `corrupt_records`. All ring
//! accesses are bounds-checked, so corruption is an error or a panic, never an out-of-bounds
//! access.
//!
//! # Checking
//! `tests/osr_loom.rs` runs the protocol under `loom` (`RUSTFLAGS="--cfg loom"`): the control
//! block and every ring word are then `loom` atomics allocated beside the memory, and each word
//! also has a `loom` cell for its payload role, so loom checks both the atomics' orderings and
//! that no plain access races (see the notes in `src/osr/ring_bytes.rs`). What each model
//! covers is listed at the top of `tests/osr_loom.rs`.
//! `tests/osr_model.rs` checks single-threaded operation sequences against a `VecDeque` model;
//! the unit tests and the model test also run under Miri on [`HeapMemory`].

mod consumer;
mod control;
mod producer;
mod ring_bytes;
mod word;

#[cfg(all(test, not(loom)))]
mod tests;

use std::fmt;
#[cfg(not(loom))]
use std::ptr::NonNull;

use sluice_sync::atomic::Ordering;
use sluice_sync::sync::Arc;

pub use consumer::{OsrConsumer, OsrRecord, OsrTuples};
pub use consumer::{OsrProducerEntry, OsrStall};
pub use control::{
    CONSUMER_LINE_OFFSET, CONTROL_BYTES, DATA_OFFSET, HOLES_LINE_OFFSET, HOLE_SLOTS,
    LAYOUT_VERSION, MAGIC, PRODUCERS_LINE_OFFSET, PRODUCER_SLOTS, PRODUCER_TABLE_OFFSET,
    RESERVE_LINE_OFFSET, SHARED_LINE_OFFSET,
};
pub use producer::{batch_item_bytes, OsrProducer, OsrReservation};

use crate::memory::{HeapMemory, RingMemory, CACHE_LINE};
use control::Control;
use ring_bytes::RingBytes;

/// The geometry of an OSR ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OsrLayout {
    /// Bytes in the ring: a power of two from [`OsrLayout::MIN_CAPACITY`] to
    /// [`OsrLayout::MAX_CAPACITY`].
    pub capacity_bytes: usize,
    /// How many polls the consumer waits on an unready record before skipping it (≥ 1;
    /// `u64::MAX`: never by itself, the caller skips with [`OsrConsumer::skip_stall`]; see the
    /// module doc, "The window").
    pub window: u64,
}

impl OsrLayout {
    /// The smallest ring.
    pub const MIN_CAPACITY: usize = 64;
    /// The largest ring (so any pad fits the 24-bit extent of a status word).
    pub const MAX_CAPACITY: usize = 1 << 26;

    /// A checked layout.
    pub fn new(capacity_bytes: usize, window: u64) -> Result<Self, OsrError> {
        let layout = Self {
            capacity_bytes,
            window,
        };
        layout.check()?;
        Ok(layout)
    }

    /// Refuses an impossible geometry.
    pub fn check(&self) -> Result<(), OsrError> {
        if !self.capacity_bytes.is_power_of_two()
            || !(Self::MIN_CAPACITY..=Self::MAX_CAPACITY).contains(&self.capacity_bytes)
        {
            return Err(OsrError::InvalidLayout(
                "capacity must be a power of two between 64 bytes and 64 MiB",
            ));
        }
        if self.window == 0 {
            return Err(OsrError::InvalidLayout("window must be at least 1 poll"));
        }
        Ok(())
    }

    /// The bytes of memory the ring needs: control block plus ring.
    pub fn bytes_needed(&self) -> usize {
        CONTROL_BYTES + self.capacity_bytes
    }

    /// The largest record, status word included: half the ring, so a record always fits after
    /// at most one flush.
    pub fn max_record_bytes(&self) -> usize {
        self.capacity_bytes / 2
    }

    /// The largest payload one record (or one batch) can carry.
    pub fn max_payload(&self) -> usize {
        self.max_record_bytes() - word::HEADER_BYTES as usize
    }
}

/// Why a ring could not be created, opened, attached to or read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OsrError {
    /// The layout is impossible.
    InvalidLayout(&'static str),
    /// The memory block is smaller than the layout needs (or is misaligned).
    MemoryTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes there are.
        len: usize,
    },
    /// The memory does not hold an initialised OSR ring.
    NotInitialized,
    /// The memory holds a ring of another layout version.
    VersionMismatch {
        /// The version found.
        found: u64,
    },
    /// The ring already has its one consumer.
    ConsumerTaken,
    /// The ring was poisoned (by corruption or by running out of hole slots).
    Poisoned,
    /// A status word that no writer could have produced.
    Corrupt {
        /// The byte position of the word.
        position: u64,
        /// The word.
        word: u64,
    },
    /// A record must be skipped but every hole slot is held by a producer that never came back.
    TooManyHoles,
    /// Every slot of the producer table is taken.
    ProducerTableFull,
}

impl fmt::Display for OsrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidLayout(why) => write!(f, "invalid OSR ring layout: {why}"),
            Self::MemoryTooSmall { needed, len } => {
                write!(f, "OSR ring needs {needed} aligned bytes, memory has {len}")
            }
            Self::NotInitialized => write!(f, "memory does not hold an initialised OSR ring"),
            Self::VersionMismatch { found } => write!(
                f,
                "OSR ring layout version {found}, this build speaks {LAYOUT_VERSION}"
            ),
            Self::ConsumerTaken => write!(f, "the OSR ring already has a consumer"),
            Self::Poisoned => write!(f, "the OSR ring is poisoned"),
            Self::Corrupt { position, word } => {
                write!(
                    f,
                    "corrupt OSR ring: word {word:#018x} at position {position}"
                )
            }
            Self::TooManyHoles => write!(
                f,
                "OSR ring: {HOLE_SLOTS} producers died mid-write; no hole slot left to skip another"
            ),
            Self::ProducerTableFull => write!(
                f,
                "OSR ring: all {PRODUCER_SLOTS} producer slots are taken; no more producers can join"
            ),
        }
    }
}

impl std::error::Error for OsrError {}

/// Why a reservation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReserveError {
    /// No room before unread bytes: idle and retry (backpressure).
    Full,
    /// The consumer is gone.
    Closed,
    /// The ring is poisoned.
    Poisoned,
    /// The record does not fit the ring: never (larger than [`OsrLayout::max_payload`]), or
    /// not while holes left by producers that died mid-write split the ring into smaller
    /// gaps (then `max` is the largest payload that fits now; split the batch).
    TooLarge {
        /// The payload asked for.
        len: usize,
        /// The largest payload the ring takes (now).
        max: usize,
    },
}

/// Why a commit failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitError {
    /// The consumer skipped the record after its window; it will never be delivered.
    Lost,
    /// The ring is poisoned.
    Poisoned,
}

/// Why a push (reserve, write, commit) failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushError {
    /// No room now: idle and retry.
    Full,
    /// The consumer is gone.
    Closed,
    /// The ring is poisoned.
    Poisoned,
    /// The record does not fit the ring (see [`ReserveError::TooLarge`]).
    TooLarge {
        /// The payload asked for.
        len: usize,
        /// The largest payload the ring takes (now).
        max: usize,
    },
    /// The record was skipped by the consumer's window and will never be delivered.
    Lost,
}

impl From<ReserveError> for PushError {
    fn from(e: ReserveError) -> Self {
        match e {
            ReserveError::Full => Self::Full,
            ReserveError::Closed => Self::Closed,
            ReserveError::Poisoned => Self::Poisoned,
            ReserveError::TooLarge { len, max } => Self::TooLarge { len, max },
        }
    }
}

impl From<CommitError> for PushError {
    fn from(e: CommitError) -> Self {
        match e {
            CommitError::Lost => Self::Lost,
            CommitError::Poisoned => Self::Poisoned,
        }
    }
}

macro_rules! display_via_debug {
    ($($t:ty: $what:literal),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($what, ": {:?}"), self)
            }
        }
        impl std::error::Error for $t {}
    )*};
}
display_via_debug!(ReserveError: "OSR reserve failed", CommitError: "OSR commit failed",
    PushError: "OSR push failed");

/// The ring's counters, read from its control block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OsrStats {
    /// `Writing` records the consumer skipped after the window.
    pub skipped_records: u64,
    /// Reservations without a status word the consumer skipped (one per span).
    pub skipped_spans: u64,
    /// Records dropped because their batch framing was corrupt.
    pub corrupt_records: u64,
    /// Commits (or aborts) that found their record skipped.
    pub lost_commits: u64,
    /// Claims that found their reservation skipped before they wrote anything (retried).
    pub late_claims: u64,
    /// Live producer handles.
    pub producers: u64,
    /// Holes currently quarantined.
    pub holes: u32,
}

/// What every handle of one ring shares: the memory and where things are inside it.
///
/// The views into the memory are derived from [`RingMemory::base`] on every access rather than
/// cached, so moving the memory value (a `Box` inside [`HeapMemory`], say) never invalidates a
/// stored pointer.
pub(crate) struct Shared<M: RingMemory> {
    #[cfg(loom)]
    control: Box<Control>,
    #[cfg(loom)]
    data: RingBytes,
    capacity: u64,
    mask: u64,
    window: u64,
    max_extent: u64,
    /// The bytes the control block and the ring live in (under `loom` only held: the model's
    /// atomics live beside it).
    #[cfg_attr(loom, allow(dead_code))]
    mem: M,
}

impl<M: RingMemory> Shared<M> {
    /// Checks the memory is big and aligned enough for `layout`.
    fn new(mem: M, layout: OsrLayout) -> Result<Self, OsrError> {
        layout.check()?;
        let needed = layout.bytes_needed();
        if mem.len() < needed || mem.base().as_ptr() as usize & (CACHE_LINE - 1) != 0 {
            return Err(OsrError::MemoryTooSmall {
                needed,
                len: mem.len(),
            });
        }
        let capacity = layout.capacity_bytes as u64;
        Ok(Self {
            #[cfg(loom)]
            control: Box::new(Control::new_for_model()),
            #[cfg(loom)]
            data: RingBytes::new_for_model(layout.capacity_bytes),
            capacity,
            mask: capacity - 1,
            window: layout.window,
            max_extent: layout.max_record_bytes() as u64,
            mem,
        })
    }

    /// The control block.
    #[inline(always)]
    pub(crate) fn control(&self) -> &Control {
        #[cfg(not(loom))]
        // SAFETY: `mem` holds at least `CONTROL_BYTES + capacity` bytes aligned to 64 (checked
        // in `new`), valid while `self` (which owns `mem`) lives; `Control` is `#[repr(C)]`
        // lines of `AtomicU64`, valid for every bit pattern and shared only through atomic
        // operations.
        unsafe {
            self.mem.base().cast::<Control>().as_ref()
        }
        #[cfg(loom)]
        &self.control
    }

    /// The byte ring.
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn data(&self) -> RingBytes<'_> {
        // SAFETY: the ring's `capacity` bytes (a power of two) start at `DATA_OFFSET`, inside
        // the block (checked in `new`) and 64-aligned; they live while `self` does, which the
        // view's lifetime ties it to; everybody touches them only through the OSR protocol.
        unsafe {
            RingBytes::new(
                NonNull::new_unchecked(self.mem.base().as_ptr().add(DATA_OFFSET)),
                self.capacity as usize,
            )
        }
    }

    /// The byte ring.
    #[cfg(loom)]
    #[inline(always)]
    pub(crate) fn data(&self) -> &RingBytes {
        &self.data
    }

    /// Marks the ring poisoned.
    pub(crate) fn poison(&self) {
        // SYNC: Release pairs with the Acquire loads of `flags` in the producers' claim and the
        // consumer's poll: whoever sees the flag stops using the ring.
        self.control()
            .shared
            .flags
            .fetch_or(control::FLAG_POISONED, Ordering::Release);
    }

    fn stats(&self) -> OsrStats {
        let c = self.control();
        // SYNC: plain counters, read Relaxed: a snapshot for reporting, ordering nothing.
        let r = |a: &sluice_sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        OsrStats {
            skipped_records: r(&c.consumer.skipped_records),
            skipped_spans: r(&c.consumer.skipped_spans),
            corrupt_records: r(&c.consumer.corrupt_records),
            lost_commits: r(&c.producers.lost_commits),
            late_claims: r(&c.producers.late_claims),
            producers: r(&c.producers.producers),
            holes: r(&c.shared.hole_mask).count_ones(),
        }
    }
}

/// A handle on one OSR ring: where producers and the consumer come from.
pub struct OsrRing<M: RingMemory> {
    shared: Arc<Shared<M>>,
}

impl<M: RingMemory> Clone for OsrRing<M> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<M: RingMemory> OsrRing<M> {
    /// Lays a new, empty ring out in `mem`, which nobody else may be using yet.
    pub fn create(mem: M, layout: OsrLayout) -> Result<Self, OsrError> {
        let shared = Shared::new(mem, layout)?;
        #[cfg(not(loom))]
        // SAFETY: `Shared::new` checked the block holds `bytes_needed` bytes; we own it and the
        // caller promises nobody else uses it yet, so a plain write of zeros (fresh memory is
        // zero already; this makes reused memory fresh) races with nothing.
        unsafe {
            std::ptr::write_bytes(shared.mem.base().as_ptr(), 0, layout.bytes_needed())
        };
        let s = &shared.control().shared;
        // SYNC: Relaxed stores published by the Release store of `magic` below.
        s.version.store(LAYOUT_VERSION, Ordering::Relaxed);
        s.capacity
            .store(layout.capacity_bytes as u64, Ordering::Relaxed);
        s.window.store(layout.window, Ordering::Relaxed);
        // SYNC: Release pairs with the Acquire load of `magic` in `open`: a process that sees
        // the magic sees the geometry and the zeroed ring.
        s.magic.store(MAGIC, Ordering::Release);
        Ok(Self {
            shared: Arc::new(shared),
        })
    }

    /// Opens a ring another handle (usually another process) created in the same bytes.
    /// Everything read is checked: a block without the magic, of another version, or whose
    /// geometry does not fit its length is refused.
    #[cfg(not(loom))]
    pub fn open(mem: M) -> Result<Self, OsrError> {
        if mem.len() < CONTROL_BYTES || mem.base().as_ptr() as usize & (CACHE_LINE - 1) != 0 {
            return Err(OsrError::MemoryTooSmall {
                needed: CONTROL_BYTES,
                len: mem.len(),
            });
        }
        // SAFETY: the block holds at least `CONTROL_BYTES` bytes aligned to 64 (checked), and
        // `Control` is atomics valid for any bit pattern; the reference lives only in this
        // function while `mem` is alive.
        let control = unsafe { mem.base().cast::<Control>().as_ref() };
        // SYNC: Acquire pairs with the Release store of `magic` in `create`.
        if control.shared.magic.load(Ordering::Acquire) != MAGIC {
            return Err(OsrError::NotInitialized);
        }
        // SYNC: ordered after the magic by its Acquire.
        let version = control.shared.version.load(Ordering::Relaxed);
        if version != LAYOUT_VERSION {
            return Err(OsrError::VersionMismatch { found: version });
        }
        let capacity = control.shared.capacity.load(Ordering::Relaxed);
        let window = control.shared.window.load(Ordering::Relaxed);
        let layout = OsrLayout {
            capacity_bytes: usize::try_from(capacity).unwrap_or(0),
            window,
        };
        Ok(Self {
            shared: Arc::new(Shared::new(mem, layout)?),
        })
    }

    /// The ring's geometry.
    pub fn layout(&self) -> OsrLayout {
        OsrLayout {
            capacity_bytes: self.shared.capacity as usize,
            window: self.shared.window,
        }
    }

    /// A new producer handle (any number, in any process), not in the producer table.
    pub fn producer(&self) -> OsrProducer<M> {
        OsrProducer::attach(self.shared.clone())
    }

    /// A new producer handle that takes the next slot of the producer table, recording this
    /// process's id there; [`OsrProducer::id`] is the slot. When the handle drops, its slot is
    /// marked as left (see the module doc, "The producer table").
    pub fn join(&self) -> Result<OsrProducer<M>, OsrError> {
        OsrProducer::join(self.shared.clone())
    }

    /// The ring's one consumer.
    pub fn consumer(&self) -> Result<OsrConsumer<M>, OsrError> {
        OsrConsumer::attach(self.shared.clone())
    }

    /// The ring's counters.
    pub fn stats(&self) -> OsrStats {
        self.shared.stats()
    }
}

/// A heap-backed ring for threads of one process: one producer (clone it for more) and the
/// consumer.
pub fn channel(
    layout: OsrLayout,
) -> Result<(OsrProducer<HeapMemory>, OsrConsumer<HeapMemory>), OsrError> {
    layout.check()?;
    let ring = OsrRing::create(HeapMemory::zeroed(layout.bytes_needed()), layout)?;
    let consumer = ring.consumer()?;
    Ok((ring.producer(), consumer))
}
