//! The receiving end of a Vega ring: borrows published slots in place and releases them.
//!
//! Hot path of a `get`: a compare against the published position known so far; only when that
//! says empty, one Acquire load of the next slot's mark word (in the line the tuple's first
//! bytes are in, so polling it brings them along), a bounds check of the size in it, a slice
//! of the slot. `release` is one Release store of `tail` however many slots it frees, then the
//! producer's doorbell rung (a fence and a load of a line that stays cached while the producer
//! is awake).

use std::ptr::NonNull;
use std::time::Duration;

use sluice_sync::atomic::Ordering;
use sluice_sync::sync::Arc;
use sluice_sync::Wakeup;

use crate::memory::RingMemory;
#[cfg(all(target_arch = "x86_64", not(miri), not(loom)))]
use crate::memory::CACHE_LINE;

use super::error::{PoisonReason, VegaRecvError, VegaRole};
use super::layout::{
    is_published, mark_len, published_mark, VegaHeader, ROLE_GONE, SLOT_PAYLOAD_OFFSET, TAG_STEP,
};
use super::{Shared, BELL_SHARING};

/// The most bytes of an awaited slot [`VegaConsumer::prefetch_next_slot`] asks for: a few lines
/// cover a small tuple; a large one streams in behind its first lines anyway.
#[cfg(all(target_arch = "x86_64", not(miri), not(loom)))]
const PREFETCH_BYTES: usize = 4 * CACHE_LINE;

/// The receiving end of a Vega ring (the paper's *receiver*).
pub struct VegaConsumer<M: RingMemory> {
    /// The header, inside `shared`.
    header: NonNull<VegaHeader>,
    /// Slot 0, inside `shared`'s memory.
    slots_base: NonNull<u8>,
    stride: usize,
    slot_bytes: usize,
    slots: u64,
    /// Next position to get; `released..read` are got and not yet released.
    read: u64,
    /// `read mod slots`.
    read_slot: usize,
    /// The last value stored to the shared `tail`.
    released: u64,
    /// The published position known so far: from the marks of the slots from `read` on, or
    /// from the producer's `head`.
    cached_head: u64,
    shared: Arc<Shared<M>>,
}

// SAFETY: the raw pointers point into `shared`, which this value keeps alive; `M: RingMemory`
// is `Send + Sync`, and the consumer's private fields are plain integers. Moving the consumer
// to another thread moves the only handle that reads slots and writes `tail`.
unsafe impl<M: RingMemory> Send for VegaConsumer<M> {}

impl<M: RingMemory> VegaConsumer<M> {
    /// Builds the consumer after its role was taken in the header.
    pub(super) fn attach(shared: Arc<Shared<M>>) -> Self {
        let layout = shared.layout();
        // SYNC: none needed: only the consumer stores `tail`, and we are the consumer.
        let tail = shared.header().consumer.tail.load(Ordering::Relaxed);
        let slots = layout.slots() as u64;
        Self {
            header: shared.header_ptr(),
            slots_base: shared.slots_base(),
            stride: layout.slot_stride(),
            slot_bytes: layout.slot_bytes(),
            slots,
            read: tail,
            read_slot: (tail % slots) as usize,
            released: tail,
            // Empty until the first scan.
            cached_head: tail,
            shared,
        }
    }

    #[inline(always)]
    fn header(&self) -> &VegaHeader {
        // SAFETY: points into `self.shared` (its memory, or its loom box), alive as long as
        // `self`; see `Shared::header` for why the bytes are a valid `VegaHeader`.
        unsafe { self.header.as_ref() }
    }

    /// The process id of the attached producer, if one has attached (for a liveness check).
    pub fn producer_pid(&self) -> Option<u32> {
        self.shared.pid(super::VegaRole::Producer)
    }

    /// The largest tuple a slot holds.
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// The number of slots.
    pub fn slots(&self) -> usize {
        self.slots as usize
    }

    /// How many published tuples wait to be got, as far as the producer's `head` says: for
    /// reporting, never poisoning the ring. A publish stores its mark before `head`, so a
    /// consumer that read by the mark can be ahead of `head` for a moment; that reads as 0.
    pub fn backlog(&self) -> usize {
        // SYNC: Relaxed: a figure for reporting; nothing is read through it.
        let head = self.header().producer.head.load(Ordering::Relaxed);
        let backlog = head.wrapping_sub(self.read);
        if backlog > self.slots {
            0
        } else {
            backlog as usize
        }
    }

    /// How many slots were got and not yet released.
    pub fn unreleased(&self) -> usize {
        self.read.wrapping_sub(self.released) as usize
    }

