//! The options of `sluice bench throughput` and `latency`, and their validation into
//! [`Settings`], which every benchmark below the command line reads.

use std::time::Duration;

use anyhow::bail;
use clap::{Args, ValueEnum};
use serde::Serialize;
use sluice_sync::IdleStrategy;
use sluice_transport::tcp::BatchProfile;

use crate::foundation::load::Span;
use crate::foundation::payload::{facade_size_supported, unsupported_facade_size, TIMESTAMP_BYTES};

/// Options of `sluice bench throughput`.
#[derive(Debug, Clone, Args)]
pub struct ThroughputArgs {
    /// Options every benchmark has.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Options of `sluice bench latency`.
#[derive(Debug, Clone, Args)]
pub struct LatencyArgs {
    /// Options every benchmark has.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Tuples per second the sender sends, paced by the monotonic clock.
    #[arg(long, value_name = "N")]
    pub rate: u64,
    /// How latency is measured: `one-way-clock` (the receiver subtracts the send time it
    /// finds in the tuple; the default for fused, threaded, shm-vega and shm-osr, Vega
    /// Fig. 7a) or `half-round-trip` (a reflector process on the other core sends each tuple
    /// back over the same kind of transport and the sender, which is also the receiver, halves
    /// the round trip; the default for tcp, tcp-batched, tcp-adaptive and udp-mq, Vega V.A.1;
    /// also for shm-vega and shm-osr, the IBM latency test) or `ping-pong` (the same through a
    /// reflector, with one tuple in flight: the next is sent once the previous is back and
    /// due, so a rate above what the round trip allows sends back to back, as the cache-line
    /// ping-pong baseline and iceoryx2's benchmark do; not for udp-mq, which may lose one).
    #[arg(long, value_enum, value_name = "METHOD")]
    pub method: Option<LatencyMethod>,
}

/// How a latency benchmark measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyMethod {
    /// The receiver subtracts the send time carried in the tuple: sender and receiver read
    /// one clock (`CLOCK_MONOTONIC` on one host).
    #[value(name = "one-way-clock")]
    OneWayClock,
    /// Sender and receiver are one process; a reflector process sends every tuple back over
    /// the same kind of transport; the one-way latency is half the round trip.
    #[value(name = "half-round-trip")]
    HalfRoundTrip,
    /// As `HalfRoundTrip`, with one tuple in flight: the sender sends the next tuple once the
    /// previous one is back (and due at the rate).
    #[value(name = "ping-pong")]
    PingPong,
}

impl LatencyMethod {
    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Self::OneWayClock => "one-way-clock",
            Self::HalfRoundTrip => "half-round-trip",
            Self::PingPong => "ping-pong",
        }
    }

    /// Whether tuples go through a reflector and back (one way being half the round trip).
    pub fn reflects(self) -> bool {
        matches!(self, Self::HalfRoundTrip | Self::PingPong)
    }

    /// What `transport` measures by default: half the round trip across a network
    /// transport (Vega V.A.1), one way from the shared clock otherwise (Vega Fig. 7a).
    pub fn default_for(transport: Transport) -> Self {
        if transport.is_network() {
            Self::HalfRoundTrip
        } else {
            Self::OneWayClock
        }
    }
}

