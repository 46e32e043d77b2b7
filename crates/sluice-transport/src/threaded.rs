//! The threaded port: an edge between two threads of one process, over the SPSC queue of
//! `sluice-ring`. Tuples move by value; nothing is serialized.
//!
//! A queue slot holds a *frame*: one message, or a run of tuples. A run offered together
//! ([`TupleSender::offer_tuples`], which the runtime uses for a batch an operator emits) goes
//! as one frame: the vector itself moves into the slot, so crossing costs a few stores per
//! run however long it is, where a message per tuple cost a slot write, a slot read and two
//! moves per tuple (about 200 instructions a word for WordCount over both threads). The
//! receiver hands a run to the operator as the vector it came in
//! ([`TupleReceiver::poll_runs`]), then gives the emptied vector back to the sender through a
//! second queue, so in steady state no run allocates.
//!
//! ```text
//!   sender --frames: [One(msg) | Run(vec of n) | One(barrier) | ...]--> receiver
//!   sender <--spare: [empty vec | empty vec | ...]----------------------- receiver
//! ```
//! - A run weighs its length in the frame queue, so the port still holds at most its capacity
//!   in messages; a run longer than the room left is split, and the first part goes.
//! - Frames keep their order, so tuples, punctuations (checkpoint barriers among them) and the
//!   end of the stream arrive exactly in the order offered.
//! - Tuples offered one at a time ([`TupleSender::offer`]: what an operator emits tuple by
//!   tuple, a split's records to each of its outputs, a window's results) are gathered into a
//!   run, which goes as one frame before the next punctuation, run or end, on a flush, or once
//!   it weighs what a publish waits for. A frame a tuple cost a slot written and read a tuple,
//!   each on a line the ring had not touched since it last wrapped (VWAP under `threaded`: two
//!   or three frames a record, a fifth of its time in the ports). A gathered tuple is counted
//!   against the room when offered, so the port still refuses what it has no room for.
//!
//! Why hand-written: a queue of vectors with their buffers sent back is the point of the
//! change (no channel crate recycles a payload's allocation), and the queue below it is the
//! SPSC ring of `sluice-ring`, whose module doc argues its own case.
//!
//! Frames are written without publishing; the sender publishes on [`TupleSender::flush`] (the
//! runtime flushes after each unit of work, so a batch costs one index store), and by itself
//! once a quarter of the queue is unpublished, so a long burst is never held back.

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::time::Duration;

use sluice_ring::spsc::{self, Consumer, Producer};
use sluice_types::Message;

use crate::{
    Arrival, ReceiverStats, RecvError, Refused, Runs, SendError, TupleReceiver, TupleSender,
};

/// What one slot of the port's queue carries.
enum Frame<T> {
    /// One message.
    One(Message<T>),
    /// Consecutive tuples, weighing their number.
    Run(Vec<T>),
}

/// The sending end of a threaded port.
pub struct ThreadedPortSender<T: Send> {
    queue: Producer<Frame<T>>,
    /// Emptied run buffers the receiver gave back, to carry the next runs.
    spare: Consumer<Vec<T>>,
    unpublished: usize,
    publish_every: usize,
    /// Tuples offered one at a time since the last frame, to go as one run; the queue has
    /// room for all of them.
    gathered: Vec<T>,
}

/// The receiving end of a threaded port.
pub struct ThreadedPortReceiver<T> {
    queue: Consumer<Frame<T>>,
    /// Where emptied run buffers go back to the sender.
    spare: Producer<Vec<T>>,
    /// The frames of the current poll (kept for its buffer).
    frames: Vec<Frame<T>>,
    ended: bool,
}

/// Creates a threaded port with room for `capacity` messages (rounded up to a power of two);
/// `None` if `capacity` is 0.
pub fn threaded_port<T: Send>(
    capacity: usize,
) -> Option<(ThreadedPortSender<T>, ThreadedPortReceiver<T>)> {
    let (producer, consumer) = spsc::channel(capacity)?;
    // As many buffers as runs can be in flight.
    let (spare_producer, spare_consumer) = spsc::channel(producer.capacity())?;
    let publish_every = (producer.capacity() / 4).max(1);
    Some((
        ThreadedPortSender {
            queue: producer,
            spare: spare_consumer,
            unpublished: 0,
            publish_every,
            gathered: Vec::new(),
        },
        ThreadedPortReceiver {
            queue: consumer,
            spare: spare_producer,
            frames: Vec::new(),
            ended: false,
        },
    ))
}

impl<T: Send> ThreadedPortSender<T> {
    /// Counts `weight` more messages written, publishing once a quarter of the queue is.
    #[inline]
    fn written(&mut self, weight: usize) {
        self.unpublished += weight;
        if self.unpublished >= self.publish_every {
            self.flush();
        }
    }

