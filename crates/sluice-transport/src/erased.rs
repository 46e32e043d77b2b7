//! Type erasure between the runtime, which routes tuples of types it does not know, and the
//! typed transports.
//!
//! A [`StreamType`] is made once per tuple type with [`StreamType::of`]; it carries the tuple
//! schema and knows how to build typed endpoints for any transport, returned as
//! [`ErasedSender`] / [`ErasedReceiver`] trait objects. The sender takes tuples as
//! `&mut Option<T>` behind `&mut dyn Any`, so a tuple is moved into the transport without an
//! allocation and stays with the caller when the transport is full. The receiver hands out
//! runs of tuples as [`BatchRef`]s over a vector, so an operator can read them as a slice.

use std::any::Any;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use sluice_types::{BatchRef, Message, Punctuation, Tuple, TupleRef, TupleSchema};

use crate::{
    Arrival, ChannelSite, ReceiverStats, RecvError, Refused, Rendezvous, Runs, SendError,
    TransportError, TransportSpec, TupleReceiver, TupleSender,
};

/// What a receiver hands to the runtime, in stream order.
pub enum Delivery<'a> {
    /// Consecutive tuples.
    Batch(BatchRef<'a>),
    /// A punctuation, with its value.
    Punctuation(Punctuation),
    /// The end of this edge's stream.
    EndOfStream,
}

/// A type-erased sending end.
pub trait ErasedSender: Send {
    /// Offers the tuple in `slot`, which must be an `Option<T>` of the stream's type holding a
    /// value. On success the slot is emptied; on `Full` the tuple stays in it.
    fn offer_tuple(&mut self, slot: &mut dyn Any) -> Result<(), SendError>;
    /// Offers the tuples of `batch`, which must be a `Vec<T>` of the stream's type, in order.
    /// The sender takes them all, leaving the vector empty. `Ok` when every one is in the
    /// transport; on `Full` the sender holds those that did not fit, in order, and they go
    /// first on the next offer: call again (with an empty vector or the next batch) until
    /// `Ok`. Until then other offers are refused as `Full` and [`ErasedSender::pending`] holds.
    fn offer_batch(&mut self, batch: &mut dyn Any) -> Result<(), SendError>;
    /// Offers a clone of `tuple`, which must be of the stream's type.
    fn offer_copy(&mut self, tuple: TupleRef<'_>) -> Result<(), SendError>;
    /// Offers `punctuation`, in order with the tuples offered before and after it.
    fn offer_punctuation(&mut self, punctuation: Punctuation) -> Result<(), SendError>;
    /// Offers the end of the stream; nothing may be offered after it.
    fn offer_end(&mut self) -> Result<(), SendError>;
    /// Makes everything offered visible to the receiver.
    fn flush(&mut self);
    /// Whether the last flush left messages undelivered; see [`TupleSender::pending`].
    fn pending(&self) -> bool;
    /// Flushes and sleeps until the receiver makes room, at most `timeout`; false if the
    /// transport cannot park (see [`TupleSender::park`]).
    fn park(&mut self, timeout: Duration) -> bool {
        let _ = timeout;
        false
    }
    /// From now on an offer that finds the transport full is taken all the same: the sender
    /// holds the message, in order behind what it already holds, and returns `Ok`; it goes
    /// first on the next offer or [`ErasedSender::flush`], and [`ErasedSender::pending`] holds
    /// until it has. For a caller that must not wait where it sends (an instance sharing a
    /// core with others, which returns to its worker instead: `sluice-exec`'s scheduler); the
    /// caller bounds what is held by sending nothing new while `pending` holds.
    fn hold_when_full(&mut self);
}

/// A type-erased receiving end.
pub trait ErasedReceiver: Send {
    /// Receives up to `max` messages and hands them to `deliver` in order, tuples grouped into
    /// batches; stops early if `deliver` breaks. Returns how many messages were received.
    fn poll(
        &mut self,
        max: usize,
        deliver: &mut dyn FnMut(Delivery<'_>) -> ControlFlow<()>,
    ) -> Result<usize, RecvError>;
    /// Whether a poll may find something now (see [`TupleReceiver::may_have_input`]).
    fn may_have_input(&mut self) -> bool {
        true
    }
    /// Sleeps until the sender publishes, at most `timeout`; false if the transport cannot
    /// park (see [`TupleReceiver::park`]).
    fn park(&mut self, timeout: Duration) -> bool {
        let _ = timeout;
        false
    }
    /// What it can tell of its edge now (see [`TupleReceiver::stats`]).
    fn stats(&mut self) -> ReceiverStats;
}

/// A connected pair of type-erased endpoints.
pub type ErasedPair = (Box<dyn ErasedSender>, Box<dyn ErasedReceiver>);

/// The tuple type of a stream, with what is needed to build transports for it.
#[derive(Clone)]
pub struct StreamType {
    schema: TupleSchema,
    endpoints: Arc<dyn EndpointFactory>,
}

impl std::fmt::Debug for StreamType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StreamType")
            .field(&self.schema.type_name)
            .finish()
    }
}

