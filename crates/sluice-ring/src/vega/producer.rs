//! The sending end of a Vega ring: claims, writes and publishes slots.
//!
//! Hot path of a `put`: two loads of the read-mostly flags line (closed, poisoned), a compare
//! against the cached `tail`, the payload copied into the slot, one Release store of the
//! slot's mark word (tag and size), one Release store of `head`, then the consumer's doorbell
//! rung (a fence and a load of a line that stays cached while the consumer is awake). A batch
//! stores each slot's mark at publish (lines the producer just wrote), and `head` and the
//! ring once.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::time::Duration;

use sluice_sync::atomic::Ordering;
use sluice_sync::sync::Arc;
use sluice_sync::Wakeup;

use crate::memory::RingMemory;

use super::error::{PoisonReason, VegaRole, VegaSendError};
use super::layout::{
    mark_len, published_mark, staged_mark, VegaHeader, ROLE_GONE, SLOT_PAYLOAD_OFFSET,
};
use super::{Shared, BELL_SHARING};

/// The sending end of a Vega ring (the paper's *sender*).
pub struct VegaProducer<M: RingMemory> {
    /// The header, inside `shared` (cached to skip two dependent loads per call).
    header: NonNull<VegaHeader>,
    /// Slot 0, inside `shared`'s memory.
    slots_base: NonNull<u8>,
    stride: usize,
    slot_bytes: usize,
    slots: u64,
    /// Next position to write; `published..head` are staged (written, not yet visible).
    head: u64,
    /// `head mod slots`, kept alongside so no division is needed.
    head_slot: usize,
    /// The last value stored to the shared `head`.
    published: u64,
    /// The consumer's `tail` as last read.
    cached_tail: u64,
    shared: Arc<Shared<M>>,
}

// SAFETY: the raw pointers point into `shared`, which this value keeps alive; `M: RingMemory`
// is `Send + Sync`, and the producer's private fields are plain integers. Moving the producer
// to another thread moves the only handle that writes slots and `head`.
unsafe impl<M: RingMemory> Send for VegaProducer<M> {}

impl<M: RingMemory> VegaProducer<M> {
    /// Builds the producer after its role was taken in the header.
    pub(super) fn attach(shared: Arc<Shared<M>>) -> Self {
        let layout = shared.layout();
        let header = shared.header();
        // SYNC: none needed: only the producer stores `head`, and we are the producer.
        let head = header.producer.head.load(Ordering::Relaxed);
        // SYNC: pairs with the Release store of `tail` in `VegaConsumer::release`.
        let tail = header.consumer.tail.load(Ordering::Acquire);
        let slots = layout.slots() as u64;
        if head.wrapping_sub(tail) > slots {
            // Untrusted memory; every call will report the poison.
            shared.poison(PoisonReason::BadIndex);
        }
        Self {
            header: shared.header_ptr(),
            slots_base: shared.slots_base(),
            stride: layout.slot_stride(),
            slot_bytes: layout.slot_bytes(),
            slots,
            head,
            head_slot: (head % slots) as usize,
            published: head,
            cached_tail: tail,
            shared,
        }
    }

    #[inline(always)]
    fn header(&self) -> &VegaHeader {
        // SAFETY: points into `self.shared` (its memory, or its loom box), alive as long as
        // `self`; see `Shared::header` for why the bytes are a valid `VegaHeader`.
        unsafe { self.header.as_ref() }
    }

    /// The largest tuple a slot holds.
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// The number of slots.
    pub fn slots(&self) -> usize {
        self.slots as usize
    }

    /// How many tuples are staged (written but not yet published).
    pub fn staged(&self) -> usize {
        self.head.wrapping_sub(self.published) as usize
    }

