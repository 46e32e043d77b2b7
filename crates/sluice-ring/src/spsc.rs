//! A bounded single-producer single-consumer queue: the threaded port.
//!
//! Why hand-written: `crossbeam`'s queues are multi-producer and pay for it with a CAS or a
//! sequence per slot; a threaded port has exactly one writer and one reader, so the classic
//! Lamport ring with cached indices (the Disruptor / rigtorp idiom) moves a value with one
//! plain store into the slot and, per *batch*, one release store of an index. Nor does any
//! queue we know of bound its contents by weight, which lets the threaded port move a run of
//! tuples as one value and still hold at most its capacity in tuples.
//!
//! ```text
//!   head (producer's line)   tail (consumer's line)   closed flags (own line)
//!   slots: [ T,w | T,w | T,w | . | . | . | T,w ]   index = position & mask
//!            ^tail                ^head
//! ```
//! - `head` and `tail` are positions that only grow (wrapping `usize`); the queue holds
//!   `head - tail` values and has no free slot when that equals the capacity (a power of two).
//! - Every value has a *weight* (at least 1, at most the capacity; [`Producer::write`] gives
//!   1), kept in its slot beside it. Each side's line also holds the total weight written or
//!   read so far, and the queue holds at most its capacity in weight: a run of n tuples written
//!   as one value of weight n counts as n messages. Weights are accounting only: the slots are
//!   guarded by the positions alone, and since every weight is at least 1 the weight bound is
//!   the tighter one.
//! - Each side keeps a private copy of the other's position and rereads the shared one only
//!   when its copy says full (producer) or empty (consumer), so in steady state the two cores
//!   exchange one cache line per batch, not per value.
//! - [`Producer::write`] fills a slot without publishing it; [`Producer::publish`] makes all
//!   written slots visible with one release store. [`Consumer::pop_batch`] reads many slots and
//!   frees them with one release store.
//! - Dropping either end marks the queue closed, so the other end never waits forever.
//! - Either end may park (sleep in the kernel) until the other makes progress:
//!   [`Consumer::park`] until something is published, [`Producer::park`] until a slot and a
//!   unit of weight are freed. Each side has a [`Doorbell`] on its own line; the producer rings
//!   the consumer's after every publish and the consumer rings the producer's after every
//!   release, which costs a fence and a load of a line that stays cached while nobody parks
//!   (the doorbell's module doc argues why no wake-up is lost). Both are private futexes: the
//!   queue never leaves its process.

use std::mem::MaybeUninit;
use std::time::Duration;

use sluice_sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use sluice_sync::cell::UnsafeCell;
use sluice_sync::sync::Arc;
use sluice_sync::{CachePadded, Doorbell, Sharing, Wakeup};

/// Why a value could not be pushed; the value is handed back.
#[derive(Debug, PartialEq, Eq)]
pub enum PushError<T> {
    /// The queue has no free slot now; try again later.
    Full(T),
    /// The consumer is gone; nothing pushed will ever be read.
    Closed(T),
}

/// How far one side has come: a position in slots and the total weight of the values before
/// it. Both fields live on the side's own cache line.
struct Progress {
    /// Written only by its side.
    position: AtomicUsize,
    /// Written only by its side, always before `position`.
    weight: AtomicUsize,
}

impl Progress {
    fn new() -> Self {
        Self {
            position: AtomicUsize::new(0),
            weight: AtomicUsize::new(0),
        }
    }
}

/// A value in its slot, with the weight it was written with.
struct Weighed<T> {
    value: T,
    weight: usize,
}

struct Shared<T> {
    /// Next position the producer writes, and the weight published. Written only by the
    /// producer.
    head: CachePadded<Progress>,
    /// Next position the consumer reads, and the weight read. Written only by the consumer.
    tail: CachePadded<Progress>,
    producer_gone: CachePadded<AtomicBool>,
    consumer_gone: AtomicBool,
    /// Where the consumer parks; rung by the producer after a publish and when it leaves.
    consumer_bell: CachePadded<Doorbell>,
    /// Where the producer parks; rung by the consumer after a release and when it leaves.
    producer_bell: CachePadded<Doorbell>,
    mask: usize,
    slots: Box<[UnsafeCell<MaybeUninit<Weighed<T>>>]>,
}

