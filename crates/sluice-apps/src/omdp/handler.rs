//! The feed handler: one per channel (instance `i` of the `fh` operator handles channel `i`),
//! a source that receives the channel's packets, decodes them, stamps their arrival and passes
//! each message on port 0, whose edge routes it to the decision engine of its underlying
//! symbol.
//!
//! Packets come in batches from one `recvmmsg` ([`ReceiveRing`]); every packet of a batch gets
//! the batch's arrival stamp, taken right after the call returned. A packet the decoder
//! refuses (truncated, corrupt, another channel's) is counted as malformed and skipped; a
//! packet that starts before the end of what was seen (late, or a duplicate) is counted as
//! late and skipped; messages missing before a packet are counted as missed
//! ([`SequenceGaps`]). Neither stops
//! the handler. Every [`INGEST_EVERY`] packets, and when it stops, the handler sends its counts
//! to the ingest metrics collector on port 1.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};

use sluice_feed::{decode_packet, Message, Observed, SequenceGaps};
use sluice_graph::{OperatorContext, OperatorError, OperatorReport, Output, Produced, Source};
use sluice_ops::MulticastConfig;
use sluice_transport::datagram::ReceiveRing;
use sluice_types::monotonic_ns;

use super::tick::{IngestTick, Tick, INGEST_EVERY};

/// Packets received per system call at most.
const RECEIVE_BATCH: usize = 64;
/// The largest packet taken; a longer one is malformed (a packet fits an Ethernet MTU).
const MAX_PACKET: usize = 2048;

/// Where a channel's packets arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// A multicast group joined on the loopback interface.
    Multicast(SocketAddrV4),
    /// A unicast address bound on this host.
    Unicast(SocketAddrV4),
}

impl Endpoint {
    /// The address the feed sender sends to.
    pub fn address(&self) -> SocketAddrV4 {
        match *self {
            Self::Multicast(a) | Self::Unicast(a) => a,
        }
    }

    /// Opens a non-blocking socket that receives what is sent to the endpoint, with a receive
    /// buffer of `buffer_bytes` (the kernel caps it at `net.core.rmem_max`).
    fn open(&self, buffer_bytes: usize) -> Result<UdpSocket, OperatorError> {
        match *self {
            Self::Multicast(group) => {
                let mut config =
                    MulticastConfig::new(*group.ip(), group.port(), Ipv4Addr::LOCALHOST);
                config.socket_buffer_bytes = Some(buffer_bytes);
                config.max_datagram = MAX_PACKET;
                config.open()
            }
            Self::Unicast(address) => {
                let context = format!("bind {address}");
                let open = || -> std::io::Result<UdpSocket> {
                    let socket = UdpSocket::bind(address)?;
                    socket2::SockRef::from(&socket).set_recv_buffer_size(buffer_bytes)?;
                    socket.set_nonblocking(true)?;
                    Ok(socket)
                };
                open().map_err(|e| OperatorError::io(context, e))
            }
        }
    }
}

/// The output port of the messages.
const MESSAGES: usize = 0;
/// The output port of the counts for the ingest collector.
const INGEST: usize = 1;

/// The feed handler of one channel.
pub struct FeedHandler {
    /// Where each channel's packets arrive; this handler's is its instance's.
    endpoints: Vec<Endpoint>,
    channel: u16,
    endpoint: Option<Endpoint>,
    buffer_bytes: usize,
    /// A message whose sequence number is a multiple of this is sampled.
    sample_every: u64,
    ring: Option<ReceiveRing>,
    messages: Vec<Message>,
    /// The channel's sequence, from its first packet on.
    gaps: SequenceGaps,
    counts: IngestTick,
    /// Arrival of the first and the last packet.
    first_ns: u64,
    last_ns: u64,
}

