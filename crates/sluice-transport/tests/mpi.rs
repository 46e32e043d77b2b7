//! The conformance checks of the `mpi` transport, across the ranks of a real `mpirun`: order
//! kept (punctuations of every kind in their place, with their values, checkpoint barriers
//! included), nothing lost or
//! duplicated, many senders into one receiver, backpressure, a clean
//! close, a closed receiver and a vanished sender reported, tuples longer than a record
//! arriving whole, an oversized fixed-size tuple refused, and a hostile peer's batch refused
//! without being read out of bounds.
//!
//! Each test starts `mpirun` on this test binary, filtered to that one test; in the ranks
//! (where Open MPI sets `OMPI_COMM_WORLD_RANK`) the same test runs its rank's part. The tests
//! are built only with the `mpi` feature (`scripts/test-all` runs them so where `mpirun` is
//! installed); where `mpirun` is missing they skip, saying so, and fail under `CI=true`.

#![cfg(feature = "mpi")]

mod ranks {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use mpi::topology::{Communicator, SimpleCommunicator};
    use mpi::traits::Destination;
    use sluice_transport::mpi::{bind_receiver, open_sender, session, MpiParams, Route};
    use sluice_transport::{RecvError, SendError, TupleReceiver, TupleSender};
    use sluice_types::{Message, Punctuation};

    /// How long a rank waits for the other before it fails the test.
    const WATCHDOG: Duration = Duration::from_secs(60);

    /// This process's rank, if `mpirun` started it.
    fn rank() -> Option<usize> {
        std::env::var(session::ENV_RANK).ok()?.parse().ok()
    }

