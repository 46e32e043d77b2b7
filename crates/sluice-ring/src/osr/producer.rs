//! The producer side of the OSR ring: reserve (CAS on `write_pos`), claim (CAS on the status
//! word), write, commit (CAS `Writing` → `Ready`). See the module doc of [`super`].

use sluice_sync::atomic::Ordering::{Acquire, Relaxed, Release};
use sluice_sync::sync::Arc;

use super::control::{
    decode_hole, FLAG_CONSUMER_GONE, FLAG_POISONED, FLAG_PRODUCERS_SEEN, HOLE_SLOTS,
    PRODUCER_SLOTS, SLOT_JOINED, SLOT_LEFT,
};
use super::word::{batch_item_extent, record_extent, Status, StatusWord, HEADER_BYTES};
use super::{CommitError, OsrError, PushError, ReserveError, Shared};
use crate::memory::RingMemory;

/// One step of placing a record at the current write position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// The record fits here.
    Record,
    /// Pad this many bytes with a `Flush` record first (end of lap, or up to a hole).
    Pad(u64),
    /// A hole of this many bytes starts here: jump over it (no status word).
    Jump(u64),
    /// Holes left by skipped producers leave no gap this record fits; the largest is this.
    TooLarge(u64),
}

/// A writing handle on an OSR ring. Clone it for another thread; open the ring's memory with
/// [`super::OsrRing::open`] for another process.
pub struct OsrProducer<M: RingMemory> {
    shared: Arc<Shared<M>>,
    /// `read_pos` as last read (Acquire): the room this producer knows of.
    cached_read: u64,
    /// Where this producer's last reservation ended: the first guess for `write_pos`, right
    /// whenever no other producer reserved in between, which spares a load of the contended
    /// line.
    next_pos: u64,
    /// The producer-table slot, for a producer that joined.
    id: Option<u32>,
    /// The batch record kept open across calls, if any.
    open: Option<OpenBatch>,
}

/// A claimed batch record being filled across calls (see the module doc, "Open batches").
#[derive(Clone, Copy, Debug)]
struct OpenBatch {
    /// The record's position.
    pos: u64,
    /// The status word it was claimed with (`Writing`, its full extent).
    header: StatusWord,
    /// Payload bytes reserved.
    capacity: usize,
    /// Payload bytes written so far.
    used: usize,
    /// Tuples written so far.
    tuples: usize,
}

impl<M: RingMemory> OsrProducer<M> {
    pub(crate) fn attach(shared: Arc<Shared<M>>) -> Self {
        let c = shared.control();
        // SYNC: Relaxed, like `Arc::clone`: the increment is made visible by the Release
        // `fetch_or` below (first producer) or happens while another handle keeps the count
        // above zero (clones); pairs with the Acquire loads in `OsrConsumer::is_closed`.
        c.producers.producers.fetch_add(1, Relaxed);
        // SYNC: Acquire/Release pairs with the Acquire load of `flags` in
        // `OsrConsumer::is_closed`, which then sees the increment above.
        if c.shared.flags.load(Acquire) & FLAG_PRODUCERS_SEEN == 0 {
            c.shared.flags.fetch_or(FLAG_PRODUCERS_SEEN, Release);
        }
        // SYNC: Acquire pairs with the Release store in `OsrConsumer::release`: the bytes
        // before it are zeroed and the hole table is current.
        let cached_read = c.consumer.read_pos.load(Acquire);
        // SYNC: Relaxed: a guess the reservation CAS checks.
        let next_pos = c.reserve.write_pos.load(Relaxed);
        Self {
            shared,
            cached_read,
            next_pos,
            id: None,
            open: None,
        }
    }

    /// Attaches and takes the next producer-table slot.
    pub(crate) fn join(shared: Arc<Shared<M>>) -> Result<Self, OsrError> {
        let c = shared.control();
        // SYNC: Relaxed: only hands out distinct slot indices; the slot's Release store below
        // publishes the entry.
        let slot = c.producers.joined.fetch_add(1, Relaxed);
        let slot = usize::try_from(slot)
            .ok()
            .filter(|&s| s < PRODUCER_SLOTS)
            .ok_or(OsrError::ProducerTableFull)?;
        let mut producer = Self::attach(shared);
        // SYNC: Release pairs with the Acquire load in `OsrConsumer::producer`.
        producer.shared.control().producer_table.slots[slot]
            .store(u64::from(std::process::id()) | SLOT_JOINED, Release);
        producer.id = Some(slot as u32);
        Ok(producer)
    }

