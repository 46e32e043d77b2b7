//! A doorbell: one thread sleeps until another rings, with no lost wake-up; a futex under the
//! hood, usable between threads of one process or between processes sharing the memory.
//!
//! A polling reader that found nothing for a while parks on the doorbell of the queue it reads;
//! the writer rings it after every publish. Waking a sleeping thread costs a system call on
//! both sides, so the doorbell is built for a writer that almost never has to make one: its
//! [`Doorbell::ring`] is a fence and one load of a word that only changes when the reader
//! parks, on a cache line nothing else writes, so on a busy queue it stays in the writer's
//! cache and no system call is made.
//!
//! # Layout
//! ```text
//!  bit    field            written by
//!  -----  ---------------  -------------------------------------------------------------
//!  0      sleeping         waiter (set when it announces a wait, cleared when done), ringer
//!                          (cleared when it wakes the waiter)
//!  1..32  epoch            ringer (+1 with each wake, in the same compare-exchange)
//! ```
//! One `u32`, the futex word: `#[repr(C)]`, 4 bytes, every bit pattern valid and zero the idle
//! state, so a doorbell may live inside a shared segment (as in the Vega ring's header) and be
//! viewed in place from raw bytes. A peer that scribbles on it causes spurious or missed
//! wake-ups, both bounded by the waiter's timeout; it cannot cause memory unsafety.
//!
//! # Protocol (Dekker's, with the futex as the sleep)
//! The waiter is one thread at a time (the reader of a single-consumer queue). `ready` is the
//! condition it waits for, which a ringer makes true before ringing (data published, or the
//! peer gone).
//! ```text
//!  waiter (wait)                                  ringer (ring)
//!  W1 w = fetch_or(word, SLEEPING)                R1 make `ready` true (e.g. store head)
//!  W2 fence(SeqCst)                               R2 fence(SeqCst)
//!  W3 if ready(): goto W5                         R3 if load(word) has SLEEPING:
//!  W4 futex_wait(word, expect w | SLEEPING)       R4    compare-exchange word to
//!  W5 fetch_and(word, !SLEEPING)                           (epoch + 1, not sleeping)
//!                                                 R5    futex_wake(word)
//! ```
//! No lost wake-up: the two SeqCst fences are ordered one way or the other.
//! - R2 before W2: W3's check follows W2, so it sees R1's store, and the waiter does not sleep.
//! - W2 before R2: R3's load follows R2, so it reads W1's announcement or a later value of the
//!   word. A later value comes from the waiter's W5, reached only once its wait is over, or
//!   from a ringer's R4, which changed the word after W1 (so the wait below returns). If R3 sees
//!   the announcement, R4 changes the word after W1 too. The kernel compares the word with
//!   `w | SLEEPING` atomically with queueing the waiter (both under the futex's hash-bucket
//!   lock): either the change is already there and the wait returns at once, or the waiter is
//!   queued before R5 runs and R5 wakes it.
//!
//! The announcement and the epoch the waiter sleeps on are one word, read and set by one
//! atomic W1. That is what makes a ringer's compare-exchange safe even when it takes an
//! announcement newer than the one its load saw: whichever announcement it clears, it also
//! moves the epoch past the value that waiter sleeps on. (A separate flag and futex word fail
//! here, and the `loom` model finds it: a ringer clears the waiter's next announcement, the
//! waiter reads the already bumped futex word, sleeps on it, and the next ring finds no
//! announcement.)
//!
//! A ringer wakes once per announcement: later rings find `SLEEPING` clear and stay on the
//! fast path until the waiter announces itself again. A timeout bounds every wait, so a
//! waiter that also polls other things (other receivers, a source, a stop flag) comes back to
//! them, and a peer that died without ringing costs at most one timeout. The epoch wraps
//! after 2^31 wakes; a wait would need that many to pass between W1 and W4 to miss a ring.
//!
//! # How `loom` checks it
//! `loom` has no futex. Under `cfg(loom)` the futex is a mutex (the kernel's hash-bucket lock)
//! and a condition variable: `futex_wait` compares the word under the mutex and waits on the
//! condition variable, `futex_wake` notifies under the mutex. The model's wait has no timeout,
//! so a lost wake-up is a thread that never wakes, which `loom` reports as a deadlock. The
//! models (this crate's `doorbell_loom` test, and `sluice-ring`'s over the real queues) run
//! every interleaving up to a bound of preemptions ([`crate::check_model`]).
//!
//! Miri runs the same emulation with `std`'s mutex and condition variable (and the timeout):
//! it rejects the variadic `syscall` rustix makes under Miri.

