//! Property test: any single-threaded sequence of pushes, batches, held reservations, commits,
//! aborts, producer deaths and polls on the OSR ring behaves exactly like a model: a
//! `VecDeque` of reserved steps (records, pads, jumps) over byte positions, with the window,
//! the holes and their acknowledgements written out the simple way. Every result is compared:
//! `Full`/`TooLarge`/`Lost`/`Poisoned`, every poll's deliveries in order, and the counters.
//!
//! A second property checks the producer table the same way: any sequence of joins (in runs,
//! up to past [`PRODUCER_SLOTS`]) and departures against a list of slots, comparing every
//! join's slot or `ProducerTableFull`, every slot's entry and the joined count.
#![cfg(not(loom))]

use std::collections::VecDeque;

use proptest::prelude::*;
use sluice_ring::memory::HeapMemory;
use sluice_ring::osr::{
    CommitError, OsrError, OsrLayout, OsrProducer, OsrProducerEntry, OsrReservation, OsrRing,
    PushError, ReserveError, HOLE_SLOTS, PRODUCER_SLOTS,
};

const PRODUCERS: usize = 3;

#[derive(Debug, Clone)]
enum Op {
    Push {
        p: usize,
        len: usize,
    },
    Batch {
        p: usize,
        lens: Vec<usize>,
    },
    Hold {
        p: usize,
        len: usize,
    },
    Commit {
        p: usize,
    },
    Abort {
        p: usize,
    },
    /// The holder dies: its reservation is never finished.
    Die {
        p: usize,
    },
    /// A producer dies between reserving and claiming.
    DieBeforeClaim {
        p: usize,
        len: usize,
    },
    Poll {
        max: usize,
    },
}

fn len() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 0usize..24, 1 => 0usize..130]
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..PRODUCERS;
    prop_oneof![
        6 => (p.clone(), len()).prop_map(|(p, len)| Op::Push { p, len }),
        2 => (p.clone(), prop::collection::vec(0usize..20, 0..5))
            .prop_map(|(p, lens)| Op::Batch { p, lens }),
        2 => (p.clone(), len()).prop_map(|(p, len)| Op::Hold { p, len }),
        2 => p.clone().prop_map(|p| Op::Commit { p }),
        1 => p.clone().prop_map(|p| Op::Abort { p }),
        1 => p.clone().prop_map(|p| Op::Die { p }),
        1 => (p, len()).prop_map(|(p, len)| Op::DieBeforeClaim { p, len }),
        5 => (0usize..6).prop_map(|max| Op::Poll { max }),
    ]
}

// ---------------------------------------------------------------------------------------------
// The model.

type Delivery = (u32, bool, Vec<u8>);

#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Claimed, being written by producer `owner` (or by nobody if it died).
    Writing {
        owner: Option<usize>,
    },
    Ready,
    /// Delivered by the right side.
    Read,
    /// Reserved, no status word.
    Headerless,
}

#[derive(Debug, Clone)]
enum Kind {
    Record { rec: Delivery, state: State },
    Pad,
    Jump,
}

#[derive(Debug, Clone)]
struct Step {
    pos: u64,
    len: u64,
    kind: Kind,
}

#[derive(Debug, Clone)]
struct Hole {
    start: u64,
    len: u64,
    /// Producers that still have to acknowledge (`None`: dead, never will).
    pending: Vec<Option<usize>>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Counters {
    skipped_records: u64,
    skipped_spans: u64,
    lost_commits: u64,
}

struct Model {
    cap: u64,
    window: u64,
    max_payload: usize,
    wp: u64,
    read_pos: u64,
    left: u64,
    /// Reserved steps from `read_pos` to `wp`, in position order.
    steps: VecDeque<Step>,
    holes: Vec<Hole>,
    right: Option<(u64, u64)>,
    stuck: Option<(u64, u64)>,
    /// Which step each producer holds (its position).
    holding: [Option<u64>; PRODUCERS],
    counters: Counters,
    poisoned: bool,
}

enum Reserved {
    At(u64),
    Full,
    /// The holes leave no gap this large; the largest payload that fits.
    TooLarge(usize),
}

impl Model {
    fn new(cap: usize, window: u64) -> Self {
        Self {
            cap: cap as u64,
            window,
            max_payload: cap / 2 - 8,
            wp: 0,
            read_pos: 0,
            left: 0,
            steps: VecDeque::new(),
            holes: Vec::new(),
            right: None,
            stuck: None,
            holding: [None; PRODUCERS],
            counters: Counters::default(),
            poisoned: false,
        }
    }

