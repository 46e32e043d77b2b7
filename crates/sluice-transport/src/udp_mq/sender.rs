//! The sending end of a `udp-mq` edge: one connected socket per queue, each with a ring of
//! datagrams ([`SendRing`]) that messages are packed into, sent by Algorithm 1: a queue's ring
//! goes to the kernel in one `sendmmsg` when it is full, and every ring when the caller
//! flushes.
//!
//! Per queue, one datagram is open (being filled) at a time; it is closed when the next
//! record does not fit, when the stream ends, or on `flush`. Closing gives it the queue's next
//! sequence number and the count of tuples sent on the queue before it, which is how the
//! receiver counts what was lost.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::marker::PhantomData;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use sluice_types::{Encoding, Message, Tuple};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::params::{QueueChoice, UdpMqParams};
use super::wire::{
    end_payload, job_tag, punctuation_payload, put_record_header, Header, HEADER_LEN,
    RECORD_HEADER, TAG_DATA, TAG_END, TAG_GONE, TAG_PUNCTUATION,
};
use crate::datagram::SendRing;
use crate::tcp::JobSecret;
use crate::{Refused, SendError, TransportError, TupleSender};

/// How many more times a dropped sender sends each queue's last datagram (its end of stream,
/// or the news that it is gone), since UDP may drop any one copy.
pub const END_REPEATS: usize = 3;
/// How many more times a busy sender (one that sent more than [`BUSY_DATAGRAMS`] in
/// [`BUSY_WINDOW`] lately) sends them: the receiver may be far behind, its socket buffers
/// full, and need up to a second (on a loaded machine) to drain them before a copy can get in.
pub const BUSY_END_REPEATS: usize = 10;
/// A sender is busy if it sent more than this many datagrams in one [`BUSY_WINDOW`] (about
/// what a default socket buffer holds), in the last two windows before it is dropped.
pub const BUSY_DATAGRAMS: u64 = 128;
/// The window over which a sender's traffic is counted.
pub const BUSY_WINDOW: Duration = Duration::from_millis(100);
/// The pause before the first repeat; it doubles before each next one, so a receiver whose
/// socket buffer overflowed has time to drain it (1 + 2 + ... + 512 ms for a busy sender).
pub const FIRST_REPEAT_GAP: Duration = Duration::from_millis(1);
/// How long a dropped sender keeps trying to hand datagrams to a socket that would block.
pub const DROP_DRAIN: Duration = Duration::from_secs(1);

/// A function giving a tuple's flow key.
pub type FlowKey<T> = Box<dyn Fn(&T) -> u64 + Send>;

/// The sending end of a `udp-mq` edge.
pub struct UdpMqSender<T> {
    queues: Vec<SendQueue>,
    choice: Choice<T>,
    flow_key_bytes: usize,
    max_tuple: usize,
    /// A tuple's encoding, before its queue is chosen.
    scratch: Vec<u8>,
    /// Punctuations offered so far.
    punctuations: u64,
    state: State,
    /// How long the sender may stay quiet before `flush` sends a heartbeat.
    heartbeat: Option<Duration>,
    last_sent: Instant,
    traffic: Traffic,
    _tuples: PhantomData<fn(T)>,
}

/// How many datagrams a sender sent lately, counted at each flush.
#[derive(Debug, Clone, Copy)]
struct Traffic {
    /// The start of the current window, and the datagrams sent before it.
    since: Instant,
    sent_before: u64,
    /// Datagrams sent in the window before the current one.
    previous: u64,
    /// Datagrams sent as of the last flush.
    seen: u64,
}

impl Traffic {
    fn new(now: Instant) -> Self {
        Self {
            since: now,
            sent_before: 0,
            previous: 0,
            seen: 0,
        }
    }

    /// Counts `sent` datagrams in all as of `now`; returns whether any went since the last
    /// call.
    fn note(&mut self, sent: u64, now: Instant) -> bool {
        let elapsed = now.duration_since(self.since);
        if elapsed >= BUSY_WINDOW {
            // A window with no flush in it counts as quiet.
            self.previous = if elapsed < 2 * BUSY_WINDOW {
                sent - self.sent_before
            } else {
                0
            };
            self.since = now;
            self.sent_before = sent;
        }
        let moved = sent != self.seen;
        self.seen = sent;
        moved
    }

