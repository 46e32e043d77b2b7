//! The sending end of an `mpi` edge: fills a batch, sends it with `MPI_Isend` when it is full
//! or flushed and a credit allows, and takes credits back from the receiver. A tuple longer
//! than the largest goes out in parts, as many batches as it takes, as credits allow: until
//! its last part is in a batch, other offers are refused as full.

use std::marker::PhantomData;
use std::time::{Duration, Instant};

use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::{Equivalence, Source};
use sluice_types::{Message, Tuple};

use super::params::MpiParams;
use super::request::OwnedSend;
use super::wire::{self, BatchWriter, Control, Framing};
use super::{session, Route};
use crate::parts::{Outgoing, SendsInParts};
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
    /// A tuple going out in parts (its encoding, in what was `scratch`), not all in batches
    /// yet.
    outgoing: Option<Outgoing>,
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
        outgoing: None,
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

    /// Ships a batch that is too full for another record, if a credit allows.
    fn ship_if_full(&mut self) {
        if !self.batch.fits_control() {
            self.ship();
        }
    }

    /// Appends a tuple's `encoding` to the batch, or starts sending it in parts if it is
    /// longer than the largest tuple; `encoding` is what was `scratch`, and comes back to it
    /// once the sender is done with it.
    fn send_encoded(&mut self, encoding: Vec<u8>) -> Result<(), SendError> {
        if self.framing.in_parts(encoding.len()) {
            self.outgoing = Some(Outgoing::new(encoding));
            // The tuple is taken: what does not fit now follows on later offers and flushes.
            return match self.finish_outgoing() {
                Ok(()) | Err(SendError::Full) => Ok(()),
                Err(error) => Err(error),
            };
        }
        let fits = self.batch.fits_tuple(&self.framing, encoding.len());
        let outcome = self.room_for(fits);
        if outcome.is_ok() {
            self.batch.push_tuple(&self.framing, &encoding);
            // A full batch goes at once if a credit allows.
            self.ship_if_full();
        }
        self.scratch = encoding;
        outcome
    }
}

impl<T> SendsInParts for MpiSender<T> {
    fn outgoing(&mut self) -> &mut Option<Outgoing> {
        &mut self.outgoing
    }

    fn spare(&mut self) -> &mut Vec<u8> {
        &mut self.scratch
    }

    /// Puts a part into the batch, shipping the batch first if the part does not fit it and
    /// after if it is full: `Full` while the batch waits for a credit.
    fn write_part(&mut self, rest: &[u8]) -> Result<usize, SendError> {
        let len = self.framing.part_len(rest.len());
        self.room_for(self.batch.fits_part(len))?;
        self.batch.push_part(&rest[..len], len == rest.len());
        self.ship_if_full();
        Ok(len)
    }
}

impl<T: Tuple> TupleSender<T> for MpiSender<T> {
    fn offer(&mut self, message: Message<T>) -> Result<(), Refused<T>> {
        let refuse = |error, message| Err(Refused { error, message });
        if self.ended {
            return refuse(SendError::Closed, message);
        }
        if let Err(error) = self.finish_outgoing() {
            return refuse(error, message);
        }
        let control = match &message {
            Message::Data(tuple) => {
                let mut scratch = std::mem::take(&mut self.scratch);
                let outcome = match wire::encode(&self.framing, tuple, &mut scratch) {
                    Ok(()) => self.send_encoded(scratch),
                    Err(error) => {
                        self.scratch = scratch;
                        Err(error)
                    }
                };
                return outcome.or_else(|error| refuse(error, message));
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
        // A refusal here is the next offer's to report.
        let _ = self.finish_outgoing();
        self.ship();
    }

    fn pending(&self) -> bool {
        self.outgoing.is_some() || !self.batch.is_empty() || !self.in_flight.is_empty()
    }
}

impl<T> Drop for MpiSender<T> {
    fn drop(&mut self) {
        // A stream dropped without its end says so, so the receiver reports the loss instead
        // of waiting for more; a tuple whose parts are not all out is lost with it (the
        // receiver drops the parts it has).
        self.outgoing = None;
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
