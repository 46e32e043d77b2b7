//! Benchmarks across two processes: `--transport shm-vega`.
//!
//! The benchmark process is the sender, on core 0; it re-executes its own binary as
//! `sluice bench peer ...` for the receiver, on core 1, which opens the segment the sender
//! created, records arrivals like the in-process sink does and prints its figures as one line
//! of JSON when the end of the stream arrives. The same `sluice` binary must therefore be the
//! one running (it is, under `sluice bench`).
//!
//! The baseline for a transport between cores is the hardware itself, measured in the same
//! run: a cache-line transfer between cores 0 and 1 for latency, and one core's memcpy of
//! tuples of the same size for throughput.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use sluice_shm::SegmentName;
use sluice_sync::IdleStrategy;
use sluice_transport::shm_vega::{create_sender, open_receiver};
use sluice_transport::{SendError, TupleReceiver, TupleSender};
use sluice_types::{monotonic_ns, Message};

use crate::args::{Bench, Settings, TupleEncoding};
use crate::hardware::{memcpy_gbit, ping_pong};
use crate::load::{Generator, Load};
use crate::payload::{dispatch, Payload, PayloadVisitor};
use crate::record::{Counting, Recorder, RunFigures, Timing};
use crate::stats::{gbit_per_sec, LatencySummary};
use crate::Measured;

/// Slots in the benchmark's ring.
const SLOTS: usize = 4096;
/// How long the receiver waits for the sender's segment, and the sender for the receiver's
/// figures after the end of the run.
const PATIENCE: Duration = Duration::from_secs(20);

/// Options of the hidden `sluice bench peer` (the receiving process).
#[derive(Debug, Clone, Args)]
pub struct PeerArgs {
    /// The job name of the segment to open.
    #[arg(long)]
    pub job: String,
    /// Tuple size in bytes.
    #[arg(long)]
    pub size: usize,
    /// Tuple encoding.
    #[arg(long, value_enum)]
    pub encoding: TupleEncoding,
    /// Slot size of the ring.
    #[arg(long)]
    pub slot_bytes: usize,
    /// Record latency instead of counting.
    #[arg(long)]
    pub latency: bool,
    /// Nanoseconds of warm-up not measured.
    #[arg(long)]
    pub warmup_ns: u64,
    /// How the receiver waits when idle.
    #[arg(long, value_parser = ["busy-spin", "yield", "backoff"], default_value = "yield")]
    pub idle: String,
}

fn segment(job: &str) -> anyhow::Result<SegmentName> {
    Ok(SegmentName::new(job, "tuples")?)
}

fn pin(core: usize) {
    if crate::machine::cores() > core {
        core_affinity::set_for_current(core_affinity::CoreId { id: core });
    }
}

/// The receiving process: prints its figures as JSON.
pub(crate) fn peer(args: &PeerArgs) -> anyhow::Result<()> {
    let facade = args.encoding == TupleEncoding::Facade;
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
    pin(1);
    let name = segment(&args.job)?;
    let waited = Instant::now();
    let mut rx = loop {
        match open_receiver::<P>(&name, args.slot_bytes, SLOTS) {
            Ok(rx) => break rx,
            Err(_) if waited.elapsed() < PATIENCE => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => return Err(e).context("open the benchmark's ring"),
        }
    };
    let mut recorder = R::new(monotonic_ns().saturating_add(args.warmup_ns));
    let mut idle = IdleStrategy::parse(&args.idle)
        .unwrap_or(IdleStrategy::Yield)
        .waiter();
    let mut messages = Vec::with_capacity(256);
    'run: loop {
        messages.clear();
        let n = rx.poll(256, &mut messages).context("receive")?;
        for message in &messages {
            match message {
                Message::Data(tuple) => recorder.record(tuple),
                Message::EndOfStream => break 'run,
                Message::Punctuation => {}
            }
        }
        idle.after(n);
    }
    RunFigures::from_report(&recorder.report(), size)
}

/// Kills the receiving process if the run ends early.
struct PeerProcess(Child);

