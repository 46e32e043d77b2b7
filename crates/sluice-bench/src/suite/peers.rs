//! The libraries a user would pick instead of Sluice, measured the way Sluice is: the same
//! sender ([`Generator`](crate::foundation::load::Generator), each tuple's encoding handed over as bytes,
//! as the raw-TCP baseline does) on core 0, the same receiver bookkeeping
//! ([`Recorder`]) on core 1 in a second process that re-executes this binary as
//! `sluice bench peer-lib`, announces where it listens on its first line and prints its
//! figures as JSON when the sender's end (an empty message) arrives.
//!
//! - `zmq-ipc`, `zmq-tcp`: ZeroMQ PUSH -> PULL over `ipc://` and `tcp://127.0.0.1` (the `zmq`
//!   crate, whose `zmq-sys` builds libzmq 4.3.4 from its vendored source with the C++
//!   compiler), feature `peer-zmq`;
//! - `iceoryx2`: iceoryx2 publish-subscribe of byte slices in shared memory, the publisher
//!   retrying until delivered (no loss, like Sluice's rings), feature `peer-iceoryx2`;
//! - `crossbeam-channel`: in-process, the baseline of every `threaded` measurement, recorded a
//!   second time as a peer (no extra run).
//!
//! A peer this binary was built without is recorded as skipped with the reason.

#[cfg(feature = "peer-iceoryx2")]
mod iceoryx;
#[cfg(feature = "peer-zmq")]
mod zeromq;

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::Value;
use sluice_sync::IdleStrategy;
use sluice_types::monotonic_ns;

use super::output;
use crate::foundation::args::LatencyMethod;
use crate::foundation::args::{Bench, Transport};
use crate::foundation::load::{Load, Pacer, Span};
use crate::foundation::payload::{dispatch, Payload, PayloadVisitor};
use crate::foundation::record::{Counting, Recorder, RunFigures, Timing};
use crate::foundation::report::BenchResult;
use crate::foundation::stats::LatencySummary;
use crate::transports::endpoints::{pin, PeerProcess, PATIENCE};
use crate::transports::measure::{median_round_trip, medians};
use crate::transports::network::{write_all, RawWriter};
use crate::transports::reflect::{raw_round_trips, InFlight, RawEcho};

/// A peer library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Peer {
    /// A bounded crossbeam channel between two threads.
    #[value(name = "crossbeam-channel")]
    Crossbeam,
    /// iceoryx2 publish-subscribe between two processes.
    Iceoryx2,
    /// ZeroMQ PUSH/PULL over `ipc://`.
    #[value(name = "zmq-ipc")]
    ZmqIpc,
    /// ZeroMQ PUSH/PULL over `tcp://` on loopback.
    #[value(name = "zmq-tcp")]
    ZmqTcp,
}

/// What the first line of a peer's receiving process starts with.
const READY: &str = "ready ";

impl Peer {
    /// The peers measured in processes of their own.
    pub(crate) const OUT_OF_PROCESS: [Peer; 3] = [Peer::Iceoryx2, Peer::ZmqIpc, Peer::ZmqTcp];