    /// Whether the sender sent more than [`BUSY_DATAGRAMS`] in a window lately, as of `now`
    /// with `sent` datagrams in all.
    fn busy(&self, sent: u64, now: Instant) -> bool {
        let fresh = now.duration_since(self.since) < 2 * BUSY_WINDOW;
        fresh && self.previous.max(sent - self.sent_before) > BUSY_DATAGRAMS
    }
}

/// What every datagram of a sender says about it.
#[derive(Debug, Clone, Copy)]
struct Framing {
    job: u64,
    sender: u32,
    queues: u16,
    datagram_bytes: usize,
}

/// One queue: a socket, its ring, and the datagram being filled.
struct SendQueue {
    index: u16,
    framing: Framing,
    ring: SendRing,
    open: Option<OpenDatagram>,
    next_sequence: u64,
    /// Tuples in the datagrams closed so far.
    tuples: u64,
    /// The queue's last datagram, once it holds the end of the stream or the gone record.
    last: Option<Vec<u8>>,
}

/// The datagram being filled.
#[derive(Debug, Default)]
struct OpenDatagram {
    records: u16,
    tuples: u64,
    /// It holds the end of the stream or the gone record: the queue's last datagram.
    last: bool,
}

enum Choice<T> {
    Random { rng: fastrand::Rng, current: usize },
    FlowHash,
    Key(FlowKey<T>),
}

/// Where a sender is in its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    /// The end of the stream was offered; nothing more may be.
    Ended,
    /// A socket failed (nobody listens at the receiver's address any more).
    Closed,
}

/// Opens sender number `index` of the edge whose receiver is bound at `addr`, for the job of
/// `secret`: one socket per queue, each connected to `addr`. UDP has no handshake: nothing is
/// sent until the first flush, and a receiver that is not there shows only as
/// [`SendError::Closed`] once the kernel has heard so (an ICMP port unreachable).
pub fn connect_sender<T: Tuple>(
    addr: SocketAddr,
    secret: &JobSecret,
    index: u32,
    params: &UdpMqParams,
) -> Result<UdpMqSender<T>, TransportError> {
    params.validate()?;
    let framing = Framing {
        job: job_tag(secret),
        sender: index,
        // At most MAX_QUEUES (64), checked above.
        queues: params.queues as u16,
        datagram_bytes: params.datagram_bytes,
    };
    let queues = (0..framing.queues)
        .map(|queue| {
            let socket = open_socket(addr, params)
                .map_err(|e| TransportError::Setup(format!("connect to {addr}: {e}")))?;
            Ok(SendQueue {
                index: queue,
                framing,
                ring: SendRing::new(socket, params.batch, params.datagram_bytes),
                open: None,
                next_sequence: 0,
                tuples: 0,
                last: None,
            })
        })
        .collect::<Result<Vec<_>, TransportError>>()?;
    let choice = match params.queue_choice {
        QueueChoice::Random => Choice::Random {
            rng: fastrand::Rng::new(),
            current: 0,
        },
        QueueChoice::FlowHash => Choice::FlowHash,
    };
    Ok(UdpMqSender {
        queues,
        choice,
        flow_key_bytes: params.flow_key_bytes,
        max_tuple: params.max_tuple_bytes(),
        scratch: Vec::new(),
        punctuations: 0,
        state: State::Open,
        heartbeat: params.idle_limit().map(|limit| limit / 4),
        last_sent: Instant::now(),
        traffic: Traffic::new(Instant::now()),
        _tuples: PhantomData,
    })
}

fn open_socket(addr: SocketAddr, params: &UdpMqParams) -> std::io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if let Some(bytes) = params.socket_buffer_bytes {
        socket.set_send_buffer_size(bytes)?;
    }
    socket.connect(&SockAddr::from(addr))?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// The queue of a flow key.
fn queue_of(key: impl Hash, queues: usize) -> usize {
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    (hasher.finish() % queues as u64) as usize
}

impl SendQueue {
    /// The open datagram's length.
    fn open_len(&mut self) -> usize {
        match (&self.open, self.ring.filling()) {
            (Some(_), Some(slot)) => slot.len(),
            _ => 0,
        }
    }