// SAFETY: the queue moves `T` values from the producer's thread to the consumer's thread, which
// needs `T: Send`; each slot is accessed by one side at a time, as argued in `write` and `pop`,
// so sharing `Shared` between the two threads is sound for any `T: Send`.
unsafe impl<T: Send> Sync for Shared<T> {}
// SAFETY: as above, `Shared` owns `T` values and hands them across threads only when `T: Send`.
unsafe impl<T: Send> Send for Shared<T> {}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // Both ends are gone (this is the last `Arc`), so no other thread touches the slots.
        let head = self.head.position.load(Ordering::Relaxed);
        let mut pos = self.tail.position.load(Ordering::Relaxed);
        while pos != head {
            self.slots[pos & self.mask].with_mut(|slot| {
                // SAFETY: positions in tail..head were written by `write` and never read, so
                // they hold initialised values; we have exclusive access in `drop`.
                unsafe { (*slot).assume_init_drop() }
            });
            pos = pos.wrapping_add(1);
        }
    }
}

/// Creates a queue with room for at least `capacity` values (rounded up to a power of two, at
/// least 2), or that much weight. Returns `None` for a capacity of 0 or one too large to
/// allocate.
pub fn channel<T: Send>(capacity: usize) -> Option<(Producer<T>, Consumer<T>)> {
    if capacity == 0 {
        return None;
    }
    let capacity = capacity.max(2).checked_next_power_of_two()?;
    let slots = (0..capacity)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect();
    let shared = Arc::new(Shared {
        head: CachePadded::new(Progress::new()),
        tail: CachePadded::new(Progress::new()),
        producer_gone: CachePadded::new(AtomicBool::new(false)),
        consumer_gone: AtomicBool::new(false),
        consumer_bell: CachePadded::new(Doorbell::new()),
        producer_bell: CachePadded::new(Doorbell::new()),
        mask: capacity - 1,
        slots,
    });
    Some((
        Producer {
            shared: shared.clone(),
            head: 0,
            weight: 0,
            published: 0,
            cached_tail: 0,
            cached_tail_weight: 0,
        },
        Consumer {
            shared,
            tail: 0,
            weight: 0,
            cached_head: 0,
        },
    ))
}

/// The writing end of a queue.
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
    /// Next position to write (may be ahead of what is published).
    head: usize,
    /// The total weight written (may be ahead of what is published).
    weight: usize,
    /// Last position stored to `shared.head`.
    published: usize,
    /// The consumer's `tail` position as last read.
    cached_tail: usize,
    /// The consumer's weight read, as last read (with `cached_tail`).
    cached_tail_weight: usize,
}

impl<T: Send> Producer<T> {
    /// The number of slots, and the most weight the queue holds.
    pub fn capacity(&self) -> usize {
        self.shared.mask + 1
    }

    /// Free slots and free weight by the cached view of the consumer's progress; the smaller
    /// is what can be written.
    #[inline]
    fn cached_free(&self) -> usize {
        let slots = self.capacity() - self.head.wrapping_sub(self.cached_tail);
        let weight = self.capacity() - self.weight.wrapping_sub(self.cached_tail_weight);
        slots.min(weight)
    }

    #[inline]
    fn refresh(&mut self) {
        // SYNC: pairs with the Release store of `tail.position` in `Consumer::release_to`, so
        // the consumer's reads of the slots before `tail` happened before we overwrite them,
        // and its store of `tail.weight` (before that one) is seen too.
        self.cached_tail = self.shared.tail.position.load(Ordering::Acquire);
        // SYNC: stored before the position we just acquired (see above); only ever grows, so
        // a newer value only shows more room, which the slot check above still bounds.
        self.cached_tail_weight = self.shared.tail.weight.load(Ordering::Relaxed);
    }

    /// Whether a value of `weight` (at least 1) fits now (rereads the consumer's progress only
    /// if the cached one shows too little room). Only this producer fills the queue, so what
    /// fits now still fits until it writes.
    #[inline]
    pub fn has_room(&mut self, weight: usize) -> bool {
        if self.cached_free() >= weight {
            return true;
        }
        self.refresh();
        self.cached_free() >= weight
    }

    /// How much weight can be written now without refusal: as many values of weight 1
    /// (rereads the consumer's progress when the cached one shows less than an empty queue).
    pub fn free(&mut self) -> usize {
        if self.cached_free() == self.capacity() {
            return self.capacity();
        }
        self.refresh();
        self.cached_free()
    }

    /// Whether the consumer has gone away.
    pub fn is_closed(&self) -> bool {
        // SYNC: pairs with the Release store in `Consumer::drop`.
        self.shared.consumer_gone.load(Ordering::Acquire)
    }

