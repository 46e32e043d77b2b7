//! A source receiving tuples over TCP, line-framed (`String`) or length-framed (any tuple,
//! `BytesTuple` for raw payloads), as [`framing`](crate::framing) describes. (Tuples are sent
//! over TCP by a [`StreamSink`](crate::StreamSink) with a
//! [`ByteTarget::Tcp`](crate::ByteTarget::Tcp).)
//!
//! Listening ([`TcpEndpoint::Listen`]), the source binds to the address it is given and
//! accepts any number of connections, each read to its end; it runs until the job stops, or
//! until [`TcpSource::end_after`] connections have ended (run it with parallelism 1: one
//! listener per address). Connecting
//! ([`TcpEndpoint::Connect`]), it reads the one connection to the server and ends with it.
//!
//! Every socket is non-blocking: a `produce` call accepts what is waiting, reads each
//! connection at most once (taking them in turn, so a busy one does not starve the others)
//! and says `Idle` when nothing came, so a stop is never stuck behind a silent peer. A
//! connection that breaks the framing (a frame longer than the maximum) is closed and
//! counted; one that fails or ends inside a frame is counted too, and never fails the job.
//! Counters: `connections`, `connection_errors`, and the framing's (`oversized_frames`,
//! `truncated_frames`, `undecodable_frames`; or `invalid_utf8_lines`, `oversized_lines`).

use std::io;
use std::net::{TcpListener, TcpStream};

use sluice_graph::{OperatorContext, OperatorError, OperatorReport, Output, Produced, Source};
use sluice_types::Tuple;

use crate::framing::{
    FrameCounters, FrameDecoder, FrameReader, LengthDecoder, LineDecoder, Pulled,
};
use crate::net::TcpEndpoint;
use sluice_ops::counter_report;
use sluice_ops::SOURCE_BATCH;

/// Connections a listening source accepts per `produce` call at most.
const ACCEPTS_PER_CALL: usize = 16;

/// A source emitting the tuples that arrive over TCP connections, cut by `D` (see the module
/// doc).
pub struct TcpSource<D: FrameDecoder> {
    endpoint: TcpEndpoint,
    decoder: D,
    end_after: Option<u64>,
    listener: Option<TcpListener>,
    connections: Vec<FrameReader<TcpStream, D>>,
    /// The connection read first in the next call.
    next: usize,
    accepted: u64,
    closed: u64,
    errors: u64,
    counters: FrameCounters,
    batch: Vec<D::Tuple>,
}

impl TcpSource<LineDecoder> {
    /// A source of `String` lines (at most [`DEFAULT_MAX_FRAME`](crate::DEFAULT_MAX_FRAME)
    /// bytes each).
    pub fn lines(endpoint: TcpEndpoint) -> Self {
        Self::new(endpoint, LineDecoder::default())
    }
}

impl<T: Tuple> TcpSource<LengthDecoder<T>> {
    /// A source of length-prefixed frames decoded as `T` (at most
    /// [`DEFAULT_MAX_FRAME`](crate::DEFAULT_MAX_FRAME) bytes each).
    pub fn frames(endpoint: TcpEndpoint) -> Self {
        Self::new(endpoint, LengthDecoder::default())
    }
}

impl<D: FrameDecoder> TcpSource<D> {
    /// A source reading `endpoint`'s connections, each cut by a copy of `decoder`.
    pub fn new(endpoint: TcpEndpoint, decoder: D) -> Self {
        Self {
            endpoint,
            decoder,
            end_after: None,
            listener: None,
            connections: Vec::new(),
            next: 0,
            accepted: 0,
            closed: 0,
            errors: 0,
            counters: FrameCounters::default(),
            batch: Vec::with_capacity(SOURCE_BATCH),
        }
    }

    /// A listening source ends once `connections` connections have been accepted and have
    /// ended (it accepts no more).
    pub fn end_after(mut self, connections: u64) -> Self {
        self.end_after = Some(connections);
        self
    }

    /// Adds a connected stream, made non-blocking.
    fn add(&mut self, stream: TcpStream) -> Result<(), OperatorError> {
        stream
            .set_nonblocking(true)
            .map_err(|e| OperatorError::io(format!("read {}", self.endpoint.address()), e))?;
        self.connections
            .push(FrameReader::new(stream, self.decoder.clone()));
        self.accepted += 1;
        Ok(())
    }

    /// Accepts the connections waiting, a bounded number; whether any came.
    fn accept(&mut self) -> Result<bool, OperatorError> {
        let mut any = false;
        for _ in 0..ACCEPTS_PER_CALL {
            if self.end_after.is_some_and(|most| self.accepted >= most) {
                self.listener = None;
            }
            let Some(listener) = &self.listener else {
                break;
            };
            match listener.accept() {
                Ok((stream, _)) => {
                    self.add(stream)?;
                    any = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // The peer gave up before we took it: nothing to read.
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => self.errors += 1,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(OperatorError::io(
                        format!("accept on {}", self.endpoint.address()),
                        e,
                    ));
                }
            }
        }
        Ok(any)
    }

    /// Reads each connection at most once, in turn, until the batch is full; closes those
    /// that ended or failed. Whether anything happened.
    fn read_connections(&mut self) -> bool {
        let count = self.connections.len();
        let mut any = false;
        let mut done = Vec::new();
        for k in 0..count {
            if self.batch.len() >= SOURCE_BATCH {
                break;
            }
            let i = (self.next + k) % count;
            match self.connections[i].pull(&mut self.batch, SOURCE_BATCH, &mut self.counters) {
                Ok(Pulled::Open { arrived }) => any |= arrived,
                Ok(Pulled::Ended | Pulled::Oversized { .. }) => done.push(i),
                Err(_) => {
                    self.errors += 1;
                    done.push(i);
                }
            }
        }
        any |= !done.is_empty();
        done.sort_unstable();
        for i in done.into_iter().rev() {
            self.connections.swap_remove(i);
            self.closed += 1;
        }
        self.next = (self.next + 1) % self.connections.len().max(1);
        any
    }

    /// Whether no tuple can come any more.
    fn exhausted(&self) -> bool {
        if !self.connections.is_empty() {
            return false;
        }
        match &self.endpoint {
            TcpEndpoint::Connect(_) => true,
            TcpEndpoint::Listen(_) => self.end_after.is_some_and(|n| self.closed >= n),
        }
    }
}

impl<D: FrameDecoder> sluice_ops::TypedSource for TcpSource<D> {
    type Out = D::Tuple;
}

impl<D: FrameDecoder> Source for TcpSource<D> {
    fn start(&mut self, _ctx: &OperatorContext) -> Result<(), OperatorError> {
        match &self.endpoint {
            TcpEndpoint::Listen(listen) => self.listener = Some(listen.bind()?),
            TcpEndpoint::Connect(_) => {
                let stream = self.endpoint.open_one()?;
                self.add(stream)?;
            }
        }
        Ok(())
    }

    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let accepted = self.accept()?;
        let read = self.read_connections();
        let emitted = self.batch.len();
        out.emit_batch(0, &mut self.batch)?;
        Ok(if emitted > 0 || accepted || read {
            Produced::Emitted(emitted)
        } else if self.exhausted() {
            Produced::Exhausted
        } else {
            Produced::Idle
        })
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        self.connections.clear();
        self.listener = None;
        let mut report = counter_report(&[
            ("connections", self.accepted),
            ("connection_errors", self.errors),
        ]);
        D::report(&self.counters, &mut report);
        Ok(report)
    }
}