    /// Whether the open datagram takes a record of `payload` bytes.
    fn fits(&mut self, payload: usize) -> bool {
        let len = self.open_len();
        self.open
            .as_ref()
            .is_some_and(|open| open.records < u16::MAX)
            && len + RECORD_HEADER + payload <= self.framing.datagram_bytes
    }

    /// Makes the open datagram able to take a record of `payload` bytes: a datagram that
    /// cannot is closed and another opened, after a send if the ring is full. `Full` when the
    /// ring is full and the socket takes nothing.
    fn make_room(&mut self, payload: usize) -> Result<(), SendError> {
        if self.fits(payload) {
            return Ok(());
        }
        self.close()?;
        if self.ring.free() == 0 {
            self.send()?;
        }
        let Some(slot) = self.ring.filling() else {
            return Err(SendError::Full);
        };
        slot.clear();
        slot.resize(HEADER_LEN, 0);
        self.open = Some(OpenDatagram::default());
        Ok(())
    }

    /// Appends a record to the open datagram, which [`SendQueue::make_room`] made ready.
    fn push(&mut self, tag: u8, payload: &[u8]) {
        let (Some(open), Some(slot)) = (self.open.as_mut(), self.ring.filling()) else {
            return;
        };
        // Payloads are at most a datagram (65,507 bytes), checked by the caller.
        put_record_header(slot, tag, payload.len() as u16);
        slot.extend_from_slice(payload);
        open.records += 1;
        match tag {
            TAG_DATA => open.tuples += 1,
            TAG_END | TAG_GONE => open.last = true,
            _ => {}
        }
    }

    /// Closes the open datagram, if any, giving it its header; a ring left full goes to the
    /// kernel (Algorithm 1, lines 18-21).
    fn close(&mut self) -> Result<(), SendError> {
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        let framing = self.framing;
        let Some(slot) = self.ring.filling() else {
            return Ok(());
        };
        Header {
            queue: self.index,
            queues: framing.queues,
            count: open.records,
            sender: framing.sender,
            job: framing.job,
            sequence: self.next_sequence,
            first_tuple: self.tuples,
        }
        .write(slot);
        if open.last {
            self.last = Some(slot.clone());
        }
        self.next_sequence += 1;
        self.tuples += open.tuples;
        self.ring.close();
        if self.ring.free() == 0 {
            self.send()?;
        }
        Ok(())
    }

    /// Closes the open datagram if it holds anything.
    fn close_if_filled(&mut self) -> Result<(), SendError> {
        if self.open.as_ref().is_some_and(|open| open.records > 0) {
            self.close()?;
        }
        Ok(())
    }

    /// Hands the closed datagrams to the kernel.
    fn send(&mut self) -> Result<(), SendError> {
        self.ring.send().map(|_| ()).map_err(|_| SendError::Closed)
    }

    /// Tuples of `size` bytes the queue takes before it could refuse one.
    fn room(&mut self, size: usize) -> usize {
        let per_record = RECORD_HEADER + size;
        let per_datagram =
            ((self.framing.datagram_bytes - HEADER_LEN) / per_record).min(usize::from(u16::MAX));
        let len = self.open_len();
        let (in_open, open_slots) = match &self.open {
            Some(open) => (
                ((self.framing.datagram_bytes - len) / per_record)
                    .min(usize::from(u16::MAX - open.records)),
                1,
            ),
            None => (0, 0),
        };
        in_open + self.ring.free().saturating_sub(open_slots) * per_datagram
    }
}

impl<T> UdpMqSender<T> {
    /// Chooses queues by `key` instead of the parameters' choice: tuples with the same key
    /// keep their order.
    pub fn with_flow_key(mut self, key: impl Fn(&T) -> u64 + Send + 'static) -> Self {
        self.choice = Choice::Key(Box::new(key));
        self
    }

    /// Datagrams the kernel took so far.
    pub fn datagrams_sent(&self) -> u64 {
        self.queues.iter().map(|q| q.ring.datagrams_sent()).sum()
    }

    /// `sendmmsg` calls made so far.
    pub fn system_calls(&self) -> u64 {
        self.queues.iter().map(|q| q.ring.system_calls()).sum()
    }