    /// Writes `value` (weight 1) into the next slot without publishing it; call
    /// [`Producer::publish`] to make every written slot visible at once.
    #[inline]
    pub fn write(&mut self, value: T) -> Result<(), PushError<T>> {
        self.write_weighed(value, 1)
    }

    /// Writes `value` into the next slot, counting it as `weight` (see [`Producer::claim`]),
    /// without publishing it.
    #[inline]
    pub fn write_weighed(&mut self, value: T, weight: usize) -> Result<(), PushError<T>> {
        if let Some(claim) = self.claim(weight) {
            claim.write(value);
            return Ok(());
        }
        Err(if self.is_closed() {
            PushError::Closed(value)
        } else {
            PushError::Full(value)
        })
    }

    /// Claims the next slot for a value counted as `weight` (taken as at least 1 and at most
    /// the capacity: a heavier value goes alone through an empty queue); `None` unless the
    /// consumer is there and a slot and that much weight are free. Writing the claim cannot
    /// fail, so a caller can make the value only once it knows it has a place.
    #[inline]
    pub fn claim(&mut self, weight: usize) -> Option<Claim<'_, T>> {
        let weight = weight.clamp(1, self.capacity());
        if self.is_closed() || !self.has_room(weight) {
            return None;
        }
        Some(Claim {
            producer: self,
            weight,
        })
    }

    /// Makes every slot written so far visible to the consumer (one release store), and wakes
    /// the consumer if it is parked.
    #[inline]
    pub fn publish(&mut self) {
        if self.store_head() {
            self.shared.consumer_bell.ring(Sharing::Private);
        }
    }

    /// Publishes, then sleeps until the consumer frees a slot and some weight, or leaves, or
    /// `timeout` passes (or spuriously earlier): what a producer refused with `Full` does
    /// instead of spinning.
    pub fn park(&mut self, timeout: Duration) -> Wakeup {
        self.publish();
        let (shared, head, weight) = (&self.shared, self.head, self.weight);
        shared.producer_bell.wait(Sharing::Private, timeout, || {
            // SYNC: pairs with the Release stores of `tail.position` in `Consumer::release_to`
            // (after its `tail.weight`) and of `consumer_gone` in `Consumer::drop`, which ring
            // this doorbell after them.
            let tail = shared.tail.position.load(Ordering::Acquire);
            let read = shared.tail.weight.load(Ordering::Relaxed);
            (head.wrapping_sub(tail) <= shared.mask && weight.wrapping_sub(read) <= shared.mask)
                || shared.consumer_gone.load(Ordering::Acquire)
        })
    }

    /// Writes and publishes one value.
    #[inline]
    pub fn try_push(&mut self, value: T) -> Result<(), PushError<T>> {
        self.write(value)?;
        self.publish();
        Ok(())
    }
}

/// A slot claimed by [`Producer::claim`], with room for its weight.
pub struct Claim<'a, T> {
    producer: &'a mut Producer<T>,
    weight: usize,
}

impl<T: Send> Claim<'_, T> {
    /// The weight claimed.
    pub fn weight(&self) -> usize {
        self.weight
    }

    /// Writes `value` into the claimed slot, without publishing it.
    #[inline]
    pub fn write(self, value: T) {
        let (producer, weight) = (self.producer, self.weight);
        producer.shared.slots[producer.head & producer.shared.mask].with_mut(|slot| {
            // SAFETY: `claim` showed, through `has_room`, `head - tail < capacity` (at least
            // one slot free, as `weight` is at least 1), so the slot at `head` is not in the
            // consumer's readable range tail..published and the consumer has finished reading
            // it (Acquire on `tail.position` in `refresh`); only this producer writes slots,
            // and the claim holds it borrowed until the write.
            unsafe { (*slot).write(Weighed { value, weight }) };
        });
        producer.head = producer.head.wrapping_add(1);
        producer.weight = producer.weight.wrapping_add(weight);
    }
}

