//! The receiving end of a Vega ring: borrows published slots in place and releases them.
//!
//! Hot path of a `get`: a compare against the cached `head` (one Acquire load of the shared
//! `head` only when the cache says empty), a bounds check of the slot's length word, a slice of
//! the slot. `release` is one Release store of `tail` however many slots it frees, then the
//! producer's doorbell rung (a fence and a load of a line that stays cached while the producer
//! is awake).

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::time::Duration;

use sluice_sync::atomic::Ordering;
use sluice_sync::sync::Arc;
use sluice_sync::Wakeup;

use crate::memory::RingMemory;

use super::error::{PoisonReason, VegaRecvError, VegaRole};
use super::layout::{VegaHeader, ROLE_GONE, SLOT_LEN_OFFSET, SLOT_PAYLOAD_OFFSET};
use super::{Shared, BELL_SHARING};

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
    /// The producer's `head` as last read.
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
            // Empty until the first refresh, which validates the shared `head`.
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

    /// Rereads the producer's `head`; poisons the ring if it is impossible.
    #[inline]
    fn refresh(&mut self) -> Result<(), VegaRecvError> {
        // SYNC: pairs with the Release store of `head` in `VegaProducer::publish`: the slot
        // writes before that store happen before our reads of those slots.
        let head = self.header().producer.head.load(Ordering::Acquire);
        let ahead = head.wrapping_sub(self.released);
        // The producer can only publish into released slots and never unpublishes:
        // read <= head <= released + slots.
        if ahead > self.slots || ahead < self.read.wrapping_sub(self.released) {
            return Err(VegaRecvError::Poisoned(
                self.shared.poison(PoisonReason::BadIndex),
            ));
        }
        self.cached_head = head;
        Ok(())
    }

    /// Called when the ring looks empty after a refresh: `Ok(false)` if it is empty and open,
    /// `Ok(true)` if tuples arrived after all, `Err(Closed)` if the producer is gone and
    /// everything is received, `Err(Poisoned)` if the ring is poisoned.
    #[cold]
    #[inline(never)]
    fn check_gone(&mut self) -> Result<bool, VegaRecvError> {
        if self.is_closed() {
            // The producer published everything before its Release store of the role word
            // (acquired in `is_closed`), so this reread sees its final `head`.
            self.refresh()?;
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
        match self.refresh() {
            Ok(()) => self.cached() as usize,
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

    /// The length word of published slot `slot`, checked against `slot_bytes`.
    #[inline(always)]
    fn slot_len(&self, slot: usize) -> Result<usize, VegaRecvError> {
        self.shared.track_read(slot);
        // SAFETY: the slot holds a published position (`read <= p < cached_head`, whose
        // writes we acquired in `refresh`) that we have not released, so the producer does
        // not write it; the length word is an aligned u64 inside the slot.
        let len = unsafe {
            self.slot_ptr(slot)
                .add(SLOT_LEN_OFFSET)
                .cast::<u64>()
                .read()
        };
        if len > self.slot_bytes as u64 {
            return Err(VegaRecvError::Poisoned(
                self.shared.poison(PoisonReason::BadLength),
            ));
        }
        Ok(len as usize)
    }

    /// The largest length word among the `count` published slots from `first` on (no wrap:
    /// `first + count <= slots`).
    #[inline(always)]
    fn longest_len(&self, first: usize, count: usize) -> u64 {
        debug_assert!(first + count <= self.slots as usize);
        let mut longest = 0;
        for slot in first..first + count {
            self.shared.track_read(slot);
            // SAFETY: as in `slot_len`: a published, unreleased slot; an aligned u64 in it.
            let len = unsafe {
                self.slot_ptr(slot)
                    .add(SLOT_LEN_OFFSET)
                    .cast::<u64>()
                    .read()
            };
            longest = longest.max(len);
        }
        longest
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
        self.refresh()?;
        if self.cached() != 0 {
            return Ok(true);
        }
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
    pub fn get_batch(&mut self, max: usize) -> Result<VegaBatch<'_>, VegaRecvError> {
        if self.cached() < max as u64 {
            self.refresh()?;
            if self.cached() == 0 && !self.check_gone()? {
                return Ok(self.unbound_batch(0));
            }
        }
        let n = self.cached().min(max as u64) as usize;
        // Check every length word before handing out any slice: the batch is at most two
        // contiguous runs of slots (before and after the wrap); one branch for all of them.
        let first_run = n.min(self.slots as usize - self.read_slot);
        let longest = self
            .longest_len(self.read_slot, first_run)
            .max(self.longest_len(0, n - first_run));
        if longest > self.slot_bytes as u64 {
            return Err(VegaRecvError::Poisoned(
                self.shared.poison(PoisonReason::BadLength),
            ));
        }
        let batch = self.unbound_batch(n);
        self.advance_read(n);
        Ok(batch)
    }

    /// A batch of the `n` slots from `read`, with a lifetime bound to nothing: the public
    /// caller (`get_batch`) returns it as `VegaBatch<'_>`, tying it to `&mut self`.
    fn unbound_batch(&self, n: usize) -> VegaBatch<'static> {
        VegaBatch {
            slots_base: self.slots_base,
            stride: self.stride,
            slot_bytes: self.slot_bytes,
            slots: self.slots as usize,
            next_slot: self.read_slot,
            remaining: n,
            _borrow: PhantomData,
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
        let (header, shared, read) = (self.header(), &self.shared, self.read);
        header.consumer_bell.bell.wait(BELL_SHARING, timeout, || {
            // SYNC: pairs with the Release store of `head` in `VegaProducer::publish`, which
            // rings this doorbell after it.
            header.producer.head.load(Ordering::Acquire) != read
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
pub struct VegaBatch<'a> {
    slots_base: NonNull<u8>,
    stride: usize,
    slot_bytes: usize,
    slots: usize,
    next_slot: usize,
    remaining: usize,
    _borrow: PhantomData<&'a [u8]>,
}

impl<'a> Iterator for VegaBatch<'a> {
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
        // SAFETY: `slot < slots`, so the slot lies inside the memory (as in
        // `VegaConsumer::slot_ptr`); it is published and unreleased, and the batch borrows the
        // consumer, so `release` cannot run while these slices live. The length word was
        // checked in `get_batch`; it is clamped again here so that even a peer breaking the
        // protocol cannot stretch the slice past the slot.
        unsafe {
            let ptr = self.slots_base.as_ptr().add(slot * self.stride);
            let len = (ptr.add(SLOT_LEN_OFFSET).cast::<u64>().read() as usize).min(self.slot_bytes);
            Some(std::slice::from_raw_parts(
                ptr.add(SLOT_PAYLOAD_OFFSET),
                len,
            ))
        }
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for VegaBatch<'_> {}
