//! What the `tcp` transport does beyond the conformance suite: it admits only senders with the
//! job's secret and a free index, while strangers that connect and say nothing (more than any
//! limit), send garbage, a cut hello or a huge length cannot keep its sender out; survives
//! hostile bytes from an admitted peer and names it (a proptest feeds random frames through a
//! raw socket), reports a sender cut off mid-stream, merges several senders, waits for a
//! receiver that is still starting, and batches as its profile says.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use sluice_transport::tcp::{
    bind_receiver, connect_sender, BatchProfile, JobSecret, TcpParams, TcpReceiver, HELLO_LEN,
    MAGIC, MAX_PENDING, MAX_PENDING_PER_ADDRESS, SECRET_LEN, VERSION,
};
use sluice_transport::{RecvError, SendError, TupleReceiver, TupleSender};
use sluice_types::{BytesTuple, Message, Punctuation, Tuple};
use socket2::{Domain, Socket, Type};

const WATCHDOG: Duration = Duration::from_secs(30);
const SECRET: [u8; SECRET_LEN] = [0x5a; SECRET_LEN];

fn loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

fn secret() -> JobSecret {
    JobSecret::from_bytes(SECRET)
}

fn receiver<T: Tuple>(senders: usize, params: &TcpParams) -> (TcpReceiver<T>, SocketAddr) {
    bind_receiver::<T>(loopback(), &secret(), senders, params).expect("bind")
}

/// A hello laid out by hand from the module's diagram.
fn hello(secret: &[u8; SECRET_LEN], index: u32, facade: Option<u32>, frame_limit: u32) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&MAGIC);
    h.extend_from_slice(&VERSION.to_le_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&index.to_le_bytes());
    let (encoding, size) = facade.map_or((0u32, 0u32), |size| (1, size));
    h.extend_from_slice(&encoding.to_le_bytes());
    h.extend_from_slice(&size.to_le_bytes());
    h.extend_from_slice(&frame_limit.to_le_bytes());
    h.extend_from_slice(secret);
    assert_eq!(h.len(), HELLO_LEN);
    h
}

/// The frame limit of default parameters: the largest tuple with its run and length headers.
const DEFAULT_FRAME_LIMIT: u32 = (64 << 10) + 9;