    fn step_at(&self, pos: u64) -> Option<usize> {
        self.steps.iter().position(|s| s.pos == pos)
    }

    /// Places a record of `extent` bytes: pads, jumps, then the record or `Full`.
    fn reserve(&mut self, extent: u64, kind: Kind) -> Reserved {
        loop {
            let mut holes: Vec<(u64, u64)> = self.holes.iter().map(|h| (h.start, h.len)).collect();
            holes.sort_unstable();
            let (mut largest, mut gap_start) = (0, 0);
            for &(start, len) in &holes {
                largest = largest.max(start.saturating_sub(gap_start));
                gap_start = gap_start.max(start + len);
            }
            largest = largest.max(self.cap - gap_start);
            if extent > largest {
                return Reserved::TooLarge((largest as usize).saturating_sub(8));
            }
            let off = self.wp % self.cap;
            let (len, step_kind) = if let Some(h) = self.holes.iter().find(|h| h.start == off) {
                (h.len, Kind::Jump)
            } else {
                let mut obstacle = (off + extent > self.cap).then_some(self.cap);
                for h in &self.holes {
                    if h.start > off && h.start < off + extent {
                        obstacle = Some(obstacle.map_or(h.start, |o: u64| o.min(h.start)));
                    }
                }
                match obstacle {
                    Some(o) => (o - off, Kind::Pad),
                    None => (extent, kind.clone()),
                }
            };
            if self.wp + len > self.read_pos + self.cap {
                return Reserved::Full;
            }
            let pos = self.wp;
            let is_record = matches!(step_kind, Kind::Record { .. });
            self.steps.push_back(Step {
                pos,
                len,
                kind: step_kind,
            });
            self.wp += len;
            if is_record {
                return Reserved::At(pos);
            }
        }
    }

    /// The owner of the step at `pos` finishes it (`Some(rec)` to commit); returns whether it
    /// had been skipped (then it acknowledges).
    fn finish(&mut self, p: usize, pos: u64, commit: bool) -> bool {
        match self.step_at(pos) {
            Some(i) if matches!(self.steps[i].kind, Kind::Record { .. }) => {
                let step = &mut self.steps[i];
                if commit {
                    if let Kind::Record { state, .. } = &mut step.kind {
                        *state = State::Ready;
                    }
                } else {
                    step.kind = Kind::Pad;
                }
                false
            }
            _ => {
                // Skipped: it is a hole now (maybe already passed and released).
                for h in &mut self.holes {
                    if let Some(k) = h.pending.iter().position(|o| *o == Some(p)) {
                        h.pending.remove(k);
                        break;
                    }
                }
                self.counters.lost_commits += 1;
                true
            }
        }
    }

    fn poll(&mut self, max: usize) -> Result<Vec<Delivery>, OsrError> {
        if self.poisoned {
            return Err(OsrError::Poisoned);
        }
        let mut out = Vec::new();
        let result = self.walk(max, &mut out);
        self.release();
        if result.is_err() {
            self.poisoned = true;
        }
        result.map(|()| out)
    }