    /// Whether the producer has dropped its end. Tuples it published may still be waiting:
    /// `get` returns [`VegaRecvError::Closed`] once they are all received.
    pub fn is_closed(&self) -> bool {
        // SYNC: pairs with the Release store of `producer_state` in `VegaProducer::drop`.
        self.header().flags.producer_state.load(Ordering::Acquire) == ROLE_GONE
    }

    /// Marks the ring unusable for both ends.
    pub fn poison(&self) {
        self.shared.poison(PoisonReason::Requested);
    }

    /// Whether, and why, the ring is poisoned.
    pub fn poisoned(&self) -> Option<PoisonReason> {
        self.shared.poisoned()
    }

    #[inline(always)]
    fn cached(&self) -> u64 {
        self.cached_head.wrapping_sub(self.read)
    }

    /// How many tuples from `read` on the producer's `head` says are published (for
    /// `available`); poisons the ring if `head` is impossible.
    fn published_by_head(&self) -> Result<u64, VegaRecvError> {
        // SYNC: pairs with the Release store of `head` in `VegaProducer::publish`.
        let head = self.header().producer.head.load(Ordering::Acquire);
        let ahead = head.wrapping_sub(self.released);
        // The producer can only publish into released slots and never unpublishes:
        // read <= head <= released + slots.
        if ahead > self.slots || ahead < self.read.wrapping_sub(self.released) {
            return Err(VegaRecvError::Poisoned(
                self.shared.poison(PoisonReason::BadIndex),
            ));
        }
        Ok(head.wrapping_sub(self.read))
    }

    /// Learns from the slots' marks how far the producer has published, looking until `want`
    /// tuples are known (and never past `released + slots`), and checks each size on the way:
    /// every slot in `read..cached_head` has a size within `slot_bytes`.
    #[inline]
    fn scan(&mut self, want: u64) -> Result<(), VegaRecvError> {
        let room = self.slots - self.cached_head.wrapping_sub(self.released);
        let mut want = want.saturating_sub(self.cached()).min(room) as usize;
        let mut slot = self.read_slot + self.cached() as usize;
        if slot as u64 >= self.slots {
            slot -= self.slots as usize;
        }
        // A published mark of the expected position, XORed with that position's tag, leaves
        // just the size: one compare tells "published, and a size within the slot" from
        // anything else, which the cold path sorts out.
        let mut tag = published_mark(self.cached_head, 0);
        let limit = self.slot_bytes as u64;
        while want > 0 {
            let run = want.min(self.slots as usize - slot);
            for _ in 0..run {
                // SYNC: pairs with the Release store of the mark in `VegaProducer::publish` (or
                // `stage_claimed`): the slot's payload, and the rest of its batch, written
                // before that store happen before our reads of them.
                let mark = self.shared.mark(slot).load(Ordering::Acquire);
                if mark ^ tag > limit {
                    return self.scan_stopped(mark);
                }
                self.cached_head = self.cached_head.wrapping_add(1);
                tag = tag.wrapping_add(TAG_STEP);
                slot += 1;
            }
            want -= run;
            slot = 0;
        }
        Ok(())
    }

