//! How tuples move along an edge that is not a direct function call.
//!
//! Every transport is a pair of endpoints implementing [`TupleSender`] and [`TupleReceiver`]
//! for a tuple type `T`. The runtime never names a transport: it asks the registry
//! ([`StreamType::connect`]) for a pair of type-erased endpoints ([`ErasedSender`],
//! [`ErasedReceiver`]) for the edge's [`StreamType`], so adding a transport touches this crate
//! only (the Vega paper's point: a transport is a sender and a receiver operator, nothing more).
//!
//! Transports so far: the *threaded port* ([`threaded`]), a bounded in-process queue between
//! two threads; `shm-vega` ([`shm_vega`]), a Vega ring in a shared segment, between
//! processes or threads; `shm-osr` ([`shm_osr`]), an OSR ring in a shared segment, from many
//! senders (processes or threads) into one receiver; `tcp` ([`tcp`]), batched frames over
//! TCP, between processes or hosts; `udp-mq` ([`udp_mq`]), datagrams over several UDP
//! sockets standing in for a NIC's queues, sent and received in batches ([`datagram`]), at
//! most once with every loss counted; and `mpi` ([`mpi`], Cargo feature `mpi`), batches as
//! MPI messages between the ranks of an `mpirun` job. The fused "transport" is a direct call and lives in the
//! runtime.
//!
//! The threaded port and `shm-vega` can park: an idle receiver sleeps on its queue's doorbell
//! until the sender publishes, and a sender refused with `Full` until the receiver frees room
//! ([`TupleReceiver::park`], [`TupleSender::park`]); the others keep the default, which
//! declines, and their callers sleep instead.
// Without MPI nothing here is unsafe; with it, one module (`mpi::request`) is, and argues it.
#![cfg_attr(not(feature = "mpi"), forbid(unsafe_code))]
#![cfg_attr(feature = "mpi", deny(unsafe_code))]

pub mod datagram;
mod erased;
#[cfg(any(test, fuzzing))]
pub mod fuzzing;
pub mod mpi;
pub mod parts;
mod registry;
pub mod shm_osr;
pub mod shm_vega;
pub mod tcp;
pub mod threaded;
pub mod udp_mq;
mod wire_fields;

pub use erased::{Delivery, ErasedPair, ErasedReceiver, ErasedSender, StreamType, TupleLog};
pub use parts::MAX_TUPLE_BYTES;
pub use registry::{
    BoundReceiver, ChannelSite, Rendezvous, TransportError, TransportKind, TransportSpec,
    TypedPair, DEFAULT_QUEUE_CAPACITY, MAX_QUEUE_CAPACITY,
};

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::time::Duration;

use sluice_types::{Message, Punctuation};
use thiserror::Error;

/// Why a message could not be sent now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SendError {
    /// No room now: the receiver is behind (backpressure); retry later.
    #[error("the transport is full")]
    Full,
    /// The receiver is gone; nothing sent will be read.
    #[error("the receiving end is closed")]
    Closed,
    /// The tuple does not fit the transport's slot.
    #[error("a tuple of {tuple} bytes does not fit a slot of {slot} bytes")]
    TooLarge {
        /// The encoded tuple size in bytes.
        tuple: usize,
        /// The transport's slot size in bytes.
        slot: usize,
    },
    /// The tuple's codec could not encode it (a normal tuple serde cannot express).
    #[error("a tuple of {type_name} cannot be encoded")]
    Unencodable {
        /// The tuple type.
        type_name: &'static str,
    },
    /// The runtime offered a tuple of another type than the stream carries (a bug in an
    /// erased caller, never in user input: ports are type-checked when the graph is built).
    #[error("the stream carries {expected}, a tuple of another type was offered")]
    TypeMismatch {
        /// The stream's tuple type.
        expected: &'static str,
    },
}

/// Why a receiver could not be polled.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecvError {
    /// The sender vanished without sending end-of-stream: it crashed or was torn down.
    #[error("the sending end went away without ending its stream")]
    Disconnected,
    /// What arrived is not a message this transport sends: the peer is broken or hostile.
    #[error("a malformed message arrived; the edge is poisoned")]
    Malformed,
    /// A network peer that had proved it belongs to the job sent what its transport never
    /// sends: the peer is broken or hostile, and it is named.
    #[error("the sender at {peer} sent {what}; the edge is poisoned")]
    Misbehaved {
        /// The peer's address.
        peer: std::net::SocketAddr,
        /// What it sent, and the limit or rule it broke.
        what: String,
    },
}