impl StreamType {
    /// The stream type of tuples of type `T`.
    pub fn of<T: Tuple>() -> Self {
        Self {
            schema: T::schema(),
            endpoints: Arc::new(TypedFactory::<T>(PhantomData)),
        }
    }

    /// The tuple schema.
    pub fn schema(&self) -> &TupleSchema {
        &self.schema
    }

    /// Builds a connected sender/receiver pair of the transport `spec` for this stream.
    pub fn connect(&self, spec: &TransportSpec) -> Result<ErasedPair, TransportError> {
        self.endpoints.connect(spec)
    }

    /// Binds the receiving end of a channel between processes at `site`, for `senders`
    /// senders; see [`TransportSpec::bind_receiver_typed`].
    pub fn bind_receiver(
        &self,
        spec: &TransportSpec,
        site: &ChannelSite,
        senders: usize,
    ) -> Result<(Box<dyn ErasedReceiver>, Option<Rendezvous>), TransportError> {
        self.endpoints.bind_receiver(spec, site, senders)
    }

    /// Opens a sending end of the channel bound at `site`.
    pub fn open_sender(
        &self,
        spec: &TransportSpec,
        site: &ChannelSite,
    ) -> Result<Box<dyn ErasedSender>, TransportError> {
        self.endpoints.open_sender(spec, site)
    }

    /// An empty [`TupleLog`] for tuples of this stream.
    pub fn tuple_log(&self) -> Box<dyn TupleLog> {
        self.endpoints.tuple_log()
    }

    /// A [`TupleLog`] of this stream holding the tuples [`TupleLog::encode`] wrote in `bytes`.
    pub fn decode_log(&self, bytes: &[u8]) -> Result<Box<dyn TupleLog>, String> {
        self.endpoints.decode_log(bytes)
    }
}

/// Bytes of the length before each tuple of an encoded [`TupleLog`].
const LOG_LENGTH_BYTES: usize = 4;

/// Tuples of one stream, owned and kept in order: what an instance aligning a checkpoint holds
/// back from an input that already passed the checkpoint's barrier, until the other inputs'
/// barriers arrive.
pub trait TupleLog: Send {
    /// Appends a copy of `tuple`, which must be of the stream's type (else it is skipped:
    /// ports are type-checked when the graph is built).
    fn push(&mut self, tuple: TupleRef<'_>);
    /// Appends a copy of every tuple of `batch`, in order.
    fn push_batch(&mut self, batch: BatchRef<'_>);
    /// The tuples held, in order, as one batch.
    fn batch(&self) -> BatchRef<'_>;
    /// How many tuples it holds.
    fn len(&self) -> usize;
    /// Appends the tuples to `out`, each as its length (`u32`, little-endian) then its
    /// encoding ([`Tuple::encode`]), for a checkpoint that keeps them.
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), String>;
    /// Whether it holds none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: Tuple> TupleLog for Vec<T> {
    fn push(&mut self, tuple: TupleRef<'_>) {
        if let Some(t) = tuple.get::<T>() {
            Vec::push(self, t.clone());
        }
    }

    fn push_batch(&mut self, batch: BatchRef<'_>) {
        match batch.as_slice::<T>() {
            Some(slice) => self.extend_from_slice(slice),
            None => self.extend(batch.iter_as::<T>().cloned()),
        }
    }

    fn batch(&self) -> BatchRef<'_> {
        BatchRef::from_vec(self)
    }

    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn encode(&self, out: &mut Vec<u8>) -> Result<(), String> {
        let mut tuple = Vec::new();
        for t in self {
            tuple.clear();
            t.encode(&mut tuple).map_err(|e| e.to_string())?;
            let len = u32::try_from(tuple.len())
                .map_err(|_| format!("a tuple of {} bytes is too long to keep", tuple.len()))?;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&tuple);
        }
        Ok(())
    }
}

