//! Property test: any sequence of writes, claims, publishes, gets and releases on a Vega ring
//! behaves like a `VecDeque` of the published tuples, bounded by the slot count (slots got but
//! not released still count), with oversized tuples refused; and the edge case of a tuple of
//! exactly `slot_bytes`.
#![cfg(not(loom))]

use std::collections::VecDeque;

use proptest::prelude::*;
use sluice_ring::vega::{channel, VegaLayout, VegaRecvError, VegaSendError};

#[derive(Debug, Clone, Copy)]
enum ClaimEnd {
    Commit,
    Stage,
    Abandon,
}

#[derive(Debug, Clone)]
enum Op {
    Write(usize, u8),
    Put(usize, u8),
    PutBatch(Vec<usize>, u8),
    Claim {
        len: usize,
        truncate: Option<usize>,
        seed: u8,
        end: ClaimEnd,
    },
    Publish,
    Get,
    GetBatch(usize),
    Release,
    ReadyToSend,
    Available,
}

/// Operations per case: fewer under Miri, which runs the whole case interpreted.
const MAX_OPS: usize = if cfg!(miri) { 40 } else { 150 };

/// A tuple of `len` bytes that differs from its neighbours.
fn tuple(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|k| seed.wrapping_add(k as u8)).collect()
}

fn op() -> impl Strategy<Value = Op> {
    let len = 0usize..14;
    prop_oneof![
        4 => (len.clone(), any::<u8>()).prop_map(|(l, s)| Op::Write(l, s)),
        2 => (len.clone(), any::<u8>()).prop_map(|(l, s)| Op::Put(l, s)),
        1 => (prop::collection::vec(len.clone(), 0..5), any::<u8>()).prop_map(|(l, s)| Op::PutBatch(l, s)),
        2 => (len.clone(), prop::option::of(0usize..14), any::<u8>(), prop_oneof![
            Just(ClaimEnd::Commit), Just(ClaimEnd::Stage), Just(ClaimEnd::Abandon)
        ]).prop_map(|(len, truncate, seed, end)| Op::Claim { len, truncate, seed, end }),
        2 => Just(Op::Publish),
        3 => Just(Op::Get),
        1 => (0usize..6).prop_map(Op::GetBatch),
        2 => Just(Op::Release),
        1 => Just(Op::ReadyToSend),
        1 => Just(Op::Available),
    ]
}

/// The model: what a bounded deque with staging would do.
struct Model {
    slot_bytes: usize,
    slots: usize,
    published: VecDeque<Vec<u8>>,
    staged: Vec<Vec<u8>>,
    unreleased: usize,
}

impl Model {
    fn occupied(&self) -> usize {
        self.published.len() + self.staged.len() + self.unreleased
    }

    /// What `write` of a `len`-byte tuple must answer.
    fn write(&mut self, t: Vec<u8>) -> Result<(), VegaSendError> {
        if t.len() > self.slot_bytes {
            return Err(VegaSendError::TooLarge {
                tuple: t.len(),
                slot: self.slot_bytes,
            });
        }
        if self.occupied() == self.slots {
            return Err(VegaSendError::Full);
        }
        self.staged.push(t);
        Ok(())
    }

    fn publish(&mut self) {
        self.published.extend(self.staged.drain(..));
    }
}

