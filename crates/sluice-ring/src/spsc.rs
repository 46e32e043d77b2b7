//! A bounded single-producer single-consumer queue: the threaded port.
//!
//! Why hand-written: `crossbeam`'s queues are multi-producer and pay for it with a CAS or a
//! sequence per slot; a threaded port has exactly one writer and one reader, so the classic
//! Lamport ring with cached indices (the Disruptor / rigtorp idiom) moves a tuple with one
//! plain store into the slot and, per *batch*, one release store of an index.
//!
//! ```text
//!   head (producer's line)   tail (consumer's line)   closed flags (own line)
//!   slots: [ T | T | T | . | . | . | T ]   index = position & mask
//!            ^tail           ^head
//! ```
//! - `head` and `tail` are positions that only grow (wrapping `usize`); the queue holds
//!   `head - tail` items and is full when that equals the capacity (a power of two).
//! - Each side keeps a private copy of the other's position and rereads the shared one only
//!   when its copy says full (producer) or empty (consumer), so in steady state the two cores
//!   exchange one cache line per batch, not per tuple.
//! - [`Producer::write`] fills a slot without publishing it; [`Producer::publish`] makes all
//!   written slots visible with one release store. [`Consumer::pop_batch`] reads many slots and
//!   frees them with one release store.
//! - Dropping either end marks the queue closed, so the other end never waits forever.
//! - Either end may park (sleep in the kernel) until the other makes progress:
//!   [`Consumer::park`] until something is published, [`Producer::park`] until a slot is
//!   freed. Each side has a [`Doorbell`] on its own line; the producer rings the consumer's
//!   after every publish and the consumer rings the producer's after every release, which
//!   costs a fence and a load of a line that stays cached while nobody parks (the doorbell's
//!   module doc argues why no wake-up is lost). Both are private futexes: the queue never
//!   leaves its process.

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

struct Shared<T> {
    /// Next position the producer writes. Written only by the producer.
    head: CachePadded<AtomicUsize>,
    /// Next position the consumer reads. Written only by the consumer.
    tail: CachePadded<AtomicUsize>,
    producer_gone: CachePadded<AtomicBool>,
    consumer_gone: AtomicBool,
    /// Where the consumer parks; rung by the producer after a publish and when it leaves.
    consumer_bell: CachePadded<Doorbell>,
    /// Where the producer parks; rung by the consumer after a release and when it leaves.
    producer_bell: CachePadded<Doorbell>,
    mask: usize,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
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
        let head = self.head.load(Ordering::Relaxed);
        let mut pos = self.tail.load(Ordering::Relaxed);
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
/// least 2). Returns `None` for a capacity of 0 or one too large to allocate.
pub fn channel<T: Send>(capacity: usize) -> Option<(Producer<T>, Consumer<T>)> {
    if capacity == 0 {
        return None;
    }
    let capacity = capacity.max(2).checked_next_power_of_two()?;
    let slots = (0..capacity)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect();
    let shared = Arc::new(Shared {
        head: CachePadded::new(AtomicUsize::new(0)),
        tail: CachePadded::new(AtomicUsize::new(0)),
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
            published: 0,
            cached_tail: 0,
        },
        Consumer {
            shared,
            tail: 0,
            cached_head: 0,
        },
    ))
}

/// The writing end of a queue.
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
    /// Next position to write (may be ahead of what is published).
    head: usize,
    /// Last position stored to `shared.head`.
    published: usize,
    /// The consumer's `tail` as last read.
    cached_tail: usize,
}

impl<T: Send> Producer<T> {
    /// The number of slots.
    pub fn capacity(&self) -> usize {
        self.shared.mask + 1
    }

    /// Whether a slot is free now (rereads the consumer's position if needed).
    pub fn has_room(&mut self) -> bool {
        if self.head.wrapping_sub(self.cached_tail) < self.capacity() {
            return true;
        }
        // SYNC: pairs with the Release store of `tail` in `Consumer::release_to`, so the
        // consumer's reads of the slots before `tail` happened before we overwrite them.
        self.cached_tail = self.shared.tail.load(Ordering::Acquire);
        self.head.wrapping_sub(self.cached_tail) < self.capacity()
    }

    /// How many values can be written now without refusal (rereads the consumer's position
    /// when the cached one shows less than a full queue free).
    pub fn free(&mut self) -> usize {
        let cached_free = self.capacity() - self.head.wrapping_sub(self.cached_tail);
        if cached_free == self.capacity() {
            return cached_free;
        }
        // SYNC: pairs with the Release store of `tail` in `Consumer::release_to`.
        self.cached_tail = self.shared.tail.load(Ordering::Acquire);
        self.capacity() - self.head.wrapping_sub(self.cached_tail)
    }

    /// Whether the consumer has gone away.
    pub fn is_closed(&self) -> bool {
        // SYNC: pairs with the Release store in `Consumer::drop`.
        self.shared.consumer_gone.load(Ordering::Acquire)
    }

    /// Writes `value` into the next slot without publishing it; call [`Producer::publish`] to
    /// make every written slot visible at once.
    #[inline]
    pub fn write(&mut self, value: T) -> Result<(), PushError<T>> {
        if self.is_closed() {
            return Err(PushError::Closed(value));
        }
        if !self.has_room() {
            return Err(PushError::Full(value));
        }
        self.shared.slots[self.head & self.shared.mask].with_mut(|slot| {
            // SAFETY: `has_room` showed `head - tail < capacity`, so the slot at `head` is not
            // in the consumer's readable range tail..published and the consumer has finished
            // reading it (Acquire on `tail` above); only this producer writes slots.
            unsafe { (*slot).write(value) };
        });
        self.head = self.head.wrapping_add(1);
        Ok(())
    }

