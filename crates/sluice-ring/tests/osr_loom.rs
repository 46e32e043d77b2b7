//! `loom` models of the OSR ring.
//!
//! Under `--cfg loom` the ring's control block and every word of its (64-byte) byte ring are
//! `loom` atomics, and every word also has a `loom` cell for its payload role, so these models
//! check the real protocol code: the orderings of every atomic, and that no plain payload write
//! or zeroing races with another access to the same word (see `src/osr/ring_bytes.rs`). What
//! they cover:
//! - two producers reserving by CAS on `write_pos` while one of them must flush the end of the
//!   lap, against a polling consumer;
//! - publish/consume across wrap-around and `Full` backpressure, and close in both directions;
//! - one producer's records delivered in order while the right side of the window runs;
//! - a producer dying after its claim and one dying between reserve and claim: the consumer
//!   skips each after the window and still delivers the other producer's record;
//! - a live producer racing a window of one poll: it is either delivered or told it was lost
//!   (never both, never neither), and the hole its skip leaves is reclaimed;
//! - an open batch committed shrunk (a pad word written inside it) racing the consumer's
//!   caller-driven skip (`skip_stall`): delivered and the record after its pad too, or lost;
//! - a joined producer that leaves: once the consumer sees it left, every record it committed
//!   lies below the write position it reads next, and is delivered.
//! - two producers joining at once past the 16 slots the table once had: each takes its own
//!   slot, the consumer sees both entries, and each one's record is delivered.
//!
//! Run with `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p
//! sluice-ring --test osr_loom`.
#![cfg(loom)]

use loom::thread;
use sluice_ring::memory::HeapMemory;
use sluice_ring::osr::{
    CommitError, OsrConsumer, OsrLayout, OsrProducer, OsrRing, OsrStall, PushError,
};

type Producer = OsrProducer<HeapMemory>;
type Consumer = OsrConsumer<HeapMemory>;
type Got = Vec<(u32, Vec<u8>)>;

/// Explores `f` with at most `preemption_bound` preemptions per execution (each model's bound
/// is the largest that finishes in well under a minute; `OSR_LOOM_BOUND` overrides it).
fn model(preemption_bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(
        std::env::var("OSR_LOOM_BOUND")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(preemption_bound),
    );
    builder.max_branches = 20_000;
    builder.check(f);
}

fn ring(window: u64) -> (Producer, Consumer, OsrRing<HeapMemory>) {
    let layout = OsrLayout::new(64, window).unwrap();
    let ring = OsrRing::create(HeapMemory::zeroed(layout.bytes_needed()), layout).unwrap();
    let consumer = ring.consumer().unwrap();
    (ring.producer(), consumer, ring)
}

/// Pushes one record, yielding while the ring is full.
fn push(p: &mut Producer, target: u32, bytes: &[u8]) -> Result<(), PushError> {
    loop {
        match p.try_push(target, bytes) {
            Err(PushError::Full) => thread::yield_now(),
            other => return other,
        }
    }
}

fn poll(c: &mut Consumer, got: &mut Got) -> usize {
    c.poll(usize::MAX, |r| got.push((r.target(), r.bytes().to_vec())))
        .unwrap()
}

/// Polls until `done` says so, yielding between empty polls.
fn poll_until(c: &mut Consumer, got: &mut Got, mut done: impl FnMut(&mut Consumer, &Got) -> bool) {
    while !done(c, got) {
        if poll(c, got) == 0 {
            thread::yield_now();
        }
    }
}

#[test]
fn two_producers_reserve_by_cas_and_one_flushes_the_end_of_the_lap() {
    model(3, || {
        let (mut p, mut c, _ring) = ring(u64::MAX);
        // Move both positions to offset 48: the next 24-byte record does not fit before the
        // end, so whichever producer reserves first pads the lap end with a flush record.
        let mut got = Vec::new();
        for i in 0..3u8 {
            p.try_push(9, &[i; 8]).unwrap();
        }
        poll_until(&mut c, &mut got, |_, g| g.len() == 3);
        got.clear();
        let mut q = p.clone();
        let a = thread::spawn(move || push(&mut p, 1, &[1; 16]).unwrap());
        let b = thread::spawn(move || push(&mut q, 2, &[2; 16]).unwrap());
        poll_until(&mut c, &mut got, |_, g| g.len() == 2);
        a.join().unwrap();
        b.join().unwrap();
        got.sort();
        assert_eq!(got, vec![(1, vec![1; 16]), (2, vec![2; 16])]);
        assert_eq!(c.stats().skipped_records + c.stats().skipped_spans, 0);
    });
}

