//! The feed sender: each channel's packets over UDP at a given rate, from the generator or
//! from a recording, as the paper's feed senders multicast prerecorded OPRA packets to the feed
//! handlers from processes outside the measured application.
//!
//! # Destinations
//!
//! - Multicast: channel `c` goes to the group `group + c` (the address counted up by `c`) at
//!   `port`, sent on the interface `interface` (127.0.0.1 for loopback) with TTL 0, so nothing
//!   leaves the host, and multicast loopback on, so local members receive it. A receiver joins
//!   its channel's group (`sluice_connectors::multicast::MulticastSource` does).
//! - Unicast: channel `c` goes to the `c`-th address, for hosts or containers without
//!   multicast.
//! - Shared memory: channel `c` goes to the Vega ring its feed handler made ([`crate::shm`]),
//!   for rates beyond what the kernel's UDP path carries on the host; a packet that finds
//!   the ring full is dropped, as a UDP receiver's full socket buffer drops it.
//!
//! Each channel has its own connected socket and a [`SendRing`] that hands a burst of its
//! packets to the kernel with one `sendmmsg`.
//!
//! # Pacing
//!
//! At a rate multiple `R` the aggregate rate is `R x` [`OPRA_FEB_2008_PACKETS_PER_SEC`], split
//! evenly over the channels: packet `n` of the whole feed goes to channel `n mod channels` and
//! is due `n / rate` seconds after the start ([`Pacing::RateMultiple`]). A replayed feed is
//! paced the same way in file order, or at its recorded send offsets ([`Pacing::Recorded`]).
//! With [`SendOptions::channels`] a sender sends only some channels, each still at its share of
//! the rate, so that several sender processes can split a feed.
//!
//! The sender sleeps until the next packet is due (so a slow feed costs no core), then builds
//! every packet due by then, stamps each channel's burst with
//! [`sluice_types::monotonic_ns`] just before its `sendmmsg`, and sends. At high rates the
//! sleep's overshoot (tens of microseconds) makes the bursts larger, not the rate lower; a
//! sender that cannot keep up falls behind its schedule, and [`SendReport`] says by how much
//! ([`SendReport::max_lag`]) and what rate it achieved.
//!
//! A packet the kernel refuses for want of buffer space is retried, never dropped: a UDP
//! receiver that falls behind loses packets in its own socket buffer, which is what a feed
//! handler's sequence numbers are there to count.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sluice_transport::datagram::SendRing;
use sluice_transport::shm_vega::ShmVegaSender;
use sluice_transport::{Refused, SendError, TupleSender};
use sluice_types::{monotonic_ns, BytesTuple, Message};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::fast::{declared_count, stamp_sent_ns, MTU_PAYLOAD_BYTES};
use crate::{Feed, FeedConfig, FeedError, Replay, OPRA_FEB_2008_PACKETS_PER_SEC};

/// The longest the sender sleeps at once, so it notices the stop flag and the duration.
const MAX_SLEEP: Duration = Duration::from_millis(50);

/// Where each channel's packets go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destinations {
    /// Channel `c` to the multicast group `group + c` at `port`, sent on `interface`.
    Multicast {
        /// The first channel's group (224.0.0.0/4).
        group: Ipv4Addr,
        /// The UDP port of every channel.
        port: u16,
        /// The address of the sending interface (127.0.0.1: loopback).
        interface: Ipv4Addr,
    },
    /// Channel `c` to the `c`-th address.
    Unicast(Vec<SocketAddr>),
    /// Channel `c` to the ring of channel `c` of the shared-memory feed of this name.
    Shm(String),
}

impl Destinations {
    /// Multicast groups from `group` on, at `port`, on loopback.
    pub fn loopback_multicast(group: Ipv4Addr, port: u16) -> Self {
        Self::Multicast {
            group,
            port,
            interface: Ipv4Addr::LOCALHOST,
        }
    }

