//! Benchmarks across two processes: `--transport shm-vega`, `tcp`, `tcp-batched`,
//! `tcp-adaptive`, `udp-mq` and the baseline of `mpi` (whose own runs are in module `mpi`).
//!
//! The benchmark process is the sender, on core 0; it re-executes its own binary as
//! `sluice bench peer ...` for the receiver, on core 1, which records arrivals like the
//! in-process sink does and prints its figures as one line of JSON when the end of the stream
//! arrives. The same `sluice` binary must therefore be the one running (it is, under
//! `sluice bench`). For shm-vega the sender creates the segment and the receiver opens it;
//! for tcp and udp-mq the receiver binds a port on loopback and announces it on its first
//! line of output (modules `network` and `udp`), and the sender connects with the job's
//! secret, which it hands over in the environment.
//!
//! The baseline for shm-vega is the hardware itself, measured in the same run: a cache-line
//! transfer between cores 0 and 1 for latency, and one core's memcpy of tuples of the same
//! size for throughput. For tcp it is raw TCP on loopback between the same two cores
//! (module `network`), for udp-mq raw UDP, one system call per datagram (module `udp`).
//!
//! `shm-osr` (module `shm_osr`) turns this around, many senders to one receiver, and shares
//! the sending and recording loops here and the hardware baseline.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
use sluice_shm::SegmentName;
use sluice_sync::IdleStrategy;
use sluice_transport::shm_vega::{create_sender, open_receiver};
use sluice_transport::tcp::JobSecret;
use sluice_transport::{SendError, TupleReceiver, TupleSender};
use sluice_types::{monotonic_ns, Message};

use crate::foundation::args::{Bench, Settings, Transport, TupleEncoding};
use crate::foundation::load::{Generator, Load, Span};
use crate::foundation::payload::{dispatch, Payload, PayloadVisitor};
use crate::foundation::record::{Counting, Recorder, RunFigures, Timing};
use crate::foundation::stats::{gbit_per_sec, LatencySummary};
use crate::transports::hardware::{
    handoff, memcpy_gbit, memcpy_through_gbit, ping_pong, stamped_one_way,
};
use crate::transports::measure::Measured;
use crate::transports::network;
use crate::transports::udp;

/// The most slots in the benchmark's Vega ring.
const MAX_SLOTS: usize = 4096;
/// The fewest slots in the benchmark's Vega ring, whatever the tuple size.
const MIN_SLOTS: usize = 16;
/// Slots of the benchmark's Vega ring for a slot of `slot_bytes` bytes: `ring_bytes` worth
/// (`--ring-bytes`, by default the `shm-osr` transport's ring, so the two rings are compared
/// at the same footprint), from [`MIN_SLOTS`] to [`MAX_SLOTS`]. Sender and receiver compute
/// it alike. With a fixed slot count large tuples made a ring far past the caches (4096
/// slots of 16 KiB are 64 MiB), and every tuple went through memory.
pub(crate) fn vega_slots(slot_bytes: usize, ring_bytes: usize) -> usize {
    (ring_bytes / slot_bytes.max(1)).clamp(MIN_SLOTS, MAX_SLOTS)
}
/// How long the receiver waits for the sender's segment, and the sender for the receiver's
/// figures after the end of the run.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);
/// The environment variable carrying the job's secret to a tcp receiving process.
pub(crate) const SECRET_ENV: &str = "SLUICE_BENCH_SECRET";