impl<T> Producer<T> {
    /// Stores the head's weight and position if slots were written since the last store;
    /// says whether it stored. Without the doorbell: `publish` rings it, and `drop` rings it
    /// after the close flag.
    #[inline]
    fn store_head(&mut self) -> bool {
        if self.published == self.head {
            return false;
        }
        // SYNC: read with the Acquire load of `head.position` in
        // `Consumer::available_weight`, for what the queue holds (metrics only).
        self.shared
            .head
            .weight
            .store(self.weight, Ordering::Relaxed);
        // SYNC: pairs with the Acquire load of `head.position` in `Consumer::refresh`, so the
        // slot writes above happen before the consumer reads them; and, through the doorbell's
        // fences, with the load in `Consumer::park`'s readiness check.
        self.shared
            .head
            .position
            .store(self.head, Ordering::Release);
        self.published = self.head;
        true
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        // Written slots become visible before the close flag.
        self.store_head();
        // SYNC: pairs with the Acquire load in `Consumer::is_closed`; every publish happened
        // before it, so a consumer that sees the flag and then finds the queue empty has read
        // everything.
        self.shared.producer_gone.store(true, Ordering::Release);
        self.shared.consumer_bell.ring(Sharing::Private);
    }
}

/// The reading end of a queue.
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
    /// Next position to read.
    tail: usize,
    /// The total weight read.
    weight: usize,
    /// The producer's published `head` position as last read.
    cached_head: usize,
}

impl<T: Send> Consumer<T> {
    /// The number of values published and not yet read (rereads the producer's position).
    pub fn available(&mut self) -> usize {
        self.refresh();
        self.cached()
    }

    /// The weight of the values published and not yet read (for metrics: it may lag behind
    /// [`Consumer::available`] by the last publish).
    pub fn available_weight(&mut self) -> usize {
        self.refresh();
        // SYNC: stored before the position `refresh` acquired, in `Producer::publish`.
        let weight = self.shared.head.weight.load(Ordering::Relaxed);
        weight.wrapping_sub(self.weight).min(self.capacity())
    }

    /// How many values, and how much weight, the queue holds at most.
    pub fn capacity(&self) -> usize {
        self.shared.mask + 1
    }

    #[inline]
    fn cached(&self) -> usize {
        self.cached_head.wrapping_sub(self.tail)
    }

    #[inline]
    fn refresh(&mut self) {
        // SYNC: pairs with the Release store of `head.position` in `Producer::publish`.
        self.cached_head = self.shared.head.position.load(Ordering::Acquire);
    }

    /// Whether the producer has gone away. Values it published may still be queued: check
    /// [`Consumer::available`] *after* this returns true to know the queue is finished.
    pub fn is_closed(&self) -> bool {
        // SYNC: pairs with the Release store in `Producer::drop`.
        self.shared.producer_gone.load(Ordering::Acquire)
    }

    /// The weight of the value at `pos`, which must be in tail..cached_head.
    #[inline]
    fn weight_at(&self, pos: usize) -> usize {
        self.shared.slots[pos & self.shared.mask].with(|slot| {
            // SAFETY: as in `read_slot`: the slot is published and initialised, and the
            // producer does not touch it until we release it; we only read its weight.
            unsafe { (*slot).assume_init_ref().weight }
        })
    }

    #[inline]
    fn read_slot(&self, pos: usize) -> Weighed<T> {
        self.shared.slots[pos & self.shared.mask].with(|slot| {
            // SAFETY: `pos` is in tail..cached_head, published by the producer with a Release
            // store we acquired in `refresh`, so the slot is initialised; the producer will
            // not touch it until we advance `tail` past it, and we read it exactly once.
            unsafe { (*slot).assume_init_read() }
        })
    }

    #[inline]
    fn release_to(&mut self, tail: usize, weight: usize) {
        self.tail = tail;
        self.weight = weight;
        // SYNC: read by `Producer::refresh` and `Producer::park` after they acquire the
        // position stored next.
        self.shared.tail.weight.store(weight, Ordering::Relaxed);
        // SYNC: pairs with the Acquire load of `tail.position` in `Producer::refresh`; our
        // reads of the slots happen before the producer reuses them. Also read by
        // `Producer::park`.
        self.shared.tail.position.store(tail, Ordering::Release);
        self.shared.producer_bell.ring(Sharing::Private);
    }

    /// Sleeps until the producer publishes or leaves, or `timeout` passes (or spuriously
    /// earlier): what an idle consumer does instead of spinning.
    pub fn park(&mut self, timeout: Duration) -> Wakeup {
        let (shared, tail) = (&self.shared, self.tail);
        shared.consumer_bell.wait(Sharing::Private, timeout, || {
            // SYNC: pairs with the Release stores of `head.position` in `Producer::publish` and
            // of `producer_gone` in `Producer::drop`, which ring this doorbell after them.
            shared.head.position.load(Ordering::Acquire) != tail
                || shared.producer_gone.load(Ordering::Acquire)
        })
    }