    /// The address of `channel`'s packets.
    pub fn address_of(&self, channel: usize) -> Result<SocketAddr, FeedError> {
        match self {
            Self::Multicast { group, port, .. } => {
                let address = u32::from(*group)
                    .checked_add(u32::try_from(channel).unwrap_or(u32::MAX))
                    .map(Ipv4Addr::from)
                    .filter(Ipv4Addr::is_multicast)
                    .ok_or_else(|| {
                        FeedError::Config(format!(
                            "channel {channel}'s group ({group} + {channel}) is not a multicast \
                             address: groups are 224.0.0.0 to 239.255.255.255"
                        ))
                    })?;
                Ok(SocketAddr::V4(SocketAddrV4::new(address, *port)))
            }
            Self::Unicast(addresses) => addresses.get(channel).copied().ok_or_else(|| {
                FeedError::Config(format!(
                    "no unicast address for channel {channel}: {} given, one per channel needed",
                    addresses.len()
                ))
            }),
            Self::Shm(feed) => Err(FeedError::Config(format!(
                "channel {channel} of the shared-memory feed '{feed}' has no network address"
            ))),
        }
    }
}

/// Where the packets come from.
#[derive(Clone, Debug, PartialEq)]
pub enum PacketSource {
    /// The generator of this feed.
    Generate(FeedConfig),
    /// A recording, replayed once from its start.
    Replay(PathBuf),
}

/// When each packet is sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pacing {
    /// This multiple of [`OPRA_FEB_2008_PACKETS_PER_SEC`] in aggregate, split evenly over the
    /// channels.
    RateMultiple(f64),
    /// At the send offsets of a recording ([`PacketSource::Replay`] only).
    Recorded,
}

/// What to send, where, how fast, for how long.
#[derive(Clone, Debug, PartialEq)]
pub struct SendOptions {
    /// The packets.
    pub source: PacketSource,
    /// Where each channel goes.
    pub destinations: Destinations,
    /// How fast.
    pub pacing: Pacing,
    /// Stop after this long (`None`: at the stop flag, the packet limit or the recording's end).
    pub duration: Option<Duration>,
    /// Stop after this many packets.
    pub max_packets: Option<u64>,
    /// The most packets of a channel per `sendmmsg` (1 to 1,024; default 64).
    pub batch: usize,
    /// Send only these channels (`None`: all), each at its share of the rate: a feed split over
    /// several sender processes, as the paper's two feed senders split theirs.
    pub channels: Option<Vec<usize>>,
}

impl SendOptions {
    /// The generated feed `config` to `destinations` at `rate_multiple`, until stopped.
    pub fn new(config: FeedConfig, destinations: Destinations, rate_multiple: f64) -> Self {
        Self {
            source: PacketSource::Generate(config),
            destinations,
            pacing: Pacing::RateMultiple(rate_multiple),
            duration: None,
            max_packets: None,
            batch: 64,
            channels: None,
        }
    }
}

/// What a send did.
#[derive(Clone, Debug, PartialEq)]
pub struct SendReport {
    /// Packets sent.
    pub packets: u64,
    /// Messages in them (as their headers declare).
    pub messages: u64,
    /// Packets sent on each channel of the feed (0 on those not sent).
    pub packets_per_channel: Vec<u64>,
    /// Messages put out on each channel of the feed (0 on those not sent), as their packets'
    /// headers declare: every packet the sender built and handed over or gave up on (a full
    /// ring's, or one the kernel still refused when the sender was stopped), so that a
    /// receiver's missed messages are this less what it received, whenever they were lost.
    pub messages_per_channel: Vec<u64>,
    /// From the start to the last send.
    pub elapsed: Duration,
    /// The rate asked for of the channels sent, in aggregate (`None` when pacing by recorded
    /// offsets).
    pub target_packets_per_sec: Option<f64>,
    /// The rate achieved, in aggregate over the channels sent: packets over elapsed.
    pub achieved_packets_per_sec: f64,
    /// The furthest behind its schedule the sender got (when a burst went out after its first
    /// packet was due).
    pub max_lag: Duration,
    /// `sendmmsg` calls made.
    pub system_calls: u64,
    /// Packets dropped because a shared-memory ring was full (its handler was behind), as a
    /// full socket buffer drops them at a UDP receiver.
    pub dropped: u64,
}

/// Where the next packet comes from, and when it is due.
enum Packets {
    Generated(Feed),
    Replayed(Replay),
}

