//! Admitting a `tcp` receiver's senders: the connections that still owe their hello, bounded
//! per peer address and in all and timed out, so that connections which say nothing cannot
//! keep the job's own senders out; and the warning that names every connection refused.
//!
//! A connection's hello is read as soon as it is accepted: a sender writes its hello right
//! after connecting, so it is usually judged at once and never waits. One whose hello is not
//! all there waits, at most [`HANDSHAKE_TIMEOUT`]. At most [`MAX_PENDING_PER_ADDRESS`]
//! connections from one IP address wait at once, and [`MAX_PENDING`] in all: a connection
//! that finds its address's (or every) place taken pushes out the one that has waited
//! longest, so a stranger's silent connections cannot hold a place a sender needs, and a
//! stranger connecting over and over only pushes out its own (unless it has as many
//! addresses as [`MAX_PENDING`] takes). At most [`MAX_PENDING`] connections are accepted per
//! poll, so a flood of them cannot hold the receiving thread either.
//!
//! Every refused connection is reported on standard error, as a `warning:` line naming the
//! receiver's address, the peer's and why; after [`WARNINGS_PER_ADDRESS`] lines about one
//! address (and for more than [`MAX_WARNED_ADDRESSES`] addresses) further refusals are only
//! counted ([`TcpReceiver::refused`](super::TcpReceiver::refused)), so a flood cannot flood
//! the log.

use std::collections::{HashMap, VecDeque};
use std::fmt::Display;
use std::hash::Hash;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use super::wire::{may_be_hello, HelloFault, HELLO_LEN, SECRET_AT};

/// How long a connection may take to send its whole hello before it is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections from one IP address waiting for their hello at once; another from that
/// address pushes out the one that has waited longest.
pub const MAX_PENDING_PER_ADDRESS: usize = 8;
/// Connections waiting for their hello at once, from all addresses; another pushes out the
/// one that has waited longest. Also the most connections accepted per poll.
pub const MAX_PENDING: usize = 64;
/// Warnings shown about one address; later refusals of it are counted only.
pub const WARNINGS_PER_ADDRESS: u32 = 8;
/// Addresses warned about; refusals of others are counted only.
pub const MAX_WARNED_ADDRESSES: usize = 256;

/// Why a connection was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// Its hello did not arrive whole in time.
    #[error("it sent {got} of the hello's {HELLO_LEN} bytes in {HANDSHAKE_TIMEOUT:?}")]
    Silent {
        /// Bytes of the hello it sent.
        got: usize,
    },
    /// Too many connections were waiting for their hello; it had waited longest.
    #[error("{waiting} connections {from} were waiting for their hello and it had waited longest")]
    Crowded {
        /// Connections waiting.
        waiting: usize,
        /// `from its address`, or `in all`.
        from: &'static str,
    },
    /// It closed (or reset) its connection before its hello was whole.
    #[error("it closed its connection after {got} of the hello's {HELLO_LEN} bytes")]
    HungUp {
        /// Bytes of the hello it sent.
        got: usize,
    },
    /// Its hello is not one this receiver accepts.
    #[error("{fault} (it sent {sent})")]
    Hello {
        /// What is wrong with it.
        fault: HelloFault,
        /// Its first bytes in hex.
        sent: String,
    },
    /// Another connection already holds the sender index it presented.
    #[error("sender {0} is already connected")]
    Taken(usize),
    /// Every sender was in before its hello was whole.
    #[error("every sender of the edge is already connected")]
    Complete,
}

/// Bytes of a refused hello shown in its warning: enough to tell what the peer speaks, and
/// short of the secret a hello carries.
const SHOWN_BYTES: usize = 16;
const _: () = assert!(SHOWN_BYTES <= SECRET_AT);

impl Refusal {
    /// The refusal of a hello whose first bytes are `sent`, for `fault`.
    pub(crate) fn hello(fault: HelloFault, sent: &[u8]) -> Self {
        let sent = sent
            .iter()
            .take(SHOWN_BYTES)
            .map(|b| format!("{b:02x}"))
            .collect();
        Self::Hello { fault, sent }
    }
}

/// A connection whose hello is not complete yet.
#[derive(Debug)]
struct Handshake {
    stream: TcpStream,
    peer: SocketAddr,
    hello: [u8; HELLO_LEN],
    got: usize,
    since: Instant,
}

/// Where a hello stands after a read.
enum Progress {
    Complete,
    Waiting,
    Failed(Refusal),
}