    /// The name in results.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Crossbeam => "crossbeam-channel",
            Self::Iceoryx2 => "iceoryx2",
            Self::ZmqIpc => "zmq-ipc",
            Self::ZmqTcp => "zmq-tcp",
        }
    }

    /// What exactly is measured.
    fn description(self) -> &'static str {
        match self {
            Self::Crossbeam => "crossbeam_channel::bounded between two pinned threads (the threaded transport's baseline)",
            Self::Iceoryx2 => "iceoryx2 publish-subscribe of byte slices between two pinned processes, RetryUntilDelivered, no safe overflow",
            Self::ZmqIpc => "ZeroMQ PUSH -> PULL over ipc:// between two pinned processes, one message per tuple",
            Self::ZmqTcp => "ZeroMQ PUSH -> PULL over tcp://127.0.0.1 between two pinned processes, one message per tuple",
        }
    }

    /// The Sluice transports this peer is the alternative to.
    pub(crate) fn compared_with(self) -> &'static [Transport] {
        match self {
            Self::Crossbeam => &[Transport::Threaded],
            Self::Iceoryx2 | Self::ZmqIpc => &[Transport::ShmVega, Transport::ShmOsr],
            Self::ZmqTcp => &[Transport::Tcp, Transport::TcpBatched],
        }
    }

    /// Why this binary cannot measure the peer, if it cannot.
    fn unavailable(self) -> Option<&'static str> {
        match self {
            Self::Crossbeam => None,
            Self::Iceoryx2 if !cfg!(feature = "peer-iceoryx2") => Some(
                "built without feature peer-iceoryx2 (cargo build --release -p sluice --features peers)",
            ),
            Self::ZmqIpc | Self::ZmqTcp if !cfg!(feature = "peer-zmq") => Some(
                "built without feature peer-zmq (cargo build --release -p sluice --features peers)",
            ),
            _ => None,
        }
    }

    /// Where a receiving process should listen, unique to this run.
    fn endpoint(self) -> String {
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        let id = format!("sluice-bench-{}-{run}", std::process::id());
        match self {
            Self::ZmqIpc => format!("ipc://{}", std::env::temp_dir().join(id).display()),
            Self::ZmqTcp => "tcp://127.0.0.1:*".to_string(),
            Self::Iceoryx2 | Self::Crossbeam => id,
        }
    }
}

/// A peer's record in `results.jsonl`.
#[derive(Debug, Clone, Serialize)]
struct PeerRecord {
    bench: &'static str,
    peer: &'static str,
    description: &'static str,
    /// The Sluice transports it is compared with.
    compared_with: Vec<Transport>,
    tuple_size: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_rate: Option<u64>,
    skipped: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tuples_per_sec: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gbit_per_sec: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_method: Option<LatencyMethod>,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_ns: Option<LatencySummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    round_trip_ns: Option<LatencySummary>,
    duration_s: f64,
    runs: Vec<RunFigures>,
}

/// The crossbeam peer's record from a `threaded` measurement's baseline.
pub(crate) fn from_baseline(result: &BenchResult) -> Option<Value> {
    let facade = result.encoding == crate::foundation::args::TupleEncoding::Facade;
    if result.transport != Transport::Threaded || result.receivers > 1 || !facade {
        return None;
    }
    let peer = Peer::Crossbeam;
    let baseline = &result.baseline;
    Some(output::to_value(&PeerRecord {
        bench: result.bench,
        peer: peer.name(),
        description: peer.description(),
        compared_with: peer.compared_with().to_vec(),
        tuple_size: result.tuple_size,
        target_rate: result.target_rate,
        skipped: baseline.skipped,
        reason: baseline.reason.clone(),
        tuples_per_sec: baseline.tuples_per_sec,
        gbit_per_sec: baseline.gbit_per_sec,
        latency_method: result.latency_method,
        latency_ns: baseline.latency_ns,
        round_trip_ns: baseline.round_trip_ns,
        duration_s: result.duration_s,
        runs: baseline.runs.clone(),
    }))
}

/// One measurement of an out-of-process peer.
#[derive(Debug, Clone)]
pub(crate) struct PeerJob {
    peer: Peer,
    bench: Bench,
    size: usize,
    duration: Duration,
    warmup: Duration,
    repeat: usize,
}

impl PeerJob {
    /// `peer` measured by `bench` with `size`-byte tuples, `(duration, warmup, repeat)`.
    pub(crate) fn new(
        peer: Peer,
        bench: Bench,
        size: usize,
        timing: (Duration, Duration, usize),
    ) -> Self {
        let (duration, warmup, repeat) = timing;
        Self {
            peer,
            bench,
            size,
            duration,
            warmup,
            repeat,
        }
    }