use std::time::Duration;

use crate::atomic::{fence, AtomicU32, Ordering};

/// Whether the threads that wait on and ring a doorbell are in one process or several.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// Threads of one process: a private futex (the kernel keys it by address space).
    Private,
    /// Processes mapping the same shared memory: a shared futex (keyed by the page).
    Shared,
}

/// How a [`Doorbell::wait`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wakeup {
    /// The condition held when checked after announcing the wait: no sleep.
    Ready,
    /// The doorbell rang (before or during the sleep), or the sleep ended spuriously.
    Woken,
    /// The timeout passed without a ring.
    TimedOut,
}

/// The `sleeping` bit of the word.
const SLEEPING: u32 = 1;
/// One step of the epoch, in the bits above `sleeping`.
const EPOCH: u32 = 2;

/// A doorbell one waiter parks on and any number of ringers ring; see the module doc.
#[repr(C)]
pub struct Doorbell {
    /// The futex word: `epoch << 1 | sleeping`.
    word: AtomicU32,
    #[cfg(loom)]
    futex: emulated::Futex,
}

#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<Doorbell>() == 4);
    assert!(std::mem::align_of::<Doorbell>() == 4);
};

impl std::fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let word = self.word.load(Ordering::Relaxed);
        f.debug_struct("Doorbell")
            .field("sleeping", &(word & SLEEPING != 0))
            .field("epoch", &(word >> 1))
            .finish()
    }
}

impl Default for Doorbell {
    fn default() -> Self {
        Self::new()
    }
}

impl Doorbell {
    /// A doorbell nobody waits on (all zeros, as in fresh shared memory).
    pub fn new() -> Self {
        Self {
            word: AtomicU32::new(0),
            #[cfg(loom)]
            futex: emulated::Futex::new(),
        }
    }

    /// Wakes the waiter if it is parked or about to park. Call after making its condition
    /// true (after the Release store that publishes data, or that marks this end gone).
    ///
    /// The fast path is a SeqCst fence and one load of a word that changes only when the
    /// waiter parks.
    #[inline]
    pub fn ring(&self, sharing: Sharing) {
        // SYNC: R2 of the protocol: orders the caller's store that made `ready` true (R1)
        // before the load below; pairs with the waiter's fence W2 in `wait`.
        fence(Ordering::SeqCst);
        // SYNC: R3: Relaxed: the fences order it against the waiter's announcement W1.
        let word = self.word.load(Ordering::Relaxed);
        if word & SLEEPING != 0 {
            self.wake(word, sharing);
        }
    }

    #[cold]
    #[inline(never)]
    fn wake(&self, mut word: u32, sharing: Sharing) {
        loop {
            if word & SLEEPING == 0 {
                // The waiter withdrew, or another ringer woke it.
                return;
            }
            // SYNC: R4: the compare-exchange orders this change after the announcement it
            // clears (W1) and after any competing ringer's; the fences carry the data, so
            // Relaxed is enough. The kernel reads the word with full barriers.
            match self.word.compare_exchange_weak(
                word,
                (word & !SLEEPING).wrapping_add(EPOCH),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => word = now,
            }
        }
        futex_wake(self, sharing);
    }

