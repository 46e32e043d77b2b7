//! What the `udp-mq` transport does beyond the conformance suite: it counts every loss (a
//! receiver that is not read while its tiny socket buffer overflows), drops foreign and
//! malformed datagrams without poisoning the edge (a proptest feeds random and mangled
//! datagrams through a raw socket), merges three senders with one end of stream each, aligns
//! punctuations across queues with their values (counting one whose every copy was lost),
//! batches its system calls, and reports a sender that vanished after the idle limit but not
//! one that keeps sending heartbeats.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use sluice_transport::tcp::JobSecret;
use sluice_transport::udp_mq::{
    bind_receiver, connect_sender, job_tag, QueueChoice, UdpMqParams, UdpMqReceiver, HEADER_LEN,
    MAGIC, VERSION,
};
use sluice_transport::{RecvError, TupleReceiver, TupleSender};
use sluice_types::{BytesTuple, Message, Punctuation, Tuple};

const WATCHDOG: Duration = Duration::from_secs(30);

fn secret() -> JobSecret {
    JobSecret::from_bytes([0x5a; 32])
}

fn loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

fn params(queues: usize) -> UdpMqParams {
    UdpMqParams {
        queues,
        socket_buffer_bytes: Some(4 << 20),
        ..UdpMqParams::default()
    }
}

fn receiver<T: Tuple>(senders: usize, params: &UdpMqParams) -> (UdpMqReceiver<T>, SocketAddr) {
    bind_receiver::<T>(loopback(), &secret(), senders, params).expect("bind")
}

/// Polls until `ends` ends of stream arrived, the receiver fails, or the watchdog fires.
fn receive<T: Tuple>(
    rx: &mut UdpMqReceiver<T>,
    ends: usize,
) -> (Vec<Message<T>>, Option<RecvError>) {
    let deadline = Instant::now() + WATCHDOG;
    let mut out = Vec::new();
    let mut ended = 0;
    while ended < ends {
        assert!(Instant::now() < deadline, "stalled after {}", out.len());
        let before = out.len();
        match rx.poll(256, &mut out) {
            Ok(0) => std::thread::yield_now(),
            Ok(_) => {}
            Err(e) => return (out, Some(e)),
        }
        ended += out[before..]
            .iter()
            .filter(|m| matches!(m, Message::EndOfStream))
            .count();
    }
    (out, None)
}

/// Polls until nothing more comes.
fn drain<T: Tuple>(rx: &mut UdpMqReceiver<T>) -> Vec<Message<T>> {
    let mut out = Vec::new();
    while let Ok(1..) = rx.poll(256, &mut out) {}
    out
}

/// A datagram laid out by hand from the module's diagram.
fn datagram(
    job: u64,
    queue: u16,
    queues: u16,
    sender: u32,
    sequence: u64,
    first_tuple: u64,
    records: &[(u8, &[u8])],
) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(&MAGIC);
    d.push(VERSION);
    d.push(0);
    d.extend_from_slice(&queue.to_le_bytes());
    d.extend_from_slice(&queues.to_le_bytes());
    d.extend_from_slice(&(records.len() as u16).to_le_bytes());
    d.extend_from_slice(&sender.to_le_bytes());
    d.extend_from_slice(&job.to_le_bytes());
    d.extend_from_slice(&sequence.to_le_bytes());
    d.extend_from_slice(&first_tuple.to_le_bytes());
    assert_eq!(d.len(), HEADER_LEN);
    for (tag, payload) in records {
        d.push(*tag);
        d.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        d.extend_from_slice(payload);
    }
    d
}

/// The payload of a punctuation record laid out by hand from the module's diagram: the
/// punctuation's index, then its kind, value and sender.
fn punctuation(index: u64, punctuation: Punctuation) -> Vec<u8> {
    let (kind, value, from) = match punctuation {
        Punctuation::WindowMarker => (1u8, 0, 0u32),
        Punctuation::Watermark { time, from } => (2, time, from),
        Punctuation::Latency(v) => (3, v, 0),
        Punctuation::Suspend => (4, 0, 0),
        Punctuation::Checkpoint { n, from } => (5, n, from),
    };
    let mut payload = index.to_le_bytes().to_vec();
    payload.push(kind);
    payload.extend_from_slice(&value.to_le_bytes());
    payload.extend_from_slice(&from.to_le_bytes());
    payload
}

