//! Property test: any sequence of writes (of weight 1, or weighed), publishes and pops on the
//! SPSC queue behaves like a `VecDeque` holding the published values, bounded by the capacity
//! in values and in weight; a batch pop takes values while their weights fit what it asks for
//! (the first always).
#![cfg(not(loom))]

use std::collections::VecDeque;

use proptest::prelude::*;
use sluice_ring::spsc::{channel, PushError};

#[derive(Debug, Clone)]
enum Op {
    Write(u16),
    WriteWeighed(u16, usize),
    Publish,
    Pop,
    PopBatch(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<u16>().prop_map(Op::Write),
        3 => (any::<u16>(), 0usize..12).prop_map(|(v, w)| Op::WriteWeighed(v, w)),
        2 => Just(Op::Publish),
        2 => Just(Op::Pop),
        2 => (0usize..10).prop_map(Op::PopBatch),
    ]
}

/// The model: values with their weights (as the queue counts them).
type Held = VecDeque<(u16, usize)>;

fn weight(held: &Held) -> usize {
    held.iter().map(|(_, w)| w).sum()
}

proptest! {
    #[test]
    fn behaves_like_a_bounded_deque(capacity in 1usize..9, ops in prop::collection::vec(op(), 0..200)) {
        let (mut p, mut c) = channel::<u16>(capacity).unwrap();
        let cap = p.capacity();
        let mut published = Held::new();
        let mut unpublished = Held::new();
        for op in ops {
            let held = published.len() + unpublished.len();
            let used = weight(&published) + weight(&unpublished);
            prop_assert_eq!(p.free(), (cap - held).min(cap - used));
            match op {
                Op::Write(v) | Op::WriteWeighed(v, _) => {
                    let (written, counted) = match op {
                        Op::WriteWeighed(_, w) => (p.write_weighed(v, w), w.clamp(1, cap)),
                        _ => (p.write(v), 1),
                    };
                    let fits = held < cap && used + counted <= cap;
                    match written {
                        Ok(()) => { prop_assert!(fits); unpublished.push_back((v, counted)); }
                        Err(PushError::Full(back)) => { prop_assert!(!fits); prop_assert_eq!(back, v); }
                        Err(PushError::Closed(_)) => prop_assert!(false, "closed while both ends live"),
                    }
                }
                Op::Publish => { p.publish(); published.extend(unpublished.drain(..)); }
                Op::Pop => prop_assert_eq!(c.try_pop(), published.pop_front().map(|(v, _)| v)),
                Op::PopBatch(max) => {
                    prop_assert_eq!(c.available_weight(), weight(&published));
                    let mut out = Vec::new();
                    let moved = c.pop_batch(max, &mut out);
                    let mut expected = Vec::new();
                    let mut taken = 0;
                    while let Some(&(v, w)) = published.front() {
                        if max == 0 || (!expected.is_empty() && taken + w > max) {
                            break;
                        }
                        expected.push(v);
                        taken += w;
                        published.pop_front();
                    }
                    prop_assert_eq!(moved, taken);
                    prop_assert_eq!(out, expected);
                }
            }
        }
        drop(p);
        published.extend(unpublished.drain(..));
        prop_assert!(c.is_closed());
        let mut rest = Vec::new();
        c.pop_batch(usize::MAX, &mut rest);
        prop_assert_eq!(rest, published.into_iter().map(|(v, _)| v).collect::<Vec<_>>());
    }
}