impl FeedHandler {
    /// A handler of one of the channels whose packets arrive at `endpoints`, with a socket
    /// receive buffer of `buffer_bytes`, stamping the exit of one message in `sample_every`.
    pub fn new(endpoints: Vec<Endpoint>, buffer_bytes: usize, sample_every: u64) -> Self {
        Self {
            endpoints,
            channel: 0,
            endpoint: None,
            buffer_bytes,
            sample_every,
            ring: None,
            messages: Vec::new(),
            gaps: SequenceGaps::default(),
            counts: IngestTick::default(),
            first_ns: 0,
            last_ns: 0,
        }
    }

    /// Decodes one packet received at `arrived` and passes its messages on.
    fn take(
        &mut self,
        packet: &[u8],
        arrived: u64,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let header = match decode_packet(packet, &mut self.messages) {
            Ok(header) if header.channel == self.channel => header,
            _ => {
                self.counts.malformed += 1;
                return Ok(());
            }
        };
        if self.gaps.observe(&header) == Observed::Late {
            self.counts.late = self.gaps.late_packets();
            return Ok(());
        }
        if self.first_ns == 0 {
            self.first_ns = arrived;
        }
        self.last_ns = arrived;
        self.counts.packets += 1;
        for message in &self.messages {
            let mut tick = Tick::new(message, self.channel, header.sent_ns, arrived);
            if message.seq.is_multiple_of(self.sample_every) {
                tick.fh_out_ns = monotonic_ns();
            }
            out.emit(MESSAGES, tick)?;
        }
        self.counts.messages = self.gaps.received();
        self.counts.missed = self.gaps.missed();
        if self.counts.packets.is_multiple_of(INGEST_EVERY) {
            out.emit(INGEST, self.counts)?;
        }
        Ok(())
    }
}

impl Source for FeedHandler {
    fn start(&mut self, ctx: &OperatorContext) -> Result<(), OperatorError> {
        let endpoint = *self.endpoints.get(ctx.instance).ok_or_else(|| {
            OperatorError::Failed(format!(
                "instance {} of {} has no channel: the feed has {}",
                ctx.instance,
                ctx.parallelism,
                self.endpoints.len()
            ))
        })?;
        self.channel = ctx.instance as u16;
        self.counts.channel = ctx.instance as u64;
        self.endpoint = Some(endpoint);
        let socket = endpoint.open(self.buffer_bytes)?;
        self.ring = Some(ReceiveRing::new(socket, RECEIVE_BATCH, MAX_PACKET));
        Ok(())
    }

    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let Some(mut ring) = self.ring.take() else {
            return Err(OperatorError::Failed("the feed was not opened".into()));
        };
        let result = (|| {
            let endpoint = self.endpoint;
            let receive_error = move |e| {
                let address = endpoint.map_or(String::new(), |e| e.address().to_string());
                OperatorError::io(format!("receive from {address}"), e)
            };
            if ring.refill().map_err(receive_error)? == 0 {
                return Ok(Produced::Idle);
            }
            let arrived = monotonic_ns();
            let before = self.counts.messages;
            while ring.ready() > 0 {
                let Some(packet) = ring.next(1).map_err(receive_error)? else {
                    break;
                };
                if packet.len() > MAX_PACKET {
                    self.counts.malformed += 1;
                    continue;
                }
                self.take(packet, arrived, out)?;
            }
            Ok(Produced::Emitted((self.counts.messages - before) as usize))
        })();
        self.ring = Some(ring);
        result
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<(), OperatorError> {
        out.emit(INGEST, self.counts)
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        Ok(sluice_ops::counter_report(&[
            ("packets", self.counts.packets),
            ("messages", self.counts.messages),
            ("malformed_packets", self.counts.malformed),
            ("late_packets", self.counts.late),
            ("missed_messages", self.counts.missed),
            ("first_arrival_ns", self.first_ns),
            ("last_arrival_ns", self.last_ns),
            (
                "receive_system_calls",
                self.ring.as_ref().map_or(0, ReceiveRing::system_calls),
            ),
        ]))
    }
}
