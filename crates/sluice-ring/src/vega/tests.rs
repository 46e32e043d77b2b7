//! Unit tests of the Vega ring: sizes at the edge, batches, claims, close, roles, opening
//! from (and surviving) untrusted memory, and parking.

use std::ptr::NonNull;

use sluice_sync::atomic::AtomicU64;
use sluice_sync::Wakeup;

use super::layout::*;
use super::*;

fn layout(slot_bytes: usize, slots: usize) -> VegaLayout {
    VegaLayout::new(slot_bytes, slots).unwrap()
}

/// One heap block seen through two `RingMemory` values, as two processes see one segment.
#[derive(Clone)]
struct SharedHeap(std::sync::Arc<HeapMemory>);

// SAFETY: delegates to `HeapMemory`, whose block stays allocated while any clone lives.
unsafe impl RingMemory for SharedHeap {
    fn base(&self) -> NonNull<u8> {
        self.0.base()
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

impl SharedHeap {
    fn new(len: usize) -> Self {
        Self(std::sync::Arc::new(HeapMemory::zeroed(len)))
    }

    /// Stores `value` into the header or mark word at `offset`, as a corrupting peer would.
    fn poke(&self, offset: usize, value: u64) {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.len());
        // SAFETY: an aligned word inside the block; header and mark words are only ever
        // accessed as `AtomicU64`.
        unsafe {
            (*self.base().as_ptr().add(offset).cast::<AtomicU64>())
                .store(value, sluice_sync::atomic::Ordering::SeqCst)
        };
    }

    /// Overwrites the mark of slot `slot` (in the first lap) with a published one of size
    /// `len`, as a corrupting peer would.
    fn poke_len(&self, layout: VegaLayout, slot: usize, len: u32) {
        assert!(slot < layout.slots());
        let offset = SLOTS_OFFSET + slot * layout.slot_stride() + SLOT_MARK_OFFSET;
        self.poke(offset, layout::published_mark(slot as u64, len as usize));
    }
}

#[test]
fn a_tuple_of_exactly_slot_bytes_passes_and_one_more_is_refused() {
    let (mut p, mut c) = channel(layout(64, 4)).unwrap();
    let exact = [7u8; 64];
    p.put(&exact).unwrap();
    assert_eq!(
        p.put(&[0u8; 65]),
        Err(VegaSendError::TooLarge {
            tuple: 65,
            slot: 64
        })
    );
    assert_eq!(
        p.claim(65).err(),
        Some(VegaSendError::TooLarge {
            tuple: 65,
            slot: 64
        })
    );
    assert_eq!(c.get().unwrap(), Some(&exact[..]));
    assert_eq!(c.get().unwrap(), None);
}

#[test]
fn too_large_is_reported_even_when_full_or_closed() {
    let (mut p, c) = channel(layout(8, 1)).unwrap();
    p.put(b"x").unwrap();
    assert_eq!(p.put(b"y"), Err(VegaSendError::Full));
    assert!(matches!(
        p.put(&[0; 9]),
        Err(VegaSendError::TooLarge { tuple: 9, slot: 8 })
    ));
    drop(c);
    assert!(matches!(
        p.put(&[0; 9]),
        Err(VegaSendError::TooLarge { .. })
    ));
    assert_eq!(p.put(b"z"), Err(VegaSendError::Closed));
}

#[test]
fn fills_refuses_then_wraps_in_order() {
    let (mut p, mut c) = channel(layout(16, 3)).unwrap();
    for round in 0u8..5 {
        for i in 0..3u8 {
            assert!(p.ready_to_send());
            p.put(&[round, i, 0xAA][..(i as usize + 1)]).unwrap();
        }
        assert!(!p.ready_to_send());
        assert_eq!(p.put(b"no"), Err(VegaSendError::Full));
        assert_eq!(c.available(), 3);
        for i in 0..3u8 {
            let got = c.get().unwrap().unwrap().to_vec();
            assert_eq!(got, [round, i, 0xAA][..(i as usize + 1)].to_vec());
        }
        // Got but not released: still full.
        assert!(!p.ready_to_send());
        assert_eq!(c.unreleased(), 3);
        c.release();
        assert!(p.ready_to_send());
    }
}

#[test]
fn staged_tuples_are_invisible_until_one_publish() {
    let (mut p, mut c) = channel(layout(8, 4)).unwrap();
    p.write(b"a").unwrap();
    p.write(b"b").unwrap();
    assert_eq!(p.staged(), 2);
    assert_eq!(c.available(), 0);
    assert_eq!(c.get().unwrap(), None);
    p.publish();
    assert_eq!(p.staged(), 0);
    let batch: Vec<Vec<u8>> = c.get_batch(8).unwrap().map(<[u8]>::to_vec).collect();
    assert_eq!(batch, vec![b"a".to_vec(), b"b".to_vec()]);
    c.release();
}

#[test]
fn put_batch_sends_what_fits_and_reports_the_first_refusal() {
    let (mut p, mut c) = channel(layout(4, 3)).unwrap();
    let tuples: [&[u8]; 4] = [b"1", b"22", b"333", b"4444"];
    assert_eq!(p.put_batch(&tuples), Ok(3));
    assert_eq!(p.put_batch(&tuples[3..]), Err(VegaSendError::Full));
    let mut batch = c.get_batch(2).unwrap();
    assert_eq!(batch.len(), 2);
    assert_eq!(batch.next(), Some(&b"1"[..]));
    assert_eq!(batch.next(), Some(&b"22"[..]));
    assert_eq!(batch.next(), None);
    c.release();
    assert_eq!(
        p.put_batch(&[&b"55555"[..]]),
        Err(VegaSendError::TooLarge { tuple: 5, slot: 4 })
    );
    assert_eq!(p.put_batch(&[&b"x"[..], &b"55555"[..]]), Ok(1));
    let got: Vec<&[u8]> = c.get_batch(usize::MAX).unwrap().collect();
    assert_eq!(got, vec![&b"333"[..], &b"x"[..]]);
}

#[test]
fn get_batch_wraps_and_respects_max() {
    let (mut p, mut c) = channel(layout(8, 3)).unwrap();
    let mut next_out = 0u64;
    let mut next_in = 0u64;
    for _ in 0..10 {
        while p.ready_to_send() {
            p.write(&next_out.to_le_bytes()).unwrap();
            next_out += 1;
        }
        p.publish();
        assert_eq!(c.get_batch(0).unwrap().len(), 0);
        let batch = c.get_batch(2).unwrap();
        assert!(batch.len() <= 2);
        for t in batch {
            assert_eq!(t, next_in.to_le_bytes());
            next_in += 1;
        }
        c.release();
    }
}

#[test]
fn claim_writes_in_place_and_can_truncate_stage_or_abandon() {
    let (mut p, mut c) = channel(layout(16, 4)).unwrap();
    let mut claim = p.claim(16).unwrap();
    assert_eq!(claim.len(), 16);
    assert_eq!(claim.as_ptr() as usize % SLOT_ALIGN, 0);
    claim[..5].copy_from_slice(b"hello");
    claim.truncate(5);
    claim.commit();
    // Abandoned: nothing sent, slot reused by the next claim.
    {
        let mut claim = p.claim(3).unwrap();
        claim.copy_from_slice(b"bye");
    }
    let mut claim = p.claim(2).unwrap();
    claim.copy_from_slice(b"ok");
    claim.stage();
    assert_eq!(c.get().unwrap(), Some(&b"hello"[..]));
    assert_eq!(c.get().unwrap(), None);
    p.publish();
    let got = c.get().unwrap().unwrap();
    assert_eq!(got, b"ok");
    assert_eq!(got.as_ptr() as usize % SLOT_ALIGN, 0);
}

#[test]
fn empty_tuples_are_tuples() {
    let (mut p, mut c) = channel(layout(8, 2)).unwrap();
    p.put(b"").unwrap();
    assert_eq!(c.get().unwrap(), Some(&b""[..]));
}

#[test]
fn the_consumer_tells_empty_from_producer_gone_and_gets_staged_tuples() {
    let (mut p, mut c) = channel(layout(8, 4)).unwrap();
    assert_eq!(c.get(), Ok(None));
    assert!(!c.is_closed());
    p.put(b"one").unwrap();
    p.write(b"two").unwrap();
    drop(p);
    assert!(c.is_closed());
    assert_eq!(c.get().unwrap(), Some(&b"one"[..]));
    assert_eq!(c.get().unwrap(), Some(&b"two"[..]));
    assert_eq!(c.get(), Err(VegaRecvError::Closed));
    assert!(matches!(c.get_batch(4), Err(VegaRecvError::Closed)));
}

#[test]
fn the_producer_sees_the_consumer_leave() {
    let (mut p, c) = channel(layout(8, 4)).unwrap();
    assert!(!p.is_closed());
    drop(c);
    assert!(p.is_closed());
    assert_eq!(p.put(b"x"), Err(VegaSendError::Closed));
    assert!(matches!(p.claim(1), Err(VegaSendError::Closed)));
}

#[test]
fn each_role_is_taken_once_and_records_its_pid() {
    let l = layout(8, 2);
    let ring = VegaRing::create(HeapMemory::zeroed(l.bytes_needed()), l).unwrap();
    assert_eq!(ring.producer_pid(), None);
    let p = ring.producer().unwrap();
    assert!(matches!(
        ring.producer(),
        Err(VegaOpenError::RoleTaken(VegaRole::Producer))
    ));
    let c = ring.consumer().unwrap();
    assert!(matches!(
        ring.consumer(),
        Err(VegaOpenError::RoleTaken(VegaRole::Consumer))
    ));
    assert_eq!(ring.producer_pid(), Some(std::process::id()));
    assert_eq!(ring.consumer_pid(), Some(std::process::id()));
    assert!(!ring.producer_gone());
    drop(p);
    assert!(ring.producer_gone());
    // Gone is final: the role cannot be taken again.
    assert!(ring.producer().is_err());
    drop(c);
    assert!(ring.consumer_gone());
}

#[test]
fn poison_stops_both_ends_and_the_first_reason_wins() {
    let (mut p, mut c) = channel(layout(8, 4)).unwrap();
    p.put(b"kept").unwrap();
    c.poison();
    assert_eq!(p.poisoned(), Some(PoisonReason::Requested));
    assert_eq!(
        p.put(b"x"),
        Err(VegaSendError::Poisoned(PoisonReason::Requested))
    );
    assert!(!p.ready_to_send() || p.poisoned().is_some());
    // What was published before still arrives; then the poison is reported.
    assert_eq!(c.get().unwrap(), Some(&b"kept"[..]));
    assert_eq!(
        c.get(),
        Err(VegaRecvError::Poisoned(PoisonReason::Requested))
    );
}

#[test]
fn create_refuses_small_misaligned_or_used_memory() {
    let l = layout(32, 8);
    assert_eq!(
        VegaRing::create(HeapMemory::zeroed(l.bytes_needed() - 64), l).err(),
        Some(VegaOpenError::MemoryTooSmall {
            needed: l.bytes_needed(),
            len: l.bytes_needed() - 64
        })
    );
    let mem = SharedHeap::new(l.bytes_needed());
    let _ring = VegaRing::create(mem.clone(), l).unwrap();
    assert_eq!(
        VegaRing::create(mem, l).err(),
        Some(VegaOpenError::AlreadyInitialised)
    );
}

#[test]
fn open_reads_the_layout_and_carries_tuples_between_two_mappings() {
    let l = layout(24, 5);
    let mem = SharedHeap::new(l.bytes_needed());
    assert_eq!(
        VegaRing::open(mem.clone()).err(),
        Some(VegaOpenError::NotInitialised)
    );
    let creator = VegaRing::create(mem.clone(), l).unwrap();
    let mut p = creator.producer().unwrap();
    p.put(b"before open").unwrap();

    let opener = VegaRing::open(mem).unwrap();
    assert_eq!(opener.layout(), l);
    assert!(opener.producer().is_err());
    let mut c = opener.consumer().unwrap();
    assert_eq!(c.get().unwrap(), Some(&b"before open"[..]));
    c.release();
    for i in 0..12u8 {
        p.put(&[i; 24]).unwrap();
        assert_eq!(c.get().unwrap(), Some(&[i; 24][..]));
        c.release();
    }
    drop(p);
    assert_eq!(c.get(), Err(VegaRecvError::Closed));
}

#[test]
fn open_refuses_headers_that_do_not_match_the_memory() {
    let l = layout(32, 4);
    let fresh = || {
        let mem = SharedHeap::new(l.bytes_needed());
        drop(VegaRing::create(mem.clone(), l).unwrap());
        mem
    };
    let mem = fresh();
    mem.poke(MAGIC_OFFSET, 0x1234);
    assert_eq!(
        VegaRing::open(mem).err(),
        Some(VegaOpenError::BadMagic { found: 0x1234 })
    );
    let mem = fresh();
    mem.poke(VERSION_OFFSET, 99);
    assert_eq!(
        VegaRing::open(mem).err(),
        Some(VegaOpenError::Version {
            found: 99,
            expected: VEGA_VERSION
        })
    );
    // More slots than the memory holds.
    let mem = fresh();
    mem.poke(SLOT_COUNT_OFFSET, 5);
    assert!(matches!(
        VegaRing::open(mem).err(),
        Some(VegaOpenError::MemoryTooSmall { .. })
    ));
    // Bigger slots than the memory holds.
    let mem = fresh();
    mem.poke(SLOT_BYTES_OFFSET, 100);
    assert!(matches!(
        VegaRing::open(mem).err(),
        Some(VegaOpenError::MemoryTooSmall { .. })
    ));
    // Sizes that overflow or are zero.
    for (offset, value) in [
        (SLOT_COUNT_OFFSET, u64::MAX),
        (SLOT_BYTES_OFFSET, u64::MAX),
        (SLOT_COUNT_OFFSET, 0),
        (SLOT_BYTES_OFFSET, 0),
        (SLOT_COUNT_OFFSET, u64::MAX / 40),
    ] {
        let mem = fresh();
        mem.poke(offset, value);
        assert!(
            matches!(VegaRing::open(mem).err(), Some(VegaOpenError::Layout(_))),
            "offset {offset} value {value}"
        );
    }
    // Fewer or smaller slots than the memory could hold are a valid, smaller ring.
    let mem = fresh();
    mem.poke(SLOT_COUNT_OFFSET, 2);
    assert_eq!(VegaRing::open(mem).unwrap().layout(), layout(32, 2));
    // Memory shorter than a header.
    assert_eq!(
        VegaRing::open(HeapMemory::zeroed(64)).err(),
        Some(VegaOpenError::MemoryTooSmall {
            needed: HEADER_BYTES,
            len: 64
        })
    );
}

#[test]
fn corrupt_indices_poison_the_ring_instead_of_reading_out_of_bounds() {
    let l = layout(8, 4);
    // A head far ahead of the tail.
    let mem = SharedHeap::new(l.bytes_needed());
    let ring = VegaRing::create(mem.clone(), l).unwrap();
    let (mut p, mut c) = (ring.producer().unwrap(), ring.consumer().unwrap());
    p.put(b"a").unwrap();
    mem.poke(HEAD_OFFSET, 1000);
    assert_eq!(c.available(), 0);
    // As after any poison, what was published before still arrives.
    assert_eq!(c.get().unwrap(), Some(&b"a"[..]));
    assert_eq!(
        c.get(),
        Err(VegaRecvError::Poisoned(PoisonReason::BadIndex))
    );
    assert_eq!(
        p.put(b"b"),
        Err(VegaSendError::Poisoned(PoisonReason::BadIndex))
    );

    // A tail beyond what was published.
    let mem = SharedHeap::new(l.bytes_needed());
    let ring = VegaRing::create(mem.clone(), l).unwrap();
    let (mut p, _c) = (ring.producer().unwrap(), ring.consumer().unwrap());
    for _ in 0..4 {
        p.put(b"x").unwrap();
    }
    mem.poke(TAIL_OFFSET, 7);
    assert_eq!(
        p.put(b"y"),
        Err(VegaSendError::Poisoned(PoisonReason::BadIndex))
    );

    // A head that went backwards.
    let mem = SharedHeap::new(l.bytes_needed());
    let ring = VegaRing::create(mem.clone(), l).unwrap();
    let (mut p, mut c) = (ring.producer().unwrap(), ring.consumer().unwrap());
    p.put(b"1").unwrap();
    p.put(b"2").unwrap();
    assert!(c.get().unwrap().is_some());
    assert!(c.get().unwrap().is_some());
    mem.poke(HEAD_OFFSET, 1);
    assert_eq!(c.available(), 0);
    assert_eq!(
        c.get(),
        Err(VegaRecvError::Poisoned(PoisonReason::BadIndex))
    );
}

#[test]
fn an_oversized_length_word_poisons_the_ring() {
    let l = layout(8, 4);
    let mem = SharedHeap::new(l.bytes_needed());
    let ring = VegaRing::create(mem.clone(), l).unwrap();
    let (mut p, mut c) = (ring.producer().unwrap(), ring.consumer().unwrap());
    p.put(b"ok").unwrap();
    p.put(b"bad").unwrap();
    mem.poke_len(l, 1, 9);
    assert_eq!(c.get().unwrap(), Some(&b"ok"[..]));
    assert_eq!(
        c.get(),
        Err(VegaRecvError::Poisoned(PoisonReason::BadLength))
    );

    let mem = SharedHeap::new(l.bytes_needed());
    let ring = VegaRing::create(mem.clone(), l).unwrap();
    let (mut p, mut c) = (ring.producer().unwrap(), ring.consumer().unwrap());
    p.put_batch(&[b"ok", b"no"]).unwrap();
    mem.poke_len(l, 1, u32::MAX);
    assert!(matches!(
        c.get_batch(4),
        Err(VegaRecvError::Poisoned(PoisonReason::BadLength))
    ));
}

#[test]
fn two_threads_move_tuples_in_order() {
    const N: u64 = if cfg!(miri) { 300 } else { 200_000 };
    let (mut p, mut c) = channel(layout(24, 16)).unwrap();
    let writer = std::thread::spawn(move || {
        for i in 0..N {
            let len = (i % 17) as usize + 8;
            let mut tuple = [0u8; 24];
            tuple[..8].copy_from_slice(&i.to_le_bytes());
            tuple[8..len].fill(i as u8);
            loop {
                match p.write(&tuple[..len]) {
                    Ok(()) => break,
                    Err(VegaSendError::Full) => {
                        p.publish();
                        std::thread::yield_now();
                    }
                    Err(e) => panic!("unexpected {e}"),
                }
            }
            if i.is_multiple_of(8) {
                p.publish();
            }
        }
    });
    let mut next = 0u64;
    loop {
        match c.get_batch(if next.is_multiple_of(3) { 1 } else { 7 }) {
            Ok(batch) => {
                if batch.len() == 0 {
                    std::thread::yield_now();
                }
                for t in batch {
                    assert_eq!(t.len(), (next % 17) as usize + 8);
                    assert_eq!(t[..8], next.to_le_bytes());
                    assert!(t[8..].iter().all(|b| *b == next as u8));
                    next += 1;
                }
                c.release();
            }
            Err(VegaRecvError::Closed) => break,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    writer.join().unwrap();
    assert_eq!(next, N);
}

#[test]
fn errors_display() {
    let e = VegaSendError::TooLarge {
        tuple: 65,
        slot: 64,
    };
    assert_eq!(
        e.to_string(),
        "a tuple of 65 bytes does not fit a slot of 64 bytes"
    );
    assert!(VegaOpenError::BadMagic { found: 1 }
        .to_string()
        .contains("not a Vega ring"));
}

/// Far longer than the watchdog: a park ends in time only if something wakes it.
const LONG: std::time::Duration = std::time::Duration::from_secs(3600);
const WATCHDOG: std::time::Duration = std::time::Duration::from_secs(30);

#[test]
fn a_park_that_nothing_wakes_times_out_and_one_with_work_waiting_does_not_sleep() {
    let (mut p, mut c) = channel(layout(8, 1)).unwrap();
    let short = std::time::Duration::from_millis(1);
    assert_eq!(c.park(short), Wakeup::TimedOut);
    p.put(b"x").unwrap();
    assert_eq!(p.park(short), Wakeup::TimedOut);
    assert_eq!(c.park(LONG), Wakeup::Ready);
    assert_eq!(c.get().unwrap(), Some(&b"x"[..]));
    // Parking releases what was got, which is the room the producer waits for.
    assert_eq!(c.park(short), Wakeup::TimedOut);
    assert_eq!(p.park(LONG), Wakeup::Ready);
    p.poison();
    assert_eq!(c.park(LONG), Wakeup::Ready);
}

#[test]
fn parked_ends_are_woken_by_publish_release_and_leaving() {
    let (mut p, mut c) = channel(layout(8, 2)).unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        loop {
            match c.get() {
                Ok(Some(t)) => {
                    got.push(t.to_vec());
                    c.release();
                    // Slow down so the producer fills the ring and parks.
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Ok(None) => {
                    c.park(LONG);
                }
                Err(VegaRecvError::Closed) => break,
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
        let _ = done.send(got);
    });
    let tuples: Vec<[u8; 1]> = (0..8u8).map(|i| [i]).collect();
    for (i, t) in tuples.iter().enumerate() {
        if i == 4 {
            // Let the consumer drain and park.
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        while p.put(t) == Err(VegaSendError::Full) {
            p.park(LONG);
        }
    }
    drop(p);
    let got = finished
        .recv_timeout(WATCHDOG)
        .expect("watchdog: an end stayed parked");
    assert_eq!(got, tuples.iter().map(|t| t.to_vec()).collect::<Vec<_>>());
}