/// Polls until `n` messages or an end of stream arrived, the receiver fails, or the watchdog
/// fires.
fn receive<T: Tuple + PartialEq>(
    rx: &mut TcpReceiver<T>,
    n: usize,
) -> (Vec<Message<T>>, Option<RecvError>) {
    let deadline = Instant::now() + WATCHDOG;
    let mut out = Vec::new();
    while out.len() < n && out.last() != Some(&Message::EndOfStream) {
        assert!(Instant::now() < deadline, "stalled after {}", out.len());
        match rx.poll(64, &mut out) {
            Ok(0) => std::thread::yield_now(),
            Ok(_) => {}
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

/// What a receiver made of a raw peer's bytes: the messages, its failure, and the peer's
/// address.
type Outcome<T> = (Vec<Message<T>>, Option<RecvError>, SocketAddr);

/// Connects a raw socket to a fresh `u64` receiver, presents a good hello, writes `bytes` and
/// closes; returns what the receiver made of it.
fn hostile_u64(bytes: &[u8]) -> Outcome<u64> {
    let (mut rx, addr) = receiver::<u64>(1, &TcpParams::default());
    let mut raw = TcpStream::connect(addr).unwrap();
    let peer = raw.local_addr().unwrap();
    raw.write_all(&hello(&SECRET, 0, Some(8), DEFAULT_FRAME_LIMIT))
        .unwrap();
    raw.write_all(bytes).unwrap();
    drop(raw);
    let (mut out, error) = receive(&mut rx, usize::MAX);
    if error.is_some() {
        return (out, error, peer);
    }
    // Whatever followed the end of stream was written before it was read: a few more polls
    // see it.
    for _ in 0..100 {
        if let Err(e) = rx.poll(64, &mut out) {
            return (out, Some(e), peer);
        }
        std::thread::yield_now();
    }
    (out, None, peer)
}

/// The failure of an edge whose sender at `peer` sent `what`.
fn misbehaved(peer: SocketAddr, what: &str) -> Option<RecvError> {
    Some(RecvError::Misbehaved {
        peer,
        what: what.to_string(),
    })
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_le_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

fn run_of_u64(values: &[u64]) -> Vec<u8> {
    let mut body = vec![1];
    body.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for v in values {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body
}

#[test]
fn the_receiver_binds_only_to_the_address_given() {
    let (rx, addr) = receiver::<u64>(1, &TcpParams::default());
    assert!(addr.ip().is_loopback(), "{addr}");
    assert_ne!(addr.port(), 0);
    assert_eq!(rx.local_addr(), addr);
}

#[test]
fn a_hand_made_hello_and_frames_are_understood() {
    let mut bytes = frame(&run_of_u64(&[1, 2, 3]));
    // A latency marker: the tag, then the kind, the value and a sender of 0.
    bytes.extend(frame(&[2, 3, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0]));
    bytes.extend(frame(&[3]));
    let (out, error, _) = hostile_u64(&bytes);
    assert_eq!(error, None);
    assert_eq!(
        out,
        vec![
            Message::Data(1),
            Message::Data(2),
            Message::Data(3),
            Message::Punctuation(Punctuation::Latency(0x0102_0304_0506_0708)),
            Message::EndOfStream
        ]
    );
}

#[test]
fn a_sender_without_the_secret_is_refused_and_the_edge_lives_on() {
    let params = TcpParams::with_profile(BatchProfile::Latency);
    let (mut rx, addr) = receiver::<u64>(1, &params);
    let wrong = JobSecret::from_bytes([0x5b; SECRET_LEN]);
    let mut intruder = connect_sender::<u64>(addr, &wrong, 0, &params).unwrap();
    let deadline = Instant::now() + WATCHDOG;
    while rx.refused() == 0 {
        assert!(Instant::now() < deadline, "the intruder was never refused");
        assert_eq!(rx.poll(8, &mut Vec::new()), Ok(0));
        std::thread::yield_now();
    }
    // The intruder finds its connection closed.
    let refused = loop {
        assert!(Instant::now() < deadline, "the intruder could send forever");
        match intruder.offer(Message::Data(13)) {
            Ok(()) => intruder.flush(),
            Err(r) => break r.error,
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(refused, SendError::Closed);

    let mut good = connect_sender::<u64>(addr, &secret(), 0, &params).unwrap();
    good.offer(Message::Data(42)).unwrap();
    good.offer(Message::EndOfStream).unwrap();
    good.flush();
    let (out, error) = receive(&mut rx, 2);
    assert_eq!(error, None);
    assert_eq!(out, vec![Message::Data(42), Message::EndOfStream]);
    assert_eq!(rx.refused(), 1);
}

#[test]
fn bad_hellos_and_taken_indices_are_refused() {
    let (mut rx, addr) = receiver::<u64>(2, &TcpParams::default());
    let good = hello(&SECRET, 1, Some(8), DEFAULT_FRAME_LIMIT);
    let mut bad_magic = good.clone();
    bad_magic[0] = b'X';
    let cases = [
        bad_magic,
        hello(&SECRET, 2, Some(8), DEFAULT_FRAME_LIMIT), // index out of range
        hello(&SECRET, 1, Some(4), DEFAULT_FRAME_LIMIT), // another tuple size
        hello(&SECRET, 1, None, DEFAULT_FRAME_LIMIT),    // another encoding
        hello(&SECRET, 1, Some(8), DEFAULT_FRAME_LIMIT + 1), // frames we would refuse
        good[..HELLO_LEN - 1].to_vec(),                  // cut short
        good.clone(),                                    // admitted
        good,                                            // index 1 again
    ];
    let mut sockets = Vec::new();
    for bytes in &cases {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(bytes).unwrap();
        if bytes.len() < HELLO_LEN {
            s.shutdown(std::net::Shutdown::Write).unwrap();
        }
        sockets.push(s);
    }
    let deadline = Instant::now() + WATCHDOG;
    while rx.refused() < 7 {
        assert!(Instant::now() < deadline, "refused {}", rx.refused());
        assert_eq!(rx.poll(8, &mut Vec::new()), Ok(0));
        std::thread::yield_now();
    }
    assert_eq!(rx.connected(), 1);
    assert_eq!(rx.refused(), 7);
}

/// Polls `rx` (receiving nothing) until it has refused `n` connections.
fn poll_until_refused<T: Tuple>(rx: &mut TcpReceiver<T>, n: u64) {
    let deadline = Instant::now() + WATCHDOG;
    while rx.refused() < n {
        assert!(Instant::now() < deadline, "refused {} of {n}", rx.refused());
        assert_eq!(rx.poll(8, &mut Vec::new()), Ok(0));
        rx.park(Duration::from_millis(10));
    }
}

/// Whether the receiver closed `stream`: a read finds its end (or a reset) within the
/// watchdog.
fn closed_by_peer(stream: &mut TcpStream) -> bool {
    stream.set_read_timeout(Some(WATCHDOG)).unwrap();
    matches!(stream.read(&mut [0; 1]), Ok(0) | Err(_))
}

/// Sends `values` and the end of the stream through a new sender and checks they all arrive.
fn a_sender_gets_through(rx: &mut TcpReceiver<u64>, addr: SocketAddr, values: &[u64]) {
    let mut tx = connect_sender::<u64>(addr, &secret(), 0, &TcpParams::default()).unwrap();
    for &v in values {
        tx.offer(Message::Data(v)).unwrap();
    }
    tx.offer(Message::EndOfStream).unwrap();
    tx.flush();
    let (out, error) = receive(rx, values.len() + 1);
    assert_eq!(error, None);
    let mut expected: Vec<Message<u64>> = values.iter().map(|&v| Message::Data(v)).collect();
    expected.push(Message::EndOfStream);
    assert_eq!(out, expected);
}

#[test]
fn silent_connections_cannot_keep_the_sender_out() {
    // Far more than the old limit of 16 pending handshakes, and than the places of one
    // address, all opened before the sender connects.
    const SILENT: usize = 3 * MAX_PENDING_PER_ADDRESS + 16;
    let (mut rx, addr) = receiver::<u64>(1, &TcpParams::default());
    let mut silent: Vec<TcpStream> = (0..SILENT)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    poll_until_refused(&mut rx, (SILENT - MAX_PENDING_PER_ADDRESS) as u64);
    a_sender_gets_through(&mut rx, addr, &[1, 2, 3]);
    // Once the sender is in, the connections still waiting are refused too, and every
    // silent connection finds itself closed.
    assert_eq!(rx.refused(), SILENT as u64);
    assert!(silent.iter_mut().all(closed_by_peer));
}

#[test]
fn strangers_before_the_first_poll_cannot_fill_the_backlog_and_keep_the_sender_out() {
    // More idle connections than the listen backlog holds, all before the receiver is first
    // polled (its process is still starting): admission holds from the bind.
    const STRANGERS: usize = 140;
    let (mut rx, addr) = receiver::<u64>(1, &TcpParams::default());
    // A connect made while the admission thread waits for a CPU may find the backlog full for
    // a moment and have its SYN dropped: the kernel sends it again after 1 s, then 3 s, so
    // each connect gets 5 s (on the old code, nobody accepts and every one past the backlog
    // fails).
    let strangers: Vec<TcpStream> = (0..STRANGERS)
        .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok())
        .collect();
    assert_eq!(strangers.len(), STRANGERS, "the backlog filled up");
    // The sender connects before the receiver is polled; this fails after the sender's
    // patience if nobody accepts.
    let mut tx = connect_sender::<u64>(addr, &secret(), 0, &TcpParams::default())
        .expect("the sender connects while strangers wait");
    tx.offer(Message::Data(7)).unwrap();
    tx.offer(Message::EndOfStream).unwrap();
    tx.flush();
    let (out, error) = receive(&mut rx, 2);
    assert_eq!(error, None);
    assert_eq!(out, vec![Message::Data(7), Message::EndOfStream]);
    // Every stranger was refused (each named in a warning, up to the limits).
    assert_eq!(rx.refused(), STRANGERS as u64);
}

#[test]
fn a_flood_from_one_address_does_not_push_out_a_sender_from_another() {
    let (mut rx, addr) = receiver::<u64>(1, &TcpParams::default());
    // The sender's connection is in, its hello only half written.
    let mut sender = TcpStream::connect(addr).unwrap();
    let good = hello(&SECRET, 0, Some(8), DEFAULT_FRAME_LIMIT);
    sender.write_all(&good[..HELLO_LEN / 2]).unwrap();
    assert_eq!(rx.poll(8, &mut Vec::new()), Ok(0));
    // A stranger at another loopback address opens more connections than may wait in all.
    let flood = MAX_PENDING + MAX_PENDING_PER_ADDRESS;
    let stranger: SocketAddr = (Ipv4Addr::new(127, 0, 0, 2), 0).into();
    let _flood: Vec<TcpStream> = (0..flood)
        .map(|_| {
            let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
            socket.bind(&stranger.into()).unwrap();
            socket.connect(&addr.into()).unwrap();
            socket.into()
        })
        .collect();
    poll_until_refused(&mut rx, (flood - MAX_PENDING_PER_ADDRESS) as u64);
    sender.write_all(&good[HELLO_LEN / 2..]).unwrap();
    let mut bytes = frame(&run_of_u64(&[5]));
    bytes.extend(frame(&[3]));
    sender.write_all(&bytes).unwrap();
    let (out, error) = receive(&mut rx, 2);
    assert_eq!(error, None);
    assert_eq!(out, vec![Message::Data(5), Message::EndOfStream]);
    assert_eq!(rx.connected(), 1);
}

#[test]
fn strangers_sending_garbage_a_cut_hello_or_a_huge_length_are_refused_and_the_edge_lives_on() {
    let (mut rx, addr) = receiver::<u64>(1, &TcpParams::default());
    let good = hello(&SECRET, 0, Some(8), DEFAULT_FRAME_LIMIT);
    let wrong_secret = hello(&[0x5b; SECRET_LEN], 0, Some(8), DEFAULT_FRAME_LIMIT);
    let cases: [(&str, Vec<u8>); 4] = [
        ("garbage", b"GET / HTTP/1.1\r\n\r\n".to_vec()),
        (
            "a frame length of 4 GiB",
            [u32::MAX.to_le_bytes(); 4].concat(),
        ),
        ("a cut hello", good[..HELLO_LEN / 2].to_vec()),
        (
            "a frame of 4 GiB after a hello without the secret",
            [wrong_secret, u32::MAX.to_le_bytes().to_vec()].concat(),
        ),
    ];
    let mut strangers = Vec::new();
    for (_, bytes) in &cases {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(bytes).unwrap();
        // The cut hello's stranger goes away; the others wait for an answer.
        if bytes.len() < HELLO_LEN && bytes.starts_with(&MAGIC) {
            s.shutdown(std::net::Shutdown::Write).unwrap();
        }
        strangers.push(s);
    }
    poll_until_refused(&mut rx, cases.len() as u64);
    for ((what, _), s) in cases.iter().zip(&mut strangers) {
        assert!(closed_by_peer(s), "{what}: still open");
    }
    a_sender_gets_through(&mut rx, addr, &[7]);
    assert_eq!(rx.refused(), cases.len() as u64);
}

#[test]
fn a_connection_that_says_nothing_is_dropped_after_the_handshake_timeout() {
    let (mut rx, addr) = receiver::<u64>(1, &TcpParams::default());
    let mut silent = TcpStream::connect(addr).unwrap();
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.write_all(&MAGIC).unwrap();
    // Quiet is not refused at once: both wait for the rest of their hello.
    assert_eq!(rx.poll(8, &mut Vec::new()), Ok(0));
    assert_eq!(rx.refused(), 0);
    poll_until_refused(&mut rx, 2);
    assert!(closed_by_peer(&mut silent) && closed_by_peer(&mut slow));
    a_sender_gets_through(&mut rx, addr, &[9]);
}

#[test]
fn hostile_frames_poison_the_edge_naming_the_peer_and_what_it_sent() {
    let huge = u32::MAX.to_le_bytes().to_vec();
    let too_long = (DEFAULT_FRAME_LIMIT + 1).to_le_bytes().to_vec();
    let mut run_longer_than_frame = frame(&run_of_u64(&[1, 2]));
    run_longer_than_frame[5] = 3; // the run claims 3 tuples, the frame holds 2
    let mut after_end = frame(&[3]);
    after_end.extend(frame(&[2]));
    let over = format!("over the limit of {DEFAULT_FRAME_LIMIT}");
    let cases: Vec<(&str, Vec<u8>, String)> = vec![
        (
            "a frame length of 4 GiB",
            huge,
            format!("a frame of 4294967295 bytes, {over}"),
        ),
        (
            "a frame longer than the limit",
            too_long,
            format!("a frame of {} bytes, {over}", DEFAULT_FRAME_LIMIT + 1),
        ),
        ("an empty frame", frame(&[]), "an empty frame".into()),
        (
            "an unknown tag",
            frame(&[9]),
            "a record of unknown tag 0x09".into(),
        ),
        (
            "a run of no tuples",
            frame(&[1, 0, 0, 0, 0]),
            "a run of 0 tuples, which its frame of 0 bytes left cannot hold".into(),
        ),
        (
            "a run of 2^32-1 tuples",
            frame(&[1, 255, 255, 255, 255]),
            "a run of 4294967295 tuples, which its frame of 0 bytes left cannot hold".into(),
        ),
        (
            "a run longer than its frame",
            run_longer_than_frame,
            "a run of 3 tuples, which its frame of 16 bytes left cannot hold".into(),
        ),
        (
            "a tuple cut by its frame",
            frame(&[1, 1, 0, 0, 0, 1, 2, 3]),
            "a run of 1 tuples, which its frame of 3 bytes left cannot hold".into(),
        ),
        (
            "a run header cut by its frame",
            frame(&[1, 1]),
            "a record cut by the end of its frame".into(),
        ),
        (
            "the end of stream before more records",
            frame(&[3, 2]),
            "an end of stream inside its frame".into(),
        ),
        (
            "a punctuation without its value",
            frame(&[2]),
            "a record cut by the end of its frame".into(),
        ),
        (
            "a punctuation cut by its frame",
            frame(&[2, 2, 0, 0, 0, 0, 0, 0, 0]),
            "a record cut by the end of its frame".into(),
        ),
        (
            "a punctuation of an unknown kind",
            frame(&[2, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            "a punctuation that does not decode".into(),
        ),
        (
            "a window marker with a value",
            frame(&[2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            "a punctuation that does not decode".into(),
        ),
        (
            "a frame after the end of stream",
            after_end,
            "bytes after the end of its stream".into(),
        ),
    ];
    for (case, bytes, what) in cases {
        let (_, error, peer) = hostile_u64(&bytes);
        match &error {
            Some(RecvError::Misbehaved {
                peer: named,
                what: said,
            }) => {
                assert_eq!(*named, peer, "{case}");
                assert!(said.starts_with(&what), "{case}: {said}");
            }
            other => panic!("{case}: {other:?}"),
        }
        let text = error.unwrap().to_string();
        assert!(
            text.starts_with(&format!("the sender at {peer} sent {what}")),
            "{text}"
        );
    }
}

#[test]
fn a_normal_tuple_longer_than_the_limit_names_its_length() {
    let params = TcpParams {
        max_tuple_bytes: 16,
        batch_bytes: 64,
        ..TcpParams::default()
    };
    let (mut rx, addr) = receiver::<BytesTuple>(1, &params);
    let mut raw = TcpStream::connect(addr).unwrap();
    raw.write_all(&hello(&SECRET, 0, None, 64)).unwrap();
    let mut body = vec![1, 1, 0, 0, 0];
    body.extend_from_slice(&17u32.to_le_bytes());
    body.extend_from_slice(&[0; 17]);
    raw.write_all(&frame(&body)).unwrap();
    let (out, error) = receive(&mut rx, usize::MAX);
    assert!(out.is_empty());
    let expected = misbehaved(
        raw.local_addr().unwrap(),
        "a tuple of 17 bytes, over the limit of 16",
    );
    assert_eq!(error, expected);
    assert_eq!(
        rx.poll(1, &mut Vec::new()).err(),
        expected,
        "stays poisoned"
    );
}

#[test]
fn a_sender_cut_off_mid_frame_is_disconnected_not_malformed() {
    let mut bytes = frame(&run_of_u64(&[7, 8]));
    bytes.extend_from_slice(&frame(&run_of_u64(&[9, 10]))[..10]);
    let (out, error, _) = hostile_u64(&bytes);
    assert_eq!(out, vec![Message::Data(7), Message::Data(8)]);
    assert_eq!(error, Some(RecvError::Disconnected));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any bytes after a good hello: no panic, and never more messages than bytes.
    #[test]
    fn random_bytes_never_panic_or_multiply(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        framed in any::<bool>(),
    ) {
        // Half the cases wrap the bytes in a frame of the right length, to reach the records.
        let bytes = if framed && !bytes.is_empty() { frame(&bytes) } else { bytes };
        let (out, error, _) = hostile_u64(&bytes);
        prop_assert!(out.len() <= bytes.len());
        let ended = out.last() == Some(&Message::EndOfStream);
        prop_assert!(ended || error.is_some(), "a stream cut without its end is reported");
    }
}

#[test]
fn three_senders_fan_in_each_in_order_with_its_own_end() {
    const SENDERS: u64 = 3;
    const EACH: u64 = 20_000;
    let params = TcpParams {
        socket_buffer_bytes: Some(8192),
        ..TcpParams::default()
    };
    let (mut rx, addr) = receiver::<u64>(SENDERS as usize, &params);
    let threads: Vec<_> = (0..SENDERS)
        .map(|id| {
            std::thread::spawn(move || {
                let mut tx = connect_sender::<u64>(addr, &secret(), id as u32, &params).unwrap();
                for i in 0..EACH {
                    let mut m = Message::Data(id << 32 | i);
                    while let Err(r) = tx.offer(m) {
                        assert_eq!(r.error, SendError::Full);
                        m = r.message;
                        tx.flush();
                        std::thread::yield_now();
                    }
                }
                tx.offer(Message::EndOfStream).unwrap();
                tx.flush();
            })
        })
        .collect();
    let mut next = [0u64; SENDERS as usize];
    let mut ends = 0;
    let deadline = Instant::now() + WATCHDOG;
    let mut out = Vec::new();
    while ends < SENDERS {
        assert!(Instant::now() < deadline, "stalled at {next:?}");
        out.clear();
        rx.poll(256, &mut out).unwrap();
        for m in &out {
            match *m {
                Message::Data(v) => {
                    let (id, i) = ((v >> 32) as usize, v & 0xffff_ffff);
                    assert_eq!(i, next[id], "sender {id}");
                    next[id] += 1;
                }
                Message::EndOfStream => ends += 1,
                Message::Punctuation(p) => panic!("no punctuation was sent, got {p:?}"),
            }
        }
    }
    assert_eq!(next, [EACH; SENDERS as usize]);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        rx.poll(8, &mut Vec::new()),
        Ok(0),
        "finished after all ends"
    );
}

#[test]
fn a_sender_waits_for_a_receiver_that_is_still_starting() {
    // A port that was free a moment ago; the receiver binds it only after the sender started
    // trying.
    let port = std::net::TcpListener::bind(loopback())
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let params = TcpParams::default();
    let sender = std::thread::spawn(move || {
        let mut tx = connect_sender::<u64>(addr, &secret(), 0, &params).unwrap();
        tx.offer(Message::Data(1)).unwrap();
        tx.offer(Message::EndOfStream).unwrap();
        tx.flush();
    });
    std::thread::sleep(Duration::from_millis(200));
    // The sender's retries may hold the port for an instant (a connection to itself, which it
    // drops at once).
    let deadline = Instant::now() + WATCHDOG;
    let mut rx = loop {
        match bind_receiver::<u64>(addr, &secret(), 1, &params) {
            Ok((rx, _)) => break rx,
            Err(e) if Instant::now() < deadline => {
                eprintln!("bind {addr}: {e}; again");
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("bind {addr}: {e}"),
        }
    };
    let (out, error) = receive(&mut rx, 2);
    assert_eq!(error, None);
    assert_eq!(out, vec![Message::Data(1), Message::EndOfStream]);
    sender.join().unwrap();
}

#[test]
fn the_throughput_profile_holds_a_young_batch_until_the_end_or_the_budget() {
    let params = TcpParams {
        profile: BatchProfile::Throughput,
        min_batch_us: 0,
        max_batch_us: 1_000_000,
        batch_bytes: 64,
        max_tuple_bytes: 16,
        socket_buffer_bytes: None,
    };
    let (mut tx, mut rx) = sluice_transport::tcp::connect::<u64>(&params).unwrap();
    let started = Instant::now();
    for v in 0..3 {
        tx.offer(Message::Data(v)).unwrap();
    }
    tx.flush();
    let mut out = Vec::new();
    if started.elapsed() < Duration::from_millis(900) {
        // Still younger than its hold: nothing was written.
        assert!(tx.pending());
        assert_eq!(rx.poll(8, &mut out), Ok(0));
    }
    tx.offer(Message::EndOfStream).unwrap();
    tx.flush();
    assert!(!tx.pending(), "an end of stream goes at the next flush");
    let (got, error) = receive(&mut rx, 4);
    assert_eq!(error, None);
    assert_eq!(
        got,
        vec![
            Message::Data(0),
            Message::Data(1),
            Message::Data(2),
            Message::EndOfStream
        ]
    );

    // A frame reaching the byte budget is written without a flush.
    let (mut tx, mut rx) = sluice_transport::tcp::connect::<u64>(&params).unwrap();
    for v in 0..20 {
        tx.offer(Message::Data(v)).unwrap();
    }
    let (got, error) = receive(&mut rx, 5);
    assert_eq!(error, None);
    assert_eq!(got[..5], (0..5).map(Message::Data).collect::<Vec<_>>());
}

#[test]
fn the_registry_names_and_serializes_tcp() {
    use sluice_transport::TransportSpec;
    let spec = TransportSpec::Tcp(TcpParams::default());
    assert_eq!(spec.name(), "tcp");
    assert_eq!(
        spec.to_string(),
        "tcp(profile=adaptive, min_batch_us=0, max_batch_us=200, batch_bytes=65536, \
         max_tuple_bytes=65536)"
    );
    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(
        json,
        r#"{"kind":"tcp","profile":"adaptive","min_batch_us":0,"max_batch_us":200,"batch_bytes":65536,"max_tuple_bytes":65536,"socket_buffer_bytes":null}"#
    );
    assert_eq!(serde_json::from_str::<TransportSpec>(&json).unwrap(), spec);
    let bad = TransportSpec::Tcp(TcpParams {
        min_batch_us: 5,
        max_batch_us: 1,
        ..TcpParams::default()
    });
    let error = bad
        .connect_typed::<u64>()
        .err()
        .expect("refused")
        .to_string();
    assert_eq!(
        error,
        "transport tcp: min_batch_us must be at most max_batch_us (1), got 5"
    );
}

/// A facade tuple whose encoding fails for every seventh value.
#[derive(Debug, Clone, PartialEq)]
struct Picky(u64);

impl Tuple for Picky {
    const ENCODING: sluice_types::Encoding = sluice_types::Encoding::Facade { size: 8 };
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), sluice_types::EncodeError> {
        if self.0 % 7 == 6 {
            return Err(sluice_types::EncodeError {
                type_name: "Picky",
                reason: "every seventh".into(),
            });
        }
        out.extend_from_slice(&self.0.to_le_bytes());
        Ok(())
    }
    fn decode(bytes: &[u8]) -> Result<Self, sluice_types::DecodeError> {
        sluice_types::tuple_codec::decode_facade::<u64>(bytes).map(Picky)
    }
}

#[test]
fn an_unencodable_tuple_is_refused_and_leaves_no_trace_in_its_frame() {
    for profile in [BatchProfile::Latency, BatchProfile::Throughput] {
        let params = TcpParams {
            profile,
            max_batch_us: 0,
            batch_bytes: 40,
            max_tuple_bytes: 8,
            ..TcpParams::default()
        };
        let (mut tx, mut rx) = sluice_transport::tcp::connect::<Picky>(&params).unwrap();
        let mut expected = Vec::new();
        for v in 0..200 {
            match tx.offer(Message::Data(Picky(v))) {
                Ok(()) => expected.push(Message::Data(Picky(v))),
                Err(r) => {
                    assert_eq!(v % 7, 6);
                    assert!(matches!(r.error, SendError::Unencodable { .. }));
                }
            }
        }
        tx.offer(Message::EndOfStream).unwrap();
        expected.push(Message::EndOfStream);
        tx.flush();
        let (got, error) = receive(&mut rx, usize::MAX);
        assert_eq!(error, None, "{profile:?}");
        assert_eq!(got, expected, "{profile:?}");
    }
}

#[test]
fn the_latency_profile_writes_a_lone_message_at_once_and_the_rest_of_a_burst_at_the_flush() {
    let params = TcpParams::with_profile(BatchProfile::Latency);
    let (mut tx, mut rx) = sluice_transport::tcp::connect::<u64>(&params).unwrap();
    tx.offer(Message::Data(0)).unwrap();
    assert_eq!(
        receive(&mut rx, 1),
        (vec![Message::Data(0)], None),
        "no flush"
    );
    let started = Instant::now();
    tx.offer(Message::Data(1)).unwrap();
    tx.offer(Message::Data(2)).unwrap();
    if started.elapsed() < Duration::from_micros(50) {
        assert!(tx.pending(), "the rest of the burst waits for the flush");
    }
    tx.flush();
    assert!(!tx.pending());
    let burst = vec![Message::Data(1), Message::Data(2)];
    assert_eq!(receive(&mut rx, 2), (burst, None));
    // After the flush a lone message goes at once again.
    tx.offer(Message::Data(3)).unwrap();
    assert_eq!(receive(&mut rx, 1), (vec![Message::Data(3)], None));
}

/// Runs `park` on another thread and fails if it has not returned within the watchdog,
/// although it was given far longer to sleep.
fn parks_until_woken(park: impl FnOnce(Duration) -> bool + Send + 'static) {
    let (done, woken) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(park(Duration::from_secs(3600))));
    assert_eq!(woken.recv_timeout(WATCHDOG), Ok(true), "park did not wake");
}

#[test]
fn a_parked_receiver_wakes_when_bytes_arrive_and_a_parked_sender_when_room_returns() {
    let params = TcpParams {
        socket_buffer_bytes: Some(4096),
        ..TcpParams::with_profile(BatchProfile::Latency)
    };
    let (mut tx, mut rx) = sluice_transport::tcp::connect::<u64>(&params).unwrap();
    tx.offer(Message::Data(7)).unwrap();
    tx.flush();
    parks_until_woken(move |timeout| {
        let parked = rx.park(timeout);
        assert_eq!(receive(&mut rx, 1), (vec![Message::Data(7)], None));
        parked
    });

    // Fill the socket while nobody reads; a reader then drains it as the sender parks.
    let (mut tx, mut rx) = sluice_transport::tcp::connect::<u64>(&params).unwrap();
    let mut sent = 0u64;
    while tx.offer(Message::Data(sent)).is_ok() {
        sent += 1;
        tx.flush();
    }
    let reader = std::thread::spawn(move || receive(&mut rx, sent as usize));
    parks_until_woken(move |timeout| tx.park(timeout));
    let (got, error) = reader.join().unwrap();
    assert_eq!(error, None);
    assert_eq!(got, (0..sent).map(Message::Data).collect::<Vec<_>>());
}
