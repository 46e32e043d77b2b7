//! `loom` models of the SPSC queue: every interleaving of one producer and one consumer over a
//! two-slot queue, covering publish/consume, wrap-around, full and close, weighed values (a
//! run of tuples as one value) bounding the queue and the batch read by weight, and both ends
//! parking on their doorbells (with a bounded number of preemptions, see
//! `sluice_sync::check_model`).
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p sluice-ring --test loom --release`.
#![cfg(loom)]

use std::time::Duration;

use loom::thread;
use sluice_ring::spsc::{channel, PushError};

/// Pushes `values` in order, retrying while full; stops early if the consumer is gone.
fn push_all(p: &mut sluice_ring::spsc::Producer<u32>, values: &[u32]) {
    for &v in values {
        let mut v = v;
        loop {
            match p.try_push(v) {
                Ok(()) => break,
                Err(PushError::Full(back)) => {
                    v = back;
                    thread::yield_now();
                }
                Err(PushError::Closed(_)) => return,
            }
        }
    }
}

#[test]
fn values_arrive_in_order_across_wrap_and_full() {
    loom::model(|| {
        let (mut p, mut c) = channel::<u32>(2).unwrap();
        let producer = thread::spawn(move || push_all(&mut p, &[1, 2, 3]));
        let mut got = Vec::new();
        loop {
            if let Some(v) = c.try_pop() {
                got.push(v);
                continue;
            }
            if c.is_closed() && c.available() == 0 {
                break;
            }
            thread::yield_now();
        }
        producer.join().unwrap();
        assert_eq!(got, vec![1, 2, 3]);
    });
}

#[test]
fn batch_publish_and_batch_pop_see_whole_batches() {
    loom::model(|| {
        let (mut p, mut c) = channel::<u32>(2).unwrap();
        let producer = thread::spawn(move || {
            p.write(7).unwrap();
            p.write(8).unwrap();
            p.publish();
        });
        let mut out = Vec::new();
        while out.len() < 2 {
            if c.pop_batch(2, &mut out) == 0 {
                thread::yield_now();
            }
        }
        producer.join().unwrap();
        assert_eq!(out, vec![7, 8]);
    });
}

#[test]
fn a_consumer_that_leaves_closes_the_queue_for_the_producer() {
    loom::model(|| {
        let (mut p, c) = channel::<u32>(2).unwrap();
        let consumer = thread::spawn(move || drop(c));
        let mut refused = false;
        for v in 0..3 {
            match p.try_push(v) {
                Ok(()) => {}
                Err(PushError::Closed(_)) => {
                    refused = true;
                    break;
                }
                Err(PushError::Full(_)) => {}
            }
        }
        consumer.join().unwrap();
        // Once the consumer is gone and joined, a push must be refused as closed.
        assert!(refused || matches!(p.try_push(9), Err(PushError::Closed(9))));
    });
}

/// A park timeout the models never reach: under `loom` a park sleeps until it is woken, so a
/// lost wake-up is a deadlock `loom` reports.
const FOREVER: Duration = Duration::from_secs(3600);

#[test]
fn both_ends_park_and_neither_sleeps_forever() {
    // Three values through two slots: the producer parks when full, the consumer when empty,
    // and each wakes the other by publishing, releasing or leaving.
    sluice_sync::check_model(|| {
        let (mut p, mut c) = channel::<u32>(2).unwrap();
        let producer = thread::spawn(move || {
            for v in 1..=3 {
                let mut v = v;
                loop {
                    match p.try_push(v) {
                        Ok(()) => break,
                        Err(PushError::Full(back)) => {
                            v = back;
                            p.park(FOREVER);
                        }
                        Err(PushError::Closed(_)) => panic!("the consumer left early"),
                    }
                }
            }
        });
        let mut got = Vec::new();
        loop {
            if c.pop_batch(2, &mut got) > 0 {
                continue;
            }
            if c.is_closed() && c.available() == 0 {
                break;
            }
            c.park(FOREVER);
        }
        producer.join().unwrap();
        assert_eq!(got, vec![1, 2, 3]);
    });
}

#[test]
fn a_producer_parked_on_a_full_queue_wakes_when_the_consumer_leaves() {
    sluice_sync::check_model(|| {
        let (mut p, c) = channel::<u32>(2).unwrap();
        p.try_push(1).unwrap();
        p.try_push(2).unwrap();
        let consumer = thread::spawn(move || drop(c));
        while !p.is_closed() {
            p.park(FOREVER);
        }
        consumer.join().unwrap();
    });
}

#[test]
fn weighed_values_fill_the_queue_and_a_parked_producer_wakes_for_weight() {
    // A value of weight 2 fills both units of a two-slot queue although one slot stays free:
    // the producer must park until the consumer reads it, and be woken by that read. The
    // consumer reads by weight, one unit at a time (the first value always goes).
    sluice_sync::check_model(|| {
        let (mut p, mut c) = channel::<u32>(2).unwrap();
        let producer = thread::spawn(move || {
            for (v, weight) in [(1, 2), (2, 1), (3, 1)] {
                let mut v = v;
                loop {
                    match p.write_weighed(v, weight) {
                        Ok(()) => break,
                        Err(PushError::Full(back)) => {
                            v = back;
                            p.park(FOREVER);
                        }
                        Err(PushError::Closed(_)) => panic!("the consumer left early"),
                    }
                }
                p.publish();
            }
        });
        let (mut got, mut weight) = (Vec::new(), 0);
        loop {
            let moved = c.pop_batch(1, &mut got);
            if moved > 0 {
                weight += moved;
                continue;
            }
            if c.is_closed() && c.available() == 0 {
                break;
            }
            c.park(FOREVER);
        }
        producer.join().unwrap();
        assert_eq!(got, vec![1, 2, 3]);
        assert_eq!(weight, 4);
    });
}