proptest! {
    #[test]
    fn behaves_like_a_bounded_deque(
        slot_bytes in 1usize..12,
        slots in 1usize..6,
        ops in prop::collection::vec(op(), 0..MAX_OPS),
        consumer_leaves_first in any::<bool>(),
    ) {
        let (mut p, mut c) = channel(VegaLayout::new(slot_bytes, slots).unwrap()).unwrap();
        let mut m = Model { slot_bytes, slots, published: VecDeque::new(), staged: Vec::new(), unreleased: 0 };
        for op in ops {
            match op {
                Op::Write(len, seed) => {
                    let t = tuple(len, seed);
                    prop_assert_eq!(p.write(&t), m.write(t.clone()));
                }
                Op::Put(len, seed) => {
                    let t = tuple(len, seed);
                    let expected = m.write(t.clone());
                    if expected.is_ok() { m.publish(); }
                    prop_assert_eq!(p.put(&t), expected);
                }
                Op::PutBatch(lens, seed) => {
                    let ts: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, l)| tuple(*l, seed.wrapping_add(i as u8))).collect();
                    let mut sent = 0;
                    let mut first_err = None;
                    for t in &ts {
                        match m.write(t.clone()) {
                            Ok(()) => sent += 1,
                            Err(e) => { first_err = Some(e); break; }
                        }
                    }
                    m.publish();
                    let expected = match first_err { Some(e) if sent == 0 => Err(e), _ => Ok(sent) };
                    prop_assert_eq!(p.put_batch(&ts), expected);
                }
                Op::Claim { len, truncate, seed, end } => {
                    let t = tuple(len, seed);
                    let expected_err = if len > slot_bytes {
                        Some(VegaSendError::TooLarge { tuple: len, slot: slot_bytes })
                    } else if m.occupied() == slots {
                        Some(VegaSendError::Full)
                    } else {
                        None
                    };
                    match p.claim(len) {
                        Err(e) => prop_assert_eq!(Some(e), expected_err),
                        Ok(mut claim) => {
                            prop_assert_eq!(expected_err, None);
                            prop_assert_eq!(claim.len(), len);
                            claim.copy_from_slice(&t);
                            let kept = truncate.map_or(len, |n| n.min(len));
                            claim.truncate(kept);
                            match end {
                                ClaimEnd::Commit => { claim.commit(); m.staged.push(t[..kept].to_vec()); m.publish(); }
                                ClaimEnd::Stage => { claim.stage(); m.staged.push(t[..kept].to_vec()); }
                                // Abandoned: the claim just goes out of scope.
                                ClaimEnd::Abandon => {}
                            }
                        }
                    }
                }
                Op::Publish => { p.publish(); m.publish(); }
                Op::Get => {
                    let expected = m.published.pop_front();
                    if expected.is_some() { m.unreleased += 1; }
                    prop_assert_eq!(c.get().unwrap().map(<[u8]>::to_vec), expected);
                }
                Op::GetBatch(max) => {
                    let n = max.min(m.published.len());
                    let expected: Vec<Vec<u8>> = m.published.drain(..n).collect();
                    m.unreleased += n;
                    let batch = c.get_batch(max).unwrap();
                    prop_assert_eq!(batch.len(), n);
                    prop_assert_eq!(batch.map(<[u8]>::to_vec).collect::<Vec<_>>(), expected);
                }
                Op::Release => { c.release(); m.unreleased = 0; }
                Op::ReadyToSend => prop_assert_eq!(p.ready_to_send(), m.occupied() < slots),
                Op::Available => prop_assert_eq!(c.available(), m.published.len()),
            }
            prop_assert_eq!(p.staged(), m.staged.len());
            prop_assert_eq!(c.unreleased(), m.unreleased);
        }
        if consumer_leaves_first {
            drop(c);
            prop_assert!(p.is_closed());
            prop_assert_eq!(p.put(b""), Err(VegaSendError::Closed));
        } else {
            drop(p);
            m.publish();
            prop_assert!(c.is_closed());
            let mut rest = Vec::new();
            loop {
                match c.get_batch(2) {
                    Ok(batch) => rest.extend(batch.map(<[u8]>::to_vec)),
                    Err(e) => { prop_assert_eq!(e, VegaRecvError::Closed); break; }
                }
                c.release();
            }
            prop_assert_eq!(rest, Vec::from(m.published));
        }
    }
}

#[test]
fn a_tuple_of_exactly_slot_bytes_passes_and_one_byte_more_is_refused() {
    for slot_bytes in [1, 7, 8, 9, 32, 64, 100] {
        let (mut p, mut c) = channel(VegaLayout::new(slot_bytes, 2).unwrap()).unwrap();
        let exact = tuple(slot_bytes, 3);
        p.put(&exact).unwrap();
        assert_eq!(c.get().unwrap(), Some(&exact[..]));
        c.release();
        let over = tuple(slot_bytes + 1, 3);
        assert_eq!(
            p.put(&over),
            Err(VegaSendError::TooLarge {
                tuple: slot_bytes + 1,
                slot: slot_bytes
            })
        );
        assert_eq!(
            p.write(&over),
            Err(VegaSendError::TooLarge {
                tuple: slot_bytes + 1,
                slot: slot_bytes
            })
        );
        assert!(matches!(
            p.claim(slot_bytes + 1),
            Err(VegaSendError::TooLarge { .. })
        ));
        assert_eq!(c.get(), Ok(None));
        // The exact size also fits through the zero-copy path, and the neighbour is intact.
        let mut claim = p.claim(slot_bytes).unwrap();
        claim.copy_from_slice(&exact);
        claim.commit();
        p.put(&exact[..1]).unwrap();
        assert_eq!(c.get().unwrap(), Some(&exact[..]));
        assert_eq!(c.get().unwrap(), Some(&exact[..1]));
    }
}