/// Options every benchmark has.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// How tuples go from sender to receiver: `fused` (one thread, a direct call),
    /// `threaded` (two threads pinned to cores 0 and 1, a threaded port), or between two
    /// processes pinned to cores 0 and 1: `shm-vega` (a Vega ring in shared memory), `tcp`,
    /// `tcp-batched` or `tcp-adaptive` (the tcp transport over loopback, latency, throughput
    /// or adaptive profile); or `shm-osr` (an OSR ring in shared memory, from `--producers`
    /// sending processes into one receiving process on core 1).
    #[arg(long, value_enum)]
    pub transport: Transport,
    /// Tuple size in bytes. Facade tuples come in 4, 8, 16, 22, 32, 64, 108, 128, 256, 512,
    /// 1004, 1024, 2048, 4096, 8192 and 16384 bytes; normal tuples in any size. Latency needs
    /// at least 8 (the timestamp).
    #[arg(long, value_name = "BYTES")]
    pub size: usize,
    /// Tuple encoding: `facade` (fixed-size plain data) or `normal` (a byte vector).
    #[arg(long, value_enum, default_value_t = TupleEncoding::Facade)]
    pub encoding: TupleEncoding,
    /// How long and how often it runs, and how it prints.
    #[command(flatten)]
    pub run: RunArgs,
    /// How idle receivers wait, for Sluice and the baseline alike: busy-spin, yield, backoff
    /// or park (default: chosen from the thread and core counts, as `sluice run` does).
    #[arg(long, value_parser = IdleStrategy::parse)]
    pub idle: Option<IdleStrategy>,
    /// Sending processes into the one receiver (`shm-osr` only; 1 to 16). They share the
    /// cores other than the receiver's (core 0 on a two-core machine); a latency benchmark
    /// splits `--rate` among them.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub producers: usize,
    /// Sockets on each side of a `udp-mq` benchmark (its hardware queues).
    #[arg(long, value_name = "Q", default_value_t = sluice_transport::udp_mq::DEFAULT_QUEUES)]
    pub queues: usize,
    /// Receivers the one sender sends every tuple to (fan-out, 1 to 16): `threaded` (a
    /// broadcast edge to that many sink threads), `shm-vega` (a ring and a receiving process
    /// each) or `tcp`, `tcp-batched`, `tcp-adaptive` (a connection and a receiving process
    /// each). The rate is the receivers' sum, with each receiver's figures listed.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub receivers: usize,
    /// Bytes of the ring of a `shm-osr` or `shm-vega` benchmark (a power of two, 4 KiB to
    /// 64 MiB). An OSR tuple may take up to about half of it; a Vega ring has this many bytes
    /// of slots, 16 to 4096 of them.
    #[arg(long, value_name = "BYTES", default_value_t = sluice_transport::shm_osr::DEFAULT_CAPACITY_BYTES)]
    pub ring_bytes: usize,
}

/// How long and how often a benchmark runs, and how it prints: options every benchmark has.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Seconds measured in each run.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 2.0,
        allow_negative_numbers = true
    )]
    pub duration: f64,
    /// Seconds each run goes before it is measured; what it does then is discarded.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 0.5,
        allow_negative_numbers = true
    )]
    pub warmup: f64,
    /// Runs of Sluice and of what it is measured against (alternating); the result is the
    /// median, with every run's figures listed.
    #[arg(long, value_name = "R", default_value_t = 3)]
    pub repeat: usize,
    /// Print one JSON object per result, one per line, instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl RunArgs {
    /// The measured duration, the warm-up and the number of runs, checked; every problem is one
    /// line naming the option.
    pub(crate) fn checked(&self) -> anyhow::Result<(Duration, Duration, usize)> {
        Ok((
            seconds("--duration", self.duration, false)?,
            seconds("--warmup", self.warmup, true)?,
            checked_repeat(self.repeat)?,
        ))
    }
}

/// How tuples go from sender to receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// Sender and receiver fused in one thread: each tuple is a direct call.
    Fused,
    /// Sender and receiver in two threads joined by a threaded port.
    Threaded,
    /// Sender and receiver in two processes pinned to cores 0 and 1, joined by a Vega ring in
    /// a shared segment.
    #[value(name = "shm-vega")]
    #[serde(rename = "shm-vega")]
    ShmVega,
    /// Two pinned processes joined by the `tcp` transport over loopback, latency profile
    /// (plain TCP: each offer written at once while the socket keeps up).
    Tcp,
    /// Two pinned processes joined by the `tcp` transport, throughput profile (frames of up
    /// to 64 KiB, held up to 200 us).
    #[value(name = "tcp-batched")]
    #[serde(rename = "tcp-batched")]
    TcpBatched,
    /// Two pinned processes joined by the `tcp` transport, adaptive profile (the default).
    #[value(name = "tcp-adaptive")]
    #[serde(rename = "tcp-adaptive")]
    TcpAdaptive,
    /// `--producers` sending processes and a receiving process, pinned, joined by an OSR ring
    /// in a shared segment.
    #[value(name = "shm-osr")]
    #[serde(rename = "shm-osr")]
    ShmOsr,
    /// Two pinned processes joined by the `udp-mq` transport over loopback: `--queues`
    /// sockets a side, datagrams sent and received in batches, a random queue per datagram.
    /// Nothing holds the sender back: what the receiver cannot take is lost, and counted.
    #[value(name = "udp-mq")]
    #[serde(rename = "udp-mq")]
    UdpMq,
    /// Two ranks of one `mpirun`, pinned to cores 0 and 1, joined by the `mpi` transport
    /// (needs the `mpi` feature and Open MPI).
    Mpi,
}