    /// Asks the cache for the lines of the next slot after the one its mark is in, while the
    /// ring is empty: when the producer writes the slot, the polling loop then misses on them
    /// together with the mark's line instead of one after the other. A hint only: nothing is
    /// read through it, and the real reads come after the mark's Acquire load.
    #[inline(always)]
    fn prefetch_next_slot(&self) {
        #[cfg(all(target_arch = "x86_64", not(miri), not(loom)))]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let slot = self.slot_ptr(self.read_slot);
            let first_line = (slot as usize) / CACHE_LINE * CACHE_LINE;
            let end = slot as usize + self.stride.min(PREFETCH_BYTES);
            let mut line = first_line + CACHE_LINE;
            while line < end {
                // SAFETY: a prefetch never faults and changes no memory; the address is inside
                // the slot (`line < slot + stride`), in the mapped ring.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(line as *const i8) };
                line += CACHE_LINE;
            }
        }
    }

    /// Where `scan` stopped, at the slot of `cached_head` with `mark`: not published yet, or a
    /// size beyond the slot, which poisons the ring.
    #[cold]
    fn scan_stopped(&self, mark: u64) -> Result<(), VegaRecvError> {
        if is_published(mark, self.cached_head) {
            return Err(VegaRecvError::Poisoned(
                self.shared.poison(PoisonReason::BadLength),
            ));
        }
        Ok(())
    }

    /// Called when the ring looks empty after a scan: `Ok(false)` if it is empty and open,
    /// `Ok(true)` if tuples arrived after all, `Err(Closed)` if the producer is gone and
    /// everything is received, `Err(Poisoned)` if the ring is poisoned.
    #[cold]
    #[inline(never)]
    fn check_gone(&mut self) -> Result<bool, VegaRecvError> {
        if self.is_closed() {
            // The producer published everything before its Release store of the role word
            // (acquired in `is_closed`), so this scan sees every mark it published.
            self.scan(self.slots)?;
            if self.cached() == 0 {
                return Err(VegaRecvError::Closed);
            }
            return Ok(true);
        }
        match self.shared.poisoned() {
            Some(reason) => Err(VegaRecvError::Poisoned(reason)),
            None => Ok(false),
        }
    }

    /// How many published tuples are waiting to be got (the paper's `available`); rereads
    /// the producer's position. A corrupt position poisons the ring and reads as 0 (the next
    /// `get` reports it).
    pub fn available(&mut self) -> usize {
        match self.published_by_head() {
            Ok(published) => published.max(self.cached()) as usize,
            Err(_) => 0,
        }
    }

    /// The first byte of slot `slot`.
    #[inline(always)]
    fn slot_ptr(&self, slot: usize) -> *const u8 {
        debug_assert!((slot as u64) < self.slots);
        // SAFETY: `slot < slots` (a `read mod slots` value), so the slot's `stride` bytes lie
        // within `slots * stride` bytes after `slots_base`, inside the memory (checked against
        // `bytes_needed` when the ring was created or opened).
        unsafe { self.slots_base.as_ptr().add(slot * self.stride) }
    }

    /// The size of the tuple in published slot `slot` (`read <= p < cached_head`), checked
    /// against `slot_bytes` again: a peer breaking the protocol could have rewritten it since
    /// `scan`.
    #[inline(always)]
    fn slot_len(&self, slot: usize) -> Result<usize, VegaRecvError> {
        self.shared.track_read(slot);
        // SYNC: we loaded this mark with Acquire in `scan`; nobody stores it again until we
        // release the slot.
        let len = mark_len(self.shared.mark(slot).load(Ordering::Relaxed));
        if len > self.slot_bytes as u64 {
            return Err(VegaRecvError::Poisoned(
                self.shared.poison(PoisonReason::BadLength),
            ));
        }
        Ok(len as usize)
    }

    #[inline(always)]
    fn advance_read(&mut self, n: usize) {
        self.read = self.read.wrapping_add(n as u64);
        self.read_slot += n;
        if self.read_slot as u64 >= self.slots {
            self.read_slot -= self.slots as usize;
        }
    }

    /// Makes sure at least one tuple is cached; `Ok(false)` if the ring is empty and open.
    #[inline(always)]
    fn ensure_one(&mut self) -> Result<bool, VegaRecvError> {
        if self.cached() != 0 {
            return Ok(true);
        }
        self.scan(1)?;
        if self.cached() != 0 {
            return Ok(true);
        }
        self.prefetch_next_slot();
        self.check_gone()
    }

    /// Borrows the next published tuple in place (the paper's `get`): `Ok(None)` if none is
    /// waiting, [`VegaRecvError::Closed`] once the producer is gone and everything was
    /// received. The slot stays reserved until [`VegaConsumer::release`]; the borrow ends
    /// before `release` can be called.
    #[inline]
    pub fn get(&mut self) -> Result<Option<&[u8]>, VegaRecvError> {
        if !self.ensure_one()? {
            return Ok(None);
        }
        let slot = self.read_slot;
        let len = self.slot_len(slot)?;
        self.advance_read(1);
        // SAFETY: the slot is published and unreleased (see `slot_len`); `len <= slot_bytes`
        // keeps the slice inside the slot's payload. The producer does not write it until
        // `tail` passes it, which only `release(&mut self)` does, and the returned slice
        // borrows `self`, so it is gone by then.
        Ok(Some(unsafe {
            std::slice::from_raw_parts(self.slot_ptr(slot).add(SLOT_PAYLOAD_OFFSET), len)
        }))
    }

    /// Borrows up to `max` published tuples in place, in order; an empty batch if none is
    /// waiting, [`VegaRecvError::Closed`] once the producer is gone and everything was
    /// received. Every slot in the batch counts as got (whether or not the batch is iterated
    /// to its end) and stays reserved until [`VegaConsumer::release`], which frees the whole
    /// batch with one store.
    #[inline]
    pub fn get_batch(&mut self, max: usize) -> Result<VegaBatch<'_, M>, VegaRecvError> {
        if self.cached() < max as u64 {
            self.scan(max as u64)?;
            if self.cached() == 0 {
                self.prefetch_next_slot();
            }
            if self.cached() == 0 && !self.check_gone()? {
                return Ok(self.batch(self.read_slot, 0));
            }
        }
        // Every size in `read..cached_head` was checked by `scan`.
        let n = self.cached().min(max as u64) as usize;
        #[cfg(loom)]
        for i in 0..n {
            self.shared
                .track_read((self.read_slot + i) % self.slots as usize);
        }
        let first = self.read_slot;
        self.advance_read(n);
        Ok(self.batch(first, n))
    }

    /// A batch of the `n` slots from slot `first` on.
    fn batch(&self, first: usize, n: usize) -> VegaBatch<'_, M> {
        VegaBatch {
            shared: &self.shared,
            slot_bytes: self.slot_bytes,
            slots: self.slots as usize,
            next_slot: first,
            remaining: n,
        }
    }

    /// Frees every slot got so far with one store (the paper's `release_buffer`); the
    /// producer may then reuse them.
    #[inline]
    pub fn release(&mut self) {
        if self.released == self.read {
            return;
        }
        #[cfg(loom)]
        {
            // The reads of these slots end here: record them for loom's causality check.
            let unreleased = self.read.wrapping_sub(self.released) as usize;
            let mut slot =
                (self.read_slot + self.slots as usize - unreleased) % self.slots as usize;
            for _ in 0..unreleased {
                self.shared.track_read(slot);
                slot = (slot + 1) % self.slots as usize;
            }
        }
        // SYNC: pairs with the Acquire load of `tail` in `VegaProducer::refresh_tail`: our
        // reads of the released slots happen before the producer overwrites them; and,
        // through the doorbell's fences, with the load in `VegaProducer::park`.
        self.header()
            .consumer
            .tail
            .store(self.read, Ordering::Release);
        self.released = self.read;
        self.header().producer_bell.bell.ring(BELL_SHARING);
    }

    /// Releases what was got, then sleeps until the producer publishes, leaves or the ring is
    /// poisoned, or `timeout` passes (or spuriously earlier): what an idle consumer does
    /// instead of spinning.
    pub fn park(&mut self, timeout: Duration) -> Wakeup {
        self.release();
        let (shared, read) = (&self.shared, self.read);
        let next = shared.mark(self.read_slot);
        self.header()
            .consumer_bell
            .bell
            .wait(BELL_SHARING, timeout, || {
                // SYNC: pairs with the Release store of the mark in `VegaProducer::publish` (or
                // `VegaClaim::commit`), which rings this doorbell after it.
                is_published(next.load(Ordering::Acquire), read)
                    || shared.poisoned_or_gone(VegaRole::Producer)
            })
    }
}

