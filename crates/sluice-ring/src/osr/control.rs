//! The OSR ring's control block: the `#[repr(C)]` lines of atomics at offset 0 of the memory.
//!
//! In normal builds [`Control`] is a reference into the ring's memory (so another process that
//! maps the same bytes sees the same atomics); under `cfg(loom)` it is a separate heap
//! allocation, because `loom`'s atomics cannot be laid over raw bytes. The offsets below are
//! only meaningful in normal builds, where they are checked at compile time.

use sluice_sync::atomic::AtomicU64;

/// The producers' reservation line: the shared write position every producer CASes.
pub const RESERVE_LINE_OFFSET: usize = 0;
/// The read-mostly line: identity, geometry, flags and the hole mask.
pub const SHARED_LINE_OFFSET: usize = 64;
/// The consumer's line: its released read position and its counters.
pub const CONSUMER_LINE_OFFSET: usize = 128;
/// The producers' bookkeeping line: how many producer handles exist, lost commits, joins.
pub const PRODUCERS_LINE_OFFSET: usize = 192;
/// The hole table: the slots of regions quarantined after a skip.
pub const HOLES_LINE_OFFSET: usize = 256;
/// The producer table: one slot per joined producer (its pid, whether it left), 128 lines.
pub const PRODUCER_TABLE_OFFSET: usize = 320;
/// Where the byte ring starts: after the producer table.
pub const DATA_OFFSET: usize = PRODUCER_TABLE_OFFSET + PRODUCER_SLOTS * 8;
/// The size of the control block.
pub const CONTROL_BYTES: usize = DATA_OFFSET;

/// How many holes (quarantined regions) the ring can carry at once.
pub const HOLE_SLOTS: usize = 8;

/// How many producers can join the ring's producer table ([`super::OsrRing::join`]): as many
/// as a `tcp` receiver takes senders, so that a fan-in any application allows fits one ring. A
/// slot costs 8 bytes of the control block, touched only when its producer joins and leaves
/// and when the consumer checks it; the reservation protocol does not depend on the count.
pub const PRODUCER_SLOTS: usize = 1024;

/// `"SLOSR\0\0\x01"` read as a little-endian `u64`: marks a ring that [`super::OsrRing::create`]
/// finished initialising.
pub const MAGIC: u64 = u64::from_le_bytes(*b"SLOSR\0\0\x01");
/// The layout version; bumped whenever a byte in this file or in a record changes meaning.
pub const LAYOUT_VERSION: u64 = 3;

/// `flags`: the consumer handle has been taken.
pub const FLAG_CONSUMER_ATTACHED: u64 = 1 << 0;
/// `flags`: the consumer is gone; producers get `Closed`.
pub const FLAG_CONSUMER_GONE: u64 = 1 << 1;
/// `flags`: some producer handle was attached once (so zero producers means "closed").
pub const FLAG_PRODUCERS_SEEN: u64 = 1 << 2;
/// `flags`: the ring found corrupt bytes or ran out of hole slots; nobody may use it.
pub const FLAG_POISONED: u64 = 1 << 3;

/// A producer slot's bit: a producer joined and its pid is in the low 32 bits.
pub(crate) const SLOT_JOINED: u64 = 1 << 32;
/// A producer slot's bit: that producer's handle is gone (dropped), after all its commits.
pub(crate) const SLOT_LEFT: u64 = 1 << 33;

/// Line 0: written by every producer's reservation CAS.
#[repr(C, align(64))]
pub(crate) struct ReserveLine {
    /// The byte position (growing forever, never wrapped) where the next reservation starts.
    pub(crate) write_pos: AtomicU64,
}

/// Line 1: written at creation and on rare events, read by every reservation.
#[repr(C, align(64))]
pub(crate) struct SharedLine {
    /// [`MAGIC`] once initialised.
    pub(crate) magic: AtomicU64,
    /// [`LAYOUT_VERSION`].
    pub(crate) version: AtomicU64,
    /// The byte ring's size (a power of two).
    pub(crate) capacity: AtomicU64,
    /// The consumer's window, in polls.
    pub(crate) window: AtomicU64,
    /// `FLAG_*` bits.
    pub(crate) flags: AtomicU64,
    /// Bit `i` set: hole slot `i` is in use.
    pub(crate) hole_mask: AtomicU64,
    /// The consumer's process id once one attached (0 before).
    pub(crate) consumer_pid: AtomicU64,
}

/// Line 2: written by the consumer.
#[repr(C, align(64))]
pub(crate) struct ConsumerLine {
    /// Every byte before this position is consumed, zeroed and free for producers.
    pub(crate) read_pos: AtomicU64,
    /// Records the consumer skipped after they stayed `Writing` for the window.
    pub(crate) skipped_records: AtomicU64,
    /// Spans the consumer skipped because a reservation never got a header.
    pub(crate) skipped_spans: AtomicU64,
    /// Records dropped because their bytes did not parse (bad batch framing).
    pub(crate) corrupt_records: AtomicU64,
}

