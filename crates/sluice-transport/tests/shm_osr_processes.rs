//! `shm-osr` across processes: the receiver (the test) creates the segment and copies of this
//! test binary, re-executed as sending processes, open it. Killing a sender with SIGKILL
//! mid-stream must be reported by the receiver as a disconnect, not waited for; a record the
//! killed sender left unfinished is skipped and counted as lost while the other sender's
//! records behind it arrive; the other sender learns the edge is closed once the receiver is
//! gone; and ending the job leaves no segment behind.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use sluice_shm::{JobSegments, SegmentName};
use sluice_transport::shm_osr::{create_receiver, open_sender};
use sluice_transport::{RecvError, SendError, TupleReceiver, TupleSender};
use sluice_types::Message;
use support::{check_order, poll_until_failure, receive_in_order, this_test, Peer};

const ROLE: &str = "SLUICE_TEST_OSR_SENDER_DIR";
/// Set (to anything) for a sender that holds one unfinished record until it is killed.
const HOLD: &str = "SLUICE_TEST_OSR_HOLD";
const JOB: &str = "osrkilltest";
const CAPACITY: usize = 1 << 14;
const BATCH: usize = 512;
const SENDERS: usize = 2;
/// The exit code of a sender that found the edge closed, as it should.
const CLOSED_EXIT: i32 = 3;

fn name(dir: &Path) -> SegmentName {
    SegmentName::in_dir(dir, JOB, "edge").expect("valid name")
}

/// A sending process: sends `id << 32 | 0, 1, 2, ...` until it is killed or the edge closes;
/// or, with `HOLD` set, offers a few tuples without flushing (its batch record stays open),
/// says so on stdout, and waits to be killed.
fn sender(dir: PathBuf) -> ! {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut tx = loop {
        match open_sender::<u64>(&name(&dir), CAPACITY, BATCH) {
            Ok(tx) => break tx,
            // The receiver may still be creating the segment or its ring.
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => panic!("no segment to send into: {e}"),
        }
    };
    let id = u64::from(tx.id());
    if std::env::var_os(HOLD).is_some() {
        for seq in 0..5 {
            tx.offer(Message::Data(id << 32 | seq)).unwrap();
        }
        println!("holding");
        std::thread::sleep(Duration::from_secs(30));
        panic!("the holding sender was never killed");
    }
    let mut next = 0u64;
    loop {
        match tx.offer(Message::Data(id << 32 | next)) {
            Ok(()) => next += 1,
            Err(refused) if refused.error == SendError::Full => std::thread::yield_now(),
            Err(refused) if refused.error == SendError::Closed => std::process::exit(CLOSED_EXIT),
            Err(refused) => panic!("send: {}", refused.error),
        }
        if next.is_multiple_of(100) {
            tx.flush();
        }
        assert!(Instant::now() < deadline, "the sender ran for too long");
    }
}

/// Re-executes this test binary as a sender for the segment in `dir`, running `test`.
fn spawn_sender(dir: &Path, test: &str, hold: bool) -> Peer {
    let mut command = this_test(test);
    command.env(ROLE, dir);
    if hold {
        command
            .arg("--nocapture")
            .env(HOLD, "1")
            .stdout(Stdio::piped());
    }
    Peer::spawn(&mut command)
}

#[test]
fn a_killed_sender_is_reported_and_the_job_leaves_no_segment() {
    if let Some(dir) = std::env::var_os(ROLE) {
        sender(PathBuf::from(dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let job = JobSegments::begin_in(dir.path(), JOB).unwrap();
    let name = job.name("edge").unwrap();
    let mut rx = create_receiver::<u64>(&name, CAPACITY, SENDERS).unwrap();
    let test = "a_killed_sender_is_reported_and_the_job_leaves_no_segment";
    let mut children: Vec<_> = (0..SENDERS)
        .map(|_| spawn_sender(dir.path(), test, false))
        .collect();
    let watchdog = Instant::now() + Duration::from_secs(30);

    // Read a stretch of both streams, each in order.
    let mut next = [0u64; SENDERS];
    receive_in_order(&mut rx, &mut next, 20_000, watchdog);

    children[0].0.kill().unwrap();
    children[0].0.wait().unwrap();
    let reported = poll_until_failure(&mut rx, &mut next, watchdog);
    assert_eq!(reported, RecvError::Disconnected);
    assert!(
        rx.lost_records() <= 1,
        "at most the killed sender's open record"
    );
    drop(rx);

    // The live sender finds the edge closed and exits by itself.
    let survivor = &mut children[1].0;
    let status = loop {
        assert!(
            Instant::now() < watchdog,
            "the live sender never saw the close"
        );
        match survivor.try_wait().unwrap() {
            Some(status) => break status,
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    assert_eq!(status.code(), Some(CLOSED_EXIT));

    job.end().unwrap();
    assert!(!name.path().exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_record_a_killed_sender_left_open_is_skipped_as_lost_and_the_rest_arrives() {
    if let Some(dir) = std::env::var_os(ROLE) {
        sender(PathBuf::from(dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let job = JobSegments::begin_in(dir.path(), JOB).unwrap();
    let name = job.name("edge").unwrap();
    let mut rx = create_receiver::<u64>(&name, CAPACITY, SENDERS).unwrap();
    let test = "a_record_a_killed_sender_left_open_is_skipped_as_lost_and_the_rest_arrives";
    let watchdog = Instant::now() + Duration::from_secs(30);

    // The holder joins first (sender 0) and leaves its batch record open at the ring's start.
    let mut holder = spawn_sender(dir.path(), test, true);
    let holding = BufReader::new(holder.0.stdout.take().unwrap())
        .lines()
        .any(|line| line.is_ok_and(|l| l == "holding"));
    assert!(holding, "the holding sender exited early");
    let _streamer = spawn_sender(dir.path(), test, false);

    // The streamer's records behind the open one arrive (the window's right side) as long as
    // the ring has room; none of the holder's does.
    let mut next = [0u64; SENDERS];
    let mut out = Vec::new();
    while next[1] < 100 {
        assert!(Instant::now() < watchdog, "the stream stalled: {next:?}");
        out.clear();
        rx.poll(256, &mut out).expect("live senders");
        check_order(&out, &mut next);
    }
    holder.0.kill().unwrap();
    holder.0.wait().unwrap();
    let reported = poll_until_failure(&mut rx, &mut next, watchdog);
    assert_eq!(reported, RecvError::Disconnected);
    assert_eq!(next[0], 0, "none of the open record's tuples is delivered");
    assert_eq!(rx.lost_records(), 1);
}