/// Where one channel's packets go.
enum Outlet {
    /// A connected UDP socket, and its ring of datagrams for `sendmmsg`.
    Udp { address: SocketAddr, ring: SendRing },
    /// A Vega ring in shared memory.
    Shm {
        sender: Box<ShmVegaSender<BytesTuple>>,
        /// Packets handed to the ring.
        sent: u64,
        /// Packets that found the ring full.
        dropped: u64,
        /// The handler left (its job ended): nothing more goes to it.
        closed: bool,
    },
}

impl Outlet {
    /// Packets handed over so far.
    fn sent(&self) -> u64 {
        match self {
            Self::Udp { ring, .. } => ring.datagrams_sent(),
            Self::Shm { sent, .. } => *sent,
        }
    }

    /// Packets dropped for want of room.
    fn dropped(&self) -> u64 {
        match self {
            Self::Udp { .. } => 0,
            Self::Shm { dropped, .. } => *dropped,
        }
    }

    /// Whether the receiving end left for good (a shared-memory feed's handler).
    fn closed(&self) -> bool {
        matches!(self, Self::Shm { closed: true, .. })
    }

    /// System calls made to send.
    fn system_calls(&self) -> u64 {
        match self {
            Self::Udp { ring, .. } => ring.system_calls(),
            Self::Shm { .. } => 0,
        }
    }
}

/// One channel: where its packets go, and the packets built for the next burst.
struct Channel {
    outlet: Outlet,
    staged: Vec<Vec<u8>>,
    len: usize,
}

impl Channel {
    /// The next staging buffer, cleared.
    fn stage(&mut self) -> &mut Vec<u8> {
        if self.len == self.staged.len() {
            self.staged.push(Vec::with_capacity(MTU_PAYLOAD_BYTES));
        }
        self.len += 1;
        let buffer = &mut self.staged[self.len - 1];
        buffer.clear();
        buffer
    }

    /// Stamps the staged packets and hands them to the kernel; waits (yielding) while the
    /// socket buffer is full, unless `stop` is raised.
    fn flush(&mut self, stop: &AtomicBool) -> Result<(), FeedError> {
        let now = monotonic_ns();
        let staged = &mut self.staged[..self.len];
        self.len = 0;
        match &mut self.outlet {
            Outlet::Udp { address, ring } => {
                for packet in staged.iter_mut() {
                    stamp_sent_ns(packet, now);
                    let Some(slot) = ring.filling() else {
                        break;
                    };
                    slot.clear();
                    slot.extend_from_slice(packet);
                    ring.close();
                }
                while ring.closed() > 0 {
                    match ring.send() {
                        Ok(0) if stop.load(Ordering::Relaxed) => break,
                        Ok(0) => std::thread::yield_now(),
                        Ok(_) => {}
                        // Nobody listened at a unicast destination (an ICMP error from an
                        // earlier datagram, reported once, by this call, which sent nothing):
                        // send again.
                        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                        Err(e) => {
                            return Err(FeedError::io(format!("send to {address}"), e));
                        }
                    }
                }
            }
            Outlet::Shm {
                sender,
                sent,
                dropped,
                closed,
            } => {
                for packet in staged.iter_mut() {
                    if *closed {
                        break;
                    }
                    stamp_sent_ns(packet, now);
                    let message = Message::Data(BytesTuple(std::mem::take(packet)));
                    match sender.offer(message) {
                        Ok(()) => *sent += 1,
                        Err(Refused {
                            error: SendError::Full,
                            message: Message::Data(BytesTuple(back)),
                        }) => {
                            *dropped += 1;
                            *packet = back;
                        }
                        Err(Refused {
                            error: SendError::Closed,
                            ..
                        }) => *closed = true,
                        Err(refused) => {
                            return Err(FeedError::Config(format!(
                                "the shared-memory feed refused a packet: {}",
                                refused.error
                            )));
                        }
                    }
                }
                sender.flush();
            }
        }
        Ok(())
    }
}

/// Nanoseconds between packets of the whole feed at `multiple` x the February 2008 OPRA rate.
pub(crate) fn packet_interval_ns(multiple: f64) -> Result<f64, FeedError> {
    let rate = multiple * OPRA_FEB_2008_PACKETS_PER_SEC as f64;
    if !(rate.is_finite() && rate >= 1.0) {
        return Err(FeedError::Config(format!(
            "the rate multiple must be positive and give at least a packet per second, got \
             {multiple}"
        )));
    }
    Ok(1e9 / rate)
}

