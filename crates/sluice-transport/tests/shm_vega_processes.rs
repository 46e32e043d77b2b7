//! `shm-vega` across two processes: this test binary re-executes itself as the sending
//! process. Killing the sender with SIGKILL mid-stream must be reported by the receiver (not
//! waited for forever), and the dead sender's segment must be removed by the stale sweep.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use sluice_shm::{remove_stale, SegmentName};
use sluice_transport::shm_vega::{create_sender, open_receiver};
use sluice_transport::{RecvError, TupleReceiver, TupleSender};
use sluice_types::Message;

const ROLE: &str = "SLUICE_TEST_VEGA_SENDER_DIR";
const JOB: &str = "killtest";
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

/// The sending process, killed when dropped so a failing test leaves no process behind.
struct SenderProcess(Child);

impl Drop for SenderProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_sender(dir: &PathBuf) -> SenderProcess {
    SenderProcess(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_killed_sender_is_reported_and_its_segment_removed",
            ])
            .env(ROLE, dir)
            .spawn()
            .expect("re-execute the test binary"),
    )
}

#[test]
fn a_killed_sender_is_reported_and_its_segment_removed() {
    if let Some(dir) = std::env::var_os(ROLE) {
        sender(PathBuf::from(dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().to_path_buf();
    let mut child = spawn_sender(&dir_path);
    let watchdog = Instant::now() + Duration::from_secs(30);

    // Wait for the sender's segment, then read a stretch of the stream in order.
    let mut rx = loop {
        match open_receiver::<u64>(&name(&dir_path), SLOT_BYTES, SLOTS) {
            Ok(rx) => break rx,
            Err(_) if Instant::now() < watchdog => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => panic!("the sender never created its segment: {e}"),
        }
    };
    let mut expected = 0u64;
    let mut out = Vec::new();
    while expected < 10_000 {
        assert!(Instant::now() < watchdog, "the stream stalled");
        out.clear();
        rx.poll(64, &mut out).expect("a live sender");
        for m in &out {
            assert_eq!(*m, Message::Data(expected));
            expected += 1;
        }
    }

    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let reported = loop {
        assert!(
            Instant::now() < watchdog,
            "the dead sender was never reported"
        );
        out.clear();
        match rx.poll(64, &mut out) {
            Err(error) => break error,
            Ok(_) => std::thread::yield_now(),
        }
    };
    assert_eq!(reported, RecvError::Disconnected);
    drop(rx);

    let removed = remove_stale(&dir_path, Some(JOB)).unwrap();
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert!(!name(&dir_path).path().exists());
}