/// Options of the hidden `sluice bench peer` (the receiving process).
#[derive(Debug, Clone, Args)]
pub struct PeerArgs {
    /// The transport to receive from.
    #[arg(long, value_enum)]
    pub transport: Transport,
    /// Receive the transport's baseline instead (raw TCP, for the tcp transports).
    #[arg(long)]
    pub baseline: bool,
    /// The job name of the shm-vega segment to open.
    #[arg(long, default_value = "")]
    pub job: String,
    /// Tuple size in bytes.
    #[arg(long)]
    pub size: usize,
    /// Tuple encoding.
    #[arg(long, value_enum)]
    pub encoding: TupleEncoding,
    /// The encoded tuple size: the ring's slot, the tcp edge's largest tuple.
    #[arg(long)]
    pub slot_bytes: usize,
    /// Record latency instead of counting.
    #[arg(long)]
    pub latency: bool,
    /// Nanoseconds of warm-up not measured.
    #[arg(long)]
    pub warmup_ns: u64,
    /// How the receiver waits when idle.
    #[arg(long, value_parser = IdleStrategy::parse, default_value = "yield")]
    pub idle: IdleStrategy,
    /// Sockets of a `udp-mq` receiver.
    #[arg(long, default_value_t = sluice_transport::udp_mq::DEFAULT_QUEUES)]
    pub queues: usize,
    /// Reflect: send every tuple back over the same kind of transport instead of recording it
    /// (module `reflect`).
    #[arg(long)]
    pub reflect: bool,
    /// Where a reflecting tcp or udp-mq process sends back to.
    #[arg(long)]
    pub back: Option<SocketAddr>,
    /// Bytes of the `shm-osr` or `shm-vega` rings (the sender's and a reflector's).
    #[arg(long, default_value_t = sluice_transport::shm_osr::DEFAULT_CAPACITY_BYTES)]
    pub ring_bytes: usize,
}

/// The segment of the benchmark run `job`.
pub(crate) fn segment(job: &str) -> anyhow::Result<SegmentName> {
    Ok(SegmentName::new(job, "tuples")?)
}

/// The calling thread pinned to one core; dropping it gives the thread back the cores it had.
///
/// A benchmark loop often runs on the caller's own thread, and a process spawned later
/// inherits that thread's cores: without the restore, every peer process of the runs after the
/// first would start on core 0 alone, fail to move to core 1 (it would see one core) and share
/// core 0 with the benchmark.
#[must_use = "the thread is unpinned when the guard drops"]
pub(crate) struct Pinned {
    before: Option<CpuSet>,
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(before) = &self.before {
            // Failing to widen again leaves the thread on its core, which is what it had.
            let _ = sched_setaffinity(None, before);
        }
    }
}

/// Pins the calling thread to `core` while the returned guard lives, when the thread may run
/// there and on another core too (on one core there is nothing to choose).
pub(crate) fn pin(core: usize) -> Pinned {
    let before = sched_getaffinity(None).ok();
    let pinned = before.as_ref().is_some_and(|cores| {
        cores.count() >= 2 && cores.is_set(core) && {
            let mut only = CpuSet::new();
            only.set(core);
            sched_setaffinity(None, &only).is_ok()
        }
    });
    Pinned {
        before: before.filter(|_| pinned),
    }
}

/// The receiving process: prints its figures as JSON.
pub(crate) fn peer(args: &PeerArgs) -> anyhow::Result<()> {
    let facade = args.encoding == TupleEncoding::Facade;
    if args.reflect {
        return dispatch(
            facade,
            args.size,
            crate::transports::reflect::Reflector(args),
        )?;
    }
    let figures = dispatch(facade, args.size, Receive(args))??;
    println!("{}", serde_json::to_string(&figures)?);
    Ok(())
}

struct Receive<'a>(&'a PeerArgs);

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