    /// Whether the consumer has dropped its end.
    #[inline]
    pub fn is_closed(&self) -> bool {
        // SYNC: pairs with the Release store of `consumer_state` in `VegaConsumer::drop`.
        self.header().flags.consumer_state.load(Ordering::Acquire) == ROLE_GONE
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
    fn check_open(&self) -> Result<(), VegaSendError> {
        if self.is_closed() {
            return Err(VegaSendError::Closed);
        }
        match self.shared.poisoned() {
            None => Ok(()),
            Some(reason) => Err(VegaSendError::Poisoned(reason)),
        }
    }

    /// Rereads the consumer's `tail`; poisons the ring if it is impossible.
    #[cold]
    #[inline(never)]
    fn refresh_tail(&mut self) -> Result<(), VegaSendError> {
        // SYNC: pairs with the Release store of `tail` in `VegaConsumer::release`: the
        // consumer's reads of every slot before `tail` happen before we overwrite them.
        let tail = self.header().consumer.tail.load(Ordering::Acquire);
        let used = self.head.wrapping_sub(tail);
        // The consumer can only release published positions: published - slots <= tail
        // <= published (so staged <= used <= slots).
        if used > self.slots || used < self.head.wrapping_sub(self.published) {
            return Err(VegaSendError::Poisoned(
                self.shared.poison(PoisonReason::BadIndex),
            ));
        }
        self.cached_tail = tail;
        Ok(())
    }

    #[inline(always)]
    fn has_room(&mut self) -> Result<bool, VegaSendError> {
        if self.head.wrapping_sub(self.cached_tail) < self.slots {
            return Ok(true);
        }
        self.refresh_tail()?;
        Ok(self.head.wrapping_sub(self.cached_tail) < self.slots)
    }

    /// How many slots can be written now without refusal (rereads the consumer's position
    /// when the cached one shows any slot in use); 0 on a closed or poisoned ring.
    pub fn free(&mut self) -> usize {
        if self.check_open().is_err() {
            return 0;
        }
        if self.head.wrapping_sub(self.cached_tail) > 0 && self.refresh_tail().is_err() {
            return 0;
        }
        (self.slots - self.head.wrapping_sub(self.cached_tail)) as usize
    }

    /// Whether a slot is free now (the paper's `ready_to_send`); rereads the consumer's
    /// position only when the cached one says full. False on a poisoned ring.
    #[inline]
    pub fn ready_to_send(&mut self) -> bool {
        self.has_room().unwrap_or(false)
    }

    /// Reserves the next slot for a tuple of `len` bytes, to be written in place through the
    /// returned [`VegaClaim`] (which derefs to `len` bytes of the slot; their content is
    /// whatever the slot held before). Nothing is visible to the consumer until the claim is
    /// staged or committed; dropping the claim abandons it.
    ///
    /// Errors, in this order: [`VegaSendError::TooLarge`] if `len > slot_bytes`, `Closed`,
    /// `Poisoned`, `Full`.
    #[inline]
    pub fn claim(&mut self, len: usize) -> Result<VegaClaim<'_, M>, VegaSendError> {
        if len > self.slot_bytes {
            return Err(VegaSendError::TooLarge {
                tuple: len,
                slot: self.slot_bytes,
            });
        }
        self.check_open()?;
        if !self.has_room()? {
            return Err(VegaSendError::Full);
        }
        self.shared.track_write(self.head_slot);
        Ok(VegaClaim {
            producer: self,
            len,
        })
    }

    /// The first byte of slot `slot`.
    #[inline(always)]
    fn slot_ptr(&self, slot: usize) -> *mut u8 {
        debug_assert!((slot as u64) < self.slots);
        // SAFETY: `slot < slots` (it is `head mod slots`), so the slot's `stride` bytes lie
        // within `slots * stride` bytes after `slots_base`, inside the memory (checked against
        // `bytes_needed` when the ring was created or opened).
        unsafe { self.slots_base.as_ptr().add(slot * self.stride) }
    }

