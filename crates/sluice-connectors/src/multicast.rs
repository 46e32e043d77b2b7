//! A source that receives a UDP multicast feed (a market-data feed, say) and emits each
//! datagram's payload as a tuple, receiving in batches with `recvmmsg`
//! ([`sluice_transport::datagram::ReceiveRing`]).
//!
//! The source joins `group` on the interface whose address is `interface` and binds to the
//! group's address and `port` only, so it receives that group's datagrams and nothing else
//! sent to the port (with `SO_REUSEADDR`, so other programs on the host may listen to the same
//! feed). It opens its socket when the job starts, so an error names the operator.
//!
//! # Framing
//!
//! By default a datagram's whole payload is one tuple. With `sequenced` set, each datagram
//! starts with its sequence number, as MoldUDP64 and most exchange feeds do:
//!
//! ```text
//!  0                8
//!  +----------------+---------------------------+
//!  | sequence u64   | payload (the tuple)       |
//!  | big-endian     |                           |
//!  +----------------+---------------------------+
//! ```
//!
//! The source then counts gaps as lost datagrams and drops a datagram numbered below one it
//! has already seen (late, or the copy of an A/B feed's other line); a datagram shorter than
//! the prefix is dropped as malformed. Its counters go into the job summary
//! (`datagrams`, `lost_datagrams`, `late_datagrams`, `malformed_datagrams`,
//! `undecodable_datagrams`, and `receive_system_calls`, the `recvmmsg` calls that brought
//! them) and can be read with [`MulticastSource::counters`].
//!
//! Run it with parallelism 1: every instance would receive every datagram. A feed has no end:
//! the source runs until the job is stopped, and its `produce` says `Idle` when nothing came.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};

use sluice_graph::{OperatorContext, OperatorError, OperatorReport, Output, Produced, Source};
use sluice_transport::datagram::{ReceiveRing, MAX_BATCH, MAX_DATAGRAM};
use sluice_types::{BytesTuple, Tuple};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::udp::receive;
use sluice_ops::counter_report;
use sluice_ops::SOURCE_BATCH;

/// Bytes of a sequenced datagram's prefix.
pub const SEQUENCE_BYTES: usize = 8;

/// Where a feed is and how to read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MulticastConfig {
    /// The multicast group (224.0.0.0/4).
    pub group: Ipv4Addr,
    /// The feed's UDP port.
    pub port: u16,
    /// The address of the interface to join the group on (`127.0.0.1` for loopback).
    pub interface: Ipv4Addr,
    /// Datagrams received per system call at most (1 to 1024).
    pub batch: usize,
    /// The largest datagram; a longer one is dropped as malformed.
    pub max_datagram: usize,
    /// Whether each datagram starts with an 8-byte big-endian sequence number.
    pub sequenced: bool,
    /// The socket's receive buffer (`SO_RCVBUF`); `None` leaves the system's default.
    pub socket_buffer_bytes: Option<usize>,
}

impl MulticastConfig {
    /// A feed of `group:port` joined on `interface`, unsequenced, 64 datagrams per call of up
    /// to 2,048 bytes.
    pub fn new(group: Ipv4Addr, port: u16, interface: Ipv4Addr) -> Self {
        Self {
            group,
            port,
            interface,
            batch: 64,
            max_datagram: 2048,
            sequenced: false,
            socket_buffer_bytes: None,
        }
    }

    /// Opens the socket: bound to the group's address and port, a member of the group,
    /// non-blocking.
    pub fn open(&self) -> Result<UdpSocket, OperatorError> {
        let context = format!("join {}:{} on {}", self.group, self.port, self.interface);
        let invalid = |reason: String| OperatorError::Failed(format!("{context}: {reason}"));
        if !self.group.is_multicast() {
            return Err(invalid(format!("{} is not a multicast group", self.group)));
        }
        if !(1..=MAX_BATCH).contains(&self.batch) {
            return Err(invalid(format!(
                "batch must be between 1 and {MAX_BATCH}, got {}",
                self.batch
            )));
        }
        if !(1..=MAX_DATAGRAM).contains(&self.max_datagram) {
            return Err(invalid(format!(
                "max_datagram must be between 1 and {MAX_DATAGRAM}, got {}",
                self.max_datagram
            )));
        }
        let open = || -> std::io::Result<UdpSocket> {
            let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
            socket.set_reuse_address(true)?;
            if let Some(bytes) = self.socket_buffer_bytes {
                socket.set_recv_buffer_size(bytes)?;
            }
            let addr = SocketAddr::V4(SocketAddrV4::new(self.group, self.port));
            socket.bind(&SockAddr::from(addr))?;
            socket.join_multicast_v4(&self.group, &self.interface)?;
            socket.set_nonblocking(true)?;
            Ok(socket.into())
        };
        open().map_err(|e| OperatorError::io(context.clone(), e))
    }
}

/// What a [`MulticastSource`] has counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeedCounters {
    /// Datagrams received, whatever became of them.
    pub datagrams: u64,
    /// Datagrams missing from the sequence (sequenced feeds).
    pub lost: u64,
    /// Datagrams numbered below one already seen, dropped (sequenced feeds).
    pub late: u64,
    /// Datagrams too long, or too short for the sequence prefix, dropped.
    pub malformed: u64,
    /// Datagrams the decoder refused, dropped.
    pub undecodable: u64,
}

/// A source emitting one tuple per datagram of a multicast feed, decoded by `decode` (which
/// returns `None` for a payload it cannot read).
pub struct MulticastSource<T, F> {
    config: MulticastConfig,
    decode: F,
    ring: Option<ReceiveRing>,
    next_sequence: Option<u64>,
    counters: FeedCounters,
    batch: Vec<T>,
}