fn receive<P: Payload, R: Recorder>(args: &PeerArgs, size: usize) -> anyhow::Result<RunFigures> {
    let _pinned = pin(1);
    let idle = args.idle;
    let mut recorder = R::new(monotonic_ns().saturating_add(args.warmup_ns));
    let mut loss = None;
    if args.transport == Transport::UdpMq {
        if args.baseline {
            loss = Some(udp::raw_receive::<P, R>(
                &mut recorder,
                args.slot_bytes,
                idle,
            )?);
        } else {
            let mut rx = udp::bind::<P>(args.queues, args.slot_bytes)?;
            record(&mut rx, &mut recorder, idle, 1, None)?;
            loss = Some(udp::loss(&rx));
        }
    } else if args.baseline && args.transport == Transport::Mpi {
        // The mpi benchmark's baseline is raw TCP; its own runs are received by a rank.
        network::raw_receive::<P, R>(&mut recorder, args.slot_bytes, idle)?;
    } else if let Some(profile) = args.transport.tcp_profile() {
        if args.baseline {
            network::raw_receive::<P, R>(&mut recorder, args.slot_bytes, idle)?;
        } else {
            let mut rx = network::bind::<P>(profile, args.slot_bytes)?;
            record(&mut rx, &mut recorder, idle, 1, None)?;
        }
    } else {
        let name = segment(&args.job)?;
        let waited = Instant::now();
        let mut rx = loop {
            match open_receiver::<P>(
                &name,
                args.slot_bytes,
                vega_slots(args.slot_bytes, args.ring_bytes),
            ) {
                Ok(rx) => break rx,
                Err(_) if waited.elapsed() < PATIENCE => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => return Err(e).context("open the benchmark's ring"),
            }
        };
        record(&mut rx, &mut recorder, idle, 1, None)?;
    }
    Ok(RunFigures {
        loss,
        ..RunFigures::from_report(&recorder.report(), size)?
    })
}

/// Receives until `ends` ends of stream have arrived, recording every tuple; gives up at
/// `deadline` (checked when idle).
pub(crate) fn record<P: Payload, R: Recorder>(
    rx: &mut impl TupleReceiver<P>,
    recorder: &mut R,
    idle: IdleStrategy,
    ends: usize,
    deadline: Option<Instant>,
) -> anyhow::Result<()> {
    let mut idle = idle.waiter();
    let mut messages = Vec::with_capacity(256);
    let mut ended = 0;
    while ended < ends {
        messages.clear();
        let n = rx.poll(256, &mut messages).context("receive")?;
        for message in &messages {
            match message {
                Message::Data(tuple) => recorder.record(tuple),
                Message::EndOfStream => ended += 1,
                Message::Punctuation => {}
            }
        }
        if n == 0 && deadline.is_some_and(|d| Instant::now() > d) {
            bail!("the senders stopped before ending their streams ({ended} of {ends} ended)");
        }
        idle.after_or_park(n, |timeout| rx.park(timeout));
    }
    Ok(())
}

