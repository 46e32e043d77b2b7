//! UDP in and out: one datagram is one tuple, its payload the tuple's encoding
//! ([`Tuple::encode`] / [`Tuple::decode`]).
//!
//! [`UdpSource`] binds to the address it is given (and no other), receives in batches with
//! `recvmmsg` ([`ReceiveRing`]) on a non-blocking socket, and says `Idle` when nothing came; a
//! datagram longer than its maximum or one that does not decode is counted and dropped
//! (`oversized_datagrams`, `undecodable_datagrams`). UDP has no end: the source runs until
//! the job stops (run it with parallelism 1: one socket per address).
//!
//! [`UdpSink`] sends each tuple as a datagram to an address; a tuple larger than a datagram
//! fails the job with both sizes. UDP delivers at most once: a datagram the network or a
//! full socket buffer drops is gone, and one refused by the destination (no one listening
//! there) is counted (`datagrams_refused`).

use std::io;
use std::marker::PhantomData;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

use sluice_graph::{
    expect_tuple, Operator, OperatorContext, OperatorError, OperatorReport, Output, Produced,
    Source,
};
use sluice_transport::datagram::{ReceiveRing, MAX_DATAGRAM};
use sluice_types::{Tuple, TupleRef};

use crate::net::OnBound;
use sluice_ops::counter_report;
use sluice_ops::SOURCE_BATCH;

/// Datagrams a [`UdpSource`] receives per system call at most.
const RECEIVE_SLOTS: usize = 64;

/// Hands up to `most` datagrams received through `ring` to `take`, in order; how many came.
pub(crate) fn receive(
    ring: &mut ReceiveRing,
    most: usize,
    mut take: impl FnMut(&[u8]),
) -> io::Result<usize> {
    let mut received = 0;
    while received < most {
        let Some(datagram) = ring.next(1)? else {
            break;
        };
        take(datagram);
        received += 1;
    }
    Ok(received)
}

/// `most` if it is a datagram size UDP can carry, else an error naming what was asked.
fn datagram_size(most: usize) -> Result<usize, OperatorError> {
    if (1..=MAX_DATAGRAM).contains(&most) {
        Ok(most)
    } else {
        Err(OperatorError::Failed(format!(
            "the largest datagram must be between 1 and {MAX_DATAGRAM} bytes, not {most}"
        )))
    }
}

/// A source emitting each datagram received on an address, decoded as `T` (see the module
/// doc).
pub struct UdpSource<T> {
    address: SocketAddr,
    on_bound: Option<OnBound>,
    max_datagram: usize,
    ring: Option<ReceiveRing>,
    datagrams: u64,
    oversized: u64,
    undecodable: u64,
    batch: Vec<T>,
}

impl<T: Tuple> UdpSource<T> {
    /// A source bound to `address`, taking datagrams of up to [`MAX_DATAGRAM`] bytes.
    pub fn new(address: SocketAddr) -> Self {
        Self {
            address,
            on_bound: None,
            max_datagram: MAX_DATAGRAM,
            ring: None,
            datagrams: 0,
            oversized: 0,
            undecodable: 0,
            batch: Vec::with_capacity(SOURCE_BATCH),
        }
    }

    /// Tells `report` the bound address (the port the system picked for port 0).
    pub fn on_bound(mut self, report: impl Fn(SocketAddr) + Send + Sync + 'static) -> Self {
        self.on_bound = Some(OnBound::new(report));
        self
    }

    /// Drops (and counts) datagrams longer than `bytes` (1 to [`MAX_DATAGRAM`]).
    pub fn max_datagram(mut self, bytes: usize) -> Self {
        self.max_datagram = bytes;
        self
    }

    /// Takes one datagram.
    fn take(&mut self, datagram: &[u8]) {
        self.datagrams += 1;
        if datagram.len() > self.max_datagram {
            self.oversized += 1;
            return;
        }
        match T::decode(datagram) {
            Ok(tuple) => self.batch.push(tuple),
            Err(_) => self.undecodable += 1,
        }
    }
}

impl<T: Tuple> sluice_ops::TypedSource for UdpSource<T> {
    type Out = T;
}