    /// Parks the calling thread until the doorbell rings, `ready` returns true, or `timeout`
    /// passes; `ready` is checked once, after the wait is announced, and must read the shared
    /// state a ringer changes before ringing (e.g. the queue's published position). Only one
    /// thread at a time may wait on a doorbell.
    ///
    /// May return early (a spurious wake-up): the caller polls again either way.
    pub fn wait(
        &self,
        sharing: Sharing,
        timeout: Duration,
        ready: impl FnOnce() -> bool,
    ) -> Wakeup {
        // SYNC: W1: announce the wait and read the epoch in one step; read by the ringer's R3
        // and R4 (Relaxed: the fence below does the ordering).
        let announced = self.word.fetch_or(SLEEPING, Ordering::Relaxed) | SLEEPING;
        // SYNC: W2: pairs with the ringer's fence R2 (see the module doc): either the ringer
        // sees our announcement, or our `ready` check sees its publication.
        fence(Ordering::SeqCst);
        let woke = if ready() {
            Wakeup::Ready
        } else {
            futex_wait(self, sharing, announced, timeout)
        };
        // SYNC: W5: withdraw the announcement (a no-op if a ringer cleared it); a ringer's
        // compare-exchange that races with it retries or finds the bit clear.
        self.word.fetch_and(!SLEEPING, Ordering::Relaxed);
        woke
    }
}

/// Sleeps while the word holds `expected`, at most `timeout`.
#[cfg(not(any(loom, miri)))]
fn futex_wait(bell: &Doorbell, sharing: Sharing, expected: u32, timeout: Duration) -> Wakeup {
    use rustix::io::Errno;
    use rustix::thread::futex;

    // A timeout too long for a timespec waits for the longest one that fits.
    let timeout = futex::Timespec::try_from(timeout).unwrap_or(futex::Timespec {
        tv_sec: futex::Secs::MAX,
        tv_nsec: 0,
    });
    match futex::wait(&bell.word, flags(sharing), expected, Some(&timeout)) {
        Err(Errno::TIMEDOUT) => Wakeup::TimedOut,
        // Woken, or the word had already moved on (EAGAIN), or a signal (EINTR).
        _ => Wakeup::Woken,
    }
}

/// Wakes every thread sleeping on the word.
#[cfg(not(any(loom, miri)))]
fn futex_wake(bell: &Doorbell, sharing: Sharing) {
    // The only possible errors are for a bad address, which a reference cannot be.
    let _ = rustix::thread::futex::wake(&bell.word, flags(sharing), u32::MAX);
}

#[cfg(not(any(loom, miri)))]
fn flags(sharing: Sharing) -> rustix::thread::futex::Flags {
    match sharing {
        Sharing::Private => rustix::thread::futex::Flags::PRIVATE,
        Sharing::Shared => rustix::thread::futex::Flags::empty(),
    }
}

#[cfg(loom)]
fn futex_wait(bell: &Doorbell, _sharing: Sharing, expected: u32, timeout: Duration) -> Wakeup {
    bell.futex.wait(&bell.word, expected, timeout)
}

#[cfg(loom)]
fn futex_wake(bell: &Doorbell, _sharing: Sharing) {
    bell.futex.wake();
}

/// Under Miri, one emulated futex for every doorbell (all words hash to one bucket): Miri
/// rejects the variadic `syscall` rustix makes under it. Threads of one process only, which is
/// all Miri runs.
#[cfg(all(miri, not(loom)))]
static FUTEX: emulated::Futex = emulated::Futex::new();

#[cfg(all(miri, not(loom)))]
fn futex_wait(bell: &Doorbell, _sharing: Sharing, expected: u32, timeout: Duration) -> Wakeup {
    FUTEX.wait(&bell.word, expected, timeout)
}

#[cfg(all(miri, not(loom)))]
fn futex_wake(_bell: &Doorbell, _sharing: Sharing) {
    FUTEX.wake();
}

/// A futex made of a mutex (the kernel's hash-bucket lock) and a condition variable (its queue
/// of sleepers): `loom`'s under `loom`, which it can check, and `std`'s under Miri.
#[cfg(any(loom, miri))]
mod emulated {
    use std::time::Duration;