    /// In a rank: initialises MPI, runs `body` with the rank, finalises. Outside: runs this
    /// test on `ranks` ranks under `mpirun` and checks that every rank passed.
    fn on_ranks(test: &str, ranks: usize, body: fn(usize)) {
        if let Some(rank) = rank() {
            session::initialize(rank).expect("MPI initialises");
            body(rank);
            barrier();
            session::finalize();
            return;
        }
        let found = Command::new("mpirun")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            sluice_skip::skip("mpirun is not installed (Debian: apt-get install openmpi-bin)");
            return;
        }
        let mut command = Command::new("mpirun");
        command.args(["--oversubscribe", "-np", &ranks.to_string()]);
        if is_root() {
            command
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        }
        let mut child = command
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", test, "--nocapture", "--test-threads", "1"])
            .spawn()
            .expect("mpirun starts");
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > 2 * WATCHDOG {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{test}: the ranks hung");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{test}: a rank failed ({status})");
    }

    fn is_root() -> bool {
        std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
    }

    fn barrier() {
        use mpi::collective::CommunicatorCollectives;
        SimpleCommunicator::world().barrier();
    }

    fn route(receiver: usize, sender: u32) -> Route {
        Route {
            receiver: receiver as i32,
            channel: 7,
            sender,
        }
    }

    /// The route of sender 0 of `channel` to rank 1.
    fn on_channel(channel: u32) -> Route {
        Route {
            channel,
            ..route(1, 0)
        }
    }

    /// Offers `message`, flushing and retrying while the edge is full.
    fn offer<T: sluice_types::Tuple>(tx: &mut dyn TupleSender<T>, mut message: Message<T>) {
        let deadline = Instant::now() + WATCHDOG;
        loop {
            match tx.offer(message) {
                Ok(()) => return,
                Err(refused) => {
                    assert_eq!(refused.error, SendError::Full);
                    message = refused.message;
                    tx.flush();
                    assert!(Instant::now() < deadline, "the receiver never made room");
                    std::thread::yield_now();
                }
            }
        }
    }

    /// Flushes until the sender holds nothing more.
    fn flush_all<T>(tx: &mut dyn TupleSender<T>) {
        let deadline = Instant::now() + WATCHDOG;
        while {
            tx.flush();
            tx.pending()
        } {
            assert!(Instant::now() < deadline, "the sender never emptied");
            std::thread::yield_now();
        }
    }

    /// Polls until `ends` ends of stream arrived; returns everything.
    fn receive(rx: &mut dyn TupleReceiver<u64>, ends: usize) -> Vec<Message<u64>> {
        let deadline = Instant::now() + WATCHDOG;
        let mut out = Vec::new();
        while out.iter().filter(|m| **m == Message::EndOfStream).count() < ends {
            if rx.poll(100, &mut out).unwrap() == 0 {
                assert!(Instant::now() < deadline, "the stream never ended");
                std::thread::yield_now();
            }
        }
        out
    }

    fn small() -> MpiParams {
        MpiParams {
            batch_bytes: 64,
            credit: 2,
            max_tuple_bytes: 32,
        }
    }

    /// The tuples `0..n`, after every 1,000th a punctuation whose kind and value name it (a
    /// checkpoint barrier among them), and the end of the stream.
    fn messages(n: u64) -> Vec<Message<u64>> {
        let mut messages = Vec::new();
        for i in 0..n {
            messages.push(Message::Data(i));
            match i % 4000 {
                999 => messages.push(Message::Punctuation(Punctuation::Watermark {
                    time: i,
                    from: 0,
                })),
                1999 => messages.push(Message::Punctuation(Punctuation::Latency(i))),
                2999 => messages.push(Message::Punctuation(Punctuation::WindowMarker)),
                3999 => messages.push(Message::Punctuation(Punctuation::Checkpoint {
                    n: i / 4000 + 1,
                    from: u32::MAX - i as u32,
                })),
                _ => {}
            }
        }
        messages.push(Message::EndOfStream);
        messages
    }

    /// Strings around and far beyond `max_tuple` bytes, each of its own letter, among short
    /// ones and a punctuation, and the end of the stream.
    fn long_strings(max_tuple: usize) -> Vec<Message<String>> {
        let lens = [
            1,
            max_tuple - 4,
            max_tuple + 1,
            7,
            3 * max_tuple,
            100_000,
            0,
        ];
        let mut messages: Vec<_> = (b'a'..)
            .zip(lens)
            .map(|(letter, len)| Message::Data(char::from(letter).to_string().repeat(len)))
            .collect();
        messages.insert(3, Message::Punctuation(Punctuation::Latency(3)));
        messages.push(Message::EndOfStream);
        messages
    }

    fn stream(rank: usize, params: MpiParams, n: u64) {
        if rank == 0 {
            let mut tx = open_sender::<u64>(route(1, 0), &params).unwrap();
            for message in messages(n) {
                offer(&mut tx, message);
            }
            flush_all(&mut tx);
        } else {
            let mut rx = bind_receiver::<u64>(route(1, 0), 1, &params).unwrap();
            let got = receive(&mut rx, 1);
            assert!(got == messages(n), "order, values or punctuations lost");
            // Nothing follows the end.
            assert_eq!(rx.poll(10, &mut Vec::new()), Ok(0));
        }
    }

    #[test]
    fn keeps_order_and_loses_nothing_across_two_ranks() {
        on_ranks(
            "ranks::keeps_order_and_loses_nothing_across_two_ranks",
            2,
            |rank| {
                stream(rank, small(), 20_000);
                barrier();
                stream(rank, MpiParams::default(), 200_000);
            },
        );
    }

    #[test]
    fn many_senders_in_several_ranks_feed_one_receiver_each_in_order() {
        on_ranks(
            "ranks::many_senders_in_several_ranks_feed_one_receiver_each_in_order",
            3,
            |rank| {
                const N: u64 = 20_000;
                // Senders 0 and 1 are two threads of rank 0, sender 2 is rank 1; rank 2
                // receives.
                let send = |sender: u32| {
                    let mut tx = open_sender::<u64>(route(2, sender), &small()).unwrap();
                    for i in 0..N {
                        offer(&mut tx, Message::Data(u64::from(sender) << 32 | i));
                    }
                    offer(&mut tx, Message::EndOfStream);
                    flush_all(&mut tx);
                };
                match rank {
                    0 => std::thread::scope(|s| {
                        s.spawn(|| send(0));
                        s.spawn(|| send(1));
                    }),
                    1 => send(2),
                    _ => {
                        let mut rx = bind_receiver::<u64>(route(2, 0), 3, &small()).unwrap();
                        let mut next = [0u64; 3];
                        for m in receive(&mut rx, 3) {
                            if let Message::Data(v) = m {
                                let sender = (v >> 32) as usize;
                                assert_eq!(v & 0xffff_ffff, next[sender], "sender {sender}");
                                next[sender] += 1;
                            }
                        }
                        assert_eq!(next, [N; 3]);
                    }
                }
            },
        );
    }

    #[test]
    fn a_sender_is_held_back_by_its_credits_and_resumes_after_reads() {
        on_ranks(
            "ranks::a_sender_is_held_back_by_its_credits_and_resumes_after_reads",
            2,
            |rank| {
                let params = MpiParams {
                    batch_bytes: 68,
                    credit: 2,
                    max_tuple_bytes: 8,
                };
                // A run header and 7 tuples of 8 bytes (61 bytes) leave too little of 68 for
                // a 14-byte punctuation record, so a batch ships with 7 tuples.
                let per_batch = 7;
                if rank == 0 {
                    let mut tx = open_sender::<u64>(route(1, 0), &params).unwrap();
                    let mut accepted = 0u64;
                    loop {
                        match tx.offer(Message::Data(accepted)) {
                            Ok(()) => accepted += 1,
                            Err(refused) => {
                                assert_eq!(refused.error, SendError::Full);
                                break;
                            }
                        }
                        assert!(accepted < 1000, "no backpressure");
                    }
                    // Two batches in flight and a full third one held.
                    assert_eq!(accepted, 3 * per_batch);
                    barrier();
                    for i in accepted..1000 {
                        offer(&mut tx, Message::Data(i));
                    }
                    offer(&mut tx, Message::EndOfStream);
                    flush_all(&mut tx);
                } else {
                    let mut rx = bind_receiver::<u64>(route(1, 0), 1, &params).unwrap();
                    barrier();
                    let got = receive(&mut rx, 1);
                    let want: Vec<_> = (0..1000)
                        .map(Message::Data)
                        .chain([Message::EndOfStream])
                        .collect();
                    assert_eq!(got, want);
                }
            },
        );
    }

    #[test]
    fn closes_cleanly_and_reports_a_closed_receiver_and_a_vanished_sender() {
        on_ranks(
            "ranks::closes_cleanly_and_reports_a_closed_receiver_and_a_vanished_sender",
            2,
            |rank| {
                let params = small();
                if rank == 0 {
                    // A receiver that goes away: the sender's offers end refused as closed.
                    let mut tx = open_sender::<u64>(route(1, 0), &params).unwrap();
                    for i in 0..10 {
                        offer(&mut tx, Message::Data(i));
                    }
                    flush_all(&mut tx);
                    barrier();
                    barrier();
                    let deadline = Instant::now() + WATCHDOG;
                    loop {
                        tx.flush();
                        match tx.offer(Message::Data(0)) {
                            Err(refused) if refused.error == SendError::Closed => break,
                            _ => assert!(Instant::now() < deadline, "never refused as closed"),
                        }
                    }
                    drop(tx);
                    // A sender dropped without an end of stream.
                    let mut tx = open_sender::<u64>(on_channel(8), &params).unwrap();
                    offer(&mut tx, Message::Data(5));
                    drop(tx);
                    // Tuples longer than the edge's largest arrive whole, in order.
                    let mut tx = open_sender::<String>(on_channel(9), &params).unwrap();
                    for message in long_strings(params.max_tuple_bytes) {
                        offer(&mut tx, message);
                    }
                    flush_all(&mut tx);
                    // A fixed-size tuple longer than the largest is refused naming both sizes.
                    let narrow = MpiParams {
                        max_tuple_bytes: 4,
                        ..params
                    };
                    let mut tx = open_sender::<u64>(on_channel(10), &narrow).unwrap();
                    let refused = tx.offer(Message::Data(1)).unwrap_err();
                    assert_eq!(refused.error, SendError::TooLarge { tuple: 8, slot: 4 });
                    offer(&mut tx, Message::EndOfStream);
                    flush_all(&mut tx);
                } else {
                    let mut rx = bind_receiver::<u64>(route(1, 0), 1, &params).unwrap();
                    barrier();
                    let deadline = Instant::now() + WATCHDOG;
                    let mut got = Vec::new();
                    while got.len() < 10 {
                        rx.poll(100, &mut got).unwrap();
                        assert!(Instant::now() < deadline, "ten tuples never arrived");
                    }
                    drop(rx);
                    barrier();
                    let mut rx = bind_receiver::<u64>(on_channel(8), 1, &params).unwrap();
                    let mut got = Vec::new();
                    let deadline = Instant::now() + WATCHDOG;
                    let error = loop {
                        match rx.poll(100, &mut got) {
                            Ok(_) => assert!(Instant::now() < deadline, "no loss reported"),
                            Err(error) => break error,
                        }
                    };
                    assert_eq!(error, RecvError::Disconnected);
                    assert_eq!(got, vec![Message::Data(5)]);
                    let mut rx = bind_receiver::<String>(on_channel(9), 1, &params).unwrap();
                    let mut got = Vec::new();
                    let deadline = Instant::now() + WATCHDOG;
                    while got.last() != Some(&Message::EndOfStream) {
                        rx.poll(10, &mut got).unwrap();
                        assert!(Instant::now() < deadline, "the long tuples never ended");
                    }
                    assert!(
                        got == long_strings(params.max_tuple_bytes),
                        "a long tuple arrived cut, changed or out of order"
                    );
                    let mut rx = bind_receiver::<u64>(
                        on_channel(10),
                        1,
                        &MpiParams {
                            max_tuple_bytes: 4,
                            ..params
                        },
                    )
                    .unwrap();
                    let mut got = Vec::new();
                    while got.is_empty() {
                        rx.poll(10, &mut got).unwrap();
                    }
                    assert_eq!(got, vec![Message::EndOfStream]);
                }
            },
        );
    }

    #[test]
    fn a_hostile_batch_poisons_the_edge_without_being_read_out_of_bounds() {
        // Also a hostile credit message: the sender's edge closes.
        on_ranks(
            "ranks::a_hostile_batch_poisons_the_edge_without_being_read_out_of_bounds",
            2,
            |rank| {
                let params = small();
                // A run claiming a billion tuples; a batch longer than the receiver's limit; a
                // batch naming a sender the channel does not have.
                let mut huge_run = vec![0, 0, 0, 0, 1];
                huge_run.extend_from_slice(&1_000_000_000u32.to_le_bytes());
                huge_run.extend_from_slice(&[0; 8]);
                let too_long = vec![0u8; 4 + 64 + 5 + 4 + 32 + 1];
                let stranger = vec![9, 0, 0, 0, 2];
                // A fixed-size tuple in parts.
                let part = [&[0, 0, 0, 0, 6, 8, 0, 0, 0][..], &[0; 8]].concat();
                let batches = [huge_run, too_long, stranger, part];
                for (channel, batch) in (20..).zip(&batches) {
                    let route = on_channel(channel);
                    if rank == 0 {
                        SimpleCommunicator::world()
                            .process_at_rank(1)
                            .send_with_tag(&batch[..], route.data_tag());
                    } else {
                        let mut rx = bind_receiver::<u64>(route, 1, &params).unwrap();
                        let deadline = Instant::now() + WATCHDOG;
                        let mut got = Vec::new();
                        let error = loop {
                            match rx.poll(10, &mut got) {
                                Ok(_) => assert!(Instant::now() < deadline, "nothing refused"),
                                Err(error) => break error,
                            }
                        };
                        assert_eq!(error, RecvError::Malformed, "batch to channel {channel}");
                        assert!(got.is_empty());
                        // The edge stays poisoned.
                        assert_eq!(rx.poll(10, &mut got), Err(RecvError::Malformed));
                    }
                }
                // A credit message of several bytes closes the sender's edge, unreceived.
                let route = on_channel(30);
                if rank == 1 {
                    SimpleCommunicator::world()
                        .process_at_rank(0)
                        .send_with_tag(&[0u8; 5][..], route.credit_tag());
                    barrier();
                } else {
                    let mut tx = open_sender::<u64>(route, &params).unwrap();
                    barrier();
                    let deadline = Instant::now() + WATCHDOG;
                    loop {
                        tx.flush();
                        match tx.offer(Message::Data(1)) {
                            Err(refused) if refused.error == SendError::Closed => break,
                            _ => assert!(Instant::now() < deadline, "never refused as closed"),
                        }
                    }
                }
            },
        );
    }
}
