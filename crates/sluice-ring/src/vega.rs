//! The Vega ring: a single-producer single-consumer circular queue of fixed-size byte slots,
//! allocated up front, laid out entirely inside a [`RingMemory`] so two processes can share it
//! (the Vega paper's shared-memory transport, section IV).
//!
//! Why hand-written: this is the process-to-process hop of the engine; its cost is the number
//! of cache lines that cross between the two cores per tuple, and only a layout we control
//! byte by byte keeps that at the minimum.
//!
//! # API (the paper's five calls, plus batches and zero copy)
//! | paper | here |
//! |---|---|
//! | `ready_to_send(sender)` | [`VegaProducer::ready_to_send`] |
//! | `put(sender, data, size)` | [`VegaProducer::put`] (copy, publish), or [`VegaProducer::claim`] then [`VegaClaim::commit`] (write in place, publish) |
//! | `available(receiver)` | [`VegaConsumer::available`] |
//! | `get(receiver, chunk, size)` | [`VegaConsumer::get`]: borrows the slot in place, no copy |
//! | `release_buffer(receiver, slot_id)` | [`VegaConsumer::release`]: frees every slot got so far |
//!
//! Batches: [`VegaProducer::write`] / [`VegaClaim::stage`] fill slots without publishing and
//! [`VegaProducer::publish`] publishes them all with one store ([`VegaProducer::put_batch`]
//! does both); [`VegaConsumer::get_batch`] borrows up to `max` published slots at once and
//! one [`VegaConsumer::release`] frees them with one store. A tuple longer than `slot_bytes`
//! is refused with [`VegaSendError::TooLarge`], whatever the ring's state.
//!
//! # Protocol: the paper's begin marker, as a tagged size word; one index per side
//! The paper writes a begin marker, the size, the payload and an end marker into each slot,
//! and the receiver polls the slot for the begin marker, then for the end marker, because an
//! RDMA write lands progressively and only the end marker says the whole slot is there. Over
//! coherent shared memory one Release store orders the whole slot, so this ring keeps the
//! begin marker and drops the end marker:
//! - Each slot starts with a *mark* word: the tuple's size in the low 32 bits and, in the high
//!   32 bits, a tag of the position it holds (`p + 1`, mod 2^32). The producer stores it with
//!   Release after the payload; the consumer polls the mark of the next slot with Acquire and
//!   takes the slot when the tag is that of the position it expects. A tag from the previous
//!   lap (`p + 1 - slots`, and `0 < slots < 2^32`) or a never-written zero cannot match.
//! - Batches stay invisible until published, and appear whole: the first slot of a batch gets
//!   a *staged* mark (its tag inverted) and the later ones their published marks right away;
//!   the consumer's scan stops at the first slot not published, and `publish` flips that one
//!   mark last, so one store publishes the batch (Release orders every earlier slot with it).
//!   A tuple committed alone gets its published mark at once: one store.
//! - `head` (producer's line) is still stored once per publish, after the marks, for the slow
//!   paths (`available`); the consumer's hot path never reads it.
//! - `tail` (consumer's line): slots of positions `< tail` are free. The consumer stores it
//!   once per batch, with Release, after reading the slots (this is `release`). The producer
//!   keeps a private copy and rereads the shared one only when its copy says full.
//!
//! Why the mark and not only `head` (this ring's protocol until layout version 2): a receiver
//! polling `head` learns of a tuple from one line and then fetches the slot's lines, one after
//! the other; polling the mark brings the tuple's first bytes with the news, and while the ring
//! is empty the consumer also prefetches the rest of the awaited slot, so the lines cross
//! together. Measured between two processes on the project's 2-vCPU EPYC
//! (`sluice bench latency --transport shm-vega --size 64 --rate 100000`), p50 fell from about
//! 176 ns to 130 ns where a cache line crosses in 35-40 ns, and from about 430 ns to 320 ns
//! where it crosses in 220-250 ns. The price is a load per slot in the consumer's scan where
//! one load of `head` did: 32-byte throughput fell about 10 % (115-133 to 98-115 M tuples/s
//! on the near placement). Against the paper's two markers, a slot needs no end marker, so a
//! 32-byte tuple still takes 40 bytes, not 56, and the consumer never waits for a slot's
//! second half; `loom` checks the protocol with the marks as atomics.
//!
//! Safety of the protocol: position `p` lives in slot `p mod slots`. The producer writes slot
//! `p` only when `p - tail < slots` (so the consumer released it, and the Acquire load of
//! `tail` orders the consumer's reads before the overwrite); the consumer reads slot `p` only
//! after an Acquire load of its mark showed `p`'s published tag (ordering the producer's writes
//! of the slot, and of every slot of its batch, before the read) and until it stores a `tail`
//! above `p`. Both ends touch a mark only as an atomic. [`VegaConsumer::get`] ties the borrowed
//! slice to `&mut self`, so `release` cannot run while a slice is alive.
//!
//! # Layout
//! ```text
//!  offset  line        field (all u64, native endian)         written by
//!  ------  ----------  --------------------------------------  ---------------------------
//!       0  layout      magic = "SLCVEGA1"                      create (Release, last)
//!       8              version = 1                             create
//!      16              slot_bytes                              create
//!      24              slots                                   create
//!      64  producer    head  (published position, slow paths)  producer (Release)
//!     128  consumer    tail  (released position)               consumer (Release)
//!     192  flags       producer_state  0 vacant/1 live/2 gone  producer (attach, drop)
//!     200              consumer_state  0 vacant/1 live/2 gone  consumer (attach, drop)
//!     208              poison          0 ok / PoisonReason     anyone (first reason wins)
//!     216              producer_pid                            producer (attach)
//!     224              consumer_pid                            consumer (attach)
//!     256  cons. bell  consumer_bell: u32 (a sluice_sync       consumer (parks), producer
//!                      Doorbell: sleeping bit, epoch)          (rings, wakes)
//!     320  prod. bell  producer_bell: u32 (a Doorbell)         producer (parks), consumer
//!                                                              (rings, wakes)
//!     384  slots       slot 0, slot 1, ... slot (slots-1), each slot_stride bytes:
//!
//!          slot i at 384 + i * slot_stride, slot_stride = round_up(8 + slot_bytes, 8)
//!          +0  mark: u64       tag (high 32 bits) | the tuple's size, <= slot_bytes
//!                              (checked on every read); written by the producer (Release),
//!                              polled by the consumer (Acquire)
//!          +8  payload         len bytes, 8-aligned, read in place by get / get_batch
//! ```
//! Every offset is a named constant in [`layout`] and checked against the header struct at
//! compile time. `head` and `tail` are on lines of their own; on x86 the adjacent-line
//! prefetcher pairs lines 0+1 and 2+3, so each index shares its 128-byte pair only with a
//! read-mostly line. The memory holds no pointers: another process maps it elsewhere.
//!
//! # Untrusted memory
//! A ring opened from a shared segment ([`VegaRing::open`]) treats every word in it as
//! untrusted: the layout fields are validated against the segment's length, slot indices come
//! from private counters (`position mod slots`, never from memory), a `head` or `tail` that
//! breaks `tail <= head <= tail + slots` poisons the ring ([`PoisonReason::BadIndex`]), and a
//! published mark whose size is above `slot_bytes` poisons it ([`PoisonReason::BadLength`]).
//! A mark with a wrong tag only reads as "not yet", and the consumer's scan never counts more
//! than `slots` slots past `tail`. Nothing the other side writes can make this side read or
//! write out of bounds.
//!
//! # Parking
//! An end with nothing to do may sleep in the kernel instead of polling:
//! [`VegaConsumer::park`] until something is published, [`VegaProducer::park`] until a slot is
//! freed, both bounded by a timeout. Each end has a [`sluice_sync::Doorbell`] on a line of its
//! own (a shared futex, so it works across processes); the producer rings the consumer's
//! after every publish and the consumer rings the producer's after every release, and each
//! end rings the other's when it leaves, as does a poison. A ring costs a fence and a load of
//! a line that stays in the ringer's cache while nobody parks; the doorbell's module doc
//! argues why no wake-up is lost, and the loom models check it over this ring. The doorbell
//! words are untrusted like the rest: a peer that scribbles on them can only cause spurious or
//! missed wake-ups, and a missed one costs the sleeper its timeout.
//!
//! # Close and poison
//! Each end sets its role word to *gone* when dropped (the producer publishes its staged slots
//! first). The consumer tells "empty" (`Ok(None)`) from "producer gone and drained"
//! ([`VegaRecvError::Closed`]); the producer gets [`VegaSendError::Closed`] once the consumer
//! is gone. `poison` marks the ring unusable for both sides (for a liveness check that finds a
//! peer's pid dead).
//!
//! # How `loom` and Miri check it
//! `std`'s atomics can be viewed in place over raw shared bytes; `loom`'s cannot (they are
//! bigger and carry model state). So the header is the `#[repr(C)]` struct `VegaHeader` of
//! `sluice_sync::atomic` types: in normal builds a reference into the memory at offset 0,
//! under `cfg(loom)` a separate heap object (the header bytes in the memory stay unused, and
//! [`VegaRing::open`], which reads an existing header from memory, does not exist). Slot bytes
//! are raw memory in both builds; the slots' mark words are atomics in the memory in normal
//! builds and a separate array of `loom` atomics under `loom`. Under `loom` each slot also has a
//! `loom` cell that the producer marks written when it claims the slot and the consumer marks
//! read when it gets and when it releases the slot, so `loom` checks that the marks and indices
//! order every slot access (not only themselves). Miri runs the heap-backed ring
//! ([`crate::memory::HeapMemory`]) and checks the payload accesses themselves for races and
//! bounds.

