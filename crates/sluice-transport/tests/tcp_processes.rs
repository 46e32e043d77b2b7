//! `tcp` across two processes: this test binary re-executes itself as the sending process,
//! handing it the receiver's address and the job's secret through its environment. Killing
//! the sender with SIGKILL mid-stream must be reported by the receiver as a disconnect, not
//! waited for.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use sluice_transport::tcp::{bind_receiver, connect_sender, JobSecret, TcpParams};
use sluice_transport::{RecvError, TupleReceiver, TupleSender};
use sluice_types::Message;

const ADDR: &str = "SLUICE_TEST_TCP_RECEIVER";
const SECRET: &str = "SLUICE_TEST_TCP_SECRET";

/// The sending process: sends 0, 1, 2, ... until it is killed.
fn sender(addr: &str) -> ! {
    let addr: SocketAddr = addr.parse().expect("an address");
    let secret = JobSecret::from_hex(&std::env::var(SECRET).expect("a secret")).expect("hex");
    let mut tx = connect_sender::<u64>(addr, &secret, 0, &TcpParams::default()).expect("connect");
    let mut next = 0u64;
    loop {
        match tx.offer(Message::Data(next)) {
            Ok(()) => next += 1,
            Err(_) => std::thread::yield_now(),
        }
        tx.flush();
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

#[test]
fn a_killed_sender_is_reported_as_disconnected() {
    if let Ok(addr) = std::env::var(ADDR) {
        sender(&addr);
    }
    let secret = JobSecret::random().unwrap();
    let (mut rx, addr) = bind_receiver::<u64>(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        &secret,
        1,
        &TcpParams::default(),
    )
    .unwrap();
    let mut child = SenderProcess(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "a_killed_sender_is_reported_as_disconnected"])
            .env(ADDR, addr.to_string())
            .env(SECRET, secret.to_hex())
            .spawn()
            .expect("re-execute the test binary"),
    );
    let watchdog = Instant::now() + Duration::from_secs(30);

    let mut expected = 0u64;
    let mut out = Vec::new();
    while expected < 10_000 {
        assert!(
            Instant::now() < watchdog,
            "the stream stalled at {expected}"
        );
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
    assert_eq!(rx.poll(1, &mut out), Err(RecvError::Disconnected));
}
