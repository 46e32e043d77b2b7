//! The feed handler: one per channel (instance `i` of the `fh` operator handles channel `i`),
//! a source that receives the channel's packets, decodes them, stamps their arrival and passes
//! each message on port 0, whose edge routes it to the decision engine of its underlying
//! symbol.
//!
//! Packets arrive on a UDP socket (multicast or unicast) in batches of one `recvmmsg`
//! ([`ReceiveRing`]), or from a Vega ring in shared memory ([`sluice_feed::shm`]) in batches
//! of one poll. A packet's arrival is stamped when the handler takes it from its batch, as a
//! handler reading one packet per call would stamp it: time a packet waits behind the others
//! of its batch is queueing before the handler, with the time in the socket buffer or ring
//! (the `feed` hop), not time in it. Every message of a packet carries the packet's stamp,
//! so a message's FH time includes the handling of the messages before it in its packet, as
//! in the paper. A packet the decoder refuses (truncated, corrupt, another channel's) is
//! counted as malformed and skipped; a packet that starts before the end of what was seen
//! (late, or a duplicate) is counted as late and skipped; messages missing before a packet are
//! counted as missed ([`SequenceGaps`]). None of them stops the handler, nor does a
//! shared-memory sender that leaves (its feed is over). Every [`INGEST_EVERY`] packets, and when it stops, the handler sends its counts
//! to the ingest metrics collector on port 1.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::time::Instant;

use sluice_feed::{decode_packet, stamp_sent_ns, Message, Observed, Replay, SequenceGaps};
use sluice_graph::{
    OperatorContext, OperatorError, OperatorReport, Output, Produced, Snapshot, Source,
};
use sluice_ops::MulticastConfig;
use sluice_transport::datagram::ReceiveRing;
use sluice_transport::shm_vega::ShmVegaReceiver;
use sluice_transport::{RecvError, TupleReceiver};
use sluice_types::{monotonic_ns, BytesTuple, Message as TransportMessage};

use super::tick::{IngestTick, Tick, INGEST_EVERY};

/// Packets received per system call (or ring poll) at most, unless set otherwise: a message
/// waits in its handler's output until the handler has taken the batch it came in, so a
/// smaller batch passes messages on sooner and a larger one saves calls.
pub const DEFAULT_RECEIVE_BATCH: usize = 8;
/// The largest packet taken; a longer one is malformed (a packet fits an Ethernet MTU).
const MAX_PACKET: usize = 2048;

/// Where a channel's packets arrive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A multicast group joined on the loopback interface.
    Multicast(SocketAddrV4),
    /// A unicast address bound on this host.
    Unicast(SocketAddrV4),
    /// Channel `channel`'s ring of the shared-memory feed `feed` ([`sluice_feed::shm`]).
    Shm {
        /// The feed's name.
        feed: String,
        /// The channel.
        channel: usize,
    },
    /// Channel `channel`'s packets of a recording (`sluice feed record`), read by the
    /// handler itself at `packets_per_sec` and stamped as sent when read: a feed that
    /// replays, so the job can take checkpoints (the handler keeps its place in the file).
    Recording {
        /// The recording.
        path: PathBuf,
        /// The channel.
        channel: usize,
        /// The channel's packets per second (at least 1).
        packets_per_sec: u64,
    },
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Multicast(a) => write!(f, "multicast {a}"),
            Self::Unicast(a) => write!(f, "{a}"),
            Self::Shm { feed, channel } => {
                write!(f, "channel {channel} of the shared-memory feed '{feed}'")
            }
            Self::Recording { path, channel, .. } => {
                write!(f, "channel {channel} of the recording {}", path.display())
            }
        }
    }
}