    #[cfg(loom)]
    use loom::sync::{Condvar, Mutex};
    #[cfg(not(loom))]
    use std::sync::{Condvar, Mutex};

    use super::Wakeup;
    use crate::atomic::{AtomicU32, Ordering};

    pub(super) struct Futex {
        bucket: Mutex<()>,
        sleepers: Condvar,
    }

    impl Futex {
        #[cfg(loom)]
        pub(super) fn new() -> Self {
            Self {
                bucket: Mutex::new(()),
                sleepers: Condvar::new(),
            }
        }

        #[cfg(not(loom))]
        pub(super) const fn new() -> Self {
            Self {
                bucket: Mutex::new(()),
                sleepers: Condvar::new(),
            }
        }

        /// `FUTEX_WAIT`: compares the word and queues the caller under the bucket lock, so a
        /// wake after the comparison finds the caller queued. Under `loom` the timeout is
        /// ignored, so a lost wake-up is a thread that never wakes: a deadlock `loom` reports.
        pub(super) fn wait(&self, word: &AtomicU32, expected: u32, timeout: Duration) -> Wakeup {
            let queued = self.bucket.lock().unwrap();
            // SYNC: the kernel reads the word under the bucket lock; the lock orders this
            // load after the change of a waker that took the lock first.
            if word.load(Ordering::Acquire) != expected {
                return Wakeup::Woken;
            }
            #[cfg(loom)]
            {
                let _ = timeout;
                drop(self.sleepers.wait(queued).unwrap());
                Wakeup::Woken
            }
            #[cfg(not(loom))]
            {
                let (_bucket, waited) = self.sleepers.wait_timeout(queued, timeout).unwrap();
                if waited.timed_out() {
                    Wakeup::TimedOut
                } else {
                    Wakeup::Woken
                }
            }
        }

        /// `FUTEX_WAKE` of every sleeper, under the bucket lock.
        pub(super) fn wake(&self) {
            let _bucket = self.bucket.lock().unwrap();
            self.sleepers.notify_all();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn a_wait_with_its_condition_true_does_not_sleep() {
        let bell = Doorbell::new();
        assert_eq!(
            bell.wait(Sharing::Private, Duration::from_secs(60), || true),
            Wakeup::Ready
        );
        assert_eq!(bell.word.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_wait_nobody_rings_times_out() {
        let bell = Doorbell::new();
        for sharing in [Sharing::Private, Sharing::Shared] {
            assert_eq!(
                bell.wait(sharing, Duration::from_millis(1), || false),
                Wakeup::TimedOut
            );
        }
    }

    #[test]
    fn a_ring_with_nobody_waiting_changes_nothing() {
        let bell = Doorbell::new();
        bell.ring(Sharing::Private);
        assert_eq!(bell.word.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_parked_thread_is_woken_by_a_ring() {
        for sharing in [Sharing::Private, Sharing::Shared] {
            let bell = Arc::new(Doorbell::new());
            let flag = Arc::new(AtomicBool::new(false));
            let (done, finished) = std::sync::mpsc::channel();
            {
                let (bell, flag) = (bell.clone(), flag.clone());
                std::thread::spawn(move || {
                    // Each wait is far longer than the watchdog: only a ring ends it in time.
                    while !flag.load(Ordering::Acquire) {
                        bell.wait(sharing, Duration::from_secs(3600), || {
                            flag.load(Ordering::Acquire)
                        });
                    }
                    let _ = done.send(());
                });
            }
            // Ring only once the waiter has announced itself, so the wake path is taken.
            while bell.word.load(Ordering::Relaxed) & SLEEPING == 0 {
                std::thread::yield_now();
            }
            flag.store(true, Ordering::Release);
            bell.ring(sharing);
            finished
                .recv_timeout(Duration::from_secs(30))
                .expect("watchdog: the ring did not wake the parked thread");
        }
    }
}