    /// Turns a failed socket into a closed sender.
    fn check<R>(&mut self, result: Result<R, SendError>) -> Result<R, SendError> {
        if result.as_ref().err() == Some(&SendError::Closed) {
            self.state = State::Closed;
        }
        result
    }

    fn admit(&self) -> Result<(), SendError> {
        match self.state {
            State::Open => Ok(()),
            State::Ended | State::Closed => Err(SendError::Closed),
        }
    }

    /// Appends `tag` with `payload` to every queue: room is made on all before anything is
    /// appended, so a refusal appends nothing.
    fn broadcast(&mut self, tag: u8, payload: &[u8]) -> Result<(), SendError> {
        self.admit()?;
        for q in 0..self.queues.len() {
            let made = self.queues[q].make_room(payload.len());
            self.check(made)?;
        }
        for queue in &mut self.queues {
            queue.push(tag, payload);
        }
        Ok(())
    }

    /// Closes every filled datagram and hands every ring to the kernel.
    fn send_all(&mut self) -> Result<(), SendError> {
        for queue in &mut self.queues {
            queue.close_if_filled()?;
            if queue.ring.closed() > 0 {
                queue.send()?;
            }
        }
        Ok(())
    }

    /// Sends an empty datagram on queue 0, so the receiver knows the sender is alive.
    fn heartbeat(&mut self) -> Result<(), SendError> {
        let queue = &mut self.queues[0];
        queue.close()?;
        queue.make_room(0)?;
        queue.close()?;
        queue.send()
    }
}

impl<T: Tuple> UdpMqSender<T> {
    /// Encodes `tuple` into the scratch buffer and picks its queue.
    fn encode(&mut self, tuple: &T) -> Result<usize, SendError> {
        self.scratch.clear();
        if tuple.encode(&mut self.scratch).is_err() {
            return Err(SendError::Unencodable {
                type_name: std::any::type_name::<T>(),
            });
        }
        let len = self.scratch.len();
        if len > self.max_tuple {
            return Err(SendError::TooLarge {
                tuple: len,
                slot: self.max_tuple,
            });
        }
        let queues = self.queues.len();
        Ok(match &mut self.choice {
            Choice::Random { rng, current } => {
                if !self.queues[*current].fits(len) {
                    self.queues[*current].close()?;
                    *current = rng.usize(..queues);
                }
                *current
            }
            Choice::FlowHash => {
                let key_len = match self.flow_key_bytes {
                    0 => len,
                    bytes => bytes.min(len),
                };
                queue_of(&self.scratch[..key_len], queues)
            }
            Choice::Key(key) => queue_of(key(tuple), queues),
        })
    }

    fn offer_data(&mut self, tuple: &T) -> Result<(), SendError> {
        self.admit()?;
        let chosen = self.encode(tuple);
        let queue = self.check(chosen)?;
        let len = self.scratch.len();
        let made = match self.queues[queue].make_room(len) {
            // A random queue is as good as another: try the others (Algorithm 1, line 8).
            Err(SendError::Full) if matches!(self.choice, Choice::Random { .. }) => {
                self.other_queue(queue, len)
            }
            made => made.map(|()| queue),
        };
        let queue = self.check(made)?;
        self.queues[queue].push(TAG_DATA, &self.scratch);
        Ok(())
    }

    /// A queue other than `full` with room for `len` bytes, which becomes the current one.
    fn other_queue(&mut self, full: usize, len: usize) -> Result<usize, SendError> {
        let queues = self.queues.len();
        for step in 1..queues {
            let queue = (full + step) % queues;
            match self.queues[queue].make_room(len) {
                Ok(()) => {
                    if let Choice::Random { current, .. } = &mut self.choice {
                        *current = queue;
                    }
                    return Ok(queue);
                }
                Err(SendError::Full) => {}
                Err(e) => return Err(e),
            }
        }
        Err(SendError::Full)
    }
}

