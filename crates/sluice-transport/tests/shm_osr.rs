//! `shm-osr` with several senders in one process: each sender's order is kept, each end of
//! stream arrives, and the edge ends only after all of them; a sender that goes away without
//! its end is reported once everything it sent has arrived. Punctuations keep their place in
//! their sender's order, and their values.

use std::time::{Duration, Instant};

use sluice_transport::shm_osr::connect;
use sluice_transport::{RecvError, SendError, TupleReceiver, TupleSender};
use sluice_types::{Message, Punctuation};

/// A tuple naming its sender and its place in that sender's stream.
fn tuple(sender: u32, seq: u64) -> u64 {
    u64::from(sender) << 32 | seq
}

/// Offers `message`, waiting while the ring is full.
fn offer(tx: &mut impl TupleSender<u64>, mut message: Message<u64>) {
    loop {
        match tx.offer(message) {
            Ok(()) => return,
            Err(refused) => {
                assert_eq!(refused.error, SendError::Full);
                message = refused.message;
                std::thread::yield_now();
            }
        }
    }
}

#[test]
fn three_sender_threads_keep_their_order_and_the_edge_ends_after_all_three_ends() {
    const SENDERS: usize = 3;
    const N: u64 = 50_000;
    // A small ring and small records, so the senders wrap it often and meet `Full`.
    let (senders, mut rx) = connect::<u64>(4096, 256, SENDERS).unwrap();
    let watchdog = Instant::now() + Duration::from_secs(60);
    let threads: Vec<_> = senders
        .into_iter()
        .map(|mut tx| {
            std::thread::spawn(move || {
                let id = tx.id();
                for seq in 0..N {
                    offer(&mut tx, Message::Data(tuple(id, seq)));
                    if seq % 1000 == 999 {
                        // The value names the sender and the tuple the watermark follows.
                        let watermark = Punctuation::Watermark(tuple(id, seq));
                        offer(&mut tx, Message::Punctuation(watermark));
                    }
                    if seq % 37 == 0 {
                        tx.flush();
                    }
                }
                offer(&mut tx, Message::EndOfStream);
            })
        })
        .collect();
    let mut next = [0u64; SENDERS];
    let mut punctuations = 0;
    let mut ends = 0;
    let mut out = Vec::new();
    while ends < SENDERS {
        assert!(Instant::now() < watchdog, "the stream stalled: {next:?}");
        out.clear();
        if rx.poll(100, &mut out).unwrap() == 0 {
            std::thread::yield_now();
        }
        for m in &out {
            match *m {
                Message::Data(v) => {
                    let (sender, seq) = ((v >> 32) as usize, v & 0xFFFF_FFFF);
                    assert_eq!(seq, next[sender], "sender {sender} out of order");
                    next[sender] += 1;
                }
                Message::Punctuation(Punctuation::Watermark(v)) => {
                    let (sender, seq) = ((v >> 32) as usize, v & 0xFFFF_FFFF);
                    assert_eq!(
                        seq + 1,
                        next[sender],
                        "sender {sender}'s watermark misplaced"
                    );
                    punctuations += 1;
                }
                Message::Punctuation(p) => panic!("only watermarks were sent, got {p:?}"),
                Message::EndOfStream => ends += 1,
            }
        }
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(next, [N; SENDERS]);
    assert_eq!(punctuations, SENDERS as u64 * N / 1000);
    for _ in 0..3 {
        assert_eq!(rx.poll(100, &mut out), Ok(0), "ended for good");
    }
    assert_eq!(rx.lost_records(), 0);
}

#[test]
fn one_senders_end_does_not_end_the_edge() {
    let (mut senders, mut rx) = connect::<u64>(1024, 64, 2).unwrap();
    let mut b = senders.pop().unwrap();
    let mut a = senders.pop().unwrap();
    a.offer(Message::Data(1)).unwrap();
    a.offer(Message::EndOfStream).unwrap();
    let mut out = Vec::new();
    while rx.poll(8, &mut out).unwrap() > 0 {}
    assert_eq!(out, vec![Message::Data(1), Message::EndOfStream]);
    assert_eq!(rx.poll(8, &mut out), Ok(0), "b is still sending");
    drop(a);
    b.offer(Message::Data(2)).unwrap();
    b.flush();
    out.clear();
    assert_eq!(rx.poll(8, &mut out), Ok(1));
    assert_eq!(out, vec![Message::Data(2)]);
    b.offer(Message::EndOfStream).unwrap();
    drop(b);
    out.clear();
    assert_eq!(rx.poll(8, &mut out), Ok(1));
    assert_eq!(out, vec![Message::EndOfStream]);
    assert_eq!(rx.poll(8, &mut out), Ok(0));
}

#[test]
fn a_sender_dropped_without_its_end_is_reported_after_its_tuples() {
    let (mut senders, mut rx) = connect::<u64>(1024, 64, 2).unwrap();
    let mut b = senders.pop().unwrap();
    let mut a = senders.pop().unwrap();
    a.offer(Message::Data(10)).unwrap();
    a.offer(Message::EndOfStream).unwrap();
    b.offer(Message::Data(20)).unwrap();
    b.offer(Message::Data(21)).unwrap();
    drop(b); // without its end: its offered tuples still arrive
    let mut out = Vec::new();
    let error = loop {
        match rx.poll(1, &mut out) {
            Ok(_) => {}
            Err(e) => break e,
        }
    };
    assert_eq!(error, RecvError::Disconnected);
    assert_eq!(
        out,
        vec![
            Message::Data(10),
            Message::EndOfStream,
            Message::Data(20),
            Message::Data(21)
        ]
    );
    assert_eq!(rx.poll(1, &mut out), Err(RecvError::Disconnected));
    // The senders learn the edge is gone once the receiver is.
    drop(rx);
    assert_eq!(
        a.offer(Message::Data(11)).unwrap_err().error,
        SendError::Closed
    );
}

#[test]
fn a_sender_that_left_after_its_end_is_not_a_disconnect_even_if_the_end_is_read_later() {
    let (mut senders, mut rx) = connect::<u64>(4096, 64, 3).unwrap();
    let mut c = senders.pop().unwrap();
    let mut b = senders.pop().unwrap();
    let mut a = senders.pop().unwrap();
    // b's and c's open records come first, so nothing of a's can be read yet.
    b.offer(Message::Data(20)).unwrap();
    c.offer(Message::Data(30)).unwrap();
    a.offer(Message::Data(10)).unwrap();
    a.offer(Message::EndOfStream).unwrap();
    drop(a); // gone before the receiver has read its end
    let mut out = Vec::new();
    for _ in 0..10 {
        assert_eq!(rx.poll(8, &mut out), Ok(0));
    }
    b.flush();
    c.flush();
    while rx.poll(8, &mut out).unwrap() > 0 {}
    assert_eq!(
        out,
        vec![
            Message::Data(20),
            Message::Data(30),
            Message::Data(10),
            Message::EndOfStream
        ]
    );
    b.offer(Message::EndOfStream).unwrap();
    c.offer(Message::EndOfStream).unwrap();
    out.clear();
    while rx.poll(8, &mut out).unwrap() > 0 {}
    assert_eq!(out, vec![Message::EndOfStream, Message::EndOfStream]);
    assert_eq!(rx.poll(8, &mut out), Ok(0));
}