fn raw_socket(to: SocketAddr) -> UdpSocket {
    let raw = UdpSocket::bind(loopback()).unwrap();
    raw.connect(to).unwrap();
    raw
}

#[test]
fn every_loss_is_counted_when_a_tiny_buffer_overflows() {
    let params = UdpMqParams {
        queues: 2,
        socket_buffer_bytes: Some(4096),
        ..UdpMqParams::default()
    };
    let (mut rx, addr) = receiver::<u64>(1, &params);
    let mut tx = connect_sender::<u64>(addr, &secret(), 0, &params).unwrap();
    // Nobody reads while far more than the buffers hold is sent.
    const SENT: u64 = 200_000;
    for i in 0..SENT {
        tx.offer(Message::Data(i)).unwrap();
    }
    tx.flush();
    let mut received = drain(&mut rx).len() as u64;
    // The end comes once the buffers are empty: it tells each queue's total.
    tx.offer(Message::EndOfStream).unwrap();
    tx.flush();
    let (rest, error) = receive(&mut rx, 1);
    assert_eq!(error, None);
    assert_eq!(rest.last(), Some(&Message::EndOfStream));
    received += rest.len() as u64 - 1;
    let stats = rx.stats();
    assert!(received < SENT, "nothing was lost: the test proves nothing");
    assert_eq!(stats.lost_tuples, SENT - received, "{stats:?}");
    assert_eq!(rx.lost_tuples(), stats.lost_tuples);
    assert!(rx.lost_datagrams() > 0 && rx.lost_datagrams() < tx.datagrams_sent());
    assert_eq!(stats.tuples, received);
    assert_eq!((stats.malformed, stats.foreign, stats.late), (0, 0, 0));
}

#[test]
fn three_senders_merge_with_one_end_each_and_each_flow_in_order() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let params = params(3);
    let (mut rx, addr) = receiver::<u64>(3, &params);
    const EACH: u64 = 20_000;
    // Each sender stays within this many tuples of what the receiver has taken in all.
    const WINDOW: u64 = 2048;
    let taken = Arc::new(AtomicU64::new(0));
    let senders: Vec<_> = (0..3u64)
        .map(|s| {
            let taken = taken.clone();
            std::thread::spawn(move || {
                // Flow key: the sender and the tuple's number modulo 5.
                let mut tx = connect_sender::<u64>(addr, &secret(), s as u32, &params)
                    .unwrap()
                    .with_flow_key(|v: &u64| ((v >> 32) << 8) | ((v & 0xffff_ffff) % 5));
                let deadline = Instant::now() + WATCHDOG;
                for i in 0..EACH {
                    // SYNC: pairs with the receiver's Release store of what it has taken.
                    while i >= taken.load(Ordering::Acquire) / 3 + WINDOW {
                        tx.flush();
                        assert!(Instant::now() < deadline, "the receiver stopped taking");
                        std::thread::yield_now();
                    }
                    tx.offer(Message::Data(s << 32 | i)).unwrap();
                    if i % 64 == 0 {
                        tx.flush();
                    }
                }
                tx.offer(Message::EndOfStream).unwrap();
                tx.flush();
            })
        })
        .collect();
    let deadline = Instant::now() + WATCHDOG;
    let mut out = Vec::new();
    let mut ends = 0;
    while ends < 3 {
        assert!(Instant::now() < deadline, "stalled after {}", out.len());
        let before = out.len();
        if rx.poll(256, &mut out).unwrap() == 0 {
            std::thread::yield_now();
        }
        ends += out[before..]
            .iter()
            .filter(|m| matches!(m, Message::EndOfStream))
            .count();
        // SYNC: pairs with the senders' Acquire loads of the window.
        taken.store(out.len() as u64, Ordering::Release);
    }
    for sender in senders {
        sender.join().unwrap();
    }
    let mut next = [[0u64; 5]; 3];
    for m in out {
        match m {
            Message::Data(v) => {
                let (s, i) = ((v >> 32) as usize, v & 0xffff_ffff);
                let flow = (i % 5) as usize;
                assert_eq!(i, next[s][flow] * 5 + flow as u64, "sender {s} flow {flow}");
                next[s][flow] += 1;
            }
            Message::EndOfStream => {}
            Message::Punctuation(p) => panic!("no punctuation was sent, got {p:?}"),
        }
    }
    assert_eq!(next.iter().flatten().sum::<u64>(), 3 * EACH);
    assert_eq!(rx.stats().lost_tuples, 0);
    assert_eq!(drain(&mut rx), vec![], "the ends' repeats are ignored");
}