/// Reads the tuples [`TupleLog::encode`] wrote, refusing bytes that are not that.
fn decode_tuples<T: Tuple>(mut bytes: &[u8]) -> Result<Vec<T>, String> {
    let mut tuples = Vec::new();
    while !bytes.is_empty() {
        let (len, rest) = bytes
            .split_first_chunk::<LOG_LENGTH_BYTES>()
            .ok_or("a kept tuple's length is cut short")?;
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return Err(format!(
                "a kept tuple of {len} bytes has only {} left",
                rest.len()
            ));
        }
        let (tuple, rest) = rest.split_at(len);
        tuples.push(T::decode(tuple).map_err(|e| e.to_string())?);
        bytes = rest;
    }
    Ok(tuples)
}

trait EndpointFactory: Send + Sync {
    fn connect(&self, spec: &TransportSpec) -> Result<ErasedPair, TransportError>;
    fn bind_receiver(
        &self,
        spec: &TransportSpec,
        site: &ChannelSite,
        senders: usize,
    ) -> Result<(Box<dyn ErasedReceiver>, Option<Rendezvous>), TransportError>;
    fn open_sender(
        &self,
        spec: &TransportSpec,
        site: &ChannelSite,
    ) -> Result<Box<dyn ErasedSender>, TransportError>;
    fn tuple_log(&self) -> Box<dyn TupleLog>;
    fn decode_log(&self, bytes: &[u8]) -> Result<Box<dyn TupleLog>, String>;
}

struct TypedFactory<T>(PhantomData<fn() -> T>);

impl<T: Tuple> EndpointFactory for TypedFactory<T> {
    fn connect(&self, spec: &TransportSpec) -> Result<ErasedPair, TransportError> {
        let (sender, receiver) = spec.connect_typed::<T>()?;
        Ok((erase_sender(sender), erase_receiver(receiver)))
    }

    fn bind_receiver(
        &self,
        spec: &TransportSpec,
        site: &ChannelSite,
        senders: usize,
    ) -> Result<(Box<dyn ErasedReceiver>, Option<Rendezvous>), TransportError> {
        let (receiver, rendezvous) = spec.bind_receiver_typed::<T>(site, senders)?;
        Ok((erase_receiver(receiver), rendezvous))
    }

    fn open_sender(
        &self,
        spec: &TransportSpec,
        site: &ChannelSite,
    ) -> Result<Box<dyn ErasedSender>, TransportError> {
        Ok(erase_sender(spec.open_sender_typed::<T>(site)?))
    }

    fn tuple_log(&self) -> Box<dyn TupleLog> {
        Box::new(Vec::<T>::new())
    }

    fn decode_log(&self, bytes: &[u8]) -> Result<Box<dyn TupleLog>, String> {
        Ok(Box::new(decode_tuples::<T>(bytes)?))
    }
}

fn erase_sender<T: Tuple>(inner: Box<dyn TupleSender<T>>) -> Box<dyn ErasedSender> {
    Box::new(ErasedTx {
        inner,
        held: VecDeque::new(),
        held_after: VecDeque::new(),
        overdraft: false,
    })
}

fn erase_receiver<T: Tuple>(inner: Box<dyn TupleReceiver<T>>) -> Box<dyn ErasedReceiver> {
    Box::new(ErasedRx {
        inner,
        runs: Runs::default(),
    })
}

struct ErasedTx<T> {
    inner: Box<dyn TupleSender<T>>,
    /// Tuples of a batch the transport had no room for yet, in order: they go before anything
    /// offered after them.
    held: VecDeque<T>,
    /// Messages offered while the transport was full once it holds when full
    /// ([`ErasedSender::hold_when_full`]), in order behind `held`.
    held_after: VecDeque<Message<T>>,
    /// Whether an offer that finds the transport full is held rather than refused.
    overdraft: bool,
}

impl<T: Tuple> ErasedTx<T> {
    fn offer_message(&mut self, message: Message<T>) -> Result<(), SendError> {
        if let Err(error) = self.send_held() {
            return self
                .hold_or_refuse(message, error)
                .map_err(|(_, error)| error);
        }
        match self.inner.offer(message) {
            Ok(()) => Ok(()),
            Err(refused) => self
                .hold_or_refuse(refused.message, refused.error)
                .map_err(|(_, error)| error),
        }
    }

    /// `message` could not go now, for `error`: held behind what is held when the sender
    /// holds on a full transport, else handed back with the error.
    fn hold_or_refuse(
        &mut self,
        message: Message<T>,
        error: SendError,
    ) -> Result<(), (Message<T>, SendError)> {
        if !(self.overdraft && error == SendError::Full) {
            return Err((message, error));
        }
        match message {
            Message::Data(tuple) if self.held_after.is_empty() => self.held.push_back(tuple),
            message => self.held_after.push_back(message),
        }
        Ok(())
    }