    /// The producer-table slot of a producer made by [`super::OsrRing::join`].
    pub fn id(&self) -> Option<u32> {
        self.id
    }

    /// The consumer's process id, once a consumer attached.
    pub fn consumer_pid(&self) -> Option<u32> {
        // SYNC: Acquire pairs with the Release store in `OsrConsumer::attach`.
        match self.shared.control().shared.consumer_pid.load(Acquire) {
            0 => None,
            pid => u32::try_from(pid).ok(),
        }
    }

    /// The largest payload one record can carry.
    pub fn max_payload(&self) -> usize {
        (self.shared.max_extent - super::word::HEADER_BYTES) as usize
    }

    /// Whether the consumer is gone or the ring poisoned: nothing pushed will be read.
    pub fn is_closed(&self) -> bool {
        // SYNC: Acquire pairs with the Release `fetch_or` in `OsrConsumer::drop` / `poison`.
        self.shared.control().shared.flags.load(Acquire) & (FLAG_CONSUMER_GONE | FLAG_POISONED) != 0
    }

    /// Reserves a record of `len` payload bytes for `target`: write it through the returned
    /// reservation, then [`OsrReservation::commit`] it. Returns [`ReserveError::Full`] when the
    /// ring has no room before unread bytes: idle and retry.
    #[inline]
    pub fn try_reserve(
        &mut self,
        target: u32,
        len: usize,
    ) -> Result<OsrReservation<'_, M>, ReserveError> {
        self.reserve_record(target, len, false)
    }

    #[inline]
    fn reserve_record(
        &mut self,
        target: u32,
        len: usize,
        batch: bool,
    ) -> Result<OsrReservation<'_, M>, ReserveError> {
        let (pos, header) = self.reserve_claimed(target, len, batch)?;
        Ok(OsrReservation {
            producer: self,
            pos,
            header,
            len,
            done: false,
        })
    }

    /// Reserves and claims a record of `len` payload bytes; returns its position and header.
    #[inline]
    fn reserve_claimed(
        &mut self,
        target: u32,
        len: usize,
        batch: bool,
    ) -> Result<(u64, StatusWord), ReserveError> {
        // A second record while a batch is open would break the per-producer order the right
        // side of the window relies on (module doc, "Open batches").
        assert!(self.open.is_none(), "an OSR batch is open: commit it first");
        let max = self.max_payload();
        if len > max {
            return Err(ReserveError::TooLarge { len, max });
        }
        let header = StatusWord::writing(len, target, batch);
        let pos = self
            .claim(header.extent(), Some(header))
            .map_err(|e| with_len(e, len))?;
        Ok((pos, header))
    }

    /// Opens a batch record of `capacity` payload bytes for `target`, to fill with
    /// [`OsrProducer::append_to_batch`] across calls and publish with
    /// [`OsrProducer::commit_batch`]. Until then the consumer's left edge waits on it (the
    /// right side delivers other producers' records behind it), so commit it soon.
    ///
    /// # Panics
    /// If a batch is already open.
    pub fn try_open_batch(&mut self, target: u32, capacity: usize) -> Result<(), ReserveError> {
        let (pos, header) = self.reserve_claimed(target, capacity, true)?;
        self.open = Some(OpenBatch {
            pos,
            header,
            capacity,
            used: 0,
            tuples: 0,
        });
        Ok(())
    }

    /// The payload bytes left in the open batch, or `None` when none is open. A tuple of `n`
    /// bytes takes [`batch_item_bytes`]`(n)` of them.
    #[inline]
    pub fn batch_room(&self) -> Option<usize> {
        self.open.map(|b| b.capacity - b.used)
    }

    /// Appends `tuple` to the open batch; false (and nothing written) when no batch is open or
    /// the tuple does not fit what is left of it.
    #[inline]
    pub fn append_to_batch(&mut self, tuple: &[u8]) -> bool {
        let Some(batch) = self.open.as_mut() else {
            return false;
        };
        let item = batch_item_bytes(tuple.len());
        if item > batch.capacity - batch.used {
            return false;
        }
        let at = (batch.pos & self.shared.mask) + HEADER_BYTES + batch.used as u64;
        let data = self.shared.data();
        // The inner header: the length as a u32, then four zero bytes. The padding after the
        // tuple is already zero: the record was free space, and free space is zero.
        let mut inner = [0u8; 8];
        inner[..4].copy_from_slice(&(tuple.len() as u32).to_le_bytes());
        // SAFETY: the item lies inside the batch record we claimed (`used + item <= capacity`,
        // the payload the record was reserved for), which is ours alone until we commit it: the
        // consumer reads it only after `Ready`, and if it skips it the bytes become a hole
        // nobody touches until we acknowledge.
        unsafe {
            data.write(at, &inner);
            data.write(at + 8, tuple);
        }
        batch.used += item;
        batch.tuples += 1;
        true
    }

    /// Publishes the open batch, shrunk to the tuples appended; returns how many. An empty
    /// batch is aborted instead, and with none open this does nothing (`Ok(0)`).
    /// [`CommitError::Lost`] means the consumer skipped the record: none of its tuples will be
    /// delivered.
    pub fn commit_batch(&mut self) -> Result<usize, CommitError> {
        let Some(batch) = self.open.take() else {
            return Ok(0);
        };
        if batch.tuples == 0 {
            self.finish(
                batch.pos,
                batch.header,
                batch.header.with_status(Status::Flush),
            )?;
            return Ok(0);
        }
        let done = StatusWord::writing(batch.used, batch.header.target(), true);
        let (full, short) = (batch.header.extent(), done.extent());
        if short < full {
            let pad_off = (batch.pos & self.shared.mask) + short;
            // SYNC: Relaxed: published by the Release commit CAS in `finish`, which the
            // consumer acquires before it walks past the short record onto this word; if the
            // consumer skipped the record instead, the word lies inside the quarantined hole,
            // which it neither reads nor zeroes before our Release acknowledgement.
            self.shared
                .data()
                .word(pad_off)
                .store(StatusWord::flush((full - short) / 8).0, Relaxed);
        }
        self.finish(batch.pos, batch.header, done.with_status(Status::Ready))?;
        Ok(batch.tuples)
    }

    /// Aborts the open batch, if any: the consumer passes over it and none of its tuples is
    /// delivered.
    pub fn abort_batch(&mut self) {
        if let Some(batch) = self.open.take() {
            // Lost or poisoned makes no difference to an abort.
            let _ = self.finish(
                batch.pos,
                batch.header,
                batch.header.with_status(Status::Flush),
            );
        }
    }

    /// Reserves, writes and commits one record.
    #[inline]
    pub fn try_push(&mut self, target: u32, bytes: &[u8]) -> Result<(), PushError> {
        let mut r = self.try_reserve(target, bytes.len())?;
        r.write_at(0, bytes);
        r.commit()?;
        Ok(())
    }

    /// Writes `tuples` as one batch record for `target` (one reservation and one commit for
    /// all of them); returns how many were written. An empty batch writes nothing.
    pub fn try_push_batch<'t, I>(&mut self, target: u32, tuples: I) -> Result<usize, PushError>
    where
        I: IntoIterator<Item = &'t [u8]>,
        I::IntoIter: Clone,
    {
        let tuples = tuples.into_iter();
        let total = tuples.clone().fold(0u64, |sum, t| {
            sum.saturating_add(batch_item_extent(t.len()))
        });
        if total == 0 {
            return Ok(0);
        }
        let len = usize::try_from(total).unwrap_or(usize::MAX);
        let mut r = self.reserve_record(target, len, true)?;
        let mut at = 0usize;
        let mut n = 0;
        for t in tuples {
            let item = batch_item_extent(t.len()) as usize;
            if item > len - at {
                break; // the iterator changed its mind between the two passes
            }
            // The inner header: the length as a u32, then four zero bytes (already zero).
            r.write_at(at, &(t.len() as u32).to_le_bytes());
            r.write_at(at + 8, t);
            at += item;
            n += 1;
        }
        r.commit()?;
        Ok(n)
    }

    /// Fault injection for tests: does the reservation CAS and stops, as a producer that dies
    /// between reserving and claiming would. The consumer skips the span after its window.
    #[doc(hidden)]
    pub fn simulate_death_after_reserve(&mut self, len: usize) -> Result<(), ReserveError> {
        let max = self.max_payload();
        if len > max {
            return Err(ReserveError::TooLarge { len, max });
        }
        self.claim(record_extent(len), None)
            .map(|_| ())
            .map_err(|e| with_len(e, len))
    }

    /// Where the record of `extent` bytes goes at ring offset `off`, given the holes in
    /// `mask`, or `None` if `off` lies inside a hole (a stale guess of the write position, or
    /// corruption). Called only while some hole exists.
    #[cold]
    fn place_around_holes(&self, off: u64, extent: u64, mask: u64) -> Option<Step> {
        let c = self.shared.control();
        let cap = self.shared.capacity;
        let mut holes = [(0u64, 0u64); HOLE_SLOTS];
        let mut n = 0;
        for (i, slot) in c.holes.slots.iter().enumerate() {
            if mask & (1 << i) != 0 {
                // SYNC: Acquire pairs with the consumer's Release store of the slot; loaded
                // after the `read_pos` that grants our room, so any hole in that room is
                // visible.
                let (start, len) = decode_hole(slot.load(Acquire));
                if len != 0 {
                    holes[n] = (start, len);
                    n += 1;
                }
            }
        }
        let holes = &mut holes[..n];
        holes.sort_unstable();
        // The largest gap between holes in a lap: a record larger than that would be padded
        // and jumped round the ring for ever.
        let mut largest = 0;
        let mut gap_start = 0;
        for &(start, len) in holes.iter() {
            largest = largest.max(start.saturating_sub(gap_start));
            gap_start = gap_start.max(start + len);
        }
        largest = largest.max(cap.saturating_sub(gap_start));
        if extent > largest {
            return Some(Step::TooLarge(largest));
        }
        let mut obstacle = (off + extent > cap).then_some(cap);
        for &(start, len) in holes.iter() {
            if start == off {
                return Some(Step::Jump(len));
            }
            if start < off && off < start + len {
                return None;
            }
            if start > off && start < off + extent {
                obstacle = Some(obstacle.map_or(start, |o| o.min(start)));
            }
        }
        Some(match obstacle {
            Some(o) => Step::Pad(o - off),
            None => Step::Record,
        })
    }

    /// Reserves `extent` bytes and claims them with `header` (or, with `None`, only reserves:
    /// fault injection). Returns the record's position.
    #[inline]
    fn claim(&mut self, extent: u64, header: Option<StatusWord>) -> Result<u64, ReserveError> {
        let shared = &*self.shared;
        let c = shared.control();
        let cap = shared.capacity;
        let mut w = self.next_pos;
        loop {
            // SYNC: Acquire pairs with the Release `fetch_or` of the consumer's drop and of
            // `poison`.
            let flags = c.shared.flags.load(Acquire);
            if flags & (FLAG_POISONED | FLAG_CONSUMER_GONE) != 0 {
                return Err(if flags & FLAG_POISONED != 0 {
                    ReserveError::Poisoned
                } else {
                    ReserveError::Closed
                });
            }
            // SYNC: Acquire pairs with the consumer's Release store of `hole_mask`. Loaded after
            // (in program order) every Acquire load of `read_pos` that granted the room used
            // below, so every hole whose next image lies in that room is visible: the consumer
            // adds and removes holes before the `read_pos` store that lets anybody reach them.
            let holes = c.shared.hole_mask.load(Acquire);
            let off = w & shared.mask;
            let step = if holes == 0 {
                Some(if off + extent > cap {
                    Step::Pad(cap - off)
                } else {
                    Step::Record
                })
            } else {
                self.place_around_holes(off, extent, holes)
            };
            let end = w + match step {
                Some(Step::Record) | None => extent,
                Some(Step::Pad(n) | Step::Jump(n)) => n,
                Some(Step::TooLarge(largest)) => {
                    let max = largest.saturating_sub(super::word::HEADER_BYTES) as usize;
                    let len = (extent - super::word::HEADER_BYTES) as usize; // see `with_len`
                    return Err(ReserveError::TooLarge { len, max });
                }
            };
            if end > self.cached_read + cap {
                // SYNC: Acquire pairs with the Release store of `read_pos` in
                // `OsrConsumer::release`: the consumer zeroed the bytes before it (so our claim
                // CAS finds 0) and published the hole table.
                let fresh = c.consumer.read_pos.load(Acquire);
                self.cached_read = fresh;
                if end > fresh + cap {
                    return Err(ReserveError::Full);
                }
                continue; // re-place with a hole snapshot taken after this load
            }
            let Some(step) = step else {
                // `w` inside a hole. Our room reaches past `w`, so our hole snapshot is fresh for
                // `w`'s lap (see the SYNC note on `hole_mask`): either `w` is a stale guess, or
                // this is corruption. A CAS reads the latest `write_pos` whatever the ordering.
                // SYNC: Relaxed: only the value matters.
                match c.reserve.write_pos.compare_exchange(w, w, Relaxed, Relaxed) {
                    Err(actual) => {
                        w = actual;
                        continue;
                    }
                    Ok(_) => {
                        shared.poison();
                        return Err(ReserveError::Poisoned);
                    }
                }
            };
            // SYNC: Relaxed: this CAS alone makes reservations disjoint; the bytes' zeroing is
            // ordered by the Acquire load of `read_pos` that granted the room, and the claim
            // below carries the record's state.
            if let Err(actual) = c
                .reserve
                .write_pos
                .compare_exchange(w, end, Relaxed, Relaxed)
            {
                w = actual;
                continue;
            }
            self.next_pos = end;
            match step {
                Step::Jump(_) | Step::TooLarge(_) => {}
                Step::Pad(n) => self.write_pad(off, n),
                Step::Record => {
                    let Some(header) = header else {
                        return Ok(w);
                    };
                    // SYNC: the claim. Pairs with the consumer's span-skip CAS (0 → Skipped) on
                    // the same word in `OsrConsumer::skip_left`: exactly one of them wins.
                    // Relaxed on success: the word publishes no bytes yet; our later Release
                    // commit (or abort) on this word orders this access before the consumer's
                    // reads and its zeroing. On failure our Release acknowledgement does.
                    match shared.data().word(off).compare_exchange(
                        StatusWord::EMPTY.0,
                        header.0,
                        Relaxed,
                        Acquire,
                    ) {
                        Ok(_) => return Ok(w),
                        Err(actual) if actual == StatusWord::SKIP_MARK.0 => {
                            // Skipped before we wrote anything: acknowledge and try again.
                            self.acknowledge(off, header.words());
                            // SYNC: a counter; orders nothing.
                            c.producers.late_claims.fetch_add(1, Relaxed);
                        }
                        Err(_) => {
                            shared.poison();
                            return Err(ReserveError::Poisoned);
                        }
                    }
                }
            }
            w = end;
        }
    }

    /// Writes the `Flush` status word of a pad we reserved at `off`.
    #[cold]
    fn write_pad(&self, off: u64, len: u64) {
        // SYNC: pairs with the consumer's span-skip CAS on the same word, like the claim, and,
        // Release, with the consumer's Acquire load in `OsrConsumer::examine`: this access
        // happens before the consumer zeroes the word when it frees the pad (a pad has no
        // commit to carry that ordering). Found by the loom model.
        match self.shared.data().word(off).compare_exchange(
            StatusWord::EMPTY.0,
            StatusWord::flush(len / 8).0,
            Release,
            Acquire,
        ) {
            Ok(_) => {}
            Err(actual) if actual == StatusWord::SKIP_MARK.0 => self.acknowledge(off, len / 8),
            Err(_) => self.shared.poison(),
        }
    }

    /// Replaces the consumer's `Skipped` mark on our record at `off` with `Acked`: we will
    /// never touch its bytes again, so the consumer may zero and reuse them.
    #[cold]
    fn acknowledge(&self, off: u64, words: u64) {
        // SYNC: Release pairs with the Acquire load in `OsrConsumer::hole_acked`: every write
        // we made into the record happens before the consumer zeroes it.
        if self
            .shared
            .data()
            .word(off)
            .compare_exchange(
                StatusWord::SKIP_MARK.0,
                StatusWord::acked(words).0,
                Release,
                Relaxed,
            )
            .is_err()
        {
            self.shared.poison();
        }
    }

    /// Ends the record at `pos` (claimed with `header`) by replacing its status word with `end`
    /// (`Ready` to commit, possibly with a shorter extent; `Flush` to abort).
    #[inline]
    fn finish(&self, pos: u64, header: StatusWord, end: StatusWord) -> Result<(), CommitError> {
        let off = pos & self.shared.mask;
        // SYNC: Release pairs with the consumer's Acquire load of the status word in
        // `OsrConsumer::examine`: the payload written before happens before the consumer reads
        // it (and, for an abort, before it zeroes it). Also pairs with the consumer's skip CAS
        // (Writing → Skipped) in `skip_left`: exactly one of the two wins.
        match self
            .shared
            .data()
            .word(off)
            .compare_exchange(header.0, end.0, Release, Relaxed)
        {
            Ok(_) => Ok(()),
            Err(actual) if actual == StatusWord::SKIP_MARK.0 => {
                self.acknowledge(off, header.words());
                // SYNC: a counter; orders nothing.
                self.shared
                    .control()
                    .producers
                    .lost_commits
                    .fetch_add(1, Relaxed);
                Err(CommitError::Lost)
            }
            Err(_) => {
                self.shared.poison();
                Err(CommitError::Poisoned)
            }
        }
    }
}