/// The decoder of [`MulticastSource::bytes`].
pub type BytesDecoder = fn(&[u8]) -> Option<BytesTuple>;

impl MulticastSource<BytesTuple, BytesDecoder> {
    /// A source emitting each payload as its bytes.
    pub fn bytes(config: MulticastConfig) -> Self {
        Self::new(config, |payload| Some(BytesTuple(payload.to_vec())))
    }
}

impl<T, F> MulticastSource<T, F>
where
    F: FnMut(&[u8]) -> Option<T>,
{
    /// A source emitting `decode(payload)` for each datagram.
    pub fn new(config: MulticastConfig, decode: F) -> Self {
        Self {
            config,
            decode,
            ring: None,
            next_sequence: None,
            counters: FeedCounters::default(),
            batch: Vec::with_capacity(SOURCE_BATCH),
        }
    }

    /// What the source has counted so far.
    pub fn counters(&self) -> FeedCounters {
        self.counters
    }

    /// Takes one datagram: checks its sequence number if the feed has them, decodes it.
    fn take(&mut self, datagram: &[u8]) {
        self.counters.datagrams += 1;
        if datagram.len() > self.config.max_datagram {
            self.counters.malformed += 1;
            return;
        }
        let payload = if self.config.sequenced {
            let Some((prefix, payload)) = datagram.split_first_chunk::<SEQUENCE_BYTES>() else {
                self.counters.malformed += 1;
                return;
            };
            let sequence = u64::from_be_bytes(*prefix);
            let expected = self.next_sequence.unwrap_or(sequence);
            if sequence < expected {
                self.counters.late += 1;
                return;
            }
            self.counters.lost += sequence - expected;
            self.next_sequence = Some(sequence.saturating_add(1));
            payload
        } else {
            datagram
        };
        match (self.decode)(payload) {
            Some(tuple) => self.batch.push(tuple),
            None => self.counters.undecodable += 1,
        }
    }
}

impl<T, F> sluice_ops::TypedSource for MulticastSource<T, F>
where
    T: Tuple,
    F: FnMut(&[u8]) -> Option<T> + Send,
{
    type Out = T;
}

impl<T, F> Source for MulticastSource<T, F>
where
    T: Tuple,
    F: FnMut(&[u8]) -> Option<T> + Send,
{
    fn start(&mut self, _ctx: &OperatorContext) -> Result<(), OperatorError> {
        let socket = self.config.open()?;
        self.ring = Some(ReceiveRing::new(
            socket,
            self.config.batch,
            self.config.max_datagram,
        ));
        Ok(())
    }

    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let Some(mut ring) = self.ring.take() else {
            return Err(OperatorError::Failed("the feed was not opened".into()));
        };
        let received = receive(&mut ring, SOURCE_BATCH, |datagram| self.take(datagram));
        self.ring = Some(ring);
        let received = received.map_err(|e| {
            OperatorError::io(
                format!("receive from {}:{}", self.config.group, self.config.port),
                e,
            )
        })?;
        let emitted = self.batch.len();
        out.emit_batch(0, &mut self.batch)?;
        Ok(match (received, emitted) {
            (0, _) => Produced::Idle,
            (_, n) => Produced::Emitted(n),
        })
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        let c = self.counters;
        Ok(counter_report(&[
            ("datagrams", c.datagrams),
            ("lost_datagrams", c.lost),
            ("late_datagrams", c.late),
            ("malformed_datagrams", c.malformed),
            ("undecodable_datagrams", c.undecodable),
            (
                "receive_system_calls",
                self.ring.as_ref().map_or(0, ReceiveRing::system_calls),
            ),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequenced() -> MulticastSource<BytesTuple, BytesDecoder> {
        let mut config =
            MulticastConfig::new(Ipv4Addr::new(239, 1, 1, 1), 5000, Ipv4Addr::LOCALHOST);
        config.sequenced = true;
        config.max_datagram = 32;
        MulticastSource::bytes(config)
    }

    fn numbered(sequence: u64, payload: &[u8]) -> Vec<u8> {
        let mut d = sequence.to_be_bytes().to_vec();
        d.extend_from_slice(payload);
        d
    }

    #[test]
    fn gaps_are_lost_and_older_numbers_are_late() {
        let mut source = sequenced();
        for (sequence, payload) in [(10, b"a"), (11, b"b"), (14, b"c"), (12, b"d"), (15, b"e")] {
            source.take(&numbered(sequence, payload));
        }
        source.take(b"short");
        source.take(&[0; 40]);
        let payloads: Vec<&[u8]> = source.batch.iter().map(|t| t.0.as_slice()).collect();
        assert_eq!(payloads, [b"a", b"b", b"c", b"e"]);
        assert_eq!(
            source.counters(),
            FeedCounters {
                datagrams: 7,
                lost: 2,
                late: 1,
                malformed: 2,
                undecodable: 0,
            }
        );
    }

    #[test]
    fn a_bad_group_or_batch_is_a_clear_error() {
        let mut config =
            MulticastConfig::new(Ipv4Addr::new(10, 0, 0, 1), 5000, Ipv4Addr::LOCALHOST);
        assert_eq!(
            config.open().unwrap_err().to_string(),
            "join 10.0.0.1:5000 on 127.0.0.1: 10.0.0.1 is not a multicast group"
        );
        config.group = Ipv4Addr::new(239, 1, 1, 1);
        config.batch = 0;
        assert_eq!(
            config.open().unwrap_err().to_string(),
            "join 239.1.1.1:5000 on 127.0.0.1: batch must be between 1 and 1024, got 0"
        );
    }
}
