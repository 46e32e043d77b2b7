//! The sending end of an `mpi` edge: fills a batch, sends it with `MPI_Isend` when it is full
//! or flushed and a credit allows, and takes credits back from the receiver.

use std::marker::PhantomData;
use std::time::{Duration, Instant};

use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::{Equivalence, Source};
use sluice_types::{Message, Tuple};

use super::params::MpiParams;
use super::request::OwnedSend;
use super::wire::{self, BatchWriter, Control, Framing};
use super::{session, Route};
use crate::{Refused, SendError, TransportError, TupleSender};

/// How long dropping a sender waits for its last batches to be taken.
pub const DROP_DRAIN: Duration = Duration::from_secs(2);

/// The sending end of one `mpi` edge (one of possibly several senders of a channel).
pub struct MpiSender<T> {
    route: Route,
    framing: Framing,
    /// The batch being filled.
    batch: BatchWriter,
    /// Batches this sender may still send before the receiver returns a credit.
    credit: usize,
    /// The edge's credit: the most batches in flight.
    credit_limit: usize,
    /// Sends in flight, oldest first.
    in_flight: Vec<OwnedSend>,
    /// Buffers of complete sends, for the next batches.
    spare: Vec<Vec<u8>>,
    /// Encoding space for one tuple.
    scratch: Vec<u8>,
    /// The end of the stream is in the batch or sent: nothing more is accepted.
    ended: bool,
    /// The receiver said it is gone, or broke the credit protocol.
    closed: bool,
    _tuples: PhantomData<fn(T)>,
}

/// Opens the sending end of the channel of `route`, sender `route.sender` of it.
pub fn open_sender<T: Tuple>(
    route: Route,
    params: &MpiParams,
) -> Result<MpiSender<T>, TransportError> {
    let framing = Framing::new::<T>(params)?;
    session::check_ready()?;
    route.check()?;
    Ok(MpiSender {
        route,
        framing,
        batch: BatchWriter::new(route.sender, params.batch_bytes),
        credit: params.credit,
        credit_limit: params.credit,
        in_flight: Vec::new(),
        spare: Vec::new(),
        scratch: Vec::new(),
        ended: false,
        closed: false,
        _tuples: PhantomData,
    })
}

impl<T> MpiSender<T> {
    /// Takes the credits (and a closing notice) the receiver sent back.
    fn take_credits(&mut self) {
        let world = SimpleCommunicator::world();
        let receiver = world.process_at_rank(self.route.receiver);
        let tag = self.route.credit_tag();
        while let Some((message, status)) = receiver.immediate_matched_probe_with_tag(tag) {
            // A credit is an empty message; a closing notice is one byte. Anything longer is
            // not received (MPI would refuse to truncate it): the edge is treated as closed.
            let len = status.count(u8::equivalent_datatype());
            let mut notice = [0u8; 1];
            match len {
                0 => {
                    message.matched_receive_into(&mut notice[..0]);
                    // Never more than the edge grants, whatever a peer sends.
                    self.credit = (self.credit + 1).min(self.credit_limit);
                }
                1 => {
                    message.matched_receive_into(&mut notice[..]);
                    self.closed = true;
                }
                _ => {
                    // Left matched but unreceived, like an overlong batch at a receiver.
                    std::mem::forget(message);
                    self.closed = true;
                    return;
                }
            }
        }
    }

    /// Tests the sends in flight and keeps the buffers of complete ones.
    fn reap(&mut self) {
        let mut i = 0;
        while i < self.in_flight.len() {
            if self.in_flight[i].test() {
                if let Some(buffer) = self.in_flight.swap_remove(i).into_buffer() {
                    self.spare.push(buffer);
                }
            } else {
                i += 1;
            }
        }
    }

    /// Sends the batch if it holds anything and a credit allows; returns whether it is empty.
    fn ship(&mut self) -> bool {
        if self.batch.is_empty() {
            return true;
        }
        if self.credit == 0 {
            self.take_credits();
        }
        if self.credit == 0 || self.closed {
            return false;
        }
        self.credit -= 1;
        let bytes = self.batch.take(self.spare.pop().unwrap_or_default());
        let tag = self.route.data_tag();
        self.in_flight
            .push(OwnedSend::start(self.route.receiver, tag, bytes));
        true
    }

    /// Makes room for a record: ships a batch it does not fit.
    fn room_for(&mut self, fits: bool) -> Result<(), SendError> {
        if self.closed {
            return Err(SendError::Closed);
        }
        if fits || self.ship() {
            Ok(())
        } else if self.closed {
            Err(SendError::Closed)
        } else {
            Err(SendError::Full)
        }
    }
}

impl<T: Tuple> TupleSender<T> for MpiSender<T> {
    fn offer(&mut self, message: Message<T>) -> Result<(), Refused<T>> {
        let refuse = |error, message| Err(Refused { error, message });
        if self.ended {
            return refuse(SendError::Closed, message);
        }
        let control = match &message {
            Message::Data(tuple) => {
                let mut scratch = std::mem::take(&mut self.scratch);
                let outcome = wire::encode(&self.framing, tuple, &mut scratch).and_then(|()| {
                    let fits = self.batch.fits_tuple(&self.framing, scratch.len());
                    self.room_for(fits)
                });
                if outcome.is_ok() {
                    self.batch.push_tuple(&self.framing, &scratch);
                }
                self.scratch = scratch;
                return match outcome {
                    Ok(()) if !self.batch.fits_control() => {
                        // A full batch goes at once if a credit allows.
                        self.ship();
                        Ok(())
                    }
                    Ok(()) => Ok(()),
                    Err(error) => refuse(error, message),
                };
            }
            Message::Punctuation(punctuation) => Control::Punctuation(*punctuation),
            Message::EndOfStream => Control::End,
        };
        let fits = self.batch.fits_control();
        if let Err(error) = self.room_for(fits) {
            return refuse(error, message);
        }
        self.batch.push_control(control);
        self.ended = control == Control::End;
        Ok(())
    }

    fn flush(&mut self) {
        self.reap();
        self.take_credits();
        self.ship();
    }

    fn pending(&self) -> bool {
        !self.batch.is_empty() || !self.in_flight.is_empty()
    }
}

impl<T> Drop for MpiSender<T> {
    fn drop(&mut self) {
        // A stream dropped without its end says so, so the receiver reports the loss instead
        // of waiting for more.
        let mut abandon = !self.ended && !self.closed;
        let deadline = Instant::now() + DROP_DRAIN;
        loop {
            self.reap();
            self.take_credits();
            if abandon && self.batch.fits_control() {
                self.batch.push_control(Control::Abandoned);
                abandon = false;
            }
            let shipped = self.closed || self.ship();
            let done = !abandon && shipped && self.in_flight.is_empty();
            if done || Instant::now() >= deadline {
                break;
            }
            std::thread::yield_now();
        }
        // Sends still in flight leak their buffers (see `OwnedSend`'s drop).
    }
}