    /// How long it should take (nothing when it will be skipped).
    pub(crate) fn estimate(&self) -> Duration {
        if self.peer.unavailable().is_some() {
            return Duration::ZERO;
        }
        (self.duration + self.warmup + Duration::from_millis(100)) * self.repeat as u32
    }

    /// A short description for the progress bar.
    pub(crate) fn label(&self) -> String {
        match self.bench {
            Bench::Throughput => format!("{} {} B", self.peer.name(), self.size),
            Bench::Latency { rate } => {
                format!("{} {} B at {rate}/s", self.peer.name(), self.size)
            }
        }
    }

    /// Measures, or says why not.
    pub(crate) fn run(&self) -> Value {
        let outcome = match self.peer.unavailable() {
            Some(reason) => Err(reason.to_string()),
            None => dispatch(true, self.size, Visit(self))
                .and_then(|runs| runs)
                .map_err(|e| format!("{e:#}")),
        };
        let (bench, target_rate) = match self.bench {
            Bench::Throughput => ("throughput", None),
            Bench::Latency { rate } => ("latency", Some(rate)),
        };
        let mut record = PeerRecord {
            bench,
            peer: self.peer.name(),
            description: self.peer.description(),
            compared_with: self.peer.compared_with().to_vec(),
            tuple_size: self.size,
            target_rate,
            skipped: true,
            reason: None,
            tuples_per_sec: None,
            gbit_per_sec: None,
            latency_method: self.method(),
            latency_ns: None,
            round_trip_ns: None,
            duration_s: self.duration.as_secs_f64(),
            runs: Vec::new(),
        };
        match outcome {
            Ok(runs) => {
                let (tps, gbit, latency) = medians(&runs);
                record.skipped = false;
                record.tuples_per_sec = Some(tps);
                record.gbit_per_sec = Some(gbit);
                record.latency_ns = latency;
                record.round_trip_ns = median_round_trip(&runs);
                record.runs = runs;
            }
            Err(reason) => record.reason = Some(reason),
        }
        output::to_value(&record)
    }

    /// How a latency job measures: half the round trip over `tcp://` (as Sluice's tcp), one
    /// way from the shared clock otherwise; `None` for throughput.
    fn method(&self) -> Option<LatencyMethod> {
        match self.bench {
            Bench::Throughput => None,
            Bench::Latency { .. } if self.peer == Peer::ZmqTcp => {
                Some(LatencyMethod::HalfRoundTrip)
            }
            Bench::Latency { .. } => Some(LatencyMethod::OneWayClock),
        }
    }

    fn load(&self) -> Load {
        match self.bench {
            Bench::Throughput => Load::Flood,
            Bench::Latency { rate } => Load::Paced(Pacer::new(rate)),
        }
    }

    /// One run: a receiving process, and the peer's sender here on core 0.
    fn run_once<P: Payload>(&self) -> anyhow::Result<RunFigures> {
        let mut command = Command::new(std::env::current_exe().context("find the sluice binary")?);
        command
            .args(["bench", "peer-lib", "--peer", self.peer.name()])
            .args(["--size", &self.size.to_string()])
            .args(["--warmup-ns", &self.warmup.as_nanos().to_string()])
            .args(["--endpoint", &self.peer.endpoint()]);
        if matches!(self.bench, Bench::Latency { .. }) {
            command.arg("--latency");
        }
        let reflected = self.method() == Some(LatencyMethod::HalfRoundTrip);
        if reflected {
            command.arg("--reflect");
        }
        let mut receiver = PeerProcess::start(command)?;
        let line = receiver.first_line()?;
        let endpoint = line
            .trim()
            .strip_prefix(READY)
            .with_context(|| format!("the {} receiver is not ready: {line:?}", self.peer.name()))?
            .to_string();
        let span = Span {
            warmup: self.warmup,
            duration: self.duration,
        };
        let idle = IdleStrategy::Yield;
        let (peer, size, load) = (self.peer, self.size, self.load());
        if reflected {
            let mut echo = echo(peer, &endpoint, size)?;
            let trips = raw_round_trips(
                &mut *echo,
                P::template(size),
                load,
                span,
                idle,
                InFlight::AsDue,
            )?;
            receiver.finish()?;
            return trips.figures(size, false);
        }
        // The sender stays connected until the receiver has printed its figures: ZeroMQ over
        // ipc:// was seen to lose a whole connection's messages when the sender closed right
        // after its last send.
        let (received, until_received) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|scope| {
            let sender = scope.spawn(move || -> anyhow::Result<()> {
                let mut writer = writer(peer, &endpoint, size)?;
                write_all(&mut *writer, P::template(size), load, span, idle)?;
                let _ = until_received.recv_timeout(PATIENCE);
                Ok(())
            });
            let figures = receiver.figures();
            let _ = received.send(());
            let sent = sender
                .join()
                .unwrap_or_else(|_| anyhow::bail!("the sending thread panicked"));
            sent.and(figures)
        })
    }
}

