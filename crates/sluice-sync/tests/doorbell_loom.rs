//! `loom` models of the doorbell protocol: a waiter that parks while its condition is false and
//! a ringer that makes it true and rings, in every interleaving. The futex stand-in under
//! `loom` has no timeout, so a lost wake-up leaves the waiter asleep forever, which `loom`
//! reports as a deadlock.
//!
//! The models explore every interleaving with up to three preemptions
//! ([`sluice_sync::check_model`]); the unbounded search of the three-thread model takes hours.
//! The bound still catches the protocol's known failure modes: with the ringer's fence
//! removed, or with the waiter reading the epoch separately from its announcement, these
//! models deadlock.
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p sluice-sync --test doorbell_loom --release`.
#![cfg(loom)]

use std::time::Duration;

use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;
use sluice_sync::{check_model as check, Doorbell, Sharing};

/// Never reached under `loom`: the model's wait ignores it.
const FOREVER: Duration = Duration::from_secs(3600);

/// Parks on `bell` until `published` reaches `target`.
fn wait_for(bell: &Doorbell, published: &AtomicU32, target: u32) {
    // SYNC: pairs with the Release stores of `published` by the ringers.
    while published.load(Ordering::Acquire) < target {
        bell.wait(Sharing::Private, FOREVER, || {
            published.load(Ordering::Acquire) >= target
        });
    }
}

#[test]
fn one_ring_wakes_a_parked_waiter() {
    check(|| {
        let bell = Arc::new(Doorbell::new());
        let published = Arc::new(AtomicU32::new(0));
        let ringer = {
            let (bell, published) = (bell.clone(), published.clone());
            thread::spawn(move || {
                published.store(1, Ordering::Release);
                bell.ring(Sharing::Private);
            })
        };
        wait_for(&bell, &published, 1);
        ringer.join().unwrap();
    });
}

#[test]
fn every_one_of_several_publishes_is_seen() {
    // Two publishes, each rung: the waiter parks between them in some interleavings, and a
    // ring that found no sleeper must not leave the second publish unseen.
    check(|| {
        let bell = Arc::new(Doorbell::new());
        let published = Arc::new(AtomicU32::new(0));
        let ringer = {
            let (bell, published) = (bell.clone(), published.clone());
            thread::spawn(move || {
                for n in 1..=2 {
                    published.store(n, Ordering::Release);
                    bell.ring(Sharing::Private);
                }
            })
        };
        wait_for(&bell, &published, 1);
        wait_for(&bell, &published, 2);
        ringer.join().unwrap();
    });
}

#[test]
fn two_ringers_wake_the_waiter_once_each_is_done() {
    // Two ringers race for the announcement: whichever takes it wakes the waiter, and the
    // other's publish is still seen.
    check(|| {
        let bell = Arc::new(Doorbell::new());
        let published = Arc::new(AtomicU32::new(0));
        let ringers: Vec<_> = (0..2)
            .map(|_| {
                let (bell, published) = (bell.clone(), published.clone());
                thread::spawn(move || {
                    published.fetch_add(1, Ordering::Release);
                    bell.ring(Sharing::Private);
                })
            })
            .collect();
        wait_for(&bell, &published, 2);
        for ringer in ringers {
            ringer.join().unwrap();
        }
    });
}
