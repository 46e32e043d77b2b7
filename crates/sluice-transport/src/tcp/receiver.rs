//! The receiving end of a `tcp` edge: a non-blocking listener that admits the job's senders,
//! and per sender a fixed buffer that non-blocking reads fill and a checked decoder empties.
//!
//! Nothing here blocks: `poll` accepts whoever is waiting, advances their hellos, reads at
//! most once per sender and decodes what is complete. Every length read from a peer is
//! compared with this end's own limits before it is used, and every slice is taken within
//! the bytes actually received, so a peer can make `poll` return
//! [`RecvError::Malformed`] but never read, write or allocate outside what this end sized
//! from its own parameters.

use std::io::{ErrorKind, Read};
use std::marker::PhantomData;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use sluice_types::{Message, Punctuation, Tuple};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::params::TcpParams;
use super::readiness::{wait_until, Ready};
use super::secret::JobSecret;
use super::wire::{
    Framing, FRAME_HEADER, HELLO_LEN, LEN_PREFIX, PUNCTUATION_RECORD, RUN_HEADER, TAG_DATA,
    TAG_END, TAG_PUNCTUATION,
};
use crate::wire_fields::get_u32;
use crate::{RecvError, TransportError, TupleReceiver};

/// The most senders one receiver accepts.
pub const MAX_SENDERS: usize = 1024;
/// Connections whose hello is still incomplete at once; more are refused at once.
const MAX_HANDSHAKES: usize = 16;
/// How long a connection may take to send its hello.
const HANDSHAKE_PATIENCE: Duration = Duration::from_secs(10);
/// The least bytes a sender's read buffer holds (one read can take many frames).
const MIN_READ_BUFFER: usize = 256 << 10;
/// The listener's backlog.
const BACKLOG: i32 = 128;
/// A read shorter than this acknowledges at once (`TCP_QUICKACK`; see [`Peer::fill`]).
const QUICKACK_BELOW: usize = 64 << 10;

/// The receiving end of a `tcp` edge with one or several senders.
pub struct TcpReceiver<T> {
    listener: Option<TcpListener>,
    local_addr: SocketAddr,
    handshakes: Vec<Handshake>,
    peers: Vec<Peer>,
    taken: Vec<bool>,
    secret: JobSecret,
    framing: Framing,
    /// The sender polled first next time, so no sender starves the others.
    next: usize,
    refused: u64,
    failure: Option<RecvError>,
    _tuples: PhantomData<fn() -> T>,
}

/// A connection whose hello is not complete yet.
struct Handshake {
    stream: TcpStream,
    hello: [u8; HELLO_LEN],
    got: usize,
    since: Instant,
}

/// What one sender's connection has given so far.
struct Peer {
    /// `None` once the sender closed after its end of stream.
    stream: Option<TcpStream>,
    buffer: Box<[u8]>,
    /// Received bytes not decoded yet are `buffer[start..end]`.
    start: usize,
    end: usize,
    /// Body bytes of the current frame not decoded yet; 0 between frames.
    frame_left: usize,
    /// Tuples of the current run not decoded yet.
    run_left: u32,
    ended: bool,
}

/// Binds a receiver for `senders` senders presenting `secret` to exactly `addr` (port 0 lets
/// the system choose) and returns it with the address it is bound to. It listens until every
/// sender has connected.
pub fn bind_receiver<T: Tuple>(
    addr: SocketAddr,
    secret: &JobSecret,
    senders: usize,
    params: &TcpParams,
) -> Result<(TcpReceiver<T>, SocketAddr), TransportError> {
    let framing = Framing::new::<T>(params)?;
    if !(1..=MAX_SENDERS).contains(&senders) {
        return Err(TransportError::InvalidParameter {
            transport: "tcp",
            parameter: "senders",
            reason: format!("must be between 1 and {MAX_SENDERS}, got {senders}"),
        });
    }
    let listener = listen(addr, params)
        .map_err(|e| TransportError::Setup(format!("listen on {addr}: {e}")))?;
    let local_addr = listener
        .local_addr()
        .map_err(|e| TransportError::Setup(format!("listen on {addr}: {e}")))?;
    let receiver = TcpReceiver {
        listener: Some(listener),
        local_addr,
        handshakes: Vec::new(),
        peers: Vec::with_capacity(senders),
        taken: vec![false; senders],
        secret: secret.clone(),
        framing,
        next: 0,
        refused: 0,
        failure: None,
        _tuples: PhantomData,
    };
    Ok((receiver, local_addr))
}

