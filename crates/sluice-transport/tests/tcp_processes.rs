//! `tcp` across two processes: this test binary re-executes itself as the sending process,
//! handing it the receiver's address and the job's secret through its environment. Killing
//! the sender with SIGKILL mid-stream must be reported by the receiver as a disconnect, not
//! waited for.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use sluice_transport::tcp::{bind_receiver, connect_sender, JobSecret, TcpParams};
use sluice_transport::{RecvError, TupleReceiver, TupleSender};
use sluice_types::Message;
use support::{poll_until_failure, receive_in_order, this_test, Peer};

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
    let mut child = Peer::spawn(
        this_test("a_killed_sender_is_reported_as_disconnected")
            .env(ADDR, addr.to_string())
            .env(SECRET, secret.to_hex()),
    );
    let watchdog = Instant::now() + Duration::from_secs(30);

    let mut next = [0u64];
    receive_in_order(&mut rx, &mut next, 10_000, watchdog);
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let reported = poll_until_failure(&mut rx, &mut next, watchdog);
    assert_eq!(reported, RecvError::Disconnected);
    assert_eq!(rx.poll(1, &mut Vec::new()), Err(RecvError::Disconnected));
}
