//! What the cross-process transport tests share: re-executing this test binary as a peer
//! process (killed when dropped, so a failing test leaves nothing behind), and polling a
//! receiver with a watchdog while checking that every sender's sequence arrives in order.

use std::process::{Child, Command};
use std::time::Instant;

use sluice_transport::{RecvError, TupleReceiver};
use sluice_types::Message;

/// A peer process running this test binary, killed and reaped when dropped.
pub struct Peer(pub Child);

impl Peer {
    /// Starts `command` (from [`this_test`]) as a peer.
    pub fn spawn(command: &mut Command) -> Self {
        Peer(command.spawn().expect("re-execute the test binary"))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A command that re-executes this test binary to run only `test`; the caller adds the
/// environment that tells it which role to play.
pub fn this_test(test: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("the test binary's path"));
    command.args(["--exact", test]);
    command
}

/// Checks that `out` continues each sender's sequence: a tuple is `sender << 32 | seq`, and
/// `next[sender]` is the sequence number that sender owes next.
pub fn check_order(out: &[Message<u64>], next: &mut [u64]) {
    for m in out {
        let Message::Data(v) = *m else {
            panic!("only data was sent: {m:?}")
        };
        let (id, seq) = ((v >> 32) as usize, v & 0xFFFF_FFFF);
        assert_eq!(seq, next[id], "sender {id} out of order");
        next[id] += 1;
    }
}

/// Polls `rx` in order (see [`check_order`]) until every sender has delivered `count` tuples.
pub fn receive_in_order(
    rx: &mut impl TupleReceiver<u64>,
    next: &mut [u64],
    count: u64,
    watchdog: Instant,
) {
    let mut out = Vec::new();
    while next.iter().any(|&n| n < count) {
        assert!(Instant::now() < watchdog, "the streams stalled: {next:?}");
        out.clear();
        rx.poll(256, &mut out).expect("live senders");
        check_order(&out, next);
    }
}

/// Polls `rx` until it fails and returns why, still checking the order of what arrives.
pub fn poll_until_failure(
    rx: &mut impl TupleReceiver<u64>,
    next: &mut [u64],
    watchdog: Instant,
) -> RecvError {
    let mut out = Vec::new();
    loop {
        assert!(
            Instant::now() < watchdog,
            "the dead sender was never reported"
        );
        out.clear();
        match rx.poll(256, &mut out) {
            Err(error) => return error,
            Ok(0) => std::thread::yield_now(),
            Ok(_) => {}
        }
        check_order(&out, next);
    }
}
