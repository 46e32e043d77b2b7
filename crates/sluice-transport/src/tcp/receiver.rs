//! The receiving end of a `tcp` edge: a non-blocking listener that admits the job's senders
//! ([`super::admission`]), and per sender a [`FrameReader`] that non-blocking reads fill and
//! that decodes what they bring.
//!
//! Admission holds from the moment the listener exists: until the receiver is first used (its
//! process may take long to start the thread that polls it, while the rest of the job starts),
//! a thread of its own accepts and judges connections, so that strangers connecting meanwhile
//! are timed out, pushed out and warned of, and never fill the listen backlog that the job's
//! senders need. The receiver takes its listener back at its first use.
//!
//! Nothing here blocks: `poll` accepts whoever is waiting, advances their hellos, reads at
//! most once per sender and decodes what is complete. A peer can make `poll` return
//! [`RecvError::Misbehaved`], naming it and what it sent, but never read, write or allocate
//! outside what this end sized from its own parameters.

use std::io::{ErrorKind, Read};
use std::marker::PhantomData;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sluice_types::{Message, Tuple};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::admission::{Admission, Greeted, Refusal};
use super::frames::{FrameFault, FrameReader};
use super::params::TcpParams;
use super::readiness::{wait_until, Ready};
use super::secret::JobSecret;
use super::wire::Framing;
use crate::{RecvError, TransportError, TupleReceiver};

/// The most senders one receiver accepts.
pub const MAX_SENDERS: usize = 1024;
/// The listener's backlog.
const BACKLOG: i32 = 128;
/// A read shorter than this acknowledges at once (`TCP_QUICKACK`; see [`Peer::fill`]).
const QUICKACK_BELOW: usize = 64 << 10;

/// How long the early admission thread sleeps at most between two looks at its listener
/// (a connection, a hello's bytes or the receiver's first use wake it sooner): the bound on
/// how late it times out a hello.
const EARLY_ADMISSION_PERIOD: Duration = Duration::from_millis(100);

/// The receiving end of a `tcp` edge with one or several senders.
pub struct TcpReceiver<T> {
    local_addr: SocketAddr,
    door: Door,
    peers: Vec<Peer>,
    /// How many senders it takes.
    senders: usize,
    framing: Framing,
    /// The sender polled first next time, so no sender starves the others.
    next: usize,
    failure: Option<RecvError>,
    _tuples: PhantomData<fn() -> T>,
}

/// What one sender's connection has given so far.
struct Peer {
    /// `None` once the sender closed after its end of stream.
    stream: Option<TcpStream>,
    /// Its address, for the error that names it.
    addr: SocketAddr,
    frames: FrameReader,
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
    let entrance = Entrance {
        listener: Some(listener),
        admission: Admission::new(local_addr),
        taken: vec![false; senders],
        secret: secret.clone(),
        framing,
        admitted: Vec::new(),
    };
    let door = Door::early(entrance)
        .map_err(|e| TransportError::Setup(format!("admit senders on {local_addr}: {e}")))?;
    let receiver = TcpReceiver {
        local_addr,
        door,
        peers: Vec::with_capacity(senders),
        senders,
        framing,
        next: 0,
        failure: None,
        _tuples: PhantomData,
    };
    Ok((receiver, local_addr))
}

/// The receiver's listener and the senders it admits: the connections waiting for their
/// hello, the sender indices taken, and the senders admitted and not yet taken in.
struct Entrance {
    /// `None` once every sender is in.
    listener: Option<TcpListener>,
    admission: Admission,
    taken: Vec<bool>,
    secret: JobSecret,
    framing: Framing,
    admitted: Vec<(TcpStream, SocketAddr)>,
}

impl Entrance {
    /// Accepts waiting connections and advances their hellos, admitting the good ones.
    fn admit(&mut self) {
        let Some(listener) = &self.listener else {
            return;
        };
        for Greeted {
            stream,
            peer,
            hello,
        } in self.admission.poll(listener)
        {
            match self.framing.accepts(&hello, &self.secret, self.taken.len()) {
                Ok(index) if !self.taken[index] => {
                    self.taken[index] = true;
                    self.admitted.push((stream, peer));
                }
                Ok(index) => self.admission.refuse(peer, &Refusal::Taken(index)),
                Err(fault) => self.admission.refuse(peer, &Refusal::hello(fault, &hello)),
            }
        }
    }

    /// Whether every sender is in.
    fn complete(&self) -> bool {
        self.taken.iter().all(|&taken| taken)
    }

    /// Stops listening: every sender is in.
    fn close(&mut self) {
        self.listener = None;
        self.admission.close();
    }

    /// The listener and the connections waiting for their hello, to wake up on.
    fn sockets(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.listener
            .iter()
            .map(AsFd::as_fd)
            .chain(self.admission.sockets())
    }
}

/// Who admits the receiver's senders.
enum Door {
    /// A thread of its own, until the receiver is first used; the receiver's end of a socket
    /// pair whose closing ends that thread, which then hands the entrance back.
    Early {
        thread: JoinHandle<Entrance>,
        wake: UnixStream,
    },
    /// The receiver itself, when it polls.
    Here(Box<Entrance>),
    /// Nobody: the early thread panicked (admission does not), taking the listener with it.
    Lost,
}

