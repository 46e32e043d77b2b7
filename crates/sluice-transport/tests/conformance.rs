//! The transport conformance suite, written once and run against every transport that has
//! endpoints: order kept, nothing lost or duplicated, backpressure when full, clean close,
//! a vanished sender reported instead of waited for, and ends that park woken by each other.
//! Tuples offered as copies of a reference (`offer_copy`) obey the same rules, and so do
//! punctuations of every kind, which arrive with their values in their place among the
//! tuples, through the typed and the type-erased endpoints alike.
//!
//! Checkpoint barriers above all keep their place: an instance aligning its inputs takes
//! everything before a barrier into the checkpoint and nothing after it, so a barrier that
//! overtook a tuple, or fell behind one, would put that tuple in the wrong checkpoint. Every
//! transport a checkpointed job may use carries a sender's tuples, batches (split by the
//! transport where they do not fit), watermarks and barriers, interleaved at random and
//! across a full queue, in exactly the order sent, each barrier with its number and sender.
//!
//! A transport whose flush cannot always hand everything over at once (TCP, bounded by the
//! kernel's buffers) says so with `pending`; the suite then flushes again after reading, as a
//! caller must.
//!
//! `udp-mq` is at most once and has no backpressure from its receiver, so it takes the tests
//! whose load fits the socket buffers (order, nothing lost, the end of the stream, a vanished
//! sender, the largest tuple), with one queue where they ask for one order over the whole
//! stream; its own test here paces a sender across threads and checks each flow's order.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use sluice_transport::tcp::{BatchProfile, TcpParams};
use sluice_transport::udp_mq::{QueueChoice, UdpMqParams, HEADER_LEN, RECORD_HEADER};
use sluice_transport::{
    Delivery, ErasedReceiver, ErasedSender, RecvError, SendError, StreamType, TransportKind,
    TransportSpec, TupleReceiver, TupleSender,
};
use sluice_types::{Message, Punctuation};

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

/// `udp-mq` on loopback with `queues` queues and tuples of at most `max_tuple_bytes`, with
/// socket buffers that hold the suite's bursts.
fn udp_mq(queues: usize, max_tuple_bytes: usize) -> TransportSpec {
    TransportSpec::UdpMq(UdpMqParams {
        queues,
        batch: 8,
        datagram_bytes: HEADER_LEN + RECORD_HEADER + max_tuple_bytes,
        socket_buffer_bytes: Some(1 << 20),
        ..UdpMqParams::default()
    })
}

/// The specs the suite runs for the transport `kind`, each built small so tests reach "full".
/// The match names every kind of the registry: a new transport does not compile here until it
/// says how the suite checks it.
fn specs(kind: TransportKind) -> Vec<TransportSpec> {
    match kind {
        // A direct call within one thread: no sender or receiver to check.
        TransportKind::Fused => Vec::new(),
        TransportKind::Threaded => vec![TransportSpec::Threaded { capacity: 8 }],
        TransportKind::ShmVega => vec![TransportSpec::ShmVega {
            slot_bytes: 16,
            slots: 8,
        }],
        TransportKind::Tcp => vec![
            small_tcp(BatchProfile::Latency, 16),
            small_tcp(BatchProfile::Throughput, 16),
        ],
        // Six two-tuple batch records fill the ring.
        TransportKind::ShmOsr => vec![TransportSpec::ShmOsr {
            capacity_bytes: 256,
            batch_bytes: 32,
        }],
        TransportKind::UdpMq => vec![udp_mq(1, 1024)],
        // Its endpoints live only in the ranks of `mpirun`: `tests/mpi.rs` runs the same
        // checks across real ranks.
        TransportKind::Mpi => Vec::new(),
    }
}

/// Every transport with endpoints, whether or not it pushes back: the specs of every kind in
/// the registry.
fn all_transports() -> Vec<TransportSpec> {
    TransportKind::ALL
        .iter()
        .flat_map(|&kind| specs(kind))
        .collect()
}

/// Every transport with endpoints that pushes back (all but the at-most-once ones), built with
/// a small capacity so tests reach "full".
fn transports() -> Vec<TransportSpec> {
    all_transports()
        .into_iter()
        .filter(|spec| !spec.is_at_most_once())
        .collect()
}