    /// Takes the oldest value, if any.
    #[inline]
    pub fn try_pop(&mut self) -> Option<T> {
        if self.cached() == 0 {
            self.refresh();
            if self.cached() == 0 {
                return None;
            }
        }
        let Weighed { value, weight } = self.read_slot(self.tail);
        self.release_to(self.tail.wrapping_add(1), self.weight.wrapping_add(weight));
        Some(value)
    }

    /// Moves values, oldest first, into `out` while their weights add up to at most `max`
    /// (always the first one, if any is published: so values of weight 1 move `max` at a
    /// time), and frees their slots with one store. Returns the weight moved (for values of
    /// weight 1, how many).
    #[inline]
    pub fn pop_batch(&mut self, max: usize, out: &mut Vec<T>) -> usize {
        if max == 0 {
            return 0;
        }
        if self.cached() < max {
            self.refresh();
        }
        let published = self.cached();
        let start = self.tail;
        let mut weight = 0;
        let mut n = 0;
        while n < published {
            let next = self.weight_at(start.wrapping_add(n));
            if n > 0 && weight + next > max {
                break;
            }
            out.push(self.read_slot(start.wrapping_add(n)).value);
            weight += next;
            n += 1;
        }
        if n > 0 {
            self.release_to(start.wrapping_add(n), self.weight.wrapping_add(weight));
        }
        weight
    }
}

impl<T> Drop for Consumer<T> {
    fn drop(&mut self) {
        // SYNC: pairs with the Acquire load in `Producer::is_closed`.
        self.shared.consumer_gone.store(true, Ordering::Release);
        self.shared.producer_bell.ring(Sharing::Private);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn capacity_rounds_up_and_zero_is_refused() {
        assert!(channel::<u8>(0).is_none());
        let (p, _c) = channel::<u8>(5).unwrap();
        assert_eq!(p.capacity(), 8);
        let (p, _c) = channel::<u8>(1).unwrap();
        assert_eq!(p.capacity(), 2);
    }

    #[test]
    fn fills_refuses_then_drains_in_order() {
        let (mut p, mut c) = channel::<u32>(4).unwrap();
        assert_eq!(p.free(), 4);
        for i in 0..4 {
            p.try_push(i).unwrap();
        }
        assert_eq!(p.free(), 0);
        assert_eq!(p.try_push(9), Err(PushError::Full(9)));
        let mut out = Vec::new();
        assert_eq!(c.pop_batch(3, &mut out), 3);
        assert_eq!(out, vec![0, 1, 2]);
        p.try_push(4).unwrap();
        assert_eq!(c.try_pop(), Some(3));
        assert_eq!(c.try_pop(), Some(4));
        assert_eq!(c.try_pop(), None);
    }

    #[test]
    fn weights_bound_the_queue_and_a_batch_pop() {
        let (mut p, mut c) = channel::<&str>(8).unwrap();
        p.write_weighed("five", 5).unwrap();
        assert_eq!(p.free(), 3);
        assert_eq!(p.write_weighed("four", 4), Err(PushError::Full("four")));
        p.write_weighed("three", 3).unwrap();
        assert_eq!(p.free(), 0);
        assert_eq!(p.write("one"), Err(PushError::Full("one")));
        p.publish();
        assert_eq!(c.available(), 2);
        assert_eq!(c.available_weight(), 8);
        // The first value goes even when heavier than asked for; the next only if it fits.
        let mut out = Vec::new();
        assert_eq!(c.pop_batch(2, &mut out), 5);
        assert_eq!(out, ["five"]);
        assert_eq!(p.free(), 5);
        // A value heavier than the queue counts as the whole queue.
        assert_eq!(p.write_weighed("huge", 100), Err(PushError::Full("huge")));
        assert_eq!(c.pop_batch(8, &mut out), 3);
        p.write_weighed("huge", 100).unwrap();
        assert_eq!(p.free(), 0);
        p.publish();
        assert_eq!(c.pop_batch(1, &mut out), 8);
        assert_eq!(out, ["five", "three", "huge"]);
    }

    #[test]
    fn unpublished_writes_are_invisible() {
        let (mut p, mut c) = channel::<u32>(4).unwrap();
        p.write(1).unwrap();
        p.write(2).unwrap();
        assert_eq!(c.available(), 0);
        p.publish();
        assert_eq!(c.available(), 2);
    }

    #[test]
    fn dropping_an_end_closes_the_queue() {
        let (mut p, c) = channel::<String>(4).unwrap();
        p.try_push("a".into()).unwrap();
        drop(c);
        assert!(p.is_closed());
        assert_eq!(p.try_push("b".into()), Err(PushError::Closed("b".into())));

        let (mut p, mut c) = channel::<String>(4).unwrap();
        p.write("x".into()).unwrap();
        drop(p);
        assert!(c.is_closed());
        assert_eq!(c.try_pop().as_deref(), Some("x"));
        assert_eq!(c.try_pop(), None);
    }

    #[test]
    fn leftover_values_are_dropped_once() {
        let marker = std::sync::Arc::new(());
        let (mut p, mut c) = channel(8).unwrap();
        for _ in 0..5 {
            p.try_push(marker.clone()).unwrap();
        }
        drop(c.try_pop());
        drop(p);
        drop(c);
        assert_eq!(std::sync::Arc::strong_count(&marker), 1);
    }

    /// Far longer than the watchdog: a wait ends in time only if something wakes it.
    const LONG: std::time::Duration = std::time::Duration::from_secs(3600);
    const WATCHDOG: std::time::Duration = std::time::Duration::from_secs(30);

    #[test]
    fn a_park_that_nothing_wakes_times_out() {
        let (mut p, mut c) = channel::<u32>(2).unwrap();
        let short = std::time::Duration::from_millis(1);
        assert_eq!(c.park(short), Wakeup::TimedOut);
        p.try_push(1).unwrap();
        p.try_push(2).unwrap();
        assert_eq!(p.park(short), Wakeup::TimedOut);
        // With its condition true, neither sleeps.
        assert_eq!(c.park(LONG), Wakeup::Ready);
        assert_eq!(c.try_pop(), Some(1));
        assert_eq!(p.park(LONG), Wakeup::Ready);
    }

    #[test]
    fn a_parked_consumer_is_woken_by_a_publish_and_by_the_producer_leaving() {
        let (mut p, mut c) = channel::<u32>(4).unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            while !(c.is_closed() && c.available() == 0) {
                match c.try_pop() {
                    Some(v) => got.push(v),
                    None => {
                        c.park(LONG);
                    }
                }
            }
            let _ = done.send(got);
        });
        for v in 0..3 {
            // Give the consumer time to park between values; correctness does not depend on it.
            std::thread::sleep(std::time::Duration::from_millis(2));
            p.try_push(v).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        drop(p);
        let got = finished
            .recv_timeout(WATCHDOG)
            .expect("watchdog: the consumer stayed parked");
        assert_eq!(got, vec![0, 1, 2]);
    }