mod consumer;
mod error;
pub mod layout;
mod producer;

use std::ptr::NonNull;

use sluice_sync::atomic::Ordering;
use sluice_sync::sync::Arc;

use crate::memory::{HeapMemory, RingMemory, CACHE_LINE};

pub use consumer::{VegaBatch, VegaConsumer};
pub use error::{
    PoisonReason, VegaLayoutError, VegaOpenError, VegaRecvError, VegaRole, VegaSendError,
};
pub use layout::VegaLayout;
pub use producer::{VegaClaim, VegaProducer};

use layout::{VegaHeader, ROLE_ATTACHED, ROLE_GONE, ROLE_VACANT, SLOTS_OFFSET};

/// The ring's doorbells are shared futexes: its memory may be a segment other processes map.
/// (A shared futex on private memory works too, keyed by the address space.)
pub(crate) const BELL_SHARING: sluice_sync::Sharing = sluice_sync::Sharing::Shared;

/// The magic word while `create` is writing the layout line (never seen by a successful
/// `open`).
const MAGIC_INITIALISING: u64 = u64::from_le_bytes(*b"SLCVEGA~");

/// `loom` cells standing for the slots' bytes, so `loom` tracks slot accesses.
#[cfg(loom)]
struct SlotAccess(Box<[sluice_sync::cell::UnsafeCell<()>]>);