#[test]
fn the_suite_runs_every_kind_of_the_registry_under_its_name() {
    for &kind in TransportKind::ALL {
        for spec in specs(kind) {
            assert_eq!(spec.kind(), kind);
            // The registry's name is the `kind` a plan file writes.
            let written = serde_json::to_value(&spec).unwrap();
            assert_eq!(written["kind"], kind.name(), "{written}");
        }
    }
    let checked: Vec<&str> = all_transports().iter().map(|s| s.name()).collect();
    for name in ["threaded", "shm-vega", "tcp", "shm-osr", "udp-mq"] {
        assert!(
            checked.contains(&name),
            "{name} is not checked: {checked:?}"
        );
    }
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

/// A park timeout far beyond the watchdog: a park ends in time only if it is woken.
const LONG: Duration = Duration::from_secs(3600);

/// Streams `0..n`, a watermark naming the tuple before it after every 1,000th, and the end of
/// the stream from one thread to another and checks what arrives. When a send is refused or a
/// poll finds nothing, each end yields or, with `park`, parks on its doorbell until the other
/// wakes it (yielding if the transport cannot park).
fn stream_across_threads(spec: &TransportSpec, n: u64, park: bool) {
    let (mut tx, mut rx) = pair(spec);
    let sender = std::thread::spawn(move || {
        let mut offer = |mut msg: Message<u64>| loop {
            match tx.offer(msg) {
                Ok(()) => break,
                Err(refused) => {
                    assert_eq!(refused.error, SendError::Full);
                    msg = refused.message;
                    if !(park && tx.park(LONG)) {
                        std::thread::yield_now();
                    }
                }
            }
        };
        for i in 0..n {
            offer(Message::Data(i));
            if i % 1000 == 999 {
                offer(Message::Punctuation(Punctuation::Watermark {
                    time: i,
                    from: 0,
                }));
            }
        }
        offer(Message::EndOfStream);
        tx.flush();
    });
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut expected = 0;
        let mut watermarks = 0;
        let mut buf = Vec::new();
        'outer: loop {
            buf.clear();
            if rx.poll(64, &mut buf).unwrap() == 0 && !(park && rx.park(LONG)) {
                std::thread::yield_now();
            }
            for m in buf.drain(..) {
                match m {
                    Message::Data(v) => {
                        assert_eq!(v, expected);
                        expected += 1;
                    }
                    Message::EndOfStream => break 'outer,
                    Message::Punctuation(p) => {
                        assert_eq!(
                            p,
                            Punctuation::Watermark {
                                time: expected - 1,
                                from: 0
                            },
                            "misplaced"
                        );
                        watermarks += 1;
                    }
                }
            }
        }
        let _ = done.send((expected, watermarks));
    });
    let received = finished
        .recv_timeout(2 * WATCHDOG)
        .unwrap_or_else(|_| panic!("{spec}: the stream hung or the receiver failed"));
    sender.join().unwrap();
    assert_eq!(received, (n, n / 1000), "{spec}");
}

#[test]
fn keeps_order_and_loses_nothing_across_threads() {
    for spec in transports() {
        stream_across_threads(&spec, 100_000, false);
    }
}

#[test]
fn parked_ends_wake_each_other_and_lose_nothing() {
    // A stress test of the doorbells (threaded, shm-vega): with 8 slots both ends park over
    // and over. Transports without a doorbell yield instead.
    for spec in transports() {
        stream_across_threads(&spec, 100_000, true);
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
        assert_eq!(tx.offer_copy(&sent), Err(SendError::Full), "{spec}");
        // At least one message (the threaded port moves a run of them whole).
        let mut one = Vec::new();
        let read = rx.poll(1, &mut one).unwrap() as u64;
        assert!(read >= 1, "{spec}");
        tx.offer_copy(&sent).unwrap();
        let rest = deliver(tx.as_mut(), rx.as_mut());
        assert_eq!(rest.len() as u64, sent + 1 - read, "{spec}");
        assert_eq!(rest.last(), Some(&Message::Data(sent)), "{spec}");
    }
}