impl Drop for PeerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `repeat` cross-process runs, each followed by the hardware baseline.
pub(crate) fn repeat<P: Payload>(
    s: &Settings,
    template: P,
    load: Load,
) -> anyhow::Result<Measured> {
    let mut measured = Measured {
        sluice: Vec::with_capacity(s.repeat),
        baseline: Vec::with_capacity(s.repeat),
        pinned: crate::machine::cores() >= 2,
        baseline_pinned: crate::machine::cores() >= 2,
    };
    for i in 1..=s.repeat {
        measured.sluice.push(
            run_once(s, template.clone(), load.clone())
                .with_context(|| format!("shm-vega run {i}"))?,
        );
        measured.baseline.push(hardware_run(s));
    }
    Ok(measured)
}

fn hardware_run(s: &Settings) -> RunFigures {
    match s.bench {
        Bench::Latency { .. } => {
            let ns = ping_pong(200_000);
            RunFigures {
                tuples: 0,
                window_s: 0.0,
                tuples_per_sec: 0.0,
                gbit_per_sec: 0.0,
                latency_ns: Some(LatencySummary {
                    p50: ns,
                    p99: ns,
                    p999: ns,
                    mean: ns,
                    max: ns,
                    samples: 200_000,
                }),
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
            }
        }
    }
}

fn run_once<P: Payload>(s: &Settings, template: P, load: Load) -> anyhow::Result<RunFigures> {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let job = format!(
        "bench{}r{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    );
    let mut encoded = Vec::new();
    template.encode(&mut encoded)?;
    let slot_bytes = encoded.len().max(1);
    let mut tx = create_sender::<P>(&segment(&job)?, slot_bytes, SLOTS)?;
    let latency = matches!(s.bench, Bench::Latency { .. });
    let mut command = Command::new(std::env::current_exe().context("find the sluice binary")?);
    command
        .args(["bench", "peer", "--job", &job])
        .args(["--size", &s.size.to_string()])
        .args(["--slot-bytes", &slot_bytes.to_string()])
        .args(["--warmup-ns", &s.warmup.as_nanos().to_string()])
        .args(["--encoding", encoding_name(s.encoding)])
        .args(["--idle", idle_name(s.idle.unwrap_or(IdleStrategy::Yield))])
        .stdout(Stdio::piped());
    if latency {
        command.arg("--latency");
    }
    let mut peer = PeerProcess(command.spawn().context("start the receiving process")?);

    let idle = s.idle.unwrap_or(IdleStrategy::Yield);
    std::thread::scope(|scope| {
        scope
            .spawn(|| send(&mut tx, template, load, s.warmup + s.duration, idle))
            .join()
            .unwrap_or_else(|_| bail!("the sending thread panicked"))
    })?;
    let mut output = String::new();
    if let Some(stdout) = peer.0.stdout.as_mut() {
        stdout.read_to_string(&mut output)?;
    }
    let status = peer.0.wait()?;
    if !status.success() {
        bail!("the receiving process failed ({status})");
    }
    serde_json::from_str(output.trim()).context("read the receiver's figures")
}

fn idle_name(idle: IdleStrategy) -> &'static str {
    match idle {
        IdleStrategy::BusySpin => "busy-spin",
        IdleStrategy::Yield => "yield",
        IdleStrategy::Backoff => "backoff",
    }
}

fn encoding_name(encoding: TupleEncoding) -> &'static str {
    match encoding {
        TupleEncoding::Facade => "facade",
        TupleEncoding::Normal => "normal",
    }
}

/// Sends for `length`, then the end of the stream.
fn send<P: Payload, S: TupleSender<P>>(
    tx: &mut S,
    template: P,
    load: Load,
    length: Duration,
    idle: IdleStrategy,
) -> anyhow::Result<()> {
    pin(0);
    let started = Instant::now();
    let mut generator = Generator::new(template, load);
    let mut waiter = idle.waiter();
    let offer = |tx: &mut S, mut message: Message<P>| -> anyhow::Result<()> {
        let mut wait = idle.waiter();
        loop {
            match tx.offer(message) {
                Ok(()) => return Ok(()),
                Err(refused) if refused.error == SendError::Full => {
                    if started.elapsed() > length + PATIENCE {
                        bail!("the receiver stopped taking tuples");
                    }
                    message = refused.message;
                    wait.wait();
                }
                Err(refused) => bail!("send: {}", refused.error),
            }
        }
    };
    while started.elapsed() < length {
        let sent = generator.fill(|tuple| offer(tx, Message::Data(tuple)))?;
        tx.flush();
        waiter.after(sent);
    }
    offer(tx, Message::EndOfStream)?;
    tx.flush();
    Ok(())
}
