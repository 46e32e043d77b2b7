//! The transport conformance suite, written once and run against every transport that has
//! endpoints: order kept, nothing lost or duplicated, backpressure when full, clean close,
//! and a vanished sender reported instead of waited for.

use proptest::prelude::*;
use sluice_transport::{RecvError, SendError, TransportSpec, TupleReceiver, TupleSender};
use sluice_types::Message;

/// Every transport with endpoints, built with a small capacity so tests reach "full".
fn transports() -> Vec<TransportSpec> {
    vec![
        TransportSpec::Threaded { capacity: 8 },
        TransportSpec::ShmVega {
            slot_bytes: 16,
            slots: 8,
        },
    ]
}

type Pair = (Box<dyn TupleSender<u64>>, Box<dyn TupleReceiver<u64>>);

fn pair(spec: &TransportSpec) -> Pair {
    spec.connect_typed::<u64>().expect("transport builds")
}

fn drain(rx: &mut dyn TupleReceiver<u64>) -> Vec<Message<u64>> {
    let mut out = Vec::new();
    while let Ok(1..) = rx.poll(3, &mut out) {}
    out
}

#[test]
fn keeps_order_and_loses_nothing_across_threads() {
    for spec in transports() {
        let (mut tx, mut rx) = pair(&spec);
        const N: u64 = 100_000;
        let sender = std::thread::spawn(move || {
            for i in 0..N {
                let mut msg = Message::Data(i);
                loop {
                    match tx.offer(msg) {
                        Ok(()) => break,
                        Err(refused) => {
                            assert_eq!(refused.error, SendError::Full);
                            msg = refused.message;
                            std::thread::yield_now();
                        }
                    }
                }
            }
            while let Err(r) = tx.offer(Message::EndOfStream) {
                assert_eq!(r.error, SendError::Full);
                std::thread::yield_now();
            }
            tx.flush();
        });
        let mut expected = 0;
        let mut buf = Vec::new();
        'outer: loop {
            buf.clear();
            if rx.poll(64, &mut buf).unwrap() == 0 {
                std::thread::yield_now();
            }
            for m in buf.drain(..) {
                match m {
                    Message::Data(v) => {
                        assert_eq!(v, expected, "{spec}");
                        expected += 1;
                    }
                    Message::EndOfStream => break 'outer,
                    Message::Punctuation => panic!("no punctuation was sent"),
                }
            }
        }
        sender.join().unwrap();
        assert_eq!(expected, N, "{spec}");
    }
}

#[test]
fn refuses_when_full_and_accepts_after_a_read() {
    for spec in transports() {
        let (mut tx, mut rx) = pair(&spec);
        let mut sent = 0u64;
        let refused = loop {
            match tx.offer(Message::Data(sent)) {
                Ok(()) => sent += 1,
                Err(r) => break r,
            }
            assert!(sent < 1_000_000, "{spec} never reports full");
        };
        assert_eq!(refused.error, SendError::Full, "{spec}");
        assert_eq!(refused.message, Message::Data(sent), "{spec}");
        let mut one = Vec::new();
        assert_eq!(rx.poll(1, &mut one).unwrap(), 1);
        tx.offer(refused.message).unwrap();
        tx.flush();
        let rest = drain(rx.as_mut());
        assert_eq!(rest.len() as u64, sent, "{spec}");
    }
}

#[test]
fn a_closed_receiver_refuses_and_a_vanished_sender_is_reported() {
    for spec in transports() {
        let (mut tx, rx) = pair(&spec);
        drop(rx);
        let r = tx.offer(Message::Data(1)).unwrap_err();
        assert_eq!(r.error, SendError::Closed, "{spec}");

        let (mut tx, mut rx) = pair(&spec);
        tx.offer(Message::Data(5)).unwrap();
        drop(tx);
        assert_eq!(drain(rx.as_mut()), vec![Message::Data(5)], "{spec}");
        assert_eq!(
            rx.poll(1, &mut Vec::new()),
            Err(RecvError::Disconnected),
            "{spec}"
        );
    }
}