fn listen(addr: SocketAddr, params: &TcpParams) -> std::io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if let Some(bytes) = params.socket_buffer_bytes {
        // Accepted connections inherit the listener's buffers; set before listen() so the
        // window scale is chosen for them.
        socket.set_recv_buffer_size(bytes)?;
        socket.set_send_buffer_size(bytes)?;
    }
    // A sender retrying this port before it was bound may have left a closed connection to
    // itself in TIME_WAIT on it; that must not keep the receiver from binding.
    socket.set_reuse_address(true)?;
    socket.bind(&SockAddr::from(addr))?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

impl<T> TcpReceiver<T> {
    /// The address the receiver is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Senders connected and admitted so far.
    pub fn connected(&self) -> usize {
        self.peers.len()
    }

    /// Connections refused so far: a wrong secret or hello, a sender index out of range or
    /// already taken, a hello too slow, or too many hellos at once.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Accepts and admits senders until all have connected, for at most `patience` (for a
    /// caller that must know its senders are there before it goes on).
    pub fn wait_for_senders(&mut self, patience: Duration) -> Result<(), TransportError> {
        let deadline = Instant::now() + patience;
        loop {
            self.admit();
            if self.listener.is_none() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(TransportError::Setup(format!(
                    "{} of {} senders connected to {} within {patience:?}",
                    self.peers.len(),
                    self.taken.len(),
                    self.local_addr
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Accepts waiting connections and advances their hellos, admitting the good ones. Stops
    /// listening once every sender is in.
    fn admit(&mut self) {
        let Some(listener) = &self.listener else {
            return;
        };
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    if self.handshakes.len() >= MAX_HANDSHAKES
                        || stream.set_nonblocking(true).is_err()
                    {
                        self.refused += 1;
                        continue;
                    }
                    self.handshakes.push(Handshake {
                        stream,
                        hello: [0; HELLO_LEN],
                        got: 0,
                        since: Instant::now(),
                    });
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // WouldBlock: nobody waiting. Anything else (out of descriptors, a connection
                // reset while queued) is tried again at the next poll.
                Err(_) => break,
            }
        }
        let mut i = 0;
        while i < self.handshakes.len() {
            match self.handshakes[i].advance() {
                Some(true) => {
                    let handshake = self.handshakes.swap_remove(i);
                    let index =
                        self.framing
                            .accepts(&handshake.hello, &self.secret, self.taken.len());
                    match index {
                        Some(index) if !self.taken[index] => {
                            self.taken[index] = true;
                            self.peers.push(Peer::new(handshake.stream, &self.framing));
                        }
                        _ => self.refused += 1,
                    }
                }
                None => {
                    self.handshakes.swap_remove(i);
                    self.refused += 1;
                }
                Some(false) => i += 1,
            }
        }
        if self.peers.len() == self.taken.len() {
            self.listener = None;
            self.refused += self.handshakes.len() as u64;
            self.handshakes.clear();
        }
    }
}

impl Handshake {
    /// Reads more of the hello: `Some(true)` when complete, `Some(false)` while waiting, `None`
    /// when the connection failed or took too long.
    fn advance(&mut self) -> Option<bool> {
        loop {
            match self.stream.read(&mut self.hello[self.got..]) {
                Ok(0) => return None,
                Ok(n) => {
                    self.got += n;
                    if self.got == HELLO_LEN {
                        return Some(true);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    return (self.since.elapsed() < HANDSHAKE_PATIENCE).then_some(false);
                }
                Err(_) => return None,
            }
        }
    }
}

/// What one read gave.
enum Filled {
    Bytes,
    Nothing,
    /// End of file or a reset: the sender is gone.
    Gone,
}

impl Peer {
    fn new(stream: TcpStream, framing: &Framing) -> Self {
        let largest_item = LEN_PREFIX + framing.max_tuple;
        Self {
            stream: Some(stream),
            buffer: vec![0; MIN_READ_BUFFER.max(2 * largest_item)].into_boxed_slice(),
            start: 0,
            end: 0,
            frame_left: 0,
            run_left: 0,
            ended: false,
        }
    }

    /// Decodes what has arrived, reading once if that is not enough for `max` messages.
    /// Returns how many messages it added to `out`, and the sender's failure if it failed.
    fn poll<T: Tuple>(
        &mut self,
        framing: &Framing,
        max: usize,
        out: &mut Vec<Message<T>>,
    ) -> (usize, Option<RecvError>) {
        let mut received = 0;
        for attempt in 0..2 {
            match self.decode(framing, max - received, out) {
                Ok(n) => received += n,
                Err(e) => return (received, Some(e)),
            }
            if attempt == 1 || received == max || self.stream.is_none() {
                break;
            }
            match self.fill() {
                Filled::Bytes => {}
                Filled::Nothing => break,
                Filled::Gone if self.ended && self.start == self.end => {
                    self.stream = None;
                    break;
                }
                Filled::Gone if self.ended => return (received, Some(RecvError::Malformed)),
                Filled::Gone => return (received, Some(RecvError::Disconnected)),
            }
        }
        (received, None)
    }

    /// One non-blocking read into the free end of the buffer, after moving undecoded bytes to
    /// its front if the free end might not hold the next item.
    ///
    /// After a short read the receiver acknowledges at once. Linux delays the acknowledgement
    /// of small segments (up to 40 ms) until two full-sized segments are unacknowledged, while
    /// a sender whose congestion window is a handful of segments (BBR on loopback keeps it
    /// there) waits for that very acknowledgement: a stream of small frames then moves a
    /// congestion window per delayed-ack timeout (measured here: about 450 frames/s, with
    /// hundreds of milliseconds of latency at 1,000 tuples/s). Bulk reads are left alone: their
    /// full-sized segments are acknowledged at once anyway.
    fn fill(&mut self) -> Filled {
        let Some(stream) = self.stream.as_mut() else {
            return Filled::Gone;
        };
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.buffer.len() - self.end < self.buffer.len() / 2 {
            // Undecoded bytes are less than one item (decode stopped for want of bytes), and
            // the buffer holds two of the largest items, so half of it is then free.
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        loop {
            match stream.read(&mut self.buffer[self.end..]) {
                Ok(0) => return Filled::Gone,
                Ok(n) => {
                    self.end += n;
                    if n < QUICKACK_BELOW {
                        acknowledge_now(stream);
                    }
                    return Filled::Bytes;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Filled::Nothing,
                Err(_) => return Filled::Gone,
            }
        }
    }

    /// Decodes up to `max` messages from the received bytes; stops at the first incomplete
    /// item. Every length is checked against the frame and this end's limits first.
    fn decode<T: Tuple>(
        &mut self,
        framing: &Framing,
        max: usize,
        out: &mut Vec<Message<T>>,
    ) -> Result<usize, RecvError> {
        use RecvError::Malformed;
        let mut decoded = 0;
        while decoded < max {
            let available = &self.buffer[self.start..self.end];
            if self.ended {
                // Nothing may follow the end of the stream.
                return if available.is_empty() {
                    Ok(decoded)
                } else {
                    Err(Malformed)
                };
            }
            let taken = if self.run_left > 0 {
                let (prefix, len) = match framing.facade {
                    Some(size) => (0, size),
                    None => {
                        if self.frame_left < LEN_PREFIX {
                            return Err(Malformed);
                        }
                        if available.len() < LEN_PREFIX {
                            break;
                        }
                        let len = get_u32(available, 0) as usize;
                        if len > framing.max_tuple {
                            return Err(Malformed);
                        }
                        (LEN_PREFIX, len)
                    }
                };
                let item = prefix + len;
                if item > self.frame_left {
                    return Err(Malformed);
                }
                if available.len() < item {
                    break;
                }
                let tuple = T::decode(&available[prefix..item]).map_err(|_| Malformed)?;
                out.push(Message::Data(tuple));
                decoded += 1;
                self.run_left -= 1;
                item
            } else if self.frame_left == 0 {
                if available.len() < FRAME_HEADER {
                    break;
                }
                let len = get_u32(available, 0) as usize;
                if len == 0 || len > framing.frame_limit {
                    return Err(Malformed);
                }
                self.frame_left = len + FRAME_HEADER;
                FRAME_HEADER
            } else {
                let Some(&tag) = available.first() else {
                    break;
                };
                match tag {
                    TAG_DATA => {
                        if self.frame_left < RUN_HEADER {
                            return Err(Malformed);
                        }
                        if available.len() < RUN_HEADER {
                            break;
                        }
                        let count = get_u32(available, 1);
                        let least_per_tuple = framing.facade.unwrap_or(LEN_PREFIX);
                        let least = (count as usize).checked_mul(least_per_tuple);
                        if count == 0 || least.is_none_or(|l| l > self.frame_left - RUN_HEADER) {
                            return Err(Malformed);
                        }
                        self.run_left = count;
                        RUN_HEADER
                    }
                    TAG_PUNCTUATION => {
                        if self.frame_left < PUNCTUATION_RECORD {
                            return Err(Malformed);
                        }
                        let Some(wire) = available.get(1..PUNCTUATION_RECORD) else {
                            break;
                        };
                        let punctuation = Punctuation::from_wire(wire).map_err(|_| Malformed)?;
                        out.push(Message::Punctuation(punctuation));
                        decoded += 1;
                        PUNCTUATION_RECORD
                    }
                    TAG_END => {
                        if self.frame_left != 1 {
                            return Err(Malformed);
                        }
                        out.push(Message::EndOfStream);
                        decoded += 1;
                        self.ended = true;
                        1
                    }
                    _ => return Err(Malformed),
                }
            };
            self.start += taken;
            self.frame_left -= taken;
        }
        Ok(decoded)
    }
}

impl<T: Tuple> TupleReceiver<T> for TcpReceiver<T> {
    fn poll(&mut self, max: usize, out: &mut Vec<Message<T>>) -> Result<usize, RecvError> {
        if let Some(failure) = self.failure {
            return Err(failure);
        }
        if self.listener.is_some() {
            self.admit();
        }
        let peers = self.peers.len();
        let mut received = 0;
        for i in 0..peers {
            if received >= max {
                break;
            }
            let peer = &mut self.peers[(self.next + i) % peers];
            let (n, failure) = peer.poll(&self.framing, max - received, out);
            received += n;
            if failure.is_some() {
                self.failure = failure;
                break;
            }
        }
        self.next = (self.next + 1) % peers.max(1);
        match self.failure {
            Some(failure) if received == 0 => Err(failure),
            _ => Ok(received),
        }
    }

    fn park(&mut self, timeout: Duration) -> bool {
        self.park_on_sockets(timeout);
        true
    }
}

impl<T> TcpReceiver<T> {
    /// Sleeps until a sender's bytes (or its end), a connection or a hello arrive, or
    /// `timeout` passes; at once if the edge has failed.
    fn park_on_sockets(&mut self, timeout: Duration) {
        if self.failure.is_some() {
            return;
        }
        let listener = self.listener.iter().map(AsFd::as_fd);
        let hellos = self.handshakes.iter().map(|h| h.stream.as_fd());
        let senders = self.peers.iter().filter_map(|p| p.stream.as_ref());
        let sockets: Vec<BorrowedFd<'_>> = listener
            .chain(hellos)
            .chain(senders.map(AsFd::as_fd))
            .collect();
        if sockets.is_empty() {
            std::thread::sleep(timeout);
        } else {
            wait_until(&sockets, Ready::Readable, timeout);
        }
    }
}

/// Sends the acknowledgement of what was read now rather than after the delayed-ack timeout.
#[cfg(target_os = "linux")]
fn acknowledge_now(stream: &TcpStream) {
    // Best effort: a failure only leaves the kernel's delayed acknowledgement in place.
    let _ = socket2::SockRef::from(stream).set_tcp_quickack(true);
}

/// Other systems keep their own acknowledgement policy.
#[cfg(not(target_os = "linux"))]
fn acknowledge_now(_stream: &TcpStream) {}
