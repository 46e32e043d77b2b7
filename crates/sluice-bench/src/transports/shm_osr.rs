//! Benchmarks of `--transport shm-osr`: `--producers` sending processes into one receiver.
//!
//! The benchmark process is the receiver, as in a job (the receiver creates the segment): it
//! creates the OSR ring, re-executes its own binary as `sluice bench osr-sender ...` once per
//! producer, and records arrivals on core 1 until every producer's end of stream has arrived.
//! The producers share the other cores (all on core 0 on a two-core machine), each flooding, or
//! sending its share of `--rate`. Like `shm-vega`, it is measured against the hardware.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use sluice_sync::IdleStrategy;
use sluice_transport::shm_osr::{create_receiver, open_sender, DEFAULT_BATCH_BYTES};
use sluice_types::monotonic_ns;

use crate::foundation::args::{Bench, Settings, TupleEncoding};
use crate::foundation::load::{Load, Pacer, Span};
use crate::foundation::payload::{dispatch, Payload, PayloadVisitor};
use crate::foundation::record::{Counting, Recorder, RunFigures, Timing};
use crate::transports::endpoints::{encoding_name, pin, record, segment, send, PATIENCE};

/// Options of the hidden `sluice bench osr-sender` (one sending process).
#[derive(Debug, Clone, Args)]
pub struct OsrSenderArgs {
    /// The job name of the segment to open.
    #[arg(long)]
    pub job: String,
    /// Tuple size in bytes.
    #[arg(long)]
    pub size: usize,
    /// Tuple encoding.
    #[arg(long, value_enum)]
    pub encoding: TupleEncoding,
    /// Nanoseconds of warm-up to send for.
    #[arg(long)]
    pub warmup_ns: u64,
    /// Nanoseconds to send for after the warm-up (longer if too few tuples went out).
    #[arg(long)]
    pub duration_ns: u64,
    /// Tuples per second to send, stamped (latency); flood when absent.
    #[arg(long)]
    pub rate: Option<u64>,
    /// Bytes of the OSR ring the receiver created.
    #[arg(long)]
    pub ring_bytes: usize,
    /// The core to pin to.
    #[arg(long)]
    pub core: usize,
    /// How the sender waits when the ring is full.
    #[arg(long, value_parser = IdleStrategy::parse, default_value = "yield")]
    pub idle: IdleStrategy,
}

/// A sending process: opens the ring and sends until its time is up, then ends its stream.
pub(crate) fn sender(args: &OsrSenderArgs) -> anyhow::Result<()> {
    let facade = args.encoding == TupleEncoding::Facade;
    dispatch(facade, args.size, Send(args))?
}

struct Send<'a>(&'a OsrSenderArgs);

impl PayloadVisitor for Send<'_> {
    type Output = anyhow::Result<()>;

    fn visit<P: Payload>(self, size: usize) -> Self::Output {
        let args = self.0;
        let name = segment(&args.job)?;
        let waited = Instant::now();
        let mut tx = loop {
            match open_sender::<P>(&name, args.ring_bytes, DEFAULT_BATCH_BYTES) {
                Ok(tx) => break tx,
                Err(_) if waited.elapsed() < PATIENCE => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => return Err(e).context("open the benchmark's ring"),
            }
        };
        let load = args
            .rate
            .map_or(Load::Flood, |rate| Load::Paced(Pacer::new(rate)));
        let idle = args.idle;
        let span = Span {
            warmup: Duration::from_nanos(args.warmup_ns),
            duration: Duration::from_nanos(args.duration_ns),
        };
        send(
            std::slice::from_mut(&mut tx),
            P::template(size),
            load,
            span,
            idle,
            args.core,
        )
    }
}

/// The core of producer `i`: every core but the receiver's (1), in turn.
fn producer_core(i: usize, cores: usize) -> usize {
    let others: Vec<usize> = (0..cores.max(2)).filter(|&c| c != 1).collect();
    others[i % others.len()]
}

/// A sending process, killed if the run ends early.
struct SenderProcess(Child);

impl Drop for SenderProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One run: the receiver here, `s.producers` sending processes.
pub(crate) fn run_once<P: Payload>(s: &Settings) -> anyhow::Result<RunFigures> {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let job = format!(
        "bench{}r{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    );
    let mut rx = create_receiver::<P>(&segment(&job)?, s.ring_bytes, s.producers)?;
    let idle = s.idle.unwrap_or(IdleStrategy::Yield);
    let exe = std::env::current_exe().context("find the sluice binary")?;
    let mut producers = Vec::with_capacity(s.producers);
    for i in 0..s.producers {
        let mut command = Command::new(&exe);
        command
            .args(["bench", "osr-sender", "--job", &job])
            .args(["--size", &s.size.to_string()])
            .args(["--encoding", encoding_name(s.encoding)])
            .args(["--warmup-ns", &s.warmup.as_nanos().to_string()])
            .args(["--duration-ns", &s.duration.as_nanos().to_string()])
            .args(["--ring-bytes", &s.ring_bytes.to_string()])
            .args([
                "--core",
                &producer_core(i, crate::foundation::machine::cores()).to_string(),
            ])
            .args(["--idle", idle.name()])
            .stdout(Stdio::null());
        if let Bench::Latency { rate } = s.bench {
            let share = (rate / s.producers as u64).max(1);
            command.args(["--rate", &share.to_string()]);
        }
        producers.push(SenderProcess(
            command.spawn().context("start a sending process")?,
        ));
    }
    let figures = std::thread::scope(|scope| {
        scope
            .spawn(|| match s.bench {
                Bench::Latency { .. } => receive::<P, Timing>(s, &mut rx, idle),
                Bench::Throughput => receive::<P, Counting>(s, &mut rx, idle),
            })
            .join()
            .unwrap_or_else(|_| bail!("the receiving thread panicked"))
    })?;
    for (i, producer) in producers.iter_mut().enumerate() {
        let status = producer.0.wait()?;
        if !status.success() {
            bail!("sending process {i} failed ({status})");
        }
    }
    Ok(figures)
}

/// Receives on core 1 until every producer ended its stream.
fn receive<P: Payload, R: Recorder>(
    s: &Settings,
    rx: &mut impl sluice_transport::TupleReceiver<P>,
    idle: IdleStrategy,
) -> anyhow::Result<RunFigures> {
    let _pinned = pin(1);
    let warmup_ns = u64::try_from(s.warmup.as_nanos()).unwrap_or(u64::MAX);
    let mut recorder = R::new(monotonic_ns().saturating_add(warmup_ns));
    let deadline = Instant::now() + s.span().longest() + PATIENCE;
    record(rx, &mut recorder, idle, s.producers, Some(deadline))?;
    RunFigures::from_report(&recorder.report(), s.size)
}