/// `e` with the payload length the caller asked for (`claim` knows only the extent).
fn with_len(e: ReserveError, len: usize) -> ReserveError {
    match e {
        ReserveError::TooLarge { max, .. } => ReserveError::TooLarge { len, max },
        e => e,
    }
}

impl<M: RingMemory> Clone for OsrProducer<M> {
    fn clone(&self) -> Self {
        Self::attach(self.shared.clone())
    }
}

impl<M: RingMemory> Drop for OsrProducer<M> {
    fn drop(&mut self) {
        self.abort_batch();
        if let Some(slot) = self.id {
            // SYNC: Release pairs with the Acquire load in `OsrConsumer::producer`: every commit
            // of this handle happens before a consumer that sees it left reads the ring.
            self.shared.control().producer_table.slots[slot as usize].fetch_or(SLOT_LEFT, Release);
        }
        // SYNC: Release pairs with the Acquire load in `OsrConsumer::is_closed`: every commit of
        // this handle happens before a consumer that sees the count fall reads the ring.
        self.shared
            .control()
            .producers
            .producers
            .fetch_sub(1, Release);
    }
}

/// A claimed record being written. [`OsrReservation::commit`] publishes it; dropping it
/// aborts it (the consumer passes over it as padding).
pub struct OsrReservation<'a, M: RingMemory> {
    producer: &'a mut OsrProducer<M>,
    pos: u64,
    header: StatusWord,
    len: usize,
    done: bool,
}