/// The receiving process; killed if the run ends early.
pub(crate) struct PeerProcess {
    child: Child,
    stdout: BufReader<ChildStdout>,
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl PeerProcess {
    /// Starts `sluice bench peer` for the receiving side of `s`; `secret` goes in its
    /// environment.
    pub(crate) fn spawn(
        s: &Settings,
        baseline: bool,
        job: &str,
        slot_bytes: usize,
        secret: Option<&JobSecret>,
    ) -> anyhow::Result<Self> {
        Self::start(Self::command(s, baseline, job, slot_bytes, secret)?)
    }

    /// The command line of `sluice bench peer` for the receiving side of `s`; `secret` goes
    /// in its environment.
    pub(crate) fn command(
        s: &Settings,
        baseline: bool,
        job: &str,
        slot_bytes: usize,
        secret: Option<&JobSecret>,
    ) -> anyhow::Result<Command> {
        let mut command = Command::new(std::env::current_exe().context("find the sluice binary")?);
        command
            .args(["bench", "peer", "--transport", s.transport.name()])
            .args(["--job", job])
            .args(["--size", &s.size.to_string()])
            .args(["--slot-bytes", &slot_bytes.to_string()])
            .args(["--warmup-ns", &s.warmup.as_nanos().to_string()])
            .args(["--encoding", encoding_name(s.encoding)])
            .args(["--idle", s.process_idle().name()])
            .args(["--queues", &s.queues.to_string()])
            .args(["--ring-bytes", &s.ring_bytes.to_string()]);
        if matches!(s.bench, Bench::Latency { .. }) {
            command.arg("--latency");
        }
        if baseline {
            command.arg("--baseline");
        }
        if let Some(secret) = secret {
            command.env(SECRET_ENV, secret.to_hex());
        }
        Ok(command)
    }

    /// Starts `command` (a re-execution of this binary) with its output piped to us.
    pub(crate) fn start(mut command: Command) -> anyhow::Result<Self> {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .context("start the receiving process")?;
        let stdout = child
            .stdout
            .take()
            .context("the receiving process has no output")?;
        Ok(Self {
            child,
            stdout: BufReader::new(stdout),
        })
    }

    /// The first line the receiving process printed.
    pub(crate) fn first_line(&mut self) -> anyhow::Result<String> {
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        Ok(line)
    }

    /// The address a tcp receiving process announced on its first line.
    pub(crate) fn listening(&mut self) -> anyhow::Result<SocketAddr> {
        let line = self.first_line()?;
        network::announced(&line)
            .with_context(|| format!("the receiving process announced no address: {line:?}"))
    }

    /// Waits for the process to exit, successfully.
    pub(crate) fn finish(mut self) -> anyhow::Result<()> {
        let mut output = String::new();
        self.stdout.read_to_string(&mut output)?;
        let status = self.child.wait()?;
        if !status.success() {
            bail!("the reflecting process failed ({status})");
        }
        Ok(())
    }

    /// Waits for the receiving process and reads its figures.
    pub(crate) fn figures(mut self) -> anyhow::Result<RunFigures> {
        let mut output = String::new();
        self.stdout.read_to_string(&mut output)?;
        let status = self.child.wait()?;
        if !status.success() {
            bail!("the receiving process failed ({status})");
        }
        serde_json::from_str(output.trim()).context("read the receiver's figures")
    }
}

/// Runs `repeat` cross-process runs, each followed by its baseline.
pub(crate) fn repeat<P: Payload>(
    s: &Settings,
    template: P,
    load: Load,
) -> anyhow::Result<Measured> {
    let mut measured = Measured::new(s.repeat, crate::foundation::machine::cores() >= 2);
    let reflected = match s.bench {
        Bench::Latency { rate } if s.method.reflects() => Some(rate),
        _ => None,
    };
    for i in 1..=s.repeat {
        let (run, baseline) = match s.transport.tcp_profile() {
            _ if let Some(rate) = reflected => (
                crate::transports::reflect::run(s, template.clone(), rate),
                crate::transports::reflect::run_baseline(s, template.clone(), rate),
            ),
            None if s.transport == Transport::UdpMq => (
                udp::run_udp_mq(s, template.clone(), load.clone()),
                udp::run_raw(s, template.clone(), load.clone()),
            ),
            Some(profile) => (
                network::run_tcp(s, template.clone(), load.clone(), profile),
                network::run_raw(s, template.clone(), load.clone()),
            ),
            None if s.transport == Transport::Mpi => (
                crate::transports::mpi::run(s),
                network::run_raw(s, template.clone(), load.clone()),
            ),
            None if s.transport == Transport::ShmOsr => (
                crate::transports::shm_osr::run_once::<P>(s),
                Ok(hardware_run(s)),
            ),
            None => (
                run_vega(s, template.clone(), load.clone()),
                Ok(hardware_run(s)),
            ),
        };
        let name = s.transport.name();
        measured
            .sluice
            .push(run.with_context(|| format!("{name} run {i}"))?);
        measured.baseline_run(i, baseline);
    }
    Ok(measured)
}

/// Round trips of the short ping-pong that records where the host put the two cores during a
/// throughput run's memcpy baseline: a few milliseconds.
const PLACEMENT_TRIPS: u64 = 20_000;

/// The most copies (a power of two) of the memcpy through a region the ring's size: with tiny
/// tuples, a gibibyte of copies would take a second per baseline run.
const RING_MEMCPY_COPIES_LOG2: u32 = 24;

/// Messages of the clock-stamped one-line baseline of a latency run: a tenth of a second.
const STAMPED_MESSAGES: u64 = 20_000;

/// The hardware baseline of a shared-memory run: the cache-line transfer (its one-way time,
/// and twice that as the round trip when latency is measured through a reflector) or the
/// memcpy rate.
pub(crate) fn hardware_run(s: &Settings) -> RunFigures {
    let two_cores = crate::foundation::machine::cores() >= 2;
    match s.bench {
        Bench::Latency { .. } => {
            const TRIPS: u64 = 200_000;
            let ns = ping_pong(TRIPS);
            let reflected = s.method.reflects();
            RunFigures {
                tuples: 0,
                window_s: 0.0,
                tuples_per_sec: 0.0,
                gbit_per_sec: 0.0,
                latency_ns: Some(LatencySummary::flat(ns, TRIPS)),
                round_trip_ns: reflected.then(|| LatencySummary::flat(2.0 * ns, TRIPS)),
                loss: None,
                cacheline_ns: None,
                handoff_ns: two_cores.then(|| handoff(TRIPS)),
                ring_memcpy_gbit: None,
                stamped_ns: (!reflected && two_cores).then(|| stamped_one_way(STAMPED_MESSAGES)),
            }
        }
        Bench::Throughput => {
            let gbit = memcpy_gbit(s.size, 1 << 30);
            let rate = gbit * 1e9 / 8.0 / s.size as f64;
            RunFigures {
                tuples: 0,
                window_s: 0.0,
                tuples_per_sec: rate,
                gbit_per_sec: gbit_per_sec(rate, s.size),
                latency_ns: None,
                round_trip_ns: None,
                loss: None,
                cacheline_ns: two_cores.then(|| ping_pong(PLACEMENT_TRIPS)),
                handoff_ns: None,
                ring_memcpy_gbit: Some(memcpy_through_gbit(
                    s.size,
                    s.ring_bytes,
                    (1 << 30).min(s.size << RING_MEMCPY_COPIES_LOG2),
                )),
                stamped_ns: None,
            }
        }
    }
}

/// The encoded size of the benchmark's tuples.
pub(crate) fn encoded_size<P: Payload>(template: &P) -> anyhow::Result<usize> {
    let mut encoded = Vec::new();
    template.encode(&mut encoded)?;
    Ok(encoded.len().max(1))
}

fn run_vega<P: Payload>(s: &Settings, template: P, load: Load) -> anyhow::Result<RunFigures> {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let slot_bytes = encoded_size(&template)?;
    let mut txs = Vec::with_capacity(s.receivers);
    let mut peers = Vec::with_capacity(s.receivers);
    for _ in 0..s.receivers {
        let job = format!(
            "bench{}r{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        );
        txs.push(create_sender::<P>(
            &segment(&job)?,
            slot_bytes,
            vega_slots(slot_bytes, s.ring_bytes),
        )?);
        peers.push(PeerProcess::spawn(s, false, &job, slot_bytes, None)?);
    }
    send_pinned(s, |idle| send(&mut txs, template, load, s.span(), idle, 0))?;
    all_figures(peers, s.size)
}

/// The figures of every receiving process, summed over them.
pub(crate) fn all_figures(peers: Vec<PeerProcess>, size: usize) -> anyhow::Result<RunFigures> {
    let figures = peers
        .into_iter()
        .map(PeerProcess::figures)
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(RunFigures::sum(&figures, size))
}

/// Runs `send` on a thread of its own (so the caller's affinity is untouched) with the
/// benchmark's idle strategy ([`Settings::process_idle`]).
pub(crate) fn send_pinned(
    s: &Settings,
    send: impl FnOnce(IdleStrategy) -> anyhow::Result<()> + Send,
) -> anyhow::Result<()> {
    let idle = s.process_idle();
    std::thread::scope(|scope| {
        scope
            .spawn(|| send(idle))
            .join()
            .unwrap_or_else(|_| bail!("the sending thread panicked"))
    })
}

/// Offers to every sender of `txs` in turn with `offer`, waiting on one while it is full
/// until `stalled`. `offer` sends a copy, so a refusal leaves nothing to hand back.
#[inline(always)]
fn offer_each<P, S: TupleSender<P>>(
    txs: &mut [S],
    idle: IdleStrategy,
    stalled: impl Fn() -> bool,
    offer: impl Fn(&mut S) -> Result<(), SendError>,
) -> anyhow::Result<()> {
    for tx in txs {
        if let Err(error) = offer(tx) {
            retry_until_taken(tx, error, idle, &stalled, &offer)?;
        }
    }
    Ok(())
}

/// The slow path of [`offer_each`]: waits while `tx` is full and offers again.
#[cold]
#[inline(never)]
fn retry_until_taken<P, S: TupleSender<P>>(
    tx: &mut S,
    mut error: SendError,
    idle: IdleStrategy,
    stalled: &impl Fn() -> bool,
    offer: &impl Fn(&mut S) -> Result<(), SendError>,
) -> anyhow::Result<()> {
    let mut wait = idle.waiter();
    loop {
        match error {
            SendError::Full if stalled() => bail!("the receiver stopped taking tuples"),
            SendError::Full => wait.wait_or_park(|timeout| tx.park(timeout)),
            error => bail!("send: {error}"),
        }
        match offer(tx) {
            Ok(()) => return Ok(()),
            Err(again) => error = again,
        }
    }
}

/// The `--encoding` value naming `encoding`.
pub(crate) fn encoding_name(encoding: TupleEncoding) -> &'static str {
    match encoding {
        TupleEncoding::Facade => "facade",
        TupleEncoding::Normal => "normal",
    }
}

/// Sends for `span` on `core` to every sender of `txs` (each tuple to each: a broadcast,
/// held back by the slowest), then the end of the stream, and flushes until the transports
/// hold nothing.
pub(crate) fn send<P: Payload, S: TupleSender<P>>(
    txs: &mut [S],
    template: P,
    load: Load,
    span: Span,
    idle: IdleStrategy,
    core: usize,
) -> anyhow::Result<()> {
    let _pinned = pin(core);
    let started = Instant::now();
    let mut generator = Generator::new(template, load, span);
    let mut waiter = idle.waiter();
    let stalled = || started.elapsed() > span.longest() + PATIENCE;
    while !generator.done() {
        let sent =
            generator.fill(|tuple| offer_each(txs, idle, stalled, |tx| tx.offer_copy(tuple)))?;
        txs.iter_mut().for_each(|tx| tx.flush());
        waiter.after(sent);
    }
    offer_each(txs, idle, stalled, |tx| {
        tx.offer(Message::EndOfStream)
            .map_err(|refused| refused.error)
    })?;
    let mut wait = idle.waiter();
    for tx in txs.iter_mut() {
        tx.flush();
        while tx.pending() {
            if stalled() {
                bail!("the receiver stopped taking tuples");
            }
            wait.wait();
            tx.flush();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_gets_its_cores_back() {
        std::thread::spawn(|| {
            let cores = || sched_getaffinity(None).expect("read the thread's cores");
            let before = cores();
            let first = (0..CpuSet::MAX_CPU).find(|&c| before.is_set(c)).unwrap();
            {
                let _pinned = pin(first);
                let during = cores();
                if before.count() >= 2 {
                    assert_eq!(during.count(), 1);
                    assert!(during.is_set(first));
                } else {
                    assert_eq!(during, before, "one core: nothing to pin");
                }
            }
            assert_eq!(cores(), before);
        })
        .join()
        .unwrap();
    }
}