    fn walk(&mut self, max: usize, out: &mut Vec<Delivery>) -> Result<(), OsrError> {
        loop {
            let stuck_len;
            loop {
                if out.len() >= max {
                    return Ok(());
                }
                let Some(i) = self.step_at(self.left) else {
                    return Ok(()); // nothing reserved here
                };
                let step = self.steps[i].clone();
                match &step.kind {
                    Kind::Jump | Kind::Pad => self.left += step.len,
                    Kind::Record { rec, state } => match state {
                        State::Ready => {
                            out.push(rec.clone());
                            self.left += step.len;
                        }
                        State::Read => self.left += step.len,
                        State::Writing { .. } => {
                            stuck_len = Some(step.len);
                            break;
                        }
                        State::Headerless => {
                            stuck_len = None;
                            break;
                        }
                    },
                }
            }
            if let Some(len) = stuck_len {
                let mut r = match self.right {
                    Some((base, r)) if base == self.left => r,
                    _ => self.left + len,
                };
                while out.len() < max && r < self.read_pos + self.cap {
                    let Some(i) = self.step_at(r) else { break };
                    let step_len = self.steps[i].len;
                    match &mut self.steps[i].kind {
                        Kind::Jump | Kind::Pad => r += step_len,
                        Kind::Record { rec, state } => match state {
                            State::Ready => {
                                out.push(rec.clone());
                                *state = State::Read;
                                r += step_len;
                            }
                            State::Read => r += step_len,
                            State::Writing { .. } | State::Headerless => break,
                        },
                    }
                }
                self.right = Some((self.left, r));
            }
            match &mut self.stuck {
                Some((at, polls)) if *at == self.left => *polls += 1,
                s => *s = Some((self.left, 1)),
            }
            if self.stuck.unwrap().1 < self.window {
                return Ok(());
            }
            if self.holes.len() == HOLE_SLOTS {
                return Err(OsrError::TooManyHoles);
            }
            let off = self.left % self.cap;
            match stuck_len {
                Some(len) => {
                    let i = self.step_at(self.left).unwrap();
                    let Kind::Record {
                        state: State::Writing { owner },
                        ..
                    } = self.steps[i].kind
                    else {
                        unreachable!()
                    };
                    self.steps.remove(i);
                    self.holes.push(Hole {
                        start: off,
                        len,
                        pending: vec![owner],
                    });
                    self.counters.skipped_records += 1;
                    self.left += len;
                }
                None => {
                    // The span: consecutive headerless steps, up to a hole or the lap end.
                    let lap_end = self.left - off + self.cap;
                    let mut x = self.left;
                    let mut pending = Vec::new();
                    while let Some(i) = self.step_at(x) {
                        let step = &self.steps[i];
                        let is_headerless = matches!(
                            step.kind,
                            Kind::Record {
                                state: State::Headerless,
                                ..
                            }
                        );
                        if !is_headerless
                            || x >= lap_end
                            || self.holes.iter().any(|h| h.start == x % self.cap)
                        {
                            break;
                        }
                        pending.push(None);
                        x += step.len;
                        self.steps.remove(i);
                    }
                    self.holes.push(Hole {
                        start: off,
                        len: x - self.left,
                        pending,
                    });
                    self.counters.skipped_spans += 1;
                    self.left = x;
                }
            }
        }
    }

    fn release(&mut self) {
        if self.left == self.read_pos {
            return;
        }
        let mut p = self.read_pos;
        while p < self.left {
            let off = p % self.cap;
            let end = self.left.min(p - off + self.cap);
            let (a, b) = (off, off + (end - p));
            self.holes
                .retain(|h| !(h.start >= a && h.start + h.len <= b && h.pending.is_empty()));
            p = end;
        }
        while self.steps.front().is_some_and(|s| s.pos < self.left) {
            self.steps.pop_front();
        }
        self.read_pos = self.left;
    }
}

// ---------------------------------------------------------------------------------------------
// The harness around the real ring.

/// Producers whose reservations outlive one operation: each producer is leaked into a raw
/// pointer, and a `&mut` to it exists only while no reservation of it is held.
struct Producers {
    raw: Vec<*mut OsrProducer<HeapMemory>>,
    held: Vec<Option<OsrReservation<'static, HeapMemory>>>,
}

impl Producers {
    fn new(ring: &OsrRing<HeapMemory>) -> Self {
        Self {
            raw: (0..PRODUCERS)
                .map(|_| Box::into_raw(Box::new(ring.producer())))
                .collect(),
            held: (0..PRODUCERS).map(|_| None).collect(),
        }
    }