impl<M: RingMemory> OsrReservation<'_, M> {
    /// The payload bytes reserved.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ring position of the record (for diagnostics).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Copies `bytes` into the payload at `offset`. Panics if they do not fit.
    #[inline]
    pub fn write_at(&mut self, offset: usize, bytes: &[u8]) {
        assert!(
            offset <= self.len && bytes.len() <= self.len - offset,
            "write past the reservation"
        );
        let at = (self.pos & self.producer.shared.mask) + 8 + offset as u64;
        // SAFETY: the bytes lie inside the record we claimed (its extent is checked against the
        // lap when placed, the range against the payload above), and a claimed record is ours
        // alone until we commit: the consumer reads it only after `Ready`, and if it skips it
        // the bytes become a hole nobody touches until we acknowledge.
        unsafe { self.producer.shared.data().write(at, bytes) }
    }

    /// Gives `f` the whole payload to fill in place (it starts zeroed; in `loom` builds `f`
    /// fills a copy that is written back).
    #[inline]
    pub fn with_bytes_mut<R>(&mut self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let at = (self.pos & self.producer.shared.mask) + 8;
        // SAFETY: as in `write_at`: the payload lies inside the record we claimed, which is
        // ours alone until we commit.
        unsafe { self.producer.shared.data().write_with(at, self.len, f) }
    }

    /// Publishes the record. [`CommitError::Lost`] means the consumer skipped it after its
    /// window (this producer was too slow): it will never be delivered.
    #[inline]
    pub fn commit(mut self) -> Result<(), CommitError> {
        self.done = true;
        let ready = self.header.with_status(Status::Ready);
        self.producer.finish(self.pos, self.header, ready)
    }
}

impl<M: RingMemory> Drop for OsrReservation<'_, M> {
    fn drop(&mut self) {
        if !self.done {
            // An abort: the consumer passes over it. Lost or poisoned makes no difference here.
            let flush = self.header.with_status(Status::Flush);
            let _ = self.producer.finish(self.pos, self.header, flush);
        }
    }
}

/// The payload bytes one tuple of `len` bytes takes in a batch record: an 8-byte inner header
/// and the tuple rounded up to whole 8-byte words.
#[inline]
pub fn batch_item_bytes(len: usize) -> usize {
    usize::try_from(batch_item_extent(len)).unwrap_or(usize::MAX)
}