    /// Writes the gathered tuples as one run, unpublished, and takes a spare buffer to gather
    /// in next.
    fn write_gathered(&mut self) {
        if self.gathered.is_empty() {
            return;
        }
        let weight = self.gathered.len();
        // Room for every gathered tuple was there when it was offered, and only this sender
        // fills the queue: the claim fails only if the receiver is gone, and then nothing
        // written would ever be read.
        let Some(claim) = self.queue.claim(weight) else {
            self.gathered.clear();
            return;
        };
        let spare = self.spare.try_pop().unwrap_or_default();
        claim.write(Frame::Run(std::mem::replace(&mut self.gathered, spare)));
        self.unpublished += weight;
    }

    /// Why nothing more can be written now; publishes first, as the receiver may be waiting
    /// for what we have not published yet.
    fn refusal(&mut self) -> SendError {
        self.flush();
        if self.queue.is_closed() {
            SendError::Closed
        } else {
            SendError::Full
        }
    }
}

impl<T: Send> TupleSender<T> for ThreadedPortSender<T> {
    #[inline]
    fn offer(&mut self, message: Message<T>) -> Result<(), Refused<T>> {
        let message = match message {
            Message::Data(tuple) => {
                let room = !self.queue.is_closed() && self.queue.has_room(self.gathered.len() + 1);
                if !room {
                    return Err(Refused {
                        error: self.refusal(),
                        message: Message::Data(tuple),
                    });
                }
                self.gathered.push(tuple);
                if self.gathered.len() >= self.publish_every {
                    self.flush();
                }
                return Ok(());
            }
            message => message,
        };
        self.write_gathered();
        match self.queue.claim(1) {
            Some(claim) => claim.write(Frame::One(message)),
            None => {
                return Err(Refused {
                    error: self.refusal(),
                    message,
                })
            }
        }
        self.written(1);
        Ok(())
    }

    /// Moves the tuples as one run in one slot when they fit, handing back a spare buffer
    /// in `tuples`; else as much of them as fits, split off the front.
    fn offer_tuples(&mut self, tuples: &mut VecDeque<T>) -> Result<(), SendError> {
        if tuples.is_empty() {
            // Nothing to keep order with (the erased sender offers what it holds, often
            // nothing, before each tuple): what is gathered stays gathered.
            return Ok(());
        }
        self.write_gathered();
        while !tuples.is_empty() {
            let room = self.queue.free();
            let Some(claim) = self.queue.claim(tuples.len().min(room)) else {
                return Err(self.refusal());
            };
            let weight = claim.weight();
            // An empty buffer: one the receiver gave back, else a new one.
            let spare = self.spare.try_pop().unwrap_or_default();
            let run = if weight == tuples.len() {
                // The whole deque: its buffer moves (one built from a vector converts back
                // without moving a tuple), and a spare takes its place.
                Vec::from(std::mem::replace(tuples, VecDeque::from(spare)))
            } else {
                let mut run = spare;
                run.extend(tuples.drain(..weight));
                run
            };
            claim.write(Frame::Run(run));
            self.written(weight);
        }
        Ok(())
    }

    #[inline]
    fn flush(&mut self) {
        self.write_gathered();
        self.queue.publish();
        self.unpublished = 0;
    }

    #[inline]
    fn room(&mut self) -> usize {
        // Only this producer fills the queue, so free room can only grow until it writes.
        if self.queue.is_closed() {
            0
        } else {
            self.queue.free().saturating_sub(self.gathered.len())
        }
    }

    fn park(&mut self, timeout: Duration) -> bool {
        self.write_gathered();
        self.unpublished = 0;
        // Publishes first, so the receiver is not left waiting for what we hold.
        self.queue.park(timeout);
        true
    }
}

impl<T: Send> Drop for ThreadedPortSender<T> {
    /// What was gathered goes into the queue, as what was written does (the queue's producer
    /// publishes it as it leaves).
    fn drop(&mut self) {
        self.write_gathered();
    }
}