#[test]
fn a_clean_end_is_not_a_disconnect() {
    for spec in transports() {
        let (mut tx, mut rx) = pair(&spec);
        tx.offer(Message::Punctuation).unwrap();
        tx.offer(Message::EndOfStream).unwrap();
        tx.flush();
        drop(tx);
        assert_eq!(
            drain(rx.as_mut()),
            vec![Message::Punctuation, Message::EndOfStream]
        );
        assert_eq!(rx.poll(1, &mut Vec::new()), Ok(0), "{spec}");
    }
}

proptest! {
    #[test]
    fn flushed_messages_arrive_exactly_once_in_order(
        values in prop::collection::vec(any::<u64>(), 0..64),
        flush_every in 1usize..9,
    ) {
        for spec in transports() {
            let (mut tx, mut rx) = pair(&spec);
            let mut received = Vec::new();
            for (i, v) in values.iter().enumerate() {
                let mut msg = Message::Data(*v);
                loop {
                    match tx.offer(msg) {
                        Ok(()) => break,
                        Err(r) => {
                            prop_assert_eq!(r.error, SendError::Full);
                            msg = r.message;
                            received.extend(drain(rx.as_mut()));
                        }
                    }
                }
                if i % flush_every == 0 {
                    tx.flush();
                }
            }
            tx.flush();
            received.extend(drain(rx.as_mut()));
            let expected: Vec<_> = values.iter().copied().map(Message::Data).collect();
            prop_assert_eq!(received, expected);
        }
    }
}

#[test]
fn an_erased_batch_offer_moves_what_fits_and_keeps_the_rest_in_order() {
    use sluice_transport::{Delivery, StreamType};
    for spec in transports() {
        let (mut tx, mut rx) = StreamType::of::<u64>().connect(&spec).unwrap();
        let mut batch: Vec<u64> = (0..20).collect();
        assert_eq!(tx.offer_batch(&mut batch), Err(SendError::Full), "{spec}");
        assert!(!batch.is_empty() && batch.len() < 20, "{spec}");
        let mut received = Vec::new();
        let mut drain = |rx: &mut Box<dyn sluice_transport::ErasedReceiver>| {
            while let Ok(1..) = rx.poll(64, &mut |d| {
                if let Delivery::Batch(b) = d {
                    received.extend(b.iter_as::<u64>().copied());
                }
                std::ops::ControlFlow::Continue(())
            }) {}
        };
        while !batch.is_empty() {
            tx.flush();
            drain(&mut rx);
            let _ = tx.offer_batch(&mut batch);
        }
        tx.flush();
        drain(&mut rx);
        assert_eq!(received, (0..20).collect::<Vec<_>>(), "{spec}");
        let mut wrong: Vec<u32> = vec![1];
        assert!(matches!(
            tx.offer_batch(&mut wrong),
            Err(SendError::TypeMismatch { .. })
        ));
    }
}

#[test]
fn a_tuple_of_exactly_slot_bytes_passes_and_one_byte_more_is_refused() {
    use sluice_types::BytesTuple;
    let spec = TransportSpec::ShmVega {
        slot_bytes: 32,
        slots: 4,
    };
    let (mut tx, mut rx) = spec.connect_typed::<BytesTuple>().unwrap();
    tx.offer(Message::Data(BytesTuple(vec![7; 32]))).unwrap();
    let refused = tx
        .offer(Message::Data(BytesTuple(vec![7; 33])))
        .unwrap_err();
    assert_eq!(
        refused.error,
        SendError::TooLarge {
            tuple: 33,
            slot: 32
        }
    );
    assert_eq!(
        refused.error.to_string(),
        "a tuple of 33 bytes does not fit a slot of 32 bytes"
    );
    tx.flush();
    let mut out = Vec::new();
    assert_eq!(rx.poll(8, &mut out).unwrap(), 1);
    assert_eq!(out, vec![Message::Data(BytesTuple(vec![7; 32]))]);
}