// SAFETY: the cells hold `()`; they exist only so `loom` records which thread accessed which
// slot when, and `loom` itself reports any access it finds unordered. No data is shared
// through them.
#[cfg(loom)]
unsafe impl Sync for SlotAccess {}
// SAFETY: as above.
#[cfg(loom)]
unsafe impl Send for SlotAccess {}

/// What both ends of one ring in one process share: the memory, its validated layout and,
/// under `loom`, the header and slot cells.
pub(crate) struct Shared<M: RingMemory> {
    memory: M,
    layout: VegaLayout,
    /// `layout.slot_stride()`, worked out once: the hot paths index slots with it.
    stride: usize,
    #[cfg(loom)]
    header: Box<VegaHeader>,
    #[cfg(loom)]
    slot_access: SlotAccess,
    /// Under `loom`, the slots' mark words (in normal builds they are in the memory).
    #[cfg(loom)]
    marks: Box<[sluice_sync::atomic::AtomicU64]>,
}

impl<M: RingMemory> Shared<M> {
    /// Wraps `memory`, which must be aligned and hold `layout.bytes_needed()` bytes (checked
    /// by the callers, [`check_memory`]).
    fn new(memory: M, layout: VegaLayout) -> Self {
        debug_assert!(memory.len() >= layout.bytes_needed());
        Self {
            memory,
            layout,
            stride: layout.slot_stride(),
            #[cfg(loom)]
            header: Box::new(VegaHeader::zeroed()),
            #[cfg(loom)]
            slot_access: SlotAccess(
                (0..layout.slots())
                    .map(|_| sluice_sync::cell::UnsafeCell::new(()))
                    .collect(),
            ),
            #[cfg(loom)]
            marks: (0..layout.slots())
                .map(|_| sluice_sync::atomic::AtomicU64::new(0))
                .collect(),
        }
    }

