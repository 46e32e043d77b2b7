//! The threaded port: an edge between two threads of one process, over the SPSC queue of
//! `sluice-ring`. Tuples move by value (a pointer-sized move for normal tuples, a copy of the
//! bytes for facade tuples); nothing is serialized.
//!
//! Offers are written without publishing; the sender publishes on [`TupleSender::flush`] (the
//! runtime flushes after each unit of work, so a batch costs one index store), and by itself
//! once a quarter of the queue is unpublished, so a long burst is never held back.

use std::collections::VecDeque;
use std::time::Duration;

use sluice_ring::spsc::{self, Consumer, Producer, PushError};
use sluice_types::Message;

use crate::{ReceiverStats, RecvError, Refused, SendError, TupleReceiver, TupleSender};

/// The sending end of a threaded port.
pub struct ThreadedPortSender<T> {
    queue: Producer<Message<T>>,
    unpublished: usize,
    publish_every: usize,
}

/// The receiving end of a threaded port.
pub struct ThreadedPortReceiver<T> {
    queue: Consumer<Message<T>>,
    ended: bool,
}

/// Creates a threaded port with room for `capacity` messages (rounded up to a power of two);
/// `None` if `capacity` is 0.
pub fn threaded_port<T: Send>(
    capacity: usize,
) -> Option<(ThreadedPortSender<T>, ThreadedPortReceiver<T>)> {
    let (producer, consumer) = spsc::channel(capacity)?;
    let publish_every = (producer.capacity() / 4).max(1);
    Some((
        ThreadedPortSender {
            queue: producer,
            unpublished: 0,
            publish_every,
        },
        ThreadedPortReceiver {
            queue: consumer,
            ended: false,
        },
    ))
}

impl<T: Send> TupleSender<T> for ThreadedPortSender<T> {
    #[inline]
    fn offer(&mut self, message: Message<T>) -> Result<(), Refused<T>> {
        match self.queue.write(message) {
            Ok(()) => {
                self.unpublished += 1;
                if self.unpublished >= self.publish_every {
                    self.flush();
                }
                Ok(())
            }
            Err(PushError::Full(message)) => {
                // The receiver may be waiting for what we have not published yet.
                self.flush();
                Err(Refused {
                    error: SendError::Full,
                    message,
                })
            }
            Err(PushError::Closed(message)) => Err(Refused {
                error: SendError::Closed,
                message,
            }),
        }
    }

    /// Writes the tuples in runs, each with one look at the receiver's position, publishing
    /// every quarter of the queue as [`TupleSender::offer`] does.
    fn offer_tuples(&mut self, tuples: &mut VecDeque<T>) -> Result<(), SendError> {
        while !tuples.is_empty() {
            let run = self.publish_every.saturating_sub(self.unpublished).max(1);
            let mut data = std::iter::from_fn(|| tuples.pop_front().map(Message::Data)).take(run);
            let written = self.queue.write_many(&mut data);
            self.unpublished += written;
            if self.unpublished >= self.publish_every {
                self.flush();
            }
            if written < run && !tuples.is_empty() {
                // The receiver may be waiting for what we have not published yet.
                self.flush();
                return Err(if self.queue.is_closed() {
                    SendError::Closed
                } else {
                    SendError::Full
                });
            }
        }
        Ok(())
    }

    #[inline]
    fn flush(&mut self) {
        self.queue.publish();
        self.unpublished = 0;
    }

    #[inline]
    fn room(&mut self) -> usize {
        // Only this producer fills the queue, so free slots can only grow until it writes.
        if self.queue.is_closed() {
            0
        } else {
            self.queue.free()
        }
    }

    fn park(&mut self, timeout: Duration) -> bool {
        self.unpublished = 0;
        // Publishes first, so the receiver is not left waiting for what we hold.
        self.queue.park(timeout);
        true
    }
}

impl<T: Send> TupleReceiver<T> for ThreadedPortReceiver<T> {
    #[inline]
    fn poll(&mut self, max: usize, out: &mut Vec<Message<T>>) -> Result<usize, RecvError> {
        let n = self.queue.pop_batch(max, out);
        if n > 0 {
            // End-of-stream is the last message a sender ever offers.
            if matches!(out.last(), Some(Message::EndOfStream)) {
                self.ended = true;
            }
            return Ok(n);
        }
        // Check the flag first, then the queue: a producer publishes before it marks itself
        // gone, so "gone and still empty" means nothing more will come.
        if !self.ended && self.queue.is_closed() && self.queue.available() == 0 {
            return Err(RecvError::Disconnected);
        }
        Ok(0)
    }

    fn park(&mut self, timeout: Duration) -> bool {
        self.queue.park(timeout);
        true
    }

    fn stats(&mut self) -> ReceiverStats {
        ReceiverStats {
            queued: Some((self.queue.available() as u64, self.queue.capacity() as u64)),
            ..ReceiverStats::default()
        }
    }
}