    /// Moves held messages into the transport, in order; `Full` while some are still held.
    #[inline]
    fn send_held(&mut self) -> Result<(), SendError> {
        self.inner.offer_tuples(&mut self.held)?;
        while let Some(message) = self.held_after.pop_front() {
            if let Err(refused) = self.inner.offer(message) {
                self.held_after.push_front(refused.message);
                return Err(refused.error);
            }
        }
        Ok(())
    }
}

impl<T: Tuple> ErasedSender for ErasedTx<T> {
    #[inline]
    fn offer_tuple(&mut self, slot: &mut dyn Any) -> Result<(), SendError> {
        let slot = slot
            .downcast_mut::<Option<T>>()
            .ok_or(SendError::TypeMismatch {
                expected: std::any::type_name::<T>(),
            })?;
        let Some(tuple) = slot.take() else {
            return Ok(());
        };
        let offered = match self.send_held() {
            Ok(()) => self.inner.offer(Message::Data(tuple)),
            Err(error) => Err(Refused {
                error,
                message: Message::Data(tuple),
            }),
        };
        let Err(refused) = offered else {
            return Ok(());
        };
        self.hold_or_refuse(refused.message, refused.error)
            .map_err(|(message, error)| {
                if let Message::Data(tuple) = message {
                    *slot = Some(tuple);
                }
                error
            })
    }

    fn offer_batch(&mut self, batch: &mut dyn Any) -> Result<(), SendError> {
        let batch = batch
            .downcast_mut::<Vec<T>>()
            .ok_or(SendError::TypeMismatch {
                expected: std::any::type_name::<T>(),
            })?;
        // The tuples leave from the front of a deque in O(1) each. Handing what did not fit
        // back in the vector moved the unsent tail to its front on every call: a batch of n
        // crossing a queue of c slots cost n^2/c moves (a 56 MB line's 12 M words spent 47% of
        // a two-thread WordCount in memmove).
        if !self.held_after.is_empty() {
            // Behind a held punctuation or end, in order.
            self.held_after.extend(batch.drain(..).map(Message::Data));
        } else if self.held.is_empty() {
            // Over the vector's own buffer: no copy.
            self.held = VecDeque::from(std::mem::take(batch));
        } else {
            self.held.extend(batch.drain(..));
        }
        match self.send_held() {
            Ok(()) => {}
            // What did not fit is held either way; holding it is what the caller asked for.
            Err(SendError::Full) if self.overdraft => return Ok(()),
            Err(error) => return Err(error),
        }
        if batch.capacity() == 0 {
            // Give the buffer back for the next batch (an empty deque converts in O(1)).
            *batch = Vec::from(std::mem::take(&mut self.held));
        }
        Ok(())
    }

    fn offer_copy(&mut self, tuple: TupleRef<'_>) -> Result<(), SendError> {
        let tuple = tuple.get::<T>().ok_or(SendError::TypeMismatch {
            expected: std::any::type_name::<T>(),
        })?;
        let offered = self.send_held().and_then(|()| self.inner.offer_copy(tuple));
        match offered {
            Ok(()) => Ok(()),
            Err(error) => self
                .hold_or_refuse(Message::Data(tuple.clone()), error)
                .map_err(|(_, error)| error),
        }
    }

    fn offer_punctuation(&mut self, punctuation: Punctuation) -> Result<(), SendError> {
        self.offer_message(Message::Punctuation(punctuation))
    }

    fn offer_end(&mut self) -> Result<(), SendError> {
        self.offer_message(Message::EndOfStream)
    }

    #[inline]
    fn flush(&mut self) {
        // What is still held is the next offer's to report.
        let _ = self.send_held();
        self.inner.flush()
    }

    fn pending(&self) -> bool {
        !self.held.is_empty() || !self.held_after.is_empty() || self.inner.pending()
    }

    fn park(&mut self, timeout: Duration) -> bool {
        self.inner.park(timeout)
    }

    fn hold_when_full(&mut self) {
        self.overdraft = true;
    }
}

struct ErasedRx<T> {
    inner: Box<dyn TupleReceiver<T>>,
    /// The buffers the receiver gathers runs of tuples in, so a batch is a vector.
    runs: Runs<T>,
}