impl<M: RingMemory> Drop for VegaConsumer<M> {
    fn drop(&mut self) {
        // SYNC: pairs with the Acquire load of `consumer_state` in `VegaProducer::is_closed`.
        self.header()
            .flags
            .consumer_state
            .store(ROLE_GONE, Ordering::Release);
        self.header().producer_bell.bell.ring(BELL_SHARING);
    }
}

/// Tuples borrowed in place by [`VegaConsumer::get_batch`]: an iterator of slices, oldest
/// first, valid until the consumer is used again.
pub struct VegaBatch<'a, M: RingMemory> {
    shared: &'a Shared<M>,
    slot_bytes: usize,
    slots: usize,
    next_slot: usize,
    remaining: usize,
}

impl<'a, M: RingMemory> Iterator for VegaBatch<'a, M> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.remaining == 0 {
            return None;
        }
        let slot = self.next_slot;
        debug_assert!(slot < self.slots);
        self.remaining -= 1;
        self.next_slot += 1;
        if self.next_slot == self.slots {
            self.next_slot = 0;
        }
        // SYNC: as in `VegaConsumer::slot_len`: published, unreleased, acquired in `scan`. The
        // size was checked there; it is clamped again here so that even a peer breaking the
        // protocol cannot stretch the slice past the slot.
        let len = (mark_len(self.shared.mark(slot).load(Ordering::Relaxed)) as usize)
            .min(self.slot_bytes);
        let payload = self.shared.slot_ptr(slot).as_ptr();
        // SAFETY: `slot < slots`, so the slot lies inside the memory (`Shared::slot_ptr`) and
        // `len <= slot_bytes` keeps the slice inside its payload; it is published and
        // unreleased, and the batch borrows the consumer, so `release` cannot run while these
        // slices live and the producer does not write the slot.
        Some(unsafe { std::slice::from_raw_parts(payload.add(SLOT_PAYLOAD_OFFSET), len) })
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<M: RingMemory> ExactSizeIterator for VegaBatch<'_, M> {}