impl Transport {
    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fused => "fused",
            Self::Threaded => "threaded",
            Self::ShmVega => "shm-vega",
            Self::Tcp => "tcp",
            Self::TcpBatched => "tcp-batched",
            Self::TcpAdaptive => "tcp-adaptive",
            Self::ShmOsr => "shm-osr",
            Self::UdpMq => "udp-mq",
            Self::Mpi => "mpi",
        }
    }

    /// Whether the sender and the receiver run in separate processes.
    pub(crate) fn crosses_processes(self) -> bool {
        !matches!(self, Self::Fused | Self::Threaded)
    }

    /// Whether the transport crosses a network (loopback here): tcp and udp-mq.
    pub(crate) fn is_network(self) -> bool {
        self.tcp_profile().is_some() || self == Self::UdpMq
    }

    /// Whether a latency benchmark can send through a reflector and back (module `reflect`).
    pub(crate) fn reflects(self) -> bool {
        self.is_network() || matches!(self, Self::ShmVega | Self::ShmOsr)
    }

    /// Whether a benchmark can send from one sender to several receivers.
    pub(crate) fn fans_out(self) -> bool {
        matches!(
            self,
            Self::Threaded | Self::ShmVega | Self::Tcp | Self::TcpBatched | Self::TcpAdaptive
        )
    }

    /// The batching profile of a `tcp` benchmark; `None` for the other transports.
    pub(crate) fn tcp_profile(self) -> Option<BatchProfile> {
        match self {
            Self::Tcp => Some(BatchProfile::Latency),
            Self::TcpBatched => Some(BatchProfile::Throughput),
            Self::TcpAdaptive => Some(BatchProfile::Adaptive),
            Self::Fused
            | Self::Threaded
            | Self::ShmVega
            | Self::ShmOsr
            | Self::UdpMq
            | Self::Mpi => None,
        }
    }
}

/// How benchmark tuples are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TupleEncoding {
    /// Fixed-size plain data (`[u8; N]`).
    Facade,
    /// A normal tuple holding a byte vector (`BytesTuple`).
    Normal,
}

/// Which benchmark, with what only it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bench {
    Throughput,
    Latency { rate: u64 },
}

/// Validated settings of one benchmark.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) bench: Bench,
    pub(crate) transport: Transport,
    pub(crate) encoding: TupleEncoding,
    pub(crate) size: usize,
    pub(crate) duration: Duration,
    pub(crate) warmup: Duration,
    pub(crate) repeat: usize,
    pub(crate) json: bool,
    pub(crate) idle: Option<IdleStrategy>,
    pub(crate) producers: usize,
    pub(crate) queues: usize,
    pub(crate) receivers: usize,
    pub(crate) ring_bytes: usize,
    /// How a latency benchmark measures.
    pub(crate) method: LatencyMethod,
}

