//! The transport conformance suite, written once and run against every transport that has
//! endpoints: order kept, nothing lost or duplicated, backpressure when full, clean close,
//! and a vanished sender reported instead of waited for.
//!
//! A transport whose flush cannot always hand everything over at once (TCP, bounded by the
//! kernel's buffers) says so with `pending`; the suite then flushes again after reading, as a
//! caller must.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use sluice_transport::tcp::{BatchProfile, TcpParams};
use sluice_transport::{RecvError, SendError, TransportSpec, TupleReceiver, TupleSender};
use sluice_types::Message;

/// TCP with the smallest buffers, a frame of 64 bytes and tuples of at most `max_tuple_bytes`.
/// The throughput profile holds nothing back on flush here (a zero delay), so the suite's
/// flush-then-read steps apply; it still coalesces offers into frames of `batch_bytes`.
fn small_tcp(profile: BatchProfile, max_tuple_bytes: usize) -> TransportSpec {
    TransportSpec::Tcp(TcpParams {
        profile,
        min_batch_us: 0,
        max_batch_us: 0,
        batch_bytes: 64,
        max_tuple_bytes,
        socket_buffer_bytes: Some(4096),
    })
}

/// Every transport with endpoints, built with a small capacity so tests reach "full".
fn transports() -> Vec<TransportSpec> {
    vec![
        TransportSpec::Threaded { capacity: 8 },
        TransportSpec::ShmVega {
            slot_bytes: 16,
            slots: 8,
        },
        small_tcp(BatchProfile::Latency, 16),
        small_tcp(BatchProfile::Throughput, 16),
        // Six two-tuple batch records fill the ring.
        TransportSpec::ShmOsr {
            capacity_bytes: 256,
            batch_bytes: 32,
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

/// How long a test waits for a transport to hand over what it holds.
const WATCHDOG: Duration = Duration::from_secs(30);

/// Flushes and reads until the sender holds nothing more; returns what arrived.
fn deliver(tx: &mut dyn TupleSender<u64>, rx: &mut dyn TupleReceiver<u64>) -> Vec<Message<u64>> {
    let deadline = Instant::now() + WATCHDOG;
    let mut out = Vec::new();
    loop {
        tx.flush();
        out.extend(drain(rx));
        if !tx.pending() {
            out.extend(drain(rx));
            return out;
        }
        assert!(Instant::now() < deadline, "the sender never emptied");
    }
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
        let rest = deliver(tx.as_mut(), rx.as_mut());
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
                            received.extend(deliver(tx.as_mut(), rx.as_mut()));
                        }
                    }
                }
                if i % flush_every == 0 {
                    tx.flush();
                }
            }
            received.extend(deliver(tx.as_mut(), rx.as_mut()));
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
        // More than any transport here holds, kernel buffers included.
        const N: u64 = 20_000;
        let mut batch: Vec<u64> = (0..N).collect();
        assert_eq!(tx.offer_batch(&mut batch), Err(SendError::Full), "{spec}");
        assert!(!batch.is_empty() && batch.len() < N as usize, "{spec}");
        let mut received = Vec::new();
        let mut drain = |rx: &mut Box<dyn sluice_transport::ErasedReceiver>| {
            while let Ok(1..) = rx.poll(64, &mut |d| {
                if let Delivery::Batch(b) = d {
                    received.extend(b.iter_as::<u64>().copied());
                }
                std::ops::ControlFlow::Continue(())
            }) {}
        };
        let deadline = Instant::now() + WATCHDOG;
        while !batch.is_empty() || tx.pending() {
            assert!(Instant::now() < deadline, "{spec}: the batch never went");
            tx.flush();
            drain(&mut rx);
            let _ = tx.offer_batch(&mut batch);
        }
        tx.flush();
        drain(&mut rx);
        assert_eq!(received, (0..N).collect::<Vec<_>>(), "{spec}");
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
    let osr_capacity = 256;
    let osr_slot = sluice_transport::shm_osr::slot_bytes(osr_capacity).unwrap();
    assert_eq!(
        osr_slot, 112,
        "half of 256, less the record and tuple headers"
    );
    for (spec, slot) in [
        (
            TransportSpec::ShmVega {
                slot_bytes: 32,
                slots: 4,
            },
            32,
        ),
        (small_tcp(BatchProfile::Latency, 32), 32),
        (small_tcp(BatchProfile::Throughput, 32), 32),
        (
            TransportSpec::ShmOsr {
                capacity_bytes: osr_capacity,
                batch_bytes: 16,
            },
            osr_slot,
        ),
    ] {
        let (mut tx, mut rx) = spec.connect_typed::<BytesTuple>().unwrap();
        tx.offer(Message::Data(BytesTuple(vec![7; slot]))).unwrap();
        let refused = tx
            .offer(Message::Data(BytesTuple(vec![7; slot + 1])))
            .unwrap_err();
        assert_eq!(
            refused.error,
            SendError::TooLarge {
                tuple: slot + 1,
                slot
            },
            "{spec}"
        );
        assert_eq!(
            refused.error.to_string(),
            format!(
                "a tuple of {} bytes does not fit a slot of {slot} bytes",
                slot + 1
            )
        );
        tx.flush();
        let deadline = Instant::now() + WATCHDOG;
        let mut out = Vec::new();
        while out.is_empty() {
            assert!(Instant::now() < deadline, "{spec}: nothing arrived");
            rx.poll(8, &mut out).unwrap();
        }
        assert_eq!(
            out,
            vec![Message::Data(BytesTuple(vec![7; slot]))],
            "{spec}"
        );
    }
}