impl Endpoint {
    /// Opens the endpoint: a non-blocking socket with a receive buffer of `buffer_bytes`
    /// (the kernel caps it at `net.core.rmem_max`), or the channel's ring.
    fn open(&self, buffer_bytes: usize, batch: usize) -> Result<Input, OperatorError> {
        let context = format!("open {self}");
        let socket = match self {
            Self::Multicast(group) => {
                let mut config =
                    MulticastConfig::new(*group.ip(), group.port(), Ipv4Addr::LOCALHOST);
                config.socket_buffer_bytes = Some(buffer_bytes);
                config.max_datagram = MAX_PACKET;
                config.open().map_err(|e| {
                    OperatorError::Failed(format!(
                        "{e} (where this host has no multicast on loopback, use --set \
                         feed=unicast or --set feed=shm)"
                    ))
                })?
            }
            Self::Unicast(address) => {
                let open = || -> std::io::Result<UdpSocket> {
                    let socket = UdpSocket::bind(address)?;
                    socket2::SockRef::from(&socket).set_recv_buffer_size(buffer_bytes)?;
                    socket.set_nonblocking(true)?;
                    Ok(socket)
                };
                open().map_err(|e| OperatorError::io(context, e))?
            }
            Self::Recording {
                path,
                packets_per_sec,
                ..
            } => {
                let replay =
                    Replay::open(path).map_err(|e| OperatorError::Failed(e.to_string()))?;
                return Ok(Input::Recording(Recorded {
                    replay,
                    packet: Vec::new(),
                    batch,
                    packets_per_sec: *packets_per_sec,
                    started: Instant::now(),
                    taken: 0,
                }));
            }
            Self::Shm { feed, channel } => {
                let ring = sluice_feed::shm::create_receiver(feed, *channel)
                    .map_err(|e| OperatorError::Failed(e.to_string()))?;
                return Ok(Input::Shm {
                    ring: Box::new(ring),
                    polled: Vec::with_capacity(batch),
                    batch,
                    sender_gone: false,
                });
            }
        };
        Ok(Input::Udp(ReceiveRing::new(socket, batch, MAX_PACKET)))
    }
}

/// An open endpoint.
enum Input {
    /// A UDP socket, read with `recvmmsg`.
    Udp(ReceiveRing),
    /// A Vega ring.
    Shm {
        ring: Box<ShmVegaReceiver<BytesTuple>>,
        polled: Vec<TransportMessage<BytesTuple>>,
        /// Packets per poll at most.
        batch: usize,
        /// The sender left: the feed is over, the handler idles until the job stops.
        sender_gone: bool,
    },
    /// A recording, read here.
    Recording(Recorded),
}

/// A recording a handler reads its channel's packets from, paced.
struct Recorded {
    replay: Replay,
    /// The packet being read.
    packet: Vec<u8>,
    /// Packets per call at most.
    batch: usize,
    packets_per_sec: u64,
    /// When the pacing began (the handler's start).
    started: Instant,
    /// The channel's packets taken since then.
    taken: u64,
}

impl Recorded {
    /// Takes the channel's packets due by now (up to a batch) into `packets`; whether the
    /// recording ended.
    fn take_due(
        &mut self,
        packets: &mut Packets,
        out: &mut Output<'_>,
    ) -> Result<bool, OperatorError> {
        let due = (self.started.elapsed().as_secs_f64() * self.packets_per_sec as f64) as u64;
        let channel = usize::from(packets.channel);
        let mut taken = 0;
        while taken < self.batch && self.taken < due {
            let next = self.replay.next_packet(&mut self.packet);
            match next.map_err(|e| OperatorError::Failed(e.to_string()))? {
                None => return Ok(true),
                Some(record) if record.channel != channel => {}
                Some(_) => {
                    let now = monotonic_ns();
                    stamp_sent_ns(&mut self.packet, now);
                    packets.take(&self.packet, now, out)?;
                    (taken, self.taken) = (taken + 1, self.taken + 1);
                }
            }
        }
        Ok(false)
    }
}

/// What a handler reading a recording keeps in a checkpoint: the recording's position, the
/// sequence so far, the packets taken and refused, and the first and last arrival.
type RecordingState = (u64, SequenceGaps, u64, u64, u64, u64);

/// The output port of the messages.
const MESSAGES: usize = 0;
/// The output port of the counts for the ingest collector.
const INGEST: usize = 1;