#[test]
fn a_closed_receiver_refuses() {
    for spec in transports() {
        let (mut tx, rx) = pair(&spec);
        drop(rx);
        let r = tx.offer(Message::Data(1)).unwrap_err();
        assert_eq!(r.error, SendError::Closed, "{spec}");
    }
}

#[test]
fn a_vanished_sender_is_reported() {
    for spec in all_transports().into_iter().chain([udp_mq(4, 64)]) {
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
    for spec in all_transports().into_iter().chain([udp_mq(4, 64)]) {
        let (mut tx, mut rx) = pair(&spec);
        let marker = Message::Punctuation(Punctuation::WindowMarker);
        tx.offer(marker.clone()).unwrap();
        tx.offer(Message::EndOfStream).unwrap();
        tx.flush();
        drop(tx);
        assert_eq!(drain(rx.as_mut()), vec![marker, Message::EndOfStream]);
        assert_eq!(rx.poll(1, &mut Vec::new()), Ok(0), "{spec}");
    }
}

/// One thing a test offers: a tuple by value or as a copy of a reference, or a message that
/// is not a tuple.
#[derive(Debug, Clone)]
enum Offer {
    Value(u64),
    Copy(u64),
    Control(Message<u64>),
}

impl Offer {
    /// The message that arrives for it.
    fn message(&self) -> Message<u64> {
        match self {
            Offer::Value(v) | Offer::Copy(v) => Message::Data(*v),
            Offer::Control(message) => message.clone(),
        }
    }
}

/// Offers `offers` in order, flushing after every `flush_every`th and reading whenever the
/// transport is full; returns what arrived once the sender holds nothing more. A refused offer
/// took nothing, so it is offered again as it was.
fn offer_all(spec: &TransportSpec, offers: &[Offer], flush_every: usize) -> Vec<Message<u64>> {
    let (mut tx, mut rx) = pair(spec);
    let mut received = Vec::new();
    for (i, offer) in offers.iter().enumerate() {
        loop {
            let offered = match offer {
                Offer::Copy(v) => tx.offer_copy(v),
                Offer::Value(_) | Offer::Control(_) => tx.offer(offer.message()).map_err(|r| {
                    assert_eq!(r.message, offer.message(), "{spec}: handed back as offered");
                    r.error
                }),
            };
            match offered {
                Ok(()) => break,
                Err(error) => {
                    assert_eq!(error, SendError::Full, "{spec}");
                    received.extend(deliver(tx.as_mut(), rx.as_mut()));
                }
            }
        }
        if i % flush_every == 0 {
            tx.flush();
        }
    }
    received.extend(deliver(tx.as_mut(), rx.as_mut()));
    received
}

/// Punctuations of every kind, between tuples and back to back, with values in which every
/// byte matters: a transport that loses a value, a kind or a place among the tuples fails.
fn mixed_stream() -> Vec<Offer> {
    let punctuation = |p| Offer::Control(Message::Punctuation(p));
    vec![
        punctuation(Punctuation::Latency(0x0102_0304_0506_0708)),
        Offer::Value(1),
        punctuation(Punctuation::WindowMarker),
        Offer::Copy(2),
        Offer::Value(3),
        punctuation(Punctuation::Watermark {
            time: u64::MAX,
            from: 0,
        }),
        punctuation(Punctuation::Watermark { time: 0, from: 0 }),
        punctuation(Punctuation::Latency(sluice_types::monotonic_ns())),
        Offer::Value(4),
        punctuation(Punctuation::Watermark {
            time: 0x8000_0000_0000_0001,
            from: u32::MAX,
        }),
        punctuation(Punctuation::Checkpoint {
            n: 0x0102_0304_0506_0708,
            from: 0x8040_2010,
        }),
        Offer::Value(5),
        punctuation(Punctuation::Checkpoint { n: 1, from: 0 }),
        punctuation(Punctuation::Checkpoint {
            n: u64::MAX,
            from: u32::MAX,
        }),
        Offer::Copy(6),
        Offer::Control(Message::EndOfStream),
    ]
}

#[test]
fn punctuations_of_every_kind_arrive_with_their_values_in_their_place() {
    let sent = mixed_stream();
    let expected: Vec<_> = sent.iter().map(Offer::message).collect();
    for spec in all_transports() {
        for flush_every in [1, sent.len()] {
            assert_eq!(offer_all(&spec, &sent, flush_every), expected, "{spec}");
        }
    }
}

/// Polls a type-erased receiver once for up to `max` messages, appending them to `received`
/// with every batch taken apart into its tuples; returns how many messages it polled.
fn receive_erased(
    rx: &mut dyn ErasedReceiver,
    max: usize,
    received: &mut Vec<Message<u64>>,
) -> Result<usize, RecvError> {
    rx.poll(max, &mut |delivery| {
        match delivery {
            Delivery::Batch(batch) => {
                received.extend(batch.iter_as::<u64>().map(|&v| Message::Data(v)))
            }
            Delivery::Punctuation(p) => received.push(Message::Punctuation(p)),
            Delivery::EndOfStream => received.push(Message::EndOfStream),
        }
        std::ops::ControlFlow::Continue(())
    })
}

/// Offers one message through a type-erased sender, as the runtime's threads do.
fn offer_erased(tx: &mut dyn ErasedSender, message: Message<u64>) -> Result<(), SendError> {
    match message {
        Message::Data(v) => tx.offer_tuple(&mut Some(v)),
        Message::Punctuation(p) => tx.offer_punctuation(p),
        Message::EndOfStream => tx.offer_end(),
    }
}

#[test]
fn erased_endpoints_deliver_punctuations_with_their_values_in_their_place() {
    let receive = |rx: &mut dyn ErasedReceiver, received: &mut Vec<Message<u64>>| {
        while let Ok(1..) = receive_erased(rx, 4, received) {}
    };
    let sent = mixed_stream();
    let expected: Vec<_> = sent.iter().map(Offer::message).collect();
    for spec in all_transports() {
        let (mut tx, mut rx) = StreamType::of::<u64>().connect(&spec).unwrap();
        let mut received = Vec::new();
        let deadline = Instant::now() + WATCHDOG;
        for o in &sent {
            while let Err(error) = offer_erased(tx.as_mut(), o.message()) {
                assert_eq!(error, SendError::Full, "{spec}");
                assert!(Instant::now() < deadline, "{spec}: never took {o:?}");
                tx.flush();
                receive(rx.as_mut(), &mut received);
            }
        }
        while received.len() < expected.len() {
            assert!(Instant::now() < deadline, "{spec}: got only {received:?}");
            tx.flush();
            receive(rx.as_mut(), &mut received);
        }
        assert_eq!(received, expected, "{spec}");
    }
}

/// A punctuation of any kind but the suspension marker, with any values; checkpoint barriers
/// as often as watermarks.
fn arb_punctuation() -> impl Strategy<Value = Punctuation> {
    prop_oneof![
        1 => Just(Punctuation::WindowMarker),
        2 => (any::<u64>(), any::<u32>())
            .prop_map(|(time, from)| Punctuation::Watermark { time, from }),
        1 => any::<u64>().prop_map(Punctuation::Latency),
        2 => (any::<u64>(), any::<u32>()).prop_map(|(n, from)| Punctuation::Checkpoint { n, from }),
    ]
}

fn arb_offer() -> impl Strategy<Value = Offer> {
    prop_oneof![
        4 => any::<u64>().prop_map(Offer::Value),
        4 => any::<u64>().prop_map(Offer::Copy),
        2 => arb_punctuation().prop_map(|p| Offer::Control(Message::Punctuation(p))),
    ]
}

proptest! {
    #[test]
    fn flushed_messages_arrive_exactly_once_in_order(
        offers in prop::collection::vec(arb_offer(), 0..64),
        flush_every in 1usize..9,
    ) {
        let expected: Vec<_> = offers.iter().map(Offer::message).collect();
        for spec in all_transports() {
            prop_assert_eq!(offer_all(&spec, &offers, flush_every), expected.clone());
        }
    }
}

/// One offer of a sender on the type-erased endpoints, as the runtime's threads make them: a
/// batch of tuples or one message.
#[derive(Debug, Clone)]
enum Step {
    Batch(Vec<u64>),
    One(Message<u64>),
}

impl Step {
    /// The messages that arrive for it, a batch's tuples one by one.
    fn messages(&self) -> Vec<Message<u64>> {
        match self {
            Step::Batch(batch) => batch.iter().map(|&v| Message::Data(v)).collect(),
            Step::One(message) => vec![message.clone()],
        }
    }
}

/// Offers `steps` and then the end of the stream through type-erased endpoints of `spec` from
/// a thread of its own, which flushes and yields whenever the transport is full (a batch
/// that does not fit is held by the sender and goes before anything after it); reads in the
/// calling thread, a few messages per poll, and returns what arrived up to the end of the
/// stream, every batch taken apart into its tuples.
fn send_steps(spec: &TransportSpec, steps: Vec<Step>) -> Vec<Message<u64>> {
    let (mut tx, mut rx) = StreamType::of::<u64>().connect(spec).unwrap();
    let sender = std::thread::spawn(move || {
        let deadline = Instant::now() + WATCHDOG;
        let wait = |tx: &mut dyn ErasedSender| {
            assert!(Instant::now() < deadline, "the receiver stopped taking");
            tx.flush();
            std::thread::yield_now();
        };
        for step in steps.into_iter().chain([Step::One(Message::EndOfStream)]) {
            match step {
                Step::Batch(mut batch) => match tx.offer_batch(&mut batch) {
                    Ok(()) | Err(SendError::Full) => assert!(batch.is_empty()),
                    Err(error) => panic!("a batch refused: {error}"),
                },
                Step::One(message) => loop {
                    match offer_erased(tx.as_mut(), message.clone()) {
                        Ok(()) => break,
                        Err(SendError::Full) => wait(tx.as_mut()),
                        Err(error) => panic!("{message:?} refused: {error}"),
                    }
                },
            }
        }
        while tx.pending() {
            wait(tx.as_mut());
        }
        tx.flush();
    });
    let deadline = Instant::now() + WATCHDOG;
    let mut received = Vec::new();
    while received.last() != Some(&Message::EndOfStream) {
        assert!(
            Instant::now() < deadline,
            "{spec}: the stream never ended; got {} messages",
            received.len()
        );
        if receive_erased(rx.as_mut(), 4, &mut received).unwrap() == 0 {
            std::thread::yield_now();
        }
    }
    sender.join().unwrap();
    received
}

/// Checks that `steps` arrive over every transport a checkpointed job may use exactly as
/// sent; names the first barrier out of place.
fn assert_steps_arrive_in_order(steps: &[Step]) -> Result<(), TestCaseError> {
    let mut expected: Vec<_> = steps.iter().flat_map(Step::messages).collect();
    expected.push(Message::EndOfStream);
    // The barriers of a stream with their positions in it.
    let barriers = |messages: &[Message<u64>]| -> Vec<(usize, Message<u64>)> {
        let positions = messages.iter().cloned().enumerate();
        positions
            .filter(|(_, m)| matches!(m, Message::Punctuation(Punctuation::Checkpoint { .. })))
            .collect()
    };
    for spec in transports() {
        let received = send_steps(&spec, steps.to_vec());
        let pairs = barriers(&received).into_iter().zip(barriers(&expected));
        if let Some(((at, got), (sent_at, sent))) = pairs.into_iter().find(|(g, s)| g != s) {
            return Err(TestCaseError::fail(format!(
                "{spec}: {sent:?} was sent as message {sent_at}; message {at} was {got:?}"
            )));
        }
        prop_assert!(
            received == expected,
            "{}: what arrived differs from what was sent",
            spec
        );
    }
    Ok(())
}

#[test]
fn barriers_keep_their_place_among_split_batches_across_full_queues() {
    // Batches from empty to far beyond any queue here (the threaded port and the Vega ring
    // hold 8, the OSR ring about 12 tuples): the transport takes them in pieces while the
    // receiver reads a few messages at a time, and each barrier must wait for the whole batch
    // before it.
    let mut steps = Vec::new();
    let mut next = 0u64;
    for k in 0..120u64 {
        let len = (k * 37) % 300;
        steps.push(Step::Batch((next..next + len).collect()));
        next += len;
        steps.push(Step::One(Message::Punctuation(Punctuation::Checkpoint {
            n: k + 1,
            from: 0xC0DE_0000 | k as u32,
        })));
        if k % 3 == 0 {
            steps.push(Step::One(Message::Data(next)));
            next += 1;
            steps.push(Step::One(Message::Punctuation(Punctuation::Watermark {
                time: next,
                from: 7,
            })));
        }
    }
    assert_steps_arrive_in_order(&steps).unwrap();
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => prop::collection::vec(any::<u64>(), 0..200).prop_map(Step::Batch),
        3 => any::<u64>().prop_map(|v| Step::One(Message::Data(v))),
        2 => arb_punctuation().prop_map(|p| Step::One(Message::Punctuation(p))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn any_interleaving_of_tuples_batches_and_barriers_arrives_as_sent(
        steps in prop::collection::vec(arb_step(), 0..40),
    ) {
        assert_steps_arrive_in_order(&steps)?;
    }
}

#[test]
fn an_erased_batch_offer_holds_what_does_not_fit_and_sends_it_first() {
    for spec in transports() {
        let (mut tx, mut rx) = StreamType::of::<u64>().connect(&spec).unwrap();
        // More than any transport here holds, kernel buffers included.
        const N: u64 = 20_000;
        let mut batch: Vec<u64> = (0..N).collect();
        assert_eq!(tx.offer_batch(&mut batch), Err(SendError::Full), "{spec}");
        assert!(batch.is_empty(), "{spec}: the sender took the batch");
        assert!(tx.pending(), "{spec}: and holds what did not fit");
        // Nothing overtakes the held tuples.
        let mut late = Some(N);
        assert_eq!(tx.offer_tuple(&mut late), Err(SendError::Full), "{spec}");
        assert_eq!(
            tx.offer_punctuation(Punctuation::WindowMarker),
            Err(SendError::Full),
            "{spec}"
        );
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
        // The next batch joins the held tuples behind them.
        let mut next: Vec<u64> = vec![N + 1, N + 2];
        while tx.offer_batch(&mut next).is_err() || tx.pending() {
            assert!(Instant::now() < deadline, "{spec}: the batch never went");
            assert!(next.is_empty(), "{spec}");
            tx.flush();
            drain(&mut rx);
        }
        assert!(
            next.capacity() > 0,
            "{spec}: a buffer comes back for the next batch"
        );
        tx.flush();
        drain(&mut rx);
        let mut expected: Vec<u64> = (0..N).collect();
        expected.extend([N + 1, N + 2]);
        assert_eq!(received, expected, "{spec}");
        let mut wrong: Vec<u32> = vec![1];
        assert!(matches!(
            tx.offer_batch(&mut wrong),
            Err(SendError::TypeMismatch { .. })
        ));
    }
}

/// The transports that carry a tuple larger than their slot in parts, with small slots, each
/// with its slot size.
fn transports_with_parts() -> [(TransportSpec, usize); 5] {
    let osr_capacity = 256;
    let osr_slot = sluice_transport::shm_osr::slot_bytes(osr_capacity).unwrap();
    assert_eq!(
        osr_slot, 112,
        "half of 256, less the record and tuple headers"
    );
    [
        (
            TransportSpec::ShmVega {
                slot_bytes: 32,
                slots: 4,
            },
            32,
        ),
        (
            TransportSpec::ShmOsr {
                capacity_bytes: osr_capacity,
                batch_bytes: 16,
            },
            osr_slot,
        ),
        (
            TransportSpec::ShmOsr {
                capacity_bytes: 1 << 20,
                batch_bytes: 16 << 10,
            },
            sluice_transport::shm_osr::slot_bytes(1 << 20).unwrap(),
        ),
        (small_tcp(BatchProfile::Latency, 32), 32),
        (small_tcp(BatchProfile::Throughput, 32), 32),
    ]
}

/// Sends `messages` from a thread of its own, retrying each while the transport is full and
/// flushing until nothing is pending, and returns what arrives, up to the end of the stream.
fn across_threads<T: sluice_types::Tuple + Clone + Send + 'static>(
    spec: &TransportSpec,
    messages: Vec<Message<T>>,
) -> Vec<Message<T>> {
    let (mut tx, mut rx) = spec.connect_typed::<T>().unwrap();
    let sender = std::thread::spawn(move || {
        let deadline = Instant::now() + WATCHDOG;
        for mut message in messages {
            loop {
                match tx.offer(message) {
                    Ok(()) => break,
                    Err(refused) => {
                        assert_eq!(refused.error, SendError::Full);
                        assert!(Instant::now() < deadline, "the receiver stopped taking");
                        message = refused.message;
                        tx.flush();
                        std::thread::yield_now();
                    }
                }
            }
        }
        while tx.pending() {
            assert!(Instant::now() < deadline, "the sender never emptied");
            tx.flush();
            std::thread::yield_now();
        }
        tx.flush();
    });
    let deadline = Instant::now() + WATCHDOG;
    let mut out = Vec::new();
    while !matches!(out.last(), Some(Message::EndOfStream)) {
        assert!(Instant::now() < deadline, "{spec}: the stream never ended");
        if rx.poll(4, &mut out).unwrap() == 0 {
            std::thread::yield_now();
        }
    }
    sender.join().unwrap();
    out
}

#[test]
fn tuples_larger_than_a_slot_arrive_whole_in_order() {
    use sluice_types::BytesTuple;
    for (spec, slot) in transports_with_parts() {
        let sizes = [0, 1, slot, slot + 1, 2 * slot, 7 * slot + 3, 3, 1 << 20, 5];
        let mut sent: Vec<_> = sizes
            .iter()
            .enumerate()
            .flat_map(|(i, &len)| {
                let tuple = BytesTuple((0..len).map(|j| (i * 31 + j * 7) as u8).collect());
                [
                    Message::Data(tuple),
                    Message::Punctuation(Punctuation::Watermark {
                        time: i as u64,
                        from: 0,
                    }),
                    Message::Punctuation(Punctuation::Checkpoint {
                        n: i as u64 + 1,
                        from: 3,
                    }),
                ]
            })
            .collect();
        sent.push(Message::EndOfStream);
        assert!(
            across_threads(&spec, sent.clone()) == sent,
            "{spec}: what arrived differs from what was sent"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn any_mix_of_tuple_sizes_arrives_whole(
        lens in proptest::collection::vec(0usize..600, 1..40),
    ) {
        use sluice_types::BytesTuple;
        for (spec, _) in transports_with_parts() {
            let mut sent: Vec<_> = lens
                .iter()
                .map(|&len| Message::Data(BytesTuple(vec![len as u8; len])))
                .collect();
            sent.push(Message::EndOfStream);
            prop_assert!(across_threads(&spec, sent.clone()) == sent, "{}", spec);
        }
    }
}

#[test]
fn osr_reassembles_each_senders_parts_apart() {
    use sluice_transport::shm_osr;
    use sluice_types::BytesTuple;
    const SENDERS: usize = 3;
    let (senders, mut rx) = shm_osr::connect::<BytesTuple>(256, 16, SENDERS).unwrap();
    let tuple = |sender: usize, i: usize| BytesTuple(vec![(sender * 16 + i) as u8; 100 + 97 * i]);
    let threads: Vec<_> = senders
        .into_iter()
        .enumerate()
        .map(|(sender, mut tx)| {
            std::thread::spawn(move || {
                let deadline = Instant::now() + WATCHDOG;
                for mut message in (0..12)
                    .map(|i| Message::Data(tuple(sender, i)))
                    .chain([Message::EndOfStream])
                {
                    while let Err(refused) = tx.offer(message) {
                        assert!(Instant::now() < deadline, "the receiver stopped taking");
                        message = refused.message;
                        tx.flush();
                        std::thread::yield_now();
                    }
                }
                while tx.pending() {
                    tx.flush();
                }
                tx.flush();
            })
        })
        .collect();
    let deadline = Instant::now() + WATCHDOG;
    let mut out = Vec::new();
    while out
        .iter()
        .filter(|m| matches!(m, Message::EndOfStream))
        .count()
        < SENDERS
    {
        assert!(Instant::now() < deadline, "the senders never ended");
        rx.poll(8, &mut out).unwrap();
    }
    threads.into_iter().for_each(|t| t.join().unwrap());
    for sender in 0..SENDERS {
        let got: Vec<_> = out
            .iter()
            .filter_map(|m| match m {
                Message::Data(t) if t.0[0] as usize / 16 == sender => Some(t.clone()),
                _ => None,
            })
            .collect();
        let expected: Vec<_> = (0..12).map(|i| tuple(sender, i)).collect();
        assert!(got == expected, "sender {sender}'s tuples differ");
    }
}

#[test]
fn a_tuple_of_exactly_slot_bytes_passes_and_one_byte_more_is_refused_by_udp_mq() {
    use sluice_types::BytesTuple;
    for (spec, slot) in [(udp_mq(4, 32), 32)] {
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

/// Sends `n` tuples from another thread, never more than `window` ahead of what the receiver
/// has taken (UDP has no backpressure: the test paces the sender so the socket buffers never
/// overflow); returns what arrived, in order, up to and including the end of the stream.
fn paced_udp(params: UdpMqParams, n: u64, value: fn(u64) -> u64) -> Vec<Message<u64>> {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let (mut tx, mut rx) = TransportSpec::UdpMq(params).connect_typed::<u64>().unwrap();
    let taken = Arc::new(AtomicU64::new(0));
    let seen = taken.clone();
    const WINDOW: u64 = 1024;
    let sender = std::thread::spawn(move || {
        let deadline = Instant::now() + WATCHDOG;
        for i in 0..n {
            // SYNC: pairs with the receiver's Release store of what it has taken.
            while i >= seen.load(Ordering::Acquire) + WINDOW {
                tx.flush();
                assert!(Instant::now() < deadline, "the receiver stopped taking");
                std::thread::yield_now();
            }
            tx.offer(Message::Data(value(i))).unwrap();
        }
        tx.offer(Message::EndOfStream).unwrap();
        tx.flush();
    });
    let deadline = Instant::now() + WATCHDOG;
    let mut out = Vec::new();
    while out.last() != Some(&Message::EndOfStream) {
        assert!(Instant::now() < deadline, "stalled after {}", out.len());
        if rx.poll(256, &mut out).unwrap() == 0 {
            std::thread::yield_now();
        }
        // SYNC: pairs with the sender's Acquire load of the window.
        taken.store(out.len() as u64, Ordering::Release);
    }
    sender.join().unwrap();
    out
}

#[test]
fn udp_mq_keeps_each_flows_order_and_loses_nothing_when_paced() {
    const N: u64 = 100_000;
    const FLOWS: u64 = 16;
    // A tuple's first four bytes (little-endian) are its flow, the next four its number in it.
    let value = |i: u64| (i / FLOWS) << 32 | (i % FLOWS);
    let params = UdpMqParams {
        queues: 4,
        flow_key_bytes: 4,
        socket_buffer_bytes: Some(1 << 20),
        ..UdpMqParams::default()
    };
    let out = paced_udp(params, N, value);
    let mut next = [0u64; FLOWS as usize];
    for m in &out[..out.len() - 1] {
        let Message::Data(v) = m else {
            panic!("{m:?} before the end");
        };
        let flow = (v & 0xffff_ffff) as usize;
        assert_eq!(v >> 32, next[flow], "flow {flow} out of order");
        next[flow] += 1;
    }
    assert_eq!(next, [N / FLOWS; FLOWS as usize]);

    let random = UdpMqParams {
        queue_choice: QueueChoice::Random,
        ..params
    };
    let out = paced_udp(random, N, |i| i);
    let mut values: Vec<u64> = out
        .iter()
        .filter_map(|m| match m {
            Message::Data(v) => Some(*v),
            _ => None,
        })
        .collect();
    values.sort_unstable();
    assert_eq!(
        values,
        (0..N).collect::<Vec<_>>(),
        "random queues lose nothing"
    );
}