impl<T: Tuple> TupleSender<T> for UdpMqSender<T> {
    fn offer(&mut self, message: Message<T>) -> Result<(), Refused<T>> {
        let result = match &message {
            Message::Data(tuple) => self.offer_data(tuple),
            Message::Punctuation(punctuation) => {
                let payload = punctuation_payload(self.punctuations, *punctuation);
                let sent = self.broadcast(TAG_PUNCTUATION, &payload);
                if sent.is_ok() {
                    self.punctuations += 1;
                }
                sent
            }
            Message::EndOfStream => {
                let sent = self.broadcast(TAG_END, &end_payload(self.punctuations));
                if sent.is_ok() {
                    self.state = State::Ended;
                }
                sent
            }
        };
        result.map_err(|error| Refused { error, message })
    }

    fn offer_copy(&mut self, tuple: &T) -> Result<(), SendError> {
        self.offer_data(tuple)
    }

    fn flush(&mut self) {
        if self.state == State::Closed {
            return;
        }
        let sent = self.send_all();
        if self.check(sent).is_err() {
            return;
        }
        let now = Instant::now();
        let moved = self.traffic.note(self.datagrams_sent(), now);
        let Some(period) = self.heartbeat else {
            return;
        };
        if moved {
            self.last_sent = now;
        } else if self.state == State::Open && now.duration_since(self.last_sent) >= period {
            let beat = self.heartbeat();
            if self.check(beat).is_ok() {
                self.last_sent = now;
            }
        }
    }

    fn room(&mut self) -> usize {
        let Encoding::Facade { size } = T::ENCODING else {
            return 0;
        };
        if self.state != State::Open || size > self.max_tuple {
            return 0;
        }
        self.queues
            .iter_mut()
            .map(|queue| queue.room(size))
            .min()
            .unwrap_or(0)
    }

    fn pending(&self) -> bool {
        self.state != State::Closed && self.queues.iter().any(|q| q.ring.closed() > 0)
    }
}

impl<T> Drop for UdpMqSender<T> {
    /// Sends what the sender holds, then each queue's last datagram [`END_REPEATS`] more
    /// times ([`BUSY_END_REPEATS`] for a busy sender): the end of the stream, or the gone
    /// record for a sender dropped without one.
    fn drop(&mut self) {
        if self.state == State::Closed {
            return;
        }
        let deadline = Instant::now() + DROP_DRAIN;
        while self.state == State::Open && Instant::now() < deadline {
            match self.broadcast(TAG_GONE, &[]) {
                Ok(()) => self.state = State::Ended,
                Err(SendError::Full) => std::thread::sleep(FIRST_REPEAT_GAP / 10),
                Err(_) => return,
            }
        }
        loop {
            if self.send_all().is_err() {
                return;
            }
            let held = self.queues.iter().any(|q| q.ring.closed() > 0);
            if !held || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(FIRST_REPEAT_GAP / 10);
        }
        let repeats = if self.traffic.busy(self.datagrams_sent(), Instant::now()) {
            BUSY_END_REPEATS
        } else {
            END_REPEATS
        };
        let mut gap = FIRST_REPEAT_GAP;
        for _ in 0..repeats {
            std::thread::sleep(gap);
            gap *= 2;
            for queue in &self.queues {
                if let Some(last) = &queue.last {
                    // Best effort: a receiver already gone refuses, and that is fine.
                    let _ = queue.ring.socket().send(last);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sender_is_busy_only_while_it_sends_much() {
        let start = Instant::now();
        let mut traffic = Traffic::new(start);
        assert!(traffic.note(10, start));
        assert!(!traffic.note(10, start), "nothing went since");
        assert!(!traffic.busy(10, start));
        assert!(
            traffic.busy(BUSY_DATAGRAMS + 1, start),
            "many in this window"
        );
        let later = start + BUSY_WINDOW;
        traffic.note(500, later);
        assert!(traffic.busy(500, later), "many in the window before");
        assert!(!traffic.busy(500, later + 2 * BUSY_WINDOW), "quiet since");
        let much_later = later + 3 * BUSY_WINDOW;
        traffic.note(501, much_later);
        assert!(
            !traffic.busy(501, much_later),
            "a window without flushes is quiet"
        );
    }

    #[test]
    fn a_flow_always_takes_the_same_queue_and_keys_spread() {
        let mut seen = [0usize; 4];
        for key in 0..1000u64 {
            let q = queue_of(key, 4);
            assert_eq!(q, queue_of(key, 4));
            seen[q] += 1;
        }
        assert!(seen.iter().all(|&n| n > 150), "{seen:?}");
    }
}