/// The feed handler of one channel.
pub struct FeedHandler {
    /// Where each channel's packets arrive; this handler's is its instance's.
    endpoints: Vec<Endpoint>,
    /// This handler's, once started.
    endpoint: Option<Endpoint>,
    buffer_bytes: usize,
    /// Packets per receive at most.
    batch: usize,
    input: Option<Input>,
    packets: Packets,
    /// The channel it handles: its instance's unless set ([`FeedHandler::of_channel`]).
    channel: Option<usize>,
    /// The position in its recording it resumes from.
    resume_at: Option<u64>,
}

/// What a handler does with a packet, and what it counted.
struct Packets {
    channel: u16,
    /// A message whose sequence number is a multiple of this is sampled.
    sample_every: u64,
    messages: Vec<Message>,
    /// The channel's sequence, from its first packet on.
    gaps: SequenceGaps,
    /// Its channel, packets taken and packets refused; the rest comes from `gaps`.
    counts: IngestTick,
    /// Arrival of the first and the last packet.
    first_ns: u64,
    last_ns: u64,
}

impl FeedHandler {
    /// A handler of one of the channels whose packets arrive at `endpoints`, with a socket
    /// receive buffer of `buffer_bytes`, taking up to `batch` packets a call, stamping the exit
    /// of one message in `sample_every`.
    pub fn new(
        endpoints: Vec<Endpoint>,
        buffer_bytes: usize,
        batch: usize,
        sample_every: u64,
    ) -> Self {
        Self {
            endpoints,
            endpoint: None,
            buffer_bytes,
            batch,
            input: None,
            packets: Packets {
                channel: 0,
                sample_every,
                messages: Vec::new(),
                gaps: SequenceGaps::default(),
                counts: IngestTick::default(),
                first_ns: 0,
                last_ns: 0,
            },
            channel: None,
            resume_at: None,
        }
    }

    /// This handler for `channel`, whatever its instance (a handler operator of its own per
    /// channel: OMDP's `handler-engines`).
    pub fn of_channel(mut self, channel: usize) -> Self {
        self.channel = Some(channel);
        self
    }
}

impl Packets {
    /// The counts so far: the handler's own, and the sequence's (messages, missed, late).
    fn ingest(&self) -> IngestTick {
        IngestTick {
            messages: self.gaps.received(),
            missed: self.gaps.missed(),
            late: self.gaps.late_packets(),
            ..self.counts
        }
    }

    /// Decodes one packet received at `arrived` and passes its messages on.
    fn take(
        &mut self,
        packet: &[u8],
        arrived: u64,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        if packet.len() > MAX_PACKET {
            self.counts.malformed += 1;
            return Ok(());
        }
        let header = match decode_packet(packet, &mut self.messages) {
            Ok(header) if header.channel == self.channel => header,
            _ => {
                self.counts.malformed += 1;
                return Ok(());
            }
        };
        if self.gaps.observe(&header) == Observed::Late {
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
        if self.counts.packets.is_multiple_of(INGEST_EVERY) {
            out.emit(INGEST, self.ingest())?;
        }
        Ok(())
    }
}

impl Source for FeedHandler {
    fn start(&mut self, ctx: &OperatorContext) -> Result<(), OperatorError> {
        let channel = self.channel.unwrap_or(ctx.instance);
        let endpoint = self.endpoints.get(channel).cloned().ok_or_else(|| {
            OperatorError::Failed(format!(
                "instance {} of {} has no channel {channel}: the feed has {}",
                ctx.instance,
                ctx.parallelism,
                self.endpoints.len()
            ))
        })?;
        self.packets.channel = channel as u16;
        self.packets.counts.channel = channel as u64;
        let mut input = endpoint.open(self.buffer_bytes, self.batch)?;
        if let (Input::Recording(recorded), Some(at)) = (&mut input, self.resume_at) {
            recorded
                .replay
                .seek(at)
                .map_err(|e| OperatorError::Failed(e.to_string()))?;
        }
        self.input = Some(input);
        self.endpoint = Some(endpoint);
        Ok(())
    }