/// The channel of the generated feed's packet `n` and when it is due (ns from the start):
/// round robin over the channels, one every `interval_ns`.
pub(crate) fn generated_slot(n: u64, channels: usize, interval_ns: f64) -> (usize, u64) {
    (
        (n % channels as u64) as usize,
        (n as f64 * interval_ns) as u64,
    )
}

/// Opens a socket connected to `address`, set up for multicast on `interface` when given.
fn open_socket(address: SocketAddr, interface: Option<Ipv4Addr>) -> io::Result<UdpSocket> {
    let socket = Socket::new(
        Domain::for_address(address),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    if let Some(interface) = interface {
        socket.set_multicast_if_v4(&interface)?;
        socket.set_multicast_ttl_v4(0)?;
        socket.set_multicast_loop_v4(true)?;
        let local = SocketAddr::new(IpAddr::V4(interface), 0);
        socket.bind(&SockAddr::from(local))?;
    }
    socket.connect(&SockAddr::from(address))?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Sends the feed `options` describes until `stop` is raised (or the duration, the packet
/// limit or the recording's end); returns what it did.
pub fn send(options: &SendOptions, stop: &AtomicBool) -> Result<SendReport, FeedError> {
    if !(1..=sluice_transport::datagram::MAX_BATCH).contains(&options.batch) {
        return Err(FeedError::Config(format!(
            "the batch must be 1 to {}, got {}",
            sluice_transport::datagram::MAX_BATCH,
            options.batch
        )));
    }
    let (packets, channel_count) = match &options.source {
        PacketSource::Generate(config) => (Packets::Generated(Feed::new(config)?), config.channels),
        PacketSource::Replay(path) => {
            let replay = Replay::open(path)?;
            let channels = replay.channels();
            (Packets::Replayed(replay), channels)
        }
    };
    let interval_ns = match options.pacing {
        Pacing::RateMultiple(multiple) => Some(packet_interval_ns(multiple)?),
        Pacing::Recorded if matches!(packets, Packets::Generated(_)) => {
            return Err(FeedError::Config(
                "recorded pacing needs a recording to replay".into(),
            ));
        }
        Pacing::Recorded => None,
    };
    let interface = match &options.destinations {
        Destinations::Multicast { interface, .. } => Some(*interface),
        Destinations::Unicast(addresses) if addresses.len() != channel_count => {
            return Err(FeedError::Config(format!(
                "a feed of {channel_count} channels needs {channel_count} unicast addresses, \
                 one per channel; got {}",
                addresses.len()
            )));
        }
        Destinations::Unicast(_) | Destinations::Shm(_) => None,
    };
    let mut own = vec![options.channels.is_none(); channel_count];
    for &c in options.channels.iter().flatten() {
        *own.get_mut(c).ok_or_else(|| {
            FeedError::Config(format!(
                "channel {c} is not one of the feed's {channel_count} channels"
            ))
        })? = true;
    }
    let own_count = own.iter().filter(|&&o| o).count();
    if own_count == 0 {
        return Err(FeedError::Config("no channel to send".into()));
    }
    let mut channels = (0..channel_count)
        .map(|c| {
            if !own[c] {
                return Ok(None);
            }
            let outlet = match &options.destinations {
                Destinations::Shm(feed) => Outlet::Shm {
                    sender: Box::new(crate::shm::open_sender(feed, c)?),
                    sent: 0,
                    dropped: 0,
                    closed: false,
                },
                _ => {
                    let address = options.destinations.address_of(c)?;
                    let socket = open_socket(address, interface)
                        .map_err(|e| FeedError::io(format!("open a socket to {address}"), e))?;
                    Outlet::Udp {
                        address,
                        ring: SendRing::new(socket, options.batch, MTU_PAYLOAD_BYTES),
                    }
                }
            };
            Ok(Some(Channel {
                outlet,
                staged: Vec::new(),
                len: 0,
            }))
        })
        .collect::<Result<Vec<_>, FeedError>>()?;
    let mut schedule = Schedule {
        packets,
        interval_ns,
        own,
        slot: 0,
    };

    let start = Instant::now();
    let deadline = options.duration.map(|d| start + d);
    let limit = options.max_packets.unwrap_or(u64::MAX);
    // Packets built per burst at most, so that the stop flag and the deadline are seen and
    // stamps stay fresh when the sender is behind.
    let burst = options.batch * own_count;
    let mut pending = Vec::with_capacity(MTU_PAYLOAD_BYTES);
    // Packets built (all go to the kernel unless stopped).
    let mut sent = 0u64;
    let mut messages = 0u64;
    let mut messages_per_channel = vec![0u64; channel_count];
    let mut max_lag = Duration::ZERO;
    let mut finished_at = start;
    let mut upcoming = if limit > 0 {
        schedule.next(&mut pending)?
    } else {
        None
    };
    while let Some((_, due_ns)) = upcoming {
        let now = Instant::now();
        let due = start + Duration::from_nanos(due_ns);
        if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| now >= d || due >= d) {
            break;
        }
        if due > now {
            std::thread::sleep((due - now).min(MAX_SLEEP));
            continue;
        }
        max_lag = max_lag.max(now - due);
        let mut built = 0;
        while let Some((channel, due_ns)) = upcoming {
            if built == burst || start + Duration::from_nanos(due_ns) > now {
                break;
            }
            // The schedule yields only the sender's own channels, which all have sockets.
            if let Some(target) = channels[channel].as_mut() {
                std::mem::swap(target.stage(), &mut pending);
                let declared = u64::from(declared_count(&target.staged[target.len - 1]));
                messages += declared;
                messages_per_channel[channel] += declared;
                if target.len == options.batch {
                    target.flush(stop)?;
                }
            }
            built += 1;
            sent += 1;
            upcoming = if sent < limit {
                schedule.next(&mut pending)?
            } else {
                None
            };
        }
        for channel in channels.iter_mut().flatten() {
            if channel.len > 0 {
                channel.flush(stop)?;
            }
        }
        finished_at = Instant::now();
        if channels.iter().flatten().all(|c| c.outlet.closed()) {
            break;
        }
    }
    let elapsed = finished_at - start;
    let packets: u64 = channels.iter().flatten().map(|c| c.outlet.sent()).sum();
    Ok(SendReport {
        packets,
        messages,
        packets_per_channel: channels
            .iter()
            .map(|c| c.as_ref().map_or(0, |c| c.outlet.sent()))
            .collect(),
        messages_per_channel,
        elapsed,
        target_packets_per_sec: interval_ns
            .map(|i| 1e9 / i * own_count as f64 / channel_count as f64),
        achieved_packets_per_sec: if elapsed.is_zero() {
            0.0
        } else {
            packets as f64 / elapsed.as_secs_f64()
        },
        max_lag,
        system_calls: channels
            .iter()
            .flatten()
            .map(|c| c.outlet.system_calls())
            .sum(),
        dropped: channels.iter().flatten().map(|c| c.outlet.dropped()).sum(),
    })
}

/// The packets in send order, with their channels and due times, skipping those of channels
/// the sender does not own.
struct Schedule {
    packets: Packets,
    interval_ns: Option<f64>,
    own: Vec<bool>,
    /// The feed's packet number of the next packet, owned or not.
    slot: u64,
}

impl Schedule {
    /// The next packet of an owned channel into `out`: its channel and when it is due (ns from
    /// the start); `None` at the end of a recording.
    fn next(&mut self, out: &mut Vec<u8>) -> Result<Option<(usize, u64)>, FeedError> {
        loop {
            let n = self.slot;
            self.slot += 1;
            let (channel, due) = match &mut self.packets {
                Packets::Generated(feed) => {
                    let channels = self.own.len();
                    let (channel, due) =
                        generated_slot(n, channels, self.interval_ns.unwrap_or(0.0));
                    if !self.own[channel] {
                        continue;
                    }
                    feed.next_packet(channel, 0, out);
                    (channel, due)
                }
                Packets::Replayed(replay) => {
                    let Some(packet) = replay.next_packet(out)? else {
                        return Ok(None);
                    };
                    let due = self
                        .interval_ns
                        .map_or(packet.send_offset_ns, |i| (n as f64 * i) as u64);
                    (packet.channel, due)
                }
            };
            if self.own[channel] {
                return Ok(Some((channel, due)));
            }
        }
    }
}
