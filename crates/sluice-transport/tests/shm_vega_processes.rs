//! `shm-vega` across two processes: this test binary re-executes itself as the sending
//! process. Killing the sender with SIGKILL mid-stream must be reported by the receiver (not
//! waited for forever), and the dead sender's segment must be removed by the stale sweep. A
//! receiver parked on the ring's doorbell must be woken by the other process's sends.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use sluice_shm::{remove_stale, SegmentName};
use sluice_transport::shm_vega::{create_sender, open_receiver};
use sluice_transport::{RecvError, TupleReceiver, TupleSender};
use sluice_types::Message;
use support::{poll_until_failure, receive_in_order, this_test, Peer};

const ROLE: &str = "SLUICE_TEST_VEGA_SENDER_DIR";
const PACED_ROLE: &str = "SLUICE_TEST_VEGA_PACED_SENDER_DIR";
const JOB: &str = "killtest";
/// Messages the paced sender sends, each after a pause the receiver spends parked.
const PACED: u64 = 5;
const SLOT_BYTES: usize = 16;
const SLOTS: usize = 64;

fn name(dir: &PathBuf) -> SegmentName {
    SegmentName::in_dir(dir, JOB, "edge").expect("valid name")
}

/// The sending process: sends 0, 1, 2, ... until it is killed.
fn sender(dir: PathBuf) -> ! {
    let mut tx = create_sender::<u64>(&name(&dir), SLOT_BYTES, SLOTS).expect("create sender");
    let mut next = 0u64;
    loop {
        match tx.offer(Message::Data(next)) {
            Ok(()) => next += 1,
            Err(_) => {
                tx.flush();
                std::thread::yield_now();
            }
        }
        if next.is_multiple_of(16) {
            tx.flush();
        }
    }
}

/// The paced sending process: sends `0..PACED` with pauses, then the end of the stream, and
/// keeps the segment until the receiver has released everything.
fn paced_sender(dir: PathBuf) -> ! {
    let mut tx = create_sender::<u64>(&name(&dir), SLOT_BYTES, SLOTS).expect("create sender");
    for message in (0..PACED).map(Message::Data).chain([Message::EndOfStream]) {
        std::thread::sleep(Duration::from_millis(20));
        tx.offer(message).expect("room in the ring");
        tx.flush();
    }
    let patience = Instant::now() + Duration::from_secs(60);
    while tx.room() < SLOTS && Instant::now() < patience {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::process::exit(0)
}

/// Re-executes this binary to run only `test`, as the sender `role` names.
fn spawn_sender(test: &str, role: &str, dir: &PathBuf) -> Peer {
    Peer::spawn(this_test(test).env(role, dir))
}

#[test]
fn a_killed_sender_is_reported_and_its_segment_removed() {
    if let Some(dir) = std::env::var_os(ROLE) {
        sender(PathBuf::from(dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().to_path_buf();
    let mut child = spawn_sender(
        "a_killed_sender_is_reported_and_its_segment_removed",
        ROLE,
        &dir_path,
    );
    let watchdog = Instant::now() + Duration::from_secs(30);

    // Wait for the sender's segment, then read a stretch of the stream in order.
    let mut rx = loop {
        match open_receiver::<u64>(&name(&dir_path), SLOT_BYTES, SLOTS) {
            Ok(rx) => break rx,
            Err(_) if Instant::now() < watchdog => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => panic!("the sender never created its segment: {e}"),
        }
    };
    let mut next = [0u64];
    receive_in_order(&mut rx, &mut next, 10_000, watchdog);
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let reported = poll_until_failure(&mut rx, &mut next, watchdog);
    assert_eq!(reported, RecvError::Disconnected);
    drop(rx);

    let removed = remove_stale(&dir_path, Some(JOB)).unwrap();
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert!(!name(&dir_path).path().exists());
}

#[test]
fn a_parked_receiver_is_woken_by_the_other_process() {
    if let Some(dir) = std::env::var_os(PACED_ROLE) {
        paced_sender(PathBuf::from(dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().to_path_buf();
    let _child = spawn_sender(
        "a_parked_receiver_is_woken_by_the_other_process",
        PACED_ROLE,
        &dir_path,
    );
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let opened = Instant::now();
        let mut rx = loop {
            match open_receiver::<u64>(&name(&dir_path), SLOT_BYTES, SLOTS) {
                Ok(rx) => break rx,
                Err(_) if opened.elapsed() < Duration::from_secs(30) => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => panic!("the sender never created its segment: {e}"),
            }
        };
        let mut got = Vec::new();
        let mut out = Vec::new();
        while got.last() != Some(&Message::EndOfStream) {
            out.clear();
            if rx.poll(64, &mut out).expect("a live sender") == 0 {
                // Far longer than the watchdog: only the sender's ring ends it in time.
                assert!(rx.park(Duration::from_secs(3600)));
            }
            got.append(&mut out);
        }
        let _ = done.send(got);
    });
    let got = finished
        .recv_timeout(Duration::from_secs(30))
        .expect("watchdog: the parked receiver was not woken");
    let expected: Vec<_> = (0..PACED)
        .map(Message::Data)
        .chain([Message::EndOfStream])
        .collect();
    assert_eq!(got, expected);
}