impl Door {
    /// Starts admitting at `entrance` on a thread of its own.
    fn early(mut entrance: Entrance) -> std::io::Result<Self> {
        let (wake, woken) = UnixStream::pair()?;
        woken.set_nonblocking(true)?;
        let thread = std::thread::Builder::new()
            .name("tcp-admission".into())
            .spawn(move || {
                // Once every sender is in, the listener stays open until the receiver's first
                // use closes it, as it would have without this thread: a connection that
                // comes meanwhile is refused then, not turned away by a closed port.
                while !entrance.complete() {
                    entrance.admit();
                    let sockets: Vec<BorrowedFd<'_>> = entrance
                        .sockets()
                        .chain(std::iter::once(woken.as_fd()))
                        .collect();
                    wait_until(&sockets, Ready::Readable, EARLY_ADMISSION_PERIOD);
                    let wanted_back = !matches!(
                        (&woken).read(&mut [0]),
                        Err(e) if e.kind() == ErrorKind::WouldBlock
                    );
                    if wanted_back {
                        break;
                    }
                }
                entrance
            })?;
        Ok(Self::Early { thread, wake })
    }

    /// The entrance, taken back from the early thread at the receiver's first use.
    fn entrance(&mut self) -> Option<&mut Entrance> {
        if matches!(self, Self::Early { .. }) {
            if let Self::Early { thread, wake } = std::mem::replace(self, Self::Lost) {
                // Its closing wakes the thread, which returns the entrance.
                drop(wake);
                if let Ok(entrance) = thread.join() {
                    *self = Self::Here(Box::new(entrance));
                }
            }
        }
        match self {
            Self::Here(entrance) => Some(entrance),
            Self::Early { .. } | Self::Lost => None,
        }
    }
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
    pub fn connected(&mut self) -> usize {
        self.admit();
        self.peers.len()
    }

    /// Connections refused so far (each also named in a warning on standard error, up to
    /// the limits in [`crate::tcp`]): a wrong secret or hello, a sender index out of range or
    /// already taken, a hello too slow, or pushed out by too many hellos at once.
    pub fn refused(&mut self) -> u64 {
        self.door
            .entrance()
            .map_or(0, |entrance| entrance.admission.refused())
    }

    /// Accepts and admits senders until all have connected, for at most `patience` (for a
    /// caller that must know its senders are there before it goes on).
    pub fn wait_for_senders(&mut self, patience: Duration) -> Result<(), TransportError> {
        let deadline = Instant::now() + patience;
        loop {
            if !self.admit() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(TransportError::Setup(format!(
                    "{} of {} senders connected to {} within {patience:?}",
                    self.peers.len(),
                    self.senders,
                    self.local_addr
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Admits the senders waiting (taking the entrance back from the early thread); whether
    /// some are still to come.
    fn admit(&mut self) -> bool {
        let Some(entrance) = self.door.entrance() else {
            return false;
        };
        entrance.admit();
        for (stream, peer) in entrance.admitted.drain(..) {
            self.peers.push(Peer::new(stream, peer, &self.framing));
        }
        if entrance.complete() && entrance.listener.is_some() {
            entrance.close();
        }
        entrance.listener.is_some()
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
    fn new(stream: TcpStream, addr: SocketAddr, framing: &Framing) -> Self {
        Self {
            stream: Some(stream),
            addr,
            frames: FrameReader::new(framing),
        }
    }

    /// The failure of an edge whose sender sent `fault`.
    fn misbehaved(&self, fault: FrameFault) -> RecvError {
        RecvError::Misbehaved {
            peer: self.addr,
            what: fault.to_string(),
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
            match self.frames.decode(framing, max - received, out) {
                Ok(n) => received += n,
                Err(fault) => return (received, Some(self.misbehaved(fault))),
            }
            if attempt == 1 || received == max || self.stream.is_none() {
                break;
            }
            match self.fill() {
                Filled::Bytes => {}
                Filled::Nothing => break,
                Filled::Gone if self.frames.ended() && self.frames.drained() => {
                    self.stream = None;
                    break;
                }
                Filled::Gone if self.frames.ended() => {
                    return (received, Some(self.misbehaved(FrameFault::AfterEnd)))
                }
                Filled::Gone => return (received, Some(RecvError::Disconnected)),
            }
        }
        (received, None)
    }

    /// One non-blocking read into the free end of the buffer.
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
        loop {
            match stream.read(self.frames.free()) {
                Ok(0) => return Filled::Gone,
                Ok(n) => {
                    self.frames.filled(n);
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
}

impl<T: Tuple> TupleReceiver<T> for TcpReceiver<T> {
    fn poll(&mut self, max: usize, out: &mut Vec<Message<T>>) -> Result<usize, RecvError> {
        if let Some(failure) = &self.failure {
            return Err(failure.clone());
        }
        if self.peers.len() < self.senders {
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
        match &self.failure {
            Some(failure) if received == 0 => Err(failure.clone()),
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
        let entrance = match &self.door {
            Door::Here(entrance) => Some(&**entrance),
            Door::Early { .. } | Door::Lost => None,
        };
        let senders = self.peers.iter().filter_map(|p| p.stream.as_ref());
        let sockets: Vec<BorrowedFd<'_>> = entrance
            .into_iter()
            .flat_map(Entrance::sockets)
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