    /// Producer `p`, if it holds no reservation.
    fn get(&mut self, p: usize) -> Option<&'static mut OsrProducer<HeapMemory>> {
        // SAFETY: the pointer comes from `Box::into_raw` and is freed only in `drop`; no other
        // `&mut` to it is alive: `held[p]` (the only other borrower) is `None`, and every
        // `&mut` handed out before is dead (each is used within one operation).
        self.held[p].is_none().then(|| unsafe { &mut *self.raw[p] })
    }
}

impl Drop for Producers {
    fn drop(&mut self) {
        for h in &mut self.held {
            if let Some(r) = h.take() {
                std::mem::forget(r); // a held reservation dies with the test
            }
        }
        for &p in &self.raw {
            // SAFETY: from `Box::into_raw`, freed once, and no borrow of it is alive now.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

fn payload(seq: &mut u32, len: usize) -> Vec<u8> {
    *seq += 1;
    (0..len).map(|i| (*seq as usize * 31 + i) as u8).collect()
}

fn framed(tuples: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for t in tuples {
        out.extend_from_slice(&(t.len() as u32).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(t);
        out.resize(out.len().div_ceil(8) * 8, 0);
    }
    out
}

fn run(cap: usize, window: u64, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let layout = OsrLayout::new(cap, window).unwrap();
    let ring = OsrRing::create(HeapMemory::zeroed(layout.bytes_needed()), layout).unwrap();
    let mut consumer = ring.consumer().unwrap();
    let mut producers = Producers::new(&ring);
    let mut model = Model::new(cap, window);
    let mut seq = 0u32;

    for op in ops {
        match op {
            Op::Push { p, len } => {
                let Some(prod) = producers.get(p) else {
                    continue;
                };
                let bytes = payload(&mut seq, len);
                let got = prod.try_push(p as u32, &bytes);
                let want = if len > model.max_payload {
                    Err(PushError::TooLarge {
                        len,
                        max: model.max_payload,
                    })
                } else if model.poisoned {
                    Err(PushError::Poisoned)
                } else {
                    let rec = (p as u32, false, bytes);
                    let extent = 8 + (len as u64).div_ceil(8) * 8;
                    match model.reserve(
                        extent,
                        Kind::Record {
                            rec,
                            state: State::Ready,
                        },
                    ) {
                        Reserved::At(_) => Ok(()),
                        Reserved::Full => Err(PushError::Full),
                        Reserved::TooLarge(max) => Err(PushError::TooLarge { len, max }),
                    }
                };
                prop_assert_eq!(got, want);
            }
            Op::Batch { p, lens } => {
                let Some(prod) = producers.get(p) else {
                    continue;
                };
                let tuples: Vec<Vec<u8>> = lens.iter().map(|&l| payload(&mut seq, l)).collect();
                let got = prod.try_push_batch(p as u32, tuples.iter().map(Vec::as_slice));
                let body = framed(&tuples);
                let want = if tuples.is_empty() {
                    Ok(0)
                } else if body.len() > model.max_payload {
                    Err(PushError::TooLarge {
                        len: body.len(),
                        max: model.max_payload,
                    })
                } else if model.poisoned {
                    Err(PushError::Poisoned)
                } else {
                    let rec = (p as u32, true, body.clone());
                    match model.reserve(
                        8 + body.len() as u64,
                        Kind::Record {
                            rec,
                            state: State::Ready,
                        },
                    ) {
                        Reserved::At(_) => Ok(tuples.len()),
                        Reserved::Full => Err(PushError::Full),
                        Reserved::TooLarge(max) => Err(PushError::TooLarge {
                            len: body.len(),
                            max,
                        }),
                    }
                };
                prop_assert_eq!(got, want);
            }
            Op::Hold { p, len } => {
                let Some(prod) = producers.get(p) else {
                    continue;
                };
                let bytes = payload(&mut seq, len);
                let got = prod.try_reserve(p as u32, len);
                let want = if len > model.max_payload {
                    Err(ReserveError::TooLarge {
                        len,
                        max: model.max_payload,
                    })
                } else if model.poisoned {
                    Err(ReserveError::Poisoned)
                } else {
                    let extent = 8 + (len as u64).div_ceil(8) * 8;
                    let rec = (p as u32, false, bytes.clone());
                    match model.reserve(
                        extent,
                        Kind::Record {
                            rec,
                            state: State::Writing { owner: Some(p) },
                        },
                    ) {
                        Reserved::At(pos) => {
                            model.holding[p] = Some(pos);
                            Ok(())
                        }
                        Reserved::Full => Err(ReserveError::Full),
                        Reserved::TooLarge(max) => Err(ReserveError::TooLarge { len, max }),
                    }
                };
                match got {
                    Ok(mut r) => {
                        prop_assert_eq!(Ok(()), want);
                        r.write_at(0, &bytes);
                        producers.held[p] = Some(r);
                    }
                    Err(e) => prop_assert_eq!(Err(e), want),
                }
            }
            Op::Commit { p } | Op::Abort { p } | Op::Die { p } => {
                let Some(r) = producers.held[p].take() else {
                    continue;
                };
                let pos = model.holding[p].take().unwrap();
                match op {
                    Op::Commit { .. } => {
                        let lost = model.finish(p, pos, true);
                        let want = if lost { Err(CommitError::Lost) } else { Ok(()) };
                        prop_assert_eq!(r.commit(), want);
                    }
                    Op::Abort { .. } => {
                        model.finish(p, pos, false);
                        drop(r);
                    }
                    _ => {
                        std::mem::forget(r);
                        if let Some(i) = model.step_at(pos) {
                            if let Kind::Record { state, .. } = &mut model.steps[i].kind {
                                *state = State::Writing { owner: None };
                            }
                        }
                        for h in &mut model.holes {
                            for o in &mut h.pending {
                                if *o == Some(p) {
                                    *o = None;
                                }
                            }
                        }
                    }
                }
            }
            Op::DieBeforeClaim { p, len } => {
                let Some(prod) = producers.get(p) else {
                    continue;
                };
                let got = prod.simulate_death_after_reserve(len);
                let want = if len > model.max_payload {
                    Err(ReserveError::TooLarge {
                        len,
                        max: model.max_payload,
                    })
                } else if model.poisoned {
                    Err(ReserveError::Poisoned)
                } else {
                    let extent = 8 + (len as u64).div_ceil(8) * 8;
                    let rec = (p as u32, false, Vec::new());
                    match model.reserve(
                        extent,
                        Kind::Record {
                            rec,
                            state: State::Headerless,
                        },
                    ) {
                        Reserved::At(_) => Ok(()),
                        Reserved::Full => Err(ReserveError::Full),
                        Reserved::TooLarge(max) => Err(ReserveError::TooLarge { len, max }),
                    }
                };
                prop_assert_eq!(got, want);
            }
            Op::Poll { max } => {
                let mut got = Vec::new();
                let result = consumer.poll(max, |r| {
                    got.push((r.target(), r.is_batch(), r.bytes().to_vec()))
                });
                let want = model.poll(max);
                match (result, want) {
                    (Ok(n), Ok(w)) => {
                        prop_assert_eq!(n, w.len());
                        prop_assert_eq!(&got, &w);
                    }
                    (r, w) => prop_assert_eq!(r.map(|_| ()), w.map(|_| ())),
                }
            }
        }
        let stats = consumer.stats();
        prop_assert_eq!(
            Counters {
                skipped_records: stats.skipped_records,
                skipped_spans: stats.skipped_spans,
                lost_commits: stats.lost_commits,
            },
            model.counters.clone()
        );
        prop_assert_eq!(stats.holes as usize, model.holes.len());
    }
    Ok(())
}

proptest! {
    #[test]
    fn behaves_like_the_model(
        cap in prop_oneof![Just(64usize), Just(128), Just(256)],
        window in 1u64..5,
        ops in prop::collection::vec(op(), 0..if cfg!(miri) { 40 } else { 300 }),
    ) {
        run(cap, window, ops)?;
    }
}

#[test]
fn a_long_scripted_run_with_every_kind_of_event_matches_the_model() {
    use Op::*;
    let mut ops = Vec::new();
    for round in 0..if cfg!(miri) { 3 } else { 40 } {
        ops.extend([
            Hold { p: 0, len: 10 },
            Push { p: 1, len: 5 },
            Poll { max: 3 },
            Batch {
                p: 2,
                lens: vec![3, 0, 9],
            },
            Poll { max: 9 },
            Poll { max: 9 },
            Commit { p: 0 },
            DieBeforeClaim {
                p: 2,
                len: round % 7,
            },
            Push { p: 1, len: 17 },
            Poll { max: 9 },
            Poll { max: 9 },
            Poll { max: 9 },
            Hold { p: 1, len: 3 },
            Abort { p: 1 },
            Poll { max: 9 },
        ]);
    }
    run(256, 2, ops).unwrap();
}

/// An operation on the producer table.
#[derive(Debug, Clone)]
enum TableOp {
    /// `count` producers join, one after the other.
    Join { count: usize },
    /// The `nth` producer still joined (modulo their number) leaves.
    Leave { nth: usize },
}

fn table_op() -> impl Strategy<Value = TableOp> {
    prop_oneof![
        3 => (1usize..PRODUCER_SLOTS / 2).prop_map(|count| TableOp::Join { count }),
        1 => any::<usize>().prop_map(|nth| TableOp::Leave { nth }),
    ]
}

/// Runs `ops` on a fresh ring's producer table and on a list of slots (`Some(left)` once
/// joined), comparing them after every operation.
fn run_table(ops: Vec<TableOp>) -> Result<(), TestCaseError> {
    let layout = OsrLayout::new(64, u64::MAX).unwrap();
    let ring = OsrRing::create(HeapMemory::zeroed(layout.bytes_needed()), layout).unwrap();
    let consumer = ring.consumer().unwrap();
    let mut joined: Vec<(u32, OsrProducer<HeapMemory>)> = Vec::new();
    let mut model: Vec<bool> = Vec::new();
    let me = std::process::id();
    for op in ops {
        match op {
            TableOp::Join { count } => {
                for _ in 0..count {
                    match ring.join() {
                        Ok(producer) => {
                            prop_assert!(model.len() < PRODUCER_SLOTS);
                            prop_assert_eq!(producer.id(), Some(model.len() as u32));
                            joined.push((model.len() as u32, producer));
                            model.push(false);
                        }
                        Err(e) => {
                            prop_assert_eq!(e, OsrError::ProducerTableFull);
                            prop_assert_eq!(model.len(), PRODUCER_SLOTS);
                        }
                    }
                }
            }
            TableOp::Leave { nth } => {
                if !joined.is_empty() {
                    let (id, producer) = joined.swap_remove(nth % joined.len());
                    drop(producer);
                    model[id as usize] = true;
                }
            }
        }
        prop_assert_eq!(consumer.joined(), model.len());
        for (id, &left) in model.iter().enumerate() {
            prop_assert_eq!(
                consumer.producer(id as u32),
                Some(OsrProducerEntry { pid: me, left })
            );
        }
        prop_assert_eq!(consumer.producer(model.len() as u32), None);
        prop_assert_eq!(ring.stats().producers, joined.len() as u64);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 2 } else { 64 }))]
    #[test]
    fn the_producer_table_behaves_like_a_list_of_slots(
        ops in prop::collection::vec(table_op(), 0..if cfg!(miri) { 3 } else { 12 }),
    ) {
        run_table(ops)?;
    }
}