impl<T: Tuple> ErasedReceiver for ErasedRx<T> {
    fn poll(
        &mut self,
        max: usize,
        deliver: &mut dyn FnMut(Delivery<'_>) -> ControlFlow<()>,
    ) -> Result<usize, RecvError> {
        self.inner.poll_runs(max, &mut self.runs, &mut |arrival| {
            deliver(match arrival {
                Arrival::Tuples(tuples) => Delivery::Batch(BatchRef::from_vec(tuples)),
                Arrival::Punctuation(punctuation) => Delivery::Punctuation(punctuation),
                Arrival::EndOfStream => Delivery::EndOfStream,
            })
        })
    }

    fn park(&mut self, timeout: Duration) -> bool {
        self.inner.park(timeout)
    }

    fn may_have_input(&mut self) -> bool {
        self.inner.may_have_input()
    }

    fn stats(&mut self) -> ReceiverStats {
        self.inner.stats()
    }
}

#[cfg(test)]
mod tuple_log_tests {
    use super::*;

    #[test]
    fn a_log_decodes_to_the_tuples_it_encoded_and_refuses_cut_bytes() {
        let stream = StreamType::of::<String>();
        let mut log = stream.tuple_log();
        let words = vec!["a".to_string(), String::new(), "three".to_string()];
        log.push_batch(BatchRef::from_vec(&words));
        let mut bytes = Vec::new();
        log.encode(&mut bytes).unwrap();
        let back = stream.decode_log(&bytes).unwrap();
        assert_eq!(back.batch().as_slice::<String>(), Some(words.as_slice()));
        for cut in 1..bytes.len() {
            let _ = stream.decode_log(&bytes[..cut]);
        }
        assert!(stream.decode_log(&bytes[..bytes.len() - 1]).is_err());
    }
}

#[cfg(test)]
mod overdraft_tests {
    use super::*;

    /// What a receiver delivers, as text: `t<n>` for a tuple, `w<time>` for a watermark, `end`.
    fn drain(receiver: &mut dyn ErasedReceiver, into: &mut Vec<String>) {
        let _ = receiver.poll(usize::MAX, &mut |delivery| {
            match delivery {
                Delivery::Batch(batch) => {
                    into.extend(batch.iter_as::<u64>().map(|t| format!("t{t}")))
                }
                Delivery::Punctuation(Punctuation::Watermark { time, .. }) => {
                    into.push(format!("w{time}"))
                }
                Delivery::Punctuation(other) => into.push(format!("{other:?}")),
                Delivery::EndOfStream => into.push("end".into()),
            }
            ControlFlow::Continue(())
        });
    }

    #[test]
    fn a_sender_holding_when_full_takes_every_offer_and_delivers_it_in_order() {
        let stream = StreamType::of::<u64>();
        let (mut tx, mut rx) = stream
            .connect(&TransportSpec::Threaded { capacity: 2 })
            .unwrap();
        tx.hold_when_full();
        let mut expected = Vec::new();
        let mut next = 0u64;
        for round in 0..3u64 {
            for _ in 0..3 {
                let mut slot = Some(next);
                tx.offer_tuple(&mut slot).unwrap();
                assert_eq!(slot, None, "the held tuple left the caller's slot");
                expected.push(format!("t{next}"));
                next += 1;
            }
            tx.offer_copy(TupleRef::new(&next)).unwrap();
            expected.push(format!("t{next}"));
            next += 1;
            tx.offer_punctuation(Punctuation::Watermark {
                time: round,
                from: 0,
            })
            .unwrap();
            expected.push(format!("w{round}"));
            let mut batch = vec![next, next + 1];
            tx.offer_batch(&mut batch).unwrap();
            expected.extend([format!("t{next}"), format!("t{}", next + 1)]);
            next += 2;
        }
        tx.offer_end().unwrap();
        expected.push("end".into());
        assert!(tx.pending(), "a queue of 2 cannot have taken all of it");
        let mut got = Vec::new();
        for _ in 0..expected.len() {
            tx.flush();
            drain(rx.as_mut(), &mut got);
        }
        assert!(!tx.pending());
        assert_eq!(got, expected);
    }

    #[test]
    fn a_sender_not_holding_refuses_when_full() {
        let stream = StreamType::of::<u64>();
        let (mut tx, _rx) = stream
            .connect(&TransportSpec::Threaded { capacity: 1 })
            .unwrap();
        let refused = (0..8u64).find_map(|t| tx.offer_tuple(&mut Some(t)).err());
        assert_eq!(refused, Some(SendError::Full));
        assert_eq!(
            tx.offer_punctuation(Punctuation::WindowMarker),
            Err(SendError::Full)
        );
    }
}
