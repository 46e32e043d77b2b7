//! Property test: any sequence of writes (one value, or a run of them), publishes and pops on
//! the SPSC queue behaves like a `VecDeque` holding the published values, bounded by the
//! capacity.
#![cfg(not(loom))]

use std::collections::VecDeque;

use proptest::prelude::*;
use sluice_ring::spsc::{channel, PushError};

#[derive(Debug, Clone)]
enum Op {
    Write(u16),
    WriteMany(Vec<u16>),
    Publish,
    Pop,
    PopBatch(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<u16>().prop_map(Op::Write),
        2 => prop::collection::vec(any::<u16>(), 0..12).prop_map(Op::WriteMany),
        2 => Just(Op::Publish),
        2 => Just(Op::Pop),
        1 => (0usize..6).prop_map(Op::PopBatch),
    ]
}

proptest! {
    #[test]
    fn behaves_like_a_bounded_deque(capacity in 1usize..9, ops in prop::collection::vec(op(), 0..200)) {
        let (mut p, mut c) = channel::<u16>(capacity).unwrap();
        let cap = p.capacity();
        let mut published: VecDeque<u16> = VecDeque::new();
        let mut unpublished: Vec<u16> = Vec::new();
        for op in ops {
            match op {
                Op::Write(v) => {
                    let full = published.len() + unpublished.len() == cap;
                    match p.write(v) {
                        Ok(()) => { prop_assert!(!full); unpublished.push(v); }
                        Err(PushError::Full(back)) => { prop_assert!(full); prop_assert_eq!(back, v); }
                        Err(PushError::Closed(_)) => prop_assert!(false, "closed while both ends live"),
                    }
                }
                Op::WriteMany(values) => {
                    // As many as fit are written, in order; the rest stay in the iterator.
                    let room = cap - published.len() - unpublished.len();
                    let mut rest = values.iter().copied();
                    let n = p.write_many(&mut rest);
                    prop_assert_eq!(n, values.len().min(room));
                    unpublished.extend(&values[..n]);
                    prop_assert_eq!(rest.collect::<Vec<_>>(), values[n..].to_vec());
                }
                Op::Publish => { p.publish(); published.extend(unpublished.drain(..)); }
                Op::Pop => prop_assert_eq!(c.try_pop(), published.pop_front()),
                Op::PopBatch(max) => {
                    let mut out = Vec::new();
                    let n = c.pop_batch(max, &mut out);
                    let expected: Vec<u16> = (0..max.min(published.len())).filter_map(|_| published.pop_front()).collect();
                    prop_assert_eq!(n, expected.len());
                    prop_assert_eq!(out, expected);
                }
            }
        }
        drop(p);
        published.extend(unpublished.drain(..));
        prop_assert!(c.is_closed());
        let mut rest = Vec::new();
        c.pop_batch(usize::MAX, &mut rest);
        prop_assert_eq!(rest, Vec::from(published));
    }
}