impl<T: Send> ThreadedPortReceiver<T> {
    /// Takes frames weighing up to `max` messages (at least one frame) into `self.frames`;
    /// returns their weight. `Disconnected` once the sender is gone without ending its stream
    /// and nothing is left.
    fn receive(&mut self, max: usize) -> Result<usize, RecvError> {
        let n = self.queue.pop_batch(max, &mut self.frames);
        if n > 0 {
            // End-of-stream is the last message a sender ever offers.
            if matches!(self.frames.last(), Some(Frame::One(Message::EndOfStream))) {
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

    /// Gives an emptied run buffer back to the sender (unpublished: see
    /// [`ThreadedPortReceiver::return_spares`]); dropped if the sender has enough.
    fn give_back(&mut self, mut run: Vec<T>) {
        run.clear();
        let _ = self.spare.write(run);
    }

    /// Makes the buffers given back visible to the sender.
    fn return_spares(&mut self) {
        self.spare.publish();
    }
}

impl<T: Send> TupleReceiver<T> for ThreadedPortReceiver<T> {
    fn poll(&mut self, max: usize, out: &mut Vec<Message<T>>) -> Result<usize, RecvError> {
        let n = self.receive(max)?;
        let mut frames = std::mem::take(&mut self.frames);
        for frame in frames.drain(..) {
            match frame {
                Frame::One(message) => out.push(message),
                Frame::Run(mut run) => {
                    out.extend(run.drain(..).map(Message::Data));
                    self.give_back(run);
                }
            }
        }
        self.frames = frames;
        self.return_spares();
        Ok(n)
    }

    /// Hands each run over as the vector it crossed in; single tuples are gathered in `runs`.
    fn poll_runs(
        &mut self,
        max: usize,
        runs: &mut Runs<T>,
        deliver: &mut dyn FnMut(Arrival<'_, T>) -> ControlFlow<()>,
    ) -> Result<usize, RecvError> {
        let n = self.receive(max)?;
        let mut frames = std::mem::take(&mut self.frames);
        let mut flow = ControlFlow::Continue(());
        for frame in frames.drain(..) {
            flow = match frame {
                Frame::One(message) => runs.push(message, deliver),
                Frame::Run(run) => {
                    let mut flow = runs.finish(deliver);
                    if flow.is_continue() {
                        flow = deliver(Arrival::Tuples(&run));
                    }
                    self.give_back(run);
                    flow
                }
            };
            if flow.is_break() {
                break;
            }
        }
        runs.end(flow, deliver);
        self.frames = frames;
        self.return_spares();
        Ok(n)
    }

    fn may_have_input(&mut self) -> bool {
        // A sender that left without ending its stream is news too: the poll reports it.
        self.queue.available() > 0 || (!self.ended && self.queue.is_closed())
    }

    fn park(&mut self, timeout: Duration) -> bool {
        self.queue.park(timeout);
        true
    }

    fn stats(&mut self) -> ReceiverStats {
        ReceiverStats {
            queued: Some((
                self.queue.available_weight() as u64,
                self.queue.capacity() as u64,
            )),
            ..ReceiverStats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_types::Punctuation;

    /// What `poll_runs` hands over, as text.
    fn receive(rx: &mut ThreadedPortReceiver<u64>, runs: &mut Runs<u64>) -> Vec<String> {
        let mut got = Vec::new();
        rx.poll_runs(usize::MAX, runs, &mut |arrival| {
            got.push(match arrival {
                Arrival::Tuples(run) => format!("{run:?}"),
                Arrival::Punctuation(p) => format!("{p:?}"),
                Arrival::EndOfStream => "end".into(),
            });
            ControlFlow::Continue(())
        })
        .unwrap();
        got
    }

    #[test]
    fn a_run_crosses_in_its_own_buffer_which_comes_back_for_the_next() {
        let (mut tx, mut rx) = threaded_port::<u64>(16).unwrap();
        let mut tuples = VecDeque::from(vec![1, 2, 3]);
        let buffer = tuples.as_slices().0.as_ptr();
        tx.offer_tuples(&mut tuples).unwrap();
        assert!(tuples.is_empty());
        tx.flush();
        let mut seen = None;
        rx.poll_runs(usize::MAX, &mut Runs::default(), &mut |arrival| {
            if let Arrival::Tuples(run) = arrival {
                seen = Some((run.clone(), run.as_ptr()));
            }
            ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(
            seen,
            Some((vec![1, 2, 3], buffer)),
            "not moved tuple by tuple"
        );
        // The emptied buffer is the one the next offer hands back.
        let mut next = VecDeque::from(vec![4]);
        tx.offer_tuples(&mut next).unwrap();
        assert!(next.is_empty());
        let next = Vec::from(next);
        assert_eq!(next.as_ptr(), buffer);
    }

    #[test]
    fn tuples_offered_one_at_a_time_cross_as_one_frame_within_the_capacity() {
        // Through the erased ends, as the runtime sends and receives.
        let spec = crate::TransportSpec::Threaded { capacity: 64 };
        let (mut tx, mut rx) = crate::StreamType::of::<u64>().connect(&spec).unwrap();
        for t in 0..5u64 {
            tx.offer_tuple(&mut Some(t)).unwrap();
        }
        tx.flush();
        let mut batches = Vec::new();
        let mut take = |delivery: crate::Delivery<'_>| {
            if let crate::Delivery::Batch(batch) = delivery {
                batches.push(batch.iter_as::<u64>().copied().collect::<Vec<_>>());
            }
            ControlFlow::Continue(())
        };
        rx.poll(1, &mut take).unwrap();
        assert_eq!(batches, [vec![0, 1, 2, 3, 4]]);
        let (mut tx, mut rx) = threaded_port::<u64>(64).unwrap();
        (0..5).for_each(|t| tx.offer(Message::Data(t)).unwrap());
        let barrier = Punctuation::Checkpoint { n: 1, from: 0 };
        tx.offer(Message::Punctuation(barrier)).unwrap();
        tx.offer(Message::Data(5)).unwrap();
        tx.flush();
        // A poll takes at least one frame, whatever it weighs: the five went as one.
        let mut out = Vec::new();
        assert_eq!(rx.poll(1, &mut out), Ok(5));
        assert_eq!(out, (0..5).map(Message::Data).collect::<Vec<_>>());
        assert_eq!(
            receive(&mut rx, &mut Runs::default()),
            [format!("{barrier:?}"), "[5]".into()]
        );
        // Gathered tuples count against the room before they are written.
        let (mut tx, mut rx) = threaded_port::<u64>(8).unwrap();
        (0..8).for_each(|t| tx.offer(Message::Data(t)).unwrap());
        assert_eq!(tx.room(), 0);
        let refused = tx.offer(Message::Data(8)).unwrap_err();
        assert_eq!(
            (refused.error, refused.message),
            (SendError::Full, Message::Data(8))
        );
        let mut out = Vec::new();
        assert_eq!(
            rx.poll(usize::MAX, &mut out),
            Ok(8),
            "the refusal published"
        );
        tx.offer(Message::Data(8)).unwrap();
        tx.offer(Message::EndOfStream).unwrap();
        drop(tx);
        out.clear();
        rx.poll(usize::MAX, &mut out).unwrap();
        assert_eq!(out, [Message::Data(8), Message::EndOfStream]);
    }

    #[test]
    fn input_is_reported_once_published_until_taken_and_when_the_sender_leaves() {
        let (mut tx, mut rx) = threaded_port::<u64>(16).unwrap();
        let mut runs = Runs::default();
        assert!(!rx.may_have_input());
        tx.offer(Message::Data(1)).unwrap();
        assert!(!rx.may_have_input(), "written is not published");
        tx.flush();
        assert!(rx.may_have_input());
        assert_eq!(receive(&mut rx, &mut runs), ["[1]"]);
        assert!(!rx.may_have_input());
        // A sender gone without ending its stream: the next poll has an error to report.
        drop(tx);
        assert!(rx.may_have_input());
        let (mut tx, mut rx) = threaded_port::<u64>(16).unwrap();
        tx.offer(Message::EndOfStream).unwrap();
        drop(tx);
        assert!(rx.may_have_input());
        assert_eq!(receive(&mut rx, &mut runs), ["end"]);
        assert!(!rx.may_have_input(), "an ended stream has nothing more");
    }

    #[test]
    fn runs_count_their_tuples_against_the_capacity_and_keep_their_place() {
        let (mut tx, mut rx) = threaded_port::<u64>(8).unwrap();
        let mut runs = Runs::default();
        tx.offer(Message::Data(0)).unwrap();
        // Seven more fit: the run is split, and the rest waits with the caller.
        let mut tuples: VecDeque<u64> = (1..=10).collect();
        assert_eq!(tx.offer_tuples(&mut tuples), Err(SendError::Full));
        assert_eq!(tuples, [8, 9, 10]);
        assert_eq!(tx.room(), 0);
        assert_eq!(rx.stats().queued, Some((8, 8)));
        // A single tuple goes as a run of its own, before the run after it.
        assert_eq!(
            receive(&mut rx, &mut runs),
            ["[0]", "[1, 2, 3, 4, 5, 6, 7]"]
        );
        tx.offer_tuples(&mut tuples).unwrap();
        let barrier = Punctuation::Checkpoint { n: 1, from: 0 };
        tx.offer(Message::Punctuation(barrier)).unwrap();
        tx.offer(Message::Data(11)).unwrap();
        tx.offer_tuples(&mut VecDeque::from(vec![12, 13])).unwrap();
        tx.offer(Message::EndOfStream).unwrap();
        tx.flush();
        assert_eq!(
            receive(&mut rx, &mut runs),
            [
                "[8, 9, 10]".to_string(),
                format!("{barrier:?}"),
                "[11]".into(),
                "[12, 13]".into(),
                "end".into()
            ]
        );
        drop(tx);
        assert_eq!(receive(&mut rx, &mut runs), Vec::<String>::new());
    }
}