#[test]
fn publish_and_consume_across_wrap_and_full_then_close() {
    model(3, || {
        let (mut p, mut c, _ring) = ring(u64::MAX);
        // Three 24-byte records through a 64-byte ring: the third does not fit before the end,
        // so it waits for room (Full), then flushes the lap end and wraps.
        let producer = thread::spawn(move || {
            for i in 1..=3u8 {
                push(&mut p, u32::from(i), &[i; 16]).unwrap();
            }
        });
        let mut got = Vec::new();
        poll_until(&mut c, &mut got, |c, _| c.is_closed() && c.is_empty());
        poll(&mut c, &mut got);
        producer.join().unwrap();
        let want: Got = (1..=3u8).map(|i| (u32::from(i), vec![i; 16])).collect();
        assert_eq!(got, want);
    });
}

#[test]
fn one_producers_records_keep_their_order_past_the_right_side() {
    model(3, || {
        let (mut p, mut c, _ring) = ring(u64::MAX);
        // While the first record is the unready left edge, the right side looks at the second:
        // it must never deliver it first (a stress run found exactly that).
        let producer = thread::spawn(move || {
            push(&mut p, 1, &[1; 8]).unwrap();
            push(&mut p, 1, &[2; 8]).unwrap();
        });
        let mut got = Vec::new();
        poll_until(&mut c, &mut got, |_, g| g.len() == 2);
        producer.join().unwrap();
        assert_eq!(got, vec![(1, vec![1; 8]), (1, vec![2; 8])]);
    });
}