    /// Stages the claimed slot: writes its mark and advances `head` privately. The first slot
    /// of a batch gets a staged mark, which keeps the consumer's scan (it stops at the first
    /// slot not published) off the whole batch until `publish` flips it; the later slots get
    /// their published marks now, so a batch costs one extra store, not one per slot.
    ///
    /// `now` says the slot is published right after, alone (nothing staged before it): then
    /// its mark goes out published at once.
    #[inline(always)]
    fn stage_claimed(&mut self, len: usize, now: bool) {
        let mark = if self.head == self.published && !now {
            staged_mark(self.head, len)
        } else {
            published_mark(self.head, len)
        };
        // SYNC: Release orders the payload written through the claim before the mark; it
        // pairs with the Acquire load of the mark in `VegaConsumer::scan` (through the
        // batch's first mark, which `publish` stores last).
        self.shared
            .mark(self.head_slot)
            .store(mark, Ordering::Release);
        self.head = self.head.wrapping_add(1);
        self.head_slot += 1;
        if self.head_slot as u64 == self.slots {
            self.head_slot = 0;
        }
    }

    /// Copies `tuple` into the next slot without publishing it: the batch form of
    /// [`VegaProducer::put`]; call [`VegaProducer::publish`] once after a batch.
    #[inline]
    pub fn write(&mut self, tuple: &[u8]) -> Result<(), VegaSendError> {
        let mut claim = self.claim(tuple.len())?;
        claim.copy_from_slice(tuple);
        claim.stage();
        Ok(())
    }

    /// Makes every staged slot visible to the consumer, all at once, and wakes the consumer if
    /// it is parked. Only the batch's first slot has a staged mark (the others were given
    /// their published marks when staged, see `stage_claimed`): one store publishes
    /// it, and with it the whole batch. Then `head`, for the slow paths.
    #[inline]
    pub fn publish(&mut self) {
        let staged = self.staged();
        if staged != 0 {
            let mut slot = self.head_slot + self.slots as usize - staged;
            if slot as u64 >= self.slots {
                slot -= self.slots as usize;
            }
            let gate = self.shared.mark(slot);
            // SYNC: the load reads our own staged store (only the producer stores marks). The
            // Release store pairs with the Acquire load in `VegaConsumer::scan`: every payload
            // and mark of the batch, written before it, happens before the consumer reads them.
            let len = mark_len(gate.load(Ordering::Relaxed)) as usize;
            gate.store(published_mark(self.published, len), Ordering::Release);
            self.publish_head();
        }
    }

    /// Stores `head` (every staged mark is published already) and rings the consumer.
    #[inline(always)]
    fn publish_head(&mut self) {
        // SYNC: pairs with the Acquire load of `head` in `VegaConsumer::published_by_head`:
        // the marks and payloads written before this store happen before the consumer reads
        // them; and, through the doorbell's fences, with the load in `VegaConsumer::park`'s
        // readiness check.
        self.header()
            .producer
            .head
            .store(self.head, Ordering::Release);
        self.published = self.head;
        self.header().consumer_bell.bell.ring(BELL_SHARING);
    }

    /// Publishes what is staged, then sleeps until the consumer frees a slot, leaves or the
    /// ring is poisoned, or `timeout` passes (or spuriously earlier): what a producer refused
    /// with `Full` does instead of spinning.
    pub fn park(&mut self, timeout: Duration) -> Wakeup {
        self.publish();
        let (header, shared, head, slots) = (self.header(), &self.shared, self.head, self.slots);
        header.producer_bell.bell.wait(BELL_SHARING, timeout, || {
            // SYNC: pairs with the Release store of `tail` in `VegaConsumer::release`, which
            // rings this doorbell after it. (An impossible `tail` reads as room: the next
            // call reports the poison.)
            let tail = header.consumer.tail.load(Ordering::Acquire);
            head.wrapping_sub(tail) < slots || shared.poisoned_or_gone(VegaRole::Consumer)
        })
    }