#[test]
fn a_punctuation_follows_everything_before_it_on_every_queue() {
    let params = UdpMqParams {
        queue_choice: QueueChoice::Random,
        datagram_bytes: 200,
        ..params(4)
    };
    let (mut rx, addr) = receiver::<u64>(1, &params);
    let mut tx = connect_sender::<u64>(addr, &secret(), 0, &params).unwrap();
    for round in 0..3u64 {
        for i in 0..1000 {
            tx.offer(Message::Data(round * 1000 + i)).unwrap();
        }
        tx.offer(Message::Punctuation(Punctuation::Watermark {
            time: round,
            from: 0,
        }))
        .unwrap();
    }
    tx.offer(Message::EndOfStream).unwrap();
    tx.flush();
    let (out, error) = receive(&mut rx, 1);
    assert_eq!(error, None);
    let mut seen = Vec::new();
    let mut punctuations = 0;
    for m in &out {
        match m {
            Message::Data(v) => seen.push(*v),
            Message::Punctuation(p) => {
                assert_eq!(
                    *p,
                    Punctuation::Watermark {
                        time: punctuations,
                        from: 0
                    },
                    "in order, with its value"
                );
                punctuations += 1;
                let before: Vec<u64> = (0..punctuations * 1000).collect();
                let mut got: Vec<u64> = seen
                    .iter()
                    .copied()
                    .filter(|v| *v < punctuations * 1000)
                    .collect();
                got.sort_unstable();
                assert_eq!(got, before, "punctuation {punctuations} came too early");
            }
            Message::EndOfStream => {}
        }
    }
    assert_eq!(punctuations, 3, "one per punctuation, not one per queue");
    assert_eq!(seen.len(), 3000);
    let stats = rx.stats();
    assert!(
        stats.system_calls < stats.datagrams,
        "recvmmsg took one datagram per call: {stats:?}"
    );
    assert!(tx.system_calls() < tx.datagrams_sent());
}

#[test]
fn a_punctuation_keeps_the_value_of_any_copy_and_one_with_every_copy_lost_is_counted() {
    let (mut rx, addr) = receiver::<u64>(1, &params(2));
    let job = job_tag(&secret());
    let raw = raw_socket(addr);
    let p: Vec<Vec<u8>> = [
        Punctuation::Watermark { time: 10, from: 0 },
        Punctuation::WindowMarker,
        Punctuation::Watermark { time: 12, from: 0 },
        Punctuation::Latency(13),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, value)| punctuation(i as u64, value))
    .collect();
    let end = 4u64.to_le_bytes();
    // Punctuation 0 reaches only queue 0, 1 both queues, 2 neither (both datagrams lost),
    // 3 both, with the end.
    let datagrams = [
        datagram(job, 0, 2, 0, 0, 0, &[(2, &p[0]), (2, &p[1])]),
        datagram(job, 1, 2, 0, 1, 0, &[(2, &p[1])]),
        datagram(job, 0, 2, 0, 2, 0, &[(2, &p[3]), (3, &end)]),
        datagram(job, 1, 2, 0, 3, 0, &[(2, &p[3]), (3, &end)]),
    ];
    for d in &datagrams {
        raw.send(d).unwrap();
    }
    let (out, error) = receive(&mut rx, 1);
    assert_eq!(error, None);
    assert_eq!(
        out,
        vec![
            Message::Punctuation(Punctuation::Watermark { time: 10, from: 0 }),
            Message::Punctuation(Punctuation::WindowMarker),
            Message::Punctuation(Punctuation::Latency(13)),
            Message::EndOfStream
        ]
    );
    let stats = rx.stats();
    assert_eq!((stats.lost_punctuations, stats.lost_datagrams), (1, 3));
}