#[test]
fn a_consumer_that_leaves_closes_the_ring_for_producers() {
    model(4, || {
        let (mut p, c, _ring) = ring(u64::MAX);
        let consumer = thread::spawn(move || drop(c));
        let mut closed = false;
        for i in 0..5u8 {
            match p.try_push(1, &[i; 8]) {
                Ok(()) | Err(PushError::Full) => {}
                Err(PushError::Closed) => {
                    closed = true;
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        consumer.join().unwrap();
        assert!(closed || p.try_push(1, b"late").unwrap_err() == PushError::Closed);
        assert!(p.is_closed());
    });
}

/// Pushes one record, also retrying when the consumer's window skipped it (under loom a
/// window of a few polls makes every producer a slow one now and then).
fn push_until_delivered(p: &mut Producer, target: u32, bytes: &[u8]) {
    loop {
        match push(p, target, bytes) {
            Ok(()) => return,
            Err(PushError::Lost) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn a_producer_dead_after_its_claim_is_skipped_and_another_still_arrives() {
    model(3, || {
        let (mut dead, mut c, _ring) = ring(2);
        let mut live = dead.clone();
        let d = thread::spawn(move || {
            std::mem::forget(dead.try_reserve(1, 8).unwrap());
        });
        let l = thread::spawn(move || push_until_delivered(&mut live, 2, &[2; 8]));
        let mut got = Vec::new();
        poll_until(&mut c, &mut got, |_, g| !g.is_empty());
        d.join().unwrap();
        l.join().unwrap();
        poll_until(&mut c, &mut got, |c, _| c.is_empty());
        assert_eq!(got, vec![(2, vec![2; 8])]);
        let stats = c.stats();
        // The dead record was skipped and never acknowledged: its hole stays.
        assert_eq!(stats.skipped_records - stats.lost_commits, 1);
        assert!(stats.holes >= 1);
    });
}

#[test]
fn a_producer_dead_between_reserve_and_claim_leaves_a_span_that_is_skipped() {
    model(3, || {
        let (mut dead, mut c, _ring) = ring(2);
        let mut live = dead.clone();
        let d = thread::spawn(move || dead.simulate_death_after_reserve(8).unwrap());
        let l = thread::spawn(move || push_until_delivered(&mut live, 2, &[2; 8]));
        let mut got = Vec::new();
        poll_until(&mut c, &mut got, |_, g| !g.is_empty());
        d.join().unwrap();
        l.join().unwrap();
        poll_until(&mut c, &mut got, |c, _| c.is_empty());
        assert_eq!(got, vec![(2, vec![2; 8])]);
        assert!(c.stats().skipped_spans >= 1);
        assert!(c.stats().holes >= 1);
    });
}

#[test]
fn a_live_producer_racing_a_one_poll_window_is_delivered_or_told_it_was_lost() {
    // Bound 3 covers up to three back-to-back late claims. At 4, loom also explores a producer
    // that reads a stale `read_pos` forever while the consumer idles, which no real machine
    // does (stores become visible), and the execution never ends.
    model(3, || {
        let (mut p, mut c, _ring) = ring(1);
        let mut again = p.clone();
        let producer = thread::spawn(move || p.try_push(1, &[7; 8]));
        let mut got = Vec::new();
        poll_until(&mut c, &mut got, |c, g| {
            !g.is_empty() || c.stats().lost_commits == 1
        });
        let outcome = producer.join().unwrap();
        let stats = c.stats();
        match outcome {
            Ok(()) => {
                assert_eq!(got, vec![(1, vec![7; 8])]);
                assert_eq!(stats.lost_commits, 0);
            }
            Err(PushError::Lost) => {
                assert!(got.is_empty());
                assert_eq!((stats.lost_commits, stats.skipped_records), (1, 1));
            }
            Err(e) => panic!("{e}"),
        }
        // Every skip was acknowledged, so once the consumer passes the holes again (a lap
        // later) they are zeroed and freed, and the whole ring is usable again.
        for i in 0..6u8 {
            loop {
                match again.try_push(2, &[i; 8]) {
                    Ok(()) => break,
                    Err(PushError::Full) => {
                        poll(&mut c, &mut got);
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
        while poll(&mut c, &mut got) > 0 {}
        assert_eq!(c.stats().holes, 0);
        assert!(again.try_reserve(2, 24).is_ok());
    });
}

#[test]
fn an_open_batch_committed_shrunk_racing_a_caller_skip_is_delivered_or_lost() {
    model(3, || {
        let (mut p, mut c, _ring) = ring(u64::MAX);
        let mut other = p.clone();
        let producer = thread::spawn(move || {
            // 24 payload bytes reserved (a 32-byte record), one 1-byte tuple written (16
            // bytes): the commit shrinks the record to 24 bytes and pads the last 8.
            p.try_open_batch(1, 24).unwrap();
            assert!(p.append_to_batch(&[7]));
            p.commit_batch()
        });
        let mut got: Vec<(u32, Vec<Vec<u8>>)> = Vec::new();
        let poll_tuples = |c: &mut Consumer, got: &mut Vec<(u32, Vec<Vec<u8>>)>| {
            c.poll(usize::MAX, |r| {
                got.push((r.target(), r.tuples().map(<[u8]>::to_vec).collect()))
            })
            .unwrap()
        };
        // The consumer skips the record the first time it sees it still `Writing`.
        let mut skipped = false;
        while got.is_empty() && !skipped {
            poll_tuples(&mut c, &mut got);
            if c.stall() == Some(OsrStall::Writing { target: 1 }) {
                skipped = c.skip_stall().unwrap();
            }
            thread::yield_now();
        }
        let outcome = producer.join().unwrap();
        match outcome {
            Ok(1) => assert!(!skipped),
            Err(CommitError::Lost) => assert!(skipped && got.is_empty()),
            other => panic!("{other:?}"),
        }
        // The next record lies after the pad (or after the hole).
        loop {
            match other.try_push(2, &[2; 8]) {
                Ok(()) => break,
                Err(PushError::Full | PushError::TooLarge { .. }) => {
                    poll_tuples(&mut c, &mut got);
                }
                Err(e) => panic!("{e}"),
            }
        }
        while !got.iter().any(|(t, _)| *t == 2) {
            poll_tuples(&mut c, &mut got);
        }
        let mut want = if skipped {
            vec![]
        } else {
            vec![(1, vec![vec![7]])]
        };
        want.push((2, vec![vec![2; 8]]));
        assert_eq!(got, want);
    });
}

#[test]
fn a_joined_producer_that_left_has_all_its_records_below_the_write_position() {
    model(3, || {
        let layout = OsrLayout::new(64, u64::MAX).unwrap();
        let ring = OsrRing::create(HeapMemory::zeroed(layout.bytes_needed()), layout).unwrap();
        let mut c = ring.consumer().unwrap();
        let mut p = ring.join().unwrap();
        let producer = thread::spawn(move || {
            push(&mut p, 0, &[5; 8]).unwrap();
            drop(p);
        });
        let mut got = Vec::new();
        while !c.producer(0).is_some_and(|e| e.left) {
            poll(&mut c, &mut got);
            thread::yield_now();
        }
        let end = c.write_position();
        while c.read_position() < end {
            poll(&mut c, &mut got);
        }
        assert_eq!(got, vec![(0, vec![5; 8])]);
        producer.join().unwrap();
    });
}

#[test]
fn producers_joining_at_once_past_the_sixteenth_slot_take_their_own_slots() {
    model(2, || {
        let layout = OsrLayout::new(64, u64::MAX).unwrap();
        let ring = OsrRing::create(HeapMemory::zeroed(layout.bytes_needed()), layout).unwrap();
        let mut c = ring.consumer().unwrap();
        // Sixteen producers joined and left: the next joins take slots 16 and 17.
        for _ in 0..16 {
            drop(ring.join().unwrap());
        }
        let joiners: Vec<_> = (0..2)
            .map(|_| {
                let ring = ring.clone();
                thread::spawn(move || {
                    let mut p = ring.join().unwrap();
                    let id = p.id().unwrap();
                    push(&mut p, id, &[id as u8; 8]).unwrap();
                    id
                })
            })
            .collect();
        let mut got = Vec::new();
        poll_until(&mut c, &mut got, |_, got| got.len() == 2);
        let mut ids: Vec<u32> = joiners.into_iter().map(|j| j.join().unwrap()).collect();
        ids.sort_unstable();
        assert_eq!(ids, vec![16, 17]);
        got.sort();
        assert_eq!(got, vec![(16, vec![16; 8]), (17, vec![17; 8])]);
        for id in ids {
            assert_eq!(c.producer(id).map(|e| e.left), Some(true));
        }
    });
}