/// Line 3: written when producer handles come and go (and join), and when one learns it was
/// skipped.
#[repr(C, align(64))]
pub(crate) struct ProducersLine {
    /// Live producer handles (all processes).
    pub(crate) producers: AtomicU64,
    /// Commits (or aborts) that found their record skipped by the consumer.
    pub(crate) lost_commits: AtomicU64,
    /// Claims that found their reservation skipped before they wrote anything (then retried).
    pub(crate) late_claims: AtomicU64,
    /// Producer-table slots handed out so far (may count past [`PRODUCER_SLOTS`]: those joins
    /// failed).
    pub(crate) joined: AtomicU64,
}

/// Line 4: the hole slots, written only by the consumer.
#[repr(C, align(64))]
pub(crate) struct HolesLine {
    /// `start offset | length << 32` in bytes; 0 is an empty slot.
    pub(crate) slots: [AtomicU64; HOLE_SLOTS],
}

/// Lines 5 to 132: the producer table, each slot written by its producer when it joins and
/// when it leaves.
#[repr(C, align(64))]
pub(crate) struct ProducerTable {
    /// `pid | SLOT_JOINED`, plus `SLOT_LEFT` once the producer is gone; 0 is an unused slot.
    pub(crate) slots: [AtomicU64; PRODUCER_SLOTS],
}

/// The whole control block.
#[repr(C)]
pub(crate) struct Control {
    pub(crate) reserve: ReserveLine,
    pub(crate) shared: SharedLine,
    pub(crate) consumer: ConsumerLine,
    pub(crate) producers: ProducersLine,
    pub(crate) holes: HolesLine,
    pub(crate) producer_table: ProducerTable,
}

#[cfg(not(loom))]
mod layout_checks {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    const _: () = assert!(size_of::<AtomicU64>() == 8 && align_of::<AtomicU64>() == 8);
    const _: () = assert!(offset_of!(Control, reserve) == RESERVE_LINE_OFFSET);
    const _: () = assert!(offset_of!(Control, shared) == SHARED_LINE_OFFSET);
    const _: () = assert!(offset_of!(Control, consumer) == CONSUMER_LINE_OFFSET);
    const _: () = assert!(offset_of!(Control, producers) == PRODUCERS_LINE_OFFSET);
    const _: () = assert!(offset_of!(Control, holes) == HOLES_LINE_OFFSET);
    const _: () = assert!(offset_of!(Control, producer_table) == PRODUCER_TABLE_OFFSET);
    const _: () = assert!(size_of::<ProducerTable>() == PRODUCER_SLOTS * 8);
    // The offset the module doc's layout table shows.
    const _: () = assert!(DATA_OFFSET == 8512);
    const _: () = assert!(size_of::<SharedLine>() == crate::memory::CACHE_LINE);
    const _: () = assert!(size_of::<ProducersLine>() == crate::memory::CACHE_LINE);
    const _: () = assert!(size_of::<Control>() == CONTROL_BYTES);
    const _: () = assert!(align_of::<Control>() == crate::memory::CACHE_LINE);
    const _: () = assert!(CONTROL_BYTES & (crate::memory::CACHE_LINE - 1) == 0);
    const _: () = assert!(size_of::<HolesLine>() == crate::memory::CACHE_LINE);
    const _: () = assert!(offset_of!(SharedLine, hole_mask) == 40);
}

impl Control {
    /// A fresh control block for the loom model (zero, like fresh memory).
    #[cfg(loom)]
    pub(crate) fn new_for_model() -> Self {
        let z = || AtomicU64::new(0);
        Self {
            reserve: ReserveLine { write_pos: z() },
            shared: SharedLine {
                magic: z(),
                version: z(),
                capacity: z(),
                window: z(),
                flags: z(),
                hole_mask: z(),
                consumer_pid: z(),
            },
            consumer: ConsumerLine {
                read_pos: z(),
                skipped_records: z(),
                skipped_spans: z(),
                corrupt_records: z(),
            },
            producers: ProducersLine {
                producers: z(),
                lost_commits: z(),
                late_claims: z(),
                joined: z(),
            },
            holes: HolesLine {
                slots: std::array::from_fn(|_| z()),
            },
            producer_table: ProducerTable {
                slots: std::array::from_fn(|_| z()),
            },
        }
    }
}

/// A hole slot's value: `start` and `len` in bytes, ring offsets.
pub(crate) fn encode_hole(start: u64, len: u64) -> u64 {
    debug_assert!(start < 1 << 32 && (1..1 << 32).contains(&len));
    start | (len << 32)
}

/// `(start, len)` of a hole slot's value; `len == 0` means empty.
pub(crate) fn decode_hole(value: u64) -> (u64, u64) {
    (value & 0xFFFF_FFFF, value >> 32)
}
