//! Rings of datagrams over one UDP socket, moved to and from the kernel in batches: one
//! `sendmmsg` or `recvmmsg` system call for many datagrams (Muralidharan, Casey and Gregg,
//! "A parallel runtime framework for communication intensive stream applications", section
//! V.A, Algorithms 1 and 2, with the kernel's socket buffers in the role of the NIC's rings).
//!
//! - [`SendRing`] (Algorithm 1): the caller fills datagrams in the ring's slots and closes
//!   them; [`SendRing::send`] hands every closed one to the kernel with one `sendmmsg` (two
//!   when they wrap around the ring's end). The caller calls it when the ring is full or when
//!   it must make what it holds visible (a flush), so a busy sender moves a whole ring per
//!   system call and an idle one a datagram at a time.
//! - [`ReceiveRing`] (Algorithm 2): [`ReceiveRing::next`] hands out received datagrams one by
//!   one and refills the free slots with one `recvmmsg` only when fewer than a threshold are
//!   left (1: only when the ring is exhausted). The kernel returns what has arrived, up to the
//!   free slots, so the batch per call follows the arrival rate by itself.
//!
//! The system calls go through `nix`'s safe wrappers (this crate has no `unsafe`). Their
//! headers hold raw pointers and so cannot live in a `Send` struct: they are built per call,
//! a small allocation next to a system call. Every socket here is non-blocking: a ring never
//! waits.

use std::io::{self, IoSlice, IoSliceMut};
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

use nix::errno::Errno;
use nix::sys::socket::{recvmmsg, sendmmsg, ControlMessage, MsgFlags, MultiHeaders};

/// The most datagrams one system call moves (Linux's `UIO_MAXIOV`).
pub const MAX_BATCH: usize = 1024;
/// The largest UDP payload over IPv4: 65,535 bytes less the IP (20) and UDP (8) headers.
pub const MAX_DATAGRAM: usize = 65_507;

/// `sendmmsg` takes one destination per datagram; connected sockets need none.
static NO_ADDRESSES: [Option<()>; MAX_BATCH] = [None; MAX_BATCH];

/// Datagrams built in place and sent in batches through one connected UDP socket.
pub struct SendRing {
    socket: UdpSocket,
    slots: Vec<Vec<u8>>,
    /// The oldest closed slot not sent yet.
    head: usize,
    /// Closed slots not sent yet, from `head` on (wrapping).
    closed: usize,
    system_calls: u64,
    sent: u64,
}

impl SendRing {
    /// A ring of `slots` datagrams (1 to [`MAX_BATCH`]) of up to `datagram_bytes` each, sent
    /// through `socket`, which must be connected and non-blocking.
    pub fn new(socket: UdpSocket, slots: usize, datagram_bytes: usize) -> Self {
        let slots = slots.clamp(1, MAX_BATCH);
        Self {
            socket,
            slots: (0..slots)
                .map(|_| Vec::with_capacity(datagram_bytes))
                .collect(),
            head: 0,
            closed: 0,
            system_calls: 0,
            sent: 0,
        }
    }

    /// The socket.
    pub fn socket(&self) -> &UdpSocket {
        &self.socket
    }

    /// Closed datagrams not sent yet.
    pub fn closed(&self) -> usize {
        self.closed
    }

    /// Slots not holding a closed datagram (the one being filled counts as free).
    pub fn free(&self) -> usize {
        self.slots.len() - self.closed
    }

    /// The slot after the closed ones, where the next datagram is built; `None` when every
    /// slot holds a closed datagram. It keeps what was last written to it.
    pub fn filling(&mut self) -> Option<&mut Vec<u8>> {
        if self.closed == self.slots.len() {
            return None;
        }
        let at = (self.head + self.closed) % self.slots.len();
        Some(&mut self.slots[at])
    }

    /// Closes the slot [`SendRing::filling`] returns: it goes with the next send. Returns
    /// `false` (and does nothing) when there is no such slot.
    pub fn close(&mut self) -> bool {
        if self.closed == self.slots.len() {
            return false;
        }
        self.closed += 1;
        true
    }

