//! Sleeping until a socket is ready: what the `park` of a `tcp` sender (until its socket
//! takes bytes again) and of a receiver (until a sender's bytes or a connection arrive) do,
//! with one `poll(2)` on the sockets concerned.
//!
//! A fan-out of one sender to several receiving processes on a two-core machine needs this:
//! receivers that spin or yield while idle take the core the sender's writes (and the
//! loopback's delivery, done in the sender's system calls) need, and a sender that sleeps a
//! fixed time while a socket is full leaves every receiver idle meanwhile.

use std::os::fd::BorrowedFd;
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// What a parked end waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ready {
    /// Bytes (or a connection, or the peer's end) to read.
    Readable,
    /// Room in the send buffer.
    Writable,
}

/// Sleeps until one of `sockets` is ready as `ready` says, fails or hangs up, or `timeout`
/// passes (rounded up to a millisecond, poll's unit), or a signal arrives. Returns at once
/// for an empty set. Returns whether a socket was ready (or failed or hung up): `false` after
/// the timeout, a signal or an error of `poll` itself; the callers poll their sockets next
/// either way, so only the tests read it.
pub(crate) fn wait_until(sockets: &[BorrowedFd<'_>], ready: Ready, timeout: Duration) -> bool {
    if sockets.is_empty() {
        return false;
    }
    let events = match ready {
        Ready::Readable => PollFlags::POLLIN,
        Ready::Writable => PollFlags::POLLOUT,
    };
    let mut fds: Vec<PollFd<'_>> = sockets.iter().map(|&s| PollFd::new(s, events)).collect();
    let ms = u16::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(u16::MAX);
    // An error (EINTR, or no memory for the poll table) only ends the sleep early; the
    // caller polls its sockets next and finds their state there.
    poll(&mut fds, PollTimeout::from(ms)).is_ok_and(|ready| ready > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    /// Bounds a wait that should end at once, so a broken wait fails instead of hanging.
    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn ready_sockets_end_the_sleep_and_idle_ones_time_out() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut writer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (reader, _) = listener.accept().unwrap();
        let idle = TcpListener::bind("127.0.0.1:0").unwrap();
        // Nothing to read yet: the sleep ends with its timeout, nothing ready.
        assert!(!wait_until(
            &[reader.as_fd()],
            Ready::Readable,
            Duration::from_millis(1)
        ));
        // An empty send buffer has room.
        assert!(wait_until(&[writer.as_fd()], Ready::Writable, LONG));
        writer.write_all(b"x").unwrap();
        // A byte to read ends the sleep, also among idle sockets.
        assert!(wait_until(&[reader.as_fd()], Ready::Readable, LONG));
        assert!(wait_until(
            &[idle.as_fd(), reader.as_fd()],
            Ready::Readable,
            LONG
        ));
        // A listener with a connection waiting is readable; an idle one is not.
        assert!(!wait_until(
            &[idle.as_fd()],
            Ready::Readable,
            Duration::from_millis(1)
        ));
        let _waiting = TcpStream::connect(idle.local_addr().unwrap()).unwrap();
        assert!(wait_until(&[idle.as_fd()], Ready::Readable, LONG));
        // Nothing to wait for: returns at once, nothing ready.
        assert!(!wait_until(&[], Ready::Readable, LONG));
    }

    #[test]
    fn a_peer_hanging_up_ends_the_sleep() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let writer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (reader, _) = listener.accept().unwrap();
        assert!(!wait_until(
            &[reader.as_fd()],
            Ready::Readable,
            Duration::from_millis(1)
        ));
        drop(writer);
        assert!(wait_until(&[reader.as_fd()], Ready::Readable, LONG));
    }
}