    /// A handler reading a recording can: it keeps its place in the file. A socket or a
    /// ring gives each packet once.
    fn resumable(&self) -> bool {
        matches!(self.endpoints.first(), Some(Endpoint::Recording { .. }))
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        let Some(Input::Recording(recorded)) = &self.input else {
            return Err(OperatorError::Failed(
                "a feed handler reading a socket or a ring cannot be suspended: its packets \
                 come once"
                    .into(),
            ));
        };
        let p = &self.packets;
        let state: RecordingState = (
            recorded.replay.position(),
            p.gaps.clone(),
            p.counts.packets,
            p.counts.malformed,
            p.first_ns,
            p.last_ns,
        );
        Snapshot::whole(&state)
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        if snapshot.is_empty() {
            return Ok(());
        }
        let state: RecordingState = snapshot.decode_whole()?;
        let p = &mut self.packets;
        let at;
        (
            at,
            p.gaps,
            p.counts.packets,
            p.counts.malformed,
            p.first_ns,
            p.last_ns,
        ) = state;
        self.resume_at = Some(at);
        Ok(())
    }

    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let receive_error = |endpoint: &Option<Endpoint>, e: String| {
            let endpoint = endpoint.as_ref().map_or(String::new(), |e| e.to_string());
            OperatorError::Failed(format!("receive from {endpoint}: {e}"))
        };
        let before = self.packets.gaps.received();
        match &mut self.input {
            None => return Err(OperatorError::Failed("the feed was not opened".into())),
            Some(Input::Udp(ring)) => {
                let arrived_any = ring
                    .refill()
                    .map_err(|e| receive_error(&self.endpoint, e.to_string()))?;
                if arrived_any == 0 {
                    return Ok(Produced::Idle);
                }
                while ring.ready() > 0 {
                    let packet = ring
                        .next(1)
                        .map_err(|e| receive_error(&self.endpoint, e.to_string()))?;
                    let Some(packet) = packet else {
                        break;
                    };
                    self.packets.take(packet, monotonic_ns(), out)?;
                }
            }
            Some(Input::Recording(recorded)) => {
                let ended = recorded.take_due(&mut self.packets, out)?;
                let taken = (self.packets.gaps.received() - before) as usize;
                return Ok(match (ended, taken) {
                    (true, 0) => Produced::Exhausted,
                    (_, 0) => Produced::Idle,
                    (_, n) => Produced::Emitted(n),
                });
            }
            Some(Input::Shm {
                ring,
                polled,
                batch,
                sender_gone,
            }) => {
                if *sender_gone {
                    return Ok(Produced::Idle);
                }
                match ring.poll(*batch, polled) {
                    Ok(0) => return Ok(Produced::Idle),
                    Ok(_) => {}
                    // The sender process ended (its feed is over, or it was stopped): a feed
                    // handler outlives its feed.
                    Err(RecvError::Disconnected) => {
                        *sender_gone = true;
                        return Ok(Produced::Idle);
                    }
                    Err(e) => return Err(receive_error(&self.endpoint, e.to_string())),
                }
                for message in polled.drain(..) {
                    match message {
                        TransportMessage::Data(BytesTuple(packet)) => {
                            self.packets.take(&packet, monotonic_ns(), out)?
                        }
                        TransportMessage::EndOfStream => *sender_gone = true,
                        _ => {}
                    }
                }
            }
        }
        Ok(Produced::Emitted(
            (self.packets.gaps.received() - before) as usize,
        ))
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<(), OperatorError> {
        out.emit(INGEST, self.packets.ingest())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        let p = &self.packets;
        let counts = p.ingest();
        let system_calls = match &self.input {
            Some(Input::Udp(ring)) => ring.system_calls(),
            _ => 0,
        };
        Ok(sluice_ops::counter_report(&[
            ("channel", counts.channel),
            ("packets", counts.packets),
            ("messages", counts.messages),
            ("malformed_packets", counts.malformed),
            ("late_packets", counts.late),
            ("missed_messages", counts.missed),
            ("first_arrival_ns", p.first_ns),
            ("last_arrival_ns", p.last_ns),
            ("receive_system_calls", system_calls),
        ]))
    }
}