#[test]
fn foreign_and_malformed_datagrams_are_counted_and_the_edge_goes_on() {
    let params = params(1);
    let (mut rx, addr) = receiver::<u64>(1, &params);
    let job = job_tag(&secret());
    let raw = raw_socket(addr);
    let one = 7u64.to_le_bytes();
    let foreign = [
        vec![],
        b"hello".to_vec(),
        datagram(job ^ 1, 0, 1, 0, 0, 0, &[(1, &one)]),
    ];
    let mut trailing = datagram(job, 0, 1, 0, 0, 0, &[(1, &one)]);
    trailing.push(0);
    let mut miscounted = datagram(job, 0, 1, 0, 0, 0, &[(1, &one)]);
    miscounted[10] = 2;
    let mut unknown_kind = punctuation(0, Punctuation::Latency(1));
    unknown_kind[8] = 9;
    let malformed = [
        trailing,
        miscounted,
        datagram(job, 1, 1, 0, 0, 0, &[(1, &one)]),
        datagram(job, 0, 2, 0, 0, 0, &[(1, &one)]),
        datagram(job, 0, 1, 1, 0, 0, &[(1, &one)]),
        datagram(job, 0, 1, 0, 0, 0, &[(1, &[1, 2, 3])]),
        datagram(job, 0, 1, 0, 0, 0, &[(9, &[])]),
        datagram(job, 0, 1, 0, 0, 0, &[(2, &[0; 8])]),
        datagram(job, 0, 1, 0, 0, 0, &[(2, &unknown_kind)]),
        datagram(job, 0, 1, 0, 0, 0, &[(3, &[0; 8]), (1, &one)]),
        datagram(job, 0, 1, 0, 0, 5, &[(1, &one)]),
        vec![0; 2000],
    ];
    for d in foreign.iter().chain(&malformed) {
        raw.send(d).unwrap();
    }
    raw.send(&datagram(job, 0, 1, 0, 0, 0, &[(1, &one)]))
        .unwrap();
    assert_eq!(drain(&mut rx), vec![Message::Data(7)]);
    let stats = rx.stats();
    // The last malformed one is 2,000 zero bytes: no magic, so foreign.
    assert_eq!(stats.foreign, foreign.len() as u64 + 1, "{stats:?}");
    assert_eq!(stats.malformed, malformed.len() as u64 - 1, "{stats:?}");
    assert_eq!(rx.malformed(), stats.malformed);
    // A stale sequence number is late, a gap is a loss.
    raw.send(&datagram(job, 0, 1, 0, 0, 0, &[(1, &one)]))
        .unwrap();
    raw.send(&datagram(job, 0, 1, 0, 3, 10, &[(1, &one)]))
        .unwrap();
    assert_eq!(drain(&mut rx), vec![Message::Data(7)]);
    let stats = rx.stats();
    assert_eq!(
        (stats.late, stats.lost_datagrams, stats.lost_tuples),
        (1, 2, 9)
    );
}