/// Runs a peer job's repeats with the payload type of its size.
struct Visit<'a>(&'a PeerJob);

impl PayloadVisitor for Visit<'_> {
    type Output = anyhow::Result<Vec<RunFigures>>;

    fn visit<P: Payload>(self, _size: usize) -> Self::Output {
        (1..=self.0.repeat)
            .map(|i| {
                self.0
                    .run_once::<P>()
                    .with_context(|| format!("{} run {i}", self.0.peer.name()))
            })
            .collect()
    }
}

/// The sending side of `peer`, connected to `endpoint`, for tuples of `size` bytes.
fn writer(peer: Peer, endpoint: &str, size: usize) -> anyhow::Result<Box<dyn RawWriter>> {
    match peer {
        #[cfg(feature = "peer-zmq")]
        Peer::ZmqIpc | Peer::ZmqTcp => Ok(Box::new(zeromq::ZmqWriter::connect(endpoint)?)),
        #[cfg(feature = "peer-iceoryx2")]
        Peer::Iceoryx2 => Ok(Box::new(iceoryx::IceoryxWriter::open(endpoint, size)?)),
        _ => {
            let _ = (endpoint, size);
            anyhow::bail!(
                "{}",
                peer.unavailable().unwrap_or("not an out-of-process peer")
            )
        }
    }
}

/// The benchmark's side of round trips through `peer`'s reflector at `endpoint`.
fn echo(peer: Peer, endpoint: &str, size: usize) -> anyhow::Result<Box<dyn RawEcho>> {
    match peer {
        #[cfg(feature = "peer-zmq")]
        Peer::ZmqTcp => Ok(Box::new(zeromq::ZmqEcho::connect(endpoint, size)?)),
        _ => {
            let _ = (endpoint, size);
            anyhow::bail!("{} has no reflector", peer.name())
        }
    }
}

/// Options of the hidden `sluice bench peer-lib` (a peer library's receiving process).
#[derive(Debug, Clone, Args)]
pub struct PeerReceiverArgs {
    /// The peer library.
    #[arg(long, value_enum)]
    peer: Peer,
    /// Tuple size in bytes.
    #[arg(long)]
    size: usize,
    /// Record latency instead of counting.
    #[arg(long)]
    latency: bool,
    /// Nanoseconds of warm-up not measured.
    #[arg(long)]
    warmup_ns: u64,
    /// Where to listen: a ZeroMQ endpoint, or an iceoryx2 service name.
    #[arg(long)]
    endpoint: String,
    /// Send every tuple back instead of recording it (round trips, `zmq-tcp` only).
    #[arg(long)]
    reflect: bool,
}

