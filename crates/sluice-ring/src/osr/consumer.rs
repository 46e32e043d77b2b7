//! The consumer side of the OSR ring: the sliding window (left edge, right side), skipping,
//! holes, and freeing space. See the module doc of [`super`].

use sluice_sync::atomic::Ordering::{Acquire, Relaxed, Release};
use sluice_sync::sync::Arc;

use super::control::{
    decode_hole, encode_hole, FLAG_CONSUMER_ATTACHED, FLAG_CONSUMER_GONE, FLAG_POISONED,
    FLAG_PRODUCERS_SEEN, HOLE_SLOTS, PRODUCER_SLOTS, SLOT_JOINED, SLOT_LEFT,
};
use super::word::{Status, StatusWord};
use super::{OsrError, OsrStats, Shared};
use crate::memory::RingMemory;

/// What the consumer finds at a record boundary.
#[derive(Clone, Copy, Debug)]
enum Slot {
    /// Nothing reserved here yet.
    Free,
    /// A hole starts here and producers jumped over it: pass this many bytes.
    Jump(u64),
    /// A complete record.
    Ready(StatusWord),
    /// Already handled (`Read` by the right side, or `Flush` padding): pass this many bytes.
    Done(u64),
    /// Claimed, still being written.
    InFlight(StatusWord),
    /// Reserved, no status word yet.
    Headerless,
}

/// One record handed to [`OsrConsumer::poll`]'s callback; its bytes live in the ring and are
/// valid for the duration of the call.
#[derive(Debug, Clone, Copy)]
pub struct OsrRecord<'a> {
    target: u32,
    bytes: &'a [u8],
    batch: bool,
}

impl<'a> OsrRecord<'a> {
    /// The target task the producer named.
    pub fn target(&self) -> u32 {
        self.target
    }

    /// The payload: one tuple, or a batch's framed tuples (see [`OsrRecord::tuples`]).
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Whether the payload is a batch.
    pub fn is_batch(&self) -> bool {
        self.batch
    }

    /// The tuples: the payload itself for a single record, each framed tuple of a batch.
    pub fn tuples(&self) -> OsrTuples<'a> {
        OsrTuples {
            rest: self.bytes,
            single: !self.batch,
        }
    }
}

/// The tuples of one record.
#[derive(Debug, Clone)]
pub struct OsrTuples<'a> {
    rest: &'a [u8],
    single: bool,
}

impl<'a> Iterator for OsrTuples<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.single {
            self.single = false;
            let all = self.rest;
            self.rest = &[];
            return Some(all);
        }
        let (tuple, rest) = split_batch_item(self.rest)?;
        self.rest = rest;
        Some(tuple)
    }
}

/// The first framed tuple of a batch and the rest, or `None` at the end or on bad framing.
fn split_batch_item(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let header: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
    let len = u32::from_le_bytes(header) as usize;
    let extent = 8 + len.div_ceil(8) * 8;
    if extent > bytes.len() {
        return None;
    }
    Some((&bytes[8..8 + len], &bytes[extent..]))
}

/// Whether a batch payload is a whole number of well-framed tuples.
fn batch_is_well_formed(mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        match split_batch_item(bytes) {
            Some((_, rest)) => bytes = rest,
            None => return false,
        }
    }
    true
}

/// What held the consumer's left edge when its last poll ended (see the module doc of
/// [`super`], "The window").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OsrStall {
    /// A record claimed for `target` and not committed yet.
    Writing {
        /// The target its producer named.
        target: u32,
    },
    /// A reservation not claimed yet (its producer is between its two CASes, or died there).
    Unclaimed,
}

/// One slot of the producer table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OsrProducerEntry {
    /// The process id the producer recorded when it joined.
    pub pid: u32,
    /// Whether its handle is gone (after all its commits).
    pub left: bool,
}

/// The one reading handle on an OSR ring.
pub struct OsrConsumer<M: RingMemory> {
    shared: Arc<Shared<M>>,
    /// The left edge of the window: the oldest record not yet resolved.
    left: u64,
    /// The `read_pos` last published: bytes before it are zeroed and free.
    released: u64,
    /// The right side's next boundary, valid while `right_base == left`.
    right: u64,
    right_base: u64,
    /// The left-edge position the stuck count belongs to.
    stuck_at: u64,
    /// Polls that ended with the left edge on the unready record at `stuck_at`.
    stuck_polls: u64,
    /// `write_pos` as last read: positions before it are reserved.
    cached_wp: u64,
    /// Mirror of the hole slots (this side is their only writer): `(start, len)`, len 0 free.
    holes: [(u64, u64); HOLE_SLOTS],
    /// Mirror of `hole_mask`.
    hole_mask: u64,
    /// What held the left edge when the last poll ended: `Some(Some(w))` a `Writing` record
    /// with status word `w`, `Some(None)` an unclaimed reservation.
    stall: Option<Option<StatusWord>>,
}

