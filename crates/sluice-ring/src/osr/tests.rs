//! Unit tests of the OSR ring on heap memory (they also run under Miri).

use std::ptr::NonNull;
use std::sync::Arc as StdArc;

use super::word::{Status, StatusWord};
use super::*;

/// Heap memory that several "processes" (handles) can open: each `SharedHeap` is another
/// mapping of the same bytes, as a shared segment would be.
#[derive(Clone)]
struct SharedHeap(StdArc<HeapMemory>);

// SAFETY: delegates to `HeapMemory`, which upholds the contract; the `Arc` keeps the bytes in
// place while any clone lives.
unsafe impl RingMemory for SharedHeap {
    fn base(&self) -> NonNull<u8> {
        self.0.base()
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

fn layout(capacity: usize, window: u64) -> OsrLayout {
    OsrLayout::new(capacity, window).unwrap()
}

fn drain(c: &mut OsrConsumer<impl RingMemory>) -> Vec<(u32, Vec<Vec<u8>>)> {
    let mut out = Vec::new();
    while c.poll_into(usize::MAX, &mut out).unwrap() > 0 {}
    out
}

fn single(target: u32, bytes: &[u8]) -> (u32, Vec<Vec<u8>>) {
    (target, vec![bytes.to_vec()])
}

/// Pokes a raw word into the ring's bytes (as a corrupting process would).
fn poke(mem: &SharedHeap, ring_offset: usize, value: u64) {
    // SAFETY: test-only scribbling on our own heap block, in bounds, with no other thread
    // running; the ring reads it through atomics.
    unsafe {
        let p = mem.base().as_ptr().add(DATA_OFFSET + ring_offset) as *mut u64;
        p.write(value);
    }
}

#[test]
fn layouts_are_checked() {
    assert!(OsrLayout::new(100, 1).is_err());
    assert!(OsrLayout::new(32, 1).is_err());
    assert!(OsrLayout::new(1 << 27, 1).is_err());
    assert!(OsrLayout::new(1024, 0).is_err());
    let l = layout(1024, 5);
    assert_eq!(l.bytes_needed(), CONTROL_BYTES + 1024);
    assert_eq!(l.max_payload(), 512 - 8);
    assert!(matches!(
        OsrRing::create(HeapMemory::zeroed(512), l),
        Err(OsrError::MemoryTooSmall { .. })
    ));
}

#[test]
fn a_record_and_a_batch_arrive_with_their_targets() {
    let (mut p, mut c) = channel(layout(1024, 100)).unwrap();
    p.try_push(7, b"hello").unwrap();
    let tuples: [&[u8]; 3] = [b"a", b"", b"0123456789"];
    assert_eq!(p.try_push_batch(9, tuples).unwrap(), 3);
    assert_eq!(p.try_push_batch(9, std::iter::empty()).unwrap(), 0);
    let mut r = p.try_reserve(3, 4).unwrap();
    r.with_bytes_mut(|b| b.copy_from_slice(b"abcd"));
    r.commit().unwrap();
    assert_eq!(
        drain(&mut c),
        vec![
            single(7, b"hello"),
            (9, vec![b"a".to_vec(), vec![], b"0123456789".to_vec()]),
            single(3, b"abcd"),
        ]
    );
    assert!(c.is_empty());
}

#[test]
fn too_large_is_refused() {
    let (mut p, _c) = channel(layout(256, 1)).unwrap();
    assert_eq!(
        p.try_push(0, &[0; 121]),
        Err(PushError::TooLarge { len: 121, max: 120 })
    );
    p.try_push(0, &[0; 120]).unwrap();
}

#[test]
fn full_then_drained_then_wraps_with_a_flush() {
    // 256-byte ring, 40-byte records (8 header + 32 payload): 6 fit, the 7th is Full.
    let (mut p, mut c) = channel(layout(256, 100)).unwrap();
    let mut sent = Vec::new();
    let mut next = 0u8;
    for _ in 0..6 {
        p.try_push(1, &[next; 32]).unwrap();
        sent.push(single(1, &[next; 32]));
        next += 1;
    }
    assert_eq!(p.try_push(1, &[0; 32]), Err(PushError::Full));
    // Several laps: each time the remaining 16 bytes before the end become a flush record.
    let mut got = Vec::new();
    for _ in 0..40 {
        got.extend(drain(&mut c));
        while p.try_push(1, &[next; 32]).is_ok() {
            sent.push(single(1, &[next; 32]));
            next = next.wrapping_add(1);
        }
    }
    got.extend(drain(&mut c));
    assert_eq!(got, sent);
    assert!(sent.len() > 40 * 5);
    assert_eq!(c.stats().skipped_records + c.stats().skipped_spans, 0);
}

#[test]
fn an_aborted_reservation_is_passed_over() {
    let (mut p, mut c) = channel(layout(256, 1)).unwrap();
    {
        let mut r = p.try_reserve(1, 16).unwrap();
        r.write_at(0, &[9; 16]);
        // dropped: aborted
    }
    p.try_push(2, b"after").unwrap();
    assert_eq!(drain(&mut c), vec![single(2, b"after")]);
    assert_eq!(
        c.stats(),
        OsrStats {
            producers: 1,
            ..OsrStats::default()
        }
    );
}

#[test]
fn the_right_side_delivers_past_a_slow_record_and_keeps_per_producer_order() {
    let (mut a, mut c) = channel(layout(1024, 1_000)).unwrap();
    let mut b = a.clone();
    let mut held = a.try_reserve(1, 8).unwrap();
    held.write_at(0, b"a-first!");
    b.try_push(2, b"b1").unwrap();
    b.try_push(2, b"b2").unwrap();
    let mut got = Vec::new();
    c.poll_into(10, &mut got).unwrap();
    assert_eq!(got, vec![single(2, b"b1"), single(2, b"b2")]);
    held.commit().unwrap();
    a.try_push(1, b"a2").unwrap();
    b.try_push(2, b"b3").unwrap();
    got.clear();
    c.poll_into(10, &mut got).unwrap();
    assert_eq!(
        got,
        vec![single(1, b"a-first!"), single(1, b"a2"), single(2, b"b3")]
    );
}

#[test]
fn the_right_side_stops_at_the_next_unready_record() {
    let (mut a, mut c) = channel(layout(1024, 1_000)).unwrap();
    let mut b = a.clone();
    let mut d = a.clone();
    let _stuck = a.try_reserve(1, 8).unwrap();
    b.try_push(2, b"b1").unwrap();
    let mut d_slow = d.try_reserve(3, 8).unwrap();
    d_slow.write_at(0, b"d-first!");
    b.try_push(2, b"b2").unwrap();
    let mut got = Vec::new();
    c.poll_into(10, &mut got).unwrap();
    assert_eq!(got, vec![single(2, b"b1")]);
    d_slow.commit().unwrap();
    d.try_push(3, b"d2").unwrap();
    got.clear();
    c.poll_into(10, &mut got).unwrap();
    assert_eq!(
        got,
        vec![single(3, b"d-first!"), single(2, b"b2"), single(3, b"d2")]
    );
}

#[test]
fn a_producer_that_dies_after_claiming_is_skipped_after_the_window() {
    const WINDOW: u64 = 5;
    let (mut dead, mut c) = channel(layout(512, WINDOW)).unwrap();
    let mut live = dead.clone();
    let r = dead.try_reserve(1, 24).unwrap();
    std::mem::forget(r); // dies mid-write: the record stays `Writing`
    drop(dead);
    live.try_push(2, b"one").unwrap();
    let mut got = Vec::new();
    for poll in 1..WINDOW {
        c.poll_into(10, &mut got).unwrap();
        assert_eq!(
            c.stats().skipped_records,
            0,
            "skipped after only {poll} polls"
        );
    }
    // The right side already delivered the live producer's record during the wait.
    assert_eq!(got, vec![single(2, b"one")]);
    c.poll_into(10, &mut got).unwrap();
    assert_eq!(c.stats().skipped_records, 1);
    assert_eq!(c.stats().holes, 1);
    // The ring keeps working for many laps around the quarantined hole.
    let mut sent = vec![single(2, b"one")];
    for i in 0..200u32 {
        let bytes = i.to_le_bytes().repeat(1 + (i as usize % 9));
        loop {
            match live.try_push(2, &bytes) {
                Ok(()) => break,
                Err(PushError::Full) => got.extend(drain(&mut c)),
                Err(e) => panic!("{e}"),
            }
        }
        sent.push(single(2, &bytes));
    }
    got.extend(drain(&mut c));
    assert_eq!(got, sent);
    assert_eq!(
        c.stats().holes,
        1,
        "a dead producer's hole is never reclaimed"
    );
    assert_eq!(c.stats().skipped_records, 1);
}

#[test]
fn a_producer_that_dies_between_reserving_and_claiming_leaves_a_skipped_span() {
    let (mut dead, mut c) = channel(layout(512, 3)).unwrap();
    let mut live = dead.clone();
    dead.simulate_death_after_reserve(40).unwrap();
    live.try_push(2, b"behind").unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        c.poll_into(10, &mut got).unwrap();
    }
    assert_eq!(got, vec![single(2, b"behind")]);
    assert_eq!(c.stats().skipped_spans, 1);
    for i in 0..100u8 {
        loop {
            match live.try_push(3, &[i; 20]) {
                Ok(()) => break,
                Err(PushError::Full) => got.extend(drain(&mut c)),
                Err(e) => panic!("{e}"),
            }
        }
    }
    got.extend(drain(&mut c));
    assert_eq!(got.len(), 101);
    assert!(got[1..]
        .iter()
        .enumerate()
        .all(|(i, r)| *r == single(3, &[i as u8; 20])));
}

#[test]
fn a_slow_producer_learns_it_was_skipped_and_its_hole_is_reclaimed() {
    let (mut slow, mut c) = channel(layout(256, 2)).unwrap();
    let mut live = slow.clone();
    let mut r = slow.try_reserve(1, 24).unwrap();
    c.poll(10, |_| {}).unwrap();
    c.poll(10, |_| {}).unwrap();
    assert_eq!(c.stats().skipped_records, 1);
    // The producer was only slow: it finishes writing (into the quarantined hole) and learns.
    r.write_at(0, &[0xAB; 24]);
    assert_eq!(r.commit(), Err(CommitError::Lost));
    assert_eq!(c.stats().lost_commits, 1);
    assert_eq!(c.stats().holes, 1);
    // Once the consumer passes the hole again it is zeroed and its slot freed.
    let mut got = Vec::new();
    let mut sent = Vec::new();
    for i in 0..60u8 {
        loop {
            match live.try_push(2, &[i; 16]) {
                Ok(()) => break,
                Err(PushError::Full) => got.extend(drain(&mut c)),
                Err(e) => panic!("{e}"),
            }
        }
        sent.push(single(2, &[i; 16]));
    }
    got.extend(drain(&mut c));
    assert_eq!(got, sent);
    assert_eq!(c.stats().holes, 0);
    // And the whole ring is usable again: a maximal record fits after a drain.
    live.try_push(2, &[1; 120]).unwrap();
    assert_eq!(drain(&mut c), vec![single(2, &[1; 120])]);
}

#[test]
fn a_commit_that_wins_the_race_against_the_window_is_delivered() {
    let (mut p, mut c) = channel(layout(256, 2)).unwrap();
    let r = p.try_reserve(1, 8).unwrap();
    c.poll(10, |_| {}).unwrap(); // one poll of the window used
    r.commit().unwrap();
    assert_eq!(drain(&mut c), vec![single(1, &[0; 8])]);
    assert_eq!(c.stats().skipped_records, 0);
}

#[test]
fn a_dead_hole_that_splits_the_ring_lowers_the_largest_record() {
    let (mut p, mut c) = channel(layout(256, 1)).unwrap();
    p.try_push(1, &[0; 112]).unwrap(); // [0, 120)
    drain(&mut c);
    std::mem::forget(p.try_reserve(1, 8).unwrap()); // [120, 136), dies
    c.poll(10, |_| {}).unwrap();
    assert_eq!(c.stats().holes, 1);
    // Gaps of 120 bytes either side of the hole: a 128-byte record fits in neither.
    assert_eq!(
        p.try_push(1, &[1; 120]),
        Err(PushError::TooLarge { len: 120, max: 112 })
    );
    p.try_push(2, &[2; 112]).unwrap();
    assert_eq!(drain(&mut c), vec![single(2, &[2; 112])]);
}

#[test]
fn too_many_dead_producers_poison_the_ring() {
    let (mut p, mut c) = channel(layout(4096, 1)).unwrap();
    for _ in 0..HOLE_SLOTS {
        std::mem::forget(p.try_reserve(1, 8).unwrap());
        c.poll(10, |_| {}).unwrap();
    }
    assert_eq!(c.stats().holes as usize, HOLE_SLOTS);
    std::mem::forget(p.try_reserve(1, 8).unwrap());
    assert_eq!(c.poll(10, |_| {}), Err(OsrError::TooManyHoles));
    assert_eq!(c.poll(10, |_| {}), Err(OsrError::Poisoned));
    assert_eq!(p.try_push(1, b"x"), Err(PushError::Poisoned));
}

#[test]
fn closing_works_both_ways() {
    let (mut p, c) = channel(layout(256, 1)).unwrap();
    assert!(!c.is_closed());
    drop(c);
    assert!(p.is_closed());
    assert_eq!(p.try_push(1, b"x"), Err(PushError::Closed));

    let (mut p, mut c) = channel(layout(256, 1)).unwrap();
    let q = p.clone();
    p.try_push(1, b"last").unwrap();
    drop(p);
    assert!(!c.is_closed());
    drop(q);
    assert!(c.is_closed());
    assert_eq!(drain(&mut c), vec![single(1, b"last")]);
    assert!(c.is_empty());
}

#[test]
fn one_consumer_only() {
    let ring = OsrRing::create(HeapMemory::zeroed(CONTROL_BYTES + 256), layout(256, 1)).unwrap();
    let _c = ring.consumer().unwrap();
    assert_eq!(ring.consumer().err(), Some(OsrError::ConsumerTaken));
}

#[test]
fn another_process_opens_the_same_memory() {
    let mem = SharedHeap(StdArc::new(HeapMemory::zeroed(CONTROL_BYTES + 512)));
    assert_eq!(
        OsrRing::open(mem.clone()).err(),
        Some(OsrError::NotInitialized)
    );
    let creator = OsrRing::create(mem.clone(), layout(512, 9)).unwrap();
    let mut c = creator.consumer().unwrap();
    let other = OsrRing::open(mem.clone()).unwrap();
    assert_eq!(other.layout(), layout(512, 9));
    assert_eq!(other.consumer().err(), Some(OsrError::ConsumerTaken));
    let mut p = other.producer();
    p.try_push(4, b"from afar").unwrap();
    assert_eq!(drain(&mut c), vec![single(4, b"from afar")]);
    assert_eq!(creator.stats().producers, 1);

    // A smaller mapping than the ring it holds is refused.
    let small = SharedHeap(StdArc::new(HeapMemory::zeroed(CONTROL_BYTES + 64)));
    let _ = OsrRing::create(small.clone(), layout(64, 1)).unwrap();
    // SAFETY: test-only: rewrite the capacity field to lie about the ring size.
    unsafe {
        let cap = small.base().as_ptr().add(SHARED_LINE_OFFSET + 16) as *mut u64;
        cap.write(1 << 20);
    }
    assert!(matches!(
        OsrRing::open(small),
        Err(OsrError::MemoryTooSmall { .. })
    ));
}

#[test]
fn a_corrupt_status_word_poisons_instead_of_reading_out_of_bounds() {
    let mem = SharedHeap(StdArc::new(HeapMemory::zeroed(CONTROL_BYTES + 256)));
    let ring = OsrRing::create(mem.clone(), layout(256, 1)).unwrap();
    let mut c = ring.consumer().unwrap();
    let mut p = ring.producer();
    p.try_push(1, b"ok").unwrap();
    drain(&mut c);
    // A `Ready` word whose extent runs past the end of the ring, at the next record boundary.
    let ready_huge = StatusWord::writing(0, 0, false)
        .with_status(Status::Ready)
        .0
        | (1000 << 8);
    poke(&mem, 16, ready_huge);
    // The consumer only looks where something is reserved: reserve past it first.
    let _ = p.simulate_death_after_reserve(8);
    assert!(matches!(
        c.poll(10, |_| {}),
        Err(OsrError::Corrupt { position: 16, .. })
    ));
    assert_eq!(p.try_push(1, b"x"), Err(PushError::Poisoned));
}

#[test]
fn a_batch_with_bad_framing_is_dropped_and_counted() {
    let mem = SharedHeap(StdArc::new(HeapMemory::zeroed(CONTROL_BYTES + 256)));
    let ring = OsrRing::create(mem.clone(), layout(256, 1)).unwrap();
    let mut c = ring.consumer().unwrap();
    let mut p = ring.producer();
    let tuples: [&[u8]; 1] = [b"12345678"];
    p.try_push_batch(1, tuples).unwrap();
    // Claim the inner tuple is 200 bytes long.
    poke(&mem, 8, 200);
    p.try_push(2, b"next").unwrap();
    assert_eq!(drain(&mut c), vec![single(2, b"next")]);
    assert_eq!(c.stats().corrupt_records, 1);
}

#[test]
fn two_threads_push_while_one_consumes() {
    const PER_PRODUCER: u32 = if cfg!(miri) { 60 } else { 50_000 };
    let (p, mut c) = channel(layout(512, u64::MAX)).unwrap();
    let producers: Vec<_> = (0..2u32)
        .map(|id| {
            let mut p = p.clone();
            std::thread::spawn(move || {
                for i in 0..PER_PRODUCER {
                    let mut bytes = [0u8; 12];
                    bytes[..4].copy_from_slice(&id.to_le_bytes());
                    bytes[4..8].copy_from_slice(&i.to_le_bytes());
                    loop {
                        let tuples: [&[u8]; 2] = [&bytes, &bytes[..(i % 8) as usize]];
                        let result = if i % 3 == 0 {
                            p.try_push_batch(id, tuples).map(|_| ())
                        } else {
                            p.try_push(id, &bytes)
                        };
                        match result {
                            Ok(()) => break,
                            Err(PushError::Full) => std::thread::yield_now(),
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            })
        })
        .collect();
    drop(p);
    let mut next = [0u32; 2];
    loop {
        let n = c
            .poll(64, |r| {
                let first = r.tuples().next().unwrap();
                let id = u32::from_le_bytes(first[..4].try_into().unwrap());
                let i = u32::from_le_bytes(first[4..8].try_into().unwrap());
                assert_eq!(id, r.target());
                assert_eq!(r.is_batch(), i % 3 == 0);
                assert_eq!(i, next[id as usize], "producer {id} out of order");
                next[id as usize] = i + 1;
            })
            .unwrap();
        if n == 0 {
            if c.is_closed() && c.is_empty() {
                break;
            }
            std::thread::yield_now();
        }
    }
    for t in producers {
        t.join().unwrap();
    }
    assert_eq!(next, [PER_PRODUCER, PER_PRODUCER]);
}

#[test]
fn joined_producers_are_in_the_table_with_their_pid_until_they_leave() {
    let ring = OsrRing::create(
        HeapMemory::zeroed(layout(256, 1).bytes_needed()),
        layout(256, 1),
    )
    .unwrap();
    let anonymous = ring.producer();
    assert_eq!(anonymous.id(), None);
    assert_eq!(anonymous.consumer_pid(), None);
    let c = ring.consumer().unwrap();
    assert_eq!(anonymous.consumer_pid(), Some(std::process::id()));
    assert_eq!(c.producer(0), None);
    let first = ring.join().unwrap();
    let second = ring.join().unwrap();
    assert_eq!((first.id(), second.id()), (Some(0), Some(1)));
    assert_eq!(c.joined(), 2);
    let me = std::process::id();
    assert_eq!(
        c.producer(1),
        Some(OsrProducerEntry {
            pid: me,
            left: false
        })
    );
    drop(second);
    assert_eq!(
        c.producer(1),
        Some(OsrProducerEntry {
            pid: me,
            left: true
        })
    );
    assert_eq!(c.producer(0).map(|e| e.left), Some(false));
    assert_eq!(c.producer(PRODUCER_SLOTS as u32), None);
    assert_eq!(c.producer(u32::MAX), None);
    let more: Vec<_> = (2..PRODUCER_SLOTS).map(|_| ring.join().unwrap()).collect();
    assert_eq!(
        more.last().and_then(|p| p.id()),
        Some(PRODUCER_SLOTS as u32 - 1)
    );
    assert_eq!(ring.join().err(), Some(OsrError::ProducerTableFull));
    assert_eq!(c.joined(), PRODUCER_SLOTS);
    // A producer that could not join did not count as attached.
    assert_eq!(ring.stats().producers, PRODUCER_SLOTS as u64);
}

#[test]
fn an_open_batch_is_filled_across_calls_and_committed_shrunk() {
    let (mut p, mut c) = channel(layout(512, u64::MAX)).unwrap();
    p.try_open_batch(5, 200).unwrap();
    assert_eq!(p.batch_room(), Some(200));
    assert!(p.append_to_batch(b"first"));
    assert!(p.append_to_batch(b""));
    assert_eq!(p.batch_room(), Some(200 - 16 - 8));
    // Nothing is visible before the commit.
    assert_eq!(drain(&mut c), vec![]);
    assert_eq!(c.stall(), Some(OsrStall::Writing { target: 5 }));
    assert!(p.append_to_batch(&[9; 100]));
    assert!(
        !p.append_to_batch(&[9; 60]),
        "68 bytes do not fit the 52 left"
    );
    assert_eq!(p.commit_batch(), Ok(3));
    assert_eq!(p.batch_room(), None);
    // The record after the shrunk one starts right after its pad.
    p.try_push(6, b"next").unwrap();
    assert_eq!(
        drain(&mut c),
        vec![
            (5, vec![b"first".to_vec(), vec![], vec![9; 100]]),
            single(6, b"next"),
        ]
    );
    // An empty batch is aborted; committing with none open does nothing.
    p.try_open_batch(5, 64).unwrap();
    assert_eq!(p.commit_batch(), Ok(0));
    assert_eq!(p.commit_batch(), Ok(0));
    assert!(!p.append_to_batch(b"no batch open"));
    // Dropping a producer aborts its open batch.
    let mut q = p.clone();
    q.try_open_batch(7, 64).unwrap();
    assert!(q.append_to_batch(b"dropped"));
    drop(q);
    p.try_push(6, b"after").unwrap();
    assert_eq!(drain(&mut c), vec![single(6, b"after")]);
    // Many laps of shrunk batches, wrapping with flushes.
    let mut sent = Vec::new();
    let mut got = Vec::new();
    for i in 0..300u32 {
        let tuples: Vec<Vec<u8>> = (0..1 + i % 4)
            .map(|k| vec![k as u8; (i % 13) as usize])
            .collect();
        loop {
            match p.try_open_batch(1, 120) {
                Ok(()) => break,
                Err(ReserveError::Full) => got.extend(drain(&mut c)),
                Err(e) => panic!("{e}"),
            }
        }
        for t in &tuples {
            assert!(p.append_to_batch(t));
        }
        assert_eq!(p.commit_batch(), Ok(tuples.len()));
        sent.push((1, tuples));
    }
    got.extend(drain(&mut c));
    assert_eq!(got, sent);
}

#[test]
#[should_panic(expected = "batch is open")]
fn nothing_else_is_reserved_while_a_batch_is_open() {
    let (mut p, _c) = channel(layout(256, 1)).unwrap();
    p.try_open_batch(1, 16).unwrap();
    let _ = p.try_push(1, b"x");
}

#[test]
fn the_caller_skips_a_stall_only_when_it_says_so() {
    let (mut slow, mut c) = channel(layout(512, u64::MAX)).unwrap();
    let mut live = slow.clone();
    slow.try_open_batch(3, 64).unwrap();
    assert!(slow.append_to_batch(b"late"));
    live.try_push(4, b"behind").unwrap();
    let mut got = Vec::new();
    for _ in 0..1000 {
        c.poll_into(10, &mut got).unwrap();
        assert_eq!(c.stall(), Some(OsrStall::Writing { target: 3 }));
    }
    assert_eq!(got, vec![single(4, b"behind")]);
    assert_eq!(
        c.stats().skipped_records,
        0,
        "a window of u64::MAX never expires"
    );
    let before = c.read_position();
    assert!(before < c.write_position());
    assert_eq!(c.skip_stall(), Ok(true));
    assert_eq!(c.skip_stall(), Ok(false), "one skip per reported stall");
    assert!(c.read_position() > before);
    assert_eq!(c.stats().skipped_records, 1);
    assert_eq!(slow.commit_batch(), Err(CommitError::Lost));
    c.poll_into(10, &mut got).unwrap();
    assert_eq!(c.stall(), None);
    assert_eq!(c.read_position(), c.write_position());

    // An unclaimed reservation: skipping it costs its producer nothing.
    live.simulate_death_after_reserve(16).unwrap();
    live.try_push(4, b"after the span").unwrap();
    got.clear();
    c.poll_into(10, &mut got).unwrap();
    assert_eq!(
        got,
        vec![],
        "the right side cannot see past a record with no header"
    );
    assert_eq!(c.stall(), Some(OsrStall::Unclaimed));
    assert_eq!(c.skip_stall(), Ok(true));
    assert_eq!(c.stats().skipped_spans, 1);
    assert_eq!(drain(&mut c), vec![single(4, b"after the span")]);
    // A stall that resolved before the skip is left alone.
    let r = slow.try_reserve(8, 8).unwrap();
    c.poll_into(10, &mut got).unwrap();
    assert_eq!(c.stall(), Some(OsrStall::Writing { target: 8 }));
    r.commit().unwrap();
    assert_eq!(c.skip_stall(), Ok(false));
    assert_eq!(drain(&mut c), vec![single(8, &[0; 8])]);
}

#[test]
fn the_consumer_can_poison_the_ring() {
    let (mut p, mut c) = channel(layout(256, 1)).unwrap();
    c.poison();
    assert_eq!(p.try_push(1, b"x"), Err(PushError::Poisoned));
    assert_eq!(c.poll(1, |_| {}), Err(OsrError::Poisoned));
}