impl Settings {
    /// How the processes of a cross-process run idle: `--idle`, or what `sluice run` would
    /// choose for the sending thread and the receiving processes on this machine's cores
    /// (`park` for a fan-out to more receivers than the cores left, so idle receivers do
    /// not take the sender's core).
    ///
    /// Not `busy-spin`, even for a shared-memory latency run with a core per process: it is
    /// the fastest only when those cores are otherwise idle. On the shared 2-vCPU development
    /// machine with others compiling (load 5.3), `sluice bench latency --transport shm-vega
    /// --size 64 --rate 100000 --duration 1 --repeat 1` gave p50 3.4-4.0 ms with
    /// `--idle busy-spin` against 22-24 us with `yield` (and 4.0 ms against 3.7 us at
    /// `--rate 1000`): a spinning end uses up its time slice, so the scheduler runs the
    /// others before it and a tuple waits for its next turn; an end that yields stays ahead
    /// in the queue. On dedicated cores `yield` costs at most one `sched_yield` system call
    /// per tuple over spinning (it spins about 25 us first, so at 40 000 tuples/s and more it
    /// never yields); pass `--idle busy-spin` there.
    pub(crate) fn process_idle(&self) -> IdleStrategy {
        self.idle.unwrap_or_else(|| {
            IdleStrategy::default_for(1 + self.receivers, crate::foundation::machine::cores())
        })
    }
}

/// The largest normal tuple, so a typo cannot ask for gigabytes per tuple.
pub const MAX_NORMAL_SIZE: usize = 64 << 20;

/// The most receivers of a fan-out benchmark.
pub(crate) const MAX_RECEIVERS: usize = 16;

/// The most sending processes of a `shm-osr` benchmark: as many as the fan-out's receivers, a
/// process each on this host (the ring itself takes `shm_osr::MAX_SENDERS`).
const MAX_PRODUCERS: usize = 16;

/// The smallest OSR ring a benchmark takes.
const MIN_RING_BYTES: usize = 4 << 10;
/// The largest OSR ring a benchmark takes (the transport's own limit).
const MAX_RING_BYTES: usize = 64 << 20;

/// The most runs `--repeat` asks for (every run's figures are kept, and a run lasts at least
/// a fraction of a second).
pub(crate) const MAX_REPEAT: usize = 10_000;

/// `--repeat`, checked: 1 to [`MAX_REPEAT`] runs.
pub(crate) fn checked_repeat(repeat: usize) -> anyhow::Result<usize> {
    if !(1..=MAX_REPEAT).contains(&repeat) {
        bail!("--repeat must be between 1 and {MAX_REPEAT}, got {repeat}");
    }
    Ok(repeat)
}

/// The longest duration or warm-up accepted, in seconds (a day).
const MAX_SECONDS: f64 = 86_400.0;

/// `value` seconds of the option `option`, checked: above 0 (or 0 with `allow_zero`) and at
/// most a day.
pub(crate) fn seconds(option: &str, value: f64, allow_zero: bool) -> anyhow::Result<Duration> {
    let low_ok = if allow_zero {
        value >= 0.0
    } else {
        value > 0.0
    };
    if !(low_ok && value <= MAX_SECONDS) {
        let least = if allow_zero {
            "at least 0"
        } else {
            "more than 0"
        };
        bail!("{option} must be {least} and at most {MAX_SECONDS} seconds, got {value}");
    }
    Ok(Duration::from_secs_f64(value))
}

impl Settings {
    /// How long the senders send.
    pub(crate) fn span(&self) -> Span {
        Span {
            warmup: self.warmup,
            duration: self.duration,
        }
    }