impl Handshake {
    /// Reads what has arrived of the hello.
    fn advance(&mut self) -> Progress {
        loop {
            match self.stream.read(&mut self.hello[self.got..]) {
                Ok(0) => return Progress::Failed(Refusal::HungUp { got: self.got }),
                Ok(n) => {
                    self.got += n;
                    let sent = &self.hello[..self.got];
                    if !may_be_hello(sent) {
                        let why = Refusal::hello(HelloFault::NotAHello, sent);
                        return Progress::Failed(why);
                    }
                    if self.got == HELLO_LEN {
                        return Progress::Complete;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Progress::Waiting,
                Err(_) => return Progress::Failed(Refusal::HungUp { got: self.got }),
            }
        }
    }
}

/// A connection whose hello is whole, to be judged by the receiver.
#[derive(Debug)]
pub(crate) struct Greeted {
    pub(crate) stream: TcpStream,
    pub(crate) peer: SocketAddr,
    pub(crate) hello: [u8; HELLO_LEN],
}

/// The connections of a receiver waiting for their hello, and its refusals.
#[derive(Debug)]
pub(crate) struct Admission {
    /// The receiver's address, for the warnings.
    local: SocketAddr,
    /// Oldest first.
    pending: VecDeque<Handshake>,
    refused: u64,
    warnings: WarningLimit<IpAddr>,
}

impl Admission {
    /// No connection yet, for the receiver bound to `local`.
    pub(crate) fn new(local: SocketAddr) -> Self {
        Self {
            local,
            pending: VecDeque::new(),
            refused: 0,
            warnings: WarningLimit::default(),
        }
    }

    /// Connections refused so far.
    pub(crate) fn refused(&self) -> u64 {
        self.refused
    }

    /// The sockets of the connections waiting, to wake up when their bytes arrive.
    pub(crate) fn sockets(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.pending.iter().map(|h| h.stream.as_fd())
    }

    /// Accepts the connections waiting on `listener` (at most [`MAX_PENDING`]), advances
    /// every hello, refuses the connections that failed, took too long or were pushed out,
    /// and returns those whose hello is whole.
    pub(crate) fn poll(&mut self, listener: &TcpListener) -> Vec<Greeted> {
        let mut greeted = Vec::new();
        let now = Instant::now();
        for _ in 0..MAX_PENDING {
            match listener.accept() {
                Ok((stream, peer)) => {
                    if stream.set_nonblocking(true).is_err() {
                        self.refuse(peer, &Refusal::HungUp { got: 0 });
                        continue;
                    }
                    let mut handshake = Handshake {
                        stream,
                        peer,
                        hello: [0; HELLO_LEN],
                        got: 0,
                        since: now,
                    };
                    match handshake.advance() {
                        Progress::Complete => greeted.push(handshake.into()),
                        Progress::Failed(why) => self.refuse(peer, &why),
                        Progress::Waiting => self.wait(handshake),
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // WouldBlock: nobody waiting. Anything else (out of descriptors, a connection
                // reset while queued) is tried again at the next poll.
                Err(_) => break,
            }
        }
        let mut still = VecDeque::with_capacity(self.pending.len());
        while let Some(mut handshake) = self.pending.pop_front() {
            match handshake.advance() {
                Progress::Complete => greeted.push(handshake.into()),
                Progress::Failed(why) => self.refuse(handshake.peer, &why),
                Progress::Waiting if now.duration_since(handshake.since) >= HANDSHAKE_TIMEOUT => {
                    let got = handshake.got;
                    self.refuse(handshake.peer, &Refusal::Silent { got });
                }
                Progress::Waiting => still.push_back(handshake),
            }
        }
        self.pending = still;
        greeted
    }

    /// Makes `handshake` wait for the rest of its hello, pushing out the one that has waited
    /// longest from its address, or from all, if their places are taken.
    fn wait(&mut self, handshake: Handshake) {
        let ip = handshake.peer.ip();
        let same_address = self.pending.iter().filter(|h| h.peer.ip() == ip).count();
        let pushed_out = if same_address >= MAX_PENDING_PER_ADDRESS {
            self.pending
                .iter()
                .position(|h| h.peer.ip() == ip)
                .map(|at| (at, same_address, "from its address"))
        } else if self.pending.len() >= MAX_PENDING {
            Some((0, self.pending.len(), "in all"))
        } else {
            None
        };
        if let Some((at, waiting, from)) = pushed_out {
            if let Some(oldest) = self.pending.remove(at) {
                self.refuse(oldest.peer, &Refusal::Crowded { waiting, from });
            }
        }
        self.pending.push_back(handshake);
    }

    /// Counts a refusal of `peer` and warns of it (closing its connection is the caller's,
    /// by dropping it).
    pub(crate) fn refuse(&mut self, peer: SocketAddr, why: &Refusal) {
        self.refused += 1;
        let warning = || {
            format!(
                "warning: the tcp receiver at {} refused a connection from {peer}: {why}",
                self.local
            )
        };
        if let Some(line) = self.warnings.line(peer.ip(), warning) {
            // A closed standard error only loses the warning.
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    }

    /// Refuses every connection still waiting: every sender is in.
    pub(crate) fn close(&mut self) {
        while let Some(handshake) = self.pending.pop_front() {
            self.refuse(handshake.peer, &Refusal::Complete);
        }
    }
}

impl From<Handshake> for Greeted {
    fn from(h: Handshake) -> Self {
        Self {
            stream: h.stream,
            peer: h.peer,
            hello: h.hello,
        }
    }
}

/// Which warnings about refused connections are shown, so that a flood of connections cannot
/// flood the log: at most [`WARNINGS_PER_ADDRESS`] about one peer (by its address, or whatever
/// `K` tells peers apart by), about at most [`MAX_WARNED_ADDRESSES`] peers; the rest are only
/// counted. Every listener of a job that strangers can reach warns through one.
#[derive(Debug)]
pub struct WarningLimit<K> {
    shown: HashMap<K, u32>,
    withheld: u64,
}

impl<K> Default for WarningLimit<K> {
    fn default() -> Self {
        Self {
            shown: HashMap::new(),
            withheld: 0,
        }
    }
}

impl<K: Hash + Eq + Display> WarningLimit<K> {
    /// The warning `warning` makes about refusing a connection of `peer`, unless enough about
    /// it were shown; the last one shown about it says so.
    pub fn line(&mut self, peer: K, warning: impl FnOnce() -> String) -> Option<String> {
        let known = self.shown.len();
        let more = format!(" (further refusals of {peer} are counted, not shown)");
        let shown = match self.shown.get_mut(&peer) {
            Some(shown) => shown,
            None if known < MAX_WARNED_ADDRESSES => self.shown.entry(peer).or_default(),
            None => {
                self.withheld += 1;
                return None;
            }
        };
        if *shown >= WARNINGS_PER_ADDRESS {
            self.withheld += 1;
            return None;
        }
        *shown += 1;
        let mut line = warning();
        if *shown == WARNINGS_PER_ADDRESS {
            line.push_str(&more);
        }
        Some(line)
    }

    /// How many warnings were counted and not shown.
    pub fn withheld(&self) -> u64 {
        self.withheld
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::VERSION;

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn warnings_name_both_ends_and_stop_per_address() {
        let mut w = WarningLimit::default();
        let local = addr("127.0.0.1:9");
        let mut line = |peer: &str, why: &Refusal| {
            let peer = addr(peer);
            w.line(peer.ip(), || {
                format!(
                    "warning: the tcp receiver at {local} refused a connection from {peer}: {why}"
                )
            })
        };
        let first = line("10.0.0.1:5", &Refusal::Silent { got: 3 }).unwrap();
        assert_eq!(
            first,
            "warning: the tcp receiver at 127.0.0.1:9 refused a connection from 10.0.0.1:5: \
             it sent 3 of the hello's 60 bytes in 5s"
        );
        for _ in 1..WARNINGS_PER_ADDRESS - 1 {
            assert!(line("10.0.0.1:6", &Refusal::Complete).is_some());
        }
        let last = line("10.0.0.1:7", &Refusal::Taken(0)).unwrap();
        assert!(
            last.ends_with("sender 0 is already connected (further refusals of 10.0.0.1 are counted, not shown)"),
            "{last}"
        );
        assert_eq!(line("10.0.0.1:8", &Refusal::Complete), None);
        assert!(line("10.0.0.2:8", &Refusal::Complete).is_some());
        for i in 0..MAX_WARNED_ADDRESSES {
            line(
                &format!("10.1.{}.{}:1", i / 256, i % 256),
                &Refusal::Complete,
            );
        }
        assert_eq!(w.shown.len(), MAX_WARNED_ADDRESSES, "the map is bounded");
        // One of 10.0.0.1's, and the two addresses past the bound.
        assert_eq!(w.withheld(), 3);
    }

    #[test]
    fn a_refused_hello_shows_its_start_not_its_secret() {
        let mut hello = [0xab; HELLO_LEN];
        hello[..8].copy_from_slice(b"GET / HT");
        let text = Refusal::hello(HelloFault::NotAHello, &hello).to_string();
        assert_eq!(
            text,
            format!(
                "it did not open with a sluice tcp hello of version {VERSION} \
                 (it sent 474554202f204854abababababababab)"
            )
        );
        assert_eq!(
            Refusal::hello(HelloFault::NotAHello, &[0xff; 4]).to_string(),
            format!(
                "it did not open with a sluice tcp hello of version {VERSION} (it sent ffffffff)"
            )
        );
    }
}
