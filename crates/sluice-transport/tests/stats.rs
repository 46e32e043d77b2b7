//! What receivers tell of their edge while it runs (`TupleReceiver::stats`, read by the
//! runtime's live metrics): the fill of the queue or ring, bytes, losses.

use sluice_transport::{shm_osr, shm_vega, threaded, ReceiverStats, TupleReceiver, TupleSender};
use sluice_types::Message;

/// Offers `n` tuples and flushes.
fn offer(tx: &mut impl TupleSender<[u8; 8]>, n: u64) {
    for i in 0..n {
        assert!(tx.offer(Message::Data(i.to_le_bytes())).is_ok());
    }
    tx.flush();
}

#[test]
fn a_threaded_port_tells_its_fill_in_messages() {
    let (mut tx, mut rx) = threaded::threaded_port::<[u8; 8]>(16).unwrap();
    offer(&mut tx, 3);
    assert_eq!(
        rx.stats(),
        ReceiverStats {
            queued: Some((3, 16)),
            ..ReceiverStats::default()
        }
    );
    let mut out = Vec::new();
    rx.poll(16, &mut out).unwrap();
    assert_eq!(rx.stats().queued, Some((0, 16)));
}

#[test]
fn a_vega_ring_tells_its_fill_in_slots() {
    let (mut tx, mut rx) = shm_vega::connect::<[u8; 8]>(8, 32).unwrap();
    offer(&mut tx, 5);
    let (queued, slots) = rx.stats().queued.unwrap();
    assert_eq!((queued, slots), (5, 32));
}

#[test]
fn an_osr_ring_tells_its_fill_and_bytes_in_bytes() {
    let (mut senders, mut rx) = shm_osr::connect::<[u8; 8]>(4096, 256, 1).unwrap();
    offer(&mut senders[0], 10);
    let stats = rx.stats();
    assert!(stats.queued_in_bytes);
    let (queued, capacity) = stats.queued.unwrap();
    assert!(queued > 0 && capacity == 4096, "{stats:?}");
    let mut out = Vec::new();
    while out.len() < 10 {
        rx.poll(16, &mut out).unwrap();
    }
    let after = rx.stats();
    assert_eq!(after.queued, Some((0, 4096)));
    assert!(after.bytes.unwrap() >= 80, "{after:?}");
    assert_eq!(after.lost, 0);
}