    /// Checks the options of a throughput (`bench`) or latency benchmark; every problem is one
    /// line naming the option.
    pub(crate) fn from_args(
        common: &CommonArgs,
        bench: Bench,
        method: Option<LatencyMethod>,
    ) -> anyhow::Result<Self> {
        let size = common.size;
        if size == 0 {
            bail!("--size must be at least 1 byte");
        }
        if let Bench::Latency { rate } = bench {
            if size < TIMESTAMP_BYTES {
                bail!("latency needs --size of at least {TIMESTAMP_BYTES} bytes (the timestamp), got {size}");
            }
            if rate == 0 {
                bail!("--rate must be at least 1 tuple per second");
            }
        }
        match common.encoding {
            TupleEncoding::Facade if !facade_size_supported(size) => {
                bail!(unsupported_facade_size(size))
            }
            TupleEncoding::Normal if size > MAX_NORMAL_SIZE => {
                bail!(
                    "--size of a normal tuple must be at most {MAX_NORMAL_SIZE} bytes, got {size}"
                )
            }
            _ => {}
        }
        let (duration, warmup, repeat) = common.run.checked()?;
        if !(1..=MAX_PRODUCERS).contains(&common.producers) {
            bail!(
                "--producers must be between 1 and {MAX_PRODUCERS}, got {}",
                common.producers
            );
        }
        if common.producers > 1 && common.transport != Transport::ShmOsr {
            bail!(
                "--producers {} needs --transport shm-osr (the only transport with several senders per receiver)",
                common.producers
            );
        }
        let most = sluice_transport::udp_mq::MAX_QUEUES;
        if !(1..=most).contains(&common.queues) {
            bail!(
                "--queues must be between 1 and {most}, got {}",
                common.queues
            );
        }
        if !(1..=MAX_RECEIVERS).contains(&common.receivers) {
            bail!(
                "--receivers must be between 1 and {MAX_RECEIVERS}, got {}",
                common.receivers
            );
        }
        if common.receivers > 1 && !common.transport.fans_out() {
            bail!(
                "--receivers {} needs --transport threaded, shm-vega, tcp, tcp-batched or tcp-adaptive (the transports with a fan-out benchmark)",
                common.receivers
            );
        }
        let method = method.unwrap_or_else(|| LatencyMethod::default_for(common.transport));
        // Only a latency benchmark measures by a method; throughput (a fan-out too) has none.
        if matches!(bench, Bench::Latency { .. }) && method.reflects() {
            let name = method.name();
            if !common.transport.reflects() {
                bail!(
                    "--method {name} needs shm-vega, shm-osr, tcp, tcp-batched, tcp-adaptive or udp-mq (a transport with a reflector), not {}",
                    common.transport.name()
                );
            }
            if method == LatencyMethod::PingPong && common.transport == Transport::UdpMq {
                bail!("--method ping-pong needs a transport that loses nothing (one lost datagram would stop the ping-pong), not udp-mq: use --method half-round-trip");
            }
            if common.producers > 1 || common.receivers > 1 {
                bail!("--method {name} measures one sender and one reflector: no --producers or --receivers above 1");
            }
        }
        let ring = common.ring_bytes;
        if !(ring.is_power_of_two() && (MIN_RING_BYTES..=MAX_RING_BYTES).contains(&ring)) {
            bail!("--ring-bytes must be a power of two from {MIN_RING_BYTES} to {MAX_RING_BYTES}, got {ring}");
        }
        if ring != sluice_transport::shm_osr::DEFAULT_CAPACITY_BYTES
            && !matches!(common.transport, Transport::ShmOsr | Transport::ShmVega)
        {
            bail!("--ring-bytes needs --transport shm-osr or shm-vega (the other transports size their buffers themselves)");
        }
        Ok(Self {
            bench,
            transport: common.transport,
            encoding: common.encoding,
            size,
            duration,
            warmup,
            repeat,
            json: common.run.json,
            idle: common.idle,
            producers: common.producers,
            queues: common.queues,
            receivers: common.receivers,
            ring_bytes: ring,
            method,
        })
    }

    /// The settings of one measurement of the suite: one `repeat`ed run of `duration` after
    /// `warmup`, every other option at its default.
    pub(crate) fn measurement(
        bench: Bench,
        transport: Transport,
        encoding: TupleEncoding,
        size: usize,
        timing: (Duration, Duration, usize),
    ) -> Self {
        let (duration, warmup, repeat) = timing;
        Self {
            bench,
            transport,
            encoding,
            size,
            duration,
            warmup,
            repeat,
            json: true,
            idle: None,
            producers: 1,
            queues: sluice_transport::udp_mq::DEFAULT_QUEUES,
            receivers: 1,
            ring_bytes: sluice_transport::shm_osr::DEFAULT_CAPACITY_BYTES,
            method: LatencyMethod::default_for(transport),
        }
    }
}