/// A peer library's receiving process: announces where it listens, receives until the end,
/// prints its figures as JSON.
pub(crate) fn peer_receiver(args: &PeerReceiverArgs) -> anyhow::Result<()> {
    if args.reflect {
        return reflect(args);
    }
    let figures = dispatch(true, args.size, Receive(args))??;
    println!("{}", serde_json::to_string(&figures)?);
    Ok(())
}

/// A peer library's reflecting process, on core 1: announces where it listens and sends every
/// tuple back until the end.
fn reflect(args: &PeerReceiverArgs) -> anyhow::Result<()> {
    let _pinned = pin(1);
    let announce = |endpoint: &str| println!("{READY}{endpoint}");
    match args.peer {
        #[cfg(feature = "peer-zmq")]
        Peer::ZmqTcp => zeromq::reflect(&args.endpoint, args.size, IdleStrategy::Yield, announce),
        _ => {
            let _ = announce;
            anyhow::bail!("{} has no reflector", args.peer.name())
        }
    }
}

struct Receive<'a>(&'a PeerReceiverArgs);

impl PayloadVisitor for Receive<'_> {
    type Output = anyhow::Result<RunFigures>;

    fn visit<P: Payload>(self, size: usize) -> Self::Output {
        if self.0.latency {
            receive::<P, Timing>(self.0, size)
        } else {
            receive::<P, Counting>(self.0, size)
        }
    }
}

fn receive<P: Payload, R: Recorder>(
    args: &PeerReceiverArgs,
    size: usize,
) -> anyhow::Result<RunFigures> {
    let _pinned = pin(1);
    let mut recorder = R::new(monotonic_ns().saturating_add(args.warmup_ns));
    let idle = IdleStrategy::Yield;
    let mut record = |bytes: &[u8]| -> anyhow::Result<()> {
        recorder.record(&P::decode(bytes)?);
        Ok(())
    };
    let announce = |endpoint: &str| println!("{READY}{endpoint}");
    receive_bytes(args.peer, &args.endpoint, size, idle, announce, &mut record)?;
    RunFigures::from_report(&recorder.report(), size)
}

/// Runs `peer`'s receiving loop on `endpoint`, handing each tuple's bytes to `record`.
fn receive_bytes(
    peer: Peer,
    endpoint: &str,
    size: usize,
    idle: IdleStrategy,
    announce: impl Fn(&str),
    record: &mut impl FnMut(&[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    match peer {
        #[cfg(feature = "peer-zmq")]
        Peer::ZmqIpc | Peer::ZmqTcp => zeromq::receive(endpoint, size, idle, announce, record),
        #[cfg(feature = "peer-iceoryx2")]
        Peer::Iceoryx2 => iceoryx::receive(endpoint, size, idle, announce, record),
        _ => {
            let _ = (endpoint, size, idle, announce, record);
            anyhow::bail!(
                "{}",
                peer.unavailable().unwrap_or("not an out-of-process peer")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_peer_is_compared_with_a_transport_and_unique() {
        let all = [Peer::Crossbeam, Peer::Iceoryx2, Peer::ZmqIpc, Peer::ZmqTcp];
        for peer in all {
            assert!(!peer.compared_with().is_empty());
            assert!(!peer.description().is_empty());
        }
        assert_ne!(Peer::ZmqIpc.endpoint(), Peer::ZmqIpc.endpoint());
        assert!(Peer::ZmqIpc.endpoint().starts_with("ipc://"));
    }

    #[test]
    fn a_peer_built_without_is_skipped_with_the_reason() {
        let job = PeerJob::new(
            Peer::ZmqTcp,
            Bench::Throughput,
            64,
            (Duration::from_millis(50), Duration::ZERO, 1),
        );
        if cfg!(feature = "peer-zmq") {
            return;
        }
        let record = job.run();
        assert_eq!(record["skipped"], true);
        assert_eq!(record["peer"], "zmq-tcp");
        assert!(record["reason"]
            .as_str()
            .unwrap()
            .contains("built without feature peer-zmq"));
        assert_eq!(job.estimate(), Duration::ZERO);
    }
}