/// A message that was not sent, handed back with the reason.
#[derive(Debug)]
pub struct Refused<T> {
    /// Why it was refused.
    pub error: SendError,
    /// The message, to retry or drop.
    pub message: Message<T>,
}

/// The sending end of one edge.
pub trait TupleSender<T>: Send {
    /// Queues `message`; it may stay invisible to the receiver until [`TupleSender::flush`].
    fn offer(&mut self, message: Message<T>) -> Result<(), Refused<T>>;

    /// Queues a copy of `tuple` as a data message, leaving `tuple` with the caller (a
    /// broadcast offers one tuple to many edges); on a refusal nothing was taken. Transports
    /// that encode write straight from the reference, with no clone; the default clones and
    /// offers.
    fn offer_copy(&mut self, tuple: &T) -> Result<(), SendError>
    where
        T: Clone,
    {
        self.offer(Message::Data(tuple.clone()))
            .map_err(|refused| refused.error)
    }

    /// Queues the tuples of `tuples` as data messages, from the front, in order, until one is
    /// refused: `Ok` when every one went, else the refusal's error with the rest left in
    /// `tuples`. The default offers them one at a time; a transport that can take a run of
    /// them at once (the threaded port) does, and may leave another, empty, buffer in `tuples`
    /// for the caller to fill next.
    fn offer_tuples(&mut self, tuples: &mut VecDeque<T>) -> Result<(), SendError> {
        while let Some(tuple) = tuples.pop_front() {
            if let Err(refused) = self.offer(Message::Data(tuple)) {
                if let Message::Data(tuple) = refused.message {
                    tuples.push_front(tuple);
                }
                return Err(refused.error);
            }
        }
        Ok(())
    }

    /// Makes every offered message visible to the receiver.
    fn flush(&mut self);

    /// How many messages [`TupleSender::offer`] is sure to accept now (0 if unknown): a
    /// promise, not a guess, so a batch of that many can be moved without refusal.
    fn room(&mut self) -> usize {
        0
    }

    /// Whether the last [`TupleSender::flush`] left offered messages undelivered (a batching
    /// transport holding a young batch back, or a receiver that is behind): the caller must
    /// flush again later, even with nothing new to offer. Transports whose flush always
    /// delivers everything keep the default, `false`.
    fn pending(&self) -> bool {
        false
    }

    /// Flushes, then sleeps until the receiver makes room or leaves, or `timeout` passes (or
    /// spuriously earlier): what a sender refused with `Full` does under the `park` idle
    /// strategy. Returns false at once if this transport has no doorbell to park on (the
    /// caller then sleeps instead).
    fn park(&mut self, timeout: Duration) -> bool {
        let _ = timeout;
        false
    }
}

/// What a receiver can tell of its edge while it runs (for live metrics): each field is what
/// this transport knows, `None` where it knows nothing. Reading them is cheap but not free
/// (a load of the sender's position): callers read them a few times a second, not per poll.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Messages (or, for `shm-osr`, bytes) waiting in the queue or ring, and how many it
    /// holds at most.
    pub queued: Option<(u64, u64)>,
    /// Whether `queued` counts bytes rather than messages.
    pub queued_in_bytes: bool,
    /// Bytes received so far, where the transport sees them (framing included).
    pub bytes: Option<u64>,
    /// Tuples lost on the way: unfinished records of gone senders skipped by the `shm-osr`
    /// window, datagrams that never arrived on `udp-mq`.
    pub lost: u64,
}

/// What [`TupleReceiver::poll_runs`] hands over, in stream order.
pub enum Arrival<'a, T> {
    /// Consecutive tuples.
    Tuples(&'a Vec<T>),
    /// A punctuation, with its value.
    Punctuation(Punctuation),
    /// The end of this edge's stream.
    EndOfStream,
}