impl<M: RingMemory> OsrConsumer<M> {
    pub(crate) fn attach(shared: Arc<Shared<M>>) -> Result<Self, OsrError> {
        let c = shared.control();
        // SYNC: Acquire: the one-consumer latch; Acquire so a consumer that takes over a ring
        // sees the state its predecessor published.
        if c.shared.flags.fetch_or(FLAG_CONSUMER_ATTACHED, Acquire) & FLAG_CONSUMER_ATTACHED != 0 {
            return Err(OsrError::ConsumerTaken);
        }
        // SYNC: Relaxed: we are now the only writer of `read_pos` and the hole table, and the
        // Acquire above ordered anything published before.
        let left = c.consumer.read_pos.load(Relaxed);
        let mut holes = [(0, 0); HOLE_SLOTS];
        let mut hole_mask = 0;
        for (i, slot) in c.holes.slots.iter().enumerate() {
            // SYNC: as above.
            let (start, len) = decode_hole(slot.load(Relaxed));
            if len != 0 {
                holes[i] = (start, len);
                hole_mask |= 1 << i;
            }
        }
        // SYNC: Release pairs with the Acquire load in `OsrProducer::consumer_pid`.
        c.shared
            .consumer_pid
            .store(u64::from(std::process::id()), Release);
        Ok(Self {
            shared,
            left,
            released: left,
            right: left,
            right_base: u64::MAX,
            stuck_at: u64::MAX,
            stuck_polls: 0,
            cached_wp: left,
            holes,
            hole_mask,
            stall: None,
        })
    }

    /// The producer-table slot `id`: `None` while nobody has joined it (or `id` is out of
    /// range).
    pub fn producer(&self, id: u32) -> Option<OsrProducerEntry> {
        let slot = self
            .shared
            .control()
            .producer_table
            .slots
            .get(usize::try_from(id).ok()?)?;
        // SYNC: Acquire pairs with the Release store in `OsrProducer::join` and the Release
        // `fetch_or` in `OsrProducer::drop`: once `left` is seen, every record the producer
        // committed is visible and lies below the current `write_pos`.
        let value = slot.load(Acquire);
        (value & SLOT_JOINED != 0).then_some(OsrProducerEntry {
            pid: value as u32,
            left: value & SLOT_LEFT != 0,
        })
    }

    /// How many producers have joined the producer table (at most [`PRODUCER_SLOTS`]).
    pub fn joined(&self) -> usize {
        // SYNC: Relaxed: a count for reporting; the slots themselves are read with Acquire.
        let joined = self.shared.control().producers.joined.load(Relaxed);
        usize::try_from(joined).map_or(PRODUCER_SLOTS, |j| j.min(PRODUCER_SLOTS))
    }

    /// The left edge of the window: every record below this position is delivered or skipped.
    pub fn read_position(&self) -> u64 {
        self.left
    }

    /// The position where the next reservation will start (rereads `write_pos`): every record
    /// reserved so far lies below it.
    pub fn write_position(&mut self) -> u64 {
        // SYNC: Acquire, so that a caller who acquired a producer's departure (see
        // `producer`) and then reads this sees a position past all of that producer's records.
        self.cached_wp = self.shared.control().reserve.write_pos.load(Acquire);
        self.cached_wp
    }

    /// What held the left edge when the last [`OsrConsumer::poll`] ended, if it ended waiting
    /// on an unready record (rather than on free space or on reaching its limit).
    pub fn stall(&self) -> Option<OsrStall> {
        self.stall.map(|stuck| match stuck {
            Some(w) => OsrStall::Writing { target: w.target() },
            None => OsrStall::Unclaimed,
        })
    }