    /// The mark word of slot `slot` (`slot < slots`).
    #[inline(always)]
    pub(crate) fn mark(&self, slot: usize) -> &sluice_sync::atomic::AtomicU64 {
        debug_assert!(slot < self.layout.slots());
        #[cfg(not(loom))]
        {
            // SAFETY: the word at `SLOT_MARK_OFFSET` lies inside the slot (see `slot_ptr`),
            // alive as long as `self`. Slots start on multiples of 8, so the word is aligned
            // for `AtomicU64`, for which every bit pattern is valid; both ends (in any
            // process) access the mark only through this atomic, never as plain bytes.
            unsafe {
                self.slot_ptr(slot)
                    .add(layout::SLOT_MARK_OFFSET)
                    .cast::<sluice_sync::atomic::AtomicU64>()
                    .as_ref()
            }
        }
        #[cfg(loom)]
        {
            &self.marks[slot]
        }
    }

    /// Where the header lives.
    pub(crate) fn header_ptr(&self) -> NonNull<VegaHeader> {
        #[cfg(not(loom))]
        {
            self.memory.base().cast()
        }
        #[cfg(loom)]
        {
            NonNull::from(&*self.header)
        }
    }

    pub(crate) fn header(&self) -> &VegaHeader {
        // SAFETY: in normal builds the pointer is the memory's base, which `RingMemory`
        // guarantees is valid, 64-aligned and alive as long as `self.memory`; the memory holds
        // at least `HEADER_BYTES` (checked before `Shared` was built), `VegaHeader` is made of
        // `AtomicU64`s for which every bit pattern is valid, and every access to those bytes,
        // in this process or another, goes through these atomics. Under loom it points to our
        // own box.
        unsafe { self.header_ptr().as_ref() }
    }

    /// The first byte of slot 0.
    pub(crate) fn slots_base(&self) -> NonNull<u8> {
        // SAFETY: `SLOTS_OFFSET < layout.bytes_needed() <= memory.len()`, so the result stays
        // inside the memory block.
        unsafe { self.memory.base().add(SLOTS_OFFSET) }
    }

    /// The first byte of slot `slot` (`slot < slots`).
    #[inline(always)]
    pub(crate) fn slot_ptr(&self, slot: usize) -> NonNull<u8> {
        debug_assert!(slot < self.layout.slots());
        // SAFETY: `slot < slots`, so the slot's `stride` bytes lie within `slots * stride`
        // bytes after the slot area's start, inside the memory (checked against
        // `bytes_needed` before `Shared` was built).
        unsafe { self.slots_base().add(slot * self.stride) }
    }

    pub(crate) fn layout(&self) -> VegaLayout {
        self.layout
    }

    /// Records (under `loom`) that the producer is about to write `slot`.
    #[inline(always)]
    pub(crate) fn track_write(&self, slot: usize) {
        #[cfg(loom)]
        self.slot_access.0[slot].with_mut(|_| ());
        #[cfg(not(loom))]
        let _ = slot;
    }

    /// Records (under `loom`) that the consumer reads `slot`.
    #[inline(always)]
    pub(crate) fn track_read(&self, slot: usize) {
        #[cfg(loom)]
        self.slot_access.0[slot].with(|_| ());
        #[cfg(not(loom))]
        let _ = slot;
    }