#[test]
fn a_vanished_sender_is_reported_after_the_idle_limit_but_a_quiet_one_is_not() {
    // Heartbeats every 750 ms keep the sender alive unless the test stalls for over 2 s.
    let params = UdpMqParams {
        idle_limit_ms: Some(3000),
        ..params(2)
    };
    let (mut rx, addr) = receiver::<u64>(1, &params);
    let mut tx = connect_sender::<u64>(addr, &secret(), 0, &params).unwrap();
    tx.offer(Message::Data(1)).unwrap();
    tx.flush();
    // Quiet for over twice the limit, but flushed often: heartbeats keep it alive.
    let quiet = Instant::now();
    let mut out = Vec::new();
    while quiet.elapsed() < Duration::from_millis(7000) {
        tx.flush();
        rx.poll(16, &mut out).expect("a quiet sender is not gone");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(out, vec![Message::Data(1)]);
    // Gone without a word (as if killed): no end, no gone record, no heartbeat.
    std::mem::forget(tx);
    let deadline = Instant::now() + WATCHDOG;
    loop {
        match rx.poll(16, &mut out) {
            Ok(_) => {
                assert!(Instant::now() < deadline, "never reported");
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => {
                assert_eq!(e, RecvError::Disconnected);
                break;
            }
        }
    }
}

#[test]
fn a_sender_whose_receiver_is_gone_finds_it_closed() {
    let (rx, addr) = receiver::<u64>(1, &params(2));
    let mut tx = connect_sender::<u64>(addr, &secret(), 0, &params(2)).unwrap();
    drop(rx);
    let deadline = Instant::now() + WATCHDOG;
    // The first datagrams bring back ICMP port unreachable; a later send reports it.
    loop {
        assert!(Instant::now() < deadline, "never closed");
        match tx.offer(Message::Data(1)) {
            Ok(()) => tx.flush(),
            Err(refused) => {
                assert_eq!(refused.error, sluice_transport::SendError::Closed);
                break;
            }
        }
    }
}

fn arb_record() -> impl Strategy<Value = (u8, Vec<u8>)> {
    (
        prop_oneof![Just(1u8), Just(2), Just(3), Just(4), any::<u8>()],
        prop::collection::vec(any::<u8>(), 0..20),
    )
}

/// A datagram of the job with random fields and records, then mangled.
fn arb_hostile() -> impl Strategy<Value = Vec<u8>> {
    (
        0u16..3,
        1u16..3,
        0u32..3,
        0u64..4,
        0u64..4,
        prop::collection::vec(arb_record(), 0..5),
        any::<u16>(),
        0usize..3,
        any::<u8>(),
    )
        .prop_map(
            |(queue, queues, sender, seq, first, records, at, how, byte)| {
                let records: Vec<(u8, &[u8])> =
                    records.iter().map(|(t, p)| (*t, p.as_slice())).collect();
                let mut d = datagram(
                    job_tag(&secret()),
                    queue,
                    queues,
                    sender,
                    seq,
                    first,
                    &records,
                );
                let at = usize::from(at) % d.len();
                match how {
                    0 => d[at] = byte,
                    1 => d.truncate(at),
                    _ => d.push(byte),
                }
                d
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_and_mangled_datagrams_never_panic_and_each_is_counted_once(
        random in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..80), 0..8),
        hostile in prop::collection::vec(arb_hostile(), 0..16),
    ) {
        let (mut rx, addr) = receiver::<BytesTuple>(2, &params(2));
        let raw = raw_socket(addr);
        for d in random.iter().chain(&hostile) {
            raw.send(d).unwrap();
        }
        let mut out = Vec::new();
        loop {
            match rx.poll(64, &mut out) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let s = rx.stats();
        let sent = (random.len() + hostile.len()) as u64;
        // Each datagram is accepted, late, malformed, foreign, or a repeat after its queue's
        // end (not counted).
        prop_assert!(s.datagrams + s.late + s.malformed + s.foreign <= sent, "{s:?}");
        prop_assert!(s.foreign >= random.iter().filter(|d| d.len() < 4 || d[..4] != MAGIC).count() as u64);
        let data = out.iter().filter(|m| matches!(m, Message::Data(_))).count() as u64;
        prop_assert_eq!(data, s.tuples);
    }
}