    /// Writes the values of `values` into the next slots without publishing, as many as fit:
    /// the consumer's position is read at most once, and the values that found no slot stay
    /// in the iterator. Returns how many were written; 0 if the consumer has gone away.
    #[inline]
    pub fn write_many(&mut self, values: &mut impl Iterator<Item = T>) -> usize {
        if self.is_closed() {
            return 0;
        }
        let room = self.free();
        let start = self.head;
        for value in values.take(room) {
            self.shared.slots[self.head & self.shared.mask].with_mut(|slot| {
                // SAFETY: `free` showed `room` slots from `head` on outside the consumer's
                // readable range tail..published, and the consumer has finished reading them
                // (Acquire on `tail` in `free`); at most `room` are written here and only this
                // producer writes slots.
                unsafe { (*slot).write(value) };
            });
            self.head = self.head.wrapping_add(1);
        }
        self.head.wrapping_sub(start)
    }

    /// Makes every slot written so far visible to the consumer (one release store), and wakes
    /// the consumer if it is parked.
    #[inline]
    pub fn publish(&mut self) {
        if self.published != self.head {
            // SYNC: pairs with the Acquire load of `head` in `Consumer::available`, so the slot
            // writes above happen before the consumer reads them; and, through the doorbell's
            // fences, with the load in `Consumer::park`'s readiness check.
            self.shared.head.store(self.head, Ordering::Release);
            self.published = self.head;
            self.shared.consumer_bell.ring(Sharing::Private);
        }
    }

    /// Publishes, then sleeps until the consumer frees a slot or leaves, or `timeout` passes
    /// (or spuriously earlier): what a producer refused with `Full` does instead of spinning.
    pub fn park(&mut self, timeout: Duration) -> Wakeup {
        self.publish();
        let (shared, head) = (&self.shared, self.head);
        shared.producer_bell.wait(Sharing::Private, timeout, || {
            // SYNC: pairs with the Release stores of `tail` in `Consumer::release_to` and of
            // `consumer_gone` in `Consumer::drop`, which ring this doorbell after them.
            head.wrapping_sub(shared.tail.load(Ordering::Acquire)) <= shared.mask
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

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        if self.published != self.head {
            // SYNC: as in `publish`: written slots become visible before the close flag.
            self.shared.head.store(self.head, Ordering::Release);
        }
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
    /// The producer's published `head` as last read.
    cached_head: usize,
}

impl<T: Send> Consumer<T> {
    /// The number of values published and not yet read (rereads the producer's position).
    pub fn available(&mut self) -> usize {
        self.refresh();
        self.cached()
    }

    /// How many values the queue holds at most.
    pub fn capacity(&self) -> usize {
        self.shared.mask + 1
    }

    #[inline]
    fn cached(&self) -> usize {
        self.cached_head.wrapping_sub(self.tail)
    }

    #[inline]
    fn refresh(&mut self) {
        // SYNC: pairs with the Release store of `head` in `Producer::publish`.
        self.cached_head = self.shared.head.load(Ordering::Acquire);
    }

    /// Whether the producer has gone away. Values it published may still be queued: check
    /// [`Consumer::available`] *after* this returns true to know the queue is finished.
    pub fn is_closed(&self) -> bool {
        // SYNC: pairs with the Release store in `Producer::drop`.
        self.shared.producer_gone.load(Ordering::Acquire)
    }

    #[inline]
    fn read_slot(&self, pos: usize) -> T {
        self.shared.slots[pos & self.shared.mask].with(|slot| {
            // SAFETY: `pos` is in tail..cached_head, published by the producer with a Release
            // store we acquired in `refresh`, so the slot is initialised; the producer will
            // not touch it until we advance `tail` past it, and we read it exactly once.
            unsafe { (*slot).assume_init_read() }
        })
    }

    #[inline]
    fn release_to(&mut self, tail: usize) {
        self.tail = tail;
        // SYNC: pairs with the Acquire load of `tail` in `Producer::has_room`; our reads of the
        // slots happen before the producer reuses them. Also read by `Producer::park`.
        self.shared.tail.store(tail, Ordering::Release);
        self.shared.producer_bell.ring(Sharing::Private);
    }

    /// Sleeps until the producer publishes or leaves, or `timeout` passes (or spuriously
    /// earlier): what an idle consumer does instead of spinning.
    pub fn park(&mut self, timeout: Duration) -> Wakeup {
        let (shared, tail) = (&self.shared, self.tail);
        shared.consumer_bell.wait(Sharing::Private, timeout, || {
            // SYNC: pairs with the Release stores of `head` in `Producer::publish` and of
            // `producer_gone` in `Producer::drop`, which ring this doorbell after them.
            shared.head.load(Ordering::Acquire) != tail
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
        let value = self.read_slot(self.tail);
        self.release_to(self.tail.wrapping_add(1));
        Some(value)
    }

    /// Moves up to `max` values into `out` and frees their slots with one store; returns how
    /// many were moved.
    #[inline]
    pub fn pop_batch(&mut self, max: usize, out: &mut Vec<T>) -> usize {
        if self.cached() < max {
            self.refresh();
        }
        let n = self.cached().min(max);
        if n == 0 {
            return 0;
        }
        out.reserve(n);
        let start = self.tail;
        for i in 0..n {
            out.push(self.read_slot(start.wrapping_add(i)));
        }
        self.release_to(start.wrapping_add(n));
        n
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