    /// Marks the ring poisoned with `reason` unless it already is, and wakes a parked end;
    /// returns the reason that stands.
    pub(crate) fn poison(&self, reason: PoisonReason) -> PoisonReason {
        let header = self.header();
        // SYNC: AcqRel pairs with the Acquire loads of `poison` in `poisoned` on both sides
        // (and with itself in a competing poison): the first reason wins.
        let stands = match header.flags.poison.compare_exchange(
            0,
            reason.code(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => reason,
            Err(code) => PoisonReason::from_code(code).unwrap_or(reason),
        };
        header.consumer_bell.bell.ring(BELL_SHARING);
        header.producer_bell.bell.ring(BELL_SHARING);
        stands
    }

    /// Whether the ring is poisoned or the end in `role` has left: what a parked end of the
    /// other role wakes up for besides progress.
    pub(crate) fn poisoned_or_gone(&self, role: VegaRole) -> bool {
        let flags = &self.header().flags;
        let state = match role {
            VegaRole::Producer => &flags.producer_state,
            VegaRole::Consumer => &flags.consumer_state,
        };
        // SYNC: pairs with the Release stores of the role words in the ends' `drop` and the
        // compare-exchange in `poison`, each followed by a ring of the other end's doorbell.
        state.load(Ordering::Acquire) == ROLE_GONE || flags.poison.load(Ordering::Acquire) != 0
    }

    /// Whether, and why, the ring is poisoned.
    #[inline]
    pub(crate) fn poisoned(&self) -> Option<PoisonReason> {
        // SYNC: pairs with the compare-exchange in `poison`.
        PoisonReason::from_code(self.header().flags.poison.load(Ordering::Acquire))
    }

    fn pid(&self, role: VegaRole) -> Option<u32> {
        let flags = &self.header().flags;
        let word = match role {
            VegaRole::Producer => &flags.producer_pid,
            VegaRole::Consumer => &flags.consumer_pid,
        };
        // SYNC: pairs with the Release store of the pid in `VegaRing::attach`.
        match word.load(Ordering::Acquire) {
            0 => None,
            pid => u32::try_from(pid).ok(),
        }
    }
}

/// Refuses memory that is misaligned or shorter than `needed`.
fn check_memory<M: RingMemory>(memory: &M, needed: usize) -> Result<(), VegaOpenError> {
    if !(memory.base().as_ptr() as usize).is_multiple_of(CACHE_LINE) {
        return Err(VegaOpenError::Misaligned);
    }
    if memory.len() < needed {
        return Err(VegaOpenError::MemoryTooSmall {
            needed,
            len: memory.len(),
        });
    }
    Ok(())
}

/// A Vega ring in a block of memory: where its two ends are attached from.
///
/// In one process, [`VegaRing::create`] then [`VegaRing::producer`] and
/// [`VegaRing::consumer`] (or just [`channel`]). Across processes, one creates the ring in a
/// fresh shared segment and attaches one end; the other maps the segment, calls
/// [`VegaRing::open`] and attaches the other end. Each role can be taken once, ever.
pub struct VegaRing<M: RingMemory> {
    shared: Arc<Shared<M>>,
}

impl<M: RingMemory> VegaRing<M> {
    /// Lays out a new ring of `layout` in `memory`, which must be fresh (zeroed, as
    /// [`RingMemory`] promises for a new block) and hold [`VegaLayout::bytes_needed`] bytes.
    pub fn create(memory: M, layout: VegaLayout) -> Result<Self, VegaOpenError> {
        check_memory(&memory, layout.bytes_needed())?;
        let shared = Shared::new(memory, layout);
        let header = shared.header();
        // SYNC: the compare-exchange claims the layout line against a competing `create` (it
        // is its own partner); Acquire on failure pairs with the Release store below in the
        // creator that won.
        if header
            .layout
            .magic
            .compare_exchange(0, MAGIC_INITIALISING, Ordering::Acquire, Ordering::Acquire)
            .is_err()
        {
            return Err(VegaOpenError::AlreadyInitialised);
        }
        // SYNC: these Relaxed stores are published by the Release store of `magic` below,
        // which `open`'s Acquire load of `magic` pairs with.
        let l = &header.layout;
        l.version.store(layout::VEGA_VERSION, Ordering::Relaxed);
        l.slot_bytes
            .store(layout.slot_bytes() as u64, Ordering::Relaxed);
        l.slots.store(layout.slots() as u64, Ordering::Relaxed);
        header.producer.head.store(0, Ordering::Relaxed);
        header.consumer.tail.store(0, Ordering::Relaxed);
        let f = &header.flags;
        for word in [
            &f.producer_state,
            &f.consumer_state,
            &f.poison,
            &f.producer_pid,
            &f.consumer_pid,
        ] {
            word.store(0, Ordering::Relaxed);
        }
        // SYNC: pairs with the Acquire load of `magic` in `open`: everything above happens
        // before a successful open reads it.
        l.magic.store(layout::VEGA_MAGIC, Ordering::Release);
        Ok(Self {
            shared: Arc::new(shared),
        })
    }