    /// Copies `tuple` into the next slot and publishes it (the paper's `put`).
    #[inline]
    pub fn put(&mut self, tuple: &[u8]) -> Result<(), VegaSendError> {
        let mut claim = self.claim(tuple.len())?;
        claim.copy_from_slice(tuple);
        claim.commit();
        Ok(())
    }

    /// Writes `tuples` in order until one is refused, then publishes everything written with
    /// one store. Returns how many were sent; an error only if the first tuple was refused (a
    /// later refusal shows up when the caller retries from where this stopped).
    pub fn put_batch<T: AsRef<[u8]>>(&mut self, tuples: &[T]) -> Result<usize, VegaSendError> {
        let mut sent = 0;
        let mut first_error = None;
        for tuple in tuples {
            match self.write(tuple.as_ref()) {
                Ok(()) => sent += 1,
                Err(e) => {
                    first_error = Some(e);
                    break;
                }
            }
        }
        self.publish();
        match first_error {
            Some(e) if sent == 0 => Err(e),
            _ => Ok(sent),
        }
    }
}

impl<M: RingMemory> Drop for VegaProducer<M> {
    fn drop(&mut self) {
        // Staged tuples were accepted by `write`: deliver them.
        self.publish();
        // SYNC: pairs with the Acquire load of `producer_state` in `VegaConsumer::is_closed`:
        // every publish happened before it, so a consumer that sees the flag and then rereads
        // `head` sees the final position.
        self.header()
            .flags
            .producer_state
            .store(ROLE_GONE, Ordering::Release);
        self.header().consumer_bell.bell.ring(BELL_SHARING);
    }
}

/// A slot reserved by [`VegaProducer::claim`], written in place through `Deref<Target = [u8]>`
/// (`len` bytes, 8-aligned). Finish with [`VegaClaim::commit`] (publish now, the zero-copy
/// `put`) or [`VegaClaim::stage`] (publish with the next batch); dropping it abandons the slot.
pub struct VegaClaim<'a, M: RingMemory> {
    producer: &'a mut VegaProducer<M>,
    len: usize,
}

impl<M: RingMemory> VegaClaim<'_, M> {
    /// Shrinks the tuple to `len` bytes (no effect if `len` is not smaller): claim
    /// `slot_bytes`, encode, then truncate to what the encoder wrote.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Adds the tuple to the staged batch; it becomes visible at the next publish.
    #[inline]
    pub fn stage(self) {
        self.producer.stage_claimed(self.len, false);
    }

    /// Stages the tuple and publishes (with every tuple staged before it).
    #[inline]
    pub fn commit(self) {
        let producer = self.producer;
        if producer.staged() == 0 {
            producer.stage_claimed(self.len, true);
            producer.publish_head();
        } else {
            producer.stage_claimed(self.len, false);
            producer.publish();
        }
    }
}

impl<M: RingMemory> Deref for VegaClaim<'_, M> {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        let slot = self.producer.slot_ptr(self.producer.head_slot);
        // SAFETY: `claim` checked `head - tail < slots`, so the slot at `head` is outside the
        // consumer's range `tail..head` and the consumer finished reading it (the Acquire load
        // of `tail`); only this producer writes slots, and the claim borrows it mutably, so no
        // other reference to these bytes exists. The bytes are initialised (the memory was
        // zeroed when new and has only held bytes since); `len <= slot_bytes` keeps the slice
        // inside the slot.
        unsafe { std::slice::from_raw_parts(slot.add(SLOT_PAYLOAD_OFFSET), self.len) }
    }
}

impl<M: RingMemory> DerefMut for VegaClaim<'_, M> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        let slot = self.producer.slot_ptr(self.producer.head_slot);
        // SAFETY: as in `deref`; the `&mut self` borrow makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(slot.add(SLOT_PAYLOAD_OFFSET), self.len) }
    }
}