/// The tuples of consecutive data messages gathered into one run: how the messages a
/// receiver takes one by one are handed over as runs ([`TupleReceiver::poll_runs`]). The
/// caller keeps it between polls, so its buffers are reused rather than allocated per poll.
pub struct Runs<T> {
    messages: Vec<Message<T>>,
    run: Vec<T>,
}

impl<T> Default for Runs<T> {
    fn default() -> Self {
        Self {
            messages: Vec::new(),
            run: Vec::new(),
        }
    }
}

impl<T> Runs<T> {
    /// Hands `message` on in order: a tuple joins the current run; anything else hands over
    /// the run first, then itself.
    pub fn push(
        &mut self,
        message: Message<T>,
        deliver: &mut dyn FnMut(Arrival<'_, T>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let other = match message {
            Message::Data(tuple) => {
                self.run.push(tuple);
                return ControlFlow::Continue(());
            }
            Message::Punctuation(punctuation) => Arrival::Punctuation(punctuation),
            Message::EndOfStream => Arrival::EndOfStream,
        };
        self.finish(deliver)?;
        deliver(other)
    }

    /// Hands over the current run, if it holds any tuple, and empties it.
    pub fn finish(
        &mut self,
        deliver: &mut dyn FnMut(Arrival<'_, T>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if self.run.is_empty() {
            return ControlFlow::Continue(());
        }
        let flow = deliver(Arrival::Tuples(&self.run));
        self.run.clear();
        flow
    }

    /// Ends a poll whose deliveries went as `flow` says: hands over the current run if they
    /// continue; drops it if one broke (what was received and not handed over is dropped).
    pub fn end(
        &mut self,
        flow: ControlFlow<()>,
        deliver: &mut dyn FnMut(Arrival<'_, T>) -> ControlFlow<()>,
    ) {
        if flow.is_continue() {
            let _ = self.finish(deliver);
        }
        self.run.clear();
    }
}

/// The receiving end of one edge.
pub trait TupleReceiver<T>: Send {
    /// Moves up to `max` messages, in order, into `out`; returns how many. `Ok(0)` means none
    /// now. After `EndOfStream` nothing more arrives. A transport that moves runs of tuples
    /// whole (the threaded port) moves at least its first run, however long.
    fn poll(&mut self, max: usize, out: &mut Vec<Message<T>>) -> Result<usize, RecvError>;

    /// Receives up to `max` messages, as [`TupleReceiver::poll`] counts them, and hands them
    /// to `deliver` in order, consecutive tuples as runs; stops early if `deliver` breaks
    /// (dropping what was received and not handed over). Returns how many messages were
    /// received. The default polls into the buffers of `runs` and gathers the tuples there; a
    /// transport that carries runs whole (the threaded port) hands each over as it came.
    fn poll_runs(
        &mut self,
        max: usize,
        runs: &mut Runs<T>,
        deliver: &mut dyn FnMut(Arrival<'_, T>) -> ControlFlow<()>,
    ) -> Result<usize, RecvError> {
        let mut messages = std::mem::take(&mut runs.messages);
        messages.clear();
        let polled = self.poll(max, &mut messages);
        let mut flow = ControlFlow::Continue(());
        for message in messages.drain(..) {
            flow = runs.push(message, deliver);
            if flow.is_break() {
                break;
            }
        }
        runs.end(flow, deliver);
        runs.messages = messages;
        polled
    }

    /// Whether a poll may find something now: false only if the sender has certainly
    /// published nothing this end has not taken and has not left. A cheap look (a load or
    /// two) for a polling worker choosing which of its tasks to step; by default true, which
    /// costs only that the receiving task is stepped on every turn.
    fn may_have_input(&mut self) -> bool {
        true
    }

    /// Sleeps until the sender publishes or leaves, or `timeout` passes (or spuriously
    /// earlier): what an idle receiver does under the `park` idle strategy. Returns false at
    /// once if this transport has no doorbell to park on (the caller then sleeps instead).
    fn park(&mut self, timeout: Duration) -> bool {
        let _ = timeout;
        false
    }

    /// What it can tell of its edge now ([`ReceiverStats`]); by default nothing.
    fn stats(&mut self) -> ReceiverStats {
        ReceiverStats::default()
    }
}