    /// Skips what [`OsrConsumer::stall`] reports, now, as an expired window would: a `Writing`
    /// record is lost (its producer learns so if it ever commits), an unclaimed reservation
    /// costs its producer only a retry. Returns whether anything was skipped (false when there
    /// was no stall or the record was committed meanwhile).
    pub fn skip_stall(&mut self) -> Result<bool, OsrError> {
        let Some(stuck) = self.stall.take() else {
            return Ok(false);
        };
        let before = self.left;
        if let Err(e) = self.skip_left(stuck) {
            self.shared.poison();
            return Err(e);
        }
        Ok(self.left != before)
    }

    /// Poisons the ring: the consumer stops delivering and producers are refused. For a caller
    /// that found a record's contents malformed.
    pub fn poison(&self) {
        self.shared.poison();
    }

    /// Whether every producer handle that ever attached is gone. Records they committed may
    /// still be in the ring: check [`OsrConsumer::is_empty`] after this returns true.
    pub fn is_closed(&self) -> bool {
        let c = self.shared.control();
        // SYNC: Acquire pairs with the Release `fetch_or` of `FLAG_PRODUCERS_SEEN` in
        // `OsrProducer::attach`, so the count below includes that producer.
        let seen = c.shared.flags.load(Acquire) & FLAG_PRODUCERS_SEEN != 0;
        // SYNC: Acquire pairs with the Release `fetch_sub` in `OsrProducer::drop`: all the
        // reservations and commits of departed producers are visible after it.
        seen && c.producers.producers.load(Acquire) == 0
    }

    /// Whether nothing is reserved past the left edge (rereads `write_pos`).
    pub fn is_empty(&mut self) -> bool {
        // SYNC: Acquire: paired, through `is_closed`'s Acquire, with the producers' Release
        // decrement; a plain snapshot otherwise.
        self.cached_wp = self.shared.control().reserve.write_pos.load(Acquire);
        self.left >= self.cached_wp
    }

    /// The ring's size in bytes.
    pub fn capacity(&self) -> u64 {
        self.shared.capacity
    }

    /// The ring's counters.
    pub fn stats(&self) -> OsrStats {
        self.shared.stats()
    }

