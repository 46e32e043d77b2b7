//! The receiving end of an `mpi` edge: polls with `MPI_Improbe` (never a blocking
//! `MPI_Recv`, so the PE's thread stays free to see a stop or an abort), receives a matched
//! batch only after checking its length, decodes it, and returns a credit to its sender.

use std::collections::VecDeque;
use std::marker::PhantomData;

use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::{Equivalence, Source};
use sluice_types::{Message, Tuple};

use super::params::MpiParams;
use super::request::OwnedSend;
use super::wire::{self, Ending, Framing};
use super::{session, Route};
use crate::parts::Reassembly;
use crate::{RecvError, TransportError, TupleReceiver};

/// What the receiver knows of one sender of its channel.
#[derive(Debug, Default)]
struct Peer {
    /// The rank its batches come from, once one came.
    rank: Option<i32>,
    /// Its stream ended.
    ended: bool,
    /// The parts of its tuple larger than the largest, received so far (they may span many
    /// batches).
    parts: Reassembly,
}

/// The receiving end of one `mpi` edge, for all of its senders.
pub struct MpiReceiver<T> {
    route: Route,
    framing: Framing,
    peers: Vec<Peer>,
    /// Space for one batch, sized to each batch after its length is checked.
    buffer: Vec<u8>,
    /// Messages of the last batch not yet delivered.
    decoded: VecDeque<Message<T>>,
    /// Decoding space for one batch.
    scratch: Vec<Message<T>>,
    /// Credits on their way back to senders.
    credits: Vec<OwnedSend>,
    /// Why the edge is broken, reported once what arrived before is delivered.
    failure: Option<RecvError>,
    _tuples: PhantomData<fn() -> T>,
}

/// Binds the receiving end of channel `route.channel` in this process (rank
/// `route.receiver`) for `senders` senders.
pub fn bind_receiver<T: Tuple>(
    route: Route,
    senders: usize,
    params: &MpiParams,
) -> Result<MpiReceiver<T>, TransportError> {
    let framing = Framing::new::<T>(params)?;
    session::check_ready()?;
    route.check()?;
    let last = u32::try_from(senders.saturating_sub(1)).unwrap_or(u32::MAX);
    Route {
        sender: last,
        ..route
    }
    .check()?;
    let own = super::request::own_rank();
    if own != route.receiver {
        return Err(TransportError::Setup(format!(
            "the mpi transport: the receiver of channel {} belongs to rank {}, this is rank {own}",
            route.channel, route.receiver
        )));
    }
    Ok(MpiReceiver {
        route,
        framing,
        peers: std::iter::repeat_with(Peer::default)
            .take(senders)
            .collect(),
        buffer: Vec::new(),
        decoded: VecDeque::new(),
        scratch: Vec::new(),
        credits: Vec::new(),
        failure: None,
        _tuples: PhantomData,
    })
}

impl<T: Tuple> MpiReceiver<T> {
    /// Receives and decodes the next batch that arrived, if any; returns whether one did.
    fn take_batch(&mut self) -> Result<bool, RecvError> {
        let world = SimpleCommunicator::world();
        let Some((message, status)) = world
            .any_process()
            .immediate_matched_probe_with_tag(self.route.data_tag())
        else {
            return Ok(false);
        };
        // The length is checked before anything is received: a batch longer than this end's
        // limit is never received (receiving it would mean allocating what the peer says, or
        // a truncation MPI treats as fatal); it is forgotten, matched but unreceived, and
        // poisons the edge.
        let Some(len) = usize::try_from(status.count(u8::equivalent_datatype()))
            .ok()
            .filter(|&len| len <= self.framing.message_limit())
        else {
            std::mem::forget(message);
            return Err(RecvError::Malformed);
        };
        self.buffer.resize(len, 0);
        message.matched_receive_into(&mut self.buffer[..]);
        let source = status.source_rank();
        let index = wire::sender_of(&self.buffer, self.peers.len())?;
        let peer = &mut self.peers[index];
        if peer.ended || peer.rank.is_some_and(|rank| rank != source) {
            return Err(RecvError::Malformed);
        }
        peer.rank = Some(source);
        self.scratch.clear();
        let ending = wire::decode(
            &self.framing,
            &self.buffer,
            &mut peer.parts,
            &mut self.scratch,
        )?;
        self.decoded.extend(self.scratch.drain(..));
        match ending {
            Ending::Open => {
                let credit_tag = Route {
                    sender: index as u32,
                    ..self.route
                }
                .credit_tag();
                self.credits
                    .push(OwnedSend::start(source, credit_tag, Vec::new()));
            }
            Ending::Ended => self.peers[index].ended = true,
            Ending::Abandoned => {
                self.peers[index].ended = true;
                self.failure = Some(RecvError::Disconnected);
            }
        }
        Ok(true)
    }
}

impl<T: Tuple> TupleReceiver<T> for MpiReceiver<T> {
    fn poll(&mut self, max: usize, out: &mut Vec<Message<T>>) -> Result<usize, RecvError> {
        self.credits.retain_mut(|send| !send.test());
        let mut received = 0;
        while received < max {
            if !self.decoded.is_empty() {
                let n = self.decoded.len().min(max - received);
                out.extend(self.decoded.drain(..n));
                received += n;
                continue;
            }
            if self.failure.is_some() {
                break;
            }
            match self.take_batch() {
                Ok(true) => {}
                Ok(false) => break,
                Err(error) => {
                    self.failure = Some(error);
                    self.decoded.clear();
                    break;
                }
            }
        }
        match &self.failure {
            Some(failure) if received == 0 => Err(failure.clone()),
            _ => Ok(received),
        }
    }
}

impl<T> Drop for MpiReceiver<T> {
    fn drop(&mut self) {
        // Tell every sender still streaming that nothing more will be read, so its next offer
        // is refused as closed instead of waiting for credits forever.
        static CLOSING: [u8; 1] = [0];
        for (index, peer) in self.peers.iter().enumerate() {
            if let (Some(rank), false) = (peer.rank, peer.ended) {
                let tag = Route {
                    sender: index as u32,
                    ..self.route
                }
                .credit_tag();
                drop(OwnedSend::start(rank, tag, CLOSING.to_vec()));
            }
        }
    }
}