impl<T: Tuple> Source for UdpSource<T> {
    fn start(&mut self, _ctx: &OperatorContext) -> Result<(), OperatorError> {
        let max_datagram = datagram_size(self.max_datagram)?;
        let context = || format!("bind udp {}", self.address);
        let socket = UdpSocket::bind(self.address).map_err(|e| OperatorError::io(context(), e))?;
        socket
            .set_nonblocking(true)
            .map_err(|e| OperatorError::io(context(), e))?;
        if let Some(on_bound) = &self.on_bound {
            let bound = socket
                .local_addr()
                .map_err(|e| OperatorError::io(context(), e))?;
            on_bound.report(bound);
        }
        self.ring = Some(ReceiveRing::new(socket, RECEIVE_SLOTS, max_datagram));
        Ok(())
    }

    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let Some(mut ring) = self.ring.take() else {
            return Err(OperatorError::Failed(format!(
                "udp {} was not bound",
                self.address
            )));
        };
        let received = receive(&mut ring, SOURCE_BATCH, |datagram| self.take(datagram));
        self.ring = Some(ring);
        let received = received
            .map_err(|e| OperatorError::io(format!("receive on udp {}", self.address), e))?;
        let emitted = self.batch.len();
        out.emit_batch(0, &mut self.batch)?;
        Ok(if received == 0 {
            Produced::Idle
        } else {
            Produced::Emitted(emitted)
        })
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        Ok(counter_report(&[
            ("datagrams", self.datagrams),
            ("oversized_datagrams", self.oversized),
            ("undecodable_datagrams", self.undecodable),
            (
                "receive_system_calls",
                self.ring.as_ref().map_or(0, ReceiveRing::system_calls),
            ),
        ]))
    }
}

/// A sink sending each tuple as one datagram to an address (see the module doc). A datagram
/// cannot be taken back: through a recovery from a checkpoint it is at least once (and UDP
/// itself at most once).
pub struct UdpSink<T> {
    destination: SocketAddr,
    max_datagram: usize,
    socket: Option<UdpSocket>,
    bytes: Vec<u8>,
    sent: u64,
    refused: u64,
    tuples: PhantomData<fn(&T)>,
}

impl<T> UdpSink<T> {
    /// A sink sending to `destination` datagrams of up to [`MAX_DATAGRAM`] bytes.
    pub fn new(destination: SocketAddr) -> Self {
        Self {
            destination,
            max_datagram: MAX_DATAGRAM,
            socket: None,
            bytes: Vec::new(),
            sent: 0,
            refused: 0,
            tuples: PhantomData,
        }
    }

    /// Refuses tuples whose encoding is longer than `bytes` (1 to [`MAX_DATAGRAM`]; the path's
    /// MTU less the headers keeps datagrams whole on a network).
    pub fn max_datagram(mut self, bytes: usize) -> Self {
        self.max_datagram = bytes;
        self
    }
}

impl<T: Tuple> Operator for UdpSink<T> {
    fn start(&mut self, _ctx: &OperatorContext) -> Result<(), OperatorError> {
        self.max_datagram = datagram_size(self.max_datagram)?;
        let any: SocketAddr = match self.destination {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let context = || format!("send to udp {}", self.destination);
        let socket = UdpSocket::bind(any).map_err(|e| OperatorError::io(context(), e))?;
        socket
            .connect(self.destination)
            .map_err(|e| OperatorError::io(context(), e))?;
        self.socket = Some(socket);
        Ok(())
    }

    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let tuple = expect_tuple::<T>(port, tuple)?;
        self.bytes.clear();
        tuple
            .encode(&mut self.bytes)
            .map_err(|e| OperatorError::Failed(e.to_string()))?;
        if self.bytes.len() > self.max_datagram {
            return Err(OperatorError::Failed(format!(
                "a tuple of {} bytes does not fit in a datagram of at most {} bytes",
                self.bytes.len(),
                self.max_datagram
            )));
        }
        let Some(socket) = &self.socket else {
            return Err(OperatorError::Failed(format!(
                "udp {} was not connected",
                self.destination
            )));
        };
        let sent = loop {
            match socket.send(&self.bytes) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                sent => break sent,
            }
        };
        match sent {
            Ok(_) => self.sent += 1,
            // An earlier datagram found no one listening; this one was not sent.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => self.refused += 1,
            Err(e) => {
                return Err(OperatorError::io(
                    format!("send to udp {}", self.destination),
                    e,
                ));
            }
        }
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        self.socket = None;
        Ok(counter_report(&[
            ("datagrams_sent", self.sent),
            ("datagrams_refused", self.refused),
        ]))
    }
}