    /// Delivers up to `max_records` records to `deliver` (oldest first; records of one
    /// producer in the order it wrote them), applies the window to an unready record at the
    /// left edge, frees the space it passed, and returns how many records it delivered.
    pub fn poll<F>(&mut self, max_records: usize, mut deliver: F) -> Result<usize, OsrError>
    where
        F: FnMut(OsrRecord<'_>),
    {
        // SYNC: Acquire pairs with the Release `fetch_or` in `Shared::poison`.
        if self.shared.control().shared.flags.load(Acquire) & FLAG_POISONED != 0 {
            return Err(OsrError::Poisoned);
        }
        let mut delivered = 0;
        self.stall = None;
        let outcome = self.walk(max_records, &mut deliver, &mut delivered);
        self.release();
        if outcome.is_err() {
            self.shared.poison();
        }
        outcome.map(|()| delivered)
    }

    /// Copies up to `max_records` records into `out` as `(target, tuples)`; a convenience for
    /// tests and cold paths.
    pub fn poll_into(
        &mut self,
        max_records: usize,
        out: &mut Vec<(u32, Vec<Vec<u8>>)>,
    ) -> Result<usize, OsrError> {
        self.poll(max_records, |r| {
            out.push((r.target(), r.tuples().map(<[u8]>::to_vec).collect()))
        })
    }

    fn walk<F>(&mut self, max: usize, f: &mut F, delivered: &mut usize) -> Result<(), OsrError>
    where
        F: FnMut(OsrRecord<'_>),
    {
        loop {
            // The left edge: resolve records in order until one is not ready.
            let stuck = loop {
                if *delivered >= max {
                    return Ok(());
                }
                match self.examine(self.left)? {
                    Slot::Free => return Ok(()),
                    Slot::Jump(n) | Slot::Done(n) => self.left += n,
                    Slot::Ready(w) => {
                        if self.deliver(self.left, w, f) {
                            *delivered += 1;
                        }
                        self.left += w.extent();
                    }
                    Slot::InFlight(w) => break Some(w),
                    Slot::Headerless => break None,
                }
            };
            // The right side: deliver what is ready behind the stuck record.
            if let Some(w) = stuck {
                if !self.right_side(w, max, f, delivered)? {
                    continue; // the left edge became ready meanwhile: deliver it first
                }
            }
            // The window.
            if self.stuck_at != self.left {
                self.stuck_at = self.left;
                self.stuck_polls = 0;
            }
            self.stuck_polls += 1;
            if self.stuck_polls < self.shared.window {
                self.stall = Some(stuck);
                return Ok(());
            }
            self.skip_left(stuck)?;
        }
    }

    /// Reads the boundary at position `p` and checks what it says.
    #[inline]
    fn examine(&mut self, p: u64) -> Result<Slot, OsrError> {
        if p >= self.released + self.shared.capacity {
            // Producers reserve only below `read_pos + capacity`, and this word still holds
            // bytes of ours we have not freed yet (within one poll the walk can come round).
            return Ok(Slot::Free);
        }
        let off = p & self.shared.mask;
        if self.hole_mask != 0 {
            if let Some(len) = self.hole_starting_at(off) {
                // Producers jump a hole with a reservation CAS and no status word, so the jump
                // is there once `write_pos` passed `p`.
                return Ok(if self.reserved(p) {
                    Slot::Jump(len)
                } else {
                    Slot::Free
                });
            }
        }
        // SYNC: Acquire pairs with the Release commit/abort CAS in `OsrProducer::finish`: a
        // `Ready` record's payload (an aborted one's scribbles) is visible after it.
        let raw = self.shared.data().word(off).load(Acquire);
        if raw == StatusWord::EMPTY.0 {
            return Ok(if self.reserved(p) {
                Slot::Headerless
            } else {
                Slot::Free
            });
        }
        let w = StatusWord(raw);
        let extent = w.extent();
        let fits = extent >= 8
            && off + extent <= self.shared.capacity
            && (self.hole_mask == 0 || !self.overlaps_hole(off, extent));
        let record_ok = fits && extent <= self.shared.max_extent && w.payload_len().is_some();
        match w.status() {
            Some(Status::Writing) if record_ok => Ok(Slot::InFlight(w)),
            Some(Status::Ready) if record_ok => Ok(Slot::Ready(w)),
            Some(Status::Read | Status::Flush) if fits => Ok(Slot::Done(extent)),
            _ => Err(OsrError::Corrupt {
                position: p,
                word: raw,
            }),
        }
    }

    /// Whether position `p` has been reserved (rereads `write_pos` if the cached one says no).
    #[inline]
    fn reserved(&mut self, p: u64) -> bool {
        if p >= self.cached_wp {
            // SYNC: Relaxed: only the value matters; a record's bytes are reached through its
            // status word, never through `write_pos`.
            self.cached_wp = self.shared.control().reserve.write_pos.load(Relaxed);
        }
        p < self.cached_wp
    }

    /// Hands a `Ready` record to `f`; false if its batch framing is corrupt (then it is
    /// counted and dropped).
    fn deliver<F>(&self, p: u64, w: StatusWord, f: &mut F) -> bool
    where
        F: FnMut(OsrRecord<'_>),
    {
        let off = (p & self.shared.mask) + super::word::HEADER_BYTES;
        let len = w.payload_len().unwrap_or(0); // checked in `examine`
                                                // SAFETY: the record is `Ready` (Acquire load in `examine`): its producer finished
                                                // writing and never writes it again; the range lies inside the record, whose extent was
                                                // checked against the lap; nobody else writes a record before we free it.
        let ok = unsafe {
            self.shared.data().read(off, len, |bytes| {
                if w.is_batch() && !batch_is_well_formed(bytes) {
                    return false;
                }
                f(OsrRecord {
                    target: w.target(),
                    bytes,
                    batch: w.is_batch(),
                });
                true
            })
        };
        if !ok {
            // SYNC: a counter; orders nothing.
            self.shared
                .control()
                .consumer
                .corrupt_records
                .fetch_add(1, Relaxed);
        }
        ok
    }

    /// The right side of the window: delivers `Ready` records behind the stuck left edge,
    /// stopping at the first record that is not ready, so one producer's records keep their
    /// order. Returns false if the left edge changed meanwhile (then the left side goes first).
    fn right_side<F>(
        &mut self,
        stuck: StatusWord,
        max: usize,
        f: &mut F,
        delivered: &mut usize,
    ) -> Result<bool, OsrError>
    where
        F: FnMut(OsrRecord<'_>),
    {
        let mut r = if self.right_base == self.left {
            self.right
        } else {
            self.left + stuck.extent()
        };
        let left_off = self.left & self.shared.mask;
        let mut left_still_stuck = true;
        while *delivered < max {
            match self.examine(r)? {
                Slot::Jump(n) | Slot::Done(n) => r += n,
                Slot::Ready(w) => {
                    // The left edge looked unready *before* this record looked ready. If both
                    // are one producer's, it committed the left one before it even reserved
                    // this one, so after the Acquire load that saw this one `Ready` the left
                    // one must be seen committed too: look again before delivering out of
                    // position order.
                    // SYNC: Acquire pairs with the Release commit CAS of the left record in
                    // `OsrProducer::finish`; ordered after the Acquire load of this record's
                    // word in `examine`, which pairs with that producer's later commit.
                    if self.shared.data().word(left_off).load(Acquire) != stuck.0 {
                        left_still_stuck = false;
                        break;
                    }
                    if self.deliver(r, w, f) {
                        *delivered += 1;
                    }
                    // SYNC: Relaxed: only this thread reads the mark (the left edge passing it);
                    // the producer stopped touching this word when it stored `Ready`.
                    self.shared
                        .data()
                        .word(r & self.shared.mask)
                        .store(w.with_status(Status::Read).0, Relaxed);
                    r += w.extent();
                }
                Slot::Free | Slot::Headerless | Slot::InFlight(_) => break,
            }
        }
        self.right_base = self.left;
        self.right = r;
        Ok(left_still_stuck)
    }

    /// The window expired on the record at the left edge (`Some`: `Writing`; `None`: no status
    /// word): skip it and quarantine its bytes as a hole.
    #[cold]
    fn skip_left(&mut self, stuck: Option<StatusWord>) -> Result<(), OsrError> {
        let Some(slot) = (0..HOLE_SLOTS).find(|i| self.hole_mask & (1 << i) == 0) else {
            return Err(OsrError::TooManyHoles);
        };
        let shared = self.shared.clone();
        let c = shared.control();
        let off = self.left & self.shared.mask;
        match stuck {
            Some(w) => {
                // SYNC: pairs with the producer's commit/abort CAS (Writing → Ready/Flush) in
                // `OsrProducer::finish`: exactly one wins. Relaxed on success: we touch none of
                // the record's bytes until the producer's Release acknowledgement. Acquire on
                // failure: if the producer won with `Ready`, we read its payload next.
                if self
                    .shared
                    .data()
                    .word(off)
                    .compare_exchange(w.0, StatusWord::SKIP_MARK.0, Relaxed, Acquire)
                    .is_ok()
                {
                    self.add_hole(slot, off, w.extent());
                    // SYNC: a counter; orders nothing.
                    c.consumer.skipped_records.fetch_add(1, Relaxed);
                    self.left += w.extent();
                }
            }
            None => {
                // Mark every word from the left edge until the next claimed record, the end of
                // what is reserved, the end of the lap or a hole.
                // SYNC: Relaxed: the value bounds the marking; see `reserved`.
                self.cached_wp = c.reserve.write_pos.load(Relaxed);
                let lap_start = self.left - off;
                let mut limit = self.cached_wp.min(lap_start + self.shared.capacity);
                if let Some(start) = self.next_hole_start_after(off) {
                    limit = limit.min(lap_start + start);
                }
                let mut x = self.left;
                while x < limit {
                    // SYNC: pairs with the producers' claim CAS (0 → Writing/Flush) in
                    // `OsrProducer::claim`/`write_pad`: exactly one wins per word, and a claimed
                    // word stops the marking here, so we never touch a payload. Acquire on
                    // failure: the word is a status word we examine next.
                    if self
                        .shared
                        .data()
                        .word(x & self.shared.mask)
                        .compare_exchange(
                            StatusWord::EMPTY.0,
                            StatusWord::SKIP_MARK.0,
                            Relaxed,
                            Acquire,
                        )
                        .is_err()
                    {
                        break;
                    }
                    x += 8;
                }
                if x > self.left {
                    self.add_hole(slot, off, x - self.left);
                    // SYNC: a counter; orders nothing.
                    c.consumer.skipped_spans.fetch_add(1, Relaxed);
                    self.left = x;
                }
            }
        }
        Ok(())
    }

    fn hole_starting_at(&self, off: u64) -> Option<u64> {
        self.holes
            .iter()
            .find(|&&(start, len)| len != 0 && start == off)
            .map(|&(_, len)| len)
    }

    fn overlaps_hole(&self, off: u64, extent: u64) -> bool {
        self.holes
            .iter()
            .any(|&(start, len)| len != 0 && start < off + extent && off < start + len)
    }

    fn next_hole_start_after(&self, off: u64) -> Option<u64> {
        self.holes
            .iter()
            .filter(|&&(start, len)| len != 0 && start > off)
            .map(|&(start, _)| start)
            .min()
    }

    fn add_hole(&mut self, slot: usize, start: u64, len: u64) {
        self.holes[slot] = (start, len);
        self.hole_mask |= 1 << slot;
        let c = self.shared.control();
        // SYNC: Release pairs with the producers' Acquire loads of the slot and the mask in
        // `OsrProducer::claim`; they matter to a producer only once it reaches the hole's next
        // lap, which needs our next `read_pos` store (Release, after these).
        c.holes.slots[slot].store(encode_hole(start, len), Release);
        c.shared.hole_mask.store(self.hole_mask, Release);
    }

    fn remove_hole(&mut self, slot: usize) {
        self.holes[slot] = (0, 0);
        self.hole_mask &= !(1 << slot);
        let c = self.shared.control();
        // SYNC: as in `add_hole`: published before the `read_pos` store that lets producers
        // reach the freed bytes' next lap.
        c.shared.hole_mask.store(self.hole_mask, Release);
        c.holes.slots[slot].store(0, Release);
    }

    /// Whether every reservation inside the hole `start..start + len` was acknowledged.
    fn hole_acked(&self, start: u64, len: u64) -> bool {
        let mut x = start;
        while x < start + len {
            // SYNC: Acquire pairs with the Release CAS in `OsrProducer::acknowledge`: the
            // producer's writes into its record happen before we zero it.
            let w = StatusWord(self.shared.data().word(x).load(Acquire));
            if w.status() != Some(Status::Acked) || w.words() == 0 {
                return false;
            }
            x += w.extent();
        }
        x == start + len
    }

    /// Frees what the left edge passed: zeroes it (except unacknowledged holes; acknowledged
    /// ones are zeroed and their slots freed) and publishes the new `read_pos`.
    fn release(&mut self) {
        if self.left == self.released {
            return;
        }
        let cap = self.shared.capacity;
        let mut p = self.released;
        while p < self.left {
            let off = p & self.shared.mask;
            let end = self.left.min(p - off + cap);
            self.free_segment(off, off + (end - p));
            p = end;
        }
        // SYNC: Release pairs with the Acquire loads of `read_pos` in `OsrProducer::claim`:
        // the zeroing and hole-table updates above happen before any producer reuses the bytes.
        self.shared
            .control()
            .consumer
            .read_pos
            .store(self.left, Release);
        self.released = self.left;
    }

    /// Zeroes ring offsets `a..b` around the holes in it.
    fn free_segment(&mut self, a: u64, b: u64) {
        let mut inside = [(0u64, 0u64, 0usize); HOLE_SLOTS];
        let mut n = 0;
        if self.hole_mask != 0 {
            for (i, &(start, len)) in self.holes.iter().enumerate() {
                if len != 0 && start < b && a < start + len {
                    inside[n] = (start, len, i);
                    n += 1;
                }
            }
            inside[..n].sort_unstable();
        }
        let mut cursor = a;
        for &(start, len, slot) in &inside[..n] {
            if cursor < start {
                self.zero(cursor, start - cursor);
            }
            if start >= a && start + len <= b && self.hole_acked(start, len) {
                self.zero(start, len);
                self.remove_hole(slot);
            }
            cursor = cursor.max(start + len);
        }
        if cursor < b {
            self.zero(cursor, b - cursor);
        }
    }

    fn zero(&self, off: u64, len: u64) {
        // SAFETY: the bytes lie before the left edge and at or after the last published
        // `read_pos`: consumed (or padding, or an acknowledged hole), so no producer touches
        // them until the `read_pos` store that follows, and we no longer read them.
        unsafe { self.shared.data().zero(off, len as usize) }
    }
}

impl<M: RingMemory> Drop for OsrConsumer<M> {
    fn drop(&mut self) {
        // SYNC: Release pairs with the Acquire loads of `flags` in `OsrProducer::claim` and
        // `is_closed`.
        self.shared
            .control()
            .shared
            .flags
            .fetch_or(FLAG_CONSUMER_GONE, Release);
    }
}
