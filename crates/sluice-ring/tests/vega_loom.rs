//! `loom` models of the Vega ring: every interleaving of one producer and one consumer over a
//! one- or two-slot ring, covering publish/consume, wrap-around, full, batches, zero-copy
//! claims, close from either side and poison, and both ends parking on their doorbells (with a
//! bounded number of preemptions, see `sluice_sync::check_model`). Besides the header atomics, `loom` tracks each
//! slot's accesses (see the module doc of `sluice_ring::vega`), so a slot read that the index
//! protocol does not order after its write, or a rewrite not ordered after its release, fails
//! the model.
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p sluice-ring --test vega_loom --release`.
#![cfg(loom)]

use std::time::Duration;

use loom::thread;
use sluice_ring::memory::HeapMemory;
use sluice_ring::vega::{
    channel, PoisonReason, VegaConsumer, VegaLayout, VegaProducer, VegaRecvError, VegaSendError,
};

fn ring(slot_bytes: usize, slots: usize) -> (VegaProducer<HeapMemory>, VegaConsumer<HeapMemory>) {
    channel(VegaLayout::new(slot_bytes, slots).unwrap()).unwrap()
}

/// Puts `tuples` in order, retrying while full; stops early if the consumer is gone.
fn put_all(p: &mut VegaProducer<HeapMemory>, tuples: &[&[u8]]) {
    for t in tuples {
        loop {
            match p.put(t) {
                Ok(()) => break,
                Err(VegaSendError::Full) => thread::yield_now(),
                Err(VegaSendError::Closed) => return,
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
    }
}

/// Gets and releases one tuple at a time until the producer is gone and the ring drained.
fn drain(c: &mut VegaConsumer<HeapMemory>) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    loop {
        match c.get() {
            Ok(Some(t)) => {
                got.push(t.to_vec());
                c.release();
            }
            Ok(None) => thread::yield_now(),
            Err(VegaRecvError::Closed) => return got,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
}

#[test]
fn tuples_arrive_whole_and_in_order_across_wrap_and_full() {
    loom::model(|| {
        let (mut p, mut c) = ring(4, 2);
        let producer = thread::spawn(move || put_all(&mut p, &[b"ab", b"cde", b"f"]));
        let got = drain(&mut c);
        producer.join().unwrap();
        assert_eq!(got, vec![b"ab".to_vec(), b"cde".to_vec(), b"f".to_vec()]);
    });
}

#[test]
fn a_one_slot_ring_alternates_through_zero_copy_claims() {
    loom::model(|| {
        let (mut p, mut c) = ring(2, 1);
        let producer = thread::spawn(move || {
            for v in [1u8, 2] {
                loop {
                    match p.claim(2) {
                        Ok(mut claim) => {
                            claim.copy_from_slice(&[v, v]);
                            claim.commit();
                            break;
                        }
                        Err(VegaSendError::Full) => thread::yield_now(),
                        Err(e) => panic!("unexpected {e:?}"),
                    }
                }
            }
        });
        let got = drain(&mut c);
        producer.join().unwrap();
        assert_eq!(got, vec![vec![1, 1], vec![2, 2]]);
    });
}

#[test]
fn a_batch_published_with_one_store_is_seen_whole_and_released_with_one() {
    loom::model(|| {
        let (mut p, mut c) = ring(1, 2);
        let producer = thread::spawn(move || {
            p.write(b"x").unwrap();
            p.write(b"y").unwrap();
            p.publish();
            // The ring is full until the consumer's single release frees both slots.
            while !p.ready_to_send() {
                thread::yield_now();
            }
            p.put_batch(&[b"z"]).unwrap();
        });
        loop {
            let batch: Vec<&[u8]> = c.get_batch(2).unwrap().collect();
            match batch.len() {
                0 => thread::yield_now(),
                2 => {
                    assert_eq!(batch, vec![&b"x"[..], &b"y"[..]]);
                    break;
                }
                n => panic!("saw {n} tuples of a batch published at once"),
            }
        }
        c.release();
        let rest = drain(&mut c);
        producer.join().unwrap();
        assert_eq!(rest, vec![b"z".to_vec()]);
    });
}

#[test]
fn staged_tuples_of_a_dropped_producer_are_delivered_before_closed() {
    loom::model(|| {
        let (mut p, mut c) = ring(1, 2);
        let producer = thread::spawn(move || {
            p.put(b"a").unwrap();
            p.write(b"b").unwrap();
            drop(p);
        });
        let got = drain(&mut c);
        producer.join().unwrap();
        assert_eq!(got, vec![b"a".to_vec(), b"b".to_vec()]);
    });
}

#[test]
fn a_consumer_that_leaves_closes_the_ring_for_the_producer() {
    loom::model(|| {
        let (mut p, c) = ring(1, 1);
        let consumer = thread::spawn(move || drop(c));
        let mut closed = false;
        for _ in 0..2 {
            match p.put(b"v") {
                Ok(()) | Err(VegaSendError::Full) => {}
                Err(VegaSendError::Closed) => {
                    closed = true;
                    break;
                }
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
        consumer.join().unwrap();
        assert!(closed || p.put(b"w") == Err(VegaSendError::Closed));
    });
}

#[test]
fn poison_reaches_a_waiting_consumer() {
    loom::model(|| {
        let (p, mut c) = ring(1, 1);
        let producer = thread::spawn(move || {
            p.poison();
            // Keep the producer alive past the poison so the consumer cannot see "closed".
            p
        });
        loop {
            match c.get() {
                Ok(None) => thread::yield_now(),
                Err(VegaRecvError::Poisoned(PoisonReason::Requested)) => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        drop(producer.join().unwrap());
    });
}

/// A park timeout the models never reach: under `loom` a park sleeps until it is woken, so a
/// lost wake-up is a deadlock `loom` reports.
const FOREVER: Duration = Duration::from_secs(3600);

#[test]
fn both_ends_park_and_neither_sleeps_forever() {
    // Three tuples through a two-slot ring, published one by one and received in batches: the
    // producer parks when full, the consumer when empty, and each wakes the other by
    // publishing, releasing or leaving.
    sluice_sync::check_model(|| {
        let (mut p, mut c) = ring(1, 2);
        let producer = thread::spawn(move || {
            for t in [b"a", b"b", b"c"] {
                loop {
                    match p.put(t) {
                        Ok(()) => break,
                        Err(VegaSendError::Full) => {
                            p.park(FOREVER);
                        }
                        Err(e) => panic!("unexpected {e:?}"),
                    }
                }
            }
        });
        let mut got = Vec::new();
        loop {
            match c.get_batch(2) {
                Ok(batch) if batch.len() > 0 => got.extend(batch.map(<[u8]>::to_vec)),
                Ok(_) => {
                    c.park(FOREVER);
                }
                Err(VegaRecvError::Closed) => break,
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
        producer.join().unwrap();
        assert_eq!(got, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    });
}

#[test]
fn poison_wakes_a_parked_consumer() {
    sluice_sync::check_model(|| {
        let (p, mut c) = ring(1, 1);
        let producer = thread::spawn(move || {
            p.poison();
            p
        });
        loop {
            match c.get() {
                Ok(None) => {
                    c.park(FOREVER);
                }
                Err(VegaRecvError::Poisoned(PoisonReason::Requested)) => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        drop(producer.join().unwrap());
    });
}