    /// Hands the closed datagrams to the kernel, oldest first, with one `sendmmsg` per run of
    /// consecutive slots; returns how many went. A socket that would block (its buffer is
    /// full) takes some or none: the rest stay closed for the next call. Any other error
    /// (such as `ConnectionRefused`: nobody listens at the destination) is returned.
    pub fn send(&mut self) -> io::Result<usize> {
        let len = self.slots.len();
        let mut total = 0;
        while self.closed > 0 {
            let run = self.closed.min(len - self.head);
            let batch = &self.slots[self.head..self.head + run];
            let iovs: Vec<[IoSlice<'_>; 1]> = batch.iter().map(|d| [IoSlice::new(d)]).collect();
            let mut headers = MultiHeaders::<()>::preallocate(run, None);
            let no_control: [ControlMessage<'_>; 0] = [];
            self.system_calls += 1;
            let result = sendmmsg(
                self.socket.as_raw_fd(),
                &mut headers,
                &iovs,
                &NO_ADDRESSES[..run],
                no_control,
                MsgFlags::MSG_DONTWAIT,
            );
            let went = match result {
                Ok(results) => results.count(),
                Err(Errno::EINTR) => continue,
                // ENOBUFS: a full device queue, as transient as a full socket buffer.
                Err(Errno::EAGAIN | Errno::ENOBUFS) => 0,
                Err(e) => return Err(io::Error::from(e)),
            };
            self.head = (self.head + went) % len;
            self.closed -= went;
            self.sent += went as u64;
            total += went;
            if went < run {
                break;
            }
        }
        Ok(total)
    }

    /// `sendmmsg` calls made so far.
    pub fn system_calls(&self) -> u64 {
        self.system_calls
    }

    /// Datagrams the kernel took so far.
    pub fn datagrams_sent(&self) -> u64 {
        self.sent
    }
}

/// Datagrams received in batches from one UDP socket into a ring of fixed buffers.
pub struct ReceiveRing {
    socket: UdpSocket,
    /// `slots` buffers of `stride` bytes each.
    buffer: Vec<u8>,
    /// The largest datagram accepted plus one, so a longer one shows as longer.
    stride: usize,
    /// The length of the datagram in each slot.
    lengths: Vec<usize>,
    /// The oldest received datagram not handed out yet.
    head: usize,
    /// Received datagrams not handed out yet, from `head` on (wrapping).
    ready: usize,
    system_calls: u64,
    received: u64,
}

impl ReceiveRing {
    /// A ring of `slots` buffers (1 to [`MAX_BATCH`]) for datagrams of up to `capacity` bytes
    /// received from `socket`, which must be non-blocking.
    pub fn new(socket: UdpSocket, slots: usize, capacity: usize) -> Self {
        let slots = slots.clamp(1, MAX_BATCH);
        let stride = capacity.min(MAX_DATAGRAM) + 1;
        Self {
            socket,
            buffer: vec![0; slots * stride],
            stride,
            lengths: vec![0; slots],
            head: 0,
            ready: 0,
            system_calls: 0,
            received: 0,
        }
    }

    /// The socket.
    pub fn socket(&self) -> &UdpSocket {
        &self.socket
    }

    /// Received datagrams not handed out yet.
    pub fn ready(&self) -> usize {
        self.ready
    }

    /// The next received datagram, after a `recvmmsg` into the free slots if fewer than
    /// `threshold` (at least 1) were waiting; `None` when nothing has arrived. A datagram
    /// longer than the ring's capacity comes back cut to `capacity + 1` bytes, so the caller
    /// sees it is too long. The slice is valid until the next call.
    pub fn next(&mut self, threshold: usize) -> io::Result<Option<&[u8]>> {
        if self.ready < threshold.max(1) {
            self.refill()?;
        }
        if self.ready == 0 {
            return Ok(None);
        }
        let slot = self.head;
        self.head = (self.head + 1) % self.lengths.len();
        self.ready -= 1;
        let start = slot * self.stride;
        Ok(Some(&self.buffer[start..start + self.lengths[slot]]))
    }

    /// Receives into every free slot with one `recvmmsg` (never waiting); returns how many
    /// datagrams arrived.
    pub fn refill(&mut self) -> io::Result<usize> {
        let slots = self.lengths.len();
        let free = slots - self.ready;
        if free == 0 {
            return Ok(0);
        }
        let tail = (self.head + self.ready) % slots;
        let mut buffers: Vec<&mut [u8]> = self.buffer.chunks_exact_mut(self.stride).collect();
        buffers.rotate_left(tail);
        buffers.truncate(free);
        let mut iovs: Vec<[IoSliceMut<'_>; 1]> =
            buffers.into_iter().map(|b| [IoSliceMut::new(b)]).collect();
        let mut headers = MultiHeaders::<()>::preallocate(free, None);
        self.system_calls += 1;
        let results = match recvmmsg(
            self.socket.as_raw_fd(),
            &mut headers,
            iovs.iter_mut(),
            MsgFlags::MSG_DONTWAIT,
            None,
        ) {
            Ok(results) => results,
            // Nothing waiting, or a signal: the next call tries again.
            Err(Errno::EAGAIN | Errno::EINTR) => return Ok(0),
            Err(e) => return Err(io::Error::from(e)),
        };
        let mut arrived = 0;
        for (i, message) in results.enumerate() {
            let cut = message.flags.contains(MsgFlags::MSG_TRUNC);
            self.lengths[(tail + i) % slots] = if cut {
                self.stride
            } else {
                message.bytes.min(self.stride)
            };
            arrived += 1;
        }
        self.ready += arrived;
        self.received += arrived as u64;
        Ok(arrived)
    }

    /// `recvmmsg` calls made so far.
    pub fn system_calls(&self) -> u64 {
        self.system_calls
    }

    /// Datagrams received so far.
    pub fn datagrams_received(&self) -> u64 {
        self.received
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(slots: usize, capacity: usize) -> (SendRing, ReceiveRing) {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        tx.set_nonblocking(true).unwrap();
        (
            SendRing::new(tx, slots, capacity),
            ReceiveRing::new(rx, slots, capacity),
        )
    }

    #[test]
    fn a_full_ring_goes_in_one_call_and_comes_back_in_one_call_in_order() {
        let (mut tx, mut rx) = pair(8, 100);
        for i in 0..8u8 {
            let slot = tx.filling().unwrap();
            slot.clear();
            slot.extend_from_slice(&[i; 10]);
            assert!(tx.close());
        }
        assert!(tx.filling().is_none());
        assert!(!tx.close());
        assert_eq!(tx.send().unwrap(), 8);
        assert_eq!((tx.system_calls(), tx.datagrams_sent()), (1, 8));
        for i in 0..8u8 {
            assert_eq!(rx.next(1).unwrap().unwrap(), &[i; 10]);
        }
        assert_eq!((rx.system_calls(), rx.datagrams_received()), (1, 8));
        assert_eq!(rx.next(1).unwrap(), None);
    }

    #[test]
    fn the_rings_wrap_around_and_a_long_datagram_shows_as_too_long() {
        let (mut tx, mut rx) = pair(3, 16);
        let mut expected = Vec::new();
        for round in 0..5u8 {
            for i in 0..2u8 {
                let slot = tx.filling().unwrap();
                slot.clear();
                slot.extend_from_slice(&[round * 10 + i; 4]);
                tx.close();
            }
            tx.send().unwrap();
            expected.push(vec![round * 10; 4]);
            expected.push(vec![round * 10 + 1; 4]);
            // Take one now and leave one in the ring, so the next refill wraps.
            let got = rx.next(1).unwrap().unwrap().to_vec();
            assert_eq!(got, expected.remove(0));
        }
        tx.socket().send(&[9; 40]).unwrap();
        let mut rest = Vec::new();
        while let Some(d) = rx.next(1).unwrap() {
            rest.push(d.to_vec());
        }
        assert_eq!(rest.pop().unwrap(), vec![9; 17], "cut to capacity + 1");
        assert_eq!(rest, expected);
    }

    #[test]
    fn a_threshold_refills_before_the_ring_runs_dry() {
        let (mut tx, mut rx) = pair(4, 16);
        for _ in 0..6 {
            tx.filling().unwrap().clear();
            tx.close();
            if tx.free() == 0 {
                tx.send().unwrap();
            }
        }
        tx.send().unwrap();
        rx.next(1).unwrap().unwrap();
        assert_eq!(rx.ready(), 3);
        rx.next(1).unwrap().unwrap();
        assert_eq!(
            rx.system_calls(),
            1,
            "a threshold of 1 waits for an empty ring"
        );
        rx.next(4).unwrap().unwrap();
        assert_eq!(rx.system_calls(), 2);
        assert_eq!(rx.ready(), 3, "the refill took the two datagrams left");
    }
}