    #[test]
    fn a_parked_producer_is_woken_by_a_release_and_by_the_consumer_leaving() {
        let (mut p, mut c) = channel::<u32>(2).unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = 0;
            let closed = loop {
                match p.try_push(sent) {
                    Ok(()) => sent += 1,
                    Err(PushError::Full(_)) => {
                        p.park(LONG);
                    }
                    Err(PushError::Closed(_)) => break sent,
                }
            };
            let _ = done.send(closed);
        });
        for expected in 0..4 {
            std::thread::sleep(std::time::Duration::from_millis(2));
            while c.available() == 0 {
                std::thread::yield_now();
            }
            assert_eq!(c.try_pop(), Some(expected));
        }
        drop(c);
        let sent = finished
            .recv_timeout(WATCHDOG)
            .expect("watchdog: the producer stayed parked");
        assert!(sent >= 4);
    }

    #[test]
    fn two_threads_move_a_million_values_in_order() {
        let (mut p, mut c) = channel::<u64>(64).unwrap();
        const N: u64 = if cfg!(miri) { 500 } else { 200_000 };
        let writer = std::thread::spawn(move || {
            for i in 0..N {
                let mut v = i;
                loop {
                    match p.write(v) {
                        Ok(()) => break,
                        Err(PushError::Full(back)) => {
                            p.publish();
                            v = back;
                            std::thread::yield_now();
                        }
                        Err(PushError::Closed(_)) => panic!("consumer vanished"),
                    }
                }
                if i % 16 == 0 {
                    p.publish();
                }
            }
        });
        let mut next = 0;
        let mut buf = Vec::new();
        while next < N {
            buf.clear();
            if c.pop_batch(32, &mut buf) == 0 {
                if c.is_closed() && c.available() == 0 {
                    break;
                }
                std::thread::yield_now();
            }
            for v in &buf {
                assert_eq!(*v, next);
                next += 1;
            }
        }
        writer.join().unwrap();
        assert_eq!(next, N);
    }
}