    /// Opens the ring another process created in `memory`, validating the header: the magic
    /// word and version, and that `slot_bytes` and `slots` form a valid layout that fits in
    /// the memory. (Not under `loom`, where the header lives outside the memory.)
    #[cfg(not(loom))]
    pub fn open(memory: M) -> Result<Self, VegaOpenError> {
        check_memory(&memory, layout::HEADER_BYTES)?;
        // SAFETY: as in `Shared::header`: aligned, at least `HEADER_BYTES` long (checked just
        // above), every bit pattern is a valid `AtomicU64`, and the bytes are only accessed
        // through these atomics.
        let header = unsafe { memory.base().cast::<VegaHeader>().as_ref() };
        // SYNC: pairs with the Release store of `magic` at the end of `create`.
        match header.layout.magic.load(Ordering::Acquire) {
            layout::VEGA_MAGIC => {}
            0 | MAGIC_INITIALISING => return Err(VegaOpenError::NotInitialised),
            found => return Err(VegaOpenError::BadMagic { found }),
        }
        // SYNC: ordered after the Acquire load of `magic` above (written before its Release).
        let version = header.layout.version.load(Ordering::Relaxed);
        if version != layout::VEGA_VERSION {
            return Err(VegaOpenError::Version {
                found: version,
                expected: layout::VEGA_VERSION,
            });
        }
        // Untrusted: saturate to usize and let `VegaLayout::new` and the length check refuse.
        let read = |w: &sluice_sync::atomic::AtomicU64| {
            // SYNC: as for `version`.
            usize::try_from(w.load(Ordering::Relaxed)).unwrap_or(usize::MAX)
        };
        let layout = VegaLayout::new(read(&header.layout.slot_bytes), read(&header.layout.slots))?;
        check_memory(&memory, layout.bytes_needed())?;
        Ok(Self {
            shared: Arc::new(Shared::new(memory, layout)),
        })
    }

    /// The ring's sizes.
    pub fn layout(&self) -> VegaLayout {
        self.shared.layout()
    }

    /// Takes the producer role (once per ring, in any process).
    pub fn producer(&self) -> Result<VegaProducer<M>, VegaOpenError> {
        self.attach(VegaRole::Producer)?;
        Ok(VegaProducer::attach(self.shared.clone()))
    }

    /// Takes the consumer role (once per ring, in any process).
    pub fn consumer(&self) -> Result<VegaConsumer<M>, VegaOpenError> {
        self.attach(VegaRole::Consumer)?;
        Ok(VegaConsumer::attach(self.shared.clone()))
    }

    fn attach(&self, role: VegaRole) -> Result<(), VegaOpenError> {
        let flags = &self.shared.header().flags;
        let (state, pid) = match role {
            VegaRole::Producer => (&flags.producer_state, &flags.producer_pid),
            VegaRole::Consumer => (&flags.consumer_state, &flags.consumer_pid),
        };
        // SYNC: the compare-exchange is its own partner: of two attaches, in this process or
        // another, exactly one wins. AcqRel also orders it with the other role's state loads.
        state
            .compare_exchange(
                ROLE_VACANT,
                ROLE_ATTACHED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .map_err(|_| VegaOpenError::RoleTaken(role))?;
        // SYNC: pairs with the Acquire load in `Shared::pid`.
        pid.store(u64::from(std::process::id()), Ordering::Release);
        Ok(())
    }

    /// Marks the ring unusable for both ends (e.g. a liveness check found a peer dead).
    pub fn poison(&self) {
        self.shared.poison(PoisonReason::Requested);
    }

    /// Whether, and why, the ring is poisoned.
    pub fn poisoned(&self) -> Option<PoisonReason> {
        self.shared.poisoned()
    }

    /// The process id of the attached producer, if one has attached.
    pub fn producer_pid(&self) -> Option<u32> {
        self.shared.pid(VegaRole::Producer)
    }

    /// The process id of the attached consumer, if one has attached.
    pub fn consumer_pid(&self) -> Option<u32> {
        self.shared.pid(VegaRole::Consumer)
    }

    /// Whether the producer attached and has since dropped its end.
    pub fn producer_gone(&self) -> bool {
        // SYNC: pairs with the Release store in `VegaProducer::drop`.
        self.shared
            .header()
            .flags
            .producer_state
            .load(Ordering::Acquire)
            == ROLE_GONE
    }

    /// Whether the consumer attached and has since dropped its end.
    pub fn consumer_gone(&self) -> bool {
        // SYNC: pairs with the Release store in `VegaConsumer::drop`.
        self.shared
            .header()
            .flags
            .consumer_state
            .load(Ordering::Acquire)
            == ROLE_GONE
    }
}

/// A heap-backed ring of `layout` with both ends attached: a Vega ring between two threads of
/// one process (and the variant Miri checks).
pub fn channel(
    layout: VegaLayout,
) -> Result<(VegaProducer<HeapMemory>, VegaConsumer<HeapMemory>), VegaOpenError> {
    let ring = VegaRing::create(HeapMemory::zeroed(layout.bytes_needed()), layout)?;
    Ok((ring.producer()?, ring.consumer()?))
}

#[cfg(all(test, not(loom)))]
mod tests;
